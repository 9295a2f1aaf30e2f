// SPDX-License-Identifier: MIT
/*
 * Asynchronous release: tickets, and the worker-thread and sync backends.
 * The io_uring backend lives in iouring.c (the one home of io_uring calls).
 *
 * Why a worker thread is the default: io_uring's IORING_OP_MADVISE is
 * always punted to an io-wq worker (io_madvise_prep() sets
 * REQ_F_FORCE_ASYNC), so io_uring offers no in-kernel asynchrony that a
 * thread of our own does not; and our thread issues the batch as
 * process_madvise() vectors (one syscall per 1024 entries, one TLB flush)
 * where io-wq runs one do_madvise() per SQE. Measured in BENCHMARKS.md (p4).
 *
 * Memory: everything is allocated in madvx_async_create() (calloc for the
 * ticket table and queue, pthread_create for the thread); submit, wait and
 * poll never allocate.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "async.h"
#include "batch.h"
#include "probe.h"

#define DEFAULT_TICKETS 64
#define MAX_TICKETS 65536

static const char *const backend_names[] = {
	[MADVX_ASYNC_DEFAULT] = "default",
	[MADVX_ASYNC_THREAD] = "thread",
	[MADVX_ASYNC_IO_URING] = "io_uring",
	[MADVX_ASYNC_SYNC] = "sync",
};

MADVX_API const char *madvx_async_backend_name(enum madvx_async_backend backend)
{
	if ((unsigned int)backend >= ARRAY_SIZE(backend_names))
		return NULL;
	return backend_names[backend];
}

static bool io_uring_usable(void)
{
#ifdef MADVX_HAVE_LIBURING
	__madvx_iouring_probe_once();
	return madvx_has(MADVX_FEAT_IO_URING_MADVISE);
#else
	return false;
#endif
}

static enum madvx_async_backend default_backend;
static struct madvx_once default_once = MADVX_ONCE_INIT;

/*
 * THREAD unless MADVX_ASYNC_BACKEND says otherwise; io_uring only where the
 * probe found IORING_OP_MADVISE usable (else THREAD: the API keeps working).
 */
static void decide_default(void)
{
	const char *env = secure_getenv("MADVX_ASYNC_BACKEND");

	default_backend = MADVX_ASYNC_THREAD;
	if (!env)
		return;
	if (!strcmp(env, "sync"))
		default_backend = MADVX_ASYNC_SYNC;
	else if (!strcmp(env, "io_uring") && io_uring_usable())
		default_backend = MADVX_ASYNC_IO_URING;
}

MADVX_API enum madvx_async_backend madvx_async_default_backend(void)
{
	__madvx_probe();
	madvx_once(&default_once, decide_default);
	return default_backend;
}

MADVX_API enum madvx_async_backend madvx_async_backend_get(const struct madvx_async *a)
{
	return a ? a->backend : MADVX_ASYNC_DEFAULT;
}

/* ---- completion ---- */

static void signal_efd(struct madvx_async *a)
{
	uint64_t one = 1;

	__madvx_sys_write(a->efd, &one, sizeof(one));
}

#ifdef MADVX_HAVE_LIBURING
/* The io_uring backend's report (iouring.h): @slot's batch is fully credited. */
static void uring_slot_done(void *ctx, uint32_t slot)
{
	struct madvx_async *a = ctx;
	struct madvx_ticket_slot *s = &a->slots[slot];

	s->result = __madvx_batch_complete(s->b);
	s->state = SLOT_DONE;
	pthread_cond_broadcast(&a->done_cv);
	signal_efd(a);
}
#endif

/* ---- the worker thread ---- */

static void *worker_main(void *arg)
{
	struct madvx_async *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct madvx_ticket_slot *s;
		uint32_t slot;
		int ret;

		while (!a->qlen && !a->stop)
			pthread_cond_wait(&a->work_cv, &a->lock);
		if (!a->qlen)
			break;
		slot = a->queue[a->qhead];
		a->qhead = (a->qhead + 1) % a->nslots;
		a->qlen--;
		s = &a->slots[slot];
		pthread_mutex_unlock(&a->lock);

		/* The batch is ours until SLOT_DONE: the caller may not touch it. */
		ret = madvx_batch_flush(s->b);

		pthread_mutex_lock(&a->lock);
		s->result = ret;
		s->state = SLOT_DONE;
		pthread_cond_broadcast(&a->done_cv);
		signal_efd(a);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

static int start_worker(struct madvx_async *a)
{
	sigset_t all, old;
	pthread_attr_t attr;
	int ret;

	ret = pthread_attr_init(&attr);
	if (ret)
		return -ret;
	/* Small stack: the flush keeps its state in the batch, not on the stack. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* The caller's signal handlers must not run on our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&a->thread, &attr, worker_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret)
		return -ret;
	pthread_setname_np(a->thread, "madvx-async");
	a->have_thread = true;
	return 0;
}

/* ---- create / free ---- */

/* @sync_objects: destroy the mutex and conditions (not in a forked child: a copied waiter would block it). */
static void async_release(struct madvx_async *a, bool sync_objects)
{
#ifdef MADVX_HAVE_LIBURING
	if (a->uring)
		__madvx_uring_free(a->uring);
	a->uring = NULL;
#endif
	if (a->efd >= 0)
		__madvx_sys_close(a->efd);
	if (sync_objects) {
		pthread_cond_destroy(&a->work_cv);
		pthread_cond_destroy(&a->done_cv);
		pthread_mutex_destroy(&a->lock);
	}
	free(a->queue);
	free(a->slots);
	free(a);
}

MADVX_API int madvx_async_create(const struct madvx_async_opts *opts,
				 struct madvx_async **out)
{
	struct madvx_async_opts o = { .size = sizeof(o) };
	struct madvx_async *a;
	int e = errno, ret;

	if (!out)
		return -EINVAL;
	if (opts) {
		ret = madvx_opts_in(&o, sizeof(o), opts,
				    offsetof(struct madvx_async_opts, max_tickets));
		if (ret)
			return ret;
	}
	if (o.__reserved0)	/* named padding: a future field, zero today */
		return -E2BIG;
	if ((unsigned int)o.backend > MADVX_ASYNC_SYNC || o.max_tickets > MAX_TICKETS)
		return -EINVAL;
	if (o.ring && !o.on_cqe)
		return -EINVAL;
	if (!o.backend)
		o.backend = o.ring ? MADVX_ASYNC_IO_URING : madvx_async_default_backend();
	if (o.backend == MADVX_ASYNC_IO_URING && !io_uring_usable())
		return -EOPNOTSUPP;
	if (o.ring && o.backend != MADVX_ASYNC_IO_URING)
		return -EINVAL;
	if (!o.max_tickets)
		o.max_tickets = DEFAULT_TICKETS;

	a = calloc(1, sizeof(*a));
	if (!a)
		goto nomem;
	a->slots = calloc(o.max_tickets, sizeof(*a->slots));
	a->queue = calloc(o.max_tickets, sizeof(*a->queue));
	if (!a->slots || !a->queue) {
		free(a->slots);
		free(a->queue);
		free(a);
		goto nomem;
	}
	a->backend = o.backend;
	a->nslots = o.max_tickets;
	a->gen = __madvx_proc_gen();
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->done_cv, NULL);
	pthread_cond_init(&a->work_cv, NULL);
	a->efd = __madvx_sys_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->efd < 0) {
		ret = a->efd;
		goto fail;
	}
	ret = 0;
	if (a->backend == MADVX_ASYNC_THREAD)
		ret = start_worker(a);
#ifdef MADVX_HAVE_LIBURING
	else if (a->backend == MADVX_ASYNC_IO_URING)
		ret = __madvx_uring_create(&a->uring, &o, a->nslots, a->efd,
					   uring_slot_done, a);
#endif
	if (ret)
		goto fail;
	/* Decide the probe now, outside the caller's hot paths. */
	__madvx_probe();
	errno = e;
	*out = a;
	return 0;

fail:
	async_release(a, true);
	errno = e;
	return ret;
nomem:
	errno = e;
	return -ENOMEM;
}

/*
 * After fork() the child has no worker thread, shares the parent's ring and
 * may hold a copy of a locked mutex: every call there fails with -ECHILD
 * instead of hanging, and free only releases the child's copies.
 */
static bool forked(const struct madvx_async *a)
{
	return __madvx_proc_gen() != a->gen;
}

static bool any_queued(const struct madvx_async *a)
{
	for (uint32_t i = 0; i < a->nslots; i++)
		if (a->slots[i].state == SLOT_QUEUED)
			return true;
	return false;
}

MADVX_API void madvx_async_free(struct madvx_async *a)
{
	if (!a)
		return;
	if (forked(a)) {
		async_release(a, false);
		return;
	}
	pthread_mutex_lock(&a->lock);
	/* In-flight submissions complete first: nothing an SQE or the thread uses goes away early. */
	while (any_queued(a)) {
#ifdef MADVX_HAVE_LIBURING
		if (a->backend == MADVX_ASYNC_IO_URING) {
			/*
			 * A ring that cannot be reaped any more: leave. Its
			 * SQEs hold no pointers into our memory (only ranges),
			 * and io_uring_queue_exit() waits for them.
			 */
			if (__madvx_uring_reap(a->uring, true) < 0)
				break;
			continue;
		}
#endif
		pthread_cond_wait(&a->done_cv, &a->lock);
	}
	a->stop = true;
	pthread_cond_signal(&a->work_cv);
	pthread_mutex_unlock(&a->lock);
	if (a->have_thread)
		pthread_join(a->thread, NULL);
	async_release(a, true);
}

/* ---- tickets ---- */

static struct madvx_ticket_slot *ticket_slot(struct madvx_async *a, uint64_t ticket)
{
	uint32_t idx = (uint32_t)ticket, gen = (uint32_t)(ticket >> 32);
	struct madvx_ticket_slot *s;

	if (!idx || idx > a->nslots)
		return NULL;
	s = &a->slots[idx - 1];
	if (s->state == SLOT_FREE || s->gen != gen)
		return NULL;
	return s;
}

MADVX_API int madvx_async_submit(struct madvx_async *a, struct madvx_batch *b,
				 uint64_t *ticket)
{
	struct madvx_ticket_slot *s = NULL;
	uint32_t slot = 0;

	if (!a || !b || !ticket)
		return -EINVAL;
	if (forked(a))
		return -ECHILD;
	/* IORING_OP_MADVISE advises the ring owner's memory, never a target's. */
	if (b->target && a->backend == MADVX_ASYNC_IO_URING)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&a->lock);
	for (uint32_t i = 0; i < a->nslots; i++) {
		if (a->slots[i].state == SLOT_FREE) {
			if (!s) {
				s = &a->slots[i];
				slot = i;
			}
		} else if (a->slots[i].b == b) {
			pthread_mutex_unlock(&a->lock);
			return -EALREADY;
		}
	}
	if (!s) {
		pthread_mutex_unlock(&a->lock);
		return -EBUSY;
	}
	if (++s->gen == 0)
		s->gen = 1;
	s->b = b;
	s->state = SLOT_QUEUED;
	s->result = 0;
	*ticket = ((uint64_t)s->gen << 32) | (slot + 1);

	switch (a->backend) {
	case MADVX_ASYNC_THREAD:
		a->queue[(a->qhead + a->qlen) % a->nslots] = slot;
		a->qlen++;
		pthread_cond_signal(&a->work_cv);
		break;
#ifdef MADVX_HAVE_LIBURING
	case MADVX_ASYNC_IO_URING:
		__madvx_uring_submit(a->uring, slot, b);
		break;
#endif
	default:
		s->result = madvx_batch_flush(b);
		s->state = SLOT_DONE;
		signal_efd(a);
		break;
	}
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* Hand a completed ticket's batch back; returns its result. */
static int collect(struct madvx_ticket_slot *s)
{
	int ret = s->result;

	s->state = SLOT_FREE;
	s->b = NULL;
	return ret;
}

MADVX_API int madvx_async_wait(struct madvx_async *a, uint64_t ticket)
{
	struct madvx_ticket_slot *s;
	int ret;

	if (!a)
		return -EINVAL;
	if (forked(a))
		return -ECHILD;
	pthread_mutex_lock(&a->lock);
	s = ticket_slot(a, ticket);
	if (!s) {
		pthread_mutex_unlock(&a->lock);
		return -ENOENT;
	}
	while (s->state != SLOT_DONE) {
#ifdef MADVX_HAVE_LIBURING
		if (a->backend == MADVX_ASYNC_IO_URING) {
			int r = __madvx_uring_reap(a->uring, true);

			/* The ring failed (not a signal): the ticket stays, say why. */
			if (r < 0) {
				pthread_mutex_unlock(&a->lock);
				return r;
			}
			continue;
		}
#endif
		pthread_cond_wait(&a->done_cv, &a->lock);
	}
	ret = collect(s);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

MADVX_API int madvx_async_poll(struct madvx_async *a, uint64_t ticket)
{
	struct madvx_ticket_slot *s;
	uint64_t cnt;
	int ret;

	if (!a)
		return -EINVAL;
	if (forked(a))
		return -ECHILD;
	pthread_mutex_lock(&a->lock);
	/* Drain first: a completion after this point signals it again. */
	__madvx_sys_read(a->efd, &cnt, sizeof(cnt));
#ifdef MADVX_HAVE_LIBURING
	if (a->backend == MADVX_ASYNC_IO_URING)
		__madvx_uring_reap(a->uring, false);
#endif
	s = ticket_slot(a, ticket);
	if (!s)
		ret = -ENOENT;
	else if (s->state != SLOT_DONE)
		ret = -EINPROGRESS;
	else
		ret = collect(s);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

MADVX_API int madvx_async_eventfd(struct madvx_async *a)
{
	if (!a)
		return -EINVAL;
#ifdef MADVX_HAVE_LIBURING
	if (a->backend == MADVX_ASYNC_IO_URING && __madvx_uring_caller_ring(a->uring))
		return -EOPNOTSUPP;
#endif
	return a->efd;
}

MADVX_API int madvx_async_cqe(struct madvx_async *a, uint64_t user_data, int32_t res)
{
	int ret = 0;

	if (!a)
		return -EINVAL;
	if (forked(a))
		return -ECHILD;
#ifdef MADVX_HAVE_LIBURING
	if (a->backend == MADVX_ASYNC_IO_URING) {
		pthread_mutex_lock(&a->lock);
		ret = __madvx_uring_cqe(a->uring, user_data, res);
		pthread_mutex_unlock(&a->lock);
	}
#endif
	return ret;
}
