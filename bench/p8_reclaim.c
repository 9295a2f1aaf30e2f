// SPDX-License-Identifier: MIT
/*
 * p8: reclaim another process (issue 15). A target child with an app-like
 * layout - 2048 anonymous VMAs of 128 KiB and 32 of 8 MiB, 512 MiB, all
 * touched, neighbours with different protections so none merge - runs a
 * mutator thread that keeps mapping, faulting and unmapping 64 KiB and times
 * every mmap() and munmap(). The bench reclaims the 512 MiB with:
 *  - raw_1024: one iovec per VMA, 1024 per process_madvise() call (what
 *    Android's activity manager does);
 *  - raw_per_vma: one process_madvise() call per VMA;
 *  - libmadvx_2ms, libmadvx_100us: madvx_reclaim() restricted to the same
 *    range, calls bounded to 2 ms and 100 us of mmap_lock;
 *  - libmadvx_100us_pause2ms: the same with a 2 ms pause after each call
 *    (the lock held ~5% of the time: what the target's p99 costs in rate);
 *  - idle: no reclaim, the mutator's own latencies.
 * Variants interleave per repetition (rotating order); the target re-reads
 * every page (untimed) before each, so each reclaim finds the same state.
 * A remote process_madvise() holds the target's mmap_read_lock for the
 * whole vector: the mutator's mmap/munmap (mmap_write_lock) wait for it.
 * Reported per variant: the target's mmap/munmap p50/p99 (and the ratio to
 * idle), its iterations per ms, process_madvise() call time p50/p99/max,
 * throughput (bytes/s over the wall time of the reclaim), RSS and Swap
 * dropped (smaps_rollup); as root, mmap_lock acquisitions and mean hold
 * per call from the mmap_lock tracepoints (one extra traced run each).
 * COLD always; PAGEOUT needs swap: as root without swap a temporary swap
 * file is made in /var/tmp and removed at the end (or why not is printed).
 * Scale: a target with 100,000 VMAs (vm.max_map_count raised as root and
 * restored), enumeration + planning cost per VMA (dry run, no rollup).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <madvx.h>

#include "bench.h"
#include "locktrace.h"
#include "tempswap.h"

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define KIB 1024UL
#define MIB (1024UL * 1024)
#define CAP 300000		/* latency samples per variant */

enum { V_IDLE, V_RAW1024, V_PERVMA, V_LIB2MS, V_LIB100US, V_LIBPAUSE, NV };
static const char *const vname[NV] = {
	"idle", "raw_1024", "raw_per_vma", "libmadvx_2ms", "libmadvx_100us",
	"libmadvx_100us_pause2ms",
};

struct shared {
	_Atomic int phase;		/* -1 exit; 0 not recording; 1 + variant: record */
	_Atomic int cmd, done;		/* cmd sequence: 'touch' requests, acks */
	_Atomic int state;		/* 0 setting up, 1 ready, -1 failed */
	int err;
	uint64_t region, len, sentinel, sentinel_len;
	uint32_t nvmas;
	_Atomic uint64_t iters[NV];
	_Atomic uint32_t n[NV];
	float mmap_us[NV][CAP];
	float munmap_us[NV][CAP];
};

struct layout {
	unsigned int small, big;	/* counts */
	size_t small_len, big_len;
};

static double now_us(void)
{
	return (double)bench_now_ns() / 1e3;
}

static void *mutator(void *arg)
{
	struct shared *sh = arg;
	struct timespec nap = { 0, 20000 };

	for (;;) {
		int ph = atomic_load_explicit(&sh->phase, memory_order_relaxed);
		double t0, t1, t2, t3;
		char *q;

		if (ph < 0)
			break;
		t0 = now_us();
		q = mmap(NULL, 64 * KIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t1 = now_us();
		if (q == MAP_FAILED)
			continue;
		q[0] = 1;	/* a fault */
		q[32 * KIB] = 1;
		t2 = now_us();
		munmap(q, 64 * KIB);
		t3 = now_us();
		if (ph > 0) {
			int v = ph - 1;
			uint32_t i = atomic_load_explicit(&sh->n[v], memory_order_relaxed);

			if (i < CAP) {
				sh->mmap_us[v][i] = (float)(t1 - t0);
				sh->munmap_us[v][i] = (float)(t3 - t2);
				atomic_store_explicit(&sh->n[v], i + 1, memory_order_relaxed);
			}
			atomic_fetch_add_explicit(&sh->iters[v], 1, memory_order_relaxed);
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

static void touch_all(struct shared *sh)
{
	volatile char *p = (volatile char *)(uintptr_t)sh->region;
	char s = 0;

	for (size_t off = 0; off < sh->len; off += 4096)
		s += p[off];	/* read: sets the accessed bit, swaps in after PAGEOUT */
	p = (volatile char *)(uintptr_t)sh->sentinel;
	for (size_t off = 0; off < sh->sentinel_len; off += 4096)
		s += p[off];
	(void)s;
}

/* Reserve, then map each VMA at its place with alternating protections. */
static int target_setup(struct shared *sh, const struct layout *l)
{
	size_t total = l->small * l->small_len + l->big * l->big_len;
	unsigned int every = l->big ? l->small / l->big : 0, i = 0;
	char *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *p = base, *s;

	if (base == MAP_FAILED)
		return -errno;
	for (unsigned int k = 0; k < l->small + l->big; k++) {
		bool big = every && k % (every + 1) == every && i < l->big;
		size_t len = big ? l->big_len : l->small_len;

		if (big)
			i++;
		if (p + len > base + total)
			break;
		if (mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) == MAP_FAILED)
			return -errno;
		madvise(p, len, MADV_NOHUGEPAGE);
		memset(p, (int)k | 1, len);
		if (k % 2)
			mprotect(p, len, PROT_READ);
		p += len;
		sh->nvmas++;
	}
	sh->region = (uintptr_t)base;
	sh->len = (size_t)(p - base);
	s = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		return -errno;
	memset(s, 7, 4 * MIB);
	sh->sentinel = (uintptr_t)s;
	sh->sentinel_len = 4 * MIB;
	return 0;
}

static void __attribute__((noreturn)) target_main(struct shared *sh, const struct layout *l)
{
	pthread_t th;
	int seen = 0;

	sh->err = target_setup(sh, l);
	if (sh->err || pthread_create(&th, NULL, mutator, sh)) {
		atomic_store(&sh->state, -1);
		_exit(1);
	}
	atomic_store(&sh->state, 1);
	while (atomic_load(&sh->phase) >= 0) {
		int c = atomic_load(&sh->cmd);

		if (c != seen) {
			touch_all(sh);
			seen = c;
			atomic_store(&sh->done, c);
		}
		usleep(200);
	}
	pthread_join(th, NULL);
	_exit(0);
}

static int wait_done(struct shared *sh, int want)
{
	for (int i = 0; i < 600000; i++) {
		int d = atomic_load(&sh->done);

		if (d == want && atomic_load(&sh->state) == 1)
			return 0;
		if (atomic_load(&sh->state) < 0)
			return -1;
		usleep(100);
	}
	return -1;
}

static int target_touch(struct shared *sh)
{
	int c = atomic_load(&sh->cmd) + 1;

	atomic_store(&sh->cmd, c);
	return wait_done(sh, c);
}

/* "Key:  n kB" of /proc/PID/smaps_rollup, in bytes. */
static uint64_t rollup(pid_t pid, const char *key)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	size_t n = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && sscanf(line + n, "%llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Referenced kB of the VMAs inside [a, b) of @pid (smaps). */
static long referenced_kb(pid_t pid, uint64_t a, uint64_t b)
{
	char path[64], line[512];
	unsigned long long s, e;
	bool in = false;
	long sum = 0, v;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = s >= a && e <= b;
		else if (in && sscanf(line, "Referenced: %ld", &v) == 1)
			sum += v;
	}
	if (f)
		fclose(f);
	return sum;
}

/* ---- the reclaimers ---- */

struct run {
	pid_t pid;
	int pidfd;
	struct madvx_target *t;
	struct shared *sh;
	int advice;
	int v;
	struct iovec *iov;	/* one per VMA */
	size_t niov;
	struct bench_samples *calls;	/* call durations, us */
	uint64_t bytes;
	long err;
	uint64_t last_call_ns;
	uint64_t changed, failed;
};

static long timed_pm(struct run *r, const struct iovec *iov, size_t n)
{
	uint64_t t0 = bench_now_ns();
	long ret = syscall(SYS_process_madvise, r->pidfd, iov, n, r->advice, 0U);

	bench_samples_add(r->calls, (double)(bench_now_ns() - t0) / 1e3);
	return ret < 0 ? -errno : ret;
}

static int lib_progress(void *ctx, const struct madvx_reclaim_report *rep)
{
	struct run *r = ctx;

	bench_samples_add(r->calls, (double)(rep->call_ns - r->last_call_ns) / 1e3);
	r->last_call_ns = rep->call_ns;
	return 0;
}

static void reclaim(void *arg)
{
	struct run *r = arg;

	r->bytes = 0;
	r->err = 0;
	if (r->v == V_RAW1024 || r->v == V_PERVMA) {
		size_t per = r->v == V_RAW1024 ? 1024 : 1;

		for (size_t i = 0; i < r->niov; i += per) {
			size_t n = r->niov - i < per ? r->niov - i : per;
			long ret = timed_pm(r, r->iov + i, n);

			if (ret < 0) {
				r->err = ret;
				return;
			}
			r->bytes += (uint64_t)ret;
		}
	} else if (r->v == V_LIB2MS || r->v == V_LIB100US || r->v == V_LIBPAUSE) {
		struct madvx_reclaim_opts o = {
			.size = sizeof(o), .advice = r->advice, .include = MADVX_VMA_ANON,
			.start = r->sh->region, .end = r->sh->region + r->sh->len,
			.max_lock_us = r->v == V_LIB2MS ? 2000 : 100,
			.pause_us = r->v == V_LIBPAUSE ? 2000 : 0,
			.flags = MADVX_RECLAIM_NO_ROLLUP,
			.progress = lib_progress, .progress_ctx = r,
		};
		struct madvx_reclaim_report rep = { .size = sizeof(rep) };

		r->last_call_ns = 0;
		r->err = madvx_reclaim(r->t, &o, &rep);
		r->bytes = rep.bytes;
		r->changed += rep.vmas_changed;
		r->failed += rep.failed_entries;
	} else {
		struct timespec ts = { 0, 100 * 1000 * 1000 };	/* idle: 100 ms */

		nanosleep(&ts, NULL);
	}
}

/* ---- one advice: all variants ---- */

static void lat_rows(const struct bench_opts *o, const char *adv, struct shared *sh,
		     double idle_p99_mmap)
{
	char var[64];

	for (int v = 0; v < NV; v++) {
		uint32_t n = atomic_load(&sh->n[v]);
		static double tmp[CAP];
		double p50, p99, u50, u99;

		if (!n)
			continue;
		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[v][i];
		p50 = bench_percentile(tmp, n, 50);
		p99 = bench_percentile(tmp, n, 99);
		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->munmap_us[v][i];
		u50 = bench_percentile(tmp, n, 50);
		u99 = bench_percentile(tmp, n, 99);
		snprintf(var, sizeof(var), "%s/%s", adv, vname[v]);
		bench_report(o, "p8", var, "target_mmap_p50", p50, "us");
		bench_report(o, "p8", var, "target_mmap_p99", p99, "us");
		bench_report(o, "p8", var, "target_munmap_p50", u50, "us");
		bench_report(o, "p8", var, "target_munmap_p99", u99, "us");
		bench_report(o, "p8", var, "target_samples", n, "");
		if (v != V_IDLE && idle_p99_mmap > 0)
			bench_report(o, "p8", var, "mmap_p99_vs_idle", p99 / idle_p99_mmap, "x");
	}
}

static int run_advice(const struct bench_opts *o, struct locktrace *lt, bool lt_ok,
		      const struct layout *l, int advice, unsigned int reps)
{
	const char *adv = advice == MADV_COLD ? "cold" : "pageout";
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct bench_samples calls[NV], tput[NV], rss_drop[NV], swap_gain[NV], iters[NV];
	double wall_ms[NV] = { 0 }, idle_p99;
	struct run r = { .advice = advice };
	char var[64];
	int ret = 0;

	if (sh == MAP_FAILED)
		return -1;
	memset(sh, 0, sizeof(*sh));
	r.pid = fork();
	if (r.pid < 0)
		return -1;
	if (r.pid == 0)
		target_main(sh, l);
	if (wait_done(sh, 0)) {
		bench_note(o, "p8: the target could not set up (%s)", strerror(-sh->err));
		ret = -1;
		goto out;
	}
	r.sh = sh;
	r.pidfd = (int)syscall(SYS_pidfd_open, r.pid, 0);
	ret = madvx_target_open(r.pid, 0, &r.t);
	if (ret || r.pidfd < 0) {
		bench_note(o, "p8: cannot open the target: %s", strerror(-ret));
		ret = BENCH_SKIP;
		goto out;
	}
	ret = madvx_target_check(r.t, advice);
	if (ret) {
		bench_note(o, "p8: remote %s not allowed here: %s%s", adv, strerror(-ret),
			   ret == -EPERM ? " (needs CAP_SYS_NICE: run as root)" : "");
		ret = BENCH_SKIP;
		goto out;
	}
	r.niov = sh->nvmas;
	r.iov = calloc(r.niov, sizeof(*r.iov));
	{	/* one iovec per VMA, as Android builds them from /proc/PID/maps */
		struct madvx_target_vma v;
		uint64_t a = sh->region;
		size_t k = 0;

		while (k < r.niov && !madvx_target_vma_next(r.t, a, MADVX_VMA_ANON, 0, &v) &&
		       v.start < sh->region + sh->len) {
			r.iov[k++] = (struct iovec){ (void *)(uintptr_t)v.start, v.end - v.start };
			a = v.end;
		}
		r.niov = k;
	}
	bench_note(o, "p8 %s: target pid %d, %zu VMAs, %llu MiB touched, mutator mmap/fault/munmap "
		   "64 KiB every ~20 us; %u reps", adv, (int)r.pid, r.niov,
		   (unsigned long long)(sh->len / MIB), reps);
	for (int v = 0; v < NV; v++) {
		if (bench_samples_init(&calls[v], 200000) || bench_samples_init(&tput[v], reps) ||
		    bench_samples_init(&rss_drop[v], reps) || bench_samples_init(&swap_gain[v], reps) ||
		    bench_samples_init(&iters[v], reps)) {
			ret = -1;
			goto out;
		}
	}
	for (unsigned int rep = 0; rep < reps; rep++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(rep, i, NV);
			uint64_t rss0, swap0, t0, t1, it0;

			if (target_touch(sh)) {
				ret = -1;
				goto out;
			}
			rss0 = rollup(r.pid, "Rss:");
			swap0 = rollup(r.pid, "Swap:");
			r.v = v;
			r.calls = &calls[v];
			it0 = atomic_load(&sh->iters[v]);
			atomic_store(&sh->phase, 1 + v);
			t0 = bench_now_ns();
			reclaim(&r);
			t1 = bench_now_ns();
			atomic_store(&sh->phase, 0);
			if (r.err) {
				bench_note(o, "p8 %s/%s failed: %s", adv, vname[v], strerror((int)-r.err));
				ret = -1;
				goto out;
			}
			wall_ms[v] += (double)(t1 - t0) / 1e6;
			bench_samples_add(&iters[v], (double)(atomic_load(&sh->iters[v]) - it0) /
						     ((double)(t1 - t0) / 1e6));
			if (v == V_IDLE)
				continue;
			bench_samples_add(&tput[v], (double)r.bytes / ((double)(t1 - t0) / 1e9));
			bench_samples_add(&rss_drop[v], ((double)rss0 - (double)rollup(r.pid, "Rss:")) / MIB);
			bench_samples_add(&swap_gain[v], ((double)rollup(r.pid, "Swap:") - (double)swap0) / MIB);
		}
	}
	idle_p99 = 0;
	{
		uint32_t n = atomic_load(&sh->n[V_IDLE]);
		static double tmp[CAP];

		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[V_IDLE][i];
		if (n)
			idle_p99 = bench_percentile(tmp, n, 99);
	}
	lat_rows(o, adv, sh, idle_p99);
	for (int v = 0; v < NV; v++) {
		snprintf(var, sizeof(var), "%s/%s", adv, vname[v]);
		bench_report(o, "p8", var, "target_iters_per_ms", bench_median(iters[v].v, iters[v].n),
			     "iter/ms");
		if (v == V_IDLE)
			continue;
		bench_report(o, "p8", var, "calls_per_reclaim", (double)calls[v].n / reps, "");
		bench_report(o, "p8", var, "call_p50", bench_percentile(calls[v].v, calls[v].n, 50), "us");
		bench_report(o, "p8", var, "call_p99", bench_percentile(calls[v].v, calls[v].n, 99), "us");
		bench_report(o, "p8", var, "call_max", bench_percentile(calls[v].v, calls[v].n, 100), "us");
		bench_report(o, "p8", var, "throughput", bench_median(tput[v].v, tput[v].n) / MIB, "MiB/s");
		bench_report(o, "p8", var, "rss_dropped", bench_median(rss_drop[v].v, rss_drop[v].n), "MiB");
		bench_report(o, "p8", var, "swap_gained", bench_median(swap_gain[v].v, swap_gain[v].n), "MiB");
	}
	{
		double t_a = bench_median(tput[V_RAW1024].v, tput[V_RAW1024].n);

		for (int v = V_LIB2MS; v <= V_LIBPAUSE; v++) {
			snprintf(var, sizeof(var), "%s/%s", adv, vname[v]);
			bench_report(o, "p8", var, "throughput_vs_raw_1024",
				     bench_median(tput[v].v, tput[v].n) / t_a, "x");
		}
	}
	/* 0 advice outside the filter: a touched sentinel VMA outside the range keeps its bits */
	if (advice == MADV_COLD) {
		long ref;

		target_touch(sh);
		r.v = V_LIB100US;
		r.calls = &calls[V_LIB100US];
		reclaim(&r);
		ref = referenced_kb(r.pid, sh->sentinel, sh->sentinel + sh->sentinel_len);
		bench_report(o, "p8", "cold/libmadvx_100us", "sentinel_referenced_lost",
			     (double)((long)(sh->sentinel_len / 1024) - ref), "KiB");
		bench_report(o, "p8", "cold/libmadvx_100us", "range_referenced_left",
			     (double)referenced_kb(r.pid, sh->region, sh->region + sh->len), "KiB");
	}
	/* one traced run per variant: mmap_lock acquisitions and hold per call */
	for (int v = V_RAW1024; v < NV; v++) {
		struct locktrace_result res;
		struct bench_samples scratch;

		snprintf(var, sizeof(var), "%s/%s", adv, vname[v]);
		if (!lt_ok) {
			bench_report_na(o, "p8", var, "mmap_lock_hold_per_call", lt->why);
			continue;
		}
		if (bench_samples_init(&scratch, 200000) || target_touch(sh))
			break;
		r.v = v;
		r.calls = &scratch;
		if (locktrace_measure(lt, reclaim, &r, &res) == 0 && res.self.acq_read) {
			bench_report(o, "p8", var, "mmap_lock_acq_per_call",
				     (double)res.self.acq_read / (double)scratch.n, "");
			bench_report(o, "p8", var, "mmap_lock_hold_per_acq",
				     (double)res.self.held_ns / 1e3 / (double)res.self.acq_read, "us");
			bench_report(o, "p8", var, "mmap_lock_held_share",
				     (double)res.self.held_ns / (double)res.call_ns, "");
		}
		bench_samples_free(&scratch);
	}
	{
		uint32_t n = atomic_load(&sh->n[V_LIB2MS]);
		static double tmp[CAP];
		double lib99 = 0, raw99 = 0;

		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[V_LIB2MS][i];
		if (n)
			lib99 = bench_percentile(tmp, n, 99);
		n = atomic_load(&sh->n[V_LIB100US]);
		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[V_LIB100US][i];
		if (n && idle_p99 > 0) {
			double l100 = bench_percentile(tmp, n, 99);

			bench_target(o, "p8", "libmadvx_100us target mmap p99 / idle p99",
				     l100 / idle_p99, 2.0, false);
		}
		n = atomic_load(&sh->n[V_LIBPAUSE]);
		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[V_LIBPAUSE][i];
		if (n && idle_p99 > 0)
			bench_target(o, "p8", "libmadvx_100us_pause2ms target mmap p99 / idle p99 "
				     "(at ~5% lock duty: see its throughput)",
				     bench_percentile(tmp, n, 99) / idle_p99, 2.0, false);
		n = atomic_load(&sh->n[V_RAW1024]);
		for (uint32_t i = 0; i < n; i++)
			tmp[i] = sh->mmap_us[V_RAW1024][i];
		if (n)
			raw99 = bench_percentile(tmp, n, 99);
		if (idle_p99 > 0) {
			bench_target(o, "p8", "libmadvx_2ms target mmap p99 / idle p99",
				     lib99 / idle_p99, 2.0, false);
			bench_note(o, "p8 %s: raw_1024 mmap p99 / idle p99 = %.3g", adv, raw99 / idle_p99);
		}
		bench_target(o, "p8", "libmadvx_100us throughput / raw_1024",
			     bench_median(tput[V_LIB100US].v, tput[V_LIB100US].n) /
			     bench_median(tput[V_RAW1024].v, tput[V_RAW1024].n), 0.8, true);
	}
	if (r.changed || r.failed)
		bench_note(o, "p8 %s: libmadvx saw %llu changed ranges, %llu refused entries", adv,
			   (unsigned long long)r.changed, (unsigned long long)r.failed);
	for (int v = 0; v < NV; v++) {
		bench_samples_free(&calls[v]);
		bench_samples_free(&tput[v]);
		bench_samples_free(&rss_drop[v]);
		bench_samples_free(&swap_gain[v]);
		bench_samples_free(&iters[v]);
	}
out:
	atomic_store(&sh->phase, -1);
	if (r.pid > 0) {
		kill(r.pid, SIGKILL);
		waitpid(r.pid, NULL, 0);
	}
	madvx_target_free(r.t);
	if (r.pidfd >= 0)
		close(r.pidfd);
	free(r.iov);
	munmap(sh, sizeof(*sh));
	return ret;
}

/* ---- scale: enumeration and planning per VMA ---- */

static int scale(const struct bench_opts *o, unsigned int want, unsigned int reps)
{
	char buf[32];
	long old_max = -1;
	unsigned int nvmas = want;
	int fd, p[2], ret = 0;
	pid_t pid;
	struct bench_samples per_vma, walk;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");

	if (f) {
		if (fscanf(f, "%ld", &old_max) != 1)
			old_max = -1;
		fclose(f);
	}
	if (old_max >= 0 && old_max < (long)want + 10000) {
		fd = open("/proc/sys/vm/max_map_count", O_WRONLY);
		snprintf(buf, sizeof(buf), "%u", want + 20000);
		if (fd < 0 || write(fd, buf, strlen(buf)) < 0) {
			nvmas = (unsigned int)(old_max - 10000);
			bench_note(o, "p8 scale: vm.max_map_count is %ld and cannot be raised "
				   "(not root): %u VMAs instead of %u", old_max, nvmas, want);
			old_max = -1;
		}
		if (fd >= 0)
			close(fd);
	} else {
		old_max = -1;	/* nothing to restore */
	}
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		char *m = mmap(NULL, (size_t)nvmas * 2 * 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		char c = 'r';

		if (m == MAP_FAILED)
			_exit(1);
		/* each read-only page splits off one more VMA: two per step */
		for (unsigned int i = 0; i < nvmas / 2; i++)
			if (mprotect(m + (size_t)i * 2 * 4096, 4096, PROT_READ))
				_exit(2);
		if (write(p[1], &c, 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	{
		char c;
		struct madvx_target *t = NULL;

		if (pid < 0 || read(p[0], &c, 1) != 1 || madvx_target_open(pid, 0, &t)) {
			bench_note(o, "p8 scale: the %u-VMA target failed", nvmas);
			ret = -1;
			goto out;
		}
		bench_samples_init(&per_vma, reps);
		bench_samples_init(&walk, reps);
		for (unsigned int rep = 0; rep < reps; rep++) {
			struct madvx_reclaim_opts ro = { .size = sizeof(ro),
				.flags = MADVX_RECLAIM_DRYRUN | MADVX_RECLAIM_NO_ROLLUP };
			struct madvx_reclaim_report rr = { .size = sizeof(rr) };
			struct madvx_target_vma v;
			uint64_t a = 0, n = 0, t0;

			t0 = bench_now_ns();
			while (!madvx_target_vma_next(t, a, 0, 0, &v)) {
				a = v.end;
				n++;
			}
			if (n)
				bench_samples_add(&walk, (double)(bench_now_ns() - t0) / (double)n);
			/* per VMA of the target: every one is looked up, planned or not */
			if (madvx_reclaim(t, &ro, &rr) == 0 && n)
				bench_samples_add(&per_vma, (double)rr.plan_ns / (double)n);
			if (rep == 0)
				bench_note(o, "p8 scale: target with %llu VMAs (%llu planned)",
					   (unsigned long long)n, (unsigned long long)rr.planned_vmas);
		}
		bench_report(o, "p8", "scale", "plan_ns_per_vma", bench_median(per_vma.v, per_vma.n), "ns");
		bench_report(o, "p8", "scale", "vma_next_ns_per_vma", bench_median(walk.v, walk.n), "ns");
		bench_target(o, "p8", "enumeration + planning per VMA (ns)",
			     bench_median(per_vma.v, per_vma.n), 2000, false);
		bench_samples_free(&per_vma);
		bench_samples_free(&walk);
		madvx_target_free(t);
	}
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	close(p[0]);
	close(p[1]);
	if (old_max >= 0) {
		fd = open("/proc/sys/vm/max_map_count", O_WRONLY);
		snprintf(buf, sizeof(buf), "%ld", old_max);
		if (fd < 0 || write(fd, buf, strlen(buf)) < 0)
			bench_note(o, "p8 scale: could not restore vm.max_map_count=%ld", old_max);
		if (fd >= 0)
			close(fd);
	}
	return ret;
}

int bench_p8(const struct bench_opts *o)
{
	struct layout l = { .small = 2048, .big = 32, .small_len = 128 * KIB, .big_len = 8 * MIB };
	unsigned int reps = bench_reps(o, 3, 1);
	struct tempswap sw = { 0 };
	struct locktrace lt;
	bool lt_ok;
	char why[256];
	int ret;

	if (o->quick)
		l = (struct layout){ .small = 256, .big = 4, .small_len = 128 * KIB, .big_len = 8 * MIB };
	/* before any big mapping: locktrace forks a helper */
	lt_ok = locktrace_open(&lt) == 0;
	/* COLD is fast (a few ms for 512 MiB): more repetitions for enough target samples */
	ret = run_advice(o, &lt, lt_ok, &l, MADV_COLD, o->reps ? reps : (o->quick ? 1 : 20));
	if (ret == 0) {
		uint64_t need = l.small * l.small_len + l.big * l.big_len + 64 * MIB;

		if (tempswap_free() < need && geteuid() == 0 && !o->quick &&
		    tempswap_on(&sw, need + 256 * MIB, why, sizeof(why)))
			bench_note(o, "p8 pageout: no swap and no temporary swap file (%s): skipped", why);
		else if (sw.on)
			bench_note(o, "p8 pageout: temporary swap file %s (%llu MiB), removed at the end",
				   sw.path, (unsigned long long)((need + 256 * MIB) / MIB));
		/*
		 * Under TCG (the test kernel has zram swap) the PAGEOUT half of a
		 * smoke run takes several minutes per kernel: CI time, not signal.
		 */
		if (o->quick && getenv("MADVX_IN_TEST_KERNEL"))
			bench_note(o, "p8 pageout: skipped in the test kernel's smoke run (TCG)");
		else if (tempswap_free() >= need)
			ret = run_advice(o, &lt, lt_ok, &l, MADV_PAGEOUT, reps);
		else if (!sw.on && geteuid() != 0)
			bench_note(o, "p8 pageout: no swap, and only root can add a temporary one: skipped");
		else if (o->quick)
			bench_note(o, "p8 pageout: no swap; --quick does not make one: skipped");
		tempswap_off(&sw);
	}
	locktrace_close(&lt);
	if (ret == 0)
		ret = scale(o, o->quick ? 10000 : 100000, o->quick ? 1 : 5);
	return ret;
}
