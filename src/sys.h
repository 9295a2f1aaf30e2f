/* SPDX-License-Identifier: MIT */
/*
 * sys.c: the one home of every raw system call the library issues. Each
 * returns the kernel's result, with -errno instead of -1/errno, and leaves
 * errno as the caller had it.
 */
#ifndef MADVX_SYS_H
#define MADVX_SYS_H

#include <poll.h>
#include <sys/uio.h>

#include "util.h"

MADVX_HIDDEN long __madvx_sys_madvise(uintptr_t addr, size_t len, int advice);
MADVX_HIDDEN long __madvx_sys_process_madvise(int pidfd, const struct iovec *iov,
					    size_t vlen, int advice);
MADVX_HIDDEN int __madvx_sys_pidfd_open(pid_t pid);
MADVX_HIDDEN int __madvx_sys_userfaultfd(int flags);
MADVX_HIDDEN int __madvx_sys_ioctl(int fd, unsigned long req, void *arg);
MADVX_HIDDEN int __madvx_sys_open(const char *path, int flags);
/* close(2): no answer (Linux closes the fd even when it says EINTR). */
MADVX_HIDDEN void __madvx_sys_close(int fd);
MADVX_HIDDEN long __madvx_sys_read(int fd, void *buf, size_t len);
MADVX_HIDDEN long __madvx_sys_write(int fd, const void *buf, size_t len);
MADVX_HIDDEN int __madvx_sys_poll(struct pollfd *fds, unsigned int n, int timeout_ms);
MADVX_HIDDEN int __madvx_sys_eventfd(unsigned int initval, int flags);
MADVX_HIDDEN int __madvx_sys_epoll_create1(int flags);
MADVX_HIDDEN int __madvx_sys_epoll_add(int epfd, int fd, uint32_t events);
/* Private anonymous read/write memory: the address, or NULL (errno kept). */
MADVX_HIDDEN void *__madvx_sys_mmap_anon(size_t len);
MADVX_HIDDEN int __madvx_sys_munmap(void *addr, size_t len);

/* For remote targets (target.c, reclaim.c) and the maps parser (vma.c). */
/* pidfd_send_signal(2) (5.1); sig 0 asks "does it still exist?". */
MADVX_HIDDEN int __madvx_sys_pidfd_send_signal(int pidfd, int sig);
MADVX_HIDDEN int __madvx_sys_openat(int dirfd, const char *path, int flags);
MADVX_HIDDEN long __madvx_sys_pread(int fd, void *buf, size_t len, uint64_t off);

/*
 * Up to @size - 1 bytes of a small /proc or /sys file into @buf, with
 * open/read, not stdio: the probe may run on an allocator's first call,
 * where malloc() must not be re-entered. The length, or -1; errno kept.
 */
MADVX_HIDDEN ssize_t __madvx_read_small_file(const char *path, char *buf, size_t size);

/* The page size, read once when the library is loaded (a constructor in sys.c). */
MADVX_HIDDEN extern size_t __madvx_pagesize;

static inline size_t madvx_page_size(void)
{
	return __madvx_pagesize;
}

/* What one page-table page maps (a PMD: 2 MiB with 4 KiB pages, 512 MiB with 64 KiB). */
static inline uint64_t madvx_pmd_size(void)
{
	return (uint64_t)__madvx_pagesize / 8 * __madvx_pagesize;
}

#endif /* MADVX_SYS_H */
