#!/usr/bin/env python3
"""After the README's two commands (tools/setup.sh, then the build), every
command its ```sh blocks show can run: each program they call is the
project's (tools/, build/) or on PATH, unless its block installs it first
(an apt-get line) or its block's `python3 -m venv DIR` makes it; and the experiment's corpus command, as typed (in a
temporary folder), reads the WordNet that tools/setup.sh installs.

usage: check_readme_commands.py SOURCE_ROOT   (standard library only)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def blocks(readme):
    """The commands of each ```sh block: continuation lines joined, comments
    dropped, split at &&, ||, | and ; outside a synopsis' brackets."""
    out, block, inside = [], None, False
    with open(readme) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```sh"
            if inside:
                block = []
                out.append(block)
            continue
        if inside:
            words = shlex.split(line, comments=True)
            cmd, depth = [], 0  # depth: inside a synopsis' (a | b) or [...]
            for w in words + ["&&"]:
                if w in ("&&", "||", "|", ";") and depth == 0:
                    if cmd:
                        block.append(cmd)
                    cmd = []
                else:
                    cmd.append(w)
                    depth += w.count("(") + w.count("[") - w.count(")") - w.count("]")
    return out


def main():
    root = os.path.abspath(sys.argv[1])
    found = []
    for block in blocks(os.path.join(root, "README.md")):
        installs = [c for c in block if c[0] in ("apt-get", "sudo") and "install" in c]
        # folders a `python3 -m venv DIR` of the block makes (DIR/bin/pip)
        venvs = [c[-1].rstrip("/") + "/" for c in block if c[:3] == ["python3", "-m", "venv"]]
        for cmd in block:
            while cmd and re.match(r"^[A-Z_]+=", cmd[0]):  # VAR=value prefixes
                cmd = cmd[1:]
            prog = cmd[0]
            if prog.startswith(("build/", "build-mpi/")):
                continue  # a build output
            if any(prog.startswith(v) for v in venvs):
                continue  # made by the block's venv command
            if "/" in prog:
                if not os.path.isfile(os.path.join(root, prog)):
                    sys.exit("README runs %s, which is not in the source tree" % prog)
                continue
            if shutil.which(prog) is None and not installs:
                sys.exit("README runs %s, which is not installed (tools/setup.sh should install it)" % prog)
            found.append(prog)
            if cmd[:2] == ["python3", "tools/corpus/wordnet_corpus.py"]:
                corpus = cmd
    if "curl" not in found or "corpus" not in locals():
        sys.exit("README: no curl request or no corpus command found (this test reads them)")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run([corpus[0], os.path.join(root, corpus[1])] + corpus[2:], cwd=tmp,
                             capture_output=True, text=True)
        train = os.path.join(tmp, corpus[-1], "train.txt")
        if run.returncode != 0 or not os.path.isfile(train) or os.path.getsize(train) < 1000000:
            sys.exit("%s: exit %d\n%s%s" % (" ".join(corpus), run.returncode, run.stdout, run.stderr))
    print("ok: %s" % " ".join(sorted(set(found))))


if __name__ == "__main__":
    main()
