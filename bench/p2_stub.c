// SPDX-License-Identifier: MIT
#include "bench.h"

int bench_p2(const struct bench_opts *o)
{
	bench_note(o, "p2: not implemented yet");
	return BENCH_SKIP;
}
