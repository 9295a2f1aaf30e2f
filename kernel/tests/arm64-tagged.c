// SPDX-License-Identifier: MIT
/*
 * arm64-tagged: process_madvise() of another process with a vector of
 * TBI-tagged addresses (arm64), the path of patch 7 that x86 cannot run.
 * Runs as /init of an initramfs under qemu-system-aarch64 and powers off
 * ("kernel/run tagged"; build: aarch64-linux-gnu-gcc -O2 -static).
 *
 * The child maps 32 pages and mprotect()s every odd one read-only, so its
 * 16 even pages are 16 one-page VMAs; the parent sends one vector of their
 * addresses with tag 0x5a in the top byte: first without the tagged
 * address ABI (import_iovec() must refuse it: -EFAULT), then with
 * PR_TAGGED_ADDR_ENABLE: a one-entry vector (import_iovec() keeps it in
 * the iterator itself, ITER_UBUF) must page its VMA's page out, MADV_COLD
 * must advise the whole vector, and MADV_PAGEOUT must page every page out
 * (a brd swap device; read through the child's pagemap), after which the
 * child reads its data back.
 * Both run on CPU 0 (see main()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096UL
#define NVMA 16
#define TAG(a) ((void *)((uintptr_t)(a) | (0x5aUL << 56)))
#define SWAP_PAGES 16384	/* 64 MiB: brd.rd_size=65536 */

static int failures;

static void check(int ok, const char *what)
{
	printf("tagged-remote: %s: %s\n", ok ? "ok" : "FAIL", what);
	failures += !ok;
}

static void power_off(void)
{
	printf("TAGGED-RESULT %s %d\n", failures ? "FAIL" : "PASS", failures);
	fflush(stdout);
	sync();
	reboot(LINUX_REBOOT_CMD_POWER_OFF);
	_exit(failures != 0);
}

/* A version-1 swap header on /dev/ram0, then swapon(). */
static int setup_swap(void)
{
	static uint32_t page[PG / 4];
	int fd;

	if (mknod("/dev/ram0", S_IFBLK | 0600, makedev(1, 0)) && errno != EEXIST)
		return -1;
	fd = open("/dev/ram0", O_RDWR);
	if (fd < 0)
		return -1;
	page[1024 / 4] = 1;			/* version */
	page[1024 / 4 + 1] = SWAP_PAGES - 1;	/* last_page */
	memcpy((char *)page + PG - 10, "SWAPSPACE2", 10);
	if (pwrite(fd, page, PG, 0) != (ssize_t)PG)
		return -1;
	fsync(fd);
	close(fd);
	return swapon("/dev/ram0", 0);
}

/* Pages of the child's first n VMAs present / swapped, from its pagemap. */
static void child_pages(pid_t pid, char *base, int n, int *present, int *swapped)
{
	char path[64];
	uint64_t e;
	int fd, i;

	*present = *swapped = -1;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	*present = *swapped = 0;
	for (i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)base + 2 * i * PG;

		if (pread(fd, &e, sizeof(e), a / PG * sizeof(e)) != sizeof(e)) {
			*present = *swapped = -1;
			break;
		}
		*present += !!(e & (1ULL << 63));
		*swapped += !!(e & (1ULL << 62));
	}
	close(fd);
}

static int child(char *base, int ready, int go)
{
	char c = 0;
	int i;

	for (i = 0; i < NVMA; i++)
		memset(base + 2 * i * PG, 'a' + i, PG);
	if (write(ready, &c, 1) != 1 || read(go, &c, 1) != 1)
		_exit(2);
	for (i = 0; i < NVMA; i++)
		for (unsigned long j = 0; j < PG; j++)
			if (base[2 * i * PG + j] != 'a' + i)
				_exit(3);
	_exit(0);
}

int main(void)
{
	struct iovec iov[NVMA];
	int ready[2], go[2], status, pidfd, i, present, swapped, calls;
	ssize_t ret;
	char *base, c = 0;
	pid_t pid;

	cpu_set_t one;

	setvbuf(stdout, NULL, _IONBF, 0);
	/*
	 * Advisor and child on one CPU: a freshly faulted page waits in the
	 * per-CPU LRU batch of the CPU that faulted it, and MADV_PAGEOUT
	 * drains only the advisor's; a page still in another CPU's batch
	 * cannot be isolated and stays in.
	 */
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	mkdir("/proc", 0555);
	if (mount("proc", "/proc", "proc", 0, NULL))
		printf("tagged-remote: mount /proc: %s\n", strerror(errno));
	check(setup_swap() == 0, "swapon of a 64 MiB brd device");

	base = mmap(NULL, 2 * NVMA * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		power_off();
	for (i = 0; i < NVMA; i++)
		mprotect(base + (2 * i + 1) * PG, PG, PROT_READ);
	if (pipe(ready) || pipe(go))
		power_off();
	pid = fork();
	if (pid == 0)
		child(base, ready[1], go[0]);
	if (read(ready[0], &c, 1) != 1)
		power_off();
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	check(pidfd >= 0, "pidfd_open");

	for (i = 0; i < NVMA; i++) {
		iov[i].iov_base = TAG(base + 2 * i * PG);
		iov[i].iov_len = PG;
	}
	ret = syscall(SYS_process_madvise, pidfd, iov, NVMA, MADV_COLD, 0);
	printf("tagged-remote: without the tagged address ABI: %zd (%s)\n",
	       ret, ret < 0 ? strerror(errno) : "-");
	check(ret < 0 && errno == EFAULT, "a tagged vector is refused without PR_TAGGED_ADDR_ENABLE");

	check(prctl(PR_SET_TAGGED_ADDR_CTRL, PR_TAGGED_ADDR_ENABLE, 0, 0, 0) == 0,
	      "prctl(PR_SET_TAGGED_ADDR_CTRL, PR_TAGGED_ADDR_ENABLE)");
	calls = 0;
	do {
		ret = syscall(SYS_process_madvise, pidfd, iov, 1, MADV_PAGEOUT, 0);
		calls++;
		child_pages(pid, base, 1, &present, &swapped);
	} while (ret == (ssize_t)PG && present > 0 && calls < 4);
	printf("tagged-remote: MADV_PAGEOUT of one tagged entry: %zd; after %d call(s) %d present, %d swapped\n",
	       ret, calls, present, swapped);
	check(ret == (ssize_t)PG && present == 0 && swapped == 1,
	      "a one-entry tagged vector pages its page out");

	ret = syscall(SYS_process_madvise, pidfd, iov, NVMA, MADV_COLD, 0);
	printf("tagged-remote: MADV_COLD of 16 tagged one-page VMAs: %zd\n", ret);
	check(ret == (ssize_t)(NVMA * PG), "MADV_COLD advises the whole tagged vector");

	calls = 0;
	do {
		ret = syscall(SYS_process_madvise, pidfd, iov, NVMA, MADV_PAGEOUT, 0);
		calls++;
		child_pages(pid, base, NVMA, &present, &swapped);
	} while (ret == (ssize_t)(NVMA * PG) && present > 0 && calls < 4);
	printf("tagged-remote: MADV_PAGEOUT of 16 tagged one-page VMAs: %zd; after %d call(s) %d present, %d swapped\n",
	       ret, calls, present, swapped);
	check(ret == (ssize_t)(NVMA * PG), "MADV_PAGEOUT advises the whole tagged vector");
	check(present == 0 && swapped == NVMA, "every page of the tagged vector went to swap");

	if (write(go[1], &c, 1) != 1 || waitpid(pid, &status, 0) != pid)
		power_off();
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child reads its data back");
	power_off();
	return 0;
}
