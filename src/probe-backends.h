/* SPDX-License-Identifier: MIT */
/*
 * The probes that live with the code of their kernel interface (one home per
 * interface): io_uring in iouring.c, userfaultfd in uffd.c. Each runs once,
 * on the first use of an API that needs it, and merges its answer into the
 * store (probe.c); the store never calls them.
 */
#ifndef MADVX_PROBE_BACKENDS_H
#define MADVX_PROBE_BACKENDS_H

#include "internal.h"

#ifdef MADVX_HAVE_LIBURING
MADVX_HIDDEN void __madvx_iouring_probe_once(void);
#else
/* Built without liburing: every io_uring feature reads as absent. */
static inline void __madvx_iouring_probe_once(void)
{
}
#endif

MADVX_HIDDEN void __madvx_uffd_probe_once(void);

#endif /* MADVX_PROBE_BACKENDS_H */
