// SPDX-License-Identifier: MIT
/*
 * p8: reclaim another process (issues 15 and 23). A target child with an
 * app-like layout - 2048 anonymous VMAs of 32 KiB and 32 of 2 MiB, 128 MiB,
 * all touched, neighbours with different protections so none merge - runs
 * two mutator threads that keep mapping 16 KiB, touching it and unmapping it
 * (a ~20 us nap between rounds), timing every mmap() and munmap(). A remote
 * process_madvise() holds the target's mmap_read_lock for its whole vector:
 * the mutators' mmap/munmap (mmap_write_lock) wait for it. The bench
 * reclaims the 128 MiB (COLD; PAGEOUT with swap) with:
 *  - raw_1024: what Android's activity manager does (CachedAppOptimizer's
 *    compactProcess()): read and parse /proc/PID/maps, one iovec per private
 *    anonymous VMA, 1024 per process_madvise() call - the anchor for wall
 *    and CPU, its enumeration included as the library's planning is;
 *  - raw_per_vma: the same enumeration, one process_madvise() call per VMA;
 *  - L<bound>_P<gap>: madvx_reclaim() restricted to the same range, calls
 *    bounded to <bound> us, a <gap> us pause after each (0: NO_PAUSE) - the
 *    sweep of issue 23;
 *  - defaults: madvx_reclaim() with max_lock_us and pause_us left 0;
 *  - A<bound>: adaptive pause, done in the progress callback: after each
 *    call, sleep in 50 us steps (at most 2 ms) while a target thread is
 *    blocked in mmap/munmap/mprotect/brk/mremap (/proc/PID/task/TID/syscall,
 *    the check's CPU counted in the reclaimer's CPU);
 *  - idle: no reclaim (100 ms), the mutators' own latencies;
 *  - base_<variant>: with MADVX_BENCH_P8_BASELINE=/path/to/libmadvx.so (an
 *    older build), the same madvx_reclaim() call through that library
 *    (dlopen, RTLD_DEEPBIND) for the defaults and a few small bounds:
 *    library changes measured side by side in one run.
 * Variants interleave per repetition (rotating order); the target re-reads
 * every page (untimed) before each, so each reclaim finds the same state.
 * Per variant, medians over the repetitions of: the target's mmap/munmap
 * p50/p99/max (per repetition), reclaim wall time, the reclaiming thread's
 * CPU time per GiB advised (getrusage(RUSAGE_THREAD)), the lock-held share
 * (time inside process_madvise() over wall time: a remote call holds the
 * lock ~97-99% of its duration, see KERNEL.md), calls per reclaim. A Pareto
 * table (p99 / idle against CPU per GiB) is printed per advice; --plot
 * draws it. Also: wake-up latency of a thread blocked in read() on this
 * machine (the time a woken writer needs to run), 0 advice outside the
 * filter (a sentinel VMA), mmap_lock acquisitions per call for the anchors
 * and the defaults (tracepoints, as root), and the enumeration cost of a
 * 100,000-VMA target.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <madvx.h>

#include "bench.h"
#include "locktrace.h"
#include "tempswap.h"
#include "uapi-compat.h"

#define KIB 1024UL
#define MIB (1024UL * 1024)
#define GIB (1024.0 * 1024 * 1024)
#define NMUT 2			/* mutator threads */
#define MUT_LEN (16 * KIB)	/* what each round maps, touches, unmaps */
#define MAXV 40			/* variants */
#define PH_WARM 1		/* mutators run, nothing recorded; tags are above */

enum kind { K_IDLE, K_RAW1024, K_PERVMA, K_LIB, K_ADAPT, K_BASE };

struct variant {
	char name[24];
	enum kind kind;
	uint32_t lock_us, pause_us;	/* K_LIB: 0, 0 = the library's defaults */
	bool dflt, traced;
};

/* The baseline library: its own madvx_target_open/reclaim/free. */
static struct {
	void *h;
	int (*open)(int pid, unsigned int flags, struct madvx_target **out);
	int (*reclaim)(struct madvx_target *t, const struct madvx_reclaim_opts *o,
		       struct madvx_reclaim_report *r);
	void (*free)(struct madvx_target *t);
} base;

static bool base_load(void)
{
	const char *path = getenv("MADVX_BENCH_P8_BASELINE");

	if (base.h || !path || !*path)
		return base.h != NULL;
	base.h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	if (!base.h)
		return false;
	*(void **)&base.open = dlsym(base.h, "madvx_target_open");
	*(void **)&base.reclaim = dlsym(base.h, "madvx_reclaim");
	*(void **)&base.free = dlsym(base.h, "madvx_target_free");
	if (!base.open || !base.reclaim || !base.free) {
		dlclose(base.h);
		base.h = NULL;
	}
	return base.h != NULL;
}

/* One timed mmap/munmap round of a mutator, tagged with its phase. */
struct sample {
	float mmap_us, munmap_us;
	int32_t tag;
};

struct shared {
	_Atomic int phase;		/* -1 exit; 0 idle; PH_WARM running; else the tag to record */
	_Atomic int cmd, done;		/* cmd sequence: 'touch' requests, acks */
	_Atomic int state;		/* 0 setting up, 1 ready, -1 failed */
	int err;
	uint64_t region, len, sentinel, sentinel_len;
	uint32_t nvmas;
	_Atomic uint64_t iters;
	_Atomic uint64_t n;		/* samples taken (may exceed cap: the rest are lost) */
	uint64_t cap;
	struct sample *pool;		/* MAP_SHARED, cap entries */
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
	struct timespec nap = { 0, 20000 }, idle = { 0, 1000000 };

	for (;;) {
		int ph = atomic_load_explicit(&sh->phase, memory_order_relaxed);
		double t0, t1, t2, t3;
		char *q;

		if (ph < 0)
			break;
		if (ph == 0) {
			/* between runs: leave the CPU to the re-touch */
			nanosleep(&idle, NULL);
			continue;
		}
		t0 = now_us();
		q = mmap(NULL, MUT_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t1 = now_us();
		if (q == MAP_FAILED)
			continue;
		for (size_t off = 0; off < MUT_LEN; off += 4096)
			q[off] = 1;	/* faults (per-VMA locked: not what we time) */
		t2 = now_us();
		munmap(q, MUT_LEN);
		t3 = now_us();
		if (ph > PH_WARM) {
			uint64_t i = atomic_fetch_add_explicit(&sh->n, 1, memory_order_relaxed);

			if (i < sh->cap)
				sh->pool[i] = (struct sample){ (float)(t1 - t0), (float)(t3 - t2), ph };
			atomic_fetch_add_explicit(&sh->iters, 1, memory_order_relaxed);
		}
		nanosleep(&nap, NULL);
	}
	return NULL;
}

static void touch_all(struct shared *sh)
{
	volatile char *p = (volatile char *)(uintptr_t)sh->region;
	char s = 0;

	/* after PAGEOUT: read the swap back in big batches, not a fault at a time */
	madvise((void *)(uintptr_t)sh->region, sh->len, MADV_WILLNEED);
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
	pthread_t th[NMUT];
	int seen = 0;

	sh->err = target_setup(sh, l);
	for (int k = 0; !sh->err && k < NMUT; k++)
		if (pthread_create(&th[k], NULL, mutator, sh))
			sh->err = -EAGAIN;
	if (sh->err) {
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
	for (int k = 0; k < NMUT; k++)
		pthread_join(th[k], NULL);
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

/* ---- adaptive pause: is a target thread blocked in an mmap_lock writer? ---- */

#define ADAPT_STEP_US 50
#define ADAPT_MAX_US 2000

struct adapt {
	int fd[64];		/* /proc/PID/task/TID/syscall of each thread */
	int n;
	uint64_t checks, pauses;
};

static void adapt_open(struct adapt *a, pid_t pid)
{
	char path[320];
	struct dirent *d;
	DIR *dir;

	a->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && (d = readdir(dir)) && a->n < (int)(sizeof(a->fd) / sizeof(a->fd[0]))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/syscall", (int)pid, d->d_name);
		a->fd[a->n] = open(path, O_RDONLY | O_CLOEXEC);
		if (a->fd[a->n] >= 0)
			a->n++;
	}
	if (dir)
		closedir(dir);
}

static void adapt_close(struct adapt *a)
{
	for (int i = 0; i < a->n; i++)
		close(a->fd[i]);
	a->n = 0;
}

/*
 * A thread that is not on a CPU shows "NR args..." in its syscall file
 * ("running" while on a CPU or runnable: the kernel's task_current_syscall()
 * reads only stopped tasks). A writer woken by our up_read() is runnable,
 * so only writers still blocked are seen - the reason this may lose.
 */
static bool writer_blocked(struct adapt *a)
{
	a->checks++;
	for (int i = 0; i < a->n; i++) {
		char buf[32];
		ssize_t r = pread(a->fd[i], buf, sizeof(buf) - 1, 0);
		long nr;

		if (r <= 0 || buf[0] < '0' || buf[0] > '9')
			continue;
		buf[r] = 0;
		nr = strtol(buf, NULL, 10);
		if (nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mprotect || nr == SYS_brk ||
		    nr == SYS_mremap)
			return true;
	}
	return false;
}

/* ---- the reclaimers ---- */

struct run {
	pid_t pid;
	int pidfd;
	struct madvx_target *t;
	struct madvx_target *t_base;	/* opened by the baseline library */
	struct shared *sh;
	int advice;
	const struct variant *v;
	struct iovec *iov;	/* one per VMA */
	size_t niov;
	uint64_t bytes, calls, call_ns;
	long err;
	uint64_t changed, failed;
	struct adapt adapt;
	bool advised;		/* the last run advised: re-read every page first */
};

static long timed_pm(struct run *r, const struct iovec *iov, size_t n)
{
	uint64_t t0 = bench_now_ns();
	long ret = syscall(__NR_process_madvise, r->pidfd, iov, n, r->advice, 0U);

	r->call_ns += bench_now_ns() - t0;
	r->calls++;
	return ret < 0 ? -errno : ret;
}

/*
 * The anchors' enumeration, as Android's activity manager does it
 * (CachedAppOptimizer compactProcess(): ProcMemInfo::ForEachVmaFromMaps(),
 * then one iovec per private anonymous VMA - inode 0, not shared): read
 * /proc/PID/maps whole and parse it, inside the timed reclaim, so that the
 * anchors' wall and CPU include what the Android way pays for its plan, as
 * madvx_reclaim()'s include its own. Kept to the target's region, as the
 * library variants are (.start/.end). Returns the entries or -errno.
 */
static long android_collect(struct run *r)
{
	static char *buf;
	static size_t cap;
	char path[64];
	size_t len = 0, k = 0;
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)r->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (cap - len < 65536) {
			char *nb = realloc(buf, cap + (1 << 20));

			if (!nb) {
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
			cap += 1 << 20;
		}
		got = read(fd, buf + len, cap - len - 1);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	if (got < 0)
		return -errno;
	buf[len] = 0;
	for (char *line = buf; *line && k < r->niov;) {
		char *p = line, *nl = strchr(line, '\n');
		uint64_t start = strtoull(p, &p, 16), end = strtoull(p + 1, &p, 16);
		bool shared = p[4] == 's';
		unsigned long long inode;

		/* " perms offset dev inode" */
		p = strchr(p + 1, ' ');		/* before offset */
		p = p ? strchr(p + 1, ' ') : NULL;	/* before dev */
		p = p ? strchr(p + 1, ' ') : NULL;	/* before inode */
		inode = p ? strtoull(p + 1, NULL, 10) : 1;
		if (!inode && !shared && start >= r->sh->region && end <= r->sh->region + r->sh->len)
			r->iov[k++] = (struct iovec){ (void *)(uintptr_t)start, end - start };
		if (!nl)
			break;
		line = nl + 1;
	}
	return (long)k;
}

static int adapt_progress(void *ctx, const struct madvx_reclaim_report *rep)
{
	struct run *r = ctx;
	struct timespec step = { 0, ADAPT_STEP_US * 1000 };

	(void)rep;
	for (int waited = 0; waited < ADAPT_MAX_US && writer_blocked(&r->adapt);
	     waited += ADAPT_STEP_US) {
		r->adapt.pauses++;
		nanosleep(&step, NULL);
	}
	return 0;
}

static void reclaim(void *arg)
{
	struct run *r = arg;
	const struct variant *v = r->v;

	r->bytes = r->calls = r->call_ns = 0;
	r->err = 0;
	if (v->kind == K_RAW1024 || v->kind == K_PERVMA) {
		size_t per = v->kind == K_RAW1024 ? 1024 : 1;
		long niov = android_collect(r);

		if (niov < 0) {
			r->err = niov;
			return;
		}
		for (size_t i = 0; i < (size_t)niov; i += per) {
			size_t n = (size_t)niov - i < per ? (size_t)niov - i : per;
			long ret = timed_pm(r, r->iov + i, n);

			if (ret < 0) {
				r->err = ret;
				return;
			}
			r->bytes += (uint64_t)ret;
		}
	} else if (v->kind == K_LIB || v->kind == K_ADAPT || v->kind == K_BASE) {
		struct madvx_reclaim_opts o = {
			.size = sizeof(o), .advice = r->advice, .include = MADVX_VMA_ANON,
			.start = r->sh->region, .end = r->sh->region + r->sh->len,
			.max_lock_us = v->lock_us, .pause_us = v->pause_us,
			.flags = MADVX_RECLAIM_NO_ROLLUP,
		};
		struct madvx_reclaim_report rep = { .size = sizeof(rep) };

		if (!v->dflt && !v->pause_us)
			o.flags |= MADVX_RECLAIM_NO_PAUSE;
		if (v->kind == K_ADAPT) {
			adapt_open(&r->adapt, r->pid);	/* per reclaim: threads come and go */
			o.progress = adapt_progress;
			o.progress_ctx = r;
		}
		if (v->kind == K_BASE)
			r->err = base.reclaim(r->t_base, &o, &rep);
		else
			r->err = madvx_reclaim(r->t, &o, &rep);
		if (v->kind == K_ADAPT)
			adapt_close(&r->adapt);
		r->bytes = rep.bytes;
		r->calls = rep.calls;
		r->call_ns = rep.call_ns;
		r->changed += rep.vmas_changed;
		r->failed += rep.failed_entries;
	} else {
		struct timespec ts = { 0, 100 * 1000 * 1000 };	/* idle: 100 ms */

		nanosleep(&ts, NULL);
	}
}

static uint64_t thread_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
}

/* ---- wake-up latency: how long a thread blocked in read() takes to run ---- */

struct wake {
	int p[2];
	struct bench_samples s;
};

static void *waker_thread(void *arg)
{
	struct wake *w = arg;
	uint64_t t;

	while (read(w->p[0], &t, sizeof(t)) == (ssize_t)sizeof(t) && t)
		bench_samples_add(&w->s, (double)(bench_now_ns() - t) / 1e3);
	return NULL;
}

/* p50/p99 of 500 wake-ups, 200 us apart, with the target's mutators running. */
static void wakeup_latency(const struct bench_opts *o, const char *adv)
{
	struct wake w;
	pthread_t th;
	struct timespec gap = { 0, 200000 };
	uint64_t t = 0;
	char var[48];

	if (pipe(w.p) || bench_samples_init(&w.s, 500))
		return;
	if (pthread_create(&th, NULL, waker_thread, &w) == 0) {
		for (int i = 0; i < 500; i++) {
			nanosleep(&gap, NULL);
			t = bench_now_ns();
			if (write(w.p[1], &t, sizeof(t)) != (ssize_t)sizeof(t))
				break;
		}
		t = 0;
		if (write(w.p[1], &t, sizeof(t)) != (ssize_t)sizeof(t))
			pthread_cancel(th);
		pthread_join(th, NULL);
		snprintf(var, sizeof(var), "%s/wakeup", adv);
		bench_report(o, "p8", var, "wakeup_p50", bench_percentile(w.s.v, w.s.n, 50), "us");
		bench_report(o, "p8", var, "wakeup_p99", bench_percentile(w.s.v, w.s.n, 99), "us");
	}
	bench_samples_free(&w.s);
	close(w.p[0]);
	close(w.p[1]);
}

/* ---- one advice: every variant, interleaved ---- */

enum { M_MMAP50, M_MMAP99, M_MMAPMAX, M_UNMAP50, M_UNMAP99, M_UNMAPMAX, M_WALL, M_CPU,
       M_SHARE, M_CALLS, M_ITERS, M_CHECKS, NM };
static const char *const mname[NM] = {
	"target_mmap_p50", "target_mmap_p99", "target_mmap_max", "target_munmap_p50",
	"target_munmap_p99", "target_munmap_max", "wall", "cpu_per_gib", "lock_held_share",
	"calls", "target_iters_per_ms", "adapt_checks",
};
static const char *const munit[NM] = {
	"us", "us", "us", "us", "us", "us", "ms", "ms/GiB", "", "", "iter/ms", "",
};

/* Medians over the repetitions, kept for the Pareto table and the plot. */
struct result {
	double m[NM];
	double p99x, u99x, wallx, cpux;	/* vs idle (p99x, u99x) and vs raw_1024 */
	bool pareto;
};

static struct variant vars[MAXV];
static unsigned int nvars;
static struct result res[2][MAXV];	/* [cold, pageout] */
static bool res_ok[2];
static char target_desc[64];		/* "128 MiB / 2080 VMAs", for the plot */
static char names_of[2][MAXV][24];	/* per advice: the variants' names and kinds */
static int kinds_of[2][MAXV];		/* 0 the sweep, 1 the others */
static unsigned int nvars_of[2];

static void add_var(const char *name, enum kind k, uint32_t lock_us, uint32_t pause_us)
{
	struct variant *v = &vars[nvars++];

	snprintf(v->name, sizeof(v->name), "%s", name);
	v->kind = k;
	v->lock_us = lock_us;
	v->pause_us = pause_us;
	v->traced = k == K_RAW1024 || k == K_PERVMA;
}

/*
 * The sweep: bound x gap. PAGEOUT runs a smaller grid - no 100 us bound,
 * no 1 ms gap (both are far off the Pareto front for COLD and multiply
 * PAGEOUT's calls or wall time) - as every PAGEOUT run also swaps the
 * target back in.
 */
static void make_variants(bool quick, bool pageout)
{
	static const uint32_t full_lock[] = { 100, 300, 1000, 2000 }, quick_lock[] = { 300, 2000 };
	static const uint32_t full_pause[] = { 0, 50, 100, 300, 1000 }, quick_pause[] = { 0, 100 };
	const uint32_t *lk = quick ? quick_lock : full_lock + pageout, *ps = quick ? quick_pause : full_pause;
	size_t nl = quick ? 2 : 4 - pageout, np = quick ? 2 : 5 - pageout;
	char name[24];

	nvars = 0;
	add_var("idle", K_IDLE, 0, 0);
	add_var("raw_1024", K_RAW1024, 0, 0);
	add_var("raw_per_vma", K_PERVMA, 0, 0);
	add_var("defaults", K_LIB, 0, 0);
	vars[nvars - 1].dflt = vars[nvars - 1].traced = true;
	for (size_t i = 0; i < nl; i++)
		for (size_t j = 0; j < np; j++) {
			snprintf(name, sizeof(name), "L%u_P%u", lk[i], ps[j]);
			add_var(name, K_LIB, lk[i], ps[j]);
		}
	add_var("A300", K_ADAPT, 300, 0);
	if (!quick && base_load()) {
		static const uint32_t bl[][2] = { { 0, 0 }, { 100, 300 }, { 300, 100 }, { 300, 300 } };

		for (size_t i = 0; i < sizeof(bl) / sizeof(bl[0]); i++) {
			if (bl[i][0])
				snprintf(name, sizeof(name), "base_L%u_P%u", bl[i][0], bl[i][1]);
			else
				snprintf(name, sizeof(name), "base_defaults");
			add_var(name, K_BASE, bl[i][0], bl[i][1]);
			vars[nvars - 1].dflt = !bl[i][0];
		}
	}
}

/* The samples of one run (tag) in the pool: per-run p50/p99/max into s[]. */
static void run_latencies(struct shared *sh, int tag, struct bench_samples *s, double *scratch)
{
	uint64_t n = atomic_load(&sh->n), k = 0;

	if (n > sh->cap)
		n = sh->cap;
	for (uint64_t i = 0; i < n; i++)
		if (sh->pool[i].tag == tag)
			scratch[k++] = sh->pool[i].mmap_us;
	if (!k)
		return;
	bench_samples_add(&s[M_MMAP50], bench_percentile(scratch, k, 50));
	bench_samples_add(&s[M_MMAP99], bench_percentile(scratch, k, 99));
	bench_samples_add(&s[M_MMAPMAX], bench_percentile(scratch, k, 100));
	k = 0;
	for (uint64_t i = 0; i < n; i++)
		if (sh->pool[i].tag == tag)
			scratch[k++] = sh->pool[i].munmap_us;
	bench_samples_add(&s[M_UNMAP50], bench_percentile(scratch, k, 50));
	bench_samples_add(&s[M_UNMAP99], bench_percentile(scratch, k, 99));
	bench_samples_add(&s[M_UNMAPMAX], bench_percentile(scratch, k, 100));
}

/* One reclaim of variant @vi in repetition @rep, its numbers into s[]. */
static int one_run(struct run *r, unsigned int vi, unsigned int rep, struct bench_samples *s,
		   double *scratch)
{
	struct shared *sh = r->sh;
	int tag = PH_WARM + 1 + (int)vi + MAXV * (int)rep;
	uint64_t t0, t1, c0, c1, it0;
	struct timespec settle = { 0, 1000000 }, warm = { 0, 2000000 };
	double wall;

	if (r->advised && target_touch(sh))
		return -1;
	r->advised = vars[vi].kind != K_IDLE;
	r->v = &vars[vi];
	atomic_store(&sh->n, 0);
	it0 = atomic_load(&sh->iters);
	r->adapt.checks = 0;
	atomic_store(&sh->phase, PH_WARM);
	nanosleep(&warm, NULL);	/* the mutators leave their idle sleep */
	atomic_store(&sh->phase, tag);
	c0 = thread_cpu_ns();
	t0 = bench_now_ns();
	reclaim(r);
	t1 = bench_now_ns();
	c1 = thread_cpu_ns();
	atomic_store(&sh->phase, 0);
	nanosleep(&settle, NULL);	/* rounds in flight finish */
	if (r->err)
		return (int)r->err;
	wall = (double)(t1 - t0) / 1e6;
	run_latencies(sh, tag, s, scratch);
	bench_samples_add(&s[M_ITERS], (double)(atomic_load(&sh->iters) - it0) / wall);
	if (vars[vi].kind == K_IDLE)
		return 0;
	bench_samples_add(&s[M_WALL], wall);
	bench_samples_add(&s[M_CPU], r->bytes ? (double)(c1 - c0) / 1e6 / ((double)r->bytes / GIB) : 0);
	bench_samples_add(&s[M_SHARE], (double)r->call_ns / (double)(t1 - t0));
	bench_samples_add(&s[M_CALLS], (double)r->calls);
	bench_samples_add(&s[M_CHECKS], (double)r->adapt.checks);
	return 0;
}

/* Pareto: no other variant has both a lower p99 / idle and a lower CPU per GiB. */
static void pareto(struct result *rs)
{
	for (unsigned int a = 1; a < nvars; a++) {
		rs[a].pareto = true;
		for (unsigned int b = 1; b < nvars; b++)
			if (b != a && rs[b].p99x <= rs[a].p99x && rs[b].m[M_CPU] <= rs[a].m[M_CPU] &&
			    (rs[b].p99x < rs[a].p99x || rs[b].m[M_CPU] < rs[a].m[M_CPU]))
				rs[a].pareto = false;
	}
}

static void print_table(const struct bench_opts *o, const char *adv, struct result *rs)
{
	unsigned int order[MAXV], n = 0;

	for (unsigned int i = 1; i < nvars; i++)
		order[n++] = i;
	for (unsigned int i = 1; i < n; i++)	/* by CPU per GiB */
		for (unsigned int j = i; j > 0 && rs[order[j]].m[M_CPU] < rs[order[j - 1]].m[M_CPU]; j--) {
			unsigned int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	bench_note(o, "p8 %s Pareto table (medians; * = no variant is better in both p99/idle "
		   "and CPU/GiB), idle mmap p50 %.3g us, p99 %.3g us, munmap p99 %.3g us:", adv,
		   rs[0].m[M_MMAP50], rs[0].m[M_MMAP99], rs[0].m[M_UNMAP99]);
	bench_note(o, "| variant | mmap p50 | mmap p99 | p99/idle | munmap p99/idle | mmap max | "
		   "wall ms | wall/raw_1024 | CPU ms/GiB | CPU/raw_1024 | lock held | calls | |");
	bench_note(o, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
	for (unsigned int k = 0; k < n; k++) {
		const struct result *x = &rs[order[k]];

		bench_note(o, "| %s | %.3g us | %.4g us | %.3gx | %.3gx | %.4g us | %.4g | %.3gx | %.4g "
			   "| %.3gx | %.0f%% | %.0f | %s |", vars[order[k]].name, x->m[M_MMAP50],
			   x->m[M_MMAP99], x->p99x, x->u99x, x->m[M_MMAPMAX], x->m[M_WALL], x->wallx,
			   x->m[M_CPU], x->cpux, 100 * x->m[M_SHARE], x->m[M_CALLS],
			   x->pareto ? "*" : "");
	}
}

static void report_all(const struct bench_opts *o, const char *adv, struct bench_samples s[][NM],
		       struct result *rs)
{
	char var[48];

	for (unsigned int v = 0; v < nvars; v++)
		for (int m = 0; m < NM; m++)
			rs[v].m[m] = s[v][m].n ? bench_median(s[v][m].v, s[v][m].n) : 0;
	for (unsigned int v = 0; v < nvars; v++) {
		struct result *x = &rs[v];

		x->p99x = rs[0].m[M_MMAP99] > 0 ? x->m[M_MMAP99] / rs[0].m[M_MMAP99] : 0;
		x->u99x = rs[0].m[M_UNMAP99] > 0 ? x->m[M_UNMAP99] / rs[0].m[M_UNMAP99] : 0;
		x->wallx = rs[1].m[M_WALL] > 0 ? x->m[M_WALL] / rs[1].m[M_WALL] : 0;
		x->cpux = rs[1].m[M_CPU] > 0 ? x->m[M_CPU] / rs[1].m[M_CPU] : 0;
		snprintf(var, sizeof(var), "%s/%s", adv, vars[v].name);
		for (int m = 0; m < NM; m++) {
			if (!s[v][m].n || (m == M_CHECKS && vars[v].kind != K_ADAPT))
				continue;
			bench_report(o, "p8", var, mname[m], x->m[m], munit[m]);
		}
		if (v == 0)
			continue;
		bench_report(o, "p8", var, "mmap_p99_vs_idle", x->p99x, "x");
		bench_report(o, "p8", var, "munmap_p99_vs_idle", x->u99x, "x");
		bench_report(o, "p8", var, "wall_vs_raw_1024", x->wallx, "x");
		bench_report(o, "p8", var, "cpu_vs_raw_1024", x->cpux, "x");
	}
	pareto(rs);
	print_table(o, adv, rs);
}

/* Issue 23's goals, for the defaults. */
static void goals(const struct bench_opts *o, int advice, const struct result *rs)
{
	const struct result *d = &rs[3];	/* "defaults" */
	bool cold = advice == MADV_COLD;
	char what[96];

	snprintf(what, sizeof(what), "%s defaults: target mmap p99 / idle", cold ? "cold" : "pageout");
	bench_target(o, "p8", what, d->p99x, cold ? 2.0 : 3.0, false);
	snprintf(what, sizeof(what), "%s defaults: CPU per GiB / raw_1024", cold ? "cold" : "pageout");
	bench_target(o, "p8", what, d->cpux, 1.5, false);
	snprintf(what, sizeof(what), "%s defaults: wall / raw_1024", cold ? "cold" : "pageout");
	bench_target(o, "p8", what, d->wallx, 4.0, false);
}

static void traced_runs(const struct bench_opts *o, struct locktrace *lt, bool lt_ok, struct run *r,
			const char *adv)
{
	char var[48];

	for (unsigned int v = 1; v < nvars; v++) {
		struct locktrace_result lr;

		if (!vars[v].traced)
			continue;
		snprintf(var, sizeof(var), "%s/%s", adv, vars[v].name);
		if (!lt_ok) {
			bench_report_na(o, "p8", var, "mmap_lock_hold_per_call", lt->why);
			continue;
		}
		if (target_touch(r->sh))
			break;
		r->v = &vars[v];
		if (locktrace_measure(lt, reclaim, r, &lr) == 0 && lr.self.acq_read && r->calls) {
			bench_report(o, "p8", var, "mmap_lock_acq_per_call",
				     (double)lr.self.acq_read / (double)r->calls, "");
			bench_report(o, "p8", var, "mmap_lock_hold_per_acq",
				     (double)lr.self.held_ns / 1e3 / (double)lr.self.acq_read, "us");
			bench_report(o, "p8", var, "mmap_lock_held_share_traced",
				     (double)lr.self.held_ns / (double)lr.call_ns, "");
		}
	}
}

/* 0 advice outside the filter: a touched sentinel VMA outside the range keeps its bits. */
static void sentinel_check(const struct bench_opts *o, struct run *r)
{
	struct shared *sh = r->sh;
	long ref;

	if (target_touch(sh))
		return;
	r->v = &vars[3];
	reclaim(r);
	ref = referenced_kb(r->pid, sh->sentinel, sh->sentinel + sh->sentinel_len);
	bench_report(o, "p8", "cold/defaults", "sentinel_referenced_lost",
		     (double)((long)(sh->sentinel_len / 1024) - ref), "KiB");
	bench_report(o, "p8", "cold/defaults", "range_referenced_left",
		     (double)referenced_kb(r->pid, sh->region, sh->region + sh->len), "KiB");
}

static int open_target(const struct bench_opts *o, struct run *r, const char *adv)
{
	struct shared *sh = r->sh;
	struct madvx_target_vma v;
	uint64_t a = sh->region;
	size_t k = 0;
	int ret;

	r->pidfd = (int)syscall(__NR_pidfd_open, r->pid, 0);
	ret = madvx_target_open(r->pid, 0, &r->t);
	if (ret || r->pidfd < 0) {
		bench_note(o, "p8: cannot open the target: %s", strerror(-ret));
		return BENCH_SKIP;
	}
	if (base.h && base.open(r->pid, 0, &r->t_base)) {
		bench_note(o, "p8: the baseline library cannot open the target");
		return BENCH_SKIP;
	}
	ret = madvx_target_check(r->t, r->advice);
	if (ret) {
		bench_note(o, "p8: remote %s not allowed here: %s%s", adv, strerror(-ret),
			   ret == -EPERM ? " (needs CAP_SYS_NICE: run as root)" : "");
		return BENCH_SKIP;
	}
	r->niov = sh->nvmas;
	r->iov = calloc(r->niov, sizeof(*r->iov));
	if (!r->iov)
		return -1;
	/* one iovec per VMA, as Android builds them from /proc/PID/maps */
	while (k < r->niov && !madvx_target_vma_next(r->t, a, MADVX_VMA_ANON, 0, &v) &&
	       v.start < sh->region + sh->len) {
		r->iov[k++] = (struct iovec){ (void *)(uintptr_t)v.start, v.end - v.start };
		a = v.end;
	}
	r->niov = k;
	/* the anchors' own enumeration (timed in each run) must find the same */
	if (android_collect(r) != (long)k) {
		bench_note(o, "p8: /proc/PID/maps and PROCMAP_QUERY disagree on the target's VMAs");
		return -1;
	}
	return 0;
}

static int run_advice(const struct bench_opts *o, struct locktrace *lt, bool lt_ok,
		      const struct layout *l, int advice, unsigned int reps)
{
	const char *adv = advice == MADV_COLD ? "cold" : "pageout";
	size_t cap = o->quick ? 1u << 18 : 1u << 21;
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct sample *pool = mmap(NULL, cap * sizeof(*pool), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	static struct bench_samples s[MAXV][NM];
	double *scratch = malloc(cap * sizeof(double));
	struct run r = { .advice = advice, .pidfd = -1, .advised = true };
	int ret = 0;

	if (sh == MAP_FAILED || pool == MAP_FAILED || !scratch)
		return -1;
	make_variants(o->quick, advice == MADV_PAGEOUT);
	memset(sh, 0, sizeof(*sh));
	sh->pool = pool;
	sh->cap = cap;
	for (unsigned int v = 0; v < nvars; v++)
		for (int m = 0; m < NM; m++)
			if (bench_samples_init(&s[v][m], reps))
				return -1;
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
	ret = open_target(o, &r, adv);
	if (ret)
		goto out;
	bench_note(o, "p8 %s: target pid %d, %zu VMAs, %llu MiB touched, %d mutators mmap/touch/"
		   "munmap %lu KiB every ~20 us; %u variants, %u reps interleaved", adv, (int)r.pid,
		   r.niov, (unsigned long long)(sh->len / MIB), NMUT, MUT_LEN / KIB, nvars, reps);
	snprintf(target_desc, sizeof(target_desc), "%llu MiB / %zu VMAs",
		 (unsigned long long)(sh->len / MIB), r.niov);
	atomic_store(&sh->phase, PH_WARM);	/* the mutators run, as during a reclaim */
	wakeup_latency(o, adv);
	atomic_store(&sh->phase, 0);
	for (unsigned int rep = 0; rep < reps; rep++) {
		for (unsigned int i = 0; i < nvars; i++) {
			unsigned int v = bench_order(rep, i, nvars);

			ret = one_run(&r, v, rep, s[v], scratch);
			if (ret) {
				bench_note(o, "p8 %s/%s failed: %s", adv, vars[v].name, strerror(-ret));
				ret = -1;
				goto out;
			}
		}
		if (!o->quick)
			bench_note(o, "p8 %s: repetition %u of %u done", adv, rep + 1, reps);
	}
	report_all(o, adv, s, res[advice == MADV_PAGEOUT]);
	res_ok[advice == MADV_PAGEOUT] = true;
	nvars_of[advice == MADV_PAGEOUT] = nvars;
	for (unsigned int v = 0; v < nvars; v++) {
		memcpy(names_of[advice == MADV_PAGEOUT][v], vars[v].name, sizeof(vars[v].name));
		kinds_of[advice == MADV_PAGEOUT][v] = vars[v].kind == K_LIB && !vars[v].dflt ? 0 : 1;
	}
	goals(o, advice, res[advice == MADV_PAGEOUT]);
	if (advice == MADV_COLD)
		sentinel_check(o, &r);
	traced_runs(o, lt, lt_ok, &r, adv);
	if (r.changed || r.failed)
		bench_note(o, "p8 %s: libmadvx saw %llu changed ranges, %llu refused entries", adv,
			   (unsigned long long)r.changed, (unsigned long long)r.failed);
out:
	for (unsigned int v = 0; v < nvars; v++)
		for (int m = 0; m < NM; m++)
			bench_samples_free(&s[v][m]);
	atomic_store(&sh->phase, -1);
	if (r.pid > 0) {
		kill(r.pid, SIGKILL);
		waitpid(r.pid, NULL, 0);
	}
	madvx_target_free(r.t);
	if (r.t_base)
		base.free(r.t_base);
	if (r.pidfd >= 0)
		close(r.pidfd);
	free(r.iov);
	free(scratch);
	munmap(pool, cap * sizeof(*pool));
	munmap(sh, sizeof(*sh));
	return ret;
}

/* ---- plot: p99 / idle against CPU per GiB, both advices; never fails the run ---- */

static void plot(const struct bench_opts *o)
{
	char dat[2][32] = { "/tmp/madvx-bench-p8-XXXXXX", "/tmp/madvx-bench-p8-XXXXXX" };
	FILE *g;

	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		bench_note(o, "--plot: gnuplot not found (apt-get install gnuplot-nox); no plot written");
		return;
	}
	/* one file per advice: gnuplot does not count an empty leading data block */
	for (int a = 0; a < 2; a++) {
		int fd = mkstemp(dat[a]);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

		if (!f) {
			bench_note(o, "--plot: cannot write a temp file; no plot written");
			if (fd >= 0)
				close(fd);
			if (a)
				unlink(dat[0]);
			return;
		}
		for (unsigned int v = 1; res_ok[a] && v < nvars_of[a]; v++)
			fprintf(f, "%g %g %s %d\n", res[a][v].m[M_CPU], res[a][v].p99x,
				names_of[a][v], kinds_of[a][v]);
		fclose(f);
	}
	g = popen("gnuplot", "w");
	if (!g) {
		bench_note(o, "--plot: cannot run gnuplot");
		goto out;
	}
	fprintf(g, "set terminal png size 1200,560 noenhanced\nset output '%s'\n"
		"set multiplot layout 1,2 title 'p8: remote reclaim of %s, "
		"target mmap p99 / idle against the reclaimer CPU per GiB (medians)'\n"
		"set xlabel 'reclaimer CPU ms per GiB'\n"
		"set ylabel 'target mmap p99 / idle p99'\nset grid\nset key top right\n", o->plot,
		target_desc);
	for (int a = 0; a < 2; a++) {
		if (!res_ok[a]) {
			fprintf(g, "set title '%s: not run'\nunset logscale\n"
				"plot [0:1][0:1] 2 notitle\n", a ? "PAGEOUT" : "COLD");
			continue;
		}
		fprintf(g, "set title '%s'\nset logscale xy\n"
			"plot '%s' using 1:($4==0?$2:1/0) with points pt 7 title 'madvx_reclaim "
			"L<bound us>_P<gap us>', '' using 1:($4==1?$2:1/0) with points pt 5 "
			"ps 1.5 title 'anchors, defaults, adaptive', '' using 1:2:3 with labels "
			"offset 0.6,0.6 left font ',8' notitle, %g title 'goal' dt 2\n",
			a ? "PAGEOUT" : "COLD", dat[a], a ? 3.0 : 2.0);
	}
	fprintf(g, "unset multiplot\n");
	if (pclose(g) == 0)
		bench_note(o, "plot written to %s", o->plot);
	else
		bench_note(o, "--plot: gnuplot failed; no plot written");
out:
	unlink(dat[0]);
	unlink(dat[1]);
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
	/*
	 * 2080 VMAs as in issue 23, but 128 MiB, not 512: each run re-reads every
	 * page, and on this VM re-setting the accessed bits COLD cleared costs
	 * ~9 us per page (1.2 s of CPU per 512 MiB): 130 runs per advice would
	 * not fit a session on a shared machine.
	 */
	struct layout l = { .small = 2048, .big = 32, .small_len = 32 * KIB, .big_len = 2 * MIB };
	unsigned int reps = bench_reps(o, 5, 1);
	const char *only = getenv("MADVX_BENCH_P8_ADVICE");
	struct tempswap sw = { 0 };
	struct locktrace lt;
	bool lt_ok;
	char why[256];
	int ret = 0;

	if (o->quick)
		l = (struct layout){ .small = 256, .big = 4, .small_len = 32 * KIB, .big_len = 2 * MIB };
	res_ok[0] = res_ok[1] = false;
	/* before any big mapping: locktrace forks a helper */
	lt_ok = locktrace_open(&lt) == 0;
	/* MADVX_BENCH_P8_ADVICE=cold|pageout: one half only (to split a long run) */
	if (!only || !strcmp(only, "cold"))
		ret = run_advice(o, &lt, lt_ok, &l, MADV_COLD, reps);
	if (ret == 0 && (!only || !strcmp(only, "pageout"))) {
		uint64_t need = l.small * l.small_len + l.big * l.big_len + 64 * MIB;

		if (geteuid() == 0)
			tempswap_reap();
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
	if (ret == 0 && o->plot)
		plot(o);
	if (ret == 0)
		ret = scale(o, o->quick ? 10000 : 100000, o->quick ? 1 : 5);
	return ret;
}
