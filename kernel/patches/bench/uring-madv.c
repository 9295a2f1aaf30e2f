// SPDX-License-Identifier: MIT
/*
 * uring-madv: the workload behind the numbers of patch 0005 (io_uring
 * madvise without io-wq).  A static guest binary for "kernel/run exec".
 *
 *   uring-madv [rounds] [pages]
 *
 * Each round faults in @pages (default 4096) pages of one anonymous VMA and
 * gives them back as one-page MADV_DONTNEED ranges, the way an allocator
 * returns scattered free pages, by each method in turn (the order rotates
 * every round):
 *
 *   loop        one madvise() per range
 *   pmadv       process_madvise(PIDFD_SELF-style pidfd), 1024 ranges a call
 *   uring       IORING_OP_MADVISE, one SQE per range, 256 per submit+wait
 *   uring_async the same with IOSQE_ASYNC (always io-wq, 7.3's behaviour)
 *
 * After every release mincore() must show all pages gone, or it fails.
 * Per method it prints the median over the rounds of the process CPU time
 * per released page (user + system, io-wq workers included: they are
 * threads of this process) and of the submitting thread's alone, and from
 * one extra traced round: io-wq punts (io_uring_queue_async_work events),
 * mmap_lock acquisitions of the whole process and context switches.  Under QEMU TCG the CPU times are
 * emulated ones: compare methods and kernels of one run, claim no timings.
 *
 * Build: gcc -O2 -static -pthread -o uring-madv uring-madv.c -luring
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"

#define TRACE "/sys/kernel/tracing/instances/uring-madv"
#define PG 4096UL
#define VEC 1024
#define QD 256
#define MAX_ROUNDS 200

enum method { LOOP, PMADV, URING, URING_ASYNC, NMETHODS };
static const char *const method_name[NMETHODS] = {
	"loop", "pmadv", "uring", "uring_async",
};

struct events {
	long iowq_punts, mmap_lock, csw;
};

static char *region;
static size_t npages;
static int pidfd;
static struct io_uring ring;

static double cpu_s(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long ctx_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

static void touch_all(void)
{
	for (size_t i = 0; i < npages; i++)
		region[i * PG] = (char)(i + 1);
}

/* The effect in the kernel: every page of the region must be gone. */
static void check_released(enum method m)
{
	static unsigned char vec[1 << 20];

	if (mincore(region, npages * PG, vec))
		die("mincore");
	for (size_t i = 0; i < npages; i++)
		if (vec[i] & 1) {
			fprintf(stderr, "uring-madv: %s left page %zu resident\n",
				method_name[m], i);
			exit(1);
		}
}

static void release_loop(void)
{
	for (size_t i = 0; i < npages; i++)
		if (madvise(region + i * PG, PG, MADV_DONTNEED))
			die("madvise");
}

static void release_pmadv(void)
{
	static struct iovec iov[VEC];

	for (size_t i = 0; i < npages; i += VEC) {
		size_t n = npages - i < VEC ? npages - i : VEC;

		for (size_t j = 0; j < n; j++)
			iov[j] = (struct iovec){ region + (i + j) * PG, PG };
		if (syscall(__NR_process_madvise, pidfd, iov, n, MADV_DONTNEED, 0) !=
		    (long)(n * PG))
			die("process_madvise");
	}
}

static void release_uring(unsigned int sqe_flags)
{
	for (size_t i = 0; i < npages; i += QD) {
		size_t n = npages - i < QD ? npages - i : QD;
		struct io_uring_cqe *cqe;

		for (size_t j = 0; j < n; j++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			io_uring_prep_madvise(sqe, region + (i + j) * PG, PG, MADV_DONTNEED);
			sqe->flags |= sqe_flags;
		}
		if (io_uring_submit_and_wait(&ring, n) != (int)n)
			die("io_uring_submit_and_wait");
		for (size_t j = 0; j < n; j++) {
			if (io_uring_wait_cqe(&ring, &cqe))
				die("io_uring_wait_cqe");
			if (cqe->res) {
				errno = -cqe->res;
				die("IORING_OP_MADVISE");
			}
			io_uring_cqe_seen(&ring, cqe);
		}
	}
}

static void release(enum method m)
{
	switch (m) {
	case LOOP:
		release_loop();
		break;
	case PMADV:
		release_pmadv();
		break;
	case URING:
		release_uring(0);
		break;
	default:
		release_uring(IOSQE_ASYNC);
		break;
	}
	check_released(m);
}

static long count_lines(const char *what)
{
	char line[512];
	long n = 0;
	FILE *f = fopen(TRACE "/trace", "r");

	if (!f)
		die("trace");
	while (fgets(line, sizeof(line), f))
		if (line[0] != '#' && strstr(line, what) &&
		    (strcmp(what, "mmap_lock_acquire_returned") || strstr(line, "success=true")))
			n++;
	fclose(f);
	return n;
}

/* One release by @m with io_uring and mmap_lock events traced (not timed). */
static void trace_round(enum method m, struct events *ev)
{
	long c0;

	rmdir(TRACE);
	if (mkdir(TRACE, 0755) && errno != EEXIST)
		die("mkdir " TRACE " (tracefs mounted?)");
	trace_put(TRACE, "buffer_size_kb", "16384");
	trace_put(TRACE, "events/io_uring/io_uring_queue_async_work/enable", "1");
	trace_put(TRACE, "events/mmap_lock/mmap_lock_acquire_returned/enable", "1");
	touch_all();
	c0 = ctx_switches();
	trace_put(TRACE, "tracing_on", "1");
	release(m);
	trace_put(TRACE, "tracing_on", "0");
	ev->csw = ctx_switches() - c0;
	ev->iowq_punts = count_lines("io_uring_queue_async_work");
	ev->mmap_lock = count_lines("mmap_lock_acquire_returned");
	trace_put(TRACE, "events/enable", "0");
	rmdir(TRACE);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 21;
	static double proc_ns[NMETHODS][MAX_ROUNDS], thread_ns[NMETHODS][MAX_ROUNDS];
	struct events ev[NMETHODS];

	npages = argc > 2 ? strtoul(argv[2], NULL, 0) : 4096;
	if (rounds < 1 || rounds > MAX_ROUNDS || npages < 1 || npages > (1 << 20)) {
		fprintf(stderr, "usage: %s [rounds 1-%d] [pages 1-%d]\n", argv[0],
			MAX_ROUNDS, 1 << 20);
		return 2;
	}
	region = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap");
	madvise(region, npages * PG, MADV_NOHUGEPAGE);
	pidfd = syscall(__NR_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		die("pidfd_open");
	if (io_uring_queue_init(QD, &ring, 0))
		die("io_uring_queue_init");

	for (int m = 0; m < NMETHODS; m++)
		trace_round(m, &ev[m]);
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NMETHODS; k++) {
			int m = (r + k) % NMETHODS;
			double p0, t0;

			touch_all();
			p0 = cpu_s(RUSAGE_SELF);
			t0 = cpu_s(RUSAGE_THREAD);
			release(m);
			proc_ns[m][r] = (cpu_s(RUSAGE_SELF) - p0) * 1e9 / npages;
			thread_ns[m][r] = (cpu_s(RUSAGE_THREAD) - t0) * 1e9 / npages;
		}

	printf("# %d rounds of %zu one-page MADV_DONTNEED ranges; CPU ns per page, medians\n",
	       rounds, npages);
	printf("%-12s %10s %10s %10s %10s %10s\n", "method", "cpu/page",
	       "caller/pg", "iowq_punts", "mmap_lock", "ctx_sw");
	for (int m = 0; m < NMETHODS; m++) {
		double pm = median(proc_ns[m], rounds), tm = median(thread_ns[m], rounds);

		printf("%-12s %10.0f %10.0f %10ld %10ld %10ld\n",
		       method_name[m], pm, tm, ev[m].iowq_punts, ev[m].mmap_lock,
		       ev[m].csw);
		printf("row method=%s cpu_ns_per_page=%.0f caller_ns_per_page=%.0f "
		       "iowq_punts=%ld mmap_lock=%ld ctx_switches=%ld\n",
		       method_name[m], pm, tm, ev[m].iowq_punts, ev[m].mmap_lock,
		       ev[m].csw);
	}
	io_uring_queue_exit(&ring);
	return 0;
}
