// SPDX-License-Identifier: MIT
#include "bench.h"

int bench_p3(const struct bench_opts *o)
{
	bench_note(o, "p3: not implemented yet");
	return BENCH_SKIP;
}
