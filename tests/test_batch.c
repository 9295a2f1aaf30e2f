// SPDX-License-Identifier: MIT
/*
 * The batching engine against the kernel.
 *
 * The differential oracle applies seeded random hint sets (overlapping,
 * adjacent, zero-length, unaligned, crossing VMA boundaries made with
 * mprotect, covering holes made with munmap, mixed advices) through a batch
 * to one mapping and through a plain madvise() loop to an identical one:
 * page contents, mincore residency and per-hint errors must match, and each
 * hint's reported bytes must equal what is mapped of it. It runs with every
 * fallback forced through MADVX_DISABLE. MADVX_TEST_LONG=1 runs 25x more.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "harness.h"
#include "advtab.h"
#include "probe.h"

#define NPAGES 48
#define MAX_HINTS 48

struct layout {
	bool readonly[NPAGES];
	bool hole[NPAGES];
};

struct hint_spec {
	size_t off;
	size_t len;
	int advice;
};

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}


static void random_layout(struct layout *l)
{
	memset(l, 0, sizeof(*l));
	for (int i = 0; i < NPAGES; i++) {
		l->readonly[i] = rnd(4) == 0;
		l->hole[i] = rnd(12) == 0;
	}
}

/*
 * A mapping filled per page, split into VMAs and holes as @l says, between
 * two PROT_NONE guard pages so that no later mmap() (the batch's storage,
 * say) can land in a hole at either end.
 */
static uint8_t *make_area(const struct layout *l)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(NPAGES + 2, 0x40 - 1);

	ck_assert_int_eq(mprotect(p, pg, PROT_NONE), 0);
	ck_assert_int_eq(mprotect(p + (NPAGES + 1) * pg, pg, PROT_NONE), 0);
	p += pg;

	for (int i = 0; i < NPAGES; i++) {
		if (l->hole[i])
			ck_assert_int_eq(munmap(p + i * pg, pg), 0);
		else if (l->readonly[i])
			ck_assert_int_eq(mprotect(p + i * pg, pg, PROT_READ), 0);
	}
	return p;
}

static bool range_has_hole(const struct layout *l, size_t off, size_t len)
{
	size_t pg = test_page();

	for (size_t i = off / pg; i < NPAGES && i * pg < off + len; i++)
		if (l->hole[i])
			return true;
	return false;
}

static uint64_t mapped_in(const struct layout *l, size_t off, size_t len)
{
	size_t pg = test_page();
	uint64_t n = 0;

	len = (len + pg - 1) & ~(pg - 1);
	for (size_t i = off / pg; i < NPAGES && i * pg < off + len; i++)
		n += !l->hole[i] ? pg : 0;
	return n;
}

static int random_advice(void)
{
	static const int adv[] = {
		MADV_DONTNEED, MADV_DONTNEED, MADV_DONTNEED, MADV_FREE,
		MADV_FREE, MADV_COLD, MADV_WILLNEED, MADV_POPULATE_READ,
		MADV_POPULATE_READ,
	};

	return adv[rnd(ARRAY_SIZE(adv))];
}

static int random_hints(const struct layout *l, struct hint_spec *h)
{
	size_t pg = test_page();
	int n = 1 + (int)rnd(MAX_HINTS);

	for (int i = 0; i < n; i++) {
		size_t page = rnd(NPAGES), len;

		h[i].off = page * pg + (rnd(25) == 0 ? 1 + rnd((uint32_t)pg - 1) : 0);
		switch (rnd(6)) {
		case 0:
			len = rnd(20) == 0 ? 0 : 1 + rnd((uint32_t)pg * 3);
			break;
		case 1:
			len = (1 + rnd(16)) * pg;	/* likely to cross VMAs */
			break;
		default:
			len = (1 + rnd(3)) * pg;
			break;
		}
		if (h[i].off + len > NPAGES * pg)
			len = NPAGES * pg - h[i].off;
		h[i].len = len;
		h[i].advice = random_advice();
		/*
		 * POPULATE stops at the first hole (madvise_populate()), where
		 * the batch advises every mapped part (documented in madvx.h):
		 * keep it off holes so the oracle compares like with like.
		 */
		if (h[i].advice == MADV_POPULATE_READ && range_has_hole(l, h[i].off, len))
			h[i].advice = MADV_DONTNEED;
	}
	return n;
}

static void compare_areas(const struct layout *l, uint8_t *a, uint8_t *b,
			  uint64_t seed)
{
	size_t pg = test_page();

	for (int i = 0; i < NPAGES; i++) {
		if (l->hole[i])
			continue;
		/* Residency first: reading a zapped page would map it. */
		ck_assert_msg(test_resident(a + i * pg) == test_resident(b + i * pg),
			      "seed %llu page %d: residency differs", (unsigned long long)seed, i);
		ck_assert_msg(!memcmp(a + i * pg, b + i * pg, pg),
			      "seed %llu page %d: contents differ", (unsigned long long)seed, i);
	}
}

static void unmap_area(const struct layout *l, uint8_t *p)
{
	(void)l;
	munmap(p - test_page(), (NPAGES + 2) * test_page());
}

/* Test-only flag: one advice, hints added by rising address (the unsorted-free path). */
#define ORACLE_IN_ORDER (1U << 31)

static int cmp_off(const void *a, const void *b)
{
	const struct hint_spec *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* One oracle case with @flags for the batch; returns nothing, asserts. */
static void oracle_case(uint64_t seed, uint32_t flags)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .flags = flags & ~ORACLE_IN_ORDER };
	struct hint_spec h[MAX_HINTS];
	int err_oracle[MAX_HINTS], idx[MAX_HINTS];
	struct madvx_batch *b;
	const struct madvx_hint *res;
	struct layout l;
	uint8_t *ref, *lib;
	uint32_t nres;
	int n;

	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	random_layout(&l);
	n = random_hints(&l, h);
	if (flags & ORACLE_IN_ORDER) {
		for (int i = 0; i < n; i++)
			h[i].advice = MADV_DONTNEED;
		qsort(h, (size_t)n, sizeof(h[0]), cmp_off);
	}
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	ref = make_area(&l);
	lib = make_area(&l);

	for (int i = 0; i < n; i++)
		err_oracle[i] = madvise(ref + h[i].off, h[i].len, h[i].advice) ? errno : 0;

	for (int i = 0; i < n; i++)
		idx[i] = madvx_batch_add(b, lib + h[i].off, h[i].len, h[i].advice);
	madvx_batch_flush(b);
	res = madvx_batch_results(b, &nres);

	for (int i = 0; i < n; i++) {
		int err = idx[i] < 0 ? -idx[i] : -res[idx[i]].err;

		ck_assert_msg(err == err_oracle[i],
			      "seed %llu hint %d (+%zu, %zu, advice %d): batch err %d, madvise err %d",
			      (unsigned long long)seed, i, h[i].off, h[i].len, h[i].advice,
			      err, err_oracle[i]);
		if (idx[i] >= 0)
			ck_assert_msg(res[idx[i]].done == mapped_in(&l, h[i].off, h[i].len),
				      "seed %llu hint %d: done %llu, mapped %llu",
				      (unsigned long long)seed, i,
				      (unsigned long long)res[idx[i]].done,
				      (unsigned long long)mapped_in(&l, h[i].off, h[i].len));
	}
	compare_areas(&l, ref, lib, seed);
	madvx_batch_free(b);
	unmap_area(&l, ref);
	unmap_area(&l, lib);
}

static void oracle_run(uint32_t flags)
{
	size_t n = test_scaled_cases(1000);

	for (size_t s = 1; s <= n; s++)
		oracle_case(s, flags);
}

static void oracle_default(void)
{
	oracle_run(0);
}

static void oracle_no_vector(void)
{
	oracle_run(MADVX_BATCH_NO_VECTOR);
}

static void oracle_in_order(void)
{
	oracle_run(ORACLE_IN_ORDER);
}

START_TEST(oracle_hints_added_in_order)
{
	test_in_child(NULL, oracle_in_order);
	test_in_child("process_madvise,procmap_query", oracle_in_order);
}
END_TEST

START_TEST(oracle_matches_madvise_loop)
{
	test_in_child(NULL, oracle_default);
}
END_TEST

START_TEST(oracle_without_process_madvise)
{
	test_in_child("process_madvise", oracle_default);
}
END_TEST

START_TEST(oracle_without_procmap_query)
{
	test_in_child("procmap_query", oracle_default);
}
END_TEST

START_TEST(oracle_without_pidfd_self)
{
	test_in_child("pidfd_self", oracle_default);
}
END_TEST

START_TEST(oracle_old_kernel)
{
	test_in_child("process_madvise,pidfd_self,procmap_query,per_vma_madvise", oracle_default);
}
END_TEST

START_TEST(oracle_no_vector_flag)
{
	test_in_child(NULL, oracle_no_vector);
}
END_TEST

/* Submission order between different advices on one range is kept. */
START_TEST(order_between_advices_is_kept)
{
	struct madvx_batch *b;
	uint8_t *p = test_map_filled(8, 1);
	size_t pg = test_page();

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	/* DONTNEED then POPULATE_READ: populated (zero page mapped). */
	madvx_batch_add(b, p, 4 * pg, MADV_DONTNEED);
	madvx_batch_add(b, p, 4 * pg, MADV_POPULATE_READ);
	/* POPULATE_READ then DONTNEED: gone. */
	madvx_batch_add(b, p + 4 * pg, 4 * pg, MADV_POPULATE_READ);
	madvx_batch_add(b, p + 4 * pg, 4 * pg, MADV_DONTNEED);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(test_resident(p + i * pg), 1);
	for (int i = 4; i < 8; i++)
		ck_assert_int_eq(test_resident(p + i * pg), 0);
	for (int i = 0; i < 8; i++)
		ck_assert(test_page_zero(p + i * pg));
	madvx_batch_free(b);
	munmap(p, 8 * pg);
}
END_TEST

/* 32 two-page hints over 3 VMAs and a hole: 4 entries in one call. */
START_TEST(plan_merges_and_splits)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(64, 1);
	struct madvx_stats st = { .size = sizeof(st) };
	struct madvx_batch *b;
	const struct madvx_hint *r;
	uint32_t n;

	ck_assert_int_eq(mprotect(p + 10 * pg, 5 * pg, PROT_READ), 0);
	ck_assert_int_eq(munmap(p + 30 * pg, 2 * pg), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	for (int i = 0; i < 64; i += 2)
		ck_assert_int_eq(madvx_batch_add(b, p + i * pg, 2 * pg, MADV_DONTNEED), i / 2);
	ck_assert_int_eq(madvx_batch_flush(b), -ENOMEM);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 32);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(r[i].err, i == 15 ? -ENOMEM : 0);
		ck_assert_uint_eq(r[i].done, i == 15 ? 0 : 2 * pg);
	}
	for (int i = 0; i < 64; i++)
		if (i < 30 || i >= 32)
			ck_assert(test_page_zero(p + i * pg));
	/* A flush of nothing is the last flush now: it has no results. */
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_ptr_nonnull(madvx_batch_results(b, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
	ck_assert_uint_eq(st.hints, 32);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.errors[ENOMEM], 1);
	ck_assert_uint_eq(st.bytes, 62 * pg);
	if (test_self_pmadv(MADV_DONTNEED, "one vector of four entries")) {
		/* [0,10) [10,15) [15,30) [32,64): one vector of four entries. */
		ck_assert_uint_eq(st.syscalls, 1);
		ck_assert_uint_eq(st.vector_entries, 4);
	}
	madvx_batch_free(b);
	munmap(p, 64 * pg);
}
END_TEST

/*
 * madvx_batch_cancel(): a dropped hint never lands, a trimmed one lands on
 * the part left, a range strictly inside a hint is refused with nothing
 * changed; checked on the pages, the results and the counters.
 */
START_TEST(cancel_takes_ranges_out)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(40, 1);
	struct madvx_stats st = { .size = sizeof(st) };
	struct madvx_batch *b;
	const struct madvx_hint *r;
	uint32_t n;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	/* Out of address order: the epoch sorts from items, which cancel rewrites. */
	ck_assert_int_eq(madvx_batch_add(b, p + 24 * pg, 8 * pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_add(b, p, 8 * pg, MADV_DONTNEED), 1);
	ck_assert_int_eq(madvx_batch_add(b, p + 8 * pg, 8 * pg - 100, MADV_DONTNEED), 2);
	ck_assert_int_eq(madvx_batch_add(b, p + 16 * pg, 8 * pg, MADV_DONTNEED), 3);
	ck_assert_int_eq(madvx_batch_add(b, p + 32 * pg, 8 * pg, MADV_DONTNEED), 4);

	ck_assert_int_eq(madvx_batch_cancel(NULL, p, pg), -EINVAL);
	ck_assert_int_eq(madvx_batch_cancel(b, p + 1, pg), -EINVAL);
	ck_assert_int_eq(madvx_batch_cancel(b, p, SIZE_MAX), -EINVAL);
	ck_assert_int_eq(madvx_batch_cancel(b, p + pg, 0), 0);
	/* Strictly inside hint 0: refused, and nothing changed (checked below). */
	ck_assert_int_eq(madvx_batch_cancel(b, p + 26 * pg, 2 * pg), -EBUSY);
	/* Head of hint 1 (and nothing else). */
	ck_assert_int_eq(madvx_batch_cancel(b, p, 4 * pg), 1);
	/* Tail of hint 2, whose length was not page-aligned. */
	ck_assert_int_eq(madvx_batch_cancel(b, p + 12 * pg, 4 * pg), 1);
	/* All of hint 3 (hint 0 only touches it), then the head of hint 4. */
	ck_assert_int_eq(madvx_batch_cancel(b, p + 16 * pg, 8 * pg), 1);
	ck_assert_int_eq(madvx_batch_cancel(b, p + 32 * pg, 2 * pg), 1);
	/* Nothing queued there any more. */
	ck_assert_int_eq(madvx_batch_cancel(b, p + 16 * pg, 4 * pg), 0);
	ck_assert_uint_eq(madvx_batch_pending(b), 5);

	ck_assert_int_eq(madvx_batch_flush(b), 0);
	for (int i = 0; i < 40; i++) {
		bool zapped = (i >= 4 && i < 12) || (i >= 24 && i < 32) || i >= 34;

		ck_assert_msg(test_page_zero(p + i * pg) == zapped, "page %d: %s", i,
			      zapped ? "not zapped" : "zapped");
		if (!zapped)
			ck_assert_uint_eq(p[i * pg], (uint8_t)(1 + i));
	}
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_uint_eq(r[0].addr, (uintptr_t)(p + 24 * pg));
	ck_assert_uint_eq(r[0].len, 8 * pg);
	ck_assert_uint_eq(r[0].done, 8 * pg);
	ck_assert_uint_eq(r[1].addr, (uintptr_t)(p + 4 * pg));
	ck_assert_uint_eq(r[1].len, 4 * pg);
	ck_assert_uint_eq(r[1].done, 4 * pg);
	ck_assert_uint_eq(r[2].addr, (uintptr_t)(p + 8 * pg));
	ck_assert_uint_eq(r[2].len, 4 * pg);
	ck_assert_uint_eq(r[2].done, 4 * pg);
	ck_assert_uint_eq(r[3].len, 0);
	ck_assert_uint_eq(r[3].done, 0);
	ck_assert_uint_eq(r[4].addr, (uintptr_t)(p + 34 * pg));
	ck_assert_uint_eq(r[4].len, 6 * pg);
	ck_assert_uint_eq(r[4].done, 6 * pg);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_int_eq(r[i].err, 0);
		ck_assert_uint_eq(r[i].seq, i);
	}
	ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
	ck_assert_uint_eq(st.cancelled, 4);
	ck_assert_uint_eq(st.failed, 0);
	ck_assert_uint_eq(st.bytes, 22 * pg);
	madvx_batch_free(b);
	munmap(p, 40 * pg);
}
END_TEST

/*
 * Random hints of two ordered advices (DONTNEED, POPULATE_READ), added in
 * random order, and random cancels, against a model: each hint's part
 * left after the cancels, applied by madvise() in add order to an
 * identical mapping. Page contents and residency must match, and so must
 * each result's range and bytes done.
 */
static uint64_t cancel_seed;

static void cancel_model(void)
{
	size_t pg = test_page();
	int cases = (int)test_scaled_cases(40);

	rng = cancel_seed;
	for (int c = 0; c < cases; c++) {
		uint8_t *a = test_map_filled(NPAGES, 3), *m = test_map_filled(NPAGES, 3);
		uint64_t lo[MAX_HINTS], hi[MAX_HINTS];
		int adv[MAX_HINTS], nh = 1 + (int)rnd(MAX_HINTS), cancelled = 0;
		struct madvx_stats st = { .size = sizeof(st) };
		struct madvx_batch *b;
		const struct madvx_hint *r;
		uint32_t n;

		ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
		for (int i = 0; i < nh; i++) {
			lo[i] = rnd(NPAGES);
			hi[i] = lo[i] + 1 + rnd(8);
			if (hi[i] > NPAGES)
				hi[i] = NPAGES;
			adv[i] = rnd(4) ? MADV_DONTNEED : MADV_POPULATE_READ;
			ck_assert_int_eq(madvx_batch_add(b, a + lo[i] * pg, (hi[i] - lo[i]) * pg,
							 adv[i]), i);
		}
		for (int k = 0, nc = (int)rnd(12); k < nc; k++) {
			uint64_t clo = rnd(NPAGES), chi = clo + 1 + rnd(10);
			bool inside = false;
			int changed = 0;

			chi = chi > NPAGES ? NPAGES : chi;
			for (int i = 0; i < nh; i++)
				inside |= lo[i] < clo && chi < hi[i];
			if (inside) {
				ck_assert_int_eq(madvx_batch_cancel(b, a + clo * pg, (chi - clo) * pg),
						 -EBUSY);
				continue;
			}
			for (int i = 0; i < nh; i++) {
				if (lo[i] == hi[i] || lo[i] >= chi || hi[i] <= clo)
					continue;
				if (clo <= lo[i] && hi[i] <= chi)
					hi[i] = lo[i];
				else if (clo <= lo[i])
					lo[i] = chi;
				else
					hi[i] = clo;
				changed++;
			}
			ck_assert_int_eq(madvx_batch_cancel(b, a + clo * pg, (chi - clo) * pg),
					 changed);
			cancelled += changed;
		}
		for (int i = 0; i < nh; i++)
			if (lo[i] != hi[i])
				ck_assert_int_eq(madvise(m + lo[i] * pg, (hi[i] - lo[i]) * pg, adv[i]), 0);
		ck_assert_int_eq(madvx_batch_flush(b), 0);
		for (int i = 0; i < NPAGES; i++) {
			ck_assert_msg(memcmp(a + i * pg, m + i * pg, pg) == 0, "case %d page %d", c, i);
			ck_assert_int_eq(test_resident(a + i * pg), test_resident(m + i * pg));
		}
		r = madvx_batch_results(b, &n);
		ck_assert_uint_eq(n, (uint32_t)nh);
		for (int i = 0; i < nh; i++) {
			ck_assert_int_eq(r[i].err, 0);
			ck_assert_uint_eq(r[i].len, (hi[i] - lo[i]) * pg);
			ck_assert_uint_eq(r[i].done, (hi[i] - lo[i]) * pg);
			if (lo[i] != hi[i])
				ck_assert_uint_eq(r[i].addr, (uintptr_t)(a + lo[i] * pg));
		}
		ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
		ck_assert_uint_eq(st.cancelled, (uint64_t)cancelled);
		madvx_batch_free(b);
		munmap(a, NPAGES * pg);
		munmap(m, NPAGES * pg);
	}
}

/* The model with every path of the flush: vectors, look-ups, an old kernel. */
START_TEST(cancel_matches_a_madvise_model)
{
	cancel_seed = 0x9e3779b97f4a7c15ULL + (uint64_t)_i;
	test_in_child(NULL, cancel_model);
	test_in_child("process_madvise,procmap_query", cancel_model);
	test_in_child("process_madvise,pidfd_self,procmap_query,per_vma_madvise", cancel_model);
}
END_TEST

/*
 * A batch with pending hints across each fork kind: the child cancels in
 * its copy and flushes (its pages only), the parent's hints stay pending
 * and its own cancel and flush act on its pages only.
 */
START_TEST(cancel_across_fork_kinds)
{
	size_t pg = test_page();
	enum test_fork_kind kind = (enum test_fork_kind)_i;
	uint8_t *p = test_map_filled(16, 1);
	struct madvx_batch *b;
	int status;
	pid_t pid;

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, p, 8 * pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_add(b, p + 8 * pg, 8 * pg, MADV_DONTNEED), 1);
	pid = test_fork_by(kind);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		bool ok = madvx_batch_cancel(b, p, 4 * pg) == 1 && madvx_batch_flush(b) == 0;

		for (int i = 0; ok && i < 16; i++)
			ok = test_page_zero(p + i * pg) == (i >= 4) &&
			     (i >= 4 || p[i * pg] == (uint8_t)(1 + i));
		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child of fork kind %d", kind);
	/* The child's flush zapped its copy only: ours are all still here. */
	for (int i = 0; i < 16; i++)
		ck_assert_uint_eq(p[i * pg], (uint8_t)(1 + i));
	ck_assert_uint_eq(madvx_batch_pending(b), 2);
	ck_assert_int_eq(madvx_batch_cancel(b, p + 12 * pg, 4 * pg), 1);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	for (int i = 0; i < 16; i++)
		ck_assert(test_page_zero(p + i * pg) == (i < 12));
	madvx_batch_free(b);
	munmap(p, 16 * pg);
}
END_TEST

START_TEST(bad_input_is_rejected_like_madvise)
{
	struct madvx_batch_opts o = { .size = sizeof(o) };
	struct madvx_batch *b;
	uint8_t *p = test_map_filled(1, 1);
	char big[sizeof(o) + 8] = { 0 };

	ck_assert_int_eq(madvx_batch_add(NULL, p, 4096, MADV_DONTNEED), -EINVAL);
	ck_assert_int_eq(madvx_batch_flush(NULL), -EINVAL);
	ck_assert_int_eq(madvx_batch_create(NULL, NULL), -EINVAL);
	o.capacity = (1U << 24) + 1;
	ck_assert_int_eq(madvx_batch_create(&o, &b), -EINVAL);
	o.capacity = 0;
	o.flags = 1U << 31;
	ck_assert_int_eq(madvx_batch_create(&o, &b), -EINVAL);
	o.flags = 0;
	memcpy(big, &o, sizeof(o));
	((struct madvx_batch_opts *)big)->size = sizeof(big);
	big[sizeof(o) + 3] = 1;
	ck_assert_int_eq(madvx_batch_create((struct madvx_batch_opts *)big, &b), -E2BIG);

	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, p + 1, 4096, MADV_DONTNEED), -EINVAL);
	ck_assert_int_eq(madvx_batch_add(b, p, 4096, 12345), -EINVAL);
	ck_assert_int_eq(madvx_batch_add(b, p, 4096, -1), -EINVAL);
	ck_assert_int_eq(madvx_batch_add(b, p, SIZE_MAX - 100, MADV_DONTNEED), -EINVAL);
	ck_assert_int_eq(madvx_batch_add(b, (void *)(UINTPTR_MAX & ~4095UL), 8192,
					 MADV_DONTNEED), -EINVAL);
	/* Zero length is fine, as for madvise(). */
	ck_assert_int_eq(madvx_batch_add(b, p, 0, MADV_DONTNEED), 0);
	ck_assert_uint_eq(madvx_batch_pending(b), 1);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(p[0], 1);
	madvx_batch_free(b);
	madvx_batch_free(NULL);
	munmap(p, test_page());
}
END_TEST

START_TEST(full_batch_enospc_or_autoflush)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = 4 };
	size_t pg = test_page();
	uint8_t *p = test_map_filled(5, 1);
	struct madvx_batch *b;

	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), i);
	ck_assert_int_eq(madvx_batch_add(b, p + 4 * pg, pg, MADV_DONTNEED), -ENOSPC);
	ck_assert_int_eq(p[0], 1);	/* nothing applied yet */
	madvx_batch_free(b);

	o.flags = MADVX_BATCH_AUTOFLUSH;
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	for (int i = 0; i < 5; i++)
		madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED);
	ck_assert_uint_eq(madvx_batch_pending(b), 1);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(test_resident(p + i * pg), 0);
	ck_assert_int_eq(test_resident(p + 4 * pg), 1);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(test_resident(p + 4 * pg), 0);
	madvx_batch_free(b);
	munmap(p, 5 * pg);
}
END_TEST

static int errors_seen;

static void count_error(void *ctx, const struct madvx_hint *h)
{
	ck_assert_ptr_eq(ctx, &errors_seen);
	ck_assert_int_eq(h->err, -ENOMEM);
	errors_seen++;
}

/* Failures of automatic flushes reach on_error and the next explicit flush. */
START_TEST(autoflush_failures_are_reported)
{
	struct madvx_batch_opts o = {
		.size = sizeof(o), .capacity = 2, .flags = MADVX_BATCH_AUTOFLUSH,
		.on_error = count_error, .on_error_ctx = &errors_seen,
	};
	size_t pg = test_page();
	uint8_t *p = test_map_filled(4, 1);
	struct madvx_batch *b;

	ck_assert_int_eq(munmap(p + pg, pg), 0);
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	madvx_batch_add(b, p + pg, pg, MADV_DONTNEED);	/* the hole */
	madvx_batch_add(b, p, pg, MADV_DONTNEED);
	madvx_batch_add(b, p + 2 * pg, pg, MADV_DONTNEED);	/* autoflush of the first two */
	ck_assert_int_eq(errors_seen, 1);
	ck_assert_int_eq(madvx_batch_flush(b), -ENOMEM);
	ck_assert_int_eq(madvx_batch_flush(b), 0);	/* reported once */
	ck_assert(test_page_zero(p) && test_page_zero(p + 2 * pg));
	madvx_batch_free(b);
	munmap(p, 4 * pg);
}
END_TEST

/*
 * AUTOFLUSH: on_result sees every hint of every flush, automatic or not, in
 * add order, with seq = its number among all adds; the memory of each is
 * what it says.
 */
struct seen {
	uint32_t n;
	struct madvx_hint h[16];
};

static void record_result(void *ctx, const struct madvx_hint *h)
{
	struct seen *s = ctx;

	ck_assert_uint_lt(s->n, 16);
	s->h[s->n++] = *h;
}

START_TEST(autoflush_results_reach_on_result)
{
	static struct seen seen;
	struct madvx_batch_opts o = {
		.size = sizeof(o), .capacity = 3, .flags = MADVX_BATCH_AUTOFLUSH,
		.on_result = record_result, .on_result_ctx = &seen,
	};
	size_t pg = test_page();
	uint8_t *p = test_map_filled(8, 1);
	struct madvx_batch *b;

	seen.n = 0;
	ck_assert_int_eq(munmap(p + 5 * pg, pg), 0);
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	ck_assert_uint_eq(madvx_batch_seq(b), 0);
	for (int i = 0; i < 7; i++)
		ck_assert_int_ge(madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED), 0);
	/* Two automatic flushes of three hints each have reported already. */
	ck_assert_uint_eq(seen.n, 6);
	ck_assert_uint_eq(madvx_batch_seq(b), 7);
	ck_assert_int_eq(madvx_batch_flush(b), -ENOMEM);	/* the hole, hint 5 */
	ck_assert_uint_eq(seen.n, 7);
	for (uint32_t i = 0; i < seen.n; i++) {
		ck_assert_uint_eq(seen.h[i].seq, i);
		ck_assert_uint_eq(seen.h[i].addr, (uintptr_t)(p + i * pg));
		ck_assert_int_eq(seen.h[i].advice, MADV_DONTNEED);
		ck_assert_int_eq(seen.h[i].err, i == 5 ? -ENOMEM : 0);
		ck_assert_uint_eq(seen.h[i].done, i == 5 ? 0 : pg);
		ck_assert(!seen.h[i].__reserved[0] && !seen.h[i].__reserved[1]);
		if (i != 5)
			ck_assert(test_resident(p + i * pg) == 0 && test_page_zero(p + i * pg));
	}
	ck_assert(test_resident(p + 7 * pg) && p[7 * pg] != 0);	/* never hinted */
	madvx_batch_free(b);
	munmap(p, 8 * pg);
}
END_TEST

/* Capacities that do not fit are refused, never truncated. */
START_TEST(capacity_is_checked_not_truncated)
{
	struct madvx_batch_opts o = { .size = sizeof(o) };
	struct madvx_batch *b;

	ck_assert_uint_eq(madvx_batch_storage_size(MADVX_BATCH_MAX_CAPACITY + 1), 0);
	ck_assert_uint_eq(madvx_batch_storage_size(((size_t)1 << 32) + 5), 0);
	ck_assert_uint_gt(madvx_batch_storage_size(5), 0);
	ck_assert_uint_gt(madvx_batch_storage_size(MADVX_BATCH_MAX_CAPACITY), 0);
	o.capacity = ((uint64_t)1 << 32) + 5;	/* would be 5 as a uint32_t */
	ck_assert_int_eq(madvx_batch_create(&o, &b), -EINVAL);
	o.capacity = 5;
	o.__reserved0 = 1;
	ck_assert_int_eq(madvx_batch_create(&o, &b), -EINVAL);
	o.__reserved0 = 0;
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	madvx_batch_free(b);
}
END_TEST

START_TEST(caller_storage)
{
	static uint8_t storage[1 << 20] __attribute__((aligned(64)));
	struct madvx_batch_opts o = {
		.size = sizeof(o), .capacity = 256,
		.storage = storage, .storage_size = 100,
	};
	struct madvx_batch *b;
	uint8_t *p = test_map_filled(2, 1);

	ck_assert_int_eq(madvx_batch_create(&o, &b), -ENOSPC);
	o.storage_size = madvx_batch_storage_size(256);
	ck_assert_uint_le(o.storage_size, sizeof(storage));
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	ck_assert_ptr_eq(b, (void *)storage);
	madvx_batch_add(b, p, 2 * test_page(), MADV_DONTNEED);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert(test_page_zero(p));
	madvx_batch_free(b);	/* must not unmap caller storage */
	storage[0] ^= 1;
	munmap(p, 2 * test_page());
}
END_TEST

/* Does a fault of anonymous memory map more than its page (multi-size THP)? */
static bool anon_faults_map_folios(void)
{
	char top[128] = "", buf[128], path[320];
	struct dirent *d;
	DIR *dir;
	bool any = false;
	int fd;

	fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, top, sizeof(top) - 1);

		top[n > 0 ? n : 0] = 0;
		close(fd);
	}
	dir = opendir("/sys/kernel/mm/transparent_hugepage");
	while (dir && (d = readdir(dir))) {
		ssize_t n;

		if (strncmp(d->d_name, "hugepages-", 10) ||
		    !strcmp(d->d_name, "hugepages-2048kB"))
			continue;
		snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/%s/enabled",
			 d->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		any |= strstr(buf, "[always]") ||
		       (strstr(buf, "[inherit]") && strstr(top, "[always]"));
	}
	if (dir)
		closedir(dir);
	return any;
}

/* Pages of [@p, @p + @len) that are resident. */
static size_t resident_pages(void *p, size_t len)
{
	size_t pages = (len + test_page() - 1) / test_page(), n = 0;
	unsigned char *vec = calloc(pages, 1);

	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(p, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

/*
 * The first flush of one hint on a fresh batch faults in three pages of its
 * storage (the head, entries[0] and hints[0]; the vector of a few entries is
 * on the stack): each fault costs ~10 us on a paravirtualised host
 * (BENCHMARKS.md p6), and a batch that flushes few hints keeps few pages.
 */
START_TEST(fresh_batch_first_flush_pages)
{
	uint8_t *p = test_map_filled(1, 1);
	struct madvx_batch *b;
	size_t resident;

	if (anon_faults_map_folios()) {
		printf("SKIP part: multi-size THP maps folios on a fault here\n");
		munmap(p, test_page());
		return;
	}
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	ck_assert_int_ge(madvx_batch_add(b, p, test_page(), MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert(test_page_zero(p));
	resident = resident_pages(b, madvx_batch_storage_size(0));
	ck_assert_msg(resident <= 3, "%zu pages of the storage resident", resident);
	madvx_batch_free(b);
	munmap(p, test_page());
}
END_TEST

/*
 * On caller storage, creation clears the head of the batch only (two
 * pages), not the arrays after it: fresh storage is not faulted in (22
 * pages when the entry and iovec arrays were part of the head).
 */
START_TEST(caller_storage_create_clears_the_head_only)
{
	size_t size = madvx_batch_storage_size(0), resident;
	void *st = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct madvx_batch_opts o = {
		.size = sizeof(o), .storage = st, .storage_size = size,
	};
	struct madvx_batch *b;

	ck_assert_ptr_ne(st, MAP_FAILED);
	if (anon_faults_map_folios()) {
		printf("SKIP part: multi-size THP maps folios on a fault here\n");
		munmap(st, size);
		return;
	}
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	resident = resident_pages(st, size);
	ck_assert_msg(resident <= 2, "%zu pages of the storage resident", resident);
	madvx_batch_free(b);
	munmap(st, size);
}
END_TEST

/*
 * A batch made before fork() used in the child advises the child's memory,
 * never the parent's (with PIDFD_SELF off the library holds a pidfd, which
 * in the child would still name the parent).
 */
static struct madvx_batch *fork_batch;
static uint8_t *fork_mem;

static void child_flushes(void)
{
	fork_mem[0] = 7;	/* COW: the child's own copy */
	if (madvx_batch_add(fork_batch, fork_mem, 4 * test_page(), MADV_DONTNEED) < 0)
		_exit(1);
	if (madvx_batch_flush(fork_batch))
		_exit(2);
	if (!test_page_zero(fork_mem) || test_resident(fork_mem + test_page()))
		_exit(3);
}

static void parent_forks_with_batch(void)
{
	ck_assert_int_eq(madvx_batch_create(NULL, &fork_batch), 0);
	fork_mem = test_map_filled(4, 9);
	/* Make the library open its pidfd and maps fd in the parent. */
	madvx_batch_add(fork_batch, fork_mem + 3 * test_page(), test_page(), MADV_COLD);
	ck_assert_int_eq(madvx_batch_flush(fork_batch), 0);
	test_in_child(NULL, child_flushes);
	for (int i = 0; i < 4; i++)
		if (fork_mem[i * test_page()] != 9 + i)
			_exit(10 + i);
}

START_TEST(fork_child_advises_itself)
{
	test_in_child("pidfd_self", parent_forks_with_batch);
	test_in_child("pidfd_self,procmap_query", parent_forks_with_batch);
	test_in_child(NULL, parent_forks_with_batch);
}
END_TEST

/* Several threads with a batch each while another thread maps and unmaps. */
static atomic_bool stop_churn;

static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_churn)) {
		void *m = mmap(NULL, 16 * test_page(), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m != MAP_FAILED) {
			memset(m, 1, test_page());
			munmap(m, 16 * test_page());
		}
	}
	return NULL;
}

static void *batch_worker(void *arg)
{
	size_t pg = test_page();
	struct madvx_batch *b;
	uintptr_t ok = 1;

	(void)arg;
	if (madvx_batch_create(NULL, &b))
		return NULL;
	for (int round = 0; round < 50; round++) {
		uint8_t *p = test_map_filled(64, (uint8_t)round);

		mprotect(p + 16 * pg, 16 * pg, PROT_READ);
		for (int i = 0; i < 64; i += 2)
			madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED);
		if (madvx_batch_flush(b))
			ok = 0;
		for (int i = 0; i < 64; i++) {
			bool zero = test_page_zero(p + i * pg);

			if (zero != (i % 2 == 0))
				ok = 0;
		}
		munmap(p, 64 * pg);
	}
	madvx_batch_free(b);
	return (void *)ok;
}

START_TEST(threads_with_concurrent_mmap)
{
	pthread_t bg, w[4];
	void *ok;

	atomic_store(&stop_churn, false);
	ck_assert_int_eq(pthread_create(&bg, NULL, churn, NULL), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&w[i], NULL, batch_worker, NULL), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(w[i], &ok), 0);
		ck_assert_ptr_eq(ok, (void *)1);
	}
	atomic_store(&stop_churn, true);
	pthread_join(bg, NULL);
}
END_TEST

/*
 * Entries of a userfaultfd-armed region whose context wants UFFD_EVENT_REMOVE
 * never share a call with fast-path ones; a plain MADVX_REGION_UFFD region
 * joins the fast path where the kernel keeps it (probe feature per_vma_uffd).
 */
static void uffd_region_fallbacks(unsigned int flags, uint64_t want)
{
	size_t pg = test_page();
	uint8_t *a = test_map_filled(8, 1), *u = test_map_filled(8, 2);
	struct madvx_stats st = { .size = sizeof(st) };
	struct madvx_batch *b;

	if (madvx_advice_lock(MADV_DONTNEED) != MADVX_LOCK_PER_VMA)
		want = 2;	/* no fast path at all: both entries fall back, together */
	ck_assert_int_eq(madvx_region_register(u, 8 * pg, flags), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	madvx_batch_add(b, u, 8 * pg, MADV_DONTNEED);
	madvx_batch_add(b, a, 8 * pg, MADV_DONTNEED);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(madvx_batch_stats(b, &st), 0);
	ck_assert_uint_eq(st.fallback_entries, want);
	if (test_self_pmadv(MADV_DONTNEED, "system calls of a vector with a fallback entry"))
		ck_assert_uint_eq(st.syscalls, want == 1 ? 2 : 1);
	ck_assert(test_page_zero(a) && test_page_zero(u + 7 * pg));
	ck_assert_int_eq(madvx_region_unregister(u), 0);
	madvx_batch_free(b);
	munmap(a, 8 * pg);
	munmap(u, 8 * pg);
}

START_TEST(uffd_region_plain_follows_probe)
{
	uffd_region_fallbacks(MADVX_REGION_UFFD,
			      madvx_feature_supported(MADVX_FEAT_PER_VMA_UFFD) == 1 ? 0 : 1);
}
END_TEST

START_TEST(uffd_region_entries_go_apart)
{
	uint8_t *u = test_map_filled(1, 3);

	ck_assert_int_eq(madvx_region_register(u, test_page(), MADVX_REGION_UFFD), 0);
	ck_assert_int_eq(madvx_region_register(u, test_page(), 0), -EEXIST);
	ck_assert_int_eq(madvx_region_register(u + 1, test_page(), 0), -EINVAL);
	ck_assert_int_eq(madvx_region_register(u, test_page(), 1U << 2), -EINVAL);
	ck_assert_int_eq(madvx_region_unregister(u), 0);
	ck_assert_int_eq(madvx_region_unregister(u), -ENOENT);
	munmap(u, test_page());
	uffd_region_fallbacks(MADVX_REGION_UFFD_EVENT_REMOVE, 1);
}
END_TEST

/* madvx_release(): threshold, explicit flush, thread exit, advice choice. */
static uint8_t *rel_mem;

static void *release_and_exit(void *arg)
{
	(void)arg;
	madvx_release(rel_mem, test_page());	/* below the threshold */
	return NULL;	/* thread exit must apply it */
}

START_TEST(release_flush_policy)
{
	struct madvx_release_opts ro = { .size = sizeof(ro), .flush_bytes = 4 * test_page() };
	size_t pg = test_page();
	pthread_t t;

	rel_mem = test_map_filled(16, 3);
	ck_assert_int_eq(madvx_release(rel_mem + 1, pg), -EINVAL);
	ck_assert_int_eq(madvx_release_config(&ro), 0);
	ck_assert_uint_eq(madvx_release_pending(), 0);
	ck_assert_int_eq(madvx_release(rel_mem + 8 * pg, pg), 0);
	ck_assert_int_eq(test_resident(rel_mem + 8 * pg), 1);	/* pending */
	ck_assert_uint_eq(madvx_release_pending(), pg);
	ck_assert_int_eq(madvx_release(rel_mem + 9 * pg, 3 * pg), 0);	/* threshold */
	ck_assert_uint_eq(madvx_release_pending(), 0);
	ck_assert_int_eq(test_resident(rel_mem + 8 * pg), 0);
	ck_assert_int_eq(test_resident(rel_mem + 11 * pg), 0);
	ck_assert_int_eq(madvx_release(rel_mem + 12 * pg, pg), 0);
	ck_assert_int_eq(madvx_release_flush(), 0);
	ck_assert_int_eq(test_resident(rel_mem + 12 * pg), 0);

	ck_assert_int_eq(pthread_create(&t, NULL, release_and_exit, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(test_resident(rel_mem), 0);

	/* MADV_FREE: applied, but the data stays until memory pressure. */
	ro.advice = MADV_FREE;
	ck_assert_int_eq(madvx_release_config(&ro), 0);
	ck_assert_int_eq(madvx_release(rel_mem + 14 * pg, pg), 0);
	ck_assert_int_eq(madvx_release_flush(), 0);
	ck_assert_int_eq(rel_mem[14 * pg], 3 + 14);
	ro.advice = MADV_COLD;
	ck_assert_int_eq(madvx_release_config(&ro), -EINVAL);
	{	/* a newer caller's struct: what we do not know must be zero */
		struct { struct madvx_release_opts o; uint64_t tail; } big = {
			.o = { .size = sizeof(big) }, .tail = 1 };

		ck_assert_int_eq(madvx_release_config(&big.o), -E2BIG);
		ck_assert_int_eq(madvx_release_config(&(struct madvx_release_opts){ .size = 4 }),
				 -EINVAL);
	}

	/* Errors of deferred flushes come back from madvx_release_flush(). */
	ck_assert_int_eq(munmap(rel_mem + 15 * pg, pg), 0);
	ck_assert_int_eq(madvx_release(rel_mem + 15 * pg, pg), 0);
	ck_assert_int_eq(madvx_release_flush(), -ENOMEM);
	munmap(rel_mem, 15 * pg);
}
END_TEST

START_TEST(process_stats_add_up)
{
	struct madvx_stats before = { .size = sizeof(before) }, after = { .size = sizeof(after) };
	uint8_t *p = test_map_filled(4, 1);
	struct madvx_batch *b;

	ck_assert_int_eq(madvx_stats_get(&before), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	madvx_batch_add(b, p, 2 * test_page(), MADV_DONTNEED);
	madvx_batch_add(b, p + 2 * test_page(), 2 * test_page(), MADV_DONTNEED);
	ck_assert_int_eq(madvx_batch_flush(b), 0);
	ck_assert_int_eq(madvx_stats_get(&after), 0);
	ck_assert_uint_eq(after.hints - before.hints, 2);
	ck_assert_uint_eq(after.merged - before.merged, 1);
	ck_assert_uint_eq(after.bytes - before.bytes, 4 * test_page());
	ck_assert_uint_eq(after.flushes - before.flushes, 1);
	ck_assert_int_eq(madvx_stats_get(NULL), -EINVAL);
	madvx_batch_free(b);
	munmap(p, 4 * test_page());
}
END_TEST

/* Make process_madvise() fail with @err from now on (seccomp, this process). */
static void deny_process_madvise(int err)
{
	if (test_deny_syscall(__NR_process_madvise, err))
		_exit(70);
}

/* Four separate hints, flushed; returns the batch's syscall count. */
static uint64_t flush_four(void)
{
	struct madvx_stats st = { .size = sizeof(st) };
	size_t pg = test_page();
	uint8_t *p = test_map_filled(8, 5);
	struct madvx_batch *b;

	if (madvx_batch_create(NULL, &b))
		_exit(71);
	for (int i = 0; i < 8; i += 2)
		madvx_batch_add(b, p + i * pg, pg, MADV_DONTNEED);
	if (madvx_batch_flush(b))
		_exit(72);
	for (int i = 0; i < 8; i++)
		if (test_page_zero(p + i * pg) != (i % 2 == 0))
			_exit(73);
	madvx_batch_stats(b, &st);
	madvx_batch_free(b);
	munmap(p, 8 * pg);
	return st.syscalls;
}

static void runtime_rejection(int err)
{
	struct madvx_stats st = { .size = sizeof(st) };

	if (!test_self_pmadv(MADV_DONTNEED, "a run-time refusal of process_madvise()"))
		return;		/* nothing to take away */
	deny_process_madvise(err);
	/* First flush: one refused vector call, then madvise() for each entry. */
	if (flush_four() < 4)
		_exit(74);
	/* Decided once: the next flush goes straight to madvise(). */
	if (flush_four() != 4)
		_exit(75);
	madvx_stats_get(&st);
	if (st.madvise_fallbacks < 8)
		_exit(76);
}

static void rejection_enosys(void)
{
	runtime_rejection(ENOSYS);
}

static void rejection_eperm(void)
{
	runtime_rejection(EPERM);
}

START_TEST(process_madvise_refused_at_run_time)
{
	test_in_child(NULL, rejection_enosys);
	test_in_child(NULL, rejection_eperm);
}
END_TEST

START_TEST(advice_index_table_is_consistent)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	for (int i = 0; i < n; i++)
		ck_assert_int_eq(madvx_advice_index(adv[i]), i);
	ck_assert_int_eq(madvx_advice_index(5), -1);
	ck_assert_int_eq(madvx_advice_index(104), -1);
}
END_TEST

/*
 * One batch reused across flushes while the layout changes between them
 * (issue 20: the VMA cache outlives a flush). Twin areas, the same layout
 * changes to both, then the same hints: the batch on one, madvise() of each
 * hint alone on the other. Every answer and every page must agree: a stale
 * VMA may cost a look-up or a slow entry, never an answer. A hole the cache
 * saw in an earlier flush and that is mapped now is the case to catch.
 */
#define XF_PAGES 48

static void xf_change(uint8_t *p, int kind, int pg0, int npg)
{
	size_t pg = test_page();

	switch (kind) {
	case 0:		/* split or merge a VMA */
		mprotect(p + pg0 * pg, npg * pg, rnd(2) ? PROT_READ : PROT_READ | PROT_WRITE);
		break;
	case 1:		/* a new hole */
		munmap(p + pg0 * pg, npg * pg);
		break;
	default:	/* fill a hole (or replace pages): a mapping where there was none */
		mmap(p + pg0 * pg, npg * pg, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		memset(p + pg0 * pg, 0x77 + pg0, npg * pg);
		break;
	}
}

START_TEST(vma_cache_across_flushes)
{
	static const int adv[] = { MADV_DONTNEED, MADV_FREE, MADV_WILLNEED, MADV_COLD,
				   MADV_POPULATE_READ };
	size_t pg = test_page();
	uint8_t *a = test_map_filled(XF_PAGES, 9), *b = test_map_filled(XF_PAGES, 9);
	struct madvx_stats st = { .size = sizeof(st) };
	struct madvx_batch *bt;
	uint64_t queries = 0;

	rng = 0x5eed5eedULL;
	ck_assert_int_eq(madvx_batch_create(NULL, &bt), 0);
	for (int round = 0; round < 300; round++) {
		int n = 1 + (int)rnd(8), want[8], first = 0;
		const struct madvx_hint *r;
		uint32_t nr;

		if (round % 3 == 0) {
			int kind = (int)rnd(3), pg0 = (int)rnd(XF_PAGES - 4), npg = 1 + (int)rnd(4);

			xf_change(a, kind, pg0, npg);
			xf_change(b, kind, pg0, npg);
		}
		for (int i = 0; i < n; i++) {
			int pg0 = (int)rnd(XF_PAGES - 1), npg = 1 + (int)rnd(XF_PAGES - pg0);
			int ad = adv[rnd(ARRAY_SIZE(adv))];

			ck_assert_int_eq(madvx_batch_add(bt, a + pg0 * pg, npg * pg, ad), i);
			want[i] = madvise(b + pg0 * pg, npg * pg, ad) ? -errno : 0;
			if (want[i] && !first)
				first = want[i];
		}
		ck_assert_int_eq(madvx_batch_flush(bt), first);
		r = madvx_batch_results(bt, &nr);
		ck_assert_uint_eq(nr, (uint32_t)n);
		for (int i = 0; i < n; i++)
			ck_assert_msg(r[i].err == want[i], "round %d hint %d: err %d, madvise %d",
				      round, i, r[i].err, want[i]);
		for (int i = 0; i < XF_PAGES; i++) {
			unsigned char va, vb;
			int ra = mincore(a + i * pg, pg, &va), rb = mincore(b + i * pg, pg, &vb);

			ck_assert_int_eq(ra, rb);
			if (ra)
				continue;	/* a hole in both */
			ck_assert_msg((va & 1) == (vb & 1), "round %d page %d: residency", round, i);
			ck_assert_msg(!memcmp(a + i * pg, b + i * pg, pg),
					      "round %d page %d: contents", round, i);
		}
	}
	ck_assert_int_eq(madvx_batch_stats(bt, &st), 0);
	queries = st.vma_queries;
	printf("vma cache across 300 flushes: %llu look-ups for %llu hints\n",
	       (unsigned long long)queries, (unsigned long long)st.hints);
	madvx_batch_free(bt);
	munmap(a, XF_PAGES * pg);
	munmap(b, XF_PAGES * pg);
}
END_TEST

/*
 * One-hint flushes (plan.c, guess_one_vma()): after 8 whose hint lay in one
 * VMA, the process plans the next ones without a look-up (vma_skipped),
 * looks one up again every 17th, and starts over when a looked-up hint
 * crosses VMAs or meets a hole, or the kernel refuses an entry. A guessed
 * hint that does cross is still applied whole (the kernel walks it): its
 * pages are gone, the result is madvise()'s. The rule is process-wide: the
 * test starts with a lone hint on a hole, which ends any earlier streak
 * (looked up: a hole; guessed: the kernel's ENOMEM). Where DONTNEED takes
 * mmap_lock anyway (before 6.17, or without CONFIG_PER_VMA_LOCK), nothing
 * is guessed.
 */
static void one_hint_flush(struct madvx_batch *bt, uint8_t *addr, size_t len)
{
	size_t pg = test_page();

	for (size_t off = 0; off < len; off += pg)
		ck_assert_int_eq(test_resident(addr + off), 1);
	ck_assert_int_ge(madvx_batch_add(bt, addr, len, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), 0);
	for (size_t off = 0; off < len; off += pg)
		ck_assert_int_eq(test_resident(addr + off), 0);
}

static uint64_t skipped_of(struct madvx_batch *bt)
{
	struct madvx_stats st = { .size = sizeof(st) };

	ck_assert_int_eq(madvx_batch_stats(bt, &st), 0);
	return st.vma_skipped;
}

START_TEST(one_hint_flushes_learn_one_vma)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(64, 1);
	struct madvx_batch *bt;
	/* Only where DONTNEED can keep the per-VMA lock: else a look-up buys nothing. */
	uint64_t guessed = madvx_advice_lock(MADV_DONTNEED) == MADVX_LOCK_PER_VMA ? 16 : 0;
	uint64_t before;
	void *hole;
	int i;

	/* Two VMAs: [0, 32) read-write, [32, 64) read-only; a hole above. */
	ck_assert_int_eq(mprotect(p + 32 * pg, 32 * pg, PROT_READ), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &bt), 0);
	hole = mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(hole, MAP_FAILED);
	ck_assert_int_eq(munmap(hole, pg), 0);
	ck_assert_int_eq(madvx_batch_add(bt, hole, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), -ENOMEM);
	before = skipped_of(bt);
	for (i = 0; i < 8; i++) {
		p[i * pg] = 2;
		one_hint_flush(bt, p + i * pg, pg);
	}
	ck_assert_uint_eq(skipped_of(bt), before);
	/* Guessed: the 16 after the streak; one of them crosses. */
	for (i = 0; i < 15; i++) {
		p[i * pg] = 2;
		one_hint_flush(bt, p + i * pg, pg);
	}
	p[31 * pg] = 2;
	(void)*(volatile uint8_t *)(p + 32 * pg);	/* read fault: the zero page */
	ck_assert_int_eq(madvx_batch_add(bt, p + 31 * pg, 2 * pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), 0);
	ck_assert_int_eq(test_resident(p + 31 * pg), 0);
	ck_assert_uint_eq(skipped_of(bt), before + guessed);
	/* The 17th is looked up: it crosses, so the streak starts over. */
	p[31 * pg] = 2;
	ck_assert_int_eq(madvx_batch_add(bt, p + 31 * pg, 2 * pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), 0);
	ck_assert_int_eq(test_resident(p + 31 * pg), 0);
	ck_assert_uint_eq(skipped_of(bt), before + guessed);
	before = skipped_of(bt);
	for (i = 0; i < 8; i++) {
		p[i * pg] = 2;
		one_hint_flush(bt, p + i * pg, pg);
	}
	ck_assert_uint_eq(skipped_of(bt), before);
	p[0] = 2;
	one_hint_flush(bt, p, pg);
	ck_assert_uint_eq(skipped_of(bt), before + (guessed ? 1 : 0));
	before = skipped_of(bt);

	/*
	 * A guessed lone hint over a page and a hole gets madvise()'s own
	 * answer for it (twin layout, madvise() itself), and the refusal ends
	 * the guessing: the next lone hint is looked up.
	 */
	{
		uint8_t *q = test_map_filled(2, 3), *r = test_map_filled(2, 3);
		const struct madvx_hint *res;
		uint32_t n;
		int want;

		ck_assert_int_eq(munmap(q + pg, pg), 0);
		ck_assert_int_eq(munmap(r + pg, pg), 0);
		want = madvise(r, 2 * pg, MADV_DONTNEED) ? -errno : 0;
		ck_assert_int_eq(madvx_batch_add(bt, q, 2 * pg, MADV_DONTNEED), 0);
		ck_assert_int_eq(madvx_batch_flush(bt), want);
		res = madvx_batch_results(bt, &n);
		ck_assert_ptr_nonnull(res);
		ck_assert_uint_eq(n, 1);
		ck_assert_int_eq(res[0].err, want);
		ck_assert_uint_eq(res[0].done, pg);
		ck_assert_int_eq(test_resident(q), test_resident(r));
		ck_assert_uint_eq(skipped_of(bt), before + (guessed ? 1 : 0));
		before = skipped_of(bt);
		p[0] = 2;
		one_hint_flush(bt, p, pg);
		ck_assert_uint_eq(skipped_of(bt), before);
		munmap(q, pg);
		munmap(r, pg);
	}
	madvx_batch_free(bt);
	munmap(p, 64 * pg);
}
END_TEST

/* The same hints flushed again on an unchanged layout: no look-up at all. */
START_TEST(vma_cache_serves_the_next_flush)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(64, 1);
	struct madvx_stats s1 = { .size = sizeof(s1) }, s2 = { .size = sizeof(s2) };
	struct madvx_batch *bt;

	if (!madvx_has(MADVX_FEAT_PROCMAP_QUERY) && !madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY))
		printf("no PROCMAP_QUERY: /proc/self/maps fills the cache\n");
	/* Four VMAs. */
	ck_assert_int_eq(mprotect(p + 16 * pg, 16 * pg, PROT_READ), 0);
	ck_assert_int_eq(mprotect(p + 48 * pg, 8 * pg, PROT_READ), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &bt), 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 64; i += 2)
			ck_assert_int_ge(madvx_batch_add(bt, p + i * pg, pg, MADV_DONTNEED), 0);
		ck_assert_int_eq(madvx_batch_flush(bt), 0);
		ck_assert_int_eq(madvx_batch_stats(bt, round ? &s2 : &s1), 0);
	}
	for (int i = 0; i < 64; i += 2)
		ck_assert_int_eq(test_resident(p + i * pg), 0);
	ck_assert_uint_gt(s1.vma_queries, 0);
	ck_assert_uint_eq(s2.vma_queries, s1.vma_queries);
	madvx_batch_free(bt);
	munmap(p, 64 * pg);
}
END_TEST

/* A hole seen by one flush, mapped before the next: the kernel's answer wins. */
START_TEST(vma_cache_forgets_holes)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(8, 4);
	const struct madvx_hint *r;
	struct madvx_batch *bt;
	uint32_t n;

	ck_assert_int_eq(munmap(p + 3 * pg, pg), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &bt), 0);
	ck_assert_int_eq(madvx_batch_add(bt, p + 2 * pg, 3 * pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), -ENOMEM);
	ck_assert_ptr_eq(mmap(p + 3 * pg, pg, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), p + 3 * pg);
	p[3 * pg] = 1;
	ck_assert_int_eq(madvx_batch_add(bt, p + 3 * pg, pg, MADV_DONTNEED), 0);
	ck_assert_int_eq(madvx_batch_flush(bt), 0);
	r = madvx_batch_results(bt, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(r[0].err, 0);
	ck_assert_uint_eq(r[0].done, pg);
	ck_assert_int_eq(test_resident(p + 3 * pg), 0);
	madvx_batch_free(bt);
	munmap(p, 8 * pg);
}
END_TEST

/*
 * A handler that releases memory (a GC stopping threads with signals):
 * add + flush on its own batch while the interrupted thread is inside
 * add/flush of another batch, signals from a second thread as fast as it
 * can send them. Both sides' pages must end zapped, every result exact.
 */
static struct madvx_batch *sig_batch;
static uint8_t *sig_mem;
static _Atomic int sig_runs, sig_bad;

static void release_in_handler(int sig)
{
	size_t pg = test_page();
	int e = errno, slot = atomic_fetch_add(&sig_runs, 1) % 32;

	(void)sig;
	sig_mem[slot * pg] = 1;
	if (madvx_batch_add(sig_batch, sig_mem + slot * pg, pg, MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(sig_batch) || test_resident(sig_mem + slot * pg) != 0)
		atomic_fetch_add(&sig_bad, 1);
	if (errno != e)
		atomic_fetch_add(&sig_bad, 1);
}

static _Atomic bool sig_stop;

static void *signal_sender(void *arg)
{
	pthread_t target = *(pthread_t *)arg;

	while (!atomic_load(&sig_stop)) {
		pthread_kill(target, SIGUSR1);
		usleep(50);
	}
	return NULL;
}

START_TEST(signal_handler_flushes)
{
	size_t pg = test_page();
	uint8_t *mine = test_map_filled(64, 5);
	struct sigaction sa = { .sa_handler = release_in_handler };
	struct madvx_batch *b;
	pthread_t self = pthread_self(), t;

	sig_mem = test_map_filled(32, 6);
	ck_assert_int_eq(madvx_batch_create(NULL, &sig_batch), 0);
	ck_assert_int_eq(madvx_batch_create(NULL, &b), 0);
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, signal_sender, &self), 0);
	for (int round = 0; round < 2000; round++) {
		int k = round % 64;

		mine[k * pg] = 7;
		ck_assert_int_eq(madvx_batch_add(b, mine + k * pg, pg, MADV_DONTNEED), 0);
		ck_assert_int_eq(madvx_batch_add(b, mine + ((k + 1) % 64) * pg, pg, MADV_DONTNEED), 1);
		ck_assert_int_eq(madvx_batch_flush(b), 0);
		ck_assert_int_eq(test_resident(mine + k * pg), 0);
		ck_assert_int_eq(mine[k * pg], 0);
	}
	atomic_store(&sig_stop, true);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	signal(SIGUSR1, SIG_DFL);
	printf("signal handler: %d add + flush inside a handler, %d wrong\n",
	       atomic_load(&sig_runs), atomic_load(&sig_bad));
	ck_assert_int_gt(atomic_load(&sig_runs), 0);
	ck_assert_int_eq(atomic_load(&sig_bad), 0);
	madvx_batch_free(b);
	madvx_batch_free(sig_batch);
	munmap(mine, 64 * pg);
	munmap(sig_mem, 32 * pg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("batch");
	TCase *oracle = tcase_create("oracle");
	TCase *api = tcase_create("api");

	tcase_set_timeout(oracle, 600);
	tcase_add_test(oracle, oracle_matches_madvise_loop);
	tcase_add_test(oracle, oracle_without_process_madvise);
	tcase_add_test(oracle, oracle_without_procmap_query);
	tcase_add_test(oracle, oracle_without_pidfd_self);
	tcase_add_test(oracle, oracle_old_kernel);
	tcase_add_test(oracle, oracle_no_vector_flag);
	tcase_add_test(oracle, oracle_hints_added_in_order);
	suite_add_tcase(s, oracle);

	tcase_set_timeout(api, 60);
	tcase_add_test(api, order_between_advices_is_kept);
	tcase_add_test(api, plan_merges_and_splits);
	tcase_add_test(api, cancel_takes_ranges_out);
	tcase_add_loop_test(api, cancel_matches_a_madvise_model, 0, 4);
	tcase_add_loop_test(api, cancel_across_fork_kinds, TEST_FORK, TEST_CLONE_RAW + 1);
	tcase_add_test(api, bad_input_is_rejected_like_madvise);
	tcase_add_test(api, full_batch_enospc_or_autoflush);
	tcase_add_test(api, autoflush_failures_are_reported);
	tcase_add_test(api, caller_storage);
	tcase_add_test(api, fresh_batch_first_flush_pages);
	tcase_add_test(api, caller_storage_create_clears_the_head_only);
	tcase_add_test(api, autoflush_results_reach_on_result);
	tcase_add_test(api, capacity_is_checked_not_truncated);
	tcase_add_test(api, fork_child_advises_itself);
	tcase_add_test(api, threads_with_concurrent_mmap);
	tcase_add_test(api, uffd_region_entries_go_apart);
	tcase_add_test(api, uffd_region_plain_follows_probe);
	tcase_add_test(api, release_flush_policy);
	tcase_add_test(api, process_stats_add_up);
	tcase_add_test(api, advice_index_table_is_consistent);
	tcase_add_test(api, process_madvise_refused_at_run_time);
	tcase_add_test(api, vma_cache_across_flushes);
	tcase_add_test(api, vma_cache_serves_the_next_flush);
	tcase_add_test(api, one_hint_flushes_learn_one_vma);
	tcase_add_test(api, vma_cache_forgets_holes);
	tcase_add_test(api, signal_handler_flushes);
	suite_add_tcase(s, api);
	return test_run_suite(s);
}
