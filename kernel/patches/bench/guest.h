/* SPDX-License-Identifier: MIT */
/*
 * What the static guest workloads of kernel/patches/bench share: dying with
 * errno, /proc/vmstat counters and tracefs instance files.
 */
#ifndef MADVX_BENCH_GUEST_H
#define MADVX_BENCH_GUEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What Debian 12's Linux 6.1 headers may lack (the guests run 7.3). */
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
	exit(1);
}

/* v[i] = the /proc/vmstat value of keys[i], or -1 where the kernel has none. */
static inline void vmstat_read_keys(const char *const *keys, size_t n, long long *v)
{
	char line[256], key[128];
	long long val;
	FILE *f = fopen("/proc/vmstat", "r");

	for (size_t i = 0; i < n; i++)
		v[i] = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %lld", key, &val) == 2)
			for (size_t i = 0; i < n; i++)
				if (!strcmp(key, keys[i]))
					v[i] = val;
	fclose(f);
}

/* Write @val to the file @file of the tracefs instance directory @inst. */
static void trace_put(const char *inst, const char *file, const char *val)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", inst, file);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0 || write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		die(path);
	close(fd);
}

#endif /* MADVX_BENCH_GUEST_H */
