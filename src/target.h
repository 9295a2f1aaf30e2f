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
#include "maps.h"
#include "probe.h"
#include "proc.h"
#include "sys.h"


/*
 * The VMA containing @addr or the first above it (unfiltered, flags filled).
 * 0, -ENOENT (nothing at or above), -ESRCH (mm gone: exit or execve).
 */
MADVX_HIDDEN int __madvx_target_query(struct madvx_target *t, uint64_t addr,
				    struct madvx_target_vma *v);

MADVX_HIDDEN size_t __madvx_target_query_line(const struct madvx_target *t);

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
 * As __madvx_target_query(), fresh within the stream's epoch (maps.h):
 * the stream's line, or PROCMAP_QUERY where the stream cannot answer.
 * 0, -ENOENT, -ESRCH, -errno.
 */
MADVX_HIDDEN int __madvx_target_stream_find(struct madvx_target *t, uint64_t addr,
					   struct madvx_target_vma *v);

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
