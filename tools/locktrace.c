// SPDX-License-Identifier: MIT
/*
 * locktrace: mmap_lock acquisitions per call, from the kernel's mmap_lock
 * tracepoints. See locktrace.h for why tracefs is mounted by a helper child.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "locktrace.h"

#define TRACEFS_DIR "/sys/kernel/tracing"
#define INST_PREFIX "madvx-lt-"
#define BUFFER_KB "4096"	/* per CPU: a few ms of a busy mmap/munmap loop */
#define MAX_THREADS 256

static atomic_uint inst_seq;

static void set_why(struct locktrace *lt, const char *fmt, const char *detail, int err)
{
	char msg[160];

	snprintf(msg, sizeof(msg), fmt, detail);
	snprintf(lt->why, sizeof(lt->why), "%s: %s", msg, strerror(err));
}

static int write_at(int dirfd, const char *path, const char *val, int flags)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | flags), ret = 0;
	size_t len = strlen(val);

	if (fd < 0)
		return -errno;
	if (write(fd, val, len) != (ssize_t)len)
		ret = errno ? -errno : -EIO;
	close(fd);
	return ret;
}

/* ---- getting a tracefs root fd ---- */

enum { ST_UNSHARE = 1, ST_PRIVATE, ST_MKDTEMP, ST_MOUNT, ST_OPEN };

struct helper_msg {
	int stage;	/* 0 = ok, else the step that failed */
	int err;
};

/*
 * The helper child: a private mount namespace, tracefs mounted in it, the
 * root opened and sent back. When the child exits its namespace goes away;
 * the open fd keeps the (now detached) mount alive, like umount -l.
 */
static void __attribute__((noreturn)) helper_child(int sock)
{
	struct helper_msg m = { 0 };
	char tmp[] = "/tmp/madvx-lt-XXXXXX", *dir = TRACEFS_DIR;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fd = -1;

	if (unshare(CLONE_NEWNS)) {
		m = (struct helper_msg){ ST_UNSHARE, errno };
	} else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		m = (struct helper_msg){ ST_PRIVATE, errno };
	} else {
		struct stat st;

		/* Mount over the usual place when it exists; else a temp dir. */
		if (stat(TRACEFS_DIR, &st) || !S_ISDIR(st.st_mode)) {
			dir = mkdtemp(tmp);
			if (!dir)
				m = (struct helper_msg){ ST_MKDTEMP, errno };
		}
		if (!m.stage && mount("nodev", dir, "tracefs", 0, NULL))
			m = (struct helper_msg){ ST_MOUNT, errno };
		if (!m.stage) {
			fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0)
				m = (struct helper_msg){ ST_OPEN, errno };
		}
		if (dir == tmp) {
			umount2(tmp, MNT_DETACH);
			rmdir(tmp);
		}
	}
	if (fd >= 0) {
		struct cmsghdr *c;

		msg.msg_control = cbuf.buf;
		msg.msg_controllen = sizeof(cbuf.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	sendmsg(sock, &msg, 0);
	_exit(0);
}

static int tracefs_via_helper(struct locktrace *lt)
{
	static const char *const stage_name[] = {
		[ST_UNSHARE] = "unshare(CLONE_NEWNS) (root / CAP_SYS_ADMIN needed)",
		[ST_PRIVATE] = "making / private in the helper's mount namespace",
		[ST_MKDTEMP] = "mkdtemp for the tracefs mount point",
		[ST_MOUNT] = "mount -t tracefs (kernel without CONFIG_TRACING?)",
		[ST_OPEN] = "opening the tracefs root",
	};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct helper_msg m = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
	};
	struct cmsghdr *c;
	int sv[2], fd = -1, ret;
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
		set_why(lt, "%s", "socketpair", -ret);
		return ret;
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		helper_child(sv[1]);
	}
	close(sv[1]);
	if (pid < 0) {
		ret = -errno;
		close(sv[0]);
		set_why(lt, "%s", "fork of the tracefs helper", -ret);
		return ret;
	}
	do
		n = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	close(sv[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (n != sizeof(m)) {
		set_why(lt, "%s", "tracefs helper died", EPIPE);
		return -EPIPE;
	}
	if (m.stage) {
		set_why(lt, "%s", m.stage < (int)(sizeof(stage_name) / sizeof(*stage_name)) ?
			stage_name[m.stage] : "helper", m.err);
		if (m.stage == ST_UNSHARE || m.err == EPERM)
			return -EPERM;
		return m.stage == ST_MOUNT ? -ENODEV : -m.err;
	}
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0) {
		set_why(lt, "%s", "tracefs helper sent no fd", EPROTO);
		return -EPROTO;
	}
	return fd;
}

static int tracefs_root(struct locktrace *lt)
{
	int fd = open(TRACEFS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	/* Already mounted where we can see it (and we may write it)? */
	if (fd >= 0) {
		if (!faccessat(fd, "instances", W_OK, 0))
			return fd;
		close(fd);
	}
	return tracefs_via_helper(lt);
}

/* ---- the instance ---- */

/* Remove instances left behind by processes that died without closing. */
static void reap_stale_instances(int root_fd)
{
	int dfd = openat(root_fd, "instances", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (dfd < 0)
		return;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		long pid;

		if (strncmp(de->d_name, INST_PREFIX, strlen(INST_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(INST_PREFIX), NULL, 10);
		if (pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH)
			unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

int locktrace_open(struct locktrace *lt)
{
	char path[128];
	int ret;

	memset(lt, 0, sizeof(*lt));
	lt->root_fd = lt->inst_fd = lt->pipe_fd = -1;
	if (geteuid() != 0) {
		snprintf(lt->why, sizeof(lt->why),
			 "not root: mounting tracefs and enabling tracepoints need CAP_SYS_ADMIN");
		return -EPERM;
	}
	ret = tracefs_root(lt);
	if (ret < 0)
		return ret;
	lt->root_fd = ret;
	if (faccessat(lt->root_fd, "events/mmap_lock/mmap_lock_acquire_returned", F_OK, 0)) {
		ret = -ENOENT;
		snprintf(lt->why, sizeof(lt->why),
			 "kernel has no mmap_lock tracepoints (events/mmap_lock in tracefs)");
		goto fail;
	}
	reap_stale_instances(lt->root_fd);
	snprintf(lt->inst, sizeof(lt->inst), INST_PREFIX "%d-%u", (int)getpid(),
		 atomic_fetch_add(&inst_seq, 1));
	snprintf(path, sizeof(path), "instances/%s", lt->inst);
	if (mkdirat(lt->root_fd, path, 0700)) {
		ret = -errno;
		set_why(lt, "mkdir %s in tracefs", path, -ret);
		lt->inst[0] = 0;
		goto fail;
	}
	lt->inst_fd = openat(lt->root_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lt->inst_fd < 0) {
		ret = -errno;
		set_why(lt, "open %s", path, -ret);
		goto fail;
	}
	/* Instances start with tracing on: off first, then configure. */
	if ((ret = write_at(lt->inst_fd, "tracing_on", "0", 0)) ||
	    (ret = write_at(lt->inst_fd, "trace_clock", "mono", 0)) ||
	    (ret = write_at(lt->inst_fd, "buffer_size_kb", BUFFER_KB, 0)) ||
	    (ret = write_at(lt->inst_fd, "events/mmap_lock/enable", "1", 0))) {
		set_why(lt, "%s", "configuring the trace instance", -ret);
		goto fail;
	}
	/*
	 * Optional: without syscall tracepoints every acquisition counts as
	 * a system call's (self_user stays 0). Filtered to the measuring
	 * thread in measure() before tracing starts.
	 */
	lt->syscalls = !write_at(lt->inst_fd, "events/raw_syscalls/filter", "common_pid == 0",
				 O_TRUNC) &&
		       !write_at(lt->inst_fd, "events/raw_syscalls/enable", "1", 0);
	lt->pipe_fd = openat(lt->inst_fd, "trace_pipe", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (lt->pipe_fd < 0) {
		ret = -errno;
		set_why(lt, "%s", "opening trace_pipe", -ret);
		goto fail;
	}
	return 0;
fail:
	locktrace_close(lt);
	return ret;
}

void locktrace_close(struct locktrace *lt)
{
	if (lt->pipe_fd >= 0)
		close(lt->pipe_fd);
	if (lt->inst_fd >= 0) {
		write_at(lt->inst_fd, "tracing_on", "0", 0);
		write_at(lt->inst_fd, "events/mmap_lock/enable", "0", 0);
		if (lt->syscalls)
			write_at(lt->inst_fd, "events/raw_syscalls/enable", "0", 0);
		close(lt->inst_fd);
	}
	if (lt->root_fd >= 0 && lt->inst[0]) {
		char path[128];

		snprintf(path, sizeof(path), "instances/%s", lt->inst);
		unlinkat(lt->root_fd, path, AT_REMOVEDIR);
	}
	if (lt->root_fd >= 0)
		close(lt->root_fd);
	free(lt->buf);
	lt->buf = NULL;
	lt->buf_cap = 0;
	lt->root_fd = lt->inst_fd = lt->pipe_fd = -1;
	lt->pids[0] = 0;
	lt->inst[0] = 0;
	lt->sys_tid = 0;
	lt->syscalls = false;
}

/* ---- measuring ---- */

struct thr {
	pid_t tid;
	int depth;		/* read locks can nest (e.g. fault inside a read section) */
	uint64_t acq_us;	/* when the outermost hold began */
	uint64_t start_us;	/* start_locking seen, waiting since */
	bool waiting;
	bool in_user;		/* its last syscall event was an exit */
};

struct parse {
	pid_t self;
	uint64_t t0, t1;	/* window, us */
	struct thr thr[MAX_THREADS];
	int nthr;
	struct locktrace_result *out;
};

static struct thr *thr_get(struct parse *p, pid_t tid)
{
	for (int i = 0; i < p->nthr; i++)
		if (p->thr[i].tid == tid)
			return &p->thr[i];
	if (p->nthr == MAX_THREADS)
		return NULL;
	p->thr[p->nthr] = (struct thr){ .tid = tid };
	return &p->thr[p->nthr++];
}

/* Collect our thread ids into "tid tid ...": self first. */
static int list_tids(char *buf, size_t len, pid_t self)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	size_t off;

	off = (size_t)snprintf(buf, len, "%d", (int)self);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		long tid = strtol(de->d_name, NULL, 10);

		if (tid <= 0 || tid == self || off + 16 >= len)
			continue;
		off += (size_t)snprintf(buf + off, len - off, " %ld", tid);
	}
	closedir(d);
	return 0;
}

/* At least 64 KiB free after @used bytes of *@buf (1 MiB first, then doubling). */
static int make_room(char **buf, size_t *cap, size_t used)
{
	size_t want;
	char *nb;

	if (*cap - used >= 65536)
		return 0;
	want = *cap ? *cap * 2 : 1 << 20;
	nb = realloc(*buf, want);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = want;
	return 0;
}

/*
 * Read what trace_pipe holds now (a consuming, non-blocking read): unlike
 * opening "trace", which waits for an RCU grace period to pause the buffer
 * (tens of ms), this costs only the copying. @keep false: just drain.
 */
static int read_pipe(struct locktrace *lt, bool keep, size_t *len)
{
	size_t off = 0;

	for (;;) {
		ssize_t n;

		if (make_room(&lt->buf, &lt->buf_cap, off))
			return -ENOMEM;
		n = read(lt->pipe_fd, lt->buf + off, lt->buf_cap - off - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (keep)
			off += (size_t)n;
	}
	lt->buf[off] = 0;
	*len = off;
	return 0;
}

/* Length of [from, to) inside the window, in ns. */
static uint64_t clip_ns(const struct parse *p, uint64_t from, uint64_t to)
{
	if (from < p->t0)
		from = p->t0;
	if (to > p->t1)
		to = p->t1;
	return to > from ? (to - from) * 1000 : 0;
}

long locktrace_line_tid(const char *line, const char **event)
{
	const char *br = strstr(line, " ["), *q, *ev;

	if (line[0] == '#' || !br)
		return -1;
	/* the digits before the " [cpu]" (comm is right-aligned, padded) */
	q = br;
	while (q > line && q[-1] == ' ')
		q--;
	while (q > line && q[-1] >= '0' && q[-1] <= '9')
		q--;
	ev = strstr(br, ": ");	/* after "[cpu] flags timestamp" */
	if (event)
		*event = ev ? ev + 2 : NULL;
	return strtol(q, NULL, 10);
}

/*
 * raw_syscalls (the measuring thread's only): between an exit and the next
 * entry the thread runs in user mode, so an acquisition there is a page
 * fault's. Until its first event the thread counts as inside a system call
 * (it is: the write that turned tracing on).
 */
static void parse_syscall_line(struct parse *p, const char *line)
{
	const char *ev;
	struct thr *t;
	long tid = locktrace_line_tid(line, &ev);

	if (tid != p->self || !ev)
		return;
	t = thr_get(p, (pid_t)tid);
	if (!t)
		return;
	if (!strncmp(ev, "sys_enter:", 10))
		t->in_user = false;
	else if (!strncmp(ev, "sys_exit:", 9))
		t->in_user = true;
}

/*
 * One event line: "<comm>-<tid> [cpu] <flags> <sec>.<usec>: <event>: <fields>".
 * Every event updates the thread's state (holding, waiting); counts and
 * times are credited only inside the window [t0, t1].
 */
static void parse_line(struct parse *p, const char *line)
{
	const char *ev = strstr(line, ": mmap_lock_"), *q, *br;
	unsigned long long sec, usec;
	struct locktrace_counts *c, *u;
	struct thr *t;
	bool in;
	uint64_t ts;
	long tid;

	if (line[0] == '#')
		return;
	if (!ev) {
		parse_syscall_line(p, line);
		return;
	}
	/* timestamp: the token before ev */
	q = ev;
	while (q > line && q[-1] != ' ')
		q--;
	if (sscanf(q, "%llu.%llu", &sec, &usec) != 2)
		return;
	ts = sec * 1000000ULL + usec;
	br = strstr(line, " [");
	if (!br || br > q)
		return;
	tid = locktrace_line_tid(line, NULL);
	if (tid <= 0)
		return;
	t = thr_get(p, (pid_t)tid);
	if (!t)
		return;
	c = tid == p->self ? &p->out->self : &p->out->others;
	u = tid == p->self && t->in_user ? &p->out->self_user : NULL;
	in = ts >= p->t0 && ts <= p->t1;
	if (in)
		p->out->events++;
	ev += 2;
	if (!strncmp(ev, "mmap_lock_start_locking:", 24)) {
		t->waiting = true;
		t->start_us = ts;
	} else if (!strncmp(ev, "mmap_lock_acquire_returned:", 27)) {
		/* trylocks report here without a start_locking: no wait */
		if (t->waiting)
			c->wait_ns += clip_ns(p, t->start_us, ts);
		t->waiting = false;
		if (strstr(ev, "success=false"))
			return;
		if (in && strstr(ev, "write=true")) {
			c->acq_write++;
			if (u)
				u->acq_write++;
		} else if (in) {
			c->acq_read++;
			if (u)
				u->acq_read++;
		}
		if (t->depth++ == 0)
			t->acq_us = ts;
	} else if (!strncmp(ev, "mmap_lock_released:", 19)) {
		if (t->depth == 0)		/* taken before tracing began */
			c->held_ns += clip_ns(p, 0, ts);
		else if (--t->depth == 0)
			c->held_ns += clip_ns(p, t->acq_us, ts);
	}
}

/* One measurement; @p is zeroed scratch, @tids a buffer for the thread list. */
static int measure(struct locktrace *lt, void (*fn)(void *), void *arg,
		   struct locktrace_result *out, struct parse *p, char *tids, size_t tids_len)
{
	char *line, *nl;
	uint64_t t0, t1;
	struct timespec ts;
	size_t len;
	int ret;

	p->self = (pid_t)syscall(SYS_gettid);
	p->out = out;
	list_tids(tids, tids_len, p->self);
	/* Rewriting set_event_pid waits for RCU: only when the threads changed. */
	if (strcmp(tids, lt->pids)) {
		ret = write_at(lt->inst_fd, "set_event_pid", tids, O_TRUNC);
		if (ret)
			return ret;
		snprintf(lt->pids, sizeof(lt->pids), "%s", tids);
	}
	if (lt->syscalls && lt->sys_tid != p->self) {
		char filter[32];

		snprintf(filter, sizeof(filter), "common_pid == %d", (int)p->self);
		ret = write_at(lt->inst_fd, "events/raw_syscalls/filter", filter, O_TRUNC);
		if (ret)
			return ret;
		lt->sys_tid = p->self;
	}
	out->syscalls_traced = lt->syscalls;
	if ((ret = read_pipe(lt, false, &len)) ||
	    (ret = write_at(lt->inst_fd, "tracing_on", "1", 0)))
		return ret;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	fn(arg);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	ret = write_at(lt->inst_fd, "tracing_on", "0", 0);
	out->call_ns = t1 - t0;
	if (ret)
		return ret;
	ret = read_pipe(lt, true, &len);
	if (ret)
		return ret;
	p->t0 = t0 / 1000;
	p->t1 = t1 / 1000;
	for (line = lt->buf; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (strstr(line, " EVENTS]") && strstr(line, "[LOST "))
			out->lost = true;
		parse_line(p, line);
	}
	/* Still held, or still waiting, when the trace ends. */
	for (int i = 0; i < p->nthr; i++) {
		struct thr *t = &p->thr[i];
		struct locktrace_counts *c = t->tid == p->self ? &out->self : &out->others;

		if (t->depth)
			c->held_ns += clip_ns(p, t->acq_us, p->t1);
		if (t->waiting)
			c->wait_ns += clip_ns(p, t->start_us, p->t1);
	}
	return 0;
}

int locktrace_measure(struct locktrace *lt, void (*fn)(void *), void *arg,
		      struct locktrace_result *out)
{
	struct parse *pp;
	char tids[4096];
	int ret;

	memset(out, 0, sizeof(*out));
	if (lt->inst_fd < 0)
		return -EBADF;
	pp = calloc(1, sizeof(*pp));	/* 8 KiB of thread state: not on the stack */
	if (!pp)
		return -ENOMEM;
	ret = measure(lt, fn, arg, out, pp, tids, sizeof(tids));
	free(pp);
	return ret;
}

/* ---- tracing a command ---- */

/* Filter (when the spec has one) and enable switch of "group/event[:filter]". */
static int event_set(int inst_fd, const char *spec, bool on)
{
	const char *colon = strchr(spec, ':');
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
	char path[256], name[160];
	int ret;

	if (n >= sizeof(name))
		return -ENAMETOOLONG;
	memcpy(name, spec, n);
	name[n] = 0;
	if (colon) {
		snprintf(path, sizeof(path), "events/%s/filter", name);
		ret = write_at(inst_fd, path, on ? colon + 1 : "0", O_TRUNC);
		if (ret)
			return ret;
	}
	snprintf(path, sizeof(path), "events/%s/enable", name);
	return write_at(inst_fd, path, on ? "1" : "0", 0);
}

struct feed {
	char *buf;
	size_t len, cap;
	void (*line)(void *arg, const char *text);
	void *arg;
	bool *lost;
};

/* Read what the pipe holds, hand out complete lines, keep a partial one. */
static int feed_lines(struct locktrace *lt, struct feed *f)
{
	for (;;) {
		char *start, *nl;
		ssize_t n;

		if (make_room(&f->buf, &f->cap, f->len))
			return -ENOMEM;
		n = read(lt->pipe_fd, f->buf + f->len, f->cap - f->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		f->len += (size_t)n;
		f->buf[f->len] = 0;
		for (start = f->buf; (nl = strchr(start, '\n')); start = nl + 1) {
			*nl = 0;
			if (strstr(start, "[LOST ") && strstr(start, " EVENTS]"))
				*f->lost = true;
			f->line(f->arg, start);
		}
		f->len -= (size_t)(start - f->buf);
		memmove(f->buf, start, f->len);
	}
}

/* The child waits for the gate, so the trace sees its first instruction. */
static pid_t spawn_gated(char *const argv[], int *gate_wr)
{
	int gate[2];
	pid_t pid;

	if (pipe2(gate, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		char c;

		close(gate[1]);
		if (read(gate[0], &c, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "locktrace: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(gate[0]);
	if (pid < 0) {
		pid = -errno;
		close(gate[1]);
		return pid;
	}
	*gate_wr = gate[1];
	return pid;
}

/* Start tracing @pid and its descendants (event-fork), then open the gate. */
static int follow(struct locktrace *lt, pid_t pid, int gate_wr)
{
	char pidstr[16];
	size_t len;
	int ret;

	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	lt->pids[0] = 0;	/* locktrace_measure() must write its own set */
	if ((ret = write_at(lt->inst_fd, "set_event_pid", pidstr, O_TRUNC)) ||
	    (ret = write_at(lt->inst_fd, "options/event-fork", "1", 0)) ||
	    (ret = read_pipe(lt, false, &len)) ||
	    (ret = write_at(lt->inst_fd, "tracing_on", "1", 0))) {
		set_why(lt, "%s", "starting the trace of the child", -ret);
		return ret;
	}
	if (write(gate_wr, "g", 1) != 1) {
		ret = -errno;
		set_why(lt, "%s", "releasing the child", -ret);
	}
	return ret;
}

/* Feed the trace until the child exits; its wait status, or -errno. */
static int feed_until_exit(struct locktrace *lt, pid_t pid, struct feed *f, struct rusage *ru)
{
	int status, ret;

	for (;;) {
		struct pollfd pfd = { .fd = lt->pipe_fd, .events = POLLIN };
		pid_t w = wait4(pid, &status, WNOHANG, ru);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return -errno;
		ret = feed_lines(lt, f);
		if (ret)
			return ret;
		poll(&pfd, 1, 10);
	}
	ret = write_at(lt->inst_fd, "tracing_on", "0", 0);
	if (!ret)
		ret = feed_lines(lt, f);
	return ret ? ret : status;
}

int locktrace_run(struct locktrace *lt, const char *const *events, char *const argv[],
		  void (*line)(void *arg, const char *text), void *arg,
		  struct rusage *ru, bool *lost)
{
	struct feed f = { .line = line, .arg = arg, .lost = lost };
	int gate_wr = -1, ret = 0, n;
	pid_t pid;

	*lost = false;
	memset(ru, 0, sizeof(*ru));
	if (lt->inst_fd < 0)
		return -EBADF;
	/* A whole process tree's system calls would flood the buffer. */
	if (lt->syscalls)
		write_at(lt->inst_fd, "events/raw_syscalls/enable", "0", 0);
	for (n = 0; events && events[n]; n++) {
		ret = event_set(lt->inst_fd, events[n], true);
		if (ret) {
			set_why(lt, "enabling %s (kernel without it?)", events[n], -ret);
			goto out;
		}
	}
	pid = spawn_gated(argv, &gate_wr);
	if (pid < 0) {
		ret = pid;
		set_why(lt, "%s", "fork", -ret);
		goto out;
	}
	ret = follow(lt, pid, gate_wr);
	close(gate_wr);		/* on failure the child sees EOF and exits 127 */
	if (ret)
		kill(pid, SIGKILL);
	if (!ret)
		ret = feed_until_exit(lt, pid, &f, ru);
	if (ret < 0) {
		kill(pid, SIGKILL);
		while (wait4(pid, NULL, 0, ru) < 0 && errno == EINTR)
			;
		write_at(lt->inst_fd, "tracing_on", "0", 0);
	}
out:
	write_at(lt->inst_fd, "options/event-fork", "0", 0);
	for (; n >= 0; n--)	/* a failed one too: its filter may be set */
		if (events && events[n])
			event_set(lt->inst_fd, events[n], false);
	if (lt->syscalls)
		write_at(lt->inst_fd, "events/raw_syscalls/enable", "1", 0);
	free(f.buf);
	return ret;
}
