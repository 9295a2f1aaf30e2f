# SPDX-License-Identifier: MIT
# What the clients' check and bench scripts share (sourced by
# examples/bdwgc, examples/mimalloc and examples/jemalloc): messages, the
# exit-77 checks, the configuration choice and the bench tables' numbers.
#
# The caller sets CLIENT (the name in its messages) before it sources this.
#   log, die, skip          message; die exits 1, skip 77 (with the reason)
#   client_need_tools WHY TOOL...   skip unless every TOOL is on PATH
#   client_need_shared BUILDROOT    skip unless libmadvx.so was built
#   client_selected LIST NAME       is NAME in the comma list LIST (empty: all)
#   client_strace OUT CMD...        run CMD under strace, the release calls to OUT
#   client_strace_counts OUT        "madvise process_madvise procmap_query"
#   client_median WORDS             median of the numbers in WORDS
#   client_ratio A B                A / B as "0.48x" (0.00x when B is 0)

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
