/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/fp16.h — exact scalar conversions between fp32 and the 16-bit float formats (formats.md
 * §2.0 and the notation block: H() and F16()).
 * Layer 1 (quant). Header-only static inline functions, pure integer arithmetic, so the result
 * does not depend on FTZ/DAZ, the rounding mode or the ISA.
 *  - fp16 -> fp32 is exact (subnormals kept, inf kept, NaN payload kept).
 *  - fp32 -> fp16 rounds to nearest, ties to even; overflow (|x| >= 65520) gives +-inf; NaN gives
 *    0x7E00 | sign — the same bits as ggml's software converter (ggml_compute_fp32_to_fp16).
 *  - bf16 -> fp32 is bits << 16; fp32 -> bf16 is ggml_compute_fp32_to_bf16 (RNE, NaN quieted with
 *    |0x40, subnormals kept).
 * Non-goals: vectorised/table conversions (kernels own those and are tested against these).
 */
#ifndef SB_QUANT_FP16_H
#define SB_QUANT_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t qk_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float qk_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---- fp16 ----

/* H(h): IEEE binary16 bits -> fp32, exact. */
static inline float qk_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    uint32_t u;
    if (e == 0x1F) {
        u = sign | 0x7F800000u | (m << 13);          /* inf / NaN (payload kept) */
    } else if (e != 0) {
        u = sign | ((e + 112u) << 23) | (m << 13);   /* normal: rebias 15 -> 127 */
    } else if (m == 0) {
        u = sign;                                    /* +-0 */
    } else {
        /* subnormal m * 2^-24: normalise so the leading one lands on bit 10 */
        int sh = __builtin_clz(m) - 21;
        m <<= sh;
        u = sign | ((uint32_t)(113 - sh) << 23) | ((m & 0x3FFu) << 13);
    }
    return qk_f32_from_bits(u);
}

/* F16(x): fp32 -> IEEE binary16 bits, round to nearest even. */
static inline uint16_t qk_fp32_to_fp16(float f) {
    uint32_t u = qk_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);   /* NaN */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) {                                   /* >= 2^-14: normal fp16 */
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);           /* RNE on the 13 dropped bits */
        return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
    }
    if (a <= 0x33000000u) return sign;                        /* <= 2^-25 (tie to even 0) */
    /* fp16 subnormal: value in units of 2^-24 is mant * 2^(e - 126), shift = 126 - e in 14..24 */
    uint32_t e = a >> 23;
    uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;         /* may carry into the smallest normal */
    return (uint16_t)(sign | q);
}

// ---- bf16 ----

static inline float qk_bf16_to_fp32(uint16_t b) { return qk_f32_from_bits((uint32_t)b << 16); }

/* formats.md §2.0: NaN -> quiet (|0x40), else RNE; subnormals kept, overflow becomes inf. */
static inline uint16_t qk_fp32_to_bf16(float f) {
    uint32_t u = qk_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

#endif
