#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# madvx-relcount measures what it claims: relcount-target makes N madvise()
# calls in one VMA from a thread and N across a VMA boundary from a forked
# child, touches 4 MiB and exits 3. Checked: the exit status passed on,
# maxrss_kb >= 4 MiB, and as root (tracefs) madvise == 2N (2N + 1: glibc
# advises an exited thread's stack away),
# process_madvise == 0, procmap_query == 0, and at least N read
# acquisitions of mmap_lock inside the release calls (the crossing ones;
# kernels before 6.17 take it for the others too: at most 2N).
#   relcount-check.sh RELCOUNT TARGET
set -uo pipefail
relcount=$1
target=$2
n=200
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

kv() { grep -o "\b$1=[^ ]*" "$out" | cut -d= -f2; }

"$relcount" -o "$out" -- "$target" $n
rc=$?
[ $rc -eq 3 ] || { echo "FAIL: exit status $rc passed on, want 3"; fail=1; }
[ "$(kv status)" = 3 ] || { echo "FAIL: status=$(kv status), want 3"; fail=1; }
[ "$(kv maxrss_kb)" -ge 4096 ] || { echo "FAIL: maxrss_kb=$(kv maxrss_kb) below the 4 MiB touched"; fail=1; }
"$relcount" -o "$out" -- /nonexistent/program >/dev/null 2>&1
[ "$(kv status)" = 127 ] || { echo "FAIL: a program that cannot run: status=$(kv status), want 127"; fail=1; }

if [ "$(id -u)" -ne 0 ]; then
	[ $fail -eq 0 ] && echo "SKIP: the traced counts need root (status and maxrss checked)" && exit 77
	exit $fail
fi
"$relcount" -t -o "$out" -- "$target" $n
rc=$?
if [ $rc -eq 125 ] && grep -q "sys_enter_madvise\|tracefs\|tracepoints" <<<"$("$relcount" -t -- true 2>&1)"; then
	echo "SKIP: no syscall or mmap_lock tracepoints here: $("$relcount" -t -- true 2>&1)"
	exit 77
fi
cat "$out"
[ $rc -eq 3 ] || { echo "FAIL: -t: exit status $rc, want 3"; fail=1; }
m=$(kv madvise)
[ "${m:-0}" -eq $((2 * n)) ] || [ "${m:-0}" -eq $((2 * n + 1)) ] ||
	{ echo "FAIL: madvise=$m, want $((2 * n)) (+1: the thread's stack)"; fail=1; }
[ "$(kv process_madvise)" = 0 ] || { echo "FAIL: process_madvise=$(kv process_madvise), want 0"; fail=1; }
[ "$(kv procmap_query)" = 0 ] || { echo "FAIL: procmap_query=$(kv procmap_query), want 0"; fail=1; }
r=$(kv rel_lock_read)
if [ "${r:-0}" -lt $n ] || [ "${r:-0}" -gt $((2 * n + 1)) ]; then
	echo "FAIL: rel_lock_read=$r, want $n..$((2 * n + 1)) (one per crossing call)"
	fail=1
fi
[ "$(kv lost)" = 0 ] || { echo "FAIL: the trace lost events"; fail=1; }
[ $fail -eq 0 ] && echo "madvx-relcount: status, maxrss, calls and release-call locks as made"
exit $fail
