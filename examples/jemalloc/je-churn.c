// SPDX-License-Identifier: MIT
/*
 * je-churn: multi-threaded alloc/free churn over jemalloc's size classes
 * (small, large, huge) in an arena with the mxje hooks ("madvx") and in an
 * arena with jemalloc's own hooks ("stock"), interleaved in one run. Every
 * object carries a checksum word per page (verified at free), every eighth
 * allocation asks for zeroed memory (verified), and RSS is read from
 * /proc/self/statm before, at the peak, and after everything is freed.
 *
 *   je-churn [--quick] [--reps N] [--threads N] [--ops N] [--slots N]
 *            [--dirty-ms N] [--muzzy-ms N] [--variant both|stock|madvx]
 *            [--no-defer] [--no-thp] [--locktrace]
 *
 * Without options (or with --quick): the short verification run, 2 threads x
 * 15000 operations over 256 slots each, one repetition.
 *
 * Exit: 0 all checks passed, 1 a check failed, 77 cannot run here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>
#include <madvx.h>

#include "mxje.h"
#ifdef MXJE_LOCKTRACE
#include "locktrace.h"
#endif
#include "example-rss.h"

#define PAGE 4096UL
#define MAX_REPS 32

struct obj {
	uint8_t *p;
	size_t size;
	uint64_t tag;
};

struct run;

struct worker {
	pthread_t th;
	unsigned id;
	struct run *run;
	struct obj *slots;
	uint64_t rng;
	uint64_t ops, bad, zero_bad, live_bytes, oom;
};

struct run {
	unsigned arena, nthreads, nslots;
	uint64_t ops;
	pthread_barrier_t start, churned, measured;
	struct worker *w;
};

struct opts {
	bool quick, no_defer, locktrace, no_thp;
	unsigned reps, threads, slots;
	uint64_t ops;
	long dirty_ms, muzzy_ms;
	int variants;		/* bit 0 stock, bit 1 madvx */
};

/* One repetition of one variant. */
struct sample {
	double ops_s, rss_base, rss_peak, rss_freed, rss_flushed;
	double purges;		/* jemalloc's count of purge calls (stats nmadvise) */
	double syscalls;	/* stock: = purges (each is one madvise); madvx: libmadvx + fixups */
	double dalloc, flushes, entries_per_call;
	uint64_t bad, zero_bad, oom;
	double live_mib;
};

static const char *vname[2] = { "stock", "madvx" };

/* ---- helpers ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s = mix(*s);
	return *s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Sizes: 80% small (16 B .. 14 KiB, jemalloc slabs), 19% large
 * (16 KiB .. 1 MiB, one extent each), 1% huge (4 .. 12 MiB, above
 * opt.oversize_threshold: purged eagerly on free). Log-uniform in each.
 */
static size_t pick_size(uint64_t *rng)
{
	uint64_t r = rnd(rng), k = r % 1000;
	unsigned lg_lo, lg_hi, lg;

	if (k < 800) {
		lg_lo = 4;
		lg_hi = 14;
	} else if (k < 990) {
		lg_lo = 14;
		lg_hi = 20;
	} else {
		return (4UL << 20) + (size_t)(rnd(rng) % (8UL << 20));
	}
	lg = lg_lo + (unsigned)((r >> 20) % (lg_hi - lg_lo));
	return (1UL << lg) + (size_t)((r >> 32) % (1UL << lg));
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

/* Checksum words: one per page (touching every page) and one at the end. */
static void fill(const struct obj *o)
{
	for (size_t off = 0; off + 16 <= o->size; off += PAGE)
		put64(o->p + off, mix(o->tag ^ off));
	put64(o->p + o->size - 8, mix(~o->tag));
}

static bool verify(const struct obj *o)
{
	for (size_t off = 0; off + 16 <= o->size; off += PAGE)
		if (get64(o->p + off) != mix(o->tag ^ off))
			return false;
	return get64(o->p + o->size - 8) == mix(~o->tag);
}

/* MALLOCX_ZERO memory: the words we are about to write, and the first 64 bytes. */
static bool is_zero(const struct obj *o)
{
	size_t head = o->size < 64 ? o->size : 64;

	for (size_t i = 0; i < head; i++)
		if (o->p[i])
			return false;
	for (size_t off = 0; off + 16 <= o->size; off += PAGE)
		if (get64(o->p + off))
			return false;
	return get64(o->p + o->size - 8) == 0;
}

static void obj_free(struct worker *w, struct obj *o)
{
	if (!verify(o))
		w->bad++;
	w->live_bytes -= o->size;
	dallocx(o->p, 0);
	o->p = NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	unsigned arena = r->arena;
	uint64_t gen = 0;

	if (mallctl("thread.arena", NULL, NULL, &arena, sizeof(arena)))
		w->oom++;
	pthread_barrier_wait(&r->start);
	for (uint64_t i = 0; i < r->ops; i++) {
		struct obj *o = &w->slots[rnd(&w->rng) % r->nslots];
		bool zero = (i & 7) == 0;

		if (o->p) {
			obj_free(w, o);
		} else {
			o->size = pick_size(&w->rng);
			o->p = mallocx(o->size, zero ? MALLOCX_ZERO : 0);
			if (!o->p) {
				w->oom++;
				continue;
			}
			o->tag = ((uint64_t)w->id << 48) ^ (++gen << 8) ^ (uintptr_t)o->p;
			if (zero && !is_zero(o))
				w->zero_bad++;
			fill(o);
			w->live_bytes += o->size;
		}
		w->ops++;
	}
	pthread_barrier_wait(&r->churned);	/* main reads the peak RSS */
	pthread_barrier_wait(&r->measured);
	for (unsigned s = 0; s < r->nslots; s++)
		if (w->slots[s].p)
			obj_free(w, &w->slots[s]);
	/* Thread exit flushes and destroys the tcache into the arena. */
	return NULL;
}

static uint64_t arena_stat(unsigned ind, const char *what)
{
	char name[96];
	uint64_t v = 0, epoch = 1;
	size_t sz = sizeof(v);

	mallctl("epoch", NULL, NULL, &epoch, sizeof(epoch));
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", ind, what);
	if (mallctl(name, &v, &sz, NULL, 0))
		return 0;
	return v;
}

static int arena_set_decay(unsigned ind, const struct opts *o)
{
	char name[64];
	ssize_t d = o->dirty_ms, m = o->muzzy_ms;

	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", ind);
	if (mallctl(name, NULL, NULL, &d, sizeof(d)))
		return -EINVAL;
	snprintf(name, sizeof(name), "arena.%u.muzzy_decay_ms", ind);
	if (mallctl(name, NULL, NULL, &m, sizeof(m)))
		return -EINVAL;
	return 0;
}

/*
 * With nonzero decay times jemalloc gives pages back over dirty_decay_ms
 * (dirty -> muzzy, MADV_FREE: still in RSS until the kernel reclaims them)
 * and then muzzy_decay_ms (-> forced purge or dalloc), driven by allocation
 * activity or "arena.<i>.decay". Wait out both, as an idle program would.
 */
static void arena_wait_decay(unsigned ind, const struct opts *o)
{
	char name[64];
	long ms[2] = { o->dirty_ms, o->muzzy_ms };

	snprintf(name, sizeof(name), "arena.%u.decay", ind);
	for (int i = 0; i < 2; i++) {
		if (ms[i] > 0)
			usleep((useconds_t)(ms[i] + 10) * 1000);
		mallctl(name, NULL, NULL, NULL, 0);
	}
}

static void arena_destroy(unsigned ind)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.destroy", ind);
	mallctl(name, NULL, NULL, NULL, 0);
}

struct churn_ctx {
	struct run *r;
	uint64_t t0, t1;
};

static void churn_window(void *arg)
{
	struct churn_ctx *c = arg;

	c->t0 = now_ns();
	pthread_barrier_wait(&c->r->start);
	pthread_barrier_wait(&c->r->churned);
	c->t1 = now_ns();
}

#ifdef MXJE_LOCKTRACE
static struct locktrace lt;
static bool lt_ok;
static struct locktrace_result lt_res[2];
static bool lt_have[2];
#endif

/* One repetition of variant @v (0 stock, 1 madvx). 0, or -errno (setup). */
static int run_one(const struct opts *o, int v, unsigned rep, bool trace, struct sample *out)
{
	struct mxje_stats s0, s1;
	struct churn_ctx c = { 0 };
	struct run r = { .nthreads = o->threads, .nslots = o->slots, .ops = o->ops };
	size_t sz = sizeof(r.arena);
	int ret;

	memset(out, 0, sizeof(*out));
	if (v)
		ret = mxje_arena_create(&r.arena);
	else
		ret = -mallctl("arenas.create", &r.arena, &sz, NULL, 0);
	if (ret)
		return ret;
	if (arena_set_decay(r.arena, o))
		return -EINVAL;
	r.w = calloc(o->threads, sizeof(*r.w));
	if (!r.w)
		return -ENOMEM;
	pthread_barrier_init(&r.start, NULL, o->threads + 1);
	pthread_barrier_init(&r.churned, NULL, o->threads + 1);
	pthread_barrier_init(&r.measured, NULL, o->threads + 1);
	mxje_stats_get(&s0);
	out->rss_base = example_rss_bytes();
	for (unsigned t = 0; t < o->threads; t++) {
		struct worker *w = &r.w[t];

		w->id = t;
		w->run = &r;
		w->rng = mix(rep * 1000003ULL + t);	/* same stream for both variants */
		w->slots = calloc(o->slots, sizeof(*w->slots));
		if (!w->slots || pthread_create(&w->th, NULL, worker_main, w)) {
			fprintf(stderr, "je-churn: cannot start worker\n");
			exit(1);
		}
	}
	c.r = &r;
#ifdef MXJE_LOCKTRACE
	if (trace && lt_ok) {
		if (locktrace_measure(&lt, churn_window, &c, &lt_res[v]) == 0)
			lt_have[v] = true;
	} else
#endif
		churn_window(&c);
	out->rss_peak = example_rss_bytes();
	for (unsigned t = 0; t < o->threads; t++)
		out->live_mib += (double)r.w[t].live_bytes / (1 << 20);
	pthread_barrier_wait(&r.measured);
	for (unsigned t = 0; t < o->threads; t++) {
		struct worker *w = &r.w[t];

		pthread_join(w->th, NULL);
		out->ops_s += (double)w->ops;
		out->bad += w->bad;
		out->zero_bad += w->zero_bad;
		out->oom += w->oom;
		free(w->slots);
	}
	out->ops_s /= (double)(c.t1 - c.t0) / 1e9;
	out->rss_freed = example_rss_bytes();
	/*
	 * Even with both decay times 0 a free can stay dirty: a thread whose
	 * free finds another thread purging (decay->purging, pac.c's
	 * pac_decay_to_limit() drops decay->mtx while it purges) leaves its
	 * extent to the next decay, which the next allocation tick or a
	 * background thread would run. The last frees of a run have no next
	 * tick: run it (both variants alike). A stock rep kept one 8.9 MiB
	 * huge extent this way once in CI.
	 */
	arena_wait_decay(r.arena, o);
	if (v)
		mxje_flush();
	out->rss_flushed = example_rss_bytes();
	out->purges = (double)(arena_stat(r.arena, "dirty_nmadvise") +
			       arena_stat(r.arena, "muzzy_nmadvise"));
	mxje_stats_get(&s1);
	if (v) {
		uint64_t calls = s1.madvx_syscalls - s0.madvx_syscalls;

		out->syscalls = (double)(calls + s1.fixups - s0.fixups);
		out->dalloc = (double)(s1.dalloc - s0.dalloc);
		out->flushes = (double)(s1.flushes - s0.flushes);
		out->entries_per_call = calls ? (double)(s1.madvx_entries - s0.madvx_entries) /
						(double)calls : 0;
	} else {
		/* jemalloc's own hooks: one madvise() per purge (nmadvise misses a few
		 * that strace sees: BENCHMARKS.md). */
		out->syscalls = out->purges;
		out->entries_per_call = 1;
	}
	arena_destroy(r.arena);
	if (v)
		mxje_trim();
	pthread_barrier_destroy(&r.start);
	pthread_barrier_destroy(&r.churned);
	pthread_barrier_destroy(&r.measured);
	free(r.w);
	return 0;
}

/*
 * The purge hooks' contract, checked directly on an extent of a hooked
 * arena: after purge_forced the pages read back as zero; purge_lazy
 * succeeds and leaves the memory usable.
 */
static int selftest(void)
{
	extent_hooks_t *h = &mxje_hooks;
	unsigned ind;
	size_t len = 256 * PAGE;
	uint8_t *p, *pg;
	int bad = 0;

	if (mxje_arena_create(&ind))
		return 1;
	p = mallocx(len + 2 * PAGE, MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE);
	if (!p)
		return 1;
	pg = (uint8_t *)(((uintptr_t)p + PAGE - 1) & ~(PAGE - 1));
	memset(pg, 0xa5, len);
	if (h->purge_forced(h, pg, len, 0, len, ind)) {
		fprintf(stderr, "selftest: purge_forced failed\n");
		bad++;
	}
	for (size_t i = 0; i < len; i++)
		if (pg[i]) {
			fprintf(stderr, "selftest: byte %zu not zero after purge_forced\n", i);
			bad++;
			break;
		}
	memset(pg, 0x5a, len);
	if (h->purge_lazy(h, pg, len, PAGE, len - PAGE, ind)) {
		fprintf(stderr, "selftest: purge_lazy failed\n");
		bad++;
	}
	for (size_t i = 0; i < PAGE; i++)	/* outside the lazy range: kept */
		if (pg[i] != 0x5a) {
			fprintf(stderr, "selftest: purge_lazy touched bytes outside its range\n");
			bad++;
			break;
		}
	memset(pg, 0x11, len);			/* MADV_FREE'd memory is writable again */
	dallocx(p, MALLOCX_TCACHE_NONE);
	arena_destroy(ind);
	mxje_trim();
	return bad;
}

static void usage(void)
{
	fprintf(stderr, "usage: je-churn [--quick] [--reps N] [--threads N] [--ops N] "
		"[--slots N] [--dirty-ms N] [--muzzy-ms N] [--variant both|stock|madvx] "
		"[--no-defer] [--no-thp] [--locktrace]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	/*
	 * Defaults are the short verification run (the meson test, and what the
	 * test kernel runs when it starts the example without arguments);
	 * BENCHMARKS.md gives the command line of the comparison.
	 */
	*o = (struct opts){ .reps = 1, .threads = 2, .slots = 256, .ops = 15000,
			    .variants = 3 };
	/* Under QEMU TCG (the guest's init sets this) the run took 488 s at 30000. */
	if (getenv("MADVX_IN_TEST_KERNEL"))
		o->ops = 3000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--quick")) {
			o->quick = true;
			o->reps = 1;
			o->ops = getenv("MADVX_IN_TEST_KERNEL") ? 3000 : 15000;
			o->slots = 256;
			continue;
		}
		if (!strcmp(a, "--no-defer")) {
			o->no_defer = true;
			continue;
		}
		if (!strcmp(a, "--locktrace")) {
			o->locktrace = true;
			continue;
		}
		if (!strcmp(a, "--no-thp")) {
			o->no_thp = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--reps"))
			o->reps = (unsigned)atoi(v);
		else if (!strcmp(a, "--threads"))
			o->threads = (unsigned)atoi(v);
		else if (!strcmp(a, "--ops"))
			o->ops = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--slots"))
			o->slots = (unsigned)atoi(v);
		else if (!strcmp(a, "--dirty-ms"))
			o->dirty_ms = atol(v);
		else if (!strcmp(a, "--muzzy-ms"))
			o->muzzy_ms = atol(v);
		else if (!strcmp(a, "--variant"))
			o->variants = !strcmp(v, "stock") ? 1 : !strcmp(v, "madvx") ? 2 :
				      !strcmp(v, "both") ? 3 : (usage(), 0);
		else
			usage();
	}
	if (!o->reps || o->reps > MAX_REPS || !o->threads || !o->slots)
		usage();
}

#define COL(f) do {							\
	for (unsigned k = 0; k < n; k++)				\
		col[k] = smp[v][k].f;					\
	med[v] = median(col, n);					\
} while (0)

static void row(const char *metric, const char *unit, const double med[2], int variants)
{
	printf("%-34s", metric);
	for (int v = 0; v < 2; v++)
		if (variants & (1 << v))
			printf(" %14.1f", med[v]);
		else
			printf(" %14s", "-");
	if (variants == 3 && med[0] > 0)
		printf(" %10.3f", med[1] / med[0]);
	else
		printf(" %10s", "-");
	printf("  %s\n", unit);
}

int main(int argc, char **argv)
{
	static struct sample smp[2][MAX_REPS];
	struct mxje_opts mo = { .size = sizeof(mo) };
	double col[MAX_REPS], med[2];
	struct opts o;
	unsigned n;
	int fails = 0, ret;

	parse(argc, argv, &o);
	mo.no_defer = o.no_defer;
	/* Transparent huge pages off for the process (both variants alike). */
	if (o.no_thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		printf("# PR_SET_THP_DISABLE failed: THP stays as configured\n");
#ifdef MXJE_LOCKTRACE
	/* Before the churn maps anything: the helper fork copies our page tables. */
	if (o.locktrace) {
		lt_ok = locktrace_open(&lt) == 0;
		if (!lt_ok)
			printf("# locktrace unavailable: %s\n", lt.why);
	}
#endif
	ret = mxje_init(&mo);
	if (ret) {
		printf("SKIP: mxje_init: %s\n", strerror(-ret));
		return 77;
	}
	printf("# je-churn: %u threads x %llu ops, %u slots/thread, %u reps, "
	       "dirty_decay_ms %ld, muzzy_decay_ms %ld%s%s; libmadvx %s\n",
	       o.threads, (unsigned long long)o.ops, o.slots, o.reps, o.dirty_ms,
	       o.muzzy_ms, o.no_defer ? ", no deferral" : "", o.no_thp ? ", THP off" : "",
	       madvx_version());
	if ((o.variants & 2) && selftest()) {
		printf("FAIL: purge hook self-test\n");
		fails++;
	}
	/* Interleaved: every repetition runs each variant once, order rotating. */
	for (unsigned rep = 0; rep < o.reps; rep++) {
		for (int i = 0; i < 2; i++) {
			int v = (int)((rep + (unsigned)i) % 2);

			if (!(o.variants & (1 << v)))
				continue;
			ret = run_one(&o, v, rep, false, &smp[v][rep]);
			if (ret) {
				printf("SKIP: %s arena: %s\n", vname[v], strerror(-ret));
				return 77;
			}
		}
	}
#ifdef MXJE_LOCKTRACE
	/* mmap_lock acquisitions: one extra repetition per variant, traced. */
	if (lt_ok) {
		struct sample tmp;

		for (int v = 0; v < 2; v++)
			if (o.variants & (1 << v))
				run_one(&o, v, o.reps, true, &tmp);
	}
#endif
	n = o.reps;
	printf("%-34s %14s %14s %10s\n", "metric (median)", "stock", "madvx", "madvx/stock");
	for (int v = 0; v < 2; v++) if (o.variants & (1 << v)) COL(ops_s);
	row("throughput", "ops/s", med, o.variants);
	for (int v = 0; v < 2; v++) {
		if (!(o.variants & (1 << v)))
			continue;
		printf("# %s throughput per rep (ops/s):", vname[v]);
		for (unsigned k = 0; k < n; k++)
			printf(" %.0f", smp[v][k].ops_s);
		printf("\n");
	}
	for (int v = 0; v < 2; v++) if (o.variants & (1 << v)) COL(purges);
	row("purge calls (jemalloc nmadvise)", "per rep", med, o.variants);
	for (int v = 0; v < 2; v++) if (o.variants & (1 << v)) COL(syscalls);
	row("madvise/process_madvise syscalls", "per rep", med, o.variants);
	for (int v = 0; v < 2; v++) if (o.variants & (1 << v)) COL(entries_per_call);
	row("entries per syscall", "", med, o.variants);
	for (int v = 0; v < 2; v++) if (o.variants & (1 << v)) COL(live_mib);
	row("live objects at peak", "MiB", med, o.variants);
	for (int v = 0; v < 2; v++) {
		if (!(o.variants & (1 << v)))
			continue;
		for (unsigned k = 0; k < n; k++)
			col[k] = (smp[v][k].rss_peak - smp[v][k].rss_base) / (1 << 20);
		med[v] = median(col, n);
	}
	row("RSS peak - base", "MiB", med, o.variants);
	for (int v = 0; v < 2; v++) {
		if (!(o.variants & (1 << v)))
			continue;
		for (unsigned k = 0; k < n; k++)
			col[k] = (smp[v][k].rss_freed - smp[v][k].rss_base) / (1 << 20);
		med[v] = median(col, n);
	}
	row("RSS right after free - base", "MiB", med, o.variants);
	for (int v = 0; v < 2; v++) {
		if (!(o.variants & (1 << v)))
			continue;
		for (unsigned k = 0; k < n; k++)
			col[k] = (smp[v][k].rss_flushed - smp[v][k].rss_base) / (1 << 20);
		med[v] = median(col, n);
	}
	row("RSS after decay+flush - base", "MiB", med, o.variants);
#ifdef MXJE_LOCKTRACE
	if (lt_ok) {
		for (int v = 0; v < 2; v++)
			med[v] = lt_have[v] ? (double)(lt_res[v].self.acq_read + lt_res[v].others.acq_read) : 0;
		row("mmap_lock read acquisitions (1 rep)", "", med, o.variants);
		for (int v = 0; v < 2; v++)
			med[v] = lt_have[v] ? (double)(lt_res[v].self.acq_write + lt_res[v].others.acq_write) : 0;
		row("mmap_lock write acquisitions (1 rep)", "", med, o.variants);
		for (int v = 0; v < 2; v++)
			med[v] = lt_have[v] ? (double)(lt_res[v].self.held_ns + lt_res[v].others.held_ns) / 1e3 : 0;
		row("mmap_lock held (1 rep)", "us", med, o.variants);
		for (int v = 0; v < 2; v++)
			if (lt_have[v] && lt_res[v].lost)
				printf("# locktrace: %s trace buffer overflowed, counts are low\n", vname[v]);
	} else if (o.locktrace) {
		printf("%-34s %14s %14s  (locktrace unavailable: not root or no tracefs)\n",
		       "mmap_lock acquisitions", "n/a", "n/a");
	}
#endif
	/* Checks: nothing corrupted, memory given back. */
	for (int v = 0; v < 2; v++) {
		if (!(o.variants & (1 << v)))
			continue;
		for (unsigned k = 0; k < n; k++) {
			const struct sample *s = &smp[v][k];
			double grown = s->rss_peak - s->rss_base;
			double left = s->rss_flushed - s->rss_base;
			double limit = grown / 10 > 8 << 20 ? grown / 10 : 8 << 20;

			if (s->bad || s->zero_bad || s->oom) {
				printf("FAIL: %s rep %u: %llu checksum mismatches, %llu non-zero "
				       "MALLOCX_ZERO objects, %llu failed allocations\n", vname[v], k,
				       (unsigned long long)s->bad, (unsigned long long)s->zero_bad,
				       (unsigned long long)s->oom);
				fails++;
			}
			if (left > limit) {
				printf("FAIL: %s rep %u: RSS %.1f MiB above base after freeing "
				       "everything and decay (peak +%.1f MiB, limit %.1f MiB)\n", vname[v], k,
				       left / (1 << 20), grown / (1 << 20), limit / (1 << 20));
				fails++;
			}
		}
	}
	if (o.variants & 2) {
		struct mxje_stats st;

		mxje_stats_get(&st);
		printf("# madvx hooks, whole run: alloc %llu, dalloc %llu, destroy %llu, "
		       "purge_lazy %llu, purge_forced %llu, merges refused %llu/%llu, "
		       "flushes %llu (max %llu entries), libmadvx syscalls %llu "
		       "(%llu entries, %llu VMA lookups), fixups %llu, mappings %llu "
		       "(%llu unmapped again)\n",
		       (unsigned long long)st.alloc, (unsigned long long)st.dalloc,
		       (unsigned long long)st.destroy, (unsigned long long)st.purge_lazy,
		       (unsigned long long)st.purge_forced, (unsigned long long)st.merge_refused,
		       (unsigned long long)st.merge, (unsigned long long)st.flushes,
		       (unsigned long long)st.flush_max_entries,
		       (unsigned long long)st.madvx_syscalls, (unsigned long long)st.madvx_entries,
		       (unsigned long long)st.madvx_vma_queries, (unsigned long long)st.fixups,
		       (unsigned long long)st.chunks, (unsigned long long)st.trimmed);
		if (st.pending_bytes) {
			printf("FAIL: %llu bytes still pending after the final flush\n",
			       (unsigned long long)st.pending_bytes);
			fails++;
		}
	}
	{
		char line[128];
		FILE *f = fopen("/proc/self/status", "r");

		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "VmPeak:", 7) || !strncmp(line, "VmSize:", 7))
				printf("# %s", line);
		if (f)
			fclose(f);
	}
#ifdef MXJE_LOCKTRACE
	if (o.locktrace)
		locktrace_close(&lt);
#endif
	printf("%s\n", fails ? "FAIL" : "PASS: checksums, zeroed allocations and RSS after free");
	return fails ? 1 : 0;
}
