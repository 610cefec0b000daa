"""prefixcl --version prints the project's version (argv[2]) as "prefixcl X.Y.Z".
usage: check_version_cli.py PREFIXCL VERSION"""
import subprocess
import sys

exe, version = sys.argv[1], sys.argv[2]
p = subprocess.run([exe, "--version"], capture_output=True, text=True)
if p.returncode != 0 or p.stdout != "prefixcl %s\n" % version:
    sys.exit("prefixcl --version: exit %d, %r (expected 'prefixcl %s')" % (p.returncode, p.stdout, version))
print("ok")
