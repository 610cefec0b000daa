#!/usr/bin/env python3
"""The installed `prefixcl` carries no test code and no internals: of the
tests/ tree only the double-precision reference library that `prefixcl check`
links on purpose (libprefixcl_reference.a) is in it, no cmocka, no test
program's object; of the library only the shared object (the public API), no
object of src/ and not the static library. Reads the linker's map of the tool
(tools/meson.build writes it), the tool's dynamic dependencies and symbols,
and the static library's symbols (none of them may be defined in the tool).

usage: check_tool_links.py PREFIXCL MAP LIBPREFIXCL_A
"""
import re
import subprocess
import sys

ALLOWED_FROM_TESTS = "libprefixcl_reference.a"


def defined(path):
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
    # "address type name" lines; archives add "member:" lines without a type
    return {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3
            and f[1] in "TDBR"}


def main():
    tool, map_path, static_lib = sys.argv[1:4]
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
        elif path.startswith("src/") and not name.startswith("libprefixcl.so"):
            bad.append(f"links {path}: an internal object (the tool uses the shared library)")
        elif name == "libprefixcl.a":
            bad.append(f"links {path}: the static library with its internals")
    reference = [p for p in inputs if p.endswith(ALLOWED_FROM_TESTS)]
    if not reference:
        bad.append(f"{ALLOWED_FROM_TESTS} is not linked: `prefixcl check` needs it")
    needed = subprocess.run(["readelf", "-d", tool], capture_output=True, text=True).stdout
    if "cmocka" in needed:
        bad.append("needs libcmocka at run time")
    if not re.search(r"\[libprefixcl\.so", needed):
        bad.append("does not need libprefixcl.so at run time")
    symbols = defined(tool)
    for s in ("_cmocka_run_group_tests", "mock_assert", "_assert_true", "pfx_test_runtime"):
        if s in symbols:
            bad.append(f"defines {s}")
    internal = sorted(defined(static_lib) & symbols)
    if not defined(static_lib):
        bad.append(f"no symbols read from {static_lib}")
    for s in internal[:20]:
        bad.append(f"defines {s}, a symbol of the library's own objects")
    for line in bad:
        print(line, file=sys.stderr)
    print(f"{len(inputs)} linker inputs, reference: {reference}, "
          f"{len(symbols)} symbols of the tool, none of the library's")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
