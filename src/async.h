/* SPDX-License-Identifier: MIT */
/*
 * The async object shared by async.c (tickets, the worker-thread and sync
 * backends) and iouring.c (the io_uring backend).
 */
#ifndef MADVX_ASYNC_H
#define MADVX_ASYNC_H

#include <pthread.h>

#include "internal.h"

enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_DONE };

struct madvx_ticket_slot {
	struct madvx_batch *b;
	uint32_t gen;		/* ticket = gen << 32 | (index + 1) */
	uint8_t state;
	bool planning;		/* io_uring: SQEs are still being queued */
	uint32_t pending;	/* io_uring: SQEs queued, not yet completed */
	int result;		/* madvx_batch_flush()'s answer, once SLOT_DONE */
};

struct madvx_uring;

struct madvx_async {
	enum madvx_async_backend backend;
	pthread_mutex_t lock;
	pthread_cond_t done_cv;		/* a slot became SLOT_DONE */
	pthread_cond_t work_cv;		/* thread: queue not empty, or stop */
	int efd;
	uint32_t nslots;
	struct madvx_ticket_slot *slots;
	uint32_t *queue;		/* thread: FIFO of slot indices */
	uint32_t qhead, qlen;
	bool stop;
	bool have_thread;
	pthread_t thread;
	struct madvx_uring *uring;
	uint32_t cur_slot;		/* io_uring: the slot being planned */
	uint64_t gen;			/* creator's process generation: a child gets -ECHILD */
};

/* async.c: @slot's batch is fully credited: tally it, mark it done, wake waiters. */
MADVX_HIDDEN void __madvx_async_slot_done(struct madvx_async *a, uint32_t slot);

#ifdef MADVX_HAVE_LIBURING
/* iouring.c; all called with a->lock held. */
MADVX_HIDDEN int __madvx_uring_create(struct madvx_async *a, const struct madvx_async_opts *o);
MADVX_HIDDEN void __madvx_uring_free(struct madvx_async *a);
MADVX_HIDDEN void __madvx_uring_submit(struct madvx_async *a, uint32_t slot);
/* Reap completions; with @wait, block until at least one CQE arrived. */
MADVX_HIDDEN int __madvx_uring_reap(struct madvx_async *a, bool wait);
MADVX_HIDDEN int __madvx_uring_cqe(struct madvx_async *a, uint64_t user_data, int32_t res);
MADVX_HIDDEN bool __madvx_uring_caller_ring(const struct madvx_async *a);
#endif

#endif /* MADVX_ASYNC_H */
