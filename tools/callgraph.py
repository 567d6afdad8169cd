#!/usr/bin/env python3
"""tools/callgraph.py - which source file calls which, and the cycles.

The layers of lubdub (timer/ < hub/ < server/) are meant to form a DAG not
only between folders but between files: a lower file never calls a higher
one, upward calls go through a pointer the higher file installs. This
script checks that from the code, not from the includes (includes are
acyclic anyway; the knots were in the calls).

How: universal-ctags lists the functions each .c file defines (and the
static inline functions each .h defines); every identifier followed by "("
in a file's code (comments and strings stripped) that names a function
defined in another file is an edge caller -> callee. A header's static
inline functions are a node of their own, apart from the .c file of the
same name. Cycles are the strongly connected components with more than
one node.

Usage: tools/callgraph.py [--edges] [--check] [dir ...]   (default: timer hub server)
  --edges  print every file edge with the functions behind it
  --check  exit 1 if any cycle is found (the ctest `callgraph_acyclic`)
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


def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    dirs = args or ['timer', 'hub', 'server']
    files = []
    for d in dirs:
        for top, _sub, names in sorted(os.walk(os.path.join(ROOT, d))):
            for f in sorted(names):
                if f.endswith(('.c', '.h')):
                    files.append(os.path.relpath(os.path.join(top, f), ROOT))
    public, local = definitions(files)
    ident = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
    edges = collections.defaultdict(set)
    for f in files:
        with open(os.path.join(ROOT, f), encoding='utf-8') as fh:
            code = strip_code(fh.read())
        if f.endswith('.h'):
            code = braced(code)  # prototypes are not calls; inline bodies are
        for name in set(ident.findall(code)):
            if name in local[f]:
                continue
            callee = public.get(name)
            if not callee or callee == f:
                continue
            edges[(f, callee)].add(name)

    def module(p):
        # A .c file is its own node; so is a header's set of static inline
        # functions: calling one compiles the header's code into the caller
        # and calls nothing in the .c file (unless the inline does, which is
        # then an edge of its own).
        return p

    graph = collections.defaultdict(set)
    for (a, b), names in edges.items():
        graph[module(a)].add(module(b))
    # Tarjan's strongly connected components, iteratively.
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
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
                        sccs.append(sorted(comp))

    for v in nodes:
        if v not in index:
            strong(v)

    if '--edges' in argv:
        for (a, b) in sorted(edges):
            print(f'{a} -> {b}: {", ".join(sorted(edges[(a, b)]))}')
    for comp in sccs:
        inside = [f'  {a} -> {b}: {", ".join(sorted(n))}'
                  for (a, b), n in sorted(edges.items())
                  if module(a) in comp and module(b) in comp]
        print('cycle: ' + ' <-> '.join(comp))
        print('\n'.join(inside))
    print(f'{len(files)} files, {len(edges)} file edges, {len(sccs)} cycles')
    return 1 if sccs and '--check' in argv else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
