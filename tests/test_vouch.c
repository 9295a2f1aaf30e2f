// SPDX-License-Identifier: MIT
/*
 * MADVX_HINT_ONE_VMA (issue 20): a caller vouches that a hint lies in one
 * VMA. Right vouches are planned without a single look-up; wrong ones
 * (crossing VMAs, holes, a VMA that refuses the advice: mlocked, VM_PFNMAP)
 * still give every hint exactly madvise()'s err and done and leave every
 * page as madvise() does (twin layouts, mincore and contents compared), and
 * vouched hints go to the kernel in calls of their own.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/syscall.h>

#include "harness.h"
#include "util.h"
#include <madvx.h>

#define NPG 64

/* The sanitizers' mlock() interceptor does nothing: lock for real. */
static int sys_mlock(const void *p, size_t len)
{
	return (int)syscall(__NR_mlock, p, len);
}

static bool populates(int advice)
{
	return advice == MADV_POPULATE_READ || advice == MADV_POPULATE_WRITE;
}

/*
 * Does this kernel's MADV_POPULATE_* stop at a hole? From 6.10 (mainline
 * fa9fcd8bb6e4) it does; before (Debian 12's 6.1) it goes on to the
 * mappings past the hole, as every other advice does, and fails with
 * -ENOMEM at the end. Asked of the kernel: three pages, the middle one
 * unmapped, populated in one call; is the third one resident?
 */
static bool populate_stops_at_hole(void)
{
	static int answer = -1;
	size_t pg = test_page();
	unsigned char v = 0;
	uint8_t *p;

	if (answer >= 0)
		return answer;
	p = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(munmap(p + pg, pg), 0);
	ck_assert_int_eq(madvise(p, 3 * pg, MADV_POPULATE_READ), -1);
	ck_assert_int_eq(mincore(p + 2 * pg, pg, &v), 0);
	answer = !(v & 1);
	munmap(p, pg);
	munmap(p + 2 * pg, pg);
	return answer;
}

/*
 * madvise()'s done for a hint that failed with @err, from the kernel alone:
 * replayed page by page on the same memory (the advices here are
 * idempotent), mapped pages count until the first page that fails with
 * another error (a refusing VMA), or the first hole for POPULATE_* where
 * the kernel stops there (populate_stops_at_hole()).
 */
static uint64_t replay_done(uint8_t *p, size_t len, int advice, int err)
{
	size_t pg = test_page(), n = (len + pg - 1) / pg;
	uint64_t done = 0;

	if (!err)
		return n * pg;
	for (size_t i = 0; i < n; i++) {
		int r = madvise(p + i * pg, pg, advice) ? -errno : 0;

		if (r == -ENOMEM && (!populates(advice) || !populate_stops_at_hole()))
			continue;
		if (r)
			break;
		done += pg;
	}
	return done;
}

/*
 * Every page of @a and @b alike: both holes, or same residency and bytes.
 * Except that whether MADV_PAGEOUT frees a page is not repeatable, even for
 * madvise() against itself: with swap (the test kernel's guests have it) it
 * frees only the folios it can isolate, and a folio still in another CPU's
 * LRU batch cannot be (madvise_pageout() drains the local CPU's only; seen
 * on the debug test kernel, 2026-12-02: one page of 64). There a residency
 * difference is allowed when the contents agree, as test_conformance.c's
 * compare() allows it.
 */
static void compare_pages(const uint8_t *a, const uint8_t *b, size_t pages, int advice)
{
	const char *what = madvx_advice_name(advice);
	size_t pg = test_page();

	for (size_t i = 0; i < pages; i++) {
		unsigned char va, vb;
		int ra = mincore((void *)(a + i * pg), pg, &va);
		int rb = mincore((void *)(b + i * pg), pg, &vb);

		ck_assert_msg(ra == rb, "%s page %zu: mapped in one layout only", what, i);
		if (ra)
			continue;
		if ((va & 1) != (vb & 1) && advice == MADV_PAGEOUT)
			printf("%s page %zu: residency %d, madvise %d (tolerated: contents compared)\n",
			       what, i, va & 1, vb & 1);
		else
			ck_assert_msg((va & 1) == (vb & 1), "%s page %zu: residency %d, madvise %d",
				      what, i, va & 1, vb & 1);
		ck_assert_msg(!memcmp(a + i * pg, b + i * pg, pg), "%s page %zu: contents", what, i);
	}
}

/* ---- right vouches: no look-up ---- */

static const struct { int pg0, npg; } right[] = {
	{ 2, 4 }, { 4, 4 },	/* overlap: one entry */
	{ 14, 2 }, { 16, 2 },	/* touch across a VMA boundary: two entries */
	{ 30, 2 }, { 32, 2 },	/* the same at the next boundary */
	{ 50, 2 },
};
#define RIGHT_ENTRIES 6

/* 4 VMAs: [0,16) rw, [16,32) r, [32,48) rw, [48,64) r. */
static uint8_t *four_vmas(void)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(NPG, 1);

	ck_assert_int_eq(mprotect(p + 16 * pg, 16 * pg, PROT_READ), 0);
	ck_assert_int_eq(mprotect(p + 48 * pg, 16 * pg, PROT_READ), 0);
	return p;
}

static void right_vouches(void)
{
	size_t pg = test_page();
	uint8_t *p = four_vmas();
	struct madvx_stats st = { .size = sizeof(st) }, g0 = { .size = sizeof(g0) };
	struct madvx_stats g1 = { .size = sizeof(g1) };
	bool hinted[NPG] = { false };
	const struct madvx_hint *r;
	struct madvx_batch *b;
	uint32_t n;

	ck_assert_int_eq(madvx_stats_get(&g0), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (size_t i = 0; i < ARRAY_SIZE(right); i++) {
		ck_assert_int_eq(madvx_batch_add_flags(b, p + right[i].pg0 * pg, right[i].npg * pg,
						       MADV_DONTNEED, MADVX_HINT_ONE_VMA),
				 (int)i);
		for (int k = 0; k < right[i].npg; k++)
			hinted[right[i].pg0 + k] = true;
	}
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, ARRAY_SIZE(right));
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(r[i].err, 0);
		ck_assert_uint_eq(r[i].done, (uint64_t)right[i].npg * pg);
	}
	ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
	ck_assert_int_eq(madvx_stats_get(&g1), 0);
	printf("right vouches (MADVX_DISABLE=%s): %" PRIu64 " look-ups, %" PRIu64
	       " skipped, %" PRIu64 " system calls, %" PRIu64 " vector entries\n",
	       getenv("MADVX_DISABLE") ? getenv("MADVX_DISABLE") : "",
	       st.vma_queries, st.vma_skipped, st.syscalls, st.vector_entries);
	ck_assert_uint_eq(st.vma_queries, 0);
	ck_assert_uint_eq(st.vma_skipped, RIGHT_ENTRIES);
	ck_assert_uint_eq(g1.vma_skipped - g0.vma_skipped, RIGHT_ENTRIES);
	if (test_self_pmadv(MADV_DONTNEED, "one vector call for the right vouches")) {
		ck_assert_uint_eq(st.syscalls, 1);
		ck_assert_uint_eq(st.vector_entries, RIGHT_ENTRIES);
	} else {
		ck_assert_uint_eq(st.syscalls, RIGHT_ENTRIES);
	}
	for (int i = 0; i < NPG; i++) {
		if (hinted[i]) {
			ck_assert_msg(test_resident(p + i * pg) == 0, "page %d resident", i);
			ck_assert_msg(test_page_zero(p + i * pg), "page %d not zero", i);
		} else {
			ck_assert_msg(p[i * pg] == (uint8_t)(1 + i), "page %d lost its bytes", i);
		}
	}
	madvx_batch_free(b);
	munmap(p, NPG * pg);
}

START_TEST(right_vouch_makes_no_lookups)
{
	right_vouches();
}
END_TEST

START_TEST(right_vouch_makes_no_lookups_old_kernel)
{
	test_in_child("process_madvise,procmap_query", right_vouches);
}
END_TEST

/* The flag is checked like madvise() checks its arguments. */
START_TEST(unknown_flag_is_rejected)
{
	uint8_t *p = test_map_filled(1, 1);
	struct madvx_batch *b;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add_flags(b, p, test_page(), MADV_DONTNEED, 1U << 1), -EINVAL);
	ck_assert_int_eq(madvx_batch_add_flags(b, p, test_page(), 9999, MADVX_HINT_ONE_VMA),
			 -EINVAL);
	ck_assert_int_eq(madvx_batch_add_flags(NULL, p, test_page(), MADV_DONTNEED, 0), -EINVAL);
	ck_assert_uint_eq(madvx_batch_pending(b), 0);
	ck_assert_int_eq(madvx_batch_add_flags(b, p, test_page(), MADV_DONTNEED, 0), 0);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(test_resident(p), 0);
	madvx_batch_free(b);
	munmap(p, test_page());
}
END_TEST

/* ---- wrong vouches: madvise()'s answers all the same ---- */

/*
 * [0,16) rw | [16,32) r | [32,40) rw | hole [40,42) | [42,48) rw |
 * [48,56) rw mlocked | [56,64) rw. Hints in add order; the right ones
 * after the wrong ones (in address order too) must not notice them.
 */
static const struct { int pg0, npg; } wrong[] = {
	{ 12, 8 },	/* crosses rw -> r */
	{ 38, 6 },	/* has a hole */
	{ 44, 6 },	/* runs into the mlocked VMA */
	{ 36, 16 },	/* hole and mlock */
	{ 54, 4 },	/* out of the mlocked VMA */
	{ 2, 2 },	/* right */
	{ 60, 2 },	/* right */
	{ 28, 36 },	/* everything to the end */
};

static void wrong_layout(uint8_t *p, bool mlocked)
{
	size_t pg = test_page();

	ck_assert_int_eq(mprotect(p + 16 * pg, 16 * pg, PROT_READ), 0);
	ck_assert_int_eq(munmap(p + 40 * pg, 2 * pg), 0);
	if (mlocked)
		ck_assert_int_eq(sys_mlock(p + 48 * pg, 8 * pg), 0);
}

static void wrong_vouches(int advice, bool mlocked, bool vouch_all)
{
	size_t pg = test_page(), nh = ARRAY_SIZE(wrong);
	uint8_t *a = test_map_filled(NPG, 7), *b = test_map_filled(NPG, 7);
	int want_err[ARRAY_SIZE(wrong)], first = 0;
	uint64_t want_done[ARRAY_SIZE(wrong)];
	const struct madvx_hint *r;
	struct madvx_batch *bt;
	uint32_t n;

	wrong_layout(a, mlocked);
	wrong_layout(b, mlocked);
	ck_assert_int_eq(madvx_batch_create(NULL, &bt), 0);
	for (size_t i = 0; i < nh; i++) {
		uint8_t *ha = a + wrong[i].pg0 * pg, *hb = b + wrong[i].pg0 * pg;
		size_t len = wrong[i].npg * pg;
		unsigned int fl = vouch_all || i % 2 ? MADVX_HINT_ONE_VMA : 0;

		ck_assert_int_eq(madvx_batch_add_flags(bt, ha, len, advice, fl), (int)i);
		want_err[i] = madvise(hb, len, advice) ? -errno : 0;
		want_done[i] = replay_done(hb, len, advice, want_err[i]);
		if (want_err[i] && !first)
			first = want_err[i];
	}
	ck_assert_int_eq(madvx_batch_flush(bt), first);
	r = madvx_batch_results(bt, &n);
	ck_assert_uint_eq(n, nh);
	for (size_t i = 0; i < nh; i++)
		ck_assert_msg(r[i].err == want_err[i] && r[i].done == want_done[i],
			      "%s%s hint %zu [%d,+%d): err %d done %" PRIu64
			      ", madvise err %d done %" PRIu64,
			      madvx_advice_name(advice), mlocked ? " mlock" : "", i,
			      wrong[i].pg0, wrong[i].npg, r[i].err, r[i].done / pg, want_err[i],
			      want_done[i] / pg);
	compare_pages(a, b, NPG, advice);
	madvx_batch_free(bt);
	munmap(a, NPG * pg);
	munmap(b, NPG * pg);
}

static const int advs[] = {
	MADV_DONTNEED, MADV_FREE, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED,
	MADV_POPULATE_READ, MADV_POPULATE_WRITE, MADV_DONTNEED_LOCKED,
};

static bool can_mlock(void)
{
	uint8_t *p = test_map_filled(8, 0);
	bool ok = sys_mlock(p, 8 * test_page()) == 0;

	munmap(p, 8 * test_page());
	if (!ok)
		printf("mlock of 8 pages refused (RLIMIT_MEMLOCK): no mlocked VMA\n");
	return ok;
}

static void wrong_vouch_every_advice(void)
{
	bool ml = can_mlock();

	for (size_t k = 0; k < ARRAY_SIZE(advs); k++) {
		if (madvx_advice_supported(advs[k]) < 0)
			continue;
		wrong_vouches(advs[k], ml, true);
		wrong_vouches(advs[k], ml, false);
		if (ml)
			wrong_vouches(advs[k], false, true);
	}
}

START_TEST(wrong_vouch_gives_madvise_results)
{
	wrong_vouch_every_advice();
}
END_TEST

START_TEST(wrong_vouch_gives_madvise_results_no_vector)
{
	test_in_child("process_madvise", wrong_vouch_every_advice);
}
END_TEST

START_TEST(wrong_vouch_gives_madvise_results_no_procmap)
{
	test_in_child("procmap_query", wrong_vouch_every_advice);
}
END_TEST

/*
 * VM_PFNMAP (and VM_IO): the kernel's [vvar] mapping, with the VMAs right
 * above it, vouched as one. COLD and PAGEOUT refuse PFNMAP VMAs; the
 * answers are compared with madvise() of the same range (these pages
 * cannot be duplicated; both advices only age pages).
 */
START_TEST(wrong_vouch_over_pfnmap)
{
	static char line[512];
	uint64_t start = 0, end = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	int tried = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx", &s, &e) != 2)
			continue;
		if (!start && strstr(line, "[vvar]")) {
			start = s;
			end = e;
		} else if (start && s == end && end - start < (1UL << 20)) {
			end = e;	/* the VMAs above it, as long as they touch */
		}
	}
	fclose(f);
	if (!start) {
		printf("no [vvar] mapping here: no VM_PFNMAP VMA to vouch for\n");
		return;
	}
	for (int k = 0; k < 2; k++) {
		int advice = k ? MADV_PAGEOUT : MADV_COLD;
		uint64_t len = end - start;
		const struct madvx_hint *r;
		struct madvx_batch *b;
		int want;
		uint32_t n;

		ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
		ck_assert_int_eq(madvx_batch_add_flags(b, (void *)start, len, advice,
						       MADVX_HINT_ONE_VMA), 0);
		ck_assert_int_eq(madvx_batch_add_flags(b, (void *)start, test_page(), advice,
						       MADVX_HINT_ONE_VMA), 1);
		madvx_batch_flush(b);
		r = madvx_batch_results(b, &n);
		ck_assert_uint_eq(n, 2);
		want = madvise((void *)start, len, advice) ? -errno : 0;
		ck_assert_msg(r[0].err == want &&
			      r[0].done == replay_done((uint8_t *)start, len, advice, want),
			      "%s [vvar]+: err %d done %" PRIu64 ", madvise %d",
			      madvx_advice_name(advice), r[0].err, r[0].done, want);
		want = madvise((void *)start, test_page(), advice) ? -errno : 0;
		ck_assert_int_eq(r[1].err, want);
		printf("%s over [vvar] and the %" PRIu64 " KiB above it: %d, madvise %d\n",
		       madvx_advice_name(advice), len >> 10, r[0].err, want);
		tried++;
		madvx_batch_free(b);
	}
	ck_assert_int_eq(tried, 2);
}
END_TEST

/*
 * Vouched hints reach the kernel in calls of their own, after the looked-up
 * ones: 8 looked-up and 4 vouched single pages of one advice, each in its
 * own place, make two process_madvise() calls (one would hold them all).
 */
START_TEST(vouched_hints_go_in_calls_of_their_own)
{
	size_t pg = test_page();
	uint8_t *p = four_vmas();
	struct madvx_stats st = { .size = sizeof(st) };
	struct madvx_batch *b;
	/*
	 * Grouping is the same for every advice a vector takes: before 6.13
	 * (Debian 12's 6.1) process_madvise() refuses DONTNEED on the caller
	 * itself, where MADV_COLD (5.10) shows it as well.
	 */
	int adv = madvx_advice_supported(MADV_DONTNEED) == 1 ? MADV_DONTNEED : MADV_COLD;

	if (madvx_advice_supported(adv) != 1) {
		printf("no process_madvise: one madvise() per entry, nothing to group\n");
		munmap(p, NPG * pg);
		return;
	}
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(madvx_batch_add_flags(b, p + (size_t)(5 * i) * pg, pg, adv,
						       i % 3 == 2 ? MADVX_HINT_ONE_VMA : 0), i);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
	ck_assert_uint_eq(st.syscalls, 2);
	ck_assert_uint_eq(st.vector_entries, 12);
	ck_assert_uint_eq(st.vma_skipped, 4);
	for (int i = 0; i < 12; i++) {
		const uint8_t *q = p + (size_t)(5 * i) * pg;

		if (adv == MADV_DONTNEED)	/* dropped: reads as zero */
			ck_assert(test_page_zero(q));
		else				/* only aged: four_vmas()' fill */
			ck_assert(q[0] == (uint8_t)(1 + 5 * i) && q[pg - 1] == q[0]);
	}
	madvx_batch_free(b);
	munmap(p, NPG * pg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vouch");
	TCase *t = tcase_create("vouch");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, right_vouch_makes_no_lookups);
	tcase_add_test(t, right_vouch_makes_no_lookups_old_kernel);
	tcase_add_test(t, unknown_flag_is_rejected);
	tcase_add_test(t, wrong_vouch_gives_madvise_results);
	tcase_add_test(t, wrong_vouch_gives_madvise_results_no_vector);
	tcase_add_test(t, wrong_vouch_gives_madvise_results_no_procmap);
	tcase_add_test(t, wrong_vouch_over_pfnmap);
	tcase_add_test(t, vouched_hints_go_in_calls_of_their_own);
	suite_add_tcase(s, t);
	return test_run_suite(s);
}
