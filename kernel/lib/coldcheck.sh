# SPDX-License-Identifier: MIT
# The cold path in a scratch cache (sourced by kernel/run).
#
# What only a fresh machine runs (private apt lists, the check of the .deb
# against the signed index, extraction, the first configure) is exactly
# what a CI run on a warm cache never executes: a bug there passed CI for
# weeks (issue 19).  `kernel/run coldcheck` runs it on every CI run, in a
# fresh MADVX_KERNEL_CACHE beside the real one, without downloading the
# source package again: the verified .deb is hard-linked in.  It also
# proves the check can fail: a corrupted copy must be refused before
# anything is extracted.

# coldcheck_fetch CACHE LOG: `kernel/run fetch` with CACHE as the cache.
coldcheck_fetch()
{
	MADVX_KERNEL_CACHE=$1 "$KDIR/run" fetch >"$2" 2>&1
}

# Put the verified $DEB into CACHE/debs: a hard link where the file system
# allows it, else a copy.
coldcheck_seed()
{
	mkdir -p "$1/debs"
	ln "$DEB" "$1/debs/" 2>/dev/null || cp "$DEB" "$1/debs/"
}

# One fresh cache: lists, verification, extraction, first configure.
coldcheck_good()
{
	local c=$1 out=$2 tree bdir
	coldcheck_seed "$c"
	coldcheck_fetch "$c" "$out/fetch.log" ||
		{ cat "$out/fetch.log" >&2; die "coldcheck: fetch in a fresh cache failed"; }
	grep -q 'verified against the signed Packages index' "$out/fetch.log" ||
		{ cat "$out/fetch.log" >&2; die "coldcheck: fetch did not verify the .deb"; }
	tree="$c/src/linux-${DEBVER//[~+:]/_}/pristine"
	[[ -f $tree/Makefile && $(kernel_version "$tree") = "$(kernel_version "$SRC_PRISTINE")" ]] ||
		die "coldcheck: the fresh cache has no extracted Linux $(kernel_version "$SRC_PRISTINE") in $tree"
	bdir="$c/build/base"
	mkdir -p "$bdir"
	# shellcheck disable=SC2046 # variant_fragments prints a list of paths
	configure_build_dir base "$tree" "$bdir" $(variant_fragments base)
	log "coldcheck: fresh cache fetched, verified, extracted and configured ($(grep -c '=y$' "$bdir/.config") options =y)"
}

# A corrupted copy of the .deb, with the good cache's lists: refused, and
# nothing extracted.
coldcheck_bad()
{
	local good=$1 c=$2 out=$3 deb size
	mkdir -p "$c/debs"
	cp -a "$good/apt" "$c/apt"
	deb="$c/debs/$(basename "$DEB")"
	cp "$DEB" "$deb"
	size=$(stat -c %s "$deb")
	# One byte in the middle of the data member: dpkg-deb still reads the
	# control member (the version), only the hash tells.
	printf '\xff' | dd of="$deb" bs=1 seek=$((size / 2)) conv=notrunc status=none
	cmp -s "$deb" "$DEB" && printf '\x00' | dd of="$deb" bs=1 seek=$((size / 2)) conv=notrunc status=none
	if coldcheck_fetch "$c" "$out/fetch-bad.log"; then
		cat "$out/fetch-bad.log" >&2
		die "coldcheck: a corrupted .deb was accepted"
	fi
	grep -q 'does not match the Packages index' "$out/fetch-bad.log" ||
		{ cat "$out/fetch-bad.log" >&2; die "coldcheck: the corrupted .deb failed for another reason"; }
	[[ ! -d $c/src ]] || die "coldcheck: the corrupted .deb was extracted"
	log "coldcheck: a corrupted copy is refused: $(grep -o 'SHA256 of .* does not match the Packages index' "$out/fetch-bad.log" | sed 's|/.*/||')"
}

cmd_coldcheck()
{
	local reps=1 i scratch
	while (($#)); do
		case $1 in
		--reps) reps=$2; shift ;;
		*) die "coldcheck: unknown argument $1" ;;
		esac
		shift
	done
	[[ $reps =~ ^[1-9][0-9]*$ ]] || die "coldcheck: --reps wants a positive count"
	cmd_fetch
	for ((i = 1; i <= reps; i++)); do
		scratch=$(mktemp -d "$CACHE/coldcheck.XXXXXX")
		# The scratch caches are large (an extracted tree): never leave one.
		# shellcheck disable=SC2064 # expand $scratch now: it changes per rep
		trap "rm -rf '$scratch'" EXIT
		coldcheck_good "$scratch/fresh" "$scratch"
		coldcheck_bad "$scratch/fresh" "$scratch/corrupt" "$scratch"
		rm -rf "$scratch"
		trap - EXIT
		log "coldcheck: run $i of $reps passed"
	done
}
