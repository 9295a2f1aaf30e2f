/* SPDX-License-Identifier: MIT */
/*
 * libmadvx - give memory back to Linux without stalling the process.
 *
 * Conventions for every function in this header:
 *  - Every symbol starts with madvx_ (types and macros with madvx_ / MADVX_).
 *  - Functions that can fail return a negative errno value; they never return
 *    -1 with errno set, and they never modify errno.
 *  - Lengths are size_t or uint64_t, never off_t or 32-bit types.
 *  - Options structs carry their own size in their first field, so they can
 *    grow without breaking callers built against an older header; fields the
 *    library does not know must be zero (else -E2BIG, as libbpf does).
 *  - Opaque handles are released by a *_free() that accepts NULL.
 *  - Each object states its thread-safety in the comment above it.
 *  - Probe answers are decided once per process, cached and thread-safe.
 */
#ifndef MADVX_H
#define MADVX_H

#include <stddef.h>
#include <stdint.h>

#include <madvx-version.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MADVX_API
#define MADVX_API __attribute__((visibility("default")))
#endif

/* "MAJOR.MINOR.PATCH" of the library actually loaded (may differ from the header's). */
MADVX_API const char *madvx_version(void);

/* ------------------------------------------------------------------------ */
/* Capability probe                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Features of the running kernel (and of this build) that change what the
 * library does. The probe runs once per process, on first use, and is cached;
 * all probe functions are thread-safe and async-signal-unsafe.
 *
 * The environment variable MADVX_DISABLE (comma-separated names as returned
 * by madvx_feature_name(), e.g. "process_madvise,pidfd_self") forces features
 * off, so that every old-kernel fallback can be exercised on a new kernel.
 * Disabling a feature also disables the features that depend on it
 * ("io_uring" turns off "io_uring_madvise" too, "uffd" every uffd_* feature).
 */
enum madvx_feature {
	/* process_madvise(2) works on the calling process (5.10; any advice: 6.13). */
	MADVX_FEAT_PROCESS_MADVISE = 0,
	/* PIDFD_SELF sentinels accepted as a pidfd (6.15). */
	MADVX_FEAT_PIDFD_SELF,
	/* pidfd_open(2) (5.3): the fallback when PIDFD_SELF is missing. */
	MADVX_FEAT_PIDFD_OPEN,
	/* ioctl(PROCMAP_QUERY) on /proc/self/maps (6.11). */
	MADVX_FEAT_PROCMAP_QUERY,
	/* MADV_DONTNEED/FREE take the per-VMA lock for single-VMA ranges (6.17). */
	MADVX_FEAT_PER_VMA_MADVISE,
	/* vma_lock_* counters in /proc/vmstat (CONFIG_PER_VMA_LOCK_STATS). */
	MADVX_FEAT_VMA_LOCK_STATS,
	/* libmadvx was built with liburing (build option, not a kernel feature). */
	MADVX_FEAT_IO_URING_BUILT,
	/* io_uring_setup(2) works here (not disabled by sysctl, seccomp, container). */
	MADVX_FEAT_IO_URING,
	/* IORING_OP_MADVISE (5.6). */
	MADVX_FEAT_IO_URING_MADVISE,
	/* IORING_OP_MADVISE takes a 64-bit length in sqe->off (6.12). */
	MADVX_FEAT_IO_URING_MADVISE64,
	/* userfaultfd(2) usable by this process (with UFFD_USER_MODE_ONLY if needed). */
	MADVX_FEAT_UFFD,
	/* userfaultfd(2) only with UFFD_USER_MODE_ONLY (vm.unprivileged_userfaultfd=0). */
	MADVX_FEAT_UFFD_USER_MODE_ONLY,
	/* /dev/userfaultfd with USERFAULTFD_IOC_NEW usable (6.1). */
	MADVX_FEAT_UFFD_DEV,
	/* UFFDIO_MOVE / UFFD_FEATURE_MOVE (6.8). */
	MADVX_FEAT_UFFD_MOVE,
	/* UFFDIO_POISON / UFFD_FEATURE_POISON (6.6). */
	MADVX_FEAT_UFFD_POISON,
	/* UFFDIO_WRITEPROTECT on anonymous memory (5.7). */
	MADVX_FEAT_UFFD_WP,
	/* UFFD_FEATURE_WP_ASYNC (6.7). */
	MADVX_FEAT_UFFD_WP_ASYNC,
	/* UFFDIO_CONTINUE for shmem (UFFD_FEATURE_MINOR_SHMEM, 5.14). */
	MADVX_FEAT_UFFD_MINOR_SHMEM,
	MADVX_FEAT__COUNT
};

/*
 * madvx_feature_supported - is @feat usable in this process?
 * Returns 1 (yes), 0 (no, or forced off through MADVX_DISABLE) or -EINVAL
 * for an unknown feature. Never fails otherwise: a probe that cannot decide
 * answers 0.
 */
MADVX_API int madvx_feature_supported(enum madvx_feature feat);

/*
 * madvx_feature_disabled - was @feat forced off through MADVX_DISABLE?
 * Returns 1, 0, or -EINVAL for an unknown feature.
 */
MADVX_API int madvx_feature_disabled(enum madvx_feature feat);

/* Stable short name of @feat ("process_madvise", ...), NULL if unknown. */
MADVX_API const char *madvx_feature_name(enum madvx_feature feat);

/*
 * madvx_advice_supported - does process_madvise(2) accept @advice for the
 * calling process here? Decided by issuing it on a private scratch mapping
 * (never on caller memory) and comparing with madvise(2) on an identical one.
 * Returns 1, 0 (including when process_madvise is missing or disabled), or
 * -EINVAL when @advice is not one the library knows (madvx_advice_name()).
 */
MADVX_API int madvx_advice_supported(int advice);

/* Name of a madvise advice ("MADV_DONTNEED"), NULL if the library does not know it. */
MADVX_API const char *madvx_advice_name(int advice);

/*
 * Fill @advices with up to @max advice values the library knows, in a fixed
 * order; returns how many exist (may exceed @max). Useful to iterate.
 */
MADVX_API int madvx_advice_list(int *advices, int max);

/* The lock a madvise(2) of one advice takes on the running kernel. */
enum madvx_lock {
	MADVX_LOCK_UNKNOWN = 0,
	/* Per-VMA read lock when the range lies in one VMA of the caller's own
	 * mm that is not userfaultfd-armed; mmap_read_lock otherwise. */
	MADVX_LOCK_PER_VMA,
	MADVX_LOCK_MMAP_READ,
	MADVX_LOCK_MMAP_WRITE,
};

/*
 * madvx_advice_lock - which lock the running kernel takes for @advice.
 * Derived from the kernel version, not measured (madvx-probe --verify
 * measures it with the mmap_lock tracepoints).
 * Returns MADVX_LOCK_UNKNOWN for an advice the library does not know.
 */
MADVX_API enum madvx_lock madvx_advice_lock(int advice);

/* "per-vma", "mmap-read", "mmap-write" or "unknown". */
MADVX_API const char *madvx_lock_name(enum madvx_lock lock);

enum madvx_thp_mode {
	MADVX_THP_UNKNOWN = 0,	/* no THP support, or sysfs unreadable */
	MADVX_THP_ALWAYS,
	MADVX_THP_MADVISE,
	MADVX_THP_NEVER,
};

/*
 * Everything the probe found. Set .size = sizeof(struct madvx_kernel_info)
 * before calling madvx_kernel_info(); fields beyond the caller's size are not
 * written, so old callers keep working when fields are added at the end.
 */
struct madvx_kernel_info {
	size_t size;
	char release[65];		/* uname -r */
	uint32_t version;		/* (major << 16) | (minor << 8) | min(patch, 255) */
	uint64_t features;		/* bit (1 << MADVX_FEAT_x): supported and not disabled */
	uint64_t disabled;		/* bit (1 << MADVX_FEAT_x): forced off by MADVX_DISABLE */
	uint64_t uffd_features;		/* UFFD_FEATURE_* the UFFDIO_API handshake offered */
	uint64_t uffd_ioctls;		/* bit (1 << _UFFDIO_x) of the API ioctls */
	int io_uring_disabled;		/* kernel.io_uring_disabled sysctl, -1 if absent */
	int unprivileged_userfaultfd;	/* vm.unprivileged_userfaultfd, -1 if absent */
	enum madvx_thp_mode thp;	/* /sys/kernel/mm/transparent_hugepage/enabled */
};

/*
 * madvx_kernel_info - copy the probe's findings into @info.
 * Returns 0, -EINVAL if @info is NULL or info->size is smaller than the
 * first field set (offsetof .release).
 */
MADVX_API int madvx_kernel_info(struct madvx_kernel_info *info);

/* ------------------------------------------------------------------------ */
/* Batching engine (src/batch.c)                                             */
/* ------------------------------------------------------------------------ */

/*
 * A batch collects (addr, len, advice) hints and flushes them as the fewest
 * process_madvise(2) calls whose every entry lies inside one VMA, so the
 * kernel can keep each on its per-VMA fast path:
 *
 *  - hints are sorted, duplicates dropped, overlapping or adjacent hints of
 *    one advice merged while they stay in one VMA, and hints that cross VMA
 *    boundaries split into one entry per VMA (bounds from PROCMAP_QUERY, from
 *    regions registered with madvx_region_register(), or /proc/self/maps);
 *  - entries the kernel would take off the fast path (advices that need
 *    mmap_lock, VMAs armed by userfaultfd) go in calls of their own, after
 *    the fast-path calls, so one fallback never drags the rest onto mmap_lock;
 *  - at most 1024 entries per call (UIO_MAXIOV).
 *
 * Order: hints may be reordered freely unless two hints with DIFFERENT
 * advices overlap; then the later one is applied after the earlier one (the
 * batch is cut into ordered "epochs"), e.g. DONTNEED then WILLNEED of one
 * range populates it again, FREE then DONTNEED zaps it.
 *
 * Semantics per hint are madvise(2)'s with one deliberate difference: a hint
 * that spans several VMAs is applied to every VMA that accepts it, where
 * madvise() stops at the first VMA that fails with an error other than
 * ENOMEM. Unmapped parts give ENOMEM after the mapped parts are advised,
 * as with madvise().
 *
 * Memory: the add and flush paths never call malloc() (allocators call them
 * from inside malloc/free); storage is mmap()ed at creation or supplied by
 * the caller.
 *
 * Thread-safety: a batch belongs to one thread at a time; use one per thread
 * (or lock around it). Different batches may be used concurrently.
 * Fork: a child may keep using a batch it inherited; the library never
 * advises the child's memory through the parent's pidfd.
 */
struct madvx_batch;

/* When the batch is full, madvx_batch_add() flushes it instead of -ENOSPC. */
#define MADVX_BATCH_AUTOFLUSH (1U << 0)
/* Skip process_madvise(): one madvise() per planned entry (still planned). */
#define MADVX_BATCH_NO_VECTOR (1U << 1)

/* Result of one hint, valid after the flush that applied it. */
struct madvx_hint {
	uint64_t addr;		/* as added */
	uint64_t len;		/* as added (rounded up to pages when applied) */
	int advice;
	int err;		/* 0, or the positive errno of what was not applied */
	uint64_t done;		/* bytes of the hint the kernel applied */
};

/*
 * Called from a flush (explicit or automatic) for every hint that failed,
 * with the hint's final result. May not call back into the same batch.
 */
typedef void (*madvx_error_fn)(void *ctx, const struct madvx_hint *hint);

struct madvx_batch_opts {
	size_t size;		/* sizeof(struct madvx_batch_opts) */
	uint32_t capacity;	/* hints held before full; 0 = 4096 */
	uint32_t flags;		/* MADVX_BATCH_* */
	void *storage;		/* caller memory for the batch, or NULL: mmap */
	size_t storage_size;	/* bytes at storage: madvx_batch_storage_size() */
	madvx_error_fn on_error;	/* optional */
	void *on_error_ctx;
};

/* Bytes of caller storage a batch of @capacity hints needs (0 = default). */
MADVX_API size_t madvx_batch_storage_size(uint32_t capacity);

/*
 * madvx_batch_create - make a batch. @opts may be NULL for defaults.
 * Returns 0 and sets *out, or -EINVAL (bad opts, NULL out, capacity over
 * 2^24), -E2BIG (unknown nonzero opts fields), -ENOSPC (storage_size too
 * small), -ENOMEM (mmap failed).
 */
MADVX_API int madvx_batch_create(const struct madvx_batch_opts *opts,
				 struct madvx_batch **out);

/* Free a batch; pending hints are dropped (flush first). NULL is a no-op. */
MADVX_API void madvx_batch_free(struct madvx_batch *batch);

/*
 * madvx_batch_add - queue a hint.
 * Returns the hint's index in the current flush (>= 0; see
 * madvx_batch_results()), or: -EINVAL for a NULL batch, an unknown advice,
 * an unaligned @addr or a range that wraps (what madvise() would say);
 * -ENOSPC when full without MADVX_BATCH_AUTOFLUSH. A zero-length hint is
 * accepted and succeeds with nothing done, as in madvise(). With AUTOFLUSH a
 * full batch is flushed first; failures of that flush reach on_error and the
 * next madvx_batch_flush() return value.
 */
MADVX_API int madvx_batch_add(struct madvx_batch *batch, void *addr, size_t len,
			      int advice);

/*
 * madvx_batch_flush - apply every queued hint.
 * Returns 0 when every hint since the previous madvx_batch_flush() (including
 * hints applied by automatic flushes) was applied in full; otherwise the
 * -errno of the first failure (e.g. -ENOMEM unmapped, -EINVAL, -EPERM sealed,
 * -EAGAIN after bounded retries). Per-hint results: madvx_batch_results().
 */
MADVX_API int madvx_batch_flush(struct madvx_batch *batch);

/*
 * madvx_batch_results - the hints of the last flush with their results, in
 * the order they were added; *count receives how many. Valid until the next
 * add or flush. Returns NULL (and *count = 0) for a NULL batch.
 */
MADVX_API const struct madvx_hint *madvx_batch_results(const struct madvx_batch *batch,
							uint32_t *count);

/* Number of hints queued and not yet flushed. */
MADVX_API uint32_t madvx_batch_pending(const struct madvx_batch *batch);

/*
 * Counters. Per batch since creation, or per process (all batches and
 * madvx_release()). errors[e] counts failed hints by errno e (< 64; others
 * in errors[0]).
 */
struct madvx_stats {
	size_t size;			/* sizeof(struct madvx_stats) */
	uint64_t hints;			/* hints added */
	uint64_t merged;		/* hints merged into another's entry */
	uint64_t split;			/* extra entries from VMA-crossing hints */
	uint64_t flushes;
	uint64_t syscalls;		/* process_madvise + madvise calls */
	uint64_t vector_entries;	/* iovec entries passed to process_madvise */
	uint64_t bytes;			/* bytes the kernel applied */
	uint64_t fallback_entries;	/* entries predicted to take mmap_lock */
	uint64_t madvise_fallbacks;	/* entries issued with madvise() instead */
	uint64_t vma_queries;		/* VMA lookups (PROCMAP_QUERY or maps parse) */
	uint64_t retries;		/* EINTR/EAGAIN retries */
	uint64_t failed;		/* hints with err != 0 */
	uint64_t errors[64];
};

/* Counters of @batch into @st (st->size set by the caller). 0 or -EINVAL. */
MADVX_API int madvx_batch_stats(const struct madvx_batch *batch,
				struct madvx_stats *st);

/* Process-wide counters into @st (st->size set by the caller). 0 or -EINVAL. */
MADVX_API int madvx_stats_get(struct madvx_stats *st);

/*
 * Regions: the caller vouches that [addr, addr + len) is ONE mapping that it
 * will not split (one mmap(), no partial mprotect/munmap/mremap), e.g. an
 * allocator arena. The planner then skips VMA lookups there. A wrong claim
 * costs speed (the kernel walks the real VMAs under mmap_lock), never
 * correctness. MADVX_REGION_UFFD marks a region registered with
 * userfaultfd: its entries are issued apart from the fast-path ones.
 * Thread-safe; at most 64 regions per process.
 * Returns 0, -EINVAL (unaligned, empty, wraps), -EEXIST (overlaps one),
 * -ENOSPC (table full); unregister returns -ENOENT if no such region.
 */
#define MADVX_REGION_UFFD (1U << 0)
MADVX_API int madvx_region_register(void *addr, size_t len, unsigned int flags);
MADVX_API int madvx_region_unregister(void *addr);

/*
 * madvx_release - give [addr, addr + len) back, for GC runtimes that do not
 * want to manage a batch. Hints go to a per-thread batch that is flushed:
 *  - when its pending bytes reach the threshold (default 1 MiB) or it is full,
 *  - by madvx_release_flush(),
 *  - at thread exit.
 * The advice is MADV_DONTNEED by default: RSS drops at the flush and the
 * pages read back as zero, which is what a GC handing out fresh regions
 * expects. MADV_FREE is cheaper when the range is likely reused soon (the
 * kernel frees pages only under memory pressure; RSS stays until then and
 * contents are undefined until written) - choose it with
 * madvx_release_config(). Returns 0 or -EINVAL (bad range), -ENOMEM (no
 * per-thread batch could be mapped). Errors of deferred flushes are
 * returned by the next madvx_release_flush() and counted in madvx_stats_get().
 */
MADVX_API int madvx_release(void *addr, size_t len);

/* Flush this thread's release batch: 0 or the -errno of the first failure since the last call. */
MADVX_API int madvx_release_flush(void);

struct madvx_release_opts {
	size_t size;			/* sizeof(struct madvx_release_opts) */
	int advice;			/* MADV_DONTNEED (0 = default) or MADV_FREE */
	uint64_t flush_bytes;		/* pending bytes that trigger a flush; 0 = 1 MiB */
};

/* Configure this thread's madvx_release(): 0, -EINVAL, -E2BIG. Flushes pending hints first. */
MADVX_API int madvx_release_config(const struct madvx_release_opts *opts);

/* ------------------------------------------------------------------------ */
/* userfaultfd (src/uffd.c)                                                  */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Asynchronous release (src/iouring.c, src/async.c)                         */
/* ------------------------------------------------------------------------ */

#ifdef __cplusplus
}
#endif

#endif /* MADVX_H */
