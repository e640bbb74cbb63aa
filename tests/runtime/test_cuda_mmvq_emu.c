/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_mmvq_emu.c — the T = 1 dp4a GEMV's non-finite flag (cu_epilogue.nonfinite:
 * an LM head that checks the logits as it writes them) without a GPU: cu_matmul_q8's k_mmvq1 (one row
 * a warp, and R = 2 / 4 rows a warp past 65,536 rows) and k_mmvq_long (K past CU_MMVQ_LONG_K) run
 * under the host emulation (tests/runtime/cuda_mmvq_emu.cc) into NaN-poisoned outputs, Q8_0 weights
 * on q8_1 activations and Q6_K on q8_K:
 *  - finite weights: the flag stays 0 and every row is the reference (the f64 dot of the reference
 *    dequantizers' values plus the bias, within 1e-5 of the sum of |terms|);
 *  - one row's block scale NaN: the flag is 1, that row is NaN, the others the reference;
 *  - a bias of +Inf on one row (the epilogue's value is what is checked): the flag is 1;
 *  - the flag on a launch of T > 1 fails with SB_ERR_INTERNAL (only T = 1 honours it).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "dev_layout.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <math.h>

typedef int (*mmvq_fn)(float *, const void *, int, long long, long long, const void *, int, long long, const float *, unsigned *, int);
static mmvq_fn emu_mmvq;
static uint64_t seed = 0x4E4E46ull;

typedef struct lm_head {
    int type, xtype;
    int64_t N, K;
    uint64_t rb;
    uint8_t *w;  /* N rows of rb bytes */
    float *deq;  /* [N][K] the reference dequantizer's values */
    float *bias; /* [N] */
    uint8_t *xq; /* the activation, quantized */
    float *xd;   /* ... and dequantized */
} lm_head;

static lm_head make_head(int type, int xtype, int64_t N, int64_t K) {
    const qk_traits *tr = qk_get(type);
    lm_head h = {.type = type, .xtype = xtype, .N = N, .K = K, .rb = (uint64_t)(K / tr->blck) * (uint64_t)tr->type_size};
    h.w = aligned_alloc(256, (size_t)((N * h.rb + 255) & ~(uint64_t)255));
    h.deq = malloc(sizeof(float) * (size_t)(N * K));
    h.bias = malloc(sizeof(float) * (size_t)N);
    h.xq = aligned_alloc(64, (size_t)((K / 32 * sizeof(blk_q8_1) + K / 256 * sizeof(blk_q8_K) + 63) & ~(size_t)63));
    h.xd = malloc(sizeof(float) * (size_t)K);
    float *row = malloc(sizeof(float) * (size_t)K);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) row[k] = 0.05f * test_rand_normal(&seed);
        tr->from_float_ref(row, h.w + (uint64_t)n * h.rb, K);
        tr->to_float(h.w + (uint64_t)n * h.rb, h.deq + n * K, K);
        h.bias[n] = test_rand_normal(&seed);
    }
    h.w = test_to_dev_layout(type, h.w, (uint64_t)N * h.rb); /* the kernels read the device's layout */
    h.rb = emu_dev_bytes(type, h.rb);
    for (int64_t k = 0; k < K; k++) row[k] = test_rand_normal(&seed);
    if (xtype == SB_TYPE_Q8_K) qk_quantize_row_q8_K_ref(row, h.xq, K), qk_dequantize_row_q8_K(h.xq, h.xd, K);
    else qk_quantize_row_q8_1_ref(row, h.xq, K), qk_dequantize_row_q8_1(h.xq, h.xd, K);
    free(row);
    return h;
}

static void free_head(lm_head *h) { free(h->w), free(h->deq), free(h->bias), free(h->xq), free(h->xd); }

/* the launch into NaN-poisoned dst, flag starting 0; rows off the reference (bad_row: expected NaN) */
static int run_head(const char *label, const lm_head *h, int head_rows, int64_t bad_row, unsigned *flag) {
    float *dst = malloc(sizeof(float) * (size_t)h->N);
    for (int64_t n = 0; n < h->N; n++) dst[n] = NAN;
    *flag = 0;
    const int rc = emu_mmvq(dst, h->w, h->type, h->K, h->N, h->xq, h->xtype, 1, h->bias, flag, head_rows);
    CHECKF(rc == 0, "%s: the launch returned %d", label, rc);
    int off = 0;
    for (int64_t n = 0; n < h->N; n++) {
        double ref = h->bias[n], mag = fabs(h->bias[n]);
        for (int64_t k = 0; k < h->K; k++) ref += (double)h->deq[n * h->K + k] * h->xd[k], mag += fabs((double)h->deq[n * h->K + k] * h->xd[k]);
        const bool ok = n == bad_row ? !isfinite(dst[n]) : fabs(dst[n] - ref) <= 1e-5 * mag + 1e-30;
        if (!ok && off++ < 3) fprintf(stderr, "%s: row %lld: %.9g, reference %.9g\n", label, (long long)n, dst[n], ref);
    }
    free(dst);
    return off;
}

/* finite, a NaN row, an infinite bias: the flag as each must leave it */
static void check_head(int type, int xtype, int64_t N, int64_t K, int head_rows) {
    char label[96];
    snprintf(label, sizeof label, "%s x %s N=%lld K=%lld R=%d", qk_get(type)->name, qk_get(xtype)->name, (long long)N, (long long)K, head_rows);
    lm_head h = make_head(type, xtype, N, K);
    unsigned flag = 7;
    int off = run_head(label, &h, head_rows, -1, &flag);
    CHECKF(off == 0 && flag == 0, "%s, finite: %d rows off, flag %u", label, off, flag);
    const int64_t bad = N / 2 + 1;
    uint8_t *scale = h.w + (uint64_t)bad * h.rb + (type == SB_TYPE_Q6_K ? h.rb - emu_dev_bytes(type, 210) + 208 : 0); /* the row's first block's f16 d (Q6_K: last block's) */
    const uint8_t keep[2] = {scale[0], scale[1]};
    scale[0] = 0x00, scale[1] = 0x7E; /* f16 NaN */
    off = run_head(label, &h, head_rows, bad, &flag);
    CHECKF(off == 0 && flag == 1, "%s, a NaN row: %d rows off, flag %u", label, off, flag);
    scale[0] = keep[0], scale[1] = keep[1];
    h.bias[bad] = INFINITY;
    off = run_head(label, &h, head_rows, bad, &flag);
    CHECKF(off == 0 && flag == 1, "%s, an infinite bias: %d rows off, flag %u", label, off, flag);
    free_head(&h);
}

int main(void) {
    void *so = emu_build("tests/runtime/cuda_mmvq_emu.cc");
    if (so) {
        *(void **)&emu_mmvq = dlsym(so, "sb_emu_mmvq");
        CHECK(emu_mmvq != NULL && test_dev_layout_load(so));
    }
    if (emu_mmvq && emu_to_dev_layout) {
        check_head(SB_TYPE_Q8_0, SB_TYPE_Q8_1, 300, 256, 1);   /* k_mmvq1, a row a warp */
        check_head(SB_TYPE_Q6_K, SB_TYPE_Q8_K, 77, 512, 1);    /* a K-quant head on q8_K */
        check_head(SB_TYPE_Q8_0, SB_TYPE_Q8_1, 65539, 64, 2);  /* past 65,536 rows: 2 rows a warp, a ragged last block */
        check_head(SB_TYPE_Q8_0, SB_TYPE_Q8_1, 65540, 32, 4);  /* ... 4 */
        check_head(SB_TYPE_Q8_0, SB_TYPE_Q8_1, 21, 8192, 1);   /* k_mmvq_long: four warps a row */
        /* the flag on a prompt's launch: refused, nothing run */
        lm_head h = make_head(SB_TYPE_Q8_0, SB_TYPE_Q8_1, 8, 64);
        float dst[16];
        unsigned flag = 0;
        CHECK(emu_mmvq(dst, h.w, h.type, h.K, h.N, h.xq, h.xtype, 2, NULL, &flag, 1) == SB_ERR_INTERNAL && flag == 0);
        free_head(&h);
    }
    emu_build_done(so);
    return test_summary();
}
