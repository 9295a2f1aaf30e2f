#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The decommit system calls and the wall time of mimalloc's test-stress,
# stock vs patched (libmadvx), from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh WORKDIR [REPS]
#
# Counted by bench/madvx-relcount (examples/common/client.sh, client_bench):
# madvise, process_madvise and PROCMAP_QUERY ioctls, i.e. everything the
# decommit path makes and everything libmadvx adds, and as root the
# mmap_lock acquisitions inside those calls. Wall time and max RSS from a
# second, untraced run. Cases: the default delays (25 ms for spans, 500 ms
# for cached segments: the delayed passes the patch batches) and both delays 0 (every decommit immediate,
# one range per call). test-stress runs with check.sh's arguments
# (MADVX_MIMALLOC_STRESS, default "4 25 5"). Repetitions are interleaved
# (every build once per repetition); medians of REPS (default 3). Prints a
# table and CSV rows, and writes WORKDIR/bench.csv (every run).
# MADVX_RELCOUNT: madvx-relcount (default: WORKDIR/../bench/, the build
# directory check.sh was given).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
STRESS=${MADVX_MIMALLOC_STRESS:-4 25 5}
RELCOUNT=${MADVX_RELCOUNT:-$WORK/../bench/madvx-relcount}
CLIENT=mimalloc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
[[ -x $WORK/stock/mimalloc-test-stress && -x $WORK/patched/mimalloc-test-stress ]] ||
	die "no builds in $WORK: run check.sh first"

CASES=(
	"default delays|"
	"delays 0|MIMALLOC_DECOMMIT_DELAY=0 MIMALLOC_SEGMENT_DECOMMIT_DELAY=0"
)
BUILDS=("stock|" "patched|")

client_bench_cmd()
{
	# shellcheck disable=SC2206 # $STRESS: test-stress's arguments, words
	CMD=("$WORK/$2/mimalloc-test-stress" $STRESS)
}

client_bench "$WORK/bench.csv" "$REPS"
client_bench_table "$WORK/bench.csv"
echo "test-stress $STRESS; load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $WORK/bench.csv"
