// SPDX-License-Identifier: MIT
/*
 * userfaultfd operations against their effect on memory: page contents,
 * residency (mincore) and the progress each call reports, including the
 * partial and error cases (EEXIST, ENOENT holes, EBUSY shared pages), and
 * move/copy lists coalesced into one ioctl per VMA-bounded run.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/wait.h>

#include "harness.h"
#include "util.h"

static size_t pg;

static struct madvx_uffd *open_uffd(uint64_t features)
{
	struct madvx_uffd_opts o = { .size = sizeof(o), .features = features };
	struct madvx_uffd *u = NULL;

	ck_assert_int_eq(madvx_uffd_open(&o, &u), 0);
	ck_assert_ptr_nonnull(u);
	return u;
}

/* Add @fn when the kernel has @features; else say it is skipped and why. */
static void add_if(TCase *tc, const TTest *fn, uint64_t features, const char *what)
{
	if (madvx_uffd_missing_features(features))
		printf("SKIP %s: kernel lacks %s\n", fn->name, what);
	else
		tcase_add_test(tc, fn);
}

static uint8_t *map_empty(size_t pages)
{
	uint8_t *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

static uint8_t *map_registered(struct madvx_uffd *u, size_t pages, unsigned int mode)
{
	uint8_t *p = map_empty(pages);
	uint64_t ioctls = 0;

	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)p, pages * pg, mode, &ioctls), 0);
	ck_assert(ioctls & (1ULL << _UFFDIO_COPY));
	return p;
}

static bool page_is(const uint8_t *p, uint8_t v)
{
	for (size_t i = 0; i < pg; i++)
		if (p[i] != v)
			return false;
	return true;
}

static struct madvx_uffd_item item(const void *dst, const void *src, size_t len)
{
	return (struct madvx_uffd_item){ .dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = len };
}

static uint64_t ioctls_of(struct madvx_uffd *u)
{
	struct madvx_uffd_stats st = { .size = sizeof(st) };

	ck_assert_int_eq(madvx_uffd_stats_get(u, &st), 0);
	return st.ioctls;
}

START_TEST(open_reports_missing_features)
{
	struct madvx_uffd_opts o = { .size = sizeof(o), .features = 1ULL << 62 };
	struct { struct madvx_uffd_opts o; uint64_t tail; } big = {
		.o = { .size = sizeof(big) }, .tail = 1 };
	struct madvx_uffd *u = (void *)1;

	ck_assert_uint_eq(madvx_uffd_missing_features(1ULL << 62 | UFFD_FEATURE_EVENT_REMAP),
			  1ULL << 62);
	ck_assert_int_eq(madvx_uffd_open(&o, &u), -EOPNOTSUPP);
	ck_assert_ptr_null(u);
	ck_assert_int_eq(madvx_uffd_open(&big.o, &u), -E2BIG);
	o = (struct madvx_uffd_opts){ .size = 4 };
	ck_assert_int_eq(madvx_uffd_open(&o, &u), -EINVAL);
	ck_assert_int_eq(madvx_uffd_open(NULL, NULL), -EINVAL);
	madvx_uffd_free(NULL);

	o = (struct madvx_uffd_opts){ .size = sizeof(o),
		.flags = MADVX_UFFD_USER_MODE_ONLY | MADVX_UFFD_KERNEL_FAULTS };
	ck_assert_int_eq(madvx_uffd_open(&o, &u), -EINVAL);
	o.flags = MADVX_UFFD_USER_MODE_ONLY;
	ck_assert_int_eq(madvx_uffd_open(&o, &u), 0);
	ck_assert_int_eq(madvx_uffd_user_mode_only(u), 1);
	madvx_uffd_free(u);

	ck_assert_int_eq(madvx_uffd_open(NULL, &u), 0);
	if (geteuid() == 0)	/* CAP_SYS_PTRACE: the full userfaultfd */
		ck_assert_int_eq(madvx_uffd_user_mode_only(u), 0);
	ck_assert_int_ge(madvx_uffd_fd(u), 0);
	ck_assert_int_ge(madvx_uffd_poll_fd(u), 0);
	ck_assert_uint_eq(madvx_uffd_features(u), 0);
	ck_assert_int_eq(fcntl(madvx_uffd_fd(u), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	/* Always non-blocking: a blocking uffd polls as POLLERR. */
	ck_assert_int_eq(fcntl(madvx_uffd_fd(u), F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	madvx_uffd_free(u);
}
END_TEST

/*
 * MADVX_DISABLE=uffd_move takes UFFD_FEATURE_MOVE away from the handshake too.
 * The probe is cached per process, so the check runs in a fresh exec.
 */
static int disabled_move_child(void)
{
	struct madvx_uffd_opts o = { .size = sizeof(o), .features = UFFD_FEATURE_MOVE };
	struct madvx_uffd *u = NULL;

	if (madvx_uffd_missing_features(UFFD_FEATURE_MOVE | UFFD_FEATURE_EVENT_REMAP) !=
	    UFFD_FEATURE_MOVE)
		return 1;
	if (madvx_uffd_open(&o, &u) != -EOPNOTSUPP || u)
		return 2;
	o.features = 0;
	o.optional_features = UFFD_FEATURE_MOVE;
	if (madvx_uffd_open(&o, &u) || (madvx_uffd_features(u) & UFFD_FEATURE_MOVE))
		return 3;
	madvx_uffd_free(u);
	return 0;
}

/*
 * The probe is cached per process: a check under MADVX_DISABLE=@disable runs
 * in a fresh exec of this program with @arg, and must exit 0.
 */
static void run_disabled_child(const char *disable, const char *arg)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("MADVX_DISABLE", disable, 1);
		execl("/proc/self/exe", "test_uffd", arg, (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

START_TEST(disable_hides_feature)
{
	run_disabled_child("uffd_move", "--disabled-move-child");
}
END_TEST

START_TEST(copy_fills_and_eexist_continues)
{
	struct madvx_uffd *u = open_uffd(0);
	uint8_t *dst = map_registered(u, 4, MADVX_UFFD_MISSING);
	uint8_t *src = test_map_filled(4, 0x10), *src2 = test_map_filled(4, 0x80);
	uint64_t done = 99;

	/* Pages 1 and 2 first, then all four: 0 and 3 copied, 1-2 present. */
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst + pg, (uintptr_t)src + pg,
					 2 * pg, 0, &done), 0);
	ck_assert_uint_eq(done, 2 * pg);
	ck_assert_int_eq(test_resident(dst), 0);
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src2, 4 * pg, 0, &done), 0);
	ck_assert_uint_eq(done, 4 * pg);
	ck_assert(page_is(dst, 0x80));
	ck_assert(page_is(dst + pg, 0x11));	/* already present: not overwritten */
	ck_assert(page_is(dst + 2 * pg, 0x12));
	ck_assert(page_is(dst + 3 * pg, 0x83));
	ck_assert(page_is(src, 0x10));		/* COPY leaves the source alone */

	/* EEXIST_STOP: stops at the first present page with its offset. */
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src, pg,
					 MADVX_UFFD_EEXIST_STOP, &done), -EEXIST);
	ck_assert_uint_eq(done, 0);
	ck_assert(page_is(dst, 0x80));

	/* Flags an op does not take are refused, not ignored; errno stays the caller's. */
	errno = 4242;
	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)dst, pg, MADVX_UFFD_ALLOW_SRC_HOLES,
					     &done), -EINVAL);
	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst, (uintptr_t)src, pg, MADVX_UFFD_MAP_WP,
					 &done), -EINVAL);
	ck_assert_int_eq(errno, 4242);

	/* Unaligned destination and a range outside any registration. */
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst + 1, (uintptr_t)src, pg, 0, &done),
			 -EINVAL);
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)src, (uintptr_t)src2, pg, 0, &done),
			 -ENOENT);
	ck_assert_uint_eq(done, 0);
	madvx_uffd_free(u);
	munmap(dst, 4 * pg);
	munmap(src, 4 * pg);
	munmap(src2, 4 * pg);
}
END_TEST

START_TEST(zeropage_maps_zeros)
{
	struct madvx_uffd *u = open_uffd(0);
	uint8_t *dst = map_registered(u, 3, MADVX_UFFD_MISSING);
	uint64_t done = 0;

	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)dst, 3 * pg, 0, &done), 0);
	ck_assert_uint_eq(done, 3 * pg);
	ck_assert_int_eq(test_resident(dst + pg), 1);
	ck_assert(test_page_zero(dst + 2 * pg));
	dst[0] = 7;		/* writable: COW from the zero page, no fault event */
	ck_assert_int_eq(dst[0], 7);
	madvx_uffd_free(u);
	munmap(dst, 3 * pg);
}
END_TEST

START_TEST(move_empties_source)
{
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	uint64_t done = 0;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, 8, MADVX_UFFD_MISSING);
	src = test_map_filled(8, 0x40);
	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst, (uintptr_t)src, 8 * pg, 0, &done), 0);
	ck_assert_uint_eq(done, 8 * pg);
	for (size_t i = 0; i < 8; i++) {
		ck_assert(page_is(dst + i * pg, (uint8_t)(0x40 + i)));
		ck_assert_int_eq(test_resident(src + i * pg), 0);
	}
	ck_assert(test_page_zero(src));	/* empty: reads back as zero */
	madvx_uffd_free(u);
	munmap(dst, 8 * pg);
	munmap(src, 8 * pg);
}
END_TEST

/* After fork the source page is shared with the child: MOVE must refuse it. */
START_TEST(move_refuses_shared_source)
{
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	uint64_t done = 99;
	int pipefd[2], status;
	char c;
	pid_t pid;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, 2, MADVX_UFFD_MISSING);
	src = test_map_filled(2, 0x50);
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pipefd[1]);
		/* Keep the COW-shared pages mapped until the parent is done. */
		_exit(read(pipefd[0], &c, 1) < 0);
	}
	close(pipefd[0]);
	src[pg] = 0x99;	/* the parent's second page is its own again */
	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst, (uintptr_t)src, 2 * pg, 0, &done),
			 -EBUSY);
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(test_resident(dst), 0);
	ck_assert(page_is(src, 0x50));
	/* The exclusive page moves. */
	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst + pg, (uintptr_t)src + pg, pg, 0,
					 &done), 0);
	ck_assert_uint_eq(dst[pg], 0x99);
	close(pipefd[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	madvx_uffd_free(u);
	munmap(dst, 2 * pg);
	munmap(src, 2 * pg);
}
END_TEST

START_TEST(move_src_holes)
{
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	uint64_t done = 0;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, 4, MADVX_UFFD_MISSING);
	src = test_map_filled(4, 0x60);
	ck_assert_int_eq(madvise(src + 2 * pg, pg, MADV_DONTNEED), 0);	/* hole at page 2 */

	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst, (uintptr_t)src, 4 * pg, 0, &done),
			 -ENOENT);
	ck_assert_uint_eq(done, 2 * pg);	/* exact: the two pages before the hole */
	ck_assert(page_is(dst + pg, 0x61));
	ck_assert_int_eq(test_resident(dst + 2 * pg), 0);

	ck_assert_int_eq(madvx_uffd_move(u, (uintptr_t)dst + 2 * pg, (uintptr_t)src + 2 * pg,
					 2 * pg, MADVX_UFFD_ALLOW_SRC_HOLES, &done), 0);
	ck_assert_uint_eq(done, 2 * pg);
	ck_assert_int_eq(test_resident(dst + 2 * pg), 0);	/* the hole moved as a hole */
	ck_assert(page_is(dst + 3 * pg, 0x63));
	ck_assert_int_eq(test_resident(src + 3 * pg), 0);
	madvx_uffd_free(u);
	munmap(dst, 4 * pg);
	munmap(src, 4 * pg);
}
END_TEST

/*
 * MINOR on anonymous memory is -EOPNOTSUPP (the kernel alone says -EINVAL),
 * also for a range that starts in shmem and runs on into anonymous memory;
 * shmem alone is registered. Returns 0 or the number of the check that failed.
 */
static int minor_anon_checks(void)
{
	struct madvx_uffd_opts o = { .size = sizeof(o), .features = UFFD_FEATURE_MINOR_SHMEM };
	struct madvx_uffd *u = NULL;
	uint8_t *anon, *mixed;
	int fd, ret = 0;

	if (madvx_uffd_open(&o, &u))
		return 1;
	anon = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mixed = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fd = memfd_create("uffd-minor-anon", MFD_CLOEXEC);
	if (anon == MAP_FAILED || mixed == MAP_FAILED || fd < 0 ||
	    ftruncate(fd, (off_t)(2 * pg)) ||
	    mmap(mixed, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != mixed)
		ret = 2;
	else if (madvx_uffd_register(u, (uintptr_t)anon, 2 * pg, MADVX_UFFD_MINOR, NULL) !=
		 -EOPNOTSUPP)
		ret = 3;
	else if (madvx_uffd_register(u, (uintptr_t)mixed, 4 * pg, MADVX_UFFD_MINOR, NULL) !=
		 -EOPNOTSUPP)
		ret = 4;
	else if (madvx_uffd_register(u, (uintptr_t)mixed, 2 * pg, MADVX_UFFD_MINOR, NULL))
		ret = 5;
	madvx_uffd_free(u);
	munmap(anon, 2 * pg);
	munmap(mixed, 4 * pg);
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The same where the kernel has no PROCMAP_QUERY (6.1): the maps file answers. */
static int minor_anon_no_procmap_child(void)
{
	pg = test_page();
	if (madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY))
		return 10;	/* MADVX_DISABLE did not take it away */
	return minor_anon_checks();
}

START_TEST(minor_refuses_anon)
{
	ck_assert_int_eq(minor_anon_checks(), 0);
	run_disabled_child("procmap_query", "--minor-anon-no-procmap-child");
}
END_TEST

/* MINOR needs page-cache memory: shmem works, anonymous is refused clearly. */
START_TEST(continue_maps_page_cache)
{
	struct madvx_uffd *u;
	uint8_t *anon, *a, *b;
	uint64_t done = 0;
	int fd;

	u = open_uffd(UFFD_FEATURE_MINOR_SHMEM);
	anon = map_empty(2);
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)anon, 2 * pg, MADVX_UFFD_MINOR, NULL),
			 -EOPNOTSUPP);

	fd = memfd_create("uffd-minor", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(2 * pg)), 0);
	a = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(a != MAP_FAILED && b != MAP_FAILED);
	memset(b, 0x3c, 2 * pg);	/* page cache filled through the other view */
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)a, 2 * pg, MADVX_UFFD_MINOR, NULL), 0);
	ck_assert_int_eq(test_resident(a), 1);	/* mincore sees the page cache ... */
	ck_assert_int_eq(madvx_uffd_continue(u, (uintptr_t)a, 2 * pg, 0, &done), 0);
	ck_assert_uint_eq(done, 2 * pg);
	ck_assert(page_is(a + pg, 0x3c));	/* ... and now it is mapped: no fault */
	/* Mapped already: continues past it as present. */
	ck_assert_int_eq(madvx_uffd_continue(u, (uintptr_t)a, pg, MADVX_UFFD_EEXIST_STOP,
					     &done), -EEXIST);
	madvx_uffd_free(u);
	munmap(a, 2 * pg);
	munmap(b, 2 * pg);
	munmap(anon, 2 * pg);
	close(fd);
}
END_TEST

static sigjmp_buf poison_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(poison_jmp, sig);
}

START_TEST(poison_raises_sigbus)
{
	struct madvx_uffd *u;
	volatile uint8_t *dst;
	uint64_t done = 0;
	struct sigaction sa = { .sa_handler = on_sigbus };

	u = open_uffd(UFFD_FEATURE_POISON);
	dst = map_registered(u, 2, MADVX_UFFD_MISSING);
	ck_assert_int_eq(madvx_uffd_poison(u, (uintptr_t)dst, pg, 0, &done), 0);
	ck_assert_uint_eq(done, pg);
	sigaction(SIGBUS, &sa, NULL);
	if (sigsetjmp(poison_jmp, 1) == 0) {
		(void)dst[0];
		ck_abort_msg("reading a poisoned page did not raise SIGBUS");
	}
	/* The neighbour is still an ordinary missing page. */
	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)dst + pg, pg, 0, &done), 0);
	ck_assert_int_eq(dst[pg], 0);
	madvx_uffd_free(u);
	munmap((void *)dst, 2 * pg);
}
END_TEST

static void *write_byte(void *p)
{
	*(volatile uint8_t *)p = 0x22;
	return NULL;
}

/* A write to a write-protected page blocks in a WP fault until unprotected. */
START_TEST(writeprotect_blocks_writes)
{
	struct madvx_uffd *u;
	uint8_t *dst, *src = test_map_filled(1, 0x21);
	struct madvx_uffd_event ev;
	pthread_t t;

	u = open_uffd(UFFD_FEATURE_PAGEFAULT_FLAG_WP);
	dst = map_registered(u, 1, MADVX_UFFD_MISSING | MADVX_UFFD_WP);
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src, pg,
					 MADVX_UFFD_MAP_WP, NULL), 0);
	ck_assert_int_eq(dst[5], 0x21);	/* readable without a fault */
	ck_assert_int_eq(pthread_create(&t, NULL, write_byte, dst + 5), 0);
	ck_assert_int_eq(madvx_uffd_read_events(u, &ev, 1, 5000), 1);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_PAGEFAULT);
	ck_assert(ev.arg.fault.flags & UFFD_PAGEFAULT_FLAG_WP);
	ck_assert(ev.arg.fault.flags & UFFD_PAGEFAULT_FLAG_WRITE);
	ck_assert_uint_eq(ev.arg.fault.addr, (uintptr_t)dst);
	ck_assert_int_eq(dst[5], 0x21);	/* the write is still waiting */
	ck_assert_int_eq(madvx_uffd_writeprotect(u, (uintptr_t)dst, pg, 0), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(dst[5], 0x22);
	/* Protect again: the kernel takes it (all or nothing). */
	ck_assert_int_eq(madvx_uffd_writeprotect(u, (uintptr_t)dst, pg, MADVX_UFFD_MAP_WP), 0);
	madvx_uffd_free(u);
	munmap(dst, pg);
	munmap(src, pg);
}
END_TEST

/* Items in shuffled order, contiguous on both sides: one ioctl for all. */
START_TEST(move_list_coalesces)
{
	enum { N = 64 };
	struct madvx_uffd_item it[N];
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	uint64_t before;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, N, MADVX_UFFD_MISSING);
	src = test_map_filled(N, 0);
	for (size_t i = 0; i < N; i++) {
		size_t k = (i * 37) % N;	/* a permutation */

		it[i] = (struct madvx_uffd_item){ .dst = (uintptr_t)dst + k * pg,
			.src = (uintptr_t)src + k * pg, .len = pg, .err = 1 };
	}
	before = ioctls_of(u);
	ck_assert_int_eq(madvx_uffd_move_list(u, it, N, 0), 0);
	ck_assert_uint_eq(ioctls_of(u) - before, 1);
	for (size_t i = 0; i < N; i++) {
		ck_assert_uint_eq(it[i].done, pg);
		ck_assert_int_eq(it[i].err, 0);
		ck_assert(page_is(dst + i * pg, (uint8_t)i));
		ck_assert_int_eq(test_resident(src + i * pg), 0);
	}
	madvx_uffd_free(u);
	munmap(dst, N * pg);
	munmap(src, N * pg);
}
END_TEST

/*
 * One contiguous run whose destination is two VMAs (split at page 32) and
 * whose source is two VMAs (split at page 16): three ioctls, none crossing a
 * VMA. MADV_DONTFORK splits a VMA without changing what MOVE compares.
 */
START_TEST(move_list_splits_at_vmas)
{
	enum { N = 64 };
	struct madvx_uffd_item it[N];
	struct madvx_uffd_stats st = { .size = sizeof(st) };
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	uint64_t before;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, N, MADVX_UFFD_MISSING);
	src = test_map_filled(N, 0);
	ck_assert_int_eq(madvise(dst + 32 * pg, 32 * pg, MADV_DONTFORK), 0);
	ck_assert_int_eq(madvise(src + 16 * pg, 48 * pg, MADV_DONTFORK), 0);
	for (size_t i = 0; i < N; i++)
		it[i] = (struct madvx_uffd_item){ .dst = (uintptr_t)dst + i * pg,
			.src = (uintptr_t)src + i * pg, .len = pg };
	before = ioctls_of(u);
	ck_assert_int_eq(madvx_uffd_move_list(u, it, N, 0), 0);
	ck_assert_int_eq(madvx_uffd_stats_get(u, &st), 0);
	ck_assert_uint_eq(st.ioctls - before, 3);
	ck_assert_uint_eq(st.vma_splits, 2);
	for (size_t i = 0; i < N; i++)
		ck_assert(page_is(dst + i * pg, (uint8_t)i));
	madvx_uffd_free(u);
	munmap(dst, N * pg);
	munmap(src, N * pg);
}
END_TEST

/* Per-item results: a bad item, a source hole and a present page do not stop the rest. */
START_TEST(move_list_reports_per_item)
{
	struct madvx_uffd_item it[5];
	struct madvx_uffd *u;
	uint8_t *dst, *src;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_registered(u, 8, MADVX_UFFD_MISSING);
	src = test_map_filled(8, 0x70);
	ck_assert_int_eq(madvise(src + 3 * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)dst + 6 * pg, pg, 0, NULL), 0);

	it[0] = item(dst, src, 2 * pg);
	it[1] = item(dst + 2 * pg, src + 2 * pg, 2 * pg);
	it[2] = item(dst + 4 * pg, src + 4 * pg, 3 * pg);
	it[3] = item(dst + 7 * pg + 1, src, pg);
	it[4] = item(dst + 7 * pg, src + 7 * pg, pg);
	ck_assert_int_eq(madvx_uffd_move_list(u, it, 5, 0), -ENOENT);
	/* Sorted in place by dst: the unaligned item comes last now. */
	ck_assert_uint_eq(it[3].dst, (uintptr_t)dst + 7 * pg);
	ck_assert_uint_eq(it[4].dst, (uintptr_t)dst + 7 * pg + 1);
	ck_assert_int_eq(it[0].err, 0);
	ck_assert_uint_eq(it[0].done, 2 * pg);
	ck_assert_int_eq(it[1].err, -ENOENT);		/* page 3 is a hole */
	ck_assert_uint_eq(it[1].done, pg);
	ck_assert_int_eq(it[2].err, 0);			/* page 6 was present */
	ck_assert_uint_eq(it[2].done, 3 * pg);
	ck_assert_uint_eq(it[2].existed, pg);
	ck_assert_int_eq(it[3].err, 0);
	ck_assert_int_eq(it[4].err, -EINVAL);
	ck_assert(page_is(dst + 2 * pg, 0x72));
	ck_assert(page_is(dst + 5 * pg, 0x75));
	ck_assert(test_page_zero(dst + 6 * pg));
	ck_assert(page_is(src + 6 * pg, 0x76));		/* not moved: dst was present */
	ck_assert(page_is(dst + 7 * pg, 0x77));
	madvx_uffd_free(u);
	munmap(dst, 8 * pg);
	munmap(src, 8 * pg);
}
END_TEST

/*
 * One contiguous run over destination pages 0 (registered), 1 (unmapped),
 * 2 and 3 (registered, two VMAs): the item at the hole fails alone, and the
 * run goes on with VMA bounds looked up afresh, so pages 2 and 3 still go in
 * one ioctl each without crossing their boundary.
 */
START_TEST(move_list_fails_one_vma)
{
	struct madvx_uffd_item it[4];
	struct madvx_uffd *u;
	uint8_t *dst, *src;

	u = open_uffd(UFFD_FEATURE_MOVE);
	dst = map_empty(4);
	src = test_map_filled(4, 0x90);
	ck_assert_int_eq(munmap(dst + pg, pg), 0);
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)dst, pg, MADVX_UFFD_MISSING, NULL), 0);
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)dst + 2 * pg, 2 * pg,
					     MADVX_UFFD_MISSING, NULL), 0);
	ck_assert_int_eq(madvise(dst + 3 * pg, pg, MADV_DONTFORK), 0);
	for (size_t i = 0; i < 4; i++)
		it[i] = item(dst + i * pg, src + i * pg, pg);
	ck_assert_int_eq(madvx_uffd_move_list(u, it, 4, 0), -ENOENT);
	ck_assert_int_eq(it[0].err, 0);
	ck_assert_int_eq(it[1].err, -ENOENT);
	ck_assert_uint_eq(it[1].done, 0);
	ck_assert_int_eq(it[2].err, 0);
	ck_assert_int_eq(it[3].err, 0);
	ck_assert(page_is(dst, 0x90));
	ck_assert(page_is(dst + 2 * pg, 0x92));
	ck_assert(page_is(dst + 3 * pg, 0x93));
	ck_assert(page_is(src + pg, 0x91));	/* stayed */
	ck_assert_int_eq(test_resident(src + 3 * pg), 0);
	madvx_uffd_free(u);
	munmap(dst, 4 * pg);
	munmap(src, 4 * pg);
}
END_TEST

/* COPY lists assemble pages from scattered sources; contiguous ones coalesce. */
START_TEST(copy_list_assembles)
{
	struct madvx_uffd_item it[3];
	struct madvx_uffd *u = open_uffd(0);
	uint8_t *dst = map_registered(u, 4, MADVX_UFFD_MISSING);
	uint8_t *src = test_map_filled(8, 0x30);
	uint64_t before = ioctls_of(u);

	it[0] = item(dst + 2 * pg, src + 5 * pg, 2 * pg);
	it[1] = item(dst, src, pg);
	it[2] = item(dst + pg, src + pg, pg);
	ck_assert_int_eq(madvx_uffd_copy_list(u, it, 3, 0), 0);
	ck_assert_uint_eq(ioctls_of(u) - before, 2);	/* [0,2) and [2,4) */
	ck_assert(page_is(dst, 0x30));
	ck_assert(page_is(dst + pg, 0x31));
	ck_assert(page_is(dst + 2 * pg, 0x35));
	ck_assert(page_is(dst + 3 * pg, 0x36));
	ck_assert(page_is(src + 5 * pg, 0x35));
	madvx_uffd_free(u);
	munmap(dst, 4 * pg);
	munmap(src, 8 * pg);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;

	if (argc > 1 && !strcmp(argv[1], "--disabled-move-child"))
		return disabled_move_child();
	if (argc > 1 && !strcmp(argv[1], "--minor-anon-no-procmap-child"))
		return minor_anon_no_procmap_child();
	s = suite_create("uffd");
	tc = tcase_create("uffd");
	pg = test_page();
	if (!madvx_feature_supported(MADVX_FEAT_UFFD))
		test_skip("userfaultfd is not usable here");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, open_reports_missing_features);
	tcase_add_test(tc, disable_hides_feature);
	tcase_add_test(tc, copy_fills_and_eexist_continues);
	tcase_add_test(tc, zeropage_maps_zeros);
	tcase_add_test(tc, copy_list_assembles);
	add_if(tc, move_empties_source, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_refuses_shared_source, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_src_holes, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_list_coalesces, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_list_splits_at_vmas, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_list_reports_per_item, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, move_list_fails_one_vma, UFFD_FEATURE_MOVE, "UFFD_FEATURE_MOVE (6.8)");
	add_if(tc, continue_maps_page_cache, UFFD_FEATURE_MINOR_SHMEM,
	       "UFFD_FEATURE_MINOR_SHMEM (5.14)");
	add_if(tc, minor_refuses_anon, UFFD_FEATURE_MINOR_SHMEM,
	       "UFFD_FEATURE_MINOR_SHMEM (5.14)");
	add_if(tc, poison_raises_sigbus, UFFD_FEATURE_POISON, "UFFD_FEATURE_POISON (6.6)");
	add_if(tc, writeprotect_blocks_writes, UFFD_FEATURE_PAGEFAULT_FLAG_WP,
	       "UFFD_FEATURE_PAGEFAULT_FLAG_WP (5.7)");
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
