/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/kernels/bench_util.h — what the CPU kernel benchmarks share: wall and thread-CPU clocks in
 * seconds, and a fixed-seed xorshift source of values in [-1, 1) (the same sequence every run).
 */
#ifndef SB_BENCH_UTIL_H
#define SB_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t bench_rng = 88172645463325252ull;
static inline float frand(void) {
    bench_rng ^= bench_rng << 13, bench_rng ^= bench_rng >> 7, bench_rng ^= bench_rng << 17;
    return (float)((bench_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

#endif
