#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libmadvx and run every test: a plain build, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer in a second build dir.
# Options: --host-only skips the test-kernel stage.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
need_pkgs "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"

host_only=0
for a in "$@"; do
	case "$a" in
	--host-only) host_only=1 ;;
	*) echo "usage: tools/test.sh [--host-only]" >&2; exit 2 ;;
	esac
done

run_suite() {
	local dir=$1; shift
	[ -f "$dir/build.ninja" ] || meson setup "$dir" "$@"
	ninja -C "$dir"
	meson test -C "$dir" --print-errorlogs --num-processes 2
}

echo "=== host tests: plain build (build/) ==="
run_suite build
echo "=== host tests: ASan + UBSan build (build-san/) ==="
run_suite build-san -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false

if [ "$host_only" -eq 0 ] && [ -x kernel/run ]; then
	echo "=== test kernel: base vs patched under QEMU ==="
	kernel/run test
fi
