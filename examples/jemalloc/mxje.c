// SPDX-License-Identifier: MIT
/*
 * mxje: jemalloc extent hooks that route an arena's purges through libmadvx.
 *
 * Why custom arenas ("arenas.create" with these hooks) and not hooks put on
 * the existing arenas: an arena created with the hooks gets every extent
 * (and its base metadata) from our alloc hook, so every range a later hook
 * sees is ours: we know which mapping it lies in and may take it back in
 * dalloc. Hooks installed on arena 0 after start-up would also see extents
 * that jemalloc's default hooks mapped (dalloc must then refuse them, merges
 * could join our mappings with foreign ones), for no gain.
 *
 * Memory layout: we reserve large mappings ("chunks", 256 MiB of address
 * space each, MAP_NORESERVE), register each with madvx_region_register()
 * (we never split them, so the claim holds and libmadvx needs no VMA
 * lookups), carve extents out of them with the requested alignment, and
 * refuse merges across chunks. So every range a hook gets lies in one VMA.
 *
 * What is deferred, and why that is allowed (README.md has the long form):
 *  - purge_lazy / purge_forced: NEVER. jemalloc records the extent in an
 *    ecache right after the hook returns, where any thread may take it, so
 *    the purge is complete when the hook returns (one libmadvx flush of one
 *    hint, on a per-thread batch).
 *  - dalloc / destroy: here jemalloc gives the range up for good (it
 *    deregisters the extent before the call and frees its metadata when we
 *    return false). The range is then reachable only through our free
 *    lists, so its MADV_DONTNEED may wait: it is queued on a shared batch and
 *    issued with others as one process_madvise() vector, and the range goes
 *    back to the free list (zeroed) only after that flush. The alloc hook
 *    flushes before it maps anything new.
 *
 * Locking: one mutex guards chunks, free list, pending list and the shared
 * batch; hooks never call into jemalloc and libmadvx never calls malloc()
 * from add/flush, so the mutex is a leaf.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <jemalloc/jemalloc.h>
#include <madvx.h>

#include "mxje.h"

#define MAX_CHUNKS	256
#define MAX_FREE	65536
#define MAX_PENDING	4096
#define HUGE_ALIGN	(2UL << 20)

struct range {
	uintptr_t start, end;
	uint32_t chunk;
};

static struct {
	pthread_mutex_t lock;
	struct mxje_opts o;
	bool ready;
	struct range chunks[MAX_CHUNKS];	/* start == 0: free slot */
	uint32_t nchunks;		/* slots in use or used before */
	struct range *free;		/* sorted by start, coalesced within a chunk */
	uint32_t nfree;
	struct range *pend;		/* given up by jemalloc, DONTNEED queued */
	uint32_t npend;
	size_t pend_bytes;
	struct madvx_batch *batch;	/* the pending DONTNEEDs */
	pthread_key_t tb_key;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct {
	_Atomic uint64_t alloc, dalloc, destroy, purge_lazy, purge_forced, split,
		merge, merge_refused, deferred, deferred_bytes, flushes,
		flush_max_entries, chunks, chunk_bytes, trimmed, fixups;
} cnt;

#define INC(f) atomic_fetch_add_explicit(&cnt.f, 1, memory_order_relaxed)
#define ADD(f, v) atomic_fetch_add_explicit(&cnt.f, (v), memory_order_relaxed)

static uintptr_t align_up(uintptr_t v, uintptr_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Index of the chunk holding all of [a, a + len), or -1. Caller holds g.lock. */
static int chunk_of(uintptr_t a, size_t len)
{
	for (uint32_t i = 0; i < g.nchunks; i++)
		if (g.chunks[i].start && g.chunks[i].start <= a && a + len <= g.chunks[i].end)
			return (int)i;
	return -1;
}

/* ---- free list (caller holds g.lock) ---- */

static uint32_t free_pos(uintptr_t start)
{
	uint32_t lo = 0, hi = g.nfree;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (g.free[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Put a zeroed range back; false if the table is full (the range is then lost). */
static bool free_insert(struct range r)
{
	uint32_t i = free_pos(r.start);
	bool prev = i > 0 && g.free[i - 1].end == r.start && g.free[i - 1].chunk == r.chunk;
	bool next = i < g.nfree && g.free[i].start == r.end && g.free[i].chunk == r.chunk;

	if (prev && next) {
		g.free[i - 1].end = g.free[i].end;
		memmove(&g.free[i], &g.free[i + 1], (g.nfree - i - 1) * sizeof(r));
		g.nfree--;
	} else if (prev) {
		g.free[i - 1].end = r.end;
	} else if (next) {
		g.free[i].start = r.start;
	} else {
		if (g.nfree == MAX_FREE)
			return false;
		memmove(&g.free[i + 1], &g.free[i], (g.nfree - i) * sizeof(r));
		g.free[i] = r;
		g.nfree++;
	}
	return true;
}

/* Carve [p, p + size) out of free range i (p inside it). */
static bool free_carve(uint32_t i, uintptr_t p, size_t size)
{
	struct range r = g.free[i];
	bool head = p > r.start, tail = p + size < r.end;

	if (head && tail) {
		if (g.nfree == MAX_FREE)
			return false;
		memmove(&g.free[i + 1], &g.free[i], (g.nfree - i) * sizeof(r));
		g.nfree++;
		g.free[i].end = p;
		g.free[i + 1].start = p + size;
	} else if (head) {
		g.free[i].end = p;
	} else if (tail) {
		g.free[i].start = p + size;
	} else {
		memmove(&g.free[i], &g.free[i + 1], (g.nfree - i - 1) * sizeof(r));
		g.nfree--;
	}
	return true;
}

/* First fit; @want: the exact address jemalloc asked for, or 0. */
static void *free_take(size_t size, size_t align, uintptr_t want)
{
	for (uint32_t i = 0; i < g.nfree; i++) {
		const struct range *r = &g.free[i];
		uintptr_t p = want ? want : align_up(r->start, align);

		if (want && (want < r->start || want >= r->end))
			continue;
		if (p + size <= r->end && p + size > p)
			return free_carve(i, p, size) ? (void *)p : NULL;
		if (want)
			return NULL;
	}
	return NULL;
}

static int flush_locked(void);

/*
 * Unmap every chunk that is entirely free again (after releasing what is
 * pending). Like jemalloc's own retain mode we keep mappings while they are
 * in use, so unmapping (which takes mmap_write_lock) happens only here:
 * from mxje_trim() and when the chunk table is full.
 */
static void trim_locked(void)
{
	flush_locked();
	for (uint32_t i = 0; i < g.nfree;) {
		struct range r = g.free[i];
		struct range *c = &g.chunks[r.chunk];

		if (r.start != c->start || r.end != c->end) {
			i++;
			continue;
		}
		memmove(&g.free[i], &g.free[i + 1], (g.nfree - i - 1) * sizeof(r));
		g.nfree--;
		(void)madvx_region_unregister((void *)c->start);
		munmap((void *)c->start, c->end - c->start);
		ADD(chunk_bytes, -(c->end - c->start));
		atomic_fetch_sub_explicit(&cnt.chunks, 1, memory_order_relaxed);
		INC(trimmed);
		*c = (struct range){ 0 };
	}
}

static int chunk_slot(void)
{
	for (uint32_t i = 0; i < g.nchunks; i++)
		if (!g.chunks[i].start)
			return (int)i;
	return g.nchunks < MAX_CHUNKS ? (int)g.nchunks++ : -1;
}

static int chunk_new(size_t size, size_t align)
{
	size_t len = align_up(size + (align > 4096 ? align : 0), HUGE_ALIGN);
	int n = chunk_slot();
	void *p;

	if (n < 0) {
		trim_locked();
		n = chunk_slot();
		if (n < 0)
			return -ENOSPC;
	}
	/*
	 * Requests of a quarter chunk and more get a mapping of their own.
	 * Smaller ones share chunks: every mapping costs an mmap_write_lock,
	 * and reserved address space costs nothing until touched.
	 */
	if (size < g.o.chunk_bytes / 4 && len < g.o.chunk_bytes)
		len = g.o.chunk_bytes;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		if ((uint32_t)n == g.nchunks - 1)
			g.nchunks--;
		return -ENOMEM;
	}
	/*
	 * Best effort (64 regions per process): without it libmadvx looks
	 * the VMA up, same result, one PROCMAP_QUERY more per flush.
	 */
	(void)madvx_region_register(p, len, 0);
	g.chunks[n] = (struct range){ (uintptr_t)p, (uintptr_t)p + len, (uint32_t)n };
	INC(chunks);
	ADD(chunk_bytes, len);
	free_insert(g.chunks[n]);
	return 0;
}

/* ---- releasing ---- */

/* What libmadvx did not apply is applied here, so a range is zero when it is reused. */
static void fixup(uint64_t addr, uint64_t len)
{
	INC(fixups);
	if (madvise((void *)(uintptr_t)addr, len, MADV_DONTNEED))
		memset((void *)(uintptr_t)addr, 0, len);
}

/* Issue every queued DONTNEED, then hand the ranges back to the free list. */
static int flush_locked(void)
{
	const struct madvx_hint *res;
	uint32_t n;
	int ret;

	if (!g.npend)
		return 0;
	ret = madvx_batch_flush(g.batch);
	res = madvx_batch_results(g.batch, &n);
	for (uint32_t i = 0; i < n; i++)
		if (res[i].done < res[i].len)
			fixup(res[i].addr + res[i].done, res[i].len - res[i].done);
	for (uint32_t i = 0; i < g.npend; i++)
		free_insert(g.pend[i]);
	INC(flushes);
	if (g.npend > atomic_load_explicit(&cnt.flush_max_entries, memory_order_relaxed))
		atomic_store_explicit(&cnt.flush_max_entries, g.npend, memory_order_relaxed);
	g.npend = 0;
	g.pend_bytes = 0;
	return ret;
}

/* jemalloc gave [a, a + size) up: queue its release. false = taken. */
static bool give_back(void *a, size_t size)
{
	bool refused = false;
	int c;

	if (!g.ready)
		return true;
	pthread_mutex_lock(&g.lock);
	c = chunk_of((uintptr_t)a, size);
	if (c < 0) {
		/* Not ours: jemalloc keeps it (as retained memory). */
		pthread_mutex_unlock(&g.lock);
		return true;
	}
	if (g.npend == MAX_PENDING)
		flush_locked();
	if (madvx_batch_add(g.batch, a, size, MADV_DONTNEED) < 0) {
		refused = true;
	} else {
		g.pend[g.npend++] = (struct range){ (uintptr_t)a, (uintptr_t)a + size, (uint32_t)c };
		g.pend_bytes += size;
		INC(deferred);
		ADD(deferred_bytes, size);
		if (g.o.no_defer || g.npend >= g.o.max_pending ||
		    g.pend_bytes >= g.o.flush_bytes)
			flush_locked();
	}
	pthread_mutex_unlock(&g.lock);
	return refused;
}

/* ---- per-thread batch for the synchronous purges ---- */

static __thread struct madvx_batch *tb;
static __thread bool tb_gone;

static void tb_free(void *b)
{
	madvx_batch_free(b);
	tb = NULL;
	tb_gone = true;
}

/*
 * One hint, flushed before returning: jemalloc may hand the extent out again
 * the moment we return. Returns true (jemalloc's "failed") unless all of it
 * was applied.
 */
static bool purge_now(void *a, size_t len, int advice)
{
	struct madvx_batch_opts o = { .size = sizeof(o), .capacity = 1 };
	struct madvx_batch *b = tb;
	const struct madvx_hint *res;
	bool failed;
	uint32_t n;

	if (!b) {
		if (tb_gone || !g.ready)
			return madvise(a, len, advice) != 0;	/* thread exit: no new batch */
		if (madvx_batch_create(&o, &b))
			return madvise(a, len, advice) != 0;
		tb = b;
		pthread_setspecific(g.tb_key, b);
	}
	if (madvx_batch_add(b, a, len, advice) < 0)
		return true;
	madvx_batch_flush(b);
	res = madvx_batch_results(b, &n);
	failed = n != 1 || res[0].done < len;
	return failed;
}

/* ---- the hooks ---- */

static void *h_alloc(extent_hooks_t *eh, void *new_addr, size_t size, size_t align,
		     bool *zero, bool *commit, unsigned ind)
{
	uintptr_t want = (uintptr_t)new_addr;
	void *p;

	if (!align)
		align = 4096;
	INC(alloc);
	pthread_mutex_lock(&g.lock);
	p = free_take(size, align, want);
	if (!p && g.npend) {
		/* Deferred ranges become usable once released. */
		flush_locked();
		p = free_take(size, align, want);
	}
	if (!p && !want && !chunk_new(size, align))
		p = free_take(size, align, 0);
	pthread_mutex_unlock(&g.lock);
	if (p) {
		/* Fresh mappings and released ranges read as zero; never decommitted. */
		*zero = true;
		*commit = true;
	}
	return p;
}

static bool h_dalloc(extent_hooks_t *eh, void *addr, size_t size, bool committed,
		     unsigned ind)
{
	INC(dalloc);
	return give_back(addr, size);
}

static void h_destroy(extent_hooks_t *eh, void *addr, size_t size, bool committed,
		      unsigned ind)
{
	INC(destroy);
	give_back(addr, size);
}

static bool h_commit(extent_hooks_t *eh, void *addr, size_t size, size_t off,
		     size_t len, unsigned ind)
{
	return false;	/* always committed */
}

static bool h_decommit(extent_hooks_t *eh, void *addr, size_t size, size_t off,
		       size_t len, unsigned ind)
{
	return true;	/* refuse, as jemalloc's own hooks do under overcommit */
}

static bool h_purge_lazy(extent_hooks_t *eh, void *addr, size_t size, size_t off,
			 size_t len, unsigned ind)
{
	INC(purge_lazy);
	return purge_now((char *)addr + off, len, MADV_FREE);
}

static bool h_purge_forced(extent_hooks_t *eh, void *addr, size_t size, size_t off,
			   size_t len, unsigned ind)
{
	INC(purge_forced);
	return purge_now((char *)addr + off, len, MADV_DONTNEED);
}

static bool h_split(extent_hooks_t *eh, void *addr, size_t size, size_t a,
		    size_t b, bool committed, unsigned ind)
{
	INC(split);
	return false;	/* pieces of one chunk stay in it */
}

static bool h_merge(extent_hooks_t *eh, void *a, size_t asz, void *b, size_t bsz,
		    bool committed, unsigned ind)
{
	int ca, cb;

	pthread_mutex_lock(&g.lock);
	ca = chunk_of((uintptr_t)a, asz);
	cb = chunk_of((uintptr_t)b, bsz);
	pthread_mutex_unlock(&g.lock);
	INC(merge);
	/* Never across mappings: every extent stays inside one VMA. */
	if (ca < 0 || ca != cb) {
		INC(merge_refused);
		return true;
	}
	return false;
}

extent_hooks_t mxje_hooks = {
	.alloc = h_alloc,
	.dalloc = h_dalloc,
	.destroy = h_destroy,
	.commit = h_commit,
	.decommit = h_decommit,
	.purge_lazy = h_purge_lazy,
	.purge_forced = h_purge_forced,
	.split = h_split,
	.merge = h_merge,
};

/* ---- setup ---- */

int mxje_init(const struct mxje_opts *o)
{
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = MAX_PENDING };
	int ret;

	if (g.ready)
		return -EALREADY;
	if (o)
		g.o = *o;
	if (!g.o.chunk_bytes)
		g.o.chunk_bytes = 256UL << 20;
	if (!g.o.flush_bytes)
		g.o.flush_bytes = 4UL << 20;
	if (!g.o.max_pending || g.o.max_pending > MAX_PENDING)
		g.o.max_pending = 64;
	if (!g.o.grow_limit)
		g.o.grow_limit = 2UL << 20;
	g.o.chunk_bytes = align_up(g.o.chunk_bytes, HUGE_ALIGN);
	g.free = mmap(NULL, MAX_FREE * sizeof(struct range) + MAX_PENDING * sizeof(struct range),
		      PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g.free == MAP_FAILED)
		return -ENOMEM;
	g.pend = g.free + MAX_FREE;
	ret = madvx_batch_create(&bo, &g.batch);	/* also runs the probe, now */
	if (ret)
		return ret;
	ret = -pthread_key_create(&g.tb_key, tb_free);
	if (ret)
		return ret;
	g.ready = true;
	return 0;
}

int mxje_arena_create(unsigned *ind)
{
	extent_hooks_t *hooks = &mxje_hooks;
	size_t sz = sizeof(*ind), lim = g.o.grow_limit;
	char name[64];
	int ret;

	if (!g.ready)
		return -EINVAL;
	ret = mallctl("arenas.create", ind, &sz, &hooks, sizeof(hooks));
	if (ret)
		return -ret;
	/*
	 * jemalloc grows an arena by ever larger alloc calls (it keeps the
	 * surplus as "retained"); since dalloc hands extents back to us, the
	 * arena would keep growing its requests. Cap them.
	 */
	snprintf(name, sizeof(name), "arena.%u.retain_grow_limit", *ind);
	mallctl(name, NULL, NULL, &lim, sizeof(lim));
	return 0;
}

void mxje_trim(void)
{
	pthread_mutex_lock(&g.lock);
	trim_locked();
	pthread_mutex_unlock(&g.lock);
}

int mxje_flush(void)
{
	int ret;

	pthread_mutex_lock(&g.lock);
	ret = flush_locked();
	pthread_mutex_unlock(&g.lock);
	return ret;
}

void mxje_stats_get(struct mxje_stats *st)
{
	struct madvx_stats ms = { .size = sizeof(ms) };

	memset(st, 0, sizeof(*st));
	st->alloc = cnt.alloc;
	st->dalloc = cnt.dalloc;
	st->destroy = cnt.destroy;
	st->purge_lazy = cnt.purge_lazy;
	st->purge_forced = cnt.purge_forced;
	st->split = cnt.split;
	st->merge = cnt.merge;
	st->merge_refused = cnt.merge_refused;
	st->deferred = cnt.deferred;
	st->deferred_bytes = cnt.deferred_bytes;
	st->flushes = cnt.flushes;
	st->flush_max_entries = cnt.flush_max_entries;
	st->chunks = cnt.chunks;
	st->chunk_bytes = cnt.chunk_bytes;
	st->trimmed = cnt.trimmed;
	st->fixups = cnt.fixups;
	if (!madvx_stats_get(&ms)) {
		st->madvx_syscalls = ms.syscalls;
		st->madvx_entries = ms.vector_entries;
		st->madvx_split = ms.split;
		st->madvx_merged = ms.merged;
		st->madvx_vma_queries = ms.vma_queries;
	}
	pthread_mutex_lock(&g.lock);
	st->pending_bytes = g.pend_bytes;
	pthread_mutex_unlock(&g.lock);
}
