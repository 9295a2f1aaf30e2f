// SPDX-License-Identifier: MIT
/*
 * gc-async: a toy region-based collector that gives freed regions back to
 * the kernel without stalling its mutator, and honours the ticket contract
 * of madvx_async_submit(): a region released under a ticket is handed out
 * again only after that ticket completed.
 *
 * Each cycle the "mutator" takes regions from the free list and fills them;
 * the "collector" frees about half of the live ones, queues one DONTNEED
 * hint per freed region in a batch and submits the batch. A freed region
 * remembers its ticket; allocation polls that ticket and skips the region
 * while it is in flight. Two batches alternate, so one cycle's release runs
 * while the next cycle's is being built.
 *
 * Self-check: a region handed out again must read as zeros (DONTNEED of
 * private anonymous memory) and not be resident before it is written.
 * Usage: gc-async [--quick]. Exit 0 on success.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <madvx.h>

#define NREGIONS 512
#define REGION (64 * 1024)

struct region {
	bool live;
	uint64_t ticket;	/* nonzero: released under this ticket, maybe in flight */
};

static struct region regions[NREGIONS];
static struct madvx_async *async;
static unsigned long waits, reused;

/* Is region @i free for reuse? Collects its ticket when complete. */
static bool reusable(int i)
{
	int ret;

	if (regions[i].live)
		return false;
	if (!regions[i].ticket)
		return true;
	ret = madvx_async_poll(async, regions[i].ticket);
	if (ret == -EINPROGRESS)
		return false;
	/* Collected by us (0 / -errno) or by another region of the same ticket (-ENOENT). */
	for (int k = 0; k < NREGIONS; k++)
		if (regions[k].ticket == regions[i].ticket)
			regions[k].ticket = 0;
	return true;
}

static int check_zero(const unsigned char *p)
{
	unsigned char vec[REGION / 4096];

	if (mincore((void *)p, REGION, vec) == 0)
		for (size_t k = 0; k < sizeof(vec); k++)
			if (vec[k] & 1)
				return -1;
	for (size_t k = 0; k < REGION; k += 512)
		if (p[k])
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 && !strcmp(argv[1], "--quick") ? 50 : 1000;
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = NREGIONS };
	struct madvx_batch *batch[2];
	uint64_t bticket[2] = { 0, 0 };
	unsigned char *heap;
	unsigned int seed = 1;
	int ret;

	heap = mmap(NULL, (size_t)NREGIONS * REGION, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED)
		return 1;
	madvise(heap, (size_t)NREGIONS * REGION, MADV_NOHUGEPAGE);
	/* The heap is one mapping we never split: skip VMA lookups. */
	madvx_region_register(heap, (size_t)NREGIONS * REGION, 0);
	if (madvx_async_create(NULL, &async) ||
	    madvx_batch_create(&bo, &batch[0]) || madvx_batch_create(&bo, &batch[1]))
		return 1;
	printf("gc-async: %d regions of %d KiB, backend %s\n", NREGIONS, REGION / 1024,
	       madvx_async_backend_name(madvx_async_backend_get(async)));

	for (int c = 0; c < cycles; c++) {
		struct madvx_batch *b = batch[c % 2];

		/* Mutator: allocate up to 64 regions and fill them. */
		for (int n = 0, i = rand_r(&seed) % NREGIONS, k = 0; n < 64 && k < NREGIONS;
		     k++, i = (i + 1) % NREGIONS) {
			bool pending = regions[i].ticket != 0;

			if (!reusable(i)) {
				waits += pending && !regions[i].live;
				continue;
			}
			if (pending) {
				reused++;
				if (check_zero(heap + (size_t)i * REGION)) {
					fprintf(stderr, "region %d reused but not released\n", i);
					return 1;
				}
			}
			memset(heap + (size_t)i * REGION, 0xa0 + c % 16, REGION);
			regions[i].live = true;
			n++;
		}
		/* This batch's previous ticket must be collected before we refill it. */
		if (bticket[c % 2]) {
			ret = madvx_async_wait(async, bticket[c % 2]);
			if (ret < 0 && ret != -ENOENT)
				return 1;
			bticket[c % 2] = 0;
		}
		/* Collector: free about half of the live regions. */
		for (int i = 0; i < NREGIONS; i++) {
			if (!regions[i].live || rand_r(&seed) % 2)
				continue;
			regions[i].live = false;
			if (madvx_batch_add(b, heap + (size_t)i * REGION, REGION, MADV_DONTNEED) < 0)
				return 1;
			regions[i].ticket = UINT64_MAX;	/* set below, once we have it */
		}
		if (madvx_async_submit(async, b, &bticket[c % 2]))
			return 1;
		for (int i = 0; i < NREGIONS; i++)
			if (regions[i].ticket == UINT64_MAX)
				regions[i].ticket = bticket[c % 2];
	}
	madvx_async_free(async);	/* waits for what is in flight */
	madvx_batch_free(batch[0]);
	madvx_batch_free(batch[1]);
	munmap(heap, (size_t)NREGIONS * REGION);
	printf("gc-async: %d cycles, %lu regions reused after their release completed, "
	       "%lu skipped while in flight\n", cycles, reused, waits);
	return 0;
}
