// SPDX-License-Identifier: MIT
/*
 * Tooling self-test: raise a real WARN() in the guest kernel through lkdtm
 * (CONFIG_LKDTM, config/base.config) and exit 0, so only the host's dmesg
 * scan can fail the run.  The console runs with "quiet", so the WARN is not
 * on the console: it must be found in the dmesg dump.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	const char *path = "/sys/kernel/debug/provoke-crash/DIRECT";
	int fd = open(path, O_WRONLY);

	if (fd < 0) {
		printf("selftest-warn: %s: %s\n", path, strerror(errno));
		return 77;
	}
	if (write(fd, "WARNING", 7) < 0)
		printf("selftest-warn: write: %s\n", strerror(errno));
	close(fd);
	printf("selftest-warn: asked lkdtm for a WARNING; exiting 0\n");
	return 0;
}
