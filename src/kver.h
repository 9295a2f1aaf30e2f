/* SPDX-License-Identifier: MIT */
/* kver.c: the kernel's version and per-VMA lock support, from uname(). */
#ifndef MADVX_KVER_H
#define MADVX_KVER_H

#include "util.h"

struct madvx_kver {
	char release[65];	/* utsname.release, NUL-terminated */
	uint32_t version;	/* MADVX_KVER(major, minor, patch <= 255); 0: unparsable */
	bool per_vma_locks;	/* CONFIG_PER_VMA_LOCK, as far as uname tells */
};

/* Fill @k from uname(). 0 or -errno (then @k is zeroed). */
MADVX_HIDDEN int __madvx_kver_read(struct madvx_kver *k);

#endif /* MADVX_KVER_H */
