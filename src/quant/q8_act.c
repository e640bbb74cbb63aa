/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/q8_act.c — the activation formats that quantized matmuls pair weights with: Q8_1 (32
 * values, fp16 d and s) and Q8_K (256 values, fp32 d and int16 bsums), plus the x86 AVX/AVX2
 * semantics of llama.cpp's CPU Q8_0/Q8_1 activation quantizers (formats.md §2.6, §2.7, §3.2).
 * Layer 1 (quant).
 * Which one to use: CPU kernels that must reproduce llama.cpp-on-x86 logits quantize activations
 * with qk_quantize_row_q8_{0,1}_x86 (id = 127/amax, round-half-even) and Q8_K with the ref (x86
 * and ARM both use the ref). The _ref functions are llama.cpp's quantize_row_*_ref.
 * Invariants: every output byte is written, including Q8_K bsums of an all-zero block (ggml leaves
 * them untouched; with d = 0 they never contribute).
 * Non-goals: CUDA's quantize_q8_1 (s = Σx), which lives with the CUDA kernels.
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/qk_internal.h"

// ---- Q8_1 ----

void qk_quantize_row_q8_1_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK8_1);
    blk_q8_1 *y = (blk_q8_1 *)vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = qk_q8_ref_block(x, &y[i].d, y[i].qs);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) sum += y[i].qs[j];
        y[i].s = qk_fp32_to_fp16((float)sum * d);   /* unrounded fp32 d */
    }
}

void qk_dequantize_row_q8_1(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK8_1);
    const blk_q8_1 *x = (const blk_q8_1 *)vx;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        const float d = qk_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

// ---- x86 AVX/AVX2 semantics (ggml-cpu/arch/x86/quants.c quantize_row_q8_{0,1}) ----

/* _mm256_round_ps(_MM_ROUND_NEAREST) then _mm256_cvtps_epi32, then the saturating int32->int16->
 * int8 packs. rintf in the default rounding mode is round-half-even; a NaN or out-of-range value
 * becomes INT32_MIN in cvtps and then saturates to -128. */
static inline int8_t rne_sat8(float v) {
    const float r = rintf(v);
    int32_t i = (r >= -2147483648.0f && r < 2147483648.0f) ? (int32_t)r : INT32_MIN;
    return (int8_t)(i < -128 ? -128 : i > 127 ? 127 : i);
}

/* amax, d = amax/127 (stored F16), id = 127/amax; returns the block's Σq. */
static int quantize_block_x86(const float *x, uint16_t *dh, int8_t *qs, float *d_out) {
    const float amax = qk_absmax(32, x);
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    *dh = qk_fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        qs[j] = rne_sat8(x[j] * id);
        sum += qs[j];
    }
    *d_out = d;
    return sum;
}

void qk_quantize_row_q8_0_x86(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK8_0);
    blk_q8_0 *y = (blk_q8_0 *)vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        (void)quantize_block_x86(x, &y[i].d, y[i].qs, &d);
    }
}

void qk_quantize_row_q8_1_x86(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK8_1);
    blk_q8_1 *y = (blk_q8_1 *)vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d;
        const int sum = quantize_block_x86(x, &y[i].d, y[i].qs, &d);
        y[i].s = qk_fp32_to_fp16(d * (float)sum);
    }
}

// ---- Q8_K ----

void qk_quantize_row_q8_K_ref(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    blk_q8_K *y = (blk_q8_K *)vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float max = qk_signed_absmax(QK_K, x);
        if (!max) {
            y[i].d = 0.0f;
            memset(y[i].qs, 0, sizeof y[i].qs);
            memset(y[i].bsums, 0, sizeof y[i].bsums);   /* ggml leaves these untouched */
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            const int v = qk_nint(iscale * x[j]);
            y[i].qs[j] = (int8_t)QK_MIN(127, v);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void qk_dequantize_row_q8_K(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, QK_K);
    const blk_q8_K *x = (const blk_q8_K *)vx;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        for (int j = 0; j < QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
    }
}
