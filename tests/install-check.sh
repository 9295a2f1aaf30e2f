#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install into a scratch DESTDIR, then build a C and a C++ consumer of
# <madvx.h> with nothing but `pkg-config --cflags --libs madvx`, run them
# against the installed library, and check that the shared library exports
# only madvx_* symbols.
# Usage: install-check.sh BUILD_DIR SOURCE_MAP (src/libmadvx.map of the
# source tree: meson passes both, the build dir may be anywhere).
set -euo pipefail
build=$1
map=$2
[ -r "$map" ] || { echo "FAIL: version script $map not readable"; exit 1; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT

meson install -C "$build" --destdir "$D" --no-rebuild --quiet
# first_found DIR NAME-OR-PATH-TEST...: the first match of find(1), or
# nothing. find's -quit stops it at that match; no reader exits early on a
# pipe (under pipefail that killed writer fails the script, issue 19).
first_found() {
	local dir=$1; shift
	find "$dir" "$@" -print -quit
}
pc=$(first_found "$D" -name madvx.pc)
[ -n "$pc" ] || { echo "FAIL: madvx.pc not installed"; exit 1; }
pcdir=$(dirname "$pc")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$D
so=$(first_found "$D" -name 'libmadvx.so.*.*')
[ -n "$so" ] || { echo "FAIL: libmadvx.so.* not installed"; exit 1; }
LD_LIBRARY_PATH=$(dirname "$so")
export LD_LIBRARY_PATH
# The installed tools carry a RUNPATH to the prefix's libdir (not for /usr):
# from a private prefix they run without LD_LIBRARY_PATH.
prefix=$(meson introspect --buildoptions "$build" |
	python3 -c 'import json,sys; o={x["name"]: x["value"] for x in json.load(sys.stdin)}; print(o["prefix"] + "\t" + o["libdir"])')
libdir=${prefix#*$'\t'}
prefix=${prefix%%$'\t'*}
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
probe_bin=$(first_found "$D" -path '*/bin/madvx-probe')
runpath=$(readelf -dW "$probe_bin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
if [ "$prefix" = /usr ] || [ "$prefix" = / ]; then
	[ -z "$runpath" ] || { echo "FAIL: madvx-probe has RUNPATH $runpath under prefix $prefix"; exit 1; }
else
	[ "$runpath" = "$libdir" ] ||
		{ echo "FAIL: madvx-probe RUNPATH '$runpath', want '$libdir' (prefix $prefix)"; exit 1; }
	echo "installed tools: RUNPATH $runpath"
fi
for f in include/madvx.h include/madvx-version.h bin/madvx-probe; do
	[ -n "$(first_found "$D" -path "*/$f")" ] || { echo "FAIL: $f not installed"; exit 1; }
done

cat > "$D/c.c" <<'EOC'
#include <stdio.h>
#include <madvx.h>
int main(void)
{
	int pm = madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE);
	printf("C: libmadvx %s (header %s), process_madvise %d\n",
	       madvx_version(), MADVX_VERSION_STRING, pm);
	return pm < 0;
}
EOC
cp "$D/c.c" "$D/cxx.cc"
sed -i 's/"C: /"C++: /' "$D/cxx.cc"
# shellcheck disable=SC2046 # pkg-config prints several flags: split on purpose
cc -Wall -Werror -o "$D/c" "$D/c.c" $(pkg-config --cflags --libs madvx)
for f in man3/madvx_batch_create.3 man7/madvx.7 man1/madvx-probe.1; do
	[ -n "$(first_found "$D" -path "*/man/$f*")" ] || { echo "FAIL: $f not installed"; exit 1; }
done
"$D/c"
cxx=1
if command -v c++ >/dev/null; then
	# shellcheck disable=SC2046 # as above
	c++ -Wall -Werror -o "$D/cxx" "$D/cxx.cc" $(pkg-config --cflags --libs madvx)
	"$D/cxx"
else
	cxx=0
fi

# The installed header alone, in every language mode a user may pick,
# warning-free: ISO C99 (no anonymous unions), C11, C++11/17/20 (no name that
# is both a type and a function). gcc's and, when installed, clang's.
cat > "$D/h.c" <<'EOC'
#include <madvx.h>
#include <madvx.h>	/* include guard */
int main(void)
{
#ifdef __cplusplus
	madvx_async_backend b = madvx_async_backend_get(nullptr);
	madvx_uffd_event ev = {};
#else
	enum madvx_async_backend b = madvx_async_backend_get(NULL);
	struct madvx_uffd_event ev = { 0 };
#endif
	struct madvx_kernel_info ki;

	ki.size = sizeof(ki);

	ev.arg.fault.addr = MADVX_ADV_DONTNEED;
	return (int)b + (int)ev.arg.fault.addr - 4 + madvx_kernel_info_get(&ki);
}
EOC
cp "$D/h.c" "$D/h.cc"
modes=0
for comp in cc clang c++ clang++; do
	command -v $comp >/dev/null || continue
	case $comp in
	*++) stds="c++11 c++17 c++20"; src=$D/h.cc ;;
	*) stds="c99 c11"; src=$D/h.c ;;
	esac
	for std in $stds; do
		# shellcheck disable=SC2046 # as above
		$comp -std="$std" -pedantic -Wall -Wextra -Werror -o "$D/h" "$src" \
			$(pkg-config --cflags --libs madvx) ||
			{ echo "FAIL: <madvx.h> with $comp -std=$std -pedantic"; exit 1; }
		"$D/h" || { echo "FAIL: $comp -std=$std program"; exit 1; }
		modes=$((modes + 1))
	done
done
echo "header: compiles warning-free in $modes compiler/standard modes"

bad=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^madvx_' | grep -v '^LIBMADVX_' || true)
if [ -n "$bad" ]; then
	echo "FAIL: symbols outside madvx_*: $bad"
	exit 1
fi
echo "exports: $(nm -D --defined-only "$so" | grep -c ' T madvx_') madvx_* functions, nothing else"
# The static archive: public names are the map's, internal ones __madvx_*
# (liburing's __io_uring_), so a future public name can never clash.
ar=$(first_found "$D" -name 'libmadvx.a')
if [ -n "$ar" ]; then
	public=$(grep -oE '\bmadvx_[a-z0-9_]+' "$map" | sort -u)
	[ -n "$public" ] || { echo "FAIL: no madvx_* name in $map"; exit 1; }
	bad=$(nm -g --defined-only "$ar" | awk 'NF == 3 {print $3}' | grep -v '^__madvx_' |
	      sort -u | comm -23 - <(echo "$public") || true)
	if [ -n "$bad" ]; then
		echo "FAIL: libmadvx.a defines globals that are neither public nor __madvx_*: $bad"
		exit 1
	fi
	echo "static archive: internals are __madvx_* ($(nm -g --defined-only "$ar" | grep -c ' __madvx_') symbols)"
fi
if [ $cxx -eq 0 ]; then
	echo "SKIP: no C++ compiler (c++): the C consumer passed, the C++ one was not built"
	exit 77
fi
