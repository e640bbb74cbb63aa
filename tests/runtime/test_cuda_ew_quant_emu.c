/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_ew_quant_emu.c — the chain with its quantize tail (cu_ew_quant_rows,
 * device/ew_rows.cuh; pass fuse_chain_quant) without a GPU: its device code runs under the host
 * emulation (tests/runtime/cuda_ew_quant_emu.cc, tests/codegen/emu) and must give the bytes of the
 * kernels it replaces run one after the other under the same emulation — the chain (k_ew_rows, 256
 * threads) then the plain quantizer (k_quant_rows) or the norm quantizer (k_rms_norm_quant's
 * 1024-thread sum, or k_act_rows's act_build sum with act_fast) — in both the f32 row and the
 * quantized blocks, into NaN-poisoned outputs. Chains: gemma's post-norm + residual (rms_norm; mul;
 * add), one with the norm in the middle and a broadcast add, one without a norm (scale; softcap;
 * add); rows of 96 (q8_1 only), 512, 2560 and 2816 values, 1 and 3 rows, q8_1 and q8_K, the tail's
 * norm with and without a weight. Also within NMSE 1e-10 of op_rms_norm / op_mul / op_add for the
 * gemma chain's f32 row. What this catches: a missing barrier between the chain and its tail (it
 * did), a wrong layout, tail or row; not the summation order alone (a double sum of these rows
 * rounds the same in any order almost always: a chain summing in the 1024-thread order passed).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <math.h>

/* the chains (cuda_ew_quant_emu.cc chain_of): 0 gemma's post-norm + residual (rms_norm; mul w; add a), 1
 * add a; rms_norm; scale; add w (broadcast), 2 scale; softcap; add a (no norm) */
typedef int (*ew_quant_fn)(float *, const float *, long long, long long, int, const float *, const float *, int, uint8_t *, int, const float *,
                           float);
typedef int (*ew_rows_fn)(float *, const float *, long long, long long, int, const float *, const float *);
typedef int (*quant_fn)(uint8_t *, const float *, long long, long long, int, int, const float *, float);
typedef int (*ew_flat_fn)(float *, const float *, long long, long long, int, const float *, const float *, int);
static ew_flat_fn emu_ew_flat;
static ew_quant_fn emu_ew_quant;
static ew_rows_fn emu_ew_rows;
static quant_fn emu_quant;
static uint64_t seed = 0xE0C4A17ull;

static uint64_t row_bytes(int xq8k, int64_t E) { return xq8k ? (uint64_t)(E / 256) * 292 : (uint64_t)(E / 32) * 36; }

static void check_case(int chain, int64_t E, int64_t rows, int xq8k, int tail, bool weighted) {
    char label[128];
    snprintf(label, sizeof label, "chain %d E=%lld rows=%lld %s tail %s%s", chain, (long long)E, (long long)rows, xq8k ? "q8_K" : "q8_1",
             tail == 0 ? "quantize" : tail == 1 ? "rms_norm_quant" : "rms_norm_quant (act_fast)", weighted ? " * w" : "");
    const int64_t n = E * rows;
    const uint64_t qb = row_bytes(xq8k, E) * (uint64_t)rows;
    float *x = malloc((size_t)n * 4), *a = malloc((size_t)n * 4), *w = malloc((size_t)E * 4), *qw = malloc((size_t)E * 4);
    float *y1 = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
    uint8_t *q1 = malloc(qb), *q2 = malloc(qb);
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(&seed) * (i % 13 == 0 ? 6.0f : 1.0f), a[i] = test_rand_normal(&seed);
    for (int64_t i = 0; i < E; i++) w[i] = 1.0f + 0.3f * test_rand_normal(&seed), qw[i] = 1.0f + 0.3f * test_rand_normal(&seed);
    memset(y1, 0xff, (size_t)n * 4), memset(y2, 0xff, (size_t)n * 4), memset(q1, 0xff, qb), memset(q2, 0xff, qb);
    const float *tw = weighted ? qw : NULL;
    CHECKF(emu_ew_quant(y1, x, E, rows, chain, a, w, xq8k, q1, tail, tw, 1e-6f) == 0, "%s: fused emulation deadlocked", label);
    CHECKF(emu_ew_rows(y2, x, E, rows, chain, a, w) == 0 && emu_quant(q2, y2, E, rows, xq8k, tail, tw, 1e-6f) == 0, "%s: unfused emulation deadlocked",
           label);
    CHECKF(!memcmp(y1, y2, (size_t)n * 4), "%s: the chain's f32 rows differ from k_ew_rows's", label);
    CHECKF(!memcmp(q1, q2, qb), "%s: the quantized rows differ from the separate quantizer's", label);
    if (chain == 0) { /* the f32 row against the reference ops */
        float *r = malloc((size_t)n * 4);
        op_rms_norm(r, x, E, 0, rows, 1e-6f);
        for (int64_t t = 0; t < rows; t++) op_mul(r + t * E, r + t * E, w, E, E), op_add(r + t * E, r + t * E, a + t * E, E, E);
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) num += ((double)y1[i] - r[i]) * ((double)y1[i] - r[i]), den += (double)r[i] * r[i];
        CHECKF(num / den < 1e-10, "%s: f32 row vs op_rms_norm/op_mul/op_add NMSE %g", label, num / den);
        free(r);
    }
    free(x), free(a), free(w), free(qw), free(y1), free(y2), free(q1), free(q2);
}

/* chain 2 (scale; softcap; add: no norm) over a grid of all values (k_ew_flat) into NaN-poisoned
 * rows: k_ew_rows's bits, with a grid that covers every value once or strides, one row longer than
 * many blocks, a thread's values crossing rows; also within NMSE 1e-12 of x * 3 -> op_softcap -> op_add */
static void check_flat(int64_t E, int64_t rows, int blocks) {
    char label[96];
    snprintf(label, sizeof label, "flat chain E=%lld rows=%lld blocks=%d", (long long)E, (long long)rows, blocks);
    const int64_t n = E * rows;
    float *x = malloc((size_t)n * 4), *a = malloc((size_t)n * 4), *w = malloc((size_t)E * 4), *y1 = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(&seed) * 3.0f, a[i] = test_rand_normal(&seed);
    for (int64_t i = 0; i < E; i++) w[i] = test_rand_normal(&seed);
    memset(y1, 0xff, (size_t)n * 4), memset(y2, 0xff, (size_t)n * 4);
    CHECKF(emu_ew_flat(y1, x, E, rows, 2, a, w, blocks) == 0 && emu_ew_rows(y2, x, E, rows, 2, a, w) == 0, "%s: emulation deadlocked", label);
    CHECKF(!memcmp(y1, y2, (size_t)n * 4), "%s: differs from k_ew_rows's", label);
    float *r = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) r[i] = x[i] * 3.0f;
    op_softcap(r, r, n, 5.0f);
    op_add(r, r, a, n, n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)y1[i] - r[i]) * ((double)y1[i] - r[i]), den += (double)r[i] * r[i];
    CHECKF(num / den < 1e-12, "%s: vs op_softcap / op_add NMSE %g", label, num / den);
    free(x), free(a), free(w), free(y1), free(y2), free(r);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_ew_quant_emu.cc");
    if (h) {
        *(void **)&emu_ew_quant = dlsym(h, "sb_emu_ew_quant");
        *(void **)&emu_ew_rows = dlsym(h, "sb_emu_ew_rows");
        *(void **)&emu_quant = dlsym(h, "sb_emu_quant");
        *(void **)&emu_ew_flat = dlsym(h, "sb_emu_ew_flat");
        CHECK(emu_ew_quant && emu_ew_rows && emu_quant && emu_ew_flat);
    }
    if (emu_ew_quant && emu_ew_rows && emu_quant && emu_ew_flat) {
        check_flat(20000, 1, 79);  /* a logits row over the grid, one value a thread */
        check_flat(20000, 1, 7);   /* ... striding */
        check_flat(2560, 3, 5);    /* rows in one stride: a thread's values cross rows */
        check_flat(96, 5, 2);
        int cases = 0;
        const int64_t Es[] = {96, 512, 2560, 2816};
        for (int chain = 0; chain < 3; chain++)
            for (int e = 0; e < 4; e++)
                for (int xq8k = 0; xq8k < 2; xq8k++)
                    for (int tail = 0; tail < 3; tail++) {
                        const int64_t E = Es[e];
                        if (xq8k && E % 256) continue;
                        if (chain != 0 && e != 2 && tail != 1) continue; /* the gemma chain everywhere, the others sampled */
                        check_case(chain, E, (chain + e + tail) % 2 ? 3 : 1, xq8k, tail, tail != 0 && (e + tail) % 2 == 0);
                        cases++;
                    }
        check_case(0, 2560, 1, 1, 1, true); /* E4B's post-attention norm + add -> ffn_norm, one decode row */
        printf("%d chain + quantize-tail cases compared byte for byte with the kernels apart\n", cases + 1);
    }
    emu_build_done(h);
    return test_summary();
}
