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

#define QK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QK_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Row length check shared by every row function: n must be a non-negative multiple of blck. */
#define QK_CHECK_ROW(n, blck) SB_ASSERT((n) >= 0 && (n) % (blck) == 0)

#endif
