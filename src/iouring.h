/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend of madvx_async behind a small contract (liburing's
 * rule: a backend implements a contract and does not call back into its
 * caller's internals). async.c owns the tickets; the backend knows a ticket
 * only as a slot number, keeps its own per-slot state, and reports a slot
 * whose batch is fully credited through the @done callback given at
 * creation. Every call is made with the caller's lock held.
 */
#ifndef MADVX_IOURING_H
#define MADVX_IOURING_H

#include "util.h"

struct madvx_uring;

/* Slot @slot's batch is fully credited (called from submit or reap). */
typedef void (*madvx_uring_done_fn)(void *ctx, uint32_t slot);

#ifdef MADVX_HAVE_LIBURING
/*
 * The io_uring probe lives with the code of its interface: run once, on the
 * first use of an API that needs it, it merges its answer into the store
 * (probe.c), which never calls it.
 */
MADVX_HIDDEN void __madvx_iouring_probe_once(void);

/* A ring (own, or o->ring) for @nslots slots; CQEs wake @efd (own ring). */
MADVX_HIDDEN int __madvx_uring_create(struct madvx_uring **out, const struct madvx_async_opts *o,
				      uint32_t nslots, int efd, madvx_uring_done_fn done,
				      void *done_ctx);
MADVX_HIDDEN void __madvx_uring_free(struct madvx_uring *u);
/* Plan @b and queue its SQEs as slot @slot. */
MADVX_HIDDEN void __madvx_uring_submit(struct madvx_uring *u, uint32_t slot,
				       struct madvx_batch *b);
/* Reap completions; with @wait, block until at least one CQE arrived. */
MADVX_HIDDEN int __madvx_uring_reap(struct madvx_uring *u, bool wait);
/* A CQE reaped by the caller: 1 if it was ours (handled), else 0. */
MADVX_HIDDEN int __madvx_uring_cqe(struct madvx_uring *u, uint64_t user_data, int32_t res);
MADVX_HIDDEN bool __madvx_uring_caller_ring(const struct madvx_uring *u);
#else
/* Built without liburing: every io_uring feature reads as absent. */
static inline void __madvx_iouring_probe_once(void)
{
}
#endif

#endif /* MADVX_IOURING_H */
