#!/usr/bin/env python3
"""tests/unit/design_map.py - docs/DESIGN.md's map names every source file.

Section 1 of docs/DESIGN.md has one table per folder, under a heading
"### <folder>/ — ...", whose rows name files in backquotes in their first
cell. This check fails, listing what is wrong, when a .c or .h under
timer/, hub/ or server/ is in no row of its folder's table, or when a row
names a file its folder does not have (a moved or deleted file).

Usage: design_map.py [source dir]   (the ctest unit_design_map)
"""
import os
import re
import sys


def main(root):
    with open(os.path.join(root, 'docs', 'DESIGN.md'), encoding='utf-8') as fh:
        text = fh.read()
    named, folder = {}, None
    for line in text.splitlines():
        if line.startswith('## ') and folder is not None:
            break  # the map is over at the next section
        m = re.match(r'### (\S+)/ — ', line)
        if m:
            folder = m.group(1)
            named.setdefault(folder, set())
            continue
        if folder and line.startswith('| `'):
            first = line.split('|')[1]
            named[folder].update(re.findall(r'`([A-Za-z0-9_]+\.[ch])`', first))
    have = {}
    for top in ('timer', 'hub', 'server'):
        for d, _subs, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(d, root)
            for f in files:
                if f.endswith(('.c', '.h')):
                    have.setdefault(rel, set()).add(f)
    errors = []
    for d in sorted(have):
        for f in sorted(have[d] - named.get(d, set())):
            errors.append(f'{d}/{f} is missing from docs/DESIGN.md\'s map')
    for d in sorted(named):
        for f in sorted(named[d] - have.get(d, set())):
            errors.append(f'docs/DESIGN.md\'s map names {d}/{f}, which does not exist')
    for e in errors:
        print(e)
    n = sum(len(v) for v in have.values())
    print(f'{n} source files, {len(errors)} problems')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
