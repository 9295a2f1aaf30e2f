/* SPDX-License-Identifier: MIT */
/*
 * Probes that live with the code of their kernel interface (one home per
 * interface): io_uring in iouring.c, userfaultfd in uffd.c. Each sets its
 * bits in st->features, skipping what st->disabled forces off.
 */
#ifndef MADVX_PROBE_BACKENDS_H
#define MADVX_PROBE_BACKENDS_H

#include "internal.h"

#ifdef MADVX_HAVE_LIBURING
MADVX_HIDDEN void __madvx_iouring_probe(struct madvx_probe_state *st);
#else
/* Built without liburing: every io_uring feature reads as absent. */
static inline void __madvx_iouring_probe(struct madvx_probe_state *st)
{
	(void)st;
}
#endif

MADVX_HIDDEN void __madvx_uffd_probe(struct madvx_probe_state *st);

#endif /* MADVX_PROBE_BACKENDS_H */
