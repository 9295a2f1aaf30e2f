// SPDX-License-Identifier: MIT
/* Tooling self-test: a guest test that fails; the run must fail. */
#include <stdio.h>

int main(void)
{
	printf("selftest-fail: failing on purpose\n");
	return 1;
}
