// SPDX-License-Identifier: MIT
/*
 * madvx-probe: what will this kernel do with my hints?
 *
 * Prints the libmadvx capability probe as a table, or with --json as one JSON
 * object, including for every advice the lock a madvise() of it takes here.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <madvx.h>

#include "pervma-measure.h"
#include "probe-verify.h"

static const char *const thp_names[] = {
	[MADVX_THP_UNKNOWN] = "unknown",
	[MADVX_THP_ALWAYS] = "always",
	[MADVX_THP_MADVISE] = "madvise",
	[MADVX_THP_NEVER] = "never",
};

/*
 * Bump when a key of the JSON object changes meaning or goes away (adding a
 * key is not a change): consumers check "schema_version" first.
 */
#define JSON_SCHEMA_VERSION 1

static int verify;	/* --verify: measured locks beside the predicted ones */

/* @s as a JSON string, every character that needs it escaped (RFC 8259). */
static void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static const char *yes_no(int v)
{
	return v > 0 ? "yes" : "no";
}

/* Warn about names in @var the library does not know (it ignores them). */
static void check_names_env(const char *var, bool plan_only)
{
	const char *env = getenv(var);
	char buf[512], *save = NULL;

	if (!env)
		return;
	snprintf(buf, sizeof(buf), "%s", env);
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		int f, known = 0;

		for (f = 0; f < MADVX_FEAT__COUNT; f++)
			if (!strcmp(t, madvx_feature_name(f)))
				known = !plan_only || f == MADVX_FEAT_PER_VMA_COLD_PAGEOUT ||
					f == MADVX_FEAT_PER_VMA_UFFD;
		if (!known)
			fprintf(stderr, "madvx-probe: %s: %s '%s' (ignored)\n", var,
				plan_only ? "not a planning feature" : "unknown feature", t);
	}
}

/* Where the answer for @f came from. */
static const char *source(const struct madvx_kernel_info *ki, int f)
{
	uint64_t bit = 1ULL << f;

	if (madvx_feature_disabled(f) > 0)
		return "MADVX_DISABLE";
	if (ki->assumed & bit)
		return "MADVX_ASSUME";
	if (ki->measured & bit)
		return "measured (per-boot cache)";
	if (f == MADVX_FEAT_PER_VMA_COLD_PAGEOUT || f == MADVX_FEAT_PER_VMA_UFFD)
		return "not measured (madvx-probe --measure as root, or MADVX_ASSUME)";
	if (f == MADVX_FEAT_IO_URING_BUILT)
		return "build";
	if (f == MADVX_FEAT_MADVISE_VMA_STATS)
		return "retired (always no)";
	if (f == MADVX_FEAT_PER_VMA_MADVISE)
		return "kernel version, SMP and arch (uname)";
	return "probe";
}

static void print_table(const struct madvx_kernel_info *ki)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	printf("libmadvx %s on Linux %s\n\n", madvx_version(), ki->release);
	printf("%-22s %-4s %s\n", "feature", "", "source");
	for (int f = 0; f < MADVX_FEAT__COUNT; f++)
		printf("%-22s %-4s %s\n", madvx_feature_name(f),
		       yes_no(madvx_feature_supported(f)), source(ki, f));
	printf("%-22s %s\n", "measurement cache", pervma_cache_path());
	printf("\n%-22s %s\n", "THP", thp_names[ki->thp]);
	printf("%-22s %d\n", "io_uring_disabled", ki->io_uring_disabled);
	printf("%-22s %s (MADVX_ASYNC_BACKEND overrides)\n", "async backend",
	       madvx_async_backend_name(madvx_async_default_backend()));
	printf("%-22s %d\n", "unprivileged_uffd", ki->unprivileged_userfaultfd);
	printf("%-22s 0x%llx\n", "uffd features", (unsigned long long)ki->uffd_features);

	printf("\n%-22s %-16s %s\n", "advice", "process_madvise", "lock (single VMA; multi-VMA ranges take mmap-read or worse)");
	for (int i = 0; i < n && i < 64; i++)
		printf("%-22s %-16s %s\n", madvx_advice_name(adv[i]),
		       yes_no(madvx_advice_supported(adv[i])),
		       madvx_lock_name(madvx_advice_lock(adv[i])));
	if (verify)
		verify_print_table();
}

/* @verify_error: why --verify could not measure (a "verify_error" key), or NULL. */
static void print_json(const struct madvx_kernel_info *ki, const char *verify_error)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	printf("{\"schema_version\":%d,\"version\":", JSON_SCHEMA_VERSION);
	json_str(madvx_version());
	printf(",\"kernel\":");
	json_str(ki->release);
	printf(",\"features\":{");
	for (int f = 0; f < MADVX_FEAT__COUNT; f++) {
		printf("%s", f ? "," : "");
		json_str(madvx_feature_name(f));
		printf(":%s", madvx_feature_supported(f) > 0 ? "true" : "false");
	}
	printf("},\"sources\":{");
	for (int f = 0; f < MADVX_FEAT__COUNT; f++) {
		printf("%s", f ? "," : "");
		json_str(madvx_feature_name(f));
		printf(":");
		json_str(source(ki, f));
	}
	printf("},\"disabled\":[");
	for (int f = 0, first = 1; f < MADVX_FEAT__COUNT; f++) {
		if (madvx_feature_disabled(f) > 0) {
			printf("%s", first ? "" : ",");
			json_str(madvx_feature_name(f));
			first = 0;
		}
	}
	printf("],\"thp\":");
	json_str(thp_names[ki->thp]);
	printf(",\"io_uring_disabled\":%d,\"async_backend\":", ki->io_uring_disabled);
	json_str(madvx_async_backend_name(madvx_async_default_backend()));
	printf(",\"unprivileged_userfaultfd\":%d,\"uffd_features\":%llu,",
	       ki->unprivileged_userfaultfd, (unsigned long long)ki->uffd_features);
	if (verify_error) {
		printf("\"verify_error\":");
		json_str(verify_error);
		printf(",");
	}
	printf("\"advice\":{");
	for (int i = 0; i < n && i < 64; i++) {
		printf("%s", i ? "," : "");
		json_str(madvx_advice_name(adv[i]));
		printf(":{\"value\":%d,\"process_madvise\":%s,\"lock\":", adv[i],
		       madvx_advice_supported(adv[i]) > 0 ? "true" : "false");
		json_str(madvx_lock_name(madvx_advice_lock(adv[i])));
		if (verify && !verify_error)
			verify_print_json(i);
		printf("}");
	}
	printf("}}\n");
}

/* Exit status @ret, unless stdout could not be written (a full disk, a closed pipe). */
static int finish(int ret)
{
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "madvx-probe: write error: %s\n", strerror(errno));
		return 1;
	}
	return ret;
}

/* --measure: 0, or non-zero with the reason on stderr. */
static int measure_and_cache(void)
{
	const char *path = pervma_cache_path();
	struct pervma_result r;
	struct locktrace lt;
	int ret = locktrace_open(&lt);

	if (ret) {
		fprintf(stderr, "madvx-probe: --measure cannot measure here: %s\n", lt.why);
		return ret;
	}
	ret = pervma_measure(&lt, &r);
	locktrace_close(&lt);
	if (ret) {
		fprintf(stderr, "madvx-probe: --measure: %s\n", strerror(-ret));
		return ret;
	}
	ret = pervma_cache_write(path, &r);
	if (ret) {
		fprintf(stderr, "madvx-probe: --measure: cannot write %s: %s\n", path,
			strerror(-ret));
		return ret;
	}
	fprintf(stderr, "madvx-probe: measured: MADV_COLD %llu, MADV_PAGEOUT %llu mmap_lock "
		"acquisitions per %d single-VMA calls (fewest of 3); MADV_DONTNEED on a uffd VMA: ",
		r.cold_acq, r.pageout_acq, 4);
	if (r.uffd_tried)
		fprintf(stderr, "%llu\n", r.uffd_acq);
	else
		fprintf(stderr, "not measured (no userfaultfd)\n");
	fprintf(stderr, "madvx-probe: wrote %s\n", path);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: madvx-probe [--json] [--verify] [--measure] [--version] [--help]\n"
		"  Prints what the running kernel offers libmadvx, where each answer\n"
		"  came from, and which lock each madvise advice takes.\n"
		"  MADVX_DISABLE=name,... forces features off; MADVX_ASSUME=name,...\n"
		"  turns planning features (per_vma_cold_pageout, per_vma_uffd) on.\n"
		"  --measure (root) measure the planning features with the mmap_lock\n"
		"            tracepoints and write them to the per-boot cache\n"
		"            ($MADVX_PROBE_CACHE, default " MADVX_PROBE_CACHE_PATH "),\n"
		"            which every process using libmadvx then reads; exit 77\n"
		"            when it cannot measure.\n"
		"  --verify  (root) also measure the lock each advice takes, with the\n"
		"            mmap_lock tracepoints, on scratch mappings in one and in two\n"
		"            VMAs (JSON: \"lock_measured\" per advice). Exit 77 with the\n"
		"            reason on stderr (JSON: \"verify_error\") when it cannot\n"
		"            measure (not root, no tracefs, no mmap_lock tracepoints);\n"
		"            exit 1 when a measured lock differs from the prediction.\n"
		"  -V, --version  print the version and exit.\n"
		"  See madvx-probe(1).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verify", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "measure", no_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	int json = 0, measure = 0, c, ret = 0;
	char why[256];
	const char *verify_error = NULL;

	while ((c = getopt_long(argc, argv, "jhV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'v':
			verify = 1;
			break;
		case 'M':
			measure = 1;
			break;
		case 'V':
			printf("madvx-probe (libmadvx) %s\n", madvx_version());
			return finish(0);
		case 'h':
			usage(stdout);
			return finish(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "madvx-probe: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	check_names_env("MADVX_DISABLE", false);
	check_names_env("MADVX_ASSUME", true);
	/* Before the library's probe runs, so that it reads the new cache. */
	if (measure && measure_and_cache())
		return 77;
	if (madvx_kernel_info_get(&ki)) {
		fprintf(stderr, "madvx-probe: madvx_kernel_info_get failed\n");
		return 1;
	}
	if (verify) {
		int adv[64], n = madvx_advice_list(adv, 64);

		if (verify_open(why, sizeof(why))) {
			fprintf(stderr, "madvx-probe: --verify cannot measure here: %s\n", why);
			if (!json)
				return 77;
			/* JSON consumers get an object with the reason, not nothing. */
			verify_error = why;
			ret = 77;
		} else {
			verify_run(adv, n < 64 ? n : 64);
		}
	}
	if (json)
		print_json(&ki, verify_error);
	else
		print_table(&ki);
	if (verify && !verify_error) {
		/* A lock other than the predicted one is a finding: say so in the exit code. */
		ret = verify_differences() ? 1 : 0;
		verify_close();
	}
	return finish(ret);
}
