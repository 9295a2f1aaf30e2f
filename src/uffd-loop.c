// SPDX-License-Identifier: MIT
/*
 * userfaultfd events: reading them (with a queue, so that events drained
 * while an op retries -EAGAIN come out first and are never lost), waiting
 * for them, and the fault-handling loop that dispatches them.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "sys.h"
#include "uffd.h"

/* ---------------------------------------------------------------------- */
/* Events                                                                  */
/* ---------------------------------------------------------------------- */

static void decode(const struct uffd_msg *m, struct madvx_uffd_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = m->event;
	switch (m->event) {
	case UFFD_EVENT_PAGEFAULT:
		ev->arg.fault.flags = m->arg.pagefault.flags;
		ev->arg.fault.addr = m->arg.pagefault.address;
		ev->arg.fault.tid = m->arg.pagefault.feat.ptid;
		break;
	case UFFD_EVENT_FORK:
		ev->arg.fork.fd = (int)m->arg.fork.ufd;
		break;
	case UFFD_EVENT_REMAP:
		ev->arg.remap.from = m->arg.remap.from;
		ev->arg.remap.to = m->arg.remap.to;
		ev->arg.remap.len = m->arg.remap.len;
		break;
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		ev->arg.remove.start = m->arg.remove.start;
		ev->arg.remove.end = m->arg.remove.end;
		break;
	default:
		break;
	}
}

#define READ_CHUNK 64

/*
 * Read what the fd has now, up to @max events, without blocking (the fd is
 * O_NONBLOCK). Returns the number read, 0 when none, or -errno. Called with
 * u->lock held, so that queued events always come out before newer ones.
 */
static int read_now_locked(struct madvx_uffd *u, struct madvx_uffd_event *ev, size_t max)
{
	struct uffd_msg msg[READ_CHUNK];
	size_t want = max < READ_CHUNK ? max : READ_CHUNK;
	long n;

	n = __madvx_sys_read(u->fd, msg, want * sizeof(msg[0]));
	if (n == -EAGAIN || n == -EINTR)
		return 0;
	if (n < 0)
		return (int)n;
	n /= (long)sizeof(msg[0]);
	for (long i = 0; i < n; i++) {
		decode(&msg[i], &ev[i]);
		if (ev[i].type == MADVX_UFFD_EVENT_PAGEFAULT)
			CNT_ADD(u, n_faults, 1);
	}
	CNT_ADD(u, n_events, (uint64_t)n);
	return (int)n;
}

static void evfd_signal(struct madvx_uffd *u)
{
	uint64_t one = 1;

	__madvx_sys_write(u->evfd, &one, sizeof(one));
}

static void evfd_reset(struct madvx_uffd *u)
{
	uint64_t v;

	__madvx_sys_read(u->evfd, &v, sizeof(v));
}

/*
 * Events the queue can still take. The ring is allocated once, at open, and
 * never grown: the list ops (uffd-ops.c) drain into it and must not malloc.
 */
static size_t queue_room_locked(const struct madvx_uffd *u)
{
	return QUEUE_CAP - u->qlen;
}

static void queue_push_locked(struct madvx_uffd *u, const struct madvx_uffd_event *ev,
			      size_t n)
{
	for (size_t i = 0; i < n; i++)
		u->q[(u->qhead + u->qlen + i) % QUEUE_CAP] = ev[i];
	u->qlen += n;
}

static size_t queue_pop_locked(struct madvx_uffd *u, struct madvx_uffd_event *ev, size_t max)
{
	size_t n = u->qlen < max ? u->qlen : max;

	for (size_t i = 0; i < n; i++)
		ev[i] = u->q[(u->qhead + i) % QUEUE_CAP];
	if (n) {
		u->qhead = (u->qhead + n) % QUEUE_CAP;
		u->qlen -= n;
	}
	return n;
}

MADVX_API int madvx_uffd_drain(struct madvx_uffd *u, int timeout_ms)
{
	struct madvx_uffd_event ev[READ_CHUNK];
	struct pollfd p;
	int total = 0, n, ret = 0;

	if (!u)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (timeout_ms) {
		p = (struct pollfd){ .fd = u->fd, .events = POLLIN };
		ret = __madvx_sys_poll(&p, 1, timeout_ms);
		if (ret < 0 && ret != -EINTR)
			return ret;
	}
	pthread_mutex_lock(&u->lock);
	for (;;) {
		size_t room = queue_room_locked(u);

		if (!room) {
			/* Full: what is left stays in the kernel, nothing is lost. */
			ret = total ? 0 : -ENOSPC;
			break;
		}
		n = read_now_locked(u, ev, room < READ_CHUNK ? room : READ_CHUNK);
		if (n <= 0) {
			ret = n;
			break;
		}
		queue_push_locked(u, ev, (size_t)n);
		total += n;
	}
	if (u->qlen)
		evfd_signal(u);
	pthread_mutex_unlock(&u->lock);
	return ret < 0 ? ret : total;
}

MADVX_API size_t madvx_uffd_pending(struct madvx_uffd *u)
{
	size_t n;

	if (!u || inherited(u))
		return 0;
	pthread_mutex_lock(&u->lock);
	n = u->qlen;
	pthread_mutex_unlock(&u->lock);
	return n;
}

MADVX_API int madvx_uffd_read_events(struct madvx_uffd *u, struct madvx_uffd_event *ev,
				     size_t max, int timeout_ms)
{
	uint64_t deadline = 0;
	int n, ret;

	if (!u || !ev || !max)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (timeout_ms > 0)
		deadline = madvx_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = u->fd, .events = POLLIN },
			{ .fd = u->evfd, .events = POLLIN },
		};
		int wait = timeout_ms;

		if (atomic_load(&u->stop))
			return 0;
		pthread_mutex_lock(&u->lock);
		n = (int)queue_pop_locked(u, ev, max);
		if (!n)
			n = read_now_locked(u, ev, max);
		if (!u->qlen)
			evfd_reset(u);
		pthread_mutex_unlock(&u->lock);
		if (n)
			return n;
		/* The reset may have eaten a stop's wakeup: stop sets the flag first. */
		if (!timeout_ms || atomic_load(&u->stop))
			return 0;
		if (timeout_ms > 0) {
			uint64_t t = madvx_now_ns();

			if (t >= deadline)
				return 0;
			wait = (int)((deadline - t + 999999) / 1000000);
		}
		ret = __madvx_sys_poll(p, 2, wait);
		if (ret < 0)
			return ret;
	}
}

static int dispatch(struct madvx_uffd *u, const struct madvx_uffd_handler *h,
		    const struct madvx_uffd_event *ev)
{
	if (ev->type == MADVX_UFFD_EVENT_PAGEFAULT)
		return h->fault(u, ev, h->arg);
	if (h->event)
		return h->event(u, ev, h->arg);
	if (ev->type == MADVX_UFFD_EVENT_FORK)
		__madvx_sys_close(ev->arg.fork.fd);
	return 0;
}

MADVX_API int madvx_uffd_handle(struct madvx_uffd *u, const struct madvx_uffd_handler *h,
				int timeout_ms)
{
	struct madvx_uffd_event ev[READ_CHUNK];
	struct madvx_uffd_handler hd = { .size = sizeof(hd) };
	size_t batch;
	int n, first = 0;

	if (!u || !h)
		return -EINVAL;
	n = madvx_opts_in(&hd, sizeof(hd), h, offsetof(struct madvx_uffd_handler, arg));
	if (n)
		return n;
	if (!hd.fault)
		return -EINVAL;
	if (hd.__reserved0)
		return -E2BIG;
	batch = hd.batch ? hd.batch : READ_CHUNK;
	if (batch > READ_CHUNK)
		batch = READ_CHUNK;
	n = madvx_uffd_read_events(u, ev, batch, timeout_ms);
	for (int i = 0; i < n; i++) {
		int ret = dispatch(u, &hd, &ev[i]);

		if (ret < 0 && !first)
			first = ret;
	}
	return first ? first : n;
}

MADVX_API int madvx_uffd_run(struct madvx_uffd *u, const struct madvx_uffd_handler *h)
{
	int ret;

	if (!u)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	while (!atomic_load(&u->stop)) {
		ret = madvx_uffd_handle(u, h, -1);
		if (ret < 0 && ret != -EINTR)
			return ret;
	}
	return 0;
}

MADVX_API int madvx_uffd_stop(struct madvx_uffd *u, int stop)
{
	uint64_t v;

	if (!u)
		return -EINVAL;
	atomic_store(&u->stop, stop != 0);
	if (stop)
		evfd_signal(u);
	else
		__madvx_sys_read(u->evfd, &v, sizeof(v));
	return 0;
}
