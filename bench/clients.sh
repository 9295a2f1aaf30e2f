#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The clients benchmark (issue 20): real allocators and a real GC, stock
# and releasing through libmadvx, on the allocator community's workloads.
#
#   bench/clients.sh MIMALLOC_BENCH [REPS]
#
# MIMALLOC_BENCH: a checkout of mimalloc-bench (https://github.com/daanx/
# mimalloc-bench), a git directory or a git URL; its in-tree workloads
# (bench/: larson, mstress, rptest, xmalloc-test, cache-scratch,
# alloc-test, glibc-simple, malloc-large) are compiled here with mimalloc-
# bench's own arguments (bench.sh), threads = nproc, and run with each
# allocator's library preloaded: Debian's jemalloc 5.3.0 and mimalloc
# 2.0.9, each stock and patched (examples/jemalloc, examples/mimalloc: one
# libmadvx batch per purge pass), upstream mimalloc v2.4.1 when
# MADVX_MIMALLOC_UPSTREAM names a checkout of it (examples/mimalloc/check.sh
# --upstream; allocator "mimalloc-upstream"), and jemalloc dev when
# MADVX_JEMALLOC_UPSTREAM names a checkout of it (examples/jemalloc/check.sh
# --upstream; allocator "jemalloc-upstream"), run with
# MALLOC_CONF=process_madvise_max_batch:64: dev's own vectorized purge,
# which is off by default, so "stock" is jemalloc's own batching and
# "patched" the same path through libmadvx. bdwgc: gctest (threads,
# incremental mode), Debian's libgc 8.2.2 stock and patched (examples/bdwgc),
# and bdwgc master when MADVX_BDWGC_UPSTREAM names a checkout of it
# (examples/bdwgc/check.sh --upstream; allocator "bdwgc-upstream").
#
# Every cell: a run traced by bench/madvx-relcount (as root: madvise,
# process_madvise and PROCMAP_QUERY calls of the whole process tree, and
# the mmap_lock acquisitions inside the release calls; strace counts without
# root) and an untraced run (wall time, CPU time - user + kernel, of the
# workload's process tree: for a fixed amount of work, what it cost, less
# moved by other load than wall time -, max RSS, and the workload's own
# score where it has one: larson ops/s and xmalloc-test frees/s, which run
# for a fixed time, and rptest's memory operations per second of work). REPS (default 3) interleaved repetitions, medians.  Prints a
# table and CSV rows; every run in WORK/clients.csv.
#
# Environment: MADVX_CLIENTS_BUILD (libmadvx's build directory, default
# build-clients; the clients' builds go into it, as `meson test --suite
# clients` leaves them), MADVX_CLIENTS_ALLOCATORS (comma list of jemalloc,
# jemalloc-upstream, mimalloc, mimalloc-upstream, bdwgc, bdwgc-upstream;
# default all, the upstream ones when MADVX_JEMALLOC_UPSTREAM /
# MADVX_MIMALLOC_UPSTREAM / MADVX_BDWGC_UPSTREAM are set), MADVX_CLIENTS_WORKLOADS (comma list of the
# workloads above; default all), MADVX_CLIENTS_BASE_LIB (a directory holding
# another libmadvx.so.1, e.g. src/ of a build of the merge base: adds the
# build "patched-base", patched clients run with that library first in
# LD_LIBRARY_PATH, which their RUNPATH yields to; before/after of a change
# in one interleaved run) and MADVX_CLIENTS_BASE_BUILD (where those patched
# clients are: another clients build directory, e.g. one whose patches
# predate the change; default this one), MADVX_CLIENTS_OPTIN (environment
# words, e.g. MIMALLOC_MADVX_PURGE_HOLD=100: adds the build
# "patched-optin", the patched clients run with them: an integration's
# opt-in mode beside its default), MADVX_CLIENTS_SPINNERS (N CPU-bound
# processes running beside every run, default 0: mimalloc's mstress and
# xmalloc-test purge only when their threads are preempted, so on an idle
# machine they make a few release calls or none; spinners make the
# preemption, alike for every build).  Needs the network (apt source packages,
# and MIMALLOC_BENCH when it is a URL), about 15 minutes of builds the first
# time and 30-40 minutes of runs at REPS 3 on 2 cores.
set -euo pipefail

SRCROOT=$(cd "$(dirname "$0")/.." && pwd)
(($# >= 1)) || { sed -n '5,6p' "$0" >&2; exit 2; }
MB_SRC=$1
REPS=${2:-3}
BUILD=${MADVX_CLIENTS_BUILD:-$SRCROOT/build-clients}
ALLOCATORS=${MADVX_CLIENTS_ALLOCATORS:-jemalloc,mimalloc,bdwgc${MADVX_JEMALLOC_UPSTREAM:+,jemalloc-upstream}${MADVX_MIMALLOC_UPSTREAM:+,mimalloc-upstream}${MADVX_BDWGC_UPSTREAM:+,bdwgc-upstream}}
WORKLOADS=${MADVX_CLIENTS_WORKLOADS:-larson,mstress,rptest,xmalloc-test,cache-scratch,alloc-test,glibc-simple,malloc-large}
PROCS=$(nproc)
CLIENT=clients
# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"
# shellcheck source=tools/deps.sh
source "$SRCROOT/tools/deps.sh"
need_pkgs "${BUILD_PKGS[@]}" git strace

# libmadvx, madvx-relcount, and each client's stock and patched builds
# (their check.sh with the fewest tests that still build both trees).
build_all()
{
	[[ -f $BUILD/build.ninja ]] || meson setup "$BUILD" "$SRCROOT" -Dbuildtype=release >/dev/null
	ninja -C "$BUILD" >/dev/null
	if client_selected "$ALLOCATORS" jemalloc; then
		MADVX_JEMALLOC_TESTS=je-purge MADVX_JEMALLOC_CONFIGS=default \
			"$SRCROOT/examples/jemalloc/check.sh" "$SRCROOT" "$BUILD" >"$BUILD/clients-jemalloc.log" 2>&1 ||
			die "jemalloc's builds failed: $BUILD/clients-jemalloc.log"
	fi
	if client_selected "$ALLOCATORS" jemalloc-upstream; then
		[[ -n ${MADVX_JEMALLOC_UPSTREAM:-} ]] ||
			die "jemalloc-upstream needs MADVX_JEMALLOC_UPSTREAM (a jemalloc checkout with its pinned dev commit)"
		MADVX_JEMALLOC_TESTS=je-purge MADVX_JEMALLOC_CONFIGS=default \
			"$SRCROOT/examples/jemalloc/check.sh" --upstream "$SRCROOT" "$BUILD" \
			>"$BUILD/clients-jemalloc-upstream.log" 2>&1 ||
			die "jemalloc dev's builds failed: $BUILD/clients-jemalloc-upstream.log"
	fi
	if client_selected "$ALLOCATORS" mimalloc; then
		MADVX_MIMALLOC_CONFIGS=default \
			"$SRCROOT/examples/mimalloc/check.sh" "$SRCROOT" "$BUILD" >"$BUILD/clients-mimalloc.log" 2>&1 ||
			die "mimalloc's builds failed: $BUILD/clients-mimalloc.log"
	fi
	if client_selected "$ALLOCATORS" mimalloc-upstream; then
		[[ -n ${MADVX_MIMALLOC_UPSTREAM:-} ]] ||
			die "mimalloc-upstream needs MADVX_MIMALLOC_UPSTREAM (a mimalloc checkout with tag v2.4.1)"
		MADVX_MIMALLOC_CONFIGS=default MADVX_MIMALLOC_STRESS="4 25 5" \
			"$SRCROOT/examples/mimalloc/check.sh" --upstream "$SRCROOT" "$BUILD" \
			>"$BUILD/clients-mimalloc-upstream.log" 2>&1 ||
			die "upstream mimalloc's builds failed: $BUILD/clients-mimalloc-upstream.log"
	fi
	if client_selected "$ALLOCATORS" bdwgc; then
		MADVX_BDWGC_CONFIGS=default \
			"$SRCROOT/examples/bdwgc/check.sh" "$SRCROOT" "$BUILD" >"$BUILD/clients-bdwgc.log" 2>&1 ||
			die "bdwgc's builds failed: $BUILD/clients-bdwgc.log"
	fi
	if client_selected "$ALLOCATORS" bdwgc-upstream; then
		[[ -n ${MADVX_BDWGC_UPSTREAM:-} ]] ||
			die "bdwgc-upstream needs MADVX_BDWGC_UPSTREAM (a bdwgc checkout with its pinned commit)"
		MADVX_BDWGC_CONFIGS=default \
			"$SRCROOT/examples/bdwgc/check.sh" --upstream "$SRCROOT" "$BUILD" \
			>"$BUILD/clients-bdwgc-upstream.log" 2>&1 ||
			die "bdwgc master's builds failed: $BUILD/clients-bdwgc-upstream.log"
	fi
}

# mimalloc-bench's source in $MB (a checkout is used in place).
get_mimalloc_bench()
{
	if [[ -d $MB_SRC/bench/larson ]]; then
		MB=$(cd "$MB_SRC" && pwd)
		return
	fi
	MB=$BUILD/mimalloc-bench
	[[ -d $MB/bench/larson ]] && return
	rm -rf "$MB"
	git clone -q "$MB_SRC" "$MB" || die "cannot clone mimalloc-bench from $MB_SRC"
}

# The workloads, compiled as mimalloc-bench's bench/CMakeLists.txt does.
compile_workloads()
{
	local b=$MB/bench o=$BUILD/mb
	mkdir -p "$o"
	log "compiling mimalloc-bench's workloads ($(git -C "$MB" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout"))"
	c++ -O2 -w -std=c++17 -DCPP=1 -o "$o/larson" "$b/larson/larson.cpp" -lpthread
	cc -O2 -w -o "$o/mstress" "$b/mstress/mstress.c" -lpthread
	cc -O2 -w -I"$b/rptest" -o "$o/rptest" "$b/rptest/rptest.c" "$b/rptest/thread.c" \
		"$b/rptest/timer.c" -lpthread -lm
	cc -O2 -w -o "$o/xmalloc-test" "$b/xmalloc-test/xmalloc-test.c" -lpthread
	c++ -O2 -w -std=c++17 -o "$o/cache-scratch" "$b/cache-scratch/cache-scratch.cpp" -lpthread
	c++ -O2 -w -std=c++17 -DBENCH=4 -o "$o/alloc-test" "$b/alloc-test/test_common.cpp" \
		"$b/alloc-test/allocator_tester.cpp" -lpthread
	cc -O2 -w -o "$o/glibc-simple" "$b/glibc-bench/bench-malloc-simple.c" -lpthread
	c++ -O2 -w -std=c++17 -o "$o/malloc-large" "$b/malloc-large/malloc-large.cpp" -lpthread
}

# mimalloc-bench's bench.sh arguments, with its $procs.
workload_args()
{
	case $1 in
	larson) echo "5 8 1000 5000 100 4141 $PROCS" ;;
	mstress) echo "$PROCS 50 25" ;;
	rptest) echo "$PROCS 0 1 2 500 1000 100 8 16000" ;;
	xmalloc-test) echo "-w $PROCS -t 5 -s 64" ;;
	cache-scratch) echo "1 1000 1 2000000 $PROCS" ;;
	alloc-test) echo "$PROCS" ;;
	glibc-simple | malloc-large) echo "" ;;
	*) die "unknown workload $1" ;;
	esac
}

library_of()
{
	case $1 in
	jemalloc) echo "$BUILD/jemalloc/$2/lib/libjemalloc.so.2" ;;
	jemalloc-upstream) echo "$BUILD/jemalloc-upstream/$2/lib/libjemalloc.so.2" ;;
	mimalloc) echo "$BUILD/mimalloc/$2/libmimalloc.so.2" ;;
	mimalloc-upstream) echo "$BUILD/mimalloc-upstream/$2/libmimalloc.so.2" ;;
	esac
}

# Cases "allocator workload"; bdwgc's is "bdwgc gctest".
client_bench_cmd()
{
	local alloc=${1%% *} work=${1#* } tree build=$2 base='' root=$BUILD
	# patched-base: patched clients of MADVX_CLIENTS_BASE_BUILD, with
	# MADVX_CLIENTS_BASE_LIB's libmadvx
	if [[ $build == patched-base ]]; then
		build=patched
		base=$MADVX_CLIENTS_BASE_LIB
		root=${MADVX_CLIENTS_BASE_BUILD:-$BUILD}
	fi
	# patched-optin: the environment is its build's (BUILDS)
	[[ $build == patched-optin ]] && build=patched
	if [[ $alloc == bdwgc ]]; then
		tree=$root/bdwgc/$build
		CMD=(env LD_LIBRARY_PATH="${base:+$base:}$tree/.libs" "$tree/.libs/gctest")
		return
	fi
	if [[ $alloc == bdwgc-upstream ]]; then
		# CMake's gctest: its RUNPATH finds libgc (and libmadvx unless base)
		CMD=(env ${base:+LD_LIBRARY_PATH="$base"} "$root/bdwgc-upstream/$build/gctest")
		return
	fi
	# shellcheck disable=SC2207 # the arguments are words
	CMD=(env ${base:+LD_LIBRARY_PATH="$base"} LD_PRELOAD="$(BUILD=$root library_of "$alloc" "$build")"
		"$BUILD/mb/$work" $(workload_args "$work"))
}

# The workloads' own figure: larson's operations per second, xmalloc-test's
# frees per second (millions), both fixed-duration; rptest's memory
# operations per second of its timed work sections (its wall time is
# mostly the 10 ms sleep in each of its 500 loops).
client_bench_score()
{
	sed -n -e 's/^Throughput = *\([0-9.]*\) operations.*/\1/p' \
		-e 's/^rtime: [0-9.]*, free\/sec: \([0-9.]*\) M.*/\1/p' \
		-e 's/.*[^0-9]\([0-9][0-9]*\) memory ops\/CPU second.*/\1/p' "$1" | head -n1 | grep . || echo -
}

build_all
get_mimalloc_bench
compile_workloads
# rptest writes its results into the working directory: keep them in the build.
cd "$BUILD/mb"
RELCOUNT=$BUILD/bench/madvx-relcount
CASES=()
# jemalloc dev's vectorized purge is off by default (process_madvise_max_batch
# 0: the same madvise() per range as 5.3): its cases turn it on, in both builds.
for a in jemalloc jemalloc-upstream mimalloc mimalloc-upstream; do
	client_selected "$ALLOCATORS" "$a" || continue
	env=""
	[[ $a == jemalloc-upstream ]] && env=MALLOC_CONF=process_madvise_max_batch:64
	for w in larson mstress rptest xmalloc-test cache-scratch alloc-test glibc-simple malloc-large; do
		client_selected "$WORKLOADS" "$w" && CASES+=("$a $w|$env")
	done
done
for a in bdwgc bdwgc-upstream; do
	if client_selected "$ALLOCATORS" "$a"; then
		CASES+=("$a gctest|" "$a gctest threshold 1|GC_UNMAP_THRESHOLD=1")
	fi
done
BUILDS=("stock|" ${MADVX_CLIENTS_BASE_LIB:+"patched-base|"} "patched|"
	${MADVX_CLIENTS_OPTIN:+"patched-optin|$MADVX_CLIENTS_OPTIN"})
if [[ -n ${MADVX_CLIENTS_BASE_LIB:-} ]]; then
	[[ -e $MADVX_CLIENTS_BASE_LIB/libmadvx.so.1 ]] ||
		die "MADVX_CLIENTS_BASE_LIB=$MADVX_CLIENTS_BASE_LIB holds no libmadvx.so.1"
fi
((${#CASES[@]})) || die "no case selected (MADVX_CLIENTS_ALLOCATORS, MADVX_CLIENTS_WORKLOADS)"

SPINNERS=${MADVX_CLIENTS_SPINNERS:-0}
[[ $SPINNERS =~ ^[0-9]+$ ]] || die "MADVX_CLIENTS_SPINNERS=$SPINNERS is not a count"
SPIN_PIDS=()
stop_spinners()
{
	((${#SPIN_PIDS[@]} == 0)) || kill "${SPIN_PIDS[@]}" 2>/dev/null || true
}
trap stop_spinners EXIT
for ((i = 0; i < SPINNERS; i++)); do
	bash -c 'while :; do :; done' &
	SPIN_PIDS+=($!)
done

client_bench "$BUILD/clients.csv" "$REPS"
stop_spinners
SPIN_PIDS=()
client_bench_table "$BUILD/clients.csv"
echo "mimalloc-bench $(git -C "$MB" rev-parse --short HEAD 2>/dev/null || echo '?'); threads $PROCS;" \
	"kernel $(uname -r); load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell," \
	"medians; spinners $SPINNERS; every run: $BUILD/clients.csv"
