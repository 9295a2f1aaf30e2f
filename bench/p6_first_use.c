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
 * first use: the probe's core, the batch storage, the first VMA look-up),
 * then add + flush of another range on that batch (steady state), then
 * one madvise(). Medians over the repetitions; the number of system calls
 * of the first use is counted by tests/test_sandbox.c (first_flush_syscalls).
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
#define CHILD_ENV "MADVX_BENCH_P6_CHILD"

extern char **environ;

/* In the fresh process: three numbers on stdout. */
static int child(void)
{
	char *p = bench_map(LEN), *q = bench_map(LEN), *r = bench_map(LEN);
	struct madvx_batch *b;
	uint64_t t0, t1, t2, t3;

	if (!p || !q || !r)
		return 1;
	bench_touch(p, LEN);
	bench_touch(q, LEN);
	bench_touch(r, LEN);
	t0 = bench_now_ns();
	if (madvx_batch_create(NULL, &b) || madvx_batch_add(b, p, LEN, MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(b))
		return 1;
	t1 = bench_now_ns();
	if (madvx_batch_add(b, q, LEN, MADV_DONTNEED) < 0 || madvx_batch_flush(b))
		return 1;
	t2 = bench_now_ns();
	if (madvise(r, LEN, MADV_DONTNEED))
		return 1;
	t3 = bench_now_ns();
	printf("%llu %llu %llu\n", (unsigned long long)(t1 - t0),
	       (unsigned long long)(t2 - t1), (unsigned long long)(t3 - t2));
	madvx_batch_free(b);
	return 0;
}

int bench_p6_child(void)
{
	return getenv(CHILD_ENV) ? child() : -1;
}

/* One fresh process: its three times, or -1. */
static int spawn_one(double out[3])
{
	char *argv[] = { "madvx-bench", NULL };
	char **env, buf[128] = "";
	posix_spawn_file_actions_t fa;
	unsigned long long v[3];
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
	env[k++] = CHILD_ENV "=1";
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
		    sscanf(buf, "%llu %llu %llu", &v[0], &v[1], &v[2]) == 3) {
			for (int i = 0; i < 3; i++)
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
	static const char *const vname[3] = { "first_use", "steady_flush", "single_madvise" };
	unsigned int reps = bench_reps(o, 41, 5);
	struct bench_samples s[3], extra;
	double t[3];
	int ret = 0;

	bench_note(o, "fresh process per repetition, 1 MiB DONTNEED each, %u reps", reps);
	for (int i = 0; i < 3; i++)
		if (bench_samples_init(&s[i], reps))
			return 1;
	if (bench_samples_init(&extra, reps))
		return 1;
	for (unsigned int r = 0; r < reps; r++) {
		if (spawn_one(t)) {
			bench_note(o, "a fresh madvx-bench process failed (/proc/self/exe?)");
			ret = 1;
			break;
		}
		for (int i = 0; i < 3; i++)
			bench_samples_add(&s[i], t[i] / 1e3);
		bench_samples_add(&extra, (t[0] - t[1]) / 1e3);
	}
	if (!ret) {
		double above;

		for (int i = 0; i < 3; i++)
			bench_report(o, "p6", vname[i], "us", bench_median(s[i].v, s[i].n), "us");
		above = bench_median(extra.v, extra.n);
		bench_report(o, "p6", "first_use", "us_above_steady", above, "us");
		bench_target(o, "p6", "first use above a steady flush (us)", above, 100, false);
	}
	for (int i = 0; i < 3; i++)
		bench_samples_free(&s[i]);
	bench_samples_free(&extra);
	return ret;
}
