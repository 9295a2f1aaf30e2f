#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The clients' own test suites in the test kernel: builds their test
# programs statically, stock and patched, and packs them into ONE
# self-contained script that `kernel/run exec` takes.
#
#   kernel-clients.sh SRCROOT STATICBUILD OUT [CLIENT...]
#
# CLIENT: bdwgc (Debian's libgc 1:8.2.2-3, `make check`'s 16 programs),
# bdwgc-upstream (master at check.sh's pinned commit, ctest's 16),
# mimalloc (Debian's 2.0.9+ds-2), mimalloc-upstream (v2.4.1): test-api,
# test-api-fill, test-stress; jemalloc (Debian's 5.3.0-1: `make check`'s
# unit and integration programs, each with the MALLOC_CONF its test/*.sh
# sets, but those check.sh leaves out by default; exit status 1 is
# "skipped"), jemalloc-upstream (dev at configs.sh's commit, the same
# programs).  Default: bdwgc, mimalloc and jemalloc, and the upstream
# flavours whose checkout MADVX_BDWGC_UPSTREAM / MADVX_MIMALLOC_UPSTREAM /
# MADVX_JEMALLOC_UPSTREAM names (as for check.sh).  The sources come from
# where check.sh gets them (examples/common/debsrc.sh, upstream.sh), the
# patches are check.sh's, and so are the configurations and arguments
# (examples/bdwgc/configs.sh, examples/mimalloc/configs.sh).
#
# STATICBUILD is a static build of libmadvx (kernel/run's
# build-kernel-static: meson setup -Ddefault_library=static
# -Dprefer_static=true -Dc_link_args=-static); its libmadvx.a is built if
# needed and the patched programs link it (pkg-config --static of its
# meson-uninstalled/madvx-uninstalled.pc).  The clients' libraries are
# built static-only (bdwgc: --enable-static --disable-shared, programs
# linked with libtool's -all-static; upstream: -DBUILD_SHARED_LIBS=OFF;
# mimalloc: -DMI_BUILD_SHARED=OFF, the tests linked with mimalloc-static,
# as v2.4.1's CMakeLists does by itself and 2.0.9's is edited to;
# jemalloc: --disable-shared, its test programs linked with libjemalloc.a
# and -static), every program is checked to be a static executable, and
# the patched gctest / mimalloc-test-api / jemalloc's integration/mallocx
# to contain libmadvx (madvx_batch_flush), the stock ones not to.  Work
# trees: STATICBUILD/clients-static/<client> (kept: a rebuild redoes only
# what changed).
#
# OUT is a `#!/bin/sh` script: examples/common/kernel-clients-run.sh (run
# in the guest by busybox sh) followed by a base64 xz tar of the programs
# and their lists.  Run it with
#   kernel/run exec --kernel base --timeout 3000 OUT [FILTER...]
# (FILTER: CLIENT or CLIENT:CONFIG, several allowed; default everything).
# It prints one line per test, configuration and build, and exits non-zero
# on any failure or missing result (kernel-clients-run.sh).
set -euo pipefail

SRCROOT=$(cd "$1" && pwd)
SB=$(cd "$2" && pwd)
OUT=$3
shift 3
CLIENT=kernel-clients
JOBS=${MADVX_CLIENTS_JOBS:-2}
WORKROOT=$SB/clients-static
CACHEROOT=${MADVX_CLIENTS_CACHE:-/var/cache/madvx-clients}
BDWGC_COMMIT=9d83c00b5c146863397c31dbac0892c762e7530f	# as examples/bdwgc/check.sh
MIMALLOC_TAG=v2.4.1	# as examples/mimalloc/check.sh

# shellcheck source=examples/common/client.sh
source "$SRCROOT/examples/common/client.sh"	# log, die, skip
# shellcheck source=examples/common/debsrc.sh
source "$SRCROOT/examples/common/debsrc.sh"
# shellcheck source=examples/common/upstream.sh
source "$SRCROOT/examples/common/upstream.sh"
# shellcheck source=examples/bdwgc/configs.sh
source "$SRCROOT/examples/bdwgc/configs.sh"
# shellcheck source=examples/mimalloc/configs.sh
source "$SRCROOT/examples/mimalloc/configs.sh"
# shellcheck source=examples/jemalloc/configs.sh
source "$SRCROOT/examples/jemalloc/configs.sh"

CLIENTS=("$@")
if ((${#CLIENTS[@]} == 0)); then
	CLIENTS=(bdwgc mimalloc jemalloc)
	[[ -z ${MADVX_BDWGC_UPSTREAM:-} ]] || CLIENTS+=(bdwgc-upstream)
	[[ -z ${MADVX_MIMALLOC_UPSTREAM:-} ]] || CLIENTS+=(mimalloc-upstream)
	[[ -z ${MADVX_JEMALLOC_UPSTREAM:-} ]] || CLIENTS+=(jemalloc-upstream)
fi
client_need_tools "needed to build the clients statically" \
	apt-get dpkg-source cmake ctest make cc patch nm strip readelf xz base64 pkg-config python3 ninja

[[ -f $SB/build.ninja ]] || die "$SB is not a meson build directory"
log "libmadvx.a in $SB"
ninja -C "$SB" src/libmadvx.a >"$SB/clients-static.ninja.log" 2>&1 ||
	{ tail -n 20 "$SB/clients-static.ninja.log" >&2; die "cannot build $SB/src/libmadvx.a"; }
MADVX_CFLAGS="-DGC_USE_MADVX -DMI_USE_MADVX -I$SRCROOT/include -I$SB/include"
MADVX_LIBS=$(PKG_CONFIG_PATH=$SB/meson-uninstalled pkg-config --static --libs madvx) ||
	die "no $SB/meson-uninstalled/madvx-uninstalled.pc"

is_static()
{
	local h
	h=$(readelf -lW "$1" 2>/dev/null) || return 1
	[[ $h != *INTERP* && $(head -c 4 "$1") == $'\x7f'ELF ]]
}

# stage_prog BUILD-DIR PROGRAM VARIANT-STAGE: checked static, stripped.
stage_prog()
{
	local p=$1/$2
	[[ -f $p ]] || die "$p was not built"
	is_static "$p" || die "$p is not a static executable"
	mkdir -p "$3"
	strip -o "$3/$2" "$p"
}

# madvx_in STOCK PATCHED: the patched program links libmadvx, the stock not.
madvx_in()
{
	local s p
	s=$(nm "$1" 2>/dev/null || true)
	p=$(nm "$2")
	[[ $p == *" T madvx_batch_flush"* ]] || die "$2 does not contain libmadvx"
	[[ $s != *madvx_* ]] || die "the stock $1 contains libmadvx"
}

# ---- bdwgc, Debian's libgc 8.2.2: autotools, static-only ----

bdwgc_debian()
{
	local work=$1 stage=$2 cpp ldf libs t tests
	CACHE=$CACHEROOT/libgc
	debsrc_fetch libgc 1:8.2.2-3 bookworm
	if [[ ! -f $work/stock.built || $work/stock.built -ot $DSC ]]; then
		rm -f "$work/stock.built" "$work/patched.built"
		debsrc_extract "$work/stock"
		log "configure (static) + make in $work/stock"
		(cd "$work/stock" && ./configure --with-libatomic-ops=none --disable-docs \
			--enable-static --disable-shared >configure.out 2>&1 &&
			make -j"$JOBS" >make.out 2>&1 &&
			make -j"$JOBS" LDFLAGS=-all-static check TESTS= >make-check-build.out 2>&1) ||
			{ tail -n 40 "$work/stock/"{configure,make,make-check-build}.out >&2 || true
			  die "building $work/stock failed"; }
		touch "$work/stock.built"
	fi
	local patch=$SRCROOT/examples/bdwgc/libgc-8.2.2-madvx.patch
	if [[ ! -f $work/patched.built || $work/patched.built -ot $work/stock.built ||
	      $work/patched.built -ot $patch || $work/patched.built -ot $SB/src/libmadvx.a ]]; then
		rm -f "$work/patched.built"
		rm -rf "$work/patched"
		cp -a "$work/stock" "$work/patched"
		(cd "$work/patched" && patch -p1 --quiet <"$patch") || die "${patch##*/} does not apply"
		cpp="$(sed -n 's/^CPPFLAGS = //p' "$work/patched/Makefile") $MADVX_CFLAGS"
		ldf="$(sed -n 's/^LDFLAGS = //p' "$work/patched/Makefile") -all-static"
		libs="$(sed -n 's/^LIBS = //p' "$work/patched/Makefile") $MADVX_LIBS"
		log "make (static, patched) in $work/patched"
		(cd "$work/patched" && make clean >/dev/null 2>&1 &&
			make -j"$JOBS" CPPFLAGS="$cpp" LDFLAGS="$ldf" LIBS="$libs" >make.out 2>&1 &&
			make -j"$JOBS" CPPFLAGS="$cpp" LDFLAGS="$ldf" LIBS="$libs" check TESTS= >>make.out 2>&1) ||
			{ tail -n 40 "$work/patched/make.out" >&2; die "building $work/patched failed"; }
		touch "$work/patched.built"
	fi
	# make check's programs: its TESTS, in its order, run without arguments.
	# shellcheck disable=SC2016 # $(TESTS) is make's
	tests=$(printf 'madvx-print-tests:\n\t@echo $(TESTS)\n' |
		make -s --no-print-directory -C "$work/stock" -f Makefile -f - madvx-print-tests)
	[[ -n $tests ]] || die "no TESTS in $work/stock/Makefile"
	: >"$stage/tests"
	for t in $tests; do
		stage_prog "$work/stock" "$t" "$stage/stock"
		stage_prog "$work/patched" "$t" "$stage/patched"
		echo "$t $t" >>"$stage/tests"
	done
	madvx_in "$work/stock/gctest" "$work/patched/gctest"
	printf '%s\n' "${BDWGC_CONFIGS[@]}" | sed 's/|/|stock patched|/' >"$stage/configs"
	echo "Debian libgc 1:8.2.2-3 (make check's TESTS), ${patch##*/}" >"$stage/about"
}

# ---- bdwgc master: CMake, static-only ----

# ctest's tests of build $1 as "name program args..." lines.
ctest_list()
{
	ctest --test-dir "$1" --show-only=json-v1 | python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    cmd = t["command"]
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    if "ENVIRONMENT" in props or any(" " in a for a in cmd[1:]):
        sys.exit("test %s: environment or spaced arguments not supported" % t["name"])
    print(t["name"], os.path.basename(cmd[0]), *cmd[1:])'
}

bdwgc_upstream()
{
	local work=$1 stage=$2 v dir src cflags name prog
	[[ -n ${MADVX_BDWGC_UPSTREAM:-} ]] ||
		die "bdwgc-upstream: MADVX_BDWGC_UPSTREAM is not set (a bdwgc checkout or git directory with $BDWGC_COMMIT)"
	local patch=$SRCROOT/examples/bdwgc/bdwgc-master-madvx.patch
	local opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -Denable_munmap=ON -Denable_threads=ON
		-Dbuild_tests=ON -Denable_docs=OFF -DBUILD_SHARED_LIBS=OFF)
	if [[ ! -f $work/src.ready || $work/src.ready -ot $patch ]]; then
		rm -f "$work/src.ready" "$work/stock.built" "$work/patched.built"
		upstream_extract "$MADVX_BDWGC_UPSTREAM" "$BDWGC_COMMIT" "$work/pristine"
		log "source: $UPSTREAM_DESC"
		rm -rf "$work/src"
		cp -a "$work/pristine" "$work/src"
		(cd "$work/src" && patch -p1 --quiet <"$patch") || die "${patch##*/} does not apply"
		echo "$UPSTREAM_DESC" >"$work/src.ready"
	fi
	for v in stock patched; do
		dir=$work/$v
		src=$work/src cflags=$MADVX_CFLAGS
		[[ $v == stock ]] && src=$work/pristine cflags=
		[[ -f $dir.built && ! $dir.built -ot $SB/src/libmadvx.a ]] && continue
		log "cmake + make (static, $v) in $dir"
		rm -rf "$dir"
		if ! cmake -S "$src" -B "$dir" "${opts[@]}" -DCMAKE_C_FLAGS="$cflags" \
			-DCMAKE_EXE_LINKER_FLAGS=-static \
			${cflags:+"-DCMAKE_C_STANDARD_LIBRARIES=$MADVX_LIBS"} >"$dir.cmake.out" 2>&1 ||
		   ! make -C "$dir" -j"$JOBS" >"$dir.make.out" 2>&1; then
			tail -n 40 "$dir.cmake.out" "$dir.make.out" >&2 || true
			die "building $dir failed"
		fi
		touch "$dir.built"
	done
	ctest_list "$work/stock" >"$stage/tests"
	[[ -s $stage/tests ]] || die "no ctest tests in $work/stock"
	while read -r name prog _; do
		stage_prog "$work/stock" "$prog" "$stage/stock"
		stage_prog "$work/patched" "$prog" "$stage/patched"
	done <"$stage/tests"
	cmp -s "$stage/tests" <(ctest_list "$work/patched") || die "stock and patched ctest lists differ"
	madvx_in "$work/stock/gctest" "$work/patched/gctest"
	printf '%s\n' "${BDWGC_CONFIGS[@]}" | sed 's/|/|stock patched|/' >"$stage/configs"
	echo "bdwgc master $(<"$work/src.ready") (ctest's tests), ${patch##*/}" >"$stage/about"
}

# ---- mimalloc: CMake, static-only, the tests linked with mimalloc-static ----

mimalloc_build()
{
	local work=$1 stage=$2 flavour=$3 stress=$4 patch v dir cflags t
	shift 4
	local configs=("$@")
	if [[ $flavour == upstream ]]; then
		[[ -n ${MADVX_MIMALLOC_UPSTREAM:-} ]] ||
			die "mimalloc-upstream: MADVX_MIMALLOC_UPSTREAM is not set (a mimalloc checkout or git directory with $MIMALLOC_TAG)"
		patch=$SRCROOT/examples/mimalloc/mimalloc-2.4.1-madvx.patch
	else
		patch=$SRCROOT/examples/mimalloc/mimalloc-2.0.9-madvx.patch
		CACHE=$CACHEROOT/mimalloc
		debsrc_fetch mimalloc 2.0.9+ds-2 bookworm
	fi
	if [[ ! -f $work/src.ready || $work/src.ready -ot $patch ]]; then
		rm -f "$work/src.ready" "$work/stock.built" "$work/patched.built"
		rm -rf "$work/src"
		if [[ $flavour == upstream ]]; then
			upstream_extract "$MADVX_MIMALLOC_UPSTREAM" "$MIMALLOC_TAG" "$work/src"
			grep -q 'define MI_MALLOC_VERSION 20401 ' "$work/src/include/mimalloc.h" ||
				die "$UPSTREAM_DESC is not mimalloc $MIMALLOC_TAG"
		else
			debsrc_extract "$work/src"
			UPSTREAM_DESC="Debian mimalloc 2.0.9+ds-2"
			# 2.0.9 links its tests with the shared library only: with
			# mimalloc-static, as 2.4.1 does when it is built.
			# shellcheck disable=SC2016 # ${...} of CMake, not of the shell
			sed -i 's/\(target_link_libraries(mimalloc-test-${TEST_NAME} PRIVATE\) mimalloc /\1 mimalloc-static /' \
				"$work/src/CMakeLists.txt"
			# shellcheck disable=SC2016 # as above
			grep -q 'PRIVATE mimalloc-static ${mi_libraries}' "$work/src/CMakeLists.txt" ||
				die "cannot link 2.0.9's tests with mimalloc-static (CMakeLists.txt changed?)"
		fi
		# The patch guards its code with MI_USE_MADVX (check.sh checks
		# that the stock build preprocesses to the unpatched source).
		(cd "$work/src" && patch -p1 --quiet <"$patch") || die "${patch##*/} does not apply"
		echo "$UPSTREAM_DESC" >"$work/src.ready"
	fi
	for v in stock patched; do
		dir=$work/$v
		cflags=$MADVX_CFLAGS
		[[ $v == stock ]] && cflags=
		[[ -f $dir.built && ! $dir.built -ot $SB/src/libmadvx.a ]] && continue
		log "cmake + make (static, $v) in $dir"
		rm -rf "$dir"
		if ! cmake -S "$work/src" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DMI_BUILD_SHARED=OFF -DMI_BUILD_STATIC=ON -DMI_BUILD_OBJECT=OFF -DMI_BUILD_TESTS=ON \
			-DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS=-static \
			${cflags:+"-DCMAKE_C_STANDARD_LIBRARIES=$MADVX_LIBS"} >"$dir.cmake.out" 2>&1 ||
		   ! make -C "$dir" -j"$JOBS" >"$dir.make.out" 2>&1; then
			tail -n 40 "$dir.cmake.out" "$dir.make.out" >&2 || true
			die "building $dir failed"
		fi
		touch "$dir.built"
	done
	: >"$stage/tests"
	for t in api api-fill stress; do
		stage_prog "$work/stock" "mimalloc-test-$t" "$stage/stock"
		stage_prog "$work/patched" "mimalloc-test-$t" "$stage/patched"
		if [[ $t == stress ]]; then
			echo "test-$t mimalloc-test-$t${stress:+ $stress}" >>"$stage/tests"
		else
			echo "test-$t mimalloc-test-$t" >>"$stage/tests"
		fi
	done
	madvx_in "$work/stock/mimalloc-test-api" "$work/patched/mimalloc-test-api"
	printf '%s\n' "${configs[@]}" >"$stage/configs"
	echo "$(<"$work/src.ready") (test-api, test-api-fill, test-stress ${stress:-(its defaults)}), ${patch##*/}" >"$stage/about"
}

# ---- jemalloc, Debian's 5.3.0-1: autotools, static-only ----

# The test programs of `make check` (unit, integration, integration/cpp)
# in build $1, as unit/NAME, integration/NAME, integration/cpp/NAME.
jemalloc_tests()
{
	# shellcheck disable=SC2016 # $(...) are make's
	printf 'madvx-print-tests:\n\t@echo $(TESTS_UNIT) $(TESTS_INTEGRATION) $(TESTS_INTEGRATION_CPP)\n' |
		make -s --no-print-directory -C "$1" -f Makefile -f - madvx-print-tests |
		tr ' ' '\n' | sed -n 's|.*test/\(.*\)\.c[p]*$|\1|p'
}

# The MALLOC_CONF test NAME of build $1 sets for itself (its test/NAME.sh,
# which jemalloc's test/test.sh sources with the build's enable_fill and
# enable_prof), or nothing.
jemalloc_test_conf()
{
	local sh=$2/test/$3.sh fill prof
	[[ -f $sh ]] || return 0
	fill=$(sed -n 's/^[[:space:]]*enable_fill=\([01]\).*/\1/p' "$1/test/test.sh")
	prof=$(sed -n 's/^[[:space:]]*enable_prof=\([01]\).*/\1/p' "$1/test/test.sh")
	[[ $fill =~ ^[01]$ && $prof =~ ^[01]$ ]] || die "no enable_fill/enable_prof in $1/test/test.sh"
	# shellcheck disable=SC1090,SC2034 # the test's own script reads enable_*
	# set +u: the scripts read variables test.sh never sets (enable_xmalloc).
	(set +u; unset MALLOC_CONF; enable_fill=$fill enable_prof=$prof; . "$sh" >/dev/null; echo "${MALLOC_CONF:-}")
}

# jemalloc_build WORK STAGE FLAVOUR: Debian's 5.3.0-1 (debian) or dev at
# configs.sh's commit (upstream), as check.sh builds them, static-only.
jemalloc_build()
{
	local work=$1 stage=$2 flavour=$3 v dir cppflags libs t conf name skip patch
	local configs
	if [[ $flavour == upstream ]]; then
		[[ -n ${MADVX_JEMALLOC_UPSTREAM:-} ]] ||
			die "jemalloc-upstream: MADVX_JEMALLOC_UPSTREAM is not set (a jemalloc checkout or git directory with $JEMALLOC_UPSTREAM_COMMIT)"
		client_need_tools "needed to generate dev's configure" autoconf
		patch=$SRCROOT/examples/jemalloc/jemalloc-dev-madvx.patch
		configs=("${JEMALLOC_CONFIGS_UPSTREAM[@]}")
	else
		patch=$SRCROOT/examples/jemalloc/jemalloc-5.3.0-madvx.patch
		configs=("${JEMALLOC_CONFIGS_DEBIAN[@]}")
		CACHE=$CACHEROOT/jemalloc
		debsrc_fetch jemalloc 5.3.0-1 bookworm
	fi
	if [[ ! -f $work/src.ready || $work/src.ready -ot $patch ||
	      ($flavour == debian && $work/src.ready -ot $DSC) ]]; then
		rm -f "$work/src.ready" "$work/stock.built" "$work/patched.built"
		rm -rf "$work/src"
		if [[ $flavour == upstream ]]; then
			upstream_extract "$MADVX_JEMALLOC_UPSTREAM" "$JEMALLOC_UPSTREAM_COMMIT" "$work/src"
		else
			debsrc_extract "$work/src"
			UPSTREAM_DESC="Debian jemalloc 5.3.0-1"
		fi
		# The patch guards its code with JEMALLOC_MADVX (check.sh checks
		# that the stock build preprocesses to the unpatched source).
		(cd "$work/src" && patch -p1 --quiet <"$patch") || die "${patch##*/} does not apply"
		if [[ $flavour == upstream ]]; then
			(cd "$work/src" && autoconf) >"$work/autoconf.out" 2>&1 ||
				{ cat "$work/autoconf.out" >&2; die "autoconf failed"; }
		fi
		echo "$UPSTREAM_DESC" >"$work/src.ready"
	fi
	for v in stock patched; do
		dir=$work/$v
		cppflags=
		libs=
		if [[ $v == patched ]]; then
			cppflags="-DJEMALLOC_MADVX $MADVX_CFLAGS"
			libs=$MADVX_LIBS
		fi
		[[ -f $dir.built && ! $dir.built -ot $SB/src/libmadvx.a && ! $dir.built -ot $work/src.ready ]] &&
			continue
		log "configure (static) + make check's programs ($v) in $dir"
		rm -rf "$dir"
		mkdir -p "$dir"
		# The test programs link libjemalloc.a (IMPORTLIB) and everything
		# else statically. The integration programs' link keeps only
		# -lrt, -pthread and -lstdc++ of LIBS: libmadvx goes in
		# EXTRA_LDFLAGS (last).
		if ! jemalloc_configure "$flavour" "$work/src" "$dir" "$cppflags" "" "$libs" \
			--enable-static --disable-shared ||
		   ! make -C "$dir" -j"$JOBS" build_lib_static >"$dir.make.out" 2>&1 ||
		   ! make -C "$dir" -j"$JOBS" IMPORTLIB=a EXTRA_LDFLAGS="-static${libs:+ $libs}" \
			tests_unit tests_integration >>"$dir.make.out" 2>&1; then
			tail -n 40 "$dir.configure.out" "$dir.make.out" >&2 || true
			die "building $dir failed"
		fi
		jemalloc_has_process_madvise "$flavour" "$dir" ||
			die "$dir: configure did not find process_madvise (see $dir.configure.out)"
		touch "$dir.built"
	done
	# What check.sh runs by default: every test but the ones that never
	# reach the page allocator (configs.sh).
	: >"$stage/tests"
	skip=$(printf '%s\n' "${JEMALLOC_NOT_PURGING[@]}")
	while read -r t; do
		grep -qxF "$t" <<<"$skip" && continue
		name=${t//\//_}
		for v in stock patched; do
			[[ -f $work/$v/test/$t ]] || die "$work/$v/test/$t was not built"
			is_static "$work/$v/test/$t" || die "$work/$v/test/$t is not a static executable"
			mkdir -p "$stage/$v"
			strip -o "$stage/$v/$name" "$work/$v/test/$t"
		done
		conf=$(jemalloc_test_conf "$work/stock" "$work/src" "$t")
		echo "$t${conf:+ MALLOC_CONF=$conf} $name" >>"$stage/tests"
	done < <(jemalloc_tests "$work/stock")
	[[ -s $stage/tests ]] || die "no tests in $work/stock/Makefile"
	madvx_in "$work/stock/test/integration/mallocx" "$work/patched/test/integration/mallocx"
	# jemalloc's test programs exit 1 for "skipped" (test/test.sh).
	echo 1 >"$stage/skipcode"
	# check.sh's configurations, as the runner takes them: "as-is" runs
	# every test with the environment; "none" only the integration tests;
	# "no-conf" the integration tests with it and the unit tests without
	# its MALLOC_CONF (a configuration of its own, NAME-unit). The last
	# field (the stock run a patched-only one is compared with) goes to
	# the runner as it is, which compares stock and patched as check.sh
	# does.
	: >"$stage/configs"
	local c cname cbuilds cenv cunits cref w unitenv unitref
	for c in "${configs[@]}"; do
		IFS='|' read -r cname cbuilds cenv cunits cref <<<"$c"
		# Where the ref's stock run has its unit tests.
		unitref=
		for w in "${configs[@]}"; do
			[[ -n $cref && $w == "$cref|"* ]] || continue
			case $w in
			*"|as-is"|*"|as-is|"*) unitref=$cref ;;
			*"|no-conf"|*"|no-conf|"*) unitref=$cref-unit ;;
			esac
		done
		case $cunits in
		as-is) echo "$cname|$cbuilds|$cenv|*|$cref" ;;
		none) echo "$cname|$cbuilds|$cenv|integration/*|$cref" ;;
		no-conf)
			unitenv=
			for w in $cenv; do
				[[ $w == MALLOC_CONF=* ]] || unitenv="${unitenv:+$unitenv }$w"
			done
			echo "$cname|$cbuilds|$cenv|integration/*|$cref"
			echo "$cname-unit|$cbuilds|$unitenv|unit/*|$unitref" ;;
		*) die "configs.sh: unknown unit-test mode '$cunits' of $cname" ;;
		esac
	done >"$stage/configs"
	echo "$(<"$work/src.ready") (make check's unit and integration programs but configs.sh's JEMALLOC_NOT_PURGING), ${patch##*/}" >"$stage/about"
}

mkdir -p "$WORKROOT"
STAGE=$(mktemp -d "$WORKROOT/stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/clients"
for c in "${CLIENTS[@]}"; do
	mkdir -p "$WORKROOT/$c" "$STAGE/clients/$c"
	case $c in
	bdwgc) bdwgc_debian "$WORKROOT/$c" "$STAGE/clients/$c" ;;
	bdwgc-upstream) bdwgc_upstream "$WORKROOT/$c" "$STAGE/clients/$c" ;;
	mimalloc)
		mimalloc_build "$WORKROOT/$c" "$STAGE/clients/$c" debian \
			"$MIMALLOC_STRESS_DEBIAN" "${MIMALLOC_CONFIGS_DEBIAN[@]}" ;;
	mimalloc-upstream)
		mimalloc_build "$WORKROOT/$c" "$STAGE/clients/$c" upstream \
			"$MIMALLOC_STRESS_UPSTREAM" "${MIMALLOC_CONFIGS_UPSTREAM[@]}" ;;
	jemalloc) jemalloc_build "$WORKROOT/$c" "$STAGE/clients/$c" debian ;;
	jemalloc-upstream) jemalloc_build "$WORKROOT/$c" "$STAGE/clients/$c" upstream ;;
	*) die "unknown client $c (bdwgc, bdwgc-upstream, mimalloc, mimalloc-upstream, jemalloc, jemalloc-upstream)" ;;
	esac
	echo "$c" >>"$STAGE/clients/order"
	log "$c: $(wc -l <"$STAGE/clients/$c/tests") programs x $(wc -l <"$STAGE/clients/$c/configs") configurations staged"
done
git -C "$SRCROOT" describe --always --dirty >"$STAGE/clients/libmadvx" 2>/dev/null ||
	echo unknown >"$STAGE/clients/libmadvx"

# The runner, then the payload after its __PAYLOAD__ line.
{
	cat "$SRCROOT/examples/common/kernel-clients-run.sh"
	echo __PAYLOAD__
	tar -C "$STAGE" -c clients | xz -T1 -1 | base64
} >"$OUT.tmp"
chmod 755 "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "$OUT: $(du -h "$OUT" | cut -f1), clients ${CLIENTS[*]}"
