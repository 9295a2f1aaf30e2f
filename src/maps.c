// SPDX-License-Identifier: MIT
/*
 * A target's /proc/PID/maps as text: the snapshot (kernels without
 * PROCMAP_QUERY, and walks over many VMAs) and the stream (madvx_reclaim()'s
 * look-up of every entry just before its call), and the flags a VMA's name
 * and the process state give (shared with target.c's PROCMAP_QUERY answers).
 * See maps.h; target.c asks the kernel whenever these cannot answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "maps.h"

/*
 * The whole of a /proc file: pread() from offset 0 until EOF into a buffer
 * that grows. *buf is NUL-terminated. Returns the length or -errno.
 */
long __madvx_maps_read_whole(int fd, char **buf, size_t *cap)
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

/* ---- flags ---- */

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

void __madvx_maps_classify(const struct madvx_target *t, struct madvx_target_vma *v,
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
	v->inode = madvx_parse_dec(&p);
	while (*p == ' ')
		p++;
	name = *p ? p : NULL;
	__madvx_maps_classify(t, v, name, 0);
}

int __madvx_maps_snapshot_load(struct madvx_target *t)
{
	char *buf = NULL;
	size_t cap = 0;
	long n = __madvx_maps_read_whole(t->maps_fd, &buf, &cap);
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

int __madvx_maps_snapshot_find(struct madvx_target *t, uint64_t addr,
			       struct madvx_target_vma *v)
{
	size_t lo = 0, hi;
	int ret;

	if (!t->snap_valid && (ret = __madvx_maps_snapshot_load(t)))
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

size_t __madvx_maps_scan_line(const struct madvx_target *t)
{
	return t->snap_hint && t->snap_hint <= t->nsnap ? t->snap_line[t->snap_hint - 1] : 0;
}

/* ---- the stream: a forward read of maps, fresh per epoch (maps.h) ---- */

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

int __madvx_maps_stream_start(struct madvx_target *t, uint64_t addr)
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
void __madvx_maps_stream_epoch(struct madvx_target *t, uint64_t addr, size_t bytes)
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

int __madvx_maps_stream_find(struct madvx_target *t, uint64_t addr,
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
	return -EAGAIN;
}

void __madvx_maps_stream_stats(const struct madvx_target *t, uint64_t *lines,
				 uint64_t *queries)
{
	*lines = t->stream ? t->stream->lines : 0;
	*queries = t->stream ? t->stream->queries : 0;
}

void __madvx_maps_stream_stop(struct madvx_target *t)
{
	struct madvx_target_stream *s = t->stream;

	if (!s)
		return;
	free(s->text);
	free(s->rec);
	free(s);
	t->stream = NULL;
}
