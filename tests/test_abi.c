// SPDX-License-Identifier: MIT
/*
 * ABI pins (libfuse's test_abi.c, with offsets): the size and the offset of
 * every field of every public struct on LP64 Linux, checked so that a field
 * is neither moved nor resized by accident, and that fields tile each struct
 * with no implicit padding (a hole cannot be given meaning later: old
 * callers leave garbage in it). Also: MADVX_ADV_* equal the kernel's MADV_*.
 * A change here is an ABI change: bump the soname or add at the end only
 * (docs/ABI.md).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <madvx.h>

#include "uapi-compat.h"

static int failed;

struct field {
	const char *name;
	size_t off, size, want_off, want_size;
};

#define F(type, member, o, s) \
	{ #member, offsetof(struct type, member), sizeof(((struct type *)0)->member), o, s }

/* Every field at its pinned offset and size, each starting where the last ended. */
static void check_struct(const char *name, size_t size, size_t want_size,
			 const struct field *f, size_t n)
{
	size_t end = 0;

	if (size != want_size) {
		printf("FAIL: sizeof(struct %s) = %zu, pinned %zu\n", name, size, want_size);
		failed = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (f[i].off != f[i].want_off || f[i].size != f[i].want_size) {
			printf("FAIL: %s.%s at %zu size %zu, pinned %zu size %zu\n", name,
			       f[i].name, f[i].off, f[i].size, f[i].want_off, f[i].want_size);
			failed = 1;
		}
		if (f[i].off != end) {
			printf("FAIL: %s: %zu bytes of implicit padding before .%s\n", name,
			       f[i].off - end, f[i].name);
			failed = 1;
		}
		end = f[i].off + f[i].size;
	}
	if (end != size) {
		printf("FAIL: %s: %zu bytes of implicit padding at the end\n", name, size - end);
		failed = 1;
	}
}

#define CHECK(type, size, ...) do {						\
	const struct field f_[] = { __VA_ARGS__ };				\
	check_struct(#type, sizeof(struct type), size, f_, sizeof(f_) / sizeof(f_[0])); \
} while (0)

#define ADV(name) do {								\
	if (MADVX_ADV_##name != MADV_##name) {					\
		printf("FAIL: MADVX_ADV_" #name " = %d, MADV_" #name " = %d\n",	\
		       MADVX_ADV_##name, MADV_##name);				\
		failed = 1;							\
	}									\
	if (!madvx_advice_name(MADVX_ADV_##name)) {				\
		printf("FAIL: the library does not know MADVX_ADV_" #name "\n");	\
		failed = 1;							\
	}									\
	nadv++;									\
} while (0)

/* enum madvx_feature: values are ABI (docs/ABI.md), retired ones included. */
#define FEAT(name, val) do {							\
	if (MADVX_FEAT_##name != (val)) {					\
		printf("FAIL: MADVX_FEAT_" #name " = %d, pinned %d\n",		\
		       MADVX_FEAT_##name, (val));				\
		failed = 1;							\
	}									\
} while (0)

static void check_features(void)
{
	FEAT(PROCESS_MADVISE, 0); FEAT(PIDFD_SELF, 1); FEAT(PIDFD_OPEN, 2);
	FEAT(PROCMAP_QUERY, 3); FEAT(PER_VMA_MADVISE, 4); FEAT(VMA_LOCK_STATS, 5);
	FEAT(IO_URING_BUILT, 6); FEAT(IO_URING, 7); FEAT(IO_URING_MADVISE, 8);
	FEAT(IO_URING_MADVISE64, 9); FEAT(UFFD, 10); FEAT(UFFD_USER_MODE_ONLY, 11);
	FEAT(UFFD_DEV, 12); FEAT(UFFD_MOVE, 13); FEAT(UFFD_POISON, 14); FEAT(UFFD_WP, 15);
	FEAT(UFFD_WP_ASYNC, 16); FEAT(UFFD_MINOR_SHMEM, 17); FEAT(MADVISE_VMA_STATS, 18);
	FEAT(PER_VMA_COLD_PAGEOUT, 19); FEAT(PER_VMA_UFFD, 20);
	if (MADVX_FEAT__COUNT != 21) {
		printf("FAIL: MADVX_FEAT__COUNT = %d: a new feature needs its pin here\n",
		       MADVX_FEAT__COUNT);
		failed = 1;
	}
	/* Retired: the value stays reserved, answers 0 and keeps a name. */
	if (madvx_feature_supported(MADVX_FEAT_MADVISE_VMA_STATS) != 0 ||
	    !madvx_feature_name(MADVX_FEAT_MADVISE_VMA_STATS)) {
		printf("FAIL: the retired MADVX_FEAT_MADVISE_VMA_STATS answers %d, name %s\n",
		       madvx_feature_supported(MADVX_FEAT_MADVISE_VMA_STATS),
		       madvx_feature_name(MADVX_FEAT_MADVISE_VMA_STATS) ? "set" : "NULL");
		failed = 1;
	}
}

int main(void)
{
	int nadv = 0;

	if (sizeof(void *) != 8 || sizeof(long) != 8) {
		printf("SKIP: the layouts are pinned for LP64 (this is not)\n");
		return 77;
	}

	CHECK(madvx_kernel_info, 144,
	      F(madvx_kernel_info, size, 0, 8),
	      F(madvx_kernel_info, release, 8, 65),
	      F(madvx_kernel_info, __pad0, 73, 3),
	      F(madvx_kernel_info, version, 76, 4),
	      F(madvx_kernel_info, features, 80, 8),
	      F(madvx_kernel_info, disabled, 88, 8),
	      F(madvx_kernel_info, uffd_features, 96, 8),
	      F(madvx_kernel_info, uffd_ioctls, 104, 8),
	      F(madvx_kernel_info, io_uring_disabled, 112, 4),
	      F(madvx_kernel_info, unprivileged_userfaultfd, 116, 4),
	      F(madvx_kernel_info, thp, 120, 4),
	      F(madvx_kernel_info, __pad1, 124, 4),
	      F(madvx_kernel_info, assumed, 128, 8),
	      F(madvx_kernel_info, measured, 136, 8));

	CHECK(madvx_hint, 56,
	      F(madvx_hint, addr, 0, 8),
	      F(madvx_hint, len, 8, 8),
	      F(madvx_hint, advice, 16, 4),
	      F(madvx_hint, err, 20, 4),
	      F(madvx_hint, done, 24, 8),
	      F(madvx_hint, seq, 32, 8),
	      F(madvx_hint, __reserved, 40, 16));

	CHECK(madvx_release_opts, 24,
	      F(madvx_release_opts, size, 0, 8),
	      F(madvx_release_opts, advice, 8, 4),
	      F(madvx_release_opts, __reserved0, 12, 4),
	      F(madvx_release_opts, flush_bytes, 16, 8));
	CHECK(madvx_batch_opts, 80,
	      F(madvx_batch_opts, size, 0, 8),
	      F(madvx_batch_opts, capacity, 8, 8),
	      F(madvx_batch_opts, flags, 16, 4),
	      F(madvx_batch_opts, __reserved0, 20, 4),
	      F(madvx_batch_opts, storage, 24, 8),
	      F(madvx_batch_opts, storage_size, 32, 8),
	      F(madvx_batch_opts, on_error, 40, 8),
	      F(madvx_batch_opts, on_error_ctx, 48, 8),
	      F(madvx_batch_opts, on_result, 56, 8),
	      F(madvx_batch_opts, on_result_ctx, 64, 8),
	      F(madvx_batch_opts, target, 72, 8));

	CHECK(madvx_stats, 632,
	      F(madvx_stats, size, 0, 8),
	      F(madvx_stats, hints, 8, 8),
	      F(madvx_stats, merged, 16, 8),
	      F(madvx_stats, split, 24, 8),
	      F(madvx_stats, flushes, 32, 8),
	      F(madvx_stats, syscalls, 40, 8),
	      F(madvx_stats, vector_entries, 48, 8),
	      F(madvx_stats, bytes, 56, 8),
	      F(madvx_stats, fallback_entries, 64, 8),
	      F(madvx_stats, madvise_fallbacks, 72, 8),
	      F(madvx_stats, vma_queries, 80, 8),
	      F(madvx_stats, retries, 88, 8),
	      F(madvx_stats, failed, 96, 8),
	      F(madvx_stats, errors, 104, 512),
	      F(madvx_stats, vma_skipped, 616, 8),
	      F(madvx_stats, cancelled, 624, 8));

	CHECK(madvx_uffd_opts, 32,
	      F(madvx_uffd_opts, size, 0, 8),
	      F(madvx_uffd_opts, features, 8, 8),
	      F(madvx_uffd_opts, optional_features, 16, 8),
	      F(madvx_uffd_opts, flags, 24, 4),
	      F(madvx_uffd_opts, __reserved0, 28, 4));

	CHECK(madvx_uffd_item, 64,
	      F(madvx_uffd_item, dst, 0, 8),
	      F(madvx_uffd_item, src, 8, 8),
	      F(madvx_uffd_item, len, 16, 8),
	      F(madvx_uffd_item, done, 24, 8),
	      F(madvx_uffd_item, existed, 32, 8),
	      F(madvx_uffd_item, err, 40, 4),
	      F(madvx_uffd_item, __reserved0, 44, 4),
	      F(madvx_uffd_item, __reserved, 48, 16));

	CHECK(madvx_uffd_event, 48,
	      F(madvx_uffd_event, type, 0, 4),
	      F(madvx_uffd_event, __reserved0, 4, 4),
	      F(madvx_uffd_event, arg, 8, 40));
	CHECK(madvx_uffd_event, 48,
	      F(madvx_uffd_event, type, 0, 4),
	      F(madvx_uffd_event, __reserved0, 4, 4),
	      F(madvx_uffd_event, arg.fault.flags, 8, 8),
	      F(madvx_uffd_event, arg.fault.addr, 16, 8),
	      F(madvx_uffd_event, arg.fault.tid, 24, 4),
	      F(madvx_uffd_event, arg.fault.__reserved0, 28, 4),
	      F(madvx_uffd_event, arg.__reserved[3], 32, 8),
	      F(madvx_uffd_event, arg.__reserved[4], 40, 8));
	CHECK(madvx_uffd_event, 48,
	      F(madvx_uffd_event, type, 0, 4),
	      F(madvx_uffd_event, __reserved0, 4, 4),
	      F(madvx_uffd_event, arg.fork.fd, 8, 4),
	      F(madvx_uffd_event, arg.fork.__reserved0, 12, 4),
	      F(madvx_uffd_event, arg.__reserved[1], 16, 8),
	      F(madvx_uffd_event, arg.__reserved[2], 24, 8),
	      F(madvx_uffd_event, arg.__reserved[3], 32, 8),
	      F(madvx_uffd_event, arg.__reserved[4], 40, 8));
	CHECK(madvx_uffd_event, 48,
	      F(madvx_uffd_event, type, 0, 4),
	      F(madvx_uffd_event, __reserved0, 4, 4),
	      F(madvx_uffd_event, arg.remove.start, 8, 8),
	      F(madvx_uffd_event, arg.remove.end, 16, 8),
	      F(madvx_uffd_event, arg.__reserved[2], 24, 8),
	      F(madvx_uffd_event, arg.__reserved[3], 32, 8),
	      F(madvx_uffd_event, arg.__reserved[4], 40, 8));
	CHECK(madvx_uffd_event, 48,
	      F(madvx_uffd_event, type, 0, 4),
	      F(madvx_uffd_event, __reserved0, 4, 4),
	      F(madvx_uffd_event, arg.remap.from, 8, 8),
	      F(madvx_uffd_event, arg.remap.to, 16, 8),
	      F(madvx_uffd_event, arg.remap.len, 24, 8),
	      F(madvx_uffd_event, arg.__reserved[3], 32, 8),
	      F(madvx_uffd_event, arg.__reserved[4], 40, 8));

	CHECK(madvx_uffd_handler, 40,
	      F(madvx_uffd_handler, size, 0, 8),
	      F(madvx_uffd_handler, fault, 8, 8),
	      F(madvx_uffd_handler, event, 16, 8),
	      F(madvx_uffd_handler, arg, 24, 8),
	      F(madvx_uffd_handler, batch, 32, 4),
	      F(madvx_uffd_handler, __reserved0, 36, 4));

	CHECK(madvx_uffd_stats, 64,
	      F(madvx_uffd_stats, size, 0, 8),
	      F(madvx_uffd_stats, ioctls, 8, 8),
	      F(madvx_uffd_stats, bytes, 16, 8),
	      F(madvx_uffd_stats, existed, 24, 8),
	      F(madvx_uffd_stats, eagain, 32, 8),
	      F(madvx_uffd_stats, events, 40, 8),
	      F(madvx_uffd_stats, faults, 48, 8),
	      F(madvx_uffd_stats, vma_splits, 56, 8));

	CHECK(madvx_async_opts, 48,
	      F(madvx_async_opts, size, 0, 8),
	      F(madvx_async_opts, backend, 8, 4),
	      F(madvx_async_opts, max_tickets, 12, 4),
	      F(madvx_async_opts, queue_depth, 16, 4),
	      F(madvx_async_opts, __reserved0, 20, 4),
	      F(madvx_async_opts, ring, 24, 8),
	      F(madvx_async_opts, on_cqe, 32, 8),
	      F(madvx_async_opts, on_cqe_ctx, 40, 8));

	ADV(NORMAL); ADV(RANDOM); ADV(SEQUENTIAL); ADV(WILLNEED); ADV(DONTNEED);
	ADV(FREE); ADV(REMOVE); ADV(DONTFORK); ADV(DOFORK); ADV(MERGEABLE);
	ADV(UNMERGEABLE); ADV(HUGEPAGE); ADV(NOHUGEPAGE); ADV(DONTDUMP); ADV(DODUMP);
	ADV(WIPEONFORK); ADV(KEEPONFORK); ADV(COLD); ADV(PAGEOUT); ADV(POPULATE_READ);
	ADV(POPULATE_WRITE); ADV(DONTNEED_LOCKED); ADV(COLLAPSE); ADV(GUARD_INSTALL);
	ADV(GUARD_REMOVE);
	check_features();
	/* Every advice the library knows has its constant. */
	if (madvx_advice_list(NULL, 0) != nadv) {
		printf("FAIL: the library knows %d advices, <madvx.h> names %d\n",
		       madvx_advice_list(NULL, 0), nadv);
		failed = 1;
	}
	if (!failed)
		printf("ABI: every pinned size and offset holds, no implicit padding, %d MADVX_ADV_*, "
		       "%d MADVX_FEAT_*\n", nadv, MADVX_FEAT__COUNT);
	return failed;
}
