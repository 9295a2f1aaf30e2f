# SPDX-License-Identifier: MIT
# Command line of kernel/run (sourced last).

usage()
{
	cat <<'EOF'
usage: kernel/run [COMMAND] [OPTIONS]

  test      (default) fetch, build base + debug (patched), build the initramfs,
            boot both kernels, run every test in each, print a summary;
            non-zero exit on any failure, missing result or kernel splat
              --kernels LIST   variants to boot, first = reference
                               (default base,debug; also: patched,
                               nopvl-base, nopvl-patched, old, kasan,
                               kasan-base, kcsan, kcsan-base)
              --only GLOBS     run only these tests (comma separated globs on
                               name, group/name or group: lib, example, ksft)
              --skip GLOBS     do not run these tests; KERNEL:GLOB
                               only in that kernel (base:ksft/uffd-*)
              --serial         boot the kernels one after the other
                               (default: at the same time)
              --full           the full matrix: base, debug, the
                               uniprocessor kernels without
                               CONFIG_PER_VMA_LOCK, nopvl-base and
                               nopvl-patched, old (Debian 12's 6.1),
                               and the series under KASAN + lockdep
                               (kasan) and KCSAN (kcsan); not CI: five
                               more builds
  exec      boot a kernel and run one static binary in it, print its output
              --kernel LIST    variants (default debug; "all" = base,patched,debug)
              --timeout S      per-binary timeout in the guest (default 300)
              BINARY [ARGS...] (arguments without spaces)
  clients   the clients' own test suites (bdwgc's make check and ctest,
            mimalloc's test-api, test-api-fill, test-stress, jemalloc's
            make check programs), built
            statically stock and patched, run in the guest by exec
            (examples/common/kernel-clients.sh)
              --kernel LIST    variants (default base)
              --timeout S      the whole run's timeout (default 3000; the
                               boot's limit is raised to it + 300 s)
              --client C       bdwgc, bdwgc-upstream, mimalloc,
                               mimalloc-upstream, jemalloc,
                               jemalloc-upstream (repeatable; default
                               bdwgc, mimalloc, jemalloc and the upstream
                               ones MADVX_BDWGC_UPSTREAM/
                               MADVX_MIMALLOC_UPSTREAM/
                               MADVX_JEMALLOC_UPSTREAM name)
              [FILTER...]      CLIENT or CLIENT:CONFIG to run (default all)
  shell     boot a kernel with a busybox shell on this terminal
              --kernel VARIANT (default debug)
  build     [base|patched|debug|nopvl-base|nopvl-patched|old|kasan|
             kasan-base|kcsan|kcsan-base ...]
                              build kernels (default base debug)
  bisect    every prefix of the series: build the kernels, W=1-check the
            C files the prefix touches, boot them and run the tests
              --kernels LIST   (default patched,nopvl-patched)
              --only GLOBS     tests to run (default ksft/*)
              --from N, --to N  only the prefixes N.. / ..N
              --exec "BIN ARGS"  also run BIN (repeatable; a boot per
                               binary and kernel)
              --exec-kernels LIST  where --exec runs (default: the
                               first of --kernels)
  w1check   VARIANT           rebuild the series' objects of a built
                              variant with W=1; fail on any warning
  w1configs [CONFIGS]         every prefix: the series' objects with W=1
                              in x86_64_defconfig and i386_defconfig (or
                              the given make configs); fail on any warning
  evidence  the cover letter's before/after tables (issue 21)
              run [--quick] [--out FILE] [--no-perf] [-- ARGS]
                               the workloads of patches/bench/evidence.c
                               on the RUNNING kernel (real hardware: boot
                               base, run; boot patched, run), rows tagged
                               with uname -r and the series hash, plus
                               perf lock contention when perf works
              compare BASE.csv PATCHED.csv
                               before, after, after/before, plain text;
                               rows from a TCG guest: counts only
              tcg [--kernels BASE,PATCHED]
                               boot the cached base and patched kernels
                               under TCG, --quick in each, compare
              check            compare on the fixture rows (no boot)
  tagged    [--kernels LIST]  a process_madvise() vector of TBI-tagged
                              addresses on another process, on arm64
                              kernels (tinyconfig + lockdep, base and
                              patched by default) under qemu-system-aarch64
                              (issue 21: patch 7's untag path, which x86
                              cannot run)
  fetch     [--refresh]       download + extract the source package
  coldcheck [--reps N]        the cold path (private lists, index check,
                              extract, first configure) in a scratch cache
                              seeded with the cached .deb; a corrupted copy
                              must be refused (tools/test.sh runs it)
  initramfs                   build the test initramfs only
  deps                        install missing Debian packages
  selftest                    check that the tooling fails when it must
  parse LOG                   judge a captured serial log

environment: MADVX_KERNEL_CACHE (default /var/cache/madvx-kernel),
  MADVX_KERNEL_OLD_CACHE (default /var/cache/madvx-kernel-old: the old
  kernel's apt state, .deb, source and build dirs),
  MADVX_KERNEL_PATCHES (default kernel/patches), MADVX_KERNEL_JOBS (2),
  MADVX_KERNEL_TIMEOUT_MULT (5), MADVX_KERNEL_BOOT_TIMEOUT (3000),
  MADVX_DEBIAN_MIRROR, MADVX_DEBIAN_SECURITY_MIRROR (default: derived
  from the apt configuration)
EOF
}

# Debian packages the flow needs, by the command or file that proves them.
DEPS=(
	"qemu-system-x86_64:qemu-system-x86"
	"flex:flex"
	"bison:bison"
	"bc:bc"
	"rsync:rsync"
	"cpio:cpio"
	"gcc:gcc"
	"make:make"
	"git:git"
	"xz:xz-utils"
	"meson:meson"
	"ninja:ninja-build"
	"pkg-config:pkg-config"
	"python3:python3"
	"readelf:binutils"
	"/usr/include/gelf.h:libelf-dev"
	"/usr/include/openssl/ssl.h:libssl-dev"
	"/bin/busybox:busybox-static"
	"/usr/lib/x86_64-linux-gnu/libcheck.a:check"
	"/usr/lib/x86_64-linux-gnu/libsubunit.a:libsubunit-dev"
	"/usr/lib/x86_64-linux-gnu/liburing.a:liburing-dev"
	"/usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring"
)

# missing_packages SPEC...: the package of each what:package SPEC whose
# command (or absolute path) is missing, one per line.
missing_packages()
{
	local d what
	for d in "$@"; do
		what=${d%%:*}
		if [[ $what = /* ]]; then
			[[ -e $what ]] && continue
		else
			command -v "$what" >/dev/null && continue
		fi
		echo "${d#*:}"
	done
}

# install_packages TAG PKG...: apt-get update, then install, under the
# deps lock (apt_get waits for dpkg's own lock).
install_packages()
{
	local tag=$1 t0=$SECONDS
	shift
	lock deps
	log "$tag: installing $*"
	export DEBIAN_FRONTEND=noninteractive
	apt_get update -q >"$CACHE/apt-deps.log" 2>&1 || { cat "$CACHE/apt-deps.log" >&2; die "apt-get update failed"; }
	apt_get install -y -q --no-install-recommends "$@" >>"$CACHE/apt-deps.log" 2>&1 ||
		{ tail -n 30 "$CACHE/apt-deps.log" >&2; die "apt-get install $* failed"; }
	unlock deps
	log "$tag: installed in $((SECONDS - t0)) s"
}

cmd_deps()
{
	local missing=()
	mapfile -t missing < <(missing_packages "${DEPS[@]}")
	# busybox (dynamic) may shadow busybox-static's binary name.
	if [[ -e /bin/busybox ]] && ! is_static_elf /bin/busybox; then
		missing+=(busybox-static)
	fi
	((${#missing[@]})) || return 0
	install_packages deps "${missing[@]}"
}

# Kernel for a variant, fetching its source and building it if needed;
# sets BZIMAGE for a variant of the main source.  A variant of the old
# source is fetched (its .deb verified again) and built in a subshell with
# that source's globals, so the caller's CACHE and DEB stay the main ones:
# pass a path as $2 to get its bzImage.
kernel_for()
{
	if [[ $(variant_source "$1") = "$SOURCE" ]]; then
		[[ -n $DEB ]] || cmd_fetch
		build_variant "$@"
		return
	fi
	(
		use_source "$(variant_source "$1")"
		cmd_fetch
		build_variant "$@"
		# The run's record of this source (record_versions).
		[[ -z ${2:-} ]] || source_versions "$1" >"$(dirname "$2")/versions.$1.txt"
	) || exit 1
}

# Globs a variant does not run by default (madvx.skip on its command line):
# the mm kselftests are built from the 7.3 tree for 7.3 (their UAPI, their
# expectations: process_madv tests PIDFD_SELF, uffd-unit-tests MOVE) and do
# not run on the old kernel; the "compat" group (the conformance suite
# under every MADVX_DISABLE variant and madvx-probe --verify) runs only on
# the old kernel, where the kernel itself differs from the planner's
# defaults - on 7.3 the host runs those variants already.
variant_skip()
{
	case $1 in
	old) echo ksft ;;
	*) echo compat ;;
	esac
}

# Does the comma-separated kernel list $1 need the main (7.3) source?
needs_main_source()
{
	local k labels
	IFS=, read -r -a labels <<<"$1"
	for k in "${labels[@]}"; do
		[[ $(variant_source "$k") = new ]] && return 0
	done
	return 1
}

# The --skip globs that apply to kernel $1, each with a leading comma: a
# glob without a kernel applies to every kernel, "KERNEL:GLOB" to that one
# (e.g. base:ksft/uffd-unit-tests: the reference kernel leaves it out).
skip_for()
{
	local k=$1 g globs=()
	IFS=, read -r -a globs <<<"$2"
	for g in "${globs[@]}"; do
		case $g in
		"$k":*) printf ',%s' "${g#*:}" ;;
		*:*) ;;
		?*) printf ',%s' "$g" ;;
		esac
	done
}

cmd_test()
{
	local kernels=base,debug only="" skip="" k labels=() rc=0 t0=$SECONDS cmdline serial=0
	local -A kskip=()
	while (($#)); do
		case $1 in
		--kernels) kernels=$2; shift ;;
		--kernels=*) kernels=${1#*=} ;;
		--only) only=$2; shift ;;
		--only=*) only=${1#*=} ;;
		--skip) skip=$2; shift ;;
		--skip=*) skip=${1#*=} ;;
		--serial) serial=1 ;;
		--full) kernels=base,debug,nopvl-base,nopvl-patched,old,kasan,kcsan ;;
		-h | --help) usage; return 0 ;;
		*) die "test: unknown argument $1" ;;
		esac
		shift
	done
	check_variants "$kernels" test
	cmd_deps
	IFS=, read -r -a labels <<<"$kernels"
	# Only the old kernel: no 7.3 source, no kselftests (variant_skip).
	if needs_main_source "$kernels"; then
		cmd_fetch
	else
		# shellcheck disable=SC2034 # read by build_initramfs (guest.sh)
		INITRAMFS_KSFT=0
	fi
	new_run_dir
	for k in "${labels[@]}"; do
		kernel_for "$k" "$RUN_DIR/$k.bzImage"
	done
	build_initramfs "$RUN_DIR"
	record_versions "${labels[@]}"
	# Each kernel runs the selection minus its own default skips; the
	# table shows the union ("-" where a kernel does not run a test).
	: >"$RUN_DIR/expected"
	for k in "${labels[@]}"; do
		kskip[$k]=$(variant_skip "$k")$(skip_for "$k" "$skip")
		expected_tests "$RUN_DIR/tests.list" "$only" "${kskip[$k]}" >"$RUN_DIR/expected.$k"
		[[ -s $RUN_DIR/expected.$k ]] || die "no test selected for $k"
		cat "$RUN_DIR/expected.$k" >>"$RUN_DIR/expected"
	done
	awk '!seen[$0]++' "$RUN_DIR/expected" >"$RUN_DIR/expected.tmp"
	mv "$RUN_DIR/expected.tmp" "$RUN_DIR/expected"
	cmdline=""
	[[ -n $only ]] && cmdline+=" madvx.only=$only"
	log "build phase done in $((SECONDS - t0)) s"
	# The kernels boot at the same time by default: a TCG guest running
	# mostly single-threaded tests keeps about one host core busy, so two
	# guests on two cores take little longer than one, and both see the
	# same host load.  --serial boots them one after the other.
	local b0=$SECONDS pids=()
	for k in "${labels[@]}"; do
		log "boot $k: $(wc -l <"$RUN_DIR/expected.$k") tests, serial log $RUN_DIR/$k.serial"
		if ((serial)); then
			BOOT_TIMEOUT=$(boot_timeout_for "$k") \
				boot_kernel "$RUN_DIR/$k.bzImage" "$RUN_DIR/initramfs.cpio.gz" "$RUN_DIR/$k.serial" \
				"$cmdline madvx.skip=${kskip[$k]}" || true
			log "boot $k: done after $((SECONDS - b0)) s"
		else
			BOOT_TIMEOUT=$(boot_timeout_for "$k") \
				boot_kernel "$RUN_DIR/$k.bzImage" "$RUN_DIR/initramfs.cpio.gz" "$RUN_DIR/$k.serial" \
				"$cmdline madvx.skip=${kskip[$k]}" &
			pids+=($!)
		fi
	done
	for k in "${!pids[@]}"; do
		wait "${pids[$k]}" || true
		log "boot ${labels[$k]}: done after $((SECONDS - b0)) s"
	done
	for k in "${labels[@]}"; do
		parse_log "$RUN_DIR/$k.serial" "$RUN_DIR" "$k"
		log "boot $k: $(wc -l <"$RUN_DIR/$k.results") results ($(grep -am1 -o 'MADVX-BOOT [^ ]*' "$RUN_DIR/$k.serial" | cut -d' ' -f2 || echo 'no boot'))"
	done
	if [[ -s $RUN_DIR/not-in-guest.list ]]; then
		echo "WARNING: $(wc -l <"$RUN_DIR/not-in-guest.list") library test(s)/example(s) could not be linked statically and did not run in the guest:"
		sed 's/^/    /' "$RUN_DIR/not-in-guest.list"
		if [[ ${MADVX_KERNEL_STRICT:-0} = 1 ]]; then
			echo "FAIL: MADVX_KERNEL_STRICT=1 and not every library test ran in the guest"
			rc=1
		fi
	fi
	log "test: total $((SECONDS - t0)) s"
	judge "$RUN_DIR" "$RUN_DIR/expected" "${labels[@]}" || rc=1
	return $rc
}

# A small initramfs: init + busybox, no tests (for exec and shell), written
# to $1.
build_min_initramfs()
{
	local stage="$CACHE/initramfs/min"
	lock initramfs
	stage_root "$stage"
	: >"$stage/madvx/tests.list"
	(cd "$stage" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc --quiet --owner=0:0 | gzip -1 >"$1")
	unlock initramfs
}

# take_run_opt <args...>: one of the options exec and clients share, into
# RUN_KERNELS or RUN_TIMEOUT; its status is the number of words it took
# (0: not one of them).
take_run_opt()
{
	case $1 in
	--kernel | --kernels) RUN_KERNELS=${2:?$1 needs a value}; return 2 ;;
	--kernel=* | --kernels=*) RUN_KERNELS=${1#*=}; return 1 ;;
	--timeout) RUN_TIMEOUT=${2:?$1 needs a value}; return 2 ;;
	--timeout=*) RUN_TIMEOUT=${1#*=}; return 1 ;;
	esac
	return 0
}

cmd_exec()
{
	local kernels timeout k labels=() rc=0 bin name n
	RUN_KERNELS=debug RUN_TIMEOUT=300
	while (($#)); do
		n=0
		take_run_opt "$@" || n=$?
		if ((n)); then
			shift "$n"
			continue
		fi
		case $1 in
		-h | --help) usage; return 0 ;;
		--) shift; break ;;
		-*) die "exec: unknown option $1" ;;
		*) break ;;
		esac
	done
	kernels=$RUN_KERNELS timeout=$RUN_TIMEOUT
	[[ $timeout =~ ^[0-9]+$ ]] || die "exec: --timeout wants seconds, not $timeout"
	[[ $kernels = all ]] && kernels=base,patched,debug
	check_variants "$kernels" exec
	(($#)) || die "exec: which binary?"
	# One boot runs the binary: its limit must leave the binary its time.
	((BOOT_TIMEOUT >= timeout + 300)) || BOOT_TIMEOUT=$((timeout + 300))
	bin=$1
	shift
	[[ -f $bin ]] || die "exec: $bin does not exist"
	is_static_elf "$bin" || [[ $(head -c 2 "$bin") = '#!' ]] ||
		die "exec: $bin is not a static executable (link with -static)"
	name=$(basename "$bin")
	# shellcheck disable=SC2034 # read by build_extra_archive (guest.sh)
	EXTRA_NAMES=("$name")
	# shellcheck disable=SC2034 # as above
	EXTRA_PATHS=("$bin")
	# shellcheck disable=SC2034 # as above
	EXTRA_TIMEOUTS=("$timeout")
	# shellcheck disable=SC2034 # as above
	EXTRA_ARGS=("$*")
	cmd_deps
	needs_main_source "$kernels" && cmd_fetch
	IFS=, read -r -a labels <<<"$kernels"
	new_run_dir
	for k in "${labels[@]}"; do
		kernel_for "$k" "$RUN_DIR/$k.bzImage"
	done
	build_min_initramfs "$RUN_DIR/min.cpio.gz"
	record_versions "${labels[@]}"
	build_extra_archive "$RUN_DIR/extra.cpio.gz"
	cat "$RUN_DIR/min.cpio.gz" "$RUN_DIR/extra.cpio.gz" >"$RUN_DIR/initramfs.cpio.gz"
	echo "extra/$name" >"$RUN_DIR/expected"
	for k in "${labels[@]}"; do
		log "exec: $name on $k"
		BOOT_TIMEOUT=$(boot_timeout_for "$k") \
			boot_kernel "$RUN_DIR/$k.bzImage" "$RUN_DIR/initramfs.cpio.gz" "$RUN_DIR/$k.serial" "madvx.zram=256" || true
		parse_log "$RUN_DIR/$k.serial" "$RUN_DIR" "$k"
		echo "===== $name on $k ($(grep -m1 -o 'MADVX-BOOT [^ ]*' "$RUN_DIR/$k.serial" | cut -d' ' -f2 || echo 'no boot')) ====="
		grep -a "^\[$name\] " "$RUN_DIR/$k.serial" | tr -d "\r" | sed "s/^\[$name\] //" || true
	done
	# exec has no reference kernel: every kernel is judged on its own.
	for k in "${labels[@]}"; do
		judge "$RUN_DIR" "$RUN_DIR/expected" "$k" >"$RUN_DIR/$k.judge" || rc=1
		sed "s/^/[$k] /" "$RUN_DIR/$k.judge"
	done
	return $rc
}

# The clients' own test suites (bdwgc, mimalloc, jemalloc; issue 20) in the guest:
# their test programs built statically, stock and patched (the patched ones
# with LIB_BUILD's libmadvx.a), packed into one script by
# examples/common/kernel-clients.sh and run by exec on each kernel.
cmd_clients()
{
	local clients=() filters=() dir rc=0 n
	RUN_KERNELS=base RUN_TIMEOUT=3000
	while (($#)); do
		n=0
		take_run_opt "$@" || n=$?
		if ((n)); then
			shift "$n"
			continue
		fi
		case $1 in
		--client) clients+=("${2:?--client needs a value}"); shift ;;
		--client=*) clients+=("${1#*=}") ;;
		-h | --help) usage; return 0 ;;
		-*) die "clients: unknown option $1" ;;
		*) filters+=("$1") ;;
		esac
		shift
	done
	# Before the clients' builds: exec would refuse the names only after.
	check_variants "$RUN_KERNELS" clients
	cmd_deps
	local kernels=$RUN_KERNELS timeout=$RUN_TIMEOUT
	mkdir -p "$CACHE/clients"
	dir=$(mktemp -d "$CACHE/clients/run.XXXXXX")
	lib_setup "$dir"
	"$REPO/examples/common/kernel-clients.sh" "$REPO" "$LIB_BUILD" "$dir/madvx-clients" \
		"${clients[@]}" || { rm -rf "$dir"; die "clients: building the static test programs failed"; }
	cmd_exec --kernel "$kernels" --timeout "$timeout" "$dir/madvx-clients" "${filters[@]}" || rc=1
	rm -rf "$dir"
	return $rc
}

cmd_shell()
{
	local k=debug
	while (($#)); do
		case $1 in
		--kernel) k=$2; shift ;;
		--kernel=*) k=${1#*=} ;;
		*) die "shell: unknown argument $1" ;;
		esac
		shift
	done
	check_variants "$k" shell
	cmd_deps
	local tmp
	tmp=$(mktemp -d)
	kernel_for "$k" "$tmp/bzImage"
	build_min_initramfs "$tmp/initramfs.cpio.gz"
	BZIMAGE=$tmp/bzImage
	INITRAMFS_MIN=$tmp/initramfs.cpio.gz
	log "shell: $k kernel, busybox sh on the serial console; 'poweroff -f' or exit to quit (Ctrl-A X kills QEMU)"
	boot_kernel "$BZIMAGE" "$INITRAMFS_MIN" /dev/null "madvx.shell=1" 1
}

cmd_parse()
{
	local log=${1:?parse: which serial log?} dir
	dir=$(mktemp -d)
	parse_log "$log" "$dir" k
	awk '{ print $1 }' "$dir/k.results" >"$dir/expected"
	grep -ao 'MADVX-START [^ ]*' "$log" | tr -d '\r' | cut -d' ' -f2 >>"$dir/expected" || true
	sort -u -o "$dir/expected" "$dir/expected"
	[[ -s $dir/expected ]] || echo "(no tests)" >"$dir/expected"
	judge "$dir" "$dir/expected" k
}

main()
{
	local cmd=${1:-test}
	(($#)) && shift
	mkdir -p "$CACHE"
	# shellcheck disable=SC2034 # REFRESH (fetch) is read by fetch_deb (fetch.sh)
	case $cmd in
	test) cmd_test "$@" ;;
	exec) cmd_exec "$@" ;;
	clients) cmd_clients "$@" ;;
	shell) cmd_shell "$@" ;;
	build) cmd_build "$@" ;;
	fetch) [[ ${1:-} = --refresh ]] && REFRESH=1; cmd_fetch ;;
	coldcheck) cmd_deps; cmd_coldcheck "$@" ;;
	initramfs) cmd_deps; cmd_fetch; build_initramfs ;;
	deps) cmd_deps ;;
	selftest) cmd_selftest "$@" ;;
	bisect) cmd_deps; cmd_fetch; cmd_bisect "$@" ;;
	w1check) cmd_fetch; cmd_w1check "$@" ;;
	w1configs) cmd_fetch; cmd_w1configs "$@" ;;
	parse) cmd_parse "$@" ;;
	evidence) cmd_evidence "$@" ;;
	tagged) cmd_deps; cmd_fetch; cmd_tagged "$@" ;;
	-h | --help | help) usage ;;
	*) usage >&2; die "unknown command $cmd" ;;
	esac
}
