#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The client benchmarks' tables (examples/common/client.sh: what
# bench/clients.sh and the examples' bench.sh print) on a CSV whose answers
# are known: medians per cell with ratios to the first build, CPU time as
# user + sys, and per repetition the geometric mean of the ratios, its
# bootstrap interval and the count of higher repetitions.
set -uo pipefail
client_sh=$1
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
CLIENT=client-bench-table	# the name log() and die() print
export CLIENT
# shellcheck source=examples/common/client.sh
source "$client_sh"

# Four repetitions.  patched: half stock's calls, 1.5x its wall time (so
# the median is 1.50x), CPU time 0.8x in each repetition (user and sys
# alike), score 2x in three and 0.5x in one (geometric mean 2^(2/4) =
# 1.414x, higher in 3 of 4).
{
	echo "$CLIENT_BENCH_HEADER"
	for r in 1 2 3 4; do
		w=$((1000 * r))
		echo "w x,stock,$r,100,0,0,0,$((100 * r)),0,0,0,0,1.0,$w,2048,$((10 * r)),$((100 * r)),$((100 * r))"
		sc=$((20 * r))
		[ $r -eq 4 ] && sc=20
		echo "w x,patched,$r,50,0,0,0,$((50 * r)),0,0,0,0,1.0,$((w * 3 / 2)),2048,$sc,$((80 * r)),$((80 * r))"
	done
} >"$t/c.csv"
client_bench_table "$t/c.csv" >"$t/out" 2>&1

expect()	# PATTERN (a whole line, grep -x)
{
	grep -qx -- "$1" "$t/out" && return
	echo "FAIL: no line '$1'"
	fail=1
}
# Medians (the lower of an even count): stock total 200, wall 2000, CPU
# 400, score 20; patched 100, 3000, 320, 20 (of 20, 20, 40, 60).
expect "w x,stock,100,0,0,0,200,0,0,0,0,1.0,2000,2048,20,400"
expect "w x,patched,50,0,0,0,100,0,0,0,0,1.0,3000,2048,20,320"
expect "w x,patched,total,0.500,0.500,0.500,0,4"
expect "w x,patched,wall_ms,1.500,1.500,1.500,4,4"
expect "w x,patched,cpu_ms,0.800,0.800,0.800,0,4"
expect "w x,patched,score,1.414,[0-9.]*,[0-9.]*,3,4"
# The score's interval: resamples of {2, 2, 2, 0.5} lie within 0.5-2x
# and hold the mean of the sample between them.
lo=$(grep '^w x,patched,score,' "$t/out" | cut -d, -f5)
hi=$(grep '^w x,patched,score,' "$t/out" | cut -d, -f6)
awk -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(lo >= 0.5 && lo < 1.414 && hi > 1.414 && hi <= 2.0) }' ||
	{ echo "FAIL: score interval $lo-$hi, want within 0.5-2.0 around 1.414"; fail=1; }
expect "| w x | patched | score | 1.41x | $(printf %.2f-%.2f "$lo" "$hi")x | 3 of 4 |"
[ $fail -eq 0 ] || sed 's/^/  /' "$t/out"
exit $fail
