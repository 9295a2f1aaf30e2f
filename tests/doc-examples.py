#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every code block of README.md and of the man pages' EXAMPLES works as written.

C blocks: a block with main() is a program (its first comment names the
file, "/* first.c: ... */"): compiled, linked and run. Any other block is a
fragment whose first line says what it assumes, "/* given: void *p, size_t
len */": it is compiled as the body of a function with those parameters.
All with -std=c11 -Wall -Wextra -Werror, against this build through
pkg-config (the uninstalled madvx.pc), as a user's program would be.

Shell blocks (```sh in README.md, .EX lines of man1 EXAMPLES): each command
runs in the directory of the C programs, with this build standing in for
an install (pkg-config, the library, man pages, build/ and build-demo/
paths), unless it is one this test cannot run: the build itself, which the
dist stage of tools/test.sh runs as written; the whole-suite scripts
(tools/test.sh, tools/demo.sh, kernel/run: minutes to hours), whose
existence is checked; benchmarks (minutes, load-dependent), whose options
are checked against --help; apt-get, whose package names are checked with
apt-cache. Each such command is listed with the reason.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

src, build = (os.path.abspath(a) for a in sys.argv[1:3])
fails = []
notes = []

PRELUDE = """#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <madvx.h>
"""


def readme_blocks():
    text = open(os.path.join(src, "README.md")).read()
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        yield "README.md", m.group(1), m.group(2)


def man_blocks():
    """The .EX/.EE blocks of every EXAMPLES (or EXAMPLE) section."""
    for sec in ("man1", "man3", "man7"):
        d = os.path.join(src, "man", sec)
        for name in sorted(os.listdir(d)):
            text = open(os.path.join(d, name)).read()
            m = re.search(r"^\.SH EXAMPLES?\n(.*?)(^\.SH |\Z)", text, re.S | re.M)
            if not m:
                continue
            for ex in re.finditer(r"^\.EX\n(.*?)^\.EE", m.group(1), re.S | re.M):
                body = ex.group(1).replace("\\-", "-").replace("\\e", "\\")
                lang = "sh" if sec == "man1" else "c"
                yield f"man/{sec}/{name}", lang, body


def env():
    e = dict(os.environ)
    e["PKG_CONFIG_PATH"] = os.path.join(build, "meson-uninstalled")
    e["LD_LIBRARY_PATH"] = os.path.join(build, "src")
    e["MANPATH"] = os.path.join(src, "man")
    e["MANPAGER"] = e["PAGER"] = "cat"
    e["PATH"] = os.path.join(build, "tools") + os.pathsep + e["PATH"]
    return e


def run(cmd, cwd, shell=False, timeout=300):
    return subprocess.run(cmd, cwd=cwd, env=env(), shell=shell, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def pkg_flags():
    r = run(["pkg-config", "--cflags", "--libs", "madvx"], build)
    if r.returncode:
        sys.exit(f"pkg-config madvx (uninstalled) failed: {r.stdout}")
    return shlex.split(r.stdout)


def c_block(where, code, n, tmp, flags):
    if re.search(r"\bint\s+main\s*\(", code):
        m = re.match(r"\s*/\*\s*([\w.-]+\.c):", code)
        if not m:
            fails.append(f"{where}: C program #{n}: no '/* NAME.c: ... */' first line")
            return
        path = os.path.join(tmp, m.group(1))
        open(path, "w").write(code)
        exe = path[:-2]
        r = run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", exe, path] + flags, tmp)
        if r.returncode:
            fails.append(f"{where}: {m.group(1)} does not compile:\n{r.stdout}")
            return
        r = run([exe], tmp)
        if r.returncode not in (0, 77):
            fails.append(f"{where}: {m.group(1)} exits {r.returncode}:\n{r.stdout}")
        notes.append(f"{where}: {m.group(1)} compiled and ran")
        return
    m = re.match(r"\s*/\*\s*given:\s*(.*?)(:[^*]*)?\*/", code)
    params = m.group(1).strip() if m else ""
    if not m and re.search(r"\b(b|p|len|u|as)\b", code):
        fails.append(f"{where}: fragment #{n} uses names it does not declare; "
                     "start it with /* given: ... */")
        return
    body = "\n".join("\t" + l for l in code.splitlines())
    unit = f"{PRELUDE}\nvoid fragment{n}({params or 'void'});\nvoid fragment{n}({params or 'void'})\n{{\n{body}\n}}\n"
    path = os.path.join(tmp, f"fragment{n}.c")
    open(path, "w").write(unit)
    r = run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
             "-c", "-o", path[:-2] + ".o", path] + [f for f in flags if f.startswith("-I")], tmp)
    if r.returncode:
        fails.append(f"{where}: fragment #{n} does not compile:\n{unit}\n{r.stdout}")
    else:
        notes.append(f"{where}: fragment #{n} compiled")


def bench_options_ok(where, argv):
    exe = os.path.join(build, "bench", "madvx-bench")
    if not os.path.exists(exe):
        notes.append(f"{where}: not checked (madvx-bench not built): {shlex.join(argv)}")
        return
    helptext = run([exe, "--help"], build).stdout
    for a in argv[1:]:
        if a.startswith("-") and not re.search(r"(^|\s|\[)" + re.escape(a.split("=")[0]) + r"\b", helptext):
            fails.append(f"{where}: madvx-bench has no option {a}")
    notes.append(f"{where}: options checked, not run (a benchmark): {shlex.join(argv)}")


def sh_line(where, line, tmp):
    line = line.split(" #")[0].strip()
    if not line or line.startswith("#"):
        return
    words = shlex.split(line)
    assigns = []
    while words and re.match(r"^[A-Z_]+=", words[0]):
        assigns.append(words.pop(0))
    prog = words[0]
    # this build stands in for the build dirs the docs name
    for d in ("build/", "build-demo/"):
        if prog.startswith(d):
            prog = os.path.join(build, prog[len(d):])
    if prog in ("meson", "ninja"):
        notes.append(f"{where}: not run here (the dist stage of tools/test.sh runs it): {line}")
        return
    if prog in ("apt-get", "sudo"):
        # Only where apt has package lists (a build chroot may have none).
        if shutil.which("apt-cache") and run(["apt-cache", "show", "-q", "dpkg"], tmp).returncode == 0:
            for p in words[2:]:
                if not p.startswith("-") and run(["apt-cache", "show", "-q", p], tmp).returncode:
                    fails.append(f"{where}: no Debian package '{p}' ({line})")
            notes.append(f"{where}: package names checked, not installed: {line}")
        else:
            notes.append(f"{where}: not checked (no apt package lists here): {line}")
        return
    if prog in ("tools/test.sh", "tools/demo.sh", "kernel/run"):
        if not os.access(os.path.join(src, prog), os.X_OK):
            fails.append(f"{where}: {prog} is not an executable of the tree")
        notes.append(f"{where}: exists, not run (takes minutes or more): {line}")
        return
    if prog.endswith("madvx-bench"):
        bench_options_ok(where, words)
        return
    if prog == "man" and not shutil.which("man"):
        notes.append(f"{where}: not run (no man-db): {line}")
        return
    # the line as written, the program word mapped onto this build
    at = line.index(words[0])
    cmd = line[:at] + shlex.quote(prog) + line[at + len(words[0]):]
    r = run(cmd, tmp, shell=True)
    # madvx-probe --verify exits 77 when it cannot measure: as documented
    if r.returncode not in (0,) and not (r.returncode == 77 and "--verify" in line):
        fails.append(f"{where}: '{line}' exits {r.returncode}:\n{r.stdout[-2000:]}")
    else:
        notes.append(f"{where}: ran: {line}")


def main():
    flags = pkg_flags()
    with tempfile.TemporaryDirectory() as tmp:
        blocks = list(readme_blocks()) + list(man_blocks())
        n = 0
        for where, lang, code in blocks:    # C first: shell lines run the programs
            if lang == "c":
                n += 1
                c_block(where, code, n, tmp, flags)
        for where, lang, code in blocks:
            if lang in ("sh", "shell", "bash", ""):
                for line in code.splitlines():
                    sh_line(where, line, tmp)
            elif lang != "c":
                fails.append(f"{where}: code block of unknown language '{lang}'")
    for x in notes:
        print(x)
    for x in fails:
        print("FAIL:", x)
    print(f"docs: {len(notes)} checks passed, {len(fails)} failed")
    return 1 if fails else 0


sys.exit(main())
