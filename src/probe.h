/* SPDX-License-Identifier: MIT */
/* probe.c: the capability store, MADVX_DISABLE/ASSUME, the probe groups. */
#ifndef MADVX_PROBE_H
#define MADVX_PROBE_H

#include "util.h"

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
	bool per_vma_locks;	/* CONFIG_PER_VMA_LOCK, from uname (kver.c) */
	uint64_t assumed;	/* features MADVX_ASSUME turned on */
	/* Features the per-boot measurement cache answered (once it is read). */
	_Atomic uint64_t measured;
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
	MADVX_PG_MEASURED,	/* the per-boot cache: per_vma_cold_pageout, per_vma_uffd */
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

/*
 * per_vma_cold_pageout or per_vma_uffd, for planning: reads the per-boot
 * cache on the first need (probe.c). Lock-free and async-signal-safe: a
 * flush may ask.
 */
MADVX_HIDDEN bool __madvx_plan_feature(enum madvx_feature feat);

/* The advices process_madvise() takes for ourselves (bit per advice index). */
MADVX_HIDDEN uint64_t __madvx_pmadv_advices(void);

/*
 * Does MADV_POPULATE_(READ|WRITE) stop at the first hole of its range (6.10+)
 * or walk past it like the other advices (before)? Asked of the kernel on
 * the first call (a scratch mapping; see probe.c), async-signal-safe.
 */
MADVX_HIDDEN bool __madvx_populate_stops_at_holes(void);

/*
 * The pidfd that names this process for process_madvise(): PIDFD_SELF where
 * the kernel takes it, else pidfd_open(getpid()) cached per process (a
 * pidfd opened before a fork names the parent). Returns the fd or -errno.
 */
MADVX_HIDDEN int __madvx_self_pidfd(void);

static inline bool madvx_has(enum madvx_feature feat)
{
	return atomic_load_explicit(&__madvx_probe()->features, memory_order_relaxed) &
	       (1ULL << feat);
}

#endif /* MADVX_PROBE_H */
