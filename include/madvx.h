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
