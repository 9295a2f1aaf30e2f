# SPDX-License-Identifier: MIT
# Fetch and extract the pinned kernel source package (sourced by kernel/run).
#
# We use a private apt configuration (own sources list, lists and cache under
# $CACHE/apt) so the machine's apt state is never changed.  The mirror is the
# one this machine's apt already uses; we derive it at run time and never
# write it into the tree.

# Print the Debian mirror URI this machine's apt configuration uses for the
# main archive (the stanza whose suites include the release codename).
debian_mirror_uri()
{
	local codename f uri
	if [[ -n ${MADVX_DEBIAN_MIRROR:-} ]]; then
		echo "$MADVX_DEBIAN_MIRROR"
		return
	fi
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
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
	die "no Debian mirror for '$codename' found in the apt configuration (set MADVX_DEBIAN_MIRROR)"
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

# Download the newest $MADVX_KERNEL_PACKAGE into $CACHE/debs, unless a .deb of
# it is cached already and --refresh was not given.  Sets DEB.
fetch_deb()
{
	local uri have sha want
	mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial" "$CACHE/debs"
	have=$(ls -1 "$CACHE/debs/${MADVX_KERNEL_PACKAGE}"_*.deb 2>/dev/null | sort -V | tail -n 1 || true)
	if [[ -n $have && ${REFRESH:-0} = 0 ]]; then
		DEB=$have
		log "fetch: using cached $(basename "$DEB") (kernel/run fetch --refresh to look for a newer upload)"
		return
	fi
	uri=$(debian_mirror_uri)
	[[ -r $MADVX_KERNEL_KEYRING ]] || die "keyring $MADVX_KERNEL_KEYRING missing (apt-get install debian-archive-keyring)"
	printf 'deb [signed-by=%s] %s %s %s\n' "$MADVX_KERNEL_KEYRING" "$uri" \
		"$MADVX_KERNEL_SUITE" "$MADVX_KERNEL_COMPONENT" >"$CACHE/apt/sources.list"
	log "fetch: apt update of $MADVX_KERNEL_SUITE/$MADVX_KERNEL_COMPONENT (private lists in $CACHE/apt)"
	# apt refuses unsigned or badly signed indexes by itself; make a
	# warning about them fatal as well.
	papt update -o APT::Get::AllowUnauthenticated=false >"$CACHE/apt/update.log" 2>&1 ||
		{ cat "$CACHE/apt/update.log" >&2; die "private apt-get update failed"; }
	if grep -Eq '^(W|E):.*(GPG|signature|NO_PUBKEY|not signed)' "$CACHE/apt/update.log"; then
		cat "$CACHE/apt/update.log" >&2
		die "signature problem with $MADVX_KERNEL_SUITE"
	fi
	want=$(papt_cache show "$MADVX_KERNEL_PACKAGE" 2>/dev/null |
		awk '/^Version:/ { print $2 }' | sort -V | tail -n 1)
	[[ -n $want ]] || die "$MADVX_KERNEL_PACKAGE not found in $MADVX_KERNEL_SUITE"
	log "fetch: downloading $MADVX_KERNEL_PACKAGE=$want"
	(cd "$CACHE/debs" && papt download "$MADVX_KERNEL_PACKAGE=$want") ||
		die "apt-get download $MADVX_KERNEL_PACKAGE=$want failed"
	DEB=$(ls -1 "$CACHE/debs/${MADVX_KERNEL_PACKAGE}_${want//:/%3a}"_*.deb | head -n 1)
	# apt-get download checks the hash already; check it once more against
	# the (signature-verified) Packages index so the record is explicit.
	sha=$(sha256sum "$DEB" | cut -d' ' -f1)
	papt_cache show "$MADVX_KERNEL_PACKAGE=$want" | grep -q "^SHA256: $sha\$" ||
		die "SHA256 of $DEB does not match the Packages index"
	echo "$sha  $(basename "$DEB")" >"$DEB.sha256"
	log "fetch: $(basename "$DEB") sha256 $sha verified against the signed Packages index"
}

# Extract the .deb's tarball to $CACHE/src/linux-<upstream version>/pristine.
# Sets KVER (upstream version, e.g. 7.3.4), DEBVER and SRC_PRISTINE.
extract_source()
{
	local dir tmp tarball
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
	tarball=$(ls -1 "$tmp"/usr/src/linux-source-*.tar.* | head -n 1)
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
