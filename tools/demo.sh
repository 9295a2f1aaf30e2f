#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libmadvx and run the headline demo: the capability probe.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
need_pkgs "${BUILD_PKGS[@]}"
[ -f build-demo/build.ninja ] || meson setup build-demo -Dtests=false -Dbuildtype=release
ninja -C build-demo
./build-demo/tools/madvx-probe "$@"
