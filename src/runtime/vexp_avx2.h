/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * runtime/vexp_avx2.h — a vector e^x for AVX2 machines, and the sum of e^(x_i - mx) over a row
 * that softmax-shaped code needs (the CPU attention, the sampler's log-softmax). Header-only,
 * compiled for AVX2+FMA+F16C in each includer; call only when cpu_isa_active() >= CPU_ISA_AVX2.
 * exp_avx2: n = round(x log2 e), r = x - n ln2 (two-part ln2), e^r by its degree-7 Taylor
 * polynomial on |r| <= ln2/2 (truncation < 2e-8 relative), times 2^n built in the exponent bits;
 * x is clamped to [-87, 88] so 2^n stays a normal float. Within ~2 ulp of expf (tests/runtime/
 * test_exec_cpu.c checks it through op_swiglu, test_sampler_logprobs through log-softmax).
 */
#ifndef SB_RUNTIME_VEXP_AVX2_H
#define SB_RUNTIME_VEXP_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define AVX2_ATTR __attribute__((target("avx2,fma,f16c")))

AVX2_ATTR static inline __m256 exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* sum over i < n of e^(x[i] + (bias ? bias[i] : 0) - mx), each term a float, the sum in double;
 * y (may be NULL, or x itself) receives the terms */
AVX2_ATTR static inline double exp_sum_avx2(float *y, const float *x, const float *bias, int64_t n, float mx) {
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + i));
        const __m256 ex = exp_avx2(_mm256_sub_ps(v, vmx));
        if (y) _mm256_storeu_ps(y + i, ex);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(ex)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(ex, 1)));
    }
    double sv[4];
    _mm256_storeu_pd(sv, _mm256_add_pd(s0, s1));
    double sum = (sv[0] + sv[1]) + (sv[2] + sv[3]);
    for (; i < n; i++) {
        const float ex = expf((bias ? x[i] + bias[i] : x[i]) - mx);
        if (y) y[i] = ex;
        sum += (double)ex;
    }
    return sum;
}

#endif
