/* SPDX-License-Identifier: MIT */
/*
 * locktrace: count the mmap_lock acquisitions a piece of code causes, with
 * the kernel's mmap_lock tracepoints (mmap_lock:mmap_lock_start_locking,
 * mmap_lock_acquire_returned, mmap_lock_released). A measuring aid for
 * madvx-probe --verify, madvx-bench and the tests; not part of libmadvx.
 *
 * How: tracefs is mounted in a private mount namespace of a short-lived
 * helper child (fork + unshare(CLONE_NEWNS) + mount), which hands the
 * mount's root directory back as a file descriptor and exits. The calling
 * process's own mount namespace is never changed, so this works the same in
 * single- and multi-threaded processes (unshare(CLONE_NEWNS) in a threaded
 * process would move only the calling thread, leaving paths it resolves
 * different from its siblings'). All later work is relative to that fd, in
 * a tracing instance of our own (instances/madvx-lt-<pid>-<n>), so several
 * measurements - from other processes or other tools using the top-level
 * trace buffer - do not disturb each other.
 *
 * Needs CAP_SYS_ADMIN (root) and a kernel with the mmap_lock tracepoints
 * (CONFIG_TRACING, 5.10+). Where the kernel also has the raw_syscalls
 * tracepoints (CONFIG_HAVE_SYSCALL_TRACEPOINTS: x86, arm64, riscv and
 * most others, with CONFIG_TRACING), the measuring thread's system call
 * entries and exits are traced too, so its acquisitions can be split into
 * those inside a system call and those of its user-mode page faults.
 * Timestamps come from the trace clock "mono" (CLOCK_MONOTONIC) printed
 * with 1 us resolution, so held/wait times are good to about 1 us per
 * acquisition.
 *
 * Thread-safety: one struct locktrace per measuring thread.
 * Fork: the helper is a fork() of the caller, which write-protects the
 * caller's private memory for copy-on-write; open before mapping and
 * touching large benchmark buffers so their timings do not pay for it.
 */
#ifndef MADVX_LOCKTRACE_H
#define MADVX_LOCKTRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct locktrace {
	int root_fd;		/* tracefs root (mount detached from every namespace) */
	int inst_fd;		/* our instance directory */
	int pipe_fd;		/* its trace_pipe, non-blocking */
	char pids[4096];	/* set_event_pid as last written */
	pid_t sys_tid;		/* raw_syscalls filtered to this thread (0: none yet) */
	bool syscalls;		/* raw_syscalls enabled: acquisitions are told apart */
	char inst[64];		/* its name under instances/ */
	char why[192];		/* why locktrace_open() failed */
	char *buf;		/* trace text of the last measurement */
	size_t buf_cap;
};

/* mmap_lock acquisitions (successful ones) of a set of threads in the window. */
struct locktrace_counts {
	uint64_t acq_read;
	uint64_t acq_write;
	uint64_t held_ns;	/* time between acquisition and release, clipped to the window */
	uint64_t wait_ns;	/* time between start_locking and acquisition (contention),
				 * clipped to the window; a thread blocked for the whole
				 * window without an event in it is not seen */
};

struct locktrace_result {
	struct locktrace_counts self;	/* the thread that called locktrace_measure() */
	struct locktrace_counts self_user;	/* of those, the ones taken outside any
						 * system call: page faults in user mode,
						 * which the kernel retries under mmap_lock
						 * for reasons of its own (a file folio
						 * locked by writeback, readahead, a VMA
						 * without anon_vma) */
	bool syscalls_traced;		/* self_user is known (raw_syscalls tracepoints);
					 * without them it stays zero */
	struct locktrace_counts others;	/* other threads of the process (existing at start) */
	uint64_t call_ns;		/* wall time of the callback */
	uint64_t events;		/* trace events seen in the window */
	bool lost;			/* the trace buffer overflowed: counts are low */
};

/*
 * locktrace_open - set up tracing for this process.
 * Returns 0, or -errno with a human-readable reason in lt->why:
 * -EPERM (not root / no CAP_SYS_ADMIN), -ENODEV (no tracefs),
 * -ENOENT (kernel without mmap_lock tracepoints), others from the kernel.
 * On failure nothing needs closing (locktrace_close() is still safe).
 */
int locktrace_open(struct locktrace *lt);

/*
 * locktrace_measure - run fn(arg) with the tracepoints on and count the
 * mmap_lock acquisitions of the calling thread (out->self) and of the other
 * threads that exist when the call starts (out->others) between the start
 * and the end of fn. Returns 0 or -errno (tracefs writes failed).
 */
int locktrace_measure(struct locktrace *lt, void (*fn)(void *), void *arg,
		      struct locktrace_result *out);

/*
 * locktrace_run - run argv[0] (searched in PATH) as a child and trace its
 * whole process tree - every thread and process it creates, from its
 * first instruction to its exit - with the mmap_lock tracepoints plus the
 * @events named (NULL-terminated; "group/event" or "group/event:filter",
 * e.g. "syscalls/sys_enter_ioctl:cmd == 0xc0686611"). Each complete trace
 * line is handed to @line(@arg, text) while the child runs (the buffer is
 * drained as it fills, so long runs lose nothing unless the reader falls
 * behind: *@lost). The child's resource usage (wait4) goes to @ru.
 * Returns the child's wait status (>= 0) or -errno (with lt->why); the
 * extra events are disabled again before it returns. Not thread-safe
 * against locktrace_measure() on the same @lt.
 */
int locktrace_run(struct locktrace *lt, const char *const *events, char *const argv[],
		  void (*line)(void *arg, const char *text), void *arg,
		  struct rusage *ru, bool *lost);

/*
 * locktrace_line_tid - the thread id of a trace line ("<comm>-<tid> [cpu]
 * <flags> <sec>.<usec>: <event text>"), or -1 for a comment or a line
 * without one; *@event (when @event is not NULL) is set to the event text
 * after the timestamp, or NULL.
 */
long locktrace_line_tid(const char *line, const char **event);

/* Tear down the instance and free everything; safe after a failed open. */
void locktrace_close(struct locktrace *lt);

#endif /* MADVX_LOCKTRACE_H */
