#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source me: `need_pkgs pkg...` installs the Debian packages that are missing
# (as root), or prints the exact apt-get line and fails (as anyone else).
# `apt_get ARGS...` is apt-get that waits for the dpkg/apt locks instead of
# failing (kernel/run uses it too). The Build-Depends a packager needs are in
# docs/PACKAGING.md; the lists below add what tools/test.sh itself runs.

# A fresh cloud VM often has unattended-upgrades holding the dpkg lock for
# its first minutes: wait for it (DPkg::Lock::Timeout, apt >= 1.9.11; Debian
# 12 has 2.6) and, for the locks that option does not cover (apt-get update's
# lists lock), retry on "Could not get lock" until the same deadline.
#
# An install killed half way (a Ctrl-C during kernel/run's deps) leaves dpkg
# "interrupted", and every later apt-get refuses until `dpkg --configure -a`:
# run it once and retry.
apt_get() {
	local timeout=${MADVX_APT_LOCK_TIMEOUT:-600} start=$SECONDS log rc repaired=
	log=$(mktemp)
	while :; do
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$timeout" "$@" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		if [ "$rc" -ne 0 ] && [ -z "$repaired" ] && grep -q "dpkg was interrupted" "$log"; then
			echo "apt-get: an earlier install was interrupted; running dpkg --configure -a" >&2
			DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a
			repaired=1
			continue
		fi
		if [ "$rc" -eq 0 ] || ! grep -q "Could not get lock" "$log" ||
			[ $((SECONDS - start)) -ge "$timeout" ]; then
			rm -f "$log"
			return "$rc"
		fi
		echo "apt-get: lock held by another package manager; retrying ($((SECONDS - start)) s of ${timeout} s)" >&2
		sleep 5
	done
}

need_pkgs() {
	local missing=() p
	for p in "$@"; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *'install ok installed'* ]] ||
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
	if ! apt_get install -y -q "${missing[@]}"; then
		apt_get update -q && apt_get install -y -q "${missing[@]}"
	fi
}

# The library, its tests and examples (docs/PACKAGING.md explains each).
# shellcheck disable=SC2034 # used by the scripts that source this file
BUILD_PKGS=(gcc g++ meson ninja-build pkg-config liburing-dev)
# shellcheck disable=SC2034 # as above
TEST_PKGS=(check man-db python3 libjemalloc-dev libmimalloc-dev shellcheck)
# What tools/test.sh adds: the clang build, the .deb lint, setpriv/unshare for
# the dist check (util-linux is essential on Debian).
# shellcheck disable=SC2034 # as above
CI_PKGS=(clang lintian dpkg-dev)
