#!/usr/bin/env python3
"""Every kernel program, in every CPU configuration the runtime may build
(`prefixcl kernel-configs`), compiles without a single warning under clang for
an AVX2 host (what PoCL does there): a user's first run must print only what
the tool means to say. Skipped (77) without clang.

usage: check_kernel_warnings.py PREFIXCL CL_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

CLANGS = ("clang-16", "clang-15", "clang")
# x86-64 with AVX2 but without AVX-512 (the float16 paths warn there)
TARGET = ["-target", "x86_64-unknown-linux-gnu", "-Xclang", "-target-cpu", "-Xclang", "haswell"]


def main():
    prefixcl, cl_dir = sys.argv[1:3]
    clang = next((c for c in CLANGS if shutil.which(c)), None)
    if not clang:
        print("no clang: skipped")
        return 77
    listing = subprocess.run([prefixcl, "kernel-configs"], check=True, capture_output=True,
                             text=True).stdout
    configs = sorted({tuple(line.split("\t")[0:3:2]) for line in listing.splitlines()
                      if line.count("\t") >= 2 and line.split("\t")[1] == "cpu"})
    assert configs, "kernel-configs lists no cpu configuration"
    common = open(os.path.join(cl_dir, "common.cl")).read()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for program, options in configs:
            src = os.path.join(tmp, program + ".cl")
            with open(src, "w") as f:
                header = os.path.join(cl_dir, program + ".h")  # shared with the host, joined first
                f.write(common + "\n" + (open(header).read() + "\n" if os.path.exists(header) else "")
                        + open(os.path.join(cl_dir, program + ".cl")).read())
            cmd = [clang, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                   "-O2", *TARGET, "-c", "-o", os.devnull, *options.split(), src]
            r = subprocess.run(cmd, capture_output=True, text=True)
            warnings = [l for l in r.stderr.splitlines() if "warning:" in l]
            print(f"{program} [{options}]: exit {r.returncode}, {len(warnings)} warnings")
            if r.returncode != 0 or warnings:
                failures.append(f"{program} [{options}]:\n" + "\n".join((warnings or
                                                                        r.stderr.splitlines())[:5]))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
