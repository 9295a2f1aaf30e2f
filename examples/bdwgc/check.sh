#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bdwgc (Debian's libgc 1:8.2.2-3) releasing through libmadvx, checked with
# bdwgc's own test suite.
#
#   check.sh SRCROOT BUILDROOT [WORKDIR]
#
# Gets the source package through a private apt configuration
# (examples/common/debsrc.sh, shared with examples/mimalloc), builds it
# twice - stock, and with libgc-8.2.2-madvx.patch (the madvise(MADV_DONTNEED)
# of block_unmap_inner() batched under the allocator lock, flushed at the end
# of GC_unmap_old() and GC_merge_unmapped()) linked against the libmadvx of
# BUILDROOT - and runs `make check` of both in every configuration of
# CONFIGS below.  Exit 0 when
# every run passes, 1 on any failure, 77 (with the reason) when the source
# cannot be had.  The work tree (default BUILDROOT/bdwgc) keeps both builds
# for bench.sh.
set -euo pipefail

SRCROOT=$(cd "$1" && pwd)
BUILDROOT=$(cd "$2" && pwd)
WORK=${3:-$BUILDROOT/bdwgc}
HERE=$SRCROOT/examples/bdwgc
CACHE=${MADVX_CLIENTS_CACHE:-/var/cache/madvx-clients}/libgc
JOBS=${MADVX_CLIENTS_JOBS:-2}
CLIENT=bdwgc

# name|environment of one make check run
CONFIGS=(
	"default|"
	"threshold1|GC_UNMAP_THRESHOLD=1"
	"force-unmap|GC_FORCE_UNMAP_ON_GCOLLECT=1"
	"both|GC_UNMAP_THRESHOLD=1 GC_FORCE_UNMAP_ON_GCOLLECT=1"
	"both-no-vector|GC_UNMAP_THRESHOLD=1 GC_FORCE_UNMAP_ON_GCOLLECT=1 MADVX_DISABLE=process_madvise,procmap_query"
)

# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"	# log, die, skip, client_*
client_need_tools "Debian tools needed to get and build libgc" \
	apt-get apt-cache dpkg-source make cc patch sha256sum
client_need_shared "$BUILDROOT"

# shellcheck source=examples/common/debsrc.sh
source "$SRCROOT/examples/common/debsrc.sh"

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
# are the same; running it again costs minutes), the patch applied, and
# everything rebuilt (the patch touches gc_priv.h, which every object
# includes) with libmadvx added to configure's own flags.
build_patched()
{
	local dir=$1 cppflags ldflags libs
	log "patch + make in $dir"
	rm -rf "$dir"
	cp -a "$WORK/stock" "$dir"
	(cd "$dir" && patch -p1 --quiet <"$HERE/libgc-8.2.2-madvx.patch") ||
		die "libgc-8.2.2-madvx.patch does not apply"
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

debsrc_fetch libgc 1:8.2.2-3 bookworm
mkdir -p "$WORK"
# Each tree is rebuilt from the verified source when what it is built from
# changed (a stamp per tree, written only after a complete build).
if [[ ! -f $WORK/stock.built || $WORK/stock.built -ot $DSC ]]; then
	rm -f "$WORK/stock.built"
	debsrc_extract "$WORK/stock"
	build_stock "$WORK/stock"
	touch "$WORK/stock.built"
fi
if [[ ! -f $WORK/patched.built || $WORK/patched.built -ot $WORK/stock.built ||
      $WORK/patched.built -ot $HERE/libgc-8.2.2-madvx.patch ||
      $WORK/patched.built -ot $BUILDROOT/src/libmadvx.so ]]; then
	rm -f "$WORK/patched.built"
	build_patched "$WORK/patched"
	touch "$WORK/patched.built"
fi
# The patched library must really use libmadvx (a build that lost the
# define would pass every check without it).
nm -D "$WORK/patched/.libs/libgc.so" >"$WORK/patched/nm.out" 2>&1 || true
grep -q ' U madvx_batch_add_flags' "$WORK/patched/nm.out" ||
	die "the patched libgc.so does not call madvx_batch_add_flags"

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
		res=$(run_check "$WORK/$v" "$envs")
		printf '%-15s %-8s %s\n' "$name" "$v" "$res"
		cp "$WORK/$v/test-suite.log" "$WORK/$v-$name.test-suite.log" 2>/dev/null || true
		if [[ $res != *"FAIL 0" || $res == "PASS 0 "* ]]; then
			fail=1
			tail -n 40 "$WORK/$v/test-suite.log" 2>/dev/null || true
		fi
	done
done
((ran > 0)) || die "MADVX_BDWGC_CONFIGS=$MADVX_BDWGC_CONFIGS names no configuration"
exit $fail
