// SPDX-License-Identifier: MIT
/* The advices the library knows (advtab.h): the table and its inverse. */
#include <sys/mman.h>

#include "advtab.h"

const struct advice_desc __madvx_advices[] = {
	{ MADV_NORMAL, "MADV_NORMAL", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_RANDOM, "MADV_RANDOM", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_SEQUENTIAL, "MADV_SEQUENTIAL", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_WILLNEED, "MADV_WILLNEED", MADVX_LOCK_MMAP_READ, true },
	{ MADV_DONTNEED, "MADV_DONTNEED", MADVX_LOCK_PER_VMA, false },
	{ MADV_FREE, "MADV_FREE", MADVX_LOCK_PER_VMA, false },
	{ MADV_REMOVE, "MADV_REMOVE", MADVX_LOCK_MMAP_READ, false },
	{ MADV_DONTFORK, "MADV_DONTFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DOFORK, "MADV_DOFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_MERGEABLE, "MADV_MERGEABLE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_UNMERGEABLE, "MADV_UNMERGEABLE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_HUGEPAGE, "MADV_HUGEPAGE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DONTDUMP, "MADV_DONTDUMP", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_DODUMP, "MADV_DODUMP", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_WIPEONFORK, "MADV_WIPEONFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_KEEPONFORK, "MADV_KEEPONFORK", MADVX_LOCK_MMAP_WRITE, false },
	{ MADV_COLD, "MADV_COLD", MADVX_LOCK_MMAP_READ, true },
	{ MADV_PAGEOUT, "MADV_PAGEOUT", MADVX_LOCK_MMAP_READ, true },
	{ MADV_POPULATE_READ, "MADV_POPULATE_READ", MADVX_LOCK_MMAP_READ, false },
	{ MADV_POPULATE_WRITE, "MADV_POPULATE_WRITE", MADVX_LOCK_MMAP_READ, false },
	{ MADV_DONTNEED_LOCKED, "MADV_DONTNEED_LOCKED", MADVX_LOCK_PER_VMA, false },
	{ MADV_COLLAPSE, "MADV_COLLAPSE", MADVX_LOCK_MMAP_READ, true },
	{ MADV_GUARD_INSTALL, "MADV_GUARD_INSTALL", MADVX_LOCK_PER_VMA, false },
	{ MADV_GUARD_REMOVE, "MADV_GUARD_REMOVE", MADVX_LOCK_PER_VMA, false },
};
const size_t __madvx_nadvices = ARRAY_SIZE(__madvx_advices);
_Static_assert(ARRAY_SIZE(__madvx_advices) <= 64, "advice mask is 64 bits");
_Static_assert(ARRAY_SIZE(__madvx_advices) == 25, "advice_index_of[] covers the table");

_Static_assert(MADVX_ADVICE_MAX == MADV_GUARD_REMOVE, "advice table bound");

int __madvx_advice_at(int index)
{
	return index >= 0 && index < (int)__madvx_nadvices ? __madvx_advices[index].advice : -1;
}

/* advice value -> 1 + index in advices[] (0: unknown). */
const int8_t __madvx_advice_index_of[MADVX_ADVICE_MAX + 1] = {
	[MADV_NORMAL] = 1, [MADV_RANDOM] = 2, [MADV_SEQUENTIAL] = 3,
	[MADV_WILLNEED] = 4, [MADV_DONTNEED] = 5, [MADV_FREE] = 6,
	[MADV_REMOVE] = 7, [MADV_DONTFORK] = 8, [MADV_DOFORK] = 9,
	[MADV_MERGEABLE] = 10, [MADV_UNMERGEABLE] = 11, [MADV_HUGEPAGE] = 12,
	[MADV_NOHUGEPAGE] = 13, [MADV_DONTDUMP] = 14, [MADV_DODUMP] = 15,
	[MADV_WIPEONFORK] = 16, [MADV_KEEPONFORK] = 17, [MADV_COLD] = 18,
	[MADV_PAGEOUT] = 19, [MADV_POPULATE_READ] = 20, [MADV_POPULATE_WRITE] = 21,
	[MADV_DONTNEED_LOCKED] = 22, [MADV_COLLAPSE] = 23,
	[MADV_GUARD_INSTALL] = 24, [MADV_GUARD_REMOVE] = 25,
};
