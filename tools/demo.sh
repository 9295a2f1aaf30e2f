#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libmadvx and run the headline demo: the capability probe (as root
# also the measured lock of every advice, madvx-probe --verify), then the
# headline benchmarks p1-p3 of madvx-bench (see BENCHMARKS.md). Arguments
# go to madvx-probe. Takes about a minute; MADVX_DEMO_BENCH=0 skips the
# benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
need_pkgs "${BUILD_PKGS[@]}" gnuplot-nox
[ -f build-demo/build.ninja ] || meson setup build-demo -Dtests=false -Dbuildtype=release
ninja -C build-demo
verify=()
[ "$(id -u)" -eq 0 ] && verify=(--verify)
# --verify exits 1 when a measured lock differs from the prediction: show it, go on.
./build-demo/tools/madvx-probe "${verify[@]}" "$@" ||
	{ rc=$?; [ $rc -eq 1 ] || exit $rc; echo "madvx-probe: a measured lock differs from the prediction (above)"; }
[ "${MADVX_DEMO_BENCH:-1}" = 0 ] && exit 0
echo
echo "=== madvx-bench: libmadvx against what you would write instead (medians; BENCHMARKS.md) ==="
./build-demo/bench/madvx-bench --scenario p1,p2 --reps 7 --plot build-demo/p2.png
./build-demo/bench/madvx-bench --scenario p3 --reps 200
