// SPDX-License-Identifier: MIT
/*
 * userfaultfd: the home of every userfaultfd call libmadvx makes: the probe,
 * a negotiated fd, operations that report exact progress, move/copy lists
 * coalesced into one ioctl per VMA-bounded run, and event reading with a
 * queue so that events read while retrying an -EAGAIN op are never lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "proc.h"
#include "sys.h"
#include "uffd.h"
#include "vma.h"

#define FEAT(f) (1ULL << (f))

/* close() that leaves errno alone (it can fail with EINTR after closing). */
static void close_keep_errno(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

_Static_assert(MADVX_UFFD_FEATURE_MOVE == UFFD_FEATURE_MOVE &&
	       MADVX_UFFD_FEATURE_POISON == UFFD_FEATURE_POISON &&
	       MADVX_UFFD_FEATURE_WP_ASYNC == UFFD_FEATURE_WP_ASYNC &&
	       MADVX_UFFD_FEATURE_WP_UNPOPULATED == UFFD_FEATURE_WP_UNPOPULATED,
	       "MADVX_UFFD_FEATURE_* are the kernel's values");

/*
 * A userfaultfd as an unprivileged caller gets one: plain first, then
 * UFFD_USER_MODE_ONLY (enough for faults from user space, which is all a GC
 * needs) when vm.unprivileged_userfaultfd=0 refuses the plain one.
 */
static int open_uffd_syscall(bool *user_mode_only, int extra)
{
	int fd = __madvx_sys_userfaultfd(O_CLOEXEC | extra);

	*user_mode_only = false;
	if (fd == -EPERM) {
		fd = __madvx_sys_userfaultfd(O_CLOEXEC | extra | UFFD_USER_MODE_ONLY);
		*user_mode_only = fd >= 0;
	}
	return fd;
}

static int open_uffd_dev(int extra)
{
	int dev = __madvx_sys_open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	int fd;

	if (dev < 0)
		return -ENOENT;
	fd = __madvx_sys_ioctl(dev, USERFAULTFD_IOC_NEW,
			     (void *)(long)(O_CLOEXEC | extra));
	close(dev);
	return fd;
}

/* UFFDIO_API with no features requested answers with all it offers. */
static int uffd_handshake(int fd, struct uffdio_api *api)
{
	*api = (struct uffdio_api){ .api = UFFD_API };
	return __madvx_sys_ioctl(fd, UFFDIO_API, api);
}

static void probe_uffd(struct madvx_probe_found *st)
{
	struct uffdio_api api;
	bool umo = false;
	int fd = -1, dev_fd = -1;

	if (st->disabled & FEAT(MADVX_FEAT_UFFD))
		return;
	fd = open_uffd_syscall(&umo, O_NONBLOCK);
	if (!(st->disabled & FEAT(MADVX_FEAT_UFFD_DEV)))
		dev_fd = open_uffd_dev(O_NONBLOCK);
	if (dev_fd >= 0)
		st->features |= FEAT(MADVX_FEAT_UFFD_DEV);
	if (fd < 0) {
		fd = dev_fd;
		dev_fd = -1;
	}
	if (fd < 0)
		return;

	if (uffd_handshake(fd, &api) == 0) {
		st->features |= FEAT(MADVX_FEAT_UFFD);
		if (umo)
			st->features |= FEAT(MADVX_FEAT_UFFD_USER_MODE_ONLY);
		st->uffd_features = api.features;
		st->uffd_ioctls = api.ioctls;
		if (api.features & UFFD_FEATURE_MOVE)
			st->features |= FEAT(MADVX_FEAT_UFFD_MOVE);
		if (api.features & UFFD_FEATURE_POISON)
			st->features |= FEAT(MADVX_FEAT_UFFD_POISON);
		if (api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)
			st->features |= FEAT(MADVX_FEAT_UFFD_WP);
		if (api.features & UFFD_FEATURE_WP_ASYNC)
			st->features |= FEAT(MADVX_FEAT_UFFD_WP_ASYNC);
		if (api.features & UFFD_FEATURE_MINOR_SHMEM)
			st->features |= FEAT(MADVX_FEAT_UFFD_MINOR_SHMEM);
	}
	close(fd);
	if (dev_fd >= 0)
		close(dev_fd);
}

void __madvx_uffd_probe_once(void)
{
	__madvx_probe_group(MADVX_PG_UFFD, probe_uffd);
}

/* ---------------------------------------------------------------------- */
/* The handle                                                              */
/* ---------------------------------------------------------------------- */

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
static bool inherited(const struct madvx_uffd *u)
{
	return __madvx_proc_gen() != u->gen;
}

#define CNT_ADD(u, field, v) \
	atomic_fetch_add_explicit(&(u)->field, (v), memory_order_relaxed)

/* Events madvx_uffd_drain() can hold; allocated at open, never grown. */
#define QUEUE_CAP 1024

/* How long MADVX_UFFD_RETRY keeps draining and retrying an -EAGAIN op. */
#define RETRY_NS (2ULL * 1000 * 1000 * 1000)

/* Which MADVX_DISABLE names take which UFFD_FEATURE_* bits away. */
static uint64_t disabled_uffd_features(const struct madvx_probe_state *st)
{
	uint64_t off = 0;

	if (st->disabled & FEAT(MADVX_FEAT_UFFD_MOVE))
		off |= UFFD_FEATURE_MOVE;
	if (st->disabled & FEAT(MADVX_FEAT_UFFD_POISON))
		off |= UFFD_FEATURE_POISON;
	if (st->disabled & FEAT(MADVX_FEAT_UFFD_WP))
		off |= UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_HUGETLBFS_SHMEM |
		       UFFD_FEATURE_WP_UNPOPULATED | UFFD_FEATURE_WP_ASYNC;
	if (st->disabled & FEAT(MADVX_FEAT_UFFD_WP_ASYNC))
		off |= UFFD_FEATURE_WP_ASYNC;
	if (st->disabled & FEAT(MADVX_FEAT_UFFD_MINOR_SHMEM))
		off |= UFFD_FEATURE_MINOR_SHMEM;
	return off;
}

MADVX_API uint64_t madvx_uffd_missing_features(uint64_t features)
{
	const struct madvx_probe_state *st = __madvx_probe();
	uint64_t have;

	__madvx_uffd_probe_once();
	if (!madvx_has(MADVX_FEAT_UFFD))
		return features;
	have = st->uffd_features & ~disabled_uffd_features(st);
	return features & ~have;
}

static int open_fd(unsigned int flags, bool *umo)
{
	const struct madvx_probe_state *st = __madvx_probe();
	/*
	 * Always non-blocking: a blocking userfaultfd answers poll() with
	 * POLLERR (fs/userfaultfd.c userfaultfd_poll()), so it could never sit
	 * in a poll/epoll loop, and a read() could sleep under our lock.
	 * Blocking waits are madvx_uffd_read_events(.., -1) instead.
	 */
	int extra = O_NONBLOCK;
	bool may_umo = !(flags & MADVX_UFFD_KERNEL_FAULTS) &&
		       !(st->disabled & FEAT(MADVX_FEAT_UFFD_USER_MODE_ONLY));
	int fd;

	*umo = false;
	if (flags & MADVX_UFFD_USER_MODE_ONLY) {
		fd = __madvx_sys_userfaultfd(O_CLOEXEC | extra | UFFD_USER_MODE_ONLY);
		*umo = fd >= 0;
		return fd;
	}
	fd = __madvx_sys_userfaultfd(O_CLOEXEC | extra);
	if (fd == -EPERM && may_umo) {
		fd = __madvx_sys_userfaultfd(O_CLOEXEC | extra | UFFD_USER_MODE_ONLY);
		*umo = fd >= 0;
	}
	/* The device node serves kernel-mode faults to whoever may open it. */
	if ((fd == -EPERM || fd == -ENOSYS) &&
	    !(st->disabled & FEAT(MADVX_FEAT_UFFD_DEV))) {
		int dfd = open_uffd_dev(extra);

		if (dfd >= 0) {
			*umo = false;
			fd = dfd;
		}
	}
	return fd;
}

/* Options structs grow at the end: a larger caller struct must be zero past ours. */
static int check_opts(const struct madvx_uffd_opts *o)
{
	size_t min = offsetof(struct madvx_uffd_opts, flags) + sizeof(o->flags);

	if (o->size < min)
		return -EINVAL;
	for (size_t i = sizeof(*o); i < o->size; i++)
		if (((const uint8_t *)o)[i])
			return -E2BIG;
	/* The named padding is a field of tomorrow: it must be zero today. */
	if (o->size >= offsetof(struct madvx_uffd_opts, __reserved0) + sizeof(o->__reserved0) &&
	    o->__reserved0)
		return -E2BIG;
	if (o->flags & ~(MADVX_UFFD_USER_MODE_ONLY | MADVX_UFFD_KERNEL_FAULTS))
		return -EINVAL;
	if ((o->flags & MADVX_UFFD_USER_MODE_ONLY) && (o->flags & MADVX_UFFD_KERNEL_FAULTS))
		return -EINVAL;
	return 0;
}

/* calloc() and close() may set errno; the library's callers keep theirs. */
static int uffd_open(const struct madvx_uffd_opts *opts, struct madvx_uffd **out);

MADVX_API int madvx_uffd_open(const struct madvx_uffd_opts *opts,
			      struct madvx_uffd **out)
{
	int e = errno, ret = uffd_open(opts, out);

	errno = e;
	return ret;
}

static int uffd_open(const struct madvx_uffd_opts *opts, struct madvx_uffd **out)
{
	struct madvx_uffd_opts o = { .size = sizeof(o) };
	struct uffdio_api api = { .api = UFFD_API };
	struct madvx_uffd *u;
	uint64_t want;
	bool umo;
	int fd, ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts) {
		ret = check_opts(opts);
		if (ret)
			return ret;
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	}
	if (__madvx_probe()->disabled & FEAT(MADVX_FEAT_UFFD))
		return -ENOSYS;
	if (madvx_uffd_missing_features(o.features))
		return -EOPNOTSUPP;

	fd = open_fd(o.flags, &umo);
	if (fd < 0)
		return fd;
	/* The kernel answers with all it has; what is enabled is what we ask for. */
	api.features = o.features |
		(o.optional_features & ~madvx_uffd_missing_features(o.optional_features));
	want = api.features;
	ret = __madvx_sys_ioctl(fd, UFFDIO_API, &api);
	if (ret) {
		close(fd);
		return ret;
	}

	u = calloc(1, sizeof(*u));
	if (!u) {
		close(fd);
		return -ENOMEM;
	}
	u->fd = fd;
	u->evfd = u->epfd = -1;
	u->user_mode_only = umo;
	u->features = want;
	u->gen = __madvx_proc_gen();
	pthread_mutex_init(&u->lock, NULL);
	u->q = calloc(QUEUE_CAP, sizeof(*u->q));
	if (!u->q) {
		madvx_uffd_free(u);
		return -ENOMEM;
	}
	ret = u->evfd = __madvx_sys_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ret >= 0)
		ret = u->epfd = __madvx_sys_epoll_create1(EPOLL_CLOEXEC);
	if (ret >= 0)
		ret = __madvx_sys_epoll_add(u->epfd, u->fd, EPOLLIN);
	if (ret >= 0)
		ret = __madvx_sys_epoll_add(u->epfd, u->evfd, EPOLLIN);
	if (ret < 0) {
		madvx_uffd_free(u);
		return ret;
	}
	*out = u;
	return 0;
}

MADVX_API void madvx_uffd_free(struct madvx_uffd *u)
{
	int e = errno;

	if (!u)
		return;
	for (size_t i = 0; i < u->qlen; i++) {
		const struct madvx_uffd_event *ev = &u->q[(u->qhead + i) % QUEUE_CAP];

		if (ev->type == MADVX_UFFD_EVENT_FORK && ev->arg.fork.fd >= 0)
			close(ev->arg.fork.fd);
	}
	free(u->q);
	if (u->epfd >= 0)
		close(u->epfd);
	if (u->evfd >= 0)
		close(u->evfd);
	close(u->fd);
	/* A child's copy of the mutex may be locked by a thread it does not have. */
	if (!inherited(u))
		pthread_mutex_destroy(&u->lock);
	free(u);
	errno = e;
}

MADVX_API int madvx_uffd_fd(const struct madvx_uffd *u)
{
	return u ? u->fd : -EINVAL;
}

MADVX_API int madvx_uffd_poll_fd(const struct madvx_uffd *u)
{
	return u ? u->epfd : -EINVAL;
}

MADVX_API uint64_t madvx_uffd_features(const struct madvx_uffd *u)
{
	return u ? u->features : 0;
}

MADVX_API int madvx_uffd_user_mode_only(const struct madvx_uffd *u)
{
	return u ? u->user_mode_only : -EINVAL;
}

MADVX_API int madvx_uffd_stats_get(const struct madvx_uffd *u, struct madvx_uffd_stats *st)
{
	struct madvx_uffd_stats s = { .size = sizeof(s) };

	if (!u || !st || st->size < sizeof(size_t))
		return -EINVAL;
	s.ioctls = atomic_load(&u->n_ioctls);
	s.bytes = atomic_load(&u->n_bytes);
	s.existed = atomic_load(&u->n_existed);
	s.eagain = atomic_load(&u->n_eagain);
	s.events = atomic_load(&u->n_events);
	s.faults = atomic_load(&u->n_faults);
	s.vma_splits = atomic_load(&u->n_splits);
	memcpy((uint8_t *)st + sizeof(size_t), (uint8_t *)&s + sizeof(size_t),
	       (st->size < sizeof(s) ? st->size : sizeof(s)) - sizeof(size_t));
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/*
 * MINOR faults exist only for page-cache backed memory (shmem, hugetlbfs);
 * the kernel answers a bare -EINVAL for anonymous memory, which reads like a
 * bad argument. Ask PROCMAP_QUERY first so the caller gets -EOPNOTSUPP.
 * Returns 1 when some VMA in the range is anonymous, 0 when none is or when
 * we cannot tell (the kernel then decides).
 */
static int range_has_anon_vma(uint64_t addr, uint64_t len)
{
	struct procmap_query q;
	uint64_t end = addr + len;
	int fd, anon = 0;

	if (!madvx_has(MADVX_FEAT_PROCMAP_QUERY))
		return 0;
	fd = __madvx_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (addr < end) {
		q = (struct procmap_query){ .size = sizeof(q), .query_addr = addr };
		if (__madvx_sys_ioctl(fd, PROCMAP_QUERY, &q))
			break;		/* hole: the kernel says -EINVAL */
		/* Anonymous memory has no inode; shmem (even MAP_ANONYMOUS|MAP_SHARED) has. */
		if (!q.inode) {
			anon = 1;
			break;
		}
		addr = q.vma_end;
	}
	close_keep_errno(fd);
	return anon;
}

MADVX_API int madvx_uffd_register(struct madvx_uffd *u, uint64_t addr,
				  uint64_t len, unsigned int mode, uint64_t *ioctls)
{
	struct uffdio_register reg = {
		.range = { .start = addr, .len = len },
		.mode = mode,
	};
	int ret;

	if (!u || !mode || (mode & ~(MADVX_UFFD_MISSING | MADVX_UFFD_WP | MADVX_UFFD_MINOR)))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if ((mode & MADVX_UFFD_WP) && !(u->features & UFFD_FEATURE_PAGEFAULT_FLAG_WP))
		return -EOPNOTSUPP;
	if (mode & MADVX_UFFD_MINOR) {
		if (!(u->features & (UFFD_FEATURE_MINOR_SHMEM | UFFD_FEATURE_MINOR_HUGETLBFS)))
			return -EOPNOTSUPP;
		if (range_has_anon_vma(addr, len))
			return -EOPNOTSUPP;
	}
	ret = __madvx_sys_ioctl(u->fd, UFFDIO_REGISTER, &reg);
	if (!ret && ioctls)
		*ioctls = reg.ioctls;
	return ret;
}

MADVX_API int madvx_uffd_unregister(struct madvx_uffd *u, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = { .start = addr, .len = len };

	if (!u)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	return __madvx_sys_ioctl(u->fd, UFFDIO_UNREGISTER, &r);
}

/* ---------------------------------------------------------------------- */
/* Operations with exact progress                                          */
/* ---------------------------------------------------------------------- */

enum uffd_op { OP_COPY, OP_ZEROPAGE, OP_MOVE, OP_CONTINUE, OP_POISON };

/*
 * One ioctl. Returns the bytes it resolved from @dst (> 0) or -errno for
 * the page at @dst. The kernel writes its progress field (copy, move, ...)
 * with either, and answers -EAGAIN for a short but positive result; errors
 * found before it starts (bad range) leave the field alone, so it starts at 0
 * and the ioctl's own answer counts then.
 */
static int64_t op_ioctl(struct madvx_uffd *u, enum uffd_op op, uint64_t dst,
			uint64_t src, uint64_t len, unsigned int flags)
{
	union {
		struct uffdio_copy copy;
		struct uffdio_zeropage zero;
		struct uffdio_move move;
		struct uffdio_continue cont;
		struct uffdio_poison poison;
	} a;
	bool dontwake = flags & MADVX_UFFD_DONTWAKE;
	unsigned long req;
	__s64 *progress;
	int ret;

	switch (op) {
	case OP_COPY:
		a.copy = (struct uffdio_copy){ .dst = dst, .src = src, .len = len,
			.mode = (dontwake ? UFFDIO_COPY_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_COPY_MODE_WP : 0) };
		progress = &a.copy.copy;
		req = UFFDIO_COPY;
		break;
	case OP_ZEROPAGE:
		a.zero = (struct uffdio_zeropage){ .range = { dst, len },
			.mode = dontwake ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0 };
		progress = &a.zero.zeropage;
		req = UFFDIO_ZEROPAGE;
		break;
	case OP_MOVE:
		a.move = (struct uffdio_move){ .dst = dst, .src = src, .len = len,
			.mode = (dontwake ? UFFDIO_MOVE_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_ALLOW_SRC_HOLES) ?
				 UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES : 0) };
		progress = &a.move.move;
		req = UFFDIO_MOVE;
		break;
	case OP_CONTINUE:
		a.cont = (struct uffdio_continue){ .range = { dst, len },
			.mode = (dontwake ? UFFDIO_CONTINUE_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_CONTINUE_MODE_WP : 0) };
		progress = &a.cont.mapped;
		req = UFFDIO_CONTINUE;
		break;
	case OP_POISON:
	default:
		a.poison = (struct uffdio_poison){ .range = { dst, len },
			.mode = dontwake ? UFFDIO_POISON_MODE_DONTWAKE : 0 };
		progress = &a.poison.updated;
		req = UFFDIO_POISON;
		break;
	}
	*progress = 0;
	ret = __madvx_sys_ioctl(u->fd, req, &a);
	CNT_ADD(u, n_ioctls, 1);
	if (!ret)
		return (int64_t)len;
	if (*progress)
		return *progress;
	return ret;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * MADVX_UFFD_RETRY: the op met mmap_changing. Read the pending events into
 * the queue (which ends mmap_changing once the event is read), or give the
 * thread that is about to queue it, or another reader, a moment. True while
 * the retry budget that started at *@t0 lasts.
 */
static bool retry_eagain(struct madvx_uffd *u, unsigned int flags, uint64_t *t0)
{
	if (!(flags & MADVX_UFFD_RETRY))
		return false;
	if (!*t0)
		*t0 = now_ns();
	else if (now_ns() - *t0 > RETRY_NS)
		return false;
	madvx_uffd_drain(u, 1);
	return true;
}

/*
 * Where one ioctl may end when it starts at @dst (and @src): the end of the
 * VMA around each, so that the op stays inside one VMA on both sides. When
 * the bounds are unknown (lookup failed, unmapped) the kernel decides.
 */
static uint64_t vma_limit(struct madvx_uffd *u, struct madvx_vma_cache *c,
			  uint64_t dst, uint64_t src, bool has_src, uint64_t end)
{
	struct madvx_vma v;
	uint64_t lim = end;

	if (!c)
		return end;
	if (__madvx_vma_find(c, dst, &v) == 0 && v.start <= dst && v.end < lim)
		lim = v.end;
	if (has_src && __madvx_vma_find(c, src, &v) == 0 && v.start <= src &&
	    v.end - src < lim - dst)
		lim = dst + (v.end - src);
	if (lim < end)
		CNT_ADD(u, n_splits, 1);
	return lim;
}

/* A run: items contiguous on both sides, in dst order, being worked through. */
struct run {
	struct madvx_uffd_item *items;	/* sorted by dst */
	size_t first, last;	/* the run is items[first..last] */
	size_t cur;		/* the item at the cursor */
	uint64_t off;		/* cursor offset inside it */
	size_t first_err;	/* first item that failed, SIZE_MAX if none */
};

static struct madvx_uffd_item *run_item(struct run *r)
{
	return &r->items[r->cur];
}

/* Credit @bytes at the cursor to the items they fall in. */
static void run_credit(struct run *r, uint64_t bytes, bool existed)
{
	while (bytes && r->cur <= r->last) {
		struct madvx_uffd_item *it = run_item(r);
		uint64_t take = it->len - r->off;

		if (take > bytes)
			take = bytes;
		it->done += take;
		if (existed)
			it->existed += take;
		r->off += take;
		bytes -= take;
		if (r->off == it->len) {
			r->cur++;
			r->off = 0;
		}
	}
}

/* The item at the cursor failed: give it @err and move to the next one. */
static uint64_t run_fail(struct run *r, int err)
{
	struct madvx_uffd_item *it = run_item(r);
	uint64_t skip = it->len - r->off;

	it->err = err;
	if (r->cur < r->first_err)
		r->first_err = r->cur;
	r->cur++;
	r->off = 0;
	return skip;
}

static bool fatal_err(int err)
{
	return err == -EAGAIN || err == -ENOMEM || err == -ESRCH || err == -EINTR;
}

/*
 * Work through one run, one ioctl per stretch that stays in one VMA. EEXIST
 * pages are credited as present (their waiters woken) and skipped. Returns
 * 0, or a fatal -errno that must end the whole call.
 */
static int run_op(struct madvx_uffd *u, enum uffd_op op, struct run *r,
		  struct madvx_vma_cache *vc, unsigned int flags)
{
	const struct madvx_uffd_item *head = run_item(r);
	uint64_t dst0 = head->dst, src0 = head->src, pos = head->dst, seg_end = pos;
	uint64_t page = madvx_page_size(), t0 = 0, end;
	bool has_src = op == OP_COPY || op == OP_MOVE;

	r->off = 0;
	end = r->items[r->last].dst + r->items[r->last].len;
	while (pos < end) {
		uint64_t src = src0 + (pos - dst0);
		int64_t n;

		if (pos >= seg_end)
			seg_end = vma_limit(u, vc, pos, src, has_src, end);
		n = op_ioctl(u, op, pos, src, seg_end - pos, flags);
		if (n > 0) {
			CNT_ADD(u, n_bytes, (uint64_t)n);
			run_credit(r, (uint64_t)n, false);
			pos += (uint64_t)n;
			continue;
		}
		if (n == -EEXIST && !(flags & MADVX_UFFD_EEXIST_STOP)) {
			/* Someone else resolved it: its waiters may still sleep. */
			if (!(flags & MADVX_UFFD_DONTWAKE))
				madvx_uffd_wake(u, pos, page);
			CNT_ADD(u, n_existed, page);
			run_credit(r, page, true);
			pos += page;
			continue;
		}
		if (n == -EAGAIN) {
			CNT_ADD(u, n_eagain, 1);
			if (retry_eagain(u, flags, &t0))
				continue;
		}
		if (fatal_err((int)n)) {
			run_item(r)->err = (int)n;
			if (r->cur < r->first_err)
				r->first_err = r->cur;
			return (int)n;
		}
		pos += run_fail(r, (int)n);
		seg_end = pos;	/* bounds are looked up again for the next item */
	}
	return 0;
}

/* The flags each operation takes; anything else is -EINVAL, not ignored. */
static unsigned int op_flags(enum uffd_op op)
{
	unsigned int common = MADVX_UFFD_DONTWAKE | MADVX_UFFD_EEXIST_STOP | MADVX_UFFD_RETRY;

	switch (op) {
	case OP_COPY:
	case OP_CONTINUE:
		return common | MADVX_UFFD_MAP_WP;
	case OP_MOVE:
		return common | MADVX_UFFD_ALLOW_SRC_HOLES;
	default:
		return common;
	}
}

static int single_op(struct madvx_uffd *u, enum uffd_op op, uint64_t dst,
		     uint64_t src, uint64_t len, unsigned int flags, uint64_t *done)
{
	struct madvx_uffd_item it = { .dst = dst, .src = src, .len = len };
	struct run r = { .items = &it, .first_err = SIZE_MAX };
	uint64_t mask = madvx_page_size() - 1;

	if (done)
		*done = 0;
	if (!u || (flags & ~op_flags(op)))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (!len)
		return 0;
	/* COPY reads its source at any alignment; MOVE moves whole pages. */
	if ((dst | len) & mask || (op == OP_MOVE && (src & mask)) || dst + len < dst)
		return -EINVAL;
	run_op(u, op, &r, NULL, flags);
	if (done)
		*done = it.done;
	return it.err;
}

MADVX_API int madvx_uffd_copy(struct madvx_uffd *u, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_COPY, dst, src, len, flags, done);
}

MADVX_API int madvx_uffd_zeropage(struct madvx_uffd *u, uint64_t dst,
				  uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_ZEROPAGE, dst, 0, len, flags, done);
}

MADVX_API int madvx_uffd_move(struct madvx_uffd *u, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_MOVE, dst, src, len, flags, done);
}

MADVX_API int madvx_uffd_continue(struct madvx_uffd *u, uint64_t addr,
				  uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_CONTINUE, addr, 0, len, flags, done);
}

MADVX_API int madvx_uffd_poison(struct madvx_uffd *u, uint64_t addr,
				uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_POISON, addr, 0, len, flags, done);
}

MADVX_API int madvx_uffd_writeprotect(struct madvx_uffd *u, uint64_t addr,
				      uint64_t len, unsigned int flags)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = addr, .len = len },
		.mode = ((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
			((flags & MADVX_UFFD_DONTWAKE) ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0),
	};
	uint64_t t0 = 0;
	int ret;

	if (!u || flags & ~(MADVX_UFFD_DONTWAKE | MADVX_UFFD_MAP_WP | MADVX_UFFD_RETRY))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	for (;;) {
		ret = __madvx_sys_ioctl(u->fd, UFFDIO_WRITEPROTECT, &wp);
		CNT_ADD(u, n_ioctls, 1);
		if (ret != -EAGAIN)
			break;
		CNT_ADD(u, n_eagain, 1);
		if (!retry_eagain(u, flags, &t0))
			break;
	}
	if (!ret)
		CNT_ADD(u, n_bytes, len);
	return ret;
}

MADVX_API int madvx_uffd_wake(struct madvx_uffd *u, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = { .start = addr, .len = len };

	if (!u)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	CNT_ADD(u, n_ioctls, 1);
	return __madvx_sys_ioctl(u->fd, UFFDIO_WAKE, &r);
}

/* ---------------------------------------------------------------------- */
/* Move / copy lists                                                       */
/* ---------------------------------------------------------------------- */

/*
 * Nothing on the list paths allocates: a thread that fork()s holds the
 * malloc locks while the kernel makes it wait for its FORK event to be read,
 * so a GC thread that needs to drain that event must not call malloc. Items
 * are therefore sorted in place (heapsort: no buffer, unlike qsort()).
 */
static bool item_before(const struct madvx_uffd_item *a, const struct madvx_uffd_item *b)
{
	return a->dst < b->dst || (a->dst == b->dst && a->src < b->src);
}

static void sift_down(struct madvx_uffd_item *it, size_t root, size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;
		struct madvx_uffd_item tmp;

		if (child >= n)
			return;
		if (child + 1 < n && item_before(&it[child], &it[child + 1]))
			child++;
		if (!item_before(&it[root], &it[child]))
			return;
		tmp = it[root];
		it[root] = it[child];
		it[child] = tmp;
		root = child;
	}
}

static void sort_items(struct madvx_uffd_item *it, size_t n)
{
	size_t i;

	for (i = n / 2; i-- > 0;)
		sift_down(it, i, n);
	for (i = n; i-- > 1;) {
		struct madvx_uffd_item tmp = it[0];

		it[0] = it[i];
		it[i] = tmp;
		sift_down(it, 0, i);
	}
}

/*
 * Every item is touched as few times as possible (a GC hands in tens of
 * thousands of 4 KiB items): one pass validates, resets the results and
 * notices whether the items are already in dst order (the usual plan), one
 * pass coalesces and issues, and the first failed item is tracked on the way.
 */
static int list_op(struct madvx_uffd *u, enum uffd_op op,
		   struct madvx_uffd_item *items, size_t count, unsigned int flags)
{
	uint64_t mask = madvx_page_size() - 1;
	struct madvx_vma_cache vc;
	size_t first = SIZE_MAX;
	bool sorted = true;
	int fatal = 0;

	if (!u || (!items && count) || (flags & ~op_flags(op)))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (!count)
		return 0;
	vc.queries = 0;
	madvx_vma_cache_reset(&vc);	/* no memset: 2.5 KiB we mostly never read */
	for (size_t i = 0; i < count; i++) {
		struct madvx_uffd_item *it = &items[i];

		it->done = it->existed = 0;
		it->err = 0;
		if ((it->dst | it->len | (op == OP_MOVE ? it->src : 0)) & mask ||
		    it->dst + it->len < it->dst || it->src + it->len < it->src)
			it->err = -EINVAL;
		if (i && item_before(it, it - 1))
			sorted = false;
	}
	if (!sorted)
		sort_items(items, count);

	for (size_t i = 0; i < count && !fatal;) {
		struct run r = { .items = items, .first = i, .cur = i, .first_err = SIZE_MAX };
		size_t j = i;

		if (items[i].err || !items[i].len) {
			if (items[i].err && i < first)
				first = i;
			i++;
			continue;
		}
		/* Coalesce while the next item continues this one on both sides. */
		while (j + 1 < count) {
			const struct madvx_uffd_item *a = &items[j], *b = &items[j + 1];

			if (b->err || !b->len || b->dst != a->dst + a->len ||
			    b->src != a->src + a->len)
				break;
			j++;
		}
		r.last = j;
		fatal = run_op(u, op, &r, &vc, flags);
		if (r.first_err < first)
			first = r.first_err;
		if (fatal) {
			/* Everything not finished carries the error that ended the call. */
			for (size_t k = i; k < count; k++) {
				if (items[k].done < items[k].len && !items[k].err)
					items[k].err = fatal;
				if (items[k].err && k < first)
					first = k;
			}
		}
		i = j + 1;
	}
	return first == SIZE_MAX ? 0 : items[first].err;
}

MADVX_API int madvx_uffd_move_list(struct madvx_uffd *u, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags)
{
	return list_op(u, OP_MOVE, items, count, flags);
}

MADVX_API int madvx_uffd_copy_list(struct madvx_uffd *u, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags)
{
	return list_op(u, OP_COPY, items, count, flags);
}

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

/* Room for @n more events? The ring is allocated once, at open: see list_op(). */
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
		deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
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
			uint64_t t = now_ns();

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
		close_keep_errno(ev->arg.fork.fd);
	return 0;
}

MADVX_API int madvx_uffd_handle(struct madvx_uffd *u, const struct madvx_uffd_handler *h,
				int timeout_ms)
{
	struct madvx_uffd_event ev[READ_CHUNK];
	size_t batch;
	int n, first = 0;

	if (!u || !h || h->size < offsetof(struct madvx_uffd_handler, arg) || !h->fault)
		return -EINVAL;
	if (h->size >= offsetof(struct madvx_uffd_handler, __reserved0) + sizeof(h->__reserved0) &&
	    h->__reserved0)
		return -E2BIG;
	batch = h->size >= offsetof(struct madvx_uffd_handler, batch) + sizeof(h->batch) &&
		h->batch ? h->batch : READ_CHUNK;
	if (batch > READ_CHUNK)
		batch = READ_CHUNK;
	n = madvx_uffd_read_events(u, ev, batch, timeout_ms);
	for (int i = 0; i < n; i++) {
		int ret = dispatch(u, h, &ev[i]);

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
