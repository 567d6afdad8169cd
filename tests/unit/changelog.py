#!/usr/bin/env python3
"""tests/unit/changelog.py - CHANGELOG.md keeps up with the version.

The version CMakeLists.txt builds (project(lubdub VERSION x.y.z)) must have
its own "## [x.y.z]" entry in CHANGELOG.md, under an "## [Unreleased]" one
that collects what has landed since, and the entries must run newest first.
A release that forgot its changelog, or a changelog that lost its
Unreleased heading, fails `make test`.

Usage: changelog.py REPO_ROOT
"""
import re
import sys


def version_key(v):
    return tuple(int(x) for x in v.split('.'))


def main(root):
    cmake = open(f'{root}/CMakeLists.txt', encoding='utf-8').read()
    m = re.search(r'project\(lubdub VERSION (\d+\.\d+\.\d+)', cmake)
    if not m:
        print('CMakeLists.txt: no project(lubdub VERSION x.y.z)')
        return 1
    version = m.group(1)
    text = open(f'{root}/CHANGELOG.md', encoding='utf-8').read()
    heads = re.findall(r'^## \[([^\]]+)\]', text, re.M)
    errors = []
    if not heads or heads[0] != 'Unreleased':
        errors.append('the first entry must be "## [Unreleased]"')
    released = [h for h in heads if h != 'Unreleased']
    if version not in released:
        errors.append(f'no "## [{version}]" entry for the version CMakeLists.txt builds')
    elif released[0] != version:
        errors.append(f'"## [{released[0]}]" is above the built version {version}')
    bad = [h for h in released if not re.fullmatch(r'\d+\.\d+\.\d+', h)]
    if bad:
        errors.append(f'entries that are not versions: {bad}')
    elif released != sorted(released, key=version_key, reverse=True):
        errors.append(f'entries are not newest first: {released}')
    for e in errors:
        print(f'CHANGELOG.md: {e}')
    if not errors:
        print(f'CHANGELOG.md: Unreleased, then {", ".join(released)}; builds {version}')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '.'))
