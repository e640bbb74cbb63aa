/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/imatrix.c — quantization with an importance matrix, as llama-quantize --imatrix does it:
 * the legacy Q4_0/Q4_1/Q5_0/Q5_1 weighted quantizers (ggml's quantize_row_q{4,5}_{0,1}_impl) and
 * qk_quantize_chunk_w, ggml_quantize_chunk(type, ..., imatrix) for every type written here (the
 * K-quant and IQ4 weighted rows live next to their ref quantizers in k_quants.c and iq4.c).
 * Layer 1 (quant). formats.md §2.1-§2.4 "With an imatrix": weights qw*sqrt(σ² + x²) with the
 * row-wide σ² = Σx²/n_per_row, then make_qx_quants (Q4_0 nmax 8, Q5_0 nmax 16) or
 * make_qkx3_quants (Q4_1 nmax 15, Q5_1 nmax 31), whose scale is stored without a requantization.
 * Invariants: as quant.h (pure, every byte written, fp32 in ggml's order, -ffp-contract=off). The
 * row-wide σ² makes these rows (not blocks) the unit: callers pass whole rows.
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"
#include "base/ckd.h"
#include "base/status.h"

/* σ² = Σx²/n over the whole row, ggml's order. */
static float row_sigma2(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
    return s / (float)n;
}

static void block_weights(const float *xb, const float *qw, float sigma2, float *w) {
    for (int j = 0; j < 32; j++) w[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

/* The 5th bits of 32 codes: bit j of the result is bit 4 of L[j]. */
static uint32_t high_bits(const uint8_t *L) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qh |= ((L[j] & 0x10u) >> 4) << j;
        qh |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    return qh;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Symmetric types: Q4_0 (nmax 8) and Q5_0 (nmax 16), codes L in 0..2*nmax-1. */
static void sym_rows(const float *x, void *vy, int64_t n, const float *qw, int nmax) {
    QK_CHECK_ROW(n, 32);
    const float sigma2 = row_sigma2(x, n);
    float w[32];
    int8_t L[32];
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float *xb = x + 32 * ib;
        block_weights(xb, qw + 32 * ib, sigma2, w);
        const float d = qk_make_qx_quants(32, nmax, xb, L, w);
        const uint8_t *u = (const uint8_t *)L;
        if (nmax == 8) {
            blk_q4_0 *y = (blk_q4_0 *)vy + ib;
            y->d = qk_fp32_to_fp16(d);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(u[j] | (u[j + 16] << 4));
        } else {
            blk_q5_0 *y = (blk_q5_0 *)vy + ib;
            y->d = qk_fp32_to_fp16(d);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)((u[j] & 0x0F) | ((u[j + 16] & 0x0F) << 4));
            put_u32(y->qh, high_bits(u));
        }
    }
}

/* Affine types: Q4_1 (nmax 15) and Q5_1 (nmax 31), x ≈ d*L + m with m = F16(-the_min). */
static void affine_rows(const float *x, void *vy, int64_t n, const float *qw, int nmax) {
    QK_CHECK_ROW(n, 32);
    const float sigma2 = row_sigma2(x, n);
    float w[32], the_min;
    uint8_t L[32];
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float *xb = x + 32 * ib;
        block_weights(xb, qw + 32 * ib, sigma2, w);
        const float d = qk_make_qkx3_quants(32, nmax, xb, w, L, &the_min);
        if (nmax == 15) {
            blk_q4_1 *y = (blk_q4_1 *)vy + ib;
            y->d = qk_fp32_to_fp16(d);
            y->m = qk_fp32_to_fp16(-the_min);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
        } else {
            blk_q5_1 *y = (blk_q5_1 *)vy + ib;
            y->d = qk_fp32_to_fp16(d);
            y->m = qk_fp32_to_fp16(-the_min);
            for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
            put_u32(y->qh, high_bits(L));
        }
    }
}

void qk_quantize_row_q4_0_imatrix(const float *x, void *y, int64_t n, const float *qw) { sym_rows(x, y, n, qw, 8); }
void qk_quantize_row_q5_0_imatrix(const float *x, void *y, int64_t n, const float *qw) { sym_rows(x, y, n, qw, 16); }
void qk_quantize_row_q4_1_imatrix(const float *x, void *y, int64_t n, const float *qw) { affine_rows(x, y, n, qw, 15); }
void qk_quantize_row_q5_1_imatrix(const float *x, void *y, int64_t n, const float *qw) { affine_rows(x, y, n, qw, 31); }

typedef void (*row_w_fn)(const float *x, void *y, int64_t n, const float *qw);

/* The weighted row quantizer of `type`, NULL where llama.cpp ignores the weights. */
static row_w_fn weighted_quantizer(int type) {
    switch (type) {
    case SB_TYPE_Q4_0: return qk_quantize_row_q4_0_imatrix;
    case SB_TYPE_Q4_1: return qk_quantize_row_q4_1_imatrix;
    case SB_TYPE_Q5_0: return qk_quantize_row_q5_0_imatrix;
    case SB_TYPE_Q5_1: return qk_quantize_row_q5_1_imatrix;
    case SB_TYPE_Q2_K: return qk_quantize_row_q2_K_imatrix;
    case SB_TYPE_Q3_K: return qk_quantize_row_q3_K_imatrix;
    case SB_TYPE_Q4_K: return qk_quantize_row_q4_K_imatrix;
    case SB_TYPE_Q5_K: return qk_quantize_row_q5_K_imatrix;
    case SB_TYPE_Q6_K: return qk_quantize_row_q6_K_imatrix;
    case SB_TYPE_IQ4_NL: return qk_quantize_row_iq4_nl_imatrix;
    case SB_TYPE_IQ4_XS: return qk_quantize_row_iq4_xs_imatrix;
    default: return NULL;
    }
}

sb_status qk_quantize_chunk_w(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *qw) {
    const row_w_fn q = qw ? weighted_quantizer(type) : NULL;
    /* argument checks and every unweighted path are qk_quantize_chunk's */
    if (!q || nrows == 0 || n_per_row == 0) return qk_quantize_chunk(type, src, dst, nrows, n_per_row);
    sb_status s = qk_quantize_chunk(type, NULL, NULL, 0, n_per_row); /* validates type and n_per_row */
    if (s != SB_OK) return s;
    uint64_t row_bytes = 0, total = 0;
    if (nrows < 0 || qk_row_bytes(type, n_per_row, &row_bytes) || ckd_mul(&total, row_bytes, (uint64_t)nrows))
        return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: %lld x %lld elements", qk_get(type)->name,
                       (long long)nrows, (long long)n_per_row);
    if (!src || !dst) return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: NULL src or dst", qk_get(type)->name);
    for (int64_t r = 0; r < nrows; r++) q(src + r * n_per_row, (char *)dst + (size_t)r * (size_t)row_bytes, n_per_row, qw);
    return SB_OK;
}
