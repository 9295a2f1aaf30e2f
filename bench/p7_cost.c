// SPDX-License-Identifier: MIT
/*
 * p7: what libmadvx itself costs per hint, without the kernel's work.
 *
 * Method: N 4 KiB MADV_DONTNEED hints on every other page of a mapping that
 * was never touched, so the kernel has no pages to free and its cost is the
 * syscall plus an empty page-table walk per entry. libmadvx (add N + flush)
 * issues exactly the process_madvise() calls of 1024 entries that
 * "raw_equivalent" issues from a prebuilt iovec array (checked with
 * madvx_batch_stats()), so per repetition
 *	library cost = (t(libmadvx) - t(raw_equivalent)) / N
 * is the price of validation, epoch bookkeeping, sort check/sort, merge,
 * VMA lookups, planning, building the vectors and crediting the results.
 * Medians of the paired per-repetition differences, variants interleaved.
 * p7 measures cost, not latency: every time here is the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), which preemption by other load on the machine
 * does not inflate (wall time did, by 3x, on a loaded 2-vCPU machine).
 *
 * Primary estimate, "kernel_stubbed": the same add + flush with the kernel
 * answered by a stub (bench/dry_syscall.c interposes the syscall() through
 * which libmadvx issues process_madvise(); VMA lookups stay real). That is
 * the library's own work alone, without the noise of the kernel's ~200 ns
 * per entry; what it leaves out is the extra cache misses the library takes
 * when the kernel's work between its chunks of 1024 entries evicts its
 * data, which the paired difference includes.
 * That difference of two ~200 ns/hint numbers is noisy on a loaded
 * machine, so a second estimate is taken too: the user-mode share of the
 * thread's CPU time during add + flush (cycle counters with exclude_kernel
 * vs exclude_user, times the thread CPU time), i.e. what the library's own
 * code costs, syscall work excluded. The library's user time includes the
 * cache misses it takes because the kernel's work between its chunks of
 * 1024 entries evicts its data; the paired wall difference includes that
 * too, plus any extra kernel work it causes.
 * Also: add alone, and hints added in random order (the radix sort runs).
 *
 * Scaling with VMAs: the same N hints made adjacent (one merged run) over a
 * mapping of 1 VMA and of 512 VMAs (MADV_DONTFORK on every other piece):
 * planning cuts the run into one entry per VMA, and crediting each entry
 * should only visit the hints it covers; ns per hint should barely change.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <madvx.h>

#include "bench.h"

#define PAGE 4096UL

enum { V_ADD, V_LIB, V_LIB_SHUF, V_RAW, V_DRY, V_DRY_SHUF, NV };
static const char *const vname[NV] = {
	"add_only", "libmadvx_add_flush", "libmadvx_shuffled", "raw_equivalent",
	"libmadvx_kernel_stubbed", "libmadvx_stubbed_shuffled",
};

struct p7 {
	char *p;
	size_t n;
	struct iovec *iov;	/* address order */
	struct iovec *shuf;	/* random order */
	struct madvx_batch *b;
};

static int add_all(struct p7 *s, const struct iovec *iov)
{
	for (size_t i = 0; i < s->n; i++)
		if (madvx_batch_add(s->b, iov[i].iov_base, iov[i].iov_len, MADV_DONTNEED) < 0)
			return -1;
	return 0;
}

/*
 * Failure, as opposed to a timed part of 0 ns: where the thread CPU clock
 * is coarse, a short part (add_only of 4096 hints) can read 0, which is a
 * measurement, not an error (p7 "failed" that way in the 6.1 test kernel).
 */
#define RUN_FAILED UINT64_MAX

/* Runs variant @v; returns its timed part in ns, or RUN_FAILED. */
static uint64_t run(struct p7 *s, int v)
{
	uint64_t t0 = bench_thread_cpu_ns(), t;

	switch (v) {
	case V_ADD:
		if (add_all(s, s->iov))
			return RUN_FAILED;
		t = bench_thread_cpu_ns() - t0;
		return madvx_batch_flush(s->b) ? RUN_FAILED : t;	/* flush untimed */
	case V_LIB:
	case V_LIB_SHUF:
		if (add_all(s, v == V_LIB ? s->iov : s->shuf) || madvx_batch_flush(s->b))
			return RUN_FAILED;
		return bench_thread_cpu_ns() - t0;
	case V_DRY:
	case V_DRY_SHUF:
		bench_dry_syscalls(true);
		t0 = bench_thread_cpu_ns();
		if (add_all(s, v == V_DRY ? s->iov : s->shuf) || madvx_batch_flush(s->b)) {
			bench_dry_syscalls(false);
			return RUN_FAILED;
		}
		t = bench_thread_cpu_ns() - t0;
		bench_dry_syscalls(false);
		return t;
	case V_RAW:
		for (size_t i = 0; i < s->n; i += 1024) {
			size_t m = s->n - i < 1024 ? s->n - i : 1024;

			if (bench_process_madvise(s->iov + i, m, MADV_DONTNEED) != (long)(m * PAGE))
				return RUN_FAILED;
		}
		return bench_thread_cpu_ns() - t0;
	}
	return RUN_FAILED;
}

/* add + flush of @n adjacent page hints over [p, ...), best of @reps, ns per hint. */
static double adjacent_run(struct madvx_batch *b, char *p, size_t n, unsigned int reps)
{
	double best = 0;

	for (unsigned int r = 0; r < reps; r++) {
		uint64_t t0 = bench_thread_cpu_ns();
		double ns;

		for (size_t i = 0; i < n; i++)
			madvx_batch_add(b, p + i * PAGE, PAGE, MADV_DONTNEED);
		if (madvx_batch_flush(b))
			return -1;
		ns = (double)(bench_thread_cpu_ns() - t0) / (double)n;
		if (!r || ns < best)
			best = ns;
	}
	return best;
}

static void vma_scaling(const struct bench_opts *o, struct madvx_batch *b, size_t n)
{
	static const unsigned int nvmas[] = { 1, 512 };
	double ns[2];

	for (int i = 0; i < 2; i++) {
		char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		char name[40];

		if (p == MAP_FAILED)
			return;
		ns[i] = -1;
		if (nvmas[i] == 1 || !bench_split_vmas(p, n * PAGE, nvmas[i]))
			ns[i] = adjacent_run(b, p, n, o->quick ? 2 : 5);
		munmap(p, n * PAGE);
		snprintf(name, sizeof(name), "adjacent_run_%u_vmas", nvmas[i]);
		if (ns[i] < 0)
			bench_report_na(o, "p7", name, "ns_per_hint", "setup or flush failed");
		else
			bench_report(o, "p7", name, "ns_per_hint", ns[i], "ns");
	}
	if (ns[0] > 0 && ns[1] > 0)
		bench_report(o, "p7", "adjacent_run_512_vmas", "ratio_vs_1_vma", ns[1] / ns[0], "x");
}

int bench_p7(const struct bench_opts *o)
{
	unsigned int reps = bench_reps(o, 31, 5);
	struct p7 s = { .n = o->quick ? 4096 : 65536 };
	struct madvx_batch_opts bo = { .size = sizeof(bo), .capacity = (uint32_t)s.n };
	struct madvx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	struct bench_samples smp[NV] = { 0 }, diff = { 0 }, diff_shuf = { 0 };
	struct bench_samples user = { 0 }, user_shuf = { 0 };
	struct bench_cpu_split cs;
	int cs_err = bench_cpu_split_open(&cs);
	double t[NV], lib, shuf;
	const char *no_pm = bench_pmadv_unavailable(MADV_DONTNEED);
	bool dry_ok = false;
	int ret = 1;

	s.p = mmap(NULL, 2 * s.n * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	s.iov = calloc(s.n, sizeof(*s.iov));
	s.shuf = calloc(s.n, sizeof(*s.shuf));
	if (s.p == MAP_FAILED || !s.iov || !s.shuf || madvx_batch_create(&bo, &s.b))
		goto out;
	for (size_t i = 0; i < s.n; i++)
		s.iov[i] = s.shuf[i] = (struct iovec){ s.p + 2 * i * PAGE, PAGE };
	{
		uint64_t before = bench_dry_calls();

		dry_ok = run(&s, V_DRY) != RUN_FAILED && bench_dry_calls() > before;
	}
	srand(7);
	for (size_t i = s.n - 1; i > 0; i--) {
		size_t j = (size_t)rand() % (i + 1);
		struct iovec x = s.shuf[i];

		s.shuf[i] = s.shuf[j];
		s.shuf[j] = x;
	}
	for (int v = 0; v < NV; v++)
		if (bench_samples_init(&smp[v], reps))
			goto out;
	if (bench_samples_init(&diff, reps) || bench_samples_init(&diff_shuf, reps) ||
	    bench_samples_init(&user, reps) || bench_samples_init(&user_shuf, reps))
		goto out;
	/* Same syscalls as raw_equivalent? */
	madvx_batch_stats(s.b, &st0);
	if (run(&s, V_LIB) == RUN_FAILED)
		goto out;
	madvx_batch_stats(s.b, &st1);
	bench_note(o, "%zu hints, every other page of an untouched %zu MiB mapping; libmadvx "
		   "made %llu syscalls with %llu entries (raw_equivalent: %zu, %zu); %u reps",
		   s.n, 2 * s.n * PAGE >> 20,
		   (unsigned long long)(st1.syscalls - st0.syscalls),
		   (unsigned long long)(st1.vector_entries - st0.vector_entries),
		   (s.n + 1023) / 1024, s.n, reps);
	for (unsigned int r = 0; r < reps; r++) {
		for (unsigned int i = 0; i < NV; i++) {
			int v = (int)bench_order(r, i, NV);
			uint64_t u0 = 0, k0 = 0, u1 = 0, k1 = 0, c0, ns;

			if (((v == V_DRY || v == V_DRY_SHUF) && !dry_ok) || (v == V_RAW && no_pm)) {
				t[v] = 0;
				continue;
			}

			if (!cs_err)
				bench_cpu_split_read(&cs, &u0, &k0);
			c0 = bench_thread_cpu_ns();
			ns = run(&s, v);
			c0 = bench_thread_cpu_ns() - c0;
			if (!cs_err)
				bench_cpu_split_read(&cs, &u1, &k1);
			if (!cs_err && (v == V_LIB || v == V_LIB_SHUF) && u1 + k1 > u0 + k0)
				bench_samples_add(v == V_LIB ? &user : &user_shuf,
						  (double)c0 * (double)(u1 - u0) /
						  (double)(u1 - u0 + k1 - k0) / (double)s.n);
			if (ns == RUN_FAILED) {
				bench_note(o, "p7 %s failed", vname[v]);
				goto out;
			}
			t[v] = (double)ns / (double)s.n;
			bench_samples_add(&smp[v], t[v]);
		}
		if (!no_pm) {
			bench_samples_add(&diff, t[V_LIB] - t[V_RAW]);
			bench_samples_add(&diff_shuf, t[V_LIB_SHUF] - t[V_RAW]);
		}
	}
	for (int v = 0; v < NV; v++) {
		if ((v == V_DRY || v == V_DRY_SHUF) && !dry_ok)
			bench_report_na(o, "p7", vname[v], "ns_per_hint",
					"the syscall() stub did not take (libmadvx linked statically, "
					"or no process_madvise() for this advice)");
		else if (v == V_RAW && no_pm)
			bench_report_na(o, "p7", vname[v], "ns_per_hint", no_pm);
		else
			bench_report(o, "p7", vname[v], "ns_per_hint",
				     bench_median(smp[v].v, smp[v].n), "ns");
	}
	if (dry_ok)
		bench_target(o, "p7", "library ns per hint, kernel stubbed (sorted adds)",
			     bench_median(smp[V_DRY].v, smp[V_DRY].n), 20, false);
	if (no_pm) {
		/* The paired difference needs the raw calls it subtracts. */
		bench_report_na(o, "p7", "libmadvx", "library_ns_per_hint", no_pm);
		bench_report_na(o, "p7", "libmadvx_shuffled", "library_ns_per_hint", no_pm);
	} else {
		lib = bench_median(diff.v, diff.n);
		shuf = bench_median(diff_shuf.v, diff_shuf.n);
		bench_report(o, "p7", "libmadvx", "library_ns_per_hint", lib, "ns");
		bench_report(o, "p7", "libmadvx_shuffled", "library_ns_per_hint", shuf, "ns");
	}
	if (cs_err) {
		bench_report_na(o, "p7", "libmadvx", "user_cpu_ns_per_hint",
				"no cycle counters here (perf_event_open failed)");
	} else {
		bench_report(o, "p7", "libmadvx", "user_cpu_ns_per_hint",
			     bench_median(user.v, user.n), "ns");
		bench_report(o, "p7", "libmadvx_shuffled", "user_cpu_ns_per_hint",
			     bench_median(user_shuf.v, user_shuf.n), "ns");
		bench_target(o, "p7", "library user CPU ns per hint (sorted adds)",
			     bench_median(user.v, user.n), 20, false);
	}
	if (!no_pm)
		bench_target(o, "p7", "library ns per hint, paired difference (sorted adds)",
			     lib, 20, false);
	vma_scaling(o, s.b, s.n);
	ret = 0;
out:
	for (int v = 0; v < NV; v++)
		bench_samples_free(&smp[v]);
	bench_samples_free(&diff);
	bench_samples_free(&diff_shuf);
	bench_samples_free(&user);
	bench_samples_free(&user_shuf);
	if (!cs_err)
		bench_cpu_split_close(&cs);
	madvx_batch_free(s.b);
	free(s.iov);
	free(s.shuf);
	if (s.p != MAP_FAILED)
		munmap(s.p, 2 * s.n * PAGE);
	return ret;
}
