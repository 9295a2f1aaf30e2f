/* SPDX-License-Identifier: MIT */
/*
 * Remote targets: another process named by a pidfd, with its VMAs.
 *
 * Internal contract for the batch planner and madvx_reclaim():
 * __madvx_target_vma_find() gives the VMA containing @addr or the first above
 * it, like __madvx_vma_find() does for this process, from PROCMAP_QUERY on the
 * target's /proc/PID/maps fd (one ioctl, per-VMA locks on 6.17+) or from a
 * /proc/PID/maps snapshot. Staleness costs what it costs for self (vma.h):
 * the kernel still walks multi-VMA ranges; and every remote call goes
 * through the target's pidfd, so it can never reach another process.
 *
 * What a batch against a target needs from here:
 *  - issue with madvx_target_pidfd(t), never __madvx_self_pidfd();
 *  - at add time, __madvx_target_advice_ok(t, advice): 0 -> -EINVAL (the
 *    kernel refuses it remotely), cached per advice; its other -errno
 *    (EPERM, EACCES, ESRCH, ENOSYS) belong to the flush's results;
 *  - plan with __madvx_target_vma_find() instead of __madvx_vma_find() (no
 *    regions, no uffd flags: another process's registrations are unknown);
 *    for the kernel's own view after a refusal, madvx_target_invalidate()
 *    first (a no-op with PROCMAP_QUERY, a maps re-read without it);
 *  - no madvise() fallback and no "madvise() alone" oracle: madvise()
 *    cannot name another mm. The per-hint answer for a refused entry is a
 *    one-entry process_madvise() through the same pidfd (reclaim.c issue());
 *  - remote calls never take per-VMA locks (mm != current->mm), so every
 *    entry is a "fallback" entry; the cost to bound is how long one call
 *    holds the target's mmap_read_lock (reclaim.c call_bytes()/update_rate()).
 */
#ifndef MADVX_TARGET_H
#define MADVX_TARGET_H

#include "advtab.h"
#include "probe.h"
#include "proc.h"
#include "sys.h"

struct madvx_target_range {
	uint64_t start, end;
};

struct madvx_target {
	int pidfd;		/* ours (a dup when opened from a caller's pidfd) */
	int proc_fd;		/* /proc/PID directory, bound to the process */
	int maps_fd;		/* /proc/PID/maps: names the mm it was opened on */
	pid_t pid;
	bool procmap;		/* PROCMAP_QUERY answers on maps_fd */
	uint64_t startstack;	/* /proc/PID/stat, for MADVX_VMA_STACK */
	uint64_t start_brk;	/* ... for MADVX_VMA_HEAP */
	/* mlock()ed ranges (only when /proc/PID/status says VmLck > 0) */
	struct madvx_target_range *locked;
	size_t nlocked, locked_cap;
	/* /proc/PID/maps snapshot: without PROCMAP_QUERY */
	struct madvx_target_vma *snap;
	uint32_t *snap_line;	/* bytes of each one's maps line */
	size_t nsnap, snap_cap, snap_hint;
	bool snap_valid;
	double snap_line_bytes;	/* mean length of a maps line at the last read */
	struct madvx_target_stream *stream;	/* reclaim's forward read of maps */
	uint64_t advice_known;	/* bit per madvx_advice_index(): answer cached */
	uint64_t advice_ok;	/* ... and the kernel accepts it remotely */
	char name[4096];	/* PROCMAP_QUERY's name buffer */
	size_t query_line;	/* the maps line length of the last answer */
};

/*
 * The VMA containing @addr or the first above it (unfiltered, flags filled).
 * 0, -ENOENT (nothing at or above), -ESRCH (mm gone: exit or execve).
 */
MADVX_HIDDEN int __madvx_target_query(struct madvx_target *t, uint64_t addr,
				    struct madvx_target_vma *v);

/*
 * The same answer from the /proc/PID/maps snapshot, read on first use and
 * kept until madvx_target_invalidate(), whatever the kernel offers: for
 * walks over many VMAs. One read of maps costs ~0.13 us per VMA against
 * ~1.5 us per PROCMAP_QUERY ioctl (6.18, a 2-vCPU VM: a system call each),
 * but it is a snapshot, and it has no page size: a hugetlbfs file mapping
 * reads as MADVX_VMA_FILE, not HUGETLB (an anonymous MAP_HUGETLB one is
 * found by its name). 0, -ENOENT, -ESRCH, -errno.
 */
MADVX_HIDDEN int __madvx_target_scan(struct madvx_target *t, uint64_t addr,
				   struct madvx_target_vma *v);

/* Bytes of the maps line behind the last __madvx_target_query() answer (0: unknown). */
MADVX_HIDDEN size_t __madvx_target_query_line(const struct madvx_target *t);

/* Bytes of the maps line behind the last __madvx_target_scan() answer. */
MADVX_HIDDEN size_t __madvx_target_scan_line(const struct madvx_target *t);

/*
 * For the batch planner: bounds of the VMA containing @addr, or of the first
 * one above it (then *start > addr). 0, -ENOENT, -ESRCH, -errno.
 */
MADVX_HIDDEN int __madvx_target_vma_find(struct madvx_target *t, uint64_t addr,
				       uint64_t *start, uint64_t *end);

/*
 * Re-read what a walk needs fresh: mlock ranges, stack and heap addresses,
 * and (without PROCMAP_QUERY) the maps snapshot. 0 or -errno (-ESRCH).
 */
MADVX_HIDDEN int __madvx_target_refresh(struct madvx_target *t);

/*
 * The stream: the target's VMAs from a forward-only read of /proc/PID/maps,
 * for madvx_reclaim()'s look-up of every entry just before its call. One
 * PROCMAP_QUERY is a system call (~1.8-2.3 us on this project's 6.18
 * paravirtualised hosts, ~1 us of it the syscall itself); reading maps costs
 * ~0.13 us per VMA. A reclaim of 2080 VMAs looked every entry up again
 * for ~4.7 ms of CPU - a third of what Android's way spends on the whole
 * reclaim (BENCHMARKS.md, p8 sweep).
 *
 * Why a stream is as fresh as a query: the kernel (fs/proc/task_mmu.c,
 * m_start()) resumes a sequential read at the address where the last one
 * stopped and formats each line from the VMA tree as it is at that read()
 * (checked on 6.18: a VMA replaced between two reads shows its new flags).
 * So a line is as old as the read() that produced it. Each call begins an
 * epoch (__madvx_target_stream_epoch()); only lines whose read began in
 * the current epoch answer, sized so that one read brings the lines the
 * call needs. Anything older - a line read ahead for an earlier call, the
 * start of a line cut by a read's end, the end of the file - is asked of
 * PROCMAP_QUERY again, as are file VMAs (a maps line has no page size: a
 * hugetlbfs file would read as a plain file).
 * Only with PROCMAP_QUERY (the fall-back), and after a plan that read the
 * snapshot: its line lengths size the reads, also of the lines below the
 * start that the first read passes.
 */
MADVX_HIDDEN int __madvx_target_stream_start(struct madvx_target *t, uint64_t addr);

/* A new epoch: the next call looks up from @addr on, in about @bytes of maps lines. */
MADVX_HIDDEN void __madvx_target_stream_epoch(struct madvx_target *t, uint64_t addr,
					     size_t bytes);

/* As __madvx_target_query(), fresh within the epoch. 0, -ENOENT, -ESRCH, -errno. */
MADVX_HIDDEN int __madvx_target_stream_find(struct madvx_target *t, uint64_t addr,
					   struct madvx_target_vma *v);

/* Look-ups the stream answered, and those it asked PROCMAP_QUERY (tests). */
MADVX_HIDDEN void __madvx_target_stream_stats(const struct madvx_target *t, uint64_t *lines,
					     uint64_t *queries);

MADVX_HIDDEN void __madvx_target_stream_stop(struct madvx_target *t);

/* Drop the maps snapshot so the next lookup re-reads it (no-op with PROCMAP_QUERY). */
static inline void madvx_target_invalidate(struct madvx_target *t)
{
	t->snap_valid = false;
}

/* 0 if the pidfd's process still exists (a zombie counts), -ESRCH if not. */
MADVX_HIDDEN int __madvx_target_alive(struct madvx_target *t);

/*
 * For madvx_batch_add() on a target batch: does the kernel accept @advice
 * for this target? 1 yes, 0 no (the kernel said EINVAL: not remotely, on
 * this kernel), or another -errno that is not about the advice (-EPERM,
 * -EACCES, -ESRCH, -ENOSYS: let the flush report those). Yes/no answers are
 * cached per advice, so only the first add of an advice makes a syscall.
 */
MADVX_HIDDEN int __madvx_target_advice_ok(struct madvx_target *t, int advice);

/* Filter: any of @include (0 = any), none of @exclude. */
static inline bool madvx_target_vma_match(const struct madvx_target_vma *v,
					  uint64_t include, uint64_t exclude)
{
	return (!include || (v->flags & include)) && !(v->flags & exclude);
}

/* Rss, Pss, Swap of /proc/PID/smaps_rollup in bytes. 0 or -errno. */
MADVX_HIDDEN int __madvx_target_rollup(struct madvx_target *t, uint64_t *rss,
				     uint64_t *pss, uint64_t *swap);

#endif /* MADVX_TARGET_H */
