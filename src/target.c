// SPDX-License-Identifier: MIT
/*
 * Remote targets: open another process race-free and enumerate its VMAs.
 * See target.h for the internal contract and madvx.h for the public one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

/* ---- small /proc readers ---- */

/* A small file under /proc/PID (status, stat): into @buf. Length or -errno. */
static long read_small(struct madvx_target *t, const char *name, char *buf, size_t size)
{
	int fd = __madvx_sys_openat(t->proc_fd, name, O_RDONLY | O_CLOEXEC);
	long n;

	if (fd < 0)
		return fd == -ENOENT ? -ESRCH : fd;
	n = __madvx_sys_read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return n;
	buf[n] = 0;
	return n;
}

/* "key:  <n> kB" in @buf (a line start), in bytes; -1 if absent. */
static int64_t kb_field(const char *buf, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = buf; (p = strstr(p, key)); p += n) {
		if (p == buf || p[-1] == '\n') {
			const char *q = p + n;

			return (int64_t)madvx_parse_dec(&q) * 1024;
		}
	}
	return -1;
}

/* ---- liveness and opening ---- */

int __madvx_target_alive(struct madvx_target *t)
{
	int ret = __madvx_sys_pidfd_send_signal(t->pidfd, 0);

	/* EPERM: it exists, we may just not signal it. */
	return ret == 0 || ret == -EPERM ? 0 : -ESRCH;
}

/* startstack (field 28) and start_brk (field 47) of /proc/PID/stat. */
static int read_stat(struct madvx_target *t)
{
	char buf[1024];
	const char *p;
	long n = read_small(t, "stat", buf, sizeof(buf));

	if (n < 0)
		return (int)n;
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	/* token k after ')' is field k + 3; field 3 (state) is a letter */
	for (int field = 3; field <= 47 && *p; field++) {
		while (*p == ' ')
			p++;
		if (field == 28)
			t->startstack = madvx_parse_dec(&p);
		else if (field == 47)
			t->start_brk = madvx_parse_dec(&p);
		while (*p && *p != ' ')
			p++;
	}
	return 0;
}

static int add_locked(struct madvx_target *t, uint64_t start, uint64_t end)
{
	if (t->nlocked == t->locked_cap) {
		size_t cap = t->locked_cap ? t->locked_cap * 2 : 16;
		void *n = realloc(t->locked, cap * sizeof(*t->locked));

		if (!n)
			return -ENOMEM;
		t->locked = n;
		t->locked_cap = cap;
	}
	t->locked[t->nlocked++] = (struct madvx_target_range){ start, end };
	return 0;
}

/*
 * mlock()ed VMAs. /proc/PID/status VmLck counts the pages of VM_LOCKED VMAs
 * whether resident or not, so 0 means none and smaps (which walks every page
 * table of the target) is read only when something is locked.
 */
static int read_locked(struct madvx_target *t)
{
	char status[4096], *buf = NULL;
	size_t cap = 0;
	uint64_t start = 0, end = 0;
	long n;
	int fd, ret = 0;

	t->nlocked = 0;
	n = read_small(t, "status", status, sizeof(status));
	if (n < 0)
		return (int)n;
	if (kb_field(status, "VmLck:") <= 0)
		return 0;
	fd = __madvx_sys_openat(t->proc_fd, "smaps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fd == -ENOENT ? -ESRCH : fd;
	n = __madvx_maps_read_whole(fd, &buf, &cap);
	close(fd);
	if (n < 0)
		return (int)n;
	for (const char *line = buf; *line && !ret;) {
		const char *nl = strchr(line, '\n');

		if ((*line >= '0' && *line <= '9') || (*line >= 'a' && *line <= 'f')) {
			const char *p = line;

			start = madvx_parse_hex(&p);
			if (*p == '-') {
				p++;
				end = madvx_parse_hex(&p);
			}
		} else if (!strncmp(line, "VmFlags:", 8)) {
			const char *lo = strstr(line, " lo");

			if (lo && (!nl || lo < nl) && (lo[3] == ' ' || lo[3] == '\n'))
				ret = add_locked(t, start, end);
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	free(buf);
	return ret;
}

/* ---- PROCMAP_QUERY ---- */

static size_t hex_digits(uint64_t x, size_t min)
{
	size_t n = 1;

	while (x >>= 4)
		n++;
	return n > min ? n : min;
}

/*
 * The length of the VMA's /proc/PID/maps line, as fs/proc/task_mmu.c
 * show_vma_header_prefix() formats it: "start-end perm offset maj:min inode "
 * (hex at least 8, 8, 8, 2, 2 digits; the offset 0 without a file, where
 * PROCMAP_QUERY gives the page offset), a name padded to column 73, "\n".
 */
static size_t maps_line_len(const struct madvx_target_vma *v, const char *name)
{
	size_t n = hex_digits(v->start, 8) + 1 + hex_digits(v->end, 8) + 1 + 4 + 1 +
		   hex_digits(v->inode ? v->offset : 0, 8) + 1 + hex_digits(v->dev_major, 2) + 1 +
		   hex_digits(v->dev_minor, 2) + 1 + 1;
	uint64_t ino = v->inode;

	while (ino >= 10) {
		ino /= 10;
		n++;
	}
	n++;			/* the space after the inode */
	if (name && *name)
		n = (n > 73 ? n : 73) + strlen(name);
	return n + 1;
}

static int procmap_find(struct madvx_target *t, uint64_t addr,
			struct madvx_target_vma *v)
{
	struct procmap_query q = {
		.size = sizeof(q),
		.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		.query_addr = addr,
		.vma_name_addr = (uintptr_t)t->name,
		.vma_name_size = sizeof(t->name),
	};
	int ret;

	t->name[0] = 0;
	ret = __madvx_sys_ioctl(t->maps_fd, PROCMAP_QUERY, &q);
	if (ret)
		return ret;
	*v = (struct madvx_target_vma){
		.start = q.vma_start, .end = q.vma_end, .offset = q.vma_offset,
		.inode = q.inode, .dev_major = q.dev_major, .dev_minor = q.dev_minor,
	};
	if (q.vma_flags & PROCMAP_QUERY_VMA_READABLE)
		v->flags |= MADVX_VMA_READ;
	if (q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE)
		v->flags |= MADVX_VMA_WRITE;
	if (q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE)
		v->flags |= MADVX_VMA_EXEC;
	if (q.vma_flags & PROCMAP_QUERY_VMA_SHARED)
		v->flags |= MADVX_VMA_SHARED;
	__madvx_maps_classify(t, v, q.vma_name_size ? t->name : NULL, q.vma_page_size);
	t->query_line = maps_line_len(v, q.vma_name_size ? t->name : NULL);
	return 0;
}

int __madvx_target_query(struct madvx_target *t, uint64_t addr,
		       struct madvx_target_vma *v)
{
	if (t->procmap)
		return procmap_find(t, addr, v);
	return __madvx_maps_snapshot_find(t, addr, v);
}

int __madvx_target_stream_find(struct madvx_target *t, uint64_t addr,
			       struct madvx_target_vma *v)
{
	int ret = __madvx_maps_stream_find(t, addr, v);

	/* not fresh in the stream (maps.h): the kernel's answer */
	return ret == -EAGAIN ? procmap_find(t, addr, v) : ret;
}

size_t __madvx_target_query_line(const struct madvx_target *t)
{
	return t->procmap ? t->query_line : 0;
}


int __madvx_target_vma_find(struct madvx_target *t, uint64_t addr,
			  uint64_t *start, uint64_t *end)
{
	struct madvx_target_vma v;
	int ret = __madvx_target_query(t, addr, &v);

	if (ret)
		return ret;
	*start = v.start;
	*end = v.end;
	return 0;
}

int __madvx_target_refresh(struct madvx_target *t)
{
	int ret = read_stat(t);

	if (!ret)
		ret = read_locked(t);
	if (!ret && !t->procmap)
		ret = __madvx_maps_snapshot_load(t);
	return ret;
}

int __madvx_target_rollup(struct madvx_target *t, uint64_t *rss, uint64_t *pss,
			uint64_t *swap)
{
	char buf[4096];
	long n = read_small(t, "smaps_rollup", buf, sizeof(buf));
	int64_t r, p, s;

	if (n < 0)
		return (int)n;
	if (n == 0)
		return -ESRCH;	/* no mm any more */
	r = kb_field(buf, "Rss:");
	p = kb_field(buf, "Pss:");
	s = kb_field(buf, "Swap:");
	if (r < 0)
		return -EIO;
	*rss = (uint64_t)r;
	*pss = p < 0 ? 0 : (uint64_t)p;
	*swap = s < 0 ? 0 : (uint64_t)s;
	return 0;
}

/* Does PROCMAP_QUERY work on this target's maps fd? */
static bool procmap_works(struct madvx_target *t)
{
	struct madvx_target_vma v;

	if (!madvx_has(MADVX_FEAT_PROCMAP_QUERY))
		return false;
	t->procmap = true;
	if (procmap_find(t, 0, &v) == 0)
		return true;
	t->procmap = false;
	return false;
}

/* Everything after the pidfd: /proc/PID, then the liveness check. */
static int open_rest(struct madvx_target *t)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/%d", (int)t->pid);
	t->proc_fd = __madvx_sys_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->proc_fd < 0)
		return t->proc_fd == -ENOENT ? -ESRCH : t->proc_fd;
	t->maps_fd = __madvx_sys_openat(t->proc_fd, "maps", O_RDONLY | O_CLOEXEC);
	if (t->maps_fd < 0)
		return t->maps_fd == -ENOENT ? -ESRCH : t->maps_fd;
	/*
	 * Still alive now, so alive when /proc/PID was opened: the number was
	 * not yet free for reuse, and the directory is that process's.
	 */
	ret = __madvx_target_alive(t);
	if (ret)
		return ret;
	procmap_works(t);
	return __madvx_target_refresh(t);
}

static struct madvx_target *target_alloc(void)
{
	struct madvx_target *t = calloc(1, sizeof(*t));

	if (t)
		t->pidfd = t->proc_fd = t->maps_fd = -1;
	return t;
}

static int finish_open(struct madvx_target *t, struct madvx_target **out)
{
	int ret = open_rest(t);

	if (ret) {
		madvx_target_free(t);
		return ret;
	}
	*out = t;
	return 0;
}

static int target_open(int pid, unsigned int flags, struct madvx_target **out)
{
	struct madvx_target *t;

	if (pid <= 0 || flags || !out)
		return -EINVAL;
	__madvx_probe();
	/* Without a pidfd a pid could be reused under us: no target at all. */
	if (madvx_feature_disabled(MADVX_FEAT_PIDFD_OPEN) == 1)
		return -ENOSYS;
	t = target_alloc();
	if (!t)
		return -ENOMEM;
	t->pid = pid;
	t->pidfd = __madvx_sys_pidfd_open(pid);
	if (t->pidfd < 0) {
		int ret = t->pidfd;

		madvx_target_free(t);
		return ret;
	}
	return finish_open(t, out);
}

/* The pid a pidfd names, from /proc/self/fdinfo ("Pid:\t-1" once reaped). */
static int pidfd_pid(int pidfd, pid_t *pid)
{
	char path[64], buf[1024];
	const char *p;
	long n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = __madvx_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fd == -ENOENT ? -EBADF : fd;
	n = __madvx_sys_read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = 0;
	p = strstr(buf, "\nPid:");
	if (!p)
		return -EBADF;	/* not a pidfd */
	p += 5;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '-' || *p == '0')
		return -ESRCH;	/* exited and reaped (or in no pid namespace of ours) */
	*pid = (pid_t)madvx_parse_dec(&p);
	return 0;
}

static int target_open_pidfd(int pidfd, unsigned int flags, struct madvx_target **out)
{
	struct madvx_target *t;
	int ret;

	if (pidfd < 0 || flags || !out)
		return -EINVAL;
	__madvx_probe();
	t = target_alloc();
	if (!t)
		return -ENOMEM;
	ret = pidfd_pid(pidfd, &t->pid);
	if (!ret) {
		int e = errno;

		t->pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
		if (t->pidfd < 0)
			ret = -errno;
		errno = e;
	}
	if (ret) {
		madvx_target_free(t);
		return ret;
	}
	return finish_open(t, out);
}

MADVX_API void madvx_target_free(struct madvx_target *t)
{
	int e = errno;

	if (!t)
		return;
	if (t->maps_fd >= 0)
		close(t->maps_fd);
	if (t->proc_fd >= 0)
		close(t->proc_fd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	__madvx_maps_stream_stop(t);
	free(t->locked);
	free(t->snap);
	free(t->snap_line);
	free(t);
	errno = e;
}

MADVX_API int madvx_target_pid(const struct madvx_target *t)
{
	return t ? (int)t->pid : -EINVAL;
}

MADVX_API int madvx_target_pidfd(const struct madvx_target *t)
{
	return t ? t->pidfd : -EINVAL;
}

MADVX_API int madvx_target_check(struct madvx_target *t, int advice)
{
	long ret;

	if (!t)
		return -EINVAL;
	if (madvx_feature_disabled(MADVX_FEAT_PROCESS_MADVISE) == 1)
		return -ENOSYS;
	/* An empty vector runs every check and touches no memory. */
	ret = __madvx_sys_process_madvise(t->pidfd, NULL, 0, advice);
	return ret > 0 ? 0 : (int)ret;
}

int __madvx_target_advice_ok(struct madvx_target *t, int advice)
{
	int idx = madvx_advice_index(advice), ret;

	if (idx < 0)
		return 0;
	if (t->advice_known & (1ULL << idx))
		return !!(t->advice_ok & (1ULL << idx));
	ret = madvx_target_check(t, advice);
	if (ret && ret != -EINVAL)
		return ret;
	t->advice_known |= 1ULL << idx;
	if (!ret)
		t->advice_ok |= 1ULL << idx;
	return !ret;
}

static int vma_next(struct madvx_target *t, uint64_t addr, uint64_t include,
		    uint64_t exclude, struct madvx_target_vma *vma)
{
	int ret;

	if (!t || !vma)
		return -EINVAL;
	if (addr == 0 && (ret = __madvx_target_refresh(t)))
		return ret;
	for (;;) {
		ret = __madvx_target_query(t, addr, vma);
		if (ret)
			return ret;
		if (madvx_target_vma_match(vma, include, exclude))
			return 0;
		addr = vma->end;
	}
}

/* The public entry points keep errno as the caller had it (malloc may set it). */
MADVX_API int madvx_target_open(int pid, unsigned int flags, struct madvx_target **out)
{
	int e = errno, ret = target_open(pid, flags, out);

	errno = e;
	return ret;
}

MADVX_API int madvx_target_open_pidfd(int pidfd, unsigned int flags,
				      struct madvx_target **out)
{
	int e = errno, ret = target_open_pidfd(pidfd, flags, out);

	errno = e;
	return ret;
}

MADVX_API int madvx_target_vma_next(struct madvx_target *t, uint64_t addr,
				    uint64_t include, uint64_t exclude,
				    struct madvx_target_vma *vma)
{
	int e = errno, ret = vma_next(t, addr, include, exclude, vma);

	errno = e;
	return ret;
}
