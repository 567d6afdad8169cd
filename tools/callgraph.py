#!/usr/bin/env python3
"""tools/callgraph.py - which module uses which, across the folders of
tools/layers.txt: the upward edges and the cycles.

A module is a .c file and the .h of the same name, counted as one (a
header's inline functions are its module's code, wherever they are
compiled). An edge a -> b is a call (an identifier followed by "(" in a's
code, comments and strings stripped, that names a function b defines, as
universal-ctags lists them) or a quoted #include of one of b's files.

The folders are ordered, lowest first, in tools/layers.txt. An edge may
stay in its folder or go down the list; an edge that goes up, a cycle
that crosses folders, a cycle inside a folder not marked "knot", or a
source folder missing from the list is an error. So is a folder without a
README.md whose "Depends on:" line names exactly the folders it uses, or a
knot whose modules its folder's README does not name (`module`).

Usage: tools/callgraph.py [--edges] [--folders] [--check] [dir ...]
                                        (default: timer hub server)
  --edges    print every module edge with the functions (and #includes)
             behind it
  --folders  print each folder with its modules and the folders it uses
  --check    exit 1 on any error above (the ctest unit_callgraph_layers)
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip_code(text):
    """Drop comments, string and char literals (keep newlines)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def braced(code):
    """Only what is inside braces: the bodies of a header's inline functions
    (struct bodies hold no calls)."""
    out, depth = [], 0
    for c in code:
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        elif depth > 0:
            out.append(c)
        if c == '\n':
            out.append(c)
    return ''.join(out)


def definitions(files):
    """{function: file} from ctags; static functions are file-local."""
    res = subprocess.run(
        ['ctags', '-x', '--c-kinds=f', '--language-force=C', '--fields=+S'] + files,
        cwd=ROOT, capture_output=True, text=True, check=True)
    public, local = {}, collections.defaultdict(set)
    for line in res.stdout.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 5:
            continue
        name, _kind, _line, path, sig = parts
        if sig.lstrip().startswith('static') and not path.endswith('.h'):
            local[path].add(name)
        else:
            public.setdefault(name, path)
    return public, local


def read_layers():
    """[(folder, is_knot)] from tools/layers.txt, lowest first."""
    out = []
    with open(os.path.join(ROOT, 'tools', 'layers.txt'), encoding='utf-8') as fh:
        for line in fh:
            words = line.split('#', 1)[0].split()
            if words:
                out.append((words[0], 'knot' in words[1:]))
    return out


def sources(dirs):
    files = []
    for d in dirs:
        for top, _sub, names in sorted(os.walk(os.path.join(ROOT, d))):
            for f in sorted(names):
                if f.endswith(('.c', '.h')):
                    files.append(os.path.relpath(os.path.join(top, f), ROOT))
    return files


def module(path):
    return path.rsplit('.', 1)[0]


def sccs_of(graph):
    """Tarjan's strongly connected components (more than one node), iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(graph) | {m for v in graph.values() for m in v})

    def strong(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)
    return out


def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    files = sources(args or ['timer', 'hub', 'server'])
    known = {module(f) for f in files}
    public, local = definitions(files)
    ident = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    edges = collections.defaultdict(set)
    for f in files:
        with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
            text = fh.read()
        code = strip_code(text)
        if f.endswith('.h'):
            code = braced(code)  # prototypes are not calls; inline bodies are
        for name in set(ident.findall(code)):
            if name in local[f]:
                continue
            callee = public.get(name)
            if callee and module(callee) != module(f):
                edges[(module(f), module(callee))].add(name)
        for inc in include.findall(text):
            target = module(inc)
            if target in known and target != module(f):
                edges[(module(f), target)].add('#include ' + inc)

    graph = collections.defaultdict(set)
    for (a, b) in edges:
        graph[a].add(b)
    layers = read_layers()
    rank = {folder: i for i, (folder, _k) in enumerate(layers)}
    knots = {folder for folder, k in layers if k}
    errors = []
    if len(knots) > 1:
        errors.append('more than one knot folder: ' + ', '.join(sorted(knots)))
    folder = {m: os.path.dirname(m) for m in known}
    for f in sorted(set(folder.values())):
        if f not in rank:
            errors.append(f'folder {f} is not in tools/layers.txt')
    hub_max = max((r for f, r in rank.items() if f.split('/')[0] == 'hub'), default=-1)
    server_min = min((r for f, r in rank.items() if f.split('/')[0] == 'server'), default=1 << 30)
    if hub_max > server_min:
        errors.append('tools/layers.txt lists a hub/ folder above a server/ folder')
    for (a, b), names in sorted(edges.items()):
        fa, fb = folder[a], folder[b]
        if fa != fb and fa in rank and fb in rank and rank[fb] > rank[fa]:
            errors.append(f'upward edge {a} -> {b} ({fa} is below {fb}): '
                          + ', '.join(sorted(names)))
    for f, _k in layers:
        path = os.path.join(ROOT, f, 'README.md')
        uses = {folder[b] for (a, b) in edges
                if folder[a] == f and folder[b] != f}
        try:
            with open(path, encoding='utf-8') as fh:
                readme = fh.read()
        except OSError:
            errors.append(f'{f}/README.md is missing')
            continue
        m = re.search(r'^Depends on: (.*)$', readme, re.M)
        said = set(m.group(1).split()) - {'-'} if m else None
        if said != uses:
            errors.append(f'{f}/README.md: "Depends on: '
                          f'{" ".join(sorted(uses)) or "-"}" is what it uses'
                          + ('' if m else ' (no Depends on: line)'))
    cycles = sccs_of(graph)
    for comp in cycles:
        fs = {folder[m] for m in comp}
        if len(fs) == 1 and fs <= knots:
            with open(os.path.join(ROOT, next(iter(fs)), 'README.md'),
                      encoding='utf-8') as fh:
                readme = fh.read()
            unnamed = [m for m in comp if f'`{m.split("/")[-1]}`' not in readme]
            if unnamed:
                errors.append(f'{next(iter(fs))}/README.md does not name the '
                              'knot\'s ' + ', '.join(unnamed))
        if len(fs) > 1 or not fs <= knots:
            inside = [f'  {a} -> {b}: {", ".join(sorted(n))}'
                      for (a, b), n in sorted(edges.items())
                      if a in comp and b in comp]
            errors.append('cycle: ' + ' <-> '.join(comp) + '\n' + '\n'.join(inside))

    if '--edges' in argv:
        for (a, b) in sorted(edges):
            print(f'{a} -> {b}: {", ".join(sorted(edges[(a, b)]))}')
    if '--folders' in argv:
        for f, _k in layers:
            mods = sorted(m.split('/')[-1] for m in known if folder[m] == f)
            uses = sorted({folder[b] for (a, b) in edges
                           if folder[a] == f and folder[b] != f})
            print(f'{f}{" (knot)" if f in knots else ""}: {" ".join(mods)}')
            print(f'    uses: {" ".join(uses) or "-"}')
    for comp in cycles:
        fs = {folder[m] for m in comp}
        if len(fs) == 1 and fs <= knots:
            print(f'knot in {next(iter(fs))}: ' + ' <-> '.join(comp))
    for e in errors:
        print('error: ' + e)
    print(f'{len(files)} files, {len(known)} modules, {len(edges)} module edges, '
          f'{len(cycles)} cycles, {len(errors)} errors')
    return 1 if errors and '--check' in argv else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
