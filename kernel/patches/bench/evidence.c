// SPDX-License-Identifier: MIT
/*
 * evidence: the workloads behind the cover letter's before/after tables,
 * one scenario per claim of the series.  Run by "kernel/run evidence run"
 * on the running kernel (a maintainer boots base, runs it, boots patched,
 * runs it again) and, with --quick, in QEMU TCG guests by "kernel/run
 * evidence tcg", where only the counts mean anything.
 *
 *   evidence [--quick] [--reps N] [--calls N] [--writers N] [--only S,S]
 *            [--platform NAME] [--list]
 *
 * Scenarios (patch numbers of the v3 series):
 *   cold              1  madvise(MADV_COLD) of a 2 MiB VMA, writers meanwhile
 *   pageout           1  madvise(MADV_PAGEOUT) of 64 re-touched pages, writers
 *   pageout_mprotect  1  MADV_PAGEOUT of VMA B while a thread mprotect()s
 *                        A..C (three VMAs) and others fault on A and on C:
 *                        the review's case (A is write-locked while the
 *                        mprotect waits for B's VMA lock, held across reclaim)
 *   vector            3  process_madvise(DONTNEED), 1024 one-page entries,
 *                        the first spanning two VMAs, writers meanwhile
 *   uring             4  IORING_OP_MADVISE(DONTNEED), one page per request:
 *                        latency at queue depth 1 and CPU per request in
 *                        batches of 256, plain and with IOSQE_ASYNC (io-wq),
 *                        and the baseline nop_sync (an IORING_OP_NOP round
 *                        trip plus madvise() of the page in the submitter)
 *   uffd_dontneed     5  MADV_DONTNEED of 16 pages of a userfaultfd (MISSING)
 *                        VMA, refilled by UFFDIO_COPY between calls, writers
 *   remote_cold       6  process_madvise(MADV_COLD) of a child's 1024 VMAs,
 *   remote_pageout    6  and MADV_PAGEOUT; the writers run in the child
 *   nr_dontneed       -  no-regression: one thread, madvise(DONTNEED) of one
 *                        touched page, nothing else running
 *   nr_cold           -  no-regression: one thread, MADV_COLD of 16 pages
 *   batch             -  SeongJae Park's table (his RFC of 2025-01): DONTNEED
 *                        of a touched region in 4 KiB entries, madvise() per
 *                        page (size 0) or process_madvise() vectors of 1..1024
 *
 * "Writers" are threads that mmap() 64 KiB, write its first page and
 * munmap() it, timing each of the three steps.  Every scenario runs in its
 * own child process; the repetitions are interleaved (every scenario once,
 * then again, the order rotated) and each printed value is the median over
 * the repetitions of that repetition's value (so "max" is the median of the
 * per-repetition maxima).  The advisor's mmap_lock acquisitions are counted
 * from the mmap_lock tracepoints, filtered to the advising thread and
 * paused while it re-touches its pages (faults take mmap_lock on kernels
 * without per-VMA locks); -1 where tracefs is not usable.
 *
 * Output: CSV lines "scenario,metric,value"; "meta,KEY,VALUE" and
 * "info,SCENARIO,TEXT" describe the run.  Metric names end in _ns
 * (timings), _ops (rates: depend on timing too) or neither (counts: the
 * mechanism, valid under TCG).
 *
 * Build: gcc -O2 -static -pthread -o evidence evidence.c -luring
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "evidence.h"

#define NVEC		1024	/* UIO_MAXIOV */
#define MAX_REPS	31
#define MAX_WRITERS	64
#define URING_QD	256

struct config {
	int reps, writers, quick;
	long calls;
	size_t remote_vma_pages, batch_mib;
	const char *only, *platform;
};

static struct config cfg = {
	.reps = 5, .writers = 8, .calls = 2000,
	.remote_vma_pages = 16, .batch_mib = 256,
};

/* ---- regions --------------------------------------------------------- */

static char *map_anon(size_t len, int prot)
{
	char *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	/* 4 KiB pages: the workloads count pages, as the RFCs did. */
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

static void touch(char *p, size_t len)
{
	for (size_t o = 0; o < len; o += PG)
		p[o] = (char)(o / PG + 1);
}

struct range {
	char *p;
	size_t len;
	int advice;
};

static int advise_range(void *arg)
{
	struct range *r = arg;

	return madvise(r->p, r->len, r->advice);
}

static void prep_touch(void *arg)
{
	struct range *r = arg;

	touch(r->p, r->len);
}

/* One local advice on one VMA, with @nwriters writers. */
static int scenario_local(size_t len, int advice, bool retouch, int nwriters)
{
	pthread_t tids[MAX_WRITERS];
	struct range r = { map_anon(len, PROT_READ | PROT_WRITE), len, advice };
	struct advisor a = {
		.calls = cfg.calls, .advise = advise_range,
		.prep = retouch ? prep_touch : NULL, .arg = &r,
	};
	int rc;

	touch(r.p, len);
	writers_start(tids, nwriters);
	rc = run_advisor(&a);
	writers_stop(tids, nwriters);
	put("writers", nwriters);
	put_writers();
	return rc;
}

static int run_cold(void)
{
	return scenario_local(2UL << 20, MADV_COLD, false, cfg.writers);
}

static int run_pageout(void)
{
	return scenario_local(64 * PG, MADV_PAGEOUT, true, cfg.writers);
}

static int run_nr_dontneed(void)
{
	/* Cheap calls: more of them for the tail (a child: cfg is its copy). */
	cfg.calls *= 5;
	return scenario_local(PG, MADV_DONTNEED, true, 0);
}

static int run_nr_cold(void)
{
	return scenario_local(16 * PG, MADV_COLD, false, 0);
}

/* ---- pageout_mprotect: the review's multi-VMA writer case ----------- */

#define MP_EDGE_PG	64
#define MP_MID_PG	256

struct mp_layout {
	char *a, *b, *c;	/* three VMAs, B in the middle */
	atomic_bool stop;
	struct samples *mprotect;
};

/* A thread faulting on one of the outer VMAs. */
struct mp_faulter {
	char *vma;
	struct samples *lat;
};

static struct mp_layout mp;

/*
 * mprotect() of A..C toggling PROT_EXEC: it changes every VMA (so write-
 * locks A, then waits for B) and leaves them writable for the advisor's
 * re-touching and the faulting threads.  munmap() of several VMAs locks
 * them in the same order (vms_gather_munmap_vmas()), but would destroy the
 * layout at every step.
 */
static void *mp_mprotect(void *arg)
{
	size_t len = (2 * MP_EDGE_PG + MP_MID_PG) * PG;
	int rw = PROT_READ | PROT_WRITE;

	(void)arg;
	for (int i = 0; !atomic_load(&mp.stop); i++) {
		uint64_t t0 = now_ns();

		if (mprotect(mp.a, len, i & 1 ? rw : rw | PROT_EXEC))
			die("mprotect A..C");
		if (atomic_load_explicit(&wr->measuring, memory_order_relaxed))
			samples_add(mp.mprotect, now_ns() - t0);
	}
	return NULL;
}

/* Zap one page of the VMA (untimed), then time the fault that refills it. */
static void *mp_fault(void *arg)
{
	struct mp_faulter *f = arg;

	for (size_t i = 0; !atomic_load(&mp.stop); i = (i + 1) % MP_EDGE_PG) {
		char *p = f->vma + i * PG;
		uint64_t t0;

		madvise(p, PG, MADV_DONTNEED);
		t0 = now_ns();
		*(volatile char *)p = 1;
		if (atomic_load_explicit(&wr->measuring, memory_order_relaxed))
			samples_add(f->lat, now_ns() - t0);
	}
	return NULL;
}

/*
 * [guard][A][B][C][guard]: B is VM_DONTCOPY (MADV_DONTFORK), so A, B and C
 * stay three VMAs whatever their protections; the PROT_NONE guards keep A
 * and C from merging with neighbours.
 */
static void mp_map(void)
{
	size_t pages = 2 + 2 * MP_EDGE_PG + MP_MID_PG;
	char *p = map_anon(pages * PG, PROT_NONE);

	mp.a = p + PG;
	mp.b = mp.a + MP_EDGE_PG * PG;
	mp.c = mp.b + MP_MID_PG * PG;
	if (mprotect(mp.a, (pages - 2) * PG, PROT_READ | PROT_WRITE) ||
	    madvise(mp.b, MP_MID_PG * PG, MADV_DONTFORK))
		die("pageout_mprotect layout");
	touch(mp.a, (pages - 2) * PG);
}

static int run_pageout_mprotect(void)
{
	struct range r = { NULL, MP_MID_PG * PG, MADV_PAGEOUT };
	struct advisor a = {
		.calls = cfg.calls, .advise = advise_range, .prep = prep_touch, .arg = &r,
	};
	struct mp_faulter fa, fc;
	pthread_t t[3];
	int rc;

	mp_map();
	r.p = mp.b;
	mp.mprotect = samples_new();
	fa = (struct mp_faulter){ mp.a, samples_new() };
	fc = (struct mp_faulter){ mp.c, samples_new() };
	if (pthread_create(&t[0], NULL, mp_mprotect, NULL) ||
	    pthread_create(&t[1], NULL, mp_fault, &fa) ||
	    pthread_create(&t[2], NULL, mp_fault, &fc))
		die("pthread_create");
	rc = run_advisor(&a);
	atomic_store(&mp.stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	put_latency("mprotect", mp.mprotect);
	put_latency("fault_a", fa.lat);
	put_latency("fault_c", fc.lat);
	return rc;
}

/* ---- vector: process_madvise(DONTNEED), first entry spans two VMAs --- */

static int pidfd_self(void)
{
	int fd = syscall(__NR_pidfd_open, getpid(), 0);

	if (fd < 0)
		die("pidfd_open");
	return fd;
}

struct vec {
	int pidfd, advice;
	struct iovec *iov;
	size_t n, bytes;
	char *p;
	size_t len;
};

static int advise_vector(void *arg)
{
	struct vec *v = arg;

	return syscall(__NR_process_madvise, v->pidfd, v->iov, v->n, v->advice, 0) !=
	       (long)v->bytes;
}

/* The writable (even) one-page VMAs again. */
static void prep_vector(void *arg)
{
	struct vec *v = arg;

	for (size_t o = 0; o < v->len; o += 2 * PG)
		v->p[o] = 1;
}

static int run_vector(void)
{
	pthread_t tids[MAX_WRITERS];
	struct iovec iov[NVEC];
	struct vec v = {
		.pidfd = pidfd_self(), .advice = MADV_DONTNEED, .iov = iov,
		.n = NVEC, .bytes = (NVEC + 1) * PG,
	};
	struct advisor a = {
		.calls = cfg.calls / 4 ? cfg.calls / 4 : 1, .advise = advise_vector,
		.prep = prep_vector, .arg = &v,
	};
	int rc;

	/* 1025 one-page VMAs: alternate protections keep them apart. */
	v.len = (NVEC + 1) * PG;
	v.p = map_anon(v.len, PROT_READ | PROT_WRITE);
	touch(v.p, v.len);
	for (size_t i = 1; i < NVEC + 1; i += 2)
		if (mprotect(v.p + i * PG, PG, PROT_READ))
			die("mprotect");
	for (int i = 0; i < NVEC; i++)
		iov[i] = (struct iovec){ v.p + i * PG, PG };
	iov[0].iov_len = 2 * PG;
	writers_start(tids, cfg.writers);
	rc = run_advisor(&a);
	writers_stop(tids, cfg.writers);
	put("writers", cfg.writers);
	put_writers();
	return rc;
}

/* ---- uring: IORING_OP_MADVISE(DONTNEED), one page per request -------- */

/*
 * How a request is done: as IORING_OP_MADVISE (plain: inline with patch 4,
 * io-wq without it; or IOSQE_ASYNC: io-wq always), or as the baseline
 * "nop_sync": an IORING_OP_NOP round trip, which completes inline on every
 * kernel, followed by madvise() of the same page in the submitting thread.
 * nop_sync should bound what the inline path costs, measurable on a kernel
 * without patch 4, so the io-wq detour can be priced against it there too.
 */
enum uring_how { URING_PLAIN, URING_ASYNC, URING_NOP_SYNC };

static void uring_round(struct io_uring *ring, char *p, size_t n, enum uring_how how)
{
	struct io_uring_cqe *cqe;

	for (size_t i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

		if (how == URING_NOP_SYNC) {
			io_uring_prep_nop(sqe);
			continue;
		}
		io_uring_prep_madvise(sqe, p + i * PG, PG, MADV_DONTNEED);
		if (how == URING_ASYNC)
			sqe->flags |= IOSQE_ASYNC;
	}
	if (io_uring_submit_and_wait(ring, n) != (int)n)
		die("io_uring_submit_and_wait");
	for (size_t i = 0; i < n; i++) {
		if (io_uring_wait_cqe(ring, &cqe))
			die("io_uring_wait_cqe");
		if (cqe->res) {
			errno = -cqe->res;
			die(how == URING_NOP_SYNC ? "IORING_OP_NOP" : "IORING_OP_MADVISE");
		}
		io_uring_cqe_seen(ring, cqe);
	}
	if (how != URING_NOP_SYNC)
		return;
	for (size_t i = 0; i < n; i++)
		if (madvise(p + i * PG, PG, MADV_DONTNEED))
			die("madvise");
}

/* Queue depth 1: submit one request, wait for its CQE; latency each. */
static void uring_latency(struct io_uring *ring, char *p, enum uring_how how,
			  const char *what)
{
	struct samples *s = samples_new();
	long calls = cfg.calls;

	samples_reset(s, calls);
	for (long i = 0; i < calls; i++) {
		uint64_t t0;

		p[0] = 1;
		t0 = now_ns();
		uring_round(ring, p, 1, how);
		samples_add(s, now_ns() - t0);
	}
	put_latency(what, s);
	munmap(s, sizeof(*s) + SAMPLE_CAP * sizeof(uint64_t));
}

/* Batches of URING_QD: process CPU (io-wq included) and io-wq punts. */
static void uring_cpu(struct io_uring *ring, char *p, enum uring_how how, const char *what)
{
	long batches = cfg.calls / URING_QD > 4 ? cfg.calls / URING_QD : 4;
	uint64_t cpu = 0, wall = 0;
	struct lockcount lc;
	char name[40];

	trace_open(gettid(), true);
	for (long b = 0; b < batches; b++) {
		uint64_t c0, t0;

		touch(p, URING_QD * PG);
		trace_on();
		c0 = process_cpu_ns();
		t0 = now_ns();
		uring_round(ring, p, URING_QD, how);
		wall += now_ns() - t0;
		cpu += process_cpu_ns() - c0;
		trace_off();
	}
	trace_take(&lc);
	trace_close();
	snprintf(name, sizeof(name), "%s_cpu_per_req_ns", what);
	put(name, (double)cpu / (batches * URING_QD));
	snprintf(name, sizeof(name), "%s_wall_per_req_ns", what);
	put(name, (double)wall / (batches * URING_QD));
	snprintf(name, sizeof(name), "%s_requests", what);
	put(name, batches * URING_QD);
	snprintf(name, sizeof(name), "%s_iowq_punts", what);
	put(name, lc.punts);
	snprintf(name, sizeof(name), "%s_", what);
	put_locks(name, &lc);
}

static int run_uring(void)
{
	char *p = map_anon(URING_QD * PG, PROT_READ | PROT_WRITE);
	struct io_uring ring;
	int ret = io_uring_queue_init(URING_QD, &ring, 0);

	if (ret) {
		errno = -ret;
		skip("io_uring_queue_init");
		return 0;
	}
	uring_latency(&ring, p, URING_PLAIN, "inline");
	uring_latency(&ring, p, URING_ASYNC, "async");
	uring_latency(&ring, p, URING_NOP_SYNC, "nop_sync");
	uring_cpu(&ring, p, URING_PLAIN, "inline");
	uring_cpu(&ring, p, URING_ASYNC, "async");
	uring_cpu(&ring, p, URING_NOP_SYNC, "nop_sync");
	io_uring_queue_exit(&ring);
	return 0;
}

/* ---- uffd_dontneed: DONTNEED on a userfaultfd (MISSING) VMA ---------- */

struct uffd_range {
	struct range r;
	int uffd;
	char *src;
};

/* Refill the zapped pages the way a GC heap would: UFFDIO_COPY. */
static void prep_uffd(void *arg)
{
	struct uffd_range *u = arg;
	struct uffdio_copy copy = {
		.dst = (unsigned long)u->r.p, .src = (unsigned long)u->src, .len = u->r.len,
	};

	if (ioctl(u->uffd, UFFDIO_COPY, &copy) && errno != EEXIST)
		die("UFFDIO_COPY");
}

static int uffd_open(char *p, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int run_uffd_dontneed(void)
{
	pthread_t tids[MAX_WRITERS];
	struct uffd_range u = {
		.r = { map_anon(16 * PG, PROT_READ | PROT_WRITE), 16 * PG, MADV_DONTNEED },
	};
	struct advisor a = {
		.calls = cfg.calls, .advise = advise_range, .prep = prep_uffd, .arg = &u,
	};
	int rc;

	u.src = map_anon(16 * PG, PROT_READ | PROT_WRITE);
	touch(u.src, 16 * PG);
	touch(u.r.p, 16 * PG);
	/* Registered after it was populated, as a GC heap is. */
	u.uffd = uffd_open(u.r.p, u.r.len);
	if (u.uffd < 0) {
		skip("userfaultfd");
		return 0;
	}
	madvise(u.r.p, u.r.len, MADV_DONTNEED);
	writers_start(tids, cfg.writers);
	rc = run_advisor(&a);
	writers_stop(tids, cfg.writers);
	put("writers", cfg.writers);
	put_writers();
	close(u.uffd);
	return rc;
}

/* ---- remote: process_madvise() of a child's VMAs, writers in it ------ */

struct remote_ctl {
	atomic_long round, touched;
	atomic_bool stop;
};

static struct remote_ctl *rc_ctl;

static void remote_touch(char *p, size_t vma_len)
{
	for (size_t i = 0; i < NVEC; i++)
		touch(p + 2 * i * vma_len, vma_len);
}

/*
 * The target: NVEC writable VMAs, each followed by a read-only one that
 * keeps it apart, touched again whenever the parent starts a round.
 */
static void remote_target(int to_parent)
{
	size_t vma_len = cfg.remote_vma_pages * PG, len = 2 * NVEC * vma_len;
	pthread_t tids[MAX_WRITERS];
	char *p = map_anon(len, PROT_READ | PROT_WRITE);
	long seen = 0;

	for (size_t o = vma_len; o < len; o += 2 * vma_len)
		if (mprotect(p + o, vma_len, PROT_READ))
			die("mprotect");
	remote_touch(p, vma_len);
	writers_start(tids, cfg.writers);
	if (write(to_parent, &p, sizeof(p)) != sizeof(p))
		die("write");
	while (!atomic_load(&rc_ctl->stop)) {
		long r = atomic_load(&rc_ctl->round);

		if (r == seen) {
			usleep(100);
			continue;
		}
		remote_touch(p, vma_len);
		seen = r;
		atomic_store(&rc_ctl->touched, r);
	}
	writers_stop(tids, cfg.writers);
	_exit(0);
}

/* Ask the target to touch its VMAs again and wait until it has. */
static void prep_remote(void *arg)
{
	long r = atomic_fetch_add(&rc_ctl->round, 1) + 1;

	(void)arg;
	while (atomic_load(&rc_ctl->touched) != r)
		usleep(100);
}

static int run_remote(int advice)
{
	size_t vma_len = cfg.remote_vma_pages * PG;
	struct iovec iov[NVEC];
	struct vec v = {
		.pidfd = -1, .advice = advice, .iov = iov, .n = NVEC,
		.bytes = NVEC * vma_len,
	};
	struct advisor a = {
		.calls = cfg.calls / 50 > 2 ? cfg.calls / 50 : 2, .advise = advise_vector,
		.prep = prep_remote, .arg = &v,
	};
	int pipefd[2], status, ret;
	char *p;
	pid_t pid;

	rc_ctl = mmap(NULL, sizeof(*rc_ctl), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rc_ctl == MAP_FAILED || pipe(pipefd))
		die("remote setup");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid)
		remote_target(pipefd[1]);
	if (read(pipefd[0], &p, sizeof(p)) != sizeof(p))
		die("the target did not start");
	v.pidfd = syscall(__NR_pidfd_open, pid, 0);
	for (int i = 0; i < NVEC; i++)
		iov[i] = (struct iovec){ p + 2UL * i * vma_len, vma_len };
	if (v.pidfd < 0 || syscall(__NR_process_madvise, v.pidfd, iov, 1, advice, 0) < 0) {
		skip("remote process_madvise");
		ret = 0;
	} else {
		ret = run_advisor(&a);
	}
	atomic_store(&rc_ctl->stop, true);
	waitpid(pid, &status, 0);
	put("writers", cfg.writers);
	put_writers();
	return ret || !WIFEXITED(status) || WEXITSTATUS(status);
}

static int run_remote_cold(void)
{
	return run_remote(MADV_COLD);
}

static int run_remote_pageout(void)
{
	return run_remote(MADV_PAGEOUT);
}

/* ---- batch: SeongJae Park's table ------------------------------------ */

static const int batch_sizes[] = { 0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
#define NBATCH (sizeof(batch_sizes) / sizeof(batch_sizes[0]))

/* DONTNEED of every page of @iov, @size entries a call (0: madvise() each). */
static void batch_apply(int pidfd, struct iovec *iov, size_t pages, int size)
{
	for (size_t i = 0; i < pages; i += size ? size : 1) {
		size_t n = size && pages - i > (size_t)size ? (size_t)size : pages - i;

		if (!size) {
			if (madvise(iov[i].iov_base, PG, MADV_DONTNEED))
				die("madvise");
		} else if (syscall(__NR_process_madvise, pidfd, iov + i, n, MADV_DONTNEED, 0) !=
			   (long)(n * PG)) {
			die("process_madvise");
		}
	}
}

static int run_batch(void)
{
	size_t len = cfg.batch_mib << 20, pages = len / PG;
	struct iovec *iov = calloc(pages, sizeof(*iov));
	char *p = map_anon(len, PROT_READ | PROT_WRITE);
	int pidfd = pidfd_self();
	struct lockcount lc;
	char name[40];

	if (!iov)
		die("calloc");
	for (size_t i = 0; i < pages; i++)
		iov[i] = (struct iovec){ p + i * PG, PG };
	trace_open(gettid(), false);
	for (size_t k = 0; k < NBATCH; k++) {
		uint64_t t0, ns;

		touch(p, len);
		trace_on();
		t0 = now_ns();
		batch_apply(pidfd, iov, pages, batch_sizes[k]);
		ns = now_ns() - t0;
		trace_take(&lc);
		snprintf(name, sizeof(name), "b%d_total_ns", batch_sizes[k]);
		put(name, ns);
		snprintf(name, sizeof(name), "b%d_per_page_ns", batch_sizes[k]);
		put(name, (double)ns / pages);
		snprintf(name, sizeof(name), "b%d_mmap_lock", batch_sizes[k]);
		put(name, lc.acq_read < 0 ? -1 : lc.acq_read + lc.acq_write);
	}
	trace_close();
	put("pages", pages);
	free(iov);
	return 0;
}

/* ---- scenarios, repetitions, medians --------------------------------- */

struct scenario {
	const char *name, *patch, *what;
	int (*run)(void);
};

static const struct scenario scenarios[] = {
	{ "cold", "1", "MADV_COLD of a 2 MiB VMA; writers mmap/fault/munmap meanwhile", run_cold },
	{ "pageout", "1", "MADV_PAGEOUT of 64 re-touched pages; writers meanwhile", run_pageout },
	{ "pageout_mprotect", "1",
	  "MADV_PAGEOUT of VMA B (256 pages) while mprotect() covers A..C and threads fault on A and C",
	  run_pageout_mprotect },
	{ "vector", "3",
	  "process_madvise(DONTNEED) of 1024 one-page entries, the first spanning two VMAs; writers",
	  run_vector },
	{ "uring", "4",
	  "IORING_OP_MADVISE(DONTNEED) of one page: depth-1 latency, CPU per request in batches of 256; inline vs IOSQE_ASYNC vs nop_sync (IORING_OP_NOP + madvise() in the submitter: the inline cost, on any kernel)",
	  run_uring },
	{ "uffd_dontneed", "5",
	  "MADV_DONTNEED of 16 pages of a userfaultfd (MISSING) VMA, refilled by UFFDIO_COPY; writers",
	  run_uffd_dontneed },
	{ "remote_cold", "6",
	  "process_madvise(MADV_COLD) of a child's 1024 VMAs; writers in the child", run_remote_cold },
	{ "remote_pageout", "6",
	  "process_madvise(MADV_PAGEOUT) of a child's 1024 VMAs; writers in the child",
	  run_remote_pageout },
	{ "nr_dontneed", "none", "no-regression: one thread, madvise(DONTNEED) of one touched page",
	  run_nr_dontneed },
	{ "nr_cold", "none", "no-regression: one thread, MADV_COLD of 16 pages", run_nr_cold },
	{ "batch", "none",
	  "no-regression, SeongJae Park's table: DONTNEED of a touched region in 4 KiB entries, madvise() per page (size 0) or process_madvise() vectors",
	  run_batch },
};
#define NSCEN (sizeof(scenarios) / sizeof(scenarios[0]))

struct collected {
	int reps, errors;
	char skip_reason[128];
	char name[MAX_METRICS][40];
	double v[MAX_METRICS][MAX_REPS];
	int nv[MAX_METRICS];	/* repetitions that reported the metric */
	int n;
};

static bool selected(const char *name)
{
	const char *o = cfg.only;
	size_t len = strlen(name);

	if (!o)
		return true;
	for (; o; o = strchr(o, ',') ? strchr(o, ',') + 1 : NULL)
		if (!strncmp(o, name, len) && (o[len] == ',' || !o[len]))
			return true;
	return false;
}

/*
 * A child's first use of the vDSO faults, and a fault on a VMA without an
 * anon_vma yet takes mmap_lock even on 7.3: neither may fall inside a
 * traced call and count as the advice's.
 */
static void warm_up(void)
{
	now_ns();
	thread_cpu_ns();
	process_cpu_ns();
}

/* One repetition of one scenario, in a child: a fresh mm every time. */
static int run_one(const struct scenario *s)
{
	int status;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	writers_reset();
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		warm_up();
		_exit(s->run());
	}
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	return !WIFEXITED(status) || WEXITSTATUS(status);
}

static void collect(struct collected *c)
{
	for (int i = 0; i < res->n; i++) {
		int k;

		for (k = 0; k < c->n && strcmp(c->name[k], res->name[i]); k++)
			;
		if (k == c->n) {
			if (c->n == MAX_METRICS)
				continue;
			strcpy(c->name[c->n++], res->name[i]);
		}
		c->v[k][c->nv[k]++] = res->v[i];
	}
	c->reps++;
}

static double median(double *v, int n)
{
	double s[MAX_REPS];

	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_scenario(const struct scenario *s, const struct collected *c)
{
	printf("info,%s,patch %s: %s\n", s->name, s->patch, s->what);
	if (c->skip_reason[0]) {
		printf("%s,skipped,1\ninfo,%s,skipped: %s\n", s->name, s->name, c->skip_reason);
		return;
	}
	printf("%s,reps,%d\n", s->name, c->reps);
	if (c->errors)
		printf("%s,failed_reps,%d\n", s->name, c->errors);
	for (int k = 0; k < c->n; k++)
		printf("%s,%s,%.0f\n", s->name, c->name[k], median((double *)c->v[k], c->nv[k]));
}

/* "qemu-tcg" where the CPU says so, "vm" under another hypervisor. */
static const char *detect_platform(void)
{
	bool hv = false, tcg = false;
	FILE *f = fopen("/proc/cpuinfo", "r");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return "unknown";
	/* getline(): a "flags" line is longer than any fixed buffer we'd pick. */
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "model name", 10) && strstr(line, "TCG"))
			tcg = true;
		if (!strncmp(line, "flags", 5) && strstr(line, " hypervisor"))
			hv = true;
	}
	free(line);
	fclose(f);
	return tcg ? "qemu-tcg" : hv ? "vm" : "bare-metal";
}

static long meminfo_kb(const char *key)
{
	char line[256];
	long v = -1;
	size_t len = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, len) && line[len] == ':')
			v = atol(line + len + 1);
	fclose(f);
	return v;
}

static void print_meta(void)
{
	struct utsname u;

	uname(&u);
	printf("meta,kernel,%s\nmeta,arch,%s\n", u.release, u.machine);
	printf("meta,platform,%s\n", cfg.platform ? cfg.platform : detect_platform());
	printf("meta,cpus,%ld\nmeta,swap_kb,%ld\n", sysconf(_SC_NPROCESSORS_ONLN),
	       meminfo_kb("SwapTotal"));
	printf("meta,quick,%d\nmeta,reps,%d\nmeta,calls,%ld\nmeta,writers,%d\n",
	       cfg.quick, cfg.reps, cfg.calls, cfg.writers);
	printf("meta,tracefs,%s\n", access("/sys/kernel/tracing/instances", W_OK) ?
	       "unavailable (mmap_lock counts are -1)" : "yes");
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--quick] [--reps N] [--calls N] [--writers N] "
		"[--only S,S] [--platform NAME] [--list]\n", argv0);
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--quick")) {
			cfg.quick = 1;
			cfg.reps = 3;
			cfg.calls = 40;
			cfg.writers = 2;
			cfg.remote_vma_pages = 4;
			cfg.batch_mib = 16;
			continue;
		}
		if (!strcmp(a, "--list")) {
			for (size_t k = 0; k < NSCEN; k++)
				printf("%s\n", scenarios[k].name);
			exit(0);
		}
		if (!v)
			usage(argv[0]);
		i++;
		if (!strcmp(a, "--reps"))
			cfg.reps = atoi(v);
		else if (!strcmp(a, "--calls"))
			cfg.calls = atol(v);
		else if (!strcmp(a, "--writers"))
			cfg.writers = atoi(v);
		else if (!strcmp(a, "--only"))
			cfg.only = v;
		else if (!strcmp(a, "--platform"))
			cfg.platform = v;
		else
			usage(argv[0]);
	}
	if (cfg.reps < 1 || cfg.reps > MAX_REPS || cfg.calls < 1 || cfg.writers < 0 ||
	    cfg.writers > MAX_WRITERS)
		usage(argv[0]);
}

static void *shared(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap shared");
	return p;
}

int main(int argc, char **argv)
{
	static struct collected col[NSCEN];
	int failed = 0;

	parse_args(argc, argv);
	res = shared(sizeof(*res));
	wr = shared(sizeof(*wr));
	wr->mmap = samples_new();
	wr->fault = samples_new();
	wr->munmap = samples_new();
	print_meta();
	for (int rep = 0; rep < cfg.reps; rep++) {
		for (size_t j = 0; j < NSCEN; j++) {
			size_t k = (j + rep) % NSCEN;
			struct collected *c = &col[k];

			if (!selected(scenarios[k].name) || c->skip_reason[0])
				continue;
			fprintf(stderr, "evidence: rep %d/%d %s\n", rep + 1, cfg.reps,
				scenarios[k].name);
			if (run_one(&scenarios[k])) {
				c->errors++;
				failed = 1;
			}
			if (res->skipped)
				strcpy(c->skip_reason, res->skip_reason);
			else
				collect(c);
		}
	}
	for (size_t k = 0; k < NSCEN; k++)
		if (selected(scenarios[k].name))
			print_scenario(&scenarios[k], &col[k]);
	return failed;
}
