#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The release-path system calls of bdwgc's gctest, stock vs patched
# (libmadvx), from the two builds check.sh leaves in WORKDIR:
#
#   bench.sh WORKDIR [REPS]
#
# Counted with strace (-f, seccomp-bpf filter): madvise, process_madvise and
# PROCMAP_QUERY ioctls, i.e. everything the release path makes and
# everything libmadvx adds. Both builds include glibc's madvise() of freed
# thread stacks. Cases: default unmap threshold and GC_UNMAP_THRESHOLD=1,
# each incremental (gctest's default) and with GC_DISABLE_INCREMENTAL=1.
# Builds: stock; patched (vouches for a block in one heap section unless
# mprotect-based dirty bits split sections: incremental mode on a kernel
# without soft-dirty); patched with GC_MADVX_VOUCH=1 (vouches there too;
# wrong vouches then cost mmap_read_lock walks, not results).
# Repetitions are interleaved (every build once per repetition); medians of
# REPS (default 3). Prints a table and writes WORKDIR/bench.csv (every run).
set -euo pipefail

WORK=$(cd "$1" && pwd)
REPS=${2:-3}
CLIENT=bdwgc
# shellcheck source=examples/common/client.sh
source "$(dirname "$0")/../common/client.sh"
client_need_tools "the counts need it" strace

CASES=(
	"default|"
	"threshold 1|GC_UNMAP_THRESHOLD=1"
	"default, no incremental|GC_DISABLE_INCREMENTAL=1"
	"threshold 1, no incremental|GC_UNMAP_THRESHOLD=1 GC_DISABLE_INCREMENTAL=1"
)

# One gctest run under strace; prints "madvise process_madvise procmap ok".
run_one()
{
	local tree=$1 envs=$2 out ok=1
	out=$(mktemp)
	# The binary itself, not libtool's wrapper script (whose shell would
	# add ioctls of its own; env makes none).
	# shellcheck disable=SC2086 # $envs is a list of NAME=value words
	client_strace "$out" env $envs LD_LIBRARY_PATH="$tree/.libs" \
		"$tree/.libs/gctest" >/dev/null 2>&1 || ok=0
	echo "$(client_strace_counts "$out") $ok"
	rm -f "$out"
}

# name|tree|environment
BUILDS=(
	"stock|stock|"
	"patched|patched|"
	"patched, GC_MADVX_VOUCH=1|patched|GC_MADVX_VOUCH=1"
)

csv=$WORK/bench.csv
echo "case,build,rep,madvise,process_madvise,procmap_query,total,ok" >"$csv"
printf '| case | build | madvise | process_madvise | PROCMAP_QUERY | total | vs stock |\n'
printf '|---|---|---|---|---|---|---|\n'
for c in "${CASES[@]}"; do
	name=${c%%|*}
	envs=${c#*|}
	declare -A tot=() m=() p=() q=()
	for ((r = 1; r <= REPS; r++)); do
		for bd in "${BUILDS[@]}"; do
			IFS='|' read -r v tree benv <<<"$bd"
			read -r a b d ok < <(run_one "$WORK/$tree" "$envs $benv")
			[[ $ok = 1 ]] || { echo "gctest ($v, $name) failed" >&2; exit 1; }
			echo "$name,$v,$r,$a,$b,$d,$((a + b + d)),$ok" >>"$csv"
			tot[$v]+="$((a + b + d)) "
			m[$v]+="$a "
			p[$v]+="$b "
			q[$v]+="$d "
		done
	done
	st=$(client_median "${tot[stock]}")
	for bd in "${BUILDS[@]}"; do
		v=${bd%%|*}
		t=$(client_median "${tot[$v]}")
		printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$v" "$(client_median "${m[$v]}")" \
			"$(client_median "${p[$v]}")" "$(client_median "${q[$v]}")" "$t" \
			"$(client_ratio "$t" "$st")"
	done
	unset tot m p q
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $REPS runs per cell, medians; CSV: $csv"
