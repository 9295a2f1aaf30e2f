// SPDX-License-Identifier: MIT
/*
 * madvx-reclaim: deactivate or page out another process's memory with a
 * bound on how long each kernel call holds its mmap_lock (madvx_reclaim()).
 * Exit codes (also in madvx-reclaim(1)):
 *   0 done (complete, budget reached, VMAs changed meanwhile, or dry run)
 *   1 other failure   2 usage   3 no such process / it exited
 *   4 not permitted (CAP_SYS_NICE or ptrace access missing)
 *   5 not supported by this kernel (advice refused remotely, no process_madvise)
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <madvx.h>

#include "uapi-compat.h"

enum { EX_OK = 0, EX_FAIL = 1, EX_USAGE = 2, EX_NOPROC = 3, EX_PERM = 4, EX_NOTSUP = 5 };

struct cli {
	int pid, pidfd;
	bool json, dry_run, bar;
	struct madvx_reclaim_opts o;
	uint64_t bar_last_ns;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: madvx-reclaim PID|--pidfd N [--anon] [--file] [--cold|--pageout]\n"
		"                     [--budget BYTES] [--max-lock-ms MS] [--pause-ms MS]\n"
		"                     [--dry-run] [--json]\n"
		"  Deactivates (--cold, default) or pages out (--pageout) the anonymous and/or\n"
		"  file-backed memory of a process, holding its mmap_lock at most MS per call\n"
		"  (default %.1f) and leaving its writers a gap of MS after each (default %.2f\n"
		"  for --cold, %.2f for --pageout; 0: none). BYTES takes K, M, G suffixes.\n"
		"  Needs CAP_SYS_NICE and ptrace read access to the target.\n"
		"Exit: 0 done, 1 failure, 2 usage, 3 no such process, 4 not permitted,\n"
		"      5 not supported by this kernel.\n",
		MADVX_RECLAIM_DEFAULT_MAX_LOCK_US / 1e3, MADVX_RECLAIM_DEFAULT_PAUSE_US / 1e3,
		MADVX_RECLAIM_DEFAULT_PAUSE_US_PAGEOUT / 1e3);
}

static int parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end);
	uint64_t mul = 1;

	if (end == s || v < 0)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	case 't': case 'T': mul = 1ULL << 40; end++; break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -1;
	*out = (uint64_t)(v * (double)mul);
	return 0;
}

static int parse_ms(const char *s, uint32_t *us)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v < 0 || v > 4e6)
		return -1;
	*us = (uint32_t)(v * 1000.0 + 0.5);
	return 0;
}

static const char *human(uint64_t b, char *buf, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int i = 0;

	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
	return buf;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Progress bar on stderr when it is a terminal: bytes done of planned, rate. */
static int progress(void *ctx, const struct madvx_reclaim_report *r)
{
	struct cli *c = ctx;
	uint64_t now = mono_ns();
	char a[32], b[32], rate[32];
	double frac, secs;
	int fill;

	if (now - c->bar_last_ns < 100000000ULL && r->bytes < r->planned_bytes)
		return 0;	/* 10 updates per second are enough */
	c->bar_last_ns = now;
	frac = r->planned_bytes ? (double)r->bytes / (double)r->planned_bytes : 1;
	if (frac > 1)
		frac = 1;
	fill = (int)(frac * 30);
	secs = r->call_ns ? (double)r->call_ns / 1e9 : 0;
	fprintf(stderr, "\r[%.*s%*s] %s / %s  %s/s ", fill,
		"##############################", 30 - fill, "",
		human(r->bytes, a, sizeof(a)), human(r->planned_bytes, b, sizeof(b)),
		human(secs > 0 ? (uint64_t)((double)r->bytes / secs) : 0, rate, sizeof(rate)));
	return 0;
}

static const char *advice_name(int advice)
{
	return advice == MADV_PAGEOUT ? "MADV_PAGEOUT" : "MADV_COLD";
}

/* The message for an error, and the exit code it maps to. */
static int explain(const struct cli *c, int err, char *msg, size_t len)
{
	switch (err) {
	case -ESRCH:
		snprintf(msg, len, "no process %d (it does not exist or it exited)", c->pid);
		return EX_NOPROC;
	case -EPERM:
		snprintf(msg, len, "not permitted: advising another process needs CAP_SYS_NICE "
			 "(run as root, or setcap cap_sys_nice+ep on this program)");
		return EX_PERM;
	case -EACCES:
		snprintf(msg, len, "no ptrace read access to process %d: it must run as your "
			 "user and be dumpable, or you need CAP_SYS_PTRACE "
			 "(see also /proc/sys/kernel/yama/ptrace_scope)", c->pid);
		return EX_PERM;
	case -EINVAL:
		snprintf(msg, len, "this kernel does not accept %s for another process "
			 "(remote process_madvise() allows only MADV_COLD, MADV_PAGEOUT, "
			 "MADV_WILLNEED, MADV_COLLAPSE)", advice_name(c->o.advice));
		return EX_NOTSUP;
	case -ENOSYS:
		snprintf(msg, len, "this kernel has no process_madvise() or pidfd_open() "
			 "(Linux 5.10 or later needed)");
		return EX_NOTSUP;
	case -EBADF:
		snprintf(msg, len, "--pidfd %d is not a pidfd", c->pidfd);
		return EX_USAGE;
	default:
		snprintf(msg, len, "%s", strerror(-err));
		return EX_FAIL;
	}
}

static void print_json(const struct cli *c, const struct madvx_reclaim_report *r,
		       int ret, const char *msg)
{
	bool first = true;

	printf("{\"pid\":%d,\"advice\":\"%s\",\"dry_run\":%s,\"stop\":\"%s\",\"error\":%d,"
	       "\"message\":\"%s\",", c->pid, advice_name(c->o.advice),
	       c->dry_run ? "true" : "false", madvx_reclaim_stop_name(r->stop) ?: "error",
	       ret < 0 ? -ret : 0, msg);
	printf("\"planned_bytes\":%llu,\"planned_vmas\":%llu,\"bytes\":%llu,\"calls\":%llu,"
	       "\"entries\":%llu,\"vmas_changed\":%llu,\"failed_entries\":%llu,",
	       (unsigned long long)r->planned_bytes, (unsigned long long)r->planned_vmas,
	       (unsigned long long)r->bytes, (unsigned long long)r->calls,
	       (unsigned long long)r->entries, (unsigned long long)r->vmas_changed,
	       (unsigned long long)r->failed_entries);
	printf("\"errors\":{");
	for (int e = 0; e < 64; e++) {
		if (!r->errors[e])
			continue;
		printf("%s\"%d\":%llu", first ? "" : ",", e, (unsigned long long)r->errors[e]);
		first = false;
	}
	printf("},\"max_lock_us\":%u,\"pause_us\":%u,\"max_call_ns\":%llu,"
	       "\"calls_over_bound\":%llu,\"call_ns\":%llu,\"elapsed_ns\":%llu,\"plan_ns\":%llu,",
	       r->max_lock_us, r->pause_us,
	       (unsigned long long)r->max_call_ns, (unsigned long long)r->calls_over_bound,
	       (unsigned long long)r->call_ns, (unsigned long long)r->elapsed_ns,
	       (unsigned long long)r->plan_ns);
	printf("\"rss_before\":%llu,\"swap_before\":%llu,\"pss_before\":%llu,"
	       "\"rss_after\":%llu,\"swap_after\":%llu,\"pss_after\":%llu}\n",
	       (unsigned long long)r->rss_before, (unsigned long long)r->swap_before,
	       (unsigned long long)r->pss_before, (unsigned long long)r->rss_after,
	       (unsigned long long)r->swap_after, (unsigned long long)r->pss_after);
}

static void print_human(const struct cli *c, const struct madvx_reclaim_report *r)
{
	char a[32], b[32], d[32], e[32];
	double secs = (double)r->elapsed_ns / 1e9;
	bool any = false;

	printf("madvx-reclaim: pid %d, %s%s: %llu VMAs, %s planned\n", c->pid,
	       advice_name(c->o.advice), c->dry_run ? " (dry run: nothing advised)" : "",
	       (unsigned long long)r->planned_vmas, human(r->planned_bytes, a, sizeof(a)));
	if (!c->dry_run) {
		printf("  advised %s in %llu calls (%llu entries), %.3f s, %s/s in calls\n",
		       human(r->bytes, a, sizeof(a)), (unsigned long long)r->calls,
		       (unsigned long long)r->entries, secs,
		       human(r->call_ns ? (uint64_t)((double)r->bytes * 1e9 / (double)r->call_ns) : 0,
			     b, sizeof(b)));
		printf("  longest call %.2f ms (bound %.2f ms, %llu over), gap after each %.2f ms\n",
		       (double)r->max_call_ns / 1e6, (double)r->max_lock_us / 1e3,
		       (unsigned long long)r->calls_over_bound, (double)r->pause_us / 1e3);
		printf("  refused entries: %llu", (unsigned long long)r->failed_entries);
		for (int k = 0; k < 64; k++) {
			if (!r->errors[k])
				continue;
			printf("%s%s x%llu", any ? ", " : " (", k ? strerror(k) : "other",
			       (unsigned long long)r->errors[k]);
			any = true;
		}
		printf("%s; ranges changed meanwhile: %llu\n", any ? ")" : "",
		       (unsigned long long)r->vmas_changed);
	}
	if (r->rss_before || r->rss_after)
		printf("  RSS %s -> %s, Swap %s -> %s\n", human(r->rss_before, a, sizeof(a)),
		       human(r->rss_after, b, sizeof(b)), human(r->swap_before, d, sizeof(d)),
		       human(r->swap_after, e, sizeof(e)));
	printf("  stopped: %s\n", madvx_reclaim_stop_name(r->stop) ?: "error");
}

static int parse_args(struct cli *c, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "pidfd", required_argument, NULL, 'P' },
		{ "anon", no_argument, NULL, 'a' },
		{ "file", no_argument, NULL, 'f' },
		{ "cold", no_argument, NULL, 'c' },
		{ "pageout", no_argument, NULL, 'p' },
		{ "budget", required_argument, NULL, 'b' },
		{ "max-lock-ms", required_argument, NULL, 'm' },
		{ "pause-ms", required_argument, NULL, 's' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (opt) {
		case 'P':
			c->pidfd = atoi(optarg);
			if (c->pidfd < 0 || !*optarg)
				return -1;
			break;
		case 'a':
			c->o.include |= MADVX_VMA_ANON;
			break;
		case 'f':
			c->o.include |= MADVX_VMA_FILE;
			break;
		case 'c':
			c->o.advice = MADV_COLD;
			break;
		case 'p':
			c->o.advice = MADV_PAGEOUT;
			break;
		case 'b':
			if (parse_bytes(optarg, &c->o.budget))
				return -1;
			break;
		case 'm':
			if (parse_ms(optarg, &c->o.max_lock_us) || !c->o.max_lock_us)
				return -1;
			break;
		case 's':
			if (parse_ms(optarg, &c->o.pause_us))
				return -1;
			/* 0: no gap at all (the library's 0 means its default) */
			if (c->o.pause_us)
				c->o.flags &= ~MADVX_RECLAIM_NO_PAUSE;
			else
				c->o.flags |= MADVX_RECLAIM_NO_PAUSE;
			break;
		case 'n':
			c->dry_run = true;
			c->o.flags |= MADVX_RECLAIM_DRYRUN;
			break;
		case 'j':
			c->json = true;
			break;
		case 'h':
			usage(stdout);
			exit(EX_OK);
		default:
			return -1;
		}
	}
	if (c->pidfd >= 0 && optind == argc)
		return 0;
	if (c->pidfd < 0 && optind + 1 == argc) {
		char *end;

		c->pid = (int)strtol(argv[optind], &end, 10);
		return *end || c->pid <= 0 ? -1 : 0;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct cli c = { .pidfd = -1, .o = { .size = sizeof(c.o), .advice = MADV_COLD } };
	struct madvx_reclaim_report r = { .size = sizeof(r) };
	struct madvx_target *t = NULL;
	char msg[512] = "";
	int ret, code = EX_OK;

	if (parse_args(&c, argc, argv)) {
		usage(stderr);
		return EX_USAGE;
	}
	ret = c.pidfd >= 0 ? madvx_target_open_pidfd(c.pidfd, 0, &t) :
			     madvx_target_open(c.pid, 0, &t);
	if (!ret) {
		c.pid = madvx_target_pid(t);
		c.bar = !c.json && isatty(STDERR_FILENO);
		if (c.bar) {
			c.o.progress = progress;
			c.o.progress_ctx = &c;
		}
		ret = madvx_reclaim(t, &c.o, &r);
		if (c.bar && r.calls)
			fputc('\n', stderr);
	} else {
		r.stop = MADVX_RECLAIM_ERROR;
	}
	if (ret) {
		code = explain(&c, ret, msg, sizeof(msg));
		fprintf(stderr, "madvx-reclaim: %s\n", msg);
	}
	if (c.json)
		print_json(&c, &r, ret, msg);
	else if (t)
		print_human(&c, &r);
	madvx_target_free(t);
	return code;
}
