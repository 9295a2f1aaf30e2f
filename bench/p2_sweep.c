// SPDX-License-Identifier: MIT
/*
 * p2: MADV_DONTNEED of every other 4 KiB page of a touched 256 MiB mapping
 * (32768 non-adjacent hints, nothing to merge): one madvise() per page,
 * process_madvise() with vectors of N = 1, 2, 4, ... 1024 entries (the
 * table of seed 002, SeongJae Park's eval_proc_madvise), and libmadvx
 * (add all + flush), which should match N = 1024 plus its own per-hint
 * cost. Metric: wall ns per advised page, median over the repetitions (and
 * the same on the thread's CPU time, which preemption does not inflate);
 * variants interleaved, hinted pages re-touched (untimed) before each.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <madvx.h>

#include "bench.h"

#define PAGE 4096UL
#define NSWEEP 11	/* N = 1 .. 1024 */

enum { V_LOOP = 0, V_PM = 1, V_LIB = V_PM + NSWEEP, NV };

struct p2 {
	char *p;
	size_t hints;		/* advised pages: every other page */
	struct iovec *iov;
	struct madvx_batch *b;
};

static void variant_name(int v, char *buf, size_t len)
{
	if (v == V_LOOP)
		snprintf(buf, len, "madvise_loop");
	else if (v == V_LIB)
		snprintf(buf, len, "libmadvx");
	else
		snprintf(buf, len, "process_madvise_n%d", 1 << (v - V_PM));
}

/* A raw process_madvise() row of the sweep? */
static bool is_pm(int v)
{
	return v >= V_PM && v < V_LIB;
}

static int run_variant(struct p2 *s, int v)
{
	if (v == V_LOOP) {
		for (size_t i = 0; i < s->hints; i++)
			if (madvise(s->iov[i].iov_base, PAGE, MADV_DONTNEED))
				return -1;
		return 0;
	}
	if (v == V_LIB) {
		for (size_t i = 0; i < s->hints; i++)
			if (madvx_batch_add(s->b, s->iov[i].iov_base, PAGE, MADV_DONTNEED) < 0)
				return -1;
		return madvx_batch_flush(s->b);
	}
	for (size_t i = 0, n = 1UL << (v - V_PM); i < s->hints; i += n) {
		size_t m = s->hints - i < n ? s->hints - i : n;

		if (bench_process_madvise(s->iov + i, m, MADV_DONTNEED) != (long)(m * PAGE))
			return -1;
	}
	return 0;
}

static void touch_hinted(struct p2 *s)
{
	for (size_t i = 0; i < s->hints; i++)
		*(volatile char *)s->iov[i].iov_base = 1;
}

/* gnuplot the sweep; never fails the run. */
static void plot(const struct bench_opts *o, const double *med, size_t mib)
{
	char dat[] = "/tmp/madvx-bench-p2-XXXXXX";
	int fd = mkstemp(dat);
	FILE *f, *g;

	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		bench_note(o, "--plot: gnuplot not found (apt-get install gnuplot-nox); no plot written");
		return;
	}
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		bench_note(o, "--plot: cannot write a temp file; no plot written");
		return;
	}
	for (int k = 0; k < NSWEEP; k++)
		fprintf(f, "%d %g\n", 1 << k, med[V_PM + k]);
	fclose(f);
	g = popen("gnuplot", "w");
	if (!g) {
		bench_note(o, "--plot: cannot run gnuplot");
		unlink(dat);
		return;
	}
	fprintf(g, "set terminal png size 900,560 noenhanced\nset output '%s'\n"
		"set title 'MADV_DONTNEED, every other 4 KiB page of %zu MiB'\n"
		"set logscale x 2\nset xlabel 'process_madvise vector size (entries)'\n"
		"set ylabel 'ns per page (median)'\nset yrange [0:*]\nset key top right\n"
		"plot '%s' using 1:2 with linespoints title 'process_madvise nN', "
		"%g title 'madvise loop' dt 2, %g title 'libmadvx' lw 2\n",
		o->plot, mib, dat, med[V_LOOP], med[V_LIB]);
	if (pclose(g) == 0)
		bench_note(o, "plot written to %s", o->plot);
	else
		bench_note(o, "--plot: gnuplot failed; no plot written");
	unlink(dat);
}

int bench_p2(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 7, 2);
	size_t len = o->quick ? 16UL << 20 : 256UL << 20;
	struct p2 s = { .hints = len / PAGE / 2 };
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = (uint32_t)s.hints };
	struct bench_samples smp[NV] = { 0 }, cpu[NV] = { 0 };
	double med[NV], mcpu[NV];
	const char *no_pm = bench_pmadv_unavailable(MADV_DONTNEED);
	char name[32];
	int ret = 1;

	s.p = bench_map(len);
	s.iov = calloc(s.hints, sizeof(*s.iov));
	if (!s.p || !s.iov || madvx_batch_create(&bo, &s.b))
		goto out;
	bench_touch(s.p, len);
	for (size_t i = 0; i < s.hints; i++)
		s.iov[i] = (struct iovec){ s.p + 2 * i * PAGE, PAGE };
	for (int v = 0; v < NV; v++)
		if (bench_samples_init(&smp[v], reps) || bench_samples_init(&cpu[v], reps))
			goto out;
	bench_note(o, "%zu hints (every other 4 KiB page of %zu MiB), %u reps interleaved",
		   s.hints, len >> 20, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t t0, c0;

			if (is_pm(v) && no_pm)
				continue;
			touch_hinted(&s);
			c0 = bench_thread_cpu_ns();
			t0 = bench_now_ns();
			if (run_variant(&s, v)) {
				variant_name(v, name, sizeof(name));
				bench_note(o, "p2 %s failed", name);
				goto out;
			}
			bench_samples_add(&smp[v], (double)(bench_now_ns() - t0) / (double)s.hints);
			bench_samples_add(&cpu[v], (double)(bench_thread_cpu_ns() - c0) / (double)s.hints);
		}
	}
	for (int v = 0; v < NV; v++) {
		variant_name(v, name, sizeof(name));
		if (is_pm(v) && no_pm) {
			bench_report_na(o, "p2", name, "ns_per_page", no_pm);
			continue;
		}
		med[v] = bench_median(smp[v].v, smp[v].n);
		bench_report(o, "p2", name, "ns_per_page", med[v], "ns");
	}
	if (no_pm)
		bench_report_na(o, "p2", "libmadvx", "ratio_vs_n1024", no_pm);
	else
		bench_report(o, "p2", "libmadvx", "ratio_vs_n1024", med[V_LIB] / med[V_LIB - 1], "x");
	bench_report(o, "p2", "libmadvx", "speedup_vs_madvise_loop", med[V_LOOP] / med[V_LIB], "x");
	/* The same on the thread's CPU time: immune to preemption by other load. */
	for (int v = 0; v < NV; v++) {
		if (is_pm(v) && no_pm)
			continue;
		mcpu[v] = bench_median(cpu[v].v, cpu[v].n);
		variant_name(v, name, sizeof(name));
		bench_report(o, "p2", name, "cpu_ns_per_page", mcpu[v], "ns");
	}
	if (no_pm) {
		/* The sweep is p2's baseline: without it, no target to judge. */
		bench_note(o, "p2: targets vs process_madvise_n1024 not judged: %s", no_pm);
		ret = 0;
		goto out;
	}
	bench_report(o, "p2", "libmadvx", "cpu_ratio_vs_n1024", mcpu[V_LIB] / mcpu[V_LIB - 1], "x");
	bench_target(o, "p2", "libmadvx / process_madvise_n1024 (wall)", med[V_LIB] / med[V_LIB - 1],
		     1.05, false);
	bench_target(o, "p2", "libmadvx / process_madvise_n1024 (CPU)", mcpu[V_LIB] / mcpu[V_LIB - 1],
		     1.05, false);
	if (o->plot)
		plot(o, med, len >> 20);
	ret = 0;
out:
	for (int v = 0; v < NV; v++)
		bench_samples_free(&smp[v]), bench_samples_free(&cpu[v]);
	madvx_batch_free(s.b);
	free(s.iov);
	if (s.p)
		munmap(s.p, len);
	return ret;
}
