/* SPDX-License-Identifier: MIT */
/* batch.c: what the asynchronous backends use of the batch (see batch.c). */
#ifndef MADVX_BATCH_H
#define MADVX_BATCH_H

#include "engine.h"

/* ---- batch.c: the interface the asynchronous backends use ---- */

/*
 * The asynchronous form of a flush: plan and hand every group to @issue,
 * which may credit entries later (after this returns, from any thread that
 * owns the batch then). Entries passed to @issue live only during the call:
 * copy them. Runs are planned whole (not cut at VMA boundaries): entries
 * running in parallel could not stop a hint at its first failing VMA.
 * Once every entry is credited, __madvx_batch_complete() counts the
 * failures, calls the callbacks and publishes results; it returns what
 * madvx_batch_flush() would (the first failure since the last flush).
 */
MADVX_HIDDEN int __madvx_batch_issue_deferred(struct madvx_batch *b, madvx_issue_fn issue,
					    void *ctx);
MADVX_HIDDEN int __madvx_batch_complete(struct madvx_batch *b);
MADVX_HIDDEN void *__madvx_batch_issue_ctx(struct madvx_batch *b);

#endif /* MADVX_BATCH_H */
