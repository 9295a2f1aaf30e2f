// SPDX-License-Identifier: MIT
/*
 * madv-series: the workloads behind the numbers in the commit messages of
 * kernel/patches (see kernel/README.md, "Patch series").  A static guest
 * binary for "kernel/run exec"; it counts, it does not time (QEMU TCG).
 *
 *   madv-series cold    [calls] [writers]  10,000 MADV_COLD on one 2 MiB VMA
 *   madv-series pageout [calls] [writers]  MADV_PAGEOUT of 16 re-touched pages
 *   madv-series vector  [calls] [writers]  process_madvise(DONTNEED), 1024
 *                                          entries over 1024 VMAs, the first
 *                                          entry spanning two VMAs
 *   madv-series vector_cross [calls] [writers]
 *                                          the same with every entry spanning
 *                                          two VMAs (none can use a VMA lock)
 *   madv-series counters                   1,000 single-VMA + 1,000 two-VMA
 *                                          MADV_DONTNEED calls
 *   madv-series uffd    [pages] [writers]  touch pages of a userfaultfd (MISSING)
 *                                          region, resolved by UFFDIO_COPY
 *   madv-series uffd_dontneed [calls] [writers]
 *                                          MADV_DONTNEED of 16 pages of a
 *                                          userfaultfd-registered (MISSING) VMA
 *   madv-series uffd_dontneed_remove [calls] [writers]
 *                                          the same, the context asking for
 *                                          UFFD_EVENT_REMOVE (counted)
 *   madv-series all [calls] [writers]      all of them (vector: 200 calls, uffd:
 *                                          4096 pages, both with 4 writers)
 *
 * "writers" threads mmap()/munmap() their own 64 KiB VMAs meanwhile.
 * Reported, as key=value lines: mmap_lock acquisitions of the advising
 * thread (from the mmap_lock tracepoints in a tracefs instance filtered to
 * that thread; not while it re-touches its pages between calls, whose
 * faults take mmap_lock on a kernel without per-VMA locks), writer
 * iterations, and the deltas of the page-fault per-VMA lock counters
 * (CONFIG_PER_VMA_LOCK_STATS) and of pswpout in /proc/vmstat (those a kernel
 * does not have are printed as -1).  Which lock an madvise took is read
 * from the tracepoints only: no kernel counts it.
 * Build: gcc -O2 -static -pthread -o madv-series madv-series.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"

#define TRACE "/sys/kernel/tracing/instances/madv-series"
#define PG 4096UL
#define NVEC 1024

static const char *const vmstat_keys[] = {
	"vma_lock_success", "vma_lock_retry", "vma_lock_miss",
	"pswpout",
};
#define NKEYS (sizeof(vmstat_keys) / sizeof(vmstat_keys[0]))

static atomic_bool stop;
static atomic_ulong writer_iters;
static bool writer_touch = true;
static int uffd = -1;
static unsigned long long uffd_features;
static atomic_ulong remove_events;

static void vmstat_print(const long long *a, const long long *b)
{
	for (size_t i = 0; i < NKEYS; i++)
		printf("vmstat_%s=%lld\n", vmstat_keys[i], a[i] < 0 ? -1 : b[i] - a[i]);
}

/* Trace the mmap_lock events of one thread into our own instance. */
static void trace_start(pid_t tid)
{
	char buf[32];

	rmdir(TRACE);
	if (mkdir(TRACE, 0755) && errno != EEXIST)
		die("mkdir " TRACE " (tracefs mounted?)");
	trace_put(TRACE, "buffer_size_kb", "8192");
	trace_put(TRACE, "trace_clock", "mono");
	snprintf(buf, sizeof(buf), "%d", tid);
	trace_put(TRACE, "set_event_pid", buf);
	trace_put(TRACE, "events/mmap_lock/mmap_lock_acquire_returned/enable", "1");
	trace_put(TRACE, "events/mmap_lock/mmap_lock_released/enable", "1");
	trace_put(TRACE, "tracing_on", "1");
}

struct lockcount {
	long acq_read, acq_write, lost;
	double held_s;		/* sum of acquire -> release intervals */
};

static void trace_stop(struct lockcount *c)
{
	char line[512];
	double t, acq_t = -1;
	long written = -1, inbuf = -1;
	FILE *f;

	trace_put(TRACE, "tracing_on", "0");
	memset(c, 0, sizeof(*c));
	f = fopen(TRACE "/trace", "r");
	if (!f)
		die("trace");
	while (fgets(line, sizeof(line), f)) {
		char *p;

		if (line[0] == '#') {
			p = strstr(line, "entries-in-buffer/entries-written:");
			if (p)
				sscanf(p, "entries-in-buffer/entries-written: %ld/%ld", &inbuf, &written);
			continue;
		}
		p = strstr(line, "mmap_lock_");
		if (!p)
			continue;
		/* timestamp: the number before ": mmap_lock_" */
		{
			char *q = p - 2;

			while (q > line && *q != ' ')
				q--;
			t = atof(q);
		}
		if (!strncmp(p, "mmap_lock_acquire_returned", 26)) {
			if (!strstr(p, "success=true"))
				continue;
			if (strstr(p, "write=true"))
				c->acq_write++;
			else
				c->acq_read++;
			acq_t = t;
		} else if (!strncmp(p, "mmap_lock_released", 18) && acq_t >= 0) {
			c->held_s += t - acq_t;
			acq_t = -1;
		}
	}
	fclose(f);
	c->lost = written > inbuf ? written - inbuf : 0;
	trace_put(TRACE, "events/mmap_lock/enable", "0");
	rmdir(TRACE);
}

static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		char *p = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			die("writer mmap");
		if (writer_touch)
			p[0] = 1;
		munmap(p, 16 * PG);
		atomic_fetch_add_explicit(&writer_iters, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Resolve every missing fault of the region with UFFDIO_COPY. */
static void *uffd_handler(void *arg)
{
	static char src[PG] __attribute__((aligned(4096)));

	(void)arg;
	memset(src, 0x5a, sizeof(src));
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct pollfd pfd = { .fd = uffd, .events = POLLIN };
		struct uffd_msg msg;
		struct uffdio_copy copy;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event == UFFD_EVENT_REMOVE)
			atomic_fetch_add(&remove_events, 1);
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		copy = (struct uffdio_copy){
			.dst = msg.arg.pagefault.address & ~(PG - 1),
			.src = (unsigned long)src,
			.len = PG,
		};
		if (ioctl(uffd, UFFDIO_COPY, &copy) && errno != EEXIST)
			die("UFFDIO_COPY");
	}
	return NULL;
}

static void uffd_setup(char *p, size_t len, pthread_t *handler)
{
	struct uffdio_api api = { .api = UFFD_API, .features = uffd_features };
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		die("userfaultfd");
	if (ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg))
		die("UFFDIO_API/REGISTER");
	if (pthread_create(handler, NULL, uffd_handler, NULL))
		die("pthread_create");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void touch(char *p, size_t len)
{
	for (size_t o = 0; o < len; o += PG)
		p[o] = (char)(o / PG + 1);
}

/* "all": each workload in a child process, one after the other. */
static int run_all(const char *self, const char *calls, const char *writers)
{
	static const char *const modes[] = {
		"counters", "cold", "pageout", "vector", "vector_cross", "uffd",
		"uffd_dontneed", "uffd_dontneed_remove",
	};
	int rc = 0;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		bool vec = !strncmp(modes[i], "vector", 6);
		bool fixed = vec || !strcmp(modes[i], "uffd");
		const char *w = fixed ? "4" : writers;
		const char *c = vec ? "200" :
				!strcmp(modes[i], "uffd") ? "4096" : calls;
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			execl(self, self, modes[i], c, w, (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			rc = 1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "cold";
	long calls = argc > 2 ? atol(argv[2]) : 10000;
	int nwriters = argc > 3 ? atoi(argv[3]) : 16, pidfd = -1;
	long long v0[NKEYS], v1[NKEYS];
	unsigned long w_in_calls = 0, w0;
	pthread_t *tids = calloc(nwriters ? nwriters : 1, sizeof(*tids));
	struct iovec *iov = NULL;
	struct lockcount lc;
	pthread_t uffd_thread;
	double t_calls = 0, t0;
	long errors = 0;
	size_t len = 0;
	char *p = NULL;
	bool uffd_dn = !strncmp(mode, "uffd_dontneed", 13);
	bool vec = !strncmp(mode, "vector", 6);
	bool cross = !strcmp(mode, "vector_cross");

	if (!strcmp(mode, "all"))
		return run_all("/proc/self/exe", argc > 2 ? argv[2] : "10000",
			       argc > 3 ? argv[3] : "16");
	if (!strcmp(mode, "cold")) {
		len = 2UL << 20;
	} else if (!strcmp(mode, "pageout")) {
		len = 16 * PG;
	} else if (!strcmp(mode, "vector") || cross) {
		/* 1025 one-page VMAs: alternate protections keep them apart. */
		len = (NVEC + 1) * PG;
		if (calls == 10000)
			calls = 200;
	} else if (!strcmp(mode, "uffd")) {
		if (calls == 10000)
			calls = 4096;
		len = calls * PG;
		writer_touch = false;	/* their faults would retry too */
	} else if (uffd_dn) {
		len = 16 * PG;
		if (strstr(mode, "remove"))
			uffd_features = UFFD_FEATURE_EVENT_REMOVE;
	} else if (!strcmp(mode, "counters")) {
		len = 2 * PG;
		calls = 1000;
		nwriters = 0;
	} else {
		fprintf(stderr, "usage: %s cold|pageout|vector[_cross]|counters|uffd|uffd_dontneed[_remove] [calls] [writers]\n",
			argv[0]);
		return 2;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, len, MADV_NOHUGEPAGE);
	if (!strcmp(mode, "uffd")) {
		uffd_setup(p, len, &uffd_thread);
	} else {
		touch(p, len);
		if (uffd_dn)	/* a GC heap: registered after it was populated */
			uffd_setup(p, len, &uffd_thread);
	}
	if (vec || !strcmp(mode, "counters")) {
		for (size_t i = 1; i < len / PG; i += 2)
			if (mprotect(p + i * PG, PG, PROT_READ))
				die("mprotect");
		pidfd = syscall(__NR_pidfd_open, getpid(), 0);
		if (pidfd < 0)
			die("pidfd_open");
		iov = calloc(NVEC, sizeof(*iov));
		for (int i = 0; i < NVEC; i++)
			iov[i] = (struct iovec){ p + i * PG, PG };
		iov[0].iov_len = 2 * PG;	/* spans VMAs 0 and 1 */
		for (int i = 1; cross && i < NVEC; i++)
			iov[i].iov_len = 2 * PG;
	}
	for (int i = 0; i < nwriters; i++)
		if (pthread_create(&tids[i], NULL, writer, NULL))
			die("pthread_create");
	while (nwriters && atomic_load(&writer_iters) < (unsigned long)nwriters)
		usleep(1000);

	vmstat_read_keys(vmstat_keys, NKEYS, v0);
	trace_start(gettid());
	for (long i = 0; i < calls; i++) {
		long ret = 0;

		/*
		 * Re-touching is not traced: without per-VMA locks every page
		 * fault takes mmap_lock, which would count as the advice's.
		 */
		if (!strcmp(mode, "pageout")) {
			trace_put(TRACE, "tracing_on", "0");
			touch(p, len);
			trace_put(TRACE, "tracing_on", "1");
		}
		w0 = atomic_load(&writer_iters);
		t0 = now();
		if (!strcmp(mode, "uffd"))
			p[i * PG] = 1;	/* a missing fault, resolved by the handler */
		else if (!strcmp(mode, "cold"))
			ret = madvise(p, len, MADV_COLD);
		else if (!strcmp(mode, "pageout"))
			ret = madvise(p, len, MADV_PAGEOUT);
		else if (uffd_dn)
			ret = madvise(p, len, MADV_DONTNEED);
		else if (vec)
			ret = syscall(__NR_process_madvise, pidfd, iov, NVEC, MADV_DONTNEED, 0) ==
			      (long)((cross ? 2 * NVEC : NVEC + 1) * PG) ? 0 : -1;
		else
			ret = madvise(p, PG, MADV_DONTNEED);
		t_calls += now() - t0;
		w_in_calls += atomic_load(&writer_iters) - w0;
		if (ret)
			errors++;
		if (vec) {	/* the writable VMAs, untraced (see above) */
			trace_put(TRACE, "tracing_on", "0");
			for (size_t o = 0; o < len; o += 2 * PG)
				p[o] = 1;
			trace_put(TRACE, "tracing_on", "1");
		}
	}
	if (!strcmp(mode, "counters"))
		for (long i = 0; i < calls; i++)
			if (madvise(p, 2 * PG, MADV_DONTNEED))
				errors++;
	trace_stop(&lc);
	vmstat_read_keys(vmstat_keys, NKEYS, v1);
	atomic_store(&stop, true);
	for (int i = 0; i < nwriters; i++)
		pthread_join(tids[i], NULL);
	if (uffd >= 0)
		pthread_join(uffd_thread, NULL);

	printf("mode=%s calls=%ld writers=%d errors=%ld\n", mode, calls, nwriters, errors);
	printf("advisor_mmap_lock_read=%ld\nadvisor_mmap_lock_write=%ld\ntrace_lost=%ld\n",
	       lc.acq_read, lc.acq_write, lc.lost);
	/* A ratio of two TCG intervals: shape only, not a timing claim. */
	printf("advisor_held_share_pct=%.1f\n", t_calls > 0 ? 100.0 * lc.held_s / t_calls : 0);
	if (uffd_dn)
		printf("uffd_remove_events=%lu\n", atomic_load(&remove_events));
	printf("writer_iters_total=%lu\nwriter_iters_during_calls=%lu\n",
	       atomic_load(&writer_iters), w_in_calls);
	vmstat_print(v0, v1);
	free(iov);
	free(tids);
	return errors ? 1 : 0;
}
