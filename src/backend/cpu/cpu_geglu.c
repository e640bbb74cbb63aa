/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_geglu.c — GeGLU with ggml's CPU GELU, 8 values at a time (cpu_kernels.h).
 * Layer 0 (backend/cpu). y = gelu(g) * u where gelu(x) = 0 for x <= -10, x for x >= 10, else
 * table[fp16(x)] read as fp16 (ggml_vec_geglu_f32; the table, 65536 fp16 entries plus one pad
 * entry, is the caller's: ops/ops_ref.c's op_gelu_table). The scalar path is op_geglu's loop; the
 * AVX2 path converts 8 floats with F16C (round to nearest even, as qk_fp32_to_fp16), fetches the 8
 * entries with one dword gather (index x 2 bytes, low half kept: the pad entry makes the last index
 * readable) and widens them with F16C, so both paths give the same bits for every finite input.
 * Why: Gemma's FFN and per-layer gates apply it to n_ff + P values per token; the scalar loop
 * (software fp16 conversions) was 5 % of an E2B prefill on 2 threads.
 * Non-goals: NaN payloads (a NaN in stays a NaN out, its bits may differ between the paths).
 */
#include "backend/cpu/cpu_kernels.h"
#include "quant/fp16.h"

#include <immintrin.h>

static inline float gelu_lookup(const uint16_t *table, float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return qk_fp16_to_fp32(table[qk_fp32_to_fp16(x)]);
}

static void geglu_scalar(float *y, const float *g, const float *u, int64_t n, const uint16_t *table) {
    for (int64_t i = 0; i < n; i++) y[i] = gelu_lookup(table, g[i]) * u[i];
}

__attribute__((target("avx2,fma,f16c"))) static void geglu_avx2(float *y, const float *g, const float *u, int64_t n,
                                                                 const uint16_t *table) {
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i t = _mm256_and_si256(_mm256_i32gather_epi32((const int *)table, h, 2), low16);
        __m256 v = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_packus_epi32(t, _mm256_permute2x128_si256(t, t, 1))));
        v = _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));                 /* x >= 10: x */
        v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ)); /* x <= -10: 0 */
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(u + i)));
    }
    geglu_scalar(y + i, g + i, u + i, n - i, table);
}

void cpu_geglu(float *y, const float *g, const float *u, int64_t n, const uint16_t *table) {
    if (cpu_isa_active() >= CPU_ISA_AVX2)
        geglu_avx2(y, g, u, n, table);
    else
        geglu_scalar(y, g, u, n, table);
}
