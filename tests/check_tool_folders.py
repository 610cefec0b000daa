#!/usr/bin/env python3
"""The folders of tools/ include one another without a cycle (docs/design.md:
common/ at the bottom, commands/ over the pieces, experiment/ and serve/ over
commands/), and a header of another folder is included by its folder's name
("common/cli.h"), so that each include says which folder it leans on; chart/,
a library of its own (chart_dep puts it on the include path), by its header's
name. A cycle of files inside one folder is allowed.

usage: check_tool_folders.py TOOLS_DIR
"""
import pathlib
import re
import sys

LIBRARIES = {"chart"}  # their headers are included by name alone
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    tools = pathlib.Path(sys.argv[1])
    folders = {p.name for p in tools.iterdir() if p.is_dir()}
    uses = {f: set() for f in folders}
    bad = []
    for path in sorted(tools.rglob("*.[ch]")):
        folder = path.relative_to(tools).parts[0]
        if folder not in folders:
            bad.append(f"{path}: a source file outside the folders of tools/")
            continue
        for name in INCLUDE.findall(path.read_text(errors="replace")):
            head = name.split("/")[0]
            if "/" in name and head in folders:
                if not (tools / name).is_file():
                    bad.append(f"{path}: includes {name}, which tools/ does not hold")
                elif head != folder:
                    uses[folder].add(head)
            elif "/" not in name and not (path.parent / name).is_file():
                owners = sorted(p.relative_to(tools) for p in tools.rglob(name))
                if owners and owners[0].parts[0] in LIBRARIES:
                    if owners[0].parts[0] != folder:
                        uses[folder].add(owners[0].parts[0])
                elif owners:
                    bad.append(f'{path}: includes "{name}" without its folder ({owners[0]})')
    # a cycle: a folder that reaches itself
    for start in sorted(folders):
        seen, todo = set(), list(uses[start])
        while todo:
            f = todo.pop()
            if f == start:
                bad.append(f"folder {start}/ includes itself through {sorted(uses[start])}")
                break
            if f not in seen:
                seen.add(f)
                todo.extend(uses[f])
    for line in bad:
        print(line)
    if not bad:
        for f in sorted(folders):
            print(f"{f}/ includes {', '.join(sorted(uses[f])) or 'no other folder'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
