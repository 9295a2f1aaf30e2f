// SPDX-License-Identifier: MIT
/*
 * Batches against another process (madvx_batch_opts.target): only the
 * advices the kernel takes remotely, planned at the TARGET's VMAs, applied
 * through its pidfd only, with the same exact per-hint results.
 *
 * The child maps a file of its own at the address where the parent has
 * another file mapped: PAGEOUT of that address must evict the child's
 * clean file pages (mincore in the child) and leave the parent's resident.
 * Needs CAP_SYS_NICE (remote process_madvise) and a disk file system for
 * the build directory (tmpfs pages cannot be paged out without swap).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include <madvx.h>

#include "harness.h"

#define NP 8		/* pages: 0-2 file, 3 hole, 4-7 file */

static size_t pg;

struct child {
	pid_t pid;
	int cmd;	/* parent -> child */
	int rep;	/* child -> parent */
};

static int make_file(const char *name)
{
	int fd = open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	uint8_t buf[4096];

	ck_assert_int_ge(fd, 0);
	unlink(name);
	for (int i = 0; i < NP; i++) {
		memset(buf, 0x40 + i, sizeof(buf));
		ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	}
	ck_assert_int_eq(fsync(fd), 0);
	return fd;
}

/* Map @fd over [p, p + NP pages) with a hole at page 3, and read every page in. */
static void map_layout(uint8_t *p, int fd)
{
	volatile uint8_t sum = 0;

	ck_assert_ptr_eq(mmap(p, NP * pg, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0), p);
	ck_assert_int_eq(munmap(p + 3 * pg, pg), 0);
	for (int i = 0; i < NP; i++)
		if (i != 3)
			sum += p[i * pg];
	(void)sum;
}

static uint32_t resident_mask(const uint8_t *p)
{
	uint32_t m = 0;

	for (int i = 0; i < NP; i++)
		if (i != 3 && test_resident(p + i * pg) == 1)
			m |= 1U << i;
	return m;
}

static void child_main(uint8_t *p, int cmd, int rep)
{
	int fd = make_file("target-child.bin");
	uint32_t m;
	char c;

	map_layout(p, fd);
	m = resident_mask(p);
	if (write(rep, &m, sizeof(m)) != sizeof(m))
		_exit(1);
	/* Each command byte: report residency again. */
	while (read(cmd, &c, 1) == 1) {
		m = resident_mask(p);
		if (write(rep, &m, sizeof(m)) != sizeof(m))
			_exit(1);
	}
	_exit(0);
}

static void start_child(struct child *c, uint8_t *p)
{
	int to[2], from[2];
	uint32_t m;

	ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
	c->pid = fork();
	ck_assert_int_ge(c->pid, 0);
	if (!c->pid) {
		close(to[1]);
		close(from[0]);
		child_main(p, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	c->cmd = to[1];
	c->rep = from[0];
	ck_assert_int_eq(read(c->rep, &m, sizeof(m)), (ssize_t)sizeof(m));
	ck_assert_uint_eq(m, 0xf7);	/* pages 0-2, 4-7 in */
}

static uint32_t child_resident(struct child *c)
{
	uint32_t m = 0;

	ck_assert_int_eq(write(c->cmd, "r", 1), 1);
	ck_assert_int_eq(read(c->rep, &m, sizeof(m)), (ssize_t)sizeof(m));
	return m;
}

static void stop_child(struct child *c)
{
	int st;

	close(c->cmd);
	ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(c->rep);
}

START_TEST(target_batch_is_exact_and_stays_in_the_target)
{
	uint8_t *p = mmap(NULL, NP * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int pfd = make_file("target-parent.bin");
	struct madvx_batch_opts o = { .size = sizeof(o) };
	const struct madvx_hint *r;
	struct madvx_target *t;
	struct madvx_batch *b;
	struct child c;
	uint32_t n;
	int ret;

	ck_assert_ptr_ne(p, MAP_FAILED);
	map_layout(p, pfd);
	start_child(&c, p);

	ret = madvx_target_open(c.pid, 0, &t);
	ck_assert_int_eq(ret, 0);
	o.target = t;
	o.flags = MADVX_BATCH_NO_VECTOR;
	ck_assert_int_eq(madvx_batch_create(&o, &b), -EINVAL);
	o.flags = 0;
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);

	/* Not allowed remotely: refused at add, like the kernel would. */
	ck_assert_int_eq(madvx_batch_add(b, p, pg, MADV_DONTNEED), -EINVAL);
	ck_assert_int_eq(madvx_batch_add(b, p, pg, MADV_FREE), -EINVAL);
	/* Pages 0-1 alone; 1-5 across the hole; far above the address space. */
	ck_assert_int_eq(madvx_batch_add(b, p, 2 * pg, MADV_PAGEOUT), 0);
	ck_assert_int_eq(madvx_batch_add(b, p + pg, 5 * pg, MADV_PAGEOUT), 1);
	ck_assert_int_eq(madvx_batch_add(b, (void *)(1UL << 57), pg, MADV_PAGEOUT), 2);
	ck_assert_int_eq(madvx_batch_flush(b), -ENOMEM);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(r[0].err, 0);
	ck_assert_uint_eq(r[0].done, 2 * pg);
	ck_assert_int_eq(r[1].err, -ENOMEM);
	ck_assert_uint_eq(r[1].done, 4 * pg);	/* pages 1, 2, 4, 5 */
	ck_assert_int_eq(r[2].err, -ENOMEM);
	ck_assert_uint_eq(r[2].done, 0);

	/* The child's pages 0-2 and 4-5 went out; 6-7 stayed; the parent's all stayed. */
	ck_assert_uint_eq(child_resident(&c), 0xc0);
	ck_assert_uint_eq(resident_mask(p), 0xf7);

	madvx_batch_free(b);
	stop_child(&c);
	/* The target exited: its hints fail with -ESRCH, nothing else is touched. */
	ck_assert_int_eq(madvx_batch_create(&o, &b), 0);
	ck_assert_int_eq(madvx_batch_add(b, p, 3 * pg, MADV_PAGEOUT), 0);
	ret = madvx_batch_flush(b);
	ck_assert_msg(ret == -ESRCH, "flush after exit: %d", ret);
	r = madvx_batch_results(b, &n);
	ck_assert_uint_eq(r[0].done, 0);
	ck_assert_uint_eq(resident_mask(p), 0xf7);
	madvx_batch_free(b);
	madvx_target_free(t);
	munmap(p, NP * pg);
	close(pfd);
}
END_TEST

/* Decided before the suite runs: a skip inside a forked check test is an error. */
static bool may_advise_a_child(void)
{
	struct madvx_target *t;
	pid_t pid = fork();
	int ret, st;

	if (pid < 0)
		return false;
	if (!pid) {
		pause();
		_exit(0);
	}
	ret = madvx_target_open(pid, 0, &t);
	if (!ret) {
		ret = madvx_target_check(t, MADV_PAGEOUT);
		madvx_target_free(t);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return ret == 0;
}

int main(void)
{
	Suite *s = suite_create("batch_target");
	TCase *tc = tcase_create("target");
	struct statfs fs;

	pg = test_page();
	if (statfs(".", &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC))
		test_skip("the working directory is on tmpfs/ramfs: its pages cannot be paged out");
	if (madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) != 1)
		test_skip("process_madvise() is not available");
	if (!may_advise_a_child())
		test_skip("no permission to advise another process (needs CAP_SYS_NICE and ptrace access)");
	tcase_add_test(tc, target_batch_is_exact_and_stays_in_the_target);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
