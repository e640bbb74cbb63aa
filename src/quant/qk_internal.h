/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/qk_internal.h — rounding and conversion primitives shared by the reference quantizers
 * (formats.md notation block: nint, roundf, trunc8). Private to src/quant/.
 * Layer 1 (quant). Every helper reproduces what llama.cpp's x86-64 build computes, including for
 * out-of-range inputs (NaN, huge values), without C undefined behaviour: float->int conversions
 * go through qk_cvtt(), which has the semantics of the SSE cvttss2si instruction that GCC emits
 * for llama.cpp's plain casts.
 * Non-goals: speed (these are the references the fast paths are tested against).
 */
#ifndef SB_QUANT_QK_INTERNAL_H
#define SB_QUANT_QK_INTERNAL_H

#include "base/status.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK_GROUP_MAX_EPS 1e-15f

/* nint(v): ggml nearest_int — add 1.5*2^23 and read the low mantissa bits. Ties to even for
 * |v| <= 4194303; outside that range it returns the same wrapped value as ggml's release build. */
static inline int qk_nint(float v) {
    float t = v + 12582912.0f;
    uint32_t i = qk_f32_bits(t);
    return (int)(i & 0x007FFFFFu) - 0x00400000;
}

/* (int)v with x86 cvttss2si semantics: truncate toward zero; NaN or out of int32 range gives
 * INT32_MIN (the "integer indefinite" value). */
static inline int32_t qk_cvtt(float v) {
    if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}

/* trunc8(v): C `(int8_t)v` as compiled by GCC for x86-64 (cvttss2si, keep the low byte). */
static inline int8_t qk_trunc8(float v) { return (int8_t)(uint8_t)(uint32_t)qk_cvtt(v); }

/* C `(uint8_t)v` as compiled by GCC for x86-64. */
static inline uint8_t qk_truncu8(float v) { return (uint8_t)(uint32_t)qk_cvtt(v); }

#define QK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QK_MAX(a, b) ((a) > (b) ? (a) : (b))

/* The element of x[0..n) with the largest |x|, the first on ties, 0 when none is above 0 (NaN never
 * wins): ggml's `if (ax > amax) { amax = ax; max = x[i]; }` scan; its amax is fabsf of the result. */
static inline float qk_signed_absmax(int n, const float *x) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    return max;
}

/* max |x| over x[0..n) as ggml's `amax = MAX(amax, fabsf(x[j]))` computes it (a NaN is kept only
 * until a later comparison replaces it, exactly as that macro does). */
static inline float qk_absmax(int n, const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = QK_MAX(amax, fabsf(x[j]));
    return amax;
}

/* Smallest and largest of x[0..n), starting from +-FLT_MAX (Q4_1 / Q5_1's scan; NaN never wins). */
static inline void qk_min_max(int n, const float *x, float *min_out, float *max_out) {
    float min = 3.40282347e+38f, max = -3.40282347e+38f;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* Q4_0 / Q5_0 block scale: d = (signed value of the largest magnitude) / code_of_extreme (-8 or
 * -16: the extreme maps to code 0), stored F16 in *dh (an all-zero block: d = -0.0 -> 0x8000).
 * Returns id = 1/d (0 for d = 0). */
static inline float qk_sym_block_scale(int n, const float *x, float code_of_extreme, uint16_t *dh) {
    const float d = qk_signed_absmax(n, x) / code_of_extreme;
    *dh = qk_fp32_to_fp16(d);
    return d ? 1.0f / d : 0.0f;
}

/* Q4_1 / Q5_1 block scale: d = (max - min) / nmax and the min, stored F16 in *dh and *mh; *min_out
 * gets the fp32 min. Returns id = 1/d (0 for d = 0). */
static inline float qk_affine_block_scale(int n, const float *x, int nmax, uint16_t *dh, uint16_t *mh,
                                          float *min_out) {
    float min, max;
    qk_min_max(n, x, &min, &max);
    const float d = (max - min) / (float)nmax;
    *dh = qk_fp32_to_fp16(d);
    *mh = qk_fp32_to_fp16(min);
    *min_out = min;
    return d ? 1.0f / d : 0.0f;
}

/* One 32-value block as ggml's quantize_row_q8_{0,1}_ref does it: d = amax/127 (stored F16 in
 * *dh), id = 1/d (0 for d = 0), qs = trunc8(roundf(x*id)). Returns the unrounded fp32 d. */
static inline float qk_q8_ref_block(const float *x, uint16_t *dh, int8_t *qs) {
    const float d = qk_absmax(32, x) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    *dh = qk_fp32_to_fp16(d);
    for (int j = 0; j < 32; j++) qs[j] = qk_trunc8(roundf(x[j] * id));
    return d;
}

/* The K-quant fitting helpers (k_quants.c, formats.md §2.13) for the legacy imatrix quantizers:
 * make_qx_quants with rmse_type 1 and weights qw (x² when NULL), L in 0..2*nmax-1; and
 * make_qkx3_quants(n <= 32, nmax, x, w, L, &the_min, -0.9, 0.05, 36, no MAD). */
float qk_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw);
float qk_make_qkx3_quants(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min);

/* Row length check shared by every row function: n must be a non-negative multiple of blck. */
#define QK_CHECK_ROW(n, blck) SB_ASSERT((n) >= 0 && (n) % (blck) == 0)

#endif
