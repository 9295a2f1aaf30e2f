/* SPDX-License-Identifier: MIT */
/*
 * A target's /proc/PID/maps as text (maps.c), and the target itself: the
 * struct target.c opens and fills, whose maps fd, snapshot and stream
 * live here. PROCMAP_QUERY and everything else about a target: target.h.
 */
#ifndef MADVX_MAPS_H
#define MADVX_MAPS_H

#include <madvx.h>

#include "sys.h"
#include "util.h"

struct madvx_target_range {
	uint64_t start, end;
};

struct madvx_target {
	int pidfd;		/* ours (a dup when opened from a caller's pidfd) */
	int proc_fd;		/* /proc/PID directory, bound to the process */
	int maps_fd;		/* /proc/PID/maps: names the mm it was opened on */
	pid_t pid;
	bool procmap;		/* PROCMAP_QUERY answers on maps_fd */
	uint64_t startstack;	/* /proc/PID/stat, for MADVX_VMA_STACK */
	uint64_t start_brk;	/* ... for MADVX_VMA_HEAP */
	/* mlock()ed ranges (only when /proc/PID/status says VmLck > 0) */
	struct madvx_target_range *locked;
	size_t nlocked, locked_cap;
	/* /proc/PID/maps snapshot: without PROCMAP_QUERY */
	struct madvx_target_vma *snap;
	uint32_t *snap_line;	/* bytes of each one's maps line */
	size_t nsnap, snap_cap, snap_hint;
	bool snap_valid;
	double snap_line_bytes;	/* mean length of a maps line at the last read */
	struct madvx_target_stream *stream;	/* reclaim's forward read of maps */
	uint64_t advice_known;	/* bit per madvx_advice_index(): answer cached */
	uint64_t advice_ok;	/* ... and the kernel accepts it remotely */
	char name[4096];	/* PROCMAP_QUERY's name buffer */
	size_t query_line;	/* the maps line length of the last answer */
};

/*
 * The whole of a /proc file: pread() from offset 0 until EOF into a buffer
 * that grows. *buf is NUL-terminated. Returns the length or -errno.
 */
MADVX_HIDDEN long __madvx_maps_read_whole(int fd, char **buf, size_t *cap);

/* The flags of @v that its @name and the process state give (page_size 0: unknown). */
MADVX_HIDDEN void __madvx_maps_classify(const struct madvx_target *t, struct madvx_target_vma *v,
				       const char *name, uint64_t page_size);

/* Read the snapshot now. 0, -ESRCH (no mm), -errno. */
MADVX_HIDDEN int __madvx_maps_snapshot_load(struct madvx_target *t);

/*
 * The same answer from the /proc/PID/maps snapshot, read on first use and
 * kept until madvx_target_invalidate(), whatever the kernel offers: for
 * walks over many VMAs. One read of maps costs ~0.13 us per VMA against
 * ~1.5 us per PROCMAP_QUERY ioctl (6.18, a 2-vCPU VM: a system call each),
 * but it is a snapshot, and it has no page size: a hugetlbfs file mapping
 * reads as MADVX_VMA_FILE, not HUGETLB (an anonymous MAP_HUGETLB one is
 * found by its name). 0, -ENOENT, -ESRCH, -errno.
 */
MADVX_HIDDEN int __madvx_maps_snapshot_find(struct madvx_target *t, uint64_t addr,
					  struct madvx_target_vma *v);

/* Bytes of the maps line behind the last __madvx_target_query() answer (0: unknown). */
/* Bytes of the maps line behind the last __madvx_maps_snapshot_find() answer. */
MADVX_HIDDEN size_t __madvx_maps_scan_line(const struct madvx_target *t);

/*
 * The stream: the target's VMAs from a forward-only read of /proc/PID/maps,
 * for madvx_reclaim()'s look-up of every entry just before its call. One
 * PROCMAP_QUERY is a system call (~1.8-2.3 us on this project's 6.18
 * paravirtualised hosts, ~1 us of it the syscall itself); reading maps costs
 * ~0.13 us per VMA. A reclaim of 2080 VMAs looked every entry up again
 * for ~4.7 ms of CPU - a third of what Android's way spends on the whole
 * reclaim (BENCHMARKS.md, p8 sweep).
 *
 * Why a stream is as fresh as a query: the kernel (fs/proc/task_mmu.c,
 * m_start()) resumes a sequential read at the address where the last one
 * stopped and formats each line from the VMA tree as it is at that read()
 * (checked on 6.18: a VMA replaced between two reads shows its new flags).
 * So a line is as old as the read() that produced it. Each call begins an
 * epoch (__madvx_maps_stream_epoch()); only lines whose read began in
 * the current epoch answer, sized so that one read brings the lines the
 * call needs. Anything older - a line read ahead for an earlier call, the
 * start of a line cut by a read's end, the end of the file - is asked of
 * PROCMAP_QUERY again, as are file VMAs (a maps line has no page size: a
 * hugetlbfs file would read as a plain file).
 * Only with PROCMAP_QUERY (the fall-back), and after a plan that read the
 * snapshot: its line lengths size the reads, also of the lines below the
 * start that the first read passes.
 */
MADVX_HIDDEN int __madvx_maps_stream_start(struct madvx_target *t, uint64_t addr);

/* A new epoch: the next call looks up from @addr on, in about @bytes of maps lines. */
MADVX_HIDDEN void __madvx_maps_stream_epoch(struct madvx_target *t, uint64_t addr,
					     size_t bytes);

/*
 * The VMA containing @addr or the first above it from a line read in this
 * epoch: 0, -ENOENT, -ESRCH, -errno, or -EAGAIN where only the kernel can
 * answer (target.c asks PROCMAP_QUERY: __madvx_target_stream_find()).
 */
MADVX_HIDDEN int __madvx_maps_stream_find(struct madvx_target *t, uint64_t addr,
					 struct madvx_target_vma *v);

/* Look-ups the stream answered, and those it asked PROCMAP_QUERY (tests). */
MADVX_HIDDEN void __madvx_maps_stream_stats(const struct madvx_target *t, uint64_t *lines,
					     uint64_t *queries);

MADVX_HIDDEN void __madvx_maps_stream_stop(struct madvx_target *t);

#endif /* MADVX_MAPS_H */
