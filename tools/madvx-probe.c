// SPDX-License-Identifier: MIT
/*
 * madvx-probe: what will this kernel do with my hints?
 *
 * Prints the libmadvx capability probe as a table, or with --json as one JSON
 * object, including for every advice the lock a madvise() of it takes here.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <madvx.h>

#include "probe-verify.h"

static const char *const thp_names[] = {
	[MADVX_THP_UNKNOWN] = "unknown",
	[MADVX_THP_ALWAYS] = "always",
	[MADVX_THP_MADVISE] = "madvise",
	[MADVX_THP_NEVER] = "never",
};

static int verify;	/* --verify: measured locks beside the predicted ones */

static const char *yes_no(int v)
{
	return v > 0 ? "yes" : "no";
}

/* Warn about MADVX_DISABLE names the library does not know (it ignores them). */
static void check_disable_env(void)
{
	const char *env = getenv("MADVX_DISABLE");
	char buf[512], *save = NULL;

	if (!env)
		return;
	snprintf(buf, sizeof(buf), "%s", env);
	for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		int f, known = 0;

		for (f = 0; f < MADVX_FEAT__COUNT; f++)
			known |= !strcmp(t, madvx_feature_name(f));
		if (!known)
			fprintf(stderr, "madvx-probe: MADVX_DISABLE: unknown feature '%s'\n", t);
	}
}

static void print_table(const struct madvx_kernel_info *ki)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	printf("libmadvx %s on Linux %s\n\n", madvx_version(), ki->release);
	printf("%-22s %-4s %s\n", "feature", "", "note");
	for (int f = 0; f < MADVX_FEAT__COUNT; f++)
		printf("%-22s %-4s %s\n", madvx_feature_name(f),
		       yes_no(madvx_feature_supported(f)),
		       madvx_feature_disabled(f) > 0 ? "(forced off by MADVX_DISABLE)" : "");
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

static void print_json(const struct madvx_kernel_info *ki)
{
	int adv[64], n = madvx_advice_list(adv, 64);

	printf("{\"version\":\"%s\",\"kernel\":\"%s\",\"features\":{",
	       madvx_version(), ki->release);
	for (int f = 0; f < MADVX_FEAT__COUNT; f++)
		printf("%s\"%s\":%s", f ? "," : "", madvx_feature_name(f),
		       madvx_feature_supported(f) > 0 ? "true" : "false");
	printf("},\"disabled\":[");
	for (int f = 0, first = 1; f < MADVX_FEAT__COUNT; f++) {
		if (madvx_feature_disabled(f) > 0) {
			printf("%s\"%s\"", first ? "" : ",", madvx_feature_name(f));
			first = 0;
		}
	}
	printf("],\"thp\":\"%s\",\"io_uring_disabled\":%d,\"async_backend\":\"%s\","
	       "\"unprivileged_userfaultfd\":%d,\"uffd_features\":%llu,\"advice\":{",
	       thp_names[ki->thp], ki->io_uring_disabled,
	       madvx_async_backend_name(madvx_async_default_backend()),
	       ki->unprivileged_userfaultfd, (unsigned long long)ki->uffd_features);
	for (int i = 0; i < n && i < 64; i++) {
		printf("%s\"%s\":{\"value\":%d,\"process_madvise\":%s,\"lock\":\"%s\"",
		       i ? "," : "", madvx_advice_name(adv[i]), adv[i],
		       madvx_advice_supported(adv[i]) > 0 ? "true" : "false",
		       madvx_lock_name(madvx_advice_lock(adv[i])));
		if (verify)
			verify_print_json(i);
		printf("}");
	}
	printf("}}\n");
}

static void usage(FILE *out)
{
	fprintf(out, "usage: madvx-probe [--json] [--verify]\n"
		"  Prints what the running kernel offers libmadvx and which lock\n"
		"  each madvise advice takes. MADVX_DISABLE=name,... forces features off.\n"
		"  --verify  (root) also measure the lock each advice takes, with the\n"
		"            mmap_lock tracepoints, on scratch mappings in one and in two\n"
		"            VMAs (JSON: \"lock_measured\" per advice). Exit 77 with the\n"
		"            reason on stderr when it cannot measure (not root, no tracefs,\n"
		"            no mmap_lock tracepoints); exit 1 when a measured lock\n"
		"            differs from the prediction.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verify", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	int json = 0, c, ret = 0;

	while ((c = getopt_long(argc, argv, "jhV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'V':
			verify = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	check_disable_env();
	if (madvx_kernel_info_get(&ki)) {
		fprintf(stderr, "madvx-probe: madvx_kernel_info failed\n");
		return 1;
	}
	if (verify) {
		int adv[64], n = madvx_advice_list(adv, 64);
		char why[256];

		if (verify_open(why, sizeof(why))) {
			fprintf(stderr, "madvx-probe: --verify cannot measure here: %s\n", why);
			return 77;
		}
		verify_run(adv, n < 64 ? n : 64);
	}
	if (json)
		print_json(&ki);
	else
		print_table(&ki);
	if (verify) {
		/* A lock other than the predicted one is a finding: say so in the exit code. */
		ret = verify_differences() ? 1 : 0;
		verify_close();
	}
	return ret;
}
