/* SPDX-License-Identifier: MIT */
/*
 * tempswap: a temporary swap file for measurements and tests that need swap
 * (anonymous MADV_PAGEOUT) on machines without any. A measuring aid for
 * madvx-bench p8 and test_reclaim; not part of libmadvx.
 *
 * The file is made in /var/tmp (a disk filesystem: swap files on tmpfs or
 * overlayfs are refused), preallocated with posix_fallocate() and given a
 * swap header written here (no mkswap needed), then swapon()ed. Needs root
 * (CAP_SYS_ADMIN). tempswap_off() swaps it off and removes it; tempswap_on()
 * first swaps off and removes the files of processes that died without it.
 */
#ifndef MADVX_TEMPSWAP_H
#define MADVX_TEMPSWAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tempswap {
	char path[64];
	bool on;
};

/*
 * Swap off and remove the files of runs that died before tempswap_off()
 * (a test killed by its timeout): call before deciding whether swap exists.
 */
void tempswap_reap(void);

/* Free swap in bytes (/proc/meminfo SwapFree). */
uint64_t tempswap_free(void);

/*
 * Add a swap file of @bytes. 0, or -1 with the reason in @why (not root,
 * no space, filesystem refuses swap files, ...).
 */
int tempswap_on(struct tempswap *s, uint64_t bytes, char *why, size_t len);

/* swapoff and unlink; no-op when not on. */
void tempswap_off(struct tempswap *s);

#endif /* MADVX_TEMPSWAP_H */
