"""The binding against include/prefixcl/*.h: a header that changes without
python/prefixcl/_decls.py fails here.

A C program generated from _decls.py is compiled against the headers with
-Werror: each prototype declared again (a conflicting one does not compile),
each callback type assigned from the binding's (an incompatible one does
not); it prints the size of every struct, the offset and size of every
member, every enum constant and macro, which must equal ctypes' and the
binding's. The headers' text gives every enum's constants and every struct's
member names, which must equal the binding's lists (a member added in
padding, an enum constant added, are caught there)."""
import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from prefixcl import _capi, _decls

INCLUDE = Path(__file__).resolve().parents[2] / "include"
HEADERS = sorted((INCLUDE / "prefixcl").glob("*.h"))
pytestmark = pytest.mark.skipif(not HEADERS, reason="run from a clone: needs include/prefixcl")


def header_text():
    text = "\n".join(h.read_text() for h in HEADERS)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <prefixcl/prefixcl.h>", ""]
    lines += [_decls.FUNCTIONS, ""]
    for i, (name, proto) in enumerate(_decls.CALLBACKS.items()):
        lines.append(f"{name} callback_{i} = ({proto})0;")
    lines.append("int main(void)\n{")
    for name in _decls.STRUCTS:
        lines.append(f'    printf("sizeof {name} %zu\\n", sizeof({name}));')
        for member, _ in _capi.struct_members(name):
            lines.append(f'    printf("member {name}.{member} %zu %zu\\n", '
                         f'offsetof({name}, {member}), sizeof((({name} *)0)->{member}));')
    for enum_name, constants in _decls.ENUMS.items():
        for const, _ in constants:
            lines.append(f'    printf("constant {const} %lld\\n", (long long)({const}));')
    for macro in _decls.MACROS:
        lines.append(f'    printf("constant {macro} %lld\\n", (long long)({macro}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to check the binding against the headers"
    d = tmp_path_factory.mktemp("headers")
    (d / "check.c").write_text(c_program())
    r = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable",
                        "-I", str(INCLUDE), str(d / "check.c"), "-o", str(d / "check")],
                       capture_output=True, text=True)
    assert r.returncode == 0, "the binding's declarations disagree with the headers:\n" + r.stderr
    out = subprocess.run([str(d / "check")], capture_output=True, text=True, check=True).stdout
    facts = {}
    for line in out.splitlines():
        kind, key, *values = line.split()
        facts[(kind, key)] = tuple(int(v) for v in values)
    return facts


def test_struct_layouts(compiled):
    for name in _decls.STRUCTS:
        t = _capi.TYPES[name]
        assert compiled[("sizeof", name)] == (ctypes.sizeof(t),), name
        for member, _ in _capi.struct_members(name):
            field = getattr(t, member)
            assert compiled[("member", f"{name}.{member}")] == (field.offset, field.size), \
                f"{name}.{member}"


def test_constants(compiled):
    for constants in _decls.ENUMS.values():
        for const, value in constants:
            assert compiled[("constant", const)] == (value,), const
    for macro, value in _decls.MACROS.items():
        assert compiled[("constant", macro)] == (value,), macro


def test_enums_complete():
    text = header_text()
    for name, constants in _decls.ENUMS.items():
        m = re.search(r"typedef enum " + name + r"\s*\{(.*?)\}\s*" + name + ";", text, re.S)
        assert m, f"enum {name} not in the headers"
        in_header = re.findall(r"\b(PFX_\w+)\s*(?:=[^,]*)?(?:,|$)", m.group(1).strip())
        assert in_header == [c for c, _ in constants], name


def header_members(body):
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if fn:
            names.append(fn.group(1))
            continue
        first, *rest = decl.split(",")
        names.append(re.search(r"(\w+)\s*(?:\[[^\]]*\])?$", first).group(1))
        names += [re.search(r"(\w+)", r).group(1) for r in rest]
    return names


def test_struct_members_complete():
    text = header_text()
    for name in _decls.STRUCTS:
        m = re.search(r"typedef struct " + name + r"\s*\{(.*?)\}\s*" + name + ";", text, re.S)
        assert m, f"struct {name} not in the headers"
        assert header_members(m.group(1)) == [n for n, _ in _capi.struct_members(name)], name


def test_prototypes_in_headers():
    # A prototype the headers lack would compile above as a new declaration.
    text = header_text()
    for name, _, _ in _capi.PROTOTYPES:
        assert re.search(r"PFX_API[^;]*\b" + name + r"\s*\(", text), f"{name} not in the headers"
