// SPDX-License-Identifier: MIT
/*
 * COLD and PAGEOUT batches on the per-VMA fast path, measured with the
 * kernel's mmap_lock tracepoints (tools/locktrace). First the test does what
 * `madvx-probe --measure` does (tools/pervma-measure): it measures whether
 * single-VMA MADV_COLD/MADV_PAGEOUT, and MADV_DONTNEED on a featureless
 * userfaultfd VMA, take mmap_lock, and writes the per-boot cache (a private
 * file, MADVX_PROBE_CACHE) before the library's probe reads it; the probe
 * must then report exactly what was measured (probe features
 * per_vma_cold_pageout, per_vma_uffd, source "measured").
 * On a kernel with the kernel/patches series a batch flush of 256 COLD hints
 * over 16 VMAs, some crossing VMA boundaries, takes 0 mmap_lock
 * acquisitions in the calling thread, and so does the same batch of PAGEOUT
 * hints: with no mmap_lock taken, every entry ran under its VMA's lock (the
 * mmap_lock tracepoints are the whole measure; the kernel has no madvise
 * counters). On other kernels the same flushes are
 * measured too, must take mmap_lock (which shows that the measurement is not
 * vacuous) and the executable then exits 77 with the reason. Needs root
 * (tracefs) and PROCMAP_QUERY.
 *
 * userfaultfd: a DONTNEED batch over a region registered with a
 * userfaultfd without UFFD_EVENT_REMOVE (MADVX_REGION_UFFD) is planned on
 * the fast path and takes 0 mmap_lock acquisitions where the kernel keeps
 * the per-VMA lock there (probe feature per_vma_uffd), and is issued as
 * fallback entries that take mmap_lock elsewhere; a region marked
 * MADVX_REGION_UFFD_EVENT_REMOVE is always planned as fallback.
 */
#include <errno.h>

#include "harness.h"
#include "util.h"
#include "measured-flush.h"
#include "pervma-measure.h"

#define NVMAS 16
#define VMA_PAGES 32
#define NPAGES (NVMAS * VMA_PAGES)
#define NHINTS (NPAGES / 2)

static struct locktrace lt;
static struct pervma_result measured;
static bool patched, uffd_patched;

/*
 * 16 VMAs of 32 pages (every other one read-only, so no two merge); hint i
 * covers page 2i, and in every other VMA the hint on page 30 is 3 pages long
 * and crosses into the next VMA: the batch has to split those.
 */
static uint8_t *setup(void)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(NPAGES, 1);

	ck_assert_int_eq(madvise(p, NPAGES * pg, MADV_NOHUGEPAGE), 0);
	for (size_t v = 1; v < NVMAS; v += 2)
		ck_assert_int_eq(mprotect(p + v * VMA_PAGES * pg, VMA_PAGES * pg, PROT_READ), 0);
	return p;
}

static void check_contents(const uint8_t *p)
{
	for (size_t i = 0; i < NPAGES; i++) {
		const uint8_t *q = p + i * test_page();

		ck_assert_msg(q[0] == (uint8_t)(1 + i) && q[test_page() - 1] == (uint8_t)(1 + i),
			      "page %zu lost its contents", i);
	}
}

static uint64_t flush_and_count_once(void *arg)
{
	int advice = *(const int *)arg;
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = NHINTS };
	struct madvx_stats st;
	struct locktrace_result r;
	struct madvx_batch *b;
	uint8_t *p = setup();
	size_t pg = test_page();

	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (size_t i = 0; i < NHINTS; i++) {
		size_t page = 2 * i, len = 1;

		if (page % VMA_PAGES == VMA_PAGES - 2 && (page / VMA_PAGES) % 2 == 0)
			len = 3;
		ck_assert_int_eq(madvx_batch_add(b, p + page * pg, len * pg, advice), (int)i);
	}
	test_measured_flush(&lt, b, &r, &st);
	printf("%s batch flush (%s kernel): %llu read + %llu write mmap_lock acquisitions, "
	       "%llu syscalls, %llu entries, %llu split\n",
	       madvx_advice_name(advice), patched ? "patched" : "unpatched",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)st.syscalls, (unsigned long long)st.vector_entries,
	       (unsigned long long)st.split);
	if (patched) {
		/*
		 * No mmap_lock in the flushing thread: every entry of the
		 * vectors ran under its VMA's read lock.
		 */
		ck_assert_uint_gt(st.vector_entries, 0);
		ck_assert_uint_eq(test_call_reads(&r), 0);
		ck_assert_uint_eq(test_call_writes(&r), 0);
	} else {
		/* Fallback entries: mmap_lock, as the measurement said. */
		ck_assert_uint_ge(r.self.acq_read + r.self.acq_write, 1);
	}
	/* Crossing hints were split at the VMA boundaries. */
	if (patched)
		ck_assert_uint_ge(st.split, NVMAS / 2 - 1);
	check_contents(p);
	madvx_batch_free(b);
	munmap(p, NPAGES * pg);
	return patched ? test_fault_locks(&r) : 0;
}

static void flush_and_count(int advice)
{
	test_until_no_fault_locks(flush_and_count_once, &advice, madvx_advice_name(advice));
}

/*
 * UFFD_PAGES pages in one VMA registered MISSING with a userfaultfd that has
 * no features, and as a libmadvx region with @region_flags; a DONTNEED hint
 * on every other page.
 */
#define UFFD_PAGES 64
static uint64_t uffd_flush_and_count_once(void *arg)
{
	unsigned int region_flags = *(const unsigned int *)arg;
	struct madvx_stats st;
	bool remove_flag = region_flags & MADVX_REGION_UFFD_EVENT_REMOVE;
	bool fast = uffd_patched && !remove_flag;
	size_t pg = test_page();
	uint8_t *p = test_map_filled(UFFD_PAGES, 7);
	struct locktrace_result r;
	struct madvx_uffd *u;
	struct madvx_batch *b;
	int ret;

	ret = madvx_uffd_open(NULL, &u);
	if (ret) {
		munmap(p, UFFD_PAGES * pg);
		ck_abort_msg("madvx_uffd_open: %s", strerror(-ret));
	}
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)p, UFFD_PAGES * pg,
					     UFFDIO_REGISTER_MODE_MISSING, NULL), 0);
	ck_assert_int_eq(madvx_region_register(p, UFFD_PAGES * pg, region_flags), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int i = 0; i < UFFD_PAGES; i += 2)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	test_measured_flush(&lt, b, &r, &st);
	printf("uffd region%s DONTNEED flush (%s kernel): %llu read + %llu write mmap_lock "
	       "acquisitions, %llu entries, %llu fallback\n",
	       remove_flag ? " (EVENT_REMOVE)" : "", uffd_patched ? "patched" : "unpatched",
	       (unsigned long long)r.self.acq_read, (unsigned long long)r.self.acq_write,
	       (unsigned long long)st.vector_entries, (unsigned long long)st.fallback_entries);
	ck_assert_uint_eq(st.vector_entries, UFFD_PAGES / 2);
	ck_assert_uint_eq(st.fallback_entries, fast ? 0 : UFFD_PAGES / 2);
	if (fast)
		ck_assert_uint_eq(test_call_reads(&r) + test_call_writes(&r), 0);
	else if (!uffd_patched)
		ck_assert_uint_ge(r.self.acq_read + r.self.acq_write, 1);
	/* Released pages read back through the userfaultfd, so ask mincore. */
	for (int i = 0; i < UFFD_PAGES; i++)
		ck_assert_int_eq(test_resident(p + i * pg), i % 2);
	madvx_batch_free(b);
	ck_assert_int_eq(madvx_region_unregister(p), 0);
	madvx_uffd_free(u);
	munmap(p, UFFD_PAGES * pg);
	return fast ? test_fault_locks(&r) : 0;
}

static void uffd_flush_and_count(unsigned int region_flags)
{
	test_until_no_fault_locks(uffd_flush_and_count_once, &region_flags, "uffd region");
}

START_TEST(uffd_region_batch_flush)
{
	uffd_flush_and_count(MADVX_REGION_UFFD);
}
END_TEST

START_TEST(uffd_remove_region_is_fallback)
{
	uffd_flush_and_count(MADVX_REGION_UFFD_EVENT_REMOVE);
}
END_TEST

/* The probe answers from the measurement, and batches plan from the probe. */
START_TEST(advice_lock_follows_measurement)
{
	enum madvx_lock want = patched ? MADVX_LOCK_PER_VMA : MADVX_LOCK_MMAP_READ;
	struct madvx_kernel_info ki = { .size = sizeof(ki) };

	ck_assert_int_eq(madvx_kernel_info_get(&ki), 0);
	ck_assert(ki.measured & (1ULL << MADVX_FEAT_PER_VMA_COLD_PAGEOUT));
	ck_assert_int_eq(patched, measured.cold_pageout);
	if (madvx_feature_supported(MADVX_FEAT_UFFD) > 0 && measured.uffd_tried) {
		ck_assert(ki.measured & (1ULL << MADVX_FEAT_PER_VMA_UFFD));
		ck_assert_int_eq(uffd_patched, measured.uffd);
	}
	ck_assert_int_eq(madvx_advice_lock(MADV_COLD), want);
	ck_assert_int_eq(madvx_advice_lock(MADV_PAGEOUT), want);
}
END_TEST

START_TEST(cold_batch_flush)
{
	flush_and_count(MADV_COLD);
}
END_TEST

START_TEST(pageout_batch_flush)
{
	flush_and_count(MADV_PAGEOUT);
}
END_TEST


int main(void)
{
	Suite *s = suite_create("batch_cold");
	TCase *tc = tcase_create("mmap_lock");
	char why[256], cache[64];
	int ret;

	/* Measure and write the cache before anything runs the library's probe. */
	ret = locktrace_open(&lt);
	if (ret) {
		snprintf(why, sizeof(why), "locktrace unavailable: %s", lt.why);
		test_skip(why);
	}
	ret = pervma_measure(&lt, &measured);
	if (ret) {
		snprintf(why, sizeof(why), "cannot measure the per-VMA features: %s", strerror(-ret));
		test_skip(why);
	}
	snprintf(cache, sizeof(cache), "/tmp/madvx-test-batch-cold.%d", (int)getpid());
	ret = pervma_cache_write(cache, &measured);
	if (ret) {
		snprintf(why, sizeof(why), "cannot write %s: %s", cache, strerror(-ret));
		test_skip(why);
	}
	setenv("MADVX_PROBE_CACHE", cache, 1);
	unsetenv("MADVX_ASSUME");
	printf("measured: MADV_COLD %llu, MADV_PAGEOUT %llu, uffd MADV_DONTNEED %llu mmap_lock "
	       "acquisitions per 4 single-VMA calls\n", measured.cold_acq, measured.pageout_acq,
	       measured.uffd_acq);
	if (madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY) <= 0) {
		unlink(cache);
		test_skip("no PROCMAP_QUERY: VMA lookups read /proc/self/maps under mmap_lock");
	}
	patched = madvx_feature_supported(MADVX_FEAT_PER_VMA_COLD_PAGEOUT) > 0;
	uffd_patched = madvx_feature_supported(MADVX_FEAT_PER_VMA_UFFD) > 0;
	printf("per_vma_uffd: %s\n", uffd_patched ? "yes" : "no");
	printf("per_vma_cold_pageout: %s; MADV_COLD plans as %s, MADV_PAGEOUT as %s\n",
	       patched ? "yes" : "no", madvx_lock_name(madvx_advice_lock(MADV_COLD)),
	       madvx_lock_name(madvx_advice_lock(MADV_PAGEOUT)));
	test_warm_up(MADV_COLD);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, advice_lock_follows_measurement);
	tcase_add_test(tc, cold_batch_flush);
	tcase_add_test(tc, pageout_batch_flush);
	if (madvx_feature_supported(MADVX_FEAT_UFFD) > 0) {
		tcase_add_test(tc, uffd_region_batch_flush);
		tcase_add_test(tc, uffd_remove_region_is_fallback);
	}
	suite_add_tcase(s, tc);
	ret = test_run_suite(s);
	locktrace_close(&lt);
	unlink(cache);
	if (ret == EXIT_SUCCESS && (!patched || !uffd_patched))
		test_skip("kernel without per-VMA MADV_COLD/MADV_PAGEOUT or without the per-VMA lock "
			  "on userfaultfd VMAs (kernel/patches series, probe features "
			  "per_vma_cold_pageout, per_vma_uffd): the flushes took mmap_lock, as expected there");
	return ret;
}
