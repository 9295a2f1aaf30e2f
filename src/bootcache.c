// SPDX-License-Identifier: MIT
/* The per-boot measurement cache that madvx-probe --measure writes (bootcache.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootcache.h"
#include "sys.h"

/* The "btime" of /proc/stat (boot time, seconds since the epoch), or -1. */
static long long read_btime(void)
{
	char buf[4096 + 64];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC), e = errno;
	long long btime = -1;
	size_t keep = 0, total;
	const char *p;
	ssize_t n;

	if (fd < 0) {
		errno = e;
		return -1;
	}
	/* The line comes after per-CPU and interrupt lines: read in chunks. */
	while (btime < 0 && (n = read(fd, buf + keep, sizeof(buf) - 64 - 1)) > 0) {
		total = keep + n;
		buf[total] = 0;
		p = strstr(buf, "\nbtime ");
		if (p && strchr(p + 7, '\n')) {
			btime = strtoll(p + 7, NULL, 10);
			break;
		}
		keep = total < 64 ? total : 64;
		memmove(buf, buf + total - keep, keep);
	}
	close(fd);
	errno = e;
	return btime;
}

int __madvx_boot_key(char *buf, size_t size)
{
	long long btime;
	char id[64];

	if (__madvx_read_small_file("/proc/sys/kernel/random/boot_id", id, sizeof(id)) > 0) {
		id[strcspn(id, "\n")] = 0;
		snprintf(buf, size, "boot_id %s", id);
		return 0;
	}
	btime = read_btime();
	if (btime < 0)
		return -ENOENT;
	snprintf(buf, size, "btime %lld", btime);
	return 0;
}

/*
 * The per-boot measurement cache (see madvx.h): "key value" lines written by
 * madvx-probe --measure. It counts only if it is this boot's (a line equal
 * to __madvx_boot_key()), owned by root or by us and writable by nobody else;
 * then each "<feature> 0|1" line of a planning feature answers that feature.
 * Sets *@measured to the features it answered and returns those that are on.
 */
uint64_t __madvx_boot_cache_read(const char *const *names, int count, uint64_t which,
				 uint64_t *measured)
{
	const char *path = secure_getenv("MADVX_PROBE_CACHE");
	char buf[1024], boot[96], key[64];
	uint64_t on = 0;
	struct stat sb;
	const char *line;
	int fd, e = errno, val;
	ssize_t n;
	bool this_boot = false;

	*measured = 0;
	if (!path || !*path)
		path = MADVX_PROBE_CACHE_PATH;
	/* The file first: most machines have none, and then the key costs nothing. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		errno = e;
		return 0;
	}
	if (__madvx_boot_key(boot, sizeof(boot))) {
		close(fd);
		errno = e;
		return 0;
	}
	n = -1;
	if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) &&
	    (sb.st_uid == 0 || sb.st_uid == geteuid()) && !(sb.st_mode & 022))
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	errno = e;
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* One line must be this boot's key. */
	for (line = buf; line && !this_boot;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		this_boot = !strncmp(line, boot, strlen(boot)) &&
			    (line[strlen(boot)] == '\n' || !line[strlen(boot)]);
	if (!this_boot)
		return 0;
	for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (sscanf(line, "%63s %d", key, &val) != 2)
			continue;
		for (int f = 0; f < count; f++) {
			if (!(which & (1ULL << f)) || strcmp(key, names[f]))
				continue;
			*measured |= 1ULL << f;
			if (val == 1)
				on |= 1ULL << f;
		}
	}
	return on;
}
