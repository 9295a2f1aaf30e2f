// SPDX-License-Identifier: MIT
/*
 * madvx-probe --verify: which lock each advice really takes here.
 *
 * For every advice the library knows, on fresh scratch mappings owned by
 * the tool (16 touched pages; never the tool's own heap or stack):
 *  - single: the range lies in one VMA;
 *  - multi: the range spans two VMAs (the second half re-mapped with
 *    MAP_NORESERVE, a flag difference that keeps them apart, both RW).
 * madvise() runs under locktrace three times (fresh mappings each time);
 * the run with the fewest acquisitions counts, so an unrelated acquisition
 * (a page fault in the tool) cannot masquerade as the advice's lock. No
 * acquisition = per-VMA lock (or no lock at all). Advices that could harm
 * the tool's own process (MADV_HWPOISON, MADV_SOFT_OFFLINE) are not in the
 * library's list and are never issued.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <madvx.h>

#include "locktrace.h"
#include "probe-verify.h"

#define PAGES 16
#define TRIALS 3
#define MAX_ADV 64

enum { SINGLE, MULTI, NLAYOUT };

struct measured {
	int err;		/* errno of madvise(), 0 on success */
	unsigned long long rd, wr;
	bool done;
};

static struct locktrace lt;
static int nadv;
static int advs[MAX_ADV];
static struct measured res[MAX_ADV][NLAYOUT];

int verify_open(char *why, size_t len)
{
	int ret = locktrace_open(&lt);

	if (ret)
		snprintf(why, len, "%s", lt.why);
	return ret;
}

void verify_close(void)
{
	locktrace_close(&lt);
}

static char *scratch(int advice, int layout)
{
	size_t pg = 4096, len = PAGES * pg;
	int share = advice == MADV_REMOVE ? MAP_SHARED : MAP_PRIVATE;	/* REMOVE: shmem only */
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, share | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (layout == MULTI &&
	    mmap(p + len / 2, len / 2, PROT_READ | PROT_WRITE,
		 share | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
		munmap(p, len);
		return NULL;
	}
	for (size_t off = 0; off < len; off += pg)
		p[off] = 1;
	return p;
}

struct call {
	char *p;
	int advice;
	int err;
};

static void do_madvise(void *arg)
{
	struct call *c = arg;

	c->err = madvise(c->p, PAGES * 4096, c->advice) ? errno : 0;
}

static void measure(int advice, int layout, struct measured *m)
{
	m->done = false;
	for (int t = 0; t < TRIALS; t++) {
		struct call c = { .p = scratch(advice, layout), .advice = advice };
		struct locktrace_result r;

		if (!c.p)
			continue;
		if (!locktrace_measure(&lt, do_madvise, &c, &r) &&
		    (!m->done || r.self.acq_read + r.self.acq_write < m->rd + m->wr)) {
			*m = (struct measured){ c.err, r.self.acq_read, r.self.acq_write, true };
		}
		munmap(c.p, PAGES * 4096);
	}
}

void verify_run(const int *adv, int n)
{
	nadv = n < MAX_ADV ? n : MAX_ADV;
	for (int i = 0; i < nadv; i++) {
		advs[i] = adv[i];
		for (int l = 0; l < NLAYOUT; l++)
			measure(adv[i], l, &res[i][l]);
	}
}

static const char *measured_name(const struct measured *m, char *buf, size_t len)
{
	if (!m->done)
		return "not measured";
	if (m->wr)
		return "mmap-write";
	if (m->rd)
		return "mmap-read";
	if (m->err) {
		snprintf(buf, len, "none (%s)", strerrorname_np(m->err));
		return buf;
	}
	return "per-vma";
}

static const char *expected_name(int advice, int layout)
{
	enum madvx_lock l = madvx_advice_lock(advice);

	if (layout == MULTI && l == MADVX_LOCK_PER_VMA)
		l = MADVX_LOCK_MMAP_READ;	/* a multi-VMA range falls back */
	return madvx_lock_name(l);
}

/* Same lock as predicted? A failed call that took no lock says nothing. */
static bool matches(int i, int l)
{
	const struct measured *m = &res[i][l];
	char buf[48];

	if (!m->done || (m->err && !m->rd && !m->wr))
		return true;
	return !strcmp(measured_name(m, buf, sizeof(buf)), expected_name(advs[i], l));
}

static bool as_predicted(int i)
{
	return matches(i, SINGLE) && matches(i, MULTI);
}

int verify_differences(void)
{
	int differ = 0;

	for (int i = 0; i < nadv; i++)
		differ += !as_predicted(i);
	return differ;
}

int verify_print_table(void)
{
	int differ = verify_differences();

	printf("\nmeasured with the mmap_lock tracepoints (madvise() of 16 pages; min of %d runs)\n",
	       TRIALS);
	printf("%-22s %-11s %-18s %-11s %-18s %s\n", "advice", "1 VMA: exp", "measured",
	       "2 VMAs: exp", "measured", "");
	for (int i = 0; i < nadv; i++) {
		char b0[48], b1[48];

		printf("%-22s %-11s %-18s %-11s %-18s %s\n", madvx_advice_name(advs[i]),
		       expected_name(advs[i], SINGLE), measured_name(&res[i][SINGLE], b0, sizeof(b0)),
		       expected_name(advs[i], MULTI), measured_name(&res[i][MULTI], b1, sizeof(b1)),
		       as_predicted(i) ? "" : "DIFFERS");
	}
	printf("%d of %d advices differ from the prediction\n", differ, nadv);
	return differ;
}

void verify_print_json(int i)
{
	static const char *const lname[NLAYOUT] = { "single_vma", "multi_vma" };

	if (i >= nadv)
		return;
	printf(",\"lock_measured\":{");
	for (int l = 0; l < NLAYOUT; l++) {
		const struct measured *m = &res[i][l];
		char buf[48];

		printf("%s\"%s\":{\"expected\":\"%s\",\"measured\":\"%s\",\"mmap_read\":%llu,"
		       "\"mmap_write\":%llu,\"errno\":%d,\"matches\":%s}",
		       l ? "," : "", lname[l], expected_name(advs[i], l),
		       measured_name(m, buf, sizeof(buf)), m->rd, m->wr, m->err,
		       matches(i, l) ? "true" : "false");
	}
	printf("}");
}
