// SPDX-License-Identifier: MIT
/*
 * io_uring: the home of every io_uring call libmadvx makes (through liburing).
 */
#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "probe-backends.h"

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

void madvx_iouring_probe(struct madvx_probe_state *st)
{
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

	probe = io_uring_get_probe_ring(&ring);
	madv = probe && io_uring_opcode_supported(probe, IORING_OP_MADVISE);
	io_uring_free_probe(probe);
	if (madv && !(st->disabled & (1ULL << MADVX_FEAT_IO_URING_MADVISE))) {
		st->features |= 1ULL << MADVX_FEAT_IO_URING_MADVISE;
		if (!(st->disabled & (1ULL << MADVX_FEAT_IO_URING_MADVISE64)) &&
		    probe_madvise64(&ring))
			st->features |= 1ULL << MADVX_FEAT_IO_URING_MADVISE64;
	}
	io_uring_queue_exit(&ring);
}
