#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every page renders with `man -l` without a groff warning, every alias
# resolves, and every function exported in src/libmadvx.map has a page.
set -euo pipefail
cd "$1"
map=$2
if ! command -v man >/dev/null; then
	echo "SKIP: man(1) not found (install man-db): pages not rendered"
	exit 77
fi
fail=0
for f in man1/*.1 man3/*.3 man7/*.7; do
	out=$(LC_ALL=C MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null || echo "man failed")
	if [ -n "$out" ]; then
		echo "FAIL: $f: $out"
		fail=1
	fi
	[ -n "$(LC_ALL=C MANWIDTH=80 man -l "$f" 2>/dev/null)" ] || { echo "FAIL: $f renders empty"; fail=1; }
done
while read -r sym; do
	[ -f "man3/$sym.3" ] || { echo "MISSING: man3/$sym.3"; fail=1; }
done < <(sed -n 's/^\t\t\(madvx_[a-z0-9_]*\);/\1/p' "$map")
for f in man1/*.1 man3/*.3 man7/*.7; do
	[[ $(sed -n 1,2p "$f") == *SPDX-License-Identifier* ]] || { echo "FAIL: $f: no SPDX line"; fail=1; }
done
pages=(man1/*.1 man3/*.3 man7/*.7)
[ $fail -eq 0 ] && echo "man pages: ${#pages[@]} render cleanly"
exit $fail
