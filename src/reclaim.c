// SPDX-License-Identifier: MIT
/*
 * madvx_reclaim(): COLD or PAGEOUT of another process's memory in calls
 * whose length (and so the time the target's mmap_read_lock is held, which
 * a remote process_madvise() keeps for its whole vector) stays under a
 * bound. Two jobs, two halves of this file: planning (which ranges) and
 * issuing (how many bytes per call, what a short return means).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "target.h"

#define RECLAIM_ALWAYS_EXCLUDE (MADVX_VMA_LOCKED | MADVX_VMA_HUGETLB | MADVX_VMA_SPECIAL)
/*
 * The defaults: calls bounded to DEFAULT_MAX_LOCK_US, and a gap of
 * DEFAULT_PAUSE_US after each. Why a gap (Linux 6.18, kernel/locking/rwsem.c):
 * a remote process_madvise() holds the target's mmap_lock for reading for
 * the whole call. A writer of the target (mmap, munmap, mprotect, brk,
 * mremap) that arrives meanwhile queues and is woken by our up_read(); but
 * if our next call's down_read() comes before the woken writer has run, it
 * sees no WRITER_LOCKED and no HANDOFF bit and takes the lock anyway
 * (rwsem_down_read_slowpath(): "Reader optimistic lock stealing"). Only
 * when the writer has waited RWSEM_WAIT_TIMEOUT = DIV_ROUND_UP(HZ, 250)
 * jiffies - 1 jiffy = 4 ms at HZ=250, 4 jiffies = 4 ms at HZ=1000; as
 * time_after(jiffies, enqueue + timeout) it is 4-8 ms at HZ=250 (this
 * project's hosts), 4-5 ms at HZ=1000 - does rwsem_try_write_lock() set
 * HANDOFF and stop the stealing. So with back-to-back calls every mmap and
 * every munmap of the target waits a handoff timeout plus a call, however
 * short the calls. A gap longer than the woken writer's wake-up latency
 * lets it in first: a thread blocked in read() ran 3-6 us (p50) and 19-56
 * us (p99) after its wake-up on an idle 2-vCPU host, 21-30 us (p50) and
 * 8-22 ms (p99) at load 20 (madvx-bench p8).
 *
 * The numbers, from p8's sweep of bound x gap (BENCHMARKS.md, "p8 sweep";
 * the rule: the lowest target mmap p99 among the settings that cost at
 * most 1.5x the Android way's CPU per GiB and 4x its wall time, in every
 * run). Since each call's look-ups read the lines of /proc/PID/maps it
 * needs instead of a PROCMAP_QUERY per entry, a call costs little besides
 * the kernel's work and the gap's sleep, and a 300 us bound meets the cost
 * goals where it did not before. Three runs of 15 repetitions on
 * 2026-12-03 (one idle, two beside other jobs): COLD with a 300 us bound
 * and a 300 us gap, mmap p99 17-19x idle at 0.8-1.1x the Android way's CPU
 * and 2.0-2.7x its wall, against 59-62x for the former 1 ms bound.
 * PAGEOUT makes about four times the calls per GiB (its pages are written
 * to swap in the call), so the gap multiplies its wall time: a 300 us gap
 * took it to 4.1-4.7x the Android way's wall; with 50 us, p99 16-48x idle
 * (1 ms bound: 33-119x) at 1.4-1.5x CPU and 2.7-3.0x wall. A 100 us bound
 * reaches single digits only in some runs, at up to 4-20x wall (40-60 us
 * of CPU per gap's sleep on a paravirtualised host, and longer holds after
 * each gap as the target's threads run again and every entry's TLB flush
 * reaches them: BENCHMARKS.md "p8 at small bounds"). No gap: 33-120x. The
 * p99 follows the bound because a writer that arrives during a call waits
 * for its end; only a kernel that advises another process under per-VMA
 * locks (patch 7 of kernel/patches) removes that.
 * The adaptive alternative (pause while /proc/PID/task/TID/syscall shows a
 * writer) lost: the woken writer is runnable, and the kernel reports a
 * runnable thread as "running".
 */
#define DEFAULT_MAX_LOCK_US MADVX_RECLAIM_DEFAULT_MAX_LOCK_US
#define DEFAULT_PAUSE_US MADVX_RECLAIM_DEFAULT_PAUSE_US
#define DEFAULT_PAUSE_US_PAGEOUT MADVX_RECLAIM_DEFAULT_PAUSE_US_PAGEOUT
#define FIRST_CALL_BYTES (256 * 1024)
/*
 * The kernel's MAX_RW_COUNT: import_iovec() silently truncates a vector to
 * this many bytes, so a longer call would look like a short return.
 */
#define MAX_CALL_BYTES 0x7ffff000ULL
#define MAX_IOV 1024		/* UIO_MAXIOV */
/* Calls shorter than this are too noisy to measure a rate from. */
#define MIN_MEASURE_NS 20000
/*
 * Planning walks every VMA of the range: the first PLAN_QUERIES through
 * PROCMAP_QUERY (a small range of a big process stays cheap), the rest from
 * one read of /proc/PID/maps, ~11x cheaper per VMA on this project's
 * machines (maps.h). Its age never reaches the kernel: build_call() looks
 * every entry up again just before its call (the maps stream, maps.h).
 */
#define PLAN_QUERIES 32
/*
 * build_call() looks entries up in the maps stream (maps.h: ~0.13 us per
 * VMA and a read or two per call, against ~2 us per PROCMAP_QUERY) when the
 * plan read maps (past PLAN_QUERIES VMAs: the line lengths that size the
 * stream's reads are known) and has this many ranges.
 */
#define STREAM_MIN_RANGES 16

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const char *const stop_names[] = {
	[MADVX_RECLAIM_COMPLETE] = "complete",
	[MADVX_RECLAIM_CHANGED] = "changed",
	[MADVX_RECLAIM_BUDGET] = "budget",
	[MADVX_RECLAIM_CANCELLED] = "cancelled",
	[MADVX_RECLAIM_EXITED] = "exited",
	[MADVX_RECLAIM_ERROR] = "error",
	[MADVX_RECLAIM_DRY_RUN] = "dry-run",
};

MADVX_API const char *madvx_reclaim_stop_name(int stop)
{
	if (stop < 0 || (size_t)stop >= ARRAY_SIZE(stop_names))
		return NULL;
	return stop_names[stop];
}

/* ---- options ---- */

/* A planned range, and the file of its VMA (inode 0: anonymous). */
struct plan_range {
	uint64_t start, end, inode;
	uint32_t dev_major, dev_minor;
	/* bytes of the maps lines of the VMAs walked since the previous range, and its own */
	uint32_t line_bytes;
};

struct reclaim {
	struct madvx_target *t;
	struct madvx_reclaim_opts o;
	struct madvx_reclaim_report *rep;
	uint64_t include, exclude, end;
	bool stream;		/* entries looked up by the maps stream (maps.h) */
	/* the plan: filtered ranges in address order */
	struct plan_range *r;
	size_t n, cap;
	bool *changed;		/* per range: already counted in vmas_changed */
	/* issuing */
	size_t i;		/* current range */
	uint64_t cur;		/* next address in it */
	double rate;		/* bytes per ns, 0 = not measured yet */
	uint64_t last_bytes;	/* bytes of the previous call */
	bool unmeasured;	/* it was too short to measure a rate */
	struct iovec iov[MAX_IOV];
	size_t iov_range[MAX_IOV];	/* the range each entry came from */
};

static int take_opts(struct reclaim *c, const struct madvx_reclaim_opts *o)
{
	if (o) {
		int ret = madvx_opts_in(&c->o, sizeof(c->o), o,
					offsetof(struct madvx_reclaim_opts, flags));

		if (ret)
			return ret;
	}
	c->o.size = sizeof(c->o);
	if (!c->o.advice)
		c->o.advice = MADV_COLD;
	if (c->o.advice != MADV_COLD && c->o.advice != MADV_PAGEOUT)
		return -EINVAL;
	if (c->o.flags & ~(MADVX_RECLAIM_DRYRUN | MADVX_RECLAIM_NO_ROLLUP |
			     MADVX_RECLAIM_NO_PAUSE))
		return -EINVAL;
	if ((c->o.flags & MADVX_RECLAIM_NO_PAUSE) && c->o.pause_us)
		return -EINVAL;
	if (c->o.max_entries > MAX_IOV || (c->o.end && c->o.end <= c->o.start))
		return -EINVAL;
	if (!c->o.max_entries)
		c->o.max_entries = MAX_IOV;
	if (!c->o.max_lock_us)
		c->o.max_lock_us = DEFAULT_MAX_LOCK_US;
	if (!c->o.pause_us && !(c->o.flags & MADVX_RECLAIM_NO_PAUSE))
		c->o.pause_us = c->o.advice == MADV_PAGEOUT ? DEFAULT_PAUSE_US_PAGEOUT :
							      DEFAULT_PAUSE_US;
	c->include = c->o.include ? c->o.include : MADVX_VMA_ANON | MADVX_VMA_FILE;
	c->exclude = c->o.exclude | RECLAIM_ALWAYS_EXCLUDE;
	c->end = c->o.end ? c->o.end : UINT64_MAX;
	return 0;
}

/* ---- planning ---- */

static int plan_add(struct reclaim *c, const struct madvx_target_vma *v, uint64_t start,
		    uint64_t end, uint32_t line_bytes)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		void *r = realloc(c->r, cap * sizeof(*c->r));

		if (!r)
			return -ENOMEM;
		c->r = r;
		c->cap = cap;
	}
	c->r[c->n++] = (struct plan_range){ start, end, v->inode, v->dev_major, v->dev_minor,
					    line_bytes };
	return 0;
}

/* Every filtered VMA in [start, end), up to the budget. */
static int plan(struct reclaim *c)
{
	struct madvx_target_vma v;
	uint64_t addr = c->o.start, planned = 0;
	uint32_t walked = 0, line;
	int ret, queries = 0;

	madvx_target_invalidate(c->t);	/* a snapshot of an earlier walk is stale */
	ret = __madvx_target_refresh(c->t);
	while (!ret && addr < c->end) {
		uint64_t s, e;

		if (queries++ < PLAN_QUERIES) {
			ret = __madvx_target_query(c->t, addr, &v);
			line = (uint32_t)__madvx_target_query_line(c->t);
		} else {
			ret = __madvx_maps_snapshot_find(c->t, addr, &v);
			line = (uint32_t)__madvx_maps_scan_line(c->t);
		}
		if (ret == -ENOENT) {
			ret = 0;
			break;
		}
		if (ret || v.start >= c->end)
			break;
		addr = v.end;
		walked += line;
		if (!madvx_target_vma_match(&v, c->include, c->exclude))
			continue;
		s = v.start > c->o.start ? v.start : c->o.start;
		e = v.end < c->end ? v.end : c->end;
		if (c->o.budget && planned + (e - s) > c->o.budget)
			e = s + ((c->o.budget - planned + madvx_page_size() - 1) &
				 ~(uint64_t)(madvx_page_size() - 1));
		ret = plan_add(c, &v, s, e, walked);
		walked = 0;
		planned += e - s;
		if (c->o.budget && planned >= c->o.budget)
			break;
	}
	if (ret)
		return ret;
	c->rep->planned_bytes = planned;
	c->rep->planned_vmas = c->n;
	c->stream = c->t->procmap && c->n >= STREAM_MIN_RANGES && queries > PLAN_QUERIES;
	c->changed = calloc(c->n ? c->n : 1, sizeof(*c->changed));
	return c->changed ? 0 : -ENOMEM;
}

/* ---- issuing ---- */

static void count_error(struct madvx_reclaim_report *rep, int err)
{
	rep->failed_entries++;
	rep->errors[err > 0 && err < 64 ? err : 0]++;
}

static void mark_changed(struct reclaim *c, size_t i)
{
	if (!c->changed[i]) {
		c->changed[i] = true;
		c->rep->vmas_changed++;
	}
}

/*
 * Bytes the next call should cover: the measured rate times 75% of the
 * bound, growing at most fourfold per call (and fourfold outright while the
 * calls are too short to measure).
 */
static uint64_t call_bytes(struct reclaim *c)
{
	uint64_t pg = madvx_page_size(), want;
	double bound = (double)c->o.max_lock_us * 1000.0;

	if (!c->last_bytes)
		want = FIRST_CALL_BYTES;
	else if (c->rate > 0 && !c->unmeasured)
		want = (uint64_t)(c->rate * bound * 0.75);
	else
		want = c->last_bytes * 4;
	if (c->last_bytes && want > c->last_bytes * 4)
		want = c->last_bytes * 4;	/* grow carefully */
	if (want > MAX_CALL_BYTES)
		want = MAX_CALL_BYTES;
	if (c->o.budget) {
		uint64_t left = c->o.budget > c->rep->bytes ? c->o.budget - c->rep->bytes : 0;

		if (want > left)
			want = left;
	}
	want &= ~(pg - 1);
	return want ? want : pg;
}

/*
 * The planned VMA itself, seen now with its page size: a hugetlbfs file
 * that the maps snapshot (no page size) planned as a plain file. Skipped,
 * not a change.
 */
static bool hugetlb_of_plan(const struct plan_range *r, const struct madvx_target_vma *v)
{
	return (v->flags & MADVX_VMA_HUGETLB) && r->inode && v->inode == r->inode &&
	       v->dev_major == r->dev_major && v->dev_minor == r->dev_minor;
}

/* Bytes of the maps lines the next call of @bytes will read: the ranges it begins. */
static size_t call_line_bytes(const struct reclaim *c, uint64_t bytes)
{
	uint64_t total = 0;
	size_t line_bytes = 0, entries = 0;

	for (size_t i = c->i; i < c->n && total < bytes && entries < c->o.max_entries; i++) {
		const struct plan_range *r = &c->r[i];
		uint64_t from = c->cur > r->start ? c->cur : r->start;

		if (from >= r->end)
			continue;
		if (from == r->start)
			line_bytes += r->line_bytes;
		total += r->end - from;
		entries++;
	}
	return line_bytes;
}

static int look_up(struct reclaim *c, uint64_t addr, struct madvx_target_vma *v)
{
	if (c->stream)
		return __madvx_target_stream_find(c->t, addr, v);
	return __madvx_target_query(c->t, addr, v);
}

/*
 * Fill the iovec for one call from the plan, looking every entry up again
 * first (by PROCMAP_QUERY, or lines of maps read for this call: the
 * stream), so that a look-up is microseconds older than its call: what is
 * no longer mapped, or no longer passes the filter, is skipped. Returns
 * the number of entries (0: plan exhausted) or -errno (-ESRCH: the mm is
 * gone - exit or execve - as the look-up found).
 */
static int build_call(struct reclaim *c, uint64_t bytes)
{
	uint64_t total = 0;
	int n = 0, ret;

	if (c->stream)
		__madvx_maps_stream_epoch(c->t, c->cur, call_line_bytes(c, bytes));
	else
		madvx_target_invalidate(c->t);	/* snapshot mode: one re-read per call */
	while (c->i < c->n && n < (int)c->o.max_entries && total < bytes) {
		struct plan_range *r = &c->r[c->i];
		struct madvx_target_vma v;
		uint64_t e, len;

		if (c->cur < r->start)
			c->cur = r->start;
		if (c->cur >= r->end) {
			c->i++;
			continue;
		}
		ret = look_up(c, c->cur, &v);
		if (ret == -ENOENT) {		/* everything above is gone */
			mark_changed(c, c->i);
			c->cur = r->end;
			continue;
		}
		if (ret)
			return ret;
		if (v.start > c->cur || !madvx_target_vma_match(&v, c->include, c->exclude)) {
			/* hole, or replaced by something we must not advise */
			if (v.start > c->cur || !hugetlb_of_plan(r, &v))
				mark_changed(c, c->i);
			c->cur = v.start > c->cur ? v.start : v.end;
			continue;
		}
		e = v.end < r->end ? v.end : r->end;
		len = e - c->cur;
		if (len > bytes - total)
			len = bytes - total;
		c->iov[n] = (struct iovec){ (void *)(uintptr_t)c->cur, len };
		c->iov_range[n] = c->i;
		n++;
		total += len;
		c->cur += len;
	}
	return n;
}

/* One call of @entries entries that took @ns (the target's mmap_lock about as long). */
static void count_call(struct reclaim *c, int entries, uint64_t ns)
{
	struct madvx_reclaim_report *rep = c->rep;

	rep->calls++;
	rep->entries += (uint64_t)entries;
	rep->last_entries = (uint32_t)entries;
	rep->call_ns += ns;
	if (ns > rep->max_call_ns)
		rep->max_call_ns = ns;
	if (ns > (uint64_t)c->o.max_lock_us * 1000)
		rep->calls_over_bound++;
}

/* Errors that concern the target or the caller, not one entry. */
static bool fatal(long err)
{
	return err == -ESRCH || err == -EPERM || err == -EACCES ||
	       err == -ENOSYS || err == -EBADF;
}

/*
 * Issue iov[0, n): on a short return find the failing entry (the kernel
 * stops there and returns the bytes of the entries before it), ask the
 * kernel about it alone for its errno, and go on after it.
 * Returns 0 or a fatal -errno.
 */
static long issue(struct reclaim *c, int n)
{
	struct madvx_reclaim_report *rep = c->rep;
	int k = 0;

	while (k < n) {
		uint64_t total = 0, t0, dt, done;
		long ret;
		int j;

		for (j = k; j < n; j++)
			total += c->iov[j].iov_len;
		t0 = now_ns();
		ret = __madvx_sys_process_madvise(c->t->pidfd, c->iov + k, (size_t)(n - k),
						c->o.advice);
		dt = now_ns() - t0;
		count_call(c, n - k, dt);
		if (ret == -EINTR)
			continue;
		if (ret < 0 && fatal(ret))
			return ret;
		done = ret > 0 ? (uint64_t)ret : 0;
		rep->bytes += done;
		if (done == total)
			return 0;
		/* entries k..j-1 were done in full, j failed */
		for (j = k; j < n && done >= c->iov[j].iov_len; j++)
			done -= c->iov[j].iov_len;
		if (j == n)
			return 0;
		t0 = now_ns();
		ret = __madvx_sys_process_madvise(c->t->pidfd, c->iov + j, 1, c->o.advice);
		count_call(c, 1, now_ns() - t0);
		if (ret == (long)c->iov[j].iov_len) {
			rep->bytes += (uint64_t)ret;	/* transient: done on its own */
		} else if (ret < 0 && fatal(ret)) {
			return ret;
		} else {
			count_error(rep, ret < 0 ? (int)-ret : EIO);
			if (ret == -ENOMEM)
				mark_changed(c, c->iov_range[j]);
		}
		k = j + 1;
	}
	return 0;
}

static void update_rate(struct reclaim *c, uint64_t bytes, uint64_t ns)
{
	double r, bound = (double)c->o.max_lock_us * 1000.0;

	c->last_bytes = bytes ? bytes : c->last_bytes;
	c->unmeasured = ns < MIN_MEASURE_NS && (double)ns < bound / 2;
	if (c->unmeasured || !bytes)
		return;
	r = (double)bytes / (double)ns;
	if (!c->rate)
		c->rate = r;
	else if ((double)ns > bound)
		/*
		 * Overran: take the slower rate at once, but cut by at most 8x
		 * per call - a call preempted while it held the lock says
		 * little about the next, and PAGEOUT's swap writeback stalls
		 * come and go. Calls then grow back through the average below.
		 */
		c->rate = r < c->rate ? (r > c->rate / 8 ? r : c->rate / 8) : c->rate;
	else
		c->rate = 0.5 * c->rate + 0.5 * r;
}

static void pause_us(uint32_t us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
	int e = errno;

	/* EINTR: sleep the rest (nanosleep leaves it in ts) */
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	errno = e;
}

static int run(struct reclaim *c)
{
	struct madvx_reclaim_report *rep = c->rep;

	if (c->stream) {
		int ret = __madvx_maps_stream_start(c->t, c->o.start);

		if (ret)
			return ret;
	}

	for (;;) {
		uint64_t want, call_ns0 = rep->call_ns, bytes0 = rep->bytes;
		long ret;
		int n;

		if (c->o.budget && rep->bytes >= c->o.budget) {
			rep->stop = MADVX_RECLAIM_BUDGET;
			return 0;
		}
		/*
		 * No liveness check of its own (pidfd_send_signal(), ~1.2 us a
		 * call): build_call() asks the target's maps fd before every
		 * call, which answers -ESRCH once the mm is gone, and the call
		 * itself goes through the pidfd.
		 */
		want = call_bytes(c);
		n = build_call(c, want);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		ret = issue(c, n);
		if (ret)
			return (int)ret;
		update_rate(c, rep->bytes - bytes0, rep->call_ns - call_ns0);
		if (c->o.progress && c->o.progress(c->o.progress_ctx, rep)) {
			rep->stop = MADVX_RECLAIM_CANCELLED;
			return 0;
		}
		if (c->o.pause_us && c->i < c->n)
			pause_us(c->o.pause_us);
	}
	rep->stop = rep->vmas_changed ? MADVX_RECLAIM_CHANGED : MADVX_RECLAIM_COMPLETE;
	return 0;
}

/* A fatal -errno as the report's stop reason (-ESRCH: exited or execve). */
static void stop_for(struct madvx_reclaim_report *rep, int err)
{
	rep->err = err;
	rep->stop = err == -ESRCH ? MADVX_RECLAIM_EXITED : MADVX_RECLAIM_ERROR;
}

static int reclaim(struct madvx_target *target, const struct madvx_reclaim_opts *opts,
		   struct madvx_reclaim_report *report)
{
	struct madvx_reclaim_report local = { .size = sizeof(local) };
	struct madvx_reclaim_report *rep = &local;
	struct reclaim *c;
	uint64_t t0 = now_ns(), t_plan;
	int ret;

	if (report && report->size < offsetof(struct madvx_reclaim_report, errors))
		return -EINVAL;
	if (!target)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->t = target;
	c->rep = rep;
	ret = take_opts(c, opts);
	if (ret)
		goto out;
	rep->max_lock_us = c->o.max_lock_us;
	rep->pause_us = c->o.flags & MADVX_RECLAIM_NO_PAUSE ? 0 : c->o.pause_us;
	if (!(c->o.flags & MADVX_RECLAIM_DRYRUN)) {
		ret = madvx_target_check(target, c->o.advice);
		if (ret)
			goto out;
	}
	if (!(c->o.flags & MADVX_RECLAIM_NO_ROLLUP)) {
		ret = __madvx_target_rollup(target, &rep->rss_before, &rep->pss_before,
					  &rep->swap_before);
		if (ret)
			goto out;
	}
	t_plan = now_ns();
	ret = plan(c);
	rep->plan_ns = now_ns() - t_plan;
	if (ret)
		goto out;
	if (c->o.flags & MADVX_RECLAIM_DRYRUN)
		rep->stop = MADVX_RECLAIM_DRY_RUN;
	else
		ret = run(c);
	if (!(c->o.flags & MADVX_RECLAIM_NO_ROLLUP) && ret != -ESRCH)
		__madvx_target_rollup(target, &rep->rss_after, &rep->pss_after,
				    &rep->swap_after);
out:
	if (ret)
		stop_for(rep, ret);
	rep->elapsed_ns = now_ns() - t0;
	if (report)
		report->size = madvx_copy_out(report, rep, sizeof(local));
	free(c->r);
	free(c->changed);
	free(c);
	return ret;
}

MADVX_API int madvx_reclaim(struct madvx_target *target,
			    const struct madvx_reclaim_opts *opts,
			    struct madvx_reclaim_report *report)
{
	int e = errno, ret = reclaim(target, opts, report);

	errno = e;	/* malloc() and friends may have set it */
	return ret;
}
