# SPDX-License-Identifier: MIT
# One release or commit of an upstream project, from a checkout the caller
# names (sourced by the clients' check scripts beside debsrc.sh).  This
# project never clones upstream repositories by itself (CI has no network
# for them): the user gives a path or a URL.
#
#   upstream_extract SOURCE REV DIR
#
# REV is a tag or a full commit id.  SOURCE is a git work tree, a bare git
# directory or a git URL (REV is exported with `git archive`, or fetched
# alone), or a plain source tree (copied as it is: the caller checks its
# version).  DIR is made fresh.  The caller defines log and die
# (examples/common/client.sh).  Sets UPSTREAM_DESC: what was used
# ("REV (commit) of SOURCE" or "tree SOURCE").

upstream_extract()
{
	local src=$1 tag=$2 dir=$3 commit
	rm -rf "$dir"
	mkdir -p "$dir"
	if [[ -d $src ]] && git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
		commit=$(git -C "$src" rev-parse --verify --quiet "refs/tags/$tag^{commit}") ||
			commit=$(git -C "$src" rev-parse --verify --quiet "$tag^{commit}") ||
			die "$src has no tag or commit $tag (git fetch --tags?)"
		git -C "$src" archive "$commit" | tar -x -C "$dir" ||
			die "git archive $tag of $src failed"
		# shellcheck disable=SC2034 # the caller reads it
		UPSTREAM_DESC="$tag (${commit:0:12}) of $src"
	elif [[ -d $src ]]; then
		cp -a "$src/." "$dir/"
		UPSTREAM_DESC="tree $src"
	elif [[ $src == *://* || $src == *@*:* ]]; then
		log "fetching $tag of $src"
		{ git -C "$dir" init -q && git -C "$dir" fetch -q --depth 1 "$src" "$tag" &&
			git -C "$dir" checkout -q FETCH_HEAD; } 2>"$dir.clone.log" ||
			{ cat "$dir.clone.log" >&2; die "cannot fetch $tag of $src"; }
		commit=$(git -C "$dir" rev-parse HEAD)
		rm -rf "$dir/.git"
		# shellcheck disable=SC2034 # the caller reads it
		UPSTREAM_DESC="$tag (${commit:0:12}) of $src"
	else
		die "$src: neither a directory nor a git URL"
	fi
}
