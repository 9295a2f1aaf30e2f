#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libmadvx and run the headline demo: the capability probe (as root
# also the measured lock of every advice, madvx-probe --verify), then the
# headline benchmarks p1-p3 of madvx-bench (see BENCHMARKS.md). Arguments
# go to madvx-probe. Takes about a minute; MADVX_DEMO_BENCH=0 skips the
# benchmarks. Writes only into build-demo/ (the plot: build-demo/p2.png; the
# tracked bench/plots/p2.png is never touched). Exit 3 when a benchmark
# target was missed on this machine (the MISSED lines say which).
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
need_pkgs "${BUILD_PKGS[@]}" gnuplot-nox
[ -f build-demo/build.ninja ] || meson setup build-demo -Dtests=disabled -Dbuildtype=release
ninja -C build-demo
verify=()
[ "$(id -u)" -eq 0 ] && verify=(--verify)
# --verify exits 1 when a measured lock differs from the prediction: show it, go on.
./build-demo/tools/madvx-probe "${verify[@]}" "$@" ||
	{ rc=$?; [ $rc -eq 1 ] || exit $rc; echo "madvx-probe: a measured lock differs from the prediction (above)"; }
[ "${MADVX_DEMO_BENCH:-1}" = 0 ] && exit 0
echo
echo "=== madvx-bench: libmadvx against what you would write instead (medians; BENCHMARKS.md) ==="
missed=0
# --check: exit 3 when a target is MISSED; any other failure stops the demo.
for args in "--scenario p1,p2 --reps 7 --plot build-demo/p2.png" "--scenario p3 --reps 200"; do
	# shellcheck disable=SC2086 # $args is an argument list: split on purpose
	./build-demo/bench/madvx-bench --check $args || { rc=$?; [ $rc -eq 3 ] || exit $rc; missed=1; }
done
if [ $missed -eq 1 ]; then
	echo
	echo "demo: a benchmark target was MISSED on this machine (see the MISSED lines above;"
	echo "      BENCHMARKS.md has the targets and what load does to them)"
	exit 3
fi
