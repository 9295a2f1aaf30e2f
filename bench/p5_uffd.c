// SPDX-License-Identifier: MIT
/*
 * p5: fill 256 MiB of userfaultfd-registered memory from contiguous source
 * pages, the compaction step of a concurrent GC. Variants:
 *   copy_4k     - one UFFDIO_COPY per 4 KiB page (allocate, zero, copy);
 *   move_4k     - one UFFDIO_MOVE per 4 KiB page (what a naive GC issues);
 *   move_list   - libmadvx madvx_uffd_move_list() of 4 KiB items: coalesced
 *                 into one ioctl per VMA-bounded run;
 *   move_single - one UFFDIO_MOVE of the whole range (the floor).
 * Metric gib_per_s (higher is better), median over interleaved repetitions;
 * the source is populated and the destination mapped and registered, both
 * untimed, before every variant. Targets (issue 4): move_list >= 0.8x
 * move_single and >= 5x move_4k.
 *
 * p5_fault: fault round trip - a mutator thread reads a missing page of a
 * registered area, the handler thread (madvx_uffd_run) resolves it with
 * UFFDIO_COPY, the read returns - with 1 and 2 mutator threads; p50/p99 of
 * the per-fault time seen by the mutator, median over repetitions.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <madvx.h>

#include "bench.h"

#define PAGE 4096UL

enum { V_COPY4K, V_MOVE4K, V_LIST, V_SINGLE, NV };
static const char *const vname[NV] = { "copy_4k", "move_4k", "move_list", "move_single" };

struct p5 {
	struct madvx_uffd *u;
	size_t pages;
	uint8_t *src, *dst;
	struct madvx_uffd_item *items;
};

/* Source pages, each holding its index: exclusive, populated anonymous pages. */
static void fill_source(struct p5 *s)
{
	for (size_t i = 0; i < s->pages; i++)
		*(volatile uint32_t *)(s->src + i * PAGE) = (uint32_t)i + 1;
}

static int run_variant(struct p5 *s, int v)
{
	uintptr_t dst = (uintptr_t)s->dst, src = (uintptr_t)s->src;

	switch (v) {
	case V_COPY4K:
		for (size_t i = 0; i < s->pages; i++)
			if (madvx_uffd_copy(s->u, dst + i * PAGE, src + i * PAGE, PAGE, 0, NULL))
				return -1;
		return 0;
	case V_MOVE4K:
		for (size_t i = 0; i < s->pages; i++)
			if (madvx_uffd_move(s->u, dst + i * PAGE, src + i * PAGE, PAGE, 0, NULL))
				return -1;
		return 0;
	case V_LIST:
		for (size_t i = 0; i < s->pages; i++)
			s->items[i] = (struct madvx_uffd_item){ .dst = dst + i * PAGE,
				.src = src + i * PAGE, .len = PAGE };
		return madvx_uffd_move_list(s->u, s->items, s->pages, 0);
	case V_SINGLE:
		return madvx_uffd_move(s->u, dst, src, s->pages * PAGE, 0, NULL);
	}
	return -1;
}

/* Every 61st page (and the last) of dst holds what its source page held. */
static bool filled_right(const struct p5 *s)
{
	for (size_t i = 0; i < s->pages; i += (i + 61 < s->pages ? 61 : 1))
		if (*(const uint32_t *)(s->dst + i * PAGE) != (uint32_t)i + 1)
			return false;
	return true;
}

int bench_p5(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 7, 2);
	struct p5 s = { .pages = (o->quick ? 16UL : 256UL) << 20 >> 12 };
	struct madvx_uffd_opts uo = { .size = sizeof(uo), .features = MADVX_UFFD_FEATURE_MOVE };
	struct bench_samples smp[NV] = { 0 };
	size_t len = s.pages * PAGE;
	double med[NV];
	int ret = 1;

	if (madvx_uffd_open(&uo, &s.u)) {
		bench_note(o, "p5: no userfaultfd with UFFD_FEATURE_MOVE (6.8) here");
		return BENCH_SKIP;
	}
	s.items = calloc(s.pages, sizeof(*s.items));
	s.src = bench_map(len);
	if (!s.items || !s.src)
		goto out;
	for (int v = 0; v < NV; v++)
		if (bench_samples_init(&smp[v], reps))
			goto out;
	bench_note(o, "fill %zu MiB of registered memory from contiguous source pages, "
		   "%u reps interleaved", len >> 20, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t t0, t;

			/* Untimed: populated source, empty registered destination. */
			fill_source(&s);
			s.dst = bench_map(len);
			if (!s.dst || madvx_uffd_register(s.u, (uintptr_t)s.dst, len,
							  MADVX_UFFD_MISSING, NULL))
				goto out;
			t0 = bench_now_ns();
			if (run_variant(&s, v)) {
				bench_note(o, "p5 %s failed", vname[v]);
				goto out;
			}
			t = bench_now_ns() - t0;
			if (!filled_right(&s)) {
				bench_note(o, "p5 %s: destination contents wrong", vname[v]);
				goto out;
			}
			bench_samples_add(&smp[v], (double)len / (1 << 30) / ((double)t / 1e9));
			munmap(s.dst, len);
			s.dst = NULL;
			/* COPY left the source populated; MOVE emptied it. Same start for all. */
			madvise(s.src, len, MADV_DONTNEED);
		}
	}
	for (int v = 0; v < NV; v++) {
		med[v] = bench_median(smp[v].v, smp[v].n);
		bench_report(o, "p5", vname[v], "gib_per_s", med[v], "GiB/s");
	}
	bench_report(o, "p5", "move_list", "ratio_vs_move_single",
		     med[V_LIST] / med[V_SINGLE], "x");
	bench_report(o, "p5", "move_list", "speedup_vs_move_4k", med[V_LIST] / med[V_MOVE4K], "x");
	bench_target(o, "p5", "move_list / move_single", med[V_LIST] / med[V_SINGLE], 0.8, true);
	bench_target(o, "p5", "move_list / move_4k", med[V_LIST] / med[V_MOVE4K], 5, true);
	ret = 0;
out:
	for (int v = 0; v < NV; v++)
		bench_samples_free(&smp[v]);
	if (s.dst)
		munmap(s.dst, len);
	if (s.src)
		munmap(s.src, len);
	free(s.items);
	madvx_uffd_free(s.u);
	return ret;
}

/* ---- p5_fault ---- */

struct p5f {
	struct madvx_uffd *u;
	uint8_t *area;
	size_t pages;
	unsigned int nmut;
	uint8_t *page;			/* what every fault is resolved with */
	struct bench_samples rtt[2];	/* per mutator, ns */
	pthread_barrier_t go;
};

struct p5f_mut {
	struct p5f *s;
	unsigned int idx;
};

static int p5f_fault(struct madvx_uffd *u, const struct madvx_uffd_event *ev, void *arg)
{
	struct p5f *s = arg;

	return madvx_uffd_copy(u, ev->arg.fault.addr & ~(PAGE - 1), (uintptr_t)s->page, PAGE, 0,
			       NULL);
}

static void *p5f_handler(void *arg)
{
	struct p5f *s = arg;
	struct madvx_uffd_handler h = { .size = sizeof(h), .fault = p5f_fault, .arg = s };

	madvx_uffd_run(s->u, &h);
	return NULL;
}

/* Mutator @idx reads pages idx, idx + nmut, ...: each read is one fault. */
static void *p5f_mutator(void *arg)
{
	struct p5f_mut *m = arg;
	struct p5f *s = m->s;

	pthread_barrier_wait(&s->go);
	for (size_t i = m->idx; i < s->pages; i += s->nmut) {
		uint64_t t0 = bench_now_ns();

		(void)*(volatile uint8_t *)(s->area + i * PAGE);
		bench_samples_add(&s->rtt[m->idx], (double)(bench_now_ns() - t0));
	}
	return NULL;
}

/* One run with @nmut mutators; *p50, *p99 in microseconds over all their faults. */
static int p5f_run(struct p5f *s, unsigned int nmut, double *p50, double *p99)
{
	struct p5f_mut m[2];
	pthread_t ht, mt[2];
	struct bench_samples all = { 0 };
	int ret = -1;

	s->nmut = nmut;
	s->area = bench_map(s->pages * PAGE);
	if (!s->area || madvx_uffd_register(s->u, (uintptr_t)s->area, s->pages * PAGE,
					    MADVX_UFFD_MISSING, NULL))
		goto out;
	if (bench_samples_init(&all, s->pages))
		goto out;
	madvx_uffd_stop(s->u, 0);
	pthread_barrier_init(&s->go, NULL, nmut);
	pthread_create(&ht, NULL, p5f_handler, s);
	for (unsigned int i = 0; i < nmut; i++) {
		s->rtt[i].n = 0;
		m[i] = (struct p5f_mut){ .s = s, .idx = i };
		pthread_create(&mt[i], NULL, p5f_mutator, &m[i]);
	}
	for (unsigned int i = 0; i < nmut; i++)
		pthread_join(mt[i], NULL);
	madvx_uffd_stop(s->u, 1);
	pthread_join(ht, NULL);
	pthread_barrier_destroy(&s->go);
	for (unsigned int i = 0; i < nmut; i++)
		for (size_t k = 0; k < s->rtt[i].n; k++)
			bench_samples_add(&all, s->rtt[i].v[k]);
	*p50 = bench_percentile(all.v, all.n, 50) / 1e3;
	*p99 = bench_percentile(all.v, all.n, 99) / 1e3;
	ret = 0;
out:
	bench_samples_free(&all);
	if (s->area)
		munmap(s->area, s->pages * PAGE);
	s->area = NULL;
	return ret;
}

int bench_p5_fault(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 7, 2);
	struct p5f s = { .pages = o->quick ? 2048 : 16384 };
	struct bench_samples p50[2] = { 0 }, p99[2] = { 0 };
	int ret = 1;

	if (madvx_uffd_open(NULL, &s.u)) {
		bench_note(o, "p5_fault: no userfaultfd here");
		return BENCH_SKIP;
	}
	s.page = bench_map(PAGE);
	if (!s.page)
		goto out;
	memset(s.page, 0x5a, PAGE);
	for (int v = 0; v < 2; v++)
		if (bench_samples_init(&s.rtt[v], s.pages) || bench_samples_init(&p50[v], reps) ||
		    bench_samples_init(&p99[v], reps))
			goto out;
	bench_note(o, "%zu faults per run (fault -> handler thread -> UFFDIO_COPY -> resume), "
		   "%u reps interleaved", s.pages, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < 2; i++) {
			unsigned int v = bench_order(r, i, 2);
			double a, b;

			if (p5f_run(&s, v + 1, &a, &b)) {
				bench_note(o, "p5_fault run failed");
				goto out;
			}
			bench_samples_add(&p50[v], a);
			bench_samples_add(&p99[v], b);
		}
	}
	for (int v = 0; v < 2; v++) {
		const char *name = v ? "2_mutators" : "1_mutator";

		bench_report(o, "p5_fault", name, "rtt_p50",
			     bench_median(p50[v].v, p50[v].n), "us");
		bench_report(o, "p5_fault", name, "rtt_p99",
			     bench_median(p99[v].v, p99[v].n), "us");
	}
	ret = 0;
out:
	for (int v = 0; v < 2; v++) {
		bench_samples_free(&s.rtt[v]);
		bench_samples_free(&p50[v]);
		bench_samples_free(&p99[v]);
	}
	if (s.page)
		munmap(s.page, PAGE);
	madvx_uffd_free(s.u);
	return ret;
}
