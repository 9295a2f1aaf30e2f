// SPDX-License-Identifier: MIT
/*
 * The public feature API: each question runs the probe that answers it, and
 * only that one (probe.c's groups, the backends' own probes). The store
 * (probe.c) sits below every user of it; this file sits above the backends,
 * so the store never calls up into them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "advtab.h"
#include "iouring.h"
#include "probe.h"
#include "uffd.h"

static void probe_for(enum madvx_feature feat)
{
	switch (__madvx_feature_group(feat)) {
	case MADVX_PG_UFFD:
		__madvx_uffd_probe_once();
		break;
	case MADVX_PG_IOURING:
		__madvx_iouring_probe_once();
		break;
	case -1:
		break;
	default:
		__madvx_probe_group((enum madvx_probe_group)__madvx_feature_group(feat), NULL);
		break;
	}
}

MADVX_API int madvx_feature_supported(enum madvx_feature feat)
{
	if ((unsigned int)feat >= MADVX_FEAT__COUNT)
		return -EINVAL;
	probe_for(feat);
	return madvx_has(feat);
}

MADVX_API int madvx_advice_supported(int advice)
{
	int i = madvx_advice_index(advice);

	if (i < 0)
		return -EINVAL;
	__madvx_probe_group(MADVX_PG_ADVICES, NULL);
	return madvx_has(MADVX_FEAT_PROCESS_MADVISE) &&
	       (__madvx_pmadv_advices() & (1ULL << i));
}

/* Everything: every group runs (madvx-probe, diagnostics). */
static void probe_all(void)
{
	for (int f = 0; f < MADVX_FEAT__COUNT; f++)
		probe_for((enum madvx_feature)f);
	__madvx_probe_group(MADVX_PG_ADVICES, NULL);
	__madvx_probe_group(MADVX_PG_INFO, NULL);
}

MADVX_API int madvx_kernel_info_get(struct madvx_kernel_info *info)
{
	const struct madvx_probe_state *st;
	struct madvx_kernel_info full = { .size = sizeof(full) };

	if (!info || info->size < offsetof(struct madvx_kernel_info, release))
		return -EINVAL;
	probe_all();
	st = __madvx_probe();
	memcpy(full.release, st->release, sizeof(full.release));
	full.version = st->version;
	full.features = atomic_load_explicit(&st->features, memory_order_relaxed);
	full.disabled = st->disabled;
	full.uffd_features = st->uffd_features;
	full.uffd_ioctls = st->uffd_ioctls;
	full.io_uring_disabled = st->io_uring_disabled;
	full.unprivileged_userfaultfd = st->unprivileged_userfaultfd;
	full.thp = st->thp;
	full.assumed = st->assumed & ~st->disabled;
	full.measured = atomic_load_explicit(&st->measured, memory_order_relaxed) &
			~st->disabled;

	madvx_copy_out(info, &full, sizeof(full));
	return 0;
}
