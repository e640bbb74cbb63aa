/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/test_fp16.c — the scalar conversions of quant/fp16.h and the F16/BF16 row
 * converters: all 65536 fp16 and bf16 bit patterns round-trip exactly (NaN -> canonical quiet NaN
 * with the sign kept), fp16 decoding equals an independent ldexp computation, RNE ties at every
 * fp16 and bf16 step go to even, overflow and subnormal edges, and fp32->fp16 equals ggml's
 * float-trick converter (ggml_compute_fp32_to_fp16, re-typed below as the oracle) on a dense
 * stride of all fp32 bit patterns.
 */
#include "quant/fp16.h"
#include "quant/quant.h"
#include "test.h"

/* ggml_compute_fp32_to_fp16 (ggml-impl.h): the oracle llama.cpp's reference quantizers use. */
static uint16_t ggml_fp32_to_fp16_oracle(float f) {
    const float scale_to_inf = 0x1.0p+112f, scale_to_zero = 0x1.0p-110f;
    float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
    const uint32_t w = qk_f32_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = qk_f32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = qk_f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu);
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static double fp16_value(uint16_t h) {   /* independent decoder */
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return s ? -v : v;
}

static void test_fp16_all_patterns(void) {
    int bad_rt = 0, bad_val = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = qk_fp16_to_fp32((uint16_t)h);
        const int is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        const int is_inf = (h & 0x7FFF) == 0x7C00;
        if (is_nan) {
            bad_nan += !(isnan(f) && qk_fp32_to_fp16(f) == (uint16_t)(0x7E00 | (h & 0x8000)));
            continue;
        }
        bad_rt += qk_fp32_to_fp16(f) != h;
        if (is_inf) bad_val += !(isinf(f) && (signbit(f) != 0) == ((h & 0x8000) != 0));
        else bad_val += (double)f != fp16_value((uint16_t)h) || (signbit(f) != 0) != ((h & 0x8000) != 0);
    }
    CHECKF(bad_rt == 0, "%d fp16 patterns do not round-trip", bad_rt);
    CHECKF(bad_val == 0, "%d fp16 patterns decode to a wrong value", bad_val);
    CHECKF(bad_nan == 0, "%d fp16 NaNs do not map to 0x7E00|sign", bad_nan);
}

/* Midpoints between consecutive fp16 values (exact in fp32) round to the even one; a hair off the
 * midpoint rounds to the nearer one. */
static void test_fp16_ties(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 0x7BFF; h++) {
        for (int s = 0; s < 2; s++) {
            const uint16_t sg = s ? 0x8000 : 0;
            const float a = qk_fp16_to_fp32((uint16_t)(h | sg)), b = qk_fp16_to_fp32((uint16_t)((h + 1) | sg));
            const float mid = (float)(((double)a + (double)b) / 2);
            if ((double)mid != ((double)a + (double)b) / 2) { bad++; continue; }   /* must be exact */
            const uint16_t even = (uint16_t)(((h & 1) ? h + 1 : h) | sg);
            bad += qk_fp32_to_fp16(mid) != even;
            bad += qk_fp32_to_fp16(nextafterf(mid, a)) != (uint16_t)(h | sg);
            bad += qk_fp32_to_fp16(nextafterf(mid, b)) != (uint16_t)((h + 1) | sg);
        }
    }
    CHECKF(bad == 0, "%d fp16 rounding-tie cases wrong", bad);
    CHECK_EQ_INT(qk_fp32_to_fp16(65504.0f), 0x7BFF);
    CHECK_EQ_INT(qk_fp32_to_fp16(nextafterf(65520.0f, 0)), 0x7BFF);  /* just below the tie */
    CHECK_EQ_INT(qk_fp32_to_fp16(65520.0f), 0x7C00);                 /* tie to even = inf */
    CHECK_EQ_INT(qk_fp32_to_fp16(-1e30f), 0xFC00);
    CHECK_EQ_INT(qk_fp32_to_fp16(INFINITY), 0x7C00);
    CHECK_EQ_INT(qk_fp32_to_fp16(ldexpf(1, -25)), 0x0000);          /* half the smallest subnormal: even 0 */
    CHECK_EQ_INT(qk_fp32_to_fp16(nextafterf(ldexpf(1, -25), 1)), 0x0001);
    CHECK_EQ_INT(qk_fp32_to_fp16(ldexpf(3, -25)), 0x0002);          /* 1.5 ulp: tie to even 2 */
    CHECK_EQ_INT(qk_fp32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ_INT(qk_fp32_to_fp16(ldexpf(1, -14)), 0x0400);          /* smallest normal */
    CHECK_EQ_INT(qk_fp32_to_fp16(ldexpf(2047, -25)), 0x0400);       /* subnormal rounding up into it */
    CHECK_EQ_INT(qk_fp32_to_fp16(qk_f32_from_bits(0xFFC00001u)), 0xFE00);  /* -NaN keeps its sign */
}

static void test_fp16_vs_ggml(void) {
    long bad = 0, n = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 127) {   /* ~34M patterns, every exponent */
        const float f = qk_f32_from_bits((uint32_t)u);
        bad += qk_fp32_to_fp16(f) != ggml_fp32_to_fp16_oracle(f);
        n++;
    }
    CHECKF(bad == 0, "%ld of %ld fp32 patterns convert differently from ggml", bad, n);
}

static void test_bf16(void) {
    int bad_rt = 0, bad_nan = 0, bad_tie = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const float f = qk_bf16_to_fp32((uint16_t)b);
        const int is_nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
        if (is_nan) {
            bad_nan += qk_fp32_to_bf16(f) != (uint16_t)(b | 0x40);
            continue;
        }
        bad_rt += qk_fp32_to_bf16(f) != b;
        if ((b & 0x7FFF) >= 0x7F7F) continue;   /* ties above the max finite handled below */
        const uint32_t mid = (b << 16) | 0x8000u;   /* exactly halfway to the next bf16 */
        bad_tie += qk_fp32_to_bf16(qk_f32_from_bits(mid)) != (uint16_t)((b & 1) ? b + 1 : b);
        bad_tie += qk_fp32_to_bf16(qk_f32_from_bits(mid - 1)) != b;
        bad_tie += qk_fp32_to_bf16(qk_f32_from_bits(mid + 1)) != (uint16_t)(b + 1);
    }
    CHECKF(bad_rt == 0, "%d bf16 patterns do not round-trip", bad_rt);
    CHECKF(bad_nan == 0, "%d bf16 NaNs not quieted with |0x40", bad_nan);
    CHECKF(bad_tie == 0, "%d bf16 rounding-tie cases wrong", bad_tie);
    CHECK_EQ_INT(qk_fp32_to_bf16(qk_f32_from_bits(0x7F7FFFFFu)), 0x7F80);  /* FLT_MAX rounds to inf */
    CHECK_EQ_INT(qk_fp32_to_bf16(qk_f32_from_bits(0x00018000u)), 0x0002);  /* subnormal tie kept, even */
    CHECK_EQ_INT(qk_fp32_to_bf16(qk_f32_from_bits(0x7F800001u)), 0x7FC0);  /* signalling NaN quieted */
}

static void test_rows(void) {
    float x[7] = {1.0f, -2.5f, 65520.0f, 1e-8f, -0.0f, 3.14159265f, NAN}, y[7];
    uint16_t h[8] = {0, 0, 0, 0, 0, 0, 0, 0xABCD};
    qk_fp32_to_fp16_row(x, h, 7);
    int bad = 0;
    for (int i = 0; i < 7; i++) bad += h[i] != qk_fp32_to_fp16(x[i]);
    CHECK_EQ_INT(h[7], 0xABCD);                       /* wrote exactly n elements */
    qk_fp16_to_fp32_row(h, y, 7);
    for (int i = 0; i < 7; i++) bad += qk_f32_bits(y[i]) != qk_f32_bits(qk_fp16_to_fp32(h[i]));
    qk_fp32_to_bf16_row(x, h, 7);
    for (int i = 0; i < 7; i++) bad += h[i] != qk_fp32_to_bf16(x[i]);
    qk_bf16_to_fp32_row(h, y, 7);
    for (int i = 0; i < 7; i++) bad += qk_f32_bits(y[i]) != (uint32_t)h[i] << 16;
    CHECK_EQ_INT(bad, 0);
}

int main(void) {
    test_fp16_all_patterns();
    test_fp16_ties();
    test_fp16_vs_ggml();
    test_bf16();
    test_rows();
    return test_summary();
}
