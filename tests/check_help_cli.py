"""Every prefixcl command's --help against its option table: the help exits 0
(so the table passed cli_parse's check that each entry has its help text,
each printed on an option line), lists each option once, and every option
line names an option the parser takes. Each option is fed back as
`OPT OPT OPT`: a known option is then always refused for another reason
(given twice, a bad value, a value missing), so no command runs, and the
refusal must not be "unknown option".
usage: check_help_cli.py PREFIXCL"""
import re
import subprocess
import sys

exe = sys.argv[1]

# A command whose options follow a subcommand: its help is the subcommand's.
SUBCOMMAND = {"experiment": "gain"}
# A command with a second way chosen by an argument: its help and options.
EXTRA_WAYS = [["attn-map", "--model", "model-dir"]]


def run(args):
    p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def commands():
    code, out, _ = run(["--help"])
    if code != 0:
        sys.exit("prefixcl --help: exit %d" % code)
    names = re.findall(r"^  ([a-z][a-z-]*) ", out.split("commands:", 1)[1], re.M)
    if len(names) < 10:
        sys.exit("prefixcl --help lists only %r" % names)
    return names


def option_lines(help_text):
    """The options of the help's option lines: "  --name [PLACEHOLDER]  text"."""
    return re.findall(r"^  (--[a-z][a-z0-9-]*)(?: [^ ]+)?(?:  |$)", help_text, re.M)


failures = []
ways = [[c] + ([SUBCOMMAND[c]] if c in SUBCOMMAND else []) for c in commands()] + EXTRA_WAYS
for cmd, sub in SUBCOMMAND.items():
    if run([cmd, "--help"]) != run([cmd, sub, "--help"]):
        failures.append("%s --help is not %s %s --help" % (cmd, cmd, sub))
for way in ways:
    name = " ".join(way)
    code, out, err = run(way + ["--help"])
    if code != 0 or not out.startswith("usage: prefixcl " + way[0]):
        failures.append("%s --help: exit %d, stdout %r, stderr %r" % (name, code, out[:200], err))
        continue
    if run(way + ["-h"])[1] != out:
        failures.append("%s -h differs from --help" % name)
    opts = option_lines(out)
    if not opts:
        failures.append("%s --help: no option lines" % name)
    for o in set(opts):
        if opts.count(o) > 1:
            failures.append("%s --help: %s listed %d times" % (name, o, opts.count(o)))
    for o in opts:
        code, _, err = run(way + [o, o, o])
        if code != 2 or "unknown option" in err or "unexpected argument" in err:
            failures.append("%s: the help's %s is not the parser's (exit %d: %s)" %
                            (name, o, code, err.splitlines()[0] if err else ""))
    # and the check can fail: an option the parser does not know is refused as such
    code, _, err = run(way + ["--no-such-option"])
    if code != 2 or "unknown option '--no-such-option'" not in err:
        failures.append("%s --no-such-option: exit %d, %r" % (name, code, err[:200]))
    print("%s: %d options" % (name, len(opts)))
if failures:
    sys.exit("\n".join(failures))
print("ok")
