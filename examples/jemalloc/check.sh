#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# jemalloc purging through libmadvx, checked with jemalloc's own test
# suite: Debian's 5.3.0-1 source package, or upstream dev at a pinned
# commit.
#
#   check.sh [--upstream] SRCROOT BUILDROOT [WORKDIR]
#
# Debian (default): gets the source package through a private apt
# configuration (examples/common/debsrc.sh) and applies
# jemalloc-5.3.0-madvx.patch (one libmadvx batch per decay purge pass,
# pac_decay_stashed(): the pass holds its extents until the batch is
# flushed).
# --upstream: exports commit $COMMIT (configs.sh) of the checkout (path, git
# directory or git URL) MADVX_JEMALLOC_UPSTREAM names
# (examples/common/upstream.sh), applies jemalloc-dev-madvx.patch (dev's
# own vectorized purge, pages_purge_process_madvise(), through a libmadvx
# batch flushed before it returns) and generates configure with autoconf.
# Either tree is built twice, out of tree: stock (without
# -DJEMALLOC_MADVX, checked to preprocess to the unpatched source) and
# patched (with it, linked against the libmadvx of BUILDROOT, checked to
# import madvx_ symbols).  Then runs jemalloc's own tests (test/unit,
# test/integration: what `make check` runs) of both, one by one through
# jemalloc's test/test.sh, in every configuration of configs.sh, and
# compares stock and patched test by test.  Exit 0 when no test fails in
# the patched build that passes (or skips) in the stock one, 1 otherwise,
# 77 (with the reason) when the source cannot be had.  The work tree
# (default BUILDROOT/jemalloc or BUILDROOT/jemalloc-upstream) keeps both
# builds for bench.sh.
#
# MADVX_JEMALLOC_TESTS chooses the tests: unset, all but JEMALLOC_NOT_PURGING
# in configs.sh; "all", every test `make check` builds; else a comma list of names
# (unit/decay,integration/mallocx,je-purge,...).  MADVX_JEMALLOC_CONFIGS
# chooses configurations (comma list of their names; unset: all).
set -euo pipefail

FLAVOUR=debian
if [[ ${1:-} == --upstream ]]; then
	FLAVOUR=upstream
	shift
fi
SRCROOT=$(cd "$1" && pwd)
BUILDROOT=$(cd "$2" && pwd)
HERE=$SRCROOT/examples/jemalloc
# What runs (the configurations, the tests left out, dev's commit):
# configs.sh, shared with examples/common/kernel-clients.sh (the test
# kernel).
# shellcheck source=examples/jemalloc/configs.sh
source "$HERE/configs.sh"
if [[ $FLAVOUR == upstream ]]; then
	COMMIT=$JEMALLOC_UPSTREAM_COMMIT
	PATCH=$HERE/jemalloc-dev-madvx.patch
	WORK=${3:-$BUILDROOT/jemalloc-upstream}
else
	PATCH=$HERE/jemalloc-5.3.0-madvx.patch
	WORK=${3:-$BUILDROOT/jemalloc}
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)	# configure runs in the build directories
CACHE=${MADVX_CLIENTS_CACHE:-/var/cache/madvx-clients}/jemalloc
JOBS=${MADVX_CLIENTS_JOBS:-2}
TIMEOUT=${MADVX_JEMALLOC_TIMEOUT:-300}	# seconds per test and build
PURGE="2 5000 128"	# je-purge THREADS OPS SLOTS (bench.sh runs longer ones)
CLIENT=jemalloc
[[ $FLAVOUR == debian ]] || CLIENT=jemalloc-upstream

CONFIGS=("${JEMALLOC_CONFIGS_DEBIAN[@]}")
[[ $FLAVOUR == debian ]] || CONFIGS=("${JEMALLOC_CONFIGS_UPSTREAM[@]}")

# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"
if [[ $FLAVOUR == upstream ]]; then
	[[ -n ${MADVX_JEMALLOC_UPSTREAM:-} ]] ||
		skip "MADVX_JEMALLOC_UPSTREAM is not set (a jemalloc checkout, git directory or git URL with commit $COMMIT of dev; never cloned by default)"
	client_need_tools "needed to get and build jemalloc" \
		git tar autoconf make cc patch nm timeout
else
	client_need_tools "needed to get and build jemalloc" \
		apt-get apt-cache dpkg-source dpkg-buildflags make cc patch sha256sum nm timeout
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
		upstream_extract "$MADVX_JEMALLOC_UPSTREAM" "$COMMIT" "$WORK/fresh"
		grep -q '^pages_purge_process_madvise(' "$WORK/fresh/src/pages.c" ||
			die "$UPSTREAM_DESC has no pages_purge_process_madvise() (not jemalloc dev)"
		log "source: $UPSTREAM_DESC"
	else
		debsrc_fetch jemalloc 5.3.0-1 bookworm
		debsrc_extract "$WORK/fresh"
	fi
}

# The patched source tree in $WORK/src, the unpatched one in
# $WORK/pristine; a git tree has no configure: autoconf makes it (the
# patch does not touch configure.ac).
prepare_source()
{
	client_prepare_source "$WORK" "$PATCH"
	if [[ $FLAVOUR == upstream ]]; then
		(cd "$WORK/src" && autoconf) >"$WORK/autoconf.out" 2>&1 ||
			{ cat "$WORK/autoconf.out" >&2; die "autoconf failed"; }
	fi
}

# configure and make of the shared library in $1, with extra CPPFLAGS $2,
# LDFLAGS $3 and LIBS $4.  Debian: debian/rules' options on amd64 and
# dpkg-buildflags.  Upstream: the same page sizes and prof, jemalloc's
# own CFLAGS, and PIDFD_SELF (below).  The test programs are made when
# they are chosen (make_tests).
build()
{
	local dir=$1
	log "configure + make in $dir"
	rm -rf "$dir"
	mkdir -p "$dir"
	if ! jemalloc_configure "$FLAVOUR" "$WORK/src" "$dir" "$2" "$3" "$4" ||
	   ! make -C "$dir" -j"$JOBS" build_lib_shared >"$dir.make.out" 2>&1; then
		tail -n 40 "$dir.configure.out" "$dir.make.out" >&2 || true
		die "building $dir failed"
	fi
	jemalloc_has_process_madvise "$FLAVOUR" "$dir" ||
		die "$dir: configure did not find process_madvise (see $dir.configure.out)"
}

# Without JEMALLOC_MADVX the patched files are the stock ones: every token
# the compiler sees is the same, so "stock" is stock although it is built
# from the patched tree.  Preprocessed as the stock build compiles them
# (its CPPFLAGS, its generated headers first); jemalloc's assertions carry
# __FILE__ and __LINE__, which differ by construction ("file.c", 123 -> "",0).
check_guard()
{
	local f a b files cppflags
	mapfile -t files < <(sed -n 's|^+++ b/||p' "$PATCH")
	((${#files[@]} > 0)) || die "no file names in $PATCH"
	# shellcheck disable=SC2016 # $(objroot) is make's, matched literally
	read -ra cppflags < <(sed -n 's/^CPPFLAGS := \(.*\) -I\$(objroot).*/\1/p' "$WORK/stock/Makefile")
	for f in "${files[@]}"; do
		[[ $f == *.c ]] || continue	# headers: through the .c files
		a=$(tokens "$WORK/pristine" "$f" "${cppflags[@]}")
		b=$(tokens "$WORK/src" "$f" "${cppflags[@]}")
		[[ $a == "$b" ]] ||
			die "$f without -DJEMALLOC_MADVX differs from the unpatched source"
	done
}

# The tokens of source file $2 of tree $1 (CPPFLAGS ${@:3}), as check_guard
# compares them.
tokens()
{
	local tree=$1 f=$2
	shift 2
	cc -E -P "$@" -I"$WORK/stock/include" -I"$tree/include" "$tree/$f" |
		tr -d ' \t\n' | sed -E 's/"[^"]*\.[ch]",[0-9]+/"",0/g'
}

# Every test `make check` runs (unit, integration, integration/cpp), as
# unit/NAME, integration/NAME, integration/cpp/NAME.
all_tests()
{
	make -s -C "$WORK/stock" -f Makefile -f - print-madvx-tests <<'EOF' |
print-madvx-tests:
	@echo $(TESTS_UNIT) $(TESTS_INTEGRATION) $(TESTS_INTEGRATION_CPP)
EOF
		tr ' ' '\n' | sed -n 's|.*test/\(.*\)\.c[p]*$|\1|p'
}

# The chosen test programs of build $1 (make's own dependencies decide
# what is out of date).
make_tests()
{
	local t targets=()
	for t in "${TESTS[@]}"; do
		[[ $t == je-purge ]] || targets+=("test/$t")
	done
	((${#targets[@]} == 0)) ||
		make -C "$1" -j"$JOBS" "${targets[@]}" >"$1.make-tests.out" 2>&1 ||
		{ tail -n 40 "$1.make-tests.out" >&2; die "building the tests in $1 failed"; }
}


# One of jemalloc's tests (NAME: unit/decay, ...) of build $1 with the
# environment $2, through its test/test.sh (which adds $MALLOC_CONF to the
# test's own), output to $4; prints pass, skip or fail.
run_jemalloc_test()
{
	local dir=$1 envs=$2 t=$3 out=$4
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words
	(cd "$dir" && env $envs timeout "$TIMEOUT" sh test/test.sh "test/$t") >"$out" 2>&1 || true
	case $(grep 'Test suite summary' "$out" || true) in
	*"pass: 1/1,"*) echo pass ;;
	*"skip: 1/1,"*) echo skip ;;
	*) echo fail ;;
	esac
}

# je-purge with build $1's library preloaded, environment $2.
run_je_purge()
{
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words, $PURGE the arguments
	if env $2 LD_PRELOAD="$1/lib/libjemalloc.so.2" timeout "$TIMEOUT" \
		"$WORK/je-purge" $PURGE >"$3" 2>&1; then
		echo pass
	else
		echo fail
	fi
}

# The environment $1 without MALLOC_CONF.
without_malloc_conf()
{
	local w out=()
	for w in $1; do
		[[ $w == MALLOC_CONF=* ]] || out+=("$w")
	done
	echo "${out[*]}"
}

# The tests of build $1 with the environment $2, one by one; one line per
# test: "NAME pass|skip|fail SECONDS".  Outputs in $WORK/out/$3-*.  The
# unit tests run as $4 says (as-is, no-conf or none: configs.sh).
run_tests()
{
	local dir=$1 envs=$2 tag=$3 units=$4 t e out st t0
	for t in "${TESTS[@]}"; do
		e=$envs
		if [[ $t == unit/* ]]; then
			case $units in
			as-is) ;;
			no-conf) e=$(without_malloc_conf "$envs") ;;
			*) continue ;;
			esac
		fi
		out=$WORK/out/$tag-${t//\//-}.out
		t0=$SECONDS
		if [[ $t == je-purge ]]; then
			st=$(run_je_purge "$dir" "$e" "$out")
		else
			st=$(run_jemalloc_test "$dir" "$e" "$t" "$out")
		fi
		echo "$t $st $((SECONDS - t0))"
	done
}

# "PASS n SKIP m FAIL k (s s)" of a results file.
summary()
{
	awk '{ n[$2]++; s += $3 } END { printf "PASS %d SKIP %d FAIL %d (%d s)\n",
		n["pass"], n["skip"], n["fail"], s }' "$1"
}

get_source
# Each build is redone when what it is built from changed (a stamp per
# build, written only after a complete build).
if [[ ! -f $WORK/src.ready || $WORK/src.ready -ot $PATCH ]] ||
   ! diff -rq "$WORK/fresh" "$WORK/pristine" >/dev/null 2>&1; then
	rm -f "$WORK/src.ready" "$WORK/stock.built" "$WORK/patched.built"
	prepare_source
	touch "$WORK/src.ready"
fi
rm -rf "$WORK/fresh"
if [[ ! -f $WORK/stock.built ]]; then
	build "$WORK/stock" "" "" ""
	touch "$WORK/stock.built"
fi
check_guard
if [[ ! -f $WORK/patched.built || $WORK/patched.built -ot $BUILDROOT/src/libmadvx.so ]]; then
	rm -f "$WORK/patched.built"
	build "$WORK/patched" "-DJEMALLOC_MADVX -I$SRCROOT/include -I$BUILDROOT/include" \
		"-L$BUILDROOT/src -Wl,-rpath,$BUILDROOT/src" "-lmadvx"
	touch "$WORK/patched.built"
fi
client_check_symbols "$WORK/stock/lib/libjemalloc.so.2" "$WORK/patched/lib/libjemalloc.so.2"
# je-purge.c: the churn bench.sh measures, here a test of both builds.
if [[ ! -x $WORK/je-purge || $WORK/je-purge -ot $HERE/je-purge.c ]]; then
	cc -O2 -Wall -pthread -I"$SRCROOT/include" -I"$BUILDROOT/include" \
		-o "$WORK/je-purge" "$HERE/je-purge.c" ||
		die "cannot build je-purge"
fi

case ${MADVX_JEMALLOC_TESTS:-} in
"") mapfile -t TESTS < <(all_tests | grep -vxF -f <(printf '%s\n' "${JEMALLOC_NOT_PURGING[@]}"); echo je-purge) ;;
all) mapfile -t TESTS < <(all_tests; echo je-purge) ;;
*) IFS=, read -ra TESTS <<<"$MADVX_JEMALLOC_TESTS" ;;
esac
((${#TESTS[@]} > 0)) || die "no tests to run"
mapfile -t known < <(all_tests)
for t in "${TESTS[@]}"; do
	[[ $t == je-purge || " ${known[*]} " == *" $t "* ]] || die "jemalloc has no test $t"
done
make_tests "$WORK/stock"
make_tests "$WORK/patched"

# The builds of one configuration run side by side (one core each).
rm -rf "$WORK/out"
mkdir -p "$WORK/out"
fail=0
ran=0
echo "${#TESTS[@]} tests: ${TESTS[*]}"
for c in "${CONFIGS[@]}"; do
	IFS='|' read -r name variants envs units ref <<<"$c"
	client_selected "${MADVX_JEMALLOC_CONFIGS:-}" "$name" || continue
	ran=$((ran + 1))
	for v in $variants; do
		run_tests "$WORK/$v" "$envs" "$v-$name" "$units" >"$WORK/out/$v-$name.res" &
	done
	wait
	for v in $variants; do
		printf '%-10s %-8s %s\n' "$name" "$v" "$(summary "$WORK/out/$v-$name.res")"
	done
	# New failures: failed patched, passed (or skipped) stock - or, where
	# the configuration has no stock run (of its own, or of the one its
	# last field names, run before it), failed at all.
	stock=$WORK/out/stock-${ref:-$name}.res
	[[ -f $stock ]] || stock=/dev/null
	# (By file name: with an empty first file, NR == FNR holds for the
	# second one too, and every failure would be taken for stock's.)
	new=$(awk -v ref="$stock" 'FILENAME == ref { st[$1] = $2; next }
		$2 == "fail" && st[$1] != "fail" { printf " %s", $1 }' \
		"$stock" "$WORK/out/patched-$name.res")
	old=$(awk '$2 == "fail" { printf " %s", $1 }' "$stock")
	[[ -z $old ]] || echo "$name: failing in stock too:$old"
	if [[ -n $new ]]; then
		echo "$name: NEW FAILURES (patched only):$new"
		for t in $new; do
			tail -n 20 "$WORK/out/patched-$name-${t//\//-}.out" >&2
		done
		fail=1
	fi
done
((ran > 0)) || die "MADVX_JEMALLOC_CONFIGS=$MADVX_JEMALLOC_CONFIGS names no configuration"
exit $fail
