// SPDX-License-Identifier: MIT
/* VMA bounds for the planner: see vma.h for the sources and why staleness is safe. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"
#include "sys.h"
#include "vma.h"

/* ---- caller-registered regions ---- */

#define MAX_REGIONS 64

/*
 * Readers (every flush) take no lock: they copy the table under a sequence
 * count and give up on a torn read - a region only saves VMA lookups, so
 * "no region known" is always a correct answer. Writers are rare and
 * serialised by a process lock a child takes over (proc.c), so no fork
 * kind, with any thread inside register/unregister, can wedge a child.
 */
static struct {
	struct madvx_plock lock;
	_Atomic uint32_t seq;		/* odd while a writer changes the table */
	_Atomic uint32_t count;
	struct madvx_vma r[MAX_REGIONS];
} regions;

static void regions_write_begin(void)
{
	__madvx_plock_lock(&regions.lock);
	/* A child that took the lock over from a dead writer may find seq odd. */
	if (atomic_load_explicit(&regions.seq, memory_order_relaxed) & 1)
		atomic_fetch_add_explicit(&regions.seq, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&regions.seq, 1, memory_order_relaxed);
}

static void regions_write_end(void)
{
	atomic_fetch_add_explicit(&regions.seq, 1, memory_order_release);
	__madvx_plock_unlock(&regions.lock);
}

static bool region_find(uint64_t addr, struct madvx_vma *v)
{
	uint32_t seq, n;
	bool found = false;

	/* Most processes register nothing: one load. */
	n = atomic_load_explicit(&regions.count, memory_order_acquire);
	if (!n)
		return false;
	seq = atomic_load_explicit(&regions.seq, memory_order_acquire);
	if (seq & 1)
		return false;
	if (n > MAX_REGIONS)
		n = MAX_REGIONS;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t start = __atomic_load_n(&regions.r[i].start, __ATOMIC_ACQUIRE);
		uint64_t end = __atomic_load_n(&regions.r[i].end, __ATOMIC_ACQUIRE);

		if (start <= addr && addr < end) {
			*v = (struct madvx_vma){
				.start = start, .end = end, .region = true,
				.uffd = __atomic_load_n(&regions.r[i].uffd, __ATOMIC_ACQUIRE),
				.uffd_remove = __atomic_load_n(&regions.r[i].uffd_remove,
							       __ATOMIC_ACQUIRE),
			};
			found = true;
			break;
		}
	}
	/* The acquire loads above keep this re-read after them. */
	return found && atomic_load_explicit(&regions.seq, memory_order_relaxed) == seq;
}

static void region_store(uint32_t i, const struct madvx_vma *v)
{
	__atomic_store_n(&regions.r[i].start, v->start, __ATOMIC_RELEASE);
	__atomic_store_n(&regions.r[i].end, v->end, __ATOMIC_RELEASE);
	__atomic_store_n(&regions.r[i].uffd, v->uffd, __ATOMIC_RELEASE);
	__atomic_store_n(&regions.r[i].uffd_remove, v->uffd_remove, __ATOMIC_RELEASE);
	regions.r[i].region = true;
}

MADVX_API int madvx_region_register(void *addr, size_t len, unsigned int flags)
{
	uint64_t start = (uintptr_t)addr, end = start + len, page = madvx_page_size();
	uint32_t n;
	int ret = 0;

	if (!len || (start & (page - 1)) || end < start ||
	    (flags & ~(MADVX_REGION_UFFD | MADVX_REGION_UFFD_EVENT_REMOVE)))
		return -EINVAL;
	if (end > UINT64_MAX - (page - 1))
		return -EINVAL;
	end = (end + page - 1) & ~(page - 1);
	regions_write_begin();
	n = atomic_load_explicit(&regions.count, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (start < regions.r[i].end && regions.r[i].start < end)
			ret = -EEXIST;
	if (!ret && n == MAX_REGIONS)
		ret = -ENOSPC;
	if (!ret) {
		struct madvx_vma v = {
			.start = start, .end = end,
			.uffd = flags & (MADVX_REGION_UFFD | MADVX_REGION_UFFD_EVENT_REMOVE),
			.uffd_remove = flags & MADVX_REGION_UFFD_EVENT_REMOVE,
		};

		region_store(n, &v);
		atomic_store_explicit(&regions.count, n + 1, memory_order_release);
	}
	regions_write_end();
	return ret;
}

MADVX_API int madvx_region_unregister(void *addr)
{
	uint32_t n;
	int ret = -ENOENT;

	regions_write_begin();
	n = atomic_load_explicit(&regions.count, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		if (regions.r[i].start == (uintptr_t)addr) {
			region_store(i, &regions.r[n - 1]);
			atomic_store_explicit(&regions.count, n - 1, memory_order_release);
			ret = 0;
			break;
		}
	}
	regions_write_end();
	return ret;
}

/* ---- /proc/self/maps fd, shared by PROCMAP_QUERY and the parser ---- */

/*
 * Opened once per process. /proc/self resolves at open time, so the fd keeps
 * naming the parent in a child: it is stamped with the process generation
 * and reopened in every new process (proc.c).
 */
static int open_maps(void)
{
	return __madvx_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
}

int __madvx_self_maps_fd(void)
{
	return __madvx_proc_fd(MADVX_PFD_MAPS, open_maps);
}

/* PROCMAP_QUERY for the VMA at @addr (or, with @flags, the next one). */
static int procmap_ask(uint64_t addr, uint64_t flags, struct procmap_query *q)
{
	int fd = __madvx_self_maps_fd();

	if (fd < 0)
		return fd;
	*q = (struct procmap_query){ .size = sizeof(*q), .query_flags = flags,
				     .query_addr = addr };
	return __madvx_sys_ioctl(fd, PROCMAP_QUERY, q);
}

static int query_procmap(uint64_t addr, struct madvx_vma *v)
{
	struct procmap_query q;
	int ret = procmap_ask(addr, PROCMAP_QUERY_COVERING_OR_NEXT_VMA, &q);

	if (ret)
		return ret;
	*v = (struct madvx_vma){ .start = q.vma_start, .end = q.vma_end };
	return 0;
}

/* Add a span to the cache; a full cache starts over. */
static void cache_insert(struct madvx_vma_cache *c, uint64_t from,
			 const struct madvx_vma *v)
{
	if (c->count == MADVX_VMA_CACHE)
		c->count = 0;	/* one flush rarely touches more; start over */
	c->span[c->count] = (struct madvx_vma_span){ .from = from, .vma = *v };
	c->last = c->count++;
}

/*
 * One line of /proc/self/maps: "start-end perms offset dev inode  path".
 * @rest points past the end address, for what only some callers need.
 */
struct maps_line {
	uint64_t start, end;
	const char *rest;
};

/* The inode field of @l (0: no file behind the VMA, i.e. anonymous memory). */
static uint64_t maps_inode(const struct maps_line *l)
{
	const char *p = l->rest;
	uint64_t ino = 0;

	for (int field = 0; field < 3; field++) {	/* perms, offset, dev */
		while (*p == ' ')
			p++;
		while (*p && *p != ' ' && *p != '\n')
			p++;
	}
	while (*p == ' ')
		p++;
	while (*p >= '0' && *p <= '9')
		ino = ino * 10 + (uint64_t)(*p++ - '0');
	return ino;
}

/* Called per line in address order; false ends the walk. */
typedef bool (*maps_fn)(void *ctx, const struct maps_line *l);

/*
 * Old kernels: read /proc/self/maps (which takes mmap_read_lock per chunk)
 * line by line into @fn. pread() into a stack buffer: no stdio, no malloc.
 * 0, or -errno when it cannot be read.
 */
static int maps_walk(maps_fn fn, void *ctx)
{
	char buf[4096];
	size_t have = 0;
	uint64_t off = 0;
	int fd = __madvx_self_maps_fd();

	if (fd < 0)
		return fd;
	for (;;) {
		long n = __madvx_sys_pread(fd, buf + have, sizeof(buf) - have - 1, off);
		char *line = buf, *nl;

		if (n < 0)
			return -EIO;
		if (n == 0)
			return 0;
		off += (uint64_t)n;
		have += (size_t)n;
		buf[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			const char *p = line;
			struct maps_line l;

			l.start = madvx_parse_hex(&p);
			p++;	/* '-' */
			l.end = madvx_parse_hex(&p);
			l.rest = p;
			line = nl + 1;
			if (!fn(ctx, &l))
				return 0;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
	}
}

struct fill_ctx {
	struct madvx_vma_cache *c;
	uint64_t addr, from;
};

static bool fill_line(void *ctx, const struct maps_line *l)
{
	struct fill_ctx *f = ctx;
	struct madvx_vma v = { .start = l->start, .end = l->end };

	if (v.end <= f->addr)
		return true;
	cache_insert(f->c, f->from < v.start ? f->from : v.start, &v);
	f->from = v.end;
	return f->c->count < MADVX_VMA_CACHE;
}

/* Cache the VMAs that end above @addr, in address order, from the maps file. */
static int parse_maps_into(struct madvx_vma_cache *c, uint64_t addr)
{
	struct fill_ctx f = { .c = c, .addr = addr, .from = addr };
	int ret;

	c->count = 0;
	ret = maps_walk(fill_line, &f);
	if (ret)
		return ret;
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

/*
 * PROCMAP_QUERY is a guess from the version (probe.c): an answer that says
 * the ioctl is not there (or not for us) turns it off, and the caller reads
 * /proc/self/maps instead. -ENOENT (nothing mapped at or above) is an answer.
 */
static bool procmap_refused(int ret)
{
	switch (ret) {
	case -ENOTTY:
	case -EINVAL:
	case -E2BIG:
	case -ENOSYS:
	case -EPERM:
	case -EACCES:
		__madvx_feature_demote(MADVX_FEAT_PROCMAP_QUERY);
		return true;
	default:
		return false;
	}
}

int __madvx_vma_find(struct madvx_vma_cache *c, uint64_t addr, struct madvx_vma *v)
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
		if (!procmap_refused(ret))
			return ret;
	}
	ret = parse_maps_into(c, addr);
	if (ret)
		return ret;
	c->last = 0;
	*v = c->span[0].vma;
	return 0;
}

int __madvx_vma_find_kernel(uint64_t addr, struct madvx_vma *v)
{
	struct madvx_vma_span span[MADVX_VMA_CACHE];
	struct madvx_vma_cache c;
	int ret;

	if (madvx_has(MADVX_FEAT_PROCMAP_QUERY)) {
		ret = query_procmap(addr, v);
		if (!procmap_refused(ret))
			return ret;
	}
	madvx_vma_cache_init(&c, span);
	ret = parse_maps_into(&c, addr);
	if (ret)
		return ret;
	*v = c.span[0].vma;
	return 0;
}

/* ---- is a range anonymous memory? ---- */

struct anon_ctx {
	uint64_t cur, end;
	int anon;
};

/* VMAs in order from cur on, stopping at the first hole (as PROCMAP_QUERY does). */
static bool anon_line(void *ctx, const struct maps_line *l)
{
	struct anon_ctx *a = ctx;

	if (l->end <= a->cur)
		return true;
	if (l->start > a->cur)
		return false;	/* a hole: the kernel decides */
	if (!maps_inode(l)) {
		a->anon = 1;
		return false;
	}
	a->cur = l->end;
	return a->cur < a->end;
}

int __madvx_vma_range_anon(uint64_t addr, uint64_t len)
{
	struct anon_ctx a = { .cur = addr, .end = addr + len };
	struct procmap_query q;
	int ret;

	if (!len || a.end < addr)
		return 0;
	if (madvx_has(MADVX_FEAT_PROCMAP_QUERY)) {
		while (a.cur < a.end) {
			ret = procmap_ask(a.cur, 0, &q);
			if (ret) {
				if (procmap_refused(ret))
					break;
				return 0;	/* a hole (-ENOENT): the kernel decides */
			}
			/* Anonymous memory has no inode; shmem (even MAP_SHARED|MAP_ANONYMOUS) has. */
			if (!q.inode)
				return 1;
			a.cur = q.vma_end;
		}
		if (a.cur >= a.end)
			return 0;
	}
	ret = maps_walk(anon_line, &a);
	return ret ? 0 : a.anon;
}
