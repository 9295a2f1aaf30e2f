#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bdwgc releasing through libmadvx, checked with bdwgc's own test suite:
# Debian's libgc 1:8.2.2-3 source package, or upstream master at a pinned
# commit.
#
#   check.sh [--upstream] SRCROOT BUILDROOT [WORKDIR]
#
# Debian (default): gets the source package through a private apt
# configuration (examples/common/debsrc.sh, shared with examples/mimalloc),
# builds it twice with autotools - stock, and with libgc-8.2.2-madvx.patch
# (the madvise(MADV_DONTNEED) of block_unmap_inner() batched under the
# allocator lock, flushed at the end of GC_unmap_old() and
# GC_merge_unmapped()) linked against the libmadvx of BUILDROOT - and runs
# `make check` of both.
# --upstream: exports commit $COMMIT (below) of the checkout (path, git
# directory or git URL) MADVX_BDWGC_UPSTREAM names
# (examples/common/upstream.sh), applies bdwgc-master-madvx.patch (the same
# batching, ported, with the hints kept until a block is reused or a
# bound is reached), builds the unpatched and the patched tree with CMake
# (-Denable_munmap=ON -Denable_threads=ON -Dbuild_tests=ON) and runs
# bdwgc's ctest of both.
# Either way every patched file must preprocess, with the stock build's
# flags and without -DGC_USE_MADVX, to the unpatched tokens (checked
# before the patched build), every configuration of CONFIGS below runs,
# and the patched library must import madvx_ symbols, the stock one
# none.  Exit 0 when every run passes, 1 on any failure, 77 (with the
# reason) when the source cannot be had.  The work tree (default
# BUILDROOT/bdwgc or BUILDROOT/bdwgc-upstream) keeps both builds for
# bench.sh.
set -euo pipefail

FLAVOUR=debian
if [[ ${1:-} == --upstream ]]; then
	FLAVOUR=upstream
	shift
fi
SRCROOT=$(cd "$1" && pwd)
BUILDROOT=$(cd "$2" && pwd)
HERE=$SRCROOT/examples/bdwgc
CACHE=${MADVX_CLIENTS_CACHE:-/var/cache/madvx-clients}/libgc
JOBS=${MADVX_CLIENTS_JOBS:-2}
if [[ $FLAVOUR == upstream ]]; then
	# bdwgc has no release of master: a commit, pinned (8.3.0 in development).
	COMMIT=9d83c00b5c146863397c31dbac0892c762e7530f
	PATCH=$HERE/bdwgc-master-madvx.patch
	WORK=${3:-$BUILDROOT/bdwgc-upstream}
	CLIENT=bdwgc-upstream
else
	PATCH=$HERE/libgc-8.2.2-madvx.patch
	WORK=${3:-$BUILDROOT/bdwgc}
	CLIENT=bdwgc
fi

# name|environment of one make check (ctest) run: configs.sh, shared with
# the test kernel's static runs (examples/common/kernel-clients.sh).
# shellcheck source=examples/bdwgc/configs.sh
source "$HERE/configs.sh"
CONFIGS=("${BDWGC_CONFIGS[@]}")

# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"	# log, die, skip, client_*
if [[ $FLAVOUR == upstream ]]; then
	[[ -n ${MADVX_BDWGC_UPSTREAM:-} ]] ||
		skip "MADVX_BDWGC_UPSTREAM is not set (a bdwgc checkout, git directory or git URL with commit $COMMIT; never cloned by default)"
	client_need_tools "needed to get and build bdwgc master" \
		git tar cmake ctest make cc patch nm
else
	client_need_tools "Debian tools needed to get and build libgc" \
		apt-get apt-cache dpkg-source make cc patch sha256sum nm
fi
client_need_shared "$BUILDROOT"

# shellcheck source=examples/common/debsrc.sh
source "$SRCROOT/examples/common/debsrc.sh"
# shellcheck source=examples/common/upstream.sh
source "$SRCROOT/examples/common/upstream.sh"

# configure + make (library and test programs) in $1, a fresh source tree.
build_stock()
{
	local dir=$1
	log "configure + make in $dir"
	(cd "$dir" && ./configure --with-libatomic-ops=none --disable-docs \
		>configure.out 2>&1 && make -j"$JOBS" >make.out 2>&1 &&
		make -j"$JOBS" check TESTS= >make-check-build.out 2>&1) ||
		{ tail -n 40 "$dir"/configure.out "$dir"/make*.out >&2; die "building $dir failed"; }
}

# The patched tree: a copy of the configured stock tree (configure's answers
# are the same; running it again costs minutes) with the patch applied ...
patch_tree()
{
	local dir=$1
	log "copy + patch in $dir"
	rm -rf "$dir"
	cp -a "$WORK/stock" "$dir"
	(cd "$dir" && patch -p1 --quiet <"$PATCH") ||
		die "${PATCH##*/} does not apply"
}

# ... and everything rebuilt (the patch touches gc_priv.h, which every
# object includes) with libmadvx added to configure's own flags.
build_patched()
{
	local dir=$1 cppflags ldflags libs
	log "make in $dir"
	cppflags=$(sed -n 's/^CPPFLAGS = //p' "$dir/Makefile")
	ldflags=$(sed -n 's/^LDFLAGS = //p' "$dir/Makefile")
	libs=$(sed -n 's/^LIBS = //p' "$dir/Makefile")
	cppflags="$cppflags -DGC_USE_MADVX -I$SRCROOT/include -I$BUILDROOT/include"
	ldflags="$ldflags -L$BUILDROOT/src -Wl,-rpath,$BUILDROOT/src"
	libs="$libs -lmadvx"
	# Two make runs, as for stock: goals of one parallel make race.
	(cd "$dir" && make clean >/dev/null 2>&1 &&
		make -j"$JOBS" CPPFLAGS="$cppflags" LDFLAGS="$ldflags" LIBS="$libs" >make.out 2>&1 &&
		make -j"$JOBS" CPPFLAGS="$cppflags" LDFLAGS="$ldflags" LIBS="$libs" check TESTS= \
			>>make.out 2>&1) ||
		{ tail -n 40 "$dir"/make.out >&2; die "building $dir failed"; }
	# make check gets them too: whatever it rebuilds keeps libmadvx.
	printf '%s\n' "$cppflags" "$ldflags" "$libs" >"$dir/madvx-make-vars"
}

# make check in $1 with the environment $2; prints "PASS n FAIL m".
run_check()
{
	local dir=$1 envs=$2 sum pass fail v vars=()
	if [[ -f $dir/madvx-make-vars ]]; then
		mapfile -t v <"$dir/madvx-make-vars"
		vars=(CPPFLAGS="${v[0]}" LDFLAGS="${v[1]}" LIBS="${v[2]}")
	fi
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words
	env $envs make -C "$dir" -j"$JOBS" "${vars[@]}" check >"$dir/check.out" 2>&1 || true
	sum=$(cat "$dir/test-suite.log" 2>/dev/null || true)
	pass=$(awk '/^# PASS:/ { print $3 }' <<<"$sum")
	fail=$(awk '/^# (FAIL|ERROR|XPASS):/ { n += $3 } END { print n + 0 }' <<<"$sum")
	echo "PASS ${pass:-0} FAIL $fail"
}

# Debian: automake compiles libgc's objects (extra/gc.lo, as upstream's)
# with $(LTCOMPILE), i.e. the Makefile's variables below, which make
# itself expands, and libtool adds its PIC flags for the shared library.
# Per-target flags (libgc_la_CFLAGS, ...) would be missed: there are none.
debian_guard_flags()
{
	local dir=$WORK/stock vars pic
	# shellcheck disable=SC2016 # $(...) of make, not of the shell
	vars=$(printf '%s\n\t%s\n' madvx-guard-flags: \
		'@echo "$(libgc_la_CPPFLAGS)$(libgc_la_CFLAGS)|$(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS)"' |
		make -s --no-print-directory -C "$dir" -f Makefile -f - madvx-guard-flags) ||
		die "cannot read the compile flags of $dir/Makefile"
	[[ ${vars%%|*} == "" ]] || die "libgc has flags of its own in $dir/Makefile: ${vars%%|*}"
	pic=$(sed -n '/^pic_flag=/ { s///; s/"//g; p; q }' "$dir/libtool")
	[[ -n $pic ]] || die "no pic_flag in $dir/libtool"
	grep -q '^#define USE_MUNMAP ' "$dir/include/config.h" ||
		die "the stock build does not define USE_MUNMAP ($dir/include/config.h)"
	echo "${vars#*|} $pic" | sed "s|$dir/||g; s|$dir|.|g"
}

# ---- upstream master: CMake and ctest ----

# The unpatched source in $WORK/fresh, as it is now.  A plain source tree
# is taken as it is (upstream.sh): the version and the patch's context
# are what check it.
upstream_get_source()
{
	upstream_extract "$MADVX_BDWGC_UPSTREAM" "$COMMIT" "$WORK/fresh"
	grep -q '^# *define GC_TMP_VERSION_MINOR 3 *$' "$WORK/fresh/include/gc/gc_version.h" ||
		die "$UPSTREAM_DESC is not bdwgc 8.3 (include/gc/gc_version.h)"
	log "source: $UPSTREAM_DESC"
}

# bdwgc's options: unmapping, threads and the tests on (16 of them; C++'s
# cpptest and treetest need -Denable_cplusplus=ON), its default build
# type, no documentation.  A build is redone when they change (its stamp
# holds them).
CMAKE_OPTS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -Denable_munmap=ON
	-Denable_threads=ON -Dbuild_tests=ON -Denable_docs=OFF)

# cmake + make of source tree $2 into $1 with CMAKE_OPTS, extra C flags $3
# and linker flags $4.
upstream_build()
{
	local dir=$1 src=$2 cflags=$3 ldflags=$4
	log "cmake + make in $dir"
	rm -rf "$dir"
	if ! cmake -S "$src" -B "$dir" "${CMAKE_OPTS[@]}" \
		-DCMAKE_C_FLAGS="$cflags" \
		-DCMAKE_SHARED_LINKER_FLAGS="$ldflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
		${ldflags:+-DCMAKE_C_STANDARD_LIBRARIES=-lmadvx} >"$dir.cmake.out" 2>&1 ||
	   ! make -C "$dir" -j"$JOBS" >"$dir.make.out" 2>&1; then
		tail -n 40 "$dir.cmake.out" "$dir.make.out" >&2 || true
		die "building $dir failed"
	fi
}

# The flags the stock build compiles libgc with, relative to the top of
# a source tree, for check_guard.  Upstream: CMake's flags.make of libgc
# (one object: extra/gc.c includes the other files).
upstream_guard_flags()
{
	local flags defs incs cfl
	flags=$WORK/stock/CMakeFiles/gc.dir/flags.make
	[[ -f $flags ]] || die "no $flags: cannot check the patch's guard"
	defs=$(sed -n 's/^C_DEFINES = //p' "$flags")
	incs=$(sed -n 's/^C_INCLUDES = //p' "$flags" | sed "s|$WORK/pristine/||g; s|$WORK/pristine|.|g")
	cfl=$(sed -n 's/^C_FLAGS = //p' "$flags")
	[[ $defs == *-DUSE_MUNMAP* ]] || die "the stock build does not define USE_MUNMAP ($flags)"
	echo "$defs $incs $cfl"
}

# ctest of build $1 with the environment $2, its output in $3; prints
# "PASS n FAIL m" and the failed tests' names.
upstream_run_check()
{
	local dir=$1 envs=$2 out=$3 line total failed names
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words
	env $envs ctest --test-dir "$dir" -j"$JOBS" --timeout 900 \
		--output-on-failure >"$out" 2>&1 || true
	line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" || true)
	total=$(sed -n 's/.* out of \([0-9]*\).*/\1/p' <<<"$line")
	failed=$(sed -n 's/.*passed, \([0-9]*\) tests\{0,1\} failed.*/\1/p' <<<"$line")
	if [[ -z $total || -z $failed ]]; then
		echo "PASS 0 FAIL 0 (no ctest summary)"
		return
	fi
	names=$(sed -n '/tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\).*/\1/p' "$out" | tr '\n' ' ')
	echo "PASS $((total - failed)) FAIL $failed${names:+ (${names% })}"
}

# Without GC_USE_MADVX the patched files are the stock ones: every .c file
# the patch touches preprocesses, with the stock build's flags $3, to the
# same tokens in the patched tree $2 as in the unpatched tree $1, and to
# others with -DGC_USE_MADVX.  Run in each tree with relative paths, so
# that __FILE__ is the same.
check_guard()
{
	local old=$1 new=$2 flags=$3 f a b files
	mapfile -t files < <(sed -n 's|^+++ b/||p' "$PATCH")
	((${#files[@]} > 0)) || die "no file names in ${PATCH##*/}"
	for f in "${files[@]}"; do
		[[ $f == *.c ]] || continue	# headers: through the .c files
		# shellcheck disable=SC2086 # compiler flags: words
		a=$(cd "$old" && cc -E -P $flags "$f" | tr -d ' \t\n') ||
			die "cannot preprocess $old/$f"
		# shellcheck disable=SC2086 # as above
		b=$(cd "$new" && cc -E -P $flags "$f" | tr -d ' \t\n') ||
			die "cannot preprocess $new/$f"
		[[ -n $a && $a == "$b" ]] ||
			die "$f without -DGC_USE_MADVX differs from the unpatched source"
		# shellcheck disable=SC2086 # as above
		b=$(cd "$new" && cc -E -P -DGC_USE_MADVX -I"$SRCROOT/include" \
			-I"$BUILDROOT/include" $flags "$f" | tr -d ' \t\n') ||
			die "cannot preprocess $new/$f with -DGC_USE_MADVX"
		[[ $a != "$b" ]] || die "$f with -DGC_USE_MADVX is the unpatched source"
	done
	log "guard: ${PATCH##*/} without -DGC_USE_MADVX is the stock source"
}

mkdir -p "$WORK"
if [[ $FLAVOUR == upstream ]]; then
	upstream_get_source
	# Each build is redone when what it is built from changed (a stamp
	# per build, written only after a complete build).
	if [[ ! -f $WORK/src.ready || $WORK/src.ready -ot $PATCH ]] ||
	   ! diff -rq "$WORK/fresh" "$WORK/pristine" >/dev/null 2>&1; then
		rm -f "$WORK/src.ready" "$WORK/stock.built" "$WORK/patched.built"
		client_prepare_source "$WORK" "$PATCH"
		touch "$WORK/src.ready"
	fi
	rm -rf "$WORK/fresh"
	if [[ ! -f $WORK/stock.built || $(<"$WORK/stock.built") != "${CMAKE_OPTS[*]}" ]]; then
		rm -f "$WORK/stock.built"
		upstream_build "$WORK/stock" "$WORK/pristine" "" ""
		echo "${CMAKE_OPTS[*]}" >"$WORK/stock.built"
	fi
	flags=$(upstream_guard_flags)
	check_guard "$WORK/pristine" "$WORK/src" "$flags"
	if [[ ! -f $WORK/patched.built || $(<"$WORK/patched.built") != "${CMAKE_OPTS[*]}" ||
	      $WORK/patched.built -ot $BUILDROOT/src/libmadvx.so ]]; then
		rm -f "$WORK/patched.built"
		upstream_build "$WORK/patched" "$WORK/src" \
			"-DGC_USE_MADVX -I$SRCROOT/include -I$BUILDROOT/include" \
			"-L$BUILDROOT/src -Wl,-rpath,$BUILDROOT/src"
		echo "${CMAKE_OPTS[*]}" >"$WORK/patched.built"
	fi
	client_check_symbols "$WORK/stock/libgc.so" "$WORK/patched/libgc.so"
else
	debsrc_fetch libgc 1:8.2.2-3 bookworm
	# Each tree is rebuilt from the verified source when what it is built
	# from changed (a stamp per tree, written only after a complete build).
	if [[ ! -f $WORK/stock.built || $WORK/stock.built -ot $DSC ]]; then
		rm -f "$WORK/stock.built"
		debsrc_extract "$WORK/stock"
		build_stock "$WORK/stock"
		touch "$WORK/stock.built"
	fi
	stale=0
	if [[ ! -f $WORK/patched.built || $WORK/patched.built -ot $WORK/stock.built ||
	      $WORK/patched.built -ot $PATCH ||
	      $WORK/patched.built -ot $BUILDROOT/src/libmadvx.so ]]; then
		stale=1
		rm -f "$WORK/patched.built"
		patch_tree "$WORK/patched"
	fi
	# Before the build, which takes minutes; in the source files, which
	# the build leaves as they are.
	flags=$(debian_guard_flags)
	check_guard "$WORK/stock" "$WORK/patched" "$flags"
	if ((stale)); then
		build_patched "$WORK/patched"
		touch "$WORK/patched.built"
	fi
	client_check_symbols "$WORK/stock/.libs/libgc.so" "$WORK/patched/.libs/libgc.so"
fi

# MADVX_BDWGC_CONFIGS (comma list of names above) runs a subset: CI runs
# two of the five to stay in its time budget (tools/test.sh).
fail=0
ran=0
for c in "${CONFIGS[@]}"; do
	name=${c%%|*}
	envs=${c#*|}
	client_selected "${MADVX_BDWGC_CONFIGS:-}" "$name" || continue
	ran=$((ran + 1))
	for v in stock patched; do
		if [[ $FLAVOUR == upstream ]]; then
			out=$WORK/$v-$name.ctest.out
			res=$(upstream_run_check "$WORK/$v" "$envs" "$out")
		else
			out=$WORK/$v-$name.test-suite.log
			res=$(run_check "$WORK/$v" "$envs")
			cp "$WORK/$v/test-suite.log" "$out" 2>/dev/null || true
		fi
		printf '%-15s %-8s %s\n' "$name" "$v" "$res"
		if [[ $res != *"FAIL 0"* || $res == "PASS 0 "* ]]; then
			fail=1
			tail -n 40 "$out" 2>/dev/null || true
		fi
	done
done
((ran > 0)) || die "MADVX_BDWGC_CONFIGS=$MADVX_BDWGC_CONFIGS names no configuration"
exit $fail
