/* SPDX-License-Identifier: MIT */
/*
 * Batch internals shared by batch.c (planning, synchronous issue) and the
 * asynchronous backends (iouring.c, async.c), which issue the same plan.
 */
#ifndef MADVX_BATCH_H
#define MADVX_BATCH_H

#include "internal.h"
#include "vma.h"

/* One kernel entry: a range inside one VMA (as far as we know). */
struct madvx_entry {
	uint64_t start;
	uint64_t len;
	uint32_t first;		/* sorted positions of the hints it may cover */
	uint32_t last;
	bool fallback;		/* predicted to take mmap_lock */
	bool via_sorted;	/* first/last index the epoch's sorted order */
};

#define MADVX_MAX_VEC 1024	/* UIO_MAXIOV */

/* How the planner hands a group of entries (one advice, one lock class) on. */
struct madvx_batch;
typedef void (*madvx_issue_fn)(struct madvx_batch *b, int advice,
			       struct madvx_entry *e, uint32_t n);

/*
 * Flush @b, handing every planned group (one advice; all fast-path or all
 * fallback entries; in the order the synchronous flush would issue them) to
 * @issue instead of the kernel. @issue must credit each entry with
 * madvx_entry_done() / madvx_entry_madvise() before the flush returns
 * (results and failure reporting then work as for madvx_batch_flush()).
 * Returns the first failure's -errno, or 0.
 */
MADVX_HIDDEN int madvx_batch_flush_via(struct madvx_batch *b, madvx_issue_fn issue,
				       void *ctx);
MADVX_HIDDEN void *madvx_batch_issue_ctx(struct madvx_batch *b);

/*
 * The asynchronous form: plan and hand every group to @issue, which may
 * credit entries later (after this returns, from any thread that owns the
 * batch then). Entries passed to @issue live only during the call: copy
 * them. Once every entry is credited, madvx_batch_complete() counts the
 * failures, calls on_error and publishes results; it returns what
 * madvx_batch_flush() would (the first failure since the last flush).
 */
MADVX_HIDDEN int madvx_batch_issue_deferred(struct madvx_batch *b, madvx_issue_fn issue,
					    void *ctx);
MADVX_HIDDEN int madvx_batch_complete(struct madvx_batch *b);

/* Credit @e with success (@ok) or with @err for every hint it covers. */
MADVX_HIDDEN void madvx_entry_done(struct madvx_batch *b, const struct madvx_entry *e,
				   uint64_t done, int err);

/* madvise(2) of @e said ENOMEM: credit each hint with what is mapped of its part. */
MADVX_HIDDEN void madvx_entry_enomem(struct madvx_batch *b, const struct madvx_entry *e);

/* Apply one entry with madvise(2) and credit it: the exact-semantics path. */
MADVX_HIDDEN long madvx_entry_madvise(struct madvx_batch *b, int advice,
				      const struct madvx_entry *e);

#endif /* MADVX_BATCH_H */
