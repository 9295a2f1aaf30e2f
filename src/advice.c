// SPDX-License-Identifier: MIT
/*
 * The advice API: names, the list, and the lock model - which lock madvise()
 * takes for each advice on the running kernel (the 7.3 table of advtab.c,
 * adjusted by the store's answers).
 */
#include <errno.h>
#include <sys/mman.h>

#include "advice.h"
#include "probe.h"

MADVX_API const char *madvx_advice_name(int advice)
{
	int i = madvx_advice_index(advice);

	return i < 0 ? NULL : __madvx_advices[i].name;
}

MADVX_API int madvx_advice_list(int *out, int max)
{
	for (int i = 0; i < max && i < (int)__madvx_nadvices; i++)
		out[i] = __madvx_advices[i].advice;
	return (int)__madvx_nadvices;
}

/*
 * The 7.3 table, adjusted for older kernels: before 6.17 (or with
 * per_vma_madvise disabled) the per-VMA advices took mmap_read_lock; and for
 * kernels with the kernel/patches series, where MADV_COLD and MADV_PAGEOUT
 * take the per-VMA lock too.
 */
static enum madvx_lock advice_lock_for(const struct advice_desc *d)
{
	if (d->lock == MADVX_LOCK_PER_VMA && !madvx_has(MADVX_FEAT_PER_VMA_MADVISE))
		return MADVX_LOCK_MMAP_READ;
	/*
	 * The guard advices joined the per-VMA path after 6.18 (measured there
	 * with madvx-probe --verify: mmap_read_lock even inside one VMA) and
	 * are on it in 7.3's get_lock_mode(); the release in between is not
	 * pinned down, so claim the fast path only from 7.3.
	 */
	if ((d->advice == MADV_GUARD_INSTALL || d->advice == MADV_GUARD_REMOVE) &&
	    __madvx_probe()->version < MADVX_KVER(7, 3, 0))
		return MADVX_LOCK_MMAP_READ;
	if ((d->advice == MADV_COLD || d->advice == MADV_PAGEOUT) &&
	    __madvx_plan_feature(MADVX_FEAT_PER_VMA_COLD_PAGEOUT))
		return MADVX_LOCK_PER_VMA;
	return d->lock;
}

/* COLD and PAGEOUT: their lock may need the per-boot cache (read on first need). */
MADVX_HOT bool __madvx_advice_lock_measured(int index)
{
	return index == madvx_advice_index(MADV_COLD) ||
	       index == madvx_advice_index(MADV_PAGEOUT);
}

MADVX_HOT enum madvx_lock __madvx_advice_lock_at(int index)
{
	if (index < 0 || index >= (int)__madvx_nadvices)
		return MADVX_LOCK_UNKNOWN;
	return advice_lock_for(&__madvx_advices[index]);
}

MADVX_HOT MADVX_API enum madvx_lock madvx_advice_lock(int advice)
{
	return __madvx_advice_lock_at(madvx_advice_index(advice));
}

MADVX_API const char *madvx_lock_name(enum madvx_lock lock)
{
	switch (lock) {
	case MADVX_LOCK_PER_VMA:
		return "per-vma";
	case MADVX_LOCK_MMAP_READ:
		return "mmap-read";
	case MADVX_LOCK_MMAP_WRITE:
		return "mmap-write";
	default:
		return "unknown";
	}
}
