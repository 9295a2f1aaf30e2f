/* SPDX-License-Identifier: MIT */
/*
 * The measuring half of evidence.c: clocks, latency samples shared with
 * forked targets, the result rows a scenario's child hands its parent, the
 * mmap_lock (and io-wq) tracepoints of one thread, the timed writer
 * threads and the advisor loop.  The scenarios are in evidence.c.
 */
#ifndef MADVX_BENCH_EVIDENCE_H
#define MADVX_BENCH_EVIDENCE_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"

#define TRACE		"/sys/kernel/tracing/instances/madvx-evidence"
#define PG		4096UL
#define WRITER_PG	16
#define MAX_METRICS	64
#define SAMPLE_CAP	(1UL << 20)

/* ---- time ---------------------------------------------------------- */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * The advising thread's CPU time.  The same accounting as
 * getrusage(RUSAGE_THREAD), whose timeval would round a sub-microsecond
 * call to zero.
 */
static uint64_t thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* CPU of the whole process: io-wq workers are threads of it. */
static uint64_t process_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
}

/* ---- latency samples, in memory shared with forked targets ---------- */

struct samples {
	atomic_ulong n;
	uint64_t v[];
};

static struct samples *samples_new(void)
{
	struct samples *s = mmap(NULL, sizeof(*s) + SAMPLE_CAP * sizeof(uint64_t),
				 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (s == MAP_FAILED)
		die("mmap samples");
	return s;
}

/* Populated, so that recording a sample never faults inside a traced call. */
static void samples_reset(struct samples *s, size_t expect)
{
	atomic_store(&s->n, 0);
	memset(s->v, 0, (expect < SAMPLE_CAP ? expect : SAMPLE_CAP) * sizeof(uint64_t));
}

static void samples_add(struct samples *s, uint64_t v)
{
	unsigned long i = atomic_fetch_add_explicit(&s->n, 1, memory_order_relaxed);

	if (i < SAMPLE_CAP)
		s->v[i] = v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ---- results: filled by the scenario's child, read by the parent ---- */

struct result {
	int n, skipped;
	char skip_reason[128];
	char name[MAX_METRICS][40];
	double v[MAX_METRICS];
};

static struct result *res;

static void put(const char *name, double v)
{
	if (res->n >= MAX_METRICS) {
		fprintf(stderr, "evidence: too many metrics (%s)\n", name);
		exit(1);
	}
	snprintf(res->name[res->n], sizeof(res->name[0]), "%s", name);
	res->v[res->n++] = v;
}

/* @what_p50_ns, _p99_ns, _max_ns and @what_ops (how many were timed). */
static void put_latency(const char *what, struct samples *s)
{
	unsigned long n = atomic_load(&s->n);
	char name[40];

	if (n > SAMPLE_CAP)
		n = SAMPLE_CAP;
	snprintf(name, sizeof(name), "%s_ops", what);
	put(name, n);
	if (!n)
		return;
	qsort(s->v, n, sizeof(uint64_t), cmp_u64);
	snprintf(name, sizeof(name), "%s_p50_ns", what);
	put(name, s->v[(n - 1) / 2]);
	snprintf(name, sizeof(name), "%s_p99_ns", what);
	put(name, s->v[(n - 1) * 99 / 100]);
	snprintf(name, sizeof(name), "%s_max_ns", what);
	put(name, s->v[n - 1]);
}

static void skip(const char *why)
{
	res->skipped = 1;
	snprintf(res->skip_reason, sizeof(res->skip_reason), "%s: %s", why, strerror(errno));
}

/* ---- mmap_lock (and io-wq) events of one thread --------------------- */

struct lockcount {
	long acq_read, acq_write, punts, lost;
	double held_s, acq_t;	/* sum of acquire -> release; last acquire */
};

static bool trace_ok;

/* guest.h's trace_put() dies; setting up may fail (no tracefs, no root). */
static bool trace_try(const char *file, const char *val)
{
	char path[256];
	ssize_t len = strlen(val);
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", TRACE, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0)
		return false;
	ok = write(fd, val, len) == len;
	close(fd);
	return ok;
}

/* An instance of our own, off, recording @tid's mmap_lock events. */
static void trace_open(pid_t tid, bool uring)
{
	char buf[32];

	rmdir(TRACE);
	trace_ok = !mkdir(TRACE, 0755) || errno == EEXIST;
	snprintf(buf, sizeof(buf), "%d", tid);
	trace_ok = trace_ok && trace_try("tracing_on", "0") &&
		   trace_try("buffer_size_kb", "8192") &&
		   trace_try("set_event_pid", buf) &&
		   trace_try("trace_clock", "mono") &&
		   trace_try("events/mmap_lock/mmap_lock_acquire_returned/enable", "1") &&
		   trace_try("events/mmap_lock/mmap_lock_released/enable", "1");
	if (trace_ok && uring &&
	    !trace_try("events/io_uring/io_uring_queue_async_work/enable", "1"))
		trace_ok = false;
}

static void trace_on(void)
{
	if (trace_ok)
		trace_put(TRACE, "tracing_on", "1");
}

static void trace_off(void)
{
	if (trace_ok)
		trace_put(TRACE, "tracing_on", "0");
}

/* The timestamp of a trace line: the number before ": event_name". */
static double trace_time(const char *line, const char *event)
{
	const char *q = event - 2;

	while (q > line && *q != ' ')
		q--;
	return atof(q);
}

static void trace_parse_line(const char *line, struct lockcount *c)
{
	const char *p = strstr(line, "entries-in-buffer/entries-written:");
	long inbuf, written;

	if (p && sscanf(p, "entries-in-buffer/entries-written: %ld/%ld", &inbuf, &written) == 2)
		c->lost = written > inbuf ? written - inbuf : 0;
	if (line[0] == '#')
		return;
	if (strstr(line, "io_uring_queue_async_work")) {
		c->punts++;
	} else if ((p = strstr(line, "mmap_lock_acquire_returned")) &&
		   strstr(line, "success=true")) {
		*(strstr(line, "write=true") ? &c->acq_write : &c->acq_read) += 1;
		c->acq_t = trace_time(line, p);
	} else if ((p = strstr(line, "mmap_lock_released")) && c->acq_t > 0) {
		c->held_s += trace_time(line, p) - c->acq_t;
		c->acq_t = 0;
	}
}

/* Stop, count what was recorded since the last take, clear the buffer. */
static void trace_take(struct lockcount *c)
{
	char line[512];
	FILE *f;

	memset(c, 0, sizeof(*c));
	if (!trace_ok) {
		c->acq_read = c->acq_write = c->punts = c->lost = -1;
		return;
	}
	trace_off();
	f = fopen(TRACE "/trace", "r");
	if (!f)
		die("trace");
	while (fgets(line, sizeof(line), f))
		trace_parse_line(line, c);
	fclose(f);
	trace_put(TRACE, "trace", "");
}

static void trace_close(void)
{
	if (trace_ok)
		trace_try("events/enable", "0");
	rmdir(TRACE);
}

static void put_locks(const char *prefix, const struct lockcount *c)
{
	char name[40];

	snprintf(name, sizeof(name), "%smmap_lock", prefix);
	put(name, c->acq_read < 0 ? -1 : c->acq_read + c->acq_write);
	snprintf(name, sizeof(name), "%smmap_lock_write", prefix);
	put(name, c->acq_write);
	snprintf(name, sizeof(name), "%strace_lost", prefix);
	put(name, c->lost);
}

/* ---- writers: mmap, first write, munmap of 64 KiB, each timed ------- */

struct writers {
	atomic_bool stop, measuring;
	atomic_int running;
	struct samples *mmap, *fault, *munmap;
};

static struct writers *wr;

static void *writer(void *arg)
{
	(void)arg;
	atomic_fetch_add(&wr->running, 1);
	while (!atomic_load_explicit(&wr->stop, memory_order_relaxed)) {
		uint64_t t0 = now_ns(), t1, t2, t3;
		char *p = mmap(NULL, WRITER_PG * PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			die("writer mmap");
		t1 = now_ns();
		p[0] = 1;
		t2 = now_ns();
		munmap(p, WRITER_PG * PG);
		t3 = now_ns();
		if (!atomic_load_explicit(&wr->measuring, memory_order_relaxed))
			continue;
		samples_add(wr->mmap, t1 - t0);
		samples_add(wr->fault, t2 - t1);
		samples_add(wr->munmap, t3 - t2);
	}
	return NULL;
}

static void writers_reset(void)
{
	atomic_store(&wr->stop, false);
	atomic_store(&wr->measuring, false);
	atomic_store(&wr->running, 0);
	samples_reset(wr->mmap, 0);
	samples_reset(wr->fault, 0);
	samples_reset(wr->munmap, 0);
}

static void writers_start(pthread_t *tids, int n)
{
	for (int i = 0; i < n; i++)
		if (pthread_create(&tids[i], NULL, writer, NULL))
			die("pthread_create");
	while (atomic_load(&wr->running) < n)
		usleep(1000);
}

static void writers_stop(pthread_t *tids, int n)
{
	atomic_store(&wr->stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
}

static void put_writers(void)
{
	put_latency("mmap", wr->mmap);
	put_latency("fault", wr->fault);
	put_latency("munmap", wr->munmap);
}

/* ---- the advisor: timed, traced calls with untimed preparation ------ */

struct advisor {
	long calls;
	int (*advise)(void *arg);
	void (*prep)(void *arg);	/* before each call; untimed, untraced */
	void *arg;
};

static int run_advisor(const struct advisor *a)
{
	uint64_t *lat = calloc(a->calls, sizeof(uint64_t)), cpu = 0, total = 0;
	struct samples *s = samples_new();
	struct lockcount lc;
	long errors = 0;

	if (!lat)
		die("calloc");
	/* Its first faults outside the trace (see warm_up()). */
	memset(lat, 0, a->calls * sizeof(uint64_t));
	samples_reset(s, a->calls);
	trace_open(gettid(), false);
	atomic_store(&wr->measuring, true);
	for (long i = 0; i < a->calls; i++) {
		uint64_t t0, c0;

		if (a->prep)
			a->prep(a->arg);
		trace_on();
		c0 = thread_cpu_ns();
		t0 = now_ns();
		errors += a->advise(a->arg) != 0;
		lat[i] = now_ns() - t0;
		cpu += thread_cpu_ns() - c0;
		total += lat[i];
		trace_off();
	}
	atomic_store(&wr->measuring, false);
	trace_take(&lc);
	trace_close();
	for (long i = 0; i < a->calls; i++)
		samples_add(s, lat[i]);
	put("calls", a->calls);
	put("errors", errors);
	put_latency("advisor", s);
	put("advisor_cpu_ns", (double)cpu / a->calls);
	put_locks("advisor_", &lc);
	/*
	 * How much of its calls the advisor spent holding mmap_lock: patch 3
	 * does not change the count of a vector whose first entry falls
	 * back, it releases the lock after that entry.
	 */
	put("advisor_mmap_lock_held_pct",
	    trace_ok && total ? 100 * lc.held_s * 1e9 / total : -1);
	munmap(s, sizeof(*s) + SAMPLE_CAP * sizeof(uint64_t));
	free(lat);
	return errors ? 1 : 0;
}

#endif /* MADVX_BENCH_EVIDENCE_H */
