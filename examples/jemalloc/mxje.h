/* SPDX-License-Identifier: MIT */
/*
 * mxje: jemalloc (5.x, Debian's libjemalloc) extent hooks that route the
 * arena's purges through libmadvx. An example, not part of the library.
 *
 * Use: mxje_init() once, then mxje_arena_create() for each arena that should
 * use the hooks, and bind threads to it ("thread.arena") or allocate with
 * MALLOCX_ARENA(). See README.md for what may and may not be batched.
 */
#ifndef MXJE_H
#define MXJE_H

#include <stddef.h>
#include <stdint.h>

struct mxje_opts {
	size_t size;		/* sizeof(struct mxje_opts) */
	size_t chunk_bytes;	/* address space reserved per mapping; 0 = 256 MiB */
	size_t flush_bytes;	/* deferred release bytes that trigger a flush; 0 = 4 MiB */
	uint32_t max_pending;	/* deferred extents that trigger a flush; 0 = 64 */
	size_t grow_limit;	/* arena.<i>.retain_grow_limit; 0 = 2 MiB */
	int no_defer;		/* release each dalloc'd extent at once (no batching) */
};

struct mxje_stats {
	/* hook calls */
	uint64_t alloc, dalloc, destroy, purge_lazy, purge_forced, split, merge,
		 merge_refused;
	/* deferred releases of extents jemalloc gave up (dalloc/destroy) */
	uint64_t deferred, deferred_bytes, flushes, flush_max_entries;
	/* mappings now (one VMA each; registered with madvx_region_register),
	 * and how many were unmapped again */
	uint64_t chunks, chunk_bytes, trimmed;
	/* purge syscalls: libmadvx's own count (madvx_stats_get), plus the
	 * madvise() calls made here when libmadvx reported a partial result */
	uint64_t madvx_syscalls, madvx_entries, madvx_split, madvx_merged,
		 madvx_vma_queries, fixups;
	uint64_t pending_bytes;	/* deferred and not yet released right now */
};

/* Set up (call before any hook runs). 0 or -errno. @o may be NULL. */
int mxje_init(const struct mxje_opts *o);

/* "arenas.create" with the hooks; *ind receives the arena. 0 or -errno. */
int mxje_arena_create(unsigned *ind);

/* Release everything deferred now. 0 or the -errno of the flush. */
int mxje_flush(void);

/* Flush, then unmap the mappings no extent uses any more (e.g. after "arena.<i>.destroy"). */
void mxje_trim(void);

/* Counters since mxje_init(). */
void mxje_stats_get(struct mxje_stats *st);

/* The hook table (for callers that install it themselves). */
struct extent_hooks_s;
extern struct extent_hooks_s mxje_hooks;

#endif /* MXJE_H */
