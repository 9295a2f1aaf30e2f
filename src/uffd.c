// SPDX-License-Identifier: MIT
/*
 * userfaultfd: the probe, and the handle - a negotiated fd, its counters
 * and its registrations. Its operations, which report exact progress and
 * coalesce move/copy lists into one ioctl per VMA-bounded run, are in
 * uffd-ops.c; reading events (with a queue, so that events read while an op
 * retries -EAGAIN are never lost) and the fault-handling loop in uffd-loop.c.
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
#include <unistd.h>

#include "probe.h"
#include "proc.h"
#include "sys.h"
#include "uffd.h"
#include "vma.h"

#define FEAT(f) (1ULL << (f))

_Static_assert(MADVX_UFFD_FEATURE_MOVE == UFFD_FEATURE_MOVE &&
	       MADVX_UFFD_FEATURE_POISON == UFFD_FEATURE_POISON &&
	       MADVX_UFFD_FEATURE_WP_ASYNC == UFFD_FEATURE_WP_ASYNC &&
	       MADVX_UFFD_FEATURE_WP_UNPOPULATED == UFFD_FEATURE_WP_UNPOPULATED,
	       "MADVX_UFFD_FEATURE_* are the kernel's values");

/*
 * Every userfaultfd is non-blocking: a blocking one answers poll() with
 * POLLERR (fs/userfaultfd.c userfaultfd_poll()), so it could never sit in a
 * poll/epoll loop, and a read() could sleep under the handle's lock.
 * Blocking waits are madvx_uffd_read_events(.., -1) instead.
 */
#define UFFD_OPEN_FLAGS (O_CLOEXEC | O_NONBLOCK)

/*
 * A userfaultfd from the system call, as an unprivileged caller gets one:
 * plain first, then UFFD_USER_MODE_ONLY (enough for faults from user space,
 * which is all a GC needs) when vm.unprivileged_userfaultfd=0 refuses the
 * plain one and @umo_ok; with MADVX_UFFD_USER_MODE_ONLY in @flags, only that
 * kind. *@umo says which kind it is.
 */
static int open_uffd_syscall(unsigned int flags, bool umo_ok, bool *umo)
{
	int fd = -EPERM;

	*umo = false;
	if (!(flags & MADVX_UFFD_USER_MODE_ONLY))
		fd = __madvx_sys_userfaultfd(UFFD_OPEN_FLAGS);
	if (fd == -EPERM && (umo_ok || (flags & MADVX_UFFD_USER_MODE_ONLY))) {
		fd = __madvx_sys_userfaultfd(UFFD_OPEN_FLAGS | UFFD_USER_MODE_ONLY);
		*umo = fd >= 0;
	}
	return fd;
}

/* The device node (5.11) serves kernel-mode faults to whoever may open it. */
static int open_uffd_dev(void)
{
	int dev = __madvx_sys_open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	int fd;

	if (dev < 0)
		return -ENOENT;
	fd = __madvx_sys_ioctl(dev, USERFAULTFD_IOC_NEW, (void *)(long)UFFD_OPEN_FLAGS);
	__madvx_sys_close(dev);
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
	fd = open_uffd_syscall(0, true, &umo);
	if (!(st->disabled & FEAT(MADVX_FEAT_UFFD_DEV)))
		dev_fd = open_uffd_dev();
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
	bool may_umo = !(flags & MADVX_UFFD_KERNEL_FAULTS) &&
		       !(st->disabled & FEAT(MADVX_FEAT_UFFD_USER_MODE_ONLY));
	int fd = open_uffd_syscall(flags, may_umo, umo);

	if (flags & MADVX_UFFD_USER_MODE_ONLY)
		return fd;
	if ((fd == -EPERM || fd == -ENOSYS) &&
	    !(st->disabled & FEAT(MADVX_FEAT_UFFD_DEV))) {
		int dfd = open_uffd_dev();

		if (dfd >= 0) {
			*umo = false;
			fd = dfd;
		}
	}
	return fd;
}

/* The caller's options over the defaults in @o, checked. */
static int take_opts(struct madvx_uffd_opts *o, const struct madvx_uffd_opts *opts)
{
	int ret = madvx_opts_in(o, sizeof(*o), opts,
				offsetof(struct madvx_uffd_opts, flags) + sizeof(o->flags));

	if (ret)
		return ret;
	/* The named padding is a field of tomorrow: it must be zero today. */
	if (o->__reserved0)
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
		ret = take_opts(&o, opts);
		if (ret)
			return ret;
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
	madvx_copy_out(st, &s, sizeof(s));
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Registration                                                            */
/* ---------------------------------------------------------------------- */

/*
 * MINOR faults exist only for page-cache backed memory (shmem, hugetlbfs);
 * the kernel answers a bare -EINVAL for anonymous memory, which reads like a
 * bad argument: the caller gets -EOPNOTSUPP instead (vma.c tells, with or
 * without PROCMAP_QUERY; where it cannot, the kernel decides).
 */
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
		if (__madvx_vma_range_anon(addr, len))
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

