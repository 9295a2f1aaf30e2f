// SPDX-License-Identifier: MIT
/*
 * io_uring: the home of every io_uring call libmadvx makes (through liburing).
 */
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "batch.h"
#include "issue.h"
#include "iouring.h"
#include "probe.h"

#ifndef IORING_OP_MADVISE
#define IORING_OP_MADVISE 25	/* 5.6 */
#endif

/*
 * Does IORING_OP_MADVISE read a 64-bit length from sqe->off (6.12)? Ask for
 * MADV_WILLNEED of one page through sqe->off with sqe->len = 0, on a page we
 * just unmapped: a kernel that reads sqe->off advises an unmapped range and
 * answers -ENOMEM; an older one either advises nothing (len 0 -> 0) or
 * rejects the nonzero off with -EINVAL. Only -ENOMEM means yes, so a racing
 * mmap() into the hole can only make us say no, which is the safe answer
 * (lengths get split at 4 GiB).
 */
static bool probe_madvise64(struct io_uring *ring)
{
	size_t page = madvx_page_size();
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	void *hole;
	int res;

	hole = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED)
		return false;
	munmap(hole, page);

	sqe = io_uring_get_sqe(ring);
	if (!sqe)
		return false;
	io_uring_prep_madvise(sqe, hole, 0, MADV_WILLNEED);
	sqe->off = page;
	if (io_uring_submit_and_wait(ring, 1) < 1)
		return false;
	if (io_uring_peek_cqe(ring, &cqe))
		return false;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res == -ENOMEM;
}

#define PROBE_OPS 256		/* io_uring_get_probe_ring()'s size */

static void probe_iouring(struct madvx_probe_found *st)
{
	union {
		struct io_uring_probe p;
		char buf[sizeof(struct io_uring_probe) +
			 PROBE_OPS * sizeof(struct io_uring_probe_op)];
	} pbuf;
	struct io_uring_probe *probe;
	struct io_uring ring;
	bool madv;

	if (st->disabled & (1ULL << MADVX_FEAT_IO_URING_BUILT))
		return;
	st->features |= 1ULL << MADVX_FEAT_IO_URING_BUILT;
	if (st->disabled & (1ULL << MADVX_FEAT_IO_URING))
		return;
	/* Fails with -ENOSYS, -EPERM (sysctl, seccomp, containers) or -ENOMEM. */
	if (io_uring_queue_init(2, &ring, 0) < 0)
		return;
	st->features |= 1ULL << MADVX_FEAT_IO_URING;

	/*
	 * io_uring_get_probe_ring() would calloc() the answer: the probe must
	 * not allocate (a child forked while another thread held the
	 * allocator's lock would hang here), so it lands on the stack.
	 */
	memset(&pbuf, 0, sizeof(pbuf));
	probe = &pbuf.p;
	madv = io_uring_register_probe(&ring, probe, PROBE_OPS) >= 0 &&
	       io_uring_opcode_supported(probe, IORING_OP_MADVISE);
	if (madv && !(st->disabled & (1ULL << MADVX_FEAT_IO_URING_MADVISE))) {
		st->features |= 1ULL << MADVX_FEAT_IO_URING_MADVISE;
		if (!(st->disabled & (1ULL << MADVX_FEAT_IO_URING_MADVISE64)) &&
		    probe_madvise64(&ring))
			st->features |= 1ULL << MADVX_FEAT_IO_URING_MADVISE64;
	}
	io_uring_queue_exit(&ring);
}

void __madvx_iouring_probe_once(void)
{
	__madvx_probe_group(MADVX_PG_IOURING, probe_iouring);
}

/* ------------------------------------------------------------------------ */
/* The io_uring backend of madvx_async (contract: iouring.h)                */
/* ------------------------------------------------------------------------ */

#define DEFAULT_DEPTH 256
#define MAX_DEPTH 32768
#define NIL UINT32_MAX
/* user_data = UD_MAGIC | cookie << 32 | record index: ours on a shared ring. */
#define UD_MAGIC (0x6d78ULL << 48)

/*
 * One SQE in flight. The entry is a copy: the planner's entries live only
 * during the issue call, and everything an SQE refers to must live until
 * its CQE (the SQE itself carries the range by value).
 */
struct urec {
	struct madvx_entry e;
	int advice;
	uint32_t slot;		/* ticket slot of the batch */
	uint32_t next_free;
};

/* What the backend keeps per ticket slot. */
struct uslot {
	struct madvx_batch *b;
	uint32_t pending;	/* SQEs queued, not yet completed */
	bool planning;		/* SQEs are still being queued */
};

struct madvx_uring {
	struct io_uring own;
	struct io_uring *ring;
	bool caller_ring;
	bool madv64;
	uint8_t sqe_flags;	/* on every madvise SQE: IOSQE_ASYNC or 0 */
	uint64_t tag;
	struct urec *recs;
	uint32_t nrecs;
	uint32_t free_head;
	uint32_t inflight;	/* records queued or running */
	/* What may still run, since the last IOSQE_IO_DRAIN: advices and bounds. */
	uint64_t adv_mask;
	uint64_t lo, hi;
	madvx_cqe_fn on_cqe;
	void *on_cqe_ctx;
	struct uslot *slots;
	uint32_t nslots;
	uint32_t cur_slot;	/* the slot being planned */
	madvx_uring_done_fn done;
	void *done_ctx;
};

bool __madvx_uring_caller_ring(const struct madvx_uring *u)
{
	return u->caller_ring;
}

/*
 * Kernels with "io_uring/advise: complete per-VMA-lock madvise requests
 * inline" (kernel/patches/0005) run DONTNEED/FREE/COLD SQEs inside
 * io_uring_enter() of the submitting thread; 7.3 always punts them to io-wq.
 * The backend's promise is that the caller hands the work off, so ask for
 * io-wq explicitly (a no-op on 7.3) - unless the ring has an SQ thread,
 * which then does the work inline and is the hand-off itself.
 */
static uint8_t handoff_flags(const struct io_uring *ring)
{
	return ring->flags & IORING_SETUP_SQPOLL ? 0 : IOSQE_ASYNC;
}

int __madvx_uring_create(struct madvx_uring **out, const struct madvx_async_opts *o,
			 uint32_t nslots, int efd, madvx_uring_done_fn done, void *done_ctx)
{
	static _Atomic uint32_t cookies;
	struct madvx_uring *u;
	uint32_t depth = o->queue_depth ? o->queue_depth : DEFAULT_DEPTH;
	int ret;

	if (depth > MAX_DEPTH)
		return -EINVAL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	if (o->ring) {
		u->ring = o->ring;
		u->caller_ring = true;
		u->nrecs = depth;
	} else {
		/* CQ = 2 * SQ by default: at most that many records in flight, no overflow. */
		ret = io_uring_queue_init(depth, &u->own, 0);
		if (ret < 0) {
			free(u);
			return ret;
		}
		u->ring = &u->own;
		u->nrecs = u->own.cq.ring_entries;
		/* Event loops wake on CQEs; madvx_async_poll() reaps them. */
		io_uring_register_eventfd(&u->own, efd);
	}
	u->recs = calloc(u->nrecs, sizeof(*u->recs));
	u->slots = calloc(nslots, sizeof(*u->slots));
	if (!u->recs || !u->slots) {
		if (!u->caller_ring)
			io_uring_queue_exit(&u->own);
		free(u->recs);
		free(u->slots);
		free(u);
		return -ENOMEM;
	}
	u->nslots = nslots;
	u->done = done;
	u->done_ctx = done_ctx;
	for (uint32_t i = 0; i < u->nrecs; i++)
		u->recs[i].next_free = i + 1 < u->nrecs ? i + 1 : NIL;
	u->free_head = 0;
	__madvx_iouring_probe_once();
	u->madv64 = madvx_has(MADVX_FEAT_IO_URING_MADVISE64);
	u->sqe_flags = handoff_flags(u->ring);
	u->tag = UD_MAGIC | ((uint64_t)(atomic_fetch_add(&cookies, 1) & 0xffff) << 32);
	u->on_cqe = o->on_cqe;
	u->on_cqe_ctx = o->on_cqe_ctx;
	*out = u;
	return 0;
}

void __madvx_uring_free(struct madvx_uring *u)
{
	if (!u->caller_ring)
		io_uring_queue_exit(&u->own);
	free(u->recs);
	free(u->slots);
	free(u);
}

/* One of our CQEs: credit the entry, finish the ticket when it was its last. */
static void rec_complete(struct madvx_uring *u, uint32_t idx, int32_t res)
{
	struct urec *r = &u->recs[idx];
	struct uslot *s = &u->slots[r->slot];

	u->inflight--;
	/*
	 * Anything but full success (an error; -ECANCELED: a linked part that
	 * never ran) is resolved here, hint by hint, with madvise(). A later
	 * epoch's SQE that overlaps this one with another advice may already
	 * have run: see "io_uring" in include/madvx.h.
	 */
	if (res == 0)
		__madvx_entry_done(s->b, &r->e, r->e.len);
	else
		__madvx_entry_failed(s->b, r->advice, &r->e, res);
	r->next_free = u->free_head;
	u->free_head = idx;
	if (--s->pending == 0 && !s->planning)
		u->done(u->done_ctx, r->slot);
}

int __madvx_uring_cqe(struct madvx_uring *u, uint64_t ud, int32_t res)
{
	uint32_t idx = (uint32_t)ud;

	if (!u || (ud & ~0xffffffffULL) != u->tag || idx >= u->nrecs)
		return 0;
	rec_complete(u, idx, res);
	return 1;
}

int __madvx_uring_reap(struct madvx_uring *u, bool wait)
{
	int n = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t ud;
		int32_t res;
		uint32_t flags;
		int ret = io_uring_peek_cqe(u->ring, &cqe);

		if (ret == -EAGAIN) {
			if (!wait || n)
				break;
			ret = io_uring_wait_cqe(u->ring, &cqe);
			if (ret == -EINTR || ret == -EAGAIN)
				continue;
		}
		if (ret < 0)
			return ret;
		/* Seen before handling: handlers may queue SQEs and reap again. */
		ud = cqe->user_data;
		res = cqe->res;
		flags = cqe->flags;
		io_uring_cqe_seen(u->ring, cqe);
		n++;
		if (!__madvx_uring_cqe(u, ud, res) && u->on_cqe)
			u->on_cqe(u->on_cqe_ctx, ud, res, flags);
	}
	return n;
}

/*
 * Submit everything in the SQ. Partial submits loop; -EBUSY/-EAGAIN (CQ
 * overflow backlog, no memory for requests) reap completions first; a
 * persistent failure with nothing left to reap gives up after a bound, and
 * those SQEs go with the next submit.
 */
static void submit_all(struct madvx_uring *u)
{
	int stuck = 0;

	while (io_uring_sq_ready(u->ring)) {
		int ret = io_uring_submit(u->ring);

		if (ret > 0) {
			stuck = 0;
			continue;
		}
		if (ret == -EINTR)
			continue;
		if (stuck++ == 16)
			break;
		/* Completions free resources: take one if any is running. */
		__madvx_uring_reap(u, u->inflight > io_uring_sq_ready(u->ring));
	}
}

static uint32_t get_rec(struct madvx_uring *u)
{
	uint32_t idx;

	while (u->free_head == NIL) {
		submit_all(u);
		__madvx_uring_reap(u, true);
	}
	idx = u->free_head;
	u->free_head = u->recs[idx].next_free;
	return idx;
}

static struct io_uring_sqe *get_sqe(struct madvx_uring *u)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(u->ring))) {
		submit_all(u);
		if (!(sqe = io_uring_get_sqe(u->ring)))
			__madvx_uring_reap(u, u->inflight > io_uring_sq_ready(u->ring));
		else
			break;
	}
	return sqe;
}

static void queue_part(struct madvx_uring *u, uint32_t slot, int advice,
		       const struct madvx_entry *part, bool link)
{
	uint32_t idx = get_rec(u);
	struct urec *r = &u->recs[idx];
	struct io_uring_sqe *sqe;

	r->e = *part;
	r->advice = advice;
	r->slot = slot;
	u->slots[slot].pending++;
	/* Counted once it has an SQE: get_sqe() only waits for what was submitted. */
	sqe = get_sqe(u);
	u->inflight++;
	if (part->len > UINT32_MAX) {
		/* liburing 2.3 has no io_uring_prep_madvise64: the 64-bit length goes in sqe->off. */
		io_uring_prep_madvise(sqe, (void *)(uintptr_t)part->start, 0, advice);
		sqe->off = part->len;
	} else {
		io_uring_prep_madvise(sqe, (void *)(uintptr_t)part->start,
				      (off_t)part->len, advice);
	}
	sqe->flags |= u->sqe_flags;
	if (link)
		sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, u->tag | idx);
}

/*
 * Wait until nothing of ours is in flight: every earlier SQE completed and
 * its CQE handled - including the madvise() resolution of failed entries,
 * which IOSQE_IO_DRAIN could not order (it waits for completions, not for
 * what the reaper does with them).
 */
static void quiesce(struct madvx_uring *u)
{

	submit_all(u);
	while (u->inflight)
		__madvx_uring_reap(u, true);
}

/*
 * madvx_issue_fn: one planned group (one advice, in issue order). io-wq
 * runs SQEs concurrently, so where this group overlaps anything of another
 * advice that may still run (an earlier epoch, or an earlier submission),
 * the group waits until that is done (quiesce()). Groups that cannot
 * overlap what runs go in at once. Entries are whole runs (the planner does
 * not cut them for deferred issue): each SQE is one madvise() walk, which
 * stops at the first VMA that refuses, as madvise() of each hint would.
 */
static void uring_issue(struct madvx_batch *b, int advice, struct madvx_entry *e,
			uint32_t n)
{
	struct madvx_uring *u = __madvx_batch_issue_ctx(b);
	uint32_t slot = u->cur_slot;
	uint64_t bit = 1ULL << madvx_advice_index(advice);
	uint64_t lo = UINT64_MAX, hi = 0;
	uint64_t chunk = (1ULL << 32) - madvx_page_size();

	for (uint32_t i = 0; i < n; i++) {
		if (e[i].start < lo)
			lo = e[i].start;
		if (e[i].start + e[i].len > hi)
			hi = e[i].start + e[i].len;
	}
	/* Whole page-table blocks, as the batch's ordering rule counts them. */
	lo &= ~(madvx_pmd_size() - 1);
	hi = hi > UINT64_MAX - (madvx_pmd_size() - 1) ? UINT64_MAX :
	     (hi + madvx_pmd_size() - 1) & ~(madvx_pmd_size() - 1);
	if (u->inflight && (u->adv_mask & ~bit) && lo < u->hi && u->lo < hi)
		quiesce(u);
	/* Nothing in flight: nothing to order against. */
	if (!u->inflight) {
		u->adv_mask = bit;
		u->lo = lo;
		u->hi = hi;
	} else {
		u->adv_mask |= bit;
		if (lo < u->lo)
			u->lo = lo;
		if (hi > u->hi)
			u->hi = hi;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct madvx_entry part = e[i];
		uint64_t end = e[i].start + e[i].len;

		if (u->madv64 || e[i].len <= UINT32_MAX) {
			queue_part(u, slot, advice, &part, false);
			continue;
		}
		/*
		 * The kernel reads 32 bits only: pieces below 4 GiB, page
		 * aligned, linked so that they run in order and a failing
		 * piece cancels the rest, as one madvise() would stop there.
		 */
		for (uint64_t s = e[i].start; s < end; s += chunk) {
			part.start = s;
			part.len = end - s < chunk ? end - s : chunk;
			queue_part(u, slot, advice, &part, s + chunk < end);
		}
	}
}

void __madvx_uring_submit(struct madvx_uring *u, uint32_t slot, struct madvx_batch *b)
{
	struct uslot *s = &u->slots[slot];

	s->b = b;
	s->pending = 0;
	s->planning = true;
	u->cur_slot = slot;
	__madvx_batch_issue_deferred(b, uring_issue, u);
	s->planning = false;
	submit_all(u);
	if (!s->pending)
		u->done(u->done_ctx, slot);
}
