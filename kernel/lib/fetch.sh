# SPDX-License-Identifier: MIT
# Fetch and extract the pinned kernel source package (sourced by kernel/run).
#
# We use a private apt configuration (own sources list, lists and cache under
# $CACHE/apt) so the machine's apt state is never changed.  The mirror is the
# one this machine's apt already uses; we derive it at run time and never
# write it into the tree.

# Sources: "new" (the pinned 7.3 of base.conf, cache $MADVX_KERNEL_CACHE)
# and "old" (6.1, issue 24, cache $MADVX_KERNEL_OLD_CACHE).  use_source
# switches the globals every function of fetch.sh and build.sh reads
# (CACHE, MADVX_KERNEL_*), and forgets the fetched state (DEB, DEBVER,
# SRC_PRISTINE): call cmd_fetch after it.  kernel/run uses the old source
# only in a subshell (kernel_for, versions), so the run dir, initramfs and
# locks of a run stay in the main cache.
# examples/common/debsrc.sh (the clients' source packages) sources this
# file for debian_mirror_uri and papt with only CACHE set (under set -u):
# everything else may be unset.
MAIN_CACHE=${CACHE-}
OLD_CACHE=${MADVX_KERNEL_OLD_CACHE:-/var/cache/madvx-kernel-old}
MAIN_PACKAGE=${MADVX_KERNEL_PACKAGE-}
MAIN_SERIES=${MADVX_KERNEL_SERIES-}
MAIN_SUITE=${MADVX_KERNEL_SUITE-}
MAIN_COMPONENT=${MADVX_KERNEL_COMPONENT-}
MIRROR_SUITE=""
SOURCE=new
DEB=${DEB:-} DEBVER=${DEBVER:-} KVER=${KVER:-} SRC_PRISTINE=${SRC_PRISTINE:-} SRC_PATCHED=${SRC_PATCHED:-}

use_source()
{
	case $1 in
	new)
		CACHE=$MAIN_CACHE MADVX_KERNEL_PACKAGE=$MAIN_PACKAGE
		MADVX_KERNEL_SERIES=$MAIN_SERIES MADVX_KERNEL_SUITE=$MAIN_SUITE
		MADVX_KERNEL_COMPONENT=$MAIN_COMPONENT MIRROR_SUITE=""
		;;
	old)
		CACHE=$OLD_CACHE MADVX_KERNEL_PACKAGE=$MADVX_OLD_PACKAGE
		MADVX_KERNEL_SERIES=$MADVX_OLD_SERIES MADVX_KERNEL_SUITE=$MADVX_OLD_SUITE
		MADVX_KERNEL_COMPONENT=$MADVX_OLD_COMPONENT MIRROR_SUITE=$MADVX_OLD_MIRROR_SUITE
		;;
	*) die "unknown kernel source '$1'" ;;
	esac
	# shellcheck disable=SC2034 # read by kernel_for (zz-main.sh)
	SOURCE=$1
	DEB="" DEBVER="" KVER="" SRC_PRISTINE="" SRC_PATCHED=""
	mkdir -p "$CACHE"
}

# Print the Debian mirror URI this machine's apt configuration uses for the
# main archive (the stanza whose suites include the release codename), or
# for $MIRROR_SUITE when set (the old source: "bookworm-security" is on the
# security mirror, a stanza of its own).
debian_mirror_uri()
{
	local codename f uri
	if [[ -z $MIRROR_SUITE && -n ${MADVX_DEBIAN_MIRROR:-} ]]; then
		echo "$MADVX_DEBIAN_MIRROR"
		return
	fi
	if [[ -n $MIRROR_SUITE && -n ${MADVX_DEBIAN_SECURITY_MIRROR:-} ]]; then
		echo "$MADVX_DEBIAN_SECURITY_MIRROR"
		return
	fi
	codename=${MIRROR_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
	[[ -n $codename ]] || die "cannot read VERSION_CODENAME from /etc/os-release"
	# deb822 *.sources: a stanza is a paragraph; take URIs of one that
	# lists "$codename" itself (not -security / -updates) in Suites.
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r $f ]] || continue
		uri=$(awk -v cn="$codename" '
			BEGIN { RS = ""; FS = "\n" }
			{
				uris = ""; ok = 0; deb = 0; en = 1
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^[ \t]*#/) continue
					if (line ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", line); uris = line }
					if (line ~ /^Types:/ && line ~ /(^|[ \t])deb([ \t]|$)/) deb = 1
					if (line ~ /^Enabled:[ \t]*no/) en = 0
					if (line ~ /^Suites:/) {
						n = split(line, s, /[ \t]+/)
						for (j = 2; j <= n; j++) if (s[j] == cn) ok = 1
					}
				}
				if (ok && deb && en && uris != "") { split(uris, u, /[ \t]+/); print u[1]; exit }
			}' "$f")
		if [[ -n $uri ]]; then
			echo "$uri"
			return
		fi
	done
	# one-line format
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		uri=$(awk -v cn="$codename" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == cn) { print $i; exit }
			}' "$f")
		if [[ -n $uri ]]; then
			echo "$uri"
			return
		fi
	done
	die "no Debian mirror for '$codename' found in the apt configuration (set MADVX_DEBIAN_MIRROR${MIRROR_SUITE:+ / MADVX_DEBIAN_SECURITY_MIRROR})"
}

# apt-get with our private state.
papt()
{
	apt-get -q \
		-o APT::Sandbox::User=root \
		-o Dir::Etc::SourceList="$CACHE/apt/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$CACHE/apt/lists" \
		-o Dir::Cache="$CACHE/apt/cache" \
		-o Dir::Etc::Preferences=/dev/null \
		-o Dir::Etc::PreferencesParts=/dev/null \
		-o APT::Get::List-Cleanup=0 \
		"$@"
}

papt_cache()
{
	apt-cache \
		-o Dir::Etc::SourceList="$CACHE/apt/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$CACHE/apt/lists" \
		-o Dir::Cache="$CACHE/apt/cache" \
		-o Dir::Etc::Preferences=/dev/null \
		-o Dir::Etc::PreferencesParts=/dev/null \
		"$@"
}

# Write the private sources list and update the private lists; a signature
# problem is fatal (apt refuses unsigned indexes itself; we also refuse its
# warnings about them).
update_private_lists()
{
	local uri
	uri=$(debian_mirror_uri)
	[[ -r $MADVX_KERNEL_KEYRING ]] || die "keyring $MADVX_KERNEL_KEYRING missing (apt-get install debian-archive-keyring)"
	printf 'deb [signed-by=%s] %s %s %s\n' "$MADVX_KERNEL_KEYRING" "$uri" \
		"$MADVX_KERNEL_SUITE" "$MADVX_KERNEL_COMPONENT" >"$CACHE/apt/sources.list"
	log "fetch: apt update of $MADVX_KERNEL_SUITE/$MADVX_KERNEL_COMPONENT (private lists in $CACHE/apt)"
	papt update -o APT::Get::AllowUnauthenticated=false >"$CACHE/apt/update.log" 2>&1 ||
		{ cat "$CACHE/apt/update.log" >&2; die "private apt-get update failed"; }
	if grep -Eq '^(W|E):.*(GPG|signature|NO_PUBKEY|not signed)' "$CACHE/apt/update.log"; then
		cat "$CACHE/apt/update.log" >&2
		die "signature problem with $MADVX_KERNEL_SUITE"
	fi
}

# Print the SHA256 fields the signed Packages index gives for package=version
# (one per line; apt-cache prints a record per index that carries it).  The
# whole output is read before it is matched: a reader that stops at its
# first match (grep -q) kills apt-cache with SIGPIPE, and under pipefail a
# matching hash then reads as a mismatch (issue 19).
index_sha256()
{
	local records
	records=$(papt_cache show "$1=$2" 2>/dev/null) || return 0
	awk '/^SHA256: / { print $2 }' <<<"$records"
}

# Check $1 (a .deb of $MADVX_KERNEL_PACKAGE) against the signed index and die
# unless its SHA256 is the index's.  Run on every use of the file, cached or
# just downloaded: a cache is only as good as its last check.
verify_deb()
{
	local deb=$1 ver sha want
	ver=$(dpkg-deb -f "$deb" Version 2>/dev/null) || die "$deb is not a readable .deb"
	sha=$(sha256sum "$deb" | cut -d' ' -f1)
	want=$(index_sha256 "$MADVX_KERNEL_PACKAGE" "$ver")
	[[ -n $want ]] ||
		die "$MADVX_KERNEL_PACKAGE=$ver is not in the private Packages index (kernel/run fetch --refresh)"
	grep -qxF "$sha" <<<"$want" ||
		die "SHA256 of $deb ($sha) does not match the Packages index ($(tr '\n' ' ' <<<"$want"))"
	echo "$sha  $(basename "$deb")" >"$deb.sha256"
	log "fetch: $(basename "$deb") sha256 $sha verified against the signed Packages index"
}

# The newest cached .deb of the package, or nothing.
newest_cached_deb()
{
	local debs=("$CACHE/debs/${MADVX_KERNEL_PACKAGE}"_*.deb)
	[[ -f ${debs[0]} ]] || return 0
	printf '%s\n' "${debs[@]}" | sort -V | tail -n 1
}

# Download the newest $MADVX_KERNEL_PACKAGE into $CACHE/debs, unless a .deb of
# it is cached already and --refresh was not given.  Sets DEB.
fetch_deb()
{
	local have want debs
	mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/debs"
	have=$(newest_cached_deb)
	if [[ -n $have && ${REFRESH:-0} = 0 ]]; then
		DEB=$have
		# A cache filled by an older kernel/run may lack the lists.
		[[ -f $CACHE/apt/sources.list ]] || update_private_lists
		log "fetch: using cached $(basename "$DEB") (kernel/run fetch --refresh to look for a newer upload)"
		verify_deb "$DEB"
		return
	fi
	update_private_lists
	want=$(papt_cache show "$MADVX_KERNEL_PACKAGE" 2>/dev/null |
		awk '/^Version:/ { print $2 }' | sort -V | tail -n 1)
	[[ -n $want ]] || die "$MADVX_KERNEL_PACKAGE not found in $MADVX_KERNEL_SUITE"
	log "fetch: downloading $MADVX_KERNEL_PACKAGE=$want"
	(cd "$CACHE/debs" && papt download "$MADVX_KERNEL_PACKAGE=$want") ||
		die "apt-get download $MADVX_KERNEL_PACKAGE=$want failed"
	debs=("$CACHE/debs/${MADVX_KERNEL_PACKAGE}_${want//:/%3a}"_*.deb)
	[[ -f ${debs[0]} ]] || die "apt-get download left no .deb of $MADVX_KERNEL_PACKAGE=$want"
	DEB=${debs[0]}
	# apt-get download checks the hash already; check it once more against
	# the (signature-verified) Packages index so the record is explicit.
	verify_deb "$DEB"
}

# Extract the .deb's tarball to $CACHE/src/linux-<upstream version>/pristine.
# Sets KVER (upstream version, e.g. 7.3.4), DEBVER and SRC_PRISTINE.
extract_source()
{
	local dir tmp tarball tarballs
	DEBVER=$(dpkg-deb -f "$DEB" Version)
	KVER=${DEBVER%%-*}
	KVER=${KVER%%+*}
	KVER=${KVER%%~*}
	dir="$CACHE/src/linux-${DEBVER//[~+:]/_}"
	SRC_PRISTINE="$dir/pristine"
	if [[ -f $dir/.extracted ]]; then
		return
	fi
	log "extract: $(basename "$DEB") -> $SRC_PRISTINE"
	rm -rf "$dir"
	mkdir -p "$dir"
	tmp="$dir/tmp"
	mkdir -p "$tmp"
	dpkg-deb -x "$DEB" "$tmp"
	tarballs=("$tmp"/usr/src/linux-source-*.tar.*)
	tarball=${tarballs[0]}
	[[ -f $tarball ]] || die "no source tarball inside $DEB"
	mkdir -p "$SRC_PRISTINE"
	tar -xf "$tarball" -C "$SRC_PRISTINE" --strip-components=1
	rm -rf "$tmp"
	[[ -f $SRC_PRISTINE/Makefile ]] || die "extracted tree has no Makefile"
	touch "$dir/.extracted"
}

cmd_fetch()
{
	lock src
	fetch_deb
	extract_source
	unlock src
	log "fetch: base is $MADVX_KERNEL_PACKAGE $DEBVER (Linux $(kernel_version "$SRC_PRISTINE")) in $SRC_PRISTINE"
}

# "make kernelversion" without running make.
kernel_version()
{
	awk '/^VERSION =/ { v = $3 } /^PATCHLEVEL =/ { p = $3 } /^SUBLEVEL =/ { s = $3 }
		END { print v "." p "." s }' "$1/Makefile"
}
