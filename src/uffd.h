/* SPDX-License-Identifier: MIT */
/*
 * uffd.c: the userfaultfd probe and the handle. The handle's operations
 * (uffd-ops.c) and its event loop (uffd-loop.c) sit above it and share its
 * struct.
 */
#ifndef MADVX_UFFD_H
#define MADVX_UFFD_H

#include <pthread.h>

#include "proc.h"
#include "util.h"

/*
 * The userfaultfd probe lives with the code of its interface: run once, on
 * the first use of an API that needs it, it merges its answer into the store
 * (probe.c), which never calls it.
 */
MADVX_HIDDEN void __madvx_uffd_probe_once(void);

struct madvx_uffd {
	int fd;
	int evfd;		/* readable while events are queued or stop is set */
	int epfd;		/* epoll of fd + evfd: madvx_uffd_poll_fd() */
	bool user_mode_only;
	uint64_t features;
	uint64_t gen;		/* opener's process generation (proc.c) */
	atomic_bool stop;

	/* Reading the fd and the queue of drained events, under @lock. */
	pthread_mutex_t lock;
	struct madvx_uffd_event *q;	/* ring of QUEUE_CAP */
	size_t qhead, qlen;

	_Atomic uint64_t n_ioctls, n_bytes, n_existed, n_eagain, n_events,
		n_faults, n_splits;
};

/*
 * The fd names the mm of the process that opened it: in a child (any kind
 * of fork) every operation would act on the PARENT's memory, and the event
 * mutex may be a copy of a locked one. The child gets -ECHILD instead.
 */
static inline bool inherited(const struct madvx_uffd *u)
{
	return __madvx_proc_gen() != u->gen;
}

#define CNT_ADD(u, field, v) \
	atomic_fetch_add_explicit(&(u)->field, (v), memory_order_relaxed)

/* Events madvx_uffd_drain() can hold; allocated at open, never grown. */
#define QUEUE_CAP 1024

#endif /* MADVX_UFFD_H */
