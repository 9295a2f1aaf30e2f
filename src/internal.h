/* SPDX-License-Identifier: MIT */
/* Private declarations shared by the library's source files. */
#ifndef MADVX_INTERNAL_H
#define MADVX_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <poll.h>
#include <sys/uio.h>

#include "madvx.h"
#include "uapi-compat.h"

#define MADVX_HIDDEN __attribute__((visibility("hidden")))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MADVX_KVER(a, b, c) (((a) << 16) | ((b) << 8) | (c))

/* ---- sys.c: the one home of every raw syscall the library issues ---- */
/* Each returns the kernel's result, with -errno instead of -1/errno. */
MADVX_HIDDEN long __madvx_sys_madvise(uintptr_t addr, size_t len, int advice);
MADVX_HIDDEN long __madvx_sys_process_madvise(int pidfd, const struct iovec *iov,
					    size_t vlen, int advice);
MADVX_HIDDEN int __madvx_sys_pidfd_open(pid_t pid);
MADVX_HIDDEN int __madvx_sys_userfaultfd(int flags);
MADVX_HIDDEN int __madvx_sys_ioctl(int fd, unsigned long req, void *arg);
/* Used by uffd.c for its fd, event queue wakeups and poll integration. */
MADVX_HIDDEN int __madvx_sys_open(const char *path, int flags);
MADVX_HIDDEN long __madvx_sys_read(int fd, void *buf, size_t len);
MADVX_HIDDEN long __madvx_sys_write(int fd, const void *buf, size_t len);
MADVX_HIDDEN int __madvx_sys_poll(struct pollfd *fds, unsigned int n, int timeout_ms);
MADVX_HIDDEN int __madvx_sys_eventfd(unsigned int initval, int flags);
MADVX_HIDDEN int __madvx_sys_epoll_create1(int flags);
MADVX_HIDDEN int __madvx_sys_epoll_add(int epfd, int fd, uint32_t events);
/* The page size, read once when the library is loaded (a constructor in sys.c). */
MADVX_HIDDEN extern size_t __madvx_pagesize;

static inline size_t madvx_page_size(void)
{
	return __madvx_pagesize;
}

/* What one page-table page maps (a PMD: 2 MiB with 4 KiB pages, 512 MiB with 64 KiB). */
static inline uint64_t madvx_pmd_size(void)
{
	return (uint64_t)__madvx_pagesize / 8 * __madvx_pagesize;
}

/* A lowercase hex number at *@p (as in /proc/PID/maps); *@p moves past it. */
static inline uint64_t madvx_parse_hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

/* ---- probe.c ---- */
struct madvx_probe_state {
	uint32_t version;
	/* Supported and not disabled: guessed or probed, demoted at run time. */
	_Atomic uint64_t features;
	uint64_t disabled;
	/* Bit per madvx_advice_index() that process_madvise() takes (guess or probe). */
	_Atomic uint64_t pmadv_advices;
	bool pmadv_self_any;	/* process_madvise() takes any advice for ourselves */
	uint64_t uffd_features;
	uint64_t uffd_ioctls;
	int io_uring_disabled;
	int unprivileged_userfaultfd;
	enum madvx_thp_mode thp;
	char release[65];
	bool per_vma_locks;	/* CONFIG_PER_VMA_LOCK, from uname (see probe_uname()) */
	uint64_t assumed;	/* features MADVX_ASSUME turned on */
	uint64_t measured;	/* features the per-boot measurement cache answered */
};

/* The store; runs the core (no probe groups) on first call. Never NULL. */
MADVX_HIDDEN const struct madvx_probe_state *__madvx_probe(void);

/* Probe groups, each run once on the first use of an API that needs it. */
enum madvx_probe_group {
	MADVX_PG_PMADV,		/* pidfd_open, PIDFD_SELF, process_madvise */
	MADVX_PG_ADVICES,	/* every advice through process_madvise */
	MADVX_PG_PROCMAP,	/* PROCMAP_QUERY */
	MADVX_PG_STATS,		/* /proc/vmstat counters */
	MADVX_PG_INFO,		/* THP mode, sysctls (madvx_kernel_info_get()) */
	MADVX_PG_UFFD,		/* uffd.c */
	MADVX_PG_IOURING,	/* iouring.c */
};

/* What a backend's probe found; it skips what @disabled forces off. */
struct madvx_probe_found {
	uint64_t disabled;
	uint64_t features;
	uint64_t uffd_features;
	uint64_t uffd_ioctls;
};
typedef void (*madvx_probe_fn)(struct madvx_probe_found *found);

/*
 * Run group @g once per process (the backends pass their probe as @fn; the
 * store's own groups pass NULL). Not async-signal-safe; never on a
 * batch or release path.
 */
MADVX_HIDDEN void __madvx_probe_group(enum madvx_probe_group g, madvx_probe_fn fn);

/* The group that answers @feat, or -1 where the core decides it. */
MADVX_HIDDEN int __madvx_feature_group(enum madvx_feature feat);

/*
 * A real call showed that @feat (a guess) does not work here: off, with
 * what depends on it, for the rest of the process.
 */
MADVX_HIDDEN void __madvx_feature_demote(enum madvx_feature feat);

/* The advices process_madvise() takes for ourselves (bit per advice index). */
MADVX_HIDDEN uint64_t __madvx_pmadv_advices(void);

/*
 * Does MADV_POPULATE_(READ|WRITE) stop at the first hole of its range (6.10+)
 * or walk past it like the other advices (before)? Asked of the kernel on
 * the first call (a scratch mapping; see probe.c), async-signal-safe.
 */
MADVX_HIDDEN bool __madvx_populate_stops_at_holes(void);


static inline bool madvx_has(enum madvx_feature feat)
{
	return atomic_load_explicit(&__madvx_probe()->features, memory_order_relaxed) &
	       (1ULL << feat);
}

/* advice value -> 1 + index in the library's advice table (0: unknown). */
#define MADVX_ADVICE_MAX 103		/* MADV_GUARD_REMOVE */
MADVX_HIDDEN extern const int8_t __madvx_advice_index_of[MADVX_ADVICE_MAX + 1];

/* The advice at @index of the library's table (inverse of madvx_advice_index()). */
MADVX_HIDDEN int __madvx_advice_at(int index);

/* Index of @advice in the library's table, or -1 if unknown: O(1), on every add. */
static inline int madvx_advice_index(int advice)
{
	if ((unsigned int)advice > MADVX_ADVICE_MAX)
		return -1;
	return __madvx_advice_index_of[advice] - 1;
}

/* ---- proc.c: which process is running (fork detection without atfork) ---- */

/*
 * The generation of the running process: changes in every new process,
 * whatever made it (fork, _Fork, syscall(SYS_fork), clone without CLONE_VM).
 * One load on the fast path. Stamp per-process state with it.
 */
MADVX_HIDDEN uint64_t __madvx_proc_gen(void);

/* pthread_once() that a fork in the middle of the run cannot wedge. */
struct madvx_once {
	_Atomic uint64_t state;
};
#define MADVX_ONCE_INIT { 0 }
MADVX_HIDDEN void __madvx_once_slow(struct madvx_once *o, void (*fn)(void));

static inline void madvx_once(struct madvx_once *o, void (*fn)(void))
{
	if (likely(atomic_load_explicit(&o->state, memory_order_acquire) == UINT64_MAX))
		return;
	__madvx_once_slow(o, fn);
}

/* A lock for rare writers that a child takes over from a parent's thread. */
struct madvx_plock {
	_Atomic uint64_t owner;
};
MADVX_HIDDEN void __madvx_plock_lock(struct madvx_plock *l);
MADVX_HIDDEN void __madvx_plock_unlock(struct madvx_plock *l);

/* An fd naming this process, reopened (and the inherited one closed) in a child. */
struct __madvx_proc_fd {
	_Atomic uint64_t v;
};
enum madvx_proc_fd_id {
	MADVX_PFD_PIDFD,	/* pidfd_open(getpid()) for process_madvise() */
	MADVX_PFD_MAPS,		/* /proc/self/maps for PROCMAP_QUERY and the parser */
	MADVX_PFD__COUNT
};
MADVX_HIDDEN int __madvx_proc_fd(enum madvx_proc_fd_id id, int (*open_fd)(void));

/*
 * The pidfd that names this process for process_madvise(): PIDFD_SELF where
 * the kernel takes it, else pidfd_open(getpid()) cached per process (a
 * pidfd opened before a fork names the parent). Returns the fd or -errno.
 */
MADVX_HIDDEN int __madvx_self_pidfd(void);


/*
 * Up to @size - 1 bytes of a small /proc or /sys file into @buf, with
 * open/read, not stdio: the probe may run on an allocator's first call,
 * where malloc() must not be re-entered. The length, or -1; errno kept.
 */
MADVX_HIDDEN ssize_t __madvx_read_small_file(const char *path, char *buf, size_t size);

/* ---- sys.c, for remote targets (target.c, reclaim.c) ---- */
/* pidfd_send_signal(2) (5.1); sig 0 asks "does it still exist?". */
MADVX_HIDDEN int __madvx_sys_pidfd_send_signal(int pidfd, int sig);
MADVX_HIDDEN int __madvx_sys_openat(int dirfd, const char *path, int flags);
MADVX_HIDDEN long __madvx_sys_pread(int fd, void *buf, size_t len, uint64_t off);

#endif /* MADVX_INTERNAL_H */
