// SPDX-License-Identifier: MIT
/*
 * userfaultfd operations with exact progress: COPY, ZEROPAGE, MOVE,
 * CONTINUE, POISON, WRITEPROTECT, WAKE on one range, and move/copy lists
 * coalesced into one ioctl per run that stays inside one VMA on both sides.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sys.h"
#include "uffd.h"
#include "vma.h"

/* How long MADVX_UFFD_RETRY keeps draining and retrying an -EAGAIN op. */
#define RETRY_NS (2ULL * 1000 * 1000 * 1000)

/* ---------------------------------------------------------------------- */
/* Operations with exact progress                                          */
/* ---------------------------------------------------------------------- */

enum uffd_op { OP_COPY, OP_ZEROPAGE, OP_MOVE, OP_CONTINUE, OP_POISON };

/*
 * One ioctl. Returns the bytes it resolved from @dst (> 0) or -errno for
 * the page at @dst. The kernel writes its progress field (copy, move, ...)
 * with either, and answers -EAGAIN for a short but positive result; errors
 * found before it starts (bad range) leave the field alone, so it starts at 0
 * and the ioctl's own answer counts then.
 */
static int64_t op_ioctl(struct madvx_uffd *u, enum uffd_op op, uint64_t dst,
			uint64_t src, uint64_t len, unsigned int flags)
{
	union {
		struct uffdio_copy copy;
		struct uffdio_zeropage zero;
		struct uffdio_move move;
		struct uffdio_continue cont;
		struct uffdio_poison poison;
	} a;
	bool dontwake = flags & MADVX_UFFD_DONTWAKE;
	unsigned long req;
	__s64 *progress;
	int ret;

	switch (op) {
	case OP_COPY:
		a.copy = (struct uffdio_copy){ .dst = dst, .src = src, .len = len,
			.mode = (dontwake ? UFFDIO_COPY_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_COPY_MODE_WP : 0) };
		progress = &a.copy.copy;
		req = UFFDIO_COPY;
		break;
	case OP_ZEROPAGE:
		a.zero = (struct uffdio_zeropage){ .range = { dst, len },
			.mode = dontwake ? UFFDIO_ZEROPAGE_MODE_DONTWAKE : 0 };
		progress = &a.zero.zeropage;
		req = UFFDIO_ZEROPAGE;
		break;
	case OP_MOVE:
		a.move = (struct uffdio_move){ .dst = dst, .src = src, .len = len,
			.mode = (dontwake ? UFFDIO_MOVE_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_ALLOW_SRC_HOLES) ?
				 UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES : 0) };
		progress = &a.move.move;
		req = UFFDIO_MOVE;
		break;
	case OP_CONTINUE:
		a.cont = (struct uffdio_continue){ .range = { dst, len },
			.mode = (dontwake ? UFFDIO_CONTINUE_MODE_DONTWAKE : 0) |
				((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_CONTINUE_MODE_WP : 0) };
		progress = &a.cont.mapped;
		req = UFFDIO_CONTINUE;
		break;
	case OP_POISON:
	default:
		a.poison = (struct uffdio_poison){ .range = { dst, len },
			.mode = dontwake ? UFFDIO_POISON_MODE_DONTWAKE : 0 };
		progress = &a.poison.updated;
		req = UFFDIO_POISON;
		break;
	}
	*progress = 0;
	ret = __madvx_sys_ioctl(u->fd, req, &a);
	CNT_ADD(u, n_ioctls, 1);
	if (!ret)
		return (int64_t)len;
	if (*progress)
		return *progress;
	return ret;
}

/*
 * MADVX_UFFD_RETRY: the op met mmap_changing. Read the pending events into
 * the queue (which ends mmap_changing once the event is read), or give the
 * thread that is about to queue it, or another reader, a moment. True while
 * the retry budget that started at *@t0 lasts.
 */
static bool retry_eagain(struct madvx_uffd *u, unsigned int flags, uint64_t *t0)
{
	if (!(flags & MADVX_UFFD_RETRY))
		return false;
	if (!*t0)
		*t0 = madvx_now_ns();
	else if (madvx_now_ns() - *t0 > RETRY_NS)
		return false;
	madvx_uffd_drain(u, 1);
	return true;
}

/*
 * Where one ioctl may end when it starts at @dst (and @src): the end of the
 * VMA around each, so that the op stays inside one VMA on both sides. When
 * the bounds are unknown (lookup failed, unmapped) the kernel decides.
 */
static uint64_t vma_limit(struct madvx_uffd *u, struct madvx_vma_cache *c,
			  uint64_t dst, uint64_t src, bool has_src, uint64_t end)
{
	struct madvx_vma v;
	uint64_t lim = end;

	if (!c)
		return end;
	if (__madvx_vma_find(c, dst, &v) == 0 && v.start <= dst && v.end < lim)
		lim = v.end;
	if (has_src && __madvx_vma_find(c, src, &v) == 0 && v.start <= src &&
	    v.end - src < lim - dst)
		lim = dst + (v.end - src);
	if (lim < end)
		CNT_ADD(u, n_splits, 1);
	return lim;
}

/* A run: items contiguous on both sides, in dst order, being worked through. */
struct run {
	struct madvx_uffd_item *items;	/* sorted by dst */
	size_t first, last;	/* the run is items[first..last] */
	size_t cur;		/* the item at the cursor */
	uint64_t off;		/* cursor offset inside it */
	size_t first_err;	/* first item that failed, SIZE_MAX if none */
};

static struct madvx_uffd_item *run_item(struct run *r)
{
	return &r->items[r->cur];
}

/* Credit @bytes at the cursor to the items they fall in. */
static void run_credit(struct run *r, uint64_t bytes, bool existed)
{
	while (bytes && r->cur <= r->last) {
		struct madvx_uffd_item *it = run_item(r);
		uint64_t take = it->len - r->off;

		if (take > bytes)
			take = bytes;
		it->done += take;
		if (existed)
			it->existed += take;
		r->off += take;
		bytes -= take;
		if (r->off == it->len) {
			r->cur++;
			r->off = 0;
		}
	}
}

/* The item at the cursor failed: give it @err and move to the next one. */
static uint64_t run_fail(struct run *r, int err)
{
	struct madvx_uffd_item *it = run_item(r);
	uint64_t skip = it->len - r->off;

	it->err = err;
	if (r->cur < r->first_err)
		r->first_err = r->cur;
	r->cur++;
	r->off = 0;
	return skip;
}

static bool fatal_err(int err)
{
	return err == -EAGAIN || err == -ENOMEM || err == -ESRCH || err == -EINTR;
}

/*
 * Work through one run, one ioctl per stretch that stays in one VMA. EEXIST
 * pages are credited as present (their waiters woken) and skipped. Returns
 * 0, or a fatal -errno that must end the whole call.
 */
static int run_op(struct madvx_uffd *u, enum uffd_op op, struct run *r,
		  struct madvx_vma_cache *vc, unsigned int flags)
{
	const struct madvx_uffd_item *head = run_item(r);
	uint64_t dst0 = head->dst, src0 = head->src, pos = head->dst, seg_end = pos;
	uint64_t page = madvx_page_size(), t0 = 0, end;
	bool has_src = op == OP_COPY || op == OP_MOVE;

	r->off = 0;
	end = r->items[r->last].dst + r->items[r->last].len;
	while (pos < end) {
		uint64_t src = src0 + (pos - dst0);
		int64_t n;

		if (pos >= seg_end)
			seg_end = vma_limit(u, vc, pos, src, has_src, end);
		n = op_ioctl(u, op, pos, src, seg_end - pos, flags);
		if (n > 0) {
			CNT_ADD(u, n_bytes, (uint64_t)n);
			run_credit(r, (uint64_t)n, false);
			pos += (uint64_t)n;
			continue;
		}
		if (n == -EEXIST && !(flags & MADVX_UFFD_EEXIST_STOP)) {
			/* Someone else resolved it: its waiters may still sleep. */
			if (!(flags & MADVX_UFFD_DONTWAKE))
				madvx_uffd_wake(u, pos, page);
			CNT_ADD(u, n_existed, page);
			run_credit(r, page, true);
			pos += page;
			continue;
		}
		if (n == -EAGAIN) {
			CNT_ADD(u, n_eagain, 1);
			if (retry_eagain(u, flags, &t0))
				continue;
		}
		if (fatal_err((int)n)) {
			run_item(r)->err = (int)n;
			if (r->cur < r->first_err)
				r->first_err = r->cur;
			return (int)n;
		}
		pos += run_fail(r, (int)n);
		seg_end = pos;	/* bounds are looked up again for the next item */
	}
	return 0;
}

/* The flags each operation takes; anything else is -EINVAL, not ignored. */
static unsigned int op_flags(enum uffd_op op)
{
	unsigned int common = MADVX_UFFD_DONTWAKE | MADVX_UFFD_EEXIST_STOP | MADVX_UFFD_RETRY;

	switch (op) {
	case OP_COPY:
	case OP_CONTINUE:
		return common | MADVX_UFFD_MAP_WP;
	case OP_MOVE:
		return common | MADVX_UFFD_ALLOW_SRC_HOLES;
	default:
		return common;
	}
}

static int single_op(struct madvx_uffd *u, enum uffd_op op, uint64_t dst,
		     uint64_t src, uint64_t len, unsigned int flags, uint64_t *done)
{
	struct madvx_uffd_item it = { .dst = dst, .src = src, .len = len };
	struct run r = { .items = &it, .first_err = SIZE_MAX };
	uint64_t mask = madvx_page_size() - 1;

	if (done)
		*done = 0;
	if (!u || (flags & ~op_flags(op)))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (!len)
		return 0;
	/* COPY reads its source at any alignment; MOVE moves whole pages. */
	if ((dst | len) & mask || (op == OP_MOVE && (src & mask)) || dst + len < dst)
		return -EINVAL;
	run_op(u, op, &r, NULL, flags);
	if (done)
		*done = it.done;
	return it.err;
}

MADVX_API int madvx_uffd_copy(struct madvx_uffd *u, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_COPY, dst, src, len, flags, done);
}

MADVX_API int madvx_uffd_zeropage(struct madvx_uffd *u, uint64_t dst,
				  uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_ZEROPAGE, dst, 0, len, flags, done);
}

MADVX_API int madvx_uffd_move(struct madvx_uffd *u, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_MOVE, dst, src, len, flags, done);
}

MADVX_API int madvx_uffd_continue(struct madvx_uffd *u, uint64_t addr,
				  uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_CONTINUE, addr, 0, len, flags, done);
}

MADVX_API int madvx_uffd_poison(struct madvx_uffd *u, uint64_t addr,
				uint64_t len, unsigned int flags, uint64_t *done)
{
	return single_op(u, OP_POISON, addr, 0, len, flags, done);
}

MADVX_API int madvx_uffd_writeprotect(struct madvx_uffd *u, uint64_t addr,
				      uint64_t len, unsigned int flags)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = addr, .len = len },
		.mode = ((flags & MADVX_UFFD_MAP_WP) ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
			((flags & MADVX_UFFD_DONTWAKE) ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0),
	};
	uint64_t t0 = 0;
	int ret;

	if (!u || flags & ~(MADVX_UFFD_DONTWAKE | MADVX_UFFD_MAP_WP | MADVX_UFFD_RETRY))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	for (;;) {
		ret = __madvx_sys_ioctl(u->fd, UFFDIO_WRITEPROTECT, &wp);
		CNT_ADD(u, n_ioctls, 1);
		if (ret != -EAGAIN)
			break;
		CNT_ADD(u, n_eagain, 1);
		if (!retry_eagain(u, flags, &t0))
			break;
	}
	if (!ret)
		CNT_ADD(u, n_bytes, len);
	return ret;
}

MADVX_API int madvx_uffd_wake(struct madvx_uffd *u, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = { .start = addr, .len = len };

	if (!u)
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	CNT_ADD(u, n_ioctls, 1);
	return __madvx_sys_ioctl(u->fd, UFFDIO_WAKE, &r);
}

/* ---------------------------------------------------------------------- */
/* Move / copy lists                                                       */
/* ---------------------------------------------------------------------- */

/*
 * Nothing on the list paths allocates: a thread that fork()s holds the
 * malloc locks while the kernel makes it wait for its FORK event to be read,
 * so a GC thread that needs to drain that event must not call malloc. Items
 * are therefore sorted in place (heapsort: no buffer, unlike qsort()).
 */
static bool item_before(const struct madvx_uffd_item *a, const struct madvx_uffd_item *b)
{
	return a->dst < b->dst || (a->dst == b->dst && a->src < b->src);
}

static void sift_down(struct madvx_uffd_item *it, size_t root, size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;
		struct madvx_uffd_item tmp;

		if (child >= n)
			return;
		if (child + 1 < n && item_before(&it[child], &it[child + 1]))
			child++;
		if (!item_before(&it[root], &it[child]))
			return;
		tmp = it[root];
		it[root] = it[child];
		it[child] = tmp;
		root = child;
	}
}

static void sort_items(struct madvx_uffd_item *it, size_t n)
{
	size_t i;

	for (i = n / 2; i-- > 0;)
		sift_down(it, i, n);
	for (i = n; i-- > 1;) {
		struct madvx_uffd_item tmp = it[0];

		it[0] = it[i];
		it[i] = tmp;
		sift_down(it, 0, i);
	}
}

/*
 * Every item is touched as few times as possible (a GC hands in tens of
 * thousands of 4 KiB items): one pass validates, resets the results and
 * notices whether the items are already in dst order (the usual plan), one
 * pass coalesces and issues, and the first failed item is tracked on the way.
 */
static int list_op(struct madvx_uffd *u, enum uffd_op op,
		   struct madvx_uffd_item *items, size_t count, unsigned int flags)
{
	uint64_t mask = madvx_page_size() - 1;
	struct madvx_vma_span span[MADVX_VMA_CACHE];
	struct madvx_vma_cache vc;
	size_t first = SIZE_MAX;
	bool sorted = true;
	int fatal = 0;

	if (!u || (!items && count) || (flags & ~op_flags(op)))
		return -EINVAL;
	if (inherited(u))
		return -ECHILD;
	if (!count)
		return 0;
	madvx_vma_cache_init(&vc, span);	/* no memset: 4 KiB we mostly never read */
	for (size_t i = 0; i < count; i++) {
		struct madvx_uffd_item *it = &items[i];

		it->done = it->existed = 0;
		it->err = 0;
		if ((it->dst | it->len | (op == OP_MOVE ? it->src : 0)) & mask ||
		    it->dst + it->len < it->dst || it->src + it->len < it->src)
			it->err = -EINVAL;
		if (i && item_before(it, it - 1))
			sorted = false;
	}
	if (!sorted)
		sort_items(items, count);

	for (size_t i = 0; i < count && !fatal;) {
		struct run r = { .items = items, .first = i, .cur = i, .first_err = SIZE_MAX };
		size_t j = i;

		if (items[i].err || !items[i].len) {
			if (items[i].err && i < first)
				first = i;
			i++;
			continue;
		}
		/* Coalesce while the next item continues this one on both sides. */
		while (j + 1 < count) {
			const struct madvx_uffd_item *a = &items[j], *b = &items[j + 1];

			if (b->err || !b->len || b->dst != a->dst + a->len ||
			    b->src != a->src + a->len)
				break;
			j++;
		}
		r.last = j;
		fatal = run_op(u, op, &r, &vc, flags);
		if (r.first_err < first)
			first = r.first_err;
		if (fatal) {
			/* Everything not finished carries the error that ended the call. */
			for (size_t k = i; k < count; k++) {
				if (items[k].done < items[k].len && !items[k].err)
					items[k].err = fatal;
				if (items[k].err && k < first)
					first = k;
			}
		}
		i = j + 1;
	}
	return first == SIZE_MAX ? 0 : items[first].err;
}

MADVX_API int madvx_uffd_move_list(struct madvx_uffd *u, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags)
{
	return list_op(u, OP_MOVE, items, count, flags);
}

MADVX_API int madvx_uffd_copy_list(struct madvx_uffd *u, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags)
{
	return list_op(u, OP_COPY, items, count, flags);
}
