/* SPDX-License-Identifier: MIT */
/*
 * One batch flush with the mmap_lock tracepoints on, for the suites that
 * count locks (test_batch_lock, test_batch_cold).
 */
#ifndef MADVX_TEST_MEASURED_FLUSH_H
#define MADVX_TEST_MEASURED_FLUSH_H

#include "harness.h"
#include "locktrace.h"

struct measured_flush {
	struct madvx_batch *b;
	int ret;
};

static void measured_flush_run(void *arg)
{
	struct measured_flush *m = arg;

	m->ret = madvx_batch_flush(m->b);
}

/*
 * Flush @b inside locktrace_measure(); the flush must succeed and the trace
 * must be complete. Leaves the lock counts in @r and the batch's stats in @st.
 */
static inline void test_measured_flush(struct locktrace *lt, struct madvx_batch *b,
				       struct locktrace_result *r, struct madvx_stats *st)
{
	struct measured_flush m = { .b = b, .ret = -1 };

	ck_assert_int_eq(locktrace_measure(lt, measured_flush_run, &m, r), 0);
	ck_assert_int_eq(m.ret, 0);
	ck_assert(!r->lost);
	*st = (struct madvx_stats){ .size = sizeof(*st) };
	ck_assert_int_eq(madvx_batch_stats(b, st), 0);
}

#endif /* MADVX_TEST_MEASURED_FLUSH_H */
