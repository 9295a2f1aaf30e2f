// SPDX-License-Identifier: MIT
/* madvx-bench helpers: clocks, statistics, output, scratch memory. */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <madvx.h>

#include "bench.h"
#include "uapi-compat.h"

unsigned int bench_reps(const struct bench_opts *o, unsigned int dflt, unsigned int quick_dflt)
{
	if (o->reps)
		return o->reps;
	return o->quick ? quick_dflt : dflt;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t bench_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t bench_thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t bench_proc_cpu_ns(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

static int open_cycles(bool user)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_HW_CPU_CYCLES,
		.exclude_kernel = user,
		.exclude_user = !user,
		.exclude_hv = 1,
	};
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

int bench_cpu_split_open(struct bench_cpu_split *c)
{
	c->fd_user = open_cycles(true);
	c->fd_kernel = open_cycles(false);
	if (c->fd_user < 0 || c->fd_kernel < 0) {
		int err = c->fd_user < 0 ? c->fd_user : c->fd_kernel;

		bench_cpu_split_close(c);
		return err;
	}
	return 0;
}

void bench_cpu_split_read(const struct bench_cpu_split *c, uint64_t *user, uint64_t *kernel)
{
	*user = *kernel = 0;
	if (read(c->fd_user, user, sizeof(*user)) != sizeof(*user))
		*user = 0;
	if (read(c->fd_kernel, kernel, sizeof(*kernel)) != sizeof(*kernel))
		*kernel = 0;
}

void bench_cpu_split_close(struct bench_cpu_split *c)
{
	if (c->fd_user >= 0)
		close(c->fd_user);
	if (c->fd_kernel >= 0)
		close(c->fd_kernel);
	c->fd_user = c->fd_kernel = -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_percentile(double *v, size_t n, double p)
{
	size_t rank;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	rank = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

int bench_samples_init(struct bench_samples *s, size_t cap)
{
	s->v = calloc(cap ? cap : 1, sizeof(*s->v));
	s->n = 0;
	s->cap = cap;
	return s->v ? 0 : -ENOMEM;
}

void bench_samples_add(struct bench_samples *s, double x)
{
	if (s->n < s->cap)
		s->v[s->n++] = x;
}

void bench_samples_free(struct bench_samples *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

/* ---- output ---- */

static bool header_done;
static unsigned int targets_missed;

unsigned int bench_targets_missed(void)
{
	return targets_missed;
}

void bench_header(const struct bench_opts *o)
{
	if (header_done)
		return;
	header_done = true;
	if (o->csv)
		printf("scenario,variant,metric,value,unit\n");
	else
		printf("%-8s %-24s %-24s %14s %s\n", "scenario", "variant", "metric",
		       "value", "unit");
}

void bench_report(const struct bench_opts *o, const char *scenario, const char *variant,
		  const char *metric, double value, const char *unit)
{
	bench_header(o);
	if (o->csv)
		printf("%s,%s,%s,%.6g,%s\n", scenario, variant, metric, value, unit);
	else
		printf("%-8s %-24s %-24s %14.4g %s\n", scenario, variant, metric, value, unit);
	fflush(stdout);
}

void bench_report_na(const struct bench_opts *o, const char *scenario,
		     const char *variant, const char *metric, const char *why)
{
	bench_header(o);
	if (o->csv) {
		printf("%s,%s,%s,,unavailable\n", scenario, variant, metric);
		fprintf(stderr, "# %s %s %s unavailable: %s\n", scenario, variant, metric, why);
	} else
		printf("%-8s %-24s %-24s %14s (%s)\n", scenario, variant, metric,
		       "unavailable", why);
	fflush(stdout);
}

void bench_note(const struct bench_opts *o, const char *fmt, ...)
{
	/* With --csv, stdout carries nothing but the CSV: notes go to stderr. */
	FILE *out = o->csv ? stderr : stdout;
	va_list ap;

	fputs(o->csv ? "# " : "   ", out);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
	fflush(out);
}

void bench_target(const struct bench_opts *o, const char *scenario, const char *what,
		  double value, double limit, bool higher_better)
{
	bool ok = higher_better ? value >= limit : value <= limit;

	if (!ok)
		targets_missed++;

	bench_note(o, "%s target %s: %.3g %s %.3g -> %s", scenario, what, value,
		   higher_better ? ">=" : "<=", limit, ok ? "MET" : "MISSED");
}

/* ---- memory ---- */

void *bench_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* 4 KiB hints should mean 4 KiB pages, not THP splits. */
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

void bench_touch(void *p, size_t len)
{
	volatile char *c = p;

	for (size_t off = 0; off < len; off += 4096)
		c[off] = 1;
}

int bench_split_vmas(void *p, size_t len, unsigned int nvmas)
{
	size_t piece = len / nvmas & ~(size_t)4095;

	if (!piece)
		return -EINVAL;
	for (unsigned int i = 1; i < nvmas; i += 2)
		if (madvise((char *)p + i * piece, piece, MADV_DONTFORK))
			return -errno;
	return 0;
}

const char *bench_pmadv_unavailable(int advice)
{
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) != 1)
		return "no process_madvise() here";
	if (madvx_advice_supported(advice) != 1)
		return "process_madvise() does not take this advice here (before 6.13: "
		       "COLD, PAGEOUT, WILLNEED, COLLAPSE only)";
	return NULL;
}

long bench_process_madvise(const void *iov, size_t vlen, int advice)
{
	static int pidfd = -1;
	long ret;

	if (pidfd == -1) {
		struct iovec probe = { 0 };

		/* PIDFD_SELF (6.15) where the kernel takes it, else pidfd_open(). */
		if (syscall(__NR_process_madvise, PIDFD_SELF_THREAD, &probe, 1, MADV_COLD, 0) == 0)
			pidfd = PIDFD_SELF_THREAD;
		else
			pidfd = (int)syscall(__NR_pidfd_open, getpid(), 0);
		if (pidfd == -1)
			return -errno;
	}
	ret = syscall(__NR_process_madvise, pidfd, iov, vlen, advice, 0);
	return ret < 0 ? -errno : ret;
}
