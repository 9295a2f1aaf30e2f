#!/bin/sh
# SPDX-License-Identifier: MIT
# The clients' own tests in the test kernel (busybox sh): the head of the
# script examples/common/kernel-clients.sh writes, followed by a line
# __PAYLOAD__ and a base64 xz tar of clients/:
#   clients/order                 the clients, one a line
#   clients/libmadvx              the libmadvx commit the programs link
#   clients/<c>/about             where the source came from
#   clients/<c>/tests             "name [NAME=value ...] program args..." per
#                                 test (the test's own environment)
#   clients/<c>/configs           "name|builds|NAME=value ...[|pattern[|ref]]"
#                                 per configuration (pattern: the tests it
#                                 runs, a shell pattern of their names,
#                                 default *; ref: the configuration whose
#                                 stock run a patched-only one is compared
#                                 with, run before it)
#   clients/<c>/skipcode          optional: the exit status meaning "skipped"
#   clients/<c>/{stock,patched}/  the static programs
#
#   kernel/run exec --kernel base --timeout 3000 OUT [FILTER...]
#
# FILTER: CLIENT or CLIENT:CONFIG (default: everything).  For each client
# and configuration the builds (stock, patched) run side by side (the
# guest has 2 vCPUs; the host's make check and ctest run 2 tests at a
# time too), each build its tests one after the other in a fresh
# directory, each test under `timeout` (MADVX_CLIENT_TIMEOUT, default
# 1800 s).  A test's own environment comes after the configuration's, but
# their MALLOC_CONF values are joined, the test's first (as jemalloc's
# test/test.sh does).  Prints
#   RESULT <client> <config> <build> <test> PASS|SKIP|FAIL <rc> <seconds>
# for every test, the last 20 lines of a failed test's output, a summary
# line per client, configuration and build, then per configuration the
# comparison the host's check scripts make: a patched failure is NEW when
# the same test passed or skipped in the stock build (of the
# configuration, or of its ref), or when there is no stock run to compare
# with; a test that fails in stock too is the client's own (a test that
# does not hold on this machine or kernel), printed, not the patch's.
#   NEW <client> <config> <test>          a failure the patch brings
#   STOCKFAIL <client> <config> <test>    failing in stock too
#   STOCKONLY <client> <config> <test>    failing in stock only (noted)
# At the end
#   CLIENTS pass=N skip=N fail=N expected=N new=N stockfail=N
# Exits 1 on a NEW failure or when a result is missing (pass + skip +
# fail != expected), 0 otherwise: "0 new failures with the patch".
set -u

TMO=${MADVX_CLIENT_TIMEOUT:-1800}
D=${MADVX_CLIENTS_DIR:-/tmp/madvx-clients}	# the tests of the runner give their own
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

# The configuration's environment $1 followed by a test's $2, MALLOC_CONF
# joined (the test's settings first).
join_env()
{
	je_out='' je_conf='' je_tconf=''
	for je_w in $1; do
		case $je_w in
		MALLOC_CONF=*) je_conf=${je_w#MALLOC_CONF=} ;;
		*) je_out="$je_out $je_w" ;;
		esac
	done
	for je_w in $2; do
		case $je_w in
		MALLOC_CONF=*) je_tconf=${je_w#MALLOC_CONF=} ;;
		*) je_out="$je_out $je_w" ;;
		esac
	done
	if [ -n "$je_tconf" ] && [ -n "$je_conf" ]; then
		je_conf="$je_tconf,$je_conf"
	elif [ -n "$je_tconf" ]; then
		je_conf=$je_tconf
	fi
	[ -z "$je_conf" ] || je_out="$je_out MALLOC_CONF=$je_conf"
	echo "$je_out"
}

# The tests of client $1 that configuration pattern $2 selects, one a line.
tests_of()
{
	while read -r to_name to_rest; do
		# shellcheck disable=SC2254 # $2 is a pattern on purpose
		case $to_name in
		$2) echo "$to_name $to_rest" ;;
		esac
	done <"$C/$1/tests"
}

# run_build client config build envs pattern: the tests of the client the
# pattern selects, one a line of results into
# $D/res/<client>-<config>-<build>.
run_build()
{
	rb_c=$1 rb_cfg=$2 rb_b=$3 rb_env=$4 rb_pat=$5
	rb_res=$D/res/$rb_c-$rb_cfg-$rb_b
	rb_work=$D/work/$rb_c-$rb_cfg-$rb_b
	rb_skip=-1
	[ ! -f "$C/$rb_c/skipcode" ] || rb_skip=$(cat "$C/$rb_c/skipcode")
	: >"$rb_res"
	tests_of "$rb_c" "$rb_pat" >"$rb_work.tests"
	while read -r rb_name rb_rest; do
		rb_tenv=''
		rb_prog=''
		rb_args=''
		for rb_w in $rb_rest; do
			if [ -z "$rb_prog" ]; then
				case $rb_w in
				*=*) rb_tenv="$rb_tenv $rb_w"; continue ;;
				esac
				rb_prog=$rb_w
			else
				rb_args="$rb_args $rb_w"
			fi
		done
		rb_envs=$(join_env "$rb_env" "$rb_tenv")
		rm -rf "$rb_work"
		mkdir -p "$rb_work"
		rb_out=$D/out/$rb_c-$rb_cfg-$rb_b-$(echo "$rb_name" | tr / _).out
		rb_t0=$(date +%s)
		if [ ! -x "$C/$rb_c/$rb_b/$rb_prog" ]; then
			echo "missing $C/$rb_c/$rb_b/$rb_prog" >"$rb_out"
			rb_rc=127
		else
			# shellcheck disable=SC2086 # $rb_envs and $rb_args are word lists
			(cd "$rb_work" && exec env $rb_envs timeout "$TMO" \
				"$C/$rb_c/$rb_b/$rb_prog" $rb_args) >"$rb_out" 2>&1 </dev/null
			rb_rc=$?
		fi
		rb_st=FAIL
		[ "$rb_rc" -ne 0 ] || rb_st=PASS
		[ "$rb_rc" -ne "$rb_skip" ] || rb_st=SKIP
		echo "RESULT $rb_c $rb_cfg $rb_b $rb_name $rb_st $rb_rc $(($(date +%s) - rb_t0))" >>"$rb_res"
	done <"$rb_work.tests"
	rm -rf "$rb_work" "$rb_work.tests"
}

# compare client config stock-results patched-results: the NEW, STOCKFAIL
# and STOCKONLY lines of one configuration, on stdout and into $D/verdicts.
# Without a stock run (a file of none) every patched failure is new.
compare()
{
	[ -f "$3" ] || set -- "$1" "$2" /dev/null "$4"
	[ -f "$4" ] || return 0
	# (By file name: with an empty first file NR == FNR holds for the
	# second one too, and every failure would be taken for stock's.)
	awk -v c="$1" -v cfg="$2" -v ref="$3" '
		FILENAME == ref { st[$5] = $6; if ($6 == "FAIL") old[$5] = 1; next }
		{ now[$5] = $6 }
		$6 == "FAIL" && st[$5] != "FAIL" { print "NEW " c " " cfg " " $5 }
		END {
			for (t in old)
				print (now[t] == "FAIL" ? "STOCKFAIL " : "STOCKONLY ") c " " cfg " " t
		}' \
		"$3" "$4" | tee -a "$D/verdicts"
}

FILTERS="$*"
mkdir -p "$D/res" "$D/out" "$D/work"
: >"$D/verdicts"
pass=0 skip=0 fail=0 expected=0 new=0
order=$(tr '\n' ' ' <"$C/order")
for c in $order; do
	echo "CLIENT $c: $(cat "$C/$c/about")"
	while IFS='|' read -r cfg builds envs pat ref; do
		selected "$c" "$cfg" || continue
		[ -n "$pat" ] || pat='*'
		ntests=$(tests_of "$c" "$pat" | grep -c .)
		echo "CONFIG $c $cfg: ${envs:-(no environment)}; tests $pat ($ntests)"
		for b in $builds; do
			expected=$((expected + ntests))
			run_build "$c" "$cfg" "$b" "$envs" "$pat" &
		done
		wait
		for b in $builds; do
			res=$D/res/$c-$cfg-$b
			cat "$res"
			grep '^RESULT .* FAIL ' "$res" | while read -r _ _ _ _ name _; do
				echo "--- last lines of $c $cfg $b $name:"
				tail -n 20 "$D/out/$c-$cfg-$b-$(echo "$name" | tr / _).out"
			done
			p=$(grep -c '^RESULT .* PASS ' "$res")
			s=$(grep -c '^RESULT .* SKIP ' "$res")
			f=$(grep -c '^RESULT .* FAIL ' "$res")
			pass=$((pass + p))
			skip=$((skip + s))
			fail=$((fail + f))
			echo "SUMMARY $c $cfg $b PASS $p SKIP $s FAIL $f of $ntests"
		done
		compare "$c" "$cfg" "$D/res/$c-${ref:-$cfg}-stock" "$D/res/$c-$cfg-patched"
		new=$((new + $(grep -c "^NEW $c $cfg " "$D/verdicts")))
	done <"$C/$c/configs"
done
stockfail=$(grep -c '^STOCKFAIL ' "$D/verdicts")
echo "CLIENTS pass=$pass skip=$skip fail=$fail expected=$expected new=$new stockfail=$stockfail"
rm -rf "$D"
[ "$expected" -gt 0 ] && [ "$new" -eq 0 ] && [ $((pass + skip + fail)) -eq "$expected" ] && exit 0
exit 1
