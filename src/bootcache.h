/* SPDX-License-Identifier: MIT */
/*
 * The per-boot measurement cache (see madvx.h, madvx-probe --measure):
 * answers for the planning features that only a measurement can give.
 */
#ifndef MADVX_BOOTCACHE_H
#define MADVX_BOOTCACHE_H

#include "util.h"

/*
 * This boot's key line: "boot_id <uuid>" (/proc/sys/kernel/random/boot_id),
 * or "btime <seconds>" from /proc/stat on kernels without /proc/sys
 * (CONFIG_PROC_SYSCTL=n). Returns 0 or -ENOENT.
 */
MADVX_HIDDEN int __madvx_boot_key(char *buf, size_t size);

/*
 * The cache ($MADVX_PROBE_CACHE or MADVX_PROBE_CACHE_PATH) if it is this
 * boot's and safe to trust: of the features in @which (bits into @names,
 * @count of them), sets *@measured to those it answers and returns those
 * that are on.
 */
MADVX_HIDDEN uint64_t __madvx_boot_cache_read(const char *const *names, int count,
					      uint64_t which, uint64_t *measured);

/*
 * The same, read once per process (later calls return that answer, whatever
 * they pass); lock-free and async-signal-safe. @count is at most 31.
 */
MADVX_HIDDEN uint64_t __madvx_boot_cache_once(const char *const *names, int count,
					      uint64_t which, uint64_t *measured);

#endif /* MADVX_BOOTCACHE_H */
