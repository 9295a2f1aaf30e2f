/* SPDX-License-Identifier: MIT */
/* issue.c: handing entries to the kernel and crediting every hint (see issue.c). */
#ifndef MADVX_ISSUE_H
#define MADVX_ISSUE_H

#include "engine.h"

/* Hand the planned entries @e[0, n) of @advice (b->few or b->entries) to the kernel. */
MADVX_HIDDEN void __madvx_issue_planned(struct madvx_batch *b, int advice,
				      struct madvx_entry *e, uint32_t n);

/*
 * [start, start + len) is unmapped for the hints at positions first..last:
 * credited -ENOMEM (POPULATE_* where the kernel stops at holes, 6.10+: the
 * hint stops there; see __madvx_populate_stops_at_holes()).
 */
MADVX_HIDDEN void __madvx_credit_hole(struct madvx_batch *b, int advice, bool via_sorted,
				    uint32_t first, uint32_t last, uint64_t start,
				    uint64_t len);

/* Credit @e as applied in full (@done bytes, for the counters). */
MADVX_HIDDEN void __madvx_entry_done(struct madvx_batch *b, const struct madvx_entry *e,
				   uint64_t done);

/*
 * The kernel did not apply @e in full (@err: its answer, -ECANCELED when it
 * never ran): give every hint it covers exactly madvise()'s answer for its
 * part, re-applying it VMA by VMA with madvise() on the kernel's bounds.
 * Returns true when every hint's part was applied in full after all.
 */
MADVX_HIDDEN bool __madvx_entry_failed(struct madvx_batch *b, int advice,
				     const struct madvx_entry *e, long err);

/* Apply one entry with madvise(2) and credit it: the exact-semantics path. */
MADVX_HIDDEN long __madvx_entry_madvise(struct madvx_batch *b, int advice,
				      const struct madvx_entry *e);

/*
 * Does @e cover a part of a hint that already stopped below it? Then it must
 * not be issued as planned (__madvx_entry_narrowed()).
 */
MADVX_HIDDEN bool __madvx_entry_touches_stopped(const struct madvx_batch *b,
					      const struct madvx_entry *e);
/* Issue @e without the parts of stopped hints, with madvise(). */
MADVX_HIDDEN void __madvx_entry_narrowed(struct madvx_batch *b, int advice,
				       const struct madvx_entry *e);

#endif /* MADVX_ISSUE_H */
