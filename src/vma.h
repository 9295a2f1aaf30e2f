/* SPDX-License-Identifier: MIT */
/*
 * VMA bounds for the planner, without mmap_lock where the kernel allows.
 *
 * Sources, in order: regions the caller registered (no syscall at all), a
 * small cache filled during the current flush, PROCMAP_QUERY (6.11; under
 * per-VMA locks since 6.17), and /proc/self/maps on older kernels.
 *
 * Why a stale view costs speed, never correctness: the planner only uses
 * bounds to cut entries so that each lies in one VMA. If a VMA was split or
 * merged since we looked, an entry may cross a real boundary: the kernel then
 * walks the VMAs itself under mmap_read_lock (slower, same effect), or an
 * entry may end at a boundary that no longer exists (one entry more than
 * needed). If a range was unmapped, the kernel answers ENOMEM for the entry,
 * which the flush handles like madvise() does (advise what is mapped, report
 * ENOMEM).
 *
 * What a stale view must never do is claim a HOLE: the planner credits an
 * unmapped part to its hints without asking the kernel. So the cache keeps
 * the VMAs a batch saw across its flushes (an allocator or a GC releases
 * the same arenas flush after flush), but only the VMAs: at the
 * start of each flush (madvx_vma_cache_age()) every span forgets the gap
 * below its VMA, and a question about a gap goes to the kernel again. It is
 * dropped whole after a flush in which the kernel refused an entry (a sign
 * the layout moved: @stale).
 *
 * A child of any fork kind keeps it: its layout is its parent's at the
 * fork, minus the MADV_DONTFORK VMAs, which are holes in the child. A VMA
 * kept from the parent is therefore no staler than one kept from an earlier
 * flush: where it is a hole now the kernel answers ENOMEM for the entry,
 * which issue.c resolves on the kernel's bounds (and marks the cache
 * @stale). Dropping it cost every child its own look-ups of the parent's
 * layout (bdwgc's gctest: 500 of 749 look-ups were in forked children).
 */
#ifndef MADVX_VMA_H
#define MADVX_VMA_H

#include "proc.h"

struct madvx_vma {
	uint64_t start;
	uint64_t end;
	bool uffd;		/* registered as userfaultfd-armed */
	bool uffd_remove;	/* ... by a context with UFFD_EVENT_REMOVE */
	bool region;		/* from a caller-registered region */
};

#define MADVX_VMA_CACHE 128

/* A lookup answer: no VMA in [from, vma.start), then vma. */
struct madvx_vma_span {
	uint64_t from;
	struct madvx_vma vma;
};

/*
 * The spans live apart from the head (a batch keeps them at the end of its
 * storage, a one-off look-up on its stack): a batch's head shares its first
 * page with its first hint, and a flush that needs no look-up never touches
 * the 4 KiB of spans (batch.c, carve_storage()).
 */
struct madvx_vma_cache {
	uint32_t count;
	uint32_t last;		/* index of the last hit */
	bool stale;		/* the kernel refused an entry planned on it */
	uint64_t queries;	/* kernel lookups done (stats) */
	struct madvx_vma_span *span;	/* MADVX_VMA_CACHE of them */
};

static inline void madvx_vma_cache_reset(struct madvx_vma_cache *c)
{
	c->count = 0;
	c->last = 0;
	c->stale = false;
}

/* An empty cache over @span (MADVX_VMA_CACHE entries, contents ignored). */
static inline void madvx_vma_cache_init(struct madvx_vma_cache *c,
					struct madvx_vma_span *span)
{
	madvx_vma_cache_reset(c);
	c->queries = 0;
	c->span = span;
}

/*
 * Between flushes: keep the VMAs, forget the gaps (see the head of this
 * file), also in a new process; drop everything after a refusal.
 */
static inline void madvx_vma_cache_age(struct madvx_vma_cache *c)
{
	if (c->stale) {
		madvx_vma_cache_reset(c);
		return;
	}
	for (uint32_t i = 0; i < c->count; i++)
		c->span[i].from = c->span[i].vma.start;
}

/*
 * The VMA that contains @addr, or the first one above it (then
 * v->start > addr: [addr, v->start) is unmapped). Returns 0, -ENOENT when
 * nothing is mapped at or above @addr, or another -errno when no source
 * could answer (the caller then plans without bounds).
 */
MADVX_HIDDEN int __madvx_vma_find(struct madvx_vma_cache *c, uint64_t addr,
				struct madvx_vma *v);

/* The /proc/self/maps fd of this process, reopened in a child (proc.c). */
MADVX_HIDDEN int __madvx_self_maps_fd(void);

/*
 * The same, from the kernel alone: no region, no cache. For deciding results
 * after the kernel refused an entry, where only its own view may count.
 */
MADVX_HIDDEN int __madvx_vma_find_kernel(uint64_t addr, struct madvx_vma *v);

/*
 * Whether a VMA in [@addr, @addr + @len) is anonymous memory (no inode:
 * shmem, even MAP_SHARED|MAP_ANONYMOUS, has one), up to the first hole:
 * 1 or 0; 0 too when no source could tell (the caller lets the kernel
 * decide). PROCMAP_QUERY, or /proc/self/maps where the kernel has none.
 */
MADVX_HIDDEN int __madvx_vma_range_anon(uint64_t addr, uint64_t len);

#endif /* MADVX_VMA_H */
