// SPDX-License-Identifier: MIT
/*
 * userfaultfd: the home of every userfaultfd call libmadvx makes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

#include "internal.h"
#include "probe-backends.h"

#define FEAT(f) (1ULL << (f))

/*
 * A userfaultfd as an unprivileged caller gets one: plain first, then
 * UFFD_USER_MODE_ONLY (enough for faults from user space, which is all a GC
 * needs) when vm.unprivileged_userfaultfd=0 refuses the plain one.
 */
static int open_uffd_syscall(bool *user_mode_only)
{
	int fd = madvx_sys_userfaultfd(O_CLOEXEC | O_NONBLOCK);

	*user_mode_only = false;
	if (fd == -EPERM) {
		fd = madvx_sys_userfaultfd(O_CLOEXEC | O_NONBLOCK |
					   UFFD_USER_MODE_ONLY);
		*user_mode_only = fd >= 0;
	}
	return fd;
}

static int open_uffd_dev(void)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	int fd;

	if (dev < 0)
		return -ENOENT;
	fd = madvx_sys_ioctl(dev, USERFAULTFD_IOC_NEW,
			     (void *)(long)(O_CLOEXEC | O_NONBLOCK));
	close(dev);
	return fd;
}

/* UFFDIO_API with no features requested answers with all it offers. */
static int uffd_handshake(int fd, struct uffdio_api *api)
{
	*api = (struct uffdio_api){ .api = UFFD_API };
	return madvx_sys_ioctl(fd, UFFDIO_API, api);
}

void madvx_uffd_probe(struct madvx_probe_state *st)
{
	struct uffdio_api api;
	bool umo = false;
	int fd = -1, dev_fd = -1;

	if (st->disabled & FEAT(MADVX_FEAT_UFFD))
		return;
	fd = open_uffd_syscall(&umo);
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
