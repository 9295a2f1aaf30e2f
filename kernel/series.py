#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kernel/series.py: the series as commits and back, notes kept.

  kernel/series.py import PATCHDIR TREE     commit 0001..0009 of PATCHDIR on TREE's
                                            HEAD (git apply --index; author, date,
                                            subject, message and the version notes
                                            below the message's "---")
  kernel/series.py export TREE BASE OUTDIR  git format-patch BASE..HEAD, then
                                            git's own "---" (before the diffstat)
                                            made a blank line, so that notes and
                                            diffstat are one part for git mailinfo;
                                            no SPDX line: the files' licence is
                                            patches/LICENSE's, and a posted patch
                                            carries none

TREE: a git tree of pristine 7.3.4 (kernel/run's patched tree has the tag
madvx-base), with core.abbrev 7 so the index lines keep their width.
import followed by export gives the files back byte for byte but for the
commit hashes of their first lines (kernel/README.md, "Regenerating the
files").
"""
import email.header, os, re, subprocess, sys

def parse(path):
    """(author, date, message with notes) of one patch file."""
    text = open(path).read()
    head, _, rest = text.partition('\n\n')
    hdr = {}
    key = None
    for line in head.split('\n'):
        if line.startswith((' ', '\t')) and key:
            hdr[key] += ' ' + line.strip()
        elif ':' in line and not line.startswith('From '):
            key, _, v = line.partition(':')
            hdr[key] = v.strip()
    subj = re.sub(r'^\[PATCH[^\]]*\]\s*', '', hdr['Subject'])
    # body up to the diffstat; the file has: body, ---, notes, blank, diffstat
    # (files of earlier revisions: an SPDX line and a blank one before the notes)
    lines = rest.split('\n')
    i = lines.index('---')
    body = lines[:i]
    j = i + 1
    if lines[j].startswith('SPDX-License-Identifier'):
        j += 1
        if lines[j] == '':
            j += 1
    # notes end at the diffstat: a line ' path | N +-' ... find first line matching diffstat
    k = j
    while k < len(lines) and not re.match(r'^ \S.*\|\s+\d+', lines[k]):
        k += 1
    notes = lines[j:k]
    while notes and notes[-1] == '':
        notes.pop()
    msg = subj + '\n\n' + '\n'.join(body) + '\n'
    if notes:
        msg += '---\n' + '\n'.join(notes) + '\n'
    return hdr['From'], hdr['Date'], msg

def run(*a, **kw):
    return subprocess.run(a, check=True, **kw)

def do_import(pdir, tree):
    for f in sorted(os.listdir(pdir)):
        if not re.match(r'^000[1-9].*\.patch$', f):
            continue
        p = os.path.join(pdir, f)
        author, date, msg = parse(p)
        run('git', '-C', tree, 'apply', '--index', p)
        run('git', '-C', tree, 'commit', '-q', '--author', author, '--date', date, '-F', '-',
            input=msg.encode(), env=dict(os.environ, GIT_COMMITTER_DATE=date))
        print('imported', f)

def do_export(tree, base, out):
    # git -C would take a relative OUTDIR as relative to TREE.
    out = os.path.abspath(out)
    files = subprocess.run(['git', '-C', tree, 'format-patch', '-o', out, '--subject-prefix=PATCH v3',
                            base + '..HEAD'], check=True, capture_output=True,
                           text=True).stdout.split()
    for f in files:
        lines = open(f).read().split('\n')
        idx = [n for n, l in enumerate(lines) if l == '---']
        if len(idx) >= 2:
            lines[idx[1]] = ''
        open(f, 'w').write('\n'.join(lines))
        print(f)

if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'import':
        do_import(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == 'export':
        do_export(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
