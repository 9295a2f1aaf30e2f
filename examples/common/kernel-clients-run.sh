#!/bin/sh
# SPDX-License-Identifier: MIT
# The clients' own tests in the test kernel (busybox sh): the head of the
# script examples/common/kernel-clients.sh writes, followed by a line
# __PAYLOAD__ and a base64 xz tar of clients/:
#   clients/order                 the clients, one a line
#   clients/libmadvx              the libmadvx commit the programs link
#   clients/<c>/about             where the source came from
#   clients/<c>/tests             "name program args..." per test
#   clients/<c>/configs           "name|builds|NAME=value ..." per configuration
#   clients/<c>/{stock,patched}/  the static programs
#
#   kernel/run exec --kernel base --timeout 3000 OUT [FILTER...]
#
# FILTER: CLIENT or CLIENT:CONFIG (default: everything).  For each client
# and configuration the builds (stock, patched) run side by side (the
# guest has 2 vCPUs; the host's make check and ctest run 2 tests at a
# time too), each build its tests one after the other in a fresh
# directory, each test under `timeout` (MADVX_CLIENT_TIMEOUT, default
# 1800 s).  Prints
#   RESULT <client> <config> <build> <test> PASS|FAIL <rc> <seconds>
# for every test, the last 20 lines of a failed test's output, a summary
# line per client, configuration and build, and at the end
#   CLIENTS pass=N fail=N expected=N
# Exits 1 on any failure or when a result is missing (N pass != expected).
set -u

TMO=${MADVX_CLIENT_TIMEOUT:-1800}
D=/tmp/madvx-clients
rm -rf "$D"
mkdir -p "$D"
if ! sed '1,/^__PAYLOAD__$/d' "$0" | base64 -d | xz -d | tar -x -C "$D"; then
	echo "CLIENTS cannot unpack the payload of $0"
	exit 1
fi
C=$D/clients
echo "CLIENTS libmadvx $(cat "$C/libmadvx"), kernel $(uname -r), $(nproc) CPUs"

selected()	# client config
{
	[ $# -ge 2 ] || return 1
	[ -z "$FILTERS" ] && return 0
	for f in $FILTERS; do
		[ "$f" = "$1" ] || [ "$f" = "$1:$2" ] && return 0
	done
	return 1
}

# run_build client config build envs: every test of the client, one a
# line of results into $D/res/<client>-<config>-<build>.
run_build()
{
	rb_c=$1 rb_cfg=$2 rb_b=$3 rb_env=$4
	rb_res=$D/res/$rb_c-$rb_cfg-$rb_b
	rb_work=$D/work/$rb_c-$rb_cfg-$rb_b
	: >"$rb_res"
	while read -r rb_name rb_prog rb_args; do
		rm -rf "$rb_work"
		mkdir -p "$rb_work"
		rb_out=$D/out/$rb_c-$rb_cfg-$rb_b-$rb_name.out
		rb_t0=$(date +%s)
		if [ ! -x "$C/$rb_c/$rb_b/$rb_prog" ]; then
			echo "missing $C/$rb_c/$rb_b/$rb_prog" >"$rb_out"
			rb_rc=127
		else
			# shellcheck disable=SC2086 # $rb_env and $rb_args are word lists
			(cd "$rb_work" && exec env $rb_env timeout "$TMO" \
				"$C/$rb_c/$rb_b/$rb_prog" $rb_args) >"$rb_out" 2>&1 </dev/null
			rb_rc=$?
		fi
		rb_st=PASS
		[ "$rb_rc" -eq 0 ] || rb_st=FAIL
		echo "RESULT $rb_c $rb_cfg $rb_b $rb_name $rb_st $rb_rc $(($(date +%s) - rb_t0))" >>"$rb_res"
	done <"$C/$rb_c/tests"
	rm -rf "$rb_work"
}

FILTERS="$*"
mkdir -p "$D/res" "$D/out" "$D/work"
pass=0 fail=0 expected=0
order=$(tr '\n' ' ' <"$C/order")
for c in $order; do
	echo "CLIENT $c: $(cat "$C/$c/about")"
	ntests=$(grep -c . "$C/$c/tests")
	while IFS='|' read -r cfg builds envs; do
		selected "$c" "$cfg" || continue
		echo "CONFIG $c $cfg: ${envs:-(no environment)}"
		for b in $builds; do
			expected=$((expected + ntests))
			run_build "$c" "$cfg" "$b" "$envs" &
		done
		wait
		for b in $builds; do
			res=$D/res/$c-$cfg-$b
			cat "$res"
			grep '^RESULT .* FAIL ' "$res" | while read -r _ _ _ _ name _; do
				echo "--- last lines of $c $cfg $b $name:"
				tail -n 20 "$D/out/$c-$cfg-$b-$name.out"
			done
			p=$(grep -c '^RESULT .* PASS ' "$res")
			f=$(grep -c '^RESULT .* FAIL ' "$res")
			pass=$((pass + p))
			fail=$((fail + f))
			echo "SUMMARY $c $cfg $b PASS $p FAIL $f of $ntests"
		done
	done <"$C/$c/configs"
done
echo "CLIENTS pass=$pass fail=$fail expected=$expected"
rm -rf "$D"
[ "$expected" -gt 0 ] && [ "$fail" -eq 0 ] && [ "$pass" -eq "$expected" ] && exit 0
exit 1
