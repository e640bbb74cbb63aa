/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/q8_0.c — Q8_0 as a weight format: 32 int8 codes and an fp16 scale (formats.md §2.5).
 * Layer 1 (quant). The reference quantizer = llama.cpp quantize_row_q8_0_ref; llama-quantize always
 * uses it (quantize_q8_0 ignores the imatrix).
 * Invariants: d = amax/127 in fp32, id = 1/d from the unrounded d, q = roundf (ties away from
 * zero), then stored F16(d).
 * Non-goals: the activation variants with other rounding (quant/q8_act.c).
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

void qk_quantize_row_q8_0_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK8_0);
    blk_q8_0 *y = (blk_q8_0 *)vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        (void)qk_q8_ref_block(x, &y[i].d, y[i].qs);
    }
}

void qk_dequantize_row_q8_0(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK8_0);
    const blk_q8_0 *x = (const blk_q8_0 *)vx;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = qk_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}
