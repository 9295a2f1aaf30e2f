/* SPDX-License-Identifier: MIT */
/*
 * The advice table (advtab.c): data only, below the store, so that the
 * probe and the lock model (advice.c) both read it.
 */
#ifndef MADVX_ADVTAB_H
#define MADVX_ADVTAB_H

#include "internal.h"

/*
 * The advices the library knows, with the lock madvise() takes for each in
 * Linux 7.3 (mm/madvise.c get_lock_mode()). Kernels before 6.17 took
 * mmap_read_lock where 7.3 has the per-VMA lock; see advice_lock_for().
 */
struct advice_desc {
	int advice;
	const char *name;
	enum madvx_lock lock;
	bool remote_valid;	/* process_madvise before 6.13 accepted it */
};

MADVX_HIDDEN extern const struct advice_desc __madvx_advices[];
MADVX_HIDDEN extern const size_t __madvx_nadvices;

#endif /* MADVX_ADVTAB_H */
