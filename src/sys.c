// SPDX-License-Identifier: MIT
/*
 * The one home of the raw system calls libmadvx issues. Every wrapper
 * returns the kernel's answer with -errno in place of -1/errno, and leaves
 * errno as the caller had it: library code never reads errno anywhere else.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

static long ret_or_errno(long ret, int saved_errno)
{
	if (ret == -1) {
		ret = -errno;
		errno = saved_errno;
	}
	return ret;
}

long __madvx_sys_madvise(uintptr_t addr, size_t len, int advice)
{
	int e = errno;

	return ret_or_errno(madvise((void *)addr, len, advice), e);
}

MADVX_HOT long __madvx_sys_process_madvise(int pidfd, const struct iovec *iov, size_t vlen,
			       int advice)
{
	int e = errno;

	return ret_or_errno(syscall(__NR_process_madvise, pidfd, iov, vlen,
				    advice, 0U), e);
}

int __madvx_sys_pidfd_open(pid_t pid)
{
	int e = errno;

	return (int)ret_or_errno(syscall(__NR_pidfd_open, pid, 0U), e);
}

int __madvx_sys_userfaultfd(int flags)
{
	int e = errno;

	return (int)ret_or_errno(syscall(__NR_userfaultfd, flags), e);
}

int __madvx_sys_ioctl(int fd, unsigned long req, void *arg)
{
	int e = errno;

	return (int)ret_or_errno(ioctl(fd, req, arg), e);
}

int __madvx_sys_open(const char *path, int flags)
{
	int e = errno;

	return (int)ret_or_errno(open(path, flags), e);
}

/* close() can fail with EINTR after closing: nothing to answer. */
void __madvx_sys_close(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

long __madvx_sys_read(int fd, void *buf, size_t len)
{
	int e = errno;

	return ret_or_errno(read(fd, buf, len), e);
}

long __madvx_sys_write(int fd, const void *buf, size_t len)
{
	int e = errno;

	return ret_or_errno(write(fd, buf, len), e);
}

int __madvx_sys_poll(struct pollfd *fds, unsigned int n, int timeout_ms)
{
	int e = errno;

	return (int)ret_or_errno(poll(fds, n, timeout_ms), e);
}

int __madvx_sys_eventfd(unsigned int initval, int flags)
{
	int e = errno;

	return (int)ret_or_errno(eventfd(initval, flags), e);
}

int __madvx_sys_epoll_create1(int flags)
{
	int e = errno;

	return (int)ret_or_errno(epoll_create1(flags), e);
}

int __madvx_sys_epoll_add(int epfd, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };
	int e = errno;

	return (int)ret_or_errno(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev), e);
}

MADVX_HOT void *__madvx_sys_mmap_anon(size_t len)
{
	int e = errno;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	errno = e;
	return p == MAP_FAILED ? NULL : p;
}

int __madvx_sys_munmap(void *addr, size_t len)
{
	int e = errno;

	return (int)ret_or_errno(munmap(addr, len), e);
}

size_t __madvx_pagesize = 4096;

/* Before any entry point can run, so the hot paths read a plain variable. */
__attribute__((constructor)) static void madvx_init_pagesize(void)
{
	long pg = sysconf(_SC_PAGESIZE);

	if (pg > 0)
		__madvx_pagesize = (size_t)pg;
}

/* ---- remote targets (src/target.c, src/reclaim.c) ---- */

int __madvx_sys_pidfd_send_signal(int pidfd, int sig)
{
	int e = errno;

	return (int)ret_or_errno(syscall(__NR_pidfd_send_signal, pidfd, sig,
					 NULL, 0U), e);
}

int __madvx_sys_openat(int dirfd, const char *path, int flags)
{
	int e = errno;

	return (int)ret_or_errno(openat(dirfd, path, flags), e);
}

long __madvx_sys_pread(int fd, void *buf, size_t len, uint64_t off)
{
	int e = errno;

	return ret_or_errno(pread(fd, buf, len, (off_t)off), e);
}

/*
 * Read up to @size - 1 bytes of a small /proc or /sys file into @buf with
 * open/read, not stdio (see sys.h).
 */
ssize_t __madvx_read_small_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), e = errno;
	ssize_t n;

	if (fd < 0) {
		errno = e;
		return -1;
	}
	n = read(fd, buf, size - 1);
	close(fd);
	errno = e;
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}
