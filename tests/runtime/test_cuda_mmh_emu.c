/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_mmh_emu.c — the CUDA half-weight (F16 / BF16) matrix products without a
 * GPU: device/mmh.cuh's decode GEMV (k_mmh1) and tensor-core tile GEMM (k_mmh), and device/mmh_big.cuh's
 * 128 x 128 tile (k_mmh_big: ldmatrix fragments, a 3-stage W ring) run under the host
 * emulation (tests/runtime/cuda_mmh_emu.cc, tests/codegen/emu) on random weights and activations,
 * into NaN-poisoned outputs, against the reference's math in f64: every activation rounded to the
 * weight's type (round to nearest even), products summed — within 1e-5 of the sum of |terms| per
 * output (a wrong fragment or a missed K step is off by ~1e-2). Shapes: ragged row and token tiles
 * (N 100, T 9 / 64 / 77 over 64 x 64 tiles; N 130 / 256 / 300, T 129 / 130 / 200 over 128 x 128),
 * K 320 (ten K steps of 32; 32, 96, 352 for the big tile) and, for the GEMV, K 264 and 2056
 * (not multiples of 32 x 8: ragged last steps) with T 1..8, for each k_mmh1 variant (1, 2 warps a
 * row x x read from global memory or staged as halves in shared memory); no epilogue, a bias, a residual.
 * k_mmh1_multi (two of its shapes): three matrices over one x with a bias, a residual and none
 * (N 70 / 17 / 33: ragged blocks), and gate / up pairs writing SwiGLU / GeGLU (N 45: an odd row). Also cu_f2bf (f32 -> bf16
 * bits) against the quant layer's conversion for special and random values.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: speed; the MMA's own rounding (test_cuda_ops on a GPU).
 */
#include "quant/fp16.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

typedef int (*mmh_fn)(int, int, float *, const uint8_t *, long long, long long, const float *, long long, const float *, int);
static mmh_fn emu_mmh;
static unsigned (*emu_f2bf)(float);
static uint64_t seed = 0xF16B16ull;

static float half_val(int bf16, uint16_t b) { return bf16 ? qk_bf16_to_fp32(b) : qk_fp16_to_fp32(b); }
static uint16_t half_bits(int bf16, float f) { return bf16 ? qk_fp32_to_bf16(f) : qk_fp32_to_fp16(f); }

/* big: T > 8 through k_mmh_big's 128 x 128 tiles (cu_config.mmh_big); T <= 8: k_mmh1's variant
 * 10 WPR + XS (warps a row; x staged in shared memory; 0 = 10) */
static void check_case(int bf16, int big, int64_t K, int64_t N, int64_t T, int ep) {
    char label[96];
    snprintf(label, sizeof label, "%s K=%lld N=%lld T=%lld%s (variant %d)", bf16 ? "BF16" : "F16", (long long)K, (long long)N, (long long)T,
             ep == 1 ? " + bias" : ep == 2 ? " + residual" : "", big);
    uint16_t *w = aligned_alloc(256, (size_t)((N * K * 2 + 255) & ~(int64_t)255));
    float *x = aligned_alloc(64, (size_t)((T * K * 4 + 63) & ~(int64_t)63));
    float *add = malloc((size_t)(T * N) * sizeof *add), *dst = malloc((size_t)(T * N) * sizeof *dst);
    for (int64_t i = 0; i < N * K; i++) w[i] = half_bits(bf16, 0.05f * test_rand_normal(&seed));
    for (int64_t i = 0; i < T * K; i++) x[i] = test_rand_normal(&seed) * (i % 11 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < T * N; i++) add[i] = test_rand_normal(&seed), dst[i] = NAN;
    CHECKF(emu_mmh(bf16, big, dst, (const uint8_t *)w, K, N, x, T, ep ? add : NULL, ep == 1) == 0, "%s: emulation deadlocked", label);
    int bad = 0, unwritten = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)half_val(bf16, w[n * K + k]) * half_val(bf16, half_bits(bf16, x[t * K + k]));
                ref += p, mag += fabs(p);
            }
            if (ep) ref += add[ep == 1 ? n : t * N + n], mag += fabs(add[ep == 1 ? n : t * N + n]);
            const float got = dst[t * N + n];
            if (got != got) unwritten++;
            else if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30) && bad++ < 3)
                fprintf(stderr, "%s: [t %lld, n %lld] %.9g, reference %.9g\n", label, (long long)t, (long long)n, got, ref);
        }
    CHECKF(unwritten == 0 && bad == 0, "%s: %d outputs unwritten, %d off the reference", label, unwritten, bad);
    free(w), free(x), free(add), free(dst);
}

typedef int (*mmh_multi_fn)(int, int, int, const uint8_t *const *, float *const *, const float *const *, const int *, const long long *, long long,
                            const float *, long long, int);
static mmh_multi_fn emu_multi;

/* row n of w against token t of x: the reference's dot (x rounded to the weight type) and its sum of |terms| */
static double ref_dot(int bf16, const uint16_t *w, const float *x, int64_t K, int64_t n, int64_t t, double *mag) {
    double ref = 0;
    *mag = 0;
    for (int64_t k = 0; k < K; k++) {
        const double p = (double)half_val(bf16, w[n * K + k]) * half_val(bf16, half_bits(bf16, x[t * K + k]));
        ref += p, *mag += fabs(p);
    }
    return ref;
}

/* the GLU kernel's activation (ggml's: GELU through f16 on the way in and out) */
static double ref_act(double v, int gelu) {
    if (!gelu) return v / (1.0 + exp(-v));
    if (v <= -10.0) return 0.0;
    if (v >= 10.0) return v;
    const float h = qk_fp16_to_fp32(qk_fp32_to_fp16((float)v));
    return qk_fp16_to_fp32(qk_fp32_to_fp16(0.5f * h * (1.0f + tanhf(0.79788456f * h * (1.0f + 0.044715f * h * h)))));
}

/* k_mmh1_multi: three matrices over one x (a bias, a residual, none: Q/K/V with Qwen's biases),
 * or glu 1 / 2: a gate / up pair writing SwiGLU / GeGLU into the gate's output */
static void check_multi(int bf16, int variant, int64_t K, int64_t T, int glu) {
    const int n = glu ? 2 : 3;
    const long long Ns[3] = {glu ? 45 : 70, glu ? 45 : 17, 33};
    uint16_t *w[3];
    float *dst[3], *add[3];
    int bc[3];
    float *x = aligned_alloc(64, (size_t)((T * K * 4 + 63) & ~(int64_t)63));
    for (int64_t i = 0; i < T * K; i++) x[i] = test_rand_normal(&seed);
    for (int k = 0; k < n; k++) {
        w[k] = aligned_alloc(256, (size_t)((Ns[k] * K * 2 + 255) & ~(int64_t)255));
        for (int64_t i = 0; i < Ns[k] * K; i++) w[k][i] = half_bits(bf16, 0.05f * test_rand_normal(&seed));
        dst[k] = malloc((size_t)(T * Ns[k]) * sizeof(float));
        for (int64_t i = 0; i < T * Ns[k]; i++) dst[k][i] = NAN;
        bc[k] = k == 0;
        add[k] = glu || k == 2 ? NULL : malloc((size_t)(T * Ns[k]) * sizeof(float));
        for (int64_t i = 0; add[k] && i < T * Ns[k]; i++) add[k][i] = test_rand_normal(&seed);
    }
    char label[96];
    snprintf(label, sizeof label, "%s multi (variant %d) K=%lld T=%lld%s", bf16 ? "BF16" : "F16", variant, (long long)K, (long long)T,
             glu == 1 ? " SwiGLU pair" : glu == 2 ? " GeGLU pair" : " (bias, residual, none)");
    CHECKF(emu_multi(bf16, variant, n, (const uint8_t *const *)w, dst, (const float *const *)add, bc, Ns, K, x, T, glu) == 0, "%s: deadlocked", label);
    int bad = 0, unwritten = 0;
    for (int k = 0; k < (glu ? 1 : n); k++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t r = 0; r < Ns[k]; r++) {
                double mag, mu, ref = ref_dot(bf16, w[k], x, K, r, t, &mag), tol;
                if (glu) {
                    const double up = ref_dot(bf16, w[1], x, K, r, t, &mu);
                    ref = ref_act(ref, glu == 2) * up;
                    tol = 2e-3 * fabs(ref) + 1e-5 * (mag * fabs(up) + mu * (fabs(ref) + 1.0));
                } else {
                    if (add[k]) ref += add[k][bc[k] ? r : t * Ns[k] + r], mag += fabs(add[k][bc[k] ? r : t * Ns[k] + r]);
                    tol = 1e-5 * mag + 1e-30;
                }
                const float got = dst[k][t * Ns[k] + r];
                if (got != got) unwritten++;
                else if (!(fabs(got - ref) <= tol) && bad++ < 3)
                    fprintf(stderr, "%s: [segment %d, t %lld, row %lld] %.9g, reference %.9g\n", label, k, (long long)t, (long long)r, got, ref);
            }
    CHECKF(unwritten == 0 && bad == 0, "%s: %d outputs unwritten, %d off the reference", label, unwritten, bad);
    for (int k = 0; k < n; k++) free(w[k]), free(dst[k]), free(add[k]);
    free(x);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_mmh_emu.cc");
    if (h) {
        *(void **)&emu_mmh = dlsym(h, "sb_emu_mmh");
        *(void **)&emu_f2bf = dlsym(h, "sb_emu_f2bf");
        *(void **)&emu_multi = dlsym(h, "sb_emu_mmh_multi");
        CHECK(emu_mmh && emu_f2bf && emu_multi);
    }
    if (emu_mmh && emu_f2bf && emu_multi) {
        const float special[] = {0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 1e-40f, 3.0e38f, INFINITY, -INFINITY, 1.00390625f, 1.01171875f};
        int bad = 0;
        for (int i = 0; i < 100000; i++) {
            const float f = i < 11 ? special[i] : test_rand_normal(&seed) * ldexpf(1.0f, (int)(test_rand_u64(&seed) % 60) - 30);
            bad += emu_f2bf(f) != qk_fp32_to_bf16(f);
        }
        CHECKF(bad == 0, "cu_f2bf: %d of 100000 values differ from qk_fp32_to_bf16", bad);
        for (int bf16 = 0; bf16 < 2; bf16++) {
            static const int64_t Tg[] = {1, 2, 3, 5, 8};
            static const int wx[] = {10, 11, 20, 21};
            for (int v = 0; v < 4; v++)
                for (int i = 0; i < 5; i++) check_case(bf16, wx[v], v % 2 ? 264 : 2056, 37, Tg[i], i % 3);
            for (int glu = 0; glu < 3; glu++) /* k_mmh1_multi in two shapes */
                for (int v = 0; v < 2; v++) check_multi(bf16, v ? 21 : 10, v ? 2056 : 264, glu == 1 ? 3 : 1 + v, glu);
            for (int big = 0; big < 2; big++) {
                check_case(bf16, big, 320, 100, 9, 0);
                check_case(bf16, big, 320, 100, 64, 1);
                check_case(bf16, big, 320, 100, 77, 2);
                check_case(bf16, big, 64, 64, 64, 0);
            }
            check_case(bf16, 1, 32, 130, 130, 1); /* one K step; ragged 128 x 128 tiles */
            check_case(bf16, 1, 96, 256, 200, 2); /* three K steps: every stage of the ring once */
            check_case(bf16, 1, 352, 300, 129, 0);
        }
    }
    emu_build_done(h);
    return test_summary();
}
