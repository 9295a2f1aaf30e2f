# SPDX-License-Identifier: MIT
# The configurations bdwgc's own tests run in, stock and patched (sourced by
# check.sh, on the host, and by examples/common/kernel-clients.sh, for the
# test kernel): name|environment of one run of the whole suite.
# shellcheck disable=SC2034 # read by the scripts that source this file
BDWGC_CONFIGS=(
	"default|"
	"threshold1|GC_UNMAP_THRESHOLD=1"
	"force-unmap|GC_FORCE_UNMAP_ON_GCOLLECT=1"
	"both|GC_UNMAP_THRESHOLD=1 GC_FORCE_UNMAP_ON_GCOLLECT=1"
	"both-no-vector|GC_UNMAP_THRESHOLD=1 GC_FORCE_UNMAP_ON_GCOLLECT=1 MADVX_DISABLE=process_madvise,procmap_query"
)
