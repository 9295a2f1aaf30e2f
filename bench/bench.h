/* SPDX-License-Identifier: MIT */
/*
 * madvx-bench: shared helpers for the scenarios (bench/pN_*.c).
 *
 * A scenario compares libmadvx with what a user would do instead, in one
 * run: every repetition runs every variant once, in a rotating order
 * (interleaved, so drift from other load on the machine hits all variants
 * alike), and the scenario reports medians over the repetitions with
 * bench_report(). Rows are "scenario, variant, metric, value, unit"; the
 * default output is a readable table, --csv prints the rows as CSV.
 *
 * Return values of bench_pN(): 0 done, BENCH_SKIP (77) cannot run here
 * (say why with bench_note()), anything else a failure.
 */
#ifndef MADVX_BENCH_H
#define MADVX_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_SKIP 77

struct bench_opts {
	unsigned int reps;	/* repetitions (medians over these); 0 = scenario default */
	bool quick;		/* small sizes, few reps: CI smoke run */
	bool csv;		/* rows as CSV instead of a table */
	const char *plot;	/* --plot FILE.png (scenarios that can plot), or NULL */
};

/* Repetitions a scenario should run: o->reps, else @dflt (or @quick_dflt with --quick). */
unsigned int bench_reps(const struct bench_opts *o, unsigned int dflt, unsigned int quick_dflt);

/* ---- clocks (ns) ---- */
uint64_t bench_now_ns(void);		/* CLOCK_MONOTONIC */
uint64_t bench_thread_cpu_ns(void);	/* CLOCK_THREAD_CPUTIME_ID */
uint64_t bench_proc_cpu_ns(void);	/* CLOCK_PROCESS_CPUTIME_ID (all threads) */

/*
 * Split of this thread's CPU time into user and kernel parts, from the
 * cycle counters (perf_event_open, exclude_kernel / exclude_user): precise
 * where the kernel's tick-based utime/stime are not. The user part of a
 * libmadvx call is what the library itself costs.
 */
struct bench_cpu_split {
	int fd_user, fd_kernel;
};
/* 0, or -errno (no PMU in this VM, perf_event_paranoid): say so and skip. */
int bench_cpu_split_open(struct bench_cpu_split *c);
/* Cycle counts so far (user, kernel). */
void bench_cpu_split_read(const struct bench_cpu_split *c, uint64_t *user, uint64_t *kernel);
void bench_cpu_split_close(struct bench_cpu_split *c);

/*
 * Dry mode (bench/dry_syscall.c): process_madvise() issued through libc's
 * syscall() - as libmadvx does - is answered "done" without entering the
 * kernel, to time the library's own work. bench_dry_calls() counts the
 * answered calls (0 after a dry flush: the interposition did not take).
 */
void bench_dry_syscalls(bool on);
uint64_t bench_dry_calls(void);

/* ---- statistics (sort @v in place) ---- */
double bench_median(double *v, size_t n);
/* Nearest-rank percentile, @p in [0, 100]. */
double bench_percentile(double *v, size_t n, double p);

/*
 * Samples of one variant: fixed capacity, allocated once (never during a
 * timed section). bench_samples_median() etc. sort a copy-free view in place.
 */
struct bench_samples {
	double *v;
	size_t n, cap;
};
int bench_samples_init(struct bench_samples *s, size_t cap);
void bench_samples_add(struct bench_samples *s, double x);
void bench_samples_free(struct bench_samples *s);

/* ---- output ---- */
/*
 * The header line (table or CSV), printed once: main() prints it first with
 * --csv, so the CSV on stdout starts with it; notes then go to stderr.
 */
void bench_header(const struct bench_opts *o);
/* Targets reported MISSED so far (madvx-bench --check turns them into exit 3). */
unsigned int bench_targets_missed(void);
/* One result row. */
void bench_report(const struct bench_opts *o, const char *scenario, const char *variant,
		  const char *metric, double value, const char *unit);
/* A row that could not be measured here, with the reason. */
void bench_report_na(const struct bench_opts *o, const char *scenario,
		     const char *variant, const char *metric, const char *why);
/* Free text (setup, targets, verdicts): a line of the table, or "# ..." with --csv. */
void bench_note(const struct bench_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "PASS"/"MISS" line for a target: value vs limit (lower is better unless @higher_better). */
void bench_target(const struct bench_opts *o, const char *scenario, const char *what,
		  double value, double limit, bool higher_better);

/* ---- memory ---- */
/* Anonymous private RW mapping (THP off, so 4 KiB hints mean 4 KiB pages); NULL on failure. */
void *bench_map(size_t len);
/* Write one byte per 4 KiB page so every page is present. */
void bench_touch(void *p, size_t len);
/*
 * Split [p, p + len) into @nvmas VMAs by setting MADV_DONTFORK on every
 * other piece (neighbours with different flags cannot merge; unlike
 * mprotect(PROT_READ) every piece stays writable, so it can be re-touched).
 * Returns 0 or -errno.
 */
int bench_split_vmas(void *p, size_t len, unsigned int nvmas);

/* process_madvise() on this process (PIDFD_SELF where possible); -errno on failure. */
long bench_process_madvise(const void *iov, size_t vlen, int advice);

/*
 * Why a raw process_madvise(@advice) on this process cannot be a baseline
 * here (a reason for bench_report_na()), or NULL when it can. Before 6.13
 * process_madvise() takes only MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED and
 * MADV_COLLAPSE, even from the caller itself: a raw MADV_DONTNEED vector
 * gets -EINVAL on Debian 12's 6.1. Those rows are skipped with the reason;
 * the library's rows still run (it falls back to madvise() there).
 */
const char *bench_pmadv_unavailable(int advice);

/* Rotate variant order per repetition: index of the i-th variant to run in rep @rep. */
static inline unsigned int bench_order(unsigned int rep, unsigned int i, unsigned int nvariants)
{
	return (rep + i) % nvariants;
}

/* p6's fresh process: its part when the environment says so (main()), else -1. */
int bench_p6_child(void);

/* ---- scenarios (bench/scenarios.h) ---- */
#define BENCH_SCENARIO(id, desc) int bench_##id(const struct bench_opts *o);
#include "scenarios.h"
#undef BENCH_SCENARIO

#endif /* MADVX_BENCH_H */
