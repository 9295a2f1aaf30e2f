/* SPDX-License-Identifier: MIT */
/* proc.c: which process is running (fork detection without atfork). */
#ifndef MADVX_PROC_H
#define MADVX_PROC_H

#include "util.h"

/*
 * The generation of the running process: changes in every new process,
 * whatever made it (fork, _Fork, syscall(SYS_fork), clone without CLONE_VM).
 * One load on the fast path. Stamp per-process state with it.
 */
MADVX_HIDDEN uint64_t __madvx_proc_gen(void);

/* pthread_once() that a fork in the middle of the run cannot wedge. */
struct madvx_once {
	_Atomic uint64_t state;
};
#define MADVX_ONCE_INIT { 0 }
MADVX_HIDDEN void __madvx_once_slow(struct madvx_once *o, void (*fn)(void));

static inline void madvx_once(struct madvx_once *o, void (*fn)(void))
{
	if (likely(atomic_load_explicit(&o->state, memory_order_acquire) == UINT64_MAX))
		return;
	__madvx_once_slow(o, fn);
}

/* A lock for rare writers that a child takes over from a parent's thread. */
struct madvx_plock {
	_Atomic uint64_t owner;
};
MADVX_HIDDEN void __madvx_plock_lock(struct madvx_plock *l);
MADVX_HIDDEN void __madvx_plock_unlock(struct madvx_plock *l);

/* An fd naming this process, reopened (and the inherited one closed) in a child. */
struct __madvx_proc_fd {
	_Atomic uint64_t v;
};
enum madvx_proc_fd_id {
	MADVX_PFD_PIDFD,	/* pidfd_open(getpid()) for process_madvise() */
	MADVX_PFD_MAPS,		/* /proc/self/maps for PROCMAP_QUERY and the parser */
	MADVX_PFD__COUNT
};
MADVX_HIDDEN int __madvx_proc_fd(enum madvx_proc_fd_id id, int (*open_fd)(void));

#endif /* MADVX_PROC_H */
