#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# madvx-probe's command-line conventions (madvx-probe(1)): --version/-V,
# usage errors, write errors, and JSON that parses, carries its schema
# version and stays valid when --verify cannot measure (as non-root).
set -uo pipefail
probe=$1
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

expect() {	# expect STATUS DESCRIPTION CMD...
	local want=$1 what=$2 rc
	shift 2
	"$@" >"$t/out" 2>"$t/err"
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL: $what: exit $rc, want $want"; sed -n 's/^/  /; 1,5p' "$t/err"
		fail=1
	fi
}
json_ok() {	# json_ok FILE DESCRIPTION: parses, schema_version 1
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema_version"] == 1, d.get("schema_version"); assert d["advice"]["MADV_DONTNEED"]["value"] == 4' "$1" ||
		{ echo "FAIL: $2: not the JSON of schema 1"; fail=1; }
}

ver=$("$probe" --version) || { echo "FAIL: --version"; fail=1; }
[[ $ver =~ ^madvx-probe\ \(libmadvx\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: --version printed '$ver'"; fail=1; }
[ "$("$probe" -V)" = "$ver" ] || { echo "FAIL: -V differs from --version"; fail=1; }
expect 0 "--help" "$probe" --help
expect 2 "an extra argument" "$probe" extra
expect 2 "an extra argument after --json" "$probe" --json extra
expect 2 "an unknown option" "$probe" --no-such-option
if [ -w /dev/full ]; then
	# shellcheck disable=SC2016 # $0 is expanded by the inner sh
	expect 1 "stdout on /dev/full" sh -c '"$0" > /dev/full' "$probe"
	grep -q "write error" "$t/err" || { echo "FAIL: /dev/full: no 'write error' message"; fail=1; }
	# shellcheck disable=SC2016 # $0 is expanded by the inner sh, not here
	expect 1 "--json on /dev/full" sh -c '"$0" --json > /dev/full' "$probe"
else
	echo "note: no writable /dev/full here: write-error check not run"
fi
expect 0 "--json" "$probe" --json
json_ok "$t/out" "--json"
MADVX_DISABLE=process_madvise,no_such_feature "$probe" --json >"$t/dis" 2>"$t/err"
json_ok "$t/dis" "--json with MADVX_DISABLE"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "process_madvise" in d["disabled"] and not d["features"]["process_madvise"]' "$t/dis" ||
	{ echo "FAIL: MADVX_DISABLE=process_madvise not in the JSON"; fail=1; }
grep -q "unknown feature 'no_such_feature'" "$t/err" || { echo "FAIL: unknown MADVX_DISABLE name not reported"; fail=1; }

# --verify --json as non-root: the whole object with verify_error, exit 77.
nonroot=()
if [ "$(id -u)" -ne 0 ]; then
	nonroot=(env)
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$probe"; then
	nonroot=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
if [ ${#nonroot[@]} -gt 0 ]; then
	"${nonroot[@]}" "$probe" --verify --json >"$t/v" 2>"$t/err"
	rc=$?
	[ $rc -eq 77 ] || { echo "FAIL: non-root --verify --json: exit $rc, want 77"; fail=1; }
	json_ok "$t/v" "non-root --verify --json"
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verify_error"]' "$t/v" ||
		{ echo "FAIL: non-root --verify --json: no verify_error"; fail=1; }
	nr="checked"
else
	nr="not checked (root, and no setpriv or $probe not reachable as nobody)"
fi
[ $fail -eq 0 ] && echo "madvx-probe CLI: --version, usage errors, write errors, JSON schema 1; non-root --verify --json $nr"
exit $fail
