// SPDX-License-Identifier: MIT
/*
 * p1: 65536 adjacent 4 KiB MADV_DONTNEED hints over a touched 256 MiB
 * mapping (one VMA). What a user would do instead: one madvise() per hint,
 * or process_madvise() vectors of 1024; the floor is one madvise() over the
 * whole range. libmadvx merges the adjacent hints, so it should be at the
 * floor plus its own per-hint cost. Metric: wall ns per page, median over
 * the repetitions; the mapping is re-touched (untimed) before every variant.
 * Also cpu_ns_per_page: the thread's CPU time (the syscalls run in the
 * thread's context, so it is the same work without the time other load on
 * the machine kept us off the CPU).
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <madvx.h>

#include "bench.h"

#define PAGE 4096UL

enum { V_LOOP, V_PM1024, V_SINGLE, V_LIB, NV };
static const char *const vname[NV] = {
	"madvise_loop", "process_madvise_n1024", "single_madvise", "libmadvx",
};

struct p1 {
	char *p;
	size_t pages;
	struct iovec *iov;
	struct madvx_batch *b;
};

static int run_variant(struct p1 *s, int v)
{
	switch (v) {
	case V_LOOP:
		for (size_t i = 0; i < s->pages; i++)
			if (madvise(s->p + i * PAGE, PAGE, MADV_DONTNEED))
				return -1;
		return 0;
	case V_PM1024:
		for (size_t i = 0; i < s->pages; i += 1024) {
			size_t n = s->pages - i < 1024 ? s->pages - i : 1024;

			if (bench_process_madvise(s->iov + i, n, MADV_DONTNEED) != (long)(n * PAGE))
				return -1;
		}
		return 0;
	case V_SINGLE:
		return madvise(s->p, s->pages * PAGE, MADV_DONTNEED);
	case V_LIB:
		for (size_t i = 0; i < s->pages; i++)
			if (madvx_batch_add(s->b, s->p + i * PAGE, PAGE, MADV_DONTNEED) < 0)
				return -1;
		return madvx_batch_flush(s->b);
	}
	return -1;
}

int bench_p1(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 15, 3);
	struct p1 s = { .pages = o->quick ? 4096 : 65536 };
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = (uint32_t)s.pages };
	struct bench_samples smp[NV] = { 0 }, cpu[NV] = { 0 };
	double med[NV], mcpu[NV];
	const char *no_pm = bench_pmadv_unavailable(MADV_DONTNEED);
	int ret = 1;

	s.p = bench_map(s.pages * PAGE);
	s.iov = calloc(s.pages, sizeof(*s.iov));
	if (!s.p || !s.iov || madvx_batch_create(&bo, &s.b))
		goto out;
	for (size_t i = 0; i < s.pages; i++)
		s.iov[i] = (struct iovec){ s.p + i * PAGE, PAGE };
	for (int v = 0; v < NV; v++)
		if (bench_samples_init(&smp[v], reps) || bench_samples_init(&cpu[v], reps))
			goto out;
	bench_note(o, "%zu hints of 4 KiB over one %zu MiB mapping, %u reps interleaved",
		   s.pages, s.pages * PAGE >> 20, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t t0, c0;

			if (v == V_PM1024 && no_pm)
				continue;
			bench_touch(s.p, s.pages * PAGE);
			c0 = bench_thread_cpu_ns();
			t0 = bench_now_ns();
			if (run_variant(&s, v)) {
				bench_note(o, "p1 %s failed", vname[v]);
				goto out;
			}
			bench_samples_add(&smp[v], (double)(bench_now_ns() - t0) / (double)s.pages);
			bench_samples_add(&cpu[v], (double)(bench_thread_cpu_ns() - c0) / (double)s.pages);
		}
	}
	for (int v = 0; v < NV; v++) {
		if (v == V_PM1024 && no_pm) {
			bench_report_na(o, "p1", vname[v], "ns_per_page", no_pm);
			continue;
		}
		med[v] = bench_median(smp[v].v, smp[v].n);
		bench_report(o, "p1", vname[v], "ns_per_page", med[v], "ns");
	}
	bench_report(o, "p1", "libmadvx", "ratio_vs_single_madvise", med[V_LIB] / med[V_SINGLE], "x");
	bench_report(o, "p1", "libmadvx", "speedup_vs_madvise_loop", med[V_LOOP] / med[V_LIB], "x");
	/* The same on the thread's CPU time: immune to preemption by other load. */
	for (int v = 0; v < NV; v++) {
		if (v == V_PM1024 && no_pm)
			continue;
		mcpu[v] = bench_median(cpu[v].v, cpu[v].n);
		bench_report(o, "p1", vname[v], "cpu_ns_per_page", mcpu[v], "ns");
	}
	bench_target(o, "p1", "libmadvx / single_madvise (wall)", med[V_LIB] / med[V_SINGLE], 1.15, false);
	bench_target(o, "p1", "libmadvx / single_madvise (CPU)", mcpu[V_LIB] / mcpu[V_SINGLE], 1.15, false);
	bench_target(o, "p1", "madvise_loop / libmadvx (wall)", med[V_LOOP] / med[V_LIB], 5, true);
	bench_target(o, "p1", "madvise_loop / libmadvx (CPU)", mcpu[V_LOOP] / mcpu[V_LIB], 5, true);
	ret = 0;
out:
	for (int v = 0; v < NV; v++)
		bench_samples_free(&smp[v]), bench_samples_free(&cpu[v]);
	madvx_batch_free(s.b);
	free(s.iov);
	if (s.p)
		munmap(s.p, s.pages * PAGE);
	return ret;
}
