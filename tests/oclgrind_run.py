#!/usr/bin/env python3
"""Runs a command under Oclgrind and fails on anything Oclgrind reports.

Usage: tests/oclgrind_run.py COMMAND [ARGS...]
       (the exe_wrapper of `meson test --setup oclgrind`, tests/meson.build)

Oclgrind (Debian package `oclgrind`) simulates an OpenCL GPU device: it runs
the work-items of a work-group as a GPU does and checks every access. It is
started with
  --data-races          races between work-items on local and global memory
  --check-api           invalid OpenCL API use
  --local-mem-size      64 KiB instead of its 32 KiB, so that the tiles of
                        every GPU entry of the tuning database (NVIDIA 48 KiB,
                        AMD and Intel 64 KiB) can run
  --log FILE            its kernel reports, read back here (its API errors
                        and fatal errors go to stderr, which is passed
                        through and searched)
Out-of-bounds accesses (global, local, private, constant) and barrier
divergence are checked by Oclgrind in every run. Its `--uninitialized` is not
used: Oclgrind 21.10 stops at LLVM's `freeze` instruction, which clang emits
for these kernels (README "Devices").

Exit status: the command's when Oclgrind reported nothing; 1 when it
reported anything (the reports are printed; OCLGRIND_MAX_ERRORS bounds them);
77 (skipped) when oclgrind is not installed.
Environment: PREFIXCL_OCLGRIND_OPTIONS adds options (e.g. `--num-threads 1`);
PREFIXCL_OCLGRIND_EXPECT=REGEX inverts the test: exit 0 only when the command
exits 0 and Oclgrind's reports (log and stderr) match REGEX (the kernels with
one fault each, tests/oclgrind_faults.c).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

LOCAL_MEM = 64 * 1024
API_MARKER = b"Oclgrind - OpenCL runtime error detected"
FATAL_MARKER = b"OCLGRIND FATAL ERROR"  # e.g. an instruction a plugin cannot simulate


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    oclgrind = shutil.which("oclgrind")
    if not oclgrind:
        print("oclgrind_run: oclgrind is not installed (apt-get install oclgrind): skipped",
              file=sys.stderr)
        return 77
    fd, log = tempfile.mkstemp(prefix="prefixcl-oclgrind-", suffix=".log")
    os.close(fd)
    cmd = [oclgrind, "--data-races", "--check-api", "--local-mem-size", str(LOCAL_MEM),
           "--max-errors", os.environ.get("OCLGRIND_MAX_ERRORS", "50"), "--log", log]
    cmd += shlex.split(os.environ.get("PREFIXCL_OCLGRIND_OPTIONS", ""))
    cmd += argv[1:]
    sys.stdout.flush()
    # Kernel reports go to the log; API errors (--check-api) to stderr, which
    # is passed through and read for Oclgrind's marker.
    api_errors = []
    stderr = []
    try:
        child = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        for raw in child.stderr:
            sys.stderr.buffer.write(raw)
            sys.stderr.flush()
            stderr.append(raw.decode(errors="replace"))
            if API_MARKER in raw or FATAL_MARKER in raw:
                api_errors.append(raw)
        rc = child.wait()
        with open(log, errors="replace") as f:
            report = f.read()
    finally:
        os.unlink(log)
    expect = os.environ.get("PREFIXCL_OCLGRIND_EXPECT")
    if expect:
        # a fault that must be found (tests/oclgrind_faults.c)
        found = re.search(expect, report + "".join(stderr))
        print("oclgrind_run: expected report /%s/: %s" % (expect, "found" if found else "MISSING"),
              file=sys.stderr)
        return 0 if found and rc == 0 else 1
    if report.strip() or api_errors:
        sys.stdout.flush()
        print("\noclgrind_run: Oclgrind reported errors (%s): %d API or fatal error(s) above%s" %
              (" ".join(argv[1:]), len(api_errors), ", and:\n" + report if report.strip() else ""),
              file=sys.stderr)
        return 1
    if rc < 0:
        print("oclgrind_run: the command died of signal %d" % -rc, file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
