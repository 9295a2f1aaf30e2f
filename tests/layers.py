#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layers of src/ point one way (src/LAYERS).

Usage: layers.py SOURCE_ROOT ARCHIVE (the static library: nm lists its
objects one after the other)

From nm of the library's objects: every symbol an object uses from another
object must be defined at its own layer or below; two files of one layer
may not use each other. From the headers: each __madvx_* function a header
declares (function or variable) is defined in the .c file of that header's name (x.h -> x.c),
without exception.
"""
import os
import re
import subprocess
import sys


def layers(root):
    rank = {}
    with open(os.path.join(root, 'src', 'LAYERS')) as f:
        n = 0
        for line in f:
            line = line.split('#', 1)[0].split()
            if not line:
                continue
            for name in line:
                rank[name] = n
            n += 1
    return rank


def nm(archive):
    """{object name: (defined, used)} of every member of @archive."""
    out = subprocess.run(['nm', archive], capture_output=True, text=True, check=True).stdout
    objs, cur = {}, None
    for line in out.splitlines():
        if line.endswith('.o:'):
            cur = objs.setdefault(line[:-1].split('.c.')[0], (set(), set()))
            continue
        parts = line.split()
        if cur is None:
            continue
        if len(parts) == 3 and parts[1] in 'TDBRCVW':
            cur[0].add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            cur[1].add(parts[1])
    return objs


def main():
    root, archive = sys.argv[1], sys.argv[2]
    rank = layers(root)
    owner, uses = {}, {}
    bad = []
    for name, (d, u) in sorted(nm(archive).items()):
        if name not in rank:
            bad.append('%s: not in src/LAYERS' % name)
            continue
        for sym in d:
            owner[sym] = name
        uses[name] = u
    if not uses:
        print('layering: no object found in %s' % archive)
        return 1
    for name, used in sorted(uses.items()):
        for sym in sorted(used):
            o = owner.get(sym)
            if o is None or o == name:
                continue
            if rank[o] > rank[name]:
                bad.append('%s uses %s of %s, a layer above it' % (name, sym, o))
            elif rank[o] == rank[name]:
                bad.append('%s uses %s of %s, on its own layer' % (name, sym, o))
    # Headers: who declares what.
    decl = re.compile(r'^MADVX_HIDDEN[^;(]*?\b(__madvx_\w+)\s*[(\[;]', re.M)
    src = os.path.join(root, 'src')
    for h in sorted(os.listdir(src)):
        if not h.endswith('.h'):
            continue
        with open(os.path.join(src, h)) as f:
            text = f.read()
        base = h[:-2]
        for fn in decl.findall(text):
            o = owner.get(fn)
            if o is not None and o != base:
                bad.append('%s declares %s, which %s.c defines' % (h, fn, o))
    if bad:
        print('layering: %d violation(s):' % len(bad))
        for b in bad:
            print('  ' + b)
        return 1
    print('layering: %d objects, %d layers, every reference points down' %
          (len(uses), len(set(rank.values()))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
