/* SPDX-License-Identifier: MIT */
/* Private declarations shared by the library's source files. */
#ifndef MADVX_INTERNAL_H
#define MADVX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <poll.h>
#include <sys/uio.h>

#include "madvx.h"
#include "uapi-compat.h"

#define MADVX_HIDDEN __attribute__((visibility("hidden")))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MADVX_KVER(a, b, c) (((a) << 16) | ((b) << 8) | (c))

/* ---- sys.c: the one home of every raw syscall the library issues ---- */
/* Each returns the kernel's result, with -errno instead of -1/errno. */
MADVX_HIDDEN long madvx_sys_madvise(uintptr_t addr, size_t len, int advice);
MADVX_HIDDEN long madvx_sys_process_madvise(int pidfd, const struct iovec *iov,
					    size_t vlen, int advice);
MADVX_HIDDEN int madvx_sys_pidfd_open(pid_t pid);
MADVX_HIDDEN int madvx_sys_userfaultfd(int flags);
MADVX_HIDDEN int madvx_sys_ioctl(int fd, unsigned long req, void *arg);
/* Used by uffd.c for its fd, event queue wakeups and poll integration. */
MADVX_HIDDEN int madvx_sys_open(const char *path, int flags);
MADVX_HIDDEN long madvx_sys_read(int fd, void *buf, size_t len);
MADVX_HIDDEN long madvx_sys_write(int fd, const void *buf, size_t len);
MADVX_HIDDEN int madvx_sys_poll(struct pollfd *fds, unsigned int n, int timeout_ms);
MADVX_HIDDEN int madvx_sys_eventfd(unsigned int initval, int flags);
MADVX_HIDDEN int madvx_sys_epoll_create1(int flags);
MADVX_HIDDEN int madvx_sys_epoll_add(int epfd, int fd, uint32_t events);
/* The page size, read once when the library is loaded (a constructor in sys.c). */
MADVX_HIDDEN extern size_t madvx_pagesize;

static inline size_t madvx_page_size(void)
{
	return madvx_pagesize;
}

/* ---- probe.c ---- */
struct madvx_probe_state {
	uint32_t version;
	uint64_t features;	/* supported and not disabled */
	uint64_t disabled;
	uint64_t pmadv_advices;	/* bit per madvx_advice_index() accepted by process_madvise */
	uint64_t uffd_features;
	uint64_t uffd_ioctls;
	int io_uring_disabled;
	int unprivileged_userfaultfd;
	enum madvx_thp_mode thp;
	char release[65];
};

/* The cached probe; runs it on first call. Never NULL. */
MADVX_HIDDEN const struct madvx_probe_state *madvx_probe(void);

static inline bool madvx_has(enum madvx_feature feat)
{
	return madvx_probe()->features & (1ULL << feat);
}

/* advice value -> 1 + index in the library's advice table (0: unknown). */
#define MADVX_ADVICE_MAX 103		/* MADV_GUARD_REMOVE */
MADVX_HIDDEN extern const int8_t madvx_advice_index_of[MADVX_ADVICE_MAX + 1];

/* Index of @advice in the library's table, or -1 if unknown: O(1), on every add. */
static inline int madvx_advice_index(int advice)
{
	if ((unsigned int)advice > MADVX_ADVICE_MAX)
		return -1;
	return madvx_advice_index_of[advice] - 1;
}

/*
 * The pidfd that names this process for process_madvise(): PIDFD_SELF where
 * the kernel takes it, else a pidfd_open() result cached per process and
 * reopened after fork() (a pidfd opened before fork still names the parent).
 * Returns the fd or -errno.
 */
MADVX_HIDDEN int madvx_self_pidfd(void);

/* fork() handlers for the fds that name this process; registered by the probe. */
MADVX_HIDDEN void madvx_register_atfork(void);
MADVX_HIDDEN void madvx_vma_after_fork_child(void);

#endif /* MADVX_INTERNAL_H */
