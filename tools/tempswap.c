// SPDX-License-Identifier: MIT
/* A temporary swap file: see tempswap.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/swap.h>
#include <unistd.h>

#include "tempswap.h"

uint64_t tempswap_free(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "SwapFree: %llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

#define SWAP_DIR "/var/tmp"
#define SWAP_PREFIX "madvx-swap-"

/*
 * Swap files of processes that are gone: a run killed before
 * tempswap_off() (a meson test timeout is a SIGTERM) leaves its file
 * swapped on, and every later test on the machine runs with swap - which
 * changes what MADV_PAGEOUT and MADV_FREE do (seen: a conformance failure).
 */
void tempswap_reap(void)
{
	DIR *d = opendir(SWAP_DIR);
	struct dirent *e;
	char path[300];

	while (d && (e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, SWAP_PREFIX, strlen(SWAP_PREFIX)))
			continue;
		pid = strtol(e->d_name + strlen(SWAP_PREFIX), &end, 10);
		if (*end || pid <= 0 || !kill((pid_t)pid, 0) || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), SWAP_DIR "/%s", e->d_name);
		if (swapoff(path) && errno != EINVAL)	/* EINVAL: not swapped on */
			continue;
		unlink(path);
	}
	if (d)
		closedir(d);
}

int tempswap_on(struct tempswap *s, uint64_t bytes, char *why, size_t len)
{
	static char page[4096];
	uint32_t *w = (uint32_t *)(page + 1024);
	int fd;

	s->on = false;
	if (geteuid() != 0) {
		snprintf(why, len, "only root can add swap");
		return -1;
	}
	tempswap_reap();
	snprintf(s->path, sizeof(s->path), SWAP_DIR "/" SWAP_PREFIX "%d", (int)getpid());
	fd = open(s->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(why, len, "cannot create %s: %s", s->path, strerror(errno));
		return -1;
	}
	/* struct swap_header v1: version, last_page at 1024; magic at the page end */
	memset(page, 0, sizeof(page));
	w[0] = 1;
	w[1] = (uint32_t)(bytes / 4096 - 1);
	memcpy(page + 4096 - 10, "SWAPSPACE2", 10);
	if (posix_fallocate(fd, 0, (off_t)bytes) || pwrite(fd, page, 4096, 0) != 4096 ||
	    fsync(fd)) {
		snprintf(why, len, "cannot allocate %llu MiB in /var/tmp",
			 (unsigned long long)(bytes >> 20));
		close(fd);
		unlink(s->path);
		return -1;
	}
	close(fd);
	if (swapon(s->path, 0)) {
		snprintf(why, len, "swapon(%s): %s", s->path, strerror(errno));
		unlink(s->path);
		return -1;
	}
	s->on = true;
	return 0;
}

void tempswap_off(struct tempswap *s)
{
	if (!s->on)
		return;
	swapoff(s->path);
	unlink(s->path);
	s->on = false;
}
