/* SPDX-License-Identifier: MIT */
/*
 * example-rss.h - the resident memory of the program's own mappings, for the
 * examples' "RSS back near the base after free" checks.
 *
 * Plain builds read /proc/self/statm. Under AddressSanitizer that number
 * also counts ASan's shadow (one byte per eight of the address space the
 * program touched), which an allocator's madvise() never gives back: on
 * kernels that fault a private page in for a read (no shared zero page, as
 * on the PVM guests CI runs on) reading freed memory's shadow alone pins
 * 64 MiB for je-churn. There the sum of Rss over /proc/self/smaps skips the
 * shadow range that ASan reports (__asan_get_shadow_mapping()), so the check
 * keeps measuring the allocator and still fails when it keeps memory.
 */
#ifndef MADVX_EXAMPLE_RSS_H
#define MADVX_EXAMPLE_RSS_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(__SANITIZE_ADDRESS__)
#define __SANITIZE_ADDRESS__ 1
#endif
#endif

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>

/*
 * ASan maps application address A to shadow (A >> scale) + offset, for
 * every A up to the top of the user address space, which the main stack
 * sits just below: everything mapped from offset up to the shadow of the
 * stack (plus slack for the rest of the stack) is ASan's, never the
 * program's (ASan keeps the program out of that range).
 */
static inline int example_rss_is_shadow(uintptr_t start)
{
	size_t scale = 0, offset = 0;
	uintptr_t top = (uintptr_t)__builtin_frame_address(0);

	__asan_get_shadow_mapping(&scale, &offset);
	return start >= offset &&
	       start < ((top >> scale) + offset + ((uintptr_t)1 << 20));
}

static inline double example_rss_bytes(void)
{
	char line[512];
	unsigned long long lo = 0, hi = 0, kib, sum = 0;
	int shadow = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2)
			shadow = example_rss_is_shadow((uintptr_t)lo);
		else if (sscanf(line, "Rss: %llu kB", &kib) == 1 && !shadow)
			sum += kib;
	}
	fclose(f);
	return (double)sum * 1024;
}
#else
static inline double example_rss_bytes(void)
{
	unsigned long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (double)res * (double)sysconf(_SC_PAGESIZE);
}
#endif

#endif
