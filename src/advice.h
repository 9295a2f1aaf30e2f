/* SPDX-License-Identifier: MIT */
/* advice.c: the advice API and the lock model of the running kernel. */
#ifndef MADVX_ADVICE_H
#define MADVX_ADVICE_H

#include "advtab.h"

/*
 * The lock madvise() takes on this kernel for the advice at @index of the
 * table (what madvx_advice_lock() answers for it), or MADVX_LOCK_UNKNOWN.
 */
MADVX_HIDDEN enum madvx_lock __madvx_advice_lock_at(int index);

/*
 * Whether that answer may need the per-boot cache (COLD, PAGEOUT): asking
 * reads it on the first need, so a planner asks only when such a hint comes.
 */
MADVX_HIDDEN bool __madvx_advice_lock_measured(int index);

#endif /* MADVX_ADVICE_H */
