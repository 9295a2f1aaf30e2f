# SPDX-License-Identifier: MIT
# Locks on the shared cache (sourced by kernel/run).  Several engineers run
# kernel/run at once: each resource has its own flock(1) lock file so an
# "exec" on a built kernel does not wait for someone else's build.
#   src            fetch/extract
#   tree           the patched tree: exclusive to (re)apply the series,
#                  shared while a build or the kselftests read it
#   build-<dir>    one build dir
#   initramfs      the initramfs staging dirs and the library build dir
#   deps           apt-get install
# Never take the same lock twice in one process.

declare -A LOCK_FDS=()

lock()
{
	local name=$1 mode=${2:--x} fd
	exec {fd}>>"$CACHE/.lock-$name"
	if ! flock -n "$mode" "$fd"; then
		log "waiting for lock '$name' (another kernel/run is using it)"
		flock "$mode" "$fd"
	fi
	LOCK_FDS[$name]=$fd
}

unlock()
{
	local fd=${LOCK_FDS[$1]:-}
	[[ -n $fd ]] || return 0
	flock -u "$fd"
	exec {fd}>&-
	unset "LOCK_FDS[$1]"
}
