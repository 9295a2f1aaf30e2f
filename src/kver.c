// SPDX-License-Identifier: MIT
/*
 * The running kernel as uname() names it (kver.h): the probe core's first
 * guess of every feature, so it must stay cheap - no stdio, no files.
 */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "kver.h"

/*
 * Is @word a blank-separated word of @s? By hand, like parse_release()
 * below: libc's strstr() sits on a text page of its own that a process
 * has often not touched yet, and its first touch here is a page fault
 * inside the caller's first flush (BENCHMARKS.md, p6).
 */
static bool has_word(const char *s, const char *word)
{
	for (const char *p = s; *p; p++) {
		const char *w = word, *q = p;

		if (p != s && p[-1] != ' ')
			continue;
		while (*w && *q == *w) {
			q++;
			w++;
		}
		if (!*w && (!*q || *q == ' '))
			return true;
	}
	return false;
}

/*
 * CONFIG_PER_VMA_LOCK is "def_bool y, depends on ARCH_SUPPORTS_PER_VMA_LOCK
 * && MMU && SMP" (mm/Kconfig, 6.4-7.3): a uniprocessor kernel, whose
 * uname -v lacks the word SMP (init/Makefile), and an architecture that
 * does not select ARCH_SUPPORTS_PER_VMA_LOCK (32-bit x86, mips, ...) have
 * no per-VMA locks, and every madvise() takes mmap_lock there.  ppc64 is
 * assumed to be pseries/powernv, the platforms that select it.  A 32-bit
 * personality (setarch i686) on an x86_64 kernel reads as "none": planning
 * only gets slower.
 */
static bool uname_has_per_vma_locks(const struct utsname *u)
{
	static const char *const archs[] = {
		"x86_64", "aarch64", "arm", "loongarch64", "riscv64", "riscv32",
		"s390x", "ppc64", "ppc64le",
	};

	if (!has_word(u->version, "SMP"))
		return false;
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (!strcmp(u->machine, archs[i]) ||
		    (!strcmp(archs[i], "arm") && !strncmp(u->machine, "arm", 3)))
			return true;
	return false;
}

/*
 * "6.18.44-fc" -> {6, 18, 44}; stops at the first field that is not
 * digits-then-dot, as sscanf("%u.%u.%u") would.  By hand because the
 * probe core runs inside the caller's first flush, where the first use of
 * the stdio formatting code costs page faults (a few on most machines,
 * each tens of microseconds under a paravirtualised host).
 */
static void parse_release(const char *s, unsigned int v[3])
{
	for (int i = 0; i < 3; i++) {
		unsigned int n = 0;

		if (*s < '0' || *s > '9')
			return;
		while (*s >= '0' && *s <= '9' && n < 100000)
			n = n * 10 + (unsigned int)(*s++ - '0');
		v[i] = n;
		if (*s++ != '.')
			return;
	}
}

MADVX_HOT int __madvx_kver_read(struct madvx_kver *k)
{
	struct utsname u;
	unsigned int v[3] = { 0, 0, 0 };
	size_t len;

	memset(k, 0, sizeof(*k));
	if (uname(&u))
		return -errno;
	len = strnlen(u.release, sizeof(k->release) - 1);
	memcpy(k->release, u.release, len);
	parse_release(u.release, v);
	k->version = MADVX_KVER(v[0], v[1], v[2] > 255 ? 255 : v[2]);
	k->per_vma_locks = uname_has_per_vma_locks(&u);
	return 0;
}
