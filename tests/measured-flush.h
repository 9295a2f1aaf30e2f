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

/*
 * One flush of @advice outside any measurement, so that the measured ones do
 * not open the /proc/self/maps fd or the pidfd.
 */
static inline void test_warm_up(int advice)
{
	struct madvx_batch *b;
	uint8_t *p = mmap(NULL, 2 * test_page(), PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p != MAP_FAILED && madvx_batch_create(NULL, &b) == 0) {
		madvx_batch_add(b, p, 2 * test_page(), advice);
		madvx_batch_flush(b);
		madvx_batch_free(b);
	}
	if (p != MAP_FAILED)
		munmap(p, 2 * test_page());
}

/*
 * The calling thread's acquisitions inside system calls - the flush's own
 * calls - and those of its user-mode page faults (locktrace.h: self_user;
 * 0 where the kernel has no raw_syscalls tracepoints, so the first two are then
 * every acquisition). A fault on a page of the test binary that writeback
 * has locked is retried by the kernel under mmap_read_lock: it happens to
 * a freshly linked binary at random, beside any code.
 */
static inline uint64_t test_call_reads(const struct locktrace_result *r)
{
	return r->self.acq_read - r->self_user.acq_read;
}

static inline uint64_t test_call_writes(const struct locktrace_result *r)
{
	return r->self.acq_write - r->self_user.acq_write;
}

static inline uint64_t test_fault_locks(const struct locktrace_result *r)
{
	return r->self_user.acq_read + r->self_user.acq_write;
}

#define TEST_FAULT_TRIES 3

/*
 * Run @once - a whole case: fresh fixture, measured flush, every check -
 * until its window saw no mmap_lock taken by a user-mode page fault, at
 * most TEST_FAULT_TRIES times. @once asserts on test_call_*() itself and
 * returns test_fault_locks(). Faults that take mmap_lock in every try are
 * the library's doing (e.g. touching a mapping without anon_vma) and fail.
 */
static inline void test_until_no_fault_locks(uint64_t (*once)(void *), void *arg,
					     const char *name)
{
	uint64_t n = 0;

	for (int i = 0; i < TEST_FAULT_TRIES; i++) {
		n = once(arg);
		if (!n)
			return;
		printf("%s: %llu mmap_lock acquisitions by user-mode page faults in the "
		       "window, none by its system calls: again on a fresh fixture\n",
		       name, (unsigned long long)n);
		fflush(stdout);
	}
	ck_abort_msg("%s: user-mode page faults took mmap_lock in all %d tries (%llu in the "
		     "last)", name, TEST_FAULT_TRIES, (unsigned long long)n);
}

#endif /* MADVX_TEST_MEASURED_FLUSH_H */
