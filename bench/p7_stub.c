// SPDX-License-Identifier: MIT
#include "bench.h"

int bench_p7(const struct bench_opts *o)
{
	bench_note(o, "p7: not implemented yet");
	return BENCH_SKIP;
}
