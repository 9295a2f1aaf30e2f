#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The release-path system calls of bdwgc's gctest, stock vs patched
# (libmadvx), from the two builds check.sh leaves in WORKDIR (Debian's
# libgc, BUILDROOT/bdwgc, or with --upstream bdwgc master's CMake builds,
# BUILDROOT/bdwgc-upstream: the layout tells which):
#
#   bench.sh WORKDIR [REPS]
#
# Counted by bench/madvx-relcount (examples/common/client.sh, client_bench):
# madvise, process_madvise and PROCMAP_QUERY ioctls, i.e. everything the
# release path makes and everything libmadvx adds, and as root the
# mmap_lock acquisitions inside those calls (incremental mode mprotect()s
# the heap into many VMAs: stock's ranges cross them). Both builds include
# glibc's madvise() of freed thread stacks. Wall time and max RSS from a
# second, untraced run. Cases: default unmap threshold and GC_UNMAP_THRESHOLD=1,
# each incremental (gctest's default) and with GC_DISABLE_INCREMENTAL=1.
# Builds: stock; patched (vouches for a block in one heap section unless
# mprotect-based dirty bits split sections: incremental mode on a kernel
# without soft-dirty); patched with GC_MADVX_VOUCH=1 (vouches there too;
# wrong vouches then cost mmap_read_lock walks, not results).
# Repetitions are interleaved (every build once per repetition); medians of
# REPS (default 3). Prints a table and writes WORKDIR/bench.csv (every run).
# MADVX_RELCOUNT: madvx-relcount (default: WORKDIR/../bench/, the build
# directory check.sh was given).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
RELCOUNT=${MADVX_RELCOUNT:-$WORK/../bench/madvx-relcount}
CLIENT=bdwgc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
if [[ -x $WORK/stock/.libs/gctest && -x $WORK/patched/.libs/gctest ]]; then
	LAYOUT=autotools
elif [[ -x $WORK/stock/gctest && -x $WORK/patched/gctest ]]; then
	LAYOUT=cmake
else
	die "no builds in $WORK: run check.sh (--upstream) first"
fi

CASES=(
	"default|"
	"threshold 1|GC_UNMAP_THRESHOLD=1"
	"default no-incremental|GC_DISABLE_INCREMENTAL=1"
	"threshold 1 no-incremental|GC_UNMAP_THRESHOLD=1 GC_DISABLE_INCREMENTAL=1"
)
BUILDS=(
	"stock|"
	"patched|"
	"patched vouch=1|GC_MADVX_VOUCH=1"
)
# MADVX_BDWGC_BUILDS (comma list of the names above) measures a subset; the
# first one kept (in the order above) is the reference of the ratios.
if [[ -n ${MADVX_BDWGC_BUILDS:-} ]]; then
	all=("${BUILDS[@]}")
	BUILDS=()
	for b in "${all[@]}"; do
		! client_selected "$MADVX_BDWGC_BUILDS" "${b%%|*}" || BUILDS+=("$b")
	done
	((${#BUILDS[@]} > 0)) || die "MADVX_BDWGC_BUILDS=$MADVX_BDWGC_BUILDS names no build"
fi

# The binary itself, not libtool's wrapper script (whose shell would add
# calls of its own; env makes none).  CMake's gctest finds its libgc.so by
# its build rpath.
client_bench_cmd()
{
	local tree=$WORK/${2%% *}
	if [[ $LAYOUT == cmake ]]; then
		CMD=("$tree/gctest")
	else
		CMD=(env LD_LIBRARY_PATH="$tree/.libs" "$tree/.libs/gctest")
	fi
}

client_bench "$WORK/bench.csv" "$REPS"
client_bench_table "$WORK/bench.csv"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $WORK/bench.csv"
