# SPDX-License-Identifier: MIT
# What mimalloc's own tests run with, stock and patched (sourced by check.sh,
# on the host, and by examples/common/kernel-clients.sh, for the test
# kernel).
# shellcheck disable=SC2034 # read by the scripts that source this file

# test-stress THREADS SCALE ITER (its defaults: 32 25 50, minutes here).
# 4 threads (twice the cores: objects still move between threads and
# segments are abandoned and reclaimed), the default per-thread load, and
# 5 generations of threads (each exit abandons its segments and frees its
# batch): ~4 s of CPU a run. The check's ~3 minutes of CPU are mostly
# test-api's (README.md, results).
MIMALLOC_STRESS_DEBIAN="4 25 5"

# name|variants|environment of one run of the three tests.  2.0.9 reads
# MIMALLOC_DECOMMIT_DELAY (delayed span decommits, 25 ms) and
# MIMALLOC_SEGMENT_DECOMMIT_DELAY (cached segments, 500 ms); it has no
# MIMALLOC_PURGE_DELAY (2.1 and later).  At delay 0 every decommit is
# immediate, one range per call: the stock path, for both builds.  The
# delayed passes are what the patch batches: the default configuration,
# and it again with every hint a madvise() and no look-ups.  "abandon":
# 1 ms delays and a forced decommit of every abandoned segment, so most
# exiting threads leave decommits pending in the shared batch and other
# threads reclaim and reuse those segments; a patch that let a reclaimed
# span be written before that flush fails test-stress here (every run of
# such a variant did: 4 of 4 when only the abandon's pass was deferred,
# which passed the other configurations; 3 of 3 since reclaims defer too,
# which fails the default configuration as well).  The patch's opt-in hold
# (MIMALLOC_MADVX_DECOMMIT_HOLD: owners' passes left pending up to that
# many ms; a span allocated over them takes itself out of them, or waits)
# runs patched only, alone and with "abandon"'s 1 ms delays.
MIMALLOC_CONFIGS_DEBIAN=(
	"default|stock patched|"
	"delay0|stock patched|MIMALLOC_DECOMMIT_DELAY=0 MIMALLOC_SEGMENT_DECOMMIT_DELAY=0"
	"no-vector|patched|MADVX_DISABLE=process_madvise,procmap_query"
	"abandon|stock patched|MIMALLOC_DECOMMIT_DELAY=1 MIMALLOC_ABANDONED_PAGE_DECOMMIT=1"
	"hold|patched|MIMALLOC_MADVX_DECOMMIT_HOLD=100"
	"hold-abandon|patched|MIMALLOC_DECOMMIT_DELAY=1 MIMALLOC_ABANDONED_PAGE_DECOMMIT=1 MIMALLOC_MADVX_DECOMMIT_HOLD=100"
)

# Upstream 2.4 purges instead (MIMALLOC_PURGE_DELAY, 10 ms; arenas at
# MIMALLOC_ARENA_PURGE_MULT times that); test-stress runs with its own
# defaults there (32 threads, scale 50, 50 generations: what its ctest
# runs, ~11 s here; "4 25 5" takes 0.05 s in 2.4).  The patch's opt-in
# hold (MIMALLOC_MADVX_PURGE_HOLD: owners' segment passes left pending up
# to that many ms, a span allocated over them waits) runs patched only,
# alone and with "abandon"'s 1 ms delay (every pass held).
MIMALLOC_STRESS_UPSTREAM=""
MIMALLOC_CONFIGS_UPSTREAM=(
	"default|stock patched|"
	"delay0|stock patched|MIMALLOC_PURGE_DELAY=0"
	"no-vector|patched|MADVX_DISABLE=process_madvise,procmap_query"
	"abandon|stock patched|MIMALLOC_PURGE_DELAY=1 MIMALLOC_ABANDONED_PAGE_PURGE=1"
	"hold|patched|MIMALLOC_MADVX_PURGE_HOLD=100"
	"hold-abandon|patched|MIMALLOC_PURGE_DELAY=1 MIMALLOC_ABANDONED_PAGE_PURGE=1 MIMALLOC_MADVX_PURGE_HOLD=100"
)
