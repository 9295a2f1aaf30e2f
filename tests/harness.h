/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the libcheck suites. One suite per feature, one
 * executable per suite; a kernel feature that is missing makes the whole
 * executable exit 77 (meson's SKIP) with the reason on stdout.
 */
#ifndef MADVX_TEST_HARNESS_H
#define MADVX_TEST_HARNESS_H

#include <check.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <madvx.h>

#define TEST_SKIP 77

static inline size_t test_page(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Exit the executable as skipped, saying why. */
static inline void __attribute__((noreturn)) test_skip(const char *why)
{
	printf("SKIP: %s\n", why);
	fflush(stdout);
	exit(TEST_SKIP);
}

/*
 * How many random cases a differential test runs: @normal, 25x with
 * MADVX_TEST_LONG=1, a fifth inside the QEMU test kernel (TCG emulates the
 * CPU some 20x slower; the guest's init sets MADVX_IN_TEST_KERNEL).
 */
static inline size_t test_scaled_cases(size_t normal)
{
	const char *l = getenv("MADVX_TEST_LONG");
	const char *k = getenv("MADVX_IN_TEST_KERNEL");

	if (l && *l == '1')
		return normal * 25;
	if (k && *k == '1')
		return normal / 5 ? normal / 5 : 1;
	return normal;
}

/* One seccomp rule: system call @nr gets @action (SECCOMP_RET_*). */
struct test_sc_rule {
	unsigned int nr;
	unsigned int action;
};

/*
 * Install a filter of @n rules (at most 16) for the rest of this process;
 * every other call is allowed. No root needed (PR_SET_NO_NEW_PRIVS). Call
 * it in a forked child. 0 or -errno.
 */
static inline int test_seccomp(const struct test_sc_rule *r, unsigned int n)
{
	struct sock_filter f[4 + 2 * 16 + 1] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	};
	struct sock_fprog prog = { .filter = f };
	unsigned int k = 4;

	if (n > 16)
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, r[i].nr, 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, r[i].action);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog.len = (unsigned short)k;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		return -errno;
	return 0;
}

#define TEST_SC_ERRNO(e) (SECCOMP_RET_ERRNO | ((unsigned int)(e) & SECCOMP_RET_DATA))

/*
 * The sandboxes of issue 22: KILL is systemd's SystemCallFilter= default
 * action (and a browser's) for io_uring and userfaultfd; ERRNO is a
 * container runtime's default profile, which refuses both with EPERM, on
 * an old kernel (ENOSYS for process_madvise and pidfd_open).
 */
enum test_sandbox { TEST_SANDBOX_NONE, TEST_SANDBOX_KILL, TEST_SANDBOX_ERRNO };

static inline int test_sandbox_enter(enum test_sandbox sb)
{
	const struct test_sc_rule kill[] = {
		{ __NR_io_uring_setup, SECCOMP_RET_KILL_PROCESS },
		{ __NR_io_uring_enter, SECCOMP_RET_KILL_PROCESS },
		{ __NR_io_uring_register, SECCOMP_RET_KILL_PROCESS },
		{ __NR_userfaultfd, SECCOMP_RET_KILL_PROCESS },
	};
	const struct test_sc_rule err[] = {
		{ __NR_io_uring_setup, TEST_SC_ERRNO(EPERM) },
		{ __NR_io_uring_enter, TEST_SC_ERRNO(EPERM) },
		{ __NR_io_uring_register, TEST_SC_ERRNO(EPERM) },
		{ __NR_userfaultfd, TEST_SC_ERRNO(EPERM) },
		{ __NR_process_madvise, TEST_SC_ERRNO(ENOSYS) },
		{ __NR_pidfd_open, TEST_SC_ERRNO(ENOSYS) },
	};

	switch (sb) {
	case TEST_SANDBOX_KILL:
		return test_seccomp(kill, sizeof(kill) / sizeof(kill[0]));
	case TEST_SANDBOX_ERRNO:
		return test_seccomp(err, sizeof(err) / sizeof(err[0]));
	default:
		return 0;
	}
}

/* MADVX_TEST_SANDBOX=kill|errno (the conformance slices under a filter). */
static inline enum test_sandbox test_sandbox_from_env(void)
{
	const char *e = getenv("MADVX_TEST_SANDBOX");

	if (e && !strcmp(e, "kill"))
		return TEST_SANDBOX_KILL;
	if (e && !strcmp(e, "errno"))
		return TEST_SANDBOX_ERRNO;
	return TEST_SANDBOX_NONE;
}

/*
 * Make syscall @nr fail with @err for the rest of this process (seccomp, as a
 * container's filter would); call it in a forked child. 0 or -errno.
 */
static inline int test_deny_syscall(unsigned int nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned int)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		return -errno;
	return 0;
}

/* Run @s with CK_FORK (each test in its own process); exit code for meson. */
static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* An anonymous private RW mapping of @pages pages, every page filled with @seed. */
/*
 * Anonymous memory at a 2 MiB (PMD) boundary. Tests compare two areas
 * (the library's against madvise()'s): with multi-size THP (e.g.
 * hugepages-16kB "always") a fault maps a folio aligned to its size, so two
 * areas at different offsets from a folio boundary populate differently
 * for the same hints. A PMD boundary is a boundary of every folio size.
 */
static inline uint8_t *test_map_aligned(size_t len)
{
	const size_t blk = 2UL << 20;
	uint8_t *raw = mmap(NULL, len + blk, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *p;
	size_t head;

	ck_assert_ptr_ne(raw, MAP_FAILED);
	p = (uint8_t *)(((uintptr_t)raw + blk - 1) & ~(uintptr_t)(blk - 1));
	head = (size_t)(p - raw);
	if (head)
		ck_assert_int_eq(munmap(raw, head), 0);
	if (blk - head)
		ck_assert_int_eq(munmap(p + len, blk - head), 0);
	return p;
}

static inline uint8_t *test_map_filled(size_t pages, uint8_t seed)
{
	size_t len = pages * test_page();
	uint8_t *p = test_map_aligned(len);

	for (size_t i = 0; i < pages; i++)
		memset(p + i * test_page(), seed + (uint8_t)i, test_page());
	return p;
}

/* True when every byte of the page at @p is zero. */
static inline bool test_page_zero(const uint8_t *p)
{
	for (size_t i = 0; i < test_page(); i++)
		if (p[i])
			return false;
	return true;
}

/* mincore() residency of the page at @p: 1 resident, 0 not, -1 error. */
static inline int test_resident(const void *p)
{
	unsigned char v;

	if (mincore((void *)((uintptr_t)p & ~(test_page() - 1)), test_page(), &v))
		return -1;
	return v & 1;
}

/*
 * Run @fn in a forked child whose environment has MADVX_DISABLE=@list (the
 * probe is per process, so the child decides it afresh). @fn fails by
 * calling _exit(nonzero) or by a failed ck_assert (which exits nonzero).
 */
static inline void test_in_child(const char *list, void (*fn)(void))
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (list)
			setenv("MADVX_DISABLE", list, 1);
		fn();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child with MADVX_DISABLE=%s failed (status 0x%x)",
		      list ? list : "", status);
}

/*
 * The ways to make a child that returns twice on one stack, as fork()
 * does, in the order test_fork.c's and test_conformance.c's kinds start.
 * Only fork() runs the pthread_atfork() handlers.
 */
enum test_fork_kind {
	TEST_FORK,		/* fork() */
	TEST_SYS_FORK,		/* syscall(SYS_fork) */
	TEST__FORK,		/* glibc _Fork() (2.34; older: SYS_fork) */
	TEST_CLONE_RAW,		/* syscall(SYS_clone, SIGCHLD, 0) */
};

/* A child by @kind: 0 in the child, its pid or -errno in the parent. */
static inline pid_t test_fork_by(enum test_fork_kind kind)
{
	pid_t pid;

	switch (kind) {
	case TEST_SYS_FORK:
		pid = (pid_t)syscall(SYS_fork);
		break;
	case TEST__FORK:
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
		pid = _Fork();
#else
		pid = (pid_t)syscall(SYS_fork);
#endif
		break;
	case TEST_CLONE_RAW:
		/*
		 * No stack, no tids, no tls: every argument but the flags is
		 * 0, so the arches' orders of clone()'s arguments agree.
		 */
		pid = (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, NULL, NULL, 0UL);
		break;
	default:
		pid = fork();
		break;
	}
	return pid < 0 ? -errno : pid;
}

/*
 * Does process_madvise() on this process take @advice? Before 6.13 it takes
 * only MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED and MADV_COLLAPSE, even from
 * the caller itself (Debian 12's 6.1 answers -EINVAL to a DONTNEED vector),
 * and the library falls back to madvise() for the rest. A check that counts
 * the vector calls of another advice, or sees through a pidfd with it,
 * depends on this; when it does not hold, the check is left out and @what
 * says which (printed with the reason).
 */
static inline bool test_self_pmadv(int advice, const char *what)
{
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) == 1 &&
	    madvx_advice_supported(advice) == 1)
		return true;
	printf("NOTE: %s not checked: process_madvise() on this process does not take "
	       "advice %d here (before 6.13 it takes COLD, PAGEOUT, WILLNEED and COLLAPSE only)\n",
	       what, advice);
	fflush(stdout);
	return false;
}

#endif /* MADVX_TEST_HARNESS_H */
