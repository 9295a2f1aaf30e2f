# SPDX-License-Identifier: MIT
# kernel/run bisect: every prefix of the series builds without W=1 warnings
# in the files it touches (base.config and the no-PER_VMA_LOCK config),
# boots, and passes the selected tests (sourced by kernel/run).

# C files the patches of $PATCH_DIR touch (from their diff headers).
series_c_files()
{
	local p
	for p in $(series_files); do
		sed -n 's|^+++ b/\(.*\.c\)$|\1|p' "$p"
	done | sort -u
}

# W=1 rebuild of the touched objects of one variant's build dir (the tree
# must be at the state the variant was built from); fails on any warning.
cmd_w1check()
{
	local v=${1:?w1check: which variant?} bdir src f objs=() log
	bdir=$(variant_builddir "$v")
	[[ -f $bdir/.config ]] || die "w1check: $v is not built"
	src=$(variant_srcdir "$v")
	lock "build-$(basename "$bdir")"
	lock tree -s
	for f in $(series_c_files); do
		# Only objects this config compiles.
		[[ -f $bdir/${f%.c}.o ]] || continue
		rm -f "$bdir/${f%.c}.o"
		objs+=("${f%.c}.o")
	done
	log=$bdir/madvx-w1.log
	if ((${#objs[@]})); then
		kmake "$src" "$bdir" W=1 "${objs[@]}" >"$log" 2>&1 ||
			{ cat "$log" >&2; die "w1check $v: build failed"; }
	else
		: >"$log"
	fi
	unlock tree
	unlock "build-$(basename "$bdir")"
	if grep -q 'warning:' "$log"; then
		grep 'warning:' "$log" >&2
		die "w1check $v: W=1 warnings in ${objs[*]}"
	fi
	log "w1check $v: W=1 clean: ${objs[*]:-(no object of the series in this config)}"
}

# Every result of the run in $1 is PASS or SKIP on each kernel of $2.
bisect_all_pass()
{
	local dir=$1 v bad=0
	for v in ${2//,/ }; do
		[[ -s $dir/$v.results ]] || { echo "bisect: no results for $v"; bad=1; continue; }
		if grep -Ev ' (PASS|SKIP) ' "$dir/$v.results" | sed "s/^/bisect: $v: /" | grep .; then
			bad=1
		fi
	done
	return $bad
}

# The first runs/<stamp> a kernel/run log names (awk reads the file itself:
# no early-exit reader on a pipe under pipefail).
first_run_dir()
{
	awk 'match($0, /runs\/[0-9TZ-]*/) { print substr($0, RSTART, RLENGTH); exit }' "$1"
}

cmd_bisect()
{
	local only='ksft/*' kernels=patched,nopvl-patched n total d p rc t0 e
	local klist=() out row run from=1 to='' exec_kernels='' exec_args=()
	while (($#)); do
		case $1 in
		--only) only=$2; shift ;;
		--only=*) only=${1#*=} ;;
		--kernels) kernels=$2; shift ;;
		--kernels=*) kernels=${1#*=} ;;
		--exec-kernels) exec_kernels=$2; shift ;;
		--exec-kernels=*) exec_kernels=${1#*=} ;;
		--to) to=$2; shift ;;
		--to=*) to=${1#*=} ;;
		--from) from=$2; shift ;;
		--from=*) from=${1#*=} ;;
		--exec) exec_args+=("$2"); shift ;;
		--exec=*) exec_args+=("${1#*=}") ;;
		-h | --help) usage; return 0 ;;
		*) die "bisect: unknown argument $1" ;;
		esac
		shift
	done
	# exec boots its kernels one after the other: by default only the
	# first kernel of the list runs the --exec binaries.
	exec_kernels=${exec_kernels:-${kernels%%,*}}
	total=$(series_files | wc -l)
	((total)) || die "bisect: the series is empty"
	out="$CACHE/bisect/$(date -u +%Y%m%dT%H%M%SZ)-$$"
	mkdir -p "$out"
	printf '%-8s %-6s %-8s %-8s %s\n' prefix build w1 test "run / exec" >"$out/summary.txt"
	to=${to:-$total}
	if ! [[ $from =~ ^[1-9][0-9]*$ && $to =~ ^[1-9][0-9]*$ ]] || ((from > to || to > total)); then
		die "bisect: --from $from --to $to: the series has $total patches"
	fi
	for ((n = from; n <= to; n++)); do
		d="$out/series-$n"
		mkdir -p "$d"
		for p in $(series_files | sed -n "1,${n}p"); do
			cp "$p" "$d/"
		done
		t0=$SECONDS
		row=$(printf '%-8s' "$n")
		rc=0
		IFS=, read -r -a klist <<<"$kernels"
		MADVX_KERNEL_PATCHES=$d "$KDIR/run" build "${klist[@]}" >"$out/build-$n.log" 2>&1 || rc=1
		row+=$(printf ' %-6s' "$([[ $rc = 0 ]] && echo "$((SECONDS - t0))s" || echo FAIL)")
		if ((rc == 0)); then
			for v in ${kernels//,/ }; do
				MADVX_KERNEL_PATCHES=$d "$KDIR/run" w1check "$v" >>"$out/w1-$n.log" 2>&1 || rc=2
			done
		fi
		row+=$(printf ' %-8s' "$( ((rc == 0)) && echo clean || echo FAIL)")
		if ((rc == 0)); then
			MADVX_KERNEL_PATCHES=$d "$KDIR/run" test --kernels "$kernels" --only "$only" \
				>"$out/test-$n.log" 2>&1 || rc=3
			run=$(first_run_dir "$out/test-$n.log")
			# Stricter than test's verdict, whose reference kernel is the
			# first of the list (a test failing there is only a note):
			# every selected test passes or skips on every kernel.
			((rc == 0)) && ! bisect_all_pass "$CACHE/$run" "$kernels" \
				>>"$out/test-$n.log" && rc=3
			row+=$(printf ' %-8s %s' "$( ((rc == 0)) && echo PASS || echo FAIL)" "$run")
		fi
		for e in "${!exec_args[@]}"; do
			((rc == 0)) || break
			# shellcheck disable=SC2086 # each --exec argument is a command line: split on purpose
			MADVX_KERNEL_PATCHES=$d "$KDIR/run" exec --kernel "$exec_kernels" --timeout 3000 \
				${exec_args[$e]} >"$out/exec-$n-$e.log" 2>&1 || rc=4
			row+=" exec $(first_run_dir "$out/exec-$n-$e.log")"
		done
		echo "$row" >>"$out/summary.txt"
		log "bisect: prefix $n: $row"
		if ((rc)); then
			cat "$out/summary.txt"
			die "bisect: prefix $n failed (logs in $out)"
		fi
	done
	cat "$out/summary.txt"
	log "bisect: prefixes $from-$to of $total build W=1-clean and pass ($out)"
}

# kernel/run w1configs: every prefix of the series compiles W=1-clean in
# the kernels' own configs, each with USERFAULTFD, IO_URING, ADVISE_SYSCALLS,
# PER_VMA_LOCK_STATS and THP on so that the series' code is compiled, for the
# C files the series touches.  A config is [ARCH:]DEFCONFIG[+nosmp]: ARCH is
# the kernel's (x86_64, i386, arm64, riscv, arm; default from the name, else
# x86_64), built with Debian's cross compiler for it (installed when
# missing); +nosmp turns SMP off, and with it CONFIG_PER_VMA_LOCK, on an
# architecture that has per-VMA locks.  The default set covers both sides of
# CONFIG_PER_VMA_LOCK on 64 and 32 bits: 32-bit x86 does not select
# ARCH_SUPPORTS_PER_VMA_LOCK, 32-bit ARM and riscv32 do.  Each row of the
# summary says whether the config has per-VMA locks.  Uses a private git
# worktree of the patched tree ($CACHE/w1/tree) and build dirs
# $CACHE/w1/<config>, so it can run beside test, exec and bisect.
W1_DEFAULT_CONFIGS="x86_64_defconfig x86_64:x86_64_defconfig+nosmp i386_defconfig arm64:defconfig riscv:defconfig arm:multi_v7_defconfig"

# w1_cross ARCH: the CROSS_COMPILE prefix for ARCH on this host, installing
# Debian's cross gcc when it is missing; empty for the host's own.
w1_cross()
{
	local prefix pkg
	case $1 in
	x86_64 | i386) return 0 ;;
	arm64) prefix=aarch64-linux-gnu- ;;
	riscv) prefix=riscv64-linux-gnu- ;;
	arm) prefix=arm-linux-gnueabihf- ;;
	*) die "w1configs: no cross compiler known for ARCH=$1" ;;
	esac
	pkg=gcc-${prefix%-}
	if ! command -v "${prefix}gcc" >/dev/null; then
		lock deps
		log "w1configs: installing $pkg"
		apt_get install -y -q --no-install-recommends "$pkg" >>"$CACHE/apt-deps.log" 2>&1 ||
			{ tail -n 20 "$CACHE/apt-deps.log" >&2; die "w1configs: apt-get install $pkg failed"; }
		unlock deps
	fi
	echo "$prefix"
}

cmd_w1configs()
{
	local configs=$W1_DEFAULT_CONFIGS src tree tip total n c
	local spec cfg arch cross nosmp bdir objs f log out row pvl
	local -A crosses=()
	[[ ${1:-} ]] && configs=${*//,/ }
	# The patched repository's objects only: its working tree may be at
	# another series (a running bisect); commit_series() does not touch it.
	src="$(dirname "$SRC_PRISTINE")/patched"
	git -C "$src" cat-file -e 'madvx-base^{tree}' 2>/dev/null ||
		die "w1configs: no patched tree yet (kernel/run build patched)"
	tree=$CACHE/w1/tree
	total=$(series_files | wc -l)
	((total)) || die "w1configs: the series is empty"
	lock tree
	tip=$(commit_series "$src") || exit 1
	unlock tree
	if [[ ! -e $tree/.git ]]; then
		rm -rf "$tree"
		git -C "$src" worktree prune
		git -C "$src" worktree add -q --detach "$tree" madvx-base
	fi
	out=$CACHE/w1/summary.txt
	printf '%-8s %s\n' prefix "$configs" >"$out"
	for ((n = 1; n <= total; n++)); do
		c=$(git -C "$src" rev-parse "$tip~$((total - n))")
		git -C "$tree" checkout -q --detach "$c"
		row=$(printf '%-8s' "$n")
		for spec in $configs; do
			cfg=${spec#*:}
			nosmp=0
			[[ $cfg = *+nosmp ]] && nosmp=1 cfg=${cfg%+nosmp}
			if [[ $spec = *:* ]]; then
				arch=${spec%%:*}
			else
				case $cfg in
				i386_*) arch=i386 ;;
				*) arch=x86_64 ;;
				esac
			fi
			[[ -v crosses[$arch] ]] || crosses[$arch]=$(w1_cross "$arch")
			cross=${crosses[$arch]}
			bdir=$CACHE/w1/${spec//[:+]/-}
			if [[ ! -f $bdir/.madvx-prepared ]]; then
				mkdir -p "$bdir"
				log "w1configs: $spec: make $cfg prepare (once)"
				# The config plus what compiles the series' code:
				# userfaultfd, io_uring, madvise and the debug counters.
				{ nice -n 10 make -s -C "$tree" O="$bdir" ARCH="$arch" \
					CROSS_COMPILE="$cross" "$cfg" &&
					"$tree/scripts/config" --file "$bdir/.config" -e USERFAULTFD \
						-e IO_URING -e ADVISE_SYSCALLS -e PER_VMA_LOCK_STATS \
						-e TRANSPARENT_HUGEPAGE &&
					if ((nosmp)); then
						"$tree/scripts/config" --file "$bdir/.config" -d SMP
					fi &&
					nice -n 10 make -s -C "$tree" O="$bdir" ARCH="$arch" \
						CROSS_COMPILE="$cross" olddefconfig prepare; } \
					>"$bdir/prepare.log" 2>&1 ||
					{ tail -n 20 "$bdir/prepare.log" >&2; die "w1configs: $spec: prepare failed"; }
				touch "$bdir/.madvx-prepared"
			fi
			pvl=no-pvl
			grep -q '^CONFIG_PER_VMA_LOCK=y' "$bdir/.config" && pvl=pvl
			objs=()
			for f in $(series_c_files); do
				# Kernel objects only (not tools/), as far as the prefix has them.
				[[ $f != tools/* && -f $tree/$f ]] || continue
				rm -f "$bdir/${f%.c}.o"
				objs+=("${f%.c}.o")
			done
			log=$bdir/w1-$n.log
			if ! nice -n 10 make -C "$tree" O="$bdir" ARCH="$arch" CROSS_COMPILE="$cross" \
				W=1 -j"$JOBS" "${objs[@]}" >"$log" 2>&1; then
				cat "$log" >&2
				die "w1configs: prefix $n, $spec: build failed"
			fi
			if grep -q 'warning:' "$log"; then
				grep 'warning:' "$log" >&2
				die "w1configs: prefix $n, $spec: W=1 warnings"
			fi
			row+=" $(printf '%s' "${#objs[@]} objects clean ($pvl)")"
		done
		echo "$row" >>"$out"
		log "w1configs: prefix $n: $row"
	done
	cat "$out"
}
