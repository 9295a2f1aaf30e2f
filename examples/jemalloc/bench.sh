#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The purge system calls and the wall time of a purge-heavy churn
# (je-purge.c, built by check.sh) on jemalloc, stock vs patched (libmadvx),
# from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh WORKDIR [REPS]
#
# je-purge runs with the build's libjemalloc.so.2 preloaded (it replaces
# glibc's malloc, as in any program run with jemalloc). Counted by
# bench/madvx-relcount (examples/common/client.sh, client_bench): madvise,
# process_madvise and PROCMAP_QUERY ioctls, i.e. everything the purge path
# makes and everything libmadvx adds (both builds include glibc's madvise()
# of exited threads' stacks), and as root the mmap_lock acquisitions inside
# those calls. Wall time and max RSS from a second, untraced run. Cases: jemalloc's default
# decay (dirty extents purged along a 10 s curve, at epoch advances: passes
# of several extents), decay 0 (every freed extent purged at once) and
# decay 1 s (dirty and muzzy: MADV_FREE, then MADV_DONTNEED). Repetitions are
# interleaved (every build once per repetition); medians of REPS (default
# 3). Prints a table and CSV rows, and writes WORKDIR/bench.csv (every run).
# MADVX_RELCOUNT: madvx-relcount (default: WORKDIR/../bench/, the build
# directory check.sh was given).
# MADVX_JEMALLOC_PURGE sets je-purge's arguments (default "2 10000 128 0":
# no calloc(), whose zeroing of a reused extent is a madvise(MADV_DONTNEED)
# too, outside any purge pass).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
ARGS=${MADVX_JEMALLOC_PURGE:-2 10000 128 0}
RELCOUNT=${MADVX_RELCOUNT:-$WORK/../bench/madvx-relcount}
CLIENT=jemalloc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
[[ -x $WORK/je-purge && -f $WORK/stock/lib/libjemalloc.so.2 &&
   -f $WORK/patched/lib/libjemalloc.so.2 ]] ||
	die "no je-purge and builds in $WORK: run check.sh first"
[[ ! $WORK/je-purge -ot $(dirname "$0")/je-purge.c ]] ||
	die "$WORK/je-purge is older than je-purge.c: run check.sh again"

CASES=(
	"default decay|"
	"decay 0|MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0"
	"decay 1 s|MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:1000"
)
BUILDS=("stock|" "patched|")

client_bench_cmd()
{
	# shellcheck disable=SC2206 # $ARGS: je-purge's arguments, words
	CMD=(env LD_PRELOAD="$WORK/$2/lib/libjemalloc.so.2" "$WORK/je-purge" $ARGS)
}

client_bench "$WORK/bench.csv" "$REPS"
client_bench_table "$WORK/bench.csv"
echo "je-purge $ARGS; load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $WORK/bench.csv"
