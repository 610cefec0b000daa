#!/usr/bin/env python3
"""The installed `prefixcl` carries no test code: of the tests/ tree only the
double-precision reference library that `prefixcl check` links on purpose
(libprefixcl_reference.a) is in it, no cmocka, no test program's object.
Reads the linker's map of the tool (tools/meson.build writes it) and the
tool's dynamic dependencies.

usage: check_tool_links.py PREFIXCL MAP
"""
import re
import subprocess
import sys

ALLOWED_FROM_TESTS = "libprefixcl_reference.a"


def main():
    tool, map_path = sys.argv[1:3]
    try:
        text = open(map_path).read()
    except OSError as e:
        print(f"no linker map ({e}): skipped")
        return 77
    # every object and library the linker was given
    inputs = set(re.findall(r"^LOAD (\S+)", text, re.M))
    bad = []
    for path in sorted(inputs):
        name = path.rsplit("/", 1)[-1]
        if "cmocka" in name:
            bad.append(f"links {path}")
        elif ("/tests/" in path or path.startswith("tests/")) and name != ALLOWED_FROM_TESTS:
            bad.append(f"links {path} from tests/")
    reference = [p for p in inputs if p.endswith(ALLOWED_FROM_TESTS)]
    if not reference:
        bad.append(f"{ALLOWED_FROM_TESTS} is not linked: `prefixcl check` needs it")
    needed = subprocess.run(["readelf", "-d", tool], capture_output=True, text=True).stdout
    if "cmocka" in needed:
        bad.append("needs libcmocka at run time")
    symbols = subprocess.run(["nm", "--defined-only", tool], capture_output=True,
                             text=True).stdout.split()
    for s in ("_cmocka_run_group_tests", "mock_assert", "_assert_true", "pfx_test_runtime"):
        if s in symbols:
            bad.append(f"defines {s}")
    for line in bad:
        print(line, file=sys.stderr)
    print(f"{len(inputs)} linker inputs, reference: {reference}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
