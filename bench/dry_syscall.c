// SPDX-License-Identifier: MIT
/*
 * A stub for the kernel, for p7: libmadvx issues process_madvise() through
 * libc's syscall(), which this executable interposes. With dry mode on, a
 * process_madvise() is answered "all bytes done" without entering the
 * kernel, so add + flush measures the library's own work (validation,
 * epochs, sort, merge, VMA lookups by PROCMAP_QUERY, planning, vectors,
 * crediting) and nothing else. Everything else is forwarded to libc.
 *
 * A static executable (the test kernel's guest) cannot forward: there is no
 * libc syscall() behind ours to find. It gets no interposition, dry mode
 * answers nothing, and p7 reports that the dry variant did not take.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "bench.h"
#include "uapi-compat.h"

static atomic_bool dry;
static _Atomic uint64_t dry_calls;

void bench_dry_syscalls(bool on)
{
	atomic_store(&dry, on);
}

uint64_t bench_dry_calls(void)
{
	return atomic_load(&dry_calls);
}

#ifndef BENCH_STATIC
/* Default visibility: the project builds with -fvisibility=hidden, and the
 * definition must reach the dynamic symbol table to interpose libc's. */
__attribute__((visibility("default"))) long syscall(long nr, ...);

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == __NR_process_madvise && atomic_load_explicit(&dry, memory_order_relaxed)) {
		const struct iovec *iov = (const struct iovec *)a[1];
		long sum = 0;

		for (long i = 0; i < a[2]; i++)
			sum += (long)iov[i].iov_len;
		atomic_fetch_add_explicit(&dry_calls, 1, memory_order_relaxed);
		return sum;
	}
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
#endif
