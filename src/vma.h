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
 * ENOMEM). So the cache lives for one flush and is dropped at the next.
 */
#ifndef MADVX_VMA_H
#define MADVX_VMA_H

#include "internal.h"

struct madvx_vma {
	uint64_t start;
	uint64_t end;
	bool uffd;		/* registered as userfaultfd-armed */
	bool uffd_remove;	/* ... by a context with UFFD_EVENT_REMOVE */
	bool region;		/* from a caller-registered region */
};

#define MADVX_VMA_CACHE 64

/* A lookup answer: no VMA in [from, vma.start), then vma. */
struct madvx_vma_span {
	uint64_t from;
	struct madvx_vma vma;
};

struct madvx_vma_cache {
	uint32_t count;
	uint32_t last;		/* index of the last hit */
	struct madvx_vma_span span[MADVX_VMA_CACHE];
	uint64_t queries;	/* kernel lookups done (stats) */
};

static inline void madvx_vma_cache_reset(struct madvx_vma_cache *c)
{
	c->count = 0;
	c->last = 0;
}

/*
 * The VMA that contains @addr, or the first one above it (then
 * v->start > addr: [addr, v->start) is unmapped). Returns 0, -ENOENT when
 * nothing is mapped at or above @addr, or another -errno when no source
 * could answer (the caller then plans without bounds).
 */
MADVX_HIDDEN int __madvx_vma_find(struct madvx_vma_cache *c, uint64_t addr,
				struct madvx_vma *v);

/*
 * The same, from the kernel alone: no region, no cache. For deciding results
 * after the kernel refused an entry, where only its own view may count.
 */
MADVX_HIDDEN int __madvx_vma_find_kernel(uint64_t addr, struct madvx_vma *v);

#endif /* MADVX_VMA_H */
