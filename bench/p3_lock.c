// SPDX-License-Identifier: MIT
/*
 * p3: 1024 MADV_DONTNEED hints over 128 VMAs, 32 of them crossing a VMA
 * boundary, while a background thread of the same process mmap()s and
 * munmap()s small mappings of its own in a loop (as any allocator or
 * runtime thread does). Variants, interleaved:
 *  - process_madvise_raw: the hints as one process_madvise() vector, a
 *    crossing entry first: the kernel falls back to mmap_read_lock for the
 *    whole vector and the background thread's mmap/munmap wait for it;
 *  - libmadvx: add the hints + flush (entries split at VMA boundaries);
 *  - baseline_no_crossing: one raw vector of single-VMA entries only - the
 *    background progress we should see when nobody takes mmap_lock.
 * Metrics: mmap_lock acquisitions of the calling thread per call (locktrace,
 * a few traced calls per variant, apart from the timed ones), caller
 * latency p50/p99, and the background thread's iterations per ms while the
 * calls run; hinted pages are re-touched (untimed) before every call.
 */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <madvx.h>

#include "bench.h"
#include "locktrace.h"

#define PAGE 4096UL
#define NVMAS 128
#define VMA_PAGES 16
#define NPAGES (NVMAS * VMA_PAGES)
#define NHINTS 1024
#define TRACED_CALLS 15

enum { V_RAW, V_LIB, V_BASE, NV };
static const char *const vname[NV] = {
	"process_madvise_raw", "libmadvx", "baseline_no_crossing",
};

struct p3 {
	char *p;
	struct iovec hints[NHINTS];	/* as added, address order */
	struct iovec raw[NHINTS];	/* crossing entry first */
	struct iovec base[NHINTS];	/* single-VMA entries only */
	struct madvx_batch *b;
	int err;
};

static _Atomic uint64_t bg_iters;
static atomic_bool bg_stop;

/* Caller on CPU 0, background thread on CPU 1 (when there are two): the
 * same placement for every variant. */
static void pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *bg_thread(void *arg)
{
	(void)arg;
	pin(1);
	while (!atomic_load_explicit(&bg_stop, memory_order_relaxed)) {
		void *q = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (q != MAP_FAILED)
			munmap(q, 4 * PAGE);
		atomic_fetch_add_explicit(&bg_iters, 1, memory_order_relaxed);
	}
	return NULL;
}

static int setup(struct p3 *s)
{
	size_t cross = NHINTS;

	s->p = bench_map(NPAGES * PAGE);
	if (!s->p)
		return -1;
	bench_touch(s->p, NPAGES * PAGE);
	if (bench_split_vmas(s->p, NPAGES * PAGE, NVMAS))
		return -1;
	/* Hint i: page 2i; the last hint of every 4th VMA spans 3 pages into the next. */
	for (size_t i = 0; i < NHINTS; i++) {
		size_t page = 2 * i, len = 1;

		if (page % VMA_PAGES == VMA_PAGES - 2 && (page / VMA_PAGES) % 4 == 0)
			len = 3;
		s->hints[i] = (struct iovec){ s->p + page * PAGE, len * PAGE };
		s->base[i] = (struct iovec){ s->p + page * PAGE, PAGE };
		if (len > 1 && cross == NHINTS)
			cross = i;
	}
	memcpy(s->raw, s->hints, sizeof(s->raw));
	s->raw[0] = s->hints[cross];
	s->raw[cross] = s->hints[0];
	return 0;
}

static void touch_hinted(struct p3 *s)
{
	for (size_t i = 0; i < NHINTS; i++)
		for (size_t off = 0; off < s->hints[i].iov_len; off += PAGE)
			((volatile char *)s->hints[i].iov_base)[off] = 1;
}

static size_t total(const struct iovec *iov)
{
	size_t sum = 0;

	for (size_t i = 0; i < NHINTS; i++)
		sum += iov[i].iov_len;
	return sum;
}

static int variant(struct p3 *s, int v)
{
	switch (v) {
	case V_RAW:
		return bench_process_madvise(s->raw, NHINTS, MADV_DONTNEED) == (long)total(s->raw) ? 0 : -1;
	case V_BASE:
		return bench_process_madvise(s->base, NHINTS, MADV_DONTNEED) == (long)total(s->base) ? 0 : -1;
	case V_LIB:
		for (size_t i = 0; i < NHINTS; i++)
			if (madvx_batch_add(s->b, s->hints[i].iov_base, s->hints[i].iov_len,
					    MADV_DONTNEED) < 0)
				return -1;
		return madvx_batch_flush(s->b);
	}
	return -1;
}

/* Why the raw process_madvise() rows cannot run here, or NULL (bench_pmadv_unavailable()). */
static const char *no_pm;

static bool skipped(int v)
{
	return no_pm && (v == V_RAW || v == V_BASE);
}

struct traced {
	struct p3 *s;
	int v;
};

static void traced_cb(void *arg)
{
	struct traced *t = arg;

	if (variant(t->s, t->v))
		t->s->err = 1;
}

static double mean(const double *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	return n ? sum / (double)n : 0;
}

/* A few calls per variant under locktrace: acquisitions, held share, bg wait. */
static void lock_rows(const struct bench_opts *o, struct p3 *s, struct locktrace *ltp,
		      int lt_ret)
{
	struct bench_samples acq[NV] = { 0 }, held[NV] = { 0 }, wait[NV] = { 0 };
	struct locktrace lt = *ltp;

	if (lt_ret) {
		for (int v = 0; v < NV; v++)
			bench_report_na(o, "p3", vname[v], "mmap_lock_acq_per_call", lt.why);
		return;
	}
	for (int v = 0; v < NV; v++) {
		bench_samples_init(&acq[v], TRACED_CALLS);
		bench_samples_init(&held[v], TRACED_CALLS);
		bench_samples_init(&wait[v], TRACED_CALLS);
	}
	for (unsigned int r = 0; r < TRACED_CALLS; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			struct traced t = { s, (int)bench_order(r, i, NV) };
			struct locktrace_result res;

			if (skipped(t.v))
				continue;
			touch_hinted(s);
			if (locktrace_measure(&lt, traced_cb, &t, &res))
				continue;
			bench_samples_add(&acq[t.v], (double)(res.self.acq_read + res.self.acq_write));
			bench_samples_add(&held[t.v], 100.0 * (double)res.self.held_ns /
						      (double)(res.call_ns ? res.call_ns : 1));
			bench_samples_add(&wait[t.v], (double)res.others.wait_ns / 1000.0);
		}
	}
	for (int v = 0; v < NV; v++) {
		if (skipped(v)) {
			bench_report_na(o, "p3", vname[v], "mmap_lock_acq_per_call", no_pm);
			continue;
		}
		bench_report(o, "p3", vname[v], "mmap_lock_acq_per_call",
			     bench_median(acq[v].v, acq[v].n), "count");
		bench_report(o, "p3", vname[v], "mmap_lock_held_share",
			     bench_median(held[v].v, held[v].n), "%");
		/* Mean: the bg thread is often not even scheduled in a ~1 ms window. */
		bench_report(o, "p3", vname[v], "bg_mmap_lock_wait_mean",
			     mean(wait[v].v, wait[v].n), "us");
	}
	bench_target(o, "p3", "libmadvx mmap_lock acquisitions per call",
		     bench_median(acq[V_LIB].v, acq[V_LIB].n), 0, false);
	for (int v = 0; v < NV; v++) {
		bench_samples_free(&acq[v]);
		bench_samples_free(&held[v]);
		bench_samples_free(&wait[v]);
	}
	*ltp = lt;
}

int bench_p3(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 300, 20);
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = NHINTS };
	struct bench_samples lat[NV] = { 0 }, bgr[NV] = { 0 };
	uint64_t bg_n[NV] = { 0 }, bg_t[NV] = { 0 };
	double rate[NV];
	static struct p3 s;
	struct locktrace lt;
	cpu_set_t saved_cpus;
	pthread_t th;
	bool running = false;
	int lt_ret;
	int ret = 1;

	no_pm = bench_pmadv_unavailable(MADV_DONTNEED);
	/* Before the mappings: the tracefs helper is a fork(), which would
	 * write-protect them for copy-on-write. */
	lt_ret = locktrace_open(&lt);
	memset(&s, 0, sizeof(s));
	if (setup(&s) || madvx_batch_create(&bo, &s.b))
		goto out;
	for (int v = 0; v < NV; v++)
		if (bench_samples_init(&lat[v], reps) || bench_samples_init(&bgr[v], reps))
			goto out;
	atomic_store(&bg_stop, false);
	if (pthread_create(&th, NULL, bg_thread, NULL))
		goto out;
	running = true;
	sched_getaffinity(0, sizeof(saved_cpus), &saved_cpus);
	pin(0);
	bench_note(o, "%d hints over %d VMAs (32 crossing), bg thread mmap/munmap loop, "
		   "%u calls per variant interleaved", NHINTS, NVMAS, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t t0, t1, c0, c1;

			if (skipped(v))
				continue;
			touch_hinted(&s);
			c0 = atomic_load(&bg_iters);
			t0 = bench_now_ns();
			if (variant(&s, v)) {
				bench_note(o, "p3 %s failed", vname[v]);
				goto out;
			}
			t1 = bench_now_ns();
			c1 = atomic_load(&bg_iters);
			bench_samples_add(&lat[v], (double)(t1 - t0) / 1000.0);
			bench_samples_add(&bgr[v], (double)(c1 - c0) / ((double)(t1 - t0) / 1e6));
			bg_n[v] += c1 - c0;
			bg_t[v] += t1 - t0;
		}
	}
	lock_rows(o, &s, &lt, lt_ret);
	/*
	 * Background progress: iterations per ms over all calls of a variant
	 * (the ratio's basis), and the median over calls (0 when other load on
	 * the machine keeps the thread off a CPU in most calls).
	 */
	for (int v = 0; v < NV; v++) {
		if (skipped(v)) {
			rate[v] = 0;
			bench_report_na(o, "p3", vname[v], "bg_iters_per_ms", no_pm);
			continue;
		}
		rate[v] = (double)bg_n[v] / ((double)bg_t[v] / 1e6);
		bench_report(o, "p3", vname[v], "bg_iters_per_ms_median",
			     bench_median(bgr[v].v, bgr[v].n), "iter/ms");
		bench_report(o, "p3", vname[v], "caller_p50", bench_median(lat[v].v, lat[v].n), "us");
		bench_report(o, "p3", vname[v], "caller_p99",
			     bench_percentile(lat[v].v, lat[v].n, 99), "us");
		bench_report(o, "p3", vname[v], "bg_iters_per_ms", rate[v], "iter/ms");
	}
	if (!rate[V_BASE]) {
		bench_report_na(o, "p3", "libmadvx", "bg_progress_vs_baseline", no_pm ? no_pm :
				"the background thread made no progress in the baseline");
		ret = s.err;
		goto out;
	}
	bench_report(o, "p3", "libmadvx", "bg_progress_vs_baseline", rate[V_LIB] / rate[V_BASE], "x");
	bench_report(o, "p3", "process_madvise_raw", "bg_progress_vs_baseline",
		     rate[V_RAW] / rate[V_BASE], "x");
	bench_target(o, "p3", "libmadvx bg progress / no-crossing baseline",
		     rate[V_LIB] / rate[V_BASE], 0.8, true);
	ret = s.err;
out:
	if (running) {
		atomic_store(&bg_stop, true);
		pthread_join(th, NULL);
		sched_setaffinity(0, sizeof(saved_cpus), &saved_cpus);
	}
	for (int v = 0; v < NV; v++)
		bench_samples_free(&lat[v]), bench_samples_free(&bgr[v]);
	madvx_batch_free(s.b);
	if (s.p)
		munmap(s.p, NPAGES * PAGE);
	locktrace_close(&lt);
	return ret;
}
