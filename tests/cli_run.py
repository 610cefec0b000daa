"""What the command-line tests share: running `prefixcl` as a user does and
checking its exit status (standard library only)."""
import subprocess
import sys


def run(exe, args, code=0, cwd=None, timeout=300):
    """exe args in cwd; exits the test with stderr unless the status is
    `code`. Returns (stdout, stderr) as text."""
    p = subprocess.run([exe] + args, capture_output=True, timeout=timeout, cwd=cwd)
    if p.returncode != code:
        sys.exit("%s: exit %d, expected %d\n%s" % (" ".join(args), p.returncode, code,
                                                   p.stderr.decode(errors="replace")))
    return p.stdout.decode("utf-8", errors="replace"), p.stderr.decode("utf-8", errors="replace")
