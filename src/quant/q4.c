/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/q4.c — Q4_0 and Q4_1: 32-element blocks of 4-bit codes (formats.md §2.1, §2.2).
 * Layer 1 (quant). Reference quantizers = llama.cpp quantize_row_q4_{0,1}_ref, which is also what
 * llama-quantize runs for these types without an imatrix (quantize_q4_{0,1} with
 * quant_weights == NULL calls the ref on the whole chunk).
 * Invariants: fp32 arithmetic in the order written (built with -ffp-contract=off); the unrounded
 * fp32 d is used for 1/d; ties and the +8.5/+0.5 offsets truncate exactly like ggml.
 * Layout: see quant/blocks.h (nibble j = element j, high nibble = element j+16).
 * Non-goals: the imatrix path (make_qx_quants / make_qkx3_quants weighting).
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

// ---- Q4_0 ----

void qk_quantize_row_q4_0_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK4_0);
    blk_q4_0 *y = (blk_q4_0 *)vy;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float id = qk_sym_block_scale(QK4_0, x, -8, &y[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[j + QK4_0 / 2] * id;
            const uint8_t q0 = (uint8_t)QK_MIN(15, qk_trunc8(x0 + 8.5f));
            const uint8_t q1 = (uint8_t)QK_MIN(15, qk_trunc8(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void qk_dequantize_row_q4_0(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK4_0);
    const blk_q4_0 *x = (const blk_q4_0 *)vx;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = qk_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + QK4_0 / 2] = (float)x1 * d;
        }
    }
}

// ---- Q4_1 ----

void qk_quantize_row_q4_1_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK4_1);
    blk_q4_1 *y = (blk_q4_1 *)vy;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min;
        const float id = qk_affine_block_scale(QK4_1, x, 15, &y[i].d, &y[i].m, &min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[j + QK4_1 / 2] - min) * id;
            const uint8_t q0 = (uint8_t)QK_MIN(15, qk_trunc8(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)QK_MIN(15, qk_trunc8(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void qk_dequantize_row_q4_1(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK4_1);
    const blk_q4_1 *x = (const blk_q4_1 *)vx;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = qk_fp16_to_fp32(x[i].d);
        const float m = qk_fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int x0 = x[i].qs[j] & 0x0F;
            const int x1 = x[i].qs[j] >> 4;
            y[j] = (float)x0 * d + m;
            y[j + QK4_1 / 2] = (float)x1 * d + m;
        }
    }
}
