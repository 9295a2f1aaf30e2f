// SPDX-License-Identifier: MIT
/*
 * remote-reclaim: the workload behind the numbers of patch 7 (remote
 * MADV_COLD/MADV_PAGEOUT under per-VMA locks).  A static guest binary for
 * "kernel/run exec"; it counts, it does not time (QEMU TCG).
 *
 *   remote-reclaim [cold|pageout] [vectors] [writers]
 *
 * A target child maps 1024 VMAs of 16 pages (64 KiB) each, touches them and
 * runs "writers" threads that mmap()/munmap() their own 64 KiB VMAs and
 * count their iterations in shared memory.  The parent advises the 1024 VMAs
 * with one process_madvise() vector per round, "vectors" rounds; the target
 * touches its VMAs again between rounds.  Reported, as key=value lines: the
 * parent's mmap_lock acquisitions, reclaim_pages() calls (mm_vmscan_reclaim_pages
 * events) and how many of them ran while the parent held an mmap_lock, the
 * writers' iterations during the vectors and in all, the rounds in which the
 * writers made no progress at all, and /proc/vmstat deltas (-1: absent).
 * Build: gcc -O2 -static -pthread -o remote-reclaim remote-reclaim.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest.h"

#define TRACE	"/sys/kernel/tracing/instances/remote-reclaim"
#define PG	4096UL
#define NVEC	1024
#define VMA_PG	16

static const char *const vmstat_keys[] = {
	"pswpout",
};
#define NKEYS (sizeof(vmstat_keys) / sizeof(vmstat_keys[0]))

/* Shared between the parent and the target child. */
struct shared {
	atomic_ulong writer_iters;
	atomic_long round;	/* parent: touch again for this round */
	atomic_long touched;	/* child: touched for this round */
	atomic_bool stop;
};

static struct shared *sh;

static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		char *p = mmap(NULL, VMA_PG * PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			die("writer mmap");
		p[0] = 1;
		munmap(p, VMA_PG * PG);
		atomic_fetch_add_explicit(&sh->writer_iters, 1, memory_order_relaxed);
	}
	return NULL;
}

static void touch(char *p)
{
	for (size_t o = 0; o < 2UL * NVEC * VMA_PG * PG; o += 2 * VMA_PG * PG)
		for (size_t q = 0; q < VMA_PG * PG; q += PG)
			p[o + q] = 1;
}

/*
 * The target: 2 * NVEC chunks of VMA_PG pages, every other one read-only so
 * that the writable ones stay separate VMAs; the writable ones are advised.
 */
static void target(int to_parent, int nwriters)
{
	size_t len = 2UL * NVEC * VMA_PG * PG;
	pthread_t tids[64];
	long seen = 0;
	char *p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("target mmap");
	madvise(p, len, MADV_NOHUGEPAGE);
	for (size_t o = VMA_PG * PG; o < len; o += 2 * VMA_PG * PG)
		if (mprotect(p + o, VMA_PG * PG, PROT_READ))
			die("mprotect");
	touch(p);
	for (int i = 0; i < nwriters; i++)
		if (pthread_create(&tids[i], NULL, writer, NULL))
			die("pthread_create");
	if (write(to_parent, &p, sizeof(p)) != sizeof(p))
		die("write");
	while (!atomic_load(&sh->stop)) {
		long r = atomic_load(&sh->round);

		if (r != seen) {
			touch(p);
			seen = r;
			atomic_store(&sh->touched, r);
		} else {
			usleep(100);
		}
	}
	for (int i = 0; i < nwriters; i++)
		pthread_join(tids[i], NULL);
	_exit(0);
}

static void trace_start(pid_t tid)
{
	char buf[32];

	rmdir(TRACE);
	if (mkdir(TRACE, 0755) && errno != EEXIST)
		die("mkdir " TRACE " (tracefs mounted?)");
	trace_put(TRACE, "buffer_size_kb", "8192");
	snprintf(buf, sizeof(buf), "%d", tid);
	trace_put(TRACE, "set_event_pid", buf);
	trace_put(TRACE, "events/mmap_lock/mmap_lock_acquire_returned/enable", "1");
	trace_put(TRACE, "events/mmap_lock/mmap_lock_released/enable", "1");
	trace_put(TRACE, "events/vmscan/mm_vmscan_reclaim_pages/enable", "1");
	trace_put(TRACE, "tracing_on", "1");
}

struct counts {
	long acq_read, acq_write, reclaims, reclaims_locked, lost;
};

static void trace_stop(struct counts *c)
{
	long held = 0, written = -1, inbuf = -1;
	char line[512];
	FILE *f;

	trace_put(TRACE, "tracing_on", "0");
	memset(c, 0, sizeof(*c));
	f = fopen(TRACE "/trace", "r");
	if (!f)
		die("trace");
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "entries-in-buffer/entries-written:");

		if (p)
			sscanf(p, "entries-in-buffer/entries-written: %ld/%ld", &inbuf, &written);
		if (line[0] == '#')
			continue;
		if (strstr(line, "mmap_lock_acquire_returned") && strstr(line, "success=true")) {
			held++;
			if (strstr(line, "write=true"))
				c->acq_write++;
			else
				c->acq_read++;
		} else if (strstr(line, "mmap_lock_released") && held > 0) {
			held--;
		} else if (strstr(line, "mm_vmscan_reclaim_pages")) {
			c->reclaims++;
			c->reclaims_locked += held > 0;
		}
	}
	fclose(f);
	c->lost = written > inbuf ? written - inbuf : 0;
	trace_put(TRACE, "events/enable", "0");
	rmdir(TRACE);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "pageout";
	long vectors = argc > 2 ? atol(argv[2]) : 20;
	int nwriters = argc > 3 ? atoi(argv[3]) : 4;
	int advice = !strcmp(mode, "cold") ? MADV_COLD : MADV_PAGEOUT;
	unsigned long w_in = 0, w_total0, w0;
	long long v0[NKEYS], v1[NKEYS];
	long errors = 0, stalled = 0;
	struct iovec iov[NVEC];
	int pipefd[2], pidfd, status;
	struct counts c;
	pid_t pid;
	char *p;

	if ((strcmp(mode, "cold") && strcmp(mode, "pageout")) || vectors < 1 ||
	    nwriters < 0 || nwriters > 64) {
		fprintf(stderr, "usage: %s [cold|pageout] [vectors] [writers (0-64)]\n", argv[0]);
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || pipe(pipefd))
		die("setup");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid)
		target(pipefd[1], nwriters);
	if (read(pipefd[0], &p, sizeof(p)) != sizeof(p))
		die("the target did not start");
	pidfd = syscall(__NR_pidfd_open, pid, 0);
	if (pidfd < 0)
		die("pidfd_open");
	for (int i = 0; i < NVEC; i++)
		iov[i] = (struct iovec){ p + 2UL * i * VMA_PG * PG, VMA_PG * PG };
	while (atomic_load(&sh->writer_iters) < (unsigned long)nwriters)
		usleep(1000);

	w_total0 = atomic_load(&sh->writer_iters);
	vmstat_read_keys(vmstat_keys, NKEYS, v0);
	trace_start(gettid());
	for (long r = 1; r <= vectors; r++) {
		long ret;

		w0 = atomic_load(&sh->writer_iters);
		ret = syscall(__NR_process_madvise, pidfd, iov, NVEC, advice, 0);
		w0 = atomic_load(&sh->writer_iters) - w0;
		w_in += w0;
		stalled += nwriters && !w0;
		if (ret != (long)(NVEC * VMA_PG * PG))
			errors++;
		/* The target touches its VMAs again (not traced: its faults). */
		atomic_store(&sh->round, r);
		while (atomic_load(&sh->touched) != r)
			usleep(100);
	}
	trace_stop(&c);
	vmstat_read_keys(vmstat_keys, NKEYS, v1);
	atomic_store(&sh->stop, true);
	waitpid(pid, &status, 0);

	printf("mode=remote_%s vectors=%ld entries=%d writers=%d errors=%ld\n",
	       mode, vectors, NVEC, nwriters, errors);
	printf("advisor_mmap_lock_read=%ld\nadvisor_mmap_lock_write=%ld\n", c.acq_read, c.acq_write);
	printf("reclaim_pages_calls=%ld\nreclaim_pages_calls_under_mmap_lock=%ld\n",
	       c.reclaims, c.reclaims_locked);
	printf("writer_iters_during_vectors=%lu\nwriter_iters_total=%lu\n", w_in,
	       atomic_load(&sh->writer_iters) - w_total0);
	printf("vectors_without_writer_progress=%ld\ntrace_lost=%ld\n", stalled, c.lost);
	for (size_t i = 0; i < NKEYS; i++)
		printf("vmstat_%s=%lld\n", vmstat_keys[i], v0[i] < 0 ? -1 : v1[i] - v0[i]);
	return errors || c.lost || !WIFEXITED(status) || WEXITSTATUS(status);
}
