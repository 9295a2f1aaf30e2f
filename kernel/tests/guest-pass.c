// SPDX-License-Identifier: MIT
/* Tooling self-test: a guest test that passes (positive control). */
#include <stdio.h>
#include <sys/utsname.h>

int main(void)
{
	struct utsname u;

	uname(&u);
	printf("selftest-pass: running on Linux %s\n", u.release);
	return 0;
}
