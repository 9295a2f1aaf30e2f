# SPDX-License-Identifier: MIT
main()
{
	local cmd=${1:-test}
	shift || true
	mkdir -p "$CACHE"
	case $cmd in
	fetch) [[ ${1:-} = --refresh ]] && REFRESH=1; cmd_fetch ;;
	build) cmd_build "$@" ;;
	*) die "unknown command $cmd" ;;
	esac
}
