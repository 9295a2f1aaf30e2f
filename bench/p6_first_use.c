// SPDX-License-Identifier: MIT
/*
 * p6: the first use of the library in a fresh process, against a
 * steady-state flush and one plain madvise() (issue 22). A library linked
 * into every process is judged by its first call: short-lived processes
 * pay it every time, and an allocator pays it inside its first purge.
 *
 * Each repetition starts a new process (madvx-bench itself, told by the
 * environment to run the child part), which times, on 1 MiB of touched
 * memory each: madvx_batch_create() + add one DONTNEED hint + flush (the
 * first use: the probe's core, the batch storage, the first hint's plan),
 * then add + flush of another range on that batch in the steady state, then
 * one madvise(). Before all that, one plain madvise() of its own 1 MiB,
 * timed as first_madvise: the kernel's first release in a process costs
 * more than its later ones (about 30-60 us more here: cold page-table and
 * mmu_gather paths), and that cost is the process's, not the library's -
 * a real process pays it long before its allocator's first purge (its
 * loader's munmap() calls already zap). Steady means what a client's thousandth purge sees: the
 * process has learnt its layout (plan.c, guess_one_vma(): the first lone
 * hint is guessed, the next 8 are looked up - the first of them opens
 * /proc/self/maps - and the 16 after are guessed), so WARM_FLUSHES lone
 * flushes of one page go first and the timed one is a guessed one, as 16
 * of every 17 are. Medians over the repetitions; the number of system calls
 * of the first use is counted by tests/test_sandbox.c (first_flush_syscalls).
 *
 * A twin fresh process, started right after each one, maps and touches
 * the same and releases its first-use range with one madvise()
 * (first_plain): the kernel's part of that release, at the same place in
 * a process's life. So first_use above first_plain is what the library
 * alone adds to its first use, while first_use above steady_flush (the
 * issue's goal) also holds whatever the kernel's second release in a
 * process costs more than a later one.
 */
#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <madvx.h>

#include "bench.h"

#define LEN (1UL << 20)
#define WARM_FLUSHES 12
#define NTIMES 5
#define CHILD_ENV "MADVX_BENCH_P6_CHILD"
#define PLAIN "plain"

extern char **environ;

/* The twin: the same steps, its first release one madvise() (first_plain). */
static int child_plain(void)
{
	char *w = bench_map(LEN), *p = bench_map(LEN);
	uint64_t t0, t1;

	if (!w || !p)
		return 1;
	bench_touch(w, LEN);
	bench_touch(p, LEN);
	if (madvise(w, LEN, MADV_DONTNEED))
		return 1;
	t0 = bench_now_ns();
	if (madvise(p, LEN, MADV_DONTNEED))
		return 1;
	t1 = bench_now_ns();
	printf("%llu\n", (unsigned long long)(t1 - t0));
	return 0;
}

/* In the fresh process: four numbers on stdout (see spawn_one()). */
static int child(void)
{
	char *w = bench_map(LEN), *p = bench_map(LEN), *q = bench_map(LEN), *r = bench_map(LEN);
	struct madvx_batch *b;
	uint64_t tk, t0, t1, tw, t2, t3;

	if (!w || !p || !q || !r)
		return 1;
	bench_touch(w, LEN);
	bench_touch(p, LEN);
	bench_touch(q, LEN);
	bench_touch(r, LEN);
	tk = bench_now_ns();
	if (madvise(w, LEN, MADV_DONTNEED))
		return 1;
	t0 = bench_now_ns();
	if (madvx_batch_create(NULL, &b) || madvx_batch_add(b, p, LEN, MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(b))
		return 1;
	t1 = bench_now_ns();
	/* p is released: its pages serve as the warm-up's (see the top). */
	for (int i = 0; i < WARM_FLUSHES; i++) {
		char *pg = p + (size_t)i * 4096;

		*pg = 1;
		if (madvx_batch_add(b, pg, 4096, MADV_DONTNEED) < 0 || madvx_batch_flush(b))
			return 1;
	}
	tw = bench_now_ns();
	if (madvx_batch_add(b, q, LEN, MADV_DONTNEED) < 0 || madvx_batch_flush(b))
		return 1;
	t2 = bench_now_ns();
	if (madvise(r, LEN, MADV_DONTNEED))
		return 1;
	t3 = bench_now_ns();
	printf("%llu %llu %llu %llu\n", (unsigned long long)(t1 - t0),
	       (unsigned long long)(t2 - tw), (unsigned long long)(t3 - t2),
	       (unsigned long long)(t0 - tk));
	madvx_batch_free(b);
	return 0;
}

int bench_p6_child(void)
{
	const char *mode = getenv(CHILD_ENV);

	if (!mode)
		return -1;
	return strcmp(mode, PLAIN) ? child() : child_plain();
}

/*
 * One fresh process: first use, steady flush, madvise(), first madvise();
 * @plain: the twin, first_plain alone. Returns -1 when it failed.
 */
static int spawn_one(double *out, bool plain)
{
	char *argv[] = { "madvx-bench", NULL };
	char **env, buf[128] = "";
	posix_spawn_file_actions_t fa;
	unsigned long long v[NTIMES - 1];
	int pfd[2], status, n = 0, ret = -1;
	size_t k = 0, have = 0;
	pid_t pid;
	ssize_t got;

	while (environ[n])
		n++;
	env = calloc((size_t)n + 2, sizeof(*env));
	if (!env || pipe(pfd)) {
		free(env);
		return -1;
	}
	for (int i = 0; i < n; i++)
		env[k++] = environ[i];
	env[k++] = plain ? CHILD_ENV "=" PLAIN : CHILD_ENV "=1";
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env) == 0) {
		close(pfd[1]);
		pfd[1] = -1;
		while (have < sizeof(buf) - 1 &&
		       (got = read(pfd[0], buf + have, sizeof(buf) - 1 - have)) > 0)
			have += (size_t)got;
		buf[have] = 0;
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status) &&
		    sscanf(buf, "%llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]) ==
			    (plain ? 1 : NTIMES - 1)) {
			for (int i = 0; i < (plain ? 1 : NTIMES - 1); i++)
				out[i] = (double)v[i];
			ret = 0;
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	free(env);
	return ret;
}

int bench_p6(const struct bench_opts *o)
{
	static const char *const vname[NTIMES] = {
		"first_use", "steady_flush", "single_madvise", "first_madvise", "first_plain",
	};
	unsigned int reps = bench_reps(o, 41, 5);
	struct bench_samples s[NTIMES], extra, lib_only;
	double t[NTIMES];
	int ret = 0;

	bench_note(o, "fresh process per repetition, 1 MiB DONTNEED each, %u reps", reps);
	for (int i = 0; i < NTIMES; i++)
		if (bench_samples_init(&s[i], reps))
			return 1;
	if (bench_samples_init(&extra, reps) || bench_samples_init(&lib_only, reps))
		return 1;
	for (unsigned int r = 0; r < reps; r++) {
		if (spawn_one(t, false) || spawn_one(&t[NTIMES - 1], true)) {
			bench_note(o, "a fresh madvx-bench process failed (/proc/self/exe?)");
			ret = 1;
			break;
		}
		for (int i = 0; i < NTIMES; i++)
			bench_samples_add(&s[i], t[i] / 1e3);
		bench_samples_add(&extra, (t[0] - t[1]) / 1e3);
		bench_samples_add(&lib_only, (t[0] - t[NTIMES - 1]) / 1e3);
	}
	if (!ret) {
		double above;

		for (int i = 0; i < NTIMES; i++)
			bench_report(o, "p6", vname[i], "us", bench_median(s[i].v, s[i].n), "us");
		above = bench_median(extra.v, extra.n);
		bench_report(o, "p6", "first_use", "us_above_steady", above, "us");
		bench_target(o, "p6", "first use above a steady flush (us)", above, 100, false);
		above = bench_median(lib_only.v, lib_only.n);
		bench_report(o, "p6", "first_use", "us_above_plain", above, "us");
	}
	for (int i = 0; i < NTIMES; i++)
		bench_samples_free(&s[i]);
	bench_samples_free(&extra);
	bench_samples_free(&lib_only);
	return ret;
}
