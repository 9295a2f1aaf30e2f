// SPDX-License-Identifier: MIT
/*
 * Fork safety (issue 12, items 1 and 2): every kind of fork a runtime or a
 * sandbox uses - fork(), syscall(SYS_fork), glibc _Fork(), clone() without
 * CLONE_VM (raw and glibc's, on a stack of its own), vfork()+exec - followed
 * by batch, release, async and userfaultfd use in the child. The tests check
 * memory, not return codes alone: the CHILD's pages change (zero, not
 * resident per mincore) and the PARENT's do not (pattern intact, resident).
 *
 *  - child_use:    what a child may do after each kind of fork (inherited
 *                  batch, new batch, new mapping, madvx_release(), inherited
 *                  async/uffd handles answer -ECHILD and never touch the
 *                  parent, new async/uffd objects work).
 *  - misdirect:    MADVX_DISABLE=pidfd_self (a re-exec'ed helper): after a
 *                  raw fork the child's MADV_PAGEOUT of clean file pages must
 *                  evict the CHILD's pages, not the parent's (a pidfd opened
 *                  before the fork names the parent).
 *  - stress:       threads sit in every library entry that takes a lock
 *                  while the main thread forks 10,000 times with a mix of
 *                  kinds (MADVX_FORK_STRESS=n to change; a tenth inside the
 *                  test kernel, where 2,000 took 144 s on the debug kernel); a child that does not exit in 10 s is a
 *                  deadlock.
 *  - probe_race:   fresh exec'ed processes fork while their threads race
 *                  into the first probe call (its once-initialisation).
 *  - results_race: two threads read madvx_batch_results() of one flushed
 *                  batch at once (TSan-clean apart from the library).
 *
 * Every test is bounded by alarm(): a deadlock fails instead of hanging CI.
 * Children report failures on stderr and through their exit status; they
 * never call libcheck (its reporting allocates and talks to the runner).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>

#include <madvx.h>

#include "harness.h"

extern char **environ;

/* ---- fork kinds ---- */

enum fork_kind {
	FK_FORK = TEST_FORK,	/* harness.h's four, made by test_fork_by() */
	FK_SYS_FORK = TEST_SYS_FORK,
	FK__FORK = TEST__FORK,
	FK_CLONE_RAW = TEST_CLONE_RAW,
	FK_CLONE_GLIBC,		/* clone(fn, own stack, SIGCHLD): no handlers */
	FK_VFORK_EXEC,		/* vfork() + execve() of this binary */
	FK__COUNT
};

/* The kinds whose child keeps running this process's code. */
#define FK_FORKED_COUNT FK_VFORK_EXEC

/*
 * ThreadSanitizer's runtime is fork-safe for fork() only: a raw fork of a
 * process whose other threads are running can inherit its internal locks
 * held (children hung in madvx_region_register()'s atomics), and its thread
 * registry then describes threads that do not exist (a child that takes over
 * a probe a parent thread had started is reported as racing with it). Under
 * TSan the tests with running threads fork with fork() only, and children
 * make no threads (TSan reports "dup thread" for a thread made in a child
 * of a process that had threads).
 */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)	/* clang */
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

static const char *const fk_name[FK__COUNT] = {
	[FK_FORK] = "fork()",
	[FK_SYS_FORK] = "syscall(SYS_fork)",
	[FK__FORK] = "_Fork()",
	[FK_CLONE_RAW] = "syscall(SYS_clone, SIGCHLD)",
	[FK_CLONE_GLIBC] = "clone(fn, stack, SIGCHLD)",
	[FK_VFORK_EXEC] = "vfork()+exec",
};

static size_t pg;
static char self_exe[PATH_MAX];

typedef int (*child_fn)(void *arg);

/* glibc clone(): the child runs @fn on a stack of its own (a private copy). */
#define CLONE_STACK_SIZE (1UL << 20)
static uint8_t *clone_stack;

struct clone_call {
	child_fn fn;
	void *arg;
};

/* Returns, not _exit(): glibc exits the child; ASan warns of a noreturn call on a foreign stack. */
static int clone_trampoline(void *p)
{
	const struct clone_call *c = p;

	return c->fn(c->arg);
}

static void clone_stack_init(void)
{
	if (clone_stack)
		return;
	clone_stack = mmap(NULL, CLONE_STACK_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (clone_stack == MAP_FAILED) {
		clone_stack = NULL;
		abort();
	}
}

/*
 * Start @fn(@arg) in a child made by @kind (not FK_VFORK_EXEC); the child
 * _exit()s with its return value. Returns the pid or -errno.
 */
static pid_t spawn(enum fork_kind kind, child_fn fn, void *arg)
{
	struct clone_call c = { fn, arg };
	pid_t pid;

	if (kind == FK_CLONE_GLIBC) {
		clone_stack_init();
		/* @c lives on our stack: the child gets a copy of it at clone time. */
		pid = clone(clone_trampoline, clone_stack + CLONE_STACK_SIZE, SIGCHLD, &c);
		return pid < 0 ? -errno : pid;
	}
	if (kind >= FK_FORKED_COUNT)
		return -EINVAL;
	pid = test_fork_by((enum test_fork_kind)kind);
	if (pid == 0)
		_exit(fn(arg));
	return pid;
}

/* vfork() + execve(this binary, @argv, @envp). The child only execs or _exits. */
static pid_t spawn_exec(char *const argv[], char *const envp[])
{
	pid_t pid = vfork();

	if (pid == 0) {
		execve(self_exe, argv, envp);
		_exit(127);
	}
	return pid < 0 ? -errno : pid;
}

/*
 * Wait for @pid up to @timeout_ms. Returns 0 and *status, or -ETIMEDOUT
 * after killing it (a child that does not exit in time is deadlocked).
 */
static int wait_child(pid_t pid, int timeout_ms, int *status)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };
		int n;

		do
			n = poll(&p, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
		close(pfd);
		if (n == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return -ETIMEDOUT;
		}
	} else {
		/* No pidfd_open (before 5.3): poll waitpid. */
		for (int t = 0; t < timeout_ms; t++) {
			pid_t r = waitpid(pid, status, WNOHANG);

			if (r == pid)
				return 0;
			if (r < 0 && errno != EINTR)
				return -errno;
			usleep(1000);
		}
		kill(pid, SIGKILL);
		waitpid(pid, status, 0);
		return -ETIMEDOUT;
	}
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- checks that collect every failure (children cannot use libcheck) ---- */

static int fails;
static char who[96] = "test";

static void __attribute__((format(printf, 2, 3))) check_failed(int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fails++;
	dprintf(2, "FAIL [%s] test_fork.c:%d: %s\n", who, line, msg);
}

#define CHECK(cond, ...)                                        \
	do {                                                    \
		if (!(cond))                                    \
			check_failed(__LINE__, __VA_ARGS__);    \
	} while (0)

static void set_who(const char *role, enum fork_kind kind)
{
	snprintf(who, sizeof(who), "%s, %s", role, fk_name[kind]);
}

/* Every page i of [p, p + pages) filled with seed + i. */
static void fill(uint8_t *p, size_t pages, uint8_t seed)
{
	for (size_t i = 0; i < pages; i++)
		memset(p + i * pg, (uint8_t)(seed + i), pg);
}

static bool holds(const uint8_t *p, size_t pages, uint8_t seed)
{
	for (size_t i = 0; i < pages; i++)
		for (size_t j = 0; j < pg; j++)
			if (p[i * pg + j] != (uint8_t)(seed + i))
				return false;
	return true;
}

static bool all_zero(const uint8_t *p, size_t pages)
{
	for (size_t i = 0; i < pages; i++)
		if (!test_page_zero(p + i * pg))
			return false;
	return true;
}

/* Pages of [p, p + pages) resident per mincore() (page cache for file maps). */
static size_t resident(const void *p, size_t pages)
{
	unsigned char v[256];
	size_t n = 0;

	for (size_t i = 0; i < pages; i += sizeof(v)) {
		size_t k = pages - i < sizeof(v) ? pages - i : sizeof(v);

		if (mincore((uint8_t *)p + i * pg, k * pg, v))
			return SIZE_MAX;
		for (size_t j = 0; j < k; j++)
			n += v[j] & 1;
	}
	return n;
}

static uint8_t *map_anon(size_t pages)
{
	uint8_t *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* DONTNEED'd anonymous memory: not resident (checked first: reading faults it in), zero. */
static void expect_released(const char *what, const uint8_t *p, size_t pages)
{
	size_t r = resident(p, pages);

	CHECK(r == 0, "%s: %zu of %zu pages still resident after MADV_DONTNEED", what, r, pages);
	CHECK(all_zero(p, pages), "%s: pages not zero after MADV_DONTNEED", what);
}

static void expect_intact(const char *what, const uint8_t *p, size_t pages, uint8_t seed)
{
	size_t r = resident(p, pages);

	CHECK(r == pages, "%s: only %zu of %zu pages resident", what, r, pages);
	CHECK(holds(p, pages, seed), "%s: pattern changed", what);
}

/*
 * Add one hint to @b, flush, and check the flush and the hint's result: the
 * whole range applied. Returns the flush's return.
 */
static int flush_one(const char *what, struct madvx_batch *b, void *p, size_t len, int advice)
{
	const struct madvx_hint *r;
	uint32_t n = 0;
	int ret;

	ret = madvx_batch_add(b, p, len, advice);
	CHECK(ret == 0, "%s: madvx_batch_add() = %d, want index 0", what, ret);
	ret = madvx_batch_flush(b);
	CHECK(ret == 0, "%s: madvx_batch_flush() = %d (%s)", what, ret, strerror(-ret));
	r = madvx_batch_results(b, &n);
	CHECK(r && n == 1, "%s: %u results, want 1", what, n);
	if (r && n == 1) {
		CHECK(r[0].err == 0, "%s: hint err %d, want 0", what, r[0].err);
		CHECK(r[0].done == len, "%s: hint done %llu, want %zu", what,
		      (unsigned long long)r[0].done, len);
	}
	return ret;
}

/* ---- child_use: what a child may do after each kind of fork ---- */

#define NP 16		/* the parent's pattern pages */
#define UP 4		/* pages the parent arms with userfaultfd (MISSING) */
#define PSEED 0xa0
#define CHILD_SRC 0xc3	/* what a child copies through a uffd */
#define PARENT_SRC 0x5a	/* what the parent copies */

struct world {
	enum fork_kind kind;
	uint8_t *pp;			/* NP pages, pattern PSEED */
	uint8_t *scratch;		/* 1 page the parent flushes before the fork */
	struct madvx_batch *pb;		/* created and flushed by the parent */
	struct madvx_async *pa;		/* the parent's async object */
	struct madvx_uffd *pu;		/* the parent's uffd (NULL: unusable here) */
	uint8_t *ur;			/* UP pages armed MISSING with pu, never touched */
	uint8_t *src;			/* one page of CHILD_SRC */
};

/*
 * Objects the child makes itself, on its own pages @own (>= 3 pages holding
 * data) and on a mapping made after the fork. Also the body of the
 * vfork()+exec child.
 */
static void child_new_objects(uint8_t *own)
{
	struct madvx_batch *b = NULL;
	struct madvx_async *a = NULL;
	uint8_t *nm = map_anon(4);
	uint64_t t;
	int ret;

	CHECK(nm, "mmap() of the child's new mapping failed");
	if (!nm)
		return;
	fill(nm, 4, 0x71);

	ret = madvx_batch_create(NULL, &b);
	CHECK(ret == 0, "madvx_batch_create() in the child = %d", ret);
	if (!ret) {
		flush_one("new batch, child's copy of a page", b, own, pg, MADV_DONTNEED);
		expect_released("new batch, child's copy of a page", own, 1);
		flush_one("new batch, mapping made after the fork", b, nm, pg, MADV_DONTNEED);
		expect_released("new batch, mapping made after the fork", nm, 1);
	}

	ret = madvx_release(own + pg, pg);
	CHECK(ret == 0, "madvx_release() = %d", ret);
	ret = madvx_release(nm + pg, pg);
	CHECK(ret == 0, "madvx_release() of the new mapping = %d", ret);
	ret = madvx_release_flush();
	CHECK(ret == 0, "madvx_release_flush() = %d (%s)", ret, strerror(-ret));
	expect_released("madvx_release(), child's copy of a page", own + pg, 1);
	expect_released("madvx_release(), mapping made after the fork", nm + pg, 1);

	{
		struct madvx_async_opts ao = {
			.size = sizeof(ao),
			.backend = UNDER_TSAN ? MADVX_ASYNC_SYNC : MADVX_ASYNC_DEFAULT,
		};

		ret = madvx_async_create(&ao, &a);
	}
	CHECK(ret == 0, "madvx_async_create() in the child = %d", ret);
	if (!ret && b) {
		CHECK(madvx_batch_add(b, own + 2 * pg, pg, MADV_DONTNEED) == 0, "add");
		CHECK(madvx_batch_add(b, nm + 2 * pg, pg, MADV_DONTNEED) == 1, "add");
		ret = madvx_async_submit(a, b, &t);
		CHECK(ret == 0, "madvx_async_submit() on the child's own object = %d", ret);
		if (!ret) {
			ret = madvx_async_wait(a, t);
			CHECK(ret == 0, "madvx_async_wait() = %d (%s)", ret, strerror(-ret));
		}
		expect_released("new async object, child's copy of a page", own + 2 * pg, 1);
		expect_released("new async object, mapping made after the fork", nm + 2 * pg, 1);
	}
	madvx_async_free(a);

	if (madvx_feature_supported(MADVX_FEAT_UFFD) == 1) {
		struct madvx_uffd *u;
		uint8_t *nu = map_anon(2), *src = map_anon(1);
		uint64_t done = 0;

		CHECK(nu && src, "mmap() failed");
		ret = nu && src ? madvx_uffd_open(NULL, &u) : -ENOMEM;
		CHECK(ret == 0, "madvx_uffd_open() in the child = %d", ret);
		if (!ret) {
			memset(src, CHILD_SRC, pg);
			ret = madvx_uffd_register(u, (uintptr_t)nu, 2 * pg, MADVX_UFFD_MISSING, NULL);
			CHECK(ret == 0, "madvx_uffd_register() in the child = %d", ret);
			ret = madvx_uffd_copy(u, (uintptr_t)nu, (uintptr_t)src, pg, 0, &done);
			CHECK(ret == 0 && done == pg, "new uffd: copy = %d, done %llu", ret,
			      (unsigned long long)done);
			ret = madvx_uffd_zeropage(u, (uintptr_t)nu + pg, pg, 0, &done);
			CHECK(ret == 0 && done == pg, "new uffd: zeropage = %d, done %llu", ret,
			      (unsigned long long)done);
			CHECK(resident(nu, 2) == 2, "new uffd: pages not mapped by copy/zeropage");
			CHECK(madvx_uffd_unregister(u, (uintptr_t)nu, 2 * pg) == 0, "unregister");
			for (size_t j = 0; j < pg; j++)
				if (nu[j] != CHILD_SRC || nu[pg + j]) {
					CHECK(false, "new uffd: page contents wrong at %zu", j);
					break;
				}
			madvx_uffd_free(u);
		}
		if (nu)
			munmap(nu, 2 * pg);
		if (src)
			munmap(src, pg);
	}
	madvx_batch_free(b);
	munmap(nm, 4 * pg);
}

static int child_use(void *arg)
{
	struct world *w = arg;
	struct madvx_batch *b;
	uint8_t *nm = map_anon(2);
	uint64_t t = 0;
	int ret;

	set_who("child", w->kind);
	/* The parent's batch, on the child's copies and on a mapping made after the fork. */
	flush_one("inherited batch, child's copy of pages", w->pb, w->pp, 2 * pg, MADV_DONTNEED);
	expect_released("inherited batch, child's copy of pages", w->pp, 2);
	CHECK(nm, "mmap() in the child failed");
	if (nm) {
		fill(nm, 2, 0x33);
		flush_one("inherited batch, mapping made after the fork", w->pb, nm, 2 * pg,
			  MADV_DONTNEED);
		expect_released("inherited batch, mapping made after the fork", nm, 2);
		munmap(nm, 2 * pg);
	}

	/* The parent's async object: -ECHILD for every call; free drops the child's copy. */
	ret = madvx_batch_create(NULL, &b);
	CHECK(ret == 0, "madvx_batch_create() = %d", ret);
	if (!ret) {
		CHECK(madvx_batch_add(b, w->pp + 2 * pg, pg, MADV_DONTNEED) == 0, "add");
		ret = madvx_async_submit(w->pa, b, &t);
		CHECK(ret == -ECHILD, "inherited async: submit = %d, want -ECHILD", ret);
		ret = madvx_async_wait(w->pa, 1);
		CHECK(ret == -ECHILD, "inherited async: wait = %d, want -ECHILD", ret);
		ret = madvx_async_poll(w->pa, 1);
		CHECK(ret == -ECHILD, "inherited async: poll = %d, want -ECHILD", ret);
		madvx_async_free(w->pa);
		/* A refused submit leaves the batch with the child. */
		ret = madvx_batch_flush(b);
		CHECK(ret == 0, "flush after a refused submit = %d", ret);
		expect_released("batch after the inherited async refused it", w->pp + 2 * pg, 1);
		madvx_batch_free(b);
	}

	/* The parent's uffd names the parent's mm: it must never fill the parent's pages. */
	if (w->pu) {
		struct madvx_uffd_event ev[4];
		uint64_t done = 0;

		ret = madvx_uffd_copy(w->pu, (uintptr_t)w->ur, (uintptr_t)w->src, pg, 0, &done);
		CHECK(ret == -ECHILD, "inherited uffd: copy = %d (done %llu), want -ECHILD", ret,
		      (unsigned long long)done);
		ret = madvx_uffd_zeropage(w->pu, (uintptr_t)w->ur + pg, pg, 0, &done);
		CHECK(ret == -ECHILD, "inherited uffd: zeropage = %d (done %llu), want -ECHILD",
		      ret, (unsigned long long)done);
		ret = madvx_uffd_read_events(w->pu, ev, 4, 0);
		CHECK(ret == -ECHILD, "inherited uffd: read_events = %d, want -ECHILD", ret);
		ret = madvx_uffd_drain(w->pu, 0);
		CHECK(ret == -ECHILD, "inherited uffd: drain = %d, want -ECHILD", ret);
		madvx_uffd_free(w->pu);
	}

	child_new_objects(w->pp + 3 * pg);
	return fails ? 1 : 0;
}

/* Parent side, before the fork: every object used once, every per-process fd opened. */
static void world_init(struct world *w, enum fork_kind kind)
{
	struct madvx_batch *b;
	uint64_t t;
	int ret;

	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->pp = map_anon(NP);
	w->scratch = map_anon(1);
	w->src = map_anon(1);
	ck_assert(w->pp && w->scratch && w->src);
	fill(w->pp, NP, PSEED);
	memset(w->src, CHILD_SRC, pg);

	/* A flush that looks VMAs up (maps fd) and advises (pidfd where needed). */
	ck_assert_int_eq(madvx_batch_create(NULL, &w->pb), 0);
	memset(w->scratch, 1, pg);
	ck_assert_int_eq(flush_one("parent, before the fork", w->pb, w->scratch, pg,
				   MADV_DONTNEED), 0);
	/* This thread's release batch exists. */
	memset(w->scratch, 1, pg);
	ck_assert_int_eq(madvx_release(w->scratch, pg), 0);
	ck_assert_int_eq(madvx_release_flush(), 0);
	/* An async object with its worker (or ring), used once. */
	ck_assert_int_eq(madvx_async_create(NULL, &w->pa), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, w->scratch, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(w->pa, b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(w->pa, t), 0);
	madvx_batch_free(b);

	if (madvx_feature_supported(MADVX_FEAT_UFFD) == 1) {
		ret = madvx_uffd_open(NULL, &w->pu);
		ck_assert_msg(ret == 0, "madvx_uffd_open() = %d", ret);
		w->ur = map_anon(UP);
		ck_assert(w->ur);
		ck_assert_int_eq(madvx_uffd_register(w->pu, (uintptr_t)w->ur, UP * pg,
						     MADVX_UFFD_MISSING, NULL), 0);
	} else {
		printf("NOTE: userfaultfd unusable here: the uffd part of child_use is not run\n");
	}
}

/* Parent side, after the child exited: nothing of ours changed, every object still works. */
static void world_check(struct world *w)
{
	struct madvx_batch *b;
	uint64_t t, done = 0;
	int ret;

	expect_intact("the parent's pages after the child", w->pp, NP, PSEED);
	if (w->pu) {
		size_t r = resident(w->ur, UP);

		CHECK(r == 0, "the child filled %zu of the parent's %u uffd-armed pages", r, UP);
	}

	flush_one("parent's batch after the fork", w->pb, w->pp + 8 * pg, pg, MADV_DONTNEED);
	expect_released("parent's batch after the fork", w->pp + 8 * pg, 1);

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	CHECK(madvx_batch_add(b, w->pp + 9 * pg, pg, MADV_DONTNEED) == 0, "add");
	ret = madvx_async_submit(w->pa, b, &t);
	CHECK(ret == 0, "parent's async object after the child freed its copy: submit = %d", ret);
	if (!ret) {
		ret = madvx_async_wait(w->pa, t);
		CHECK(ret == 0, "parent's async wait = %d", ret);
	}
	expect_released("parent's async object after the fork", w->pp + 9 * pg, 1);
	madvx_batch_free(b);

	if (w->pu) {
		memset(w->src, PARENT_SRC, pg);
		ret = madvx_uffd_copy(w->pu, (uintptr_t)w->ur, (uintptr_t)w->src, pg, 0, &done);
		CHECK(ret == 0 && done == pg, "parent's uffd after the fork: copy = %d, done %llu",
		      ret, (unsigned long long)done);
		CHECK(madvx_uffd_unregister(w->pu, (uintptr_t)w->ur, UP * pg) == 0, "unregister");
		for (size_t j = 0; j < pg; j++)
			if (w->ur[j] != PARENT_SRC) {
				CHECK(false, "the parent's uffd page holds 0x%02x, want 0x%02x (ours)",
				      w->ur[j], PARENT_SRC);
				break;
			}
		CHECK(all_zero(w->ur + pg, UP - 1), "the parent's untouched uffd pages are not zero");
		madvx_uffd_free(w->pu);
	}
	madvx_async_free(w->pa);
	madvx_batch_free(w->pb);
}

/* ---- the lone-hint guess is process state: a child inherits it ---- */

struct guess_kid {
	uint8_t *two;		/* two VMAs of one page each (rw, then ro) */
	uint8_t *hole;		/* a page, then a hole */
	uint8_t *twin;		/* the same layout as hole, for madvise()'s answer */
	int want;		/* madvise(twin) */
	bool guessing;		/* the parent's next lone hint is planned unseen */
};

static uint64_t vma_skipped_of(struct madvx_batch *b)
{
	struct madvx_stats st = { .size = sizeof(st) };

	return madvx_batch_stats(b, &st) ? UINT64_MAX : st.vma_skipped;
}

/*
 * In the child, on a batch of its own: a lone hint across two VMAs and one
 * over a page and a hole, both planned from the parent's streak (when it
 * guesses) or looked up; either way madvise()'s answer and effect. 0 = ok.
 */
static int guess_child(void *arg)
{
	const struct guess_kid *k = arg;
	const struct madvx_hint *res;
	struct madvx_batch *b;
	uint64_t before;
	uint32_t n;

	if (madvx_batch_create(NULL, &b))
		return 10;
	before = vma_skipped_of(b);
	k->two[0] = 5;
	if (madvx_batch_add(b, k->two, 2 * pg, MADV_DONTNEED) < 0 || madvx_batch_flush(b))
		return 11;
	res = madvx_batch_results(b, &n);
	if (!res || n != 1 || res[0].err || res[0].done != 2 * pg)
		return 12;
	if (test_resident(k->two) || test_resident(k->two + pg) || k->two[0] != 0)
		return 13;
	/* the child guessed as the parent would have: the state came along */
	if (k->guessing && vma_skipped_of(b) != before + 1)
		return 14;
	k->hole[0] = 6;
	if (madvx_batch_add(b, k->hole, 2 * pg, MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(b) != k->want)
		return 15;
	res = madvx_batch_results(b, &n);
	if (!res || n != 1 || res[0].err != k->want || res[0].done != pg)
		return 16;
	if (test_resident(k->hole) != test_resident(k->twin))
		return 17;
	madvx_batch_free(b);
	return 0;
}

/*
 * The lone-hint rule (the first lone hint guessed, then 8 looked-up lone
 * hints in one VMA, then the next is planned without a look-up) is
 * process-wide state that a child of any
 * kind inherits with the memory, raw clone() included. Results never
 * depend on it: the child's lone hints that cross VMAs or meet a hole get
 * madvise()'s answers.
 */
START_TEST(test_lone_guess_inherited)
{
	enum fork_kind kind = (enum fork_kind)_i;
	struct guess_kid k;
	struct madvx_batch *b;
	uint8_t *streak = test_map_filled(9, 1);
	int status;
	pid_t pid;

	if (UNDER_TSAN && kind != FK_FORK)
		return;
	k.two = test_map_filled(2, 2);
	ck_assert_int_eq(mprotect(k.two + pg, pg, PROT_READ), 0);
	k.hole = test_map_filled(2, 3);
	k.twin = test_map_filled(2, 3);
	ck_assert_int_eq(munmap(k.hole + pg, pg), 0);
	ck_assert_int_eq(munmap(k.twin + pg, pg), 0);
	k.want = madvise(k.twin, 2 * pg, MADV_DONTNEED) ? -errno : 0;
	k.guessing = madvx_advice_lock(MADV_DONTNEED) == MADVX_LOCK_PER_VMA;
	/*
	 * the streak: 8 lone hints looked up, each in the one VMA of streak,
	 * after the process's first lone hint, which is guessed unseen
	 */
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int i = 0; i < 9; i++) {
		streak[i * pg] = 2;
		ck_assert_int_ge(madvx_batch_add(b, streak + i * pg, pg, MADV_DONTNEED), 0);
		ck_assert_int_eq(madvx_batch_flush(b), 0);
		ck_assert_int_eq(test_resident(streak + i * pg), 0);
	}
	madvx_batch_free(b);
	pid = spawn(kind, guess_child, &k);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: child check %d failed", fk_name[kind],
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	/* the parent's own state is untouched by the child's */
	ck_assert_int_eq(test_resident(k.two), 1);
	munmap(streak, 9 * pg);
	munmap(k.two, 2 * pg);
	munmap(k.hole, pg);
	munmap(k.twin, pg);
}
END_TEST

/*
 * The batch's VMA cache is kept by a child of any kind (vma.h): its layout
 * is the parent's at the fork, so the child's flush over VMAs the parent
 * looked up needs no look-up of its own, and its pages are zapped (the
 * child's; the parent's stay). A VMA the parent had made MADV_DONTFORK is a
 * hole in the child although the cache names it: the kernel's ENOMEM for
 * that entry gives the hint madvise()'s answer (-ENOMEM, the pages below the
 * hole done and zapped). Before, the cache was dropped in every new process
 * and the first flush here looked up every VMA again (check 20).
 */
struct cache_kid {
	struct madvx_batch *b;
	uint8_t *p;		/* 72 pages: [16,32) and [48,56) read-only, [64,72) DONTFORK */
};

static uint64_t vma_queries_of(struct madvx_batch *b)
{
	struct madvx_stats st = { .size = sizeof(st) };

	if (madvx_batch_stats(b, &st))
		return UINT64_MAX;
	return st.vma_queries;
}

static int cache_child(void *arg)
{
	const struct cache_kid *k = arg;
	static const int hint[][2] = { { 8, 16 }, { 24, 16 }, { 40, 16 }, { 56, 8 } };
	const struct madvx_hint *res;
	uint64_t before = vma_queries_of(k->b);
	unsigned char v;
	uint32_t n;

	for (size_t i = 0; i < sizeof(hint) / sizeof(hint[0]); i++)
		if (madvx_batch_add(k->b, k->p + hint[i][0] * pg, hint[i][1] * pg,
				    MADV_DONTNEED) < 0)
			return 10;
	if (madvx_batch_flush(k->b))
		return 11;
	if (vma_queries_of(k->b) != before)
		return 20;	/* looked the parent's VMAs up again */
	if (resident(k->p + 8 * pg, 56) || resident(k->p, 8) != 8 || !holds(k->p, 8, 1))
		return 21;
	if (!all_zero(k->p + 8 * pg, 56))
		return 22;
	/* [64, 72) is a hole here, whatever the cache says */
	if (mincore(k->p + 64 * pg, pg, &v) == 0 || errno != ENOMEM)
		return 23;
	k->p[60 * pg] = 9;
	if (madvx_batch_add(k->b, k->p + 60 * pg, 12 * pg, MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(k->b) != -ENOMEM)
		return 24;
	res = madvx_batch_results(k->b, &n);
	if (!res || n != 1 || res[0].err != -ENOMEM || res[0].done != 4 * pg)
		return 25;
	if (resident(k->p + 60 * pg, 4) || k->p[60 * pg])
		return 26;
	madvx_batch_free(k->b);
	return 0;
}

START_TEST(test_vma_cache_inherited)
{
	enum fork_kind kind = (enum fork_kind)_i;
	struct cache_kid k;
	int status;
	pid_t pid;

	if (UNDER_TSAN && kind != FK_FORK)
		return;
	k.p = test_map_filled(72, 1);
	ck_assert_int_eq(mprotect(k.p + 16 * pg, 16 * pg, PROT_READ), 0);
	ck_assert_int_eq(mprotect(k.p + 48 * pg, 8 * pg, PROT_READ), 0);
	ck_assert_int_eq(madvise(k.p + 64 * pg, 8 * pg, MADV_DONTFORK), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &k.b), 0);
	/* WILLNEED keeps the pages; the flush looks up all six VMAs */
	ck_assert_int_eq(madvx_batch_add(k.b, k.p, 72 * pg, MADV_WILLNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(k.b), 0);
	ck_assert_uint_ge(vma_queries_of(k.b), 6);
	pid = spawn(kind, cache_child, &k);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: child check %d failed", fk_name[kind],
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	/* the parent's pages are its own */
	ck_assert_uint_eq(resident(k.p, 72), 72);
	ck_assert(holds(k.p, 72, 1));
	madvx_batch_free(k.b);
	munmap(k.p, 72 * pg);
}
END_TEST

START_TEST(test_child_use)
{
	enum fork_kind kind = (enum fork_kind)_i;
	struct world w;
	int status = 0, ret;
	pid_t pid;

	alarm(120);
	set_who("parent", kind);
	world_init(&w, kind);
	if (kind == FK_VFORK_EXEC) {
		char *argv[] = { self_exe, "--exec-child", NULL };

		pid = spawn_exec(argv, environ);
	} else {
		pid = spawn(kind, child_use, &w);
	}
	ck_assert_msg(pid > 0, "%s failed: %d", fk_name[kind], pid);
	ret = wait_child(pid, 60000, &status);
	ck_assert_msg(ret == 0, "child of %s did not exit within 60 s (deadlock)", fk_name[kind]);
	world_check(&w);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child of %s failed (status 0x%x; its checks are on stderr)",
		      fk_name[kind], status);
	ck_assert_msg(!fails, "%d parent-side checks failed after %s (see stderr)", fails,
		      fk_name[kind]);
}
END_TEST

/* The vfork()+exec child: a fresh process using new objects on its own pages. */
static int exec_child_main(void)
{
	uint8_t *own = map_anon(3);

	snprintf(who, sizeof(who), "child, %s", fk_name[FK_VFORK_EXEC]);
	if (!own)
		return 1;
	fill(own, 3, 0x44);
	child_new_objects(own);
	return fails ? 1 : 0;
}

/* ---- misdirect: MADVX_DISABLE=pidfd_self, raw fork, MADV_PAGEOUT of file pages ---- */

#define FP 32	/* file pages */

/*
 * A file of FP pages on @dir, written, fsync'ed and unlinked, its page cache
 * dropped: pages read back through a mapping are clean and carry no journal
 * state (pages just written on ext4 are now and then not reclaimable yet,
 * which made MADV_PAGEOUT leave them resident in ~5% of the runs here).
 */
static int make_file(const char *dir, uint8_t seed)
{
	char path[PATH_MAX];
	uint8_t *buf = malloc(FP * pg);
	int fd;

	if (!buf)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/madvx-fork-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	unlink(path);
	fill(buf, FP, seed);
	if (write(fd, buf, FP * pg) != (ssize_t)(FP * pg) || fsync(fd) ||
	    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) {
		close(fd);
		free(buf);
		return -EIO;
	}
	free(buf);
	return fd;
}

/* Map @fd read-only shared (at @at if not NULL) and read every page. */
static uint8_t *map_file(int fd, void *at)
{
	volatile uint8_t sink = 0;
	uint8_t *p = mmap(at, FP * pg, PROT_READ, MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);

	if (p == MAP_FAILED)
		return NULL;
	for (size_t i = 0; i < FP; i++)
		sink += p[i * pg];
	(void)sink;
	return p;
}

struct misdirect {
	enum fork_kind kind;
	struct madvx_batch *pb;
	uint8_t *a;		/* the parent's file F1 here; the child maps F2 over it */
	int fd2;
};

static int misdirect_child(void *arg)
{
	struct misdirect *m = arg;
	const struct madvx_hint *r;
	struct madvx_batch *b;
	uint8_t *nm;
	uint32_t n = 0;
	size_t res;
	int ret;

	set_who("child", m->kind);
	/* Same address, other file: only the child maps F2, only the parent F1. */
	CHECK(map_file(m->fd2, m->a) == m->a, "mmap(MAP_FIXED) of the second file failed");
	res = resident(m->a, FP);
	CHECK(res == FP, "child's file pages: %zu of %u resident before PAGEOUT", res, FP);

	/*
	 * COLD then PAGEOUT, through the batch the parent flushed. Whole-file
	 * hints: the page cache may hold the file in one large folio, which
	 * a PAGEOUT of part of it leaves alone (6.18, ext4).
	 */
	CHECK(madvx_batch_add(m->pb, m->a, FP * pg, MADV_COLD) == 0, "add COLD");
	CHECK(madvx_batch_add(m->pb, m->a, FP * pg, MADV_PAGEOUT) == 1, "add PAGEOUT");
	ret = madvx_batch_flush(m->pb);
	CHECK(ret == 0, "inherited batch: COLD+PAGEOUT flush = %d (%s)", ret, strerror(-ret));
	r = madvx_batch_results(m->pb, &n);
	CHECK(r && n == 2, "inherited batch: %u results, want 2", n);
	for (uint32_t i = 0; r && i < n; i++)
		CHECK(r[i].err == 0 && r[i].done == FP * pg,
		      "inherited batch: hint %u err %d done %llu", i, r[i].err,
		      (unsigned long long)r[i].done);
	res = resident(m->a, FP);
	CHECK(res == 0, "inherited batch: MADV_PAGEOUT left %zu of the CHILD's %u clean file "
	      "pages resident", res, FP);

	/* Again through a batch made in the child. */
	CHECK(map_file(m->fd2, m->a) == m->a, "mmap(MAP_FIXED) of the second file failed");
	ret = madvx_batch_create(NULL, &b);
	CHECK(ret == 0, "madvx_batch_create() = %d", ret);
	if (!ret) {
		flush_one("new batch: PAGEOUT", b, m->a, FP * pg, MADV_PAGEOUT);
		madvx_batch_free(b);
	}
	res = resident(m->a, FP);
	CHECK(res == 0, "new batch: MADV_PAGEOUT left %zu of the CHILD's %u clean file pages "
	      "resident", res, FP);

	/* A mapping made after the fork, DONTNEED through the inherited batch. */
	nm = map_anon(2);
	CHECK(nm, "mmap() failed");
	if (nm) {
		fill(nm, 2, 0x19);
		flush_one("inherited batch, mapping made after the fork", m->pb, nm, 2 * pg,
			  MADV_DONTNEED);
		expect_released("inherited batch, mapping made after the fork", nm, 2);
	}
	return fails ? 1 : 0;
}

/* The re-exec'ed helper: MADVX_DISABLE has pidfd_self; argv: kind, directory. */
static int misdirect_main(enum fork_kind kind, const char *dir)
{
	struct misdirect m = { 0 };
	struct statfs sfs;
	uint8_t *c, *scratch;
	int fd0, fd1, status = 0, ret, cpu;
	size_t res;
	pid_t pid;

	alarm(60);
	m.kind = kind;
	set_who("parent", kind);
	if (madvx_feature_disabled(MADVX_FEAT_PIDFD_SELF) != 1) {
		dprintf(2, "FAIL: MADVX_DISABLE did not turn pidfd_self off\n");
		return 1;
	}
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) != 1) {
		printf("SKIP: process_madvise() unusable without PIDFD_SELF: no pidfd to misdirect\n");
		return TEST_SKIP;
	}
	if (statfs(dir, &sfs) || sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC) {
		printf("SKIP: %s is not on a disk filesystem (clean file pages cannot be paged out without swap)\n",
		       dir);
		return TEST_SKIP;
	}
	/*
	 * One CPU for us and the child: pages read in come to the LRU through
	 * a per-CPU batch, which MADV_PAGEOUT drains on its own CPU only; a
	 * process that migrated in between left a few pages resident (1 run
	 * in 60 here).
	 */
	cpu = sched_getcpu();
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	fd0 = make_file(dir, 0x10);
	fd1 = make_file(dir, 0x20);
	m.fd2 = make_file(dir, 0x30);
	if (fd0 < 0 || fd1 < 0 || m.fd2 < 0) {
		dprintf(2, "FAIL: cannot make files in %s: %d %d %d\n", dir, fd0, fd1, m.fd2);
		return 1;
	}
	/* Control: does plain madvise(MADV_PAGEOUT) evict clean pages of this filesystem? */
	c = map_file(fd0, NULL);
	if (!c || madvise(c, FP * pg, MADV_PAGEOUT) || (res = resident(c, FP)) > FP / 4) {
		printf("SKIP: madvise(MADV_PAGEOUT) does not evict clean file pages in %s\n", dir);
		return TEST_SKIP;
	}

	m.a = map_file(fd1, NULL);
	scratch = map_anon(1);
	if (!m.a || !scratch)
		return 1;
	res = resident(m.a, FP);
	CHECK(res == FP, "parent's file pages: %zu of %u resident before the fork", res, FP);
	/* One flush: the pidfd_open() pidfd (and the maps fd) are cached now. */
	ret = madvx_batch_create(NULL, &m.pb);
	if (ret)
		return 1;
	memset(scratch, 1, pg);
	flush_one("parent, before the fork", m.pb, scratch, pg, MADV_DONTNEED);

	pid = spawn(kind, misdirect_child, &m);
	if (pid < 0) {
		dprintf(2, "FAIL: %s: %d\n", fk_name[kind], pid);
		return 1;
	}
	ret = wait_child(pid, 30000, &status);
	CHECK(ret == 0, "child did not exit within 30 s (deadlock)");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status 0x%x)",
	      status);
	res = resident(m.a, FP);
	CHECK(res == FP, "the PARENT's file pages were paged out: %zu of %u still resident",
	      res, FP);
	return fails ? 1 : 0;
}

START_TEST(test_misdirect)
{
	enum fork_kind kind = (enum fork_kind)_i;
	char karg[16], dir[PATH_MAX];
	const char *d = getenv("MADVX_TEST_DIR"), *old = getenv("MADVX_DISABLE");
	char *argv[] = { self_exe, "--misdirect", karg, dir, NULL };
	int status = 0, ret;
	pid_t pid;

	alarm(90);
	snprintf(karg, sizeof(karg), "%d", (int)kind);
	if (d)
		snprintf(dir, sizeof(dir), "%s", d);
	else
		ck_assert_ptr_nonnull(getcwd(dir, sizeof(dir)));
	/* The probe reads MADVX_DISABLE once per process: a fresh exec sees it. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char list[512];

		snprintf(list, sizeof(list), "%s%spidfd_self", old ? old : "", old ? "," : "");
		setenv("MADVX_DISABLE", list, 1);
		execv(self_exe, argv);
		_exit(127);
	}
	ret = wait_child(pid, 80000, &status);
	ck_assert_msg(ret == 0, "misdirect helper (%s) hung", fk_name[kind]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == TEST_SKIP) {
		printf("NOTE: misdirect (%s) not run, reason above\n", fk_name[kind]);
		fflush(stdout);
		return;
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "MADVX_DISABLE=pidfd_self, %s: the child's PAGEOUT/DONTNEED went wrong "
		      "(status 0x%x; checks on stderr)", fk_name[kind], status);
}
END_TEST

/* ---- stress: threads inside every locking entry point while main forks ---- */

#define RR_PAGES 4

struct stress {
	_Atomic bool stop;
	_Atomic uint64_t loops[8];	/* progress of each helper thread */
	_Atomic uint64_t errors;	/* unexpected returns in the helpers */
	struct madvx_async *sa;		/* shared by two submitter threads */
	struct madvx_uffd *u;		/* NULL when userfaultfd is unusable */
	struct madvx_batch *mb;		/* the forking thread's batch */
	uint8_t *cp;			/* the page each child releases */
	uint8_t *rr;			/* the range each child registers */
	uint8_t *ur;			/* armed with u */
};

static struct stress st;

static void stress_error(const char *what, int ret)
{
	/* First few only: a broken entry point would otherwise flood the log. */
	if (atomic_fetch_add(&st.errors, 1) < 5)
		dprintf(2, "FAIL [stress helper] %s = %d\n", what, ret);
}

/*
 * Helpers run at nice 19: on two CPUs six spinning helpers would otherwise
 * take most of the forking thread's time. A helper preempted inside the
 * library is just as much "inside" at the fork as a running one.
 */
static void helper_start(void)
{
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

static void *t_region(void *arg)
{
	uint8_t *r = map_anon(RR_PAGES);
	int ret;

	helper_start();

	(void)arg;
	while (r && !atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		ret = madvx_region_register(r, RR_PAGES * pg, 0);
		if (ret)
			stress_error("madvx_region_register()", ret);
		ret = madvx_region_unregister(r);
		if (ret)
			stress_error("madvx_region_unregister()", ret);
		atomic_fetch_add_explicit(&st.loops[0], 1, memory_order_relaxed);
	}
	return NULL;
}

static void *t_batch(void *arg)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = 64 };
	uint8_t *p = map_anon(2);
	struct madvx_batch *b;
	int ret;

	helper_start();

	(void)arg;
	while (p && !atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		ret = madvx_batch_create(&o, &b);
		if (ret) {
			stress_error("madvx_batch_create()", ret);
			continue;
		}
		p[0] = 1;
		madvx_batch_add(b, p, 2 * pg, MADV_DONTNEED);
		ret = madvx_batch_flush(b);
		if (ret)
			stress_error("madvx_batch_flush()", ret);
		madvx_batch_free(b);
		atomic_fetch_add_explicit(&st.loops[1], 1, memory_order_relaxed);
	}
	return NULL;
}

static void *t_release(void *arg)
{
	uint8_t *p = map_anon(1);
	int ret;

	helper_start();

	(void)arg;
	while (p && !atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		p[0] = 1;
		ret = madvx_release(p, pg);
		if (ret)
			stress_error("madvx_release()", ret);
		ret = madvx_release_flush();
		if (ret)
			stress_error("madvx_release_flush()", ret);
		atomic_fetch_add_explicit(&st.loops[2], 1, memory_order_relaxed);
	}
	return NULL;
}

static void *t_async(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint8_t *p = map_anon(1);
	struct madvx_batch *b;
	uint64_t t;
	int ret;

	helper_start();

	if (!p || madvx_batch_create(NULL, &b)) {
		stress_error("async thread setup", -ENOMEM);
		return NULL;
	}
	while (!atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		p[0] = 1;
		madvx_batch_add(b, p, pg, MADV_DONTNEED);
		ret = madvx_async_submit(st.sa, b, &t);
		if (ret) {
			stress_error("madvx_async_submit()", ret);
			madvx_batch_flush(b);
			continue;
		}
		ret = madvx_async_wait(st.sa, t);
		if (ret)
			stress_error("madvx_async_wait()", ret);
		atomic_fetch_add_explicit(&st.loops[3 + id], 1, memory_order_relaxed);
	}
	madvx_batch_free(b);
	return NULL;
}

static void *t_uffd(void *arg)
{
	struct madvx_uffd_event ev[8];
	int ret;

	helper_start();

	(void)arg;
	while (!atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		ret = madvx_uffd_read_events(st.u, ev, 8, 0);
		if (ret < 0)
			stress_error("madvx_uffd_read_events()", ret);
		ret = madvx_uffd_drain(st.u, 0);
		if (ret < 0)
			stress_error("madvx_uffd_drain()", ret);
		atomic_fetch_add_explicit(&st.loops[5], 1, memory_order_relaxed);
	}
	return NULL;
}

static void *t_probe(void *arg)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	unsigned int i = 0;
	int ret;

	helper_start();

	(void)arg;
	while (!atomic_load_explicit(&st.stop, memory_order_relaxed)) {
		ret = madvx_kernel_info_get(&ki);
		if (ret)
			stress_error("madvx_kernel_info_get()", ret);
		ret = madvx_feature_supported((enum madvx_feature)(i++ % MADVX_FEAT__COUNT));
		if (ret < 0)
			stress_error("madvx_feature_supported()", ret);
		atomic_fetch_add_explicit(&st.loops[6], 1, memory_order_relaxed);
	}
	return NULL;
}

/*
 * Exit codes of a stress child: which step failed. Nothing here may
 * allocate or print: other threads of the parent may have held malloc's or
 * stdio's locks at the fork.
 */
enum {
	SC_OK = 0,
	SC_ADD = 10,
	SC_FLUSH,
	SC_REGISTER,
	SC_NOT_ZERO,
	SC_PROBE,
	SC_UFFD_NOT_ECHILD,
	SC_ASYNC_NOT_ECHILD,
	SC_EXEC = 127,
};

/*
 * Where a stress child is: it stores the SC_* of the call it is about to
 * make in a MAP_SHARED page, so a hung child tells which entry point hangs.
 */
static _Atomic int *child_step;

static void step(int sc)
{
	atomic_store_explicit(child_step, sc, memory_order_relaxed);
}

static const char *sc_call(int sc)
{
	switch (sc) {
	case SC_ADD: return "madvx_batch_add()";
	case SC_FLUSH: return "madvx_batch_flush()";
	case SC_REGISTER: return "madvx_region_register()";
	case SC_NOT_ZERO: return "checking the page (mincore, contents)";
	case SC_PROBE: return "madvx_feature_supported() (the probe)";
	case SC_UFFD_NOT_ECHILD: return "madvx_uffd_read_events() on the inherited uffd";
	case SC_ASYNC_NOT_ECHILD: return "madvx_async_poll() on the inherited async object";
	case SC_OK: return "_exit() (after every call returned)";
	default: return "its start (before any library call)";
	}
}

static const char *sc_name(int code)
{
	switch (code) {
	case SC_ADD: return "madvx_batch_add() on the inherited batch failed";
	case SC_FLUSH: return "madvx_batch_flush() of a DONTNEED on the child's page failed";
	case SC_REGISTER: return "madvx_region_register() failed";
	case SC_NOT_ZERO: return "the child's page is not zero after the DONTNEED flush";
	case SC_PROBE: return "madvx_feature_supported() failed";
	case SC_UFFD_NOT_ECHILD: return "inherited uffd: read_events is not -ECHILD";
	case SC_ASYNC_NOT_ECHILD: return "inherited async: poll is not -ECHILD";
	case SC_EXEC: return "exec failed";
	default: return "unknown";
	}
}

static int stress_child(void *arg)
{
	struct madvx_uffd_event ev;

	(void)arg;
	step(SC_ADD);
	if (madvx_batch_add(st.mb, st.cp, pg, MADV_DONTNEED) != 0)
		return SC_ADD;
	step(SC_FLUSH);
	if (madvx_batch_flush(st.mb) != 0)
		return SC_FLUSH;
	step(SC_REGISTER);
	if (madvx_region_register(st.rr, RR_PAGES * pg, 0) != 0)
		return SC_REGISTER;
	step(SC_NOT_ZERO);
	if (resident(st.cp, 1) != 0 || !test_page_zero(st.cp))
		return SC_NOT_ZERO;
	step(SC_PROBE);
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) < 0)
		return SC_PROBE;
	step(SC_UFFD_NOT_ECHILD);
	if (st.u && madvx_uffd_read_events(st.u, &ev, 1, 0) != -ECHILD)
		return SC_UFFD_NOT_ECHILD;
	step(SC_ASYNC_NOT_ECHILD);
	if (madvx_async_poll(st.sa, 1) != -ECHILD)
		return SC_ASYNC_NOT_ECHILD;
	step(SC_OK);
	return SC_OK;
}

/* The vfork()+exec child of the stress: the same work in a fresh process. */
static int stress_exec_child_main(void)
{
	struct madvx_batch *b;
	uint8_t *p = map_anon(1 + RR_PAGES);

	if (!p)
		return 1;
	memset(p, 7, pg);
	if (madvx_batch_create(NULL, &b) || madvx_batch_add(b, p, pg, MADV_DONTNEED) != 0)
		return SC_ADD;
	if (madvx_batch_flush(b))
		return SC_FLUSH;
	if (madvx_region_register(p + pg, RR_PAGES * pg, 0))
		return SC_REGISTER;
	if (resident(p, 1) != 0 || !test_page_zero(p))
		return SC_NOT_ZERO;
	return SC_OK;
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : def;
}

/* No fork of the stress test may take longer (a child's own hang: 10 s). */
#define STRESS_STALL_S 60

/* 16 forks: the five that keep running our code three times each, one vfork+exec. */
static enum fork_kind stress_kind(long i)
{
	long k = i % 16;

	if (k == 15)
		return FK_VFORK_EXEC;
	return UNDER_TSAN ? FK_FORK : (enum fork_kind)(k % FK_FORKED_COUNT);
}

START_TEST(test_stress)
{
	const char *k = getenv("MADVX_IN_TEST_KERNEL");
	long n = env_long("MADVX_FORK_STRESS", k && *k == '1' ? 1000 : 10000);
	long bad[FK__COUNT] = { 0 }, first_bad = -1, nbad = 0, forks = 0;
	uint64_t kind_ns[FK__COUNT] = { 0 }, kind_n[FK__COUNT] = { 0 };
	int first_code = 0;
	enum fork_kind first_kind = FK_FORK;
	char *argv[] = { self_exe, "--stress-exec-child", NULL };
	char hung[256] = "";
	pthread_t th[7];
	int nth = 0, ret;
	uint64_t t0, t1;

	/*
	 * The backstop for a hang of this thread (a hung child is caught after
	 * 10 s by wait_child()): re-armed at every fork, so it measures
	 * progress, not the wall time of all n forks - a budget of 50 ms per
	 * fork killed a healthy run at load 25 on 2 CPUs (649 s for 10,000).
	 * (In CK_FORK mode the runner's SIGALRM handler kills the test:
	 * "signal 9".)
	 */
	alarm(STRESS_STALL_S);
	clone_stack_init();
	child_step = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(child_step, MAP_FAILED);
	st.cp = map_anon(1);
	st.rr = map_anon(RR_PAGES);
	ck_assert(st.cp && st.rr);
	memset(st.cp, 0x77, pg);
	ck_assert_int_eq(madvx_batch_create(NULL, &st.mb), 0);
	ck_assert_int_eq(madvx_async_create(NULL, &st.sa), 0);
	if (madvx_feature_supported(MADVX_FEAT_UFFD) == 1) {
		ck_assert_int_eq(madvx_uffd_open(NULL, &st.u), 0);
		st.ur = map_anon(2);
		ck_assert_int_eq(madvx_uffd_register(st.u, (uintptr_t)st.ur, 2 * pg,
						     MADVX_UFFD_MISSING, NULL), 0);
	} else {
		printf("NOTE: userfaultfd unusable here: no thread in the uffd entry points\n");
	}

	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_region, NULL), 0);
	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_batch, NULL), 0);
	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_release, NULL), 0);
	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_async, (void *)0), 0);
	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_async, (void *)1), 0);
	if (st.u)
		ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_uffd, NULL), 0);
	ck_assert_int_eq(pthread_create(&th[nth++], NULL, t_probe, NULL), 0);
	/* Let every helper get inside the library once. */
	usleep(20000);

	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		enum fork_kind kind = stress_kind(i);
		uint64_t f0 = now_ns();
		int status = 0;
		pid_t pid;

		alarm(STRESS_STALL_S);
		atomic_store(child_step, -1);
		pid = kind == FK_VFORK_EXEC ? spawn_exec(argv, environ)
					    : spawn(kind, stress_child, NULL);
		if (pid < 0) {
			snprintf(hung, sizeof(hung), "%s failed at iteration %ld: %d",
				 fk_name[kind], i, pid);
			break;
		}
		ret = wait_child(pid, 10000, &status);
		kind_ns[kind] += now_ns() - f0;
		kind_n[kind]++;
		forks++;
		if (ret && ret != -ETIMEDOUT) {
			snprintf(hung, sizeof(hung), "waiting for the child of %s failed: %d",
				 fk_name[kind], ret);
			break;
		}
		if (ret) {
			snprintf(hung, sizeof(hung), "DEADLOCK: the child of %s (iteration %ld of %ld) "
				 "hung in %s for 10 s; %ld earlier children failed", fk_name[kind], i, n,
				 kind == FK_VFORK_EXEC ? "exec or the exec'ed helper"
						       : sc_call(atomic_load(child_step)), nbad);
			break;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);

			nbad++;
			if (bad[kind]++ < 3)
				dprintf(2, "FAIL [stress] child of %s, iteration %ld: %s (status 0x%x)\n",
					fk_name[kind], i, code > 0 ? sc_name(code) : "killed by a signal",
					status);
			if (first_bad < 0) {
				first_bad = i;
				first_kind = kind;
				first_code = code;
			}
		}
	}
	t1 = now_ns();
	alarm(STRESS_STALL_S);
	/* Helpers stop before any assertion, so that none is left running. */
	atomic_store(&st.stop, true);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	ck_assert_msg(!hung[0], "%s", hung);
	printf("stress: %ld forks in %.2f s (%.0f us each); helper loops: region %llu, batch %llu, "
	       "release %llu, async %llu+%llu, uffd %llu, probe %llu\n",
	       forks, (double)(t1 - t0) / 1e9, (double)(t1 - t0) / 1e3 / (double)(forks ? forks : 1),
	       (unsigned long long)st.loops[0], (unsigned long long)st.loops[1],
	       (unsigned long long)st.loops[2], (unsigned long long)st.loops[3],
	       (unsigned long long)st.loops[4], (unsigned long long)st.loops[5],
	       (unsigned long long)st.loops[6]);
	for (int kd = 0; kd < FK__COUNT; kd++) {
		if (kind_n[kd])
			printf("stress: %s: %llu forks, %.0f us each (fork to reaped)\n", fk_name[kd],
			       (unsigned long long)kind_n[kd], (double)kind_ns[kd] / 1e3 / (double)kind_n[kd]);
		if (bad[kd])
			printf("stress: %ld children of %s failed\n", bad[kd], fk_name[kd]);
	}
	fflush(stdout);
	ck_assert_msg(first_bad < 0, "child of %s failed at iteration %ld: %s", fk_name[first_kind],
		      first_bad, first_code > 0 ? sc_name(first_code) : "killed by a signal");
	ck_assert_msg(!atomic_load(&st.errors), "%llu unexpected returns in the helper threads",
		      (unsigned long long)atomic_load(&st.errors));
	/* Every helper really ran while we forked. */
	for (int i = 0; i < 7; i++)
		if (i != 5 || st.u)
			ck_assert_msg(st.loops[i] > 0, "helper %d never completed a loop", i);
	if (st.u)
		madvx_uffd_free(st.u);
	madvx_async_free(st.sa);
	madvx_batch_free(st.mb);
}
END_TEST

/* ---- probe_race: fork while threads run the probe's once-initialisation ---- */

#define PR_THREADS 3
#define PR_MAX_FORKS 12

static _Atomic int pr_go, pr_done;
static uint8_t *pr_page;

static void *pr_thread(void *arg)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	struct madvx_batch *b;

	while (!atomic_load(&pr_go))
		;
	switch ((int)(intptr_t)arg) {
	case 0:
		madvx_kernel_info_get(&ki);
		break;
	case 1:
		madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY);
		break;
	default:
		if (!madvx_batch_create(NULL, &b))
			madvx_batch_free(b);
		break;
	}
	atomic_fetch_add(&pr_done, 1);
	return NULL;
}

static int pr_child(void *arg)
{
	_Atomic int *where = arg;
	struct madvx_batch *b;

	child_step = where;
	step(SC_PROBE);
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) < 0)
		return SC_PROBE;
	step(SC_ADD);
	if (madvx_batch_create(NULL, &b) || madvx_batch_add(b, pr_page, pg, MADV_DONTNEED))
		return SC_ADD;
	step(SC_FLUSH);
	if (madvx_batch_flush(b))
		return SC_FLUSH;
	step(SC_NOT_ZERO);
	if (resident(pr_page, 1) || !test_page_zero(pr_page))
		return SC_NOT_ZERO;
	step(SC_OK);
	return SC_OK;
}

/* A fresh exec: the library's probe has not run in this process yet. */
static int probe_race_main(long round)
{
	pid_t pids[PR_MAX_FORKS];
	enum fork_kind kinds[PR_MAX_FORKS];
	pthread_t th[PR_THREADS];
	int nf = 0, bad = 0;
	uint64_t spin, deadline;
	_Atomic int *steps;

	alarm(60);
	pr_page = map_anon(1);
	clone_stack_init();
	steps = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!pr_page || steps == MAP_FAILED)
		return 1;
	memset(pr_page, 9, pg);
	for (int i = 0; i < PR_THREADS; i++)
		if (pthread_create(&th[i], NULL, pr_thread, (void *)(intptr_t)i))
			return 1;
	atomic_store(&pr_go, 1);
	/* Vary where in the probe the first fork lands. */
	spin = now_ns() + (uint64_t)(round % 8) * 150000;
	while (now_ns() < spin)
		;
	do {
		kinds[nf] = UNDER_TSAN ? FK_FORK
				       : (enum fork_kind)((round + nf) % FK_FORKED_COUNT);
		atomic_store(&steps[nf], -1);
		pids[nf] = spawn(kinds[nf], pr_child, (void *)&steps[nf]);
		if (pids[nf] < 0)
			return 1;
		nf++;
	} while (nf < PR_MAX_FORKS && atomic_load(&pr_done) < PR_THREADS);

	/* Every child gets 10 s from its fork: after that it is deadlocked. */
	deadline = now_ns() + 10000000000ULL;
	for (int i = 0; i < nf; i++) {
		uint64_t now = now_ns();
		int left = now < deadline ? (int)((deadline - now) / 1000000) : 0;
		int status = 0, ret = wait_child(pids[i], left > 100 ? left : 100, &status);

		if (ret == -ETIMEDOUT) {
			dprintf(2, "FAIL [probe_race] DEADLOCK: the child of %s (round %ld, fork %d, "
				"forked while threads ran the first probe) hung in %s for 10 s\n",
				fk_name[kinds[i]], round, i, sc_call(atomic_load(&steps[i])));
			bad++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			dprintf(2, "FAIL [probe_race] the child of %s (round %ld, fork %d): %s (0x%x)\n",
				fk_name[kinds[i]], round, i,
				WIFEXITED(status) ? sc_name(WEXITSTATUS(status)) : "signal", status);
			bad++;
		}
	}
	for (int i = 0; i < PR_THREADS; i++)
		pthread_join(th[i], NULL);
	return bad ? 1 : 0;
}

START_TEST(test_probe_race)
{
	long rounds = env_long("MADVX_PROBE_RACE_ROUNDS", 40);
	char rarg[24];
	char *argv[] = { self_exe, "--probe-race", rarg, NULL };

	alarm((unsigned int)(60 + rounds * 2));
	for (long r = 0; r < rounds; r++) {
		int status = 0, ret;
		pid_t pid;

		snprintf(rarg, sizeof(rarg), "%ld", r);
		pid = spawn_exec(argv, environ);
		ck_assert_int_gt(pid, 0);
		/* The helper bounds each of its children by 10 s. */
		ret = wait_child(pid, 60000, &status);
		ck_assert_msg(ret == 0, "probe_race helper of round %ld hung", r);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "round %ld: a child forked during the first probe failed or hung "
			      "(status 0x%x; details on stderr)", r, status);
	}
}
END_TEST

/* ---- results_race: two readers of one flushed batch's results ---- */

#define RP 64		/* pages of the area */
#define RH 48		/* hints per flush */
#define R_ITERS 2000

struct rr_reader {
	pthread_t th;
	struct madvx_hint copy[RH];
	const struct madvx_hint *ptr;
	uint32_t n;
};

static struct {
	pthread_barrier_t start, end;
	struct madvx_batch *b;
	_Atomic bool stop;
	struct rr_reader r[2];
} rr;

static void *rr_thread(void *arg)
{
	struct rr_reader *me = arg;

	for (;;) {
		pthread_barrier_wait(&rr.start);
		if (atomic_load(&rr.stop))
			return NULL;
		me->ptr = madvx_batch_results(rr.b, &me->n);
		if (me->ptr && me->n <= RH)
			memcpy(me->copy, me->ptr, me->n * sizeof(me->copy[0]));
		pthread_barrier_wait(&rr.end);
	}
}

START_TEST(test_results_race)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = RH };
	uint64_t want_done[RH];
	int want_err[RH], adv[RH];
	size_t off[RH], len[RH];
	bool hole[RP] = { false };
	uint8_t *area;
	int mism = 0;

	alarm(120);
	/*
	 * Threads and batch first: mappings made after the holes (thread
	 * stacks, batch storage, a sanitizer's own) could land in them.
	 */
	ck_assert_int_eq(madvx_batch_create(&o, &rr.b), 0);
	ck_assert_int_eq(pthread_barrier_init(&rr.start, NULL, 3), 0);
	ck_assert_int_eq(pthread_barrier_init(&rr.end, NULL, 3), 0);
	for (int t = 0; t < 2; t++)
		ck_assert_int_eq(pthread_create(&rr.r[t].th, NULL, rr_thread, &rr.r[t]), 0);

	/*
	 * Far below the mmap area (256 GiB: application memory for TSan too,
	 * when the kernel gives it), so that mappings made later go elsewhere:
	 * top-down placement fills the highest free gap first, which would be
	 * one of our holes (TSan's runtime maps single pages in the readers).
	 */
	area = mmap((void *)(1ULL << 38), (RP + 2) * pg, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(area != MAP_FAILED);
	/* Guard pages at both ends, a hole every 7 pages: varied err and done. */
	ck_assert_int_eq(mprotect(area, pg, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(area + (RP + 1) * pg, pg, PROT_NONE), 0);
	area += pg;
	for (size_t i = 3; i < RP; i += 7) {
		hole[i] = true;
		ck_assert_int_eq(munmap(area + i * pg, pg), 0);
	}
	for (int h = 0; h < RH; h++) {
		uint64_t mapped = 0;
		bool gap = false;

		off[h] = (size_t)(h * 5) % (RP - 4);
		len[h] = (size_t)(1 + h % 4) * pg - (h % 3 ? 0 : 100);
		adv[h] = h % 2 ? MADV_DONTNEED : MADV_COLD;
		for (size_t i = off[h]; i * pg < off[h] * pg + len[h]; i++) {
			gap |= hole[i];
			mapped += hole[i] ? 0 : pg;
		}
		want_done[h] = mapped;
		want_err[h] = gap ? -ENOMEM : 0;
	}

	for (int it = 0; it < R_ITERS && mism < 5; it++) {
		unsigned char v;
		int ret;

		for (size_t i = 0; i < RP; i++) {
			if (!hole[i])
				area[i * pg] = (uint8_t)it;
			else
				ck_assert_msg(mincore(area + i * pg, pg, &v) && errno == ENOMEM,
					      "iteration %d: someone mapped our hole at page %zu", it, i);
		}
		/* Alternate two hint sets, so stale results of the last flush differ. */
		for (int h = 0; h < RH; h++) {
			int k = it % 2 ? RH - 1 - h : h;

			ck_assert_int_eq(madvx_batch_add(rr.b, area + off[k] * pg, len[k], adv[k]), h);
		}
		ret = madvx_batch_flush(rr.b);
		ck_assert_msg(ret == -ENOMEM, "iteration %d: flush = %d, want -ENOMEM (hints over holes)",
			      it, ret);
		pthread_barrier_wait(&rr.start);
		pthread_barrier_wait(&rr.end);
		for (int t = 0; t < 2; t++) {
			struct rr_reader *r = &rr.r[t];

			if (!r->ptr || r->n != RH) {
				fprintf(stderr, "FAIL [results_race] iteration %d reader %d: %u results, want %d\n",
					it, t, r->n, RH);
				mism++;
				continue;
			}
			for (int h = 0; h < RH; h++) {
				int k = it % 2 ? RH - 1 - h : h;
				const struct madvx_hint *x = &r->copy[h];

				if (x->addr != (uintptr_t)(area + off[k] * pg) || x->len != len[k] ||
				    x->advice != adv[k] || x->err != want_err[k] ||
				    x->done != want_done[k] || x->seq != (uint64_t)it * RH + (uint64_t)h) {
					fprintf(stderr, "FAIL [results_race] iteration %d reader %d hint %d: "
						"advice %d err %d done %llu seq %llu, want advice %d err %d "
						"done %llu seq %llu\n", it, t, h, x->advice, x->err,
						(unsigned long long)x->done, (unsigned long long)x->seq,
						adv[k], want_err[k], (unsigned long long)want_done[k],
						(unsigned long long)it * RH + (unsigned long long)h);
					mism++;
					break;
				}
			}
		}
	}
	atomic_store(&rr.stop, true);
	pthread_barrier_wait(&rr.start);
	for (int t = 0; t < 2; t++)
		pthread_join(rr.r[t].th, NULL);
	ck_assert_msg(!mism, "%d readers saw incomplete or wrong results", mism);
	madvx_batch_free(rr.b);
}
END_TEST

static Suite *fork_suite(void)
{
	Suite *s = suite_create("fork");
	TCase *tc = tcase_create("fork");

	/* Each test bounds itself with alarm(); this is only a backstop. */
	tcase_set_timeout(tc, 1800);
	tcase_add_loop_test(tc, test_child_use, 0, FK__COUNT);
	tcase_add_loop_test(tc, test_lone_guess_inherited, 0, FK_FORKED_COUNT);
	tcase_add_loop_test(tc, test_vma_cache_inherited, 0, FK_FORKED_COUNT);
	tcase_add_loop_test(tc, test_misdirect, 0, FK_FORKED_COUNT);
	tcase_add_test(tc, test_probe_race);
	tcase_add_test(tc, test_stress);
	tcase_add_test(tc, test_results_race);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	pg = test_page();
	if (n <= 0)
		test_skip("cannot read /proc/self/exe (needed to re-exec helpers)");
	self_exe[n] = 0;
#if UNDER_TSAN
	/*
	 * child_use's children make an async object (a thread) after a fork
	 * of a process with threads, which TSan refuses by default; its
	 * options are read at start-up, so set them and start again.
	 */
	{
		const char *o = getenv("TSAN_OPTIONS");
		char buf[1024];

		if (!o || !strstr(o, "die_after_fork")) {
			snprintf(buf, sizeof(buf), "%s%sdie_after_fork=0", o ? o : "", o ? ":" : "");
			setenv("TSAN_OPTIONS", buf, 1);
			execv(self_exe, argv);
		}
	}
#endif
	if (argc >= 2 && !strcmp(argv[1], "--exec-child"))
		return exec_child_main();
	if (argc >= 2 && !strcmp(argv[1], "--stress-exec-child"))
		return stress_exec_child_main();
	if (argc >= 4 && !strcmp(argv[1], "--misdirect"))
		return misdirect_main((enum fork_kind)atoi(argv[2]), argv[3]);
	if (argc >= 3 && !strcmp(argv[1], "--probe-race"))
		return probe_race_main(strtol(argv[2], NULL, 0));
	/* No library call here: every test starts with an unprobed library. */
	return test_run_suite(fork_suite());
}
