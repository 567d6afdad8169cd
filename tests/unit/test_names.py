#!/usr/bin/env python3
"""tests/unit/test_names.py - unit tests are named after the code they test.

Fails, listing every offender, when a unit test file or a cmocka case breaks
the naming rule of issue 32 ("tests that read like the code"). The rule:

  Modules.  A module is the basename of a .c or .h file under timer/, hub/
  or server/ (a .c and its .h are one module; a header alone, such as
  timer/list.h or hub/loop/inbox.h, is a module too), or of a .c file in
  tests/unit/ that is not itself a test (the failing allocator, fail_alloc.c,
  which test_fail_alloc.c tests). The list is read from the tree each run,
  so a module added by a split (hub/cluster/cluster_ids.c, say) is known as
  soon as its file exists.

  Files.  Every tests/unit/test_<F>.c names what it tests: F is a module M,
  or M_<aspect> where <aspect> is one lowercase word (letters and digits, no
  underscore) saying which part of M, or under which condition, the file
  tests: test_publish_nomem.c is hub/loop/publish.c under failing
  allocations, test_webhook_server.c the server/ half of the webhooks.

  Cases.  Every case a file registers in a `struct CMUnitTest ...[] = {...}`
  array (the first argument of each entry, whatever the macro:
  cmocka_unit_test, a file's own T() or RIG_TEST()) is named
  test_<F>_<behaviour>, with F the file's own name as above and <behaviour>
  not empty. So a case's name says where it lives and what it tests, and a
  grep for test_<module>_ finds every unit case of that module.

Usage: test_names.py [source dir]   (default: two levels above this file)
Exit 0 when every file and case keeps the rule, 1 otherwise.
"""
import os
import re
import sys

LAYERS = ('timer', 'hub', 'server')
FILE_RE = re.compile(r'^test_([a-z0-9_]+)\.c$')
ARRAY_RE = re.compile(r'struct\s+CMUnitTest\s+\w+\s*\[\s*\]\s*=\s*\{(.*?)\n\s*\};',
                      re.S)
# The first argument of each entry: MACRO( name
ENTRY_RE = re.compile(r'\b\w+\s*\(\s*(\w+)')
ASPECT_RE = re.compile(r'^[a-z0-9]+$')


def modules(src):
    """Every module's name: .c and .h basenames under the layers, and the
    test-support .c files of tests/unit/."""
    names = set()
    for layer in LAYERS:
        for root, _dirs, files in os.walk(os.path.join(src, layer)):
            for f in files:
                if f.endswith(('.c', '.h')):
                    names.add(f[:-2])
    for f in os.listdir(os.path.join(src, 'tests', 'unit')):
        if f.endswith('.c') and not f.startswith('test_'):
            names.add(f[:-2])
    return names


def file_ok(name, mods):
    """name (F of test_<F>.c) is a module or <module>_<one word>."""
    if name in mods:
        return True
    head, sep, aspect = name.rpartition('_')
    return bool(sep) and head in mods and bool(ASPECT_RE.match(aspect))


def cases(text):
    """The case functions a file registers, in order."""
    out = []
    for block in ARRAY_RE.findall(text):
        block = re.sub(r'/\*.*?\*/', '', block, flags=re.S)
        out.extend(ENTRY_RE.findall(block))
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', '..')
    mods = modules(src)
    unit = os.path.join(src, 'tests', 'unit')
    bad_files, bad_cases, nfiles, ncases = [], [], 0, 0
    for f in sorted(os.listdir(unit)):
        m = FILE_RE.match(f)
        if not m:
            continue
        nfiles += 1
        name = m.group(1)
        if not file_ok(name, mods):
            bad_files.append(f)
        with open(os.path.join(unit, f), encoding='utf-8') as fh:
            found = cases(fh.read())
        if not found:
            bad_cases.append(f'{f}: registers no case in a CMUnitTest array')
        for c in found:
            ncases += 1
            if not (c.startswith(f'test_{name}_') and len(c) > len(f'test_{name}_')):
                bad_cases.append(f'{f}: {c} (want test_{name}_<behaviour>)')
    if bad_files:
        print('unit test files not named test_<module>[_<aspect>].c '
              '(no module of that name under timer/, hub/, server/):', file=sys.stderr)
        for f in bad_files:
            print(f'  tests/unit/{f}', file=sys.stderr)
    if bad_cases:
        print('unit test cases not named test_<file>_<behaviour>:', file=sys.stderr)
        for c in bad_cases:
            print(f'  {c}', file=sys.stderr)
    if bad_files or bad_cases:
        print(f'{len(bad_files)} of {nfiles} files and {len(bad_cases)} of {ncases} '
              'cases break the rule (see the header of tests/unit/test_names.py)',
              file=sys.stderr)
        return 1
    print(f'tests/unit: {nfiles} files, {ncases} cases, all named test_<module>[_<aspect>]_<behaviour>')
    return 0


if __name__ == '__main__':
    sys.exit(main())
