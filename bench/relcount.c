// SPDX-License-Identifier: MIT
/*
 * madvx-relcount: what a program's memory release path costs, measured from
 * outside the program (bench/clients.sh runs allocators' benchmarks with
 * it, stock and routed through libmadvx).
 *
 *   madvx-relcount [-t] [-o FILE] [--] COMMAND [ARG...]
 *
 * Runs COMMAND and writes one line of name=value words to FILE (default
 * standard error): status (its exit code, or 128 + signal), wall_ms,
 * maxrss_kb (the largest resident set of the command and its waited-for
 * children, from wait4()) and user_ms / sys_ms (the CPU time of the command
 * and its waited-for children, user and kernel, from wait4(): the work a
 * fixed-work program did, which on a shared machine moves less with other
 * load than its wall time does). With -t (root: tracefs), the command's whole
 * process tree is traced from its first instruction (tools/locktrace.c,
 * locktrace_run()) and the line also has:
 *   madvise, process_madvise   calls of each
 *   stack_madvise              of the madvise calls, those whose start lies
 *                              in a MAP_STACK mapping: glibc's release of an
 *                              exited thread's stack (nptl advise_stack_range),
 *                              not an allocator's (in stock and routed runs)
 *   procmap_query              PROCMAP_QUERY ioctls (libmadvx's VMA look-ups)
 *   rel_lock_read, rel_lock_write
 *                              mmap_lock acquisitions made inside madvise()
 *                              and process_madvise() (the release calls'
 *                              own; a per-VMA lock is not an acquisition)
 *   alloc_lock_read, alloc_lock_write
 *                              those made inside the allocator's calls, i.e.
 *                              all but glibc's stack_madvise: in a routed
 *                              run libmadvx's process_madvise() and its
 *                              madvise() of a lone entry (src/issue.c)
 *   rel_us                     microseconds spent inside the release calls
 *                              (madvise() but stack_madvise, and
 *                              process_madvise()), summed over threads,
 *                              from the trace's timestamps: what the
 *                              program's threads spend releasing
 *   lock_read, lock_write      every mmap_lock acquisition of the tree
 *   lost                       1 when the trace buffer overflowed (counts low)
 * Tracing costs time: take wall_ms from a run without -t.
 * Exits with the command's status (125 when it could not be measured).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "locktrace.h"

#define TIDS (1u << 16)		/* thread slots, open addressing */
#define IN_MADVISE 1
#define IN_PMADV 2
#define IN_STACK_MADVISE 3	/* glibc's, not timed */
#define STACKS 4096		/* MAP_STACK mappings alive at once */

/*
 * The MAP_STACK mappings of the traced tree. Processes are not told apart:
 * a stack of one process and a heap of another at the same address would
 * be confused, which the workloads (one process) never meet.
 */
struct stack_map {
	uint64_t start, end;
};

struct counts {
	uint64_t madvise, stack_madvise, process_madvise, procmap_query;
	uint64_t rel_lock[2], alloc_lock[2], lock[2];	/* [0] read, [1] write */
	uint64_t rel_us;
	int32_t tid[TIDS];
	uint8_t in_release[TIDS];	/* IN_MADVISE, IN_PMADV, IN_STACK_MADVISE or 0 */
	uint64_t entered_us[TIDS];	/* when the release call in flight began */
	uint64_t stack_len[TIDS];	/* a MAP_STACK mmap() in flight: its length */
	struct stack_map stack[STACKS];
	uint32_t nstack;
	bool tids_full, stacks_full;
};

static const char *const trace_events[] = {
	"syscalls/sys_enter_madvise",
	"syscalls/sys_exit_madvise",
	"syscalls/sys_enter_process_madvise",
	"syscalls/sys_exit_process_madvise",
	/* PROCMAP_QUERY = _IOWR('f', 17, struct procmap_query): 0xc0686611 */
	"syscalls/sys_enter_ioctl:cmd == 0xc0686611",
	/* glibc maps thread stacks with MAP_STACK (0x20000 on x86-64 and arm64) */
	"syscalls/sys_enter_mmap:flags & 0x20000",
	"syscalls/sys_exit_mmap",
	"syscalls/sys_enter_munmap",
	NULL,
};

/* The slot of thread @tid, or -1 once the table is full. */
static int tid_slot(struct counts *c, long tid)
{
	uint32_t h = (uint32_t)tid * 2654435761u;

	for (uint32_t i = 0; i < TIDS; i++) {
		uint32_t s = (h + i) & (TIDS - 1);

		if (c->tid[s] == tid)
			return (int)s;
		if (c->tid[s] == 0) {
			c->tid[s] = (int32_t)tid;
			return (int)s;
		}
	}
	c->tids_full = true;
	return -1;
}

/* The value of "NAME: 0x..." in a syscall event's text, or 0. */
static uint64_t field(const char *ev, const char *name)
{
	const char *f = strstr(ev, name);

	return f ? strtoull(f + strlen(name), NULL, 16) : 0;
}

static int stack_of(const struct counts *c, uint64_t addr)
{
	for (uint32_t i = 0; i < c->nstack; i++)
		if (addr >= c->stack[i].start && addr < c->stack[i].end)
			return (int)i;
	return -1;
}

static void stack_mapped(struct counts *c, uint64_t start, uint64_t len)
{
	if (c->nstack == STACKS) {
		c->stacks_full = true;
		return;
	}
	c->stack[c->nstack++] = (struct stack_map){ start, start + len };
}

/* munmap() of a stack's start forgets it (glibc unmaps cached stacks whole). */
static void stack_unmapped(struct counts *c, uint64_t start)
{
	int i = stack_of(c, start);

	if (i >= 0)
		c->stack[i] = c->stack[--c->nstack];
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The timestamp of a trace line, the token before @ev's ": ", in us. */
static uint64_t line_us(const char *text, const char *ev)
{
	const char *q = ev - 2;
	unsigned long long sec, usec;

	while (q > text && q[-1] != ' ')
		q--;
	if (sscanf(q, "%llu.%llu", &sec, &usec) != 2)
		return 0;
	return sec * 1000000ULL + usec;
}

/*
 * One trace line (locktrace_line_tid()); syscall events print as
 * "sys_madvise(...)" on entry and "sys_madvise -> 0x0" on exit.
 */
static void count_line(void *arg, const char *text)
{
	struct counts *c = arg;
	const char *ev;
	long tid = locktrace_line_tid(text, &ev);
	static uint8_t in_overflow;
	static uint64_t len_overflow, entered_overflow;
	uint64_t *stack_len, *entered;
	uint8_t *in;
	int slot;

	if (tid <= 0 || !ev)
		return;
	slot = tid_slot(c, tid);
	in = slot >= 0 ? &c->in_release[slot] : &in_overflow;
	stack_len = slot >= 0 ? &c->stack_len[slot] : &len_overflow;
	entered = slot >= 0 ? &c->entered_us[slot] : &entered_overflow;
	if (starts(ev, "sys_mmap(")) {
		*stack_len = field(ev, "len: ");	/* only MAP_STACK ones are traced */
	} else if (starts(ev, "sys_mmap ->")) {
		uint64_t ret = strtoull(ev + strlen("sys_mmap ->"), NULL, 16);

		if (*stack_len && ret < (uint64_t)-4095)
			stack_mapped(c, ret, *stack_len);
		*stack_len = 0;
	} else if (starts(ev, "sys_munmap(")) {
		stack_unmapped(c, field(ev, "addr: "));
	} else if (starts(ev, "mmap_lock_acquire_returned:")) {
		bool w = strstr(ev, "write=true");

		if (strstr(ev, "success=false"))
			return;
		c->lock[w]++;
		if (*in)
			c->rel_lock[w]++;
		if (*in == IN_MADVISE || *in == IN_PMADV)
			c->alloc_lock[w]++;
	} else if (starts(ev, "sys_madvise(")) {
		c->madvise++;
		*in = IN_MADVISE;
		if (stack_of(c, field(ev, "start: ")) >= 0) {
			c->stack_madvise++;
			*in = IN_STACK_MADVISE;
		}
		*entered = line_us(text, ev);
	} else if (starts(ev, "sys_process_madvise(")) {
		c->process_madvise++;
		*in = IN_PMADV;
		*entered = line_us(text, ev);
	} else if (starts(ev, "sys_madvise ->") || starts(ev, "sys_process_madvise ->")) {
		uint64_t now = line_us(text, ev);

		if ((*in == IN_MADVISE || *in == IN_PMADV) && *entered && now >= *entered)
			c->rel_us += now - *entered;
		*in = 0;
	} else if (starts(ev, "sys_ioctl(")) {
		c->procmap_query++;
	}
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 125;
}

static int run_plain(char *const argv[], struct rusage *ru)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "madvx-relcount: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (wait4(pid, &status, 0, ru) < 0)
		if (errno != EINTR)
			return -errno;
	return status;
}

static int run_traced(char *const argv[], struct rusage *ru, struct counts *c, bool *lost)
{
	struct locktrace lt;
	int ret = locktrace_open(&lt);

	if (ret < 0) {
		fprintf(stderr, "madvx-relcount: -t: %s\n", lt.why);
		return ret;
	}
	ret = locktrace_run(&lt, trace_events, argv, count_line, c, ru, lost);
	if (ret < 0)
		fprintf(stderr, "madvx-relcount: tracing: %s\n", lt.why);
	locktrace_close(&lt);
	return ret;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned long long timeval_ms(const struct timeval *tv)
{
	return (unsigned long long)tv->tv_sec * 1000 + (unsigned long long)tv->tv_usec / 1000;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: madvx-relcount [-t] [-o FILE] [--] COMMAND [ARG...]\n"
		"  -t       trace the release calls and mmap_lock (root)\n"
		"  -o FILE  the result line to FILE (default: standard error)\n");
}

int main(int argc, char **argv)
{
	const char *out_path = NULL;
	struct counts *c;
	struct rusage ru;
	bool trace = false, lost = false;
	uint64_t t0, t1;
	FILE *out = stderr;
	int opt, status;

	while ((opt = getopt(argc, argv, "+to:h")) != -1) {
		switch (opt) {
		case 't':
			trace = true;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 125;
		}
	}
	if (optind == argc) {
		usage(stderr);
		return 125;
	}
	c = calloc(1, sizeof(*c));
	if (!c || (out_path && !(out = fopen(out_path, "w")))) {
		perror("madvx-relcount");
		free(c);
		return 125;
	}
	t0 = now_ns();
	status = trace ? run_traced(argv + optind, &ru, c, &lost) : run_plain(argv + optind, &ru);
	t1 = now_ns();
	if (status < 0) {
		if (!trace)
			fprintf(stderr, "madvx-relcount: %s\n", strerror(-status));
		free(c);
		return 125;
	}
	fprintf(out, "status=%d wall_ms=%llu maxrss_kb=%ld user_ms=%llu sys_ms=%llu",
		exit_code(status), (unsigned long long)((t1 - t0) / 1000000), ru.ru_maxrss,
		timeval_ms(&ru.ru_utime), timeval_ms(&ru.ru_stime));
	if (trace)
		fprintf(out, " madvise=%llu stack_madvise=%llu process_madvise=%llu procmap_query=%llu"
			" rel_lock_read=%llu rel_lock_write=%llu alloc_lock_read=%llu alloc_lock_write=%llu"
			" rel_us=%llu lock_read=%llu lock_write=%llu lost=%d",
			(unsigned long long)c->madvise, (unsigned long long)c->stack_madvise,
			(unsigned long long)c->process_madvise,
			(unsigned long long)c->procmap_query,
			(unsigned long long)c->rel_lock[0], (unsigned long long)c->rel_lock[1],
			(unsigned long long)c->alloc_lock[0], (unsigned long long)c->alloc_lock[1],
			(unsigned long long)c->rel_us, (unsigned long long)c->lock[0], (unsigned long long)c->lock[1],
			lost || c->tids_full || c->stacks_full);
	fputc('\n', out);
	free(c);
	if (out != stderr && fclose(out)) {
		perror("madvx-relcount");
		return 125;
	}
	return exit_code(status);
}
