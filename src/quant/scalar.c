/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/scalar.c — row converters of the scalar float types F32, F16, BF16 (formats.md §2.0).
 * Layer 1 (quant). F16 writes are RNE (ggml_fp32_to_fp16_row); BF16 writes are
 * ggml_fp32_to_bf16_row_ref (RNE, NaN quieted, subnormals kept) — the converters llama-quantize
 * uses. Reads are exact.
 * Invariants: byte order is little-endian in memory (memcpy of uint16_t on little-endian hosts; the
 * project targets x86-64 and aarch64 little-endian only).
 * Non-goals: SIMD / F16C conversion (kernels; they must match these bit for bit).
 */
#include "quant/quant.h"
#include "quant/qk_internal.h"

void qk_fp32_to_fp16_row(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, 1);
    uint16_t *y = (uint16_t *)vy;
    for (int64_t i = 0; i < n; i++) y[i] = qk_fp32_to_fp16(x[i]);
}

void qk_fp16_to_fp32_row(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, 1);
    const uint16_t *x = (const uint16_t *)vx;
    for (int64_t i = 0; i < n; i++) y[i] = qk_fp16_to_fp32(x[i]);
}

void qk_fp32_to_bf16_row(const float *x, void *vy, int64_t n) {
    QK_CHECK_ROW(n, 1);
    uint16_t *y = (uint16_t *)vy;
    for (int64_t i = 0; i < n; i++) y[i] = qk_fp32_to_bf16(x[i]);
}

void qk_bf16_to_fp32_row(const void *vx, float *y, int64_t n) {
    QK_CHECK_ROW(n, 1);
    const uint16_t *x = (const uint16_t *)vx;
    for (int64_t i = 0; i < n; i++) y[i] = qk_bf16_to_fp32(x[i]);
}

void qk_fp32_copy_row(const float *x, void *y, int64_t n) {
    QK_CHECK_ROW(n, 1);
    if (n) memcpy(y, x, (size_t)n * sizeof(float));
}

void qk_fp32_to_fp32_row(const void *x, float *y, int64_t n) {
    QK_CHECK_ROW(n, 1);
    if (n) memcpy(y, x, (size_t)n * sizeof(float));
}
