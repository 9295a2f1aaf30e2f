# SPDX-License-Identifier: MIT
# Build what runs inside the guest and pack it into an initramfs
# (sourced by kernel/run).
#
# Initramfs layout:
#   /init                 guest/init.c, static
#   /bin/busybox + links  busybox-static, for scripts and "kernel/run shell"
#   /madvx/tests.list     what init runs (format: see guest/init.c)
#   /madvx/lib/           the library's test executables (meson introspect)
#   /madvx/examples/      the library's example executables
#   /madvx/ksft/          the mm kselftests of the 7.3 source tree (not
#                         run on the old kernel: variant_skip)

# mm kselftests we build and run: name, timeout (s, under TCG), arguments.
# Keep in sync with the table in kernel/README.md.  A test whose source is
# not in the tree (madv_vma_lock before the series adds it, e.g. for an
# empty series or a bisect prefix) is left out.
KSFT_TESTS=(
	"process_madv 300"
	"uffd-unit-tests 1200"
	"madv_populate 300"
	"guard-regions 300"
	"mremap_test 900"
	"mremap_dontunmap 300"
	"merge 300"
	"madv_vma_lock 300"
)
KSFT_SKIP_RC=4

# Meson timeouts are for the host; TCG is slower.
TIMEOUT_MULT=${MADVX_KERNEL_TIMEOUT_MULT:-5}
LIB_BUILD=${MADVX_KERNEL_LIB_BUILD:-$REPO/build-kernel-static}

is_static_elf()
{
	local headers
	[[ $(head -c 4 "$1") = $'\x7f'ELF ]] || return 1
	# Read all of readelf's output first: `readelf | grep -q` under
	# pipefail reads a killed readelf (SIGPIPE) as "no INTERP".
	headers=$(readelf -lW "$1" 2>/dev/null) || return 1
	[[ $headers != *INTERP* ]]
}

# Shadow of a kernel tree for building its selftests: the selftest Makefile
# writes generated files next to its sources, so tools/ is a private copy
# and everything else a symlink to the (untouched) tree.
ksft_shadow()
{
	local src=$1 shadow=$2 e
	[[ -f $shadow/.done && $(cat "$shadow/.done") = "$src" ]] && return
	rm -rf "$shadow"
	mkdir -p "$shadow"
	for e in "$src"/* "$src"/.[!.]*; do
		[[ -e $e ]] || continue
		[[ $(basename "$e") = tools || $(basename "$e") = .git ]] && continue
		ln -s "$e" "$shadow/$(basename "$e")"
	done
	cp -a "$src/tools" "$shadow/tools"
	echo "$src" >"$shadow/.done"
}

# Build the kselftests statically from the tree of the default test variant
# (the patched tree, or the pristine one for an empty series), against that
# tree's UAPI headers.  Sets KSFT_OUT.
build_kselftests()
{
	local src key shadow hdr t name targets=() m t0=$SECONDS
	src=$(variant_srcdir patched)
	key=$(series_hash)
	shadow="$(dirname "$SRC_PRISTINE")/ksft-src-$key"
	hdr="$(dirname "$SRC_PRISTINE")/headers-$key"
	KSFT_OUT="$(dirname "$SRC_PRISTINE")/ksft-$key"
	# The patched tree may have changed under the same series hash only if
	# someone edited it by hand; rebuild the shadow when the series changes.
	[[ $src = "$SRC_PRISTINE" ]] || lock tree -s
	ksft_shadow "$src" "$shadow"
	headers_install "$src" "$hdr"
	mkdir -p "$KSFT_OUT"
	m="$shadow/tools/testing/selftests/mm"
	KSFT_ACTIVE=()
	for t in "${KSFT_TESTS[@]}"; do
		[[ -f $m/${t%% *}.c ]] || continue
		KSFT_ACTIVE+=("$t")
		targets+=("$KSFT_OUT/${t%% *}")
	done
	if ! nice -n 10 make -C "$m" -j"$JOBS" OUTPUT="$KSFT_OUT" \
		KHDR_INCLUDES="-isystem $hdr/include" CC="gcc -static" \
		"${targets[@]}" >"$KSFT_OUT/build.log" 2>&1; then
		tail -n 40 "$KSFT_OUT/build.log" >&2
		die "kselftests: build failed (log: $KSFT_OUT/build.log)"
	fi
	unlock tree
	for name in "${targets[@]}"; do
		is_static_elf "$name" || die "kselftest $(basename "$name") is not a static executable"
	done
	# Series come and go while a patch is developed: keep only this one's
	# copies (tools/ is ~100 MB each).
	local d
	for d in "$(dirname "$SRC_PRISTINE")"/{ksft-src,ksft,headers}-*; do
		[[ -d $d && $d != *-"$key" ]] && rm -rf "$d"
	done
	log "kselftests: ${#targets[@]} built statically in $((SECONDS - t0)) s -> $KSFT_OUT"
}

# The library's static build dir (LIB_BUILD), set up when it is missing;
# the log in $1 (a directory).  Also used by `kernel/run clients`.
lib_setup()
{
	[[ ! -f $LIB_BUILD/build.ninja ]] || return 0
	rm -rf "$LIB_BUILD"
	log "library: meson setup (static) in $LIB_BUILD"
	if ! meson setup "$LIB_BUILD" "$REPO" -Ddefault_library=static -Dprefer_static=true \
		-Dc_link_args=-static -Db_sanitize=none -Db_pie=false \
		>"$1/lib-setup.log" 2>&1; then
		tail -n 30 "$1/lib-setup.log" >&2
		rm -rf "$LIB_BUILD"
		die "library: meson setup failed"
	fi
}

# The library, built statically in its own build dir.  Writes
# $1/lib.list entries and copies executables into $1/madvx/{lib,examples}.
build_library()
{
	local stage=$1 t0=$SECONDS
	LIB_STATUS="not built"
	if [[ ! -f $REPO/meson.build ]]; then
		log "library: $REPO/meson.build does not exist yet - no library tests in the guest"
		LIB_STATUS="no meson.build"
		return
	fi
	lib_setup "$stage/.."
	local targets
	# Re-run meson first if a meson.build changed, so introspection is current.
	ninja -C "$LIB_BUILD" build.ninja >"$stage/../lib-regen.log" 2>&1 ||
		{ tail -n 30 "$stage/../lib-regen.log" >&2; die "library: meson regeneration failed"; }
	targets=$(python3 "$KDIR/lib/meson-stage.py" targets "$LIB_BUILD" "$REPO") ||
		die "library: meson introspect failed"
	# Build only the tests and examples, each on its own (-k 0): the
	# shared libmadvx cannot be linked with -static, so a target that
	# links it fails here and is reported by the staging step below.
	if [[ -n $targets ]]; then
		# shellcheck disable=SC2086 # $targets is a list of ninja targets
		nice -n 10 ninja -C "$LIB_BUILD" -k 0 -j "$JOBS" $targets >"$stage/../lib-build.log" 2>&1 ||
			log "library: some targets did not link statically (log: $stage/../lib-build.log)"
	fi
	python3 "$KDIR/lib/meson-stage.py" stage "$LIB_BUILD" "$REPO" "$stage" "$TIMEOUT_MULT" ||
		die "library: cannot stage the test executables for the guest"
	LIB_STATUS="$(grep -v NOT-STATIC "$stage/madvx/lib.list" | grep -c '^lib' || true) tests, $(grep -v NOT-STATIC "$stage/madvx/lib.list" | grep -c '^example' || true) examples"
	log "library: static build + staging in $((SECONDS - t0)) s: $LIB_STATUS"
}

build_init()
{
	local out=$1
	mkdir -p "$(dirname "$out")"
	if [[ ! -f $out || $KDIR/guest/init.c -nt $out ]]; then
		gcc -static -O2 -Wall -Wextra -Werror -o "$out" "$KDIR/guest/init.c" ||
			die "cannot build guest/init.c"
	fi
}

# stage_root <dir>: a fresh guest root in <dir> with our init, the two
# device nodes init needs before devtmpfs, and a static busybox's applets
# when the host has one. The caller holds the initramfs lock.
stage_root()
{
	local stage=$1 bb t
	rm -rf "$stage"
	mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,run,madvx}
	build_init "$CACHE/initramfs/init"
	cp "$CACHE/initramfs/init" "$stage/init"
	mknod -m 600 "$stage/dev/console" c 5 1
	mknod -m 666 "$stage/dev/null" c 1 3
	bb=$(command -v busybox || true)
	if [[ -n $bb ]] && is_static_elf "$bb"; then
		cp "$bb" "$stage/bin/busybox"
		for t in $("$bb" --list); do
			[[ $t = busybox || $t = init || $t = linuxrc ]] && continue
			ln -sf busybox "$stage/bin/$t"
		done
	else
		log "initramfs: no static busybox (apt-get install busybox-static); no shell in the guest"
	fi
}

# Assemble and pack the initramfs; with a run dir as $1, copy it there
# (initramfs.cpio.gz, tests.list, not-in-guest.list) before the lock goes.
# Sets INITRAMFS.
build_initramfs()
{
	local stage t name to dir
	lock initramfs
	dir="$CACHE/initramfs"
	stage="$dir/root"
	stage_root "$stage"
	mkdir -p "$stage/madvx/ksft"
	# A run of the old kernel alone has no 7.3 tree to build them from,
	# and would not run them (variant_skip).
	KSFT_ACTIVE=()
	[[ ${INITRAMFS_KSFT:-1} = 0 ]] || build_kselftests
	: >"$stage/madvx/tests.list"
	build_library "$stage"
	: >"$dir/not-in-guest.list"
	if [[ -f $stage/madvx/lib.list ]]; then
		grep -v $'\tNOT-STATIC$' "$stage/madvx/lib.list" >>"$stage/madvx/tests.list" || true
		grep $'\tNOT-STATIC$' "$stage/madvx/lib.list" | cut -f1,2 | tr '\t' / >"$dir/not-in-guest.list" || true
	fi
	for t in "${KSFT_ACTIVE[@]}"; do
		read -r name to <<<"$t"
		cp "$KSFT_OUT/$name" "$stage/madvx/ksft/"
		printf 'ksft\t%s\t%s\t%s\t/tmp\t-\t/madvx/ksft/%s\n' "$name" "$to" "$KSFT_SKIP_RC" "$name" \
			>>"$stage/madvx/tests.list"
	done
	INITRAMFS="$dir/initramfs.cpio.gz"
	(cd "$stage" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc --quiet --owner=0:0 | gzip -1 >"$INITRAMFS.tmp")
	mv "$INITRAMFS.tmp" "$INITRAMFS"
	cp "$stage/madvx/tests.list" "$dir/tests.list"
	if [[ -n ${1:-} ]]; then
		cp "$INITRAMFS" "$1/initramfs.cpio.gz"
		cp "$dir/tests.list" "$dir/not-in-guest.list" "$1/"
		INITRAMFS="$1/initramfs.cpio.gz"
	fi
	unlock initramfs
	log "initramfs: $(wc -l <"$dir/tests.list") tests, $(du -h "$INITRAMFS" | cut -f1) -> $INITRAMFS"
}

# A second archive with extra binaries, appended to the main one (the kernel
# unpacks concatenated archives in order).  Args: output, then "name path
# timeout args..." entries via EXTRA_* arrays.
build_extra_archive()
{
	local out=$1 stage
	stage="$CACHE/initramfs/extra"
	rm -rf "$stage"
	mkdir -p "$stage/madvx/extra"
	local i
	: >"$stage/madvx/extra.list"
	for i in "${!EXTRA_NAMES[@]}"; do
		cp "${EXTRA_PATHS[$i]}" "$stage/madvx/extra/${EXTRA_NAMES[$i]}"
		chmod 755 "$stage/madvx/extra/${EXTRA_NAMES[$i]}"
		printf 'extra\t%s\t%s\t77\t/tmp\t-\t%s\n' "${EXTRA_NAMES[$i]}" "${EXTRA_TIMEOUTS[$i]}" \
			"/madvx/extra/${EXTRA_NAMES[$i]}${EXTRA_ARGS[$i]:+ ${EXTRA_ARGS[$i]}}" >>"$stage/madvx/extra.list"
	done
	(cd "$stage" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc --quiet --owner=0:0 | gzip -1 >"$out")
}
