// SPDX-License-Identifier: MIT
/*
 * Process identity: which process is running the library right now.
 *
 * Per-process state - the pidfd that names us for process_madvise(), the
 * /proc/self/maps fd, a probe or once-initialisation in progress - is wrong
 * in a child: the fds keep naming the PARENT, and a lock or once-guard that
 * another parent thread held at the fork is never released in the child.
 * pthread_atfork() handlers do not run for _Fork(), syscall(SYS_fork) or a
 * raw clone(), which runtimes and sandboxes use, so the library does not
 * rely on them. Instead every entry compares a process generation: a word in
 * a MADV_WIPEONFORK page (4.14) reads as zero in any new process, whatever
 * made it, so the check is one load. Where the page is missing (older
 * kernels, mmap refused), getpid() decides, one syscall per check.
 *
 * Generations only grow along a chain of forks (a child takes its parent's
 * counter plus one), which is all the checks need: state stamped with a
 * generation other than the current one was inherited.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proc.h"

static _Atomic uint64_t *_Atomic wipe_word;	/* current generation; 0 in a new process */
static _Atomic uint64_t gen_counter = 1;
static _Atomic uint64_t fallback_gen = 1;	/* without wipe_word: gen of fallback_pid */
static _Atomic pid_t fallback_pid;

__attribute__((constructor)) static void madvx_proc_init(void)
{
	/* Constructors run in no set order: sys.c's page size may not be read yet. */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int e = errno;

	atomic_store(&fallback_pid, getpid());
	if (p == MAP_FAILED) {
		errno = e;
		return;
	}
	if (madvise(p, page, MADV_WIPEONFORK)) {
		munmap(p, page);
		errno = e;
		return;
	}
	atomic_store((_Atomic uint64_t *)p, 1);
	atomic_store(&wipe_word, (_Atomic uint64_t *)p);
}

/* A new process: take the next generation (first thread to get here wins). */
static uint64_t renew_wiped(_Atomic uint64_t *w)
{
	uint64_t gen = atomic_fetch_add(&gen_counter, 1) + 1, expected = 0;

	if (!atomic_compare_exchange_strong(w, &expected, gen))
		gen = expected;
	return gen;
}

static uint64_t gen_by_pid(void)
{
	pid_t pid = getpid();

	for (;;) {
		pid_t seen = atomic_load(&fallback_pid);
		uint64_t gen = atomic_load(&fallback_gen);

		if (seen == pid)
			return gen;
		/* Bump the generation once per new pid; a racing thread retries. */
		if (atomic_compare_exchange_strong(&fallback_pid, &seen, pid)) {
			gen = atomic_fetch_add(&gen_counter, 1) + 1;
			atomic_store(&fallback_gen, gen);
			return gen;
		}
	}
}

MADVX_HOT uint64_t __madvx_proc_gen(void)
{
	_Atomic uint64_t *w = atomic_load_explicit(&wipe_word, memory_order_acquire);
	uint64_t gen;

	if (unlikely(!w))
		return gen_by_pid();
	gen = atomic_load_explicit(w, memory_order_acquire);
	if (likely(gen))
		return gen;
	return renew_wiped(w);
}

/*
 * once: run @fn exactly once per process lineage. state is 0 (never run),
 * MADVX_ONCE_DONE, or the generation of the process running it; a state
 * left by another generation means a fork interrupted the run, and the
 * child runs @fn itself (the parent's thread does not exist here).
 */
#define MADVX_ONCE_DONE UINT64_MAX

MADVX_HOT void __madvx_once_slow(struct madvx_once *o, void (*fn)(void))
{
	uint64_t gen = __madvx_proc_gen();

	for (;;) {
		uint64_t s = atomic_load_explicit(&o->state, memory_order_acquire);

		if (s == MADVX_ONCE_DONE)
			return;
		if (s != gen) {
			if (!atomic_compare_exchange_strong(&o->state, &s, gen))
				continue;
			fn();
			atomic_store_explicit(&o->state, MADVX_ONCE_DONE, memory_order_release);
			return;
		}
		/* Another thread of this process runs it: the probe takes milliseconds. */
		sched_yield();
	}
}

/*
 * Process-wide lock for rare writers (region table): the holder's
 * generation is the lock word, so a child whose parent thread held it at
 * the fork takes it over instead of waiting for a thread that does not exist.
 */
void __madvx_plock_lock(struct madvx_plock *l)
{
	uint64_t gen = __madvx_proc_gen();

	for (;;) {
		uint64_t s = atomic_load_explicit(&l->owner, memory_order_relaxed);

		if ((s == 0 || s != gen) &&
		    atomic_compare_exchange_weak_explicit(&l->owner, &s, gen,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
		if (s == gen)
			sched_yield();
	}
}

void __madvx_plock_unlock(struct madvx_plock *l)
{
	atomic_store_explicit(&l->owner, 0, memory_order_release);
}

/*
 * An fd that names this process (pidfd, /proc/self/maps): opened lazily,
 * stamped with the generation that opened it. Packed in one word so that
 * threads racing to replace an inherited fd agree on who closes it.
 */
#define SLOT_FD(v) ((int)(uint32_t)(v) - 1)
#define SLOT(gen, fd) (((gen) << 32) | (uint32_t)((fd) + 1))

static struct __madvx_proc_fd proc_fds[MADVX_PFD__COUNT];

/* Drop @slot's fd if it was inherited; the first thread to swap it out closes it. */
static void drop_inherited(struct __madvx_proc_fd *slot, uint64_t gen)
{
	uint64_t v = atomic_load_explicit(&slot->v, memory_order_acquire);

	if (v && (v >> 32) != gen &&
	    atomic_compare_exchange_strong(&slot->v, &v, 0) && SLOT_FD(v) >= 0)
		close(SLOT_FD(v));
}

int __madvx_proc_fd(enum madvx_proc_fd_id id, int (*open_fd)(void))
{
	struct __madvx_proc_fd *slot = &proc_fds[id];
	uint64_t gen = __madvx_proc_gen() & 0xffffffffULL;
	uint64_t v = atomic_load_explicit(&slot->v, memory_order_acquire);
	int fd;

	if (likely(v && (v >> 32) == gen && SLOT_FD(v) >= 0))
		return SLOT_FD(v);
	/* Inherited: our copy of the parent's fd. */
	drop_inherited(slot, gen);
	fd = open_fd();
	if (fd < 0)
		return fd;
	v = 0;
	if (!atomic_compare_exchange_strong(&slot->v, &v, SLOT(gen, fd))) {
		close(fd);
		return __madvx_proc_fd(id, open_fd);
	}
	return fd;
}

/*
 * fork(): drop the inherited fds in the child at once, so that the cost
 * (closing a /proc/PID/maps fd of the parent's mm takes that mm's
 * mmap_lock on 6.18) is paid in fork(), not in the child's first flush.
 * The other fork kinds run no handler; __madvx_proc_fd() drops them lazily.
 */
static void proc_after_fork_child(void)
{
	uint64_t gen = __madvx_proc_gen() & 0xffffffffULL;
	int e = errno;

	for (int i = 0; i < MADVX_PFD__COUNT; i++)
		drop_inherited(&proc_fds[i], gen);
	errno = e;
}

__attribute__((constructor)) static void madvx_proc_atfork(void)
{
	pthread_atfork(NULL, NULL, proc_after_fork_child);
}
