/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/kernels/cuda/bench_cuda_gemv.c — decode GEMV speed on this GPU for the large shapes of
 * issue 26 (Llama-3.1-8B, Qwen2.5-32B), of Gemma-4-E4B (issue 27) and of Qwen2.5-0.5B: for each matrix and weight type, the T = 1 launch the CUDA
 * executor makes for it — cu_matmul_q8_multi with one segment where k_gemv_reg takes it and it has
 * at most 65,536 rows (the executor's GF_ROWS_MAX), else cu_matmul_q8 (the LM head); F16 weights
 * through cu_matmul_f32 — and the two launches decode makes of several matrices (Q/K/V, gate/up
 * as one multi-GEMV). Each is timed with CUDA events over R launches (best of 3 batches, after a
 * warm-up), and printed as µs a launch, GB/s of weight bytes (the bytes that must move; the
 * activation is a few KB) and that rate as a share of this GPU's copy bandwidth, measured in the
 * same run (a 1 GiB device-to-device copy, read + write). Weights are valid random blocks (64
 * quantized rows repeated): values do not change a GEMV's speed.
 * -T TOKENS (default 1): the launches a step of T tokens makes for quantized weights (a batch of
 * decoding sequences) — under cu_config.mma_min_t, cu_matmul_q8 a matrix (k_mmvq's token tiles);
 * from it, the int8 MMA small path (cu_matmul_mma_multi for a group it takes, split K through
 * scratch and k_mma_reduce, else cu_matmul_mma_small a matrix).
 * Usage: bench_cuda_gemv [-r REPS] [-m 8b|32b|e4b|q05|all] [-t Q4_K,Q6_K,Q8_0,Q4_0,F16 or any type names] [-T TOKENS]
 * [--tune SB_TUNE-style cu_config keys]
 * Built with the CUDA backend only (`make bench`). Layer: links sb_backend_cuda and sb_quant.
 */
#include "backend/cuda/cu_config.h"
#include "backend/cuda/cu_layout.h"
#include "backend/cuda/kernels.h"
#include "base/status.h"
#include "quant/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MULTI_ROWS_MAX 65536 /* the executor's GF_ROWS_MAX (runtime/cuda_fusion.h) */

typedef struct shape {
    const char *model, *what;
    int64_t K, N[3]; /* N[1], N[2]: further matrices of the same launch (0: none) */
} shape;

static const shape shapes[] = {
    {"8b", "q/k/v", 4096, {4096, 1024, 1024}}, {"8b", "o", 4096, {4096, 0, 0}},      {"8b", "gate/up", 4096, {14336, 14336, 0}},
    {"8b", "down", 14336, {4096, 0, 0}},       {"8b", "lm head", 4096, {128256, 0, 0}},
    {"32b", "q/k/v", 5120, {5120, 1024, 1024}}, {"32b", "o", 5120, {5120, 0, 0}},    {"32b", "gate/up", 5120, {27648, 27648, 0}},
    {"32b", "down", 27648, {5120, 0, 0}},       {"32b", "lm head", 5120, {152064, 0, 0}},
    /* Gemma 4 E4B: sliding and global layers' q/k/v (heads of 256 / 512), the per-layer embedding's
     * two small GEMVs (2560 -> 256 -> 2560), the 262,144-row head */
    {"e4b", "q/k/v sliding", 2560, {2048, 512, 512}}, {"e4b", "q/k/v global", 2560, {4096, 1024, 1024}},
    {"e4b", "o", 2048, {2560, 0, 0}},                  {"e4b", "gate/up", 2560, {10240, 10240, 0}},
    {"e4b", "down", 10240, {2560, 0, 0}},              {"e4b", "ple gate", 2560, {256, 0, 0}},
    {"e4b", "ple proj", 256, {2560, 0, 0}},            {"e4b", "lm head", 2560, {262144, 0, 0}},
    /* Qwen2.5-0.5B: few rows, short K (896: the legacy types only; the down projection's K 4864 takes
     * the K-quants), where the small path's tiles need splits of K to fill the GPU */
    {"q05", "q/k/v", 896, {896, 128, 128}}, {"q05", "o", 896, {896, 0, 0}}, {"q05", "gate/up", 896, {4864, 4864, 0}},
    {"q05", "down", 4864, {896, 0, 0}},     {"q05", "lm head", 896, {151936, 0, 0}},
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((int64_t)(rng >> 11) % 2000001 - 1000000) * 1e-6f;
}

#define TRY(x)                                                                     \
    do {                                                                           \
        sb_status st_ = (x);                                                       \
        if (st_ != SB_OK) {                                                        \
            fprintf(stderr, "%s: %s\n", #x, sb_last_error());                      \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* N rows of K random values of type t on the device, in its layout (cu_layout.h; 64 quantized rows
 * repeated); *bytes: the device's */
static void *weights(int t, int64_t K, int64_t N, uint64_t *bytes, cu_stream s) {
    uint64_t rb = 0;
    if (qk_row_bytes(t, K, &rb) || !qk_get(t)->from_float_ref) {
        fprintf(stderr, "type %s: no row size or quantizer for K=%lld\n", qk_get(t)->name, (long long)K);
        exit(1);
    }
    const int64_t R = 64;
    float *f = malloc((size_t)K * sizeof *f);
    uint8_t *h = malloc((size_t)(rb * R));
    for (int64_t r = 0; r < R; r++) {
        for (int64_t k = 0; k < K; k++) f[k] = frand();
        qk_get(t)->from_float_ref(f, h + rb * (uint64_t)r, K);
    }
    if (cu_pad_gguf_block(t)) { /* Q3_K / Q6_K: padded blocks */
        uint8_t *p = malloc((size_t)cu_dev_bytes(t, rb * R));
        cu_layout_to_dev(p, h, t, rb * R);
        free(h);
        h = p, rb = cu_dev_bytes(t, rb);
    }
    void *d = NULL;
    TRY(cu_malloc(&d, (size_t)(rb * (uint64_t)N), "bench weights"));
    for (int64_t r = 0; r < N; r += R) TRY(cu_memcpy_h2d((uint8_t *)d + rb * (uint64_t)r, h, (size_t)(rb * (uint64_t)(N - r < R ? N - r : R)), s));
    TRY(cu_stream_sync(s));
    free(f), free(h);
    *bytes = rb * (uint64_t)N;
    return d;
}

/* the activation of K values in the type a weight of type t multiplies with on CUDA (as
 * exec_cuda_target: q8_K for the K-quants, q8_1 for the 32-blocks, f32 for F16) */
static int act_type(int t) {
    if (t == SB_TYPE_F16 || t == SB_TYPE_BF16 || t == SB_TYPE_F32) return SB_TYPE_F32;
    return cu_has_mmvq_q8k(t) ? SB_TYPE_Q8_K : SB_TYPE_Q8_1;
}

typedef struct launch {
    cu_gemv_seg seg[CU_MULTI_MAX];
    int n;
    int64_t K, T;
    int xtype;
    const void *x; /* f32 or quantized activation */
    float *scratch; /* T > 1 on the MMA: split-K partials */
    uint64_t scratch_floats;
} launch;

/* T > 1 on quantized weights: the dp4a token tiles under mma_min_t, else the MMA small path */
static sb_status run_tokens(const launch *l, cu_stream s) {
    if (l->T < cu_cfg()->mma_min_t || !cu_has_mma(l->seg[0].wtype, l->xtype)) {
        for (int k = 0; k < l->n; k++) SB_TRY(cu_matmul_q8(s, l->seg[k].dst, l->seg[k].w, l->seg[k].wtype, l->K, l->seg[k].N, l->x, l->xtype, l->T, NULL));
        return SB_OK;
    }
    if (l->n > 1 && cu_mma_multi_split(l->seg, l->n, l->K, l->xtype, l->T, l->scratch_floats) >= 1)
        return cu_matmul_mma_multi(s, l->seg, l->n, l->K, l->x, l->xtype, l->T, l->scratch, l->scratch_floats, NULL, 0);
    for (int k = 0; k < l->n; k++)
        SB_TRY(cu_matmul_mma_small(s, l->seg[k].dst, l->seg[k].w, l->seg[k].wtype, l->K, l->seg[k].N, l->x, l->xtype, l->T, NULL, l->scratch,
                                   l->scratch_floats, NULL));
    return SB_OK;
}

static sb_status run(const launch *l, cu_stream s) {
    if (l->xtype == SB_TYPE_F32) { /* F16 weights: one f32-activation launch a matrix */
        for (int k = 0; k < l->n; k++) SB_TRY(cu_matmul_f32(s, l->seg[k].dst, l->seg[k].w, l->seg[k].wtype, l->K, l->seg[k].N, l->x, SB_TYPE_F32, l->T, NULL));
        return SB_OK;
    }
    if (l->T > 1) return run_tokens(l, s);
    bool multi = cu_gemv_reg_fits(l->seg, l->n, l->K, l->xtype, false);
    for (int k = 0; k < l->n; k++) multi = multi && l->seg[k].N <= MULTI_ROWS_MAX;
    if (multi || l->n > 1) return cu_matmul_q8_multi(s, l->seg, l->n, l->K, l->x, l->xtype, NULL, 0);
    return cu_matmul_q8(s, l->seg[0].dst, l->seg[0].w, l->seg[0].wtype, l->K, l->seg[0].N, l->x, l->xtype, 1, NULL);
}

/* µs a launch: best of 3 batches of reps, after 3 warm-up launches */
static double time_us(const launch *l, int reps, cu_stream s, void **ev) {
    for (int i = 0; i < 3; i++) TRY(run(l, s));
    double best = 1e30;
    for (int b = 0; b < 3; b++) {
        TRY(cu_event_record(ev[0], s));
        for (int i = 0; i < reps; i++) TRY(run(l, s));
        TRY(cu_event_record(ev[1], s));
        float ms = 0;
        TRY(cu_event_ms(ev[0], ev[1], &ms));
        if (ms * 1e3 / reps < best) best = ms * 1e3 / reps;
    }
    return best;
}

static double copy_gbps(cu_stream s, void **ev) {
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    TRY(cu_malloc(&a, bytes, "bench copy"));
    TRY(cu_malloc(&b, bytes, "bench copy"));
    TRY(cu_memset(a, 0x5A, bytes, s));
    double best = 0;
    for (int i = 0; i < 6; i++) {
        TRY(cu_event_record(ev[0], s));
        TRY(cu_memcpy_d2d(i & 1 ? a : b, i & 1 ? b : a, bytes, s));
        TRY(cu_event_record(ev[1], s));
        float ms = 0;
        TRY(cu_event_ms(ev[0], ev[1], &ms));
        const double gbps = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
        if (i && gbps > best) best = gbps;
    }
    cu_free(a), cu_free(b);
    return best;
}

int main(int argc, char **argv) {
    int reps = 50, T = 1;
    const char *model = "all", *types = "Q4_K,Q6_K,Q8_0,Q4_0,F16", *tune = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-r")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-m")) model = argv[i + 1];
        else if (!strcmp(argv[i], "-t")) types = argv[i + 1];
        else if (!strcmp(argv[i], "-T")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tune")) tune = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_cuda_gemv [-r REPS] [-m 8b|32b|e4b|q05|all] [-t Q4_K,Q6_K,Q8_0,Q4_0,F16,Q3_K,...] [-T TOKENS] [--tune key=value,...]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (T < 1 || T > 64) {
        fprintf(stderr, "bench_cuda_gemv: -T is 1..64 tokens\n");
        return 2;
    }
    TRY(cu_set_device(0));
    static cu_config cfg;
    cfg = cu_config_default;
    TRY(cu_config_tune(&cfg, tune)); /* a variant of cu_config.h's, for A/B runs */
    cu_cfg_bind(&cfg);
    cu_stream s;
    TRY(cu_stream_create(&s));
    void *ev[2];
    TRY(cu_events_create(ev, 2));
    const double copy = copy_gbps(s, ev);
    printf("copy bandwidth %.0f GB/s (1 GiB device to device, read + write); %d launches a batch, best of 3; %d token%s\n\n", copy, reps, T,
           T > 1 ? "s" : "");
    printf("| model | matrices | type | K | N | MB | us | GB/s | %% of copy |\n|---|---|---|---:|---|---:|---:|---:|---:|\n");
    for (int t = 0; t < SB_TYPE_COUNT; t++) {
        const char *name = qk_get(t)->name;
        if (!name || !strstr(types, name)) continue;
        const int xt = act_type(t);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            const shape *sh = &shapes[k];
            if (strcmp(model, "all") && strcmp(model, sh->model)) continue;
            if (sh->K % qk_get(t)->blck) continue; /* a K this type's blocks do not divide (Qwen2.5-0.5B's 896 for the K-quants) */
            const int64_t KT = sh->K * T;
            float *xf = malloc((size_t)KT * sizeof *xf);
            for (int64_t i = 0; i < KT; i++) xf[i] = frand();
            void *dx = NULL, *dq = NULL;
            uint64_t xb = 0;
            TRY(cu_malloc(&dx, (size_t)KT * 4, "bench x"));
            TRY(cu_memcpy_h2d(dx, xf, (size_t)KT * 4, s));
            launch l = {.K = sh->K, .T = T, .xtype = xt, .x = dx};
            if (xt != SB_TYPE_F32) {
                qk_row_bytes(xt, sh->K, &xb);
                TRY(cu_malloc(&dq, (size_t)xb * T, "bench xq"));
                TRY(cu_quantize_act(s, xt, dq, dx, sh->K, T));
                l.x = dq;
            }
            uint64_t total = 0;
            char ns[64] = "";
            for (int m = 0; m < 3 && sh->N[m]; m++) {
                uint64_t b = 0;
                l.seg[m] = (cu_gemv_seg){.w = weights(t, sh->K, sh->N[m], &b, s), .wtype = t, .N = sh->N[m]};
                TRY(cu_malloc((void **)&l.seg[m].dst, (size_t)sh->N[m] * 4 * T, "bench y"));
                l.scratch_floats += cu_mma_small_scratch(sh->K, sh->N[m], T); /* a group's partials: its members' together, as the executor sizes them */
                total += b;
                snprintf(ns + strlen(ns), sizeof ns - strlen(ns), "%s%lld", m ? "+" : "", (long long)sh->N[m]);
                l.n = m + 1;
            }
            if (l.scratch_floats) TRY(cu_malloc((void **)&l.scratch, (size_t)l.scratch_floats * 4, "bench scratch"));
            const double us = time_us(&l, reps, s, ev), gbps = (double)total / (us * 1e-6) / 1e9;
            printf("| %s | %s | %s | %lld | %s | %.1f | %.2f | %.0f | %.0f%% |\n", sh->model, sh->what, name, (long long)sh->K, ns, total / 1e6, us,
                   gbps, 100.0 * gbps / copy);
            fflush(stdout);
            for (int m = 0; m < l.n; m++) cu_free((void *)l.seg[m].w), cu_free(l.seg[m].dst);
            cu_free(dx), cu_free(dq), cu_free(l.scratch), free(xf);
        }
    }
    cu_events_destroy(ev, 2);
    cu_stream_destroy(s);
    return 0;
}
