#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source me: `need_pkgs pkg...` installs the Debian packages that are missing
# (as root), or prints the exact apt-get line and fails (as anyone else).
need_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages; run as root:" >&2
		echo "  apt-get install -y ${missing[*]}" >&2
		return 1
	fi
	echo "installing: ${missing[*]}"
	# Package lists are absent on a fresh machine: update once, then install.
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"; then
		apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
	fi
}

BUILD_PKGS=(gcc g++ meson ninja-build pkg-config liburing-dev)
TEST_PKGS=(check libjemalloc-dev libmimalloc-dev)
