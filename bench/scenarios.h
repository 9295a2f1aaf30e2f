/* SPDX-License-Identifier: MIT */
/*
 * The registration table of madvx-bench: one line per scenario.
 *
 * To add a scenario pN: write bench/pN_<topic>.c with
 *	int bench_pN(const struct bench_opts *o);
 * add one BENCH_SCENARIO() line below and its file to bench_sources in
 * bench/meson.build. Nothing else: bench.h declares the function and main.c
 * builds the table (--scenario, --list) from these lines.
 *
 * BENCH_SCENARIO(id, one-line description)
 */
BENCH_SCENARIO(p1, "65536 adjacent 4 KiB DONTNEED hints over a touched 256 MiB mapping")
BENCH_SCENARIO(p2, "every other 4 KiB page of 256 MiB: process_madvise vector size sweep")
BENCH_SCENARIO(p3, "1024 hints over many VMAs with a background mmap/munmap thread: mmap_lock")
BENCH_SCENARIO(p4, "1024 scattered 4 KiB DONTNEED hints released asynchronously: caller and total CPU")
BENCH_SCENARIO(p5, "fill 256 MiB of uffd-registered memory: COPY/MOVE per 4 KiB, coalesced move list, one MOVE")
BENCH_SCENARIO(p5_fault, "userfaultfd fault round trip (fault -> handler -> COPY) p50/p99, 1 and 2 mutators")
BENCH_SCENARIO(p6, "first use in a fresh process (create + add + flush of one hint) vs a steady flush and madvise()")
BENCH_SCENARIO(p7, "library cost per hint (add + plan), no kernel work")
BENCH_SCENARIO(p8, "reclaim another process: 2080 VMAs, 128 MiB, 2 mutator threads; raw vectors vs a madvx_reclaim bound x gap sweep")
