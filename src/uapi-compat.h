/* SPDX-License-Identifier: MIT */
/*
 * Kernel UAPI constants and structs newer than the headers we build against.
 *
 * Debian 12 ships Linux 6.1 uapi headers; the kernels we run on (6.18 host,
 * 7.3 test kernel) know much more. Each definition below is guarded so a
 * newer system header wins, and notes the kernel release that added it. The
 * values are ABI: they never change once released.
 */
#ifndef MADVX_UAPI_COMPAT_H
#define MADVX_UAPI_COMPAT_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>

/* ---- syscall numbers (x86_64 and the generic table agree for these) ---- */
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434		/* 5.3 */
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440	/* 5.10 */
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425		/* 5.1 */
#endif

/* ---- madvise advices (include/uapi/asm-generic/mman-common.h) ---- */
#ifndef MADV_COLD
#define MADV_COLD 20			/* 5.4 */
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21			/* 5.4 */
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22		/* 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23		/* 5.14 */
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24		/* 5.18 */
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25		/* 6.1 */
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102		/* 6.13 */
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103		/* 6.13 */
#endif

/* ---- pidfd sentinels (include/uapi/linux/pidfd.h) ---- */
#ifndef PIDFD_SELF_THREAD
#define PIDFD_SELF_THREAD (-10000)	/* 6.15 */
#endif
#ifndef PIDFD_SELF_THREAD_GROUP
#define PIDFD_SELF_THREAD_GROUP (-20000) /* 6.15 */
#endif

/* ---- PROCMAP_QUERY (include/uapi/linux/fs.h), 6.11 ---- */
#ifndef PROCMAP_QUERY
struct procmap_query {
	__u64 size;
	__u64 query_flags;
	__u64 query_addr;
	__u64 vma_start;
	__u64 vma_end;
	__u64 vma_flags;
	__u64 vma_page_size;
	__u64 vma_offset;
	__u64 inode;
	__u32 dev_major;
	__u32 dev_minor;
	__u32 vma_name_size;
	__u32 build_id_size;
	__u64 vma_name_addr;
	__u64 build_id_addr;
};

enum procmap_query_flags {
	PROCMAP_QUERY_VMA_READABLE = 0x01,
	PROCMAP_QUERY_VMA_WRITABLE = 0x02,
	PROCMAP_QUERY_VMA_EXECUTABLE = 0x04,
	PROCMAP_QUERY_VMA_SHARED = 0x08,
	PROCMAP_QUERY_COVERING_OR_NEXT_VMA = 0x10,
	PROCMAP_QUERY_FILE_BACKED_VMA = 0x20,
};

#define PROCFS_IOCTL_MAGIC 'f'
#define PROCMAP_QUERY _IOWR(PROCFS_IOCTL_MAGIC, 17, struct procmap_query)
#endif
_Static_assert(sizeof(struct procmap_query) == 104, "procmap_query ABI");

/* ---- userfaultfd (include/uapi/linux/userfaultfd.h) ---- */
#ifndef USERFAULTFD_IOC
#define USERFAULTFD_IOC 0xAA		/* /dev/userfaultfd, 6.1 */
#define USERFAULTFD_IOC_NEW _IO(USERFAULTFD_IOC, 0x00)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1		/* 5.11 */
#endif
#ifndef UFFD_FEATURE_EXACT_ADDRESS
#define UFFD_FEATURE_EXACT_ADDRESS (1 << 11)	/* 5.18 */
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12) /* 5.19 */
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)	/* 6.4 */
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)		/* 6.6 */
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)		/* 6.7 */
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)		/* 6.8 */
#endif

#ifndef UFFDIO_CONTINUE_MODE_WP
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)	/* 6.4 */
#endif

#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)			/* 6.8 */
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES ((__u64)1 << 1)
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)			/* 6.6 */
struct uffdio_poison {
	struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

#endif /* MADVX_UAPI_COMPAT_H */
