#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# madvx-bench's command line (man/man1/madvx-bench.1): numeric options are
# validated, --csv prints the CSV header first and nothing but CSV on stdout,
# --version works. (--check's exit 3 depends on the machine: not asserted.)
set -uo pipefail
bench=$1
fail=0
for bad in 0 -1 5x "" abc 99999999999999999999 1000001; do
	"$bench" --reps "$bad" --list >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || { echo "FAIL: --reps '$bad' exits $rc, want 2"; fail=1; }
done
"$bench" extra >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: an extra argument exits $rc, want 2"; fail=1; }
[[ $("$bench" --version) =~ ^madvx-bench\ \(libmadvx\)\ [0-9.]+$ ]] || { echo "FAIL: --version"; fail=1; }
out=$("$bench" --quick --csv --reps 1 --scenario p1 2>/dev/null) || { echo "FAIL: --quick --csv p1 failed"; fail=1; }
[ "$(head -n 1 <<<"$out")" = "scenario,variant,metric,value,unit" ] ||
	{ echo "FAIL: --csv does not start with the header: $(head -n 1 <<<"$out")"; fail=1; }
bad_rows=$(tail -n +2 <<<"$out" | grep -cvE '^[^,]+,[^,]+,[^,]+,[^,]*,[^,]+$')
[ "$bad_rows" -eq 0 ] || { echo "FAIL: $bad_rows stdout lines of --csv are not 5-field rows"; fail=1; }
[ "$(tail -n +2 <<<"$out" | wc -l)" -gt 0 ] || { echo "FAIL: --csv printed no rows"; fail=1; }
[ $fail -eq 0 ] && echo "madvx-bench CLI: --reps validated, CSV header first and CSV only, --version"
exit $fail
