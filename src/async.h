/* SPDX-License-Identifier: MIT */
/*
 * The async object of async.c (tickets, the worker-thread and sync
 * backends); the io_uring backend is behind iouring.h and never sees it.
 */
#ifndef MADVX_ASYNC_H
#define MADVX_ASYNC_H

#include <pthread.h>

#include "proc.h"
#include "sys.h"
#include "iouring.h"

enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_DONE };

struct madvx_ticket_slot {
	struct madvx_batch *b;
	uint32_t gen;		/* ticket = gen << 32 | (index + 1) */
	uint8_t state;
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
	uint64_t gen;			/* creator's process generation: a child gets -ECHILD */
};

#endif /* MADVX_ASYNC_H */
