/* SPDX-License-Identifier: MIT */
/* plan.c: planning an epoch of hints into kernel entries (see plan.c). */
#ifndef MADVX_PLAN_H
#define MADVX_PLAN_H

#include "engine.h"

/*
 * Lock class of an advice index: 0 per-VMA, 1 mmap_read_lock, 2
 * mmap_write_lock; LOCK_CLASS_LATER until the first hint of an advice whose
 * class needs the per-boot cache (__madvx_lock_class_decide()).
 */
#define LOCK_CLASS_LATER 3
MADVX_HIDDEN extern _Atomic uint8_t __madvx_lock_classes[64];
MADVX_HIDDEN void __madvx_plan_init(void);
MADVX_HIDDEN uint8_t __madvx_lock_class_decide(int adv_idx);

static inline uint64_t madvx_lock_class(int adv_idx)
{
	uint8_t c = atomic_load_explicit(&__madvx_lock_classes[adv_idx & 63],
					 memory_order_relaxed);

	return likely(c != LOCK_CLASS_LATER) ? c : __madvx_lock_class_decide(adv_idx & 63);
}

/*
 * key = vouched (1 bit) | lock class (2 bits) | advice index (5 bits) |
 * page number (52 bits: every 4 KiB page of a 64-bit address space, so no
 * two addresses alias): sorted, entries come grouped by class (fast path
 * first), then advice, then address, and the hints the caller vouched for
 * (MADVX_HINT_ONE_VMA) after all the others, in groups of their own.
 */
#define KEY_VOUCHED_SHIFT 59

static inline uint64_t madvx_sort_key(const struct hint_int *h)
{
	return ((uint64_t)!!(h->flags & HINT_ONE_VMA) << KEY_VOUCHED_SHIFT) |
	       (madvx_lock_class(h->adv_idx) << 57) |
	       ((uint64_t)(h->adv_idx & 31) << 52) | (h->start >> 12);
}
/* Plan and issue the hints [from, to) of one epoch. */
MADVX_HIDDEN void __madvx_plan_epoch(struct madvx_batch *b, uint32_t from, uint32_t to);

/* The kernel refused an entry: stop guessing that lone hints lie in one VMA. */
MADVX_HIDDEN void __madvx_plan_forget_guess(void);

#endif /* MADVX_PLAN_H */
