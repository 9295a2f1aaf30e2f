// SPDX-License-Identifier: MIT
/*
 * userfaultfd events and fault handling: delivery of fork, remap, remove and
 * unmap events; the -EAGAIN path driven by a real concurrent mremap (the
 * event must reach the handler after the retry drained it); unprivileged
 * open; a fault storm of mutator threads against handler threads, bounded by
 * alarm(): every page correct, none lost, no hang.
 */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "harness.h"
#include "util.h"

static size_t pg;

static struct madvx_uffd *open_uffd(uint64_t features)
{
	struct madvx_uffd_opts o = { .size = sizeof(o), .features = features };
	struct madvx_uffd *u = NULL;

	ck_assert_int_eq(madvx_uffd_open(&o, &u), 0);
	return u;
}

static uint8_t *map_registered(struct madvx_uffd *u, size_t pages)
{
	uint8_t *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(madvx_uffd_register(u, (uintptr_t)p, pages * pg,
					     MADVX_UFFD_MISSING, NULL), 0);
	return p;
}

/* The mm operations that raise events block until the event is read: run them on a thread. */
struct mm_op {
	pthread_t t;
	uint8_t *addr;
	uint8_t *to;
	size_t len;
	int kind;	/* 0 mremap, 1 DONTNEED, 2 munmap, 3 fork */
	intptr_t ret;
};

static void *mm_op_thread(void *arg)
{
	struct mm_op *op = arg;
	pid_t pid;

	switch (op->kind) {
	case 0:
		op->ret = (intptr_t)mremap(op->addr, op->len, op->len,
					   MREMAP_MAYMOVE | MREMAP_FIXED, op->to);
		break;
	case 1:
		op->ret = madvise(op->addr, op->len, MADV_DONTNEED);
		break;
	case 2:
		op->ret = munmap(op->addr, op->len);
		break;
	default:
		pid = fork();
		if (pid == 0)
			_exit(0);
		op->ret = pid;
		if (pid > 0)
			waitpid(pid, NULL, 0);
		break;
	}
	return NULL;
}

static void mm_op_start(struct mm_op *op)
{
	ck_assert_int_eq(pthread_create(&op->t, NULL, mm_op_thread, op), 0);
}

static struct madvx_uffd_event next_event(struct madvx_uffd *u)
{
	struct madvx_uffd_event ev = { 0 };

	ck_assert_int_eq(madvx_uffd_read_events(u, &ev, 1, 5000), 1);
	return ev;
}

/*
 * One uffd per event kind: moving a registered VMA with mremap() also
 * unmaps its old range, which is an UNMAP event of its own when enabled.
 */
START_TEST(event_remap)
{
	struct madvx_uffd *u = open_uffd(UFFD_FEATURE_EVENT_REMAP);
	uint8_t *a = map_registered(u, 4);
	uint8_t *to = mmap(NULL, 4 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct mm_op op = { .addr = a, .to = to, .len = 4 * pg, .kind = 0 };
	struct madvx_uffd_event ev;

	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)a, 4 * pg, 0, NULL), 0);
	mm_op_start(&op);
	ev = next_event(u);
	pthread_join(op.t, NULL);
	ck_assert_ptr_eq((void *)op.ret, to);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_REMAP);
	ck_assert_uint_eq(ev.arg.remap.from, (uintptr_t)a);
	ck_assert_uint_eq(ev.arg.remap.to, (uintptr_t)to);
	ck_assert_uint_eq(ev.arg.remap.len, 4 * pg);
	ck_assert_int_eq(madvx_uffd_read_events(u, &ev, 1, 0), 0);
	/* The registration moved along: the new range still faults to us. */
	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)to, pg, MADVX_UFFD_EEXIST_STOP,
					     NULL), -EEXIST);
	madvx_uffd_free(u);
	munmap(to, 4 * pg);
}
END_TEST

START_TEST(event_remove)
{
	struct madvx_uffd *u = open_uffd(UFFD_FEATURE_EVENT_REMOVE);
	uint8_t *a = map_registered(u, 4);
	struct mm_op op = { .addr = a + pg, .len = pg, .kind = 1 };
	struct madvx_uffd_event ev;

	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)a, 4 * pg, 0, NULL), 0);
	mm_op_start(&op);
	ev = next_event(u);
	pthread_join(op.t, NULL);
	ck_assert_int_eq(op.ret, 0);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_REMOVE);
	ck_assert_uint_eq(ev.arg.remove.start, (uintptr_t)a + pg);
	ck_assert_uint_eq(ev.arg.remove.end, (uintptr_t)a + 2 * pg);
	ck_assert_int_eq(test_resident(a + pg), 0);	/* and the page is gone */
	ck_assert_int_eq(test_resident(a), 1);
	madvx_uffd_free(u);
	munmap(a, 4 * pg);
}
END_TEST

START_TEST(event_unmap)
{
	struct madvx_uffd *u = open_uffd(UFFD_FEATURE_EVENT_UNMAP);
	uint8_t *a = map_registered(u, 4);
	struct mm_op op = { .addr = a, .len = 4 * pg, .kind = 2 };
	struct madvx_uffd_event ev;

	mm_op_start(&op);
	ev = next_event(u);
	pthread_join(op.t, NULL);
	ck_assert_int_eq(op.ret, 0);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_UNMAP);
	ck_assert_uint_eq(ev.arg.remove.start, (uintptr_t)a);
	ck_assert_uint_eq(ev.arg.remove.end, (uintptr_t)a + 4 * pg);
	madvx_uffd_free(u);
}
END_TEST

/* Fork: the parent gets a new uffd for the child's mm, with the same registration. */
START_TEST(event_fork)
{
	struct madvx_uffd *u = open_uffd(UFFD_FEATURE_EVENT_FORK);
	uint8_t *a = map_registered(u, 2);
	struct mm_op op = { .kind = 3 };
	struct madvx_uffd_event ev;

	mm_op_start(&op);
	ev = next_event(u);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_FORK);
	ck_assert_int_ge(ev.arg.fork.fd, 0);
	ck_assert_int_ne(ev.arg.fork.fd, madvx_uffd_fd(u));
	close(ev.arg.fork.fd);
	pthread_join(op.t, NULL);
	ck_assert_int_gt(op.ret, 0);
	madvx_uffd_free(u);
	munmap(a, 2 * pg);
}
END_TEST

/*
 * EAGAIN from a real concurrent event: while a thread's mremap() of another
 * registered area waits for its REMAP event to be read, the kernel refuses
 * COPY with -EAGAIN (mmap_changing). The op must say so with its progress;
 * madvx_uffd_drain() + retry (MADVX_UFFD_RETRY) must then succeed, and the
 * REMAP event must still reach the handler afterwards.
 */
START_TEST(eagain_while_remap_pending)
{
	struct madvx_uffd *u = open_uffd(UFFD_FEATURE_EVENT_REMAP);
	uint8_t *dst = map_registered(u, 4), *moving = map_registered(u, 2);
	uint8_t *src = test_map_filled(4, 0x44);
	uint8_t *to = mmap(NULL, 2 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct mm_op op = { .addr = moving, .to = to, .len = 2 * pg, .kind = 0 };
	struct pollfd p = { .fd = madvx_uffd_fd(u), .events = POLLIN };
	struct madvx_uffd_stats st = { .size = sizeof(st) };
	struct madvx_uffd_event ev;
	uint64_t done = 99;

	ck_assert_int_eq(madvx_uffd_zeropage(u, (uintptr_t)moving, 2 * pg, 0, NULL), 0);
	mm_op_start(&op);
	ck_assert_int_eq(poll(&p, 1, 5000), 1);	/* the REMAP event is pending */

	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src, 4 * pg, 0, &done),
			 -EAGAIN);
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(test_resident(dst), 0);
	ck_assert_int_eq(madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src, 4 * pg,
					 MADVX_UFFD_RETRY, &done), 0);
	ck_assert_uint_eq(done, 4 * pg);
	ck_assert_int_eq(dst[3 * pg], 0x47);
	pthread_join(op.t, NULL);
	ck_assert_ptr_eq((void *)op.ret, to);

	ck_assert_uint_eq(madvx_uffd_pending(u), 1);
	p.fd = madvx_uffd_poll_fd(u);
	ck_assert_int_eq(poll(&p, 1, 0), 1);	/* queued events make the poll fd readable */
	ev = next_event(u);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_REMAP);
	ck_assert_uint_eq(ev.arg.remap.from, (uintptr_t)moving);
	ck_assert_uint_eq(madvx_uffd_pending(u), 0);
	ck_assert_int_eq(poll(&p, 1, 0), 0);
	ck_assert_int_eq(madvx_uffd_stats_get(u, &st), 0);
	ck_assert_uint_ge(st.eagain, 1);
	madvx_uffd_free(u);
	munmap(dst, 4 * pg);
	munmap(src, 4 * pg);
	munmap(to, 2 * pg);
}
END_TEST

/*
 * The same with fork as the concurrent event, through a move list. Until its
 * FORK event is read the forking thread holds malloc's locks (glibc takes
 * them around fork), so nothing between the fork and the drain may allocate:
 * not the library, and not libcheck's assertions either - results are kept
 * and checked after the fork is through.
 */
START_TEST(eagain_while_fork_pending)
{
	enum { N = 16 };
	struct madvx_uffd *u;
	uint8_t *dst, *src;
	struct madvx_uffd_item it[N];
	struct mm_op op = { .kind = 3 };
	struct pollfd p;
	struct madvx_uffd_event ev;
	int polled, first, second;
	uint64_t done_first = 0;
	int err_first = 0;

	if (madvx_uffd_missing_features(UFFD_FEATURE_MOVE)) {
		puts("SKIP part: no UFFD_FEATURE_MOVE");
		return;
	}
	u = open_uffd(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_MOVE);
	dst = map_registered(u, N);
	src = test_map_filled(N, 0);
	/* MOVE needs exclusive source pages: keep them out of the child. */
	ck_assert_int_eq(madvise(src, N * pg, MADV_DONTFORK), 0);
	for (size_t i = 0; i < N; i++)
		it[i] = (struct madvx_uffd_item){ .dst = (uintptr_t)dst + i * pg,
			.src = (uintptr_t)src + i * pg, .len = pg };
	p = (struct pollfd){ .fd = madvx_uffd_fd(u), .events = POLLIN };
	mm_op_start(&op);
	polled = poll(&p, 1, 5000);
	first = madvx_uffd_move_list(u, it, N, 0);
	for (size_t i = 0; i < N; i++) {
		done_first += it[i].done;
		if (it[i].err != -EAGAIN)
			err_first = it[i].err ? it[i].err : 1;
	}
	second = madvx_uffd_move_list(u, it, N, MADVX_UFFD_RETRY);
	pthread_join(op.t, NULL);

	ck_assert_int_eq(polled, 1);
	ck_assert_int_eq(first, -EAGAIN);
	ck_assert_uint_eq(done_first, 0);
	ck_assert_int_eq(err_first, 0);
	ck_assert_int_eq(second, 0);
	ck_assert_int_gt(op.ret, 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(dst[i * pg], (uint8_t)i);
	ev = next_event(u);
	ck_assert_uint_eq(ev.type, MADVX_UFFD_EVENT_FORK);
	close(ev.arg.fork.fd);
	madvx_uffd_free(u);
	munmap(dst, N * pg);
	munmap(src, N * pg);
}
END_TEST

/* As nobody: open must work (UFFD_USER_MODE_ONLY when the sysctl says 0) and resolve a copy. */
static int unprivileged_child(void)
{
	struct madvx_uffd *u = NULL;
	uint8_t *dst, *src;
	uint64_t done = 0;
	int ret;

	if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return 10;
	if (getuid() != 65534)
		return 11;
	ret = madvx_uffd_open(NULL, &u);
	if (ret) {
		printf("unprivileged open: %d\n", ret);
		return 12;
	}
	dst = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	src = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(src, 0x5e, pg);
	if (madvx_uffd_register(u, (uintptr_t)dst, pg, MADVX_UFFD_MISSING, NULL))
		return 13;
	if (madvx_uffd_copy(u, (uintptr_t)dst, (uintptr_t)src, pg, 0, &done) || dst[9] != 0x5e)
		return 14;
	ret = madvx_uffd_user_mode_only(u);
	madvx_uffd_free(u);
	if (ret == 1) {
		/*
		 * Only user-mode faults for us: insisting on kernel faults must
		 * fail, unless /dev/userfaultfd lets nobody in.
		 */
		struct madvx_uffd_opts o = { .size = sizeof(o),
					     .flags = MADVX_UFFD_KERNEL_FAULTS };
		int want = access("/dev/userfaultfd", R_OK | W_OK) ? -EPERM : 0;

		ret = madvx_uffd_open(&o, &u);
		if (ret != want)
			return 15;
		madvx_uffd_free(u);
		return 1;	/* worked, with USER_MODE_ONLY */
	}
	return 0;
}

START_TEST(unprivileged_open)
{
	struct madvx_kernel_info ki = { .size = sizeof(ki) };
	int status;
	pid_t pid;

	ck_assert_int_eq(madvx_kernel_info_get(&ki), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(unprivileged_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) <= 1, "status 0x%x", status);
	/* vm.unprivileged_userfaultfd=0 admits nobody only in user-mode-only. */
	if (ki.unprivileged_userfaultfd == 0)
		ck_assert_int_eq(WEXITSTATUS(status), 1);
	else if (ki.unprivileged_userfaultfd == 1)
		ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/* ---- fault storm ---- */

enum { STORM_PAGES = 2048, STORM_MUTATORS = 4, STORM_HANDLERS = 2 };

struct storm {
	struct madvx_uffd *u;
	uint8_t *area;
	atomic_uint faults;
	atomic_int bad;
};

static uint64_t page_word(const struct storm *s, size_t i)
{
	return 0x9e3779b97f4a7c15ULL * ((uintptr_t)s->area + i * pg);
}

/* Resolve a fault with the page's expected contents (odd pages: zeropage). */
static int storm_fault(struct madvx_uffd *u, const struct madvx_uffd_event *ev, void *arg)
{
	struct storm *s = arg;
	uint64_t addr = ev->arg.fault.addr & ~(uint64_t)(pg - 1);
	size_t i = (addr - (uintptr_t)s->area) / pg;
	uint64_t buf[512];

	atomic_fetch_add(&s->faults, 1);
	if (i & 1)
		return madvx_uffd_zeropage(u, addr, pg, MADVX_UFFD_RETRY, NULL);
	for (size_t k = 0; k < pg / 8 && k < 512; k++)
		buf[k] = page_word(s, i) + k;
	return madvx_uffd_copy(u, addr, (uintptr_t)buf, pg, MADVX_UFFD_RETRY, NULL);
}

static void *storm_handler(void *arg)
{
	struct storm *s = arg;
	struct madvx_uffd_handler h = { .size = sizeof(h), .fault = storm_fault, .arg = s,
					.batch = 16 };

	if (madvx_uffd_run(s->u, &h))
		atomic_fetch_add(&s->bad, 1);
	return NULL;
}

static void *storm_mutator(void *arg)
{
	struct storm *s = arg;
	unsigned int seed = (unsigned int)(uintptr_t)pthread_self();

	for (size_t n = 0; n < STORM_PAGES; n++) {
		size_t i = (size_t)rand_r(&seed) % STORM_PAGES;
		size_t k = (size_t)rand_r(&seed) % (pg / 8);
		uint64_t v = ((volatile uint64_t *)(s->area + i * pg))[k];
		uint64_t want = (i & 1) ? 0 : page_word(s, i) + k;

		if (v != want)
			atomic_fetch_add(&s->bad, 1);
	}
	/* Then every page once, in order: none may be lost. */
	for (size_t i = 0; i < STORM_PAGES; i++) {
		uint64_t v = ((volatile uint64_t *)(s->area + i * pg))[1];

		if (v != ((i & 1) ? 0 : page_word(s, i) + 1))
			atomic_fetch_add(&s->bad, 1);
	}
	return NULL;
}

START_TEST(fault_storm)
{
	struct storm s = { 0 };
	pthread_t h[STORM_HANDLERS], m[STORM_MUTATORS];
	struct madvx_uffd_stats st = { .size = sizeof(st) };
	struct madvx_uffd_opts o = { .size = sizeof(o) };

	alarm(60);	/* a lost fault hangs a mutator: fail instead */
	ck_assert_int_eq(madvx_uffd_open(&o, &s.u), 0);
	s.area = map_registered(s.u, STORM_PAGES);
	for (int i = 0; i < STORM_HANDLERS; i++)
		ck_assert_int_eq(pthread_create(&h[i], NULL, storm_handler, &s), 0);
	for (int i = 0; i < STORM_MUTATORS; i++)
		ck_assert_int_eq(pthread_create(&m[i], NULL, storm_mutator, &s), 0);
	for (int i = 0; i < STORM_MUTATORS; i++)
		pthread_join(m[i], NULL);
	ck_assert_int_eq(madvx_uffd_stop(s.u, 1), 0);
	for (int i = 0; i < STORM_HANDLERS; i++)
		pthread_join(h[i], NULL);
	alarm(0);

	ck_assert_int_eq(atomic_load(&s.bad), 0);
	for (size_t i = 0; i < STORM_PAGES; i++)
		ck_assert_int_eq(test_resident(s.area + i * pg), 1);
	ck_assert_int_eq(madvx_uffd_stats_get(s.u, &st), 0);
	ck_assert_uint_ge(st.faults, STORM_PAGES);	/* every page faulted at least once */
	ck_assert_uint_eq(st.faults, atomic_load(&s.faults));
	ck_assert_uint_eq(st.bytes + st.existed, st.faults * pg);
	madvx_uffd_free(s.u);
	munmap(s.area, STORM_PAGES * pg);
}
END_TEST

/* The poll/epoll shape: poll the poll fd, then madvx_uffd_handle(.., 0). */
static int zero_fault(struct madvx_uffd *u, const struct madvx_uffd_event *ev, void *arg)
{
	(*(int *)arg)++;
	return madvx_uffd_zeropage(u, ev->arg.fault.addr, pg, 0, NULL);
}

static void *touch(void *p)
{
	return (void *)(uintptr_t)*(volatile uint8_t *)p;
}

START_TEST(handle_fits_poll)
{
	struct madvx_uffd *u = open_uffd(0);
	uint8_t *a = map_registered(u, 1);
	int n = 0;
	struct madvx_uffd_handler h = { .size = sizeof(h), .fault = zero_fault, .arg = &n };
	struct pollfd p = { .fd = madvx_uffd_poll_fd(u), .events = POLLIN };
	pthread_t t;
	void *r;

	ck_assert_int_eq(madvx_uffd_handle(u, &h, 0), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, touch, a), 0);
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
	ck_assert_int_eq(madvx_uffd_handle(u, &h, 0), 1);
	pthread_join(t, &r);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_null(r);
	/* stop wakes a blocked handle and makes run return */
	ck_assert_int_eq(madvx_uffd_stop(u, 1), 0);
	ck_assert_int_eq(poll(&p, 1, 0), 1);
	ck_assert_int_eq(madvx_uffd_run(u, &h), 0);
	ck_assert_int_eq(madvx_uffd_stop(u, 0), 0);
	ck_assert_int_eq(poll(&p, 1, 0), 0);
	ck_assert_int_eq(madvx_uffd_handle(u, &h, 10), 0);	/* timeout */
	h.fault = NULL;
	ck_assert_int_eq(madvx_uffd_handle(u, &h, 0), -EINVAL);
	{	/* sized like every options struct: a newer caller's tail must be zero */
		struct { struct madvx_uffd_handler h; uint64_t tail; } big = {
			.h = { .size = sizeof(big), .fault = zero_fault, .arg = &n } };

		ck_assert_int_eq(madvx_uffd_handle(u, &big.h, 0), 0);
		big.tail = 1;
		ck_assert_int_eq(madvx_uffd_handle(u, &big.h, 0), -E2BIG);
		big.tail = 0;
		big.h.__reserved0 = 1;
		ck_assert_int_eq(madvx_uffd_handle(u, &big.h, 0), -E2BIG);
		big.h.__reserved0 = 0;
		big.h.size = offsetof(struct madvx_uffd_handler, arg) - 1;
		ck_assert_int_eq(madvx_uffd_handle(u, &big.h, 0), -EINVAL);
		/* the fields the caller's size covers are all that is read */
		big.h.size = offsetof(struct madvx_uffd_handler, arg);
		big.h.__reserved0 = 1;
		ck_assert_int_eq(madvx_uffd_handle(u, &big.h, 0), 0);
	}
	madvx_uffd_free(u);
	munmap(a, pg);
}
END_TEST

/* One tcase per test, named like it, so CK_RUN_CASE=<name> runs one alone. */
static void add(Suite *s, const TTest *t)
{
	TCase *tc = tcase_create(t->name);

	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

int main(void)
{
	Suite *s = suite_create("uffd_events");
	bool root = geteuid() == 0;

	pg = test_page();
	if (!madvx_feature_supported(MADVX_FEAT_UFFD))
		test_skip("userfaultfd is not usable here");
	add(s, event_remap);
	add(s, event_remove);
	add(s, event_unmap);
	add(s, eagain_while_remap_pending);
	add(s, fault_storm);
	add(s, handle_fits_poll);
	/* EVENT_FORK needs CAP_SYS_PTRACE; becoming nobody needs root. */
	if (root) {
		add(s, event_fork);
		add(s, eagain_while_fork_pending);
		add(s, unprivileged_open);
	} else {
		puts("SKIP event_fork, eagain_while_fork_pending, unprivileged_open: not root");
	}
	return test_run_suite(s);
}
