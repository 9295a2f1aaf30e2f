#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The purge system calls and the wall time of a purge-heavy churn
# (je-purge.c, built by check.sh) on jemalloc, stock vs patched (libmadvx),
# from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh WORKDIR [REPS]
#
# je-purge runs with the build's libjemalloc.so.2 preloaded (it replaces
# glibc's malloc, as in any program run with jemalloc). Counted with strace
# (-f, seccomp-bpf filter): madvise, process_madvise and PROCMAP_QUERY
# ioctls, i.e. everything the purge path makes and everything libmadvx
# adds (both builds include glibc's madvise() of exited threads' stacks).
# Wall time from a second run without strace. Cases: jemalloc's default
# decay (dirty extents purged along a 10 s curve, at epoch advances: passes
# of several extents), decay 0 (every freed extent purged at once) and
# decay 1 s (dirty and muzzy: MADV_FREE, then MADV_DONTNEED). Repetitions are
# interleaved (every build once per repetition); medians of REPS (default
# 3). Prints a table and CSV rows, and writes WORKDIR/bench.csv (every run).
# MADVX_JEMALLOC_PURGE sets je-purge's arguments (default "2 10000 128 0":
# no calloc(), whose zeroing of a reused extent is a madvise(MADV_DONTNEED)
# too, outside any purge pass).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
ARGS=${MADVX_JEMALLOC_PURGE:-2 10000 128 0}
CLIENT=jemalloc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
client_need_tools "the counts need it" strace
[[ -x $WORK/je-purge && -f $WORK/stock/lib/libjemalloc.so.2 &&
   -f $WORK/patched/lib/libjemalloc.so.2 ]] ||
	die "no je-purge and builds in $WORK: run check.sh first"
[[ ! $WORK/je-purge -ot $(dirname "$0")/je-purge.c ]] ||
	die "$WORK/je-purge is older than je-purge.c: run check.sh again"

CASES=(
	"default decay|"
	"decay 0|MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0"
	"decay 1 s|MALLOC_CONF=dirty_decay_ms:1000,muzzy_decay_ms:1000"
)
BUILDS=(stock patched)

# One run under strace; prints "madvise process_madvise procmap ok".
count_one()
{
	local lib=$WORK/$1/lib/libjemalloc.so.2 envs=$2 out ok=1
	out=$(mktemp)
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words, $ARGS the arguments
	client_strace "$out" env $envs LD_PRELOAD="$lib" "$WORK/je-purge" $ARGS >/dev/null 2>&1 || ok=0
	echo "$(client_strace_counts "$out") $ok"
	rm -f "$out"
}

# One run without strace; prints the wall time in ms.
time_one()
{
	local lib=$WORK/$1/lib/libjemalloc.so.2 envs=$2 t0 t1
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # as in count_one
	env $envs LD_PRELOAD="$lib" "$WORK/je-purge" $ARGS >/dev/null 2>&1 ||
		die "je-purge ($1, $envs) failed"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

csv=$WORK/bench.csv
echo "case,build,rep,madvise,process_madvise,procmap_query,total,wall_ms,ok" >"$csv"
rows=()
printf '| case | build | madvise | process_madvise | PROCMAP_QUERY | total | vs stock | wall ms | vs stock |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for c in "${CASES[@]}"; do
	name=${c%%|*}
	envs=${c#*|}
	declare -A tot=() m=() p=() q=() w=()
	for ((r = 1; r <= REPS; r++)); do
		for v in "${BUILDS[@]}"; do
			read -r a b d ok < <(count_one "$v" "$envs")
			[[ $ok = 1 ]] || die "je-purge ($v, $name) failed under strace"
			ms=$(time_one "$v" "$envs")
			echo "$name,$v,$r,$a,$b,$d,$((a + b + d)),$ms,$ok" >>"$csv"
			tot[$v]+="$((a + b + d)) "
			m[$v]+="$a "
			p[$v]+="$b "
			q[$v]+="$d "
			w[$v]+="$ms "
		done
	done
	st=$(client_median "${tot[stock]}")
	sw=$(client_median "${w[stock]}")
	for v in "${BUILDS[@]}"; do
		t=$(client_median "${tot[$v]}")
		wm=$(client_median "${w[$v]}")
		a=$(client_median "${m[$v]}")
		b=$(client_median "${p[$v]}")
		d=$(client_median "${q[$v]}")
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$v" \
			"$a" "$b" "$d" "$t" "$(client_ratio "$t" "$st")" "$wm" "$(client_ratio "$wm" "$sw")"
		rows+=("$name,$v,$a,$b,$d,$t,$wm")
	done
	unset tot m p q w
done
echo
echo "case,build,madvise,process_madvise,procmap_query,total,wall_ms (medians)"
printf '%s\n' "${rows[@]}"
echo "je-purge $ARGS; load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $csv"
