/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/kernels/bench_gemv.c — CPU GEMV (decode) and GEMM (prefill) speed of every weight type at
 * the Qwen2.5-0.5B shapes, framed against the machine's measured read bandwidth.
 * Method: (1) read bandwidth = best of 5 passes of a 2-thread summing loop over a 1 GiB buffer,
 * with and without software prefetch 4 KiB ahead (as the kernels do); the larger is the reference;
 * (2) per type and shape, the quantized matrix is copied end to end through the same 1 GiB buffer
 * and one GEMV pass runs over every copy, so weights stream from DRAM as in a real decode step
 * (L3 here is large enough to hold a single matrix, which would flatter the kernel); GB/s = weight
 * bytes / time, best of 3 passes; (3) the thread pool's empty-dispatch cost; (4) GEMM with T tokens
 * at the same shapes (weights in cache), as GMAC/s; (5) single-thread GEMV/GEMM ceilings in thread
 * CPU time (immune to other processes descheduling us, unlike the wall-clock numbers above).
 * Usage: bench_gemv [-t THREADS] [-T PREFILL_TOKENS] [-q] (-q: quick, fewer types and passes).
 * SB_CPU_ISA=scalar|avx2|avx512 caps the kernel ISA. Not a test: prints numbers only.
 */
#include "backend/cpu/cpu_kernels.h"
#include "base/threadpool.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES (1ull << 30)

// ---- read bandwidth ----

typedef struct {
    const uint64_t *p;
    int prefetch;
    uint64_t sums[256];
} bw_ctx;

static void bw_fn(void *vctx, int64_t b, int64_t e, int tid) {
    bw_ctx *c = vctx;
    const uint64_t *p = c->p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (int64_t blk = b; blk < e; blk++) { /* blocks of 4 KiB */
        const uint64_t *q = p + blk * 512;
        if (c->prefetch) /* the kernels prefetch 4 KiB ahead; measure the machine the same way */
            for (int l = 0; l < 4096; l += 64) __builtin_prefetch((const char *)q + 4096 + l);
        for (int i = 0; i < 512; i += 8) {
            s0 += q[i], s1 += q[i + 1], s2 += q[i + 2], s3 += q[i + 3];
            s4 += q[i + 4], s5 += q[i + 5], s6 += q[i + 6], s7 += q[i + 7];
        }
    }
    c->sums[tid] += s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

static double measure_bw(tp_pool *pool, const void *arena, int prefetch) {
    bw_ctx c = {.p = arena, .prefetch = prefetch};
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t = now_s();
        tp_run(pool, (int64_t)(ARENA_BYTES / 4096), 16, bw_fn, &c);
        t = now_s() - t;
        double gbs = ARENA_BYTES / t / 1e9;
        if (gbs > best) best = gbs;
    }
    uint64_t s = 0;
    for (int i = 0; i < 256; i++) s += c.sums[i];
    if (s == 42) printf(" ");  /* keep the sum alive */
    return best;
}

/* One thread, thread CPU time (time the thread was descheduled does not count). */
static double measure_bw1(const void *arena) {
    bw_ctx c = {.p = arena, .prefetch = 1};
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = cpu_s();
        bw_fn(&c, 0, (int64_t)(ARENA_BYTES / 4096), 0);
        t = cpu_s() - t;
        if (t < best) best = t;
    }
    if (c.sums[0] == 42) printf(" ");
    return ARENA_BYTES / best / 1e9;
}

// ---- dispatch overhead ----

static void empty_fn(void *ctx, int64_t b, int64_t e, int tid) { (void)ctx, (void)b, (void)e, (void)tid; }

static double dispatch_us(tp_pool *pool) {
    const int iters = 20000;
    double best = 1e9;
    for (int r = 0; r < 3; r++) {
        double t = now_s();
        for (int i = 0; i < iters; i++) tp_run(pool, 64, 1, empty_fn, NULL);
        t = (now_s() - t) / iters * 1e6;
        if (t < best) best = t;
    }
    return best;
}

// ---- GEMV / GEMM ----

static const int types[] = {SB_TYPE_Q4_K, SB_TYPE_Q6_K, SB_TYPE_Q8_0, SB_TYPE_Q5_0, SB_TYPE_IQ4_NL, SB_TYPE_Q4_0,
                            SB_TYPE_Q4_1, SB_TYPE_Q5_1, SB_TYPE_Q2_K, SB_TYPE_Q3_K, SB_TYPE_Q5_K, SB_TYPE_IQ4_XS,
                            SB_TYPE_F16, SB_TYPE_BF16, SB_TYPE_F32};
static const struct { int64_t K, N; const char *what; } shapes[] = {
    {896, 4864, "896->4864 (ffn_gate/up)"},
    {4864, 896, "4864->896 (ffn_down)"},
    {896, 151936, "896->151936 (output)"},
};

int main(int argc, char **argv) {
    int threads = 2, T = 64, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) T = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-q")) quick = 1;
        else { fprintf(stderr, "usage: %s [-t THREADS] [-T PREFILL_TOKENS] [-q]\n", argv[0]); return 2; }
    }
    tp_pool *pool = NULL;
    if (tp_create(threads, &pool) != SB_OK) { fprintf(stderr, "tp_create: %s\n", sb_last_error()); return 1; }
    unsigned char *arena = aligned_alloc(4096, ARENA_BYTES);
    if (!arena) { fprintf(stderr, "cannot allocate 1 GiB\n"); return 1; }
    memset(arena, 1, ARENA_BYTES);

    printf("SonicBoom CPU kernel benchmark: isa %s, %d threads\n", cpu_isa_name(cpu_isa_active()), threads);
    double bw_plain = measure_bw(pool, arena, 0), bw_pf = measure_bw(pool, arena, 1);
    double bw = bw_plain > bw_pf ? bw_plain : bw_pf;
    printf("read bandwidth (%d threads, 1 GiB sum, best of 5): %.2f GB/s plain loop, %.2f GB/s with software "
           "prefetch; using %.2f\n", threads, bw_plain, bw_pf, bw);
    double bw1 = measure_bw1(arena);
    printf("read bandwidth (1 thread, thread CPU time, with prefetch): %.2f GB/s\n", bw1);
    printf("thread pool: empty tp_run dispatch %.2f us\n\n", dispatch_us(pool));

    printf("GEMV, weights streamed from a 1 GiB working set (best of %d passes)\n", quick ? 1 : 3);
    printf("(last two columns: 1 thread, timed in thread CPU time, against the 1-thread bandwidth %.2f GB/s:\n"
           " immune to other processes taking the core, which a shared 2-core machine has plenty of)\n", bw1);
    printf("%-7s %-26s %9s %8s %7s %8s %7s\n", "type", "shape", "MB", "GB/s", "of bw", "1t GB/s", "of bw1");
    float *x = malloc(sizeof(float) * 151936 * 4), *out = malloc(sizeof(float) * 151936 * (size_t)(T > 4 ? T : 4));
    size_t ntypes = quick ? 4 : sizeof types / sizeof *types;
    for (size_t ti = 0; ti < ntypes; ti++) {
        int wt = types[ti];
        const qk_traits *tr = qk_get(wt);
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            int64_t K = shapes[si].K, N = shapes[si].N;
            size_t arb;
            if (cpu_act_row_bytes(wt, K, &arb) != SB_OK) {
                printf("%-7s %-26s %9s   (K %% %lld != 0: llama-quantize falls back to another type)\n", tr->name,
                       shapes[si].what, "-", (long long)tr->blck);
                continue;
            }
            uint64_t wrb;
            qk_row_bytes(wt, K, &wrb);
            size_t mbytes = (size_t)(wrb * (uint64_t)N);
            size_t copies = ARENA_BYTES / mbytes;
            if (copies < 1) copies = 1;
            /* quantize a 64-row slab once, tile it over the first copy, then copy the matrix */
            int64_t slab = N < 64 ? N : 64;
            float *src = malloc(sizeof(float) * (size_t)(slab * K));
            for (int64_t i = 0; i < slab * K; i++) src[i] = frand() * 0.05f;
            if (qk_quantize_chunk(wt, src, arena, slab, K) != SB_OK) {
                printf("%-7s quantize failed: %s\n", tr->name, sb_last_error());
                free(src);
                continue;
            }
            free(src);
            for (int64_t r = slab; r < N; r += slab) {
                int64_t rows = N - r < slab ? N - r : slab;
                memcpy(arena + (size_t)r * wrb, arena, (size_t)(rows * (int64_t)wrb));
            }
            for (size_t c = 1; c < copies && (c + 1) * mbytes <= ARENA_BYTES; c++)
                memcpy(arena + c * mbytes, arena, mbytes);
            for (int64_t i = 0; i < K * 4; i++) x[i] = frand();
            unsigned char *act = malloc(arb * 4);
            cpu_quantize_act(cpu_act_type(wt), x, act, K);
            double best = 1e30, best1 = 1e30;
            for (int p = 0; p < (quick ? 1 : 3); p++) {
                double t = now_s();
                for (size_t c = 0; c < copies; c++) cpu_matmul(pool, wt, arena + c * mbytes, K, N, act, 1, out);
                t = (now_s() - t) / (double)copies;
                if (t < best) best = t;
            }
            for (int p = 0; p < (quick ? 1 : 2); p++) { /* one thread, thread CPU time */
                double t = cpu_s();
                for (size_t c = 0; c < copies; c++) cpu_matmul(NULL, wt, arena + c * mbytes, K, N, act, 1, out);
                t = (cpu_s() - t) / (double)copies;
                if (t < best1) best1 = t;
            }
            double gbs = (double)mbytes / best / 1e9, gbs1 = (double)mbytes / best1 / 1e9;
            printf("%-7s %-26s %9.2f %8.2f %6.1f%% %8.2f %6.1f%%\n", tr->name, shapes[si].what, mbytes / 1e6, gbs,
                   100.0 * gbs / bw, gbs1, 100.0 * gbs1 / bw1);
            free(act);
        }
    }

    printf("\nGEMM (prefill), T = %d tokens, weights cache-resident (one matrix), best of 3\n", T);
    printf("%-7s %-26s %9s %10s\n", "type", "shape", "ms", "GMAC/s");
    const int gemm_types[] = {SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_Q4_K, SB_TYPE_Q6_K, SB_TYPE_Q4_0, SB_TYPE_IQ4_NL};
    float *xa = malloc(sizeof(float) * 4864 * (size_t)T);
    for (int64_t i = 0; i < 4864 * (int64_t)T; i++) xa[i] = frand();
    for (size_t ti = 0; ti < (quick ? 2 : sizeof gemm_types / sizeof *gemm_types); ti++) {
        int wt = gemm_types[ti];
        for (size_t si = 0; si < 2; si++) {
            int64_t K = shapes[si].K, N = shapes[si].N;
            size_t arb;
            if (cpu_act_row_bytes(wt, K, &arb) != SB_OK) continue;
            float *src = malloc(sizeof(float) * (size_t)(N * K));
            for (int64_t i = 0; i < N * K; i++) src[i] = frand() * 0.05f;
            qk_quantize_chunk(wt, src, arena, N, K);
            free(src);
            unsigned char *act = malloc(arb * (size_t)T);
            cpu_quantize_act(cpu_act_type(wt), xa, act, K * T);
            double best = 1e30;
            for (int p = 0; p < 3; p++) {
                double t = now_s();
                cpu_matmul(pool, wt, arena, K, N, act, T, out);
                t = now_s() - t;
                if (t < best) best = t;
            }
            printf("%-7s %-26s %9.3f %10.2f\n", qk_get(wt)->name, shapes[si].what, best * 1e3,
                   (double)K * N * T / best / 1e9);
            free(act);
        }
    }
    free(xa);

    /* Single-thread compute ceilings, timed in thread CPU time so that other processes on the
     * machine (compiles, tests) do not distort them: GEMV with the matrix in L2 (K = 4864 or 896,
     * N = 64) and GEMM with T = 128. A GEMV ceiling well above the per-core DRAM rate is what lets
     * the streaming GEMV reach the bandwidth. */
    printf("\nsingle-thread ceilings (thread CPU time, weights in cache)\n");
    printf("%-7s %16s %16s\n", "type", "GEMV GB/s", "GEMM GMAC/s");
    for (size_t ti = 0; ti < (quick ? 4 : ntypes); ti++) {
        int wt = types[ti];
        int64_t K = qk_get(wt)->blck == 256 ? 4864 : 896, N = 64, TT = 128;
        size_t arb;
        if (cpu_act_row_bytes(wt, K, &arb) != SB_OK) continue;
        float *src = malloc(sizeof(float) * (size_t)(N * K));
        float *xt = malloc(sizeof(float) * (size_t)(TT * K));
        float *ot = malloc(sizeof(float) * (size_t)(TT * N));
        unsigned char *act = malloc(arb * (size_t)TT);
        for (int64_t i = 0; i < N * K; i++) src[i] = frand() * 0.05f;
        for (int64_t i = 0; i < TT * K; i++) xt[i] = frand();
        qk_quantize_chunk(wt, src, arena, N, K);
        cpu_quantize_act(cpu_act_type(wt), xt, act, K * TT);
        uint64_t wrb;
        qk_row_bytes(wt, K, &wrb);
        double bv = 1e30, bm = 1e30;
        for (int p = 0; p < 5; p++) {
            double t = cpu_s();
            for (int r = 0; r < 50; r++) cpu_matmul(NULL, wt, arena, K, N, act, 1, ot);
            t = (cpu_s() - t) / 50;
            if (t < bv) bv = t;
            t = cpu_s();
            cpu_matmul(NULL, wt, arena, K, N, act, TT, ot);
            t = cpu_s() - t;
            if (t < bm) bm = t;
        }
        printf("%-7s %16.2f %16.2f\n", qk_get(wt)->name, (double)(wrb * (uint64_t)N) / bv / 1e9,
               (double)K * N * TT / bm / 1e9);
        free(src), free(xt), free(ot), free(act);
    }
    free(x);
    free(out);
    free(arena);
    tp_free(pool);
    return 0;
}
