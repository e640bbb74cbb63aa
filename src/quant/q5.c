/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/q5.c — Q5_0 and Q5_1: 32-element blocks of 5-bit codes, low nibbles in qs and the fifth
 * bits in a little-endian u32 qh (bit e = element e) (formats.md §2.3, §2.4).
 * Layer 1 (quant). Reference quantizers = llama.cpp quantize_row_q5_{0,1}_ref, which is also what
 * llama-quantize runs for these types without an imatrix (quantize_q5_{0,1}, quant_weights NULL).
 * Invariants: fp32 in the order written (-ffp-contract=off); Q5_1's code is a truncating uint8
 * cast with no clamp, as in ggml.
 * Non-goals: the imatrix path.
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

static inline void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// ---- Q5_0 ----

void qk_quantize_row_q5_0_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK5_0);
    blk_q5_0 *y = (blk_q5_0 *)vy;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float id = qk_sym_block_scale(QK5_0, x, -16, &y[i].d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[j + QK5_0 / 2] * id;
            const uint8_t q0 = (uint8_t)QK_MIN(31, qk_trunc8(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)QK_MIN(31, qk_trunc8(x1 + 16.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        put_u32(y[i].qh, qh);
    }
}

void qk_dequantize_row_q5_0(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK5_0);
    const blk_q5_0 *x = (const blk_q5_0 *)vx;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = qk_fp16_to_fp32(x[i].d);
        const uint32_t qh = get_u32(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            const int x0 = ((x[i].qs[j] & 0x0F) | h0) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | h1) - 16;
            y[j] = (float)x0 * d;
            y[j + QK5_0 / 2] = (float)x1 * d;
        }
    }
}

// ---- Q5_1 ----

void qk_quantize_row_q5_1_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK5_1);
    blk_q5_1 *y = (blk_q5_1 *)vy;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min;
        const float id = qk_affine_block_scale(QK5_1, x, 31, &y[i].d, &y[i].m, &min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + QK5_1 / 2] - min) * id;
            const uint8_t q0 = qk_truncu8(x0 + 0.5f);   /* no clamp (ggml) */
            const uint8_t q1 = qk_truncu8(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        put_u32(y[i].qh, qh);
    }
}

void qk_dequantize_row_q5_1(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK5_1);
    const blk_q5_1 *x = (const blk_q5_1 *)vx;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = qk_fp16_to_fp32(x[i].d);
        const float m = qk_fp16_to_fp32(x[i].m);
        const uint32_t qh = get_u32(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            const int x0 = (x[i].qs[j] & 0x0F) | h0;
            const int x1 = (x[i].qs[j] >> 4) | h1;
            y[j] = (float)x0 * d + m;
            y[j + QK5_1 / 2] = (float)x1 * d + m;
        }
    }
}
