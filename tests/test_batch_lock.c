// SPDX-License-Identifier: MIT
/*
 * The batch keeps the caller off mmap_lock, measured with the kernel's
 * mmap_lock tracepoints (tools/locktrace): a flush of 1024 DONTNEED hints
 * over 64 VMAs, some crossing VMA boundaries, takes no mmap_lock in the
 * calling thread, while the same hints as one raw process_madvise() vector
 * with a crossing entry first do (the kernel's sticky fallback), and the
 * pages really are zapped; and madvx_advice_lock()'s answer for
 * MADV_DONTNEED is the lock the kernel takes. Needs root (tracefs),
 * otherwise the executable is skipped with the reason; the batch checks
 * also need the per-VMA madvise path (6.17+ with CONFIG_PER_VMA_LOCK) and
 * PROCMAP_QUERY under per-VMA locks, and say so when they do not run.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "harness.h"
#include "probe.h"
#include "measured-flush.h"

#define NVMAS 64
#define VMA_PAGES 32
#define NPAGES (NVMAS * VMA_PAGES)
#define NHINTS 1024

static struct locktrace lt;

struct fixture {
	uint8_t *p;
	struct iovec hints[NHINTS];	/* as added, in address order */
	bool hinted[NPAGES];
};

/*
 * 64 VMAs of 32 pages (every other one made read-only after filling, so no
 * two neighbours merge); hint i covers page 2i. In every other VMA the last
 * hint (page 30) is 3 pages long and crosses into the next VMA.
 */
static void setup_fixture(struct fixture *f)
{
	size_t pg = test_page();

	f->p = mmap(NULL, NPAGES * pg, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(f->p, MAP_FAILED);
	/* 4 KiB pages: a THP would make the per-page residency check moot. */
	ck_assert_int_eq(madvise(f->p, NPAGES * pg, MADV_NOHUGEPAGE), 0);
	for (size_t i = 0; i < NPAGES; i++)
		memset(f->p + i * pg, (int)(i % 251) + 1, pg);
	for (size_t v = 1; v < NVMAS; v += 2)
		ck_assert_int_eq(mprotect(f->p + v * VMA_PAGES * pg, VMA_PAGES * pg, PROT_READ), 0);
	memset(f->hinted, 0, sizeof(f->hinted));
	for (size_t i = 0; i < NHINTS; i++) {
		size_t page = 2 * i, len = 1;

		if (page % VMA_PAGES == VMA_PAGES - 2 && (page / VMA_PAGES) % 2 == 0 &&
		    page / VMA_PAGES < NVMAS - 1)
			len = 3;
		f->hints[i] = (struct iovec){ f->p + page * pg, len * pg };
		for (size_t k = 0; k < len; k++)
			f->hinted[page + k] = true;
	}
}

static void teardown_fixture(struct fixture *f)
{
	munmap(f->p, NPAGES * test_page());
}

/* Every hinted page is gone (not resident, reads zero); the others kept their bytes. */
static void check_zapped(const struct fixture *f)
{
	size_t pg = test_page();

	for (size_t i = 0; i < NPAGES; i++) {
		const uint8_t *q = f->p + i * pg;

		if (f->hinted[i]) {
			ck_assert_msg(test_resident(q) == 0, "page %zu still resident", i);
			ck_assert_msg(test_page_zero(q), "page %zu not zero", i);
		} else {
			ck_assert_msg(q[0] == (uint8_t)(i % 251 + 1) &&
				      q[pg - 1] == (uint8_t)(i % 251 + 1),
				      "page %zu lost its contents", i);
		}
	}
}

static uint64_t flush_takes_no_mmap_lock_once(void *arg)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = NHINTS };
	struct locktrace_result r;
	struct madvx_stats st;
	struct madvx_batch *b;
	static struct fixture f;

	setup_fixture(&f);
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (size_t i = 0; i < NHINTS; i++)
		ck_assert_int_eq(madvx_batch_add(b, f.hints[i].iov_base, f.hints[i].iov_len,
						 MADV_DONTNEED), (int)i);
	test_measured_flush(&lt, b, &r, &st);
	printf("batch flush: %llu read + %llu write mmap_lock acquisitions (%llu by page "
	       "faults), %llu syscalls, %llu entries, %llu split, %llu us\n",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)test_fault_locks(&r),
	       (unsigned long long)st.syscalls, (unsigned long long)st.vector_entries,
	       (unsigned long long)st.split, (unsigned long long)(r.call_ns / 1000));
	ck_assert_uint_eq(test_call_reads(&r), 0);
	ck_assert_uint_eq(test_call_writes(&r), 0);
	/* The crossing hints really were split at the boundaries. */
	ck_assert_uint_ge(st.split, NVMAS / 2 - 1);
	check_zapped(&f);
	madvx_batch_free(b);
	teardown_fixture(&f);
	(void)arg;
	return test_fault_locks(&r);
}

START_TEST(batch_flush_takes_no_mmap_lock)
{
	test_until_no_fault_locks(flush_takes_no_mmap_lock_once, NULL, "batch flush");
}
END_TEST

/*
 * What bdwgc's patches do where mprotect() dirty bits cut the heap into
 * VMAs they do not track (examples/bdwgc): every range goes in page by
 * page, each page vouched for, the crossing ranges too - a page lies in
 * one VMA. Touching vouched hints are not merged (plan.c), so no entry
 * crosses: no mmap_lock, no look-up, one entry per page, every page zapped.
 */
static uint64_t flush_pages_vouched_once(void *arg)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = 2 * NHINTS };
	struct locktrace_result r;
	struct madvx_stats st;
	struct madvx_batch *b;
	static struct fixture f;
	size_t pg = test_page(), pages = 0, distinct = 0;

	setup_fixture(&f);
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (size_t i = 0; i < NHINTS; i++)
		for (size_t off = 0; off < f.hints[i].iov_len; off += pg, pages++)
			ck_assert_int_ge(madvx_batch_add_flags(b, (uint8_t *)f.hints[i].iov_base + off,
							       pg, MADV_DONTNEED,
							       MADVX_HINT_ONE_VMA), 0);
	test_measured_flush(&lt, b, &r, &st);
	printf("pages vouched: %llu read + %llu write mmap_lock acquisitions (%llu by page "
	       "faults), %llu look-ups, %llu syscalls, %llu entries for %zu pages\n",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)test_fault_locks(&r),
	       (unsigned long long)st.vma_queries, (unsigned long long)st.syscalls,
	       (unsigned long long)st.vector_entries, pages);
	ck_assert_uint_eq(test_call_reads(&r), 0);
	ck_assert_uint_eq(test_call_writes(&r), 0);
	ck_assert_uint_eq(st.vma_queries, 0);
	/* A page hinted twice (a crossing range ends where the next hint is) is one entry. */
	for (size_t i = 0; i < NPAGES; i++)
		distinct += f.hinted[i];
	ck_assert_uint_eq(st.vma_skipped, distinct);
	ck_assert_uint_eq(st.vector_entries, distinct);
	check_zapped(&f);
	madvx_batch_free(b);
	teardown_fixture(&f);
	(void)arg;
	return test_fault_locks(&r);
}

START_TEST(batch_flush_pages_vouched)
{
	test_until_no_fault_locks(flush_pages_vouched_once, NULL, "pages vouched");
}
END_TEST

/*
 * MADVX_HINT_ONE_VMA: the single-VMA hints vouched for, the crossing ones
 * not: no mmap_lock, and look-ups only for the crossing ones. Then every
 * hint vouched for, the crossing ones wrongly: the kernel walks those under
 * mmap_read_lock (what madvise() of them does), in calls that hold only
 * vouched entries, and every page is zapped all the same.
 */
static uint64_t flush_vouched_hints_once(void *arg)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = NHINTS };
	int all = *(const int *)arg;
	struct locktrace_result r;
	struct madvx_stats st;
	struct madvx_batch *b;
	static struct fixture f;
	uint64_t ncross = 0;

	setup_fixture(&f);
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (size_t i = 0; i < NHINTS; i++) {
		bool cross = f.hints[i].iov_len > test_page();

		ncross += cross;
		ck_assert_int_eq(madvx_batch_add_flags(b, f.hints[i].iov_base,
						       f.hints[i].iov_len, MADV_DONTNEED,
						       all || !cross ? MADVX_HINT_ONE_VMA : 0),
				 (int)i);
	}
	test_measured_flush(&lt, b, &r, &st);
	fflush(stdout);
	printf("vouched %s: %llu read + %llu write mmap_lock acquisitions (%llu by page "
	       "faults), %llu look-ups, %llu skipped, %llu syscalls, %llu entries\n",
	       all ? "all (crossing ones wrongly)" : "single-VMA hints",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)test_fault_locks(&r),
	       (unsigned long long)st.vma_queries, (unsigned long long)st.vma_skipped,
	       (unsigned long long)st.syscalls, (unsigned long long)st.vector_entries);
	fflush(stdout);
	ck_assert_uint_eq(test_call_writes(&r), 0);
	if (all) {
		ck_assert_uint_ge(test_call_reads(&r), 1);
		ck_assert_uint_eq(st.vma_queries, 0);
		/* A crossing hint overlaps the next one (page 32): one entry. */
		ck_assert_uint_eq(st.vma_skipped, NHINTS - ncross);
	} else {
		ck_assert_uint_eq(test_call_reads(&r), 0);
		ck_assert_uint_eq(st.vma_skipped, NHINTS - ncross);
		/* One look-up per VMA a crossing hint touches: 2 each at most. */
		ck_assert_uint_le(st.vma_queries, 2 * ncross);
	}
	check_zapped(&f);
	madvx_batch_free(b);
	teardown_fixture(&f);
	/* With the crossing ones vouched for, mmap_lock is expected anyway. */
	return all ? 0 : test_fault_locks(&r);
}

START_TEST(batch_flush_vouched_hints)
{
	for (int all = 0; all < 2; all++)
		test_until_no_fault_locks(flush_vouched_hints_once, &all, "vouched hints");
}
END_TEST

struct raw_call {
	struct iovec *iov;
	size_t n;
	long ret;
};

static void raw_cb(void *arg)
{
	struct raw_call *c = arg;
	int pidfd = __madvx_self_pidfd();

	c->ret = syscall(__NR_process_madvise, pidfd, c->iov, c->n, MADV_DONTNEED, 0);
}

static size_t total_len(const struct iovec *iov, size_t n)
{
	size_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += iov[i].iov_len;
	return sum;
}

/* The same 1024 hints as one vector, a boundary-crossing entry first. */
START_TEST(raw_vector_with_crossing_entry_takes_mmap_lock)
{
	static struct fixture f;
	static struct iovec iov[NHINTS];
	struct locktrace_result r;
	struct raw_call c = { .iov = iov, .n = NHINTS };
	size_t cross = NHINTS;

	setup_fixture(&f);
	memcpy(iov, f.hints, sizeof(iov));
	for (size_t i = 0; i < NHINTS && cross == NHINTS; i++)
		if (iov[i].iov_len > test_page())
			cross = i;
	ck_assert_uint_lt(cross, NHINTS);
	iov[cross] = f.hints[0];
	iov[0] = f.hints[cross];
	ck_assert_int_eq(locktrace_measure(&lt, raw_cb, &c, &r), 0);
	ck_assert_int_eq(c.ret, (long)total_len(iov, NHINTS));
	printf("raw vector, crossing entry first: %llu read + %llu write acquisitions, "
	       "held %llu of %llu us\n",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)(r.self.held_ns / 1000),
	       (unsigned long long)(r.call_ns / 1000));
	ck_assert_uint_ge(r.self.acq_read + r.self.acq_write, 1);
	check_zapped(&f);
	teardown_fixture(&f);
}
END_TEST

/* Control: without the crossing entries the raw vector stays off mmap_lock too. */
static uint64_t raw_single_vma_once(void *arg)
{
	static struct fixture f;
	static struct iovec iov[NHINTS];
	struct locktrace_result r;
	struct raw_call c = { .iov = iov, .n = NHINTS };

	setup_fixture(&f);
	memcpy(iov, f.hints, sizeof(iov));
	for (size_t i = 0; i < NHINTS; i++)
		iov[i].iov_len = test_page();
	ck_assert_int_eq(locktrace_measure(&lt, raw_cb, &c, &r), 0);
	ck_assert_int_eq(c.ret, (long)(NHINTS * test_page()));
	ck_assert_uint_eq(test_call_reads(&r) + test_call_writes(&r), 0);
	teardown_fixture(&f);
	(void)arg;
	return test_fault_locks(&r);
}

START_TEST(raw_vector_single_vma_entries_take_no_mmap_lock)
{
	test_until_no_fault_locks(raw_single_vma_once, NULL, "raw vector, single-VMA entries");
}
END_TEST

/* ---- controls: the tool itself sees what it must, so a 0 above means 0 ---- */

/*
 * MADV_WILLNEED takes mmap_read_lock on every kernel; MADV_COLD does not with
 * the kernel/patches series (per-VMA lock there).
 */
static void willneed_cb(void *arg)
{
	madvise(arg, 16 * test_page(), MADV_WILLNEED);
}

START_TEST(locktrace_sees_a_read_lock)
{
	uint8_t *p = test_map_filled(16, 3);
	struct locktrace_result r;

	ck_assert_int_eq(locktrace_measure(&lt, willneed_cb, p, &r), 0);
	ck_assert_uint_eq(test_call_reads(&r), 1);
	ck_assert_uint_eq(test_call_writes(&r), 0);
	ck_assert_uint_gt(r.self.held_ns, 0);
	munmap(p, 16 * test_page());
}
END_TEST

static void dontneed_cb(void *arg)
{
	madvise(arg, 16 * test_page(), MADV_DONTNEED);
}

/*
 * madvx_advice_lock(MADV_DONTNEED) says what the kernel does: per-VMA on
 * 6.17+ with CONFIG_PER_VMA_LOCK (an SMP kernel of an architecture that has
 * it), mmap_read_lock otherwise - e.g. on the test kernel's uniprocessor
 * variant, where the version alone predicted per-VMA.
 */
START_TEST(dontneed_lock_prediction_matches_kernel)
{
	uint8_t *p = test_map_filled(16, 3);
	struct locktrace_result r;
	enum madvx_lock want = madvx_advice_lock(MADV_DONTNEED);

	ck_assert_int_eq(locktrace_measure(&lt, dontneed_cb, p, &r), 0);
	printf("MADV_DONTNEED of one VMA: %llu read acquisitions, predicted %s\n",
	       (unsigned long long)r.self.acq_read, madvx_lock_name(want));
	ck_assert_uint_eq(test_call_writes(&r), 0);
	if (want == MADVX_LOCK_PER_VMA)
		ck_assert_uint_eq(test_call_reads(&r), 0);
	else
		ck_assert_uint_eq(test_call_reads(&r), 1);
	munmap(p, 16 * test_page());
}
END_TEST

static pthread_barrier_t bar;
static atomic_int other_go;

static void *other_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);
	while (!atomic_load(&other_go))
		;
	for (int i = 0; i < 4; i++) {
		void *q = mmap(NULL, test_page(), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(q, test_page());
	}
	atomic_store(&other_go, 2);
	return NULL;
}

static void wait_other_cb(void *arg)
{
	(void)arg;
	atomic_store(&other_go, 1);
	while (atomic_load(&other_go) != 2)
		;
}

START_TEST(locktrace_sees_other_threads)
{
	struct locktrace_result r;
	pthread_t th;

	atomic_store(&other_go, 0);
	pthread_barrier_init(&bar, NULL, 2);
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
	pthread_barrier_wait(&bar);
	ck_assert_int_eq(locktrace_measure(&lt, wait_other_cb, NULL, &r), 0);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&bar);
	/* 4 x (mmap + munmap): at least 8 write acquisitions, none by the caller. */
	ck_assert_uint_ge(r.others.acq_write, 8);
	ck_assert_uint_eq(r.self.acq_read + r.self.acq_write, 0);
}
END_TEST

/*
 * The caller's user-mode page faults are told apart from its system calls:
 * the first write to a fresh mapping (no anon_vma yet) takes mmap_lock in
 * the fault - a trylock under a per-VMA lock, mmap_read_lock without one -
 * and MADV_WILLNEED takes it in the call.
 */
struct fault_and_call {
	uint8_t *fresh;
	uint8_t *filled;
};

/*
 * A writable page in a VMA of its own, without anon_vma: a plain mmap() may
 * be placed next to an anonymous VMA that has one and merge with it (then
 * the fault needs no mmap_lock; the test kernels' base run met that layout).
 * PROT_NONE neighbours have other vm_flags, so the middle page cannot merge.
 */
static uint8_t *map_unmergeable_page(void)
{
	uint8_t *p = mmap(NULL, 3 * test_page(), PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mprotect(p + test_page(), test_page(),
				  PROT_READ | PROT_WRITE), 0);
	return p + test_page();
}

static void fault_and_call_cb(void *arg)
{
	struct fault_and_call *fc = arg;

	*(volatile uint8_t *)fc->fresh = 1;
	madvise(fc->filled, 16 * test_page(), MADV_WILLNEED);
}

START_TEST(locktrace_tells_page_faults_apart)
{
	struct fault_and_call fc = { .filled = test_map_filled(16, 3) };
	struct locktrace_result r;

	fc.fresh = map_unmergeable_page();
	ck_assert_int_eq(locktrace_measure(&lt, fault_and_call_cb, &fc, &r), 0);
	printf("fault + WILLNEED: %llu read acquisitions, %llu of them by page faults\n",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self_user.acq_read);
	ck_assert(r.syscalls_traced);
	ck_assert_uint_eq(test_call_reads(&r), 1);
	ck_assert_uint_ge(r.self_user.acq_read, 1);
	ck_assert_uint_eq(r.self.acq_write, 0);
	munmap(fc.fresh - test_page(), 3 * test_page());
	munmap(fc.filled, 16 * test_page());
}
END_TEST


int main(void)
{
	Suite *s = suite_create("batch_lock");
	TCase *tc = tcase_create("mmap_lock");
	bool vec = madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) > 0 &&
		   madvx_advice_supported(MADV_DONTNEED) > 0;
	bool pervma = madvx_feature_supported(MADVX_FEAT_PER_VMA_MADVISE) > 0;
	int ret;

	ret = locktrace_open(&lt);
	if (ret) {
		char why[256];

		snprintf(why, sizeof(why), "locktrace unavailable: %s", lt.why);
		test_skip(why);
	}
	test_warm_up(MADV_DONTNEED);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, locktrace_sees_a_read_lock);
	tcase_add_test(tc, locktrace_sees_other_threads);
	if (lt.syscalls)
		tcase_add_test(tc, locktrace_tells_page_faults_apart);
	else
		printf("NOTE: kernel without raw_syscalls tracepoints: "
		       "page faults' mmap_lock counts as the calls'\n");
	tcase_add_test(tc, dontneed_lock_prediction_matches_kernel);
	/* The batch checks need the per-VMA path and lock-free VMA lookups. */
	if (!pervma)
		printf("NOTE: kernel without per-VMA locks for MADV_DONTNEED (6.17+, SMP, "
		       "CONFIG_PER_VMA_LOCK): batch tests not run\n");
	else if (madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY) <= 0)
		printf("NOTE: no PROCMAP_QUERY (VMA lookups read /proc/self/maps under "
		       "mmap_lock): batch tests not run\n");
	else
		tcase_add_test(tc, batch_flush_takes_no_mmap_lock);
	if (pervma && vec) {
		tcase_add_test(tc, batch_flush_vouched_hints);
		tcase_add_test(tc, batch_flush_pages_vouched);
	}
	if (vec && pervma) {
		tcase_add_test(tc, raw_vector_with_crossing_entry_takes_mmap_lock);
		tcase_add_test(tc, raw_vector_single_vma_entries_take_no_mmap_lock);
	} else {
		printf("NOTE: process_madvise(DONTNEED) or per-VMA locks unavailable: "
		       "raw vector tests not run\n");
	}
	suite_add_tcase(s, tc);
	ret = test_run_suite(s);
	locktrace_close(&lt);
	return ret;
}
