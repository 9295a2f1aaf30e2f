/* SPDX-License-Identifier: MIT */
/*
 * The advice table (advtab.c): data only, below the store, so that the
 * probe and the lock model (advice.c) both read it.
 */
#ifndef MADVX_ADVTAB_H
#define MADVX_ADVTAB_H

#include <sys/mman.h>

#include "util.h"

/*
 * The advices the library knows, in table order, with the lock madvise()
 * takes for each in Linux 7.3 (mm/madvise.c get_lock_mode()) and whether
 * process_madvise() before 6.13 accepted it. Kernels before 6.17 took
 * mmap_read_lock where 7.3 has the per-VMA lock; see advice_lock_for().
 * The table and its inverse (value -> index) are both made from this list.
 */
#define MADVX_ADVICES(X)						\
	X(MADV_NORMAL, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_RANDOM, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_SEQUENTIAL, MADVX_LOCK_MMAP_WRITE, false)		\
	X(MADV_WILLNEED, MADVX_LOCK_MMAP_READ, true)			\
	X(MADV_DONTNEED, MADVX_LOCK_PER_VMA, false)			\
	X(MADV_FREE, MADVX_LOCK_PER_VMA, false)				\
	X(MADV_REMOVE, MADVX_LOCK_MMAP_READ, false)			\
	X(MADV_DONTFORK, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_DOFORK, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_MERGEABLE, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_UNMERGEABLE, MADVX_LOCK_MMAP_WRITE, false)		\
	X(MADV_HUGEPAGE, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_NOHUGEPAGE, MADVX_LOCK_MMAP_WRITE, false)		\
	X(MADV_DONTDUMP, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_DODUMP, MADVX_LOCK_MMAP_WRITE, false)			\
	X(MADV_WIPEONFORK, MADVX_LOCK_MMAP_WRITE, false)		\
	X(MADV_KEEPONFORK, MADVX_LOCK_MMAP_WRITE, false)		\
	X(MADV_COLD, MADVX_LOCK_MMAP_READ, true)			\
	X(MADV_PAGEOUT, MADVX_LOCK_MMAP_READ, true)			\
	X(MADV_POPULATE_READ, MADVX_LOCK_MMAP_READ, false)		\
	X(MADV_POPULATE_WRITE, MADVX_LOCK_MMAP_READ, false)		\
	X(MADV_DONTNEED_LOCKED, MADVX_LOCK_PER_VMA, false)		\
	X(MADV_COLLAPSE, MADVX_LOCK_MMAP_READ, true)			\
	X(MADV_GUARD_INSTALL, MADVX_LOCK_PER_VMA, false)		\
	X(MADV_GUARD_REMOVE, MADVX_LOCK_PER_VMA, false)

struct advice_desc {
	int advice;
	const char *name;
	enum madvx_lock lock;
	bool remote_valid;	/* process_madvise before 6.13 accepted it */
};

MADVX_HIDDEN extern const struct advice_desc __madvx_advices[];
MADVX_HIDDEN extern const size_t __madvx_nadvices;

/* advice value -> 1 + index in the library's advice table (0: unknown). */
#define MADVX_ADVICE_MAX 103		/* MADV_GUARD_REMOVE */
MADVX_HIDDEN extern const int8_t __madvx_advice_index_of[MADVX_ADVICE_MAX + 1];

/* The advice at @index of the library's table (inverse of madvx_advice_index()). */
MADVX_HIDDEN int __madvx_advice_at(int index);

/* Index of @advice in the library's table, or -1 if unknown: O(1), on every add. */
static inline int madvx_advice_index(int advice)
{
	if ((unsigned int)advice > MADVX_ADVICE_MAX)
		return -1;
	return __madvx_advice_index_of[advice] - 1;
}

#endif /* MADVX_ADVTAB_H */
