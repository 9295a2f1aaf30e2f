#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The decommit system calls and the wall time of mimalloc's test-stress,
# stock vs patched (libmadvx), from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh WORKDIR [REPS]
#
# Counted with strace (-f, seccomp-bpf filter): madvise, process_madvise and
# PROCMAP_QUERY ioctls (strace -c's ioctl column would also count stdio's
# terminal ioctl), i.e. everything the decommit path makes and everything
# libmadvx adds. Wall time from a second run without strace. Cases: the
# default delays (25 ms for spans, 500 ms for cached segments: the delayed
# passes the patch batches) and both delays 0 (every decommit immediate,
# one range per call). test-stress runs with check.sh's arguments
# (MADVX_MIMALLOC_STRESS, default "4 25 5"). Repetitions are interleaved
# (every build once per repetition); medians of REPS (default 3). Prints a
# table and CSV rows, and writes WORKDIR/bench.csv (every run).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
STRESS=${MADVX_MIMALLOC_STRESS:-4 25 5}
CLIENT=mimalloc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
client_need_tools "the counts need it" strace

CASES=(
	"default delays|"
	"delays 0|MIMALLOC_DECOMMIT_DELAY=0 MIMALLOC_SEGMENT_DECOMMIT_DELAY=0"
)
BUILDS=(stock patched)

# One run under strace; prints "madvise process_madvise procmap ok".
count_one()
{
	local tree=$1 envs=$2 out ok=1
	out=$(mktemp)
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words, $STRESS the arguments
	client_strace "$out" env $envs "$tree/mimalloc-test-stress" $STRESS >/dev/null 2>&1 || ok=0
	echo "$(client_strace_counts "$out") $ok"
	rm -f "$out"
}

# One run without strace; prints the wall time in ms.
time_one()
{
	local tree=$1 envs=$2 t0 t1
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # as in count_one
	env $envs "$tree/mimalloc-test-stress" $STRESS >/dev/null 2>&1 ||
		{ echo "test-stress ($tree, $envs) failed" >&2; exit 1; }
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
			read -r a b d ok < <(count_one "$WORK/$v" "$envs")
			[[ $ok = 1 ]] || { echo "test-stress ($v, $name) failed under strace" >&2; exit 1; }
			ms=$(time_one "$WORK/$v" "$envs")
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
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$v" \
			"$(client_median "${m[$v]}")" "$(client_median "${p[$v]}")" "$(client_median "${q[$v]}")" "$t" \
			"$(client_ratio "$t" "$st")" "$wm" "$(client_ratio "$wm" "$sw")"
		rows+=("$name,$v,$(client_median "${m[$v]}"),$(client_median "${p[$v]}"),$(client_median "${q[$v]}"),$t,$wm")
	done
	unset tot m p q w
done
echo
echo "case,build,madvise,process_madvise,procmap_query,total,wall_ms (medians)"
printf '%s\n' "${rows[@]}"
echo "test-stress $STRESS; load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; every run: $csv"
