// SPDX-License-Identifier: MIT
/*
 * p4: asynchronous release of 1024 scattered 4 KiB pages (MADV_DONTNEED)
 * of a touched 64 MiB mapping (one VMA), added in random order.
 *
 * Variants: what a caller does synchronously (a madvise() loop, one
 * process_madvise() vector), 1024 raw IORING_OP_MADVISE SQEs in one submit
 * (liburing, ring made once), and libmadvx: the synchronous flush for
 * reference and madvx_async_submit() + madvx_async_wait() with each async
 * backend. Each variant is timed from its first call until the caller knows
 * the pages are released:
 *  - wall_us: CLOCK_MONOTONIC;
 *  - caller_cpu_us: CLOCK_THREAD_CPUTIME_ID of the calling thread (adding,
 *    submitting, and reaping in the wait; sleeping in the wait is free);
 *  - handoff_cpu_us (async variants): the caller's CPU until submit
 *    returned - what a thread that hands off and gets on pays first;
 *  - total_cpu_us: CLOCK_PROCESS_CPUTIME_ID, every thread of the process,
 *    which includes io_uring's io-wq workers (they are threads of this
 *    process: "iou-wrk-*" in /proc/self/task); checked by iowq_cpu_us,
 *    their own runtime from /proc/self/task/T/schedstat.
 * Targets for the default backend: caller <= 0.1x and total <= 0.5x the
 * madvise loop's CPU.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <madvx.h>

#ifdef BENCH_HAVE_LIBURING
#include <liburing.h>
#endif

#include "bench.h"

#define PAGE 4096UL
#define NHINTS 1024
#define SPAN_PAGES 16384	/* 64 MiB */

enum {
	V_LOOP, V_PM, V_URING, V_LIB_SYNC, V_LIB_THREAD, V_LIB_URING, NV
};
static const char *const vname[NV] = {
	"madvise_loop", "process_madvise", "io_uring", "libmadvx_flush",
	"libmadvx_async_thread", "libmadvx_async_io_uring",
};

enum { M_WALL, M_CALLER, M_TOTAL, M_HANDOFF, M_IOWQ, NM };
static const char *const mname[NM] = {
	"wall_us", "caller_cpu_us", "total_cpu_us", "handoff_cpu_us", "iowq_cpu_us",
};

/* Caller CPU until the async variants' submit returned (the hand-off alone). */
static uint64_t handoff_ns;

struct p4 {
	char *p;
	size_t npages;
	uint32_t *pages;	/* random order */
	struct iovec *iov;	/* address order */
	struct madvx_batch *b;
	struct madvx_async *as_thread, *as_uring;
#ifdef BENCH_HAVE_LIBURING
	struct io_uring ring;
	bool ring_ok;
#endif
	bool avail[NV];
	const char *why[NV];
};

/* Runtime (ns) of this process's io-wq worker threads, alive now. */
static uint64_t iowq_ns(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	uint64_t sum = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[300], buf[64];
		int fd;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0 || strncmp(buf, "iou-wrk-", 8))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			sum += strtoull(buf, NULL, 10);
		}
	}
	closedir(d);
	return sum;
}

static int add_all(struct p4 *s)
{
	for (size_t i = 0; i < NHINTS; i++)
		if (madvx_batch_add(s->b, s->p + (size_t)s->pages[i] * PAGE, PAGE,
				    MADV_DONTNEED) < 0)
			return -1;
	return 0;
}

static int run_async(struct p4 *s, struct madvx_async *as)
{
	uint64_t t;

	if (add_all(s) || madvx_async_submit(as, s->b, &t))
		return -1;
	handoff_ns = bench_thread_cpu_ns();
	/* A real caller gets on with its work here. */
	return madvx_async_wait(as, t);
}

#ifdef BENCH_HAVE_LIBURING
static int run_uring(struct p4 *s)
{
	struct io_uring_cqe *cqe;
	int bad = 0;

	for (size_t i = 0; i < NHINTS; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);

		if (!sqe)
			return -1;
		io_uring_prep_madvise(sqe, s->p + (size_t)s->pages[i] * PAGE, PAGE, MADV_DONTNEED);
	}
	if (io_uring_submit(&s->ring) != NHINTS)
		return -1;
	for (size_t i = 0; i < NHINTS; i++) {
		if (io_uring_wait_cqe(&s->ring, &cqe))
			return -1;
		bad |= cqe->res;
		io_uring_cqe_seen(&s->ring, cqe);
	}
	return bad;
}
#endif

static int run_variant(struct p4 *s, int v)
{
	switch (v) {
	case V_LOOP:
		for (size_t i = 0; i < NHINTS; i++)
			if (madvise(s->p + (size_t)s->pages[i] * PAGE, PAGE, MADV_DONTNEED))
				return -1;
		return 0;
	case V_PM:
		return bench_process_madvise(s->iov, NHINTS, MADV_DONTNEED) ==
		       (long)(NHINTS * PAGE) ? 0 : -1;
#ifdef BENCH_HAVE_LIBURING
	case V_URING:
		return run_uring(s);
#endif
	case V_LIB_SYNC:
		return add_all(s) ? -1 : madvx_batch_flush(s->b);
	case V_LIB_THREAD:
		return run_async(s, s->as_thread);
	case V_LIB_URING:
		return run_async(s, s->as_uring);
	}
	return -1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int setup(struct p4 *s)
{
	struct madvx_async_opts ao = { .size = sizeof(ao) };
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	uint32_t sorted[NHINTS];
	int ret;

	s->npages = SPAN_PAGES;
	s->p = bench_map(s->npages * PAGE);
	s->pages = calloc(NHINTS, sizeof(*s->pages));
	s->iov = calloc(NHINTS, sizeof(*s->iov));
	if (!s->p || !s->pages || !s->iov || madvx_batch_create(NULL, &s->b))
		return -1;
	/* One page in each 16-page slot (never adjacent), slots in random order. */
	for (uint32_t i = 0; i < NHINTS; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		s->pages[i] = i * (SPAN_PAGES / NHINTS) + (uint32_t)(rng % 15);
	}
	for (uint32_t i = NHINTS - 1; i > 0; i--) {
		uint32_t j, t;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		j = (uint32_t)(rng % (i + 1));
		t = s->pages[i];
		s->pages[i] = s->pages[j];
		s->pages[j] = t;
	}
	memcpy(sorted, s->pages, sizeof(sorted));
	qsort(sorted, NHINTS, sizeof(*sorted), cmp_u32);
	for (size_t i = 0; i < NHINTS; i++)
		s->iov[i] = (struct iovec){ s->p + (size_t)sorted[i] * PAGE, PAGE };

	for (int v = 0; v < NV; v++)
		s->avail[v] = true;
	s->why[V_PM] = bench_pmadv_unavailable(MADV_DONTNEED);
	s->avail[V_PM] = !s->why[V_PM];
	ao.backend = MADVX_ASYNC_THREAD;
	if (madvx_async_create(&ao, &s->as_thread))
		return -1;
	ao.backend = MADVX_ASYNC_IO_URING;
	ao.queue_depth = NHINTS;
	ret = madvx_async_create(&ao, &s->as_uring);
	if (ret) {
		s->avail[V_LIB_URING] = false;
		s->why[V_LIB_URING] = "io_uring madvise not usable here";
	}
#ifdef BENCH_HAVE_LIBURING
	s->ring_ok = io_uring_queue_init(NHINTS, &s->ring, 0) == 0;
	if (!s->ring_ok) {
		s->avail[V_URING] = false;
		s->why[V_URING] = "io_uring_setup failed";
	}
#else
	s->avail[V_URING] = false;
	s->why[V_URING] = "built without liburing";
#endif
	return 0;
}

static void teardown(struct p4 *s)
{
#ifdef BENCH_HAVE_LIBURING
	if (s->ring_ok)
		io_uring_queue_exit(&s->ring);
#endif
	madvx_async_free(s->as_thread);
	madvx_async_free(s->as_uring);
	madvx_batch_free(s->b);
	free(s->pages);
	free(s->iov);
	if (s->p)
		munmap(s->p, s->npages * PAGE);
}

/* The pages really went: none of the 1024 may be resident after a variant. */
static bool all_released(struct p4 *s)
{
	for (size_t i = 0; i < NHINTS; i++) {
		unsigned char vec;

		if (mincore(s->p + (size_t)s->pages[i] * PAGE, PAGE, &vec) || (vec & 1))
			return false;
	}
	return true;
}

int bench_p4(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 41, 3);
	struct bench_samples smp[NV][NM] = { 0 };
	double med[NV][NM] = { 0 };
	enum madvx_async_backend dflt = madvx_async_default_backend();
	struct p4 s = { 0 };
	int ret = 1, vd;

	if (setup(&s)) {
		bench_note(o, "p4 setup failed");
		goto out;
	}
	for (int v = 0; v < NV; v++)
		for (int m = 0; m < NM; m++)
			if (bench_samples_init(&smp[v][m], reps))
				goto out;
	bench_note(o, "%d scattered 4 KiB DONTNEED hints in a 64 MiB mapping, random order, %u reps interleaved",
		   NHINTS, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t w0, c0, p0, q0;

			if (!s.avail[v])
				continue;
			bench_touch(s.p, s.npages * PAGE);
			q0 = iowq_ns();
			w0 = bench_now_ns();
			c0 = bench_thread_cpu_ns();
			p0 = bench_proc_cpu_ns();
			handoff_ns = 0;
			if (run_variant(&s, v)) {
				bench_note(o, "p4 %s failed", vname[v]);
				goto out;
			}
			bench_samples_add(&smp[v][M_TOTAL], (double)(bench_proc_cpu_ns() - p0) / 1e3);
			bench_samples_add(&smp[v][M_CALLER], (double)(bench_thread_cpu_ns() - c0) / 1e3);
			if (handoff_ns)
				bench_samples_add(&smp[v][M_HANDOFF], (double)(handoff_ns - c0) / 1e3);
			bench_samples_add(&smp[v][M_WALL], (double)(bench_now_ns() - w0) / 1e3);
			/* Workers that exited in between are missing here (not in total). */
			bench_samples_add(&smp[v][M_IOWQ], (double)(iowq_ns() - q0) / 1e3);
			if (!all_released(&s)) {
				bench_note(o, "p4 %s left pages resident", vname[v]);
				goto out;
			}
		}
	}
	for (int v = 0; v < NV; v++) {
		if (!s.avail[v]) {
			for (int m = 0; m < M_HANDOFF; m++)
				bench_report_na(o, "p4", vname[v], mname[m], s.why[v]);
			continue;
		}
		for (int m = 0; m < NM; m++) {
			if (m == M_IOWQ && v != V_URING && v != V_LIB_URING)
				continue;
			if (m == M_HANDOFF && v != V_LIB_THREAD && v != V_LIB_URING)
				continue;
			med[v][m] = bench_median(smp[v][m].v, smp[v][m].n);
			bench_report(o, "p4", vname[v], mname[m], med[v][m], "us");
		}
	}
	vd = dflt == MADVX_ASYNC_IO_URING ? V_LIB_URING :
	     dflt == MADVX_ASYNC_SYNC ? V_LIB_SYNC : V_LIB_THREAD;
	bench_note(o, "default async backend here: %s (%s)", madvx_async_backend_name(dflt),
		   vname[vd]);
	for (int v = V_URING; v < NV; v++) {
		if (!s.avail[v])
			continue;
		bench_report(o, "p4", vname[v], "caller_cpu_vs_loop",
			     med[v][M_CALLER] / med[V_LOOP][M_CALLER], "x");
		bench_report(o, "p4", vname[v], "total_cpu_vs_loop",
			     med[v][M_TOTAL] / med[V_LOOP][M_TOTAL], "x");
	}
	bench_target(o, "p4", "default backend caller CPU / madvise_loop CPU",
		     med[vd][M_CALLER] / med[V_LOOP][M_CALLER], 0.1, false);
	bench_target(o, "p4", "default backend total CPU / madvise_loop CPU",
		     med[vd][M_TOTAL] / med[V_LOOP][M_TOTAL], 0.5, false);
	ret = 0;
out:
	for (int v = 0; v < NV; v++)
		for (int m = 0; m < NM; m++)
			bench_samples_free(&smp[v][m]);
	teardown(&s);
	return ret;
}
