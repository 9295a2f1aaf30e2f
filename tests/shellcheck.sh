#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every shell script of the tree passes shellcheck (warnings and infos
# included), or carries a disable directive whose comment says why.
# Usage: shellcheck.sh SOURCE_ROOT
set -euo pipefail
cd "$1"
if ! command -v shellcheck >/dev/null; then
	echo "SKIP: shellcheck not found (apt-get install shellcheck)"
	exit 77
fi

# Shell scripts: *.sh, and files whose first line names sh or bash. Files
# come from git where there is a checkout, else from the tree itself (the
# meson dist tarball has no .git).
list_files() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files
	else
		find . -path ./build\* -prune -o -type f -print | sed 's|^\./||'
	fi
}
scripts=() libs=()
while read -r f; do
	[ -f "$f" ] || continue
	first=$(sed -n 1p "$f")
	case $first in
	'#!'*bash* | '#!'*/sh | '#!'*' sh') scripts+=("$f") ;;
	*) [[ $f == *.sh ]] && libs+=("$f") ;;
	esac
done < <(list_files)
[ ${#scripts[@]} -gt 0 ] || { echo "FAIL: no shell script found under $1"; exit 1; }

# A directive without a reason after it: "# shellcheck disable=SCnnnn" alone.
bare=$(grep -nE '^[[:space:]]*# shellcheck disable=SC[0-9,]+[[:space:]]*$' \
	"${scripts[@]}" "${libs[@]}" || true)
if [ -n "$bare" ]; then
	echo "FAIL: shellcheck disables without a reason:"
	echo "$bare"
	exit 1
fi
rc=0
shellcheck -x "${scripts[@]}" || rc=1
# Files without a shebang are sourced by kernel/run (bash).
if [ ${#libs[@]} -gt 0 ]; then
	shellcheck -x -s bash "${libs[@]}" || rc=1
fi
[ $rc -eq 0 ] && echo "shellcheck: ${#scripts[@]} scripts and ${#libs[@]} sourced files clean"
exit $rc
