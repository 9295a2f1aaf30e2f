// SPDX-License-Identifier: MIT
/*
 * What relcount-check.sh measures with madvx-relcount: N madvise(DONTNEED)
 * of two pages inside one VMA, N of two pages across a VMA boundary (an
 * mprotect()ed page splits the mapping: on 6.17+ each of these takes
 * mmap_read_lock, the others the per-VMA lock), from a second thread (the
 * trace must follow threads) and then from a forked child (and children),
 * 4 MiB touched, exit status 3.
 *
 *   relcount-target N
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAP_LEN (4u << 20)

static long n;
static char *map;

static void *in_one_vma(void *arg)
{
	(void)arg;
	for (long i = 0; i < n; i++) {
		map[0] = 1;
		if (madvise(map, 8192, MADV_DONTNEED))
			exit(1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long page = sysconf(_SC_PAGESIZE);
	pthread_t t;
	pid_t pid;
	int status;

	n = argc > 1 ? atol(argv[1]) : 0;
	map = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n <= 0 || map == MAP_FAILED)
		return 1;
	memset(map, 1, MAP_LEN);
	if (mprotect(map + MAP_LEN / 2, page, PROT_READ))
		return 1;
	if (pthread_create(&t, NULL, in_one_vma, NULL) || pthread_join(t, NULL))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		for (long i = 0; i < n; i++)
			if (madvise(map + MAP_LEN / 2 - page, 2 * page, MADV_DONTNEED))
				_exit(1);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	return 3;
}
