#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The purge system calls and the wall time of a purge-heavy churn
# (je-purge.c, built by check.sh) on jemalloc, stock vs patched (libmadvx),
# from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh [--upstream] WORKDIR [REPS]
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
#
# --upstream: the builds of check.sh --upstream (jemalloc dev), where the
# patch routes jemalloc's own process_madvise() batching: three builds per
# case, stock as configured by default (process_madvise_max_batch 0: one
# madvise() per range), stock with jemalloc's own batching
# (process_madvise_max_batch:64: raw process_madvise() vectors) and
# patched with the same setting (those vectors through libmadvx).  Cases:
# decay 0 (the decay passes, pac.c), decay 1 s (longer passes: dirty
# extents go muzzy with MADV_FREE, muzzy ones are purged in vectors) and
# hpa (hpa:true with decay 1 s: the HPA's purge batches for sizes up to
# hpa_slab_max_alloc, 64 KiB, the decay passes for the rest).  Default arguments
# "2 3000 128 0" (decay 0 makes ~2 purges per operation).
set -euo pipefail

FLAVOUR=debian
if [[ ${1:-} == --upstream ]]; then
	FLAVOUR=upstream
	shift
fi
WORK=$(cd "$1" && pwd)
REPS=${2:-3}
ARGS=${MADVX_JEMALLOC_PURGE:-2 10000 128 0}
[[ $FLAVOUR == debian ]] || ARGS=${MADVX_JEMALLOC_PURGE:-2 3000 128 0}
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

# Upstream: a case's MALLOC_CONF and a build's are one variable, so
# client_bench_cmd joins them (CASES and BUILDS carry no environment).
if [[ $FLAVOUR == upstream ]]; then
	declare -A CASE_CONF=(
		["decay 0"]="dirty_decay_ms:0,muzzy_decay_ms:0"
		["decay 1 s"]="dirty_decay_ms:1000,muzzy_decay_ms:1000"
		["hpa"]="hpa:true,dirty_decay_ms:1000,muzzy_decay_ms:1000"
	)
	declare -A BUILD_CONF=(
		[stock]="process_madvise_max_batch:0"
		[stock-pm64]="process_madvise_max_batch:64"
		[patched-pm64]="process_madvise_max_batch:64"
	)
	CASES=("decay 0|" "decay 1 s|" "hpa|")
	BUILDS=("stock|" "stock-pm64|" "patched-pm64|")

	client_bench_cmd()
	{
		# shellcheck disable=SC2206 # as above
		CMD=(env MALLOC_CONF="${CASE_CONF[$1]},${BUILD_CONF[$2]}"
			LD_PRELOAD="$WORK/${2%-pm64}/lib/libjemalloc.so.2" "$WORK/je-purge" $ARGS)
	}
fi

client_bench "$WORK/bench.csv" "$REPS"
client_bench_table "$WORK/bench.csv"
echo "je-purge $ARGS; load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $WORK/bench.csv"
