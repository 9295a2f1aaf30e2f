# SPDX-License-Identifier: MIT
# What the clients' check and bench scripts share (sourced by
# examples/bdwgc, examples/mimalloc and examples/jemalloc): messages, the
# exit-77 checks, the configuration choice and the bench tables' numbers.
#
# The caller sets CLIENT (the name in its messages) before it sources this.
#   log, die, skip          message; die exits 1, skip 77 (with the reason)
#   client_need_tools WHY TOOL...   skip unless every TOOL is on PATH
#   client_need_shared BUILDROOT    skip unless libmadvx.so was built
#   client_prepare_source WORK PATCH  WORK/fresh becomes WORK/pristine, its
#                                   copy with PATCH applied WORK/src
#   client_check_symbols STOCK PATCHED  the patched .so calls libmadvx's
#                                   batch, the stock one references none
#   client_selected LIST NAME       is NAME in the comma list LIST (empty: all)
#   client_strace OUT CMD...        run CMD under strace, the release calls to OUT
#   client_strace_counts OUT        "madvise process_madvise procmap_query"
#   client_median WORDS             median of the numbers in WORDS
#   client_ratio A B                A / B as "0.48x" (0.00x when B is 0)
#   client_bench CSV REPS           measure every case of CASES with every
#                                   build of BUILDS, REPS times interleaved
#   client_bench_table CSV          the table and median rows of that CSV,
#                                   then client_bench_reps CSV
#   client_bench_reps CSV           per-repetition ratios of that CSV

log() { printf '[%s %s] %s\n' "$CLIENT" "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$CLIENT" "$*" >&2; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

# WHY completes "TOOL not found (WHY)".
client_need_tools()
{
	local why=$1 tool
	shift
	for tool in "$@"; do
		command -v "$tool" >/dev/null || skip "$tool not found ($why)"
	done
}

# The clients link libmadvx's shared library (by rpath, from the build tree).
client_need_shared()
{
	[[ -f $1/src/libmadvx.so ]] ||
		skip "no shared libmadvx in $1/src (static-only build): $CLIENT links the .so"
}

client_prepare_source()
{
	local work=$1 patch=$2
	rm -rf "$work/pristine" "$work/src"
	mv "$work/fresh" "$work/pristine"
	cp -a "$work/pristine" "$work/src"
	(cd "$work/src" && patch -p1 --quiet <"$patch") ||
		die "${patch##*/} does not apply"
}

# A patched build that lost its define would pass every test without
# libmadvx: the patched library must call the batch, the stock one not.
client_check_symbols()
{
	local s p
	s=$(nm -D "$1")
	p=$(nm -D "$2")
	[[ $p == *" U madvx_batch_add_flags"* && $p == *" U madvx_batch_flush"* ]] ||
		die "the patched ${2##*/} does not call madvx_batch_add_flags/flush"
	[[ $s != *madvx_* ]] || die "the stock ${1##*/} references libmadvx"
}

# Runs a subset when the list (MADVX_<CLIENT>_CONFIGS) names some.
client_selected()
{
	[[ -z $1 || ,$1, == *",$2,"* ]]
}

# Every madvise, process_madvise and ioctl of CMD and its threads and
# children into OUT (a seccomp-bpf filter: the other calls run at full
# speed).  Returns CMD's status.
client_strace()
{
	local out=$1
	shift
	strace -f --seccomp-bpf -qq -e trace=madvise,process_madvise,ioctl -o "$out" "$@"
}

# The release path's calls in a client_strace output: everything the
# stock path makes and everything libmadvx adds.  PROCMAP_QUERY =
# _IOWR('f', 17, struct procmap_query): strace may not know its name, and
# counting every ioctl would count stdio's terminal ioctl too.
client_strace_counts()
{
	local m p q
	m=$(grep -c ' madvise(' "$1" || true)
	p=$(grep -c ' process_madvise(' "$1" || true)
	q=$(grep -cE ' ioctl\([0-9]+, (PROCMAP_QUERY|_IOC\(_IOC_READ\|_IOC_WRITE, 0x66, 0x11)' "$1" || true)
	echo "$m $p $q"
}

# The lower median for an even count (a value that was measured).
client_median()
{
	tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

client_ratio()
{
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", b ? a / b : 0 }'
}

# ---- the benchmark tables of bench.sh and bench/clients.sh ----
#
# The caller sets
#   CASES=("name|NAME=value ...")    what runs, with its environment
#   BUILDS=("name|NAME=value ...")   stock and routed builds; the first is
#                                    the reference of the "vs" columns
#   RELCOUNT                         path of madvx-relcount (bench/)
# and defines client_bench_cmd CASE BUILD, which sets the array CMD to the
# command of that cell (without the environment words), and may define
# client_bench_score OUTPUT-FILE, which prints the workload's own figure of
# merit (e.g. operations per second of a fixed-duration run) or "-".
#
# Each cell runs twice per repetition: once measured by madvx-relcount -t
# (root: the release calls, PROCMAP_QUERY look-ups and the mmap_lock
# acquisitions inside the release calls, from tracepoints; without root,
# or as root with MADVX_BENCH_STRACE=1, strace counts the calls and the
# lock columns are "-") and once untraced
# for wall time, CPU time, max RSS and the score (MADVX_BENCH_NO_TIME=1 leaves the
# untraced run out: those columns are "-"; for a loaded machine, where
# only the counts mean something).  Any failed run ends the benchmark.

CLIENT_BENCH_HEADER=case,build,rep,madvise,stack_madvise,process_madvise,procmap_query,total,rel_lock_read,rel_lock_write,alloc_lock_read,alloc_lock_write,rel_ms,wall_ms,maxrss_kb,score,user_ms,sys_ms

# client_kv FILE NAME: the value of NAME=value in madvx-relcount's line.
client_kv()
{
	grep -o "\b$2=[^ ]*" "$1" | head -n1 | cut -d= -f2
}

# Counted from tracepoints (root, unless MADVX_BENCH_STRACE=1) or strace?
client_bench_traced()
{
	((EUID == 0)) && [[ ${MADVX_BENCH_STRACE:-0} != 1 ]]
}

# "madvise,stack_madvise,process_madvise,procmap_query,total,rel_lock_read,
# rel_lock_write,alloc_lock_read,alloc_lock_write,rel_ms" of one run
# (alloc_lock_*: inside the allocator's release calls, all but glibc's
# thread-stack madvise(): routed, libmadvx's process_madvise() and its
# madvise() of a lone entry; rel_ms: the time
# the threads spent inside madvise() but glibc's stack ones, and
# process_madvise(), summed, from the trace's timestamps).  stack_madvise:
# the madvise() calls on MAP_STACK mappings, glibc's release of exited
# threads' stacks, which no allocator makes; the total (the release path's
# calls) leaves them out.  Traced runs only: strace counts say "-" there,
# and their total keeps them.
client_bench_count()
{
	local envs=$1 out m s=- p q rr=- rw=- pr=- pw=- ms=- st=0
	out=$(mktemp)
	if client_bench_traced; then
		# shellcheck disable=SC2086 # $envs is a list of NAME=value words
		"$RELCOUNT" -t -o "$out" env $envs "${CMD[@]}" >/dev/null 2>&1 || st=$?
		[[ $(client_kv "$out" lost) != 1 ]] ||
			log "trace buffer overflowed in ${CMD[*]}: its counts are low"
		m=$(client_kv "$out" madvise)
		s=$(client_kv "$out" stack_madvise)
		p=$(client_kv "$out" process_madvise)
		q=$(client_kv "$out" procmap_query)
		rr=$(client_kv "$out" rel_lock_read)
		rw=$(client_kv "$out" rel_lock_write)
		pr=$(client_kv "$out" alloc_lock_read)
		pw=$(client_kv "$out" alloc_lock_write)
		ms=$(client_kv "$out" rel_us)
		ms=$(awk -v us="${ms:-0}" 'BEGIN { printf "%.1f", us / 1000 }')
	else
		# shellcheck disable=SC2086 # as above
		client_strace "$out" env $envs "${CMD[@]}" >/dev/null 2>&1 || st=$?
		read -r m p q < <(client_strace_counts "$out")
	fi
	rm -f "$out"
	((st == 0)) || die "${CMD[*]} ($envs) failed under tracing: status $st"
	echo "$m,$s,$p,$q,$((m - ${s/-/0} + p + q)),$rr,$rw,$pr,$pw,$ms"
}

# "wall_ms,maxrss_kb,score,user_ms,sys_ms" of one untraced run (the CPU
# time of the workload's process tree: for a fixed amount of work, what
# it cost, less moved by other load than its wall time).
client_bench_time()
{
	local envs=$1 out res score=- st=0
	out=$(mktemp)
	res=$(mktemp)
	# shellcheck disable=SC2086 # as in client_bench_count
	"$RELCOUNT" -o "$res" env $envs "${CMD[@]}" >"$out" 2>&1 || st=$?
	((st == 0)) || { tail -n5 "$out" >&2; die "${CMD[*]} ($envs) failed: status $st"; }
	! declare -F client_bench_score >/dev/null || score=$(client_bench_score "$out")
	echo "$(client_kv "$res" wall_ms),$(client_kv "$res" maxrss_kb),$score,$(client_kv "$res" user_ms),$(client_kv "$res" sys_ms)"
	rm -f "$out" "$res"
}

client_bench()
{
	local csv=$1 reps=$2 c b r cname cenv bname benv counts times order
	[[ -x ${RELCOUNT:-} ]] || die "no madvx-relcount at '${RELCOUNT:-}' (build bench/ of libmadvx, or set MADVX_RELCOUNT)"
	client_bench_traced ||
		client_need_tools "the counts need it without root or with MADVX_BENCH_STRACE=1" strace
	echo "$CLIENT_BENCH_HEADER" >"$csv"
	for c in "${CASES[@]}"; do
		IFS='|' read -r cname cenv <<<"$c"
		[[ $cname != *,* ]] || die "case name '$cname' has a comma (a CSV field)"
		for ((r = 1; r <= reps; r++)); do
			# Every other repetition in reverse order: no build always
			# runs first (larson's score drifts within a pair).
			order=("${BUILDS[@]}")
			((r % 2)) || mapfile -t order < <(printf '%s\n' "${BUILDS[@]}" | tac)
			for b in "${order[@]}"; do
				IFS='|' read -r bname benv <<<"$b"
				client_bench_cmd "$cname" "$bname"
				counts=$(client_bench_count "$cenv $benv") || exit 1
				times=-,-,-,-,-
				[[ ${MADVX_BENCH_NO_TIME:-0} == 1 ]] ||
					times=$(client_bench_time "$cenv $benv") || exit 1
				echo "$cname,$bname,$r,$counts,$times" >>"$csv"
				log "$cname, $bname, run $r: $counts,$times"
			done
		done
	done
}

# An awk function for the table and the per-repetition figures: the CPU
# time of the current row, user + kernel, or "" where there is none (a CSV
# from before the two columns existed, or a run that recorded none).
# shellcheck disable=SC2016 # awk code: $col is awk's, not the shell's
CLIENT_AWK_CPU_MS='
	function cpu_ms() {
		if (!("user_ms" in col) || $col["user_ms"] == "-" || $col["user_ms"] == "")
			return ""
		return $col["user_ms"] + $col["sys_ms"]
	}
'

# Medians per case and build (the lower one of an even count: a measured
# value; "-" when nothing was measured), ratios to the case's first build.
client_bench_table()
{
	awk -F, "$CLIENT_AWK_CPU_MS"'
	function med(key,   n, i, j, t, v) {
		n = split(vals[key], v, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
				t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
			}
		return n ? v[int((n + 1) / 2)] : "-"
	}
	function ratio(a, b) {
		return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2fx", a / b)
	}
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{
		cell = $1 SUBSEP $2
		if (!(cell in seen)) { seen[cell] = 1; order[++ncell] = cell }
		if (!($1 in ref)) ref[$1] = $2
		for (k in col)
			if (col[k] > 3 && $col[k] != "-")
				vals[cell, k] = vals[cell, k] " " $col[k]
		if ((c = cpu_ms()) != "")
			vals[cell, "cpu_ms"] = vals[cell, "cpu_ms"] " " c
		if ($col["score"] != "-")
			scored = 1
	}
	END {
		printf "| case | build | madvise | of it thread stacks | process_madvise | PROCMAP_QUERY | total | vs ref | release mmap_lock r/w | of it in allocator calls r/w | ms in release calls | vs ref | wall ms | vs ref | CPU ms | vs ref | max RSS MiB | vs ref |%s\n", \
			scored ? " score | vs ref |" : ""
		printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s\n", scored ? "---|---|" : ""
		for (i = 1; i <= ncell; i++) {
			split(order[i], cb, SUBSEP)
			r = cb[1] SUBSEP ref[cb[1]]
			c = order[i]
			rss = med(c SUBSEP "maxrss_kb")
			rrss = med(r SUBSEP "maxrss_kb")
			line = sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s/%s | %s/%s | %s | %s | %s | %s | %s | %s | %s | %s |", cb[1], cb[2], \
				med(c SUBSEP "madvise"), med(c SUBSEP "stack_madvise"), \
				med(c SUBSEP "process_madvise"), med(c SUBSEP "procmap_query"), \
				med(c SUBSEP "total"), ratio(med(c SUBSEP "total"), med(r SUBSEP "total")), \
				med(c SUBSEP "rel_lock_read"), med(c SUBSEP "rel_lock_write"), \
				med(c SUBSEP "alloc_lock_read"), med(c SUBSEP "alloc_lock_write"), \
				med(c SUBSEP "rel_ms"), ratio(med(c SUBSEP "rel_ms"), med(r SUBSEP "rel_ms")), \
				med(c SUBSEP "wall_ms"), ratio(med(c SUBSEP "wall_ms"), med(r SUBSEP "wall_ms")), \
				med(c SUBSEP "cpu_ms"), ratio(med(c SUBSEP "cpu_ms"), med(r SUBSEP "cpu_ms")), \
				rss == "-" ? "-" : sprintf("%.1f", rss / 1024), ratio(rss, rrss))
			if (scored)
				line = line sprintf(" %s | %s |", med(c SUBSEP "score"), \
					ratio(med(c SUBSEP "score"), med(r SUBSEP "score")))
			print line
			rows[i] = sprintf("%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s", cb[1], cb[2], med(c SUBSEP "madvise"), \
				med(c SUBSEP "stack_madvise"), \
				med(c SUBSEP "process_madvise"), med(c SUBSEP "procmap_query"), med(c SUBSEP "total"), \
				med(c SUBSEP "rel_lock_read"), med(c SUBSEP "rel_lock_write"), \
				med(c SUBSEP "alloc_lock_read"), med(c SUBSEP "alloc_lock_write"), med(c SUBSEP "rel_ms"), \
				med(c SUBSEP "wall_ms"), rss, med(c SUBSEP "score"), med(c SUBSEP "cpu_ms"))
		}
		print ""
		print "CSV (medians): case,build,madvise,stack_madvise,process_madvise,procmap_query,total,rel_lock_read,rel_lock_write,alloc_lock_read,alloc_lock_write,rel_ms,wall_ms,maxrss_kb,score,cpu_ms"
		for (i = 1; i <= ncell; i++)
			print rows[i]
	}' "$1"
	client_bench_reps "$1"
}

# Per repetition: each build over the case's first build in the same
# repetition (the runs of one repetition are side by side, so drift in the
# machine's load cancels), for the release calls, wall time, CPU time and
# score: the geometric mean of the ratios, its 95% bootstrap interval
# (2,000 resamples of the repetitions, fixed seed: the same CSV gives the
# same figures) and in how many repetitions the build's value was higher.
# Repetitions where either value is missing or 0 are left out.
client_bench_reps()
{
	awk -F, "$CLIENT_AWK_CPU_MS"'
	function shellsort(a, n,   gap, i, j, t) {	# no recursion: the mawk stack is small
		for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
			for (i = gap + 1; i <= n; i++) {
				t = a[i]
				for (j = i; j > gap && a[j - gap] > t; j -= gap)
					a[j] = a[j - gap]
				a[j] = t
			}
	}
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{
		cell = $1 SUBSEP $2
		if (!(cell in seen)) { seen[cell] = 1; order[++ncell] = cell }
		if (!($1 in ref)) ref[$1] = $2
		reps[$3] = 1
		v[cell, $3, "total"] = $col["total"]
		v[cell, $3, "wall_ms"] = $col["wall_ms"]
		v[cell, $3, "score"] = $col["score"]
		if ((c = cpu_ms()) != "")
			v[cell, $3, "cpu_ms"] = c
	}
	END {
		nm = split("total wall_ms cpu_ms score", metric, " ")
		name["total"] = "release calls"; name["wall_ms"] = "wall time"
		name["cpu_ms"] = "CPU time"; name["score"] = "score"
		srand(1)
		nrow = 0
		for (i = 1; i <= ncell; i++) {
			split(order[i], cb, SUBSEP)
			if (cb[2] == ref[cb[1]]) continue
			rc = cb[1] SUBSEP ref[cb[1]]
			for (m = 1; m <= nm; m++) {
				n = 0; sum = 0; higher = 0
				for (r in reps) {
					a = v[order[i], r, metric[m]]; b = v[rc, r, metric[m]]
					if (a == "" || b == "" || a == "-" || b == "-" || a + 0 <= 0 || b + 0 <= 0)
						continue
					lr[++n] = log(a / b); sum += lr[n]
					if (a + 0 > b + 0) higher++
				}
				if (n == 0) continue
				for (k = 1; k <= 2000; k++) {
					t = 0
					for (j = 1; j <= n; j++) t += lr[int(rand() * n) + 1]
					bs[k] = t / n
				}
				shellsort(bs, 2000)
				row[++nrow] = sprintf("%s,%s,%s,%.3f,%.3f,%.3f,%d,%d", cb[1], cb[2], metric[m], \
					exp(sum / n), exp(bs[50]), exp(bs[1951]), higher, n)
				line[nrow] = sprintf("| %s | %s | %s | %.2fx | %.2f-%.2fx | %d of %d |", cb[1], cb[2], \
					name[metric[m]], exp(sum / n), exp(bs[50]), exp(bs[1951]), higher, n)
			}
		}
		if (nrow == 0) exit
		print ""
		print "Per repetition (over the first build in the same repetition):"
		print ""
		print "| case | build | measure | geometric mean | 95% interval | higher |"
		print "|---|---|---|---|---|---|"
		for (i = 1; i <= nrow; i++) print line[i]
		print ""
		print "CSV (per repetition): case,build,metric,geomean,lo95,hi95,higher,reps"
		for (i = 1; i <= nrow; i++) print row[i]
	}' "$1"
}
