# SPDX-License-Identifier: MIT
# Boot kernels under QEMU and judge the serial logs (sourced by kernel/run).

QEMU_MEM=${MADVX_KERNEL_MEM:-2G}
QEMU_SMP=${MADVX_KERNEL_SMP:-2}
# Upper bound for one boot, whatever the tests do.
BOOT_TIMEOUT=${MADVX_KERNEL_BOOT_TIMEOUT:-3000}
# The same for the sanitizer kernels (kasan, kcsan and their -base twins),
# which run the same tests several times slower under TCG.
SAN_BOOT_TIMEOUT=${MADVX_KERNEL_SAN_BOOT_TIMEOUT:-$((3 * BOOT_TIMEOUT))}

# boot_timeout_for VARIANT: the boot limit of that kernel.
boot_timeout_for()
{
	case $1 in
	kasan | kasan-base | kcsan | kcsan-base) echo "$SAN_BOOT_TIMEOUT" ;;
	*) echo "$BOOT_TIMEOUT" ;;
	esac
}

# A guest whose serial log stays empty this long (init prints at once) is
# taken for hung in early boot and booted once more: seen under TCG at load
# ~15 on 2 cores, with a bzImage that had booted an hour before.
BOOT_SILENCE=${MADVX_KERNEL_BOOT_SILENCE:-600}

# boot_watched <silence limit s, 0 = none> <serial log> <qemu argv...>:
# run QEMU; 200 when it was killed for writing nothing in the limit.
boot_watched()
{
	local limit=$1 serial=$2 pid rc=0 waited=0
	shift 2
	timeout --kill-after=10 "$BOOT_TIMEOUT" "$@" </dev/null >"$serial.qemu" 2>&1 &
	pid=$!
	while ((limit)) && kill -0 "$pid" 2>/dev/null; do
		if ((waited >= limit)) && [[ ! -s $serial ]]; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" || true
			return 200
		fi
		sleep 5
		waited=$((waited + 5))
	done
	wait "$pid" || rc=$?
	return $rc
}

# boot_kernel <bzImage> <initrd> <serial log> <extra cmdline> [interactive]
boot_kernel()
{
	local bz=$1 initrd=$2 serial=$3 extra=$4 interactive=${5:-0} rc=0
	# TCG on a busy 2-core host is slow: give RCU stalls more slack than
	# the default 21 s before they are reported (and fail the run).
	# no_timer_check: under TCG on a loaded host the IO-APIC timer check can
	# miss its ticks and panic at boot ("IO-APIC + timer doesn't work!",
	# seen here at load ~15); the check tests QEMU, not our code.
	local append="console=ttyS0 quiet panic=-1 no_timer_check rcupdate.rcu_cpu_stall_timeout=120 $extra"
	local -a q=(qemu-system-x86_64 -accel tcg -cpu max -smp "$QEMU_SMP" -m "$QEMU_MEM"
		-kernel "$bz" -initrd "$initrd" -append "$append"
		-display none -no-reboot -nodefaults)
	if ((interactive)); then
		"${q[@]}" -serial mon:stdio || rc=$?
		return $rc
	fi
	boot_watched "$BOOT_SILENCE" "$serial" "${q[@]}" -monitor none -serial "file:$serial" || rc=$?
	if ((rc == 200)); then
		log "boot $(basename "$bz"): no serial output in ${BOOT_SILENCE} s: booting it once more"
		rc=0
		boot_watched 0 "$serial" "${q[@]}" -monitor none -serial "file:$serial" || rc=$?
	fi
	if ((rc == 124 || rc == 137)); then
		echo "MADVX-HOST qemu killed after ${BOOT_TIMEOUT} s" >>"$serial"
	fi
	return $rc
}

# Kernel log patterns that fail a run.  KASAN and KCSAN reports start with
# "BUG: KASAN: ..." / "BUG: KCSAN: ..." (the kasan and kcsan kernels); the
# names and KCSAN's closing "Reported by Kernel Concurrency Sanitizer on:"
# are listed on their own too, so that a report whose first line is lost
# still fails the run (kernel/run selftest sanitizer).  "KCSAN:" with its
# colon: 7.3.4's KCSAN says at every boot "kcsan: non-strict mode configured
# - use CONFIG_KCSAN_STRICT=y to see all data races" (a pr_warn, no report).
SPLAT_RE='WARNING:|BUG:|Oops|kernel BUG at|general protection fault|Kernel panic|possible circular locking|inconsistent lock state|possible recursive locking|suspicious RCU usage|KASAN|KCSAN:|Kernel Concurrency Sanitizer|UBSAN|stack-protector|Call Trace:|blocked for more than|soft lockup|hard LOCKUP'

# parse_log <serial log> <out dir> <kernel label>
# Writes <out>/<label>.results ("name verdict rc secs"), <label>.splats and
# <label>.problems; returns non-zero if the log itself is broken.
parse_log()
{
	local log=$1 out=$2 label=$3
	awk -v res="$out/$label.results" -v spl="$out/$label.splats" \
		-v prob="$out/$label.problems" -v re="$SPLAT_RE" '
		BEGIN { indmesg = 0; done = 0; dm = 0; boot = 0 }
		{ sub(/\r$/, "") }
		/MADVX-DMESG-BEGIN/ { indmesg = 1; dm = 1; next }
		/MADVX-DMESG-END/ { indmesg = 0; dmend = 1; next }
		indmesg {
			if ($0 ~ re) print $0 >> spl
			next
		}
		/MADVX-BOOT / { boot = 1 }
		/MADVX-DONE/ { done = 1 }
		match($0, /MADVX-START [^ ]+/) {
			n = substr($0, RSTART + 12, RLENGTH - 12); started[n] = 1; order[++no] = n
		}
		match($0, /MADVX-RESULT [^ ]+ (PASS|FAIL|SKIP) -?[0-9]+ [0-9.]+/) {
			split(substr($0, RSTART, RLENGTH), f, " ")
			print f[2], f[3], f[4], f[5] >> res
			got[f[2]] = 1
			next
		}
		# Lines outside the dump that are not test output: the console
		# still shows panics and oopses (quiet hides only WARN and below).
		$0 ~ re && ($0 !~ /^\[[^]]*\] / || $0 ~ /^\[ *[0-9]+\.[0-9]+\]/) { print "console: " $0 >> spl }
		END {
			if (!boot) print "guest did not boot (no MADVX-BOOT line)" >> prob
			for (i = 1; i <= no; i++)
				if (!(order[i] in got)) print "test " order[i] " started but has no result (crash or hang)" >> prob
			if (!dm || !dmend) print "no complete dmesg dump: guest crashed or was killed" >> prob
			if (!done) print "guest did not finish (no MADVX-DONE line)" >> prob
		}' "$log"
	touch "$out/$label.results" "$out/$label.splats" "$out/$label.problems"
}

# Expected test names for a tests.list and the only/skip globs.
expected_tests()
{
	local list=$1 only=$2 skip=$3 g n full ok pat
	while IFS=$'\t' read -r g n _; do
		[[ -z $g || $g = \#* ]] && continue
		full="$g/$n"
		if [[ -n $only ]]; then
			ok=0
			for pat in ${only//,/ }; do
				# shellcheck disable=SC2053 # $pat is a glob (--only "madvx/*")
				[[ $n == $pat || $full == $pat || $g == $pat ]] && ok=1
			done
			((ok)) || continue
		fi
		if [[ -n $skip ]]; then
			ok=1
			for pat in ${skip//,/ }; do
				# shellcheck disable=SC2053 # $pat is a glob (--skip "madvx/*")
				[[ $n == $pat || $full == $pat || $g == $pat ]] && ok=0
			done
			((ok)) || continue
		fi
		echo "$full"
	done <"$list"
}

# judge <run dir> <expected file> <labels...>: print the table and verdict;
# return 0 only if the run is clean.  The first label is the reference
# (base) kernel for the kselftest regression rule.  A kernel with its own
# list (<run dir>/expected.<label>, see variant_skip) is judged on that
# list; the table shows "-" for a test it does not run.
judge()
{
	local dir=$1 expected=$2
	shift 2
	local labels=("$@") l t v rc secs ref bad=0 npass=0 nfail=0 nskip=0 w=28 rv
	local -A R E X
	for l in "${labels[@]}"; do
		while read -r t v rc secs; do
			R[$l/$t]="$v $rc $secs"
		done <"$dir/$l.results"
		X[$l]=$expected
		[[ -f $dir/expected.$l ]] && X[$l]=$dir/expected.$l
		while read -r t; do
			E[$l/$t]=1
		done <"${X[$l]}"
	done
	# Table.
	while read -r t; do ((${#t} > w)) && w=${#t}; done <"$expected"
	{
		printf "%-${w}s" "test"
		for l in "${labels[@]}"; do printf ' | %-20s' "$l"; done
		printf '\n'
		printf '%*s' "$w" '' | tr ' ' '-'
		for l in "${labels[@]}"; do printf -- '-+-%s' "--------------------"; done
		printf '\n'
		while read -r t; do
			printf "%-${w}s" "$t"
			for l in "${labels[@]}"; do
				if [[ -z ${E[$l/$t]:-} ]]; then
					printf ' | %-20s' "-"
				elif [[ -n ${R[$l/$t]:-} ]]; then
					read -r v rc secs <<<"${R[$l/$t]}"
					printf ' | %-20s' "$v rc=$rc ${secs}s"
				else
					printf ' | %-20s' "MISSING"
				fi
			done
			printf '\n'
		done <"$expected"
	} | tee "$dir/summary.txt"
	{
		ref=${labels[0]}
		for l in "${labels[@]}"; do
			while read -r t; do
				v=${R[$l/$t]:-MISSING}
				v=${v%% *}
				case $v in
				PASS) npass=$((npass + 1)); continue ;;
				SKIP) nskip=$((nskip + 1)) ;;
				*) nfail=$((nfail + 1)) ;;
				esac
				if [[ $t = ksft/* && ${#labels[@]} -gt 1 && $l != "$ref" ]]; then
					# kselftests: a regression against the base fails.
					rv=${R[$ref/$t]:-MISSING}
					rv=${rv%% *}
					if [[ $rv = PASS ]]; then
						echo "FAIL: $t passes on $ref but is $v on $l"
						bad=1
					elif [[ $t = ksft/madv_vma_lock && ( $l = debug || $l = patched || $l = kasan || $l = kcsan ) ]]; then
						# The series' own test: it must pass where the series is.
						echo "FAIL: $t (added by the series) is $v on $l"
						bad=1
					elif [[ $v != SKIP ]]; then
						echo "note: $t is $v on $l and $rv on $ref (not a regression)"
					fi
				elif [[ $t = ksft/* && $v = SKIP ]]; then
					:
				elif [[ $t = ksft/* && $l = "$ref" && ${#labels[@]} -gt 1 ]]; then
					echo "note: $t is $v on the reference kernel $ref"
					[[ $v = MISSING ]] && bad=1
				elif [[ $v != SKIP ]]; then
					echo "FAIL: $t is $v on $l"
					bad=1
				fi
			done <"${X[$l]}"
			if [[ -s $dir/$l.problems ]]; then
				sed "s/^/FAIL: $l: /" "$dir/$l.problems"
				bad=1
			fi
			if [[ -s $dir/$l.splats ]]; then
				echo "FAIL: $l: kernel log has $(wc -l <"$dir/$l.splats") splat line(s):"
				head -n 20 "$dir/$l.splats" | sed 's/^/    /'
				bad=1
			fi
		done
		if ((bad)); then
			echo "RESULT: FAIL (logs: $dir)"
		else
			echo "RESULT: PASS (logs: $dir)"
		fi
		# Last line: the plain "N passed, N failed" that CI reads.
		echo "kernel: $npass passed, $nfail failed, $nskip skipped"
	} >"$dir/verdict.txt"
	tee -a "$dir/summary.txt" <"$dir/verdict.txt"
	return $bad
}

new_run_dir()
{
	local old
	RUN_DIR="$CACHE/runs/$(date -u +%Y%m%dT%H%M%SZ)-$$"
	mkdir -p "$RUN_DIR"
	# Keep the newest 40 runs.
	# The stamps sort by time; glob order is that order in the C locale.
	for old in $(LC_ALL=C compgen -G "$CACHE/runs/2*/" | sort | head -n -40); do
		rm -rf "$old"
	done
	ln -sfn "$RUN_DIR" "$CACHE/runs/latest"
}

# source_versions LABEL: the package and .deb of the current source
# (use_source), the lines prefixed with "LABEL: " unless LABEL is empty
# (the old kernel's, since one run can boot both).
source_versions()
{
	local prefix=""
	[[ -z $1 ]] || prefix="$1: "
	echo "${prefix}package $MADVX_KERNEL_PACKAGE $DEBVER (Linux $(kernel_version "$SRC_PRISTINE"))"
	echo "${prefix}deb $(basename "$DEB") sha256 $(cut -d' ' -f1 "$DEB.sha256" 2>/dev/null || echo '?')"
}

# record_versions LABELS...: what this run booted, in versions.txt.
record_versions()
{
	local f=$RUN_DIR/versions.txt l
	{
		if [[ -n $DEB ]]; then
			source_versions ""
			# The series is for the 7.3 kernels only (never applied to old).
			echo "series $(series_hash): $(series_files | xargs -r -n1 basename | tr '\n' ' ')"
		fi
		for l in "$@"; do
			[[ ! -f $RUN_DIR/versions.$l.txt ]] || cat "$RUN_DIR/versions.$l.txt"
		done
		echo "repo $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD -- 2>/dev/null || echo '+dirty')"
	} >"$f"
	cat "$f" >&2
}
