// SPDX-License-Identifier: MIT
/*
 * init for the libmadvx test kernel's initramfs (PID 1, linked statically).
 *
 * Mounts the pseudo file systems, sets up a zram swap device, runs every test
 * listed in /madvx/tests.list (and /madvx/extra.list, if an extra archive
 * added one) with a timeout, and prints one line per test that the host
 * parses:
 *
 *   MADVX-RESULT <name> PASS|FAIL|SKIP <rc> <seconds>
 *
 * A test's own output is prefixed with "[<name>] " so a marker line always
 * starts a line.  At the end it dumps the kernel log between MADVX-DMESG-BEGIN
 * and MADVX-DMESG-END (the console runs with "quiet", which hides WARN()) and
 * powers the machine off.
 *
 * List format, one test per line, fields separated by tabs:
 *   group  name  timeout_s  skip_rc  workdir  env(K=V ...|-)  argv(space separated)
 *
 * Kernel command line options read from /proc/cmdline:
 *   madvx.only=GLOB[,GLOB...]  run only tests whose name or group/name matches
 *   madvx.skip=GLOB[,GLOB...]  do not run these
 *   madvx.shell=1              start /bin/sh on the console instead of tests
 *   madvx.zram=MiB             zram swap size (default 512, 0 = none)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 64
#define CMDLINE_MAX 4096

static char cmdline[CMDLINE_MAX];

static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Value of "key=" on the kernel command line, or NULL. */
static const char *cmdline_opt(const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);
	const char *p = cmdline;

	while (*p) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			size_t n = strcspn(p + klen + 1, " \n");

			if (n >= len)
				n = len - 1;
			memcpy(buf, p + klen + 1, n);
			buf[n] = '\0';
			return buf;
		}
		p += strcspn(p, " ");
	}
	return NULL;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static void mount_fs(const char *src, const char *dir, const char *type, const char *opts)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, 0, opts) && errno != EBUSY)
		out("MADVX-INIT mount %s on %s failed: %s\n", type, dir, strerror(errno));
}

/*
 * Write a version-1 swap header (what mkswap writes) to the start of the
 * device: without it swapon() refuses the device.
 */
static int mkswap(const char *dev, uint64_t bytes)
{
	long psz = sysconf(_SC_PAGESIZE);
	char *page = calloc(1, psz);
	uint32_t *hdr;
	int fd, ret = 0;

	if (!page)
		return -ENOMEM;
	hdr = (uint32_t *)(page + 1024);
	hdr[0] = 1;				/* version */
	hdr[1] = bytes / psz - 1;		/* last_page */
	hdr[2] = 0;				/* nr_badpages */
	memcpy(page + psz - 10, "SWAPSPACE2", 10);
	fd = open(dev, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (pwrite(fd, page, psz, 0) != psz)
		ret = -EIO;
	fsync(fd);
	close(fd);
out:
	free(page);
	return ret;
}

/*
 * Keep two probes on every tracepoint the tests enable, from two tracefs
 * instances that never record: a test enabling one of these events then
 * takes its tracepoint from N >= 2 probes to N + 1, which patches no kernel
 * text.  Under QEMU TCG the text patching of the 0->1 and 1->2 steps (static
 * calls and jump labels: int3, then IPIs) raced with the other vCPU and
 * ended in "Oops: int3" twice on 2026-12-01, once on the pristine kernel,
 * while a test enabled an mmap_lock event; set_event_pid registers sched_*
 * probes the same way, so the pins filter on a pid too.
 */
static void pin_tracepoints(void)
{
	static const char *const files[] = {
		"tracing_on", "0",
		"buffer_size_kb", "4",
		"set_event_pid", "1",
		"events/mmap_lock/enable", "1",
		"events/vmscan/mm_vmscan_reclaim_pages/enable", "1",
		"events/io_uring/io_uring_queue_async_work/enable", "1",
	};
	char dir[96], path[192];
	int i, f, ret, failed = 0;

	for (i = 0; i < 2; i++) {
		snprintf(dir, sizeof(dir), "/sys/kernel/tracing/instances/madvx-pin%d", i);
		if (mkdir(dir, 0755) && errno != EEXIST) {
			out("MADVX-INIT no tracepoint pins: %s: %s\n", dir, strerror(errno));
			return;
		}
		for (f = 0; f < (int)(sizeof(files) / sizeof(files[0])); f += 2) {
			snprintf(path, sizeof(path), "%s/%s", dir, files[f]);
			ret = write_file(path, files[f + 1]);
			if (ret) {
				out("MADVX-INIT tracepoint pin %s: %s\n", path, strerror(-ret));
				failed++;
			}
		}
	}
	if (!failed)
		out("MADVX-INIT tracepoints pinned (mmap_lock, vmscan reclaim, io_uring punt, sched pid filter)\n");
}

static void setup_zram(void)
{
	char buf[32], size[32];
	long mib = 512;
	int ret;

	if (cmdline_opt("madvx.zram", buf, sizeof(buf)))
		mib = atol(buf);
	if (mib <= 0)
		return;
	snprintf(size, sizeof(size), "%ldM", mib);
	ret = write_file("/sys/block/zram0/disksize", size);
	if (!ret)
		ret = mkswap("/dev/zram0", (uint64_t)mib << 20);
	if (!ret && swapon("/dev/zram0", 0))
		ret = -errno;
	if (ret)
		out("MADVX-INIT zram swap failed: %s\n", strerror(-ret));
	else
		out("MADVX-INIT zram swap %ld MiB on /dev/zram0\n", mib);
}

static int match_list(const char *list, const char *group, const char *name)
{
	char buf[CMDLINE_MAX], full[512], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", list);
	snprintf(full, sizeof(full), "%s/%s", group, name);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!fnmatch(tok, name, 0) || !fnmatch(tok, full, 0) || !fnmatch(tok, group, 0))
			return 1;
	return 0;
}

/* Copy the child's output to the console, one prefixed line at a time. */
struct relay {
	char line[4096];
	size_t len;
	const char *name;
};

static void relay_flush(struct relay *r)
{
	if (!r->len)
		return;
	out("[%s] %.*s\n", r->name, (int)r->len, r->line);
	r->len = 0;
}

static void relay_feed(struct relay *r, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n' || r->len == sizeof(r->line) - 1) {
			if (buf[i] != '\n')
				r->line[r->len++] = buf[i];
			if (!r->len)
				r->line[r->len++] = ' ';
			relay_flush(r);
		} else if (buf[i] != '\r') {
			r->line[r->len++] = buf[i];
		}
	}
}

static void child_exec(int outfd, const char *workdir, char *env, char **argv)
{
	char *tok, *save;

	setpgid(0, 0);
	dup2(outfd, 1);
	dup2(outfd, 2);
	close(outfd);
	close(0);
	open("/dev/null", O_RDONLY);
	signal(SIGPIPE, SIG_DFL);
	if (workdir[0] && strcmp(workdir, "-") && chdir(workdir))
		fprintf(stderr, "chdir %s: %s\n", workdir, strerror(errno));
	if (strcmp(env, "-"))
		for (tok = strtok_r(env, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
			putenv(tok);
	execv(argv[0], argv);
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Run one test; return its verdict string and set *rc. */
static const char *run_one(const char *name, int timeout_s, int skip_rc,
			   const char *workdir, char *env, char **argv, int *rc)
{
	struct relay r = { .name = name };
	int pfd[2], status = 0, exited = 0, timed_out = 0;
	double deadline = now() + timeout_s;
	pid_t pid;
	char buf[4096];

	if (pipe2(pfd, O_CLOEXEC)) {
		*rc = -errno;
		return "FAIL";
	}
	pid = fork();
	if (pid < 0) {
		*rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return "FAIL";
	}
	if (!pid) {
		close(pfd[0]);
		child_exec(pfd[1], workdir, env, argv);
	}
	close(pfd[1]);
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		double left = deadline - now();
		ssize_t n;

		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		if (left <= 0) {
			if (!exited)
				timed_out = 1;
			break;
		}
		/* Children of the test may keep the pipe open: give them 2 s. */
		if (exited && deadline > now() + 2)
			deadline = now() + 2;
		if (poll(&p, 1, exited ? 100 : 200) > 0) {
			n = read(pfd[0], buf, sizeof(buf));
			if (n > 0)
				relay_feed(&r, buf, n);
			else if (n == 0 && exited)
				break;
			else if (n == 0)
				usleep(10000);
		}
	}
	kill(-pid, SIGKILL);
	if (!exited)
		waitpid(pid, &status, 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	relay_flush(&r);
	close(pfd[0]);
	if (timed_out) {
		out("MADVX-INIT %s timed out after %d s\n", name, timeout_s);
		*rc = 124;
		return "FAIL";
	}
	if (WIFSIGNALED(status)) {
		*rc = 128 + WTERMSIG(status);
		return "FAIL";
	}
	*rc = WEXITSTATUS(status);
	if (*rc == 0)
		return "PASS";
	if (*rc == skip_rc)
		return "SKIP";
	return "FAIL";
}

static int run_list(const char *path, const char *only, const char *skip)
{
	char line[8192];
	int count = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *field[7], *save, *argv[MAX_ARGS + 1], *tok;
		const char *verdict;
		int nf = 0, argc = 0, rc;
		double t0;

		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		for (tok = strtok_r(line, "\t", &save); tok && nf < 7;
		     tok = strtok_r(NULL, "\t", &save))
			field[nf++] = tok;
		if (nf < 7) {
			out("MADVX-INIT bad line in %s\n", path);
			continue;
		}
		if (only && !match_list(only, field[0], field[1]))
			continue;
		if (skip && match_list(skip, field[0], field[1]))
			continue;
		for (tok = strtok_r(field[6], " ", &save); tok && argc < MAX_ARGS;
		     tok = strtok_r(NULL, " ", &save))
			argv[argc++] = tok;
		argv[argc] = NULL;
		out("MADVX-START %s/%s\n", field[0], field[1]);
		t0 = now();
		verdict = run_one(field[1], atoi(field[2]), atoi(field[3]), field[4],
				  field[5], argv, &rc);
		out("MADVX-RESULT %s/%s %s %d %.1f\n", field[0], field[1], verdict, rc,
		    now() - t0);
		count++;
	}
	fclose(f);
	return count;
}

static void dump_dmesg(void)
{
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf;

	if (len <= 0)
		len = 1 << 20;
	buf = malloc(len);
	if (!buf)
		return;
	len = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
	out("MADVX-DMESG-BEGIN\n");
	if (len > 0) {
		fwrite(buf, 1, len, stdout);
		if (buf[len - 1] != '\n')
			fputc('\n', stdout);
	}
	out("MADVX-DMESG-END\n");
	free(buf);
}

int main(void)
{
	char only[CMDLINE_MAX], skip[CMDLINE_MAX], shell[8];
	const char *o, *s;
	struct utsname u;
	int fd, n;

	mount_fs("proc", "/proc", "proc", NULL);
	mount_fs("sysfs", "/sys", "sysfs", NULL);
	mount_fs("devtmpfs", "/dev", "devtmpfs", NULL);
	fd = open("/dev/console", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	mount_fs("tracefs", "/sys/kernel/tracing", "tracefs", NULL);
	mount_fs("debugfs", "/sys/kernel/debug", "debugfs", NULL);
	mount_fs("tmpfs", "/tmp", "tmpfs", "mode=1777");
	mount_fs("tmpfs", "/run", "tmpfs", "mode=755");
	mount_fs("tmpfs", "/dev/shm", "tmpfs", "mode=1777");
	mount_fs("cgroup2", "/sys/fs/cgroup", "cgroup2", NULL);
	fd = open("/proc/cmdline", O_RDONLY);
	if (fd >= 0) {
		n = read(fd, cmdline, sizeof(cmdline) - 1);
		cmdline[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	setenv("PATH", "/madvx/bin:/bin:/sbin:/usr/bin", 1);
	setenv("HOME", "/tmp", 1);
	setenv("TMPDIR", "/tmp", 1);
	setenv("MADVX_IN_TEST_KERNEL", "1", 1);
	uname(&u);
	out("MADVX-BOOT %s %s cpus=%ld\n", u.release, u.version, sysconf(_SC_NPROCESSORS_ONLN));
	setup_zram();
	pin_tracepoints();
	if (cmdline_opt("madvx.shell", shell, sizeof(shell)) && shell[0] == '1') {
		pid_t pid = fork();

		if (!pid) {
			setsid();
			execl("/bin/sh", "sh", NULL);
			_exit(127);
		}
		waitpid(pid, NULL, 0);
		goto end;
	}
	o = cmdline_opt("madvx.only", only, sizeof(only));
	s = cmdline_opt("madvx.skip", skip, sizeof(skip));
	n = run_list("/madvx/tests.list", o, s);
	n += run_list("/madvx/extra.list", o, s);
	out("MADVX-COUNT %d\n", n);
end:
	sync();
	dump_dmesg();
	out("MADVX-DONE\n");
	reboot(RB_POWER_OFF);
	return 0;
}
