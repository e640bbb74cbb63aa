/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/attn_emu_data.h — what the CUDA attention emulator tests (test_cuda_attn_decode_emu,
 * test_cuda_attn_paged_emu, test_cuda_fattn_mma_emu) share: fresh random inputs, a cache of the
 * kernel's type made from them, and the NMSE of an output against its reference (1e30 where the
 * output still holds its NaN poison).
 */
#ifndef SB_TESTS_ATTN_EMU_DATA_H
#define SB_TESTS_ATTN_EMU_DATA_H

#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* n normal random values (malloc'd) */
static inline float *attn_rnd(uint64_t *seed, int64_t n) {
    float *x = (float *)malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(seed);
    return x;
}

/* n f32 values as the cache type, SB_TYPE_F32 or SB_TYPE_F16 (a fresh buffer) */
static inline void *attn_as_cache(int ctype, const float *x, int64_t n) {
    if (ctype == SB_TYPE_F32) {
        void *d = malloc((size_t)n * 4);
        memcpy(d, x, (size_t)n * 4);
        return d;
    }
    uint16_t *h = (uint16_t *)malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = qk_fp32_to_fp16(x[i]);
    return h;
}

/* NMSE of got against ref over n values; 1e30 when got has NaN (unwritten outputs: *nan of them) */
static inline double attn_nmse(const float *got, const float *ref, int64_t n, int64_t *nan) {
    double num = 0, den = 0;
    *nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != got[i]) ++*nan;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return *nan ? 1e30 : num / den;
}

#endif
