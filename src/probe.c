// SPDX-License-Identifier: MIT
/*
 * Capability store: what the running kernel does with our calls.
 *
 * Probes run by need (STYLE.md habit 14: touch only what the caller uses).
 * The core, run once on the first call of any API, costs uname(): it
 * guesses the process_madvise() family, PROCMAP_QUERY and the advices
 * process_madvise() takes from the kernel version. The batch and release
 * paths act on those guesses, and a guess that turns out wrong is
 * corrected by the first real call
 * (__madvx_feature_demote(): ENOSYS, EBADF for PIDFD_SELF, ENOTTY for
 * PROCMAP_QUERY, EINVAL for an advice), whose hint is then re-applied the
 * other way: no answer ever depends on a guess. Everything else is a group
 * probed the first time an API needs it (madvx_feature_supported(X) probes
 * X's group on memory the probe maps for itself): so a process that only
 * releases memory never opens an io_uring or a userfaultfd, and a seccomp
 * filter that kills on those never fires. The per-boot cache is such a
 * group too, read lock-free because a flush may need it (MADVX_PG_MEASURED).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "advtab.h"
#include "bootcache.h"
#include "kver.h"
#include "probe.h"
#include "proc.h"
#include "sys.h"

static const char *const feature_names[MADVX_FEAT__COUNT] = {
	[MADVX_FEAT_PROCESS_MADVISE] = "process_madvise",
	[MADVX_FEAT_PIDFD_SELF] = "pidfd_self",
	[MADVX_FEAT_PIDFD_OPEN] = "pidfd_open",
	[MADVX_FEAT_PROCMAP_QUERY] = "procmap_query",
	[MADVX_FEAT_PER_VMA_MADVISE] = "per_vma_madvise",
	[MADVX_FEAT_VMA_LOCK_STATS] = "vma_lock_stats",
	[MADVX_FEAT_IO_URING_BUILT] = "io_uring_built",
	[MADVX_FEAT_IO_URING] = "io_uring",
	[MADVX_FEAT_IO_URING_MADVISE] = "io_uring_madvise",
	[MADVX_FEAT_IO_URING_MADVISE64] = "io_uring_madvise64",
	[MADVX_FEAT_UFFD] = "uffd",
	[MADVX_FEAT_UFFD_USER_MODE_ONLY] = "uffd_user_mode_only",
	[MADVX_FEAT_UFFD_DEV] = "uffd_dev",
	[MADVX_FEAT_UFFD_MOVE] = "uffd_move",
	[MADVX_FEAT_UFFD_POISON] = "uffd_poison",
	[MADVX_FEAT_UFFD_WP] = "uffd_wp",
	[MADVX_FEAT_UFFD_WP_ASYNC] = "uffd_wp_async",
	[MADVX_FEAT_UFFD_MINOR_SHMEM] = "uffd_minor_shmem",
	/* Retired (always 0): the kernel counters it read were never merged. */
	[MADVX_FEAT_MADVISE_VMA_STATS] = "retired_madvise_stats",
	[MADVX_FEAT_PER_VMA_COLD_PAGEOUT] = "per_vma_cold_pageout",
	[MADVX_FEAT_PER_VMA_UFFD] = "per_vma_uffd",
};

#define BIT(f) (1ULL << (f))

/* Disabling a feature disables what is built on it. */
static const uint64_t feature_dependents[MADVX_FEAT__COUNT] = {
	[MADVX_FEAT_IO_URING_BUILT] = BIT(MADVX_FEAT_IO_URING) |
		BIT(MADVX_FEAT_IO_URING_MADVISE) | BIT(MADVX_FEAT_IO_URING_MADVISE64),
	[MADVX_FEAT_IO_URING] = BIT(MADVX_FEAT_IO_URING_MADVISE) |
		BIT(MADVX_FEAT_IO_URING_MADVISE64),
	[MADVX_FEAT_IO_URING_MADVISE] = BIT(MADVX_FEAT_IO_URING_MADVISE64),
	[MADVX_FEAT_UFFD] = BIT(MADVX_FEAT_UFFD_USER_MODE_ONLY) |
		BIT(MADVX_FEAT_UFFD_DEV) | BIT(MADVX_FEAT_UFFD_MOVE) |
		BIT(MADVX_FEAT_UFFD_POISON) | BIT(MADVX_FEAT_UFFD_WP) |
		BIT(MADVX_FEAT_UFFD_WP_ASYNC) | BIT(MADVX_FEAT_UFFD_MINOR_SHMEM) |
		BIT(MADVX_FEAT_PER_VMA_UFFD),
	/* What the series puts on the per-VMA path extends 6.17's. */
	[MADVX_FEAT_PER_VMA_MADVISE] = BIT(MADVX_FEAT_PER_VMA_COLD_PAGEOUT) |
		BIT(MADVX_FEAT_PER_VMA_UFFD),
};

/* Features that only steer planning: measured (boot cache) or assumed. */
#define PLAN_FEATURES (BIT(MADVX_FEAT_PER_VMA_COLD_PAGEOUT) | BIT(MADVX_FEAT_PER_VMA_UFFD))
_Static_assert(MADVX_FEAT__COUNT <= 31, "__madvx_boot_cache_once() keeps 31 features");

static struct madvx_probe_state probe_state;
static struct madvx_once probe_once = MADVX_ONCE_INIT;

static void set_feature(struct madvx_probe_state *st, enum madvx_feature f,
			bool on)
{
	if (on)
		atomic_fetch_or_explicit(&st->features, BIT(f), memory_order_relaxed);
	else
		atomic_fetch_and_explicit(&st->features, ~BIT(f), memory_order_relaxed);
}

static bool wanted(const struct madvx_probe_state *st, enum madvx_feature f)
{
	return !(st->disabled & BIT(f));
}

/* name,name,... -> feature mask; unknown names are ignored (madvx-probe warns). */
MADVX_HOT static uint64_t parse_names(const char *env)
{
	uint64_t mask = 0;
	char buf[512];
	char *save = NULL;

	if (!env || !*env)
		return 0;
	snprintf(buf, sizeof(buf), "%s", env);
	for (char *tok = strtok_r(buf, ", ", &save); tok;
	     tok = strtok_r(NULL, ", ", &save)) {
		for (int f = 0; f < MADVX_FEAT__COUNT; f++)
			if (!strcmp(tok, feature_names[f]))
				mask |= BIT(f);
	}
	return mask;
}

/* MADVX_DISABLE=name,name,...: the named features and their dependents. */
static uint64_t parse_disable(const char *env)
{
	uint64_t mask = parse_names(env);

	/* Close over dependents (the table is at most two levels deep). */
	for (int pass = 0; pass < 2; pass++)
		for (int f = 0; f < MADVX_FEAT__COUNT; f++)
			if (mask & BIT(f))
				mask |= feature_dependents[f];
	return mask;
}

static void probe_uname(struct madvx_probe_state *st)
{
	struct madvx_kver k;

	if (__madvx_kver_read(&k))
		return;
	memcpy(st->release, k.release, sizeof(st->release));
	st->version = k.version;
	st->per_vma_locks = k.per_vma_locks;
}

static int read_int_file(const char *path)
{
	char buf[32];

	if (__madvx_read_small_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return atoi(buf);
}

static enum madvx_thp_mode probe_thp(void)
{
	char buf[128];

	if (__madvx_read_small_file("/sys/kernel/mm/transparent_hugepage/enabled",
			    buf, sizeof(buf)) <= 0)
		return MADVX_THP_UNKNOWN;
	if (strstr(buf, "[always]"))
		return MADVX_THP_ALWAYS;
	if (strstr(buf, "[madvise]"))
		return MADVX_THP_MADVISE;
	if (strstr(buf, "[never]"))
		return MADVX_THP_NEVER;
	return MADVX_THP_UNKNOWN;
}

/* Is there a line "@key <n>" in /proc/vmstat? (about 8 KiB: read it whole) */
static bool vmstat_has(const char *key)
{
	char buf[16384];
	size_t n = strlen(key);
	const char *p;

	if (__madvx_read_small_file("/proc/vmstat", buf, sizeof(buf)) <= 0)
		return false;
	for (p = buf; (p = strstr(p, key)); p += n)
		if ((p == buf || p[-1] == '\n') && p[n] == ' ')
			return true;
	return false;
}

static bool probe_procmap_query(void)
{
	struct procmap_query q = { .size = sizeof(q) };
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	int probe_var = 0;
	bool ok;

	if (fd < 0)
		return false;
	q.query_addr = (uintptr_t)&probe_var;
	ok = __madvx_sys_ioctl(fd, PROCMAP_QUERY, &q) == 0 &&
	     q.vma_start <= q.query_addr && q.query_addr < q.vma_end;
	close(fd);
	return ok;
}

/* A private scratch mapping the probe owns; never caller memory. */
static void *scratch_map(int advice)
{
	/* MADV_REMOVE only works on shared mappings. */
	int flags = advice == MADV_REMOVE ? MAP_SHARED : MAP_PRIVATE;
	void *p = mmap(NULL, madvx_page_size(), PROT_READ | PROT_WRITE,
		       flags | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* process_madvise(@pidfd) of @advice on a scratch page; -errno or bytes. */
static long pmadv_scratch(int pidfd, int advice)
{
	struct iovec iov = { .iov_len = madvx_page_size() };
	long ret;

	iov.iov_base = scratch_map(advice);
	if (!iov.iov_base)
		return -ENOMEM;
	ret = __madvx_sys_process_madvise(pidfd, &iov, 1, advice);
	munmap(iov.iov_base, iov.iov_len);
	return ret;
}

static long madv_scratch(int advice)
{
	void *p = scratch_map(advice);
	long ret;

	if (!p)
		return -ENOMEM;
	ret = __madvx_sys_madvise((uintptr_t)p, madvx_page_size(), advice);
	munmap(p, madvx_page_size());
	return ret;
}

/*
 * Does MADV_POPULATE_(READ|WRITE) stop at the first hole of its range?
 * Since 6.10 (fa9fcd8bb6e4, "mm/madvise: don't perform madvise VMA walk for
 * MADV_POPULATE_(READ|WRITE)") the kernel populates the whole range in one
 * walk of its own and fails with -ENOMEM at the first unmapped page, leaving
 * everything above it alone. Before (6.1, Debian 12's kernel), populate ran
 * VMA by VMA inside madvise's common walk, which steps over holes as for
 * every other advice: the VMAs above a hole are populated, and a later
 * VMA's error (-EINVAL for VM_PFNMAP/VM_IO, ...) wins over the hole's
 * -ENOMEM. Stable kernels may carry either, so the version cannot tell: the
 * kernel is asked, on the first POPULATE hint that meets a hole (never on
 * another advice's path: the first-flush system-call budget of a DONTNEED
 * batch stays as it is). Three scratch pages, the middle one unmapped,
 * POPULATE_WRITE across: is the third one resident?
 *
 * Lock-free, because the first caller may be a flush in a signal handler:
 * two racing first callers both probe and find the same answer. Costs mmap,
 * munmap, madvise, mincore and two munmaps, once per process.
 */
static _Atomic int populate_holes;	/* 0 not asked, 1 stops at holes, 2 walks past */

static int ask_populate_holes(uint32_t version)
{
	size_t ps = madvx_page_size();
	unsigned char vec = 0;
	int v = 0;
	long ret;
	char *p = mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return version >= MADVX_KVER(6, 10, 0) ? 1 : 2;
	munmap(p + ps, ps);
	ret = __madvx_sys_madvise((uintptr_t)p, 3 * ps, MADV_POPULATE_WRITE);
	if (ret == -ENOMEM && mincore(p + 2 * ps, ps, &vec) == 0)
		v = (vec & 1) ? 2 : 1;
	else if (ret == -EINVAL)
		v = 1;		/* no POPULATE at all: every such hint gets -EINVAL */
	munmap(p, ps);
	munmap(p + 2 * ps, ps);
	/*
	 * Anything else (0: another thread mapped the hole meanwhile; mincore
	 * refused) is no answer: go by the version this once, ask next time.
	 */
	return v ? v : -(version >= MADVX_KVER(6, 10, 0) ? 1 : 2);
}

bool __madvx_populate_stops_at_holes(void)
{
	int v = atomic_load_explicit(&populate_holes, memory_order_relaxed);
	int saved = errno;

	if (likely(v))
		return v == 1;
	v = ask_populate_holes(__madvx_probe()->version);
	errno = saved;
	if (v < 0)
		return v == -1;
	atomic_store_explicit(&populate_holes, v, memory_order_relaxed);
	return v == 1;
}

/*
 * per_vma_cold_pageout and per_vma_uffd: MADVX_ASSUME wins, else the boot
 * cache; without either they stay off, and on a kernel without per-VMA locks
 * they are off whatever either says. The core takes MADVX_ASSUME (no system
 * call); the cache is read on the first need (see plan_features_read()).
 */
static uint64_t probe_assumed(struct madvx_probe_state *st, uint64_t features)
{
	st->assumed = parse_names(secure_getenv("MADVX_ASSUME")) & PLAN_FEATURES;
	features |= st->assumed;
	/*
	 * Both are moot on a kernel without per-VMA locks (or with them
	 * disabled). per_vma_uffd needs no uffd probe: a VMA is only
	 * userfaultfd-armed where this process could open one.
	 */
	if (!(features & BIT(MADVX_FEAT_PER_VMA_MADVISE)))
		features &= ~PLAN_FEATURES;
	return features;
}

/*
 * The per-boot cache's answers, on the first need of them: only COLD and
 * PAGEOUT hints and userfaultfd-armed VMAs are planned by them, so a
 * process that releases memory with DONTNEED never opens the file (its
 * first flush: one system call less). A flush may be the first to need
 * them, so this is lock-free: the file is read once (bootcache.c), and
 * every caller applies that answer (idempotent), so none returns first.
 * Returns the features it turns on.
 */
static uint64_t plan_features_read(struct madvx_probe_state *st)
{
	uint64_t measured, on;

	on = __madvx_boot_cache_once(feature_names, MADVX_FEAT__COUNT,
				     PLAN_FEATURES & ~st->assumed, &measured);
	atomic_store_explicit(&st->measured, measured, memory_order_relaxed);
	on &= ~st->disabled;
	if (on && madvx_has(MADVX_FEAT_PER_VMA_MADVISE))
		atomic_fetch_or_explicit(&st->features, on, memory_order_relaxed);
	return on;
}

bool __madvx_plan_feature(enum madvx_feature feat)
{
	const struct madvx_probe_state *st = __madvx_probe();

	/* Assumed or read already; or moot or disabled: no need of the file. */
	if (madvx_has(feat))
		return true;
	if (!madvx_has(MADVX_FEAT_PER_VMA_MADVISE) || (st->disabled & BIT(feat)))
		return false;
	return plan_features_read(&probe_state) & BIT(feat);
}

/*
 * Which advices process_madvise() takes for ourselves. An advice is accepted
 * when process_madvise() gives what madvise() gives on an identical scratch
 * page. Where both say EINVAL (advice compiled out, e.g. MERGEABLE without
 * KSM) the call cannot tell; the kernel's rule decides: from 6.13 on, self
 * takes every advice, which DONTNEED's answer reveals; before, only the
 * remote-valid ones.
 */
static uint64_t probe_pmadv_advices(int pidfd, bool self_any)
{
	uint64_t mask = 0;

	for (size_t i = 0; i < __madvx_nadvices; i++) {
		long m = madv_scratch(__madvx_advices[i].advice);
		long p = pmadv_scratch(pidfd, __madvx_advices[i].advice);
		bool ok;

		if (m == -EINVAL && p == -EINVAL)
			ok = self_any || __madvx_advices[i].remote_valid;
		else
			ok = (m == 0 && p == (long)madvx_page_size()) ||
			     (m < 0 && p == m);
		if (ok)
			mask |= BIT(i);
	}
	return mask;
}

static uint64_t guess_pmadv_advices(bool pmadv, bool self_any);

static void probe_process_madvise(struct madvx_probe_state *st)
{
	long ret = -ENOSYS;
	int pidfd;

	/* pidfd_open() is needed whenever PIDFD_SELF is not. */
	if (wanted(st, MADVX_FEAT_PIDFD_OPEN)) {
		pidfd = __madvx_sys_pidfd_open(getpid());
		set_feature(st, MADVX_FEAT_PIDFD_OPEN, pidfd >= 0);
		if (pidfd >= 0)
			close(pidfd);
	}
	if (wanted(st, MADVX_FEAT_PIDFD_SELF)) {
		/* COLD is valid for process_madvise() on every kernel that has it. */
		ret = pmadv_scratch(PIDFD_SELF_THREAD, MADV_COLD);
		set_feature(st, MADVX_FEAT_PIDFD_SELF, ret >= 0);
	}
	if (!wanted(st, MADVX_FEAT_PROCESS_MADVISE))
		return;

	if (madvx_has(MADVX_FEAT_PIDFD_SELF))
		pidfd = PIDFD_SELF_THREAD;
	else if (madvx_has(MADVX_FEAT_PIDFD_OPEN))
		pidfd = __madvx_sys_pidfd_open(getpid());
	else
		pidfd = -ENOSYS;
	if (pidfd == PIDFD_SELF_THREAD || pidfd >= 0) {
		ret = pmadv_scratch(pidfd, MADV_COLD);
		set_feature(st, MADVX_FEAT_PROCESS_MADVISE, ret >= 0);
		if (ret >= 0) {
			st->pmadv_self_any = pmadv_scratch(pidfd, MADV_DONTNEED) >= 0;
			atomic_store_explicit(&st->pmadv_advices,
					      guess_pmadv_advices(true, st->pmadv_self_any),
					      memory_order_relaxed);
		}
	} else {
		set_feature(st, MADVX_FEAT_PROCESS_MADVISE, false);
	}
	if (ret < 0)
		atomic_store_explicit(&st->pmadv_advices, 0, memory_order_relaxed);
	if (pidfd >= 0)
		close(pidfd);
}

/* Every advice on a scratch page, both ways (madvx_advice_supported()). */
static void probe_advices(struct madvx_probe_state *st)
{
	int pidfd;

	__madvx_probe_group(MADVX_PG_PMADV, NULL);
	if (!madvx_has(MADVX_FEAT_PROCESS_MADVISE))
		return;
	pidfd = madvx_has(MADVX_FEAT_PIDFD_SELF) ? PIDFD_SELF_THREAD :
		__madvx_sys_pidfd_open(getpid());
	if (pidfd != PIDFD_SELF_THREAD && pidfd < 0)
		return;
	atomic_store_explicit(&st->pmadv_advices,
			      probe_pmadv_advices(pidfd, st->pmadv_self_any),
			      memory_order_relaxed);
	if (pidfd >= 0)
		close(pidfd);
}

/*
 * What process_madvise() takes for ourselves, from the kernel's rule: from
 * 6.13 on every advice, before only the remote-valid ones. The first
 * -EINVAL of a vector for an advice takes it out (issue.c), and
 * madvx_advice_supported() replaces the guess with the probe's answer.
 */
static uint64_t guess_pmadv_advices(bool pmadv, bool self_any)
{
	uint64_t mask = 0;

	if (!pmadv)
		return 0;
	for (size_t i = 0; i < __madvx_nadvices; i++)
		if (self_any || __madvx_advices[i].remote_valid)
			mask |= BIT(i);
	return mask;
}

/* The core's guesses from the version (see the head of this file). */
static uint64_t guess_features(struct madvx_probe_state *st)
{
	uint32_t v = st->version;
	uint64_t f = 0;

	if (v >= MADVX_KVER(5, 3, 0))
		f |= BIT(MADVX_FEAT_PIDFD_OPEN);
	if (v >= MADVX_KVER(5, 10, 0))
		f |= BIT(MADVX_FEAT_PROCESS_MADVISE);
	if (v >= MADVX_KVER(6, 15, 0))
		f |= BIT(MADVX_FEAT_PIDFD_SELF);
	if (v >= MADVX_KVER(6, 11, 0))
		f |= BIT(MADVX_FEAT_PROCMAP_QUERY);
	/* Decided, not guessed: nothing but uname tells (probe_uname()). */
	if (v >= MADVX_KVER(6, 17, 0) && st->per_vma_locks)
		f |= BIT(MADVX_FEAT_PER_VMA_MADVISE);
	st->pmadv_self_any = v >= MADVX_KVER(6, 13, 0);
	atomic_store_explicit(&st->pmadv_advices,
			      guess_pmadv_advices(f & BIT(MADVX_FEAT_PROCESS_MADVISE),
						  st->pmadv_self_any),
			      memory_order_relaxed);
	return f;
}

MADVX_HOT static void run_core(void)
{
	struct madvx_probe_state *st = &probe_state;
	uint64_t f;

	st->disabled = parse_disable(secure_getenv("MADVX_DISABLE"));
	probe_uname(st);
	f = guess_features(st);
	f = probe_assumed(st, f);
	/* A disabled feature is off whatever a probe finds. */
	f &= ~st->disabled;
	if (!(f & BIT(MADVX_FEAT_PROCESS_MADVISE)))
		atomic_store_explicit(&st->pmadv_advices, 0, memory_order_relaxed);
	atomic_store_explicit(&st->features, f, memory_order_release);
}

MADVX_HOT const struct madvx_probe_state *__madvx_probe(void)
{
	madvx_once(&probe_once, run_core);
	return &probe_state;
}

void __madvx_feature_demote(enum madvx_feature feat)
{
	uint64_t off = BIT(feat) | feature_dependents[feat];

	__madvx_probe();
	atomic_fetch_and_explicit(&probe_state.features, ~off, memory_order_relaxed);
}

/* ---- probe groups, each run once, by need ---- */

static void probe_procmap_group(struct madvx_probe_state *st)
{
	if (wanted(st, MADVX_FEAT_PROCMAP_QUERY))
		set_feature(st, MADVX_FEAT_PROCMAP_QUERY, probe_procmap_query());
}

static void probe_stats_group(struct madvx_probe_state *st)
{
	if (wanted(st, MADVX_FEAT_VMA_LOCK_STATS))
		set_feature(st, MADVX_FEAT_VMA_LOCK_STATS, vmstat_has("vma_lock_success"));
}

static void probe_info_group(struct madvx_probe_state *st)
{
	st->thp = probe_thp();
	st->io_uring_disabled = read_int_file("/proc/sys/kernel/io_uring_disabled");
	st->unprivileged_userfaultfd =
		read_int_file("/proc/sys/vm/unprivileged_userfaultfd");
}

/* A backend's answer (uffd.c, iouring.c) merged into the store. */
static void merge_found(struct madvx_probe_state *st, madvx_probe_fn fn)
{
	struct madvx_probe_found found = { .disabled = st->disabled };

	fn(&found);
	atomic_fetch_or_explicit(&st->features, found.features & ~st->disabled,
				 memory_order_relaxed);
	if (found.uffd_features || found.uffd_ioctls) {
		st->uffd_features = found.uffd_features;
		st->uffd_ioctls = found.uffd_ioctls;
	}
}

/*
 * Rare and off the hot paths: one process lock (a child takes it over from
 * a parent's thread, proc.c) serialises the groups; the done bits are
 * read without it.
 */
static struct madvx_plock group_lock;
static _Atomic uint32_t groups_done;

void __madvx_probe_group(enum madvx_probe_group g, madvx_probe_fn fn)
{
	struct madvx_probe_state *st = &probe_state;
	uint32_t bit = 1U << g;

	__madvx_probe();
	if (atomic_load_explicit(&groups_done, memory_order_acquire) & bit)
		return;
	__madvx_plock_lock(&group_lock);
	if (!(atomic_load_explicit(&groups_done, memory_order_relaxed) & bit)) {
		switch (g) {
		case MADVX_PG_PMADV:
			probe_process_madvise(st);
			break;
		case MADVX_PG_ADVICES:
			__madvx_plock_unlock(&group_lock);
			probe_advices(st);	/* takes the lock for PMADV itself */
			__madvx_plock_lock(&group_lock);
			break;
		case MADVX_PG_PROCMAP:
			probe_procmap_group(st);
			break;
		case MADVX_PG_STATS:
			probe_stats_group(st);
			break;
		case MADVX_PG_INFO:
			probe_info_group(st);
			break;
		case MADVX_PG_MEASURED:
			plan_features_read(st);
			break;
		default:
			if (fn)
				merge_found(st, fn);
			break;
		}
		/* One atomic step: a flush may demote or add a feature meanwhile. */
		atomic_fetch_and_explicit(&st->features, ~st->disabled, memory_order_relaxed);
		atomic_fetch_or_explicit(&groups_done, bit, memory_order_release);
	}
	__madvx_plock_unlock(&group_lock);
}

/* The group that answers @feat, or -1 where the core decides it. */
int __madvx_feature_group(enum madvx_feature feat)
{
	switch (feat) {
	case MADVX_FEAT_PROCESS_MADVISE:
	case MADVX_FEAT_PIDFD_SELF:
	case MADVX_FEAT_PIDFD_OPEN:
		return MADVX_PG_PMADV;
	case MADVX_FEAT_PROCMAP_QUERY:
		return MADVX_PG_PROCMAP;
	case MADVX_FEAT_VMA_LOCK_STATS:
		return MADVX_PG_STATS;
	case MADVX_FEAT_PER_VMA_COLD_PAGEOUT:
	case MADVX_FEAT_PER_VMA_UFFD:
		return MADVX_PG_MEASURED;
	case MADVX_FEAT_IO_URING_BUILT:
	case MADVX_FEAT_IO_URING:
	case MADVX_FEAT_IO_URING_MADVISE:
	case MADVX_FEAT_IO_URING_MADVISE64:
		return MADVX_PG_IOURING;
	case MADVX_FEAT_UFFD:
	case MADVX_FEAT_UFFD_USER_MODE_ONLY:
	case MADVX_FEAT_UFFD_DEV:
	case MADVX_FEAT_UFFD_MOVE:
	case MADVX_FEAT_UFFD_POISON:
	case MADVX_FEAT_UFFD_WP:
	case MADVX_FEAT_UFFD_WP_ASYNC:
	case MADVX_FEAT_UFFD_MINOR_SHMEM:
		return MADVX_PG_UFFD;
	default:
		return -1;
	}
}

/*
 * The pidfd that names this process for process_madvise(). PIDFD_SELF (6.15)
 * needs no fd and is immune to fork. Older kernels need pidfd_open(getpid());
 * that fd keeps naming the PARENT in a child, where advising through it
 * would hit the parent's memory, so it is stamped with the process
 * generation and reopened in every new process (proc.c), whatever kind of
 * fork made it.
 */
static int open_self_pidfd(void)
{
	return __madvx_sys_pidfd_open(getpid());
}

MADVX_HOT int __madvx_self_pidfd(void)
{
	if (madvx_has(MADVX_FEAT_PIDFD_SELF))
		return PIDFD_SELF_THREAD;	/* PIDFD_SELF */
	return __madvx_proc_fd(MADVX_PFD_PIDFD, open_self_pidfd);
}

MADVX_HOT uint64_t __madvx_pmadv_advices(void)
{
	return atomic_load_explicit(&__madvx_probe()->pmadv_advices, memory_order_relaxed);
}

MADVX_API int madvx_feature_disabled(enum madvx_feature feat)
{
	if ((unsigned int)feat >= MADVX_FEAT__COUNT)
		return -EINVAL;
	return !!(__madvx_probe()->disabled & BIT(feat));
}

MADVX_API const char *madvx_feature_name(enum madvx_feature feat)
{
	if ((unsigned int)feat >= MADVX_FEAT__COUNT)
		return NULL;
	return feature_names[feat];
}

MADVX_API const char *madvx_version(void)
{
	return MADVX_VERSION_STRING;
}
