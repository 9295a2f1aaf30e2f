# SPDX-License-Identifier: MIT
# "kernel/run selftest": the tooling must fail when it should (sourced by
# kernel/run).  Each case runs kernel/run as a separate process and checks
# its exit status and output.  Cases:
#   pass    a passing guest binary            -> exit 0 (positive control)
#   patch   a series whose patch cannot apply -> non-zero, "does not apply"
#   fail    a guest binary exiting 1          -> non-zero, "FAIL: extra/..."
#   warn    a guest binary raising a real WARN() via lkdtm, exiting 0
#                                             -> non-zero, "splat"
#   regress a kselftest passing on base but failing on the patched kernel
#           (captured logs fed to the parser) -> non-zero
#   evidence "evidence check": the comparison of the fixture rows in
#           kernel/tests/evidence/ (no boot)       -> exit 0, "evidence check: ok"
#   sanitizer synthetic logs of the kasan/kcsan kernels: their boot banners
#           alone pass; a "BUG: KCSAN: data-race" report in the dmesg dump,
#           and one whose "BUG:" line is lost, fail -> 0, non-zero, non-zero
# Output of every case: $CACHE/selftest/<case>.out

selftest_case()
{
	local name=$1 want_rc=$2 want_re=$3 rc=0
	shift 3
	log "selftest $name: $*"
	"$@" >"$ST_DIR/$name.out" 2>&1 || rc=$?
	if { [[ $want_rc = 0 ]] && ((rc != 0)); } || { [[ $want_rc != 0 ]] && ((rc == 0)); }; then
		echo "selftest $name: BAD (exit $rc, wanted $([[ $want_rc = 0 ]] && echo 0 || echo non-zero))"
		tail -n 30 "$ST_DIR/$name.out" | sed 's/^/    /'
		return 1
	fi
	if ! grep -Eq -- "$want_re" "$ST_DIR/$name.out"; then
		echo "selftest $name: BAD (exit $rc, but no line matching /$want_re/)"
		tail -n 30 "$ST_DIR/$name.out" | sed 's/^/    /'
		return 1
	fi
	echo "selftest $name: ok (exit $rc as expected); lines seen:"
	grep -E -m 6 -- "$want_re" "$ST_DIR/$name.out" | sed 's/^/    /'
	return 0
}

cmd_selftest()
{
	local k=base bad=0 c cases=(pass silence patch fail warn regress evidence sanitizer tagged)
	while (($#)); do
		case $1 in
		--kernel) k=$2; shift ;;
		--kernel=*) k=${1#*=} ;;
		pass | silence | patch | fail | warn | regress | evidence | sanitizer | tagged) cases=("$@"); break ;;
		*) die "selftest: unknown argument $1" ;;
		esac
		shift
	done
	ST_DIR="$CACHE/selftest"
	mkdir -p "$ST_DIR"
	for c in pass fail warn; do
		gcc -static -O2 -Wall -o "$ST_DIR/selftest-$c" "$KDIR/tests/guest-$c.c" ||
			die "cannot build tests/guest-$c.c"
	done
	for c in "${cases[@]}"; do
		case $c in
		pass)
			selftest_case pass 0 'selftest-pass: running on Linux|RESULT: PASS' \
				"$KDIR/run" exec --kernel "$k" --timeout 60 "$ST_DIR/selftest-pass" || bad=1 ;;
		silence)
			# The boot watchdog: a 5 s silence limit kills the first
			# boot before init prints, the second boot runs unwatched.
			selftest_case silence 0 'no serial output in 5 s: booting it once more' \
				env MADVX_KERNEL_BOOT_SILENCE=5 \
				"$KDIR/run" exec --kernel "$k" --timeout 60 "$ST_DIR/selftest-pass" || bad=1 ;;
		patch)
			selftest_case patch 1 'does not apply|patch failed' \
				env MADVX_KERNEL_PATCHES="$KDIR/tests/bad-series" \
				"$KDIR/run" build patched || bad=1 ;;
		fail)
			selftest_case fail 1 'FAIL: extra/selftest-fail|MADVX-RESULT|RESULT: FAIL' \
				"$KDIR/run" exec --kernel "$k" --timeout 60 "$ST_DIR/selftest-fail" || bad=1 ;;
		warn)
			selftest_case warn 1 'splat|WARNING|RESULT: FAIL' \
				"$KDIR/run" exec --kernel "$k" --timeout 60 "$ST_DIR/selftest-warn" || bad=1 ;;
		regress)
			selftest_regress || bad=1 ;;
		evidence)
			selftest_case evidence 0 'evidence check: ok' "$KDIR/run" evidence check || bad=1 ;;
		sanitizer)
			selftest_sanitizer || bad=1 ;;
		tagged)
			selftest_tagged || bad=1 ;;
		esac
	done
	if ((bad)); then
		echo "selftest: FAILED (outputs in $ST_DIR)"
		return 1
	fi
	echo "selftest: all cases behaved (outputs in $ST_DIR)"
}

# The regression rule on synthetic serial logs: ksft/x passes on "base" and
# fails on "debug"; a library test skips on both.
selftest_regress()
{
	local d="$ST_DIR/regress" k v
	rm -rf "$d"
	mkdir -p "$d"
	for k in base debug; do
		v=PASS
		[[ $k = debug ]] && v=FAIL
		printf '%s\n' "MADVX-BOOT 7.3.4 #1 cpus=2" "MADVX-START ksft/x" \
			"[x] ok 1 something" "MADVX-RESULT ksft/x $v $([[ $v = PASS ]] && echo 0 || echo 1) 1.0" \
			"MADVX-START lib/y" "MADVX-RESULT lib/y SKIP 77 0.1" "MADVX-COUNT 2" \
			"MADVX-DMESG-BEGIN" "[    0.000000] Linux version 7.3.4" "MADVX-DMESG-END" \
			"MADVX-DONE" >"$d/$k.serial"
		parse_log "$d/$k.serial" "$d" "$k"
	done
	printf '%s\n' ksft/x lib/y >"$d/expected"
	selftest_case regress 1 'FAIL: ksft/x passes on base' judge "$d" "$d/expected" base debug
}

# The splat scanner on the sanitizer kernels (synthetic serial logs): the
# boot lines of a KASAN and a KCSAN kernel are no report; a KCSAN data-race
# report in the dmesg dump is one, also when its "BUG:" line is missing.
selftest_sanitizer()
{
	local d="$ST_DIR/sanitizer" k bad=0
	# The boot lines of the real kernels (runs of 2026-12-04), the
	# KCSAN pr_warn included.
	local -a clean=("<6>[    0.537470] KernelAddressSanitizer initialized (generic)"
		"<6>[    1.257972] kcsan: enabled early"
		"<4>[    1.258230] kcsan: non-strict mode configured - use CONFIG_KCSAN_STRICT=y to see all data races"
		"<6>[    1.704878] kcsan: selftest: 3/3 tests passed")
	local -a race=("[   42.000000] ==================================================================="
		"[   42.000000] BUG: KCSAN: data-race in madvise_cold_or_pageout_pte_range / zap_pte_range"
		"[   42.000000] write to 0xffff888003a4b6c8 of 8 bytes by task 93 on cpu 1:"
		"[   42.000000] Reported by Kernel Concurrency Sanitizer on:")
	rm -rf "$d"
	mkdir -p "$d"
	for k in clean race lost; do
		{
			printf '%s\n' "MADVX-BOOT 7.3.4 #1 cpus=2" "MADVX-START ksft/x" \
				"MADVX-RESULT ksft/x PASS 0 1.0" "MADVX-COUNT 1" "MADVX-DMESG-BEGIN" "${clean[@]}"
			case $k in
			race) printf '%s\n' "${race[@]}" ;;
			lost) printf '%s\n' "${race[@]:2}" ;;
			esac
			printf '%s\n' "MADVX-DMESG-END" "MADVX-DONE"
		} >"$d/$k.serial"
		parse_log "$d/$k.serial" "$d" "$k"
	done
	echo ksft/x >"$d/expected"
	selftest_case sanitizer-clean 0 'RESULT: PASS' judge "$d" "$d/expected" clean || bad=1
	selftest_case sanitizer-kcsan 1 'splat.*|BUG: KCSAN: data-race' judge "$d" "$d/expected" race || bad=1
	selftest_case sanitizer-lost 1 'Kernel Concurrency Sanitizer' judge "$d" "$d/expected" lost || bad=1
	return $bad
}

# kernel/run tagged's verdict on synthetic serial logs of the arm64 guest:
# the program's PASS line alone passes; a lockdep report beside it, its FAIL
# line, or no line at all (a crash) fails.
selftest_tagged()
{
	local d="$ST_DIR/tagged" k bad=0
	local -a boot=("Booting Linux on physical CPU 0x0000000000 [0x000f0510]"
		"Kernel command line: console=ttyAMA0 brd.rd_size=65536 panic=-1"
		"tagged-remote: ok: swapon of a 64 MiB brd device")
	rm -rf "$d"
	mkdir -p "$d"
	printf '%s\n' "${boot[@]}" "TAGGED-RESULT PASS 0" "reboot: Power down" >"$d/pass.serial"
	printf '%s\n' "${boot[@]}" "WARNING: possible circular locking dependency detected" \
		"TAGGED-RESULT PASS 0" >"$d/lockdep.serial"
	printf '%s\n' "${boot[@]}" "tagged-remote: FAIL: every page of the tagged vector went to swap" \
		"TAGGED-RESULT FAIL 1" >"$d/fail.serial"
	printf '%s\n' "${boot[@]}" >"$d/crash.serial"
	selftest_case tagged-pass 0 'tagged: PASS' tagged_judge "$d/pass.serial" "$d/pass.splats" || bad=1
	for k in lockdep fail crash; do
		selftest_case "tagged-$k" 1 'tagged: FAIL' tagged_judge "$d/$k.serial" "$d/$k.splats" || bad=1
	done
	return $bad
}
