// SPDX-License-Identifier: MIT
/* VMA bounds for the planner: see vma.h for the sources and why staleness is safe. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "vma.h"

/* ---- caller-registered regions ---- */

#define MAX_REGIONS 64

static struct {
	pthread_rwlock_t lock;
	uint32_t count;
	struct madvx_vma r[MAX_REGIONS];
} regions = { .lock = PTHREAD_RWLOCK_INITIALIZER };

/* Fast check without the lock: most processes register nothing. */
static _Atomic uint32_t nr_regions;

static bool region_find(uint64_t addr, struct madvx_vma *v)
{
	bool found = false;

	if (!atomic_load_explicit(&nr_regions, memory_order_acquire))
		return false;
	pthread_rwlock_rdlock(&regions.lock);
	for (uint32_t i = 0; i < regions.count; i++) {
		if (regions.r[i].start <= addr && addr < regions.r[i].end) {
			*v = regions.r[i];
			found = true;
			break;
		}
	}
	pthread_rwlock_unlock(&regions.lock);
	return found;
}

MADVX_API int madvx_region_register(void *addr, size_t len, unsigned int flags)
{
	uint64_t start = (uintptr_t)addr, end = start + len;
	int ret = 0;

	if (!len || (start & (madvx_page_size() - 1)) || end < start ||
	    (flags & ~(MADVX_REGION_UFFD | MADVX_REGION_UFFD_EVENT_REMOVE)))
		return -EINVAL;
	end = (end + madvx_page_size() - 1) & ~(uint64_t)(madvx_page_size() - 1);
	pthread_rwlock_wrlock(&regions.lock);
	for (uint32_t i = 0; i < regions.count; i++)
		if (start < regions.r[i].end && regions.r[i].start < end)
			ret = -EEXIST;
	if (!ret && regions.count == MAX_REGIONS)
		ret = -ENOSPC;
	if (!ret) {
		regions.r[regions.count++] = (struct madvx_vma){
			.start = start, .end = end, .region = true,
			.uffd = flags & (MADVX_REGION_UFFD | MADVX_REGION_UFFD_EVENT_REMOVE),
			.uffd_remove = flags & MADVX_REGION_UFFD_EVENT_REMOVE,
		};
		atomic_store(&nr_regions, regions.count);
	}
	pthread_rwlock_unlock(&regions.lock);
	return ret;
}

MADVX_API int madvx_region_unregister(void *addr)
{
	int ret = -ENOENT;

	pthread_rwlock_wrlock(&regions.lock);
	for (uint32_t i = 0; i < regions.count; i++) {
		if (regions.r[i].start == (uintptr_t)addr) {
			regions.r[i] = regions.r[--regions.count];
			atomic_store(&nr_regions, regions.count);
			ret = 0;
			break;
		}
	}
	pthread_rwlock_unlock(&regions.lock);
	return ret;
}

/* ---- /proc/self/maps fd, shared by PROCMAP_QUERY and the parser ---- */

/*
 * Opened once per process. /proc/self resolves at open time, so the fd keeps
 * naming the parent after fork(): the child drops it and reopens its own.
 */
static _Atomic int maps_fd = -1;

void madvx_vma_after_fork_child(void)
{
	int fd = atomic_exchange(&maps_fd, -1);

	if (fd >= 0)
		close(fd);
}

static int get_maps_fd(void)
{
	int fd = atomic_load_explicit(&maps_fd, memory_order_acquire);
	int expected = -1, e = errno;

	if (likely(fd >= 0))
		return fd;
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		errno = e;
		return fd;
	}
	if (!atomic_compare_exchange_strong(&maps_fd, &expected, fd)) {
		close(fd);
		fd = expected;
	}
	return fd;
}

static int query_procmap(uint64_t addr, struct madvx_vma *v)
{
	struct procmap_query q = {
		.size = sizeof(q),
		.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		.query_addr = addr,
	};
	int fd = get_maps_fd(), ret;

	if (fd < 0)
		return fd;
	ret = madvx_sys_ioctl(fd, PROCMAP_QUERY, &q);
	if (ret)
		return ret;
	*v = (struct madvx_vma){ .start = q.vma_start, .end = q.vma_end };
	return 0;
}

static uint64_t parse_hex(const char **p)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		char c = **p;

		if (c >= '0' && c <= '9')
			v = v * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uint64_t)(c - 'a' + 10);
		else
			return v;
	}
}

/*
 * Old kernels: read /proc/self/maps (which takes mmap_read_lock per chunk)
 * and fill the cache with the VMAs that end above @addr, in address order.
 * read() into a stack buffer: no stdio, no malloc.
 */
static void cache_insert(struct madvx_vma_cache *c, uint64_t from,
			 const struct madvx_vma *v)
{
	if (c->count == MADVX_VMA_CACHE)
		c->count = 0;	/* one flush rarely touches more; start over */
	c->span[c->count] = (struct madvx_vma_span){ .from = from, .vma = *v };
	c->last = c->count++;
}

/*
 * Old kernels: read /proc/self/maps (which takes mmap_read_lock per chunk)
 * and cache the VMAs that end above @addr, in address order. read() into a
 * stack buffer: no stdio, no malloc.
 */
static int parse_maps_into(struct madvx_vma_cache *c, uint64_t addr)
{
	char buf[4096];
	size_t have = 0;
	off_t off = 0;
	uint64_t from = addr;
	int fd = get_maps_fd();

	if (fd < 0)
		return fd;
	c->count = 0;
	for (;;) {
		ssize_t n = pread(fd, buf + have, sizeof(buf) - have - 1, off);
		char *line = buf, *nl;

		if (n < 0)
			return -EIO;
		if (n == 0)
			break;
		off += n;
		have += (size_t)n;
		buf[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			const char *p = line;
			struct madvx_vma v = { 0 };

			v.start = parse_hex(&p);
			p++;	/* '-' */
			v.end = parse_hex(&p);
			line = nl + 1;
			if (v.end <= addr)
				continue;
			cache_insert(c, from < v.start ? from : v.start, &v);
			from = v.end;
			if (c->count == MADVX_VMA_CACHE)
				return 0;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
	}
	return c->count ? 0 : -ENOENT;
}

static bool cache_find(struct madvx_vma_cache *c, uint64_t addr,
		       struct madvx_vma *v)
{
	/* Lookups come in address order: start at the last hit. */
	for (uint32_t k = 0; k < c->count; k++) {
		uint32_t i = (c->last + k) % c->count;
		const struct madvx_vma_span *sp = &c->span[i];

		if (sp->from <= addr && addr < sp->vma.end) {
			c->last = i;
			*v = sp->vma;
			return true;
		}
	}
	return false;
}

int madvx_vma_find(struct madvx_vma_cache *c, uint64_t addr, struct madvx_vma *v)
{
	int ret;

	if (region_find(addr, v))
		return 0;
	if (cache_find(c, addr, v))
		return 0;
	c->queries++;
	if (madvx_has(MADVX_FEAT_PROCMAP_QUERY)) {
		ret = query_procmap(addr, v);
		if (ret == 0)
			cache_insert(c, addr, v);
		return ret;
	}
	ret = parse_maps_into(c, addr);
	if (ret)
		return ret;
	c->last = 0;
	*v = c->span[0].vma;
	return 0;
}
