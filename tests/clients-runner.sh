#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The verdicts of the clients' runner (examples/common/kernel-clients-run.sh,
# what the test kernel runs for `kernel/run clients`): on a payload of tiny
# programs whose results are known, a patched failure is NEW unless stock
# fails the same test (of the configuration, or of the one a patched-only
# configuration names; STOCKFAIL when it does, STOCKONLY for a test only
# stock fails), a missing result fails the run, and the exit status
# is 1 exactly when something is new or missing.  Runs on the host's sh.
set -uo pipefail
runner=$1
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
export MADVX_CLIENTS_DIR=$t/run

prog()	# prog BUILD NAME STATUS
{
	printf '#!/bin/sh\nexit %s\n' "$3" >"$t/clients/c/$1/$2"
	chmod +x "$t/clients/c/$1/$2"
}

# pack CONFIGS...: the runner followed by a payload of client c with the
# tests below and the given configuration lines.
pack()
{
	printf '%s\n' "$@" >"$t/clients/c/configs"
	{
		cat "$runner"
		echo __PAYLOAD__
		tar -C "$t" -c clients | xz -1 | base64
	} >"$t/run.sh"
}

# expect STATUS WHAT PATTERN...: run the packed script; its exit status and
# every PATTERN (a whole line of its output, grep -x) must be as given.
expect()
{
	local want=$1 what=$2 rc p
	shift 2
	sh "$t/run.sh" >"$t/out" 2>&1
	rc=$?
	if [[ $rc -ne $want ]]; then
		echo "FAIL: $what: exit $rc, want $want"
		fail=1
	fi
	for p in "$@"; do
		grep -qx -- "$p" "$t/out" && continue
		echo "FAIL: $what: no line '$p'"
		fail=1
	done
	[[ $fail -eq 0 ]] || { sed 's/^/  /' "$t/out"; exit 1; }
}

command -v xz >/dev/null || { echo "SKIP: no xz"; exit 77; }
mkdir -p "$t/clients/c/stock" "$t/clients/c/patched"
echo c >"$t/clients/order"
echo fixture >"$t/clients/libmadvx"
echo "the runner's fixture" >"$t/clients/c/about"
echo 77 >"$t/clients/c/skipcode"
printf '%s\n' "ok okp" "skip skipp" "both bothp" "bad badp" "sonly sonlyp" >"$t/clients/c/tests"
for b in stock patched; do
	prog "$b" okp 0
	prog "$b" skipp 77
	prog "$b" bothp 1
done
prog stock badp 0
prog patched badp 3
prog stock sonlyp 1
prog patched sonlyp 0

pack "all|stock patched||*" "po|patched||*|all"
expect 1 "a patched-only failure" \
	"NEW c all bad" "STOCKFAIL c all both" "NEW c po bad" "STOCKFAIL c po both" \
	"STOCKONLY c all sonly" "STOCKONLY c po sonly" \
	"CLIENTS pass=6 skip=3 fail=6 expected=15 new=2 stockfail=2"
grep -q "^NEW c all both" "$t/out" && { echo "FAIL: a test failing in stock too is counted new"; fail=1; }

prog patched badp 0
pack "all|stock patched||*" "po|patched||*|all"
expect 0 "failures that stock shares" \
	"STOCKFAIL c all both" "STOCKFAIL c po both" \
	"CLIENTS pass=8 skip=3 fail=4 expected=15 new=0 stockfail=2"

# A patched-only configuration without a stock run to compare with: every
# failure is new.
pack "po|patched||*|all" "alone|patched||ok|"
expect 1 "no stock run to compare with" "NEW c po both" \
	"CLIENTS pass=4 skip=1 fail=1 expected=6 new=1 stockfail=0"

# A program that is missing is a failure (rc 127), new unless stock's is too.
rm "$t/clients/c/patched/okp"
pack "all|stock patched||ok"
expect 1 "a missing program" "NEW c all ok"

# A payload that cannot be unpacked fails.
printf '#!/bin/sh\n' >"$t/run.sh"
sed -n '1,/^__PAYLOAD__$/p' "$runner" >>"$t/run.sh"
echo "not base64 !" >>"$t/run.sh"
expect 1 "a broken payload"
exit $fail
