// SPDX-License-Identifier: MIT
/* The per-boot measurement cache that madvx-probe --measure writes (bootcache.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootcache.h"
#include "sys.h"

/*
 * The per-boot cache is read on the first need of a planning feature, which
 * may come inside a flush in a signal handler: so no stdio and no strto*()
 * here (open, read, fstat and close are async-signal-safe), and by hand.
 */

/* Append @s to @buf (@size bytes, @at used); false when it does not fit. */
static bool append(char *buf, size_t size, size_t *at, const char *s, size_t n)
{
	if (n >= size - *at)
		return false;
	memcpy(buf + *at, s, n);
	*at += n;
	buf[*at] = 0;
	return true;
}

/* The digits of the "btime" line of /proc/stat (boot time, seconds), or 0. */
static size_t read_btime(char *out, size_t size)
{
	char buf[4096 + 64];
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC), e = errno;
	size_t keep = 0, total, n = 0;
	const char *p;
	ssize_t got;

	if (fd < 0) {
		errno = e;
		return 0;
	}
	/* The line comes after per-CPU and interrupt lines: read in chunks. */
	while ((got = read(fd, buf + keep, sizeof(buf) - 64 - 1)) > 0) {
		total = keep + (size_t)got;
		buf[total] = 0;
		p = strstr(buf, "\nbtime ");
		if (p && strchr(p + 7, '\n')) {
			while (p[7 + n] >= '0' && p[7 + n] <= '9' && n < size - 1)
				n++;
			memcpy(out, p + 7, n);
			out[n] = 0;
			break;
		}
		keep = total < 64 ? total : 64;
		memmove(buf, buf + total - keep, keep);
	}
	close(fd);
	errno = e;
	return n;
}

int __madvx_boot_key(char *buf, size_t size)
{
	char id[64];
	size_t at = 0;

	buf[0] = 0;
	if (__madvx_read_small_file("/proc/sys/kernel/random/boot_id", id, sizeof(id)) > 0) {
		id[strcspn(id, "\n")] = 0;
		return append(buf, size, &at, "boot_id ", 8) &&
		       append(buf, size, &at, id, strlen(id)) ? 0 : -ENOENT;
	}
	if (!read_btime(id, sizeof(id)))
		return -ENOENT;
	return append(buf, size, &at, "btime ", 6) &&
	       append(buf, size, &at, id, strlen(id)) ? 0 : -ENOENT;
}

/*
 * One "<key> <int>" line, as sscanf("%63s %d") took it: the key is the first
 * word (spaces and tabs around it), the value an optionally signed decimal.
 * Returns false for a line without both.
 */
static bool parse_line(const char *line, const char **key, size_t *klen, long *val)
{
	const char *p = line;
	bool neg = false;
	long v = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	*key = p;
	while (*p && *p != ' ' && *p != '\t' && *p != '\n')
		p++;
	*klen = (size_t)(p - *key);
	if (!*klen || *klen > 63)
		return false;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9' && v < 1000000)
		v = v * 10 + (*p++ - '0');
	*val = neg ? -v : v;
	return true;
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
	char buf[1024], boot[96];
	uint64_t on = 0;
	struct stat sb;
	const char *line, *key;
	size_t klen;
	int fd, e = errno;
	long val;
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
		if (!parse_line(line, &key, &klen, &val))
			continue;
		for (int f = 0; f < count; f++) {
			if (!(which & (1ULL << f)) || strlen(names[f]) != klen ||
			    strncmp(key, names[f], klen))
				continue;
			*measured |= 1ULL << f;
			if (val == 1)
				on |= 1ULL << f;
		}
	}
	return on;
}

/*
 * The answer, once per process: 0 before, else CACHE_READ | the features on
 * | those answered << 32. Lock-free (a flush in a signal handler may be
 * the first to ask): racing readers each read the file, and the first
 * answer stored is the process's, so a cache rewritten in between cannot
 * give two answers.
 */
#define CACHE_READ (1ULL << 63)
static _Atomic uint64_t cache_answer;

uint64_t __madvx_boot_cache_once(const char *const *names, int count, uint64_t which,
				 uint64_t *measured)
{
	uint64_t on, w = atomic_load_explicit(&cache_answer, memory_order_acquire);
	uint64_t expected = 0;

	if (!w) {
		on = __madvx_boot_cache_read(names, count, which, measured);
		w = CACHE_READ | (on & *measured) | (*measured << 32);
		if (!atomic_compare_exchange_strong_explicit(&cache_answer, &expected, w,
							     memory_order_acq_rel,
							     memory_order_acquire))
			w = expected;
	}
	*measured = (w >> 32) & 0x7fffffff;
	return w & 0x7fffffff;
}
