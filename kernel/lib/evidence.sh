# SPDX-License-Identifier: MIT
# "kernel/run evidence": the before/after tables of the cover letter
# (issue 21, "Evidence"), from kernel/patches/bench/evidence.c (sourced by
# kernel/run).
#
#   evidence run [--quick] [--out FILE] [--no-perf] [-- PROGRAM ARGS]
#           the workloads on the RUNNING kernel (real hardware: boot base,
#           run, boot patched, run), one CSV file of rows tagged with
#           uname -r and the series hash, plus `perf lock contention` of
#           the contended scenarios when perf works
#   evidence compare BASE PATCHED
#           the cover letter's tables: before, after, after/before; rows
#           of a QEMU TCG guest are counts only, their timings marked
#   evidence tcg [--kernels BASE,PATCHED]
#           both cached kernels booted under TCG (kernel/run exec), --quick
#           in each, then compare: the mechanism counts, nothing else
#   evidence check
#           compare on the fixture rows of kernel/tests/evidence/ (no boot)

EVIDENCE_SRC="$KDIR/patches/bench/evidence.c"
# The scenarios in which the advisor contends with writers: the ones
# `perf lock contention` says something about.
EVIDENCE_PERF_SCENARIOS=(cold pageout_mprotect vector uffd_dontneed remote_pageout)

evidence_usage()
{
	cat <<'EOF'
usage: kernel/run evidence run [--quick] [--out FILE] [--no-perf] [-- ARGS]
       kernel/run evidence compare BASE.csv PATCHED.csv
       kernel/run evidence tcg [--kernels BASE,PATCHED]
       kernel/run evidence check
EOF
}

# Build the workload program statically into $1.
evidence_build()
{
	[[ -f /usr/include/liburing.h ]] ||
		die "evidence: liburing.h missing (apt-get install liburing-dev)"
	gcc -O2 -Wall -Wextra -static -pthread -o "$1" "$EVIDENCE_SRC" -luring ||
		die "evidence: cannot build $EVIDENCE_SRC"
}

# The rows that say which series and which tree produced a file.
evidence_tag()
{
	local rev cpu
	rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
	[[ -z $(git -C "$REPO" status --porcelain 2>/dev/null) ]] || rev+="+dirty"
	cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null | tr , ' ')
	echo "meta,series,$(series_hash)"
	echo "meta,repo,$rev"
	echo "meta,date,$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	[[ -z ${1:-} ]] || echo "meta,cpu_model,$cpu"
}

# Run "$@" where tracefs is writable: as it is, or in a private mount
# namespace with tracefs mounted there (root).  Without either the
# program still runs and reports its mmap_lock counts as -1.
evidence_with_tracefs()
{
	if [[ -w /sys/kernel/tracing/instances ]]; then
		"$@"
	elif ((EUID == 0)) && command -v unshare >/dev/null; then
		unshare -m sh -c 'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"' sh "$@"
	else
		log "evidence: no writable tracefs and not root: mmap_lock counts will be -1"
		"$@"
	fi
}

# `perf lock contention` (the lock:contention_* tracepoints, recorded by
# `perf lock record`) of one repetition of each contended scenario, as
# "perf,SCENARIO,LINE" rows; one "meta,perf,..." row says whether it ran.
evidence_perf()
{
	local bin=$1 dir=$2 s
	shift 2
	if ! command -v perf >/dev/null; then
		echo "meta,perf,not installed (Debian: linux-perf)"
		return
	fi
	if ! perf lock record -o "$dir/probe.data" -- true >"$dir/probe.log" 2>&1; then
		echo "meta,perf,perf lock record fails: $(tail -n 1 "$dir/probe.log" | tr , ' ')"
		return
	fi
	echo "meta,perf,$(perf --version | tr , ' ')"
	for s in "${EVIDENCE_PERF_SCENARIOS[@]}"; do
		if ! evidence_with_tracefs perf lock record -o "$dir/$s.data" -- \
			"$bin" --only "$s" --reps 1 "$@" >"$dir/$s.out" 2>"$dir/$s.log"; then
			echo "perf,$s,perf lock record failed: $(tail -n 1 "$dir/$s.log" | tr , ' ')"
			continue
		fi
		perf lock contention -i "$dir/$s.data" -E 8 2>&1 |
			awk -v s="$s" 'NF { gsub(/,/, " "); print "perf," s "," $0 }'
	done
}

cmd_evidence_run()
{
	local out="" perf=1 quick=() args=() dir rc=0
	while (($#)); do
		case $1 in
		--quick) quick=(--quick) ;;
		--out) out=$2; shift ;;
		--out=*) out=${1#*=} ;;
		--no-perf) perf=0 ;;
		--) shift; args=("$@"); break ;;
		*) die "evidence run: unknown argument $1" ;;
		esac
		shift
	done
	[[ -n $out ]] || out="$PWD/evidence-$(uname -r)-$(date -u +%Y%m%dT%H%M%SZ).csv"
	dir=$(mktemp -d)
	evidence_build "$dir/evidence"
	log "evidence: running on $(uname -r) (series $(series_hash)); rows -> $out"
	{
		evidence_tag cpu
		evidence_with_tracefs "$dir/evidence" "${quick[@]}" "${args[@]}" || rc=$?
		if ((perf)); then
			evidence_perf "$dir/evidence" "$dir" "${quick[@]}" "${args[@]}"
		else
			echo "meta,perf,not run (--no-perf)"
		fi
	} >"$out"
	rm -rf "$dir"
	((rc == 0)) || die "evidence: the workload program failed (exit $rc); rows so far in $out"
	log "evidence: done; boot the other kernel, run it again, then: kernel/run evidence compare BASE.csv PATCHED.csv"
	echo "$out"
}

# The comparison proper: plain text, ready to paste.  Metric classes by
# name: *_ns timings, *_ops rates, *_pct shares of time (all three depend on
# the machine's speed: "not evidence" under TCG), anything else a count.
evidence_compare()
{
	local base=$1 patched=$2
	[[ -r $base && -r $patched ]] || die "evidence compare: cannot read $base or $patched"
	awk -F, -v base="$base" -v patched="$patched" '
	function cls(m) {
		if (m ~ /_ns$/) return "time"
		if (m ~ /_ops$/ || m ~ /_pct$/) return "rate"
		return "count"
	}
	function val(f, s, m) { return ((f, s, m) in V) ? V[f, s, m] : "" }
	function fmt(v) {
		if (v == "") return "-"
		if (v == -1) return "n/a"
		return sprintf("%.0f", v)
	}
	function ratio(b, a) {
		if (b == "" || a == "" || b < 0 || a < 0) return "-"
		if (b == 0) return a == 0 ? "1.00" : "new"
		return sprintf("%.2f", a / b)
	}
	function mark(c) {
		if (c == "count" || !tcg) return ""
		return "  [not evidence: TCG]"
	}
	FNR == 1 { f = (FILENAME == base) ? 1 : 2 }
	$1 == "meta" { M[f, $2] = substr($0, length($1 $2) + 3); next }
	$1 == "info" {
		if (!(($2) in INFO)) INFO[$2] = substr($0, length($1 $2) + 3)
		else if (INFO[$2] !~ /skipped/ && $3 ~ /^skipped/) INFO[$2] = INFO[$2] "; " $3
		next
	}
	$1 == "perf" { P[f, $2] = P[f, $2] "    " substr($0, length($1 $2) + 3) "\n"; next }
	NF == 3 && $3 ~ /^-?[0-9.]+$/ {
		if (!(($1) in SEEN)) { SEEN[$1] = 1; SC[++nsc] = $1 }
		if (!(($1, $2) in MS)) { MS[$1, $2] = 1; MN[$1, ++NM[$1]] = $2 }
		V[f, $1, $2] = $3
	}
	function header(  i, side) {
		tcg = (M[1, "platform"] == "qemu-tcg" || M[2, "platform"] == "qemu-tcg")
		print "Evidence: before = " base
		print "          after  = " patched
		for (i = 1; i <= 2; i++) {
			side = i == 1 ? "before" : "after "
			printf "  %s: kernel %s%s, %s, %s CPUs, swap %s kB, %s reps%s; repo %s (series %s), %s\n",
				side, M[i, "kernel"], (M[i, "variant"] == "" ? "" : " (" M[i, "variant"] ")"),
				M[i, "platform"], M[i, "cpus"],
				M[i, "swap_kb"], M[i, "reps"], M[i, "quick"] == 1 ? " (--quick)" : "",
				M[i, "repo"], M[i, "series"], M[i, "date"]
		}
		if (M[1, "series"] == M[2, "series"] && M[1, "kernel"] == M[2, "kernel"])
			print "  WARNING: both files name the same kernel and series: is one of them the base?"
		if (tcg) {
			print "  QEMU TCG: counts only.  Every timing (_ns), rate (_ops) and share"
			print "  (_pct) row is marked \"not evidence\": emulated time on a loaded host."
		} else if (M[1, "platform"] != "bare-metal" || M[2, "platform"] != "bare-metal") {
			print "  NOTE: not bare metal (" M[1, "platform"] ", " M[2, "platform"] "): timings from a VM."
		}
		print "  Values: medians over the repetitions of each repetition'"'"'s value (max: of the maxima)."
	}
	function latency_row(s, g,   b50, b99, bmx, a50, a99, amx) {
		b50 = val(1, s, g "_p50_ns"); b99 = val(1, s, g "_p99_ns"); bmx = val(1, s, g "_max_ns")
		a50 = val(2, s, g "_p50_ns"); a99 = val(2, s, g "_p99_ns"); amx = val(2, s, g "_max_ns")
		printf "  %-26s %11s %11s %11s | %11s %11s %11s | %5s %5s %5s%s\n", g " (ns)",
			fmt(b50), fmt(b99), fmt(bmx), fmt(a50), fmt(a99), fmt(amx),
			ratio(b50, a50), ratio(b99, a99), ratio(bmx, amx), mark("time")
	}
	function scalar_row(s, m,   b, a) {
		b = val(1, s, m); a = val(2, s, m)
		printf "  %-26s %35s | %35s | %17s%s\n", m, fmt(b), fmt(a), ratio(b, a), mark(cls(m))
	}
	function batch_table(s,   i, m, n, sz, b, a, bt, at, bl, al) {
		printf "  %-10s %14s %14s %12s %16s %16s %14s%s\n", "sz_batches", "before ns/pg",
			"after ns/pg", "after/before", "before total ns", "after total ns",
			"mmap_lock b/a", tcg ? "  [ns: not evidence: TCG]" : ""
		for (i = 1; i <= NM[s]; i++) {
			m = MN[s, i]
			if (m !~ /^b[0-9]+_per_page_ns$/) continue
			sz = substr(m, 2) + 0
			b = val(1, s, m); a = val(2, s, m)
			bt = val(1, s, "b" sz "_total_ns"); at = val(2, s, "b" sz "_total_ns")
			bl = val(1, s, "b" sz "_mmap_lock"); al = val(2, s, "b" sz "_mmap_lock")
			printf "  %-10s %14s %14s %12s %16s %16s %14s\n", sz, fmt(b), fmt(a),
				ratio(b, a), fmt(bt), fmt(at), fmt(bl) "/" fmt(al)
		}
		printf "  (%s pages of 4 KiB; size 0: one madvise() per page)\n", fmt(val(1, s, "pages"))
	}
	function scenario(s,   i, m, g, sk) {
		print ""
		print s ": " INFO[s]
		sk = (val(1, s, "skipped") != "" ? "before" : "")
		if (val(2, s, "skipped") != "") sk = sk (sk == "" ? "" : " and ") "after"
		if (sk != "") {
			print "  skipped on " sk " (the reason above)"
			return
		}
		if (val(1, s, "failed_reps") != "" || val(2, s, "failed_reps") != "")
			print "  FAILED repetitions: before " fmt(val(1, s, "failed_reps")) ", after " fmt(val(2, s, "failed_reps"))
		if (s == "batch") { batch_table(s); return }
		if (val(1, s, "calls") != "")
			printf "  %s calls per repetition%s\n", fmt(val(1, s, "calls")),
				(val(1, s, "writers") > 0 ? ", " val(1, s, "writers") " writer threads" : "")
		if (val(1, s, "calls") != val(2, s, "calls") || val(1, s, "writers") != val(2, s, "writers"))
			printf "  WARNING: after ran %s calls, %s writers: not the same workload\n",
				fmt(val(2, s, "calls")), fmt(val(2, s, "writers"))
		printf "  %-26s %11s %11s %11s | %11s %11s %11s | %17s\n", "", "before p50", "p99", "max",
			"after p50", "p99", "max", "after/before"
		for (i = 1; i <= NM[s]; i++) {
			m = MN[s, i]
			if (m ~ /_p50_ns$/) { g = m; sub(/_p50_ns$/, "", g); latency_row(s, g) }
		}
		for (i = 1; i <= NM[s]; i++) {
			m = MN[s, i]
			if (!shown(s, m)) continue
			scalar_row(s, m)
		}
	}
	# Rows the tables above already say, or that repeat another row.
	function shown(s, m) {
		if (m ~ /_p(50|99)_ns$/ || m ~ /_max_ns$/ || m ~ /trace_lost$/) return 0
		if (m == "reps" || m == "errors" || m == "calls" || m == "writers") return 0
		if (m == "advisor_ops" || m == "fault_ops" || m == "munmap_ops") return 0
		if ((m ~ /_mmap_lock_write$/ || m ~ /_ops$/) && val(1, s, m) + 0 == 0 && val(2, s, m) + 0 == 0)
			return 0
		return 1
	}
	function perf_section(  i, s) {
		print ""
		print "perf lock contention (one repetition per scenario; perf lock record of the program alone)"
		print "  before: " (M[1, "perf"] == "" ? "no row" : M[1, "perf"])
		print "  after:  " (M[2, "perf"] == "" ? "no row" : M[2, "perf"])
		for (i = 1; i <= nsc; i++) {
			s = SC[i]
			if (P[1, s] == "" && P[2, s] == "") continue
			print "  " s ", before:"; printf "%s", P[1, s]
			print "  " s ", after:"; printf "%s", P[2, s]
		}
	}
	function missing(  lost) {
		print ""
		lost = 0
		for (k in V) { split(k, kk, SUBSEP); if (kk[3] ~ /trace_lost$/ && V[k] > 0) lost = 1 }
		if (lost) print "WARNING: trace events were lost in some scenario (trace_lost > 0): counts are low."
		if (tcg)
			print "Still missing: every timing above (all rows marked \"not evidence\") and perf lock contention, which only real hardware gives: kernel/run evidence run on base, then on patched, then compare."
	}
	END {
		header()
		for (i = 1; i <= nsc; i++) scenario(SC[i])
		perf_section()
		missing()
	}' "$base" "$patched"
}

# Boot the base and patched kernels (cached; never built here), run the
# program --quick in each, keep one CSV per kernel and compare them.
cmd_evidence_tcg()
{
	local kernels=base,patched labels=() dir k out rc=0
	while (($#)); do
		case $1 in
		--kernels) kernels=$2; shift ;;
		--kernels=*) kernels=${1#*=} ;;
		*) die "evidence tcg: unknown argument $1" ;;
		esac
		shift
	done
	IFS=, read -r -a labels <<<"$kernels"
	((${#labels[@]} == 2)) || die "evidence tcg: --kernels takes BASE,PATCHED"
	dir="$CACHE/evidence/tcg-$(date -u +%Y%m%dT%H%M%SZ)"
	mkdir -p "$dir"
	# The tree the program is built from, not the one after the boots.
	evidence_tag >"$dir/tag"
	evidence_build "$dir/evidence"
	"$KDIR/run" exec --kernel "$kernels" --timeout 1800 "$dir/evidence" \
		--quick --platform qemu-tcg >"$dir/exec.log" 2>&1 || rc=$?
	for k in "${labels[@]}"; do
		out="$dir/$k.csv"
		{
			cat "$dir/tag"
			echo "meta,variant,$k"
			echo "meta,perf,not run (QEMU TCG guest: no perf)"
			awk -v k="$k" '/^===== evidence on / { on = ($4 == k); next }
				on && /^\[/ { on = 0 }
				on && /^(meta|info|[a-z_0-9]+),/' "$dir/exec.log"
		} >"$out"
		grep -q '^meta,kernel,' "$out" || { tail -n 20 "$dir/exec.log" >&2; die "evidence tcg: no rows from $k (log: $dir/exec.log)"; }
	done
	# The exec run's own verdict lines (a splat or a failed exit).
	grep -E '^\[[a-z-]+\] (RESULT|FAIL)' "$dir/exec.log" || true
	evidence_compare "$dir/${labels[0]}.csv" "$dir/${labels[1]}.csv" | tee "$dir/compare.txt"
	log "evidence tcg: rows, exec log and comparison in $dir"
	((rc == 0)) || die "evidence tcg: kernel/run exec failed (exit $rc; log: $dir/exec.log)"
}

# The comparison on fixture rows: a TCG pair and a real-hardware pair.
cmd_evidence_check()
{
	local d="$KDIR/tests/evidence" out bad=0 re
	out=$(evidence_compare "$d/tcg-base.csv" "$d/tcg-patched.csv")
	for re in '^cold: patch 1' 'advisor_mmap_lock +40 \| +0 \| +0\.00$' \
		'advisor \(ns\).*\[not evidence: TCG\]' 'QEMU TCG: counts only' \
		'^  1024 .* 0/0$' 'inline_iowq_punts +1024 \| +0 \| +0\.00$' \
		'^uring: patch 4' 'Still missing: every timing'; do
		grep -Eq -- "$re" <<<"$out" || { echo "evidence check: TCG pair: no line matching /$re/"; bad=1; }
	done
	grep -q 'not evidence' <<<"$(grep -E 'mmap_lock +[0-9]' <<<"$out")" &&
		{ echo "evidence check: a count is marked as not evidence"; bad=1; }
	out=$(evidence_compare "$d/hw-base.csv" "$d/hw-patched.csv")
	for re in 'advisor \(ns\) +1000 +2000 +3000 \| +500 +1000 +6000 \| +0\.50 +0\.50 +2\.00$' \
		'^perf lock contention' 'rwsem:W +do_mprotect_pkey' '^remote_cold: .*skipped' \
		'skipped on before and after'; do
		grep -Eq -- "$re" <<<"$out" || { echo "evidence check: hardware pair: no line matching /$re/"; bad=1; }
	done
	grep -q 'not evidence' <<<"$out" && { echo "evidence check: hardware rows marked as TCG"; bad=1; }
	if ((bad)); then
		echo "evidence check: FAILED"
		return 1
	fi
	echo "evidence check: ok (compare on the fixture rows of $d)"
}

cmd_evidence()
{
	local sub=${1:-}
	(($#)) && shift
	case $sub in
	run) cmd_evidence_run "$@" ;;
	compare) (($# == 2)) || die "evidence compare: BASE.csv PATCHED.csv"; evidence_compare "$@" ;;
	tcg) cmd_deps; cmd_evidence_tcg "$@" ;;
	check) cmd_evidence_check ;;
	-h | --help | help | "") evidence_usage ;;
	*) evidence_usage >&2; die "evidence: unknown subcommand $sub" ;;
	esac
}
