#!/usr/bin/env python3
"""The floors of the library call down only. Each floor is a static library
(src/meson.build) compiled with the include folders of the floors it stands on;
this holds the linked symbols to the same picture, which the include folders
alone miss (a function declared in a lower floor's header and defined higher
up): every symbol a floor needs from another floor is defined in one it may
see. Also: no source file of src/ includes a header through "../".

usage: check_floors.py SRC_DIR (FLOOR SEES LIBRARY)...
       SEES: the floors FLOOR may use, comma-separated ("" for none)
"""
import pathlib
import re
import subprocess
import sys


def symbols(archive):
    """(defined, undefined) global symbol names of the archive's objects."""
    out = subprocess.run(["nm", "-g", archive], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "U":
            undefined.add(fields[1])
        elif len(fields) == 3 and fields[1] != "U":
            defined.add(fields[2])
    return defined, undefined - defined


def main():
    src, rest = pathlib.Path(sys.argv[1]), sys.argv[2:]
    if not rest or len(rest) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    floors = {}
    for name, sees, archive in zip(rest[0::3], rest[1::3], rest[2::3]):
        floors[name] = (set(filter(None, sees.split(","))), *symbols(archive))
    home = {s: name for name, (_, defined, _) in floors.items() for s in defined}
    bad = []
    for name, (sees, _, undefined) in floors.items():
        for s in sorted(undefined):
            owner = home.get(s)
            if owner and owner not in sees:
                bad.append(f"floor {name} calls {s} of floor {owner} (it may use: "
                           f"{', '.join(sorted(sees)) or 'no other floor'})")
    include_up = re.compile(r'^\s*#\s*include\s*"\.\./', re.M)
    for path in sorted(src.rglob("*.[ch]")):
        if include_up.search(path.read_text(errors="replace")):
            bad.append(f"{path.relative_to(src)} includes a header through \"../\"")
    for line in bad:
        print(line, file=sys.stderr)
    print(f"{len(floors)} floors, {len(home)} symbols defined, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
