/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/kernels/bench_q4k.c — decode GEMV (T = 1) speed of Q4_K beside Q6_K and Q8_0 through
 * cpu_matmul (the entry point and kernel table the executor calls), on one thread unless -t says
 * otherwise, in GB/s of weight bytes, at K = 1536 / 2048 / 4096 / 8960:
 *   L2:   one matrix of ~256 KiB (N rounded to a multiple of 8), called over and over, so its
 *         weights stay in L2: the kernel's compute ceiling;
 *   DRAM: the matrix copied end to end through a 1 GiB arena (far larger than L3) and one GEMV
 *         run over every copy, as a decode step streams its weights: the number that matters.
 * Framed by one core's plain read bandwidth (a summing loop over the same arena, with and without
 * software prefetch 4 KiB ahead). Every time is the best of several passes, in wall-clock time
 * and (1 thread) in thread CPU time, which ignores time the core was taken by other processes.
 * Usage: bench_q4k [-t THREADS] [-r PASSES] [-k K] [-y TYPE] (-k, -y: only that K / type name, for
 * quick A/B runs). SB_CPU_ISA=scalar|avx2|avx512 caps the kernel ISA.
 * Not a test: prints numbers only.
 */
#include "backend/cpu/cpu_kernels.h"
#include "base/threadpool.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES (1ull << 30)
#define L2_BYTES (256u << 10)

/* One core's read bandwidth: 8 independent u64 sums over the arena, optionally prefetching 4 KiB
 * ahead as the kernels do. Returns GB/s (best of passes) in wall time and in thread CPU time. */
static void read_bw(const unsigned char *arena, int prefetch, int passes, double *wall, double *cpu) {
    const uint64_t *p = (const uint64_t *)arena;
    uint64_t keep = 0;
    double bw = 1e30, bc = 1e30;
    for (int r = 0; r < passes; r++) {
        double t = now_s(), c = cpu_s();
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        for (size_t blk = 0; blk < ARENA_BYTES / 4096; blk++) {
            const uint64_t *q = p + blk * 512;
            if (prefetch)
                for (int l = 0; l < 4096; l += 64) __builtin_prefetch((const char *)q + 4096 + l);
            for (int i = 0; i < 512; i += 8) {
                s0 += q[i], s1 += q[i + 1], s2 += q[i + 2], s3 += q[i + 3];
                s4 += q[i + 4], s5 += q[i + 5], s6 += q[i + 6], s7 += q[i + 7];
            }
        }
        c = cpu_s() - c, t = now_s() - t;
        keep += s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
        if (t < bw) bw = t;
        if (c < bc) bc = c;
    }
    if (keep == 42) printf(" "); /* keep the sums alive */
    *wall = ARENA_BYTES / bw / 1e9;
    *cpu = ARENA_BYTES / bc / 1e9;
}

/* Quantizes N rows of K into dst (a 64-row slab, tiled: the kernels' speed does not depend on
 * the values, and quantizing 1 GiB would take minutes). */
static int make_matrix(int wt, int64_t K, int64_t N, unsigned char *dst, size_t wrb) {
    int64_t slab = N < 64 ? N : 64;
    float *src = malloc(sizeof(float) * (size_t)(slab * K));
    if (!src) return -1;
    for (int64_t i = 0; i < slab * K; i++) src[i] = frand() * 0.05f;
    int rc = qk_quantize_chunk(wt, src, dst, slab, K) == SB_OK ? 0 : -1;
    free(src);
    for (int64_t r = slab; rc == 0 && r < N; r += slab)
        memcpy(dst + (size_t)r * wrb, dst, (size_t)((N - r < slab ? N - r : slab) * (int64_t)wrb));
    return rc;
}

/* Best-of-passes seconds per GEMV over `copies` consecutive matrices (wall; thread CPU if 1 thread). */
static void time_gemv(tp_pool *pool, int wt, const unsigned char *W, size_t mbytes, size_t copies, int64_t K,
                      int64_t N, const void *act, float *out, int passes, double *wall, double *cpu) {
    double bw = 1e30, bc = 1e30;
    for (int p = 0; p < passes; p++) {
        double t = now_s(), c = cpu_s();
        for (size_t i = 0; i < copies; i++) cpu_matmul(pool, wt, W + i * mbytes, K, N, act, 1, out);
        c = (cpu_s() - c) / (double)copies, t = (now_s() - t) / (double)copies;
        if (t < bw) bw = t;
        if (c < bc) bc = c;
    }
    *wall = bw, *cpu = bc;
}

int main(int argc, char **argv) {
    int threads = 1, passes = 5;
    long long only_k = 0;
    const char *only_type = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) passes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) only_k = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-y") && i + 1 < argc) only_type = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-t THREADS] [-r PASSES] [-k K] [-y TYPE]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || passes < 1) {
        fprintf(stderr, "error: -t and -r take positive counts\n");
        return 2;
    }
    tp_pool *pool = NULL;
    if (threads > 1 && tp_create(threads, &pool) != SB_OK) {
        fprintf(stderr, "error: tp_create: %s\n", sb_last_error());
        return 1;
    }
    unsigned char *arena = aligned_alloc(4096, ARENA_BYTES);
    if (!arena) {
        fprintf(stderr, "error: cannot allocate the 1 GiB arena\n");
        return 1;
    }
    memset(arena, 1, ARENA_BYTES);
    printf("bench_q4k: isa %s, %d thread(s), best of %d passes\n", cpu_isa_name(cpu_isa_active()), threads, passes);
    double w0, c0, w1, c1;
    read_bw(arena, 0, 3, &w0, &c0);
    read_bw(arena, 1, 3, &w1, &c1);
    printf("1-core read bandwidth (1 GiB sum): plain %.2f GB/s (cpu time %.2f), prefetch 4 KiB %.2f GB/s (cpu time "
           "%.2f)\n\n", w0, c0, w1, c1);

    static const int types[] = {SB_TYPE_Q4_K, SB_TYPE_Q6_K, SB_TYPE_Q8_0};
    static const int64_t Ks[] = {1536, 2048, 4096, 8960};
    static const int64_t Ns_dram[] = {1024, 6144};
    printf("%-5s %5s %6s %-4s %9s %9s %9s %9s\n", "type", "K", "N", "mem", "MB", "GB/s", "cpu GB/s", "ns/row");
    float *x = malloc(sizeof(float) * 8960), *out = malloc(sizeof(float) * 8192);
    unsigned char *act = malloc(8960 * 2);
    for (int i = 0; i < 8960; i++) x[i] = frand();
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const int wt = types[ti];
        if (only_type && strcmp(only_type, qk_get(wt)->name) != 0) continue;
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
            const int64_t K = Ks[ki];
            if (only_k && K != only_k) continue;
            uint64_t wrb;
            size_t arb;
            if (cpu_act_row_bytes(wt, K, &arb) != SB_OK || qk_row_bytes(wt, K, &wrb) != 0) continue;
            cpu_quantize_act(cpu_act_type(wt), x, act, K);
            for (int m = 0; m < 1 + (int)(sizeof Ns_dram / sizeof *Ns_dram); m++) {
                int64_t N = m == 0 ? (int64_t)(L2_BYTES / wrb) / 8 * 8 : Ns_dram[m - 1];
                size_t mbytes = (size_t)(wrb * (uint64_t)N);
                size_t copies = m == 0 ? 1 : ARENA_BYTES / mbytes;
                if (make_matrix(wt, K, N, arena, (size_t)wrb) != 0) {
                    fprintf(stderr, "error: quantize %s: %s\n", qk_get(wt)->name, sb_last_error());
                    return 1;
                }
                for (size_t c = 1; c < copies; c++) memcpy(arena + c * mbytes, arena, mbytes);
                double tw, tc;
                if (m == 0) { /* warm up, then repeat the same matrix: (reps) calls per pass */
                    const size_t reps = 2000;
                    double bw = 1e30, bc = 1e30;
                    for (int p = 0; p < passes + 1; p++) {
                        double t = now_s(), c = cpu_s();
                        for (size_t r = 0; r < reps; r++) cpu_matmul(pool, wt, arena, K, N, act, 1, out);
                        c = (cpu_s() - c) / reps, t = (now_s() - t) / reps;
                        if (p > 0 && t < bw) bw = t;
                        if (p > 0 && c < bc) bc = c;
                    }
                    tw = bw, tc = bc;
                } else {
                    time_gemv(pool, wt, arena, mbytes, copies, K, N, act, out, passes, &tw, &tc);
                }
                printf("%-5s %5lld %6lld %-4s %9.3f %9.2f %9.2f %9.2f\n", qk_get(wt)->name, (long long)K, (long long)N,
                       m == 0 ? "L2" : "DRAM", mbytes / 1e6, mbytes / tw / 1e9, threads == 1 ? mbytes / tc / 1e9 : 0.0,
                       tw / (double)N * 1e9);
            }
        }
    }
    free(x), free(out), free(act), free(arena);
    tp_free(pool);
    return 0;
}
