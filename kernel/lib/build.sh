# SPDX-License-Identifier: MIT
# Patch and build the kernels (sourced by kernel/run).
#
# Variants:
#   base     pristine source, config/base.config
#   patched  pristine + kernel/patches/*.patch, config/base.config
#   debug    pristine + kernel/patches/*.patch, base.config + debug.config
#   nopvl-base, nopvl-patched
#            as base and patched, + nopvl.config: a uniprocessor kernel,
#            hence without CONFIG_PER_VMA_LOCK (test --full)
#   old      the OLD source (Debian 12's 6.1.x, issue 24), pristine,
#            base.config + old.config; the series is for 7.3 and is never
#            applied to it (test --kernels old, test --full)
#   kasan, kasan-base
#            patched / pristine, base.config + debug.config + kasan.config:
#            lockdep and the debug kernel's checks plus generic KASAN
#            (issue 21; test --full, --kernels kasan; not CI)
#   kcsan, kcsan-base
#            patched / pristine, base.config + kcsan.config: the data race
#            detector (issue 21; test --full, --kernels kcsan; not CI)
#
# Build dirs are per variant ($CACHE/build/<debver>/<variant>) and stamped
# with a key: sha256 of (package version, series, fragments, BUILD_FORMAT).
# Same key + existing bzImage = reuse without running make at all; another
# key = regenerate .config and run make in the same dir, which kbuild turns
# into an incremental rebuild of what changed.  With an empty series the
# "patched" variant has the same key as "base" and reuses its bzImage.

BUILD_FORMAT=1
JOBS=${MADVX_KERNEL_JOBS:-2}
PATCH_DIR=${MADVX_KERNEL_PATCHES:-$KDIR/patches}

series_files()
{
	local p
	for p in "$PATCH_DIR"/[0-9][0-9][0-9][0-9]-*.patch; do
		# The cover letter (git format-patch --cover-letter) has no diff.
		[[ -f $p && ${p##*/} != 0000-cover-letter.patch ]] && echo "$p"
	done
	return 0
}

# sha256 over the names and contents of the series (empty series -> "none").
series_hash()
{
	local files
	files=$(series_files)
	if [[ -z $files ]]; then
		echo none
		return
	fi
	# shellcheck disable=SC2086 # a list of patch paths (no spaces: kernel/patches)
	(for p in $files; do basename "$p"; sha256sum <"$p"; done) | sha256sum | cut -c1-16
}

VARIANTS="base patched debug nopvl-base nopvl-patched old kasan kasan-base kcsan kcsan-base"

# check_variants <comma list> <command>: every name a variant, before any
# work (kernel_for would take an unknown name for a patched variant and
# prepare its tree from this checkout's series).
check_variants()
{
	local v
	for v in ${1//,/ }; do
		[[ " $VARIANTS " = *" $v "* ]] || die "$2: unknown kernel $v ($VARIANTS)"
	done
	[[ -n ${1//,/} ]] || die "$2: no kernel named"
}

variant_fragments()
{
	case $1 in
	base | patched) echo "$KDIR/config/base.config" ;;
	debug) echo "$KDIR/config/base.config $KDIR/config/debug.config" ;;
	nopvl-base | nopvl-patched) echo "$KDIR/config/base.config $KDIR/config/nopvl.config" ;;
	old) echo "$KDIR/config/base.config $KDIR/config/old.config" ;;
	kasan | kasan-base) echo "$KDIR/config/base.config $KDIR/config/debug.config $KDIR/config/kasan.config" ;;
	kcsan | kcsan-base) echo "$KDIR/config/base.config $KDIR/config/kcsan.config" ;;
	*) die "unknown variant '$1' ($VARIANTS)" ;;
	esac
}

# Does the variant run the pristine source?
variant_is_base()
{
	[[ $1 = base || $1 = nopvl-base || $1 = old || $1 = kasan-base || $1 = kcsan-base ]]
}

# The source (use_source) a variant is built from.
variant_source()
{
	case $1 in
	old) echo old ;;
	*) echo new ;;
	esac
}

variant_series()
{
	if variant_is_base "$1"; then
		echo none
	else
		series_hash
	fi
}

variant_key()
{
	local v=$1 f
	{
		echo "format $BUILD_FORMAT"
		echo "package $MADVX_KERNEL_PACKAGE $DEBVER"
		echo "series $(variant_series "$v")"
		for f in $(variant_fragments "$v"); do
			echo "fragment $(basename "$f")"
			cat "$f"
		done
	} | sha256sum | cut -c1-16
}

# The "patched" variant with an empty series is the base build.
variant_builddir()
{
	local v=$1
	if [[ $v = patched && $(series_hash) = none ]]; then
		v=base
	elif [[ $v = nopvl-patched && $(series_hash) = none ]]; then
		v=nopvl-base
	elif [[ ($v = kasan || $v = kcsan) && $(series_hash) = none ]]; then
		v=$v-base
	fi
	echo "$CACHE/build/${DEBVER//[~+:]/_}/$v"
}

# Source tree for a variant: the pristine tree, or the patched tree when
# there is a series.  Prepares the patched tree when needed.
variant_srcdir()
{
	local v=$1
	if variant_is_base "$v" || [[ $(series_hash) = none ]]; then
		echo "$SRC_PRISTINE"
		return
	fi
	lock tree
	prepare_patched_tree >&2
	unlock tree
	echo "$SRC_PATCHED"
}

# Commit the series onto madvx-base without touching the working tree: each
# patch is applied to a private index (git apply --cached, as strict as
# git am --no-3way) and committed with its own message. Prints the tip.
commit_series()
{
	# A private index per process: callers holding the tree lock shared
	# (kernel/run tagged) may commit the series at the same time.
	local tree=$1 idx="$1/.git/madvx-series-index.$$" commit p n=0 msg info subject
	commit=$(git -C "$tree" rev-parse madvx-base)
	msg=$(mktemp) info=$(mktemp)
	GIT_INDEX_FILE=$idx git -C "$tree" read-tree madvx-base
	for p in $(series_files); do
		n=$((n + 1))
		if ! GIT_INDEX_FILE=$idx git -C "$tree" apply --cached "$p" >"$CACHE/patch.log" 2>&1; then
			cat "$CACHE/patch.log" >&2
			rm -f "$idx" "$msg" "$info"
			die "patch $(basename "$p") does not apply to $MADVX_KERNEL_PACKAGE $DEBVER (series stopped at patch $n)"
		fi
		git -C "$tree" mailinfo "$msg" /dev/null <"$p" >"$info"
		subject=$(sed -n 's/^Subject: //p' "$info")
		commit=$( { echo "${subject:-$(basename "$p")}"; echo; cat "$msg"; } |
			git -C "$tree" commit-tree "$(GIT_INDEX_FILE=$idx git -C "$tree" write-tree)" -p "$commit")
		log "patch: applied $(basename "$p")" >&2
	done
	rm -f "$idx" "$msg" "$info"
	echo "$commit"
}

# The patched tree is a git repo whose first commit is the pristine tree.
# Each run commits the series onto that commit (commit_series) and checks
# the result out: git rewrites only the files that differ from what is
# checked out, so a file whose content the change of series leaves alone
# keeps its mtime (even a header the series touches) and the kernel build
# stays incremental.
prepare_patched_tree()
{
	local want tip
	SRC_PATCHED="$(dirname "$SRC_PRISTINE")/patched"
	want=$(series_hash)
	# Reuse the tree as it is only if it still is exactly base + this
	# series: same series hash, HEAD at the commit we made, nothing edited.
	if [[ -f $SRC_PATCHED/.git/info/madvx-series &&
		$(cat "$SRC_PATCHED/.git/info/madvx-series") = "$want $(git -C "$SRC_PATCHED" rev-parse HEAD 2>/dev/null)" ]] &&
		git -C "$SRC_PATCHED" diff --quiet HEAD 2>/dev/null; then
		return
	fi
	# A tree whose base commit cannot be read (interrupted creation) is
	# made anew.
	if [[ -f $SRC_PATCHED/.git/info/madvx-base-commit ]] &&
		! git -C "$SRC_PATCHED" cat-file -e 'madvx-base^{tree}' 2>/dev/null; then
		log "patch: $SRC_PATCHED is damaged; recreating it"
		rm -f "$SRC_PATCHED/.git/info/madvx-base-commit"
	fi
	if [[ ! -f $SRC_PATCHED/.git/info/madvx-base-commit ]]; then
		log "patch: creating git tree $SRC_PATCHED from the pristine tree (once)"
		rm -rf "$SRC_PATCHED" "$SRC_PATCHED.tmp"
		cp -a --reflink=auto "$SRC_PRISTINE" "$SRC_PATCHED.tmp"
		(
			cd "$SRC_PATCHED.tmp" || exit
			git init -q
			git config user.name "madvx kernel/run"
			git config user.email "madvx@invalid"
			git config gc.auto 0
			git add -A -f .
			git commit -q -m "base: $MADVX_KERNEL_PACKAGE $DEBVER (pristine)"
			git tag -f madvx-base >/dev/null
			mkdir -p .git/info
			git rev-parse HEAD >.git/info/madvx-base-commit
		)
		mv "$SRC_PATCHED.tmp" "$SRC_PATCHED"
	fi
	rm -f "$SRC_PATCHED/.git/info/madvx-series"
	git -C "$SRC_PATCHED" am --abort >/dev/null 2>&1 || true
	rm -rf "$SRC_PATCHED/.git/rebase-apply"
	tip=$(commit_series "$SRC_PATCHED") || exit 1
	git -C "$SRC_PATCHED" checkout -q -f -B madvx "$tip"
	git -C "$SRC_PATCHED" clean -q -f -d
	echo "$want $(git -C "$SRC_PATCHED" rev-parse HEAD)" >"$SRC_PATCHED/.git/info/madvx-series"
}

# Fail loudly unless every CONFIG_x=y/value of the fragments made it into
# .config (=n lines must end up unset).  A later fragment overrides an
# earlier one (nopvl.config turns SMP off).
check_config()
{
	local cfg=$1 frag line sym val missing=() order=()
	local -A want
	shift
	for frag in "$@"; do
		while IFS= read -r line; do
			[[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]] || continue
			sym=${BASH_REMATCH[1]}
			[[ -n ${want[$sym]+x} ]] || order+=("$sym")
			want[$sym]=${BASH_REMATCH[2]}
		done <"$frag"
	done
	for sym in "${order[@]}"; do
		val=${want[$sym]}
		if [[ $val = n ]]; then
			grep -q "^$sym=" "$cfg" && missing+=("$sym=n (is $(grep "^$sym=" "$cfg" | cut -d= -f2))")
		elif ! grep -qx "$sym=$val" "$cfg"; then
			missing+=("$sym=$val (is $(grep "^$sym=" "$cfg" | cut -d= -f2 || true))")
		fi
	done
	if ((${#missing[@]})); then
		printf '  missing: %s\n' "${missing[@]}" >&2
		die "$(basename "$(dirname "$cfg")"): ${#missing[@]} requested options did not survive olddefconfig"
	fi
}

# Build one variant; sets BZIMAGE.  With $2, copy the bzImage there while
# the build dir is still locked.
build_variant()
{
	local v=$1 copy=${2:-}
	local bdir lname
	bdir=$(variant_builddir "$v")
	lname="build-$(basename "$bdir")"
	lock "$lname"
	build_variant_locked "$v" "$bdir"
	[[ -z $copy ]] || cp "$BZIMAGE" "$copy"
	unlock "$lname"
}

# configure_build_dir VARIANT SRC BDIR FRAGMENT...: .config from tinyconfig
# plus the fragments, checked (check_config). Run every time the key
# changes; if the result is the same, kbuild rebuilds nothing for it.
configure_build_dir()
{
	local v=$1 src=$2 bdir=$3
	shift 3
	cat "$@" >"$bdir/madvx.config"
	kmake "$src" "$bdir" tinyconfig >"$bdir/madvx-config.log" 2>&1 ||
		{ tail -n 30 "$bdir/madvx-config.log" >&2; die "build $v: make tinyconfig failed"; }
	(cd "$bdir" && "$src/scripts/kconfig/merge_config.sh" -m -O "$bdir" "$bdir/.config" "$bdir/madvx.config") \
		>>"$bdir/madvx-config.log" 2>&1 || { tail -n 30 "$bdir/madvx-config.log" >&2; die "build $v: merge_config failed"; }
	kmake "$src" "$bdir" olddefconfig >>"$bdir/madvx-config.log" 2>&1 ||
		{ tail -n 30 "$bdir/madvx-config.log" >&2; die "build $v: olddefconfig failed"; }
	check_config "$bdir/.config" "$@"
}

build_variant_locked()
{
	local v=$1 bdir=$2 key src frags t0
	key=$(variant_key "$v")
	BZIMAGE="$bdir/arch/x86/boot/bzImage"
	if [[ -f $bdir/.madvx-key && $(cat "$bdir/.madvx-key") = "$key" && -f $BZIMAGE ]]; then
		log "build $v: up to date (key $key) -> $BZIMAGE"
		return
	fi
	src=$(variant_srcdir "$v")
	# Nobody may re-apply a series under a running build.
	[[ $src = "$SRC_PRISTINE" ]] || lock tree -s
	frags=$(variant_fragments "$v")
	mkdir -p "$bdir"
	rm -f "$bdir/.madvx-key"
	t0=$SECONDS
	log "build $v: key $key, source $src, out $bdir"
	# shellcheck disable=SC2086 # $frags is a list of fragment paths
	configure_build_dir "$v" "$src" "$bdir" $frags
	if ! kmake "$src" "$bdir" -j"$JOBS" bzImage >"$bdir/madvx-build.log" 2>&1; then
		grep -E -B2 -A8 'error:|Error [0-9]' "$bdir/madvx-build.log" | tail -n 60 >&2
		die "build $v: make bzImage failed (log: $bdir/madvx-build.log)"
	fi
	echo "$key" >"$bdir/.madvx-key"
	unlock tree
	log "build $v: done in $((SECONDS - t0)) s -> $BZIMAGE"
}

kmake()
{
	local src=$1 out=$2
	shift 2
	nice -n 10 make -C "$src" O="$out" ARCH=x86_64 KBUILD_BUILD_USER=madvx \
		KBUILD_BUILD_HOST=madvx "$@"
}

# UAPI headers of the tree the kselftests come from (needs rsync).
headers_install()
{
	local src=$1 out=$2
	[[ -f $out/.done ]] && return
	log "headers: make headers_install -> $out"
	rm -rf "$out"
	mkdir -p "$out"
	nice -n 10 make -C "$src" O="$out/obj" ARCH=x86_64 INSTALL_HDR_PATH="$out" headers_install \
		>"$out/headers.log" 2>&1 || { tail -n 20 "$out/headers.log" >&2; die "headers_install failed"; }
	rm -rf "$out/obj"
	touch "$out/.done"
}

cmd_build()
{
	local variants=() v
	while (($#)); do
		case $1 in
		--variant) variants+=("$2"); shift ;;
		--variant=*) variants+=("${1#*=}") ;;
		-*) die "build: unknown argument $1" ;;
		*) variants+=("$1") ;;
		esac
		shift
	done
	((${#variants[@]})) || variants=(base debug)
	check_variants "$(IFS=,; echo "${variants[*]}")" build
	cmd_deps
	for v in "${variants[@]}"; do
		kernel_for "$v"
	done
}
