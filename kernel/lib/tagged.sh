# SPDX-License-Identifier: MIT
# kernel/run tagged: a process_madvise() vector of tagged addresses on a
# remote mm, the untagging path of patch 7 (and of 7.3 before it), run on
# arm64 (TBI) because x86 cannot: it refuses a LAM-tagged iovec in
# import_iovec().  Builds a small arm64 kernel (tinyconfig +
# config/arm64-tagged.config: per-VMA locks, lockdep, DEBUG_VM, swap on brd)
# for pristine 7.3.4 and for the series, each in a private git worktree of
# the patched tree's repository (so it runs beside test, exec and bisect),
# with tests/arm64-tagged.c as /init, and boots each under
# qemu-system-aarch64 (TCG).  A kernel passes when the program prints
# "TAGGED-RESULT PASS" and the kernel log has no splat (sourced by
# kernel/run).

TAGGED_CONFIG=$KDIR/config/arm64-tagged.config
TAGGED_DEPS=(
	qemu-system-aarch64:qemu-system-arm
	aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu
	/usr/aarch64-linux-gnu/lib/libc.a:libc6-dev-arm64-cross
)

tagged_deps()
{
	local missing=()
	mapfile -t missing < <(missing_packages "${TAGGED_DEPS[@]}")
	((${#missing[@]})) || return 0
	install_packages tagged "${missing[@]}"
}

# tagged_tree VARIANT COMMIT: the private worktree of VARIANT at COMMIT.
tagged_tree()
{
	local v=$1 commit=$2 src tree
	src="$(dirname "$SRC_PRISTINE")/patched"
	tree=$CACHE/arm64/tree-$v
	if [[ ! -e $tree/.git ]]; then
		rm -rf "$tree"
		git -C "$src" worktree prune
		git -C "$src" worktree add -q --detach "$tree" "$commit" >&2
	elif [[ $(git -C "$tree" rev-parse HEAD) != "$(git -C "$src" rev-parse "$commit")" ]]; then
		git -C "$tree" checkout -q --detach "$commit" >&2
	fi
	echo "$tree"
}

# tagged_build VARIANT TREE: the arm64 Image of TREE, in $CACHE/arm64/VARIANT.
tagged_build()
{
	local v=$1 tree=$2 bdir=$CACHE/arm64/$1 line
	local mk=(make -s -C "$tree" O="$bdir" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
	mkdir -p "$bdir"
	if [[ ! -f $bdir/.config || $TAGGED_CONFIG -nt $bdir/.config ]]; then
		log "tagged: $v: tinyconfig + $(basename "$TAGGED_CONFIG")"
		{ "${mk[@]}" tinyconfig &&
			"$tree/scripts/kconfig/merge_config.sh" -m -O "$bdir" "$bdir/.config" "$TAGGED_CONFIG" &&
			"${mk[@]}" olddefconfig; } >"$bdir/config.log" 2>&1 ||
			{ tail -n 20 "$bdir/config.log" >&2; die "tagged: $v: configuration failed"; }
		while read -r line; do
			[[ $line = CONFIG_*=* ]] || continue
			grep -qx "$line" "$bdir/.config" ||
				die "tagged: $v: $line did not make it into .config"
		done <"$TAGGED_CONFIG"
	fi
	log "tagged: $v: building the arm64 Image in $bdir"
	nice -n 10 "${mk[@]}" -j"$JOBS" Image >"$bdir/build.log" 2>&1 ||
		{ tail -n 30 "$bdir/build.log" >&2; die "tagged: $v: build failed"; }
	echo "$bdir/arch/arm64/boot/Image"
}

# tagged_boot LABEL IMAGE INITRAMFS: boots, writes $RUN_DIR/LABEL.serial;
# 0 when the program passed and the log has no splat.
tagged_boot()
{
	local label=$1 image=$2 initrd=$3 log=$RUN_DIR/$1.serial t0=$SECONDS
	log "tagged: boot $label (qemu-system-aarch64, TCG), serial log $log"
	timeout 900 qemu-system-aarch64 -M virt -cpu max -smp 2 -m 512 -nographic \
		-no-reboot -kernel "$image" -initrd "$initrd" \
		-append "console=ttyAMA0 brd.rd_size=65536 panic=-1" >"$log" 2>&1 || true
	log "tagged: $label: done after $((SECONDS - t0)) s"
	tagged_judge "$log" "$RUN_DIR/$label.splats"
}

# tagged_judge SERIAL_LOG SPLATS_FILE: 0 when the program printed
# "TAGGED-RESULT PASS" and no line of the log is a splat (kernel/run
# selftest tagged checks it on synthetic logs).
tagged_judge()
{
	local log=$1 splats=$2
	grep -a '^tagged-remote:' "$log" | sed 's/^/  /' >&2 || true
	if grep -a -E "$SPLAT_RE" "$log" >"$splats"; then
		echo "tagged: FAIL: the kernel log has $(wc -l <"$splats") splat line(s):"
		sed 's/^/    /' "$splats"
		return 1
	fi
	if ! grep -a -q '^TAGGED-RESULT PASS' "$log"; then
		echo "tagged: FAIL: no TAGGED-RESULT PASS line ($(grep -a -m1 '^TAGGED-RESULT' "$log" || echo 'none: crash or hang'))"
		return 1
	fi
	echo "tagged: PASS: TAGGED-RESULT PASS, no splat"
}

cmd_tagged()
{
	local variants=base,patched v src tip commit tree image bin initrd rc=0
	case ${1:-} in
	--kernels) variants=${2:?--kernels: base, patched or both}; shift 2 ;;
	"") ;;
	*) die "tagged: unknown option $1 (--kernels base,patched)" ;;
	esac
	tagged_deps
	# The patched repository's objects only: its working tree may be at
	# another series (a running bisect); commit_series() does not touch it.
	src="$(dirname "$SRC_PRISTINE")/patched"
	git -C "$src" cat-file -e 'madvx-base^{tree}' 2>/dev/null ||
		die "tagged: no patched tree yet (kernel/run build patched)"
	# Shared: commit_series() writes objects and no working tree, through a
	# private index, so a build reading the tree may go on meanwhile.
	lock tree -s
	tip=$(commit_series "$src") || exit 1
	unlock tree
	new_run_dir
	bin=$RUN_DIR/init
	aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -static -o "$bin" \
		"$KDIR/tests/arm64-tagged.c" || die "tagged: the test program does not build"
	initrd=$RUN_DIR/initramfs.cpio
	(cd "$RUN_DIR" && echo init | cpio -o -H newc --quiet) >"$initrd"
	for v in ${variants//,/ }; do
		case $v in
		base) commit=madvx-base ;;
		patched) commit=$tip ;;
		*) die "tagged: unknown kernel $v (base, patched)" ;;
		esac
		lock "build-arm64-$v"
		tree=$(tagged_tree "$v" "$commit")
		image=$(tagged_build "$v" "$tree")
		unlock "build-arm64-$v"
		tagged_boot "arm64-$v" "$image" "$initrd" || rc=1
	done
	if ((rc)); then
		log "tagged: FAIL (logs: $RUN_DIR)"
		return 1
	fi
	log "tagged: PASS on $variants (logs: $RUN_DIR)"
}
