// SPDX-License-Identifier: MIT
/*
 * The batching engine's public half: collecting hints, the ordering rule
 * (epochs), flushing, results and counters. Planning is in plan.c, issuing
 * and the per-hint results in issue.c; include/madvx.h has the contract.
 *
 * Flush = for each epoch (a run of hints in which no two hints of different
 * advices overlap): plan it (sort, merge into runs, cut at VMA boundaries)
 * and issue each advice's fast-path entries before its fallback entries.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "batch.h"
#include "issue.h"
#include "plan.h"

#define DEFAULT_CAPACITY 4096
#define EPOCH_SCAN_LIMIT 256	/* exact overlap scan bound, then cut an epoch */

/* ---- process-wide counters ---- */

static struct {
	_Atomic uint64_t hints, merged, split, flushes, syscalls, vector_entries,
		bytes, fallback_entries, madvise_fallbacks, vma_queries, retries,
		failed, errors[64], vma_skipped, cancelled;
} gstats;

/* ---- storage ---- */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The arrays every batch has, whatever its capacity: entries, spill, iov, spans. */
#define FIXED_ARRAYS (2 * MADVX_PLAN_CHUNK * sizeof(struct madvx_entry) + \
		      MADVX_MAX_VEC * sizeof(struct iovec) + \
		      MADVX_VMA_CACHE * sizeof(struct madvx_vma_span))

MADVX_HOT MADVX_API size_t madvx_batch_storage_size(size_t capacity)
{
	size_t sz = align_up(sizeof(struct madvx_batch), 64) + FIXED_ARRAYS;

	if (!capacity)
		capacity = DEFAULT_CAPACITY;
	if (capacity > MADVX_BATCH_MAX_CAPACITY)
		return 0;
	sz += capacity * (sizeof(struct hint_int) + sizeof(struct madvx_hint) +
			  2 * sizeof(struct sort_item));
	sz += sizeof(uint32_t) << madvx_radix_bits(capacity);
	return sz;
}

/*
 * hints[] first: hints[0], which every flush writes, shares the first page
 * with the head (see struct madvx_batch). Every array's size is a
 * multiple of 8 bytes: the VMA cache's spans, last, stay aligned.
 */
static void carve_storage(struct madvx_batch *b, char *base)
{
	char *p = base + align_up(sizeof(*b), 64);

	b->hints = (struct hint_int *)p;
	p += (size_t)b->capacity * sizeof(struct hint_int);
	b->entries = (struct madvx_entry *)p;
	p += MADVX_PLAN_CHUNK * sizeof(struct madvx_entry);
	b->spill = (struct madvx_entry *)p;
	p += MADVX_PLAN_CHUNK * sizeof(struct madvx_entry);
	b->iov = (struct iovec *)p;
	p += MADVX_MAX_VEC * sizeof(struct iovec);
	b->res = (struct madvx_hint *)p;
	p += (size_t)b->capacity * sizeof(struct madvx_hint);
	b->sorted = (struct sort_item *)p;
	p += (size_t)b->capacity * sizeof(struct sort_item);
	b->scratch = (struct sort_item *)p;
	p += (size_t)b->capacity * sizeof(struct sort_item);
	b->radix_bits = madvx_radix_bits(b->capacity);
	b->radix_count = (uint32_t *)p;
	p += sizeof(uint32_t) << b->radix_bits;
	madvx_vma_cache_init(&b->vmas, (struct madvx_vma_span *)p);
}

MADVX_HOT MADVX_API int madvx_batch_create(const struct madvx_batch_opts *opts,
					   struct madvx_batch **out)
{
	struct madvx_batch_opts o = { .size = sizeof(o) };
	struct madvx_batch *b;
	size_t need;
	void *mem;

	if (!out)
		return -EINVAL;
	if (opts) {
		int ret = madvx_opts_in(&o, sizeof(o), opts,
					offsetof(struct madvx_batch_opts, storage));

		if (ret)
			return ret;
	}
	if (!o.capacity)
		o.capacity = DEFAULT_CAPACITY;
	if (o.capacity > MADVX_BATCH_MAX_CAPACITY || o.__reserved0 ||
	    (o.flags & ~(MADVX_BATCH_AUTOFLUSH | MADVX_BATCH_NO_VECTOR)))
		return -EINVAL;
	/* Another process is reached through process_madvise() alone. */
	if (o.target && (o.flags & MADVX_BATCH_NO_VECTOR))
		return -EINVAL;
	need = madvx_batch_storage_size(o.capacity);
	if (o.storage) {
		if (o.storage_size < need)
			return -ENOSPC;
		if ((uintptr_t)o.storage & 63)
			return -EINVAL;
		mem = o.storage;
	} else {
		mem = __madvx_sys_mmap_anon(need);
		if (!mem)
			return -ENOMEM;
	}
	/* Decide the probe now, outside the caller's malloc paths. */
	__madvx_probe();
	__madvx_plan_init();

	b = mem;
	/*
	 * Fresh anonymous memory reads as zero already: clearing the head
	 * would fault its second page in on the first call for nothing.
	 */
	if (o.storage)
		memset(b, 0, sizeof(*b));
	b->capacity = (uint32_t)o.capacity;
	b->flags = o.flags;
	b->owns_storage = !o.storage;
	b->storage_size = need;
	b->on_error = o.on_error;
	b->on_error_ctx = o.on_error_ctx;
	b->on_result = o.on_result;
	b->on_result_ctx = o.on_result_ctx;
	b->target = o.target;
	b->st.size = sizeof(b->st);
	carve_storage(b, mem);
	*out = b;
	return 0;
}

MADVX_API void madvx_batch_free(struct madvx_batch *b)
{
	if (b && b->owns_storage)
		__madvx_sys_munmap(b, b->storage_size);
}

/* ---- adding hints: validation and the ordering rule ---- */

/*
 * Hints act beyond their pages: a populating fault maps its neighbours
 * (fault-around, a transparent huge page) and a zap or pageout splits or
 * takes a huge page, all within one page-table block (PMD: 2 MiB with
 * 4 KiB pages). So for ordering, a hint covers the PMD-aligned blocks it
 * touches: two hints of different advices in one block keep their order.
 * A populating hint keeps its order against every hint of its block, of
 * its own advice too: the size of the folio a fault allocates (mTHP, e.g.
 * hugepages-16kB "always") depends on which neighbouring PTEs earlier
 * faults mapped, so two POPULATE_WRITEs in one block, applied in the other
 * order, leave other pages resident (seen on a 6.18 host with 16 KiB mTHP).
 */
static bool faults_in(const struct hint_int *h)
{
	/* On every add: two loads from the index table, no call. */
	return h->adv_idx == madvx_advice_index(MADV_POPULATE_READ) ||
	       h->adv_idx == madvx_advice_index(MADV_POPULATE_WRITE);
}

static uint64_t block_lo(uint64_t addr)
{
	return addr & ~(madvx_pmd_size() - 1);
}

static uint64_t block_hi(uint64_t end)
{
	uint64_t blk = madvx_pmd_size();

	return end > UINT64_MAX - (blk - 1) ? UINT64_MAX : (end + blk - 1) & ~(blk - 1);
}

static bool hint_near_ordered_hint(const struct madvx_batch *b, const struct hint_int *h)
{
	uint64_t lo = block_lo(h->start), hi = block_hi(h->end);
	bool any = faults_in(h);

	for (uint32_t i = b->epoch_start; i < b->count; i++) {
		const struct hint_int *g = &b->hints[i];

		if ((any || g->adv_idx != h->adv_idx) && g->start != g->end &&
		    block_lo(g->start) < hi && lo < block_hi(g->end))
			return true;
	}
	return false;
}

/*
 * Hints of different advices that act on the same memory must keep their
 * order: such a hint starts a new epoch. The common cases cost O(1): one
 * advice so far, or no block shared with the epoch's bounding range. Past
 * EPOCH_SCAN_LIMIT hints the exact scan is skipped and the epoch is cut,
 * which is always safe.
 */
static void assign_epoch(struct madvx_batch *b, struct hint_int *h)
{
	uint64_t bit = 1ULL << h->adv_idx;
	/* The advices this hint must stay ordered against. */
	uint64_t ordered = faults_in(h) ? ~0ULL : ~bit;
	bool cut = false;

	if (b->count == b->epoch_start) {
		b->epoch_last_key = 0;
		b->epoch_unsorted = false;
		h->flags = HINT_EPOCH_START;
	}
	if (h->start == h->end)
		return;
	/* The bounds are raw; blocks only matter once another advice is in. */
	if ((b->epoch_advices & ordered) && block_lo(h->start) < block_hi(b->epoch_hi) &&
	    block_lo(b->epoch_lo) < block_hi(h->end))
		cut = b->count - b->epoch_start > EPOCH_SCAN_LIMIT ||
		      hint_near_ordered_hint(b, h);
	if (cut) {
		b->epoch_start = b->count;
		b->epoch_advices = 0;
		b->epoch_last_key = 0;
		b->epoch_unsorted = false;
		h->flags = HINT_EPOCH_START;
	}
	if (!b->epoch_advices || h->start < b->epoch_lo)
		b->epoch_lo = h->start;
	if (!b->epoch_advices || h->end > b->epoch_hi)
		b->epoch_hi = h->end;
	b->epoch_advices |= bit;
}

/*
 * Remember when an epoch's hints stop arriving in plan order (one compare
 * per add). From then on every add also writes its sort item, so the flush
 * sorts at once instead of reading every hint record again.
 */
static inline void track_order(struct madvx_batch *b, const struct hint_int *h)
{
	uint64_t key = madvx_sort_key(h);

	if (unlikely(b->epoch_unsorted)) {
		madvx_sort_item(b, b->count, key);
	} else if (unlikely(key < b->epoch_last_key)) {
		b->epoch_unsorted = true;
		b->hints[b->epoch_start].flags |= HINT_EPOCH_UNSORTED;
		for (uint32_t i = b->epoch_start; i < b->count; i++)
			madvx_sort_item(b, i, madvx_sort_key(&b->hints[i]));
		madvx_sort_item(b, b->count, key);
	}
	b->epoch_last_key = key;
}

/*
 * madvise(2)'s argument checks (mm/madvise.c madvise_should_skip()): an
 * unknown advice, an unaligned start, a length that rounds up past 2^64 or
 * an end that wraps are -EINVAL; everything else goes to the kernel.
 */
static int check_range(uintptr_t start, size_t len)
{
	size_t page = madvx_page_size();

	if (start & (page - 1))
		return -EINVAL;
	if (len > SIZE_MAX - (page - 1) || start + align_up(len, page) < start)
		return -EINVAL;
	return 0;
}

static int check_hint(uintptr_t start, size_t len, int advice, int *adv_idx)
{
	*adv_idx = madvx_advice_index(advice);
	if (*adv_idx < 0)
		return -EINVAL;
	return check_range(start, len);
}

static int flush_hints(struct madvx_batch *b);

MADVX_HOT static inline int add_hint(struct madvx_batch *b, void *addr, size_t len,
				     int advice, unsigned int flags)
{
	uintptr_t start = (uintptr_t)addr;
	struct hint_int *h;
	int adv_idx, ret;

	if (unlikely(!b || (flags & ~MADVX_HINT_ONE_VMA)))
		return -EINVAL;
	ret = check_hint(start, len, advice, &adv_idx);
	if (unlikely(ret))
		return ret;
	/* What the kernel refuses for another process (cached per advice). */
	if (unlikely(b->target) && __madvx_target_advice_ok(b->target, advice) == 0)
		return -EINVAL;
	if (unlikely(b->count == b->capacity)) {
		if (!(b->flags & MADVX_BATCH_AUTOFLUSH))
			return -ENOSPC;
		flush_hints(b);
	}
	if (b->count == 0)
		b->nresults = 0;	/* results of the last flush are gone now */
	h = &b->hints[b->count];
	h->start = start;
	h->end = start + align_up(len, madvx_page_size());
	h->len = len;
	h->undone = 0;
	h->err = 0;
	h->flags = 0;
	h->adv_idx = (int16_t)adv_idx;
	assign_epoch(b, h);
	/* After assign_epoch() (it sets the flags), before the sort key is taken. */
	if (flags & MADVX_HINT_ONE_VMA)
		h->flags |= HINT_ONE_VMA;
	track_order(b, h);
	b->st.hints++;
	return (int)b->count++;
}

MADVX_HOT MADVX_API int madvx_batch_add(struct madvx_batch *b, void *addr, size_t len,
					int advice)
{
	return add_hint(b, addr, len, advice, 0);
}

MADVX_API int madvx_batch_add_flags(struct madvx_batch *b, void *addr, size_t len,
				    int advice, unsigned int flags)
{
	return add_hint(b, addr, len, advice, flags);
}

MADVX_API uint32_t madvx_batch_pending(const struct madvx_batch *b)
{
	return b ? b->count : 0;
}

MADVX_API uint64_t madvx_batch_seq(const struct madvx_batch *b)
{
	return b ? b->seq_base + b->count : 0;
}

/* ---- cancelling ---- */

/*
 * The hints of the epoch starting at @es changed their starts or lengths:
 * have the flush sort it from freshly written items, as track_order()
 * does once adds arrive out of plan order (a trimmed start can overtake
 * the next hint's; an unsorted epoch's items cache the old lengths).
 */
static void resort_epoch(struct madvx_batch *b, uint32_t es)
{
	uint32_t i = es;

	b->hints[es].flags |= HINT_EPOCH_UNSORTED;
	do {
		madvx_sort_item(b, i, madvx_sort_key(&b->hints[i]));
	} while (++i < b->count && !(b->hints[i].flags & HINT_EPOCH_START));
	if (es == b->epoch_start)
		b->epoch_unsorted = true;
}

/* Take [lo, hi) out of hint @h, which overlaps it and does not hold it strictly. */
static void cut_hint(struct hint_int *h, uint64_t lo, uint64_t hi)
{
	uint64_t end_added = h->start + h->len;

	if (lo <= h->start && h->end <= hi) {
		h->end = h->start;	/* dropped: a zero-length hint */
		h->len = 0;
	} else if (lo <= h->start) {
		h->start = hi;		/* its head */
		h->len = end_added - hi;
	} else {
		h->end = lo;		/* its tail */
		h->len = lo - h->start;
	}
}

MADVX_API int madvx_batch_cancel(struct madvx_batch *b, void *addr, size_t len)
{
	uint64_t lo = (uintptr_t)addr, hi;
	uint32_t es = 0, dirty = UINT32_MAX;
	int n = 0;

	if (!b || check_range(lo, len))
		return -EINVAL;
	hi = lo + align_up(len, madvx_page_size());
	if (hi == lo)
		return 0;
	/* Refuse before changing anything: a hole would need a second hint. */
	for (uint32_t i = 0; i < b->count; i++)
		if (b->hints[i].start < lo && hi < b->hints[i].end)
			return -EBUSY;
	for (uint32_t i = 0; i < b->count; i++) {
		struct hint_int *h = &b->hints[i];

		if (h->flags & HINT_EPOCH_START) {
			if (dirty != UINT32_MAX)
				resort_epoch(b, dirty);
			es = i;
			dirty = UINT32_MAX;
		}
		if (h->start == h->end || h->start >= hi || h->end <= lo)
			continue;
		cut_hint(h, lo, hi);
		dirty = es;
		n++;
	}
	if (dirty != UINT32_MAX)
		resort_epoch(b, dirty);
	b->st.cancelled += (uint64_t)n;
	return n;
}

/* ---- flushing ---- */

static void hint_result(const struct madvx_batch *b, uint32_t i, uint64_t seq_base,
			struct madvx_hint *r)
{
	const struct hint_int *h = &b->hints[i];

	*r = (struct madvx_hint){
		.addr = h->start, .len = h->len, .advice = __madvx_advice_at(h->adv_idx),
		.err = h->err, .done = (h->end - h->start) - h->undone,
		.seq = seq_base + i,
	};
}

/* Add to the process-wide counters what @b counted since it last published. */
MADVX_HOT static void publish_stats(struct madvx_batch *b)
{
	struct madvx_stats delta = b->st;
	const uint64_t *s = &b->published.hints;
	uint64_t *t = &delta.hints;
	const struct madvx_stats *d = &delta;

	for (size_t i = 0; i < (sizeof(delta) - offsetof(struct madvx_stats, hints)) / 8; i++)
		t[i] -= s[i];
	b->published = b->st;

	atomic_fetch_add(&gstats.hints, d->hints);
	atomic_fetch_add(&gstats.merged, d->merged);
	atomic_fetch_add(&gstats.split, d->split);
	atomic_fetch_add(&gstats.flushes, d->flushes);
	atomic_fetch_add(&gstats.syscalls, d->syscalls);
	atomic_fetch_add(&gstats.vector_entries, d->vector_entries);
	atomic_fetch_add(&gstats.bytes, d->bytes);
	atomic_fetch_add(&gstats.fallback_entries, d->fallback_entries);
	atomic_fetch_add(&gstats.madvise_fallbacks, d->madvise_fallbacks);
	atomic_fetch_add(&gstats.vma_queries, d->vma_queries);
	atomic_fetch_add(&gstats.retries, d->retries);
	atomic_fetch_add(&gstats.failed, d->failed);
	atomic_fetch_add(&gstats.vma_skipped, d->vma_skipped);
	atomic_fetch_add(&gstats.cancelled, d->cancelled);
	for (int i = 0; i < 64; i++)
		if (d->errors[i])
			atomic_fetch_add(&gstats.errors[i], d->errors[i]);
}

/* Plan and issue everything queued, epoch by epoch. */
MADVX_HOT static void issue_hints(struct madvx_batch *b)
{
	uint32_t from = 0;

	/* A refused entry last time: the layout moved, guess nothing (plan.c). */
	if (b->vmas.stale)
		__madvx_plan_forget_guess();
	madvx_vma_cache_age(&b->vmas);
	b->vmas.queries = 0;
	b->flush_failed = 0;
	b->nstopped = 0;
	atomic_store_explicit(&b->results_state, RESULTS_STALE, memory_order_relaxed);
	while (from < b->count) {
		uint32_t to = from + 1;

		while (to < b->count && !(b->hints[to].flags & HINT_EPOCH_START))
			to++;
		__madvx_plan_epoch(b, from, to);
		from = to;
	}
}

/* Report one hint to the callbacks that want it. */
static void report_hint(struct madvx_batch *b, uint32_t i)
{
	const struct hint_int *h = &b->hints[i];
	struct madvx_hint r;

	if (!b->on_result && !(h->err && b->on_error))
		return;
	hint_result(b, i, b->seq_base, &r);
	if (h->err && b->on_error)
		b->on_error(b->on_error_ctx, &r);
	if (b->on_result)
		b->on_result(b->on_result_ctx, &r);
}

/* Every entry is credited: count failures, report them, publish results. */
static int tally_hints(struct madvx_batch *b)
{
	int first_err = 0;

	b->st.flushes++;
	b->st.vma_queries += b->vmas.queries;
	/* Crediting counted the failures: no pass over the hints without any. */
	for (uint32_t i = 0; (b->flush_failed || b->on_result) && i < b->count; i++) {
		const struct hint_int *h = &b->hints[i];

		if (h->err) {
			b->st.failed++;
			b->st.errors[-h->err < 64 ? -h->err : 0]++;
			if (!first_err)
				first_err = h->err;
		}
		report_hint(b, i);
	}
	if (first_err && !b->sticky_err)
		b->sticky_err = first_err;

	publish_stats(b);

	b->nresults = b->count;
	b->seq_base += b->count;
	b->count = 0;
	b->epoch_start = 0;
	b->epoch_advices = 0;
	return first_err;
}

/* Apply everything queued; returns the first failure's -errno or 0. */
static int flush_hints(struct madvx_batch *b)
{
	if (!b->count)
		return 0;
	issue_hints(b);
	return tally_hints(b);
}

int __madvx_batch_issue_deferred(struct madvx_batch *b, madvx_issue_fn issue, void *ctx)
{
	b->issue = issue;
	b->issue_ctx = ctx;
	b->whole_runs = true;
	if (b->count)
		issue_hints(b);
	b->whole_runs = false;
	b->issue = NULL;
	b->issue_ctx = NULL;
	return 0;
}

int __madvx_batch_complete(struct madvx_batch *b)
{
	int ret;

	if (b->count)
		tally_hints(b);
	ret = b->sticky_err;
	b->sticky_err = 0;
	return ret;
}

void *__madvx_batch_issue_ctx(struct madvx_batch *b)
{
	return b->issue_ctx;
}

MADVX_HOT MADVX_API int madvx_batch_flush(struct madvx_batch *b)
{
	int ret;

	if (!b)
		return -EINVAL;
	/*
	 * A flush with nothing queued is still "the next flush" madvx.h
	 * bounds results by: it has none. Only explicit flushes get here
	 * empty (an add always leaves a hint queued after its own flush).
	 */
	if (!b->count)
		b->nresults = 0;
	flush_hints(b);
	ret = b->sticky_err;
	b->sticky_err = 0;
	return ret;
}

/*
 * Results are built on first request, not by the flush (whose cost is per
 * failure, not per hint). Readers may race: one builds, the others wait.
 */
MADVX_API const struct madvx_hint *madvx_batch_results(const struct madvx_batch *cb,
							uint32_t *count)
{
	struct madvx_batch *b = (struct madvx_batch *)cb;
	uint32_t st;

	if (count)
		*count = 0;
	if (!b || b->count)
		return NULL;
	st = atomic_load_explicit(&b->results_state, memory_order_acquire);
	while (st != RESULTS_BUILT) {
		if (st == RESULTS_STALE &&
		    atomic_compare_exchange_weak(&b->results_state, &st, RESULTS_BUILDING)) {
			uint64_t base = b->seq_base - b->nresults;

			for (uint32_t i = 0; i < b->nresults; i++)
				hint_result(b, i, base, &b->res[i]);
			atomic_store_explicit(&b->results_state, RESULTS_BUILT,
					      memory_order_release);
			break;
		}
		if (st == RESULTS_BUILDING) {
			sched_yield();
			st = atomic_load_explicit(&b->results_state, memory_order_acquire);
		}
	}
	if (count)
		*count = b->nresults;
	return b->res;
}

static int copy_stats(struct madvx_stats *dst, const struct madvx_stats *src)
{
	if (!dst || dst->size < offsetof(struct madvx_stats, hints))
		return -EINVAL;
	madvx_copy_out(dst, src, sizeof(*src));
	return 0;
}

MADVX_API int madvx_batch_stats(const struct madvx_batch *b, struct madvx_stats *st)
{
	if (!b)
		return -EINVAL;
	return copy_stats(st, &b->st);
}

MADVX_API int madvx_stats_get(struct madvx_stats *st)
{
	struct madvx_stats s = { .size = sizeof(s) };

	s.hints = atomic_load(&gstats.hints);
	s.merged = atomic_load(&gstats.merged);
	s.split = atomic_load(&gstats.split);
	s.flushes = atomic_load(&gstats.flushes);
	s.syscalls = atomic_load(&gstats.syscalls);
	s.vector_entries = atomic_load(&gstats.vector_entries);
	s.bytes = atomic_load(&gstats.bytes);
	s.fallback_entries = atomic_load(&gstats.fallback_entries);
	s.madvise_fallbacks = atomic_load(&gstats.madvise_fallbacks);
	s.vma_queries = atomic_load(&gstats.vma_queries);
	s.retries = atomic_load(&gstats.retries);
	s.failed = atomic_load(&gstats.failed);
	s.vma_skipped = atomic_load(&gstats.vma_skipped);
	s.cancelled = atomic_load(&gstats.cancelled);
	for (int i = 0; i < 64; i++)
		s.errors[i] = atomic_load(&gstats.errors[i]);
	return copy_stats(st, &s);
}
