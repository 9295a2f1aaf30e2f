/* SPDX-License-Identifier: MIT */
/*
 * madvx-probe --verify: measure, with the mmap_lock tracepoints
 * (locktrace.h), which lock a madvise() of each advice takes on the running
 * kernel, for a range inside one VMA and a range over two, on scratch
 * mappings the tool owns; shown beside madvx_advice_lock()'s prediction.
 */
#ifndef MADVX_PROBE_VERIFY_H
#define MADVX_PROBE_VERIFY_H

#include <stddef.h>

/* Set up tracing; 0, or -errno with the reason in @why (e.g. not root). */
int verify_open(char *why, size_t len);
/* Measure every advice of @adv[0..n); results kept for the printers. */
void verify_run(const int *adv, int n);
void verify_close(void);

/* The table (one row per advice); number of rows that differ from the prediction. */
int verify_print_table(void);
/* How many advices took another lock than predicted (after verify_run()). */
int verify_differences(void);
/* ,"lock_measured":{...} for advice index @i of verify_run()'s list. */
void verify_print_json(int i);

#endif /* MADVX_PROBE_VERIFY_H */
