#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pick the library's tests and examples out of a meson build dir.

  meson-stage.py targets BUILD REPO        print build-dir-relative outputs to build
  meson-stage.py stage BUILD REPO STAGE MULT
        copy static test/example executables to STAGE/madvx/{lib,examples}
        and write STAGE/madvx/lib.list (format: kernel/guest/init.c)

Tests whose command is not an ELF file built here (scripts such as an
install check) are host-only: listed on stderr, not run in the guest.
A test or example that is built but not static is an error.
"""
import json
import os
import shutil
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", "--" + what, build],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def in_dir(path, d):
    return os.path.abspath(path).startswith(os.path.abspath(d) + os.sep)


def guest_tests(build, repo):
    """(name, exe, test) for tests run in the guest; notes for the rest."""
    res, notes = [], []
    for t in introspect(build, "tests"):
        exe = t["cmd"][0]
        if not in_dir(exe, build):
            notes.append("%s: %s is not built by meson (host-only, not run in the guest)"
                         % (t["name"], exe))
            continue
        res.append((t["name"], exe, t))
    return res, notes


def group_of(name, exe, build):
    """The guest group of a meson test (kernel/README.md, "Guest and results").

    The MADVX_DISABLE and sandbox variants of the conformance suite (and
    madvx-probe --verify, staged apart) form the "compat" group: on 7.3 the
    host runs them (the planner's fallbacks are the same code everywhere);
    the old kernel, whose answers differ from the planner's defaults, runs
    them in the guest (kernel/run: variant_skip).
    """
    if name.startswith("conformance_"):
        return "compat"
    if os.path.relpath(exe, build).startswith("examples" + os.sep):
        return "example"
    return "lib"


# madvx-probe linked statically (tools/meson.build), run in the guest as
# compat/probe_verify: the kernel's answers and the measured lock of every
# advice beside the library's prediction; exit 1 if any differs.
PROBE_TARGET = "madvx-probe-static"


def probe_static(build):
    for tg in introspect(build, "targets"):
        if tg["name"] == PROBE_TARGET and tg["type"] == "executable":
            return tg["filename"][0]
    return None


def examples(build, repo):
    res = []
    for tg in introspect(build, "targets"):
        if tg["type"] != "executable":
            continue
        if not os.path.relpath(tg["defined_in"], repo).startswith("examples" + os.sep):
            continue
        for f in tg["filename"]:
            res.append((tg["name"], f))
    return res


def static_elf(p):
    with open(p, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return False
    out = subprocess.run(["readelf", "-lW", p], capture_output=True, text=True).stdout
    return "INTERP" not in out


def main():
    mode, build, repo = sys.argv[1], sys.argv[2], sys.argv[3]
    tests, notes = guest_tests(build, repo)
    exs = examples(build, repo)
    if mode == "targets":
        outs = {os.path.relpath(e, build) for _, e, _ in tests}
        outs |= {os.path.relpath(f, build) for _, f in exs}
        probe = probe_static(build)
        if probe:
            outs.add(os.path.relpath(probe, build))
        print("\n".join(sorted(outs)))
        return 0
    stage, mult = sys.argv[4], int(sys.argv[5])
    for n in notes:
        print("library: " + n, file=sys.stderr)
    problems, dropped = [], []
    for sub in ("lib", "examples"):
        os.makedirs(os.path.join(stage, "madvx", sub), exist_ok=True)
    lines = []
    seen = set()
    for name, exe, t in tests:
        gname = name.replace(" ", "_").replace("/", "_")
        while gname in seen:
            gname += "_"
        seen.add(gname)
        if not os.path.isfile(exe) or not static_elf(exe):
            dropped.append("test %s: %s did not link statically (does it link the shared "
                           "libmadvx? use libmadvx_static_dep)" % (name, os.path.relpath(exe, build)))
            lines.append(["lib", gname, "0", "77", "/tmp", "-", "NOT-STATIC"])
            continue
        if t.get("should_fail"):
            problems.append("test %s: should_fail is not supported in the guest" % name)
            continue
        args = t["cmd"][1:]
        for a in args:
            if any(c in a for c in " \t") or (os.path.isabs(a) and (in_dir(a, repo) or in_dir(a, build))):
                problems.append("test %s: argument %r cannot be passed to the guest" % (name, a))
        envd = dict(t.get("env") or {})
        # libcheck's per-test timeouts (4 s by default) are for the host:
        # stretch them like ours for TCG.
        envd.setdefault("CK_TIMEOUT_MULTIPLIER", str(mult * 2))
        # The compat slice (seven conformance variants) is bounded in
        # time, 90 s of cases each, so that the old kernel's boot stays
        # near half an hour (the main slice keeps its own 120 s budget).
        if group_of(name, exe, build) == "compat":
            envd.setdefault("MADVX_CONFORMANCE_BUDGET_S", "90")
        env = " ".join("%s=%s" % (k, v) for k, v in sorted(envd.items())
                       if not any(c in v for c in " \t") and k != "MALLOC_PERTURB_") or "-"
        timeout = int(t.get("timeout") or 30)
        # Host timeouts times MULT for TCG, capped so one stuck test cannot
        # eat the whole CI budget.
        timeout = min(timeout * mult, 900) if timeout > 0 else 900
        dst = "/madvx/lib/" + os.path.basename(exe)
        shutil.copy2(exe, stage + dst)
        lines.append([group_of(name, exe, build), gname, str(timeout), "77", "/tmp", env,
                      " ".join([dst] + args)])
    # Examples registered as meson tests ran above, with their arguments;
    # the others run without arguments.
    covered = {os.path.abspath(e) for _, e, _ in tests}
    for name, f in exs:
        if os.path.abspath(f) in covered:
            continue
        if not os.path.isfile(f) or not static_elf(f):
            dropped.append("example %s: %s did not link statically" % (name, os.path.relpath(f, build)))
            lines.append(["example", name, "0", "77", "/tmp", "-", "NOT-STATIC"])
            continue
        dst = "/madvx/examples/" + os.path.basename(f)
        shutil.copy2(f, stage + dst)
        lines.append(["example", name, str(60 * mult), "77", "/tmp", "-", dst])
    probe = probe_static(build)
    if probe and os.path.isfile(probe) and static_elf(probe):
        dst = "/madvx/lib/madvx-probe"
        shutil.copy2(probe, stage + dst)
        lines.append(["compat", "probe_verify", str(120 * mult), "77", "/tmp", "-",
                      dst + " --verify"])
    elif probe:
        dropped.append("madvx-probe --verify: %s did not link statically"
                       % os.path.relpath(probe, build))
        lines.append(["compat", "probe_verify", "0", "77", "/tmp", "-", "NOT-STATIC"])
    with open(os.path.join(stage, "madvx", "lib.list"), "w") as out:
        for ln in lines:
            out.write("\t".join(ln) + "\n")
    for p in problems:
        print("library: " + p, file=sys.stderr)
    for d in dropped:
        print("library: not run in the guest: " + d, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
