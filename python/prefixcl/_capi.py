"""libprefixcl through ctypes: the library found and loaded, the C text of
_decls.py read into ctypes types, structs and function prototypes.

Which library: $PREFIXCL_LIBRARY (a path) when set; else the copy that
`pip install .` put beside this file (prefixcl/_lib/); else, for the package
run from a clone, the clone's build/src/; else the one pkg-config names (an
installed libprefixcl); else the linker's search path.
"""
import ctypes
import ctypes.util
import glob
import os
import re
import subprocess
from typing import Any, Dict

from . import _decls

_SCALARS: Dict[str, Any] = {
    "void": None,
    "char": ctypes.c_char,
    "bool": ctypes.c_bool,
    "int": ctypes.c_int,
    "unsigned": ctypes.c_uint,
    "long": ctypes.c_long,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "size_t": ctypes.c_size_t,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "sig_atomic_t": ctypes.c_int,
}

TYPES: Dict[str, Any] = dict(_SCALARS)
for _name in _decls.ENUMS:
    TYPES[_name] = ctypes.c_int
for _name in _decls.HANDLES:
    TYPES[_name] = type(_name, (ctypes.Structure,), {})  # opaque: only its pointers are used


def parse_type(text):
    """The ctypes type of a C type written as `const T **` (qualifiers ignored)."""
    words = text.replace("*", " * ").split()
    words = [w for w in words if w not in ("const", "volatile", "struct", "enum")]
    stars = words.count("*")
    base = " ".join(w for w in words if w != "*")
    if base not in TYPES:
        raise KeyError("prefixcl binding: unknown C type " + repr(text))
    t = TYPES[base]
    if stars == 0:
        return t
    if base == "char":
        t, stars = ctypes.c_char_p, stars - 1
    if base == "void" or t is None:
        t, stars = ctypes.c_void_p, stars - 1
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


_DECL = re.compile(r"^(?P<type>.*?[\s*])(?P<name>\w+)\s*(?:\[(?P<count>\d+)\])?$")


def parse_declaration(text):
    """(name, ctypes type) of `T name` or `T name[N]`."""
    m = _DECL.match(" ".join(text.split()))
    if not m:
        raise ValueError("prefixcl binding: cannot read " + repr(text))
    t = parse_type(m.group("type"))
    if m.group("count"):
        t = t * int(m.group("count"))
    return m.group("name"), t


def struct_members(name):
    """[(member, ctypes type)] of a struct of _decls.STRUCTS."""
    body = _decls.STRUCTS[name]
    return [parse_declaration(d) for d in body.split(";") if d.strip()]


def _parse_prototype(text):
    m = re.match(r"^(?P<head>.*?)\((?P<args>.*)\)$", " ".join(text.split()))
    name, restype = parse_declaration(m.group("head"))
    args = m.group("args").strip()
    if args == "void":
        return name, restype, []
    return name, restype, [parse_declaration(a)[1] for a in args.split(",")]


def _callback(proto):
    m = re.match(r"^(?P<ret>.*?)\(\*\)\s*\((?P<args>.*)\)$", proto)
    ret = parse_type(m.group("ret"))
    args = [parse_declaration(a)[1] for a in m.group("args").split(",")]
    return ctypes.CFUNCTYPE(ret, *args)


for _name, _proto in _decls.CALLBACKS.items():
    TYPES[_name] = None  # placeholder until the structs it names exist
for _name in _decls.STRUCTS:
    TYPES[_name] = type(_name, (ctypes.Structure,), {})
for _name, _proto in _decls.CALLBACKS.items():
    TYPES[_name] = _callback(_proto)
for _name in _decls.STRUCTS:
    TYPES[_name]._fields_ = struct_members(_name)

PROTOTYPES = [_parse_prototype(p) for p in _decls.FUNCTIONS.strip().split(";") if p.strip()]


def _pkg_config_libdir():
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "prefixcl"], capture_output=True,
                             text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def library_candidates():
    """The paths tried, in order."""
    env = os.environ.get("PREFIXCL_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "_lib", "libprefixcl.so*")))
    # Run from a clone (PYTHONPATH=python): the library of its build/.
    found += glob.glob(os.path.join(here, "..", "..", "build", "src", "libprefixcl.so"))
    libdir = _pkg_config_libdir()
    if libdir:
        found += sorted(glob.glob(os.path.join(libdir, "libprefixcl.so*")))[:1]
    system = ctypes.util.find_library("prefixcl")
    if system:
        found.append(system)
    return found


def _load():
    # GNU OpenMP reads these when it loads (with the library, unless already
    # loaded): idle threads sleep after about 0.1 ms of spinning, as the
    # prefixcl tool sets them (README "Dense products"); the user's own win
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    tried = library_candidates()
    errors = []
    for path in tried:
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(str(e))
    raise ImportError("prefixcl: libprefixcl not found (tried $PREFIXCL_LIBRARY, the package's "
                      "own copy, pkg-config prefixcl and the linker's path)" +
                      ("; " + "; ".join(errors) if errors else ""))


lib, library_path = _load()
for _name, _restype, _argtypes in PROTOTYPES:
    _f = getattr(lib, _name)
    _f.restype = _restype
    _f.argtypes = _argtypes

_libc = ctypes.CDLL(None)
free = _libc.free
free.argtypes = [ctypes.c_void_p]
free.restype = None
