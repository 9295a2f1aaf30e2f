// SPDX-License-Identifier: MIT
/*
 * The batching engine: turn many (addr, len, advice) hints into the fewest
 * kernel calls whose every entry stays on the per-VMA fast path, and report
 * exactly what happened to every hint. See include/madvx.h for the contract.
 *
 * Flush = for each epoch (a run of hints in which no two hints of different
 * advices overlap): sort by (lock class, advice, address), merge overlapping
 * or adjacent hints of one advice into runs, cut runs at VMA boundaries into
 * entries, and issue each advice's fast-path entries before its fallback
 * entries, in separate calls.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "batch.h"

#define DEFAULT_CAPACITY 4096
#define MAX_CAPACITY (1U << 24)
#define EPOCH_SCAN_LIMIT 256	/* exact overlap scan bound, then cut an epoch */
#define MAX_RETRIES 3		/* EINTR / EAGAIN per entry */
#define PLAN_CHUNK 1024		/* entries planned before they are issued */

/*
 * One hint, with its result: the only per-hint record the add, plan and
 * credit paths touch (struct madvx_hint is built from it on demand).
 */
struct hint_int {
	uint64_t start;
	uint64_t end;		/* start + len rounded up to pages */
	uint64_t len;		/* as added */
	uint64_t undone;	/* bytes of [start, end) not applied */
	int32_t err;
	uint32_t epoch;
	int32_t advice;
	int16_t adv_idx;
	uint16_t flags;		/* HINT_* */
};

/* On an epoch's first hint: its hints were not added in plan order. */
#define HINT_EPOCH_UNSORTED (1U << 0)

struct sort_item {
	uint64_t key;
	uint32_t idx;		/* add index */
	uint32_t pad;
};

struct madvx_batch {
	uint32_t capacity;
	uint32_t flags;
	uint32_t count;		/* hints queued */
	uint32_t nresults;	/* hints of the last flush (still in hints[]) */
	bool results_built;	/* res[] holds them */
	bool use_sorted;	/* current epoch: positions go through sorted[] */
	uint32_t flush_failed;	/* hints that failed in this flush */
	bool owns_storage;
	size_t storage_size;
	madvx_error_fn on_error;
	void *on_error_ctx;
	int sticky_err;		/* first failure since the last explicit flush */

	/* current epoch, for the ordering rule */
	uint32_t epoch;
	uint32_t epoch_start;
	uint64_t epoch_advices;	/* bit per adv_idx */
	uint64_t epoch_lo, epoch_hi;
	uint64_t epoch_last_key;	/* to notice adds out of plan order */

	/* Set while an async backend flushes: planned groups go to it. */
	madvx_issue_fn issue;
	void *issue_ctx;

	struct madvx_vma_cache vmas;
	struct madvx_stats st;
	struct madvx_stats published;	/* part of st already in gstats */

	struct hint_int *hints;
	struct madvx_hint *res;
	struct sort_item *sorted;
	struct sort_item *scratch;
	struct madvx_entry entries[PLAN_CHUNK];
	struct iovec iov[MADVX_MAX_VEC];
};

/*
 * Planning works on positions: within an epoch, position k is hint k when
 * the hints were added in plan order (the common case: one advice, rising
 * addresses), else hint sorted[k].idx. Entries remember which.
 */
static inline uint32_t pos_hint(const struct madvx_batch *b, bool via_sorted, uint32_t k)
{
	return via_sorted ? b->sorted[k].idx : k;
}

/* ---- process-wide state ---- */

static struct {
	_Atomic uint64_t hints, merged, split, flushes, syscalls, vector_entries,
		bytes, fallback_entries, madvise_fallbacks, vma_queries, retries,
		failed, errors[64];
} gstats;

/*
 * Advices process_madvise() turned out to reject at run time although the
 * probe accepted them (e.g. a seccomp filter added later): decided once,
 * remembered, counted in madvise_fallbacks.
 */
static _Atomic uint64_t pmadv_rejected;
static _Atomic bool pmadv_broken;	/* ENOSYS/EBADF: madvise() from now on */

/* ---- storage ---- */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

MADVX_API size_t madvx_batch_storage_size(uint32_t capacity)
{
	size_t sz = align_up(sizeof(struct madvx_batch), 64);

	if (!capacity)
		capacity = DEFAULT_CAPACITY;
	sz += (size_t)capacity * (sizeof(struct hint_int) + sizeof(struct madvx_hint) +
				  2 * sizeof(struct sort_item));
	return sz;
}

static void carve_storage(struct madvx_batch *b, char *base)
{
	char *p = base + align_up(sizeof(*b), 64);

	b->hints = (struct hint_int *)p;
	p += (size_t)b->capacity * sizeof(struct hint_int);
	b->res = (struct madvx_hint *)p;
	p += (size_t)b->capacity * sizeof(struct madvx_hint);
	b->sorted = (struct sort_item *)p;
	p += (size_t)b->capacity * sizeof(struct sort_item);
	b->scratch = (struct sort_item *)p;
}

static bool opts_tail_zero(const struct madvx_batch_opts *o)
{
	const char *p = (const char *)o;

	for (size_t i = sizeof(*o); i < o->size; i++)
		if (p[i])
			return false;
	return true;
}

/* 0: per-VMA fast path, 1: mmap_read_lock, 2: mmap_write_lock; per advice index. */
static uint8_t lock_classes[64];
static pthread_once_t lock_classes_once = PTHREAD_ONCE_INIT;

/*
 * key = lock class (2 bits) | advice index (5 bits) | page frame (45 bits,
 * enough for 57-bit address spaces): sorted, entries come grouped by class
 * (fast path first), then advice, then address.
 */
static inline uint64_t sort_key(const struct hint_int *h)
{
	return ((uint64_t)lock_classes[h->adv_idx] << 50) |
	       ((uint64_t)h->adv_idx << 45) | ((h->start >> 12) & ((1ULL << 45) - 1));
}

static void init_lock_classes(void)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	for (int i = 0; i < n && i < 64; i++) {
		enum madvx_lock l = madvx_advice_lock(adv[i]);

		lock_classes[madvx_advice_index(adv[i])] =
			l == MADVX_LOCK_PER_VMA ? 0 : l == MADVX_LOCK_MMAP_READ ? 1 : 2;
	}
}

MADVX_API int madvx_batch_create(const struct madvx_batch_opts *opts,
				 struct madvx_batch **out)
{
	struct madvx_batch_opts o = { .size = sizeof(o) };
	struct madvx_batch *b;
	size_t need;
	void *mem;

	if (!out)
		return -EINVAL;
	if (opts) {
		if (opts->size < offsetof(struct madvx_batch_opts, storage))
			return -EINVAL;
		if (opts->size > sizeof(o) && !opts_tail_zero(opts))
			return -E2BIG;
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	}
	if (!o.capacity)
		o.capacity = DEFAULT_CAPACITY;
	if (o.capacity > MAX_CAPACITY ||
	    (o.flags & ~(MADVX_BATCH_AUTOFLUSH | MADVX_BATCH_NO_VECTOR)))
		return -EINVAL;
	need = madvx_batch_storage_size(o.capacity);
	if (o.storage) {
		if (o.storage_size < need)
			return -ENOSPC;
		if ((uintptr_t)o.storage & 63)
			return -EINVAL;
		mem = o.storage;
	} else {
		mem = mmap(NULL, need, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			return -ENOMEM;
	}
	/* Decide the probe now, outside the caller's malloc paths. */
	madvx_probe();
	pthread_once(&lock_classes_once, init_lock_classes);

	b = mem;
	memset(b, 0, sizeof(*b));
	b->capacity = o.capacity;
	b->flags = o.flags;
	b->owns_storage = !o.storage;
	b->storage_size = need;
	b->on_error = o.on_error;
	b->on_error_ctx = o.on_error_ctx;
	b->st.size = sizeof(b->st);
	carve_storage(b, mem);
	*out = b;
	return 0;
}

MADVX_API void madvx_batch_free(struct madvx_batch *b)
{
	if (b && b->owns_storage)
		munmap(b, b->storage_size);
}

/* ---- adding hints: validation and the ordering rule ---- */

static bool hint_overlaps_other_advice(const struct madvx_batch *b,
				       const struct hint_int *h)
{
	for (uint32_t i = b->epoch_start; i < b->count; i++) {
		const struct hint_int *g = &b->hints[i];

		if (g->adv_idx != h->adv_idx && g->start < h->end && h->start < g->end)
			return true;
	}
	return false;
}

/*
 * Hints of different advices that overlap must keep their order: such a
 * hint starts a new epoch. The common cases cost O(1): one advice so far, or
 * no overlap with the epoch's bounding range. Past EPOCH_SCAN_LIMIT hints the
 * exact scan is skipped and the epoch is cut, which is always safe.
 */
static void assign_epoch(struct madvx_batch *b, struct hint_int *h)
{
	uint64_t bit = 1ULL << h->adv_idx;
	bool cut = false;

	if (b->count == b->epoch_start) {
		b->epoch_last_key = 0;
		h->flags = 0;
	}
	if (h->start == h->end) {
		h->epoch = b->epoch;
		return;
	}
	if ((b->epoch_advices & ~bit) && h->start < b->epoch_hi && b->epoch_lo < h->end)
		cut = b->count - b->epoch_start > EPOCH_SCAN_LIMIT ||
		      hint_overlaps_other_advice(b, h);
	if (cut) {
		b->epoch++;
		b->epoch_start = b->count;
		b->epoch_advices = 0;
		b->epoch_last_key = 0;
		h->flags = 0;
	}
	if (!b->epoch_advices || h->start < b->epoch_lo)
		b->epoch_lo = h->start;
	if (!b->epoch_advices || h->end > b->epoch_hi)
		b->epoch_hi = h->end;
	b->epoch_advices |= bit;
	h->epoch = b->epoch;
}

/* Remember when an epoch's hints stop arriving in plan order (one compare per add). */
static inline void track_order(struct madvx_batch *b, const struct hint_int *h)
{
	uint64_t key = sort_key(h);

	if (key < b->epoch_last_key)
		b->hints[b->epoch_start].flags |= HINT_EPOCH_UNSORTED;
	b->epoch_last_key = key;
}

/* madvise(2)'s argument checks (mm/madvise.c madvise_should_skip()). */
static int check_hint(uintptr_t start, size_t len, int advice, int *adv_idx)
{
	size_t page = madvx_page_size();

	*adv_idx = madvx_advice_index(advice);
	if (*adv_idx < 0)
		return -EINVAL;
	if (start & (page - 1))
		return -EINVAL;
	if (len > SIZE_MAX - (page - 1) || start + align_up(len, page) < start)
		return -EINVAL;
	return 0;
}

static int flush_hints(struct madvx_batch *b);

MADVX_API int madvx_batch_add(struct madvx_batch *b, void *addr, size_t len, int advice)
{
	uintptr_t start = (uintptr_t)addr;
	struct hint_int *h;
	int adv_idx, ret;

	if (unlikely(!b))
		return -EINVAL;
	ret = check_hint(start, len, advice, &adv_idx);
	if (unlikely(ret))
		return ret;
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
	h->advice = advice;
	h->adv_idx = (int16_t)adv_idx;
	assign_epoch(b, h);
	track_order(b, h);
	b->st.hints++;
	return (int)b->count++;
}

MADVX_API uint32_t madvx_batch_pending(const struct madvx_batch *b)
{
	return b ? b->count : 0;
}

/* ---- sorting without malloc: LSD radix sort, skipped when already sorted ---- */


#define RADIX_BITS 11
#define RADIX_PASSES 5		/* 55 bits >= 52 */

static void radix_sort(struct sort_item *a, struct sort_item *tmp, uint32_t n)
{
	uint32_t count[1 << RADIX_BITS];

	for (int pass = 0; pass < RADIX_PASSES; pass++) {
		int shift = pass * RADIX_BITS;
		uint32_t sum = 0;

		memset(count, 0, sizeof(count));
		for (uint32_t i = 0; i < n; i++)
			count[(a[i].key >> shift) & ((1 << RADIX_BITS) - 1)]++;
		for (uint32_t d = 0; d < (1 << RADIX_BITS); d++) {
			uint32_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (uint32_t i = 0; i < n; i++)
			tmp[count[(a[i].key >> shift) & ((1 << RADIX_BITS) - 1)]++] = a[i];
		memcpy(a, tmp, n * sizeof(*a));
	}
}

/* Order the epoch [from, to) for planning; nothing to do when added in order. */
static void sort_epoch(struct madvx_batch *b, uint32_t from, uint32_t to)
{
	struct sort_item *s = b->sorted + from;
	uint32_t n = to - from;

	b->use_sorted = b->hints[from].flags & HINT_EPOCH_UNSORTED;
	if (!b->use_sorted)
		return;
	for (uint32_t i = 0; i < n; i++) {
		s[i].idx = from + i;
		s[i].key = sort_key(&b->hints[from + i]);
	}
	radix_sort(s, b->scratch, n);
}

/*
 * ---- crediting results to hints ----
 *
 * Only failures are credited: a hint's bytes done are its rounded length
 * minus what failed, so an entry the kernel applied in full costs no work
 * per hint (runs are disjoint and their entries too, so nothing counts twice).
 */

static void credit_hint(struct madvx_batch *b, uint32_t idx, uint64_t undone, int err)
{
	struct hint_int *h = &b->hints[idx];

	h->undone += undone;
	if (unlikely(err) && !h->err) {
		h->err = err;
		b->flush_failed++;
	}
}

static uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;

	return hi > lo ? hi - lo : 0;
}

/* [start, start + len) failed with @err for the hints at positions first..last. */
static void credit_failure(struct madvx_batch *b, bool via_sorted, uint32_t first,
			   uint32_t last, uint64_t start, uint64_t len, int err)
{
	for (uint32_t k = first; k <= last; k++) {
		uint32_t idx = pos_hint(b, via_sorted, k);
		const struct hint_int *h = &b->hints[idx];
		uint64_t ov = overlap(h->start, h->end, start, start + len);

		if (ov)
			credit_hint(b, idx, ov, err);
	}
}

void madvx_entry_done(struct madvx_batch *b, const struct madvx_entry *e,
		      uint64_t done, int err)
{
	b->st.bytes += done;
	if (err)
		credit_failure(b, e->via_sorted, e->first, e->last, e->start, e->len, err);
}

/* Bytes of [start, start + len) that are mapped now (fresh lookups). */
static uint64_t mapped_bytes(struct madvx_batch *b, uint64_t start, uint64_t len)
{
	uint64_t cur = start, end = start + len, n = 0;
	struct madvx_vma v;

	madvx_vma_cache_reset(&b->vmas);
	while (cur < end && madvx_vma_find(&b->vmas, cur, &v) == 0 && v.start < end) {
		n += overlap(v.start, v.end, cur, end);
		cur = v.end;
	}
	return n;
}

/*
 * madvise() advised the mapped parts of @e and said ENOMEM for the rest:
 * credit each hint with what is mapped of its part.
 */
void madvx_entry_enomem(struct madvx_batch *b, const struct madvx_entry *e)
{
	for (uint32_t k = e->first; k <= e->last; k++) {
		uint32_t idx = pos_hint(b, e->via_sorted, k);
		const struct hint_int *h = &b->hints[idx];
		uint64_t lo = h->start > e->start ? h->start : e->start;
		uint64_t ov = overlap(h->start, h->end, e->start, e->start + e->len);
		uint64_t m;

		if (!ov)
			continue;
		m = mapped_bytes(b, lo, ov);
		b->st.bytes += m;
		if (m < ov)
			credit_hint(b, idx, ov - m, ENOMEM);
	}
}

long madvx_entry_madvise(struct madvx_batch *b, int advice, const struct madvx_entry *e)
{
	long ret;

	for (int tries = 0;; tries++) {
		ret = madvx_sys_madvise(e->start, e->len, advice);
		b->st.syscalls++;
		if ((ret != -EINTR && ret != -EAGAIN) || tries == MAX_RETRIES)
			break;
		b->st.retries++;
	}
	if (ret == 0)
		madvx_entry_done(b, e, e->len, 0);
	else if (ret == -ENOMEM)
		madvx_entry_enomem(b, e);
	else
		madvx_entry_done(b, e, 0, (int)-ret);
	return ret;
}

/* ---- issuing ---- */

static bool use_vector(struct madvx_batch *b, int advice)
{
	int i = madvx_advice_index(advice);

	return !(b->flags & MADVX_BATCH_NO_VECTOR) &&
	       madvx_has(MADVX_FEAT_PROCESS_MADVISE) &&
	       madvx_advice_supported(advice) == 1 &&
	       !atomic_load_explicit(&pmadv_broken, memory_order_relaxed) &&
	       !(atomic_load_explicit(&pmadv_rejected, memory_order_relaxed) & (1ULL << i));
}

static void issue_madvise_each(struct madvx_batch *b, int advice,
			       struct madvx_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		b->st.madvise_fallbacks++;
		madvx_entry_madvise(b, advice, &e[i]);
	}
}

/*
 * process_madvise() failed on entry @e (no progress): find out whether the
 * entry is bad or the call is, by issuing the entry with madvise().
 * Returns true when process_madvise() should not be used any more for @advice.
 */
static bool vector_entry_failed(struct madvx_batch *b, int advice,
				struct madvx_entry *e, long ret)
{
	bool rejected = false;
	long mret;

	/* Whatever the reason, the entry itself gets madvise()'s exact answer. */
	mret = madvx_entry_madvise(b, advice, e);
	b->st.madvise_fallbacks++;
	switch (ret) {
	case -ENOSYS:
	case -EBADF:
	case -ESRCH:
		/* No process_madvise, or no usable pidfd: decided once per process. */
		atomic_store(&pmadv_broken, true);
		return true;
	case -EINVAL:
	case -EPERM:
		/* madvise() managed what process_madvise() refused: the call is the problem. */
		rejected = mret == 0;
		if (rejected)
			atomic_fetch_or(&pmadv_rejected,
					1ULL << madvx_advice_index(advice));
		return rejected;
	default:
		/* ENOMEM (a stale map), EFAULT, ...: a property of the entry. */
		return false;
	}
}

static void issue_vector(struct madvx_batch *b, int advice,
			 struct madvx_entry *e, uint32_t n)
{
	int pidfd = madvx_self_pidfd();
	uint32_t i = 0, tries = 0;

	if (pidfd < 0 && pidfd != PIDFD_SELF_THREAD) {
		issue_madvise_each(b, advice, e, n);
		return;
	}
	while (i < n) {
		uint32_t m = n - i < MADVX_MAX_VEC ? n - i : MADVX_MAX_VEC;
		uint64_t rem;
		long ret;

		for (uint32_t k = 0; k < m; k++)
			b->iov[k] = (struct iovec){ (void *)(uintptr_t)e[i + k].start, e[i + k].len };
		ret = madvx_sys_process_madvise(pidfd, b->iov, m, advice);
		b->st.syscalls++;
		b->st.vector_entries += m;
		if (ret > 0) {
			/* Whole entries first; the call stopped at the one that failed. */
			for (rem = (uint64_t)ret; i < n && m && rem >= e[i].len; m--, i++) {
				rem -= e[i].len;
				madvx_entry_done(b, &e[i], e[i].len, 0);
			}
			tries = 0;
			continue;
		}
		if ((ret == -EINTR || ret == -EAGAIN) && tries++ < MAX_RETRIES) {
			b->st.retries++;
			continue;
		}
		tries = 0;
		/* ret == 0 cannot happen for nonzero entries; treat it as a refusal. */
		if (vector_entry_failed(b, advice, &e[i++], ret ? ret : -EINVAL) &&
		    !use_vector(b, advice)) {
			issue_madvise_each(b, advice, e + i, n - i);
			return;
		}
	}
}

static void issue_group(struct madvx_batch *b, int advice, struct madvx_entry *e,
			uint32_t n)
{
	if (b->issue)
		b->issue(b, advice, e, n);
	else if (use_vector(b, advice))
		issue_vector(b, advice, e, n);
	else
		issue_madvise_each(b, advice, e, n);
}

/*
 * Issue the planned entries of one advice: the fast-path ones first, then
 * those predicted to fall back, never both in one call, so the sticky
 * mmap_lock fallback of vector_madvise() cannot reach a fast-path entry.
 */
static void issue_planned(struct madvx_batch *b, int advice, uint32_t n)
{
	struct madvx_entry *e = b->entries;
	uint32_t nfast = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (e[i].fallback)
			continue;
		if (i != nfast) {
			struct madvx_entry t = e[i];

			e[i] = e[nfast];
			e[nfast] = t;
		}
		nfast++;
	}
	if (nfast)
		issue_group(b, advice, e, nfast);
	if (n > nfast)
		issue_group(b, advice, e + nfast, n - nfast);
}

/* ---- planning ---- */

struct planner {
	struct madvx_batch *b;
	int advice;
	bool fast_advice;	/* the advice can run under the per-VMA lock */
	bool fast_uffd;		/* ... also on uffd VMAs without EVENT_REMOVE */
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
	ret = madvx_vma_find(&pl->b->vmas, addr, v);
	if (!ret && v->start <= addr)
		pl->last = *v;
	return ret;
}

/* Does madvise fall back to mmap_lock on @v (known to hold the range)? */
static bool vma_forces_fallback(const struct planner *pl, const struct madvx_vma *v)
{
	return v->uffd && (v->uffd_remove || !pl->fast_uffd);
}

static void plan_entry(struct planner *pl, uint64_t start, uint64_t end,
		       uint32_t first, uint32_t last, bool vma_fallback)
{
	struct madvx_entry *e;

	if (pl->n == PLAN_CHUNK) {
		issue_planned(pl->b, pl->advice, pl->n);
		pl->n = 0;
	}
	e = &pl->b->entries[pl->n++];
	*e = (struct madvx_entry){
		.start = start, .len = end - start, .first = first, .last = last,
		.fallback = !pl->fast_advice || vma_fallback, .via_sorted = pl->b->use_sorted,
	};
	if (e->fallback)
		pl->b->st.fallback_entries++;
}

/*
 * Cut the run [start, end) (hints at sorted positions first..last) at VMA
 * boundaries. Unmapped parts are reported ENOMEM to the hints covering them,
 * and the mapped parts are still advised, as madvise() does.
 */
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
	while (w->hi < w->last &&
	       b->hints[pos_hint(b, b->use_sorted, w->hi + 1)].start < pend)
		w->hi++;
	while (w->lo < w->hi && w->m <= cur) {
		uint64_t e = b->hints[pos_hint(b, b->use_sorted, ++w->lo)].end;

		if (e > w->m)
			w->m = e;
	}
}

static void plan_run(struct planner *pl, uint64_t start, uint64_t end,
		     uint32_t first, uint32_t last)
{
	struct madvx_batch *b = pl->b;
	struct run_window w = {
		first, first, last, b->hints[pos_hint(b, b->use_sorted, first)].end,
	};
	uint64_t cur = start;
	uint32_t pieces = 0;

	while (cur < end) {
		struct madvx_vma v;
		int ret = planner_vma(pl, cur, &v);

		if (ret == -ENOENT || (ret == 0 && v.start >= end)) {
			narrow(b, &w, cur, end);
			credit_failure(b, b->use_sorted, w.lo, w.hi, cur, end - cur, ENOMEM);
			break;
		}
		if (ret) {
			/* No source of bounds: let the kernel walk the VMAs. */
			narrow(b, &w, cur, end);
			plan_entry(pl, cur, end, w.lo, w.hi, false);
			pieces++;
			break;
		}
		if (v.start > cur) {
			narrow(b, &w, cur, v.start);
			credit_failure(b, b->use_sorted, w.lo, w.hi, cur, v.start - cur, ENOMEM);
			cur = v.start;
		}
		narrow(b, &w, cur, v.end < end ? v.end : end);
		plan_entry(pl, cur, v.end < end ? v.end : end, w.lo, w.hi,
			   vma_forces_fallback(pl, &v));
		pieces++;
		cur = v.end;
	}
	if (pieces > 1)
		b->st.split += pieces - 1;
}

/* Plan sorted positions [from, to): all of one advice. */
static void plan_group(struct madvx_batch *b, int advice, uint32_t from, uint32_t to)
{
	struct planner pl = {
		.b = b, .advice = advice,
		.fast_advice = madvx_advice_lock(advice) == MADVX_LOCK_PER_VMA,
		.fast_uffd = madvx_has(MADVX_FEAT_PER_VMA_UFFD),
	};
	uint32_t k = from;

	bool via = b->use_sorted;

	while (k < to) {
		const struct hint_int *h = &b->hints[pos_hint(b, via, k)];
		uint64_t start = h->start, end = h->end;
		uint32_t first = k;

		if (start == end) {	/* zero length: done, nothing to do */
			k++;
			continue;
		}
		/* Grow the run over overlapping and adjacent hints. */
		for (k++; k < to; k++) {
			const struct hint_int *g = &b->hints[pos_hint(b, via, k)];

			if (g->start > end)
				break;
			if (g->end > end)
				end = g->end;
			b->st.merged++;
		}
		plan_run(&pl, start, end, first, k - 1);
	}
	if (pl.n)
		issue_planned(b, advice, pl.n);
}

static void flush_epoch(struct madvx_batch *b, uint32_t from, uint32_t to)
{
	uint32_t k = from;

	sort_epoch(b, from, to);
	while (k < to) {
		const struct hint_int *h = &b->hints[pos_hint(b, b->use_sorted, k)];
		int adv_idx = h->adv_idx, advice = h->advice;
		uint32_t g = k;

		while (g < to && b->hints[pos_hint(b, b->use_sorted, g)].adv_idx == adv_idx)
			g++;
		plan_group(b, advice, k, g);
		k = g;
	}
}

static void hint_result(const struct hint_int *h, struct madvx_hint *r)
{
	*r = (struct madvx_hint){
		.addr = h->start, .len = h->len, .advice = h->advice,
		.err = h->err, .done = (h->end - h->start) - h->undone,
	};
}

/* Add to the process-wide counters what @b counted since it last published. */
static void publish_stats(struct madvx_batch *b)
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
	for (int i = 0; i < 64; i++)
		if (d->errors[i])
			atomic_fetch_add(&gstats.errors[i], d->errors[i]);
}

/* Plan and issue everything queued, epoch by epoch. */
static void issue_hints(struct madvx_batch *b)
{
	uint32_t from = 0;

	madvx_vma_cache_reset(&b->vmas);
	b->vmas.queries = 0;
	b->flush_failed = 0;
	b->results_built = false;
	while (from < b->count) {
		uint32_t to = from, epoch = b->hints[from].epoch;

		while (to < b->count && b->hints[to].epoch == epoch)
			to++;
		flush_epoch(b, from, to);
		from = to;
	}
}

/* Every entry is credited: count failures, report them, publish results. */
static int tally_hints(struct madvx_batch *b)
{
	int first_err = 0;

	b->st.flushes++;
	b->st.vma_queries += b->vmas.queries;
	/* Crediting counted the failures: no pass over the hints without any. */
	for (uint32_t i = 0; b->flush_failed && i < b->count; i++) {
		const struct hint_int *h = &b->hints[i];
		struct madvx_hint r;

		if (!h->err)
			continue;
		b->st.failed++;
		b->st.errors[h->err < 64 ? h->err : 0]++;
		if (!first_err)
			first_err = h->err;
		if (b->on_error) {
			hint_result(h, &r);
			b->on_error(b->on_error_ctx, &r);
		}
	}
	if (first_err && !b->sticky_err)
		b->sticky_err = first_err;

	publish_stats(b);

	b->nresults = b->count;
	b->count = 0;
	b->epoch = 0;
	b->epoch_start = 0;
	b->epoch_advices = 0;
	return first_err ? -first_err : 0;
}

/* Apply everything queued; returns the first failure's -errno or 0. */
static int flush_hints(struct madvx_batch *b)
{
	if (!b->count)
		return 0;
	issue_hints(b);
	return tally_hints(b);
}

int madvx_batch_issue_deferred(struct madvx_batch *b, madvx_issue_fn issue, void *ctx)
{
	b->issue = issue;
	b->issue_ctx = ctx;
	if (b->count)
		issue_hints(b);
	b->issue = NULL;
	b->issue_ctx = NULL;
	return 0;
}

int madvx_batch_complete(struct madvx_batch *b)
{
	int ret;

	if (b->count)
		tally_hints(b);
	ret = b->sticky_err ? -b->sticky_err : 0;
	b->sticky_err = 0;
	return ret;
}

int madvx_batch_flush_via(struct madvx_batch *b, madvx_issue_fn issue, void *ctx)
{
	int ret;

	b->issue = issue;
	b->issue_ctx = ctx;
	ret = flush_hints(b);
	b->issue = NULL;
	b->issue_ctx = NULL;
	return ret;
}

void *madvx_batch_issue_ctx(struct madvx_batch *b)
{
	return b->issue_ctx;
}

MADVX_API int madvx_batch_flush(struct madvx_batch *b)
{
	int ret;

	if (!b)
		return -EINVAL;
	flush_hints(b);
	ret = b->sticky_err ? -b->sticky_err : 0;
	b->sticky_err = 0;
	return ret;
}

MADVX_API const struct madvx_hint *madvx_batch_results(const struct madvx_batch *cb,
							uint32_t *count)
{
	/* Built on first request: the flush itself never writes res[]. */
	struct madvx_batch *b = (struct madvx_batch *)cb;

	if (count)
		*count = 0;
	if (!b || b->count)
		return NULL;
	if (!b->results_built) {
		for (uint32_t i = 0; i < b->nresults; i++)
			hint_result(&b->hints[i], &b->res[i]);
		b->results_built = true;
	}
	if (count)
		*count = b->nresults;
	return b->res;
}

static int copy_stats(struct madvx_stats *dst, const struct madvx_stats *src)
{
	size_t n;

	if (!dst || dst->size < offsetof(struct madvx_stats, hints))
		return -EINVAL;
	n = dst->size < sizeof(*src) ? dst->size : sizeof(*src);
	memcpy((char *)dst + sizeof(dst->size), (const char *)src + sizeof(src->size),
	       n - sizeof(dst->size));
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
	for (int i = 0; i < 64; i++)
		s.errors[i] = atomic_load(&gstats.errors[i]);
	return copy_stats(st, &s);
}
