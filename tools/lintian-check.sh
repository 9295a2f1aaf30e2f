#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Would a Debian package of libmadvx pass lintian? Builds the library the way
# a package build does (prefix /usr, multiarch libdir, dpkg-buildflags'
# hardening flags, buildtype plain), installs it into a staging tree, splits
# it the usual way (libmadvx1: the shared library; libmadvx-dev: header,
# .so link, .a, .pc, man3/man7; madvx-tools: madvx-probe, madvx-reclaim, man1), wraps each
# in a throwaway .deb (no debian/ directory is committed: the control data is
# written here) and runs lintian on the three. Fails on any lintian error.
#
# Warnings this check expects, and why they are not fixed here:
#  - no-symbols-control-file (info): a real package would generate one with
#    dpkg-gensymbols; shlibs is enough for a throwaway .deb.
#  - initial-upload-closes-no-bugs / no-manual-page for nothing else: the
#    changelog is synthetic.
# Anything else lintian prints is shown and counted.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
for p in lintian dpkg-deb dpkg-shlibdeps dpkg-architecture dpkg-buildflags; do
	command -v $p >/dev/null || { echo "SKIP: $p not installed (apt-get install lintian dpkg-dev)"; exit 77; }
done

W=$(mktemp -d /tmp/madvx-deb.XXXXXX)
trap 'rm -rf "$W"' EXIT
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(sed -n "s/^\s*version : '\([0-9.]*\)',/\1/p" meson.build)
debver=$version-1

# A package build: hardening flags from dpkg-buildflags, no tests, no bench.
eval "$(dpkg-buildflags --export=sh)"
meson setup "$W/build" "$src" --prefix=/usr --libdir="lib/$multi" --buildtype=plain \
	--wrap-mode=nodownload -Dwerror=true -Dtests=disabled -Dbench=false -Dexamples=false \
	>"$W/setup.log" 2>&1 || { cat "$W/setup.log"; exit 1; }
ninja -C "$W/build" >"$W/build.log" 2>&1 || { cat "$W/build.log"; exit 1; }
DESTDIR="$W/stage" meson install -C "$W/build" --quiet

pkgdir() { echo "$W/pkg/$1"; }
move() {	# move PKG PATH... (paths relative to the staging tree)
	local pkg=$1 f
	shift
	for f in "$@"; do
		mkdir -p "$(pkgdir "$pkg")/$(dirname "$f")"
		mv "$W/stage/$f" "$(pkgdir "$pkg")/$f"
	done
}
cd "$W/stage"
lib=usr/lib/$multi
move libmadvx1 "$lib"/libmadvx.so.*
move libmadvx-dev usr/include "$lib/libmadvx.so" "$lib/libmadvx.a" "$lib/pkgconfig" usr/share/man/man3 usr/share/man/man7
move madvx-tools usr/bin usr/share/man/man1
left=$(find . -type f -o -type l)
[ -z "$left" ] || { echo "FAIL: installed but in no package: $left"; exit 1; }
cd "$W"
# The soname number (libmadvx.so.N), which names the runtime package too.
sover=$(readelf -d "$(pkgdir libmadvx1)/$lib"/libmadvx.so.*.* | sed -n 's/.*SONAME.*libmadvx\.so\.\([0-9]*\)\].*/\1/p')
[ "$sover" = 1 ] || { echo "FAIL: soname libmadvx.so.$sover: rename the package libmadvx1 in this script"; exit 1; }

for pkg in libmadvx1 libmadvx-dev madvx-tools; do
	d=$(pkgdir "$pkg")
	doc=$d/usr/share/doc/$pkg
	mkdir -p "$doc" "$d/DEBIAN"
	cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: libmadvx
Source: https://github.com/libmadvx/libmadvx

Files: *
Copyright: 2026 The libmadvx authors
License: MIT

Files: kernel/patches/*.patch
Copyright: 2026 The libmadvx authors and the authors named in each patch
License: GPL-2.0-only
Comment: Not built into any binary package; shipped in the source only.

License: MIT
$(sed -n '/^Permission is hereby/,/^SOFTWARE\.$/p' "$src/LICENSE" | sed 's/^$/./; s/^/ /')

License: GPL-2.0-only
 On Debian systems, the complete text of the GNU General Public License
 version 2 can be found in '/usr/share/common-licenses/GPL-2'.
EOF
	printf '%s (%s) unstable; urgency=medium\n\n  * Throwaway package built by tools/lintian-check.sh.\n\n -- libmadvx authors <libmadvx@lists.debian.net>  %s\n' \
		"libmadvx" "$debver" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(date +%s)}")" |
		gzip -9n >"$doc/changelog.Debian.gz"
	# Man pages are compressed; .so aliases become symlinks, as dh_installman does.
	if [ -d "$d/usr/share/man" ]; then
		find "$d/usr/share/man" -type f -name '*.[0-9]' | while read -r m; do
			target=$(sed -n 's/^\.so \(man[0-9]\/.*\)$/\1/p' "$m")
			if [ -n "$target" ]; then
				rm "$m"
				ln -s "$(basename "$target").gz" "$m.gz"	# same section
			else
				gzip -9n "$m"
			fi
		done
	fi
done

# What dh_strip and dh_fixperms do.
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	"$(pkgdir libmadvx1)/$lib"/libmadvx.so.*.* "$(pkgdir madvx-tools)"/usr/bin/*
strip --strip-debug --remove-section=.comment "$(pkgdir libmadvx-dev)/$lib/libmadvx.a"
chmod 644 "$(pkgdir libmadvx1)/$lib"/libmadvx.so.*.*

# Depends from the ELF files, as a package build gets them.
mkdir -p "$W/src/debian"
printf 'Source: libmadvx\n\nPackage: libmadvx1\nArchitecture: any\n' >"$W/src/debian/control"
shlibdeps() { (cd "$W/src" && dpkg-shlibdeps -O -l"$(pkgdir libmadvx1)/$lib" "$@" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'); }
libdeps=$(shlibdeps "$(pkgdir libmadvx1)/$lib"/libmadvx.so.*.*)
echo "libmadvx $sover libmadvx$sover (>= $version)" >"$W/shlibs.local"
tooldeps=$(cd "$W/src" && cp "$W/shlibs.local" debian/shlibs.local &&
	dpkg-shlibdeps -O -l"$(pkgdir libmadvx1)/$lib" "$(pkgdir madvx-tools)"/usr/bin/* 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')

control() {	# control PKG SECTION DEPENDS SUMMARY MULTIARCH
	local d
	d=$(pkgdir "$1")
	cat >"$d/DEBIAN/control" <<EOF
Package: $1
Source: libmadvx
Version: $debver
Architecture: $arch
Maintainer: libmadvx authors <libmadvx@lists.debian.net>
Installed-Size: $(du -sk --exclude=DEBIAN "$d" | cut -f1)
Depends: $3
Section: $2
Priority: optional
Multi-Arch: $5
Homepage: https://github.com/libmadvx/libmadvx
Description: $4
 libmadvx batches the madvise(2) hints of allocators and garbage collectors
 and plans them so that every kernel entry stays inside one VMA, on the
 per-VMA lock fast path, issuing them as process_madvise(2) vectors. It also
 wraps userfaultfd for concurrent compaction and io_uring for asynchronous
 release, and reports what the running kernel does with each advice.
EOF
	(cd "$d" && find usr -type f -exec md5sum {} + | sort -k2 >DEBIAN/md5sums)
}
control libmadvx1 libs "$libdeps" "lock-aware batched memory release for allocators and GCs" same
echo "libmadvx $sover libmadvx$sover (>= $version)" >"$(pkgdir libmadvx1)/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$(pkgdir libmadvx1)/DEBIAN/triggers"
control libmadvx-dev libdevel "libmadvx1 (= $debver), liburing-dev" \
	"lock-aware batched memory release - development files" same
control madvx-tools utils "$tooldeps" "lock-aware batched memory release - probe tool" foreign

for pkg in libmadvx1 libmadvx-dev madvx-tools; do
	dpkg-deb --root-owner-group -Zxz --build "$(pkgdir "$pkg")" "$W/${pkg}_${debver}_$arch.deb" >/dev/null
done
for f in "$W"/*.deb; do echo "lintian: built ${f##*/}"; done

# --suppress-tags: see the header of this script for each.
lintian --no-tag-display-limit -i --suppress-tags no-symbols-control-file,initial-upload-closes-no-bugs \
	"$W"/*.deb >"$W/lintian.log" 2>&1 || true
grep -v '^N:' "$W/lintian.log" | grep -E '^[EWIPX]:' | sort | uniq -c | sed 's/^/lintian: /' || true
errors=$(grep -c '^E:' "$W/lintian.log" || true)
warnings=$(grep -c '^W:' "$W/lintian.log" || true)
echo "lintian: $errors errors, $warnings warnings on libmadvx1, libmadvx-dev, madvx-tools $debver"
[ "$errors" -eq 0 ]
