#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# mimalloc purging through libmadvx, checked with mimalloc's own tests:
# Debian's 2.0.9+ds-2 source package, or upstream's v2.4.1.
#
#   check.sh [--upstream] SRCROOT BUILDROOT [WORKDIR]
#
# Debian (default): gets the source package through a private apt
# configuration (examples/common/debsrc.sh) and applies
# mimalloc-2.0.9-madvx.patch (decommit passes through one process-wide
# libmadvx batch: mi_segment_delayed_decommit() and the segment cache's
# mi_commit_mask_decommit(), flushed before the pass returns; the pass of
# an abandoning thread left pending until a reuse of its segment).
# --upstream: exports tag v2.4.1 of the checkout (path, git directory or
# git URL) MADVX_MIMALLOC_UPSTREAM names (examples/common/upstream.sh) and
# applies mimalloc-2.4.1-madvx.patch (purge passes through one
# process-wide batch: mi_segment_try_purge() and mi_arena_try_purge(),
# flushed before the segment or the claimed arena blocks are given up; the
# pass of an abandoning thread left pending until a reuse of its segment).
# Either tree is built twice with CMake (RelWithDebInfo, as Debian does):
# stock (without -DMI_USE_MADVX, checked to preprocess to the unpatched
# source) and patched (with it, linked against the libmadvx of BUILDROOT,
# checked to import madvx_ symbols).  Then runs mimalloc's own tests
# (test-api, test-api-fill, test-stress) of both in every configuration of
# CONFIGS below.  Exit 0 when every run passes, 1 on any failure, 77 (with
# the reason) when the source cannot be had.  The work tree (default
# BUILDROOT/mimalloc or BUILDROOT/mimalloc-upstream) keeps both builds for
# bench.sh and bench/clients.sh.
set -euo pipefail

FLAVOUR=debian
if [[ ${1:-} == --upstream ]]; then
	FLAVOUR=upstream
	shift
fi
SRCROOT=$(cd "$1" && pwd)
BUILDROOT=$(cd "$2" && pwd)
HERE=$SRCROOT/examples/mimalloc
CACHE=${MADVX_CLIENTS_CACHE:-/var/cache/madvx-clients}/mimalloc
JOBS=${MADVX_CLIENTS_JOBS:-2}
# What runs (test-stress's arguments, the configurations): configs.sh,
# shared with the test kernel's static runs
# (examples/common/kernel-clients.sh).
# shellcheck source=examples/mimalloc/configs.sh
source "$HERE/configs.sh"
STRESS=${MADVX_MIMALLOC_STRESS:-$MIMALLOC_STRESS_DEBIAN}
CONFIGS=("${MIMALLOC_CONFIGS_DEBIAN[@]}")
CLIENT=mimalloc

if [[ $FLAVOUR == upstream ]]; then
	TAG=v2.4.1
	MI_VERSION=20401	# MI_MALLOC_VERSION of that tag
	PATCH=$HERE/mimalloc-2.4.1-madvx.patch
	WORK=${3:-$BUILDROOT/mimalloc-upstream}
	STRESS=${MADVX_MIMALLOC_STRESS:-$MIMALLOC_STRESS_UPSTREAM}
	CLIENT=mimalloc-upstream
	CONFIGS=("${MIMALLOC_CONFIGS_UPSTREAM[@]}")
else
	PATCH=$HERE/mimalloc-2.0.9-madvx.patch
	WORK=${3:-$BUILDROOT/mimalloc}
fi

# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"	# log, die, skip, client_*
if [[ $FLAVOUR == upstream ]]; then
	[[ -n ${MADVX_MIMALLOC_UPSTREAM:-} ]] ||
		skip "MADVX_MIMALLOC_UPSTREAM is not set (a mimalloc checkout, git directory or git URL with tag $TAG; never cloned by default)"
	client_need_tools "needed to get and build mimalloc" git tar cmake make cc patch nm
else
	client_need_tools "needed to get and build mimalloc" \
		apt-get apt-cache dpkg-source cmake make cc patch sha256sum nm
fi
client_need_shared "$BUILDROOT"

# shellcheck source=examples/common/debsrc.sh
source "$SRCROOT/examples/common/debsrc.sh"
# shellcheck source=examples/common/upstream.sh
source "$SRCROOT/examples/common/upstream.sh"

# The unpatched source in $WORK/fresh, as it is now.
get_source()
{
	if [[ $FLAVOUR == upstream ]]; then
		upstream_extract "$MADVX_MIMALLOC_UPSTREAM" "$TAG" "$WORK/fresh"
		grep -q "define MI_MALLOC_VERSION $MI_VERSION " "$WORK/fresh/include/mimalloc.h" ||
			die "$UPSTREAM_DESC is not mimalloc $TAG (MI_MALLOC_VERSION $MI_VERSION)"
		log "source: $UPSTREAM_DESC"
	else
		debsrc_fetch mimalloc 2.0.9+ds-2 bookworm
		debsrc_extract "$WORK/fresh"
	fi
}

# Without MI_USE_MADVX the patched files are the stock ones: every token
# the compiler sees is the same (the no-op macros aside), so "stock" is
# stock although it is built from the patched tree.
check_guard()
{
	local f a b files
	mapfile -t files < <(sed -n 's|^+++ b/||p' "$PATCH")
	((${#files[@]} > 0)) || die "no file names in $PATCH"
	for f in "${files[@]}"; do
		[[ $f == *.c ]] || continue	# headers: through the .c files
		a=$(cc -E -P -DNDEBUG -I"$WORK/pristine/include" "$WORK/pristine/$f" |
			tr -d ' \t\n' | sed 's/((void)0);//g')
		b=$(cc -E -P -DNDEBUG -I"$WORK/src/include" "$WORK/src/$f" |
			tr -d ' \t\n' | sed 's/((void)0);//g')
		[[ $a == "$b" ]] ||
			die "$f without -DMI_USE_MADVX differs from the unpatched source"
	done
}

# cmake + make of the source tree into $1 with extra C flags $2 and
# linker flags $3; Debian's build type, tests on, no static/object lib.
build()
{
	local dir=$1 cflags=$2 ldflags=$3
	log "cmake + make in $dir"
	rm -rf "$dir"
	if ! cmake -S "$WORK/src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DMI_BUILD_STATIC=OFF -DMI_BUILD_OBJECT=OFF -DMI_BUILD_TESTS=ON \
		-DCMAKE_C_FLAGS="$cflags" -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" \
		-DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
		${ldflags:+-DCMAKE_C_STANDARD_LIBRARIES=-lmadvx} >"$dir.cmake.out" 2>&1 ||
	   ! make -C "$dir" -j"$JOBS" >"$dir.make.out" 2>&1; then
		tail -n 40 "$dir.cmake.out" "$dir.make.out" >&2 || true
		die "building $dir failed"
	fi
}

# The three tests of build $1 with the environment $2; prints
# "PASS n FAIL m (s s s)", with the seconds each took, and keeps each
# output in $WORK/out.
run_tests()
{
	local dir=$1 envs=$2 tag=$3 t pass=0 fail=0 out args t0 secs=()
	for t in api api-fill stress; do
		out=$WORK/out/$tag-$t.out
		args=()
		# shellcheck disable=SC2206 # STRESS is "THREADS SCALE ITER"
		[[ $t == stress ]] && args=($STRESS)
		t0=$SECONDS
		# shellcheck disable=SC2086 # $envs is a list of NAME=value words
		if env $envs timeout 600 "$dir/mimalloc-test-$t" "${args[@]}" >"$out" 2>&1; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			log "test-$t failed ($tag):"
			tail -n 20 "$out" >&2
		fi
		secs+=($((SECONDS - t0)))
	done
	echo "PASS $pass FAIL $fail (${secs[*]} s)"
}

mkdir -p "$WORK"
get_source
# Each build is redone when what it is built from changed (a stamp per
# build, written only after a complete build).
if [[ ! -f $WORK/src.ready || $WORK/src.ready -ot $PATCH ]] ||
   ! diff -rq "$WORK/fresh" "$WORK/pristine" >/dev/null 2>&1; then
	rm -f "$WORK/src.ready" "$WORK/stock.built" "$WORK/patched.built"
	client_prepare_source "$WORK" "$PATCH"
	check_guard
	touch "$WORK/src.ready"
fi
rm -rf "$WORK/fresh"
if [[ ! -f $WORK/stock.built ]]; then
	build "$WORK/stock" "" ""
	touch "$WORK/stock.built"
fi
if [[ ! -f $WORK/patched.built || $WORK/patched.built -ot $BUILDROOT/src/libmadvx.so ]]; then
	rm -f "$WORK/patched.built"
	build "$WORK/patched" "-DMI_USE_MADVX -I$SRCROOT/include -I$BUILDROOT/include" \
		"-L$BUILDROOT/src -Wl,-rpath,$BUILDROOT/src"
	touch "$WORK/patched.built"
fi
client_check_symbols "$WORK/stock/libmimalloc.so" "$WORK/patched/libmimalloc.so"

# The builds of one configuration run side by side (one core each on a
# 2-core machine): test-api alone costs ~30 s of CPU per run here, most of
# it page faults of its large aligned allocations (malloc-aligned9).
# MADVX_MIMALLOC_CONFIGS (comma list of names above) runs a subset: CI
# leaves out delay0, whose decommits take the stock path in both builds.

rm -rf "$WORK/out"
mkdir -p "$WORK/out"
fail=0
ran=0
echo "config     build    test-api, test-api-fill, test-stress ${STRESS:-(its defaults)}"
for c in "${CONFIGS[@]}"; do
	IFS='|' read -r name variants envs <<<"$c"
	client_selected "${MADVX_MIMALLOC_CONFIGS:-}" "$name" || continue
	ran=$((ran + 1))
	for v in $variants; do
		run_tests "$WORK/$v" "$envs" "$v-$name" >"$WORK/out/$v-$name.res" &
	done
	wait
	for v in $variants; do
		res=$(cat "$WORK/out/$v-$name.res")
		printf '%-10s %-8s %s\n' "$name" "$v" "$res"
		[[ $res == "PASS 3 FAIL 0 "* ]] || fail=1
	done
done
((ran > 0)) || die "MADVX_MIMALLOC_CONFIGS=$MADVX_MIMALLOC_CONFIGS names no configuration"
exit $fail
