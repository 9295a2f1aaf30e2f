# SPDX-License-Identifier: MIT
# Fetch and verify Debian's libgc source package (sourced by check.sh).
#
# A private apt configuration (own sources list with one deb-src line,
# lists and cache under $CACHE/apt) so the machine's apt state is never
# touched; the mirror is the one this machine's apt uses for its release
# (kernel/lib/fetch.sh's debian_mirror_uri, shared), the index is checked
# with debian-archive-keyring.  Every file of the source package (.dsc,
# tarballs) is checked against the SHA256 the signed Sources index gives,
# on every use: a cached file is only as good as its last check.

# Fetch into $CACHE/src (unless cached) and verify.  Sets DSC.  Exit 77
# when the mirror cannot be reached and nothing usable is cached.
libgc_fetch()
{
	local pkg=$LIBGC_PACKAGE ver=$LIBGC_VERSION uri
	mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/src"
	if [[ ! -f $CACHE/apt/lists/.updated ]] || ! libgc_have_files; then
		[[ -r $LIBGC_KEYRING ]] ||
			skip "keyring $LIBGC_KEYRING missing (apt-get install debian-archive-keyring)"
		uri=$(debian_mirror_uri)
		printf 'deb-src [signed-by=%s] %s %s %s\n' "$LIBGC_KEYRING" "$uri" \
			"$LIBGC_SUITE" main >"$CACHE/apt/sources.list"
		log "apt update of deb-src $uri $LIBGC_SUITE main (private lists in $CACHE/apt)"
		if ! papt update -o APT::Get::AllowUnauthenticated=false >"$CACHE/apt/update.log" 2>&1; then
			cat "$CACHE/apt/update.log" >&2
			libgc_offline_or_die "private apt-get update failed"
		fi
		if grep -Eq '^(W|E):.*(GPG|signature|NO_PUBKEY|not signed)' "$CACHE/apt/update.log"; then
			cat "$CACHE/apt/update.log" >&2
			die "signature problem with $LIBGC_SUITE"
		fi
		if grep -Eq '^(W|E):' "$CACHE/apt/update.log"; then
			cat "$CACHE/apt/update.log" >&2
			libgc_offline_or_die "private apt-get update could not fetch the Sources index"
		fi
		touch "$CACHE/apt/lists/.updated"
	fi
	if ! libgc_have_files; then
		log "downloading $pkg=$ver (apt-get source --download-only)"
		(cd "$CACHE/src" && papt source --download-only "$pkg=$ver" >"$CACHE/src/download.log" 2>&1) || {
			cat "$CACHE/src/download.log" >&2
			libgc_offline_or_die "apt-get source --download-only $pkg=$ver failed"
		}
	fi
	libgc_verify
}

# The unreachable case: 77 and why (a test of ours cannot run without it).
libgc_offline_or_die()
{
	skip "$1: Debian's $LIBGC_PACKAGE $LIBGC_VERSION source cannot be had here (network?)"
}

# The file names and SHA256 the signed Sources index gives for the
# package version ("sha256 name" per line; empty when it lists none).
libgc_index()
{
	local rec
	# showsrc takes no =version: read every record, keep the version's.
	rec=$(papt_cache showsrc "$LIBGC_PACKAGE" 2>/dev/null) || return 0
	awk -v v="$LIBGC_VERSION" '
		/^$/ { ver = ""; on = 0; next }
		/^Version:/ { ver = $2 }
		/^Checksums-Sha256:/ { on = 1; next }
		on && /^ / { if (ver == v) print $1, $3; next }
		{ on = 0 }' <<<"$rec" | sort -u
}

# Every file the index lists is in $CACHE/src.
libgc_have_files()
{
	local idx sha name
	idx=$(libgc_index)
	[[ -n $idx ]] || return 1
	while read -r sha name; do
		[[ -f $CACHE/src/$name ]] || return 1
	done <<<"$idx"
}

# Check every file against the index; die on a mismatch.  Sets DSC.
libgc_verify()
{
	local idx sha name got n=0
	idx=$(libgc_index)
	[[ -n $idx ]] || die "$LIBGC_PACKAGE=$LIBGC_VERSION is not in the private Sources index ($CACHE/apt)"
	DSC=
	while read -r sha name; do
		[[ -f $CACHE/src/$name ]] || die "$name missing from $CACHE/src"
		got=$(sha256sum "$CACHE/src/$name")
		got=${got%% *}
		[[ $got = "$sha" ]] ||
			die "SHA256 of $CACHE/src/$name ($got) does not match the Sources index ($sha)"
		[[ $name = *.dsc ]] && DSC=$CACHE/src/$name
		n=$((n + 1))
	done <<<"$idx"
	[[ -n $DSC ]] || die "the Sources index lists no .dsc for $LIBGC_PACKAGE=$LIBGC_VERSION"
	log "$n files of $LIBGC_PACKAGE $LIBGC_VERSION verified against the signed Sources index"
}

# Unpack the verified source (Debian's patches applied) into $1, fresh.
libgc_extract()
{
	rm -rf "$1"
	dpkg-source --no-check -x "$DSC" "$1" >"$1.extract.log" 2>&1 ||
		{ cat "$1.extract.log" >&2; die "dpkg-source -x $DSC failed"; }
}
