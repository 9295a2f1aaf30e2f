// SPDX-License-Identifier: MIT
/*
 * je-purge: a purge-heavy churn for the jemalloc client (check.sh,
 * bench.sh), run with a jemalloc build preloaded (LD_PRELOAD): threads
 * allocate and free objects of jemalloc's large size classes (16 KiB -
 * 2 MiB, with some small ones), so freed extents go to the dirty ecache
 * and jemalloc's decay purges them, in passes, while the threads keep
 * reusing that memory.
 *
 *   je-purge [THREADS [OPS [SLOTS [ZERO]]]]    (defaults 2 200000 256 8)
 *
 * A purge applied late (after the extent was handed out again) zaps data
 * the new owner wrote: every page of an object starts with a word derived
 * from the object's tag, checked when it is freed. A zeroed claim that is
 * wrong (jemalloc skips calloc()'s memset on purged memory) leaves old
 * words behind: every ZERO-th object comes from calloc() and is checked to
 * be zero first (0: none; jemalloc zeroes a reused extent with
 * madvise(MADV_DONTNEED), which a count of purge calls then leaves out).
 * Exit 0, or 1 when a check failed (with a count).
 *
 * JE_PURGE_HUGE=P makes P percent of the objects oversize (8-24 MiB:
 * jemalloc's huge arena, whose freed extents are purged at once, or held
 * with the patch's MALLOC_CONF madvx_hold_ms) in place of large ones.
 *
 * JE_PURGE_MADVX_STATS=1 prints libmadvx's process-wide counters at the
 * end, when the preloaded jemalloc brought libmadvx in (the patched
 * builds): what went through it. madvx_stats_get() is looked up at run
 * time, so je-purge does not link libmadvx and runs with any build.
 */
#include <dlfcn.h>
#include <madvx.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096UL

struct obj {
	uint64_t *p;
	size_t size;
	uint64_t tag;
};

struct worker {
	pthread_t th;
	struct obj *slots;
	unsigned nslots;
	uint64_t ops, rng, bad, nonzero;
	unsigned zero_every;
	unsigned huge_pct;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * 75% 16 KiB - 256 KiB, 20% 256 KiB - 2 MiB, 5% 64 B - 4 KiB; the first
 * @huge_pct percent oversize (8 - 24 MiB) instead.
 */
static size_t pick_size(uint64_t *rng, unsigned huge_pct)
{
	uint64_t r = rnd(rng);
	unsigned pct = r % 100;

	r >>= 8;
	if (pct < huge_pct)
		return (8UL << 20) + r % (16UL << 20);
	if (pct < 75)
		return 16384 + r % (256 * 1024 - 16384);
	if (pct < 95)
		return 256 * 1024 + r % (2048 * 1024 - 256 * 1024);
	return 64 + r % (4096 - 64);
}

/* The word at the start of page i of an object, and its last word. */
static uint64_t mark(const struct obj *o, size_t i)
{
	return o->tag * 0x100000001b3ULL ^ i;
}

static void fill(struct obj *o)
{
	size_t words = o->size / sizeof(uint64_t);

	for (size_t off = 0; off < o->size / PAGE; off++)
		o->p[off * (PAGE / sizeof(uint64_t))] = mark(o, off);
	o->p[words - 1] = mark(o, words);
}

static uint64_t check(const struct obj *o)
{
	size_t words = o->size / sizeof(uint64_t);
	uint64_t bad = 0;

	for (size_t off = 0; off < o->size / PAGE; off++)
		bad += o->p[off * (PAGE / sizeof(uint64_t))] != mark(o, off);
	return bad + (o->p[words - 1] != mark(o, words));
}

/* calloc() memory must read zero where fill() writes. */
static uint64_t check_zero(const struct obj *o)
{
	size_t words = o->size / sizeof(uint64_t);
	uint64_t bad = 0;

	for (size_t off = 0; off < o->size / PAGE; off++)
		bad += o->p[off * (PAGE / sizeof(uint64_t))] != 0;
	return bad + (o->p[words - 1] != 0);
}

static int new_obj(struct worker *w, struct obj *o)
{
	o->size = pick_size(&w->rng, w->huge_pct);
	o->tag = rnd(&w->rng);
	if (w->zero_every && o->tag % w->zero_every == 0) {
		o->p = calloc(1, o->size);
		if (o->p)
			w->nonzero += check_zero(o);
	} else {
		o->p = malloc(o->size);
	}
	if (!o->p)
		return -1;
	fill(o);
	return 0;
}

static void free_obj(struct worker *w, struct obj *o)
{
	w->bad += check(o);
	free(o->p);
	o->p = NULL;
}

static void *churn(void *arg)
{
	struct worker *w = arg;

	for (uint64_t i = 0; i < w->ops; i++) {
		struct obj *o = &w->slots[rnd(&w->rng) % w->nslots];

		if (o->p)
			free_obj(w, o);
		if (new_obj(w, o) < 0) {
			fprintf(stderr, "je-purge: out of memory at op %llu\n",
				(unsigned long long)i);
			w->bad++;
			break;
		}
	}
	for (unsigned i = 0; i < w->nslots; i++)
		if (w->slots[i].p)
			free_obj(w, &w->slots[i]);
	return NULL;
}

static void print_madvx_stats(void)
{
	struct madvx_stats st = { .size = sizeof(st) };
	int (*get)(struct madvx_stats *);

	if (!getenv("JE_PURGE_MADVX_STATS"))
		return;
	*(void **)&get = dlsym(RTLD_DEFAULT, "madvx_stats_get");
	if (!get || get(&st)) {
		printf("je-purge: libmadvx is not loaded\n");
		return;
	}
	printf("je-purge: libmadvx: %llu hints, %llu merged, %llu split, %llu flushes, %llu system calls, %llu vector entries, %llu madvise fallbacks, %llu VMA look-ups, %llu vouched, %llu failed, %llu cancelled\n",
	       (unsigned long long)st.hints, (unsigned long long)st.merged,
	       (unsigned long long)st.split, (unsigned long long)st.flushes,
	       (unsigned long long)st.syscalls, (unsigned long long)st.vector_entries,
	       (unsigned long long)st.madvise_fallbacks, (unsigned long long)st.vma_queries,
	       (unsigned long long)st.vma_skipped, (unsigned long long)st.failed,
	       (unsigned long long)st.cancelled);
}

int main(int argc, char **argv)
{
	unsigned nthreads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
	uint64_t ops = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000;
	unsigned nslots = argc > 3 ? (unsigned)atoi(argv[3]) : 256;
	unsigned zero_every = argc > 4 ? (unsigned)atoi(argv[4]) : 8;
	unsigned huge_pct = getenv("JE_PURGE_HUGE") ? (unsigned)atoi(getenv("JE_PURGE_HUGE")) : 0;
	uint64_t bad = 0, nonzero = 0;
	struct worker *w;

	if (!nthreads || !nslots || nthreads > 64 || huge_pct > 75) {
		fputs("usage: [JE_PURGE_HUGE=0-75] je-purge [THREADS(1-64) [OPS [SLOTS [ZERO]]]]\n", stderr);
		return 2;
	}
	w = calloc(nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (unsigned t = 0; t < nthreads; t++) {
		w[t] = (struct worker){ .nslots = nslots, .ops = ops, .rng = t + 1,
					.zero_every = zero_every, .huge_pct = huge_pct };
		w[t].slots = calloc(nslots, sizeof(struct obj));
		if (!w[t].slots || pthread_create(&w[t].th, NULL, churn, &w[t])) {
			fputs("je-purge: cannot start the threads\n", stderr);
			return 1;
		}
	}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(w[t].th, NULL);
		bad += w[t].bad;
		nonzero += w[t].nonzero;
		free(w[t].slots);
	}
	free(w);
	printf("je-purge: %u threads x %llu ops over %u slots: %llu words changed behind an owner, %llu non-zero words from calloc\n",
	       nthreads, (unsigned long long)ops, nslots, (unsigned long long)bad,
	       (unsigned long long)nonzero);
	print_madvx_stats();
	return bad || nonzero ? 1 : 0;
}
