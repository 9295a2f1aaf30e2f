// SPDX-License-Identifier: MIT
/*
 * madvx-bench: libmadvx against what a user would do instead, per scenario
 * (bench/scenarios.h). See BENCHMARKS.md for the method and the numbers.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <madvx.h>

#include "bench.h"

static const struct {
	const char *id;
	const char *desc;
	int (*run)(const struct bench_opts *o);
} scenarios[] = {
#define BENCH_SCENARIO(id, desc) { #id, desc, bench_##id },
#include "scenarios.h"
#undef BENCH_SCENARIO
};

#define NSCEN (sizeof(scenarios) / sizeof(scenarios[0]))

#define REPS_MAX 1000000u

/* A whole decimal number in [1, @max]; -1 for anything else ("", "5x", "-1", overflow). */
static long parse_count(const char *s, unsigned long max)
{
	unsigned long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < 1 || v > max)
		return -1;
	return (long)v;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: madvx-bench [--scenario p1,p2,...] [--reps N] [--quick] [--csv] [--check]\n"
		"                   [--plot FILE.png] [--list] [--version]\n"
		"  Runs each scenario's variants interleaved, N repetitions, and prints medians.\n"
		"  --reps N   repetitions, 1..%u (default: each scenario's own)\n"
		"  --quick    small sizes and few repetitions (CI smoke run)\n"
		"  --csv      stdout is CSV only: the header scenario,variant,metric,value,unit\n"
		"             first, then one row per result; notes go to stderr as '# ' lines\n"
		"  --check    exit 3 when a scenario's target is MISSED\n"
		"  --plot F   write a PNG plot where a scenario has one (needs gnuplot)\n"
		"  -V, --version  print the version and exit\n"
		"Exit: 0, 1 a scenario failed, 2 usage, 3 a target missed (--check).\n"
		"Scenarios that cannot run here say why. See madvx-bench(1).\n"
		"scenarios:\n", REPS_MAX);
	for (size_t i = 0; i < NSCEN; i++)
		fprintf(out, "  %-4s %s\n", scenarios[i].id, scenarios[i].desc);
}

static bool selected(const char *list, const char *id)
{
	size_t n = strlen(id);

	if (!list)
		return true;
	for (const char *p = list; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && !strncmp(p, id, n))
			return true;
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

static int check_names(const char *list)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool known = false;

		for (size_t i = 0; i < NSCEN; i++)
			known |= !strcmp(t, scenarios[i].id);
		if (!known) {
			fprintf(stderr, "madvx-bench: unknown scenario '%s' (--list)\n", t);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "scenario", required_argument, NULL, 's' },
		{ "reps", required_argument, NULL, 'r' },
		{ "quick", no_argument, NULL, 'q' },
		{ "csv", no_argument, NULL, 'c' },
		{ "plot", required_argument, NULL, 'p' },
		{ "list", no_argument, NULL, 'l' },
		{ "check", no_argument, NULL, 'k' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_opts o = { 0 };
	const char *list = NULL;
	int c, failed = 0, check = 0;
	long reps;

	/* p6 runs a copy of this program as its fresh process. */
	c = bench_p6_child();
	if (c >= 0)
		return c;
	while ((c = getopt_long(argc, argv, "s:r:qcp:lhV", lopts, NULL)) != -1) {
		switch (c) {
		case 's':
			list = optarg;
			break;
		case 'r':
			reps = parse_count(optarg, REPS_MAX);
			if (reps < 0) {
				fprintf(stderr, "madvx-bench: --reps: '%s' is not a whole number in 1..%u\n",
					optarg, REPS_MAX);
				return 2;
			}
			o.reps = (unsigned int)reps;
			break;
		case 'k':
			check = 1;
			break;
		case 'V':
			printf("madvx-bench (libmadvx) %s\n", madvx_version());
			return 0;
		case 'q':
			o.quick = true;
			break;
		case 'c':
			o.csv = true;
			break;
		case 'p':
			o.plot = optarg;
			break;
		case 'l':
			for (size_t i = 0; i < NSCEN; i++)
				printf("%s\t%s\n", scenarios[i].id, scenarios[i].desc);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || (list && check_names(list))) {
		usage(stderr);
		return 2;
	}
	if (o.csv)
		bench_header(&o);
	else {
		struct madvx_kernel_info ki = { .size = sizeof(ki) };

		madvx_kernel_info_get(&ki);
		printf("madvx-bench: libmadvx %s, Linux %s%s\n", madvx_version(), ki.release,
		       o.quick ? " (--quick: smoke sizes, not representative)" : "");
	}
	for (size_t i = 0; i < NSCEN; i++) {
		int ret;

		if (!selected(list, scenarios[i].id))
			continue;
		if (!o.csv)
			printf("\n== %s: %s\n", scenarios[i].id, scenarios[i].desc);
		ret = scenarios[i].run(&o);
		if (ret == BENCH_SKIP) {
			bench_note(&o, "%s skipped (see above)", scenarios[i].id);
		} else if (ret) {
			fprintf(stderr, "madvx-bench: %s failed (%d)\n", scenarios[i].id, ret);
			failed = 1;
		}
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "madvx-bench: write error: %s\n", strerror(errno));
		return 1;
	}
	if (failed)
		return 1;
	if (check && bench_targets_missed()) {
		fprintf(stderr, "madvx-bench: %u target(s) MISSED (--check)\n", bench_targets_missed());
		return 3;
	}
	return 0;
}
