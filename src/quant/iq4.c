/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/iq4.c — IQ4_NL (32-blocks) and IQ4_XS (256-blocks with 6-bit sub-block scales): 4-bit
 * indices into the non-linear table kvalues_iq4nl (formats.md §2.12).
 * Layer 1 (quant).
 * Code paths (formats.md §2.14):
 *  - llama-quantize without imatrix: IQ4_NL -> quantize_iq4_nl (ntry = 7, then L recomputed from
 *    the unrounded d) = qk_quantize_row_iq4_nl; IQ4_XS -> quantize_iq4_xs (ntry = 7), which is also
 *    quantize_row_iq4_xs_ref = qk_quantize_row_iq4_xs_ref.
 *  - quantize_row_iq4_nl_ref (ntry = -1, no recompute) is ggml's CPU from_float (KV-cache copies):
 *    qk_quantize_row_iq4_nl_ref. ggml leaves a near-zero block's L as whatever its scratch held;
 *    we store L = 0 there (qs = 0x00; d = 0, so the values are 0 either way).
 * Invariants: fp32 in the order written (-ffp-contract=off); best_index ties go to the upper index.
 *  - with an importance matrix (quantize_iq4_nl / quantize_iq4_xs with quant_weights): the same
 *    search with weights qw*sqrt(σ² + x²), σ² = Σx² over the super-block times 2/super-block size
 *    (32 for IQ4_NL, 256 for IQ4_XS): qk_quantize_row_iq4_{nl,xs}_imatrix.
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

// ---- helpers ----

/* Index of the table entry nearest to v (table sorted ascending); ties go to the upper index. */
static inline int best_index_iq4(float v) {
    const int8_t *val = kvalues_iq4nl;
    if (v <= val[0]) return 0;
    if (v >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (v < val[mav]) mu = mav;
        else ml = mav;
    }
    return v - val[mu - 1] < val[mu] - v ? mu - 1 : mu;
}

/* The weights of one 32-sub-block: x² without an imatrix, qw*sqrt(sigma2 + x²) with one. */
static void sub_block_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int j = 0; j < 32; j++) weight[j] = qw ? qw[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
}

/* ggml's sigma2 of a super-block: (Σx²) * (2/size), in that order. */
static float super_block_sigma2(const float *x, int size) {
    float s = 0;
    for (int j = 0; j < size; j++) s += x[j] * x[j];
    return s * (2.f / (float)size);
}

/* Best scale of one 32-sub-block with the given weights (quantize_row_iq4_nl_impl's inner search).
 * Writes the first-pass L (from d0 = ±max/kv[0]); returns d (0 for a near-zero group). */
static float fit_sub_block(const float *xb, uint8_t *Lb, int ntry, const float *weight) {
    const float max = qk_signed_absmax(32, xb);
    if (fabsf(max) < QK_GROUP_MAX_EPS) {
        memset(Lb, 0, 32);
        return 0;
    }
    const float kv0 = (float)kvalues_iq4nl[0];
    float d = ntry > 0 ? -max / kv0 : max / kv0;
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        const int l = best_index_iq4(id * xb[j]);
        Lb[j] = (uint8_t)l;
        const float q = (float)kvalues_iq4nl[l];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        id = ((float)itry + kv0) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const int l = best_index_iq4(id * xb[j]);
            const float q = (float)kvalues_iq4nl[l];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack_nibbles(uint8_t *qs, const uint8_t *L, int n) {
    for (int i = 0; i < n / 32; i++) {
        for (int j = 0; j < 16; j++) qs[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

// ---- IQ4_NL ----

static void quantize_iq4_nl_rows(const float *x, void *vy, int64_t n, int ntry, const float *qw) {
    QK_CHECK_ROW(n, QK4_NL);
    blk_iq4_nl *y = (blk_iq4_nl *)vy;
    uint8_t L[QK4_NL];
    float weight[QK4_NL];
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        sub_block_weights(x, qw ? qw + QK4_NL * i : NULL, qw ? super_block_sigma2(x, QK4_NL) : 0.f, weight);
        const float d = fit_sub_block(x, L, ntry, weight);
        y[i].d = qk_fp32_to_fp16(d);
        if (ntry > 0) {
            /* recompute L from the unrounded d; d == 0 gives id = 0 and L = 8 (qs 0x88) */
            const float id = d ? 1 / d : 0;
            for (int j = 0; j < QK4_NL; j++) L[j] = (uint8_t)best_index_iq4(id * x[j]);
        }
        pack_nibbles(y[i].qs, L, QK4_NL);
    }
}

void qk_quantize_row_iq4_nl_ref(const float *x, void *y, int64_t n) { quantize_iq4_nl_rows(x, y, n, -1, NULL); }

void qk_quantize_row_iq4_nl(const float *x, void *y, int64_t n) { quantize_iq4_nl_rows(x, y, n, 7, NULL); }

void qk_quantize_row_iq4_nl_imatrix(const float *x, void *y, int64_t n, const float *qw) {
    quantize_iq4_nl_rows(x, y, n, 7, qw);
}

void qk_dequantize_row_iq4_nl(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK4_NL);
    const blk_iq4_nl *x = (const blk_iq4_nl *)vx;
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        const float d = qk_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)kvalues_iq4nl[x[i].qs[j] & 0xF];
            y[j + QK4_NL / 2] = d * (float)kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

// ---- IQ4_XS ----

static void quantize_iq4_xs_rows(const float *x, void *vy, int64_t n, const float *qw);

void qk_quantize_row_iq4_xs_ref(const float *x, void *vy, int64_t n) { quantize_iq4_xs_rows(x, vy, n, NULL); }

void qk_quantize_row_iq4_xs_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    quantize_iq4_xs_rows(x, vy, n, qw);
}

static void quantize_iq4_xs_rows(const float *x, void *vy, int64_t n, const float *qw) {
    QK_CHECK_ROW(n, QK_K);
    blk_iq4_xs *y = (blk_iq4_xs *)vy;
    uint8_t L[QK_K];
    float scales[QK_K / 32], weight[32];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float sigma2 = qw ? super_block_sigma2(x, QK_K) : 0.f;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            sub_block_weights(x + 32 * ib, qw ? qw + QK_K * i + 32 * ib : NULL, sigma2, weight);
            scales[ib] = fit_sub_block(x + 32 * ib, L + 32 * ib, 7, weight);
        }
        const float max_scale = qk_signed_absmax(QK_K / 32, scales);
        const float d = -max_scale / 32;          /* zero super-block: -0.0 -> 0x8000 */
        y[i].d = qk_fp32_to_fp16(d);
        const float id = d ? 1 / d : 0.f;
        uint16_t scales_h = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int l = qk_nint(id * scales[ib]);
            l = QK_MAX(-32, QK_MIN(31, l));
            const float dl = d * (float)l;        /* unrounded d */
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)best_index_iq4(idl * x[32 * ib + j]);
            l += 32;
            const uint8_t l_l = (uint8_t)(l & 0xF), l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) y[i].scales_l[ib / 2] = l_l;
            else y[i].scales_l[ib / 2] = (uint8_t)(y[i].scales_l[ib / 2] | (l_l << 4));
            scales_h = (uint16_t)(scales_h | (l_h << (2 * ib)));
        }
        y[i].scales_h = scales_h;
        pack_nibbles(y[i].qs, L, QK_K);
    }
}

void qk_dequantize_row_iq4_xs(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_iq4_xs *x = (const blk_iq4_xs *)vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        const float d = qk_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((x[i].scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
