/* SPDX-License-Identifier: MIT */
/*
 * pervma-measure: does this kernel advise single-VMA MADV_COLD/MADV_PAGEOUT,
 * and MADV_DONTNEED on a VMA registered with a userfaultfd context without
 * UFFD_EVENT_REMOVE, without taking mmap_lock? Measured with the mmap_lock
 * tracepoints (locktrace), and written to the per-boot cache the library's
 * probe reads (MADVX_PROBE_CACHE, default MADVX_PROBE_CACHE_PATH). Used by
 * madvx-probe --measure and the tests; not part of libmadvx.
 */
#ifndef MADVX_PERVMA_MEASURE_H
#define MADVX_PERVMA_MEASURE_H

#include <stdbool.h>

#include "locktrace.h"

struct pervma_result {
	bool cold_pageout;	/* MADV_COLD and MADV_PAGEOUT: no mmap_lock */
	bool uffd;		/* MADV_DONTNEED on a featureless uffd VMA: no mmap_lock */
	bool uffd_tried;	/* userfaultfd was usable for the measurement */
	unsigned long long cold_acq, pageout_acq, uffd_acq;	/* fewest of the trials */
};

/* Measure with an open locktrace. Returns 0 or -errno. */
int pervma_measure(struct locktrace *lt, struct pervma_result *out);

/* The cache path the library reads: $MADVX_PROBE_CACHE or the default. */
const char *pervma_cache_path(void);

/*
 * Write @r to @path for this boot (atomically: a temporary file renamed
 * over it, mode 0644, creating the directory). Returns 0 or -errno.
 */
int pervma_cache_write(const char *path, const struct pervma_result *r);

#endif /* MADVX_PERVMA_MEASURE_H */
