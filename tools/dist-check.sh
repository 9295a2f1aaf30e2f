#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a distribution build does with a release: `meson dist` a tarball of
# HEAD, unpack it in a scratch dir, run the README's "Build and install"
# commands there as written (meson setup / ninja / meson test / ninja install,
# the install into a DESTDIR), the build and tests as an unprivileged user
# (nobody, when run as root) and the test step without network (unshare -n).
# Tests that need root or a kernel feature skip with their reason; the skips
# are listed. Usage: tools/dist-check.sh BUILDDIR (a configured build of this
# tree, used only for `meson dist`).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
rm -rf "$build/meson-dist"
# --no-tests: the tarball is tested below, the way a packager would.
# --allow-dirty: meson dist archives the last commit; uncommitted changes are
# not in it (said below), but a developer's run of tools/test.sh goes on.
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] ||
	echo "dist: note: uncommitted changes are not in the tarball (it is HEAD)"
meson dist -C "$build" --formats xztar --no-tests --allow-dirty >/dev/null
tarball=$(ls "$build"/meson-dist/*.tar.xz)
work=$(mktemp -d /tmp/madvx-dist.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar tJf "$tarball" >"$work/list"
echo "dist: $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB, $(grep -vc '/$' "$work/list") files)"

# meson dist archives what git tracks: no build dirs, and the license files.
if grep -qE '/(build[^/]*|\.git)/' "$work/list"; then
	echo "FAIL: the tarball carries build or .git files"; exit 1
fi
for f in LICENSE NEWS kernel/patches/LICENSE docs/ABI.md; do
	grep -q "/$f\$" "$work/list" || { echo "FAIL: $f not in the tarball"; exit 1; }
done
tar xJf "$tarball" -C "$work"
tree=$(echo "$work"/libmadvx-*)

# As nobody when we are root: a packager's build never runs as root.
as_user=()
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	chown -R 65534:65534 "$work"
	chmod 755 "$work"
	as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups --reset-env --)
	who="nobody"
else
	who="$(id -un)"
fi
no_net=()
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	no_net=(unshare -n --)
fi

# The README's block of build commands, run as written in the unpacked tree.
mapfile -t cmds < <(python3 - "$tree/README.md" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
sec = text[text.index("## Build and install"):]
block = re.search(r"^```sh\n(.*?)^```", sec, re.S | re.M).group(1)
for line in block.splitlines():
    if line.startswith(("meson ", "ninja ")):
        print(line)
EOF
)
[ ${#cmds[@]} -ge 4 ] || { echo "FAIL: README's build block not found"; exit 1; }
t0=$SECONDS
for c in "${cmds[@]}"; do
	# shellcheck disable=SC2206 # each command line is split into words on purpose
	argv=($c)
	case "$c" in
	"meson test"*)
		echo "dist: \$ $c   (as $who, ${no_net[*]:+no network})"
		# The test sizes tools/test.sh chose for this stage survive --reset-env.
		sizes=()
		for v in MADVX_CONFORMANCE_CASES MADVX_CONFORMANCE_BUDGET_S MADVX_FORK_STRESS; do
			[ -n "${!v:-}" ] && sizes+=("$v=${!v}")
		done
		(cd "$tree" && "${no_net[@]}" "${as_user[@]}" env PATH="$PATH" HOME=/tmp "${sizes[@]}" \
			"${argv[@]}" --num-processes 2 --print-errorlogs >"$work/test.log" 2>&1) ||
			{ tail -n 60 "$work/test.log"; echo "FAIL: meson test of the tarball"; exit 1; }
		grep -E '^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass): ' "$work/test.log" | tr -s ' ' | paste -sd' '
		;;
	*" install"*)
		echo "dist: \$ $c   (into a DESTDIR)"
		(cd "$tree" && DESTDIR="$work/dest" "${argv[@]}" >"$work/install.log" 2>&1) ||
			{ tail -n 30 "$work/install.log"; echo "FAIL: $c"; exit 1; }
		;;
	*)
		echo "dist: \$ $c   (as $who)"
		(cd "$tree" && "${as_user[@]}" env PATH="$PATH" HOME=/tmp "${argv[@]}" >"$work/step.log" 2>&1) ||
			{ tail -n 40 "$work/step.log"; echo "FAIL: $c"; exit 1; }
		;;
	esac
done
# Which tests skipped, and why (meson keeps the output of each test).
python3 - "$tree/build/meson-logs/testlog.json" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] == "SKIP":
        out = (t.get("stdout") or "").strip().splitlines()
        why = next((l for l in reversed(out) if "SKIP" in l or "skip" in l), out[-1] if out else "")
        print(f"dist: skipped {t['name']}: {why.strip()[:150]}")
EOF
echo "dist: tarball built, tested and installed as written in $((SECONDS - t0)) s"
