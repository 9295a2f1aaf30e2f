// SPDX-License-Identifier: MIT
/*
 * Planning: turn one epoch of hints into kernel entries that each lie in one
 * VMA. Sort by (lock class, advice, address), merge overlapping or adjacent
 * hints of one advice into runs, cut runs at VMA boundaries, and hand each
 * advice's entries to issue.c in chunks.
 *
 * The plan decides speed only. Every bound it uses may be stale (a region
 * claim, a cached VMA): the kernel's answer for each entry decides the
 * results (issue.c), so a wrong bound costs a fallback or a retry, never a
 * wrong result. What the plan must get right is ORDER: madvise() of a hint
 * walks its VMAs in address order and stops at the first that refuses, so
 * the pieces of one run are issued in address order, and a run's pieces
 * after one that is predicted to fall back are all issued with the
 * fallback entries (after the fast-path ones), never before it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "advice.h"
#include "issue.h"
#include "plan.h"

/* 0: per-VMA fast path, 1: mmap_read_lock, 2: mmap_write_lock; per advice index. */
_Atomic uint8_t __madvx_lock_classes[64];
static struct madvx_once lock_classes_once = MADVX_ONCE_INIT;

static uint8_t lock_class_of(int i)
{
	enum madvx_lock l = __madvx_advice_lock_at(i);

	return l == MADVX_LOCK_PER_VMA ? 0 : l == MADVX_LOCK_MMAP_READ ? 1 : 2;
}

/*
 * Every class but those that need the per-boot cache: a process that never
 * adds a COLD or PAGEOUT hint never opens it (probe.c, plan_features_read()).
 */
MADVX_HOT static void init_lock_classes(void)
{
	for (int i = 0; i < (int)__madvx_nadvices && i < 64; i++)
		atomic_store_explicit(&__madvx_lock_classes[i],
				      __madvx_advice_lock_measured(i) ? LOCK_CLASS_LATER :
				      lock_class_of(i), memory_order_relaxed);
}

/*
 * On an add (maybe in a signal handler: lock-free). The cache's answer is
 * decided once per process, so racing callers store the same class, and
 * every hint of the advice gets its key after the class is known.
 */
uint8_t __madvx_lock_class_decide(int adv_idx)
{
	uint8_t c = lock_class_of(adv_idx);

	atomic_store_explicit(&__madvx_lock_classes[adv_idx], c, memory_order_relaxed);
	return c;
}

MADVX_HOT void __madvx_plan_init(void)
{
	madvx_once(&lock_classes_once, init_lock_classes);
}

/* ---- sorting without malloc: LSD radix sort over the bits that differ ---- */

/*
 * @differ: the key bits that are not the same in every item. Only the span
 * from its lowest to its highest set bit is sorted, in as few passes as
 * digits of at most b->radix_bits cover it, and digits no wider than about
 * 4n counters (clearing them must not cost more than sorting n items): the
 * hints of one arena usually take one pass (65536 hints scattered over 512
 * MiB: 17 bits).
 */
static void radix_sort(struct madvx_batch *b, struct sort_item *in, struct sort_item *out,
		       uint32_t n, uint64_t differ)
{
	struct sort_item *src = in, *dst = out;
	uint32_t *count = b->radix_count, max_bits = 6;
	int lo, span, passes, bits;

	if (!differ) {
		memcpy(out, in, n * sizeof(*in));
		return;
	}
	while (max_bits < b->radix_bits && (1U << (max_bits - 2)) < n)
		max_bits++;
	lo = __builtin_ctzll(differ);
	span = 64 - __builtin_clzll(differ) - lo;
	passes = (span + (int)max_bits - 1) / (int)max_bits;
	bits = (span + passes - 1) / passes;
	for (int p = 0; p < passes; p++) {
		int shift = lo + p * bits;
		uint64_t mask = (1ULL << bits) - 1;
		uint32_t sum = 0;
		struct sort_item *t;

		memset(count, 0, sizeof(uint32_t) << bits);
		for (uint32_t i = 0; i < n; i++)
			count[(src[i].key >> shift) & mask]++;
		for (uint32_t v = 0; v < (1U << bits); v++) {
			uint32_t k = count[v];

			count[v] = sum;
			sum += k;
		}
		for (uint32_t i = 0; i < n; i++)
			dst[count[(src[i].key >> shift) & mask]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	/* One pass, the usual case, ends in @out already. */
	if (src != out)
		memcpy(out, src, n * sizeof(*out));
}

/*
 * What planning reads of the hint at position @k. In a sorted epoch it comes
 * from the sort item alone (start and advice are in the key, the length in
 * pages beside it), so the planner streams through sorted[] instead of
 * visiting the hint records in random order, a cache miss per hint.
 */
#define KEY_PAGE_MASK ((1ULL << 52) - 1)

static inline uint64_t pos_start(const struct madvx_batch *b, bool via, uint32_t k)
{
	return via ? (b->sorted[k].key & KEY_PAGE_MASK) << 12 : b->hints[k].start;
}

static inline uint64_t pos_end(const struct madvx_batch *b, bool via, uint32_t k)
{
	const struct sort_item *s;

	if (!via)
		return b->hints[k].end;
	s = &b->sorted[k];
	if (likely(s->pages != UINT32_MAX))
		return ((s->key & KEY_PAGE_MASK) << 12) + ((uint64_t)s->pages << 12);
	return b->hints[s->idx].end;
}

static inline int pos_adv_idx(const struct madvx_batch *b, bool via, uint32_t k)
{
	return via ? (int)((b->sorted[k].key >> 52) & 31) : b->hints[k].adv_idx;
}

static inline bool pos_vouched(const struct madvx_batch *b, bool via, uint32_t k)
{
	return via ? (b->sorted[k].key >> KEY_VOUCHED_SHIFT) & 1 :
		     b->hints[k].flags & HINT_ONE_VMA;
}

/* Order the epoch [from, to) for planning; nothing to do when added in order. */
static void sort_epoch(struct madvx_batch *b, uint32_t from, uint32_t to)
{
	struct sort_item *s = b->scratch + from;
	uint32_t n = to - from;
	uint64_t ones = 0, zeros = ~0ULL;

	b->use_sorted = b->hints[from].flags & HINT_EPOCH_UNSORTED;
	if (!b->use_sorted)
		return;
	/* The adds wrote the items (batch.c track_order()); only their key bits are needed. */
	for (uint32_t i = 0; i < n; i++) {
		ones |= s[i].key;
		zeros &= s[i].key;
	}
	radix_sort(b, s, b->sorted + from, n, ones ^ zeros);
}

/* ---- planning ---- */

struct planner {
	struct madvx_batch *b;
	int advice;
	bool vouched;		/* MADVX_HINT_ONE_VMA hints: no look-ups */
	bool fast_advice;	/* the advice can run under the per-VMA lock */
	struct madvx_entry *e;	/* b->few, then b->entries */
	uint32_t room;		/* of @e */
	uint32_t n;		/* entries planned, not yet issued */
	struct madvx_vma last;	/* the VMA of the previous run: runs come in address order */
};

static int planner_vma(struct planner *pl, uint64_t addr, struct madvx_vma *v)
{
	int ret;

	if (addr >= pl->last.start && addr < pl->last.end) {
		*v = pl->last;
		return 0;
	}
	ret = madvx_batch_vma(pl->b, addr, v, false);
	if (!ret && v->start <= addr)
		pl->last = *v;
	return ret;
}

/*
 * Does madvise fall back to mmap_lock on @v (known to hold the range)? On a
 * uffd VMA without EVENT_REMOVE only a kernel with the series' per-VMA uffd
 * patch keeps the per-VMA lock: asked here, where one comes, so that plans
 * without one never read the per-boot cache.
 */
static bool vma_forces_fallback(const struct madvx_vma *v)
{
	return v->uffd && (v->uffd_remove || !__madvx_plan_feature(MADVX_FEAT_PER_VMA_UFFD));
}

MADVX_HOT static void plan_entry(struct planner *pl, uint64_t start, uint64_t end,
				 uint32_t first, uint32_t last, bool fallback)
{
	struct madvx_entry *e;

	if (pl->n == pl->room) {
		if (pl->e == pl->b->few) {
			/* Outgrown the head: go on in entries[], as one chunk. */
			memcpy(pl->b->entries, pl->e, pl->n * sizeof(*e));
			pl->e = pl->b->entries;
			pl->room = MADVX_PLAN_CHUNK;
		} else {
			__madvx_issue_planned(pl->b, pl->advice, pl->e, pl->n);
			pl->n = 0;
		}
	}
	e = &pl->e[pl->n++];
	*e = (struct madvx_entry){
		.start = start, .len = end - start, .first = first, .last = last,
		.fallback = fallback, .via_sorted = pl->b->use_sorted,
	};
	if (e->fallback)
		pl->b->st.fallback_entries++;
}

/*
 * The hints of a run (sorted by start) that can overlap [cur, pend): @lo
 * skips hints while all hints up to it end at or before @cur (running
 * maximum @m of their ends), @hi extends over hints starting before @pend.
 * Both only move forward as the run is cut, so a run costs O(hints + pieces).
 */
struct run_window {
	uint32_t lo, hi, last;
	uint64_t m;
};

static void narrow(const struct madvx_batch *b, struct run_window *w,
		   uint64_t cur, uint64_t pend)
{
	while (w->hi < w->last && pos_start(b, b->use_sorted, w->hi + 1) < pend)
		w->hi++;
	while (w->lo < w->hi && w->m <= cur) {
		uint64_t e = pos_end(b, b->use_sorted, ++w->lo);

		if (e > w->m)
			w->m = e;
	}
}

/* The furthest end of the hints in @w (and @at_least): for fallback pieces only. */
static uint64_t window_end(const struct madvx_batch *b, const struct run_window *w,
			   uint64_t at_least)
{
	for (uint32_t k = w->lo; k <= w->hi; k++) {
		uint64_t e = pos_end(b, b->use_sorted, k);

		if (e > at_least)
			at_least = e;
	}
	return at_least;
}

/*
 * A flush of ONE hint gains nothing from a look-up unless the hint crosses
 * VMAs: then its pieces keep the per-VMA lock, where madvise() would walk
 * them under mmap_read_lock. Each look-up is a system call, and a client
 * that flushes single hints (an allocator purging one span at a time)
 * would pay two calls where madvise() costs one. So the process learns:
 * after GUESS_AFTER one-hint flushes in a row whose hint lay in one VMA,
 * the next ones are planned as one entry without a look-up - the library
 * vouches for the hint as a caller would with MADVX_HINT_ONE_VMA, counted
 * in vma_skipped - and every (GUESS_RECHECK + 1)-th is looked up again, as
 * is every one after a hint that crossed, met a hole, or after a flush the
 * kernel refused an entry of. A wrong guess costs what madvise() of that
 * hint costs (mmap_read_lock), never a result: the kernel's answer decides.
 *
 * The process's very first lone hint is guessed too, before any evidence:
 * its look-up would be the process's first open of /proc/self/maps
 * (35-80 us in a fresh process on the PVM host, where procfs instantiates
 * the process's directory; 4 us after) plus the PROCMAP_QUERY ioctl, paid by
 * every short-lived process that flushes once - for at most one hint that
 * takes mmap_read_lock as its madvise() would. Learning starts with the
 * second.
 *
 * Process-wide, not per batch: allocators keep a batch per thread, and
 * threads come and go (larson, mimalloc's thread-local batches); the
 * evidence is about how this process's memory is laid out. Relaxed atomics:
 * a race costs one guess more or less.
 */
#define GUESS_AFTER 8
#define GUESS_RECHECK 16

static _Atomic uint32_t one_vma_streak;	/* lone hints in a row found in one VMA */
static _Atomic uint32_t guesses;	/* lone hints guessed since the last look-up */
static _Atomic bool first_lone_seen;	/* the first lone hint was planned */

static bool guess_one_vma(void)
{
	if (!atomic_load_explicit(&first_lone_seen, memory_order_relaxed) &&
	    !atomic_exchange_explicit(&first_lone_seen, true, memory_order_relaxed))
		return true;
	if (atomic_load_explicit(&one_vma_streak, memory_order_relaxed) < GUESS_AFTER)
		return false;
	if (atomic_fetch_add_explicit(&guesses, 1, memory_order_relaxed) < GUESS_RECHECK)
		return true;
	atomic_store_explicit(&guesses, 0, memory_order_relaxed);
	return false;
}

static void learn_one_vma(bool one_vma)
{
	if (!one_vma)
		__madvx_plan_forget_guess();
	else if (atomic_load_explicit(&one_vma_streak, memory_order_relaxed) < GUESS_AFTER)
		atomic_fetch_add_explicit(&one_vma_streak, 1, memory_order_relaxed);
}

void __madvx_plan_forget_guess(void)
{
	atomic_store_explicit(&first_lone_seen, true, memory_order_relaxed);
	atomic_store_explicit(&one_vma_streak, 0, memory_order_relaxed);
	atomic_store_explicit(&guesses, 0, memory_order_relaxed);
}

/*
 * Cut the run [start, end) (hints at positions first..last) at VMA
 * boundaries. Unmapped parts are credited to the hints covering them, and
 * the mapped parts are still advised, as madvise() does.
 */
static void plan_run(struct planner *pl, uint64_t start, uint64_t end,
		     uint32_t first, uint32_t last)
{
	struct madvx_batch *b = pl->b;
	struct run_window w = {
		first, first, last, pos_end(b, b->use_sorted, first),
	};
	bool slow_advice = !pl->fast_advice;
	/* The flush's only hint, on its way to the per-VMA lock: see guess_one_vma(). */
	bool alone = b->count == 1 && !b->target && pl->fast_advice;
	uint64_t cur = start, fb_end = 0;
	uint32_t pieces = 0, holes = 0;

	if (b->whole_runs) {
		plan_entry(pl, start, end, first, last, slow_advice);
		return;
	}
	if (pl->vouched || (alone && guess_one_vma())) {
		/* Wrong or not, the kernel's answer decides (see plan_group()). */
		plan_entry(pl, start, end, first, last, slow_advice);
		b->st.vma_skipped++;
		return;
	}
	while (cur < end) {
		struct madvx_vma v;
		int ret = planner_vma(pl, cur, &v);
		uint64_t pend;

		if (ret == -ENOENT || (ret == 0 && v.start >= end)) {
			narrow(b, &w, cur, end);
			__madvx_credit_hole(b, pl->advice, b->use_sorted, w.lo, w.hi, cur, end - cur);
			holes++;
			break;
		}
		if (ret) {
			/* No source of bounds: let the kernel walk the VMAs. */
			narrow(b, &w, cur, end);
			plan_entry(pl, cur, end, w.lo, w.hi, true);
			pieces++;
			break;
		}
		if (v.start > cur) {
			narrow(b, &w, cur, v.start);
			__madvx_credit_hole(b, pl->advice, b->use_sorted, w.lo, w.hi, cur,
					  v.start - cur);
			holes++;
			cur = v.start;
		}
		pend = v.end < end ? v.end : end;
		narrow(b, &w, cur, pend);
		/*
		 * A hint's pieces must go in address order: a piece that
		 * continues a hint of an earlier fallback piece falls back too
		 * (fallback entries are issued after the fast ones).
		 */
		if (!slow_advice && (cur < fb_end || vma_forces_fallback(&v))) {
			fb_end = window_end(b, &w, fb_end);
			plan_entry(pl, cur, pend, w.lo, w.hi, true);
		} else {
			plan_entry(pl, cur, pend, w.lo, w.hi, slow_advice);
		}
		pieces++;
		cur = v.end;
	}
	if (pieces > 1)
		b->st.split += pieces - 1;
	if (alone)
		learn_one_vma(pieces == 1 && !holes);
}

/*
 * Plan positions [from, to): all of one advice, all vouched for or none.
 *
 * Vouched hints (MADVX_HINT_ONE_VMA) are a per-hint flag rather than a
 * batch flag or a region kind: a region needs a table entry (the table is
 * bounded, a GC has hundreds of heap sections), and a batch flag is all or
 * nothing where a client knows it per range (bdwgc: a block lies in one
 * VMA only while no mprotect() split its heap section). They are planned
 * without a look-up, one entry per run, and merged only where they
 * overlap: two ranges that each lie in one VMA and share a page lie in the
 * same one, two that merely touch may not. Their groups sort after all
 * looked-up ones (madvx_sort_key()), so they reach the kernel in calls of
 * their own, last: a wrong vouch makes the kernel walk that entry under
 * mmap_read_lock, and vector_madvise() keeps that lock for the rest of its
 * call, which then holds vouched entries only. Results need nothing
 * special: an entry the kernel refuses (a hole, a VMA that refuses the
 * advice) is resolved on the kernel's bounds like any other (issue.c).
 */
static void plan_group(struct madvx_batch *b, int advice, bool vouched, uint32_t from,
		       uint32_t to)
{
	struct planner pl = {
		.b = b, .advice = advice, .vouched = vouched,
		/* A remote process_madvise() always takes the target's mmap_lock. */
		.fast_advice = !b->target && madvx_advice_lock(advice) == MADVX_LOCK_PER_VMA,
		.e = b->few, .room = MADVX_FEW_ENTRIES,
	};
	bool via = b->use_sorted;
	uint32_t k = from;

	while (k < to) {
		uint64_t start = pos_start(b, via, k), end = pos_end(b, via, k);
		uint32_t first = k;

		if (start == end) {	/* zero length: done, nothing to do */
			k++;
			continue;
		}
		/* Grow the run over overlapping and adjacent hints. */
		for (k++; k < to; k++) {
			uint64_t gs = pos_start(b, via, k), ge;

			if (gs > end || (vouched && gs == end))
				break;
			ge = pos_end(b, via, k);
			if (ge > end)
				end = ge;
			b->st.merged++;
		}
		plan_run(&pl, start, end, first, k - 1);
	}
	if (pl.n)
		__madvx_issue_planned(b, advice, pl.e, pl.n);
}

MADVX_HOT void __madvx_plan_epoch(struct madvx_batch *b, uint32_t from, uint32_t to)
{
	uint32_t k = from;

	sort_epoch(b, from, to);
	while (k < to) {
		int adv_idx = pos_adv_idx(b, b->use_sorted, k);
		bool vouched = pos_vouched(b, b->use_sorted, k);
		int advice = __madvx_advice_at(adv_idx);
		uint32_t g = k;

		while (g < to && pos_adv_idx(b, b->use_sorted, g) == adv_idx &&
		       pos_vouched(b, b->use_sorted, g) == vouched)
			g++;
		plan_group(b, advice, vouched, k, g);
		k = g;
	}
}
