/* SPDX-License-Identifier: MIT */
/* uffd.c: the userfaultfd probe and handle. */
#ifndef MADVX_UFFD_H
#define MADVX_UFFD_H

#include "util.h"

/*
 * The userfaultfd probe lives with the code of its interface: run once, on
 * the first use of an API that needs it, it merges its answer into the store
 * (probe.c), which never calls it.
 */
MADVX_HIDDEN void __madvx_uffd_probe_once(void);

#endif /* MADVX_UFFD_H */
