// SPDX-License-Identifier: MIT
/*
 * Asynchronous release against the kernel, for every backend this host can
 * run (thread, io_uring, sync).
 *
 * Differential: seeded random hint sets (mixed advices, overlaps that make
 * epochs, zero-length and unaligned hints, VMAs split by mprotect, holes
 * made with munmap) are applied with madvx_batch_flush() to one mapping
 * and through madvx_async_submit() to an identical one, split over two
 * submissions in flight at once; page contents, mincore residency, every
 * hint's err/done and the flush result must match.
 * Teardown: madvx_async_free() with submissions in flight waits for them;
 * the pages are then gone and the results complete.
 * io_uring really disabled: a forked child installs a seccomp filter that
 * makes io_uring_setup() fail with ENOSYS; the async API must keep working
 * there (thread backend), as with MADVX_DISABLE=io_uring.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifdef MADVX_HAVE_LIBURING
#include <liburing.h>
#endif

#include "harness.h"
#include "util.h"

#define NPAGES 40
#define MAX_HINTS 40

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static bool io_uring_ok(void)
{
	return madvx_feature_supported(MADVX_FEAT_IO_URING_MADVISE) == 1;
}

static const enum madvx_async_backend all_backends[] = {
	MADVX_ASYNC_THREAD, MADVX_ASYNC_IO_URING, MADVX_ASYNC_SYNC,
};

static uint32_t test_depth;	/* io_uring queue_depth for new_async(), 0 = default */
static size_t test_cases;	/* differential cases, 0 = default */

static struct madvx_async *new_async(enum madvx_async_backend be, uint32_t tickets)
{
	struct madvx_async_opts o = { .size = sizeof(o), .backend = be,
				      .max_tickets = tickets, .queue_depth = test_depth };
	struct madvx_async *a = NULL;

	ck_assert_int_eq(madvx_async_create(&o, &a), 0);
	ck_assert_int_eq(madvx_async_backend_get(a), be);
	return a;
}

/* ---- the differential ---- */

struct area_spec {
	bool hole[NPAGES];
	bool ro[NPAGES];
};

struct hint {
	size_t off, len;
	int advice;
	int part;		/* submission 0 or 1 */
};

static uint8_t *area_make(const struct area_spec *sp)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(NPAGES + 2, 0x11);

	/* Guard pages at both ends keep other mappings out of the holes. */
	ck_assert_int_eq(mprotect(p, pg, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(p + (NPAGES + 1) * pg, pg, PROT_NONE), 0);
	p += pg;
	for (int i = 0; i < NPAGES; i++) {
		if (sp->hole[i])
			ck_assert_int_eq(munmap(p + i * pg, pg), 0);
		else if (sp->ro[i])
			ck_assert_int_eq(mprotect(p + i * pg, pg, PROT_READ), 0);
	}
	return p;
}

static void area_free(uint8_t *p)
{
	munmap(p - test_page(), (NPAGES + 2) * test_page());
}

static bool has_hole(const struct area_spec *sp, size_t off, size_t len)
{
	size_t pg = test_page();

	for (size_t i = off / pg; i < NPAGES && i * pg < off + len; i++)
		if (sp->hole[i])
			return true;
	return false;
}

static int gen_case(struct area_spec *sp, struct hint *h)
{
	static const int adv[] = {
		MADV_DONTNEED, MADV_DONTNEED, MADV_FREE, MADV_COLD,
		MADV_WILLNEED, MADV_POPULATE_READ, MADV_POPULATE_WRITE,
	};
	size_t pg = test_page();
	int n = 1 + (int)rnd(MAX_HINTS);

	for (int i = 0; i < NPAGES; i++) {
		sp->hole[i] = rnd(10) == 0;
		sp->ro[i] = rnd(5) == 0;
	}
	for (int i = 0; i < n; i++) {
		size_t off = rnd(NPAGES) * pg, len;

		if (rnd(30) == 0)
			off += 1 + rnd((uint32_t)pg - 1);	/* EINVAL */
		len = rnd(15) == 0 ? 0 : (1 + rnd(rnd(3) ? 3 : 14)) * pg;
		if (rnd(8) == 0 && len)
			len -= rnd((uint32_t)pg);		/* rounded up */
		if (off + len > NPAGES * pg)
			len = NPAGES * pg - off;
		h[i].off = off;
		h[i].len = len;
		h[i].advice = adv[rnd(ARRAY_SIZE(adv))];
		/*
		 * POPULATE stops at the first hole where the batch advises
		 * every mapped part (madvx.h), and POPULATE_WRITE of a
		 * read-only page fails with a partial state: keep both apart.
		 */
		if ((h[i].advice == MADV_POPULATE_READ || h[i].advice == MADV_POPULATE_WRITE) &&
		    has_hole(sp, off, len))
			h[i].advice = MADV_DONTNEED;
		if (h[i].advice == MADV_POPULATE_WRITE) {
			for (size_t k = off / pg; k < NPAGES && k * pg < off + len; k++)
				sp->ro[k] = false;
		}
		h[i].part = i >= n / 2;
	}
	return n;
}

static void compare_pages(uint8_t *a, uint8_t *b, const struct area_spec *sp,
			  uint64_t seed, enum madvx_async_backend be)
{
	size_t pg = test_page();

	for (int i = 0; i < NPAGES; i++) {
		if (sp->hole[i])
			continue;
		/* Residency before contents: reading a zapped page maps it. */
		ck_assert_msg(test_resident(a + i * pg) == test_resident(b + i * pg),
			      "%s seed %llu page %d: residency differs",
			      madvx_async_backend_name(be), (unsigned long long)seed, i);
		ck_assert_msg(!memcmp(a + i * pg, b + i * pg, pg),
			      "%s seed %llu page %d: contents differ",
			      madvx_async_backend_name(be), (unsigned long long)seed, i);
	}
}

static void diff_case(struct madvx_async *as, enum madvx_async_backend be, uint64_t seed)
{
	struct madvx_batch *sb[2], *ab[2];
	struct area_spec sp;
	struct hint h[MAX_HINTS];
	int sidx[MAX_HINTS], aidx[MAX_HINTS], sret[2], aret[2];
	uint64_t t[2];
	uint8_t *ref, *lib;
	int n;

	rng = seed * 0x9e3779b97f4a7c15ULL + 7;
	n = gen_case(&sp, h);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(madvx_batch_create(NULL, &sb[k]), 0);
		ck_assert_int_eq(madvx_batch_create(NULL, &ab[k]), 0);
	}
	ref = area_make(&sp);
	lib = area_make(&sp);
	for (int i = 0; i < n; i++) {
		sidx[i] = madvx_batch_add(sb[h[i].part], ref + h[i].off, h[i].len, h[i].advice);
		aidx[i] = madvx_batch_add(ab[h[i].part], lib + h[i].off, h[i].len, h[i].advice);
		ck_assert_int_eq(sidx[i], aidx[i]);
	}
	sret[0] = madvx_batch_flush(sb[0]);
	sret[1] = madvx_batch_flush(sb[1]);
	/* Both in flight at once: the second must still apply after the first. */
	ck_assert_int_eq(madvx_async_submit(as, ab[0], &t[0]), 0);
	ck_assert_int_eq(madvx_async_submit(as, ab[1], &t[1]), 0);
	ck_assert_int_ne(t[0], t[1]);
	aret[1] = madvx_async_wait(as, t[1]);
	aret[0] = madvx_async_wait(as, t[0]);
	ck_assert_int_eq(madvx_async_wait(as, t[0]), -ENOENT);

	for (int k = 0; k < 2; k++) {
		const struct madvx_hint *sr, *ar;
		uint32_t sn, an;

		ck_assert_msg(sret[k] == aret[k], "%s seed %llu part %d: flush %d async %d",
			      madvx_async_backend_name(be), (unsigned long long)seed, k,
			      sret[k], aret[k]);
		sr = madvx_batch_results(sb[k], &sn);
		ar = madvx_batch_results(ab[k], &an);
		ck_assert_uint_eq(sn, an);
		for (uint32_t i = 0; i < sn; i++) {
			ck_assert_msg(sr[i].err == ar[i].err && sr[i].done == ar[i].done,
				      "%s seed %llu part %d hint %u (adv %d): sync err %d done %llu, async err %d done %llu",
				      madvx_async_backend_name(be), (unsigned long long)seed, k, i,
				      sr[i].advice, sr[i].err, (unsigned long long)sr[i].done,
				      ar[i].err, (unsigned long long)ar[i].done);
		}
	}
	compare_pages(ref, lib, &sp, seed, be);
	for (int k = 0; k < 2; k++) {
		madvx_batch_free(sb[k]);
		madvx_batch_free(ab[k]);
	}
	area_free(ref);
	area_free(lib);
}

static void diff_run(enum madvx_async_backend be)
{
	size_t n = test_cases ? test_cases : test_scaled_cases(300);
	struct madvx_async *as;

	if (be == MADVX_ASYNC_IO_URING && !io_uring_ok()) {
		printf("io_uring madvise not usable here: io_uring differential not run\n");
		return;
	}
	as = new_async(be, 4);
	for (uint64_t s = 1; s <= n; s++)
		diff_case(as, be, s);
	madvx_async_free(as);
}

START_TEST(differential_thread)
{
	/* Not in main(): the probe is per process and the children decide it afresh. */
	printf("async default backend: %s; io_uring madvise: %s; madvise64: %s\n",
	       madvx_async_backend_name(madvx_async_default_backend()),
	       io_uring_ok() ? "yes" : "no",
	       madvx_feature_supported(MADVX_FEAT_IO_URING_MADVISE64) == 1 ? "yes" : "no");
	diff_run(MADVX_ASYNC_THREAD);
}
END_TEST

START_TEST(differential_io_uring)
{
	diff_run(MADVX_ASYNC_IO_URING);
}
END_TEST

START_TEST(differential_sync)
{
	diff_run(MADVX_ASYNC_SYNC);
}
END_TEST

/*
 * A ring of 2 SQEs (4 records in flight): planning stalls on a full pool and
 * reaps in the middle of groups and epochs, barriers included.
 */
START_TEST(differential_io_uring_tiny_ring)
{
	test_depth = 2;
	test_cases = test_scaled_cases(2000);	/* found a lost barrier at seed 464 */
	diff_run(MADVX_ASYNC_IO_URING);
}
END_TEST

/* io_uring with the 64-bit length path turned off: same answers (entries are tiny here). */
static void diff_io_uring_child(void)
{
	if (io_uring_ok())
		diff_run(MADVX_ASYNC_IO_URING);
}

START_TEST(differential_io_uring_no_madvise64)
{
	test_in_child("io_uring_madvise64", diff_io_uring_child);
}
END_TEST

/* ---- errors per hint ---- */

static void errors_for(enum madvx_async_backend be)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(8, 0x30);
	struct madvx_async *as = new_async(be, 0);
	const struct madvx_hint *r;
	struct madvx_batch *b;
	uint32_t n;
	uint64_t t;

	/* page 2 a hole, page 5 mlocked (DONTNEED: EINVAL), the rest plain. */
	ck_assert_int_eq(munmap(p + 2 * pg, pg), 0);
	/* The raw syscall: ASan's mlock() interceptor does nothing. */
	ck_assert_int_eq(syscall(__NR_mlock, p + 5 * pg, pg), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, p, 4 * pg, MADV_DONTNEED), 0);	/* covers the hole */
	ck_assert_int_eq(madvx_batch_add(b, p + 5 * pg, pg, MADV_DONTNEED), 1);
	ck_assert_int_eq(madvx_batch_add(b, p + 7 * pg, pg, MADV_DONTNEED), 2);
	ck_assert_int_eq(madvx_batch_add(b, p + 2 * pg, pg, MADV_COLD), 3);	/* only hole */
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(as, t), -ENOMEM);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_int_eq(r[0].err, -ENOMEM);
	ck_assert_uint_eq(r[0].done, 3 * pg);
	ck_assert_int_eq(r[1].err, -EINVAL);
	ck_assert_uint_eq(r[1].done, 0);
	ck_assert_int_eq(r[2].err, 0);
	ck_assert_uint_eq(r[2].done, pg);
	ck_assert_int_eq(r[3].err, -ENOMEM);
	ck_assert_uint_eq(r[3].done, 0);
	/* The kernel's view: mapped parts zapped, the mlocked page kept. */
	ck_assert_int_eq(test_resident(p), 0);
	ck_assert_int_eq(test_resident(p + 3 * pg), 0);
	ck_assert_int_eq(test_resident(p + 7 * pg), 0);
	ck_assert_int_eq(test_resident(p + 5 * pg), 1);
	ck_assert_int_eq(p[5 * pg], (uint8_t)(0x30 + 5));
	ck_assert(test_page_zero(p));
	ck_assert(test_page_zero(p + 7 * pg));

	madvx_batch_free(b);
	madvx_async_free(as);
	syscall(__NR_munlock, p + 5 * pg, pg);
	munmap(p, 8 * pg);
}

START_TEST(errors_per_hint)
{
	for (size_t i = 0; i < ARRAY_SIZE(all_backends); i++) {
		if (all_backends[i] == MADVX_ASYNC_IO_URING && !io_uring_ok())
			continue;
		errors_for(all_backends[i]);
	}
}
END_TEST

/* ---- tickets, poll, eventfd, bad input ---- */

static void tickets_for(enum madvx_async_backend be)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(64, 1);
	struct madvx_async *as = new_async(be, 1);
	struct madvx_batch *b, *b2;
	struct pollfd pfd;
	uint64_t t, t2;
	int ret, spins = 0;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b2), 0);
	for (int i = 0; i < 64; i += 2)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	ck_assert_uint_ne(t, 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t2), -EALREADY);
	/* One ticket: a second submission waits until the first is collected. */
	ck_assert_int_eq(madvx_async_submit(as, b2, &t2), -EBUSY);

	pfd.fd = madvx_async_eventfd(as);
	ck_assert_int_ge(pfd.fd, 0);
	pfd.events = POLLIN;
	for (;;) {
		ck_assert_int_ge(poll(&pfd, 1, 5000), 0);
		ret = madvx_async_poll(as, t);
		if (ret != -EINPROGRESS)
			break;
		ck_assert_int_lt(++spins, 1000);
	}
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(madvx_async_poll(as, t), -ENOENT);
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
		ck_assert(test_page_zero(p + i * pg) == !(i % 2));
	}
	/* An empty batch completes; the slot is free again. */
	ck_assert_int_eq(madvx_async_submit(as, b2, &t2), 0);
	ck_assert_int_eq(madvx_async_wait(as, t2), 0);
	ck_assert_int_eq(madvx_async_wait(as, 0), -ENOENT);
	ck_assert_int_eq(madvx_async_wait(as, t2 + (1ULL << 32)), -ENOENT);
	madvx_batch_free(b);
	madvx_batch_free(b2);
	madvx_async_free(as);
	munmap(p, 64 * pg);
}

START_TEST(tickets_poll_eventfd)
{
	struct madvx_async_opts o = { .size = sizeof(o) };
	struct madvx_async *as;

	for (size_t i = 0; i < ARRAY_SIZE(all_backends); i++) {
		if (all_backends[i] == MADVX_ASYNC_IO_URING && !io_uring_ok())
			continue;
		tickets_for(all_backends[i]);
	}
	ck_assert_int_eq(madvx_async_create(NULL, NULL), -EINVAL);
	o.backend = 42;
	ck_assert_int_eq(madvx_async_create(&o, &as), -EINVAL);
	o.backend = MADVX_ASYNC_THREAD;
	o.size = sizeof(o) + 8;
	{
		char big[sizeof(o) + 8] = { 0 };

		memcpy(big, &o, sizeof(o));
		big[sizeof(o)] = 1;
		ck_assert_int_eq(madvx_async_create((void *)big, &as), -E2BIG);
	}
	ck_assert_int_eq(madvx_async_submit(NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(madvx_async_wait(NULL, 1), -EINVAL);
	madvx_async_free(NULL);
	ck_assert_str_eq(madvx_async_backend_name(MADVX_ASYNC_IO_URING), "io_uring");
	ck_assert_ptr_null(madvx_async_backend_name(99));
	ck_assert_int_ne(madvx_async_default_backend(), MADVX_ASYNC_DEFAULT);
}
END_TEST

/* ---- one async object, many threads ---- */

#define MT_THREADS 4
#define MT_ROUNDS 60
#define MT_PAGES 32

static struct madvx_async *mt_async;

static void *mt_worker(void *arg)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(MT_PAGES, (uint8_t)(uintptr_t)arg);
	struct madvx_batch *b;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int r = 0; r < MT_ROUNDS; r++) {
		int odd = r % 2, ret;
		uint64_t t;

		for (int i = 0; i < MT_PAGES; i++)
			p[i * pg] = (uint8_t)(r + 1);
		for (int i = odd; i < MT_PAGES; i += 2)
			ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
		/* More threads than tickets: -EBUSY until one is collected. */
		while ((ret = madvx_async_submit(mt_async, b, &t)) == -EBUSY)
			sched_yield();
		ck_assert_int_eq(ret, 0);
		ck_assert_int_eq(madvx_async_wait(mt_async, t), 0);
		for (int i = 0; i < MT_PAGES; i++) {
			ck_assert_int_eq(test_resident(p + i * pg), i % 2 != odd);
			ck_assert_int_eq(p[i * pg], i % 2 == odd ? 0 : (uint8_t)(r + 1));
		}
	}
	madvx_batch_free(b);
	munmap(p, MT_PAGES * pg);
	return NULL;
}

START_TEST(threads_share_one_async)
{
	for (size_t k = 0; k < ARRAY_SIZE(all_backends); k++) {
		pthread_t th[MT_THREADS];

		if (all_backends[k] == MADVX_ASYNC_IO_URING && !io_uring_ok())
			continue;
		mt_async = new_async(all_backends[k], 2);
		for (int i = 0; i < MT_THREADS; i++)
			ck_assert_int_eq(pthread_create(&th[i], NULL, mt_worker,
							(void *)(uintptr_t)(i + 1)), 0);
		for (int i = 0; i < MT_THREADS; i++)
			pthread_join(th[i], NULL);
		madvx_async_free(mt_async);
	}
}
END_TEST

/* ---- fork: the child gets -ECHILD, never a hang ---- */

static void fork_for(enum madvx_async_backend be)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(256, 4);
	struct madvx_async *as = new_async(be, 0);
	struct madvx_batch *b, *cb;
	int status;
	uint64_t t, t2;
	pid_t pid;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &cb), 0);
	for (int i = 0; i < 256; i += 2)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(20);
		if (madvx_async_submit(as, cb, &t2) != -ECHILD ||
		    madvx_async_wait(as, t) != -ECHILD || madvx_async_poll(as, t) != -ECHILD ||
		    madvx_async_cqe(as, 0, 0) != -ECHILD)
			_exit(3);
		madvx_async_free(as);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: child status 0x%x", madvx_async_backend_name(be), status);
	ck_assert_int_eq(madvx_async_wait(as, t), 0);
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
	madvx_batch_free(b);
	madvx_batch_free(cb);
	madvx_async_free(as);
	munmap(p, 256 * pg);
}

START_TEST(fork_child_gets_echild)
{
	for (size_t i = 0; i < ARRAY_SIZE(all_backends); i++) {
		if (all_backends[i] == MADVX_ASYNC_IO_URING && !io_uring_ok())
			continue;
		fork_for(all_backends[i]);
	}
}
END_TEST

/* ---- teardown with requests in flight ---- */

#define TD_BATCHES 4
#define TD_PAGES 4096	/* 16 MiB per batch */

static void teardown_for(enum madvx_async_backend be)
{
	size_t pg = test_page(), len = (size_t)TD_BATCHES * TD_PAGES * pg;
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = TD_PAGES };
	struct madvx_batch *b[TD_BATCHES];
	struct madvx_async *as = new_async(be, 0);
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t t;

	ck_assert_ptr_ne(p, MAP_FAILED);
	memset(p, 0x5a, len);
	for (int k = 0; k < TD_BATCHES; k++) {
		ck_assert_int_eq(madvx_batch_create(&bo, &b[k]), 0);
		/* Scattered single pages, every other one: one entry each. */
		for (int i = 0; i < TD_PAGES; i += 2)
			ck_assert_int_ge(madvx_batch_add(b[k], p + ((size_t)k * TD_PAGES + i) * pg,
							 pg, MADV_DONTNEED), 0);
		ck_assert_int_eq(madvx_async_submit(as, b[k], &t), 0);
	}
	/* Tickets never collected: free waits for all of them. */
	madvx_async_free(as);
	for (int k = 0; k < TD_BATCHES; k++) {
		const struct madvx_hint *r;
		uint32_t n;

		r = madvx_batch_results(b[k], &n);
		ck_assert_uint_eq(n, TD_PAGES / 2);
		for (uint32_t i = 0; i < n; i++) {
			ck_assert_int_eq(r[i].err, 0);
			ck_assert_uint_eq(r[i].done, pg);
		}
		for (int i = 0; i < TD_PAGES; i++) {
			uint8_t *q = p + ((size_t)k * TD_PAGES + i) * pg;

			ck_assert_int_eq(test_resident(q), i % 2);
			ck_assert_int_eq(q[0], i % 2 ? 0x5a : 0);
		}
		/* The batch is the caller's again. */
		ck_assert_int_eq(madvx_batch_add(b[k], p, pg, MADV_COLD), 0);
		ck_assert_int_eq(madvx_batch_flush(b[k]), 0);
		madvx_batch_free(b[k]);
	}
	munmap(p, len);
}

START_TEST(teardown_in_flight)
{
	for (size_t i = 0; i < ARRAY_SIZE(all_backends); i++) {
		if (all_backends[i] == MADVX_ASYNC_IO_URING && !io_uring_ok())
			continue;
		teardown_for(all_backends[i]);
	}
}
END_TEST

/* ---- io_uring really disabled ---- */

static void async_works_without_io_uring(void)
{
	struct madvx_async_opts o = { .size = sizeof(o), .backend = MADVX_ASYNC_IO_URING };
	struct madvx_async *as;

	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_IO_URING_MADVISE), 0);
	ck_assert_int_eq(madvx_async_create(&o, &as), -EOPNOTSUPP);
	ck_assert_int_eq(madvx_async_default_backend(), MADVX_ASYNC_THREAD);
	ck_assert_int_eq(madvx_async_create(NULL, &as), 0);
	ck_assert_int_eq(madvx_async_backend_get(as), MADVX_ASYNC_THREAD);
	madvx_async_free(as);
	errors_for(MADVX_ASYNC_THREAD);
	diff_run(MADVX_ASYNC_THREAD);
}

/* A filter that answers io_uring_setup() with ENOSYS, as a container's would. */
static int install_io_uring_filter(void)
{
	return test_deny_syscall(__NR_io_uring_setup, ENOSYS);
}

static void seccomp_child(void)
{
	int ret = install_io_uring_filter();

	if (ret) {
		/* No seccomp here: say so and use the env switch instead. */
		printf("seccomp unavailable (%d): MADVX_DISABLE=io_uring instead\n", ret);
		setenv("MADVX_DISABLE", "io_uring", 1);
	} else {
		/* The filter really bites: the raw syscall fails. */
		ck_assert_int_eq(syscall(__NR_io_uring_setup, 2, NULL), -1);
		ck_assert_int_eq(errno, ENOSYS);
		ck_assert_int_eq(madvx_feature_disabled(MADVX_FEAT_IO_URING), 0);
	}
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_IO_URING), 0);
	async_works_without_io_uring();
}

START_TEST(io_uring_blocked_by_seccomp)
{
	test_in_child(NULL, seccomp_child);
}
END_TEST

START_TEST(io_uring_disabled_by_env)
{
	test_in_child("io_uring", async_works_without_io_uring);
}
END_TEST

/* MADVX_ASYNC_BACKEND overrides the default, and never to an unusable io_uring. */
static void env_backend_child(void)
{
	setenv("MADVX_ASYNC_BACKEND", "io_uring", 1);
	ck_assert_int_eq(madvx_async_default_backend(),
			 io_uring_ok() ? MADVX_ASYNC_IO_URING : MADVX_ASYNC_THREAD);
}

START_TEST(env_override)
{
	test_in_child(NULL, env_backend_child);
	test_in_child("io_uring_madvise", env_backend_child);
}
END_TEST

#ifdef MADVX_HAVE_LIBURING
/* ---- a caller-owned ring, shared with the caller's own requests ---- */

static int foreign_seen;

static void on_foreign(void *ctx, uint64_t ud, int32_t res, uint32_t flags)
{
	ck_assert_ptr_eq(ctx, &foreign_seen);
	ck_assert_uint_eq(ud, 0xabcdef);
	ck_assert_int_eq(res, 0);
	foreign_seen++;
}

START_TEST(caller_owned_ring)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(300, 3);
	struct io_uring ring;
	struct madvx_async_opts o = {
		.size = sizeof(o), .ring = &ring, .queue_depth = 16,
		.on_cqe = on_foreign, .on_cqe_ctx = &foreign_seen,
	};
	struct madvx_async *as;
	struct madvx_batch *b;
	struct io_uring_sqe *sqe;
	uint64_t t;

	if (!io_uring_ok())
		return;
	ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
	o.ring = NULL;
	o.backend = MADVX_ASYNC_THREAD;
	ck_assert_int_eq(madvx_async_create(&o, &as), 0);	/* on_cqe unused: fine */
	madvx_async_free(as);
	o.ring = &ring;
	o.on_cqe = NULL;
	o.backend = 0;
	ck_assert_int_eq(madvx_async_create(&o, &as), -EINVAL);
	o.on_cqe = on_foreign;
	ck_assert_int_eq(madvx_async_create(&o, &as), 0);
	ck_assert_int_eq(madvx_async_backend_get(as), MADVX_ASYNC_IO_URING);
	ck_assert_int_eq(madvx_async_eventfd(as), -EOPNOTSUPP);

	/* The caller's own request, queued before ours. */
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, 0xabcdef);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	/* 150 entries through an SQ of 8 and 16 records: full SQ and pool paths. */
	for (int i = 0; i < 300; i += 2)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(as, t), 0);
	ck_assert_int_eq(foreign_seen, 1);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
	ck_assert_int_eq(madvx_async_cqe(as, 0xabcdef, 0), 0);
	madvx_batch_free(b);
	madvx_async_free(as);
	io_uring_queue_exit(&ring);
	munmap(p, 300 * pg);
}
END_TEST

/*
 * More records in flight than the caller's CQ holds: CQEs overflow into the
 * kernel's backlog, and submits may answer -EBUSY until we reap; every hint
 * must still be credited exactly once.
 */
static void on_none(void *ctx, uint64_t ud, int32_t res, uint32_t flags)
{
	ck_abort_msg("unexpected foreign CQE %llu", (unsigned long long)ud);
}

START_TEST(caller_ring_cq_overflow)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(1200, 9);
	struct io_uring ring;
	struct madvx_async_opts o = {
		.size = sizeof(o), .ring = &ring, .queue_depth = 512, .on_cqe = on_none,
	};
	const struct madvx_hint *r;
	struct madvx_async *as;
	struct madvx_batch *b;
	uint32_t n;
	uint64_t t;

	if (!io_uring_ok())
		return;
	ck_assert_int_eq(io_uring_queue_init(2, &ring, 0), 0);
	ck_assert_int_eq(madvx_async_create(&o, &as), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int i = 0; i < 1200; i += 2)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(as, t), 0);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 600);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(r[i].done, pg);
	for (int i = 0; i < 1200; i++)
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
	madvx_batch_free(b);
	madvx_async_free(as);
	io_uring_queue_exit(&ring);
	munmap(p, 1200 * pg);
}
END_TEST
#endif

/* ---- lengths of 4 GiB and more through io_uring ---- */

static void big_range(void)
{
	size_t pg = test_page(), len = (5ULL << 30) + 3 * pg;
	struct madvx_async *as;
	struct madvx_batch *b;
	const struct madvx_hint *r;
	uint8_t *p;
	uint32_t n;
	uint64_t t;
	size_t probes[] = { 0, (4ULL << 30) - pg, 4ULL << 30, len - pg };

	if (!io_uring_ok())
		return;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	for (size_t i = 0; i < ARRAY_SIZE(probes); i++)
		p[probes[i]] = 0x77;
	as = new_async(MADVX_ASYNC_IO_URING, 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, p, len, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_async_submit(as, b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(as, t), 0);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(r[0].err, 0);
	ck_assert_uint_eq(r[0].done, len);
	for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
		ck_assert_int_eq(test_resident(p + probes[i]), 0);
		ck_assert_int_eq(p[probes[i]], 0);
	}
	madvx_batch_free(b);
	madvx_async_free(as);
	munmap(p, len);
}

START_TEST(io_uring_64bit_lengths)
{
	test_in_child(NULL, big_range);
	/* Split into pieces below 4 GiB when sqe->off is not read. */
	test_in_child("io_uring_madvise64", big_range);
}
END_TEST

/*
 * The io_uring backend hands the work off: its SQEs run on an io-wq worker
 * of the submitting thread ("iou-wrk-<tid>"), also on kernels that could
 * complete DONTNEED inline in io_uring_enter() (kernel/patches/0005), where
 * only IOSQE_ASYNC keeps them off the caller. The submission runs on a
 * fresh thread so that no earlier io_uring use (the probe's) has made a
 * worker for it already.
 */
static bool iowq_worker_of(pid_t tid)
{
	char want[32], path[320], comm[32];
	bool found = false;
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");

	ck_assert_ptr_nonnull(dir);
	snprintf(want, sizeof(want), "iou-wrk-%d", (int)tid);
	want[15] = '\0';	/* TASK_COMM_LEN */
	while (!found && (d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = '\0';
			found = !strcmp(comm, want);
		}
		fclose(f);
	}
	closedir(dir);
	return found;
}

struct handoff {
	struct madvx_async *as;
	struct madvx_batch *b;
	bool worker_seen;
};

static void *submit_on_fresh_thread(void *arg)
{
	struct handoff *h = arg;
	uint64_t t;

	ck_assert_int_eq(madvx_async_submit(h->as, h->b, &t), 0);
	ck_assert_int_eq(madvx_async_wait(h->as, t), 0);
	/* Idle io-wq workers live for seconds, and as long as their task. */
	h->worker_seen = iowq_worker_of((pid_t)syscall(SYS_gettid));
	return NULL;
}

START_TEST(io_uring_hands_off_to_iowq)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(64, 5);
	struct handoff h = { 0 };
	pthread_t th;

	if (!io_uring_ok())
		return;
	h.as = new_async(MADVX_ASYNC_IO_URING, 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &h.b), 0);
	for (int i = 0; i < 64; i += 2)
		ck_assert_int_ge(madvx_batch_add(h.b, p + i * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, submit_on_fresh_thread, &h), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
	ck_assert_msg(h.worker_seen, "no io-wq worker ran the SQEs: completed in the caller");
	madvx_batch_free(h.b);
	madvx_async_free(h.as);
	munmap(p, 64 * pg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("async");
	TCase *diff = tcase_create("differential");
	TCase *api = tcase_create("api");

	tcase_set_timeout(diff, 600);
	tcase_add_test(diff, differential_thread);
	tcase_add_test(diff, differential_io_uring);
	tcase_add_test(diff, differential_sync);
	tcase_add_test(diff, differential_io_uring_no_madvise64);
	tcase_add_test(diff, differential_io_uring_tiny_ring);
	suite_add_tcase(s, diff);

	tcase_set_timeout(api, 120);
	tcase_add_test(api, errors_per_hint);
	tcase_add_test(api, tickets_poll_eventfd);
	tcase_add_test(api, teardown_in_flight);
	tcase_add_test(api, threads_share_one_async);
	tcase_add_test(api, fork_child_gets_echild);
	tcase_add_test(api, io_uring_blocked_by_seccomp);
	tcase_add_test(api, io_uring_disabled_by_env);
	tcase_add_test(api, env_override);
#ifdef MADVX_HAVE_LIBURING
	tcase_add_test(api, caller_owned_ring);
	tcase_add_test(api, caller_ring_cq_overflow);
#endif
	tcase_add_test(api, io_uring_64bit_lengths);
	tcase_add_test(api, io_uring_hands_off_to_iowq);
	suite_add_tcase(s, api);
	return test_run_suite(s);
}
