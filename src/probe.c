// SPDX-License-Identifier: MIT
/*
 * Capability probe: what the running kernel does with our calls, decided
 * once per process and cached. Every probe issues the real call on memory the
 * probe mapped for itself, so a "yes" means the feature worked here, not that
 * a version number says it should.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"
#include "probe-backends.h"

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
	[MADVX_FEAT_MADVISE_VMA_STATS] = "madvise_vma_stats",
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

/*
 * The advices the library knows, with the lock madvise() takes for each in
 * Linux 7.3 (mm/madvise.c get_lock_mode()). Kernels before 6.17 took
 * mmap_read_lock where 7.3 has the per-VMA lock; see advice_lock_for().
 */
struct advice_desc {
	int advice;
	const char *name;
	enum madvx_lock lock;
	bool remote_valid;	/* process_madvise before 6.13 accepted it */
};

static const struct advice_desc advices[] = {
	{ MADV_NORMAL, "MADV_NORMAL", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_RANDOM, "MADV_RANDOM", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_SEQUENTIAL, "MADV_SEQUENTIAL", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_WILLNEED, "MADV_WILLNEED", MADVX_LOCK_MMAP_READ, true },
	{ MADV_DONTNEED, "MADV_DONTNEED", MADVX_LOCK_PER_VMA, false },
	{ MADV_FREE, "MADV_FREE", MADVX_LOCK_PER_VMA, false },
	{ MADV_REMOVE, "MADV_REMOVE", MADVX_LOCK_MMAP_READ, false },
	{ MADV_DONTFORK, "MADV_DONTFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DOFORK, "MADV_DOFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_MERGEABLE, "MADV_MERGEABLE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_UNMERGEABLE, "MADV_UNMERGEABLE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_HUGEPAGE, "MADV_HUGEPAGE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DONTDUMP, "MADV_DONTDUMP", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DODUMP, "MADV_DODUMP", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_WIPEONFORK, "MADV_WIPEONFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_KEEPONFORK, "MADV_KEEPONFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_COLD, "MADV_COLD", MADVX_LOCK_MMAP_READ, true },
	{ MADV_PAGEOUT, "MADV_PAGEOUT", MADVX_LOCK_MMAP_READ, true },
	{ MADV_POPULATE_READ, "MADV_POPULATE_READ", MADVX_LOCK_MMAP_READ, false },
	{ MADV_POPULATE_WRITE, "MADV_POPULATE_WRITE", MADVX_LOCK_MMAP_READ, false },
	{ MADV_DONTNEED_LOCKED, "MADV_DONTNEED_LOCKED", MADVX_LOCK_PER_VMA, false },
	{ MADV_COLLAPSE, "MADV_COLLAPSE", MADVX_LOCK_MMAP_READ, true },
	{ MADV_GUARD_INSTALL, "MADV_GUARD_INSTALL", MADVX_LOCK_PER_VMA, false },
	{ MADV_GUARD_REMOVE, "MADV_GUARD_REMOVE", MADVX_LOCK_PER_VMA, false },
};
_Static_assert(ARRAY_SIZE(advices) <= 64, "advice mask is 64 bits");
_Static_assert(ARRAY_SIZE(advices) == 25, "advice_index_of[] covers advices[]");

static struct madvx_probe_state probe_state;
static struct madvx_once probe_once = MADVX_ONCE_INIT;

_Static_assert(MADVX_ADVICE_MAX == MADV_GUARD_REMOVE, "advice table bound");

int __madvx_advice_at(int index)
{
	return index >= 0 && index < (int)ARRAY_SIZE(advices) ? advices[index].advice : -1;
}

/* advice value -> 1 + index in advices[] (0: unknown). */
const int8_t __madvx_advice_index_of[MADVX_ADVICE_MAX + 1] = {
	[MADV_NORMAL] = 1, [MADV_RANDOM] = 2, [MADV_SEQUENTIAL] = 3,
	[MADV_WILLNEED] = 4, [MADV_DONTNEED] = 5, [MADV_FREE] = 6,
	[MADV_REMOVE] = 7, [MADV_DONTFORK] = 8, [MADV_DOFORK] = 9,
	[MADV_MERGEABLE] = 10, [MADV_UNMERGEABLE] = 11, [MADV_HUGEPAGE] = 12,
	[MADV_NOHUGEPAGE] = 13, [MADV_DONTDUMP] = 14, [MADV_DODUMP] = 15,
	[MADV_WIPEONFORK] = 16, [MADV_KEEPONFORK] = 17, [MADV_COLD] = 18,
	[MADV_PAGEOUT] = 19, [MADV_POPULATE_READ] = 20, [MADV_POPULATE_WRITE] = 21,
	[MADV_DONTNEED_LOCKED] = 22, [MADV_COLLAPSE] = 23,
	[MADV_GUARD_INSTALL] = 24, [MADV_GUARD_REMOVE] = 25,
};

static void set_feature(struct madvx_probe_state *st, enum madvx_feature f,
			bool on)
{
	if (on)
		st->features |= BIT(f);
}

static bool wanted(const struct madvx_probe_state *st, enum madvx_feature f)
{
	return !(st->disabled & BIT(f));
}

/* name,name,... -> feature mask; unknown names are ignored (madvx-probe warns). */
static uint64_t parse_names(const char *env)
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

/* Is @word a blank-separated word of @s? */
static bool has_word(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = strstr(s, word); p; p = strstr(p + 1, word))
		if ((p == s || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

/*
 * CONFIG_PER_VMA_LOCK is "def_bool y, depends on ARCH_SUPPORTS_PER_VMA_LOCK
 * && MMU && SMP" (mm/Kconfig, 6.4-7.3): a uniprocessor kernel, whose
 * uname -v lacks the word SMP (init/Makefile), and an architecture that
 * does not select ARCH_SUPPORTS_PER_VMA_LOCK (32-bit x86, mips, ...) have
 * no per-VMA locks, and every madvise() takes mmap_lock there.  ppc64 is
 * assumed to be pseries/powernv, the platforms that select it.  A 32-bit
 * personality (setarch i686) on an x86_64 kernel reads as "none": planning
 * only gets slower.
 */
static bool uname_has_per_vma_locks(const struct utsname *u)
{
	static const char *const archs[] = {
		"x86_64", "aarch64", "arm", "loongarch64", "riscv64", "riscv32",
		"s390x", "ppc64", "ppc64le",
	};

	if (!has_word(u->version, "SMP"))
		return false;
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (!strcmp(u->machine, archs[i]) ||
		    (!strcmp(archs[i], "arm") && !strncmp(u->machine, "arm", 3)))
			return true;
	return false;
}

static void probe_uname(struct madvx_probe_state *st)
{
	struct utsname u;
	unsigned int a = 0, b = 0, c = 0;

	if (uname(&u))
		return;
	snprintf(st->release, sizeof(st->release), "%s", u.release);
	sscanf(u.release, "%u.%u.%u", &a, &b, &c);
	st->version = MADVX_KVER(a, b, c > 255 ? 255 : c);
	st->per_vma_locks = uname_has_per_vma_locks(&u);
}

/*
 * Read up to @size - 1 bytes of a small /proc or /sys file into @buf with
 * open/read, not stdio: the probe may run on an allocator's first call, where
 * malloc() must not be re-entered. Returns the length or -1.
 */
static ssize_t read_small_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), e = errno;
	ssize_t n;

	if (fd < 0) {
		errno = e;
		return -1;
	}
	n = read(fd, buf, size - 1);
	close(fd);
	errno = e;
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

static int read_int_file(const char *path)
{
	char buf[32];

	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	return atoi(buf);
}

static enum madvx_thp_mode probe_thp(void)
{
	char buf[128];

	if (read_small_file("/sys/kernel/mm/transparent_hugepage/enabled",
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

	if (read_small_file("/proc/vmstat", buf, sizeof(buf)) <= 0)
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

/* The "btime" of /proc/stat (boot time, seconds since the epoch), or -1. */
static long long read_btime(void)
{
	char buf[4096 + 64];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC), e = errno;
	long long btime = -1;
	size_t keep = 0, total;
	const char *p;
	ssize_t n;

	if (fd < 0) {
		errno = e;
		return -1;
	}
	/* The line comes after per-CPU and interrupt lines: read in chunks. */
	while (btime < 0 && (n = read(fd, buf + keep, sizeof(buf) - 64 - 1)) > 0) {
		total = keep + n;
		buf[total] = 0;
		p = strstr(buf, "\nbtime ");
		if (p && strchr(p + 7, '\n')) {
			btime = strtoll(p + 7, NULL, 10);
			break;
		}
		keep = total < 64 ? total : 64;
		memmove(buf, buf + total - keep, keep);
	}
	close(fd);
	errno = e;
	return btime;
}

int __madvx_boot_key(char *buf, size_t size)
{
	long long btime;
	char id[64];

	if (read_small_file("/proc/sys/kernel/random/boot_id", id, sizeof(id)) > 0) {
		id[strcspn(id, "\n")] = 0;
		snprintf(buf, size, "boot_id %s", id);
		return 0;
	}
	btime = read_btime();
	if (btime < 0)
		return -ENOENT;
	snprintf(buf, size, "btime %lld", btime);
	return 0;
}

/*
 * The per-boot measurement cache (see madvx.h): "key value" lines written by
 * madvx-probe --measure. It counts only if it is this boot's (a line equal
 * to __madvx_boot_key()), owned by root or by us and writable by nobody else;
 * then each "<feature> 0|1" line of a planning feature answers that feature.
 * Sets *@measured to the features it answered and returns those that are on.
 */
static uint64_t read_boot_cache(uint64_t *measured)
{
	const char *path = secure_getenv("MADVX_PROBE_CACHE");
	char buf[1024], boot[96], key[64];
	uint64_t on = 0;
	struct stat sb;
	const char *line;
	int fd, e = errno, val;
	ssize_t n;
	bool this_boot = false;

	*measured = 0;
	if (!path || !*path)
		path = MADVX_PROBE_CACHE_PATH;
	if (__madvx_boot_key(boot, sizeof(boot)))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		errno = e;
		return 0;
	}
	n = -1;
	if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) &&
	    (sb.st_uid == 0 || sb.st_uid == geteuid()) && !(sb.st_mode & 022))
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	errno = e;
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* One line must be this boot's key. */
	for (line = buf; line && !this_boot;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		this_boot = !strncmp(line, boot, strlen(boot)) &&
			    (line[strlen(boot)] == '\n' || !line[strlen(boot)]);
	if (!this_boot)
		return 0;
	for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (sscanf(line, "%63s %d", key, &val) != 2)
			continue;
		for (int f = 0; f < MADVX_FEAT__COUNT; f++) {
			if (!(PLAN_FEATURES & BIT(f)) || strcmp(key, feature_names[f]))
				continue;
			*measured |= BIT(f);
			if (val == 1)
				on |= BIT(f);
		}
	}
	return on;
}

/*
 * per_vma_cold_pageout and per_vma_uffd: MADVX_ASSUME wins, else the boot
 * cache; without either they stay off, and on a kernel without per-VMA locks
 * they are off whatever either says.
 */
static void probe_plan_features(struct madvx_probe_state *st)
{
	uint64_t measured, cached = read_boot_cache(&measured);

	st->assumed = parse_names(secure_getenv("MADVX_ASSUME")) & PLAN_FEATURES;
	st->measured = measured & ~st->assumed;
	st->features |= st->assumed | (cached & st->measured);
	/* A uffd answer is moot where this process cannot use userfaultfd. */
	if (!(st->features & BIT(MADVX_FEAT_UFFD)))
		st->features &= ~BIT(MADVX_FEAT_PER_VMA_UFFD);
	/* Both are moot on a kernel without per-VMA locks (or with them disabled). */
	if (!(st->features & BIT(MADVX_FEAT_PER_VMA_MADVISE)))
		st->features &= ~PLAN_FEATURES;
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

	for (size_t i = 0; i < ARRAY_SIZE(advices); i++) {
		long m = madv_scratch(advices[i].advice);
		long p = pmadv_scratch(pidfd, advices[i].advice);
		bool ok;

		if (m == -EINVAL && p == -EINVAL)
			ok = self_any || advices[i].remote_valid;
		else
			ok = (m == 0 && p == (long)madvx_page_size()) ||
			     (m < 0 && p == m);
		if (ok)
			mask |= BIT(i);
	}
	return mask;
}

static void probe_process_madvise(struct madvx_probe_state *st)
{
	long ret;
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

	if (st->features & BIT(MADVX_FEAT_PIDFD_SELF))
		pidfd = PIDFD_SELF_THREAD;
	else if (st->features & BIT(MADVX_FEAT_PIDFD_OPEN))
		pidfd = __madvx_sys_pidfd_open(getpid());
	else
		return;
	if (pidfd == PIDFD_SELF_THREAD || pidfd >= 0) {
		ret = pmadv_scratch(pidfd, MADV_COLD);
		if (ret >= 0) {
			bool self_any = pmadv_scratch(pidfd, MADV_DONTNEED) >= 0;

			set_feature(st, MADVX_FEAT_PROCESS_MADVISE, true);
			st->pmadv_advices = probe_pmadv_advices(pidfd, self_any);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
}

static void run_probe(void)
{
	struct madvx_probe_state *st = &probe_state;

	st->disabled = parse_disable(secure_getenv("MADVX_DISABLE"));
	probe_uname(st);
	st->thp = probe_thp();
	st->io_uring_disabled = read_int_file("/proc/sys/kernel/io_uring_disabled");
	st->unprivileged_userfaultfd =
		read_int_file("/proc/sys/vm/unprivileged_userfaultfd");

	probe_process_madvise(st);
	if (wanted(st, MADVX_FEAT_PROCMAP_QUERY))
		set_feature(st, MADVX_FEAT_PROCMAP_QUERY, probe_procmap_query());
	if (wanted(st, MADVX_FEAT_PER_VMA_MADVISE))
		set_feature(st, MADVX_FEAT_PER_VMA_MADVISE,
			    st->version >= MADVX_KVER(6, 17, 0) && st->per_vma_locks);
	if (wanted(st, MADVX_FEAT_VMA_LOCK_STATS))
		set_feature(st, MADVX_FEAT_VMA_LOCK_STATS,
			    vmstat_has("vma_lock_success"));
	if (wanted(st, MADVX_FEAT_MADVISE_VMA_STATS))
		set_feature(st, MADVX_FEAT_MADVISE_VMA_STATS,
			    vmstat_has("madvise_vma_lock_success"));
	__madvx_iouring_probe(st);
	__madvx_uffd_probe(st);
	probe_plan_features(st);

	/* A disabled feature is off whatever its probe found. */
	st->features &= ~st->disabled;
}

const struct madvx_probe_state *__madvx_probe(void)
{
	madvx_once(&probe_once, run_probe);
	return &probe_state;
}

MADVX_API int madvx_feature_supported(enum madvx_feature feat)
{
	if ((unsigned int)feat >= MADVX_FEAT__COUNT)
		return -EINVAL;
	return madvx_has(feat);
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

MADVX_API int madvx_advice_supported(int advice)
{
	int i = madvx_advice_index(advice);

	if (i < 0)
		return -EINVAL;
	return !!(__madvx_probe()->pmadv_advices & BIT(i));
}

MADVX_API const char *madvx_advice_name(int advice)
{
	int i = madvx_advice_index(advice);

	return i < 0 ? NULL : advices[i].name;
}

MADVX_API int madvx_advice_list(int *out, int max)
{
	for (int i = 0; i < max && i < (int)ARRAY_SIZE(advices); i++)
		out[i] = advices[i].advice;
	return (int)ARRAY_SIZE(advices);
}

/*
 * The 7.3 table, adjusted for older kernels: before 6.17 (or with
 * per_vma_madvise disabled) the per-VMA advices took mmap_read_lock; and for
 * kernels with the kernel/patches series, where MADV_COLD and MADV_PAGEOUT
 * take the per-VMA lock too.
 */
static enum madvx_lock advice_lock_for(const struct advice_desc *d)
{
	if (d->lock == MADVX_LOCK_PER_VMA && !madvx_has(MADVX_FEAT_PER_VMA_MADVISE))
		return MADVX_LOCK_MMAP_READ;
	/*
	 * The guard advices joined the per-VMA path after 6.18 (measured there
	 * with madvx-probe --verify: mmap_read_lock even inside one VMA) and
	 * are on it in 7.3's get_lock_mode(); the release in between is not
	 * pinned down, so claim the fast path only from 7.3.
	 */
	if ((d->advice == MADV_GUARD_INSTALL || d->advice == MADV_GUARD_REMOVE) &&
	    __madvx_probe()->version < MADVX_KVER(7, 3, 0))
		return MADVX_LOCK_MMAP_READ;
	if ((d->advice == MADV_COLD || d->advice == MADV_PAGEOUT) &&
	    madvx_has(MADVX_FEAT_PER_VMA_COLD_PAGEOUT))
		return MADVX_LOCK_PER_VMA;
	return d->lock;
}

MADVX_API enum madvx_lock madvx_advice_lock(int advice)
{
	int i = madvx_advice_index(advice);

	if (i < 0)
		return MADVX_LOCK_UNKNOWN;
	return advice_lock_for(&advices[i]);
}

MADVX_API const char *madvx_lock_name(enum madvx_lock lock)
{
	switch (lock) {
	case MADVX_LOCK_PER_VMA:
		return "per-vma";
	case MADVX_LOCK_MMAP_READ:
		return "mmap-read";
	case MADVX_LOCK_MMAP_WRITE:
		return "mmap-write";
	default:
		return "unknown";
	}
}

MADVX_API int madvx_kernel_info_get(struct madvx_kernel_info *info)
{
	const struct madvx_probe_state *st;
	struct madvx_kernel_info full = { .size = sizeof(full) };
	size_t n;

	if (!info || info->size < offsetof(struct madvx_kernel_info, release))
		return -EINVAL;
	st = __madvx_probe();
	memcpy(full.release, st->release, sizeof(full.release));
	full.version = st->version;
	full.features = st->features;
	full.disabled = st->disabled;
	full.uffd_features = st->uffd_features;
	full.uffd_ioctls = st->uffd_ioctls;
	full.io_uring_disabled = st->io_uring_disabled;
	full.unprivileged_userfaultfd = st->unprivileged_userfaultfd;
	full.thp = st->thp;
	full.assumed = st->assumed & ~st->disabled;
	full.measured = st->measured & ~st->disabled;

	n = info->size < sizeof(full) ? info->size : sizeof(full);
	memcpy((char *)info + sizeof(info->size), (char *)&full + sizeof(full.size),
	       n - sizeof(info->size));
	return 0;
}

MADVX_API const char *madvx_version(void)
{
	return MADVX_VERSION_STRING;
}
