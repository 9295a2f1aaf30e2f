// SPDX-License-Identifier: MIT
/*
 * mi-route: what Debian's mimalloc (2.0.9) purges, routed through libmadvx.
 *
 * mimalloc 2.0.9 has no hook for its purges (README.md): they are direct
 * madvise() calls in its OS layer (src/os.c). The only way in without
 * rebuilding mimalloc is ELF symbol interposition: this executable defines
 * madvise() (and mprotect(), only to count it), so libmimalloc.so's calls
 * bind to ours instead of glibc's. Ours applies MADV_FREE / MADV_DONTNEED
 * through a libmadvx batch of one hint, flushed before returning - mimalloc
 * reuses the range the moment the call returns, so nothing can wait.
 *
 * It then runs a 2-thread mi_malloc/mi_free churn (checksum word per page,
 * verified at free), frees everything, mi_collect(true), and checks RSS.
 * Exit 0 pass, 1 fail, 77 cannot run here (e.g. interposition not in effect).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <madvx.h>
#include <mimalloc.h>

#include "example-rss.h"

#define PAGE 4096UL
#define THREADS 2
#define SLOTS 512
#define OPS 20000

static struct {
	_Atomic uint64_t free_calls, dontneed_calls, other_calls, bytes, failed,
		mprotect_calls, big_ranges;
	_Atomic bool on;
} c;

static __thread bool inside, tb_gone;
static __thread struct madvx_batch *tb;
static pthread_key_t tb_key;

static void tb_free(void *b)
{
	madvx_batch_free(b);
	tb = NULL;
	tb_gone = true;	/* mimalloc's own thread-exit purges come later */
}

static int raw_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* One hint, applied before returning; errno as madvise(2) would set it. */
static int route(void *addr, size_t len, int advice)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = 1 };
	const struct madvx_hint *res;
	uint32_t n;
	int ret;

	if (!tb) {
		if (tb_gone || madvx_batch_create(&o, &tb))
			return raw_madvise(addr, len, advice);
		pthread_setspecific(tb_key, tb);
	}
	ret = madvx_batch_add(tb, addr, len, advice);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	madvx_batch_flush(tb);
	res = madvx_batch_results(tb, &n);
	if (n == 1 && res[0].err) {
		atomic_fetch_add(&c.failed, 1);
		errno = -res[0].err;
		return -1;
	}
	return 0;
}

/*
 * Interposes glibc's madvise() for libmimalloc.so (and any other shared
 * object). Default visibility: the project builds with -fvisibility=hidden,
 * and a hidden definition is not exported, so it would not interpose.
 */
#define INTERPOSE __attribute__((visibility("default")))

INTERPOSE int madvise(void *addr, size_t len, int advice)
{
	int ret, e;

	/* libmadvx's own madvise() calls (probe, fallbacks) go straight to the kernel. */
	if (inside || !atomic_load(&c.on) ||
	    (advice != MADV_FREE && advice != MADV_DONTNEED)) {
		if (atomic_load(&c.on))
			atomic_fetch_add(&c.other_calls, 1);
		return raw_madvise(addr, len, advice);
	}
	atomic_fetch_add(advice == MADV_FREE ? &c.free_calls : &c.dontneed_calls, 1);
	atomic_fetch_add(&c.bytes, len);
	if (len > 64 * PAGE)
		atomic_fetch_add(&c.big_ranges, 1);
	inside = true;
	ret = route(addr, len, advice);
	e = errno;
	inside = false;
	errno = e;
	return ret;
}

/* Counted only: mimalloc 2.0.9 commits with mprotect(), which takes mmap_write_lock. */
INTERPOSE int mprotect(void *addr, size_t len, int prot)
{
	if (atomic_load(&c.on))
		atomic_fetch_add(&c.mprotect_calls, 1);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* ---- churn ---- */

struct obj {
	uint8_t *p;
	size_t size;
	uint64_t tag;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static _Atomic uint64_t bad;

static void fill(const struct obj *o)
{
	for (size_t off = 0; off + 16 <= o->size; off += PAGE)
		put64(o->p + off, mix(o->tag ^ off));
	put64(o->p + o->size - 8, mix(~o->tag));
}

static void check_free(struct obj *o)
{
	bool ok = get64(o->p + o->size - 8) == mix(~o->tag);

	for (size_t off = 0; off + 16 <= o->size; off += PAGE)
		ok = ok && get64(o->p + off) == mix(o->tag ^ off);
	if (!ok)
		atomic_fetch_add(&bad, 1);
	mi_free(o->p);
	o->p = NULL;
}

/* 85% small (16 B - 8 KiB), 14% medium/large (8 KiB - 2 MiB), 1% huge (4 - 12 MiB). */
static size_t pick(uint64_t *s)
{
	uint64_t r = (*s = mix(*s)), k = r % 100;
	unsigned lo, hi, lg;

	if (k == 99)
		return (4UL << 20) + (size_t)((r >> 32) % (8UL << 20));
	lo = k < 85 ? 4 : 13;
	hi = k < 85 ? 13 : 21;
	lg = lo + (unsigned)((r >> 20) % (hi - lo));
	return (1UL << lg) + (size_t)((r >> 32) % (1UL << lg));
}

static void *worker(void *arg)
{
	struct obj *slots = calloc(SLOTS, sizeof(*slots));
	uint64_t s = mix((uintptr_t)arg + 1), gen = 0;

	if (!slots)
		return NULL;
	for (unsigned i = 0; i < OPS; i++) {
		struct obj *o = &slots[(s = mix(s)) % SLOTS];

		if (o->p) {
			check_free(o);
			continue;
		}
		o->size = pick(&s);
		o->p = mi_malloc(o->size);
		if (!o->p) {
			atomic_fetch_add(&bad, 1);
			continue;
		}
		o->tag = ((uintptr_t)arg << 56) ^ (++gen << 8) ^ (uintptr_t)o->p;
		fill(o);
	}
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].p)
			check_free(&slots[i]);
	free(slots);
	mi_collect(true);
	return NULL;
}

static double rss_mib(void)
{
	return example_rss_bytes() / (1 << 20);
}

int main(void)
{
	struct madvx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	pthread_t th[THREADS];
	double base, after, peak = 0;
	void *probe;
	int fails = 0;

	if (pthread_key_create(&tb_key, tb_free))
		return 1;
	/* Purge as soon as possible, so that the run shows mimalloc's purge path. */
	mi_option_set(mi_option_decommit_delay, 0);
	mi_option_set(mi_option_segment_decommit_delay, 0);
	mi_option_enable(mi_option_page_reset);
	madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE);	/* probe now, unrouted */
	madvx_stats_get(&st0);
	/* Is the interposition in effect? mimalloc must call our madvise(). */
	atomic_store(&c.on, true);
	probe = mi_malloc(8UL << 20);
	memset(probe, 1, 8UL << 20);
	mi_free(probe);
	mi_collect(true);
	if (!c.free_calls && !c.dontneed_calls) {
		printf("SKIP: libmimalloc did not call our madvise() (static or -Bsymbolic "
		       "mimalloc, or purging disabled): nothing to route\n");
		return 77;
	}
	base = rss_mib();
	for (uintptr_t t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)t))
			return 1;
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	peak = rss_mib();	/* after the threads freed everything; mimalloc's own */
	mi_collect(true);
	after = rss_mib();
	atomic_store(&c.on, false);
	madvx_stats_get(&st1);

	printf("# mi-route: mimalloc %d, %d threads x %d ops, purge delays 0, page_reset on\n",
	       mi_version(), THREADS, OPS);
	printf("madvise(MADV_FREE) from mimalloc      %llu\n", (unsigned long long)c.free_calls);
	printf("madvise(MADV_DONTNEED) from mimalloc  %llu\n", (unsigned long long)c.dontneed_calls);
	printf("madvise(other) (not routed)           %llu\n", (unsigned long long)c.other_calls);
	printf("ranges over 256 KiB                   %llu\n", (unsigned long long)c.big_ranges);
	printf("bytes advised                         %.1f MiB\n", (double)c.bytes / (1 << 20));
	printf("libmadvx syscalls / entries / splits  %llu / %llu / %llu\n",
	       (unsigned long long)(st1.syscalls - st0.syscalls),
	       (unsigned long long)(st1.vector_entries - st0.vector_entries),
	       (unsigned long long)(st1.split - st0.split));
	printf("libmadvx VMA lookups (PROCMAP_QUERY)  %llu\n",
	       (unsigned long long)(st1.vma_queries - st0.vma_queries));
	printf("mprotect (commit path, mmap_write_lock) %llu\n", (unsigned long long)c.mprotect_calls);
	printf("RSS base / after frees / after mi_collect  %.1f / %.1f / %.1f MiB\n", base, peak, after);
	if (bad) {
		printf("FAIL: %llu corrupted or failed allocations\n", (unsigned long long)bad);
		fails++;
	}
	if (c.failed) {
		printf("FAIL: %llu routed madvise calls failed\n", (unsigned long long)c.failed);
		fails++;
	}
	if (after > base + 16) {
		printf("FAIL: RSS %.1f MiB above base after freeing everything\n", after - base);
		fails++;
	}
	printf("%s\n", fails ? "FAIL" : "PASS: checksums, routed purges, RSS after mi_collect");
	return fails ? 1 : 0;
}
