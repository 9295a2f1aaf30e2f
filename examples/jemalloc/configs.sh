# SPDX-License-Identifier: MIT
# How jemalloc is built and what its own tests run with, stock and patched
# (sourced by check.sh, on the host, and by examples/common/kernel-clients.sh,
# for the test kernel).
# shellcheck disable=SC2034 # read by the scripts that source this file

# Upstream dev (check.sh --upstream, kernel-clients.sh jemalloc-upstream):
# the commit, and the version configure is given (it wants a `git describe
# --long` version; an exported tree has none).
JEMALLOC_UPSTREAM_COMMIT=295e48944b200b595a72902a81e1ed8cad6a3866	# dev, 2026-05-18
JEMALLOC_UPSTREAM_VERSION=5.3.1-47-g$JEMALLOC_UPSTREAM_COMMIT

# jemalloc_configure FLAVOUR SRC DIR CPPFLAGS LDFLAGS LIBS [OPTION...]:
# configure jemalloc source SRC (FLAVOUR debian: Debian's 5.3.0-1; upstream:
# dev) in build directory DIR, output in DIR.configure.out.  Both scripts
# build with these options, so the host's and the test kernel's builds
# differ only in the OPTIONs (shared or static) and what they make.
# debian: debian/rules' options on amd64 and dpkg-buildflags.  upstream:
# dev's own CFLAGS, its version, and a PIDFD_SELF: dev's configure test
# for process_madvise (configure.ac) compiles syscall(SYS_process_madvise,
# PIDFD_SELF, ...) with <sys/pidfd.h>, and PIDFD_SELF is Linux 6.15's uapi,
# which glibc 2.36's headers (uapi 6.1) lack, so the test would fail and
# JEMALLOC_HAVE_PROCESS_MADVISE (the whole path) be compiled out, although
# pages.c defines PIDFD_SELF itself when it is missing.  The kernel's
# value (PIDFD_SELF_THREAD, the -10000 pages.c falls back to) passes the
# test, in both builds; on kernels before 6.15 stock's raw call then fails
# with EBADF and turns itself off (madvise() per range).
jemalloc_configure()
{
	local flavour=$1 src=$2 dir=$3 cppflags=$4 ldflags=$5 libs=$6 opts=()
	shift 6
	if [[ $flavour == upstream ]]; then
		cppflags="-DPIDFD_SELF=-10000${cppflags:+ $cppflags}"
		opts=(--with-version="$JEMALLOC_UPSTREAM_VERSION")
	else
		cppflags="$(dpkg-buildflags --get CPPFLAGS)${cppflags:+ $cppflags}"
		ldflags="$(dpkg-buildflags --get LDFLAGS)${ldflags:+ $ldflags}"
		opts=(--with-version=VERSION CFLAGS="$(dpkg-buildflags --get CFLAGS)")
	fi
	(cd "$dir" && "$src/configure" "${opts[@]}" \
		--with-lg-page=12 --with-lg-hugepage=21 --enable-prof "$@" \
		CPPFLAGS="$cppflags" LDFLAGS="$ldflags" LIBS="$libs") \
		>"$dir.configure.out" 2>&1
}

# jemalloc_has_process_madvise FLAVOUR DIR: whether configure in DIR found
# what dev's process_madvise() path needs (Debian's 5.3 has no such path).
jemalloc_has_process_madvise()
{
	[[ $1 == debian ]] ||
		grep -q '^#define JEMALLOC_HAVE_PROCESS_MADVISE' \
			"$2/include/jemalloc/internal/jemalloc_internal_defs.h"
}

# name|builds|environment of one run of the tests.  jemalloc 5.3 purges
# dirty extents along a 10 s decay curve (dirty_decay_ms) with
# MADV_DONTNEED, in passes at decay epoch advances (every 50 ms); its
# muzzy_decay_ms is 0 (no MADV_FREE step).  decay0 is the setting `make
# check` itself runs the integration tests in (check_integration_decay):
# every freed extent is purged at once, mostly in passes of one extent.
# decay1s (test/unit/decay's own setting): dirty extents go muzzy with
# MADV_FREE after about a second, muzzy ones are purged with
# MADV_DONTNEED a second later, in long passes: both hand-backs of the
# patch.  no-vector: decay0 with every hint a madvise() and no
# PROCMAP_QUERY (bounds from /proc/self/maps).
#
# The last field says how the unit tests run: "as-is" with the whole
# environment, "no-conf" without its MALLOC_CONF (as in `make check`, a
# configuration's MALLOC_CONF is for the integration tests and je-purge:
# the unit tests set their own in test/unit/*.sh, and some wait for
# purges their own settings make: unit/arena_decay spins until its
# timeout under decay 0), "none" not at all.  An optional last field
# names the configuration whose stock run a patched-only one is compared
# with.
JEMALLOC_CONFIGS_DEBIAN=(
	"default|stock patched||as-is"
	"decay0|stock patched|MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0|none"
	"decay1s|stock patched|MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:1000|none"
	"no-vector|patched|MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0 MADVX_DISABLE=process_madvise,procmap_query|no-conf"
	"hold|patched|MALLOC_CONF=madvx_hold_ms:100 JE_PURGE_HUGE=5|as-is|default"
)

# Upstream dev purges through process_madvise() only when asked:
# opt.process_madvise_max_batch is 0 by default (every range its own
# madvise()).  With it > 0, pac.c's decay passes that purge to retained
# (muzzy_decay_ms 0, or the muzzy pass) and the HPA's purge batches
# (opt.hpa, off by default) hand vectors of up to that many ranges to
# pages_purge_process_madvise(): the path the patch routes.  default is
# `make check` as it is (the path off in both builds); pm64 turns on both
# users of the path for every test (the appended MALLOC_CONF wins over a
# unit test's own settings, stock as patched); pm64-decay0 is `make
# check`'s check_integration_decay setting with the PAC path (every freed
# extent purged at once); no-vector is pm64 with every hint a madvise()
# and no PROCMAP_QUERY (bounds from /proc/self/maps), compared with pm64's
# stock run.
PM=process_madvise_max_batch:64
JEMALLOC_CONFIGS_UPSTREAM=(
	"default|stock patched||as-is"
	"pm64|stock patched|MALLOC_CONF=hpa:true,$PM|as-is"
	"pm64-decay0|stock patched|MALLOC_CONF=$PM,dirty_decay_ms:0,muzzy_decay_ms:0|none"
	"no-vector|patched|MALLOC_CONF=hpa:true,$PM MADVX_DISABLE=process_madvise,procmap_query|as-is|pm64"
)

# Left out by default (MADVX_JEMALLOC_TESTS=all runs them): unit tests of
# data structures and utilities that never reach the page allocator, so
# nothing the patch changes (18 of the unit tests' ~50 s per build).
JEMALLOC_NOT_PURGING=(
	unit/atomic unit/bit_util unit/bitmap unit/buf_writer unit/ckh
	unit/counter unit/div unit/emitter unit/fb unit/fxp unit/hash unit/log
	unit/malloc_io unit/math unit/mpsc_queue unit/mq unit/mtx unit/nstime
	unit/ph unit/prng unit/ql unit/qr unit/rb unit/rtree unit/SFMT unit/sc
	unit/seq unit/size_classes unit/smoothstep unit/spin unit/sz
	unit/ticker unit/witness
)
