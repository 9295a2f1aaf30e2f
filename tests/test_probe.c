// SPDX-License-Identifier: MIT
/*
 * The probe against ground truth: every feature it reports present must
 * really work when issued by hand, every feature it reports absent must
 * really fail, and MADVX_DISABLE must turn features off and keep them unused.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <sys/utsname.h>

#include "harness.h"
#include "bootcache.h"
#include "probe.h"
#include "sys.h"
#ifdef MADVX_HAVE_LIBURING
#include <liburing.h>
#endif

/* process_madvise(DONTNEED) of one touched page through @pidfd: did it zap it? */
static bool pmadv_zaps(int pidfd)
{
	uint8_t *p = test_map_filled(1, 0x5a);
	struct iovec iov = { .iov_base = p, .iov_len = test_page() };
	long ret = syscall(__NR_process_madvise, pidfd, &iov, 1, MADV_DONTNEED, 0);
	bool zapped = ret == (long)test_page() && test_page_zero(p);

	munmap(p, test_page());
	return zapped;
}

START_TEST(process_madvise_matches_kernel)
{
	int fd = syscall(__NR_pidfd_open, getpid(), 0);
	bool works = fd >= 0 && pmadv_zaps(fd);

	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_PROCESS_MADVISE) &&
			 madvx_advice_supported(MADV_DONTNEED) == 1, works);
	if (fd >= 0)
		close(fd);
}
END_TEST

START_TEST(pidfd_self_matches_kernel)
{
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_PIDFD_SELF),
			 pmadv_zaps(PIDFD_SELF_THREAD));
}
END_TEST

/* Split one mapping into three VMAs; PROCMAP_QUERY must see the middle one. */
START_TEST(procmap_query_matches_kernel)
{
	size_t pg = test_page();
	uint8_t *p = test_map_filled(3, 1);
	struct procmap_query q = { .size = sizeof(q), .query_addr = (uintptr_t)p + pg };
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	bool works;

	ck_assert_int_eq(mprotect(p + pg, pg, PROT_READ), 0);
	works = ioctl(fd, PROCMAP_QUERY, &q) == 0 &&
		q.vma_start == (uintptr_t)p + pg && q.vma_end == (uintptr_t)p + 2 * pg;
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_PROCMAP_QUERY), works);
	close(fd);
	munmap(p, 3 * pg);
}
END_TEST

START_TEST(io_uring_madvise_matches_kernel)
{
#ifdef MADVX_HAVE_LIBURING
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	uint8_t *p = test_map_filled(1, 0x33);
	bool works = false;

	if (io_uring_queue_init(2, &ring, 0) == 0) {
		io_uring_prep_madvise(io_uring_get_sqe(&ring), p, test_page(),
				      MADV_DONTNEED);
		if (io_uring_submit_and_wait(&ring, 1) == 1 &&
		    io_uring_peek_cqe(&ring, &cqe) == 0) {
			works = cqe->res == 0 && test_page_zero(p);
			io_uring_cqe_seen(&ring, cqe);
		}
		io_uring_queue_exit(&ring);
	}
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_IO_URING_MADVISE), works);
	munmap(p, test_page());
#else
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_IO_URING_BUILT), 0);
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_IO_URING_MADVISE), 0);
#endif
}
END_TEST

/* Move one page with UFFDIO_MOVE by hand: src emptied, dst holds the data. */
static bool uffd_move_works(void)
{
	size_t pg = test_page();
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_MOVE };
	uint8_t *src = test_map_filled(1, 0x77);
	uint8_t *dst = mmap(NULL, pg, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)dst, .len = pg },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	struct uffdio_move mv = { .dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = pg };
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	bool works = false;

	if (fd < 0)
		fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd >= 0 && ioctl(fd, UFFDIO_API, &api) == 0 &&
	    ioctl(fd, UFFDIO_REGISTER, &reg) == 0 &&
	    ioctl(fd, UFFDIO_MOVE, &mv) == 0)
		works = mv.move == (long)pg && dst[0] == 0x77 && dst[pg - 1] == 0x77 &&
			test_resident(src) == 0;
	if (fd >= 0)
		close(fd);
	munmap(src, pg);
	munmap(dst, pg);
	return works;
}

START_TEST(uffd_move_matches_kernel)
{
	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT_UFFD_MOVE), uffd_move_works());
}
END_TEST

static void check_all_off(void)
{
	static const enum madvx_feature off[] = {
		MADVX_FEAT_PROCESS_MADVISE, MADVX_FEAT_PIDFD_SELF,
		MADVX_FEAT_PROCMAP_QUERY, MADVX_FEAT_IO_URING,
		MADVX_FEAT_IO_URING_MADVISE, MADVX_FEAT_IO_URING_MADVISE64,
		MADVX_FEAT_UFFD, MADVX_FEAT_UFFD_MOVE,
	};
	struct madvx_kernel_info ki = { .size = sizeof(ki) };

	for (size_t i = 0; i < ARRAY_SIZE(off); i++) {
		if (madvx_feature_supported(off[i]) != 0 ||
		    madvx_feature_disabled(off[i]) != 1)
			_exit(10 + (int)i);
	}
	if (madvx_advice_supported(MADV_DONTNEED) != 0)
		_exit(30);
	if (madvx_kernel_info_get(&ki) || (ki.features & ki.disabled) || ki.uffd_features)
		_exit(31);
	/* Not used: without PIDFD_SELF the library must hand out a real pidfd. */
	if (__madvx_self_pidfd() < 0 && madvx_feature_supported(MADVX_FEAT_PIDFD_OPEN))
		_exit(32);
}

START_TEST(disable_turns_features_off)
{
	test_in_child("process_madvise,pidfd_self,procmap_query,io_uring,uffd",
			      check_all_off);
}
END_TEST

static void check_unknown_ignored(void)
{
	if (madvx_feature_disabled(MADVX_FEAT_PROCESS_MADVISE) != 0 ||
	    madvx_feature_disabled(MADVX_FEAT_UFFD) != 1)
		_exit(1);
}

START_TEST(disable_ignores_unknown_names)
{
	test_in_child("no_such_feature, uffd", check_unknown_ignored);
}
END_TEST

/*
 * A pidfd opened before fork() names the parent. After fork the library
 * must hand the child a pidfd of its own: process_madvise(DONTNEED) through
 * it must zap the CHILD's copy of a page and leave the parent's alone.
 */
static uint8_t *fork_page;

static void child_zaps_own_page(void)
{
	struct iovec iov = { .iov_base = fork_page, .iov_len = test_page() };
	int fd = __madvx_self_pidfd();

	fork_page[0] = 0x11;	/* COW: the child's own copy now */
	if (fd < 0 || fd == PIDFD_SELF_THREAD)
		_exit(40);
	if (__madvx_sys_process_madvise(fd, &iov, 1, MADV_DONTNEED) != (long)test_page())
		_exit(41);
	if (!test_page_zero(fork_page))
		_exit(42);
}

static void parent_pidfd_then_fork(void)
{
	int fd;

	/*
	 * The child sees through the pidfd with a DONTNEED that zaps a page.
	 * Asked here, in the process whose MADVX_DISABLE has pidfd_self: the
	 * probe runs once per process.
	 */
	if (!test_self_pmadv(MADV_DONTNEED, "pidfd_is_reopened_after_fork"))
		_exit(0);
	fd = __madvx_self_pidfd();

	if (fd < 0)
		_exit(madvx_feature_supported(MADVX_FEAT_PIDFD_OPEN) ? 50 : 0);
	fork_page = test_map_filled(1, 0x99);
	test_in_child("pidfd_self", child_zaps_own_page);
	if (fork_page[0] != 0x99 || fork_page[test_page() - 1] != 0x99)
		_exit(51);
}

START_TEST(pidfd_is_reopened_after_fork)
{
	test_in_child("pidfd_self", parent_pidfd_then_fork);
}
END_TEST

START_TEST(api_rejects_bad_input)
{
	struct madvx_kernel_info ki;

	ck_assert_int_eq(madvx_feature_supported(MADVX_FEAT__COUNT), -EINVAL);
	ck_assert_int_eq(madvx_feature_supported((enum madvx_feature)-1), -EINVAL);
	ck_assert_ptr_null(madvx_feature_name(MADVX_FEAT__COUNT));
	ck_assert_int_eq(madvx_advice_supported(12345), -EINVAL);
	ck_assert_ptr_null(madvx_advice_name(12345));
	ck_assert_int_eq(madvx_advice_lock(12345), MADVX_LOCK_UNKNOWN);
	ck_assert_int_eq(madvx_kernel_info_get(NULL), -EINVAL);
	ki.size = 4;
	ck_assert_int_eq(madvx_kernel_info_get(&ki), -EINVAL);
}
END_TEST

/*
 * per_vma_cold_pageout and per_vma_uffd come from MADVX_ASSUME or from the
 * per-boot measurement cache, never from a probe of debug counters: each
 * case runs the probe afresh in a child with the given cache and list.
 */
static char cache_path[64];

/* Write a cache file with key line @key (NULL: this boot's) and @body, @mode. */
static void write_cache(const char *key, const char *body, mode_t mode)
{
	char boot[96];
	FILE *f;

	if (!key) {
		ck_assert_int_eq(__madvx_boot_key(boot, sizeof(boot)), 0);
		key = boot;
	}
	snprintf(cache_path, sizeof(cache_path), "/tmp/madvx-test-probe-cache.%d", (int)getpid());
	f = fopen(cache_path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# test\n%s\n%s", key, body);
	fclose(f);
	ck_assert_int_eq(chmod(cache_path, mode), 0);
}

/* In a fresh child: per_vma_cold_pageout must be @want, from @src (assumed/measured/0). */
static void expect_cold(const char *cache, const char *assume, bool want, int src)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct madvx_kernel_info ki = { .size = sizeof(ki) };
		uint64_t bit = 1ULL << MADVX_FEAT_PER_VMA_COLD_PAGEOUT;

		setenv("MADVX_PROBE_CACHE", cache, 1);
		if (assume)
			setenv("MADVX_ASSUME", assume, 1);
		else
			unsetenv("MADVX_ASSUME");
		unsetenv("MADVX_DISABLE");
		if (madvx_kernel_info_get(&ki))
			_exit(10);
		/* Without per-VMA locks at all (e.g. a UP kernel) the answer is moot. */
		want = want && madvx_feature_supported(MADVX_FEAT_PER_VMA_MADVISE) > 0;
		if ((madvx_feature_supported(MADVX_FEAT_PER_VMA_COLD_PAGEOUT) > 0) != want)
			_exit(11);
		if ((madvx_advice_lock(MADV_COLD) == MADVX_LOCK_PER_VMA) != want)
			_exit(12);
		if (!!(ki.assumed & bit) != (src == 'a') || !!(ki.measured & bit) != (src == 'm'))
			_exit(13);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "cache %s, MADVX_ASSUME=%s: exit status 0x%x", cache,
		      assume ? assume : "(unset)", status);
}

START_TEST(plan_features_need_measurement_or_assumption)
{
	/* Neither: off, whatever this kernel does and whatever it counts. */
	expect_cold("/nonexistent/madvx-cache", NULL, false, 0);
	expect_cold("/nonexistent/madvx-cache", "per_vma_cold_pageout", true, 'a');
	/* Other names in MADVX_ASSUME are ignored. */
	expect_cold("/nonexistent/madvx-cache", "process_madvise,uffd", false, 0);
}
END_TEST

START_TEST(boot_cache_is_read_for_this_boot_only)
{
	write_cache(NULL, "per_vma_cold_pageout 1\nper_vma_uffd 0\n", 0644);
	expect_cold(cache_path, NULL, true, 'm');
	write_cache(NULL, "per_vma_cold_pageout 0\n", 0644);
	expect_cold(cache_path, NULL, false, 'm');
	/* MADVX_ASSUME wins over a measurement. */
	expect_cold(cache_path, "per_vma_cold_pageout", true, 'a');
	/* Another boot's cache, or one anybody may write, is ignored. */
	write_cache("boot_id 00000000-0000-0000-0000-000000000000", "per_vma_cold_pageout 1\n", 0644);
	expect_cold(cache_path, NULL, false, 0);
	write_cache("btime 1", "per_vma_cold_pageout 1\n", 0644);
	expect_cold(cache_path, NULL, false, 0);
	write_cache(NULL, "per_vma_cold_pageout 1\n", 0666);
	expect_cold(cache_path, NULL, false, 0);
	unlink(cache_path);
}
END_TEST

/*
 * The cache is read on the first need of what it answers, not by the core:
 * a DONTNEED flush never opens it (the file appears only after one), the
 * first COLD hint does where the answer matters (the file goes away after
 * it, and its answer stays).
 */
static int cache_read_lazily_child(void)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	uint64_t bit = 1ULL << MADVX_FEAT_PER_VMA_COLD_PAGEOUT;
	uint8_t *p = test_map_filled(2, 0x5a);
	struct madvx_batch *b;
	bool pervma;

	/* write_cache()'s path for this process, empty for now. */
	snprintf(cache_path, sizeof(cache_path), "/tmp/madvx-test-probe-cache.%d", (int)getpid());
	unlink(cache_path);
	setenv("MADVX_PROBE_CACHE", cache_path, 1);
	unsetenv("MADVX_ASSUME");
	unsetenv("MADVX_DISABLE");
	if (madvx_batch_create(NULL, &b) || madvx_batch_add(b, p, test_page(), MADV_DONTNEED) < 0 ||
	    madvx_batch_flush(b) || !test_page_zero(p))
		return 10;
	write_cache(NULL, "per_vma_cold_pageout 1\n", 0644);
	if (madvx_batch_add(b, p + test_page(), test_page(), MADV_COLD) < 0 || madvx_batch_flush(b))
		return 11;
	unlink(cache_path);
	pervma = madvx_feature_supported(MADVX_FEAT_PER_VMA_MADVISE) > 0;
	/* Without per-VMA madvise the COLD hint had no need of it: read now, gone. */
	if (madvx_kernel_info_get(&ki) || !!(ki.measured & bit) != pervma)
		return 12;
	if ((madvx_advice_lock(MADV_COLD) == MADVX_LOCK_PER_VMA) != pervma)
		return 13;
	madvx_batch_free(b);
	munmap(p, 2 * test_page());
	return 0;
}

START_TEST(boot_cache_is_read_on_first_need)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(cache_read_lazily_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	snprintf(cache_path, sizeof(cache_path), "/tmp/madvx-test-probe-cache.%d", (int)pid);
	unlink(cache_path);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status 0x%x", status);
}
END_TEST

/* An old caller's smaller struct: fields past its size are left untouched. */
START_TEST(kernel_info_respects_size)
{
	struct madvx_kernel_info ki;
	size_t small = offsetof(struct madvx_kernel_info, features);

	memset(&ki, 0xab, sizeof(ki));
	ki.size = small;
	ck_assert_int_eq(madvx_kernel_info_get(&ki), 0);
	ck_assert_ptr_nonnull(memchr(ki.release, 0, sizeof(ki.release)));
	ck_assert_int_ne(ki.version, 0xabababab);
	for (size_t i = small; i < sizeof(ki); i++)
		ck_assert_int_eq(((uint8_t *)&ki)[i], 0xab);
}
END_TEST

/* The version and release the probe reads from uname(), against sscanf's. */
START_TEST(kernel_info_version_is_uname)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	unsigned int a = 0, b = 0, c = 0;
	struct utsname u;

	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(madvx_kernel_info_get(&ki), 0);
	ck_assert_int_ge(sscanf(u.release, "%u.%u.%u", &a, &b, &c), 2);
	ck_assert_uint_eq(ki.version, MADVX_KVER(a, b, c > 255 ? 255 : c));
	ck_assert_int_eq(strncmp(ki.release, u.release, sizeof(ki.release) - 1), 0);
}
END_TEST

/*
 * The lock table by version and kernel: 7.3 (and 6.17+) put DONTNEED on the
 * per-VMA path where the kernel has per-VMA locks (SMP; an architecture
 * with them): never on a uniprocessor kernel.
 */
START_TEST(lock_table_follows_version)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	bool pervma = madvx_feature_supported(MADVX_FEAT_PER_VMA_MADVISE) > 0;
	enum madvx_lock want;
	struct utsname u;

	ck_assert_int_eq(madvx_kernel_info_get(&ki), 0);
	ck_assert_int_eq(uname(&u), 0);
	if (pervma) {
		ck_assert_uint_ge(ki.version, MADVX_KVER(6, 17, 0));
		ck_assert_msg(strstr(u.version, "SMP"), "per_vma_madvise on '%s'", u.version);
	} else if (ki.version >= MADVX_KVER(6, 17, 0) && !strcmp(u.machine, "x86_64") &&
		   strstr(u.version, " SMP ") && !getenv("MADVX_DISABLE")) {
		ck_abort_msg("no per_vma_madvise on SMP x86_64 %s", ki.release);
	}
	want = pervma ? MADVX_LOCK_PER_VMA : MADVX_LOCK_MMAP_READ;
	ck_assert_int_eq(madvx_advice_lock(MADV_DONTNEED), want);
	/* COLD/PAGEOUT: per-VMA only with the kernel/patches series. */
	ck_assert_int_eq(madvx_advice_lock(MADV_COLD),
			 madvx_feature_supported(MADVX_FEAT_PER_VMA_COLD_PAGEOUT) > 0 ?
			 MADVX_LOCK_PER_VMA : MADVX_LOCK_MMAP_READ);
	ck_assert_int_eq(madvx_advice_lock(MADV_HUGEPAGE), MADVX_LOCK_MMAP_WRITE);
	ck_assert_str_eq(madvx_lock_name(MADVX_LOCK_PER_VMA), "per-vma");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("probe");

	tcase_add_test(tc, process_madvise_matches_kernel);
	tcase_add_test(tc, pidfd_self_matches_kernel);
	tcase_add_test(tc, procmap_query_matches_kernel);
	tcase_add_test(tc, io_uring_madvise_matches_kernel);
	tcase_add_test(tc, uffd_move_matches_kernel);
	tcase_add_test(tc, disable_turns_features_off);
	tcase_add_test(tc, disable_ignores_unknown_names);
	tcase_add_test(tc, pidfd_is_reopened_after_fork);
	tcase_add_test(tc, api_rejects_bad_input);
	tcase_add_test(tc, kernel_info_respects_size);
	tcase_add_test(tc, kernel_info_version_is_uname);
	tcase_add_test(tc, lock_table_follows_version);
	tcase_add_test(tc, plan_features_need_measurement_or_assumption);
	tcase_add_test(tc, boot_cache_is_read_for_this_boot_only);
	tcase_add_test(tc, boot_cache_is_read_on_first_need);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
