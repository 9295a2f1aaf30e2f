/* SPDX-License-Identifier: MIT */
/*
 * The engine's types: the batch and its records, shared by the three
 * halves of the engine and the asynchronous backends. Types and inline
 * helpers only; each half declares its functions in its own header:
 *
 *   batch.h  batch.c, the public API: hints, epochs, results, counters;
 *   plan.h   plan.c, planning: sort, merge into runs, cut runs at VMA
 *            boundaries;
 *   issue.h  issue.c, issuing the planned entries and deciding every
 *            hint's result from what the kernel answered.
 *
 * iouring.c and async.c issue the same plan (__madvx_batch_issue_deferred()).
 */
#ifndef MADVX_ENGINE_H
#define MADVX_ENGINE_H

#include "advtab.h"
#include "probe.h"
#include "proc.h"
#include "sys.h"
#include "target.h"
#include "vma.h"

/*
 * One hint, with its result: the only per-hint record the add, plan and
 * credit paths touch (struct madvx_hint is built from it on demand).
 *
 * Results are credited by exception: an entry the kernel applied in full
 * costs no work per hint. A hint's done is its rounded length minus
 * @undone (unmapped bytes); once madvise() would have stopped for it
 * (HINT_STOPPED), @stop is where, and @undone is recomputed from the
 * kernel's view of what lies mapped below @stop.
 */
struct hint_int {
	uint64_t start;
	uint64_t end;		/* start + len rounded up to pages */
	uint64_t len;		/* as added */
	uint64_t undone;	/* bytes of [start, end) not applied */
	uint64_t stop;		/* HINT_STOPPED: nothing at or above it is applied */
	int32_t err;		/* 0 or -errno */
	int16_t adv_idx;	/* madvx_advice_index(); __madvx_advice_at() inverts it */
	uint16_t flags;		/* HINT_* */
};
_Static_assert(sizeof(struct hint_int) == 48, "one hint record: 48 bytes");

/* On an epoch's first hint: its hints were not added in plan order. */
#define HINT_EPOCH_UNSORTED (1U << 0)
/* madvise() of this hint alone would have stopped at @stop. */
#define HINT_STOPPED (1U << 1)
/* The first hint of an epoch (hints before it are applied first). */
#define HINT_EPOCH_START (1U << 2)
/* MADVX_HINT_ONE_VMA: planned without a look-up, issued apart (plan.c). */
#define HINT_ONE_VMA (1U << 3)

struct sort_item {
	uint64_t key;		/* madvx_sort_key() */
	uint32_t idx;		/* add index */
	uint32_t pages;		/* length in 4 KiB units; UINT32_MAX: see the hint */
};

/* One kernel entry: a range inside one VMA (as far as we know). */
struct madvx_entry {
	uint64_t start;
	uint64_t len;
	uint32_t first;		/* positions of the hints it may cover */
	uint32_t last;
	bool fallback;		/* predicted to take mmap_lock */
	bool via_sorted;	/* first/last index the epoch's sorted order */
};

#define MADVX_MAX_VEC 1024	/* UIO_MAXIOV */
#define MADVX_PLAN_CHUNK 1024	/* entries planned before they are issued */
#define MADVX_FEW_ENTRIES 8	/* entries planned in the batch's head */

/* How the planner hands a group of entries (one advice, one lock class) on. */
struct madvx_batch;
typedef void (*madvx_issue_fn)(struct madvx_batch *b, int advice,
			       struct madvx_entry *e, uint32_t n);

enum { RESULTS_STALE = 0, RESULTS_BUILDING, RESULTS_BUILT };

/*
 * The head of the batch's storage; its arrays follow it (batch.c,
 * carve_storage()). Fresh storage is faulted in page by page as it is first
 * written, and each first write costs a page fault (10-25 us on a
 * paravirtualised host, BENCHMARKS.md p6): so everything a flush of a few
 * hints writes - these fields, the first entries (@few) and hints[0], which
 * follows the head - lies on the first page. entries[], spill[], iov[] and
 * the VMA cache's spans come later in the storage, for bigger flushes.
 */
struct madvx_batch {
	uint32_t capacity;
	uint32_t flags;
	uint32_t count;		/* hints queued */
	uint32_t nresults;	/* hints of the last flush (still in hints[]) */
	_Atomic uint32_t results_state;	/* RESULTS_*: res[] holds them */
	bool use_sorted;	/* current epoch: positions go through sorted[] */
	bool whole_runs;	/* plan runs as single entries (deferred issue) */
	bool owns_storage;
	uint32_t flush_failed;	/* hints that failed in this flush */
	uint32_t nstopped;	/* hints with HINT_STOPPED in this flush */
	size_t storage_size;
	madvx_error_fn on_error;
	void *on_error_ctx;
	madvx_result_fn on_result;
	void *on_result_ctx;
	struct madvx_target *target;	/* NULL: this process */
	int sticky_err;		/* first failure since the last explicit flush */
	uint64_t seq_base;	/* hints added before hints[0] since creation */

	/* current epoch, for the ordering rule */
	uint32_t epoch_start;
	uint64_t epoch_advices;	/* bit per adv_idx */
	uint64_t epoch_lo, epoch_hi;
	uint64_t epoch_last_key;	/* to notice adds out of plan order */
	bool epoch_unsorted;		/* ... and that they stopped (its first hint's flag) */

	/*
	 * A plan's first entries; one that outgrows them moves to entries[]
	 * (plan.c, plan_entry()).
	 */
	struct madvx_entry few[MADVX_FEW_ENTRIES];

	/* Set while an async backend flushes: planned groups go to it. */
	madvx_issue_fn issue;
	void *issue_ctx;

	struct madvx_stats st;
	struct madvx_stats published;	/* part of st already in gstats */

	/* In the storage after this head, in this order. */
	struct madvx_entry *entries;	/* MADVX_PLAN_CHUNK */
	struct madvx_entry *spill;	/* MADVX_PLAN_CHUNK fallback entries, in order */
	struct iovec *iov;		/* MADVX_MAX_VEC */
	struct hint_int *hints;
	struct madvx_hint *res;
	struct sort_item *sorted;
	struct sort_item *scratch;
	uint32_t *radix_count;		/* 1 << radix_bits counters */
	uint32_t radix_bits;

	struct madvx_vma_cache vmas;	/* its spans: at the end of the storage */
};
_Static_assert(((sizeof(struct madvx_batch) + 63) & ~(size_t)63) + sizeof(struct hint_int) <= 4096,
	       "a flush of a few hints touches the batch's first page only");

/*
 * Planning works on positions: within an epoch, position k is hint k when
 * the hints were added in plan order (the common case: one advice, rising
 * addresses), else hint sorted[k].idx. Entries remember which.
 */
static inline uint32_t pos_hint(const struct madvx_batch *b, bool via_sorted, uint32_t k)
{
	return via_sorted ? b->sorted[k].idx : k;
}

static inline uint64_t range_overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;

	return hi > lo ? hi - lo : 0;
}

/*
 * The sort item of hint @idx, written where the sort starts (scratch[]);
 * sorted, it lands in sorted[], which planning reads (plan.c).
 */
static inline void madvx_sort_item(struct madvx_batch *b, uint32_t idx, uint64_t key)
{
	const struct hint_int *h = &b->hints[idx];
	uint64_t pages = (h->end - h->start) >> 12;

	b->scratch[idx] = (struct sort_item){
		.key = key, .idx = idx,
		.pages = pages < UINT32_MAX ? (uint32_t)pages : UINT32_MAX,
	};
}

/*
 * The VMA of @b's process that contains @addr or comes first above it.
 * @fresh: from the kernel alone (no region, no cache), to decide results.
 * For a target, always its own /proc/PID/maps view.
 */
static inline int madvx_batch_vma(struct madvx_batch *b, uint64_t addr,
				  struct madvx_vma *v, bool fresh)
{
	uint64_t start, end;
	int ret;

	if (likely(!b->target))
		return fresh ? __madvx_vma_find_kernel(addr, v) :
			       __madvx_vma_find(&b->vmas, addr, v);
	if (fresh)
		madvx_target_invalidate(b->target);
	ret = __madvx_target_vma_find(b->target, addr, &start, &end);
	if (!ret)
		*v = (struct madvx_vma){ .start = start, .end = end };
	return ret;
}

/*
 * Radix digits up to 4x the capacity (at least 11, at most 20 bits): the
 * hints of a dense range (an arena) sort in one pass. Counters in storage.
 */
static inline uint32_t madvx_radix_bits(size_t capacity)
{
	uint32_t bits = 2;

	while (bits < 20 && ((size_t)1 << (bits - 2)) < capacity)
		bits++;
	return bits < 11 ? 11 : bits;
}

#endif /* MADVX_ENGINE_H */
