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

/*
 * The whole of a /proc file: pread() from offset 0 until EOF into a buffer
 * that grows. *buf is NUL-terminated. Returns the length or -errno.
 */
static long read_whole(int fd, char **buf, size_t *cap)
{
	size_t len = 0;

	for (;;) {
		long n;

		if (*cap - len < 65536 + 1) {
			size_t ncap = *cap ? *cap * 2 : 1 << 17;
			char *nb = realloc(*buf, ncap);

			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = ncap;
		}
		n = __madvx_sys_pread(fd, *buf + len, *cap - len - 1, len);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	(*buf)[len] = 0;
	return (long)len;
}

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

static uint64_t parse_dec(const char **p)
{
	uint64_t v = 0;

	while (**p == ' ' || **p == '\t')
		(*p)++;
	for (; **p >= '0' && **p <= '9'; (*p)++)
		v = v * 10 + (uint64_t)(**p - '0');
	return v;
}

/* "key:  <n> kB" in @buf (a line start), in bytes; -1 if absent. */
static int64_t kb_field(const char *buf, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = buf; (p = strstr(p, key)); p += n) {
		if (p == buf || p[-1] == '\n') {
			const char *q = p + n;

			return (int64_t)parse_dec(&q) * 1024;
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
			t->startstack = parse_dec(&p);
		else if (field == 47)
			t->start_brk = parse_dec(&p);
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
	n = read_whole(fd, &buf, &cap);
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

static bool in_locked(const struct madvx_target *t, uint64_t start)
{
	size_t lo = 0, hi = t->nlocked;

	while (lo < hi) {	/* smaps lists VMAs in address order */
		size_t mid = (lo + hi) / 2;

		if (t->locked[mid].end <= start)
			lo = mid + 1;
		else if (t->locked[mid].start > start)
			hi = mid;
		else
			return true;
	}
	return false;
}

/* Flags that depend on the name and the process state. */
static void classify(const struct madvx_target *t, struct madvx_target_vma *v,
		     const char *name, uint64_t page_size)
{
	v->flags |= v->inode ? MADVX_VMA_FILE : MADVX_VMA_ANON;
	if (name && name[0] == '[' && strncmp(name, "[anon:", 6) &&
	    strncmp(name, "[anon_shmem:", 12) && strcmp(name, "[stack]") &&
	    strcmp(name, "[heap]"))
		v->flags |= MADVX_VMA_SPECIAL;
	if ((page_size && page_size > madvx_page_size()) ||
	    (name && !strncmp(name, "/anon_hugepage", 14)))
		v->flags |= MADVX_VMA_HUGETLB;
	if ((t->startstack && v->start <= t->startstack && t->startstack < v->end) ||
	    (name && !strcmp(name, "[stack]")))
		v->flags |= MADVX_VMA_STACK;
	if ((t->start_brk && v->start <= t->start_brk && t->start_brk < v->end &&
	     !v->inode) || (name && !strcmp(name, "[heap]")))
		v->flags |= MADVX_VMA_HEAP;
	if (t->nlocked && in_locked(t, v->start))
		v->flags |= MADVX_VMA_LOCKED;
}

/* ---- the /proc/PID/maps snapshot (kernels without PROCMAP_QUERY) ---- */

/* "start-end perms offset major:minor inode   name" */
static void parse_maps_line(const struct madvx_target *t, const char *line,
			    struct madvx_target_vma *v)
{
	const char *p = line, *name;

	*v = (struct madvx_target_vma){ 0 };
	v->start = madvx_parse_hex(&p);
	p++;
	v->end = madvx_parse_hex(&p);
	p++;
	if (p[0] == 'r')
		v->flags |= MADVX_VMA_READ;
	if (p[1] == 'w')
		v->flags |= MADVX_VMA_WRITE;
	if (p[2] == 'x')
		v->flags |= MADVX_VMA_EXEC;
	if (p[3] == 's')
		v->flags |= MADVX_VMA_SHARED;
	p += 5;
	v->offset = madvx_parse_hex(&p);
	p++;
	v->dev_major = (uint32_t)madvx_parse_hex(&p);
	p++;
	v->dev_minor = (uint32_t)madvx_parse_hex(&p);
	v->inode = parse_dec(&p);
	while (*p == ' ')
		p++;
	name = *p ? p : NULL;
	classify(t, v, name, 0);
}

static int load_snapshot(struct madvx_target *t)
{
	char *buf = NULL;
	size_t cap = 0;
	long n = read_whole(t->maps_fd, &buf, &cap);
	int ret = 0;

	t->nsnap = 0;
	t->snap_hint = 0;
	if (n < 0) {
		free(buf);
		return n == -ENOENT ? -ESRCH : (int)n;
	}
	for (char *line = buf; *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = 0;
		if (t->nsnap == t->snap_cap) {
			size_t c = t->snap_cap ? t->snap_cap * 2 : 256;
			void *s = realloc(t->snap, c * sizeof(*t->snap));
			void *l = s ? realloc(t->snap_line, c * sizeof(*t->snap_line)) : NULL;

			if (s)
				t->snap = s;
			if (!l) {
				ret = -ENOMEM;
				break;
			}
			t->snap_line = l;
			t->snap_cap = c;
		}
		t->snap_line[t->nsnap] = (uint32_t)(nl ? (size_t)(nl - line) + 1 : strlen(line));
		parse_maps_line(t, line, &t->snap[t->nsnap++]);
		if (!nl)
			break;
		line = nl + 1;
	}
	free(buf);
	if (t->nsnap)
		t->snap_line_bytes = (double)n / (double)t->nsnap;
	/* An mm that is gone reads as empty: exited, or execve() replaced it. */
	if (!ret && n == 0)
		ret = -ESRCH;
	t->snap_valid = !ret;
	return ret;
}

static int snapshot_find(struct madvx_target *t, uint64_t addr,
			 struct madvx_target_vma *v)
{
	size_t lo = 0, hi;
	int ret;

	if (!t->snap_valid && (ret = load_snapshot(t)))
		return ret;
	/* walks go up in address order: try the next VMA first */
	hi = t->snap_hint;
	if (hi < t->nsnap && t->snap[hi].end > addr &&
	    (hi == 0 || t->snap[hi - 1].end <= addr)) {
		lo = hi;
	} else {
		hi = t->nsnap;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (t->snap[mid].end <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	if (lo == t->nsnap)
		return -ENOENT;
	*v = t->snap[lo];
	t->snap_hint = lo + 1;
	return 0;
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
	classify(t, v, q.vma_name_size ? t->name : NULL, q.vma_page_size);
	t->query_line = maps_line_len(v, q.vma_name_size ? t->name : NULL);
	return 0;
}

int __madvx_target_query(struct madvx_target *t, uint64_t addr,
		       struct madvx_target_vma *v)
{
	if (t->procmap)
		return procmap_find(t, addr, v);
	return snapshot_find(t, addr, v);
}

/* ---- the stream: a forward read of maps, fresh per epoch (target.h) ---- */

struct stream_rec {
	struct madvx_target_vma v;
	uint32_t epoch;		/* of the read() in which its line began */
	uint32_t len;		/* bytes of the line */
};

struct madvx_target_stream {
	char *text;		/* a line cut by the end of a read, waiting for its rest */
	size_t tlen, tcap;
	uint32_t text_epoch;
	struct stream_rec *rec;	/* parsed lines, [head, nrec) not yet passed */
	size_t head, nrec, rcap;
	uint64_t pos;		/* bytes read so far: the next pread() offset */
	uint32_t epoch;
	bool eof;
	size_t want;		/* bytes the next read of this epoch asks for */
	size_t topup;		/* ... and the one after it (doubles) */
	uint64_t lines, queries;
};

/* A maps line of an anonymous VMA is ~50 bytes; of a file, 75 plus the path. */
#define STREAM_LINE_GUESS 64
#define STREAM_MAX_READ (256 * 1024)

int __madvx_target_stream_start(struct madvx_target *t, uint64_t addr)
{
	struct madvx_target_stream *s = t->stream;
	size_t below = 0;

	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		t->stream = s;
	}
	s->tlen = s->head = s->nrec = 0;
	s->pos = 0;
	s->epoch = 1;
	s->eof = false;
	s->lines = s->queries = 0;
	/* plan() counted the lines from @addr on; those below it, if known */
	s->want = 0;
	if (t->snap_valid) {
		while (below < t->nsnap && t->snap[below].end <= addr)
			s->want += t->snap_line[below++];
	}
	return 0;
}

static size_t line_bytes(const struct madvx_target *t)
{
	return t->snap_line_bytes > 0 ? (size_t)t->snap_line_bytes + 1 : STREAM_LINE_GUESS;
}

/*
 * Ask for the bytes of exactly the lines the plan expects: the kernel stops
 * formatting lines once a read is filled, so no line is read ahead. A short
 * estimate costs one more small read; a long one leaves lines that the next
 * epoch must ask PROCMAP_QUERY for. The first epoch also passes the lines
 * below the start (stream_start()).
 */
void __madvx_target_stream_epoch(struct madvx_target *t, uint64_t addr, size_t bytes)
{
	struct madvx_target_stream *s = t->stream;
	size_t have = s->tlen;	/* bytes read already (stale now): not again */
	size_t want;

	while (s->head < s->nrec && s->rec[s->head].v.end <= addr)
		s->head++;
	for (size_t i = s->head; i < s->nrec; i++)
		have += s->rec[i].len;
	want = bytes > have ? bytes - have : 0;
	s->topup = line_bytes(t);
	if (s->epoch == 1 && !s->pos) {
		s->want += want;
		return;
	}
	s->want = want;
	s->epoch++;
}

static int stream_push(struct madvx_target *t, const char *line, size_t len, uint32_t epoch)
{
	struct madvx_target_stream *s = t->stream;

	if (s->head == s->nrec)
		s->head = s->nrec = 0;
	if (s->nrec == s->rcap) {
		size_t c = s->rcap ? s->rcap * 2 : 256;
		void *r = realloc(s->rec, c * sizeof(*s->rec));

		if (!r)
			return -ENOMEM;
		s->rec = r;
		s->rcap = c;
	}
	parse_maps_line(t, line, &s->rec[s->nrec].v);
	s->rec[s->nrec].len = (uint32_t)len;
	s->rec[s->nrec++].epoch = epoch;
	s->lines++;
	return 0;
}

/* Append @len bytes read now; parse every complete line. */
static int stream_parse(struct madvx_target *t, size_t len)
{
	struct madvx_target_stream *s = t->stream;
	char *p = s->text, *end = s->text + s->tlen + len, *nl;
	uint32_t epoch = s->tlen ? s->text_epoch : s->epoch;
	int ret = 0;

	*end = 0;
	while (!ret && (nl = memchr(p, '\n', (size_t)(end - p)))) {
		*nl = 0;
		ret = stream_push(t, p, (size_t)(nl - p) + 1, epoch);
		p = nl + 1;
		epoch = s->epoch;	/* the next line began in this read */
	}
	s->tlen = (size_t)(end - p);
	memmove(s->text, p, s->tlen);
	s->text_epoch = epoch;
	return ret;
}

static int stream_read(struct madvx_target *t)
{
	struct madvx_target_stream *s = t->stream;
	size_t want = s->want ? s->want : s->topup;
	long n;

	if (want > STREAM_MAX_READ)
		want = STREAM_MAX_READ;
	if (s->tcap < s->tlen + want + 1) {
		char *b = realloc(s->text, s->tlen + want + 1);

		if (!b)
			return -ENOMEM;
		s->text = b;
		s->tcap = s->tlen + want + 1;
	}
	do
		n = __madvx_sys_pread(t->maps_fd, s->text + s->tlen, want, s->pos);
	while (n == -EINTR);
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	/*
	 * One read returns at most the kernel's seq_file buffer (a page, ~60
	 * lines): go on with the rest of the estimate. Past it, the estimate
	 * was short (or the start unknown): a few lines, then twice as many.
	 */
	if ((size_t)n < want) {
		s->want = want - (size_t)n;
	} else {
		s->want = s->topup;
		if (s->topup < STREAM_MAX_READ)
			s->topup *= 2;
	}
	if (n == 0) {
		s->eof = true;
		return 0;
	}
	s->pos += (uint64_t)n;
	return stream_parse(t, (size_t)n);
}

int __madvx_target_stream_find(struct madvx_target *t, uint64_t addr,
			       struct madvx_target_vma *v)
{
	struct madvx_target_stream *s = t->stream;
	int ret;

	for (;;) {
		while (s->head < s->nrec && s->rec[s->head].v.end <= addr)
			s->head++;
		if (s->head < s->nrec) {
			const struct stream_rec *r = &s->rec[s->head];

			/* older than this epoch, or a file (page size): ask the kernel */
			if (r->epoch != s->epoch || (r->v.flags & MADVX_VMA_FILE))
				break;
			*v = r->v;
			return 0;
		}
		/* the end: an mm that is gone also reads as empty - ask to tell */
		if (s->eof)
			break;
		ret = stream_read(t);
		if (ret)
			return ret;
	}
	s->queries++;
	return procmap_find(t, addr, v);
}

void __madvx_target_stream_stats(const struct madvx_target *t, uint64_t *lines,
				 uint64_t *queries)
{
	*lines = t->stream ? t->stream->lines : 0;
	*queries = t->stream ? t->stream->queries : 0;
}

void __madvx_target_stream_stop(struct madvx_target *t)
{
	struct madvx_target_stream *s = t->stream;

	if (!s)
		return;
	free(s->text);
	free(s->rec);
	free(s);
	t->stream = NULL;
}

size_t __madvx_target_query_line(const struct madvx_target *t)
{
	return t->procmap ? t->query_line : 0;
}

size_t __madvx_target_scan_line(const struct madvx_target *t)
{
	return t->snap_hint && t->snap_hint <= t->nsnap ? t->snap_line[t->snap_hint - 1] : 0;
}

int __madvx_target_scan(struct madvx_target *t, uint64_t addr,
		       struct madvx_target_vma *v)
{
	return snapshot_find(t, addr, v);
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
		ret = load_snapshot(t);
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
	*pid = (pid_t)parse_dec(&p);
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
	__madvx_target_stream_stop(t);
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
