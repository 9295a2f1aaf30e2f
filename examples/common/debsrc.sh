# SPDX-License-Identifier: MIT
# Fetch, verify and extract one Debian source package (sourced by the
# clients' check scripts: examples/bdwgc, examples/mimalloc,
# examples/jemalloc).
#
# A private apt configuration (own sources list with one deb-src line,
# lists and cache under $CACHE/apt) so the machine's apt state is never
# touched; the mirror is the one this machine's apt uses for its release
# (kernel/lib/fetch.sh's debian_mirror_uri, shared), the index is checked
# with debian-archive-keyring.  Every file of the source package (.dsc,
# tarballs) is checked against the SHA256 the signed Sources index gives,
# on every use: a cached file is only as good as its last check.
#
# The caller sets CACHE (one directory per package: apt/ and src/ go in
# it) and defines log, die and skip (exit 77 with the reason: the
# clients source examples/common/client.sh for them); then
#   debsrc_fetch PACKAGE VERSION [SUITE]    sets DSC (verified)
#   debsrc_extract DIR                      unpacks DSC into DIR, fresh
# MADVX_DEBIAN_KEYRING overrides the keyring.

# shellcheck source=kernel/lib/fetch.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../kernel/lib/fetch.sh"	# debian_mirror_uri, papt, papt_cache

DEBSRC_KEYRING=${MADVX_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}

# Fetch PACKAGE=VERSION of SUITE (default bookworm) into $CACHE/src
# (unless cached) and verify it.  Sets DSC.  Exit 77 when the mirror
# cannot be reached and nothing usable is cached.
debsrc_fetch()
{
	DEBSRC_PACKAGE=$1 DEBSRC_VERSION=$2 DEBSRC_SUITE=${3:-bookworm}
	mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/src"
	if [[ ! -f $CACHE/apt/lists/.updated ]] || ! debsrc_have_files; then
		debsrc_update
	fi
	if ! debsrc_have_files; then
		log "downloading $DEBSRC_PACKAGE=$DEBSRC_VERSION (apt-get source --download-only)"
		(cd "$CACHE/src" && papt source --download-only "$DEBSRC_PACKAGE=$DEBSRC_VERSION" \
			>"$CACHE/src/download.log" 2>&1) || {
			cat "$CACHE/src/download.log" >&2
			debsrc_offline_or_die "apt-get source --download-only $DEBSRC_PACKAGE=$DEBSRC_VERSION failed"
		}
	fi
	debsrc_verify
}

# The private deb-src list and its signed Sources index.
debsrc_update()
{
	local uri log=$CACHE/apt/update.log
	[[ -r $DEBSRC_KEYRING ]] ||
		skip "keyring $DEBSRC_KEYRING missing (apt-get install debian-archive-keyring)"
	uri=$(debian_mirror_uri)
	printf 'deb-src [signed-by=%s] %s %s %s\n' "$DEBSRC_KEYRING" "$uri" \
		"$DEBSRC_SUITE" main >"$CACHE/apt/sources.list"
	log "apt update of deb-src $uri $DEBSRC_SUITE main (private lists in $CACHE/apt)"
	if ! papt update -o APT::Get::AllowUnauthenticated=false >"$log" 2>&1; then
		cat "$log" >&2
		debsrc_offline_or_die "private apt-get update failed"
	fi
	if grep -Eq '^(W|E):.*(GPG|signature|NO_PUBKEY|not signed)' "$log"; then
		cat "$log" >&2
		die "signature problem with $DEBSRC_SUITE"
	fi
	if grep -Eq '^(W|E):' "$log"; then
		cat "$log" >&2
		debsrc_offline_or_die "private apt-get update could not fetch the Sources index"
	fi
	touch "$CACHE/apt/lists/.updated"
}

# The unreachable case: 77 and why (a test of ours cannot run without it).
debsrc_offline_or_die()
{
	skip "$1: Debian's $DEBSRC_PACKAGE $DEBSRC_VERSION source cannot be had here (network?)"
}

# The file names and SHA256 the signed Sources index gives for the
# package version ("sha256 name" per line; empty when it lists none).
debsrc_index()
{
	local rec
	# showsrc takes no =version: read every record, keep the version's.
	rec=$(papt_cache showsrc "$DEBSRC_PACKAGE" 2>/dev/null) || return 0
	awk -v v="$DEBSRC_VERSION" '
		/^$/ { ver = ""; on = 0; next }
		/^Version:/ { ver = $2 }
		/^Checksums-Sha256:/ { on = 1; next }
		on && /^ / { if (ver == v) print $1, $3; next }
		{ on = 0 }' <<<"$rec" | sort -u
}

# Every file the index lists is in $CACHE/src.
debsrc_have_files()
{
	local idx sha name
	idx=$(debsrc_index)
	[[ -n $idx ]] || return 1
	while read -r sha name; do
		[[ -f $CACHE/src/$name ]] || return 1
	done <<<"$idx"
}

# Check every file against the index; die on a mismatch.  Sets DSC.
debsrc_verify()
{
	local idx sha name got n=0
	idx=$(debsrc_index)
	[[ -n $idx ]] ||
		die "$DEBSRC_PACKAGE=$DEBSRC_VERSION is not in the private Sources index ($CACHE/apt)"
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
	[[ -n $DSC ]] || die "the Sources index lists no .dsc for $DEBSRC_PACKAGE=$DEBSRC_VERSION"
	log "$n files of $DEBSRC_PACKAGE $DEBSRC_VERSION verified against the signed Sources index"
}

# Unpack the verified source (Debian's patches applied) into $1, fresh.
debsrc_extract()
{
	rm -rf "$1"
	dpkg-source --no-check -x "$DSC" "$1" >"$1.extract.log" 2>&1 ||
		{ cat "$1.extract.log" >&2; die "dpkg-source -x $DSC failed"; }
}
