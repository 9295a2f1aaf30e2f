/* SPDX-License-Identifier: MIT */
/*
 * Macros and inline helpers every file of the library may use. Declares no
 * function of any file: each header below it declares its own file's.
 */
#ifndef MADVX_UTIL_H
#define MADVX_UTIL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>

#include "madvx.h"
#include "uapi-compat.h"

#define MADVX_HIDDEN __attribute__((visibility("hidden")))

/*
 * On the path of "create a batch, add a hint, flush" (every flush runs it,
 * a process's first use once): -freorder-functions (-O2) groups these in
 * .text.hot, so that a fresh process's first use executes 3 text pages of
 * the library instead of 7, scattered over its 14. Each first touch of a
 * page costs 1-3 us on a paravirtualised host (BENCHMARKS.md, p6).
 */
#define MADVX_HOT __attribute__((hot))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MADVX_KVER(a, b, c) (((a) << 16) | ((b) << 8) | (c))

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

/* A decimal number at *@p after blanks; *@p ends past it. */
static inline uint64_t madvx_parse_dec(const char **p)
{
	uint64_t v = 0;

	while (**p == ' ' || **p == '\t')
		(*p)++;
	for (; **p >= '0' && **p <= '9'; (*p)++)
		v = v * 10 + (uint64_t)(**p - '0');
	return v;
}

static inline uint64_t madvx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Sized structs (include/madvx.h): the caller's size is the first member,
 * and a struct grows at its end only.
 *
 * madvx_opts_in - take options @src of @known bytes or another version:
 * -EINVAL when @src is smaller than @min (the fields every version has),
 * -E2BIG when it is larger and a byte we do not know is set (a field of a
 * newer header that this build cannot honour). Else copies what both know
 * over @dst (the defaults, size included) and returns 0.
 */
static inline int madvx_opts_in(void *dst, size_t known, const void *src, size_t min)
{
	size_t size = *(const size_t *)src;

	if (size < min)
		return -EINVAL;
	for (size_t i = known; i < size; i++)
		if (((const unsigned char *)src)[i])
			return -E2BIG;
	memcpy(dst, src, size < known ? size : known);
	return 0;
}

/*
 * madvx_copy_out - fill the caller's @dst from @src (@src_size bytes): the
 * bytes both versions know, past the size member; the caller's size and
 * anything past our struct stay untouched. @dst must hold a size of at least
 * sizeof(size_t) (callers check their own minimum). Returns the bytes
 * covered, size member included.
 */
static inline size_t madvx_copy_out(void *dst, const void *src, size_t src_size)
{
	size_t size = *(const size_t *)dst, n = size < src_size ? size : src_size;

	memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
	       n - sizeof(size_t));
	return n;
}

#endif /* MADVX_UTIL_H */
