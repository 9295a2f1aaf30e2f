// SPDX-License-Identifier: MIT
/*
 * pervma-measure: see pervma-measure.h. Every measurement runs on scratch
 * mappings of this file's own, three times; the trial with the fewest
 * mmap_lock acquisitions counts, so an unrelated acquisition (a page fault
 * of the measuring thread) cannot hide a per-VMA lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <madvx.h>

#include "pervma-measure.h"

#define PAGES 4
#define TRIALS 3
#define CALLS 4

struct call {
	char *p;
	size_t len;
	int advice;
	int err;
};

static void advise(void *arg)
{
	struct call *c = arg;

	for (int i = 0; i < CALLS && !c->err; i++)
		if (madvise(c->p, c->len, c->advice))
			c->err = errno;
}

/* A populated private mapping of PAGES pages. */
static char *scratch(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 1, len);
	return p;
}

/* A userfaultfd without features, @p registered MISSING; -errno on failure. */
static int uffd_arm(char *p, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api) || ioctl(fd, UFFDIO_REGISTER, &reg)) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/*
 * Fewest mmap_lock acquisitions of CALLS madvise(@advice) calls over a fresh
 * scratch mapping, of TRIALS trials; @uffd: register it first. Returns the
 * count, or -errno.
 */
static long long fewest(struct locktrace *lt, int advice, bool uffd)
{
	size_t len = PAGES * (size_t)sysconf(_SC_PAGESIZE);
	long long best = -1;

	for (int t = 0; t < TRIALS; t++) {
		struct locktrace_result r;
		struct call c = { .len = len, .advice = advice };
		int fd = -1, ret;

		c.p = scratch(len);
		if (!c.p)
			return -ENOMEM;
		if (uffd) {
			fd = uffd_arm(c.p, len);
			if (fd < 0) {
				munmap(c.p, len);
				return fd;
			}
		}
		ret = locktrace_measure(lt, advise, &c, &r);
		if (fd >= 0)
			close(fd);
		munmap(c.p, len);
		if (ret)
			return ret;
		if (c.err)
			return -c.err;
		if (r.lost)
			continue;
		if (best < 0 || (long long)(r.self.acq_read + r.self.acq_write) < best)
			best = r.self.acq_read + r.self.acq_write;
	}
	return best < 0 ? -EIO : best;
}

int pervma_measure(struct locktrace *lt, struct pervma_result *out)
{
	long long cold, pageout, uffd;

	memset(out, 0, sizeof(*out));
	cold = fewest(lt, MADV_COLD, false);
	pageout = fewest(lt, MADV_PAGEOUT, false);
	if (cold < 0 || pageout < 0)
		return cold < 0 ? (int)cold : (int)pageout;
	out->cold_acq = cold;
	out->pageout_acq = pageout;
	out->cold_pageout = cold == 0 && pageout == 0;
	uffd = fewest(lt, MADV_DONTNEED, true);
	out->uffd_tried = uffd >= 0;
	if (uffd >= 0) {
		out->uffd_acq = uffd;
		out->uffd = uffd == 0;
	}
	return 0;
}

const char *pervma_cache_path(void)
{
	const char *env = getenv("MADVX_PROBE_CACHE");

	return env && *env ? env : MADVX_PROBE_CACHE_PATH;
}

/*
 * This boot's key line, as the library's __madvx_boot_key() makes it:
 * "boot_id <uuid>", or "btime <s>" (/proc/stat) without /proc/sys.
 */
static int boot_key(char *key, size_t size)
{
	char line[8192], id[64];
	long long btime;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		int n = fscanf(f, "%63s", id);

		fclose(f);
		if (n != 1)
			return -EIO;
		snprintf(key, size, "boot_id %s", id);
		return 0;
	}
	f = fopen("/proc/stat", "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "btime %lld", &btime) == 1) {
			fclose(f);
			snprintf(key, size, "btime %lld", btime);
			return 0;
		}
	}
	fclose(f);
	return -ENOENT;
}

int pervma_cache_write(const char *path, const struct pervma_result *r)
{
	char key[96], tmp[4096], dir[4096], *slash;
	FILE *f;
	int fd, ret;

	ret = boot_key(key, sizeof(key));
	if (ret)
		return ret;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -errno;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	fchmod(fd, 0644);	/* whatever the umask: every process may read it */
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -ENOMEM;
	}
	fprintf(f, "# libmadvx: measured with the mmap_lock tracepoints (madvx-probe --measure)\n"
		"%s\nper_vma_cold_pageout %d\n", key, r->cold_pageout);
	if (r->uffd_tried)
		fprintf(f, "per_vma_uffd %d\n", r->uffd);
	if (fclose(f) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return -e;
	}
	return 0;
}
