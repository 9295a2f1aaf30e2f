// SPDX-License-Identifier: MIT
/*
 * Issuing: hand planned entries to the kernel (process_madvise() vectors,
 * or madvise() per entry) and decide every hint's result from what the
 * kernel answered - never from the plan.
 *
 * An entry the kernel applied in full costs nothing per hint. When it did
 * not (an error, a hole the plan did not know of, a stale region claim),
 * the entry is resolved: each hint it covers is re-applied on its own part,
 * VMA by VMA on the kernel's current bounds, with madvise() - exactly the
 * walk madvise() of that hint alone does - so the hint gets madvise()'s own
 * answer. The advices a batch merges are idempotent, so re-applying what
 * the failed entry already did changes nothing; what it must never do is
 * apply a hint's VMAs above the one where madvise() would have stopped.
 * The plan issues every hint's pieces in address order for that reason,
 * and entries that reach above a hint's stop are narrowed before they go.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "issue.h"

#define MAX_RETRIES 3		/* EINTR / EAGAIN per call */

/*
 * Advices process_madvise() turned out to reject at run time although the
 * probe accepted them (e.g. a seccomp filter added later): decided once,
 * remembered, counted in madvise_fallbacks.
 */
static _Atomic uint64_t pmadv_rejected;
static _Atomic bool pmadv_broken;	/* ENOSYS/EBADF: madvise() from now on */

static bool stops_at_holes(int advice)
{
	/*
	 * Since 6.10 madvise_populate() gives up at the first hole; before,
	 * and for every other advice, madvise() walks past holes (-ENOMEM at
	 * the end unless a later VMA fails first). Which one this kernel does
	 * is asked the first time a POPULATE hint meets a hole, never before.
	 */
	return (advice == MADV_POPULATE_READ || advice == MADV_POPULATE_WRITE) &&
	       __madvx_populate_stops_at_holes();
}

/* madvise(2) of one range, or for a target its one-entry process_madvise(). */
static long apply_range(struct madvx_batch *b, uint64_t start, uint64_t len, int advice)
{
	struct iovec iov = { (void *)(uintptr_t)start, len };
	long ret;

	if (likely(!b->target))
		return __madvx_sys_madvise(start, len, advice);
	ret = __madvx_sys_process_madvise(b->target->pidfd, &iov, 1, advice);
	return ret < 0 ? ret : (uint64_t)ret == len ? 0 : -EIO;
}

static long madvise_retry(struct madvx_batch *b, uint64_t start, uint64_t len, int advice)
{
	long ret;

	for (int tries = 0;; tries++) {
		ret = apply_range(b, start, len, advice);
		b->st.syscalls++;
		if ((ret != -EINTR && ret != -EAGAIN) || tries == MAX_RETRIES)
			break;
		b->st.retries++;
	}
	return ret;
}

/* ---- crediting results to hints ---- */

/* Bytes of [start, end) mapped now, in the kernel's view. */
static uint64_t mapped_bytes(struct madvx_batch *b, uint64_t start, uint64_t end)
{
	uint64_t cur = start, n = 0;
	struct madvx_vma v;

	while (cur < end && madvx_batch_vma(b, cur, &v, true) == 0 && v.start < end &&
	       v.end > cur) {
		b->vmas.queries++;
		n += range_overlap(v.start, v.end, cur, end);
		cur = v.end;
	}
	return n;
}

static void set_err(struct madvx_batch *b, struct hint_int *h, int err)
{
	if (!h->err)
		b->flush_failed++;
	h->err = err;
}

/*
 * madvise() of hint @idx alone stops at @at with @err: nothing at or above
 * @at is applied, done = what is mapped below it. An earlier stop wins.
 */
static void stop_hint(struct madvx_batch *b, uint32_t idx, uint64_t at, int err)
{
	struct hint_int *h = &b->hints[idx];

	if ((h->flags & HINT_STOPPED) && h->stop <= at)
		return;
	if (!(h->flags & HINT_STOPPED))
		b->nstopped++;
	h->flags |= HINT_STOPPED;
	h->stop = at;
	set_err(b, h, err);
	h->undone = (h->end - h->start) - mapped_bytes(b, h->start, at);
}

/* [start, end) of hint @idx is unmapped. */
static void hole_hint(struct madvx_batch *b, int advice, uint32_t idx,
		      uint64_t start, uint64_t end)
{
	struct hint_int *h = &b->hints[idx];
	uint64_t ov = range_overlap(h->start, h->end, start, end);

	if (!ov)
		return;
	if (stops_at_holes(advice)) {
		/* stop_hint() keeps the lower of two stops. */
		stop_hint(b, idx, start > h->start ? start : h->start, -ENOMEM);
		return;
	}
	/* A stopped hint's undone was measured at its stop. */
	if (h->flags & HINT_STOPPED)
		return;
	h->undone += ov;
	if (!h->err)
		set_err(b, h, -ENOMEM);
}

void __madvx_credit_hole(struct madvx_batch *b, int advice, bool via_sorted,
		       uint32_t first, uint32_t last, uint64_t start, uint64_t len)
{
	for (uint32_t k = first; k <= last; k++)
		hole_hint(b, advice, pos_hint(b, via_sorted, k), start, start + len);
}

MADVX_HOT void __madvx_entry_done(struct madvx_batch *b, const struct madvx_entry *e,
				  uint64_t done)
{
	b->st.bytes += done;
}

/*
 * Has madvise() of hint @h already stopped at or below @addr? Then nothing
 * from @addr on is applied for it, and no walk needs to go there.
 */
static bool stopped_at_or_below(const struct hint_int *h, uint64_t addr)
{
	return (h->flags & HINT_STOPPED) && h->stop <= addr;
}

/*
 * madvise() of [lo, hi), the part of hint @idx in a failed entry, VMA by VMA
 * on the kernel's bounds. The hint may have stopped above @lo already (a
 * hole found while planning): a refusal below that stop moves it down.
 * Returns true if all of it was applied.
 */
static bool walk_part(struct madvx_batch *b, int advice, uint32_t idx,
		      uint64_t lo, uint64_t hi)
{
	const struct hint_int *h = &b->hints[idx];
	uint64_t cur = lo;
	bool all = true;

	while (cur < hi && !stopped_at_or_below(h, cur)) {
		struct madvx_vma v;
		int ret = madvx_batch_vma(b, cur, &v, true);
		uint64_t pend;
		long r;

		b->vmas.queries++;
		if (ret == -ENOENT || (ret == 0 && v.start >= hi)) {
			hole_hint(b, advice, idx, cur, hi);
			return false;
		}
		if (ret) {
			/* No view of the VMAs at all: one madvise() decides. */
			r = madvise_retry(b, cur, hi - cur, advice);
			if (r == -ENOMEM)
				hole_hint(b, advice, idx, cur, hi);
			else if (r)
				stop_hint(b, idx, cur, (int)r);
			return !r;
		}
		if (v.start > cur) {
			hole_hint(b, advice, idx, cur, v.start);
			all = false;
			cur = v.start;
			continue;
		}
		pend = v.end < hi ? v.end : hi;
		r = madvise_retry(b, cur, pend - cur, advice);
		if (r == 0) {
			b->st.bytes += pend - cur;
		} else if (r == -ENOMEM) {
			/* Unmapped since we looked: count it as the hole it now is. */
			hole_hint(b, advice, idx, cur, pend);
			all = false;
		} else {
			/*
			 * madvise() stops at the VMA, not at the page: done
			 * ends at its start even where an earlier entry (cut
			 * at a stale bound) already did its lower part.
			 */
			stop_hint(b, idx, v.start > h->start ? v.start : h->start, (int)r);
			return false;
		}
		cur = pend;
	}
	return all && !(h->flags & HINT_STOPPED);
}

bool __madvx_entry_failed(struct madvx_batch *b, int advice, const struct madvx_entry *e,
			long err)
{
	uint64_t end = e->start + e->len;
	bool all = true;

	/* The plan's bounds may be why: the next flush looks everything up again. */
	if (!b->target)
		b->vmas.stale = true;
	for (uint32_t k = e->first; k <= e->last; k++) {
		uint32_t idx = pos_hint(b, e->via_sorted, k);
		const struct hint_int *h = &b->hints[idx];
		uint64_t lo = h->start > e->start ? h->start : e->start;
		uint64_t hi = h->end < end ? h->end : end;

		if (h->flags & HINT_STOPPED && h->stop < hi)
			hi = h->stop;
		if (lo < hi)
			all &= walk_part(b, advice, idx, lo, hi);
	}
	return all;
}

long __madvx_entry_madvise(struct madvx_batch *b, int advice, const struct madvx_entry *e)
{
	long ret = madvise_retry(b, e->start, e->len, advice);

	if (ret == 0)
		__madvx_entry_done(b, e, e->len);
	else
		__madvx_entry_failed(b, advice, e, ret);
	return ret;
}

MADVX_HOT bool __madvx_entry_touches_stopped(const struct madvx_batch *b,
					     const struct madvx_entry *e)
{
	uint64_t end = e->start + e->len;

	if (likely(!b->nstopped))
		return false;
	for (uint32_t k = e->first; k <= e->last; k++) {
		const struct hint_int *h = &b->hints[pos_hint(b, e->via_sorted, k)];

		if ((h->flags & HINT_STOPPED) && range_overlap(h->stop, h->end, e->start, end))
			return true;
	}
	return false;
}

static void issue_part(struct madvx_batch *b, int advice, struct madvx_entry *part,
		       uint64_t start, uint64_t end)
{
	part->start = start;
	part->len = end - start;
	b->st.madvise_fallbacks++;
	__madvx_entry_madvise(b, advice, part);
}

/*
 * Issue what @e's hints may still have: the union of their parts below
 * their stops (hints come sorted by start), each interval with madvise().
 */
void __madvx_entry_narrowed(struct madvx_batch *b, int advice, const struct madvx_entry *e)
{
	struct madvx_entry part = *e;
	uint64_t end = e->start + e->len, cs = 0, ce = 0;
	bool open = false;

	for (uint32_t k = e->first; k <= e->last; k++) {
		const struct hint_int *h = &b->hints[pos_hint(b, e->via_sorted, k)];
		uint64_t lo = h->start > e->start ? h->start : e->start;
		uint64_t hi = h->end < end ? h->end : end;

		if ((h->flags & HINT_STOPPED) && h->stop < hi)
			hi = h->stop;
		if (lo >= hi)
			continue;
		if (open && lo <= ce) {
			if (hi > ce)
				ce = hi;
			continue;
		}
		if (open)
			issue_part(b, advice, &part, cs, ce);
		cs = lo;
		ce = hi;
		open = true;
	}
	if (open)
		issue_part(b, advice, &part, cs, ce);
}

/* ---- issuing ---- */

static bool use_vector(struct madvx_batch *b, int advice)
{
	int i = madvx_advice_index(advice);

	/* Another process: process_madvise() is the only way there. */
	if (b->target)
		return true;
	return !(b->flags & MADVX_BATCH_NO_VECTOR) &&
	       madvx_has(MADVX_FEAT_PROCESS_MADVISE) &&
	       (__madvx_pmadv_advices() & (1ULL << i)) &&
	       !atomic_load_explicit(&pmadv_broken, memory_order_relaxed) &&
	       !(atomic_load_explicit(&pmadv_rejected, memory_order_relaxed) & (1ULL << i));
}

static void issue_madvise_each(struct madvx_batch *b, int advice,
			       struct madvx_entry *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (__madvx_entry_touches_stopped(b, &e[i])) {
			__madvx_entry_narrowed(b, advice, &e[i]);
			continue;
		}
		b->st.madvise_fallbacks++;
		__madvx_entry_madvise(b, advice, &e[i]);
	}
}

/*
 * process_madvise() failed on entry @e (no progress): resolve the entry with
 * madvise(), and find out whether the entry is bad or the call is.
 * Returns true when process_madvise() should not be used any more for @advice.
 */
static bool vector_entry_failed(struct madvx_batch *b, int advice,
				struct madvx_entry *e, long ret)
{
	bool applied;

	b->st.madvise_fallbacks++;
	if (b->target) {
		/* Its answers are the target's (ESRCH: it exited), not the call's. */
		__madvx_entry_failed(b, advice, e, ret);
		return false;
	}
	switch (ret) {
	case -ENOSYS:
		/* The version promised process_madvise(); this kernel has none. */
		__madvx_feature_demote(MADVX_FEAT_PROCESS_MADVISE);
		/* fall through */
	case -EBADF:
	case -ESRCH:
		/* No process_madvise, or no usable pidfd: decided once per process. */
		atomic_store(&pmadv_broken, true);
		__madvx_entry_madvise(b, advice, e);
		return true;
	case -EINVAL:
	case -EPERM:
		/* madvise() managed what process_madvise() refused: the call is the problem. */
		applied = __madvx_entry_failed(b, advice, e, ret);
		if (applied)
			atomic_fetch_or(&pmadv_rejected, 1ULL << madvx_advice_index(advice));
		return applied;
	default:
		/* ENOMEM (a stale map), EFAULT, ...: a property of the entry. */
		__madvx_entry_failed(b, advice, e, ret);
		return false;
	}
}

/*
 * The vector of a group of at most SMALL_VEC entries is built on the stack
 * (128 bytes, fine in a signal handler): a batch that flushes a few hints
 * at a time never touches its 16 KiB iov[], and a fresh batch's first
 * flush takes one page fault less (~10 us on a paravirtualised host,
 * BENCHMARKS.md p6).
 */
#define SMALL_VEC 8

/* Entries [i, i + m) that can go in one call: up to one whose hints stopped. */
static uint32_t fill_vector(struct madvx_batch *b, struct iovec *iov,
			    struct madvx_entry *e, uint32_t n)
{
	uint32_t m = 0;

	while (m < n && m < MADVX_MAX_VEC && (!m || !__madvx_entry_touches_stopped(b, &e[m]))) {
		iov[m] = (struct iovec){ (void *)(uintptr_t)e[m].start, e[m].len };
		m++;
	}
	return m;
}

static void issue_vector(struct madvx_batch *b, int advice,
			 struct madvx_entry *e, uint32_t n)
{
	int pidfd = b->target ? b->target->pidfd : __madvx_self_pidfd();
	struct iovec small[SMALL_VEC];
	struct iovec *iov = n <= SMALL_VEC ? small : b->iov;
	uint32_t i = 0, tries = 0;

	if (pidfd < 0 && pidfd != PIDFD_SELF_THREAD) {
		issue_madvise_each(b, advice, e, n);
		return;
	}
	while (i < n) {
		uint32_t m;
		uint64_t rem;
		long ret;

		if (__madvx_entry_touches_stopped(b, &e[i])) {
			__madvx_entry_narrowed(b, advice, &e[i++]);
			continue;
		}
		m = fill_vector(b, iov, e + i, n - i);
		ret = __madvx_sys_process_madvise(pidfd, iov, m, advice);
		b->st.syscalls++;
		b->st.vector_entries += m;
		if (ret > 0) {
			/* Whole entries first; the call stopped at the one that failed. */
			for (rem = (uint64_t)ret; m && rem >= e[i].len; m--, i++) {
				rem -= e[i].len;
				__madvx_entry_done(b, &e[i], e[i].len);
			}
			tries = 0;
			continue;
		}
		if ((ret == -EINTR || ret == -EAGAIN) && tries++ < MAX_RETRIES) {
			b->st.retries++;
			continue;
		}
		if (ret == -EBADF && pidfd == PIDFD_SELF_THREAD) {
			/*
			 * The version promised PIDFD_SELF; this kernel resolves
			 * no such fd, before doing anything: name ourselves
			 * with pidfd_open() from now on and resend the call.
			 */
			__madvx_feature_demote(MADVX_FEAT_PIDFD_SELF);
			pidfd = __madvx_self_pidfd();
			if (pidfd < 0) {
				issue_madvise_each(b, advice, e + i, n - i);
				return;
			}
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

MADVX_HOT static void issue_group(struct madvx_batch *b, int advice,
				  struct madvx_entry *e, uint32_t n)
{
	if (b->issue) {
		b->issue(b, advice, e, n);
	} else if (n == 1 && !b->target) {
		/*
		 * One entry of our own: madvise() is the same walk under
		 * the same lock (madvise_lock() decides for both calls),
		 * without a pidfd and an iovec to resolve, and the call a
		 * process has most likely made before: its first
		 * process_madvise() costs 10-20 us more (BENCHMARKS.md, p6).
		 */
		if (__madvx_entry_touches_stopped(b, e))
			__madvx_entry_narrowed(b, advice, e);
		else
			__madvx_entry_madvise(b, advice, e);
	} else if (use_vector(b, advice)) {
		issue_vector(b, advice, e, n);
	} else {
		issue_madvise_each(b, advice, e, n);
	}
}

/*
 * Issue the planned entries of one advice: the fast-path ones first, then
 * those predicted to fall back, never both in one call, so the sticky
 * mmap_lock fallback of vector_madvise() cannot reach a fast-path entry.
 * The partition is stable: each group stays in address order. Entries of
 * one kind - all fast, or all falling back as every entry does on a kernel
 * without per-VMA madvise - go as they are: spill[] is another page of the
 * storage, which a batch of few hints should not touch.
 */
MADVX_HOT void __madvx_issue_planned(struct madvx_batch *b, int advice,
				     struct madvx_entry *e, uint32_t n)
{
	uint32_t nfast = 0, nslow = 0;

	for (uint32_t i = 0; i < n; i++)
		nslow += e[i].fallback;
	if (!nslow || nslow == n) {
		issue_group(b, advice, e, n);
		return;
	}
	nslow = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (e[i].fallback)
			b->spill[nslow++] = e[i];
		else if (nfast++ != i)
			e[nfast - 1] = e[i];
	}
	if (nfast)
		issue_group(b, advice, e, nfast);
	if (nslow)
		issue_group(b, advice, b->spill, nslow);
}
