#!/usr/bin/env python3
"""tools/house.py - the shape of the product code: long files, long
functions and duplicated code, with the rules of docs/DESIGN.md ("The
house rules").

The product code is every .c and .h under timer/, hub/ and server/, and
the Lua the hub runs in Redis (server/redis/lua/*.lua: its duplicated runs
and its opening comments count too).

- A file over 900 lines is an error unless tools/house-exceptions.txt
  names it as "file <path> <reason>" (a file that is one table).
- A function over 100 lines (universal-ctags' start and end lines) is an
  error unless the exceptions name it as "function <path>:<name> <reason>"
  (one switch over a protocol's cases).
- Every file opens with a comment whose first line names the file
  ("hub/loop/loop.c - what it holds").
- Duplicated code: two places, in two files or one, that share ten or
  more consecutive lines identical after whitespace normalisation (blank
  lines, #include lines and lines of only punctuation such as "}" or "};"
  do not count toward the ten, and do not break a run). Each pair is an error unless
  the exceptions list it as "dup <path>:<path> <reason>" (the reason is
  also written in docs/DESIGN.md's list of kept pairs).

Usage: tools/house.py [--check] [--lengths] [--dups]   (no flag: all reports)
  --check  exit 1 on any error (the ctest unit_house)
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE, MAX_FUNC, MIN_DUP = 900, 100, 10


def sources():
    out = []
    for top in ('timer', 'hub', 'server'):
        for d, _subs, names in sorted(os.walk(os.path.join(ROOT, top))):
            for f in sorted(names):
                if f.endswith(('.c', '.h')):
                    out.append(os.path.relpath(os.path.join(d, f), ROOT))
    return out


def lua_sources():
    d = os.path.join(ROOT, 'server', 'redis', 'lua')
    return [os.path.relpath(os.path.join(d, f), ROOT)
            for f in sorted(os.listdir(d)) if f.endswith('.lua')] \
        if os.path.isdir(d) else []


def exceptions():
    ex = collections.defaultdict(dict)
    path = os.path.join(ROOT, 'tools', 'house-exceptions.txt')
    if os.path.exists(path):
        with open(path, encoding='utf-8') as fh:
            for line in fh:
                words = line.split('#', 1)[0].split(None, 2)
                if len(words) >= 2:
                    ex[words[0]][words[1]] = words[2].strip() if len(words) > 2 else ''
    return ex


def functions(files):
    """[(path, name, lines)] of every function universal-ctags finds."""
    res = subprocess.run(['ctags', '--fields=+ne', '--c-kinds=f', '-f', '-',
                          '--language-force=C'] + files,
                         cwd=ROOT, capture_output=True, text=True, check=True)
    out = []
    for line in res.stdout.splitlines():
        parts = line.split('\t')
        fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
        if 'line' in fields and 'end' in fields:
            out.append((parts[1], parts[0],
                        int(fields['end']) - int(fields['line']) + 1))
    return out


def normal(line):
    return ' '.join(line.split())


def significant(line):
    # Includes say what a file uses, not what it does: a list of them is
    # not duplicated code; nor is a Lua comment.
    return (bool(re.search(r'[A-Za-z0-9]', line))
            and not re.match(r'\s*#\s*include\b', line)
            and not re.match(r'\s*--', line))


def duplicates(files):
    """Pairs of places sharing MIN_DUP or more consecutive significant
    lines, identical after whitespace normalisation: [(a, a_lines, b,
    b_lines, n)] with the longest run of each pair of files and places."""
    seqs = {}
    for f in files:
        with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
            lines = fh.read().splitlines()
        seqs[f] = [(i + 1, normal(l)) for i, l in enumerate(lines)
                   if significant(l)]
    index = collections.defaultdict(list)
    for f, seq in seqs.items():
        for k in range(len(seq) - MIN_DUP + 1):
            key = tuple(t for _n, t in seq[k:k + MIN_DUP])
            index[key].append((f, k))
    seen, out = set(), []
    for key, places in index.items():
        if len(places) < 2:
            continue
        for i in range(len(places)):
            for j in range(i + 1, len(places)):
                (fa, ka), (fb, kb) = places[i], places[j]
                if fa == fb and abs(ka - kb) < MIN_DUP:
                    continue
                # Only the start of a run: the window before must differ.
                sa, sb = seqs[fa], seqs[fb]
                if ka > 0 and kb > 0 and sa[ka - 1][1] == sb[kb - 1][1]:
                    continue
                n = MIN_DUP
                while (ka + n < len(sa) and kb + n < len(sb)
                       and sa[ka + n][1] == sb[kb + n][1]
                       and not (fa == fb and ka + n == kb)):
                    n += 1
                tag = (fa, ka, fb, kb)
                if tag in seen:
                    continue
                seen.add(tag)
                out.append((fa, (sa[ka][0], sa[ka + n - 1][0]),
                            fb, (sb[kb][0], sb[kb + n - 1][0]), n))
    return sorted(out, key=lambda r: (-r[4], r[0], r[2]))


def main(argv):
    files = sources()
    ex = exceptions()
    everything = not any(a in argv for a in ('--lengths', '--dups'))
    errors = []
    if everything or '--lengths' in argv:
        print(f'Files over {MAX_FILE} lines:')
        for f in files:
            with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
                n = sum(1 for _ in fh)
            if n > MAX_FILE:
                why = ex['file'].get(f)
                print(f'  {n:5d} {f}' + (f'  (kept: {why})' if why is not None else ''))
                if why is None:
                    errors.append(f'{f} has {n} lines (over {MAX_FILE})')
        print(f'Functions over {MAX_FUNC} lines:')
        for f, name, n in sorted(functions(files), key=lambda r: -r[2]):
            if n > MAX_FUNC:
                why = ex['function'].get(f'{f}:{name}')
                print(f'  {n:5d} {f}:{name}' + (f'  (kept: {why})' if why is not None else ''))
                if why is None:
                    errors.append(f'{f}:{name} has {n} lines (over {MAX_FUNC})')
    if everything or '--lengths' in argv:
        for f in files:
            with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
                head = fh.read(300)
            if not re.match(r'/\*\s*\n?\s*\*?\s*' + re.escape(f) + r' - ', head):
                errors.append(f'{f} does not open with "/* {f} - what it holds"')
        for f in lua_sources():
            with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
                head = fh.read(300)
            if not head.startswith(f'-- {f} - '):
                errors.append(f'{f} does not open with '
                              f'"-- {f} - what it holds"')
    if everything or '--dups' in argv:
        dups = duplicates(files + lua_sources())
        print(f'Duplicated runs of {MIN_DUP}+ identical lines: {len(dups)}')
        for fa, la, fb, lb, n in dups:
            why = ex['dup'].get(f'{fa}:{fb}', ex['dup'].get(f'{fb}:{fa}'))
            print(f'  {n:3d} lines {fa}:{la[0]}-{la[1]} = {fb}:{lb[0]}-{lb[1]}'
                  + (f'  (kept: {why})' if why is not None else ''))
            if why is None:
                errors.append(f'duplicated: {fa}:{la[0]}-{la[1]} = {fb}:{lb[0]}-{lb[1]}')
    for e in errors:
        print('error: ' + e)
    print(f'{len(files)} files, {len(errors)} errors')
    return 1 if errors and '--check' in argv else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
