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
 *
 * per_vma_cold_pageout and per_vma_uffd only change how batches are planned
 * (a wrong answer costs speed, never correctness), and the library cannot
 * measure them without tracefs. They are on only where the running kernel is
 * known to do it:
 *  - measured: `madvx-probe --measure` (root, tracefs) counted the
 *    mmap_lock acquisitions of those advices with the mmap_lock tracepoints
 *    and wrote the result to the per-boot cache MADVX_PROBE_CACHE (default
 *    MADVX_PROBE_CACHE_PATH), which the probe reads on the first need of
 *    either feature (the first MADV_COLD or MADV_PAGEOUT hint, the first
 *    userfaultfd-armed VMA a flush meets, a question about them), once per
 *    process, and trusts when its boot key is this
 *    boot's (/proc/sys/kernel/random/boot_id; the btime of /proc/stat on
 *    kernels without /proc/sys) and the file is owned by root or by the
 *    caller and writable by nobody else;
 *  - or assumed: listed in MADVX_ASSUME (comma-separated names, like
 *    MADVX_DISABLE; other names are ignored), which wins over the cache.
 */
#define MADVX_PROBE_CACHE_PATH "/run/madvx/probe-cache"

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
	/*
	 * Retired, always 0 (its name is "retired_madvise_stats"). It reported
	 * /proc/vmstat counters that a draft of the kernel/patches series added
	 * and v3 dropped (new vmstat names are kernel ABI). The value stays
	 * reserved so that the features after it keep theirs.
	 */
	MADVX_FEAT_MADVISE_VMA_STATS,
	/*
	 * MADV_COLD/MADV_PAGEOUT take the per-VMA lock for single-VMA ranges of
	 * the caller (kernel/patches series). Measured or assumed (above).
	 */
	MADVX_FEAT_PER_VMA_COLD_PAGEOUT,
	/*
	 * MADV_DONTNEED/FREE keep the per-VMA lock on userfaultfd-registered
	 * VMAs whose context did not ask for UFFD_EVENT_REMOVE (kernel/patches
	 * series). Measured or assumed (above); needs MADVX_FEAT_UFFD.
	 */
	MADVX_FEAT_PER_VMA_UFFD,
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
 * Every madvise(2) advice the library knows, with the kernel's values
 * (include/uapi/asm-generic/mman-common.h, shared by x86-64, arm64, riscv64,
 * s390x, ppc64 and loongarch64), so a program can name each one without a
 * recent <sys/mman.h> (glibc 2.36 lacks MADV_COLLAPSE and the guard
 * advices) and under -std=c11, where <sys/mman.h> hides the MADV_* names.
 * They equal the MADV_* values wherever both exist. The comment is the
 * first kernel that accepts the advice with madvise(2); on older kernels it
 * fails with -EINVAL (madvx(7) has the table, also for process_madvise(2)).
 */
#define MADVX_ADV_NORMAL		0	/* all kernels */
#define MADVX_ADV_RANDOM		1	/* all kernels */
#define MADVX_ADV_SEQUENTIAL		2	/* all kernels */
#define MADVX_ADV_WILLNEED		3	/* all kernels */
#define MADVX_ADV_DONTNEED		4	/* all kernels */
#define MADVX_ADV_FREE			8	/* 4.5 */
#define MADVX_ADV_REMOVE		9	/* 2.6.16 */
#define MADVX_ADV_DONTFORK		10	/* 2.6.16 */
#define MADVX_ADV_DOFORK		11	/* 2.6.16 */
#define MADVX_ADV_MERGEABLE		12	/* 2.6.32 */
#define MADVX_ADV_UNMERGEABLE		13	/* 2.6.32 */
#define MADVX_ADV_HUGEPAGE		14	/* 2.6.38 */
#define MADVX_ADV_NOHUGEPAGE		15	/* 2.6.38 */
#define MADVX_ADV_DONTDUMP		16	/* 3.4 */
#define MADVX_ADV_DODUMP		17	/* 3.4 */
#define MADVX_ADV_WIPEONFORK		18	/* 4.14 */
#define MADVX_ADV_KEEPONFORK		19	/* 4.14 */
#define MADVX_ADV_COLD			20	/* 5.4 */
#define MADVX_ADV_PAGEOUT		21	/* 5.4 */
#define MADVX_ADV_POPULATE_READ		22	/* 5.14 */
#define MADVX_ADV_POPULATE_WRITE	23	/* 5.14 */
#define MADVX_ADV_DONTNEED_LOCKED	24	/* 5.18 */
#define MADVX_ADV_COLLAPSE		25	/* 6.1 */
#define MADVX_ADV_GUARD_INSTALL		102	/* 6.13 */
#define MADVX_ADV_GUARD_REMOVE		103	/* 6.13 */

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
 * before calling madvx_kernel_info_get(); fields beyond the caller's size are not
 * written, so old callers keep working when fields are added at the end.
 */
struct madvx_kernel_info {
	size_t size;
	char release[65];		/* uname -r */
	uint8_t __pad0[3];		/* zero */
	uint32_t version;		/* (major << 16) | (minor << 8) | min(patch, 255) */
	uint64_t features;		/* bit (1 << MADVX_FEAT_x): supported and not disabled */
	uint64_t disabled;		/* bit (1 << MADVX_FEAT_x): forced off by MADVX_DISABLE */
	uint64_t uffd_features;		/* UFFD_FEATURE_* the UFFDIO_API handshake offered */
	uint64_t uffd_ioctls;		/* bit (1 << _UFFDIO_x) of the API ioctls */
	int io_uring_disabled;		/* kernel.io_uring_disabled sysctl, -1 if absent */
	int unprivileged_userfaultfd;	/* vm.unprivileged_userfaultfd, -1 if absent */
	enum madvx_thp_mode thp;	/* /sys/kernel/mm/transparent_hugepage/enabled */
	uint32_t __pad1;		/* zero */
	uint64_t assumed;		/* bit (1 << MADVX_FEAT_x): set by MADVX_ASSUME */
	uint64_t measured;		/* bit (1 << MADVX_FEAT_x): answered by the per-boot
					 * measurement cache (MADVX_PROBE_CACHE) */
};

/*
 * madvx_kernel_info_get - copy the probe's findings into @info.
 * Returns 0, -EINVAL if @info is NULL or info->size is smaller than the
 * first field set (offsetof .release).
 */
MADVX_API int madvx_kernel_info_get(struct madvx_kernel_info *info);

/* ------------------------------------------------------------------------ */
/* Batching engine (src/batch.c)                                             */
/* ------------------------------------------------------------------------ */

/*
 * A batch collects (addr, len, advice) hints and flushes them as the fewest
 * process_madvise(2) calls whose every entry lies inside one VMA, so the
 * kernel can keep each on its per-VMA fast path:
 *
 *  - hints are sorted by address, duplicates dropped, overlapping or
 *    adjacent hints of one advice merged while they stay in one VMA, and
 *    hints that cross VMA boundaries split into one entry per VMA (bounds
 *    from PROCMAP_QUERY, from regions registered with
 *    madvx_region_register(), or /proc/self/maps; none for a hint the
 *    caller vouches for with MADVX_HINT_ONE_VMA, nor, as a rule the
 *    process learns (across its batches and threads), for the only hint
 *    of a flush once the last 8 such hints looked up each lay in one VMA:
 *    a look-up then costs a system call more than madvise() of that hint
 *    would, to save a lock it rarely needs; every 17th is looked up again,
 *    and a look-up that finds a crossing or a hole, or a refused entry,
 *    ends the rule until 8 more);
 *  - entries the kernel would take off the fast path (advices that need
 *    mmap_lock, VMAs armed by userfaultfd) go in calls of their own, after
 *    the fast-path calls, so one fallback never drags the rest onto mmap_lock;
 *  - at most 1024 entries per call (UIO_MAXIOV).
 *
 * Results are exact: for every hint, err and done are what madvise(2) of
 * that hint alone would give, applied in add order, and the memory ends as
 * it would. Planning (merging, splitting, reordering, the region table) only
 * decides how fast that happens; what the kernel answers decides every
 * result. madvise() walks the hint's pages in address order:
 *
 *  - at the first VMA that refuses the advice (EINVAL: mlocked DONTNEED,
 *    VM_PFNMAP, ...; EACCES; EPERM: sealed; EFAULT: a POPULATE that hits a
 *    guard page or PROT_NONE; ...) it stops: err is that error, the hint's
 *    later VMAs are NOT advised, done = mapped bytes of the hint below
 *    that VMA;
 *  - otherwise, where part of the range is unmapped, the mapped parts are
 *    advised: err = -ENOMEM, done = mapped bytes. MADV_POPULATE_READ/WRITE
 *    stop at the first hole instead (done = mapped bytes below it) on
 *    kernels that do (6.10 and later; 6.1 walks past holes like the other
 *    advices): the library asks the kernel which, it does not assume;
 *  - otherwise err = 0 and done = len rounded up to pages.
 *
 * When a merged or split kernel entry fails, the flush re-applies its hints
 * one by one, VMA by VMA, with madvise() on fresh VMA bounds, so that every
 * hint gets exactly its own answer (all advices the library merges are
 * idempotent, so re-applying what the failed entry did changes nothing).
 *
 * Order: hints may be reordered freely unless two hints with DIFFERENT
 * advices act on the same memory; then the later one is applied after the
 * earlier one (the batch is cut into ordered "epochs"), e.g. DONTNEED then
 * WILLNEED of one range populates it again, FREE then DONTNEED zaps it.
 * "The same memory" is counted in page-table blocks (2 MiB with 4 KiB
 * pages): a populating fault maps its neighbours (fault-around, a huge
 * page) and a zap or pageout splits or takes a huge page, so a POPULATE
 * next to a PAGEOUT changes what the PAGEOUT finds. MADV_POPULATE_READ/
 * WRITE also keep their order against hints of their own advice in one
 * block: with multi-size THP the folio a fault allocates depends on what
 * earlier faults mapped around it. Ordering compares
 * virtual addresses: two mappings of one file or memfd (aliases) are not
 * ordered against each other.
 *
 * Memory: the add and flush paths never call malloc() (allocators call them
 * from inside malloc/free); storage is mmap()ed at creation or supplied by
 * the caller.
 *
 * Thread-safety: a batch belongs to one thread at a time; use one per thread
 * (or lock around it). Different batches may be used concurrently. Once a
 * flush has returned, any number of threads may call madvx_batch_results(),
 * madvx_batch_pending() and madvx_batch_stats() on it at once.
 *
 * Signals: madvx_batch_add(), madvx_batch_add_flags(), madvx_batch_cancel(),
 * madvx_batch_flush(),
 * madvx_batch_results(), madvx_batch_pending(), madvx_batch_seq(),
 * madvx_batch_stats() and madvx_stats_get() are async-signal-safe on a
 * batch that no code the signal interrupted is using, once the process
 * created its first batch outside a handler: they take no lock, call no
 * malloc() and make only async-signal-safe system calls, and keep errno (a
 * GC that stops threads with signals may release from the handler;
 * tests/test_batch.c signal_handler_flushes). The first madvx_batch_create() runs the probe's
 * core under a once-lock, so never from a handler. Never from a handler:
 * madvx_release*() (the interrupted code may be inside the same thread's
 * release batch), the probes (madvx_feature_supported(),
 * madvx_advice_supported(), madvx_kernel_info_get(): a process lock),
 * madvx_async_*(), madvx_uffd_*(), madvx_target_*() and madvx_reclaim().
 *
 * Fork: the library notices a new process at its next entry, whatever made
 * it - fork(), _Fork(), syscall(SYS_fork), clone() without CLONE_VM - and
 * drops the per-process state it inherited (the pidfd and /proc/self/maps fd
 * that name the parent), so it never advises the parent's memory. A batch's
 * VMA cache is kept: the child starts with its parent's layout (its
 * MADV_DONTFORK mappings are holes there, which the kernel's answer settles,
 * as for any stale bound: a cost in speed, never in results).
 * In the child, the batches the forking thread owned may be used as before
 * (their pending hints apply to the child's copy of the memory) and new ones
 * created; batches other threads owned at the fork may have been mid-flush
 * and may only be freed. After vfork() or clone(CLONE_VM) the child shares
 * the parent's memory and may only exec or _exit. Batches, madvx_release()
 * and the probe never allocate; madvx_async_create() and madvx_uffd_open()
 * do (malloc), so after a raw fork (_Fork, SYS_fork, clone) of a
 * multi-threaded process, where the C library did not reset its allocator,
 * they are as safe as malloc() is there. clone() with CLONE_FILES
 * but without CLONE_VM is not supported (the child closes the inherited
 * fds, which it would then share with the parent).
 */
struct madvx_batch;
struct madvx_target;

/* When the batch is full, madvx_batch_add() flushes it instead of -ENOSPC. */
#define MADVX_BATCH_AUTOFLUSH (1U << 0)
/* Skip process_madvise(): one madvise() per planned entry (still planned). */
#define MADVX_BATCH_NO_VECTOR (1U << 1)

/* The most hints one batch holds (madvx_batch_opts.capacity). */
#define MADVX_BATCH_MAX_CAPACITY (1U << 24)

/*
 * Result of one hint, valid after the flush that applied it. Every per-item
 * result in this API (madvx_hint.err, madvx_uffd_item.err) is 0 or a
 * negative errno, like the return values.
 */
struct madvx_hint {
	uint64_t addr;		/* as added */
	uint64_t len;		/* as added (rounded up to pages when applied) */
	int32_t advice;
	int32_t err;		/* 0, or -errno: madvise()'s answer for this hint alone */
	uint64_t done;		/* bytes of the hint the kernel applied (see above) */
	uint64_t seq;		/* hints added to this batch before this one, since creation */
	uint64_t __reserved[2];	/* zero; room to grow */
};

/*
 * Called from a flush (explicit or automatic) with a hint's final result:
 * madvx_error_fn for every hint that failed, madvx_result_fn for every hint,
 * in add order. Neither may call back into the same batch.
 */
typedef void (*madvx_error_fn)(void *ctx, const struct madvx_hint *hint);
typedef void (*madvx_result_fn)(void *ctx, const struct madvx_hint *hint);

struct madvx_batch_opts {
	size_t size;		/* sizeof(struct madvx_batch_opts) */
	uint64_t capacity;	/* hints held before full; 0 = 4096; max MADVX_BATCH_MAX_CAPACITY */
	uint32_t flags;		/* MADVX_BATCH_* */
	uint32_t __reserved0;	/* zero */
	void *storage;		/* caller memory for the batch, or NULL: mmap */
	size_t storage_size;	/* bytes at storage: madvx_batch_storage_size() */
	madvx_error_fn on_error;	/* optional: every failed hint */
	void *on_error_ctx;
	madvx_result_fn on_result;	/* optional: every hint */
	void *on_result_ctx;
	/*
	 * Another process to advise (madvx_target_open()), or NULL for this
	 * one. A target's batch takes only the advices the kernel accepts
	 * remotely (madvx_batch_add() says -EINVAL to the others), plans at
	 * the target's VMA boundaries, and issues process_madvise() through
	 * the target's pidfd only; results are as exact as for this process.
	 * The target must outlive the batch.
	 */
	struct madvx_target *target;
};

/*
 * Bytes of caller storage a batch of @capacity hints needs (0 = default);
 * 0 when @capacity exceeds MADVX_BATCH_MAX_CAPACITY.
 */
MADVX_API size_t madvx_batch_storage_size(size_t capacity);

/*
 * madvx_batch_create - make a batch. @opts may be NULL for defaults.
 * Returns 0 and sets *out, or -EINVAL (bad opts, NULL out, capacity over
 * MADVX_BATCH_MAX_CAPACITY, nonzero __reserved0), -E2BIG (unknown nonzero
 * opts fields), -ENOSPC (storage_size too small), -ENOMEM (mmap failed).
 */
MADVX_API int madvx_batch_create(const struct madvx_batch_opts *opts,
				 struct madvx_batch **out);

/* Free a batch; pending hints are dropped (flush first). NULL is a no-op. */
MADVX_API void madvx_batch_free(struct madvx_batch *batch);

/*
 * madvx_batch_add - queue a hint.
 * Returns the hint's index in the current flush (>= 0; see
 * madvx_batch_results(); its seq is madvx_batch_seq() before the add), or:
 * -EINVAL for a NULL batch, for an advice the kernel refuses for another
 * process when the batch has a target (all but MADV_COLD, MADV_PAGEOUT,
 * MADV_WILLNEED, MADV_COLLAPSE), and exactly where madvise() fails its
 * argument checks: an unknown advice, an unaligned @addr, or a range whose end wraps
 * past 2^64; -ENOSPC when full without MADVX_BATCH_AUTOFLUSH. Any other
 * address is accepted, also one above the user address space: its result is
 * madvise()'s (-ENOMEM) and no other hint is affected. A zero-length hint is
 * accepted and succeeds with nothing done, as in madvise(). With AUTOFLUSH a
 * full batch is flushed first; the results of that flush reach on_result
 * and on_error, and its failures the next madvx_batch_flush() return value.
 */
MADVX_API int madvx_batch_add(struct madvx_batch *batch, void *addr, size_t len,
			      int advice);

/*
 * The caller vouches that [addr, addr + len) lies in ONE VMA (e.g. a block
 * of one heap section or arena, where nothing splits the mapping): the flush
 * plans the hint without a VMA look-up (no PROCMAP_QUERY, no region table,
 * so no limit on how many ranges can be vouched for; counted in
 * madvx_stats.vma_skipped).
 *
 * A wrong vouch (the range crosses VMAs, or has a hole) costs speed, never
 * a result: the kernel walks the range itself under mmap_read_lock, and
 * entries it refuses are resolved on the kernel's bounds as for any other
 * hint, so err and done stay madvise()'s. Vouched hints go to the kernel in
 * calls of their own, after the hints the flush looked up, because
 * process_madvise() keeps the mmap_lock fallback of one crossing entry for
 * every later entry of its call: a wrong vouch can put the vouched entries
 * issued after it in that call on mmap_read_lock, never a looked-up one.
 * Do not vouch for memory registered with userfaultfd (register it as a
 * region with MADVX_REGION_UFFD): madvise takes mmap_lock there.
 * Two vouched hints are merged only where they overlap (then both lie in
 * the same VMA), never because they touch: adjacent ranges may be in two.
 */
#define MADVX_HINT_ONE_VMA (1U << 0)

/*
 * madvx_batch_add_flags - madvx_batch_add() with MADVX_HINT_* @flags.
 * Returns what madvx_batch_add() returns, and -EINVAL for an unknown flag.
 * Async-signal-safe under the same terms as madvx_batch_add().
 */
MADVX_API int madvx_batch_add_flags(struct madvx_batch *batch, void *addr, size_t len,
				    int advice, unsigned int flags);

/* Hints added to @batch since creation (the seq the next hint gets); 0 for NULL. */
MADVX_API uint64_t madvx_batch_seq(const struct madvx_batch *batch);

/*
 * madvx_batch_cancel - take [addr, addr + len) out of the queued hints, for
 * an allocator that hands out a range whose release is still pending: the
 * range is reused instead, with no flush (its DONTNEED never lands, no
 * refault follows; its contents are what they were, so an allocator that
 * counts on released memory reading as zero must not count on it here).
 * A hint inside the range is dropped, one the range overlaps at its start
 * or end is trimmed to the part outside; the flush reports a dropped hint
 * with len 0 and a trimmed one with the part left (addr, len, done), both
 * under their seq, and neither as a failure. Returns the number of hints
 * dropped or trimmed (0: nothing queued there; counted in
 * madvx_stats.cancelled), -EINVAL (NULL batch; @addr unaligned or the
 * range wrapping, as for madvx_batch_add()), or -EBUSY when a hint holds
 * the range strictly inside it (taking it out would make two hints of
 * one): then nothing changed - flush before reusing the range, or cancel
 * a range that reaches the hint's start or end. O(pending hints); a batch
 * belongs to one thread at a time, as for madvx_batch_add().
 * Async-signal-safe under the same terms as madvx_batch_add().
 */
MADVX_API int madvx_batch_cancel(struct madvx_batch *batch, void *addr, size_t len);

/*
 * madvx_batch_flush - apply every queued hint.
 * Returns 0 when every hint since the previous madvx_batch_flush() (including
 * hints applied by automatic flushes) was applied in full; otherwise the err
 * of the first failed hint in add order (e.g. -ENOMEM unmapped, -EINVAL,
 * -EPERM sealed, -EAGAIN after bounded retries). Per-hint results:
 * madvx_batch_results().
 */
MADVX_API int madvx_batch_flush(struct madvx_batch *batch);

/*
 * madvx_batch_results - the hints of the last flush (explicit or automatic)
 * with their results, in the order they were added; *count receives how
 * many (0 after a flush that had nothing to apply: it is the last flush
 * then). Valid until the next add or flush; safe to call from several
 * threads at once. Returns NULL (and *count = 0) for a NULL batch or while
 * hints are pending.
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
	uint64_t madvise_fallbacks;	/* entries issued with madvise() instead (not
					 * a lone entry: madvise() by design) */
	uint64_t vma_queries;		/* VMA lookups (PROCMAP_QUERY or maps parse) */
	uint64_t retries;		/* EINTR/EAGAIN retries */
	uint64_t failed;		/* hints with err != 0 */
	uint64_t errors[64];
	uint64_t vma_skipped;		/* entries planned without a look-up: MADVX_HINT_ONE_VMA,
					 * or a flush's only hint guessed to lie in one VMA */
	uint64_t cancelled;		/* hints dropped or trimmed by madvx_batch_cancel() */
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
 * userfaultfd: madvise takes mmap_lock there, so its entries are issued
 * apart from the fast-path ones - except on kernels with
 * MADVX_FEAT_PER_VMA_UFFD, which keep the per-VMA lock unless the context
 * asked for UFFD_EVENT_REMOVE; say so with MADVX_REGION_UFFD_EVENT_REMOVE.
 * Thread-safe; at most 64 regions per process.
 * Returns 0, -EINVAL (unaligned, empty, wraps), -EEXIST (overlaps one),
 * -ENOSPC (table full); unregister returns -ENOENT if no such region.
 */
#define MADVX_REGION_UFFD (1U << 0)
#define MADVX_REGION_UFFD_EVENT_REMOVE (1U << 1)	/* implies MADVX_REGION_UFFD */
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

/*
 * Bytes this thread passed to madvx_release() that no flush has applied
 * yet (0 before its first call). A runtime checks it before it lets other
 * threads reuse memory this thread released.
 *
 * Reuse rule: a range given to madvx_release() must not be handed out
 * again (written) before the flush that applies it - a DONTNEED applied
 * after new data was written zaps the data. The flush at thread exit counts:
 * a thread that released memory and exits without madvx_release_flush()
 * zaps it when it exits. There is no call that flushes another thread's
 * batch: the batch belongs to its thread so that madvx_release() takes no
 * lock; a runtime that stops its threads at a safepoint has each thread
 * call madvx_release_flush() before it parks (or shares one explicit
 * madvx_batch under its own lock).
 */
MADVX_API uint64_t madvx_release_pending(void);

struct madvx_release_opts {
	size_t size;			/* sizeof(struct madvx_release_opts) */
	int32_t advice;			/* MADV_DONTNEED (0 = default) or MADV_FREE */
	uint32_t __reserved0;		/* zero */
	uint64_t flush_bytes;		/* pending bytes that trigger a flush; 0 = 1 MiB */
};

/*
 * Configure this thread's madvx_release(): 0, -EINVAL (bad advice), -E2BIG
 * (nonzero __reserved0 or unknown tail). Flushes pending hints first.
 */
MADVX_API int madvx_release_config(const struct madvx_release_opts *opts);

/* ------------------------------------------------------------------------ */
/* userfaultfd (src/uffd.c)                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A userfaultfd (Linux 4.3+) with the features its user negotiated, and the
 * operations that resolve faults with exact progress. Users: concurrent
 * compacting GCs (which move live pages with UFFDIO_MOVE, 6.8) and
 * lazy-restore tools. Feature and mode bits are the kernel's own
 * (UFFD_FEATURE_* and UFFD_PAGEFAULT_FLAG_* from <linux/userfaultfd.h>).
 *
 * Addresses and lengths are uint64_t and must be page aligned (EXACT_ADDRESS
 * fault addresses excepted). Every operation must stay inside one VMA on each
 * side; the *_list functions split at VMA boundaries for you.
 *
 * Progress: each operation sets *done (if non-NULL) to the bytes from the
 * start of the range that are now resolved, including pages that were
 * already present (EEXIST: the operation wakes their waiters and continues
 * after them, unless MADVX_UFFD_EEXIST_STOP), and returns 0 when all of @len
 * was done, else the -errno that stopped it at @dst + *done.
 *
 * EAGAIN: while a fork, mremap, MADV_REMOVE/DONTNEED or munmap event of this
 * uffd is pending and not yet read (the kernel's mmap_changing), operations
 * fail with -EAGAIN and *done tells where they stopped. Call
 * madvx_uffd_drain() (it reads the pending events into the handle's queue,
 * where madvx_uffd_read_events() and madvx_uffd_handle() deliver them, so
 * none is lost) and retry from @dst + *done; or pass MADVX_UFFD_RETRY to have
 * the operation do exactly that for up to about two seconds.
 *
 * Thread-safety: one handle may be used from many threads at once: the
 * operations only issue ioctls (the kernel serialises per page) and update
 * atomic counters; event reading and the event queue are under a mutex.
 * madvx_uffd_free() must not race with any other call on the handle. Reading
 * the fd with read(2) outside the library is not supported (events queued by
 * madvx_uffd_drain() would be delivered out of order).
 * Fork: the handle stays with the parent; a child gets nothing usable from it
 * (UFFD_FEATURE_EVENT_FORK gives the parent a new uffd for the child's mm).
 */
struct madvx_uffd;

/*
 * madvx_uffd_opts.flags. There is no blocking mode: the fd is always
 * O_NONBLOCK, because a blocking userfaultfd answers poll() with POLLERR and
 * so cannot sit in a poll/epoll loop; wait with madvx_uffd_read_events(),
 * madvx_uffd_handle() (timeout -1) or madvx_uffd_run() instead.
 */
#define MADVX_UFFD_USER_MODE_ONLY	(1U << 0)	/* always UFFD_USER_MODE_ONLY (5.11) */
#define MADVX_UFFD_KERNEL_FAULTS	(1U << 1)	/* never settle for USER_MODE_ONLY */

/*
 * Feature bits newer than the <linux/userfaultfd.h> of many distributions
 * (Debian 12 ships 6.1's), with the kernel's values, so callers can ask for
 * them without a newer header.
 */
#define MADVX_UFFD_FEATURE_WP_UNPOPULATED	(1ULL << 13)	/* 6.4 */
#define MADVX_UFFD_FEATURE_POISON		(1ULL << 14)	/* 6.6 */
#define MADVX_UFFD_FEATURE_WP_ASYNC		(1ULL << 15)	/* 6.7 */
#define MADVX_UFFD_FEATURE_MOVE			(1ULL << 16)	/* 6.8 */

struct madvx_uffd_opts {
	size_t size;			/* sizeof(struct madvx_uffd_opts) */
	uint64_t features;		/* UFFD_FEATURE_* required: open fails without them */
	uint64_t optional_features;	/* UFFD_FEATURE_* enabled where the kernel has them */
	unsigned int flags;		/* MADVX_UFFD_USER_MODE_ONLY, MADVX_UFFD_KERNEL_FAULTS */
	uint32_t __reserved0;		/* must be zero (else -E2BIG) */
};

/*
 * madvx_uffd_missing_features - which of @features the running kernel (as
 * probed, minus what MADVX_DISABLE turns off: uffd_move, uffd_poison,
 * uffd_wp, uffd_wp_async, uffd_minor_shmem) does not offer. 0 means all are
 * there; every bit when userfaultfd itself is unusable. Exact: bits unknown
 * to the kernel are reported missing too.
 */
MADVX_API uint64_t madvx_uffd_missing_features(uint64_t features);

/*
 * madvx_uffd_open - a userfaultfd, O_CLOEXEC | O_NONBLOCK, handshake done.
 * Opening tries userfaultfd(2) (4.3); on EPERM (vm.unprivileged_userfaultfd=0
 * without CAP_SYS_PTRACE) userfaultfd(UFFD_USER_MODE_ONLY) (5.11), unless
 * MADVX_UFFD_KERNEL_FAULTS; then /dev/userfaultfd + USERFAULTFD_IOC_NEW
 * (6.1, needs access to the device node). UFFDIO_API enables
 * opts->features plus the optional ones present. @opts may be NULL (no
 * features).
 * Returns 0 and *out, or -EINVAL (bad opts or flags, NULL out), -E2BIG
 * (unknown nonzero opts tail), -EOPNOTSUPP (a required feature is missing:
 * see madvx_uffd_missing_features()), -ENOSYS (no userfaultfd, or "uffd" in
 * MADVX_DISABLE), -EPERM (not allowed; also UFFD_FEATURE_EVENT_FORK without
 * CAP_SYS_PTRACE), -EMFILE/-ENOMEM.
 */
MADVX_API int madvx_uffd_open(const struct madvx_uffd_opts *opts,
			      struct madvx_uffd **out);

/* Close the fd and free the handle (queued fork fds are closed). NULL is a no-op. */
MADVX_API void madvx_uffd_free(struct madvx_uffd *uffd);

/* The userfaultfd, for poll/epoll or raw ioctls; -EINVAL for NULL. */
MADVX_API int madvx_uffd_fd(const struct madvx_uffd *uffd);

/*
 * An fd that polls readable when madvx_uffd_handle()/madvx_uffd_read_events()
 * has something to deliver: the uffd has events OR events queued by
 * madvx_uffd_drain() wait OR madvx_uffd_stop() was called (an epoll fd
 * watching both; it can sit in the caller's epoll set). -EINVAL for NULL.
 */
MADVX_API int madvx_uffd_poll_fd(const struct madvx_uffd *uffd);

/* UFFD_FEATURE_* the handshake enabled (0 for NULL). */
MADVX_API uint64_t madvx_uffd_features(const struct madvx_uffd *uffd);

/* 1 if the fd was opened with UFFD_USER_MODE_ONLY, 0 if not, -EINVAL for NULL. */
MADVX_API int madvx_uffd_user_mode_only(const struct madvx_uffd *uffd);

/* Registration modes (the kernel's UFFDIO_REGISTER_MODE_* values). */
#define MADVX_UFFD_MISSING	(1U << 0)	/* faults on missing pages (4.3 anon, 4.11 shmem) */
#define MADVX_UFFD_WP		(1U << 1)	/* write-protect faults (5.7 anon, 5.19 shmem) */
#define MADVX_UFFD_MINOR	(1U << 2)	/* minor faults: shmem (5.14), hugetlbfs (5.13) */

/*
 * madvx_uffd_register - arm [addr, addr + len) with @mode (MADVX_UFFD_*).
 * *ioctls (if non-NULL) receives the range ioctls the kernel allows there
 * (bit 1 << _UFFDIO_COPY, ...). The range may span VMAs; each must accept
 * the mode.
 * Returns 0, or -EINVAL (unaligned, empty or bad mode, range with holes: as
 * the kernel says), -EOPNOTSUPP (the mode needs a feature the handle did not
 * negotiate: WP needs UFFD_FEATURE_PAGEFAULT_FLAG_WP, MINOR needs
 * UFFD_FEATURE_MINOR_SHMEM or _HUGETLBFS; or the memory cannot take it:
 * MINOR on anonymous memory), -EBUSY (armed by another uffd), -ENOMEM.
 */
MADVX_API int madvx_uffd_register(struct madvx_uffd *uffd, uint64_t addr,
				  uint64_t len, unsigned int mode, uint64_t *ioctls);

/* madvx_uffd_unregister - disarm the range (waking its waiters). 0 or -errno. */
MADVX_API int madvx_uffd_unregister(struct madvx_uffd *uffd, uint64_t addr,
				    uint64_t len);

/* Operation flags. */
#define MADVX_UFFD_DONTWAKE		(1U << 0)	/* do not wake the faulting threads */
#define MADVX_UFFD_MAP_WP		(1U << 1)	/* COPY (5.7), CONTINUE (6.4): map write-protected;
							   WRITEPROTECT: protect (else unprotect) */
#define MADVX_UFFD_ALLOW_SRC_HOLES	(1U << 2)	/* MOVE: a hole in the source moves as a hole */
#define MADVX_UFFD_EEXIST_STOP		(1U << 3)	/* stop with -EEXIST at a present page */
#define MADVX_UFFD_RETRY		(1U << 4)	/* on EAGAIN: madvx_uffd_drain() and retry */

/*
 * madvx_uffd_copy - UFFDIO_COPY (4.3): copy @len bytes from @src (any
 * readable memory) into the missing pages at @dst.
 * Errors: -EEXIST (only with EEXIST_STOP), -EAGAIN (mmap changing), -ENOENT
 * (@dst not in one registered VMA), -EFAULT (@src unreadable), -EINVAL,
 * -ENOMEM, -ESRCH (the mm is gone).
 */
MADVX_API int madvx_uffd_copy(struct madvx_uffd *uffd, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done);

/* madvx_uffd_zeropage - UFFDIO_ZEROPAGE (4.3): map zero pages at @dst. Errors as copy. */
MADVX_API int madvx_uffd_zeropage(struct madvx_uffd *uffd, uint64_t dst,
				  uint64_t len, unsigned int flags, uint64_t *done);

/*
 * madvx_uffd_move - UFFDIO_MOVE (6.8, UFFD_FEATURE_MOVE): move the pages at
 * @src (private anonymous, exclusive to this process) to @dst (missing pages
 * of a VMA registered with this uffd, same protection); @src is left empty.
 * Zero copy: the pages themselves move.
 * Errors: -EEXIST (only with EEXIST_STOP; the source page stays), -ENOENT
 * (hole in @src without ALLOW_SRC_HOLES), -EBUSY (a source page is shared,
 * e.g. with a child after fork, or pinned), -EINVAL (VMAs not private
 * anonymous, different protections, or the range crosses a VMA), -EAGAIN,
 * -ENOMEM, -ESRCH.
 */
MADVX_API int madvx_uffd_move(struct madvx_uffd *uffd, uint64_t dst, uint64_t src,
			      uint64_t len, unsigned int flags, uint64_t *done);

/*
 * madvx_uffd_continue - UFFDIO_CONTINUE (5.13 hugetlbfs, 5.14 shmem): map the
 * page-cache pages already at @addr (MINOR registration). Errors as copy;
 * -EFAULT when the page cache has no page there.
 */
MADVX_API int madvx_uffd_continue(struct madvx_uffd *uffd, uint64_t addr,
				  uint64_t len, unsigned int flags, uint64_t *done);

/*
 * madvx_uffd_poison - UFFDIO_POISON (6.6, UFFD_FEATURE_POISON): mark the
 * missing pages at @addr poisoned; touching them raises SIGBUS. Errors as copy.
 */
MADVX_API int madvx_uffd_poison(struct madvx_uffd *uffd, uint64_t addr,
				uint64_t len, unsigned int flags, uint64_t *done);

/*
 * madvx_uffd_writeprotect - UFFDIO_WRITEPROTECT (5.7): protect the range
 * (MADVX_UFFD_MAP_WP) or remove the protection (waking the threads that
 * faulted on it unless DONTWAKE). All or nothing as far as the kernel says:
 * 0, or -EAGAIN, -ENOENT (not WP-registered), -EINVAL, -ENOMEM.
 */
MADVX_API int madvx_uffd_writeprotect(struct madvx_uffd *uffd, uint64_t addr,
				      uint64_t len, unsigned int flags);

/* madvx_uffd_wake - UFFDIO_WAKE: wake the threads faulting in the range. 0 or -errno. */
MADVX_API int madvx_uffd_wake(struct madvx_uffd *uffd, uint64_t addr, uint64_t len);

/*
 * One (dst, src, len) of a move or copy list, with its result:
 * done = bytes from dst now resolved (moved/copied or already present),
 * existed = of which were already present (for MOVE their source pages
 * stay where they were), err = 0 or the -errno that stopped it at dst + done.
 */
struct madvx_uffd_item {
	uint64_t dst;
	uint64_t src;
	uint64_t len;
	uint64_t done;
	uint64_t existed;
	int32_t err;
	/*
	 * Room to grow without changing the array stride: zero these (a
	 * designated initializer does); 0.x neither reads nor writes them.
	 */
	uint32_t __reserved0;
	uint64_t __reserved[2];
};

/*
 * madvx_uffd_move_list / madvx_uffd_copy_list - apply many items with the
 * fewest ioctls: @items are SORTED IN PLACE by dst (each keeps its result),
 * runs contiguous on both sides are coalesced, and each run is cut where a
 * VMA ends on either side (bounds from PROCMAP_QUERY or /proc/self/maps), so
 * every ioctl stays inside one VMA. An item that fails does not stop the
 * others, except for -EAGAIN (without MADVX_UFFD_RETRY, or after its two
 * seconds), -ENOMEM, -ESRCH and -EINTR, which end the call: every item not
 * finished then carries that error. Items must not overlap (an overlap
 * counts as already present). @flags: as for the single operations.
 * Neither these nor the single operations allocate memory: they are safe to
 * call while another thread is inside fork() (which holds malloc's locks
 * until its FORK event is read).
 * Returns 0 when every item is done, else the err of the first failed item
 * (in the sorted order), -EINVAL for bad arguments.
 */
MADVX_API int madvx_uffd_move_list(struct madvx_uffd *uffd, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags);
MADVX_API int madvx_uffd_copy_list(struct madvx_uffd *uffd, struct madvx_uffd_item *items,
				   size_t count, unsigned int flags);

/* Event types (the kernel's UFFD_EVENT_* values). */
enum madvx_uffd_event_type {
	MADVX_UFFD_EVENT_PAGEFAULT = 0x12,
	MADVX_UFFD_EVENT_FORK = 0x13,	/* UFFD_FEATURE_EVENT_FORK (4.11) */
	MADVX_UFFD_EVENT_REMAP = 0x14,	/* UFFD_FEATURE_EVENT_REMAP (4.11): mremap */
	MADVX_UFFD_EVENT_REMOVE = 0x15,	/* UFFD_FEATURE_EVENT_REMOVE (4.11): MADV_DONTNEED/REMOVE */
	MADVX_UFFD_EVENT_UNMAP = 0x16,	/* UFFD_FEATURE_EVENT_UNMAP (4.11): munmap */
};

/*
 * One event, decoded from struct uffd_msg. The union is named (arg, as in
 * struct uffd_msg) so the header stays ISO C99. The library zeroes every
 * byte it does not set, so the reserved room can carry new fields later.
 */
struct madvx_uffd_event {
	uint32_t type;			/* enum madvx_uffd_event_type */
	uint32_t __reserved0;
	union {
		struct {
			uint64_t flags;	/* UFFD_PAGEFAULT_FLAG_WRITE, _WP, _MINOR */
			uint64_t addr;	/* page aligned unless UFFD_FEATURE_EXACT_ADDRESS */
			uint32_t tid;	/* with UFFD_FEATURE_THREAD_ID, else 0 */
			uint32_t __reserved0;
		} fault;
		struct {
			int32_t fd;	/* new uffd for the child's mm; the receiver closes it */
			uint32_t __reserved0;
		} fork;
		struct {
			uint64_t from, to, len;
		} remap;
		struct {
			uint64_t start, end;
		} remove;		/* REMOVE and UNMAP */
		uint64_t __reserved[5];
	} arg;
};

/*
 * madvx_uffd_read_events - up to @max events: first those madvx_uffd_drain()
 * queued, then from the fd in one read(2). Waits up to @timeout_ms (0: not
 * at all, -1: forever) when none is ready; returns early with 0 after
 * madvx_uffd_stop(). Returns the number of events (0 on timeout), -EINVAL,
 * or the -errno of read(2)/poll(2) (-EINTR).
 */
MADVX_API int madvx_uffd_read_events(struct madvx_uffd *uffd,
				     struct madvx_uffd_event *ev, size_t max,
				     int timeout_ms);

/*
 * madvx_uffd_drain - read every event pending on the fd into the handle's
 * queue, waiting up to @timeout_ms for the first when none is pending; this
 * ends the kernel's mmap_changing so -EAGAIN operations can be retried. The
 * queue holds 1024 events (allocated at open: draining never allocates);
 * when it is full the rest stay in the kernel, and -EAGAIN persists until
 * the handler delivers some.
 * Returns the number of events queued now, -ENOSPC (queue full), or -errno.
 */
MADVX_API int madvx_uffd_drain(struct madvx_uffd *uffd, int timeout_ms);

/* Number of events queued by madvx_uffd_drain() and not yet delivered. */
MADVX_API size_t madvx_uffd_pending(struct madvx_uffd *uffd);

/*
 * Callbacks of the handler loop. @fault must resolve the fault (usually with
 * madvx_uffd_copy/zeropage/move of the page at ev->arg.fault.addr, which wake the
 * faulting thread), or the faulting thread stays blocked. @event gets FORK,
 * REMAP, REMOVE and UNMAP; NULL ignores them (closing a fork's fd). Both
 * return 0 or a -errno that madvx_uffd_handle() reports; they may be called
 * from several threads at once when several threads run the loop.
 */
typedef int (*madvx_uffd_event_fn)(struct madvx_uffd *uffd,
				   const struct madvx_uffd_event *ev, void *arg);

struct madvx_uffd_handler {
	size_t size;			/* sizeof(struct madvx_uffd_handler) */
	madvx_uffd_event_fn fault;	/* required */
	madvx_uffd_event_fn event;	/* optional */
	void *arg;
	uint32_t batch;			/* events per read, 0 = 64 */
	uint32_t __reserved0;		/* must be zero (else -E2BIG) */
};

/*
 * madvx_uffd_handle - read one batch of events (waiting up to @timeout_ms) and
 * dispatch them. For poll/epoll loops: call with 0 when madvx_uffd_poll_fd()
 * is readable. Returns the number of events handled, 0 on timeout or after
 * madvx_uffd_stop(), or the first -errno of a callback (after dispatching the
 * whole batch: no event is dropped), -EINVAL, or the read's -errno.
 */
MADVX_API int madvx_uffd_handle(struct madvx_uffd *uffd,
				const struct madvx_uffd_handler *h, int timeout_ms);

/*
 * madvx_uffd_run - madvx_uffd_handle() in a loop (on a thread of its own)
 * until madvx_uffd_stop(). Returns 0 when stopped, or the first -errno.
 */
MADVX_API int madvx_uffd_run(struct madvx_uffd *uffd, const struct madvx_uffd_handler *h);

/*
 * madvx_uffd_stop - @stop nonzero: make madvx_uffd_run() loops return and
 * madvx_uffd_handle()/read_events() return 0 at once; zero: clear it.
 * Async-signal-safe. 0 or -EINVAL.
 */
MADVX_API int madvx_uffd_stop(struct madvx_uffd *uffd, int stop);

/* Counters of one handle since open (size set by the caller). */
struct madvx_uffd_stats {
	size_t size;			/* sizeof(struct madvx_uffd_stats) */
	uint64_t ioctls;		/* COPY/ZEROPAGE/MOVE/CONTINUE/POISON/WP/WAKE issued */
	uint64_t bytes;			/* bytes those resolved */
	uint64_t existed;		/* bytes found already present (EEXIST) */
	uint64_t eagain;		/* -EAGAIN answers (mmap changing) */
	uint64_t events;		/* events read from the fd */
	uint64_t faults;		/* of which page faults */
	uint64_t vma_splits;		/* list runs cut at a VMA boundary */
};

/* madvx_uffd_stats_get - counters of @uffd into @st. 0 or -EINVAL. */
MADVX_API int madvx_uffd_stats_get(const struct madvx_uffd *uffd, struct madvx_uffd_stats *st);

/* ------------------------------------------------------------------------ */
/* Asynchronous release (src/iouring.c, src/async.c)                         */
/* ------------------------------------------------------------------------ */

/*
 * Hand whole batches off and get on: madvx_async_submit() takes a batch
 * with its queued hints and returns a ticket at once; the hints are applied
 * elsewhere, with the same planning and per-hint results as
 * madvx_batch_flush(). The ticket is the fence:
 *
 *  - from submit until madvx_async_wait() or madvx_async_poll() reports the
 *    ticket complete, the batch belongs to the async object: do not add to,
 *    cancel in, flush, read or free it (a hint in flight cannot be taken
 *    back: madvx_batch_cancel() is for hints not yet submitted);
 *  - the memory of its hints must not be reused (written, unmapped,
 *    remapped) until then either: a DONTNEED still in flight may zap what
 *    you write. After completion, madvx_batch_results() holds every hint's
 *    err/done exactly as a synchronous flush would have left them.
 *
 * Order: the hints of one submission keep the batch's ordering rule (a hint
 * overlapping an earlier hint of another advice applies after it). Across
 * submissions on one async object the same holds: overlapping hints of
 * different advices apply in submission order. Non-overlapping work is
 * unordered.
 *
 * Backends:
 *  - MADVX_ASYNC_THREAD: a library-owned worker thread runs
 *    madvx_batch_flush() on each submitted batch, FIFO, so the work is the
 *    synchronous flush's (process_madvise vectors on the per-VMA fast path).
 *    Submit costs the caller a queue insert and a futex wake.
 *  - MADVX_ASYNC_IO_URING: the caller's thread plans the batch and queues
 *    one IORING_OP_MADVISE SQE per planned entry (entries of 4 GiB and more
 *    go in sqe->off where the kernel reads it, MADVX_FEAT_IO_URING_MADVISE64,
 *    else split), on a ring the library owns or on the caller's. The SQEs
 *    carry IOSQE_ASYNC, so the kernel runs them on io-wq worker threads of
 *    this process even where it could complete them inline in the caller
 *    (kernels with kernel/patches/0005); on a ring with
 *    IORING_SETUP_SQPOLL they do not, and such a kernel completes them in
 *    the ring's SQ thread.
 *    Runs of merged hints are not cut at VMA boundaries here: SQEs run in
 *    parallel, so the pieces of one hint could not stop at its first VMA
 *    that refuses the advice; each SQE is one madvise() walk instead (a run
 *    that crosses VMAs takes mmap_read_lock in the io-wq worker). An entry
 *    that fails is resolved hint by hint with madvise() where its CQE is
 *    reaped. A group that overlaps work of another advice still in flight
 *    (an earlier epoch or submission) waits in submit until that work and
 *    its resolution are done, so results and memory stay exact.
 *    Completions are reaped by madvx_async_wait()/madvx_async_poll() (or
 *    madvx_async_cqe()).
 *  - MADVX_ASYNC_SYNC: madvx_batch_flush() inside submit; the ticket is
 *    complete at once. For tests and for callers that want one code path.
 *  - MADVX_ASYNC_DEFAULT: madvx_async_default_backend(): THREAD, chosen by
 *    measurement (BENCHMARKS.md, p4): it costs the caller least and, since
 *    io_uring runs each madvise SQE on an io-wq worker anyway, the process
 *    least in total as well. The environment variable MADVX_ASYNC_BACKEND
 *    ("thread", "io_uring", "sync") overrides the default for the process.
 *    io_uring is never chosen where the probe finds it missing, disabled
 *    (sysctl, seccomp, MADVX_DISABLE=io_uring) or without
 *    IORING_OP_MADVISE.
 *
 * Memory: everything an async object needs (ticket table, queue, one
 * record per SQE in flight, the worker thread's stack) is allocated by
 * madvx_async_create(); submit, wait and poll never allocate.
 *
 * Callbacks: a batch's on_error runs where the batch completes: on the
 * worker thread (THREAD), or in whichever call reaps the last completion
 * (IO_URING: submit, wait, poll, madvx_async_cqe(), free), under the async
 * object's mutex; it must not call madvx_async_* on the same object.
 * Counters: with IO_URING a batch's stats count SQEs in neither syscalls
 * nor vector_entries (bytes, failed and errors are counted as usual).
 *
 * Thread-safety: calls on one async object may come from any threads; they
 * are serialised by a mutex (with the io_uring backend a blocking wait holds
 * it while it sleeps in io_uring_enter, so other calls wait too).
 * Fork: the object stays with the parent (its worker thread and ring); in
 * a child every call on it returns -ECHILD and madvx_async_free() only
 * releases the child's copy. Make a new one there.
 */
struct madvx_async;
struct io_uring;

enum madvx_async_backend {
	MADVX_ASYNC_DEFAULT = 0,
	MADVX_ASYNC_THREAD,
	MADVX_ASYNC_IO_URING,
	MADVX_ASYNC_SYNC,
};

/* A CQE of a caller-owned ring that is not libmadvx's (see madvx_async_opts.on_cqe). */
typedef void (*madvx_cqe_fn)(void *ctx, uint64_t user_data, int32_t res, uint32_t flags);

struct madvx_async_opts {
	size_t size;			/* sizeof(struct madvx_async_opts) */
	enum madvx_async_backend backend;	/* 0 = madvx_async_default_backend() */
	uint32_t max_tickets;		/* submissions not yet completed+collected; 0 = 64 */
	/*
	 * io_uring: SQ size of the library's ring (SQEs in flight: its CQ
	 * size, twice that); with a caller's ring, SQEs in flight. 0 = 256.
	 */
	uint32_t queue_depth;
	uint32_t __reserved0;		/* must be zero (else -E2BIG) */
	/*
	 * io_uring: a ring the caller owns (IORING_SETUP_SQPOLL and other
	 * setup flags are the caller's business), or NULL for one the library
	 * makes. With a caller's ring, libmadvx's CQEs carry a user_data the
	 * library recognises; madvx_async_wait()/madvx_async_poll() reap the
	 * ring and hand every other CQE to @on_cqe (required with @ring), and
	 * the caller's own reaping loop passes every CQE to madvx_async_cqe().
	 * The ring must outlive the async object.
	 */
	struct io_uring *ring;
	madvx_cqe_fn on_cqe;
	void *on_cqe_ctx;
};

/*
 * madvx_async_create - make an async object. @opts may be NULL.
 * Returns 0 and *out, or -EINVAL (bad opts, NULL out, a ring without
 * on_cqe), -E2BIG (unknown nonzero opts tail), -EOPNOTSUPP (IO_URING asked
 * for but not usable here: see madvx_feature_supported() of
 * MADVX_FEAT_IO_URING_MADVISE; or libmadvx built without liburing),
 * -ENOMEM, -EAGAIN (no thread), or io_uring_queue_init()'s -errno.
 */
MADVX_API int madvx_async_create(const struct madvx_async_opts *opts,
				 struct madvx_async **out);

/*
 * madvx_async_free - wait for every submission still in flight to complete
 * (their batches then hold their results and belong to the caller again;
 * uncollected tickets are dropped), stop the worker thread, release
 * everything. In-flight work is never cancelled half-way: a hint is either
 * applied as if flushed or, if it had not started, still applied. NULL is a
 * no-op. Must not race with other calls on @async.
 */
MADVX_API void madvx_async_free(struct madvx_async *async);

/* The backend @async runs (never MADVX_ASYNC_DEFAULT), or DEFAULT for NULL. */
MADVX_API enum madvx_async_backend madvx_async_backend_get(const struct madvx_async *async);

/*
 * The backend MADVX_ASYNC_DEFAULT means in this process (after the probe
 * and MADVX_ASYNC_BACKEND): THREAD or IO_URING (SYNC only if asked for).
 */
MADVX_API enum madvx_async_backend madvx_async_default_backend(void);

/* "default", "thread", "io_uring", "sync"; NULL if unknown. */
MADVX_API const char *madvx_async_backend_name(enum madvx_async_backend backend);

/*
 * madvx_async_submit - take @batch and apply its queued hints asynchronously.
 * Returns 0 and *ticket (never 0), or -EINVAL (NULL argument), -EBUSY (max_tickets
 * submissions not yet collected: wait for one), -EALREADY (@batch is
 * already in flight), -EOPNOTSUPP (a batch with a target on the io_uring
 * backend: IORING_OP_MADVISE only advises the caller's own memory). An
 * empty batch is accepted and completes at once.
 * With io_uring, submit plans the batch and queues its SQEs on the
 * caller's thread; when the ring or the record pool is full it reaps
 * completions (blocking) until there is room.
 */
MADVX_API int madvx_async_submit(struct madvx_async *async, struct madvx_batch *batch,
				 uint64_t *ticket);

/*
 * madvx_async_wait - block until @ticket completes and collect it: the batch
 * is the caller's again, madvx_batch_results() valid. Returns what
 * madvx_batch_flush() would have (0, or the -errno of the first failed
 * hint), or -ENOENT for a ticket that is unknown or already collected.
 * With io_uring, a ring that fails to deliver completions (not a signal)
 * returns io_uring_enter()'s -errno and leaves the ticket outstanding.
 */
MADVX_API int madvx_async_wait(struct madvx_async *async, uint64_t ticket);

/*
 * madvx_async_poll - madvx_async_wait() without blocking: reaps what has
 * completed, then collects @ticket if it is complete, else returns
 * -EINPROGRESS (a flush result is never -EINPROGRESS).
 */
MADVX_API int madvx_async_poll(struct madvx_async *async, uint64_t ticket);

/*
 * madvx_async_eventfd - an eventfd (non-blocking, owned by @async) that
 * becomes readable when a submission may have completed; then call
 * madvx_async_poll() (which also drains the eventfd). -EOPNOTSUPP with a
 * caller-owned ring (watch the ring instead).
 */
MADVX_API int madvx_async_eventfd(struct madvx_async *async);

/*
 * madvx_async_cqe - for callers that reap their own ring: offer one CQE.
 * Returns 1 if it was libmadvx's (consumed; mark it seen), 0 if not (yours),
 * -EINVAL for a NULL @async.
 */
MADVX_API int madvx_async_cqe(struct madvx_async *async, uint64_t user_data, int32_t res);

/* ------------------------------------------------------------------------ */
/* Remote targets and reclaim (src/target.c, src/reclaim.c)                  */
/* ------------------------------------------------------------------------ */

/*
 * A target is another process whose memory the caller advises with
 * process_madvise(2), as Android's activity manager and proactive-reclaim
 * daemons do. Linux (5.10 to 7.3) accepts only MADV_COLD, MADV_PAGEOUT,
 * MADV_WILLNEED and MADV_COLLAPSE for another process, and needs:
 *  - ptrace read access to it (PTRACE_MODE_READ: same uid and not
 *    dumpable-restricted, or CAP_SYS_PTRACE; Yama's ptrace_scope may ask
 *    for more): without it opening the target fails with -EACCES;
 *  - CAP_SYS_NICE: without it every advice fails with -EPERM.
 * A remote call always runs under the target's mmap_read_lock, held for
 * the whole vector: every mmap/munmap/mprotect of the target waits.
 *
 * Race-freedom: a target is named by a pidfd, never by a bare pid. Opening
 * from a pid takes a pidfd first, then opens /proc/PID, then checks that the
 * pidfd's process is still alive: if it is, /proc/PID was that process (a
 * pid number is reused only after its process is reaped). All advice goes
 * through the pidfd, so a target that exits is never confused with a new
 * process that gets its pid: calls then fail with -ESRCH.
 *
 * Thread-safety: a target belongs to one thread at a time.
 * Fork: a child may use a target it inherited (its fds are its own copies).
 */
struct madvx_target;

/*
 * madvx_target_open - open process @pid (in the caller's pid namespace).
 * @flags must be 0. Returns 0 and *out, or -EINVAL (pid <= 0, flags, NULL
 * out), -ESRCH (no such process, or it exited while being opened), -EACCES
 * (no ptrace read access: /proc/PID/maps refused), -ENOSYS (no
 * pidfd_open(2): Linux < 5.3, or MADVX_DISABLE=pidfd_open: without a pidfd
 * a pid could be reused under us), -ENOMEM, -EMFILE.
 */
MADVX_API int madvx_target_open(int pid, unsigned int flags, struct madvx_target **out);

/*
 * madvx_target_open_pidfd - open the process @pidfd names (from pidfd_open(2)
 * or clone(CLONE_PIDFD)). The target keeps its own duplicate: the caller
 * may close @pidfd. Errors as madvx_target_open(), plus -EBADF (@pidfd is
 * not a pidfd) and -ESRCH (its process has exited, even if a new process
 * now has its pid).
 */
MADVX_API int madvx_target_open_pidfd(int pidfd, unsigned int flags,
				      struct madvx_target **out);

/* Close the target's fds and free it. NULL is a no-op. */
MADVX_API void madvx_target_free(struct madvx_target *target);

/* The target's pid as seen when it was opened, or -EINVAL for NULL. */
MADVX_API int madvx_target_pid(const struct madvx_target *target);

/* The target's pidfd (owned by the target: do not close it), or -EINVAL. */
MADVX_API int madvx_target_pidfd(const struct madvx_target *target);

/*
 * madvx_target_check - may this process advise @target with @advice?
 * Asks the kernel with an empty process_madvise() vector (no memory is
 * touched). Returns 0 (yes), -ESRCH (the target exited), -EPERM (no
 * CAP_SYS_NICE), -EACCES (no ptrace read access), -EINVAL (@advice is not
 * accepted for another process by this kernel: only COLD, PAGEOUT, WILLNEED,
 * COLLAPSE up to 7.3), -ENOSYS (no process_madvise(2): Linux < 5.10, or it
 * is disabled with MADVX_DISABLE=process_madvise).
 */
MADVX_API int madvx_target_check(struct madvx_target *target, int advice);

/* VMA properties, from PROCMAP_QUERY (6.11) or /proc/PID/maps. */
#define MADVX_VMA_READ		(1ULL << 0)
#define MADVX_VMA_WRITE		(1ULL << 1)
#define MADVX_VMA_EXEC		(1ULL << 2)
#define MADVX_VMA_SHARED	(1ULL << 3)	/* MAP_SHARED (also shared anonymous: shmem) */
#define MADVX_VMA_ANON		(1ULL << 4)	/* no file behind it (private anonymous, heap, stack) */
#define MADVX_VMA_FILE		(1ULL << 5)	/* a file (shared anonymous memory is shmem: FILE) */
#define MADVX_VMA_STACK		(1ULL << 6)	/* the main thread's stack */
#define MADVX_VMA_HEAP		(1ULL << 7)	/* the brk() heap */
#define MADVX_VMA_LOCKED	(1ULL << 8)	/* mlock()ed (smaps VmFlags "lo", read only when VmLck > 0) */
#define MADVX_VMA_HUGETLB	(1ULL << 9)	/* hugetlbfs pages */
#define MADVX_VMA_SPECIAL	(1ULL << 10)	/* [vdso], [vvar], [vsyscall] and other kernel mappings */

struct madvx_target_vma {
	uint64_t start;
	uint64_t end;
	uint64_t flags;		/* MADVX_VMA_* */
	uint64_t offset;	/* file offset of start (0 for anonymous) */
	uint64_t inode;		/* 0 for anonymous */
	uint32_t dev_major;
	uint32_t dev_minor;
};

/*
 * madvx_target_vma_next - the first VMA of @target that ends above @addr
 * (it may contain @addr) and matches the filter: it has at least one flag of
 * @include (0: any VMA) and none of @exclude. Iterate with
 * addr = vma->end. A walk from addr 0 re-reads the target's mlock and stack
 * state (the LOCKED, STACK and HEAP flags). Each call is one PROCMAP_QUERY
 * (per-VMA locks, 6.17) where the kernel has it, else served from a
 * /proc/PID/maps snapshot taken at the start of the walk (addr 0).
 * MADVX_DISABLE=procmap_query forces the snapshot.
 * Returns 0 and *vma, -ENOENT (no such VMA), -ESRCH (the target exited or
 * called execve(): its memory is gone), -EINVAL, or another -errno.
 */
MADVX_API int madvx_target_vma_next(struct madvx_target *target, uint64_t addr,
				    uint64_t include, uint64_t exclude,
				    struct madvx_target_vma *vma);

/* Why madvx_reclaim() stopped. */
enum madvx_reclaim_stop {
	MADVX_RECLAIM_COMPLETE = 0,	/* every planned byte was advised */
	MADVX_RECLAIM_CHANGED,		/* done, but VMAs changed meanwhile (skipped: vmas_changed) */
	MADVX_RECLAIM_BUDGET,		/* opts.budget reached */
	MADVX_RECLAIM_CANCELLED,	/* the progress callback returned nonzero */
	MADVX_RECLAIM_EXITED,		/* the target exited (or called execve()) */
	MADVX_RECLAIM_ERROR,		/* a call failed for every entry: report.err */
	MADVX_RECLAIM_DRY_RUN,		/* MADVX_RECLAIM_DRYRUN: planned, nothing advised */
};

/* Counters and state of one madvx_reclaim(), final or in progress. */
struct madvx_reclaim_report {
	size_t size;			/* sizeof(struct madvx_reclaim_report) */
	uint64_t planned_bytes;		/* bytes of the filtered VMAs (up to the budget) */
	uint64_t planned_vmas;
	uint64_t bytes;			/* bytes the kernel advised */
	uint64_t calls;			/* process_madvise() calls */
	uint64_t entries;		/* iovec entries passed */
	uint64_t vmas_changed;		/* planned ranges found unmapped/remapped before their call */
	uint64_t failed_entries;	/* entries the kernel refused */
	uint64_t errors[64];		/* failed entries by errno (< 64; others in [0]) */
	uint64_t max_call_ns;		/* longest call (the target's mmap_lock is held that long) */
	uint64_t calls_over_bound;	/* calls longer than opts.max_lock_us */
	uint64_t call_ns;		/* total time inside process_madvise() */
	uint64_t elapsed_ns;		/* wall time of madvx_reclaim() */
	uint64_t plan_ns;		/* of which enumerating and planning */
	/* From /proc/PID/smaps_rollup, bytes; all 0 with MADVX_RECLAIM_NO_ROLLUP. */
	uint64_t rss_before, swap_before, pss_before;
	uint64_t rss_after, swap_after, pss_after;
	uint32_t last_entries;		/* entries in the latest call */
	int32_t stop;			/* enum madvx_reclaim_stop */
	int32_t err;			/* 0 or the -errno behind stop */
	/* What this reclaim used, defaults resolved (0 until opts are accepted). */
	uint32_t max_lock_us;		/* the bound on one call */
	uint32_t pause_us;		/* the gap after each call; 0: none */
};

/* Called after every call with the running report; nonzero cancels. */
typedef int (*madvx_reclaim_progress_fn)(void *ctx, const struct madvx_reclaim_report *r);

#define MADVX_RECLAIM_DRYRUN	(1U << 0)	/* plan and report, advise nothing */
#define MADVX_RECLAIM_NO_ROLLUP	(1U << 1)	/* skip smaps_rollup (it walks every page table) */
#define MADVX_RECLAIM_NO_PAUSE	(1U << 2)	/* back-to-back calls: no gap for the target's writers */

/*
 * What max_lock_us and pause_us 0 mean (measured: BENCHMARKS.md, p8 sweep):
 * calls bounded to 300 us; after each, a 300 us gap for MADV_COLD and a
 * 50 us gap for MADV_PAGEOUT, which makes about four times the calls per
 * GiB (its pages are written out in the call), so that a longer gap would
 * multiply its wall time.
 */
#define MADVX_RECLAIM_DEFAULT_MAX_LOCK_US	300
#define MADVX_RECLAIM_DEFAULT_PAUSE_US		300	/* MADV_COLD */
#define MADVX_RECLAIM_DEFAULT_PAUSE_US_PAGEOUT	50

struct madvx_reclaim_opts {
	size_t size;			/* sizeof(struct madvx_reclaim_opts) */
	int32_t advice;			/* MADV_COLD (0 = default) or MADV_PAGEOUT */
	uint32_t flags;			/* MADVX_RECLAIM_* */
	uint64_t include;		/* VMAs with any of these MADVX_VMA_*; 0 = ANON | FILE */
	uint64_t exclude;		/* and none of these; LOCKED, HUGETLB, SPECIAL always */
	uint64_t start, end;		/* only [start, end); end 0 = the whole address space */
	uint64_t budget;		/* stop after advising this many bytes; 0 = no limit */
	uint32_t max_lock_us;		/* bound on one call (mmap_lock hold); 0 = default */
	uint32_t pause_us;		/* gap after each call; 0 = default; none: NO_PAUSE */
	uint32_t max_entries;		/* iovec entries per call, <= 1024; 0 = 1024 */
	uint32_t __pad;
	madvx_reclaim_progress_fn progress;	/* optional */
	void *progress_ctx;
};

/*
 * madvx_reclaim - deactivate (MADV_COLD) or page out (MADV_PAGEOUT) the
 * filtered VMAs of @target, in address order, without holding the target's
 * mmap_lock longer than opts->max_lock_us per call:
 *  - the VMAs are enumerated and filtered first (see madvx_target_vma_next;
 *    past 32 VMAs from one read of /proc/PID/maps, cheaper per VMA);
 *  - each call's bytes come from the rate (bytes per ns) measured on the
 *    calls so far, adapted after every call (a call that overran the bound
 *    cuts the rate at once); large VMAs are advised in pieces;
 *  - after each call it sleeps opts->pause_us (default 300 us for COLD,
 *    50 us for PAGEOUT), so that a writer of the target woken by the
 *    call's end takes the lock before the next call could steal it (rwsem
 *    reader lock stealing lasts until the writer's 4-8 ms handoff timeout);
 *    MADVX_RECLAIM_NO_PAUSE: no gap;
 *  - before each call every entry is looked up again (lines of
 *    /proc/PID/maps read for that call, or PROCMAP_QUERY): a range unmapped
 *    or replaced by a mapping that no longer passes the filter is skipped
 *    (vmas_changed), so advice never reaches memory outside the filtered
 *    VMAs except a mapping made in the microseconds between that look-up
 *    and the call; and never another process (the pidfd); a target that
 *    exited or called execve() is found by that look-up or by the call;
 *  - a short return is resolved to the failing entry, which is retried
 *    alone for its errno (counted in errors[]) and skipped; the call goes on
 *    after it.
 * @opts may be NULL (COLD of every anonymous and file VMA). @report may be
 * NULL; when given (report->size set) it is filled in every case, also on
 * error.
 * Returns 0 (stop COMPLETE, CHANGED, BUDGET, CANCELLED, DRY_RUN), or
 * -ESRCH (the target exited: stop EXITED, partial report), -EPERM (no
 * CAP_SYS_NICE), -EACCES (no ptrace access), -EINVAL (bad opts; or advice
 * not accepted remotely by this kernel), -ENOSYS (no process_madvise),
 * -E2BIG (unknown nonzero opts fields), -ENOMEM.
 */
MADVX_API int madvx_reclaim(struct madvx_target *target,
			    const struct madvx_reclaim_opts *opts,
			    struct madvx_reclaim_report *report);

/* "complete", "changed", "budget", "cancelled", "exited", "error", "dry-run"; NULL if unknown. */
MADVX_API const char *madvx_reclaim_stop_name(int stop);

#ifdef __cplusplus
}
#endif

#endif /* MADVX_H */
