/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/test_imatrix.c — the importance-matrix quantizers (qk_quantize_chunk_w):
 *  - for every type llama-quantize weights (Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K IQ4_NL IQ4_XS), on
 *    gaussian rows with strongly uneven column importances, the importance-weighted squared error
 *    Σ imp*(x - x̂)² with the weights is lower than without them (what an imatrix is for), and the
 *    output differs from the unweighted one;
 *  - uniform importances still give valid blocks close to the unweighted error (no blow-up);
 *  - Q8_0 / F16 ignore the weights (byte-identical to qk_quantize_chunk), as in llama.cpp;
 *  - every output byte is written (two poison patterns agree), rows are independent (chunk of N
 *    rows == N single rows), and the argument errors are qk_quantize_chunk's.
 * Byte-identity with llama.cpp's imatrix path has no committed test (no llama.cpp build and no
 * reference vectors for it in the shared data); docs/quant.md says how it was checked once.
 */
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NPR = 512, NROWS = 48 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float gauss(void) {
    const double u = uniform() + 1e-12, v = uniform();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

static double weighted_error(int type, const void *q, const float *x, const float *imp) {
    const qk_traits *t = qk_get(type);
    uint64_t rb = 0;
    (void)qk_row_bytes(type, NPR, &rb);
    float y[NPR];
    double e = 0;
    for (int r = 0; r < NROWS; r++) {
        t->to_float((const uint8_t *)q + (size_t)r * rb, y, NPR);
        for (int i = 0; i < NPR; i++) e += imp[i] * ((double)x[r * NPR + i] - y[i]) * ((double)x[r * NPR + i] - y[i]);
    }
    return e;
}

int main(void) {
    static float x[NROWS * NPR], imp[NPR], flat[NPR];
    static uint8_t a[NROWS * NPR * 4], b[NROWS * NPR * 4], c[NROWS * NPR * 4];
    for (int i = 0; i < NROWS * NPR; i++) x[i] = gauss();
    for (int i = 0; i < NPR; i++) {
        imp[i] = (float)exp(4.0 * uniform()) * (i % 16 == 3 ? 40.f : 1.f); /* 1..55, a few columns far more */
        flat[i] = 1.0f;
    }
    const int types[] = {SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0, SB_TYPE_Q5_1, SB_TYPE_Q2_K, SB_TYPE_Q3_K,
                         SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_IQ4_NL, SB_TYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int ty = types[k];
        const char *nm = qk_get(ty)->name;
        uint64_t rb = 0;
        CHECK(qk_row_bytes(ty, NPR, &rb) == 0);
        const size_t bytes = (size_t)rb * NROWS;
        CHECK(qk_quantize_chunk(ty, x, a, NROWS, NPR) == SB_OK);
        memset(b, 0x00, bytes);
        CHECK(qk_quantize_chunk_w(ty, x, b, NROWS, NPR, imp) == SB_OK);
        memset(c, 0xA5, bytes);
        CHECK(qk_quantize_chunk_w(ty, x, c, NROWS, NPR, imp) == SB_OK);
        CHECKF(!memcmp(b, c, bytes), "%s: an output byte depends on the buffer's old contents", nm);
        CHECKF(memcmp(a, b, bytes) != 0, "%s: the importance weights changed nothing", nm);
        const double e_plain = weighted_error(ty, a, x, imp), e_w = weighted_error(ty, b, x, imp);
        printf("%-7s weighted error: %.5g without, %.5g with the importances (%.1f%%)\n", nm, e_plain, e_w,
               100.0 * (e_w - e_plain) / e_plain);
        CHECKF(e_w < e_plain, "%s: weighted error %.6g with the imatrix is not below %.6g without", nm, e_w, e_plain);
        /* uniform importances: valid and about as good as the unweighted fit (within 25%) */
        CHECK(qk_quantize_chunk_w(ty, x, c, NROWS, NPR, flat) == SB_OK);
        const double e_flat = weighted_error(ty, c, x, flat), e_ref = weighted_error(ty, a, x, flat);
        CHECKF(isfinite(e_flat) && e_flat < 1.25 * e_ref, "%s: uniform importances give error %.6g vs %.6g", nm, e_flat, e_ref);
        /* rows are independent: row by row equals the chunk */
        for (int r = 0; r < NROWS; r++) CHECK(qk_quantize_chunk_w(ty, x + r * NPR, c + (size_t)r * rb, 1, NPR, imp) == SB_OK);
        CHECKF(!memcmp(b, c, bytes), "%s: chunk differs from row-by-row", nm);
    }
    // types whose llama.cpp quantizer ignores the weights
    const int ignored[] = {SB_TYPE_Q8_0, SB_TYPE_F16, SB_TYPE_BF16, SB_TYPE_F32};
    for (size_t k = 0; k < sizeof ignored / sizeof ignored[0]; k++) {
        uint64_t rb = 0;
        (void)qk_row_bytes(ignored[k], NPR, &rb);
        CHECK(qk_quantize_chunk(ignored[k], x, a, NROWS, NPR) == SB_OK);
        CHECK(qk_quantize_chunk_w(ignored[k], x, b, NROWS, NPR, imp) == SB_OK);
        CHECKF(!memcmp(a, b, (size_t)rb * NROWS), "%s: weights must be ignored", qk_get(ignored[k])->name);
    }
    // argument errors as qk_quantize_chunk's
    CHECK(qk_quantize_chunk_w(SB_TYPE_Q4_K, x, a, 1, 100, imp) == SB_ERR_INVALID_ARG);
    CHECK(qk_quantize_chunk_w(SB_TYPE_Q4_K, NULL, a, 1, NPR, imp) == SB_ERR_INVALID_ARG);
    CHECK(qk_quantize_chunk_w(SB_TYPE_Q4_K, x, a, -1, NPR, imp) == SB_ERR_INVALID_ARG);
    CHECK(qk_quantize_chunk_w(SB_TYPE_IQ2_XXS, x, a, 1, NPR, imp) == SB_ERR_UNSUPPORTED);
    CHECK(qk_quantize_chunk_w(SB_TYPE_Q4_K, x, a, 0, NPR, imp) == SB_OK);
    return test_summary();
}
