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
 * K 320 (ten K steps of 32; 32, 96, 352 for the big tile) and, for the GEMV, K 264
 * (not a multiple of 32) with T 1..8; no epilogue, a bias, a residual. Also cu_f2bf (f32 -> bf16
 * bits) against the quant layer's conversion for special and random values.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: speed; the MMA's own rounding (test_cuda_ops on a GPU).
 */
#include "quant/fp16.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

typedef int (*mmh_fn)(int, int, int, float *, const uint8_t *, long long, long long, const float *, long long, const float *, int);
static mmh_fn emu_mmh;
static unsigned (*emu_f2bf)(float);
static uint64_t seed = 0xF16B16ull;

static float half_val(int bf16, uint16_t b) { return bf16 ? qk_bf16_to_fp32(b) : qk_fp16_to_fp32(b); }
static uint16_t half_bits(int bf16, float f) { return bf16 ? qk_fp32_to_bf16(f) : qk_fp32_to_fp16(f); }

/* big: T > 8 through k_mmh_big's 128 x 128 tiles (cu_config.mmh_big); T <= 8: k_mmh1 with tpr lanes a
 * row (0: the launcher's choice by K) */
static void check_case_geo(int bf16, int big, int tpr, int64_t K, int64_t N, int64_t T, int ep) {
    char label[128];
    snprintf(label, sizeof label, "%s K=%lld N=%lld T=%lld%s%s tpr %d", bf16 ? "BF16" : "F16", (long long)K, (long long)N,
             (long long)T, ep == 1 ? " + bias" : ep == 2 ? " + residual" : "", big ? " (big tile)" : "", tpr);
    uint16_t *w = aligned_alloc(256, (size_t)((N * K * 2 + 255) & ~(int64_t)255));
    float *x = aligned_alloc(64, (size_t)((T * K * 4 + 63) & ~(int64_t)63));
    float *add = malloc((size_t)(T * N) * sizeof *add), *dst = malloc((size_t)(T * N) * sizeof *dst);
    for (int64_t i = 0; i < N * K; i++) w[i] = half_bits(bf16, 0.05f * test_rand_normal(&seed));
    for (int64_t i = 0; i < T * K; i++) x[i] = test_rand_normal(&seed) * (i % 11 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < T * N; i++) add[i] = test_rand_normal(&seed), dst[i] = NAN;
    CHECKF(emu_mmh(bf16, big, tpr, dst, (const uint8_t *)w, K, N, x, T, ep ? add : NULL, ep == 1) == 0, "%s: emulation deadlocked", label);
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

static void check_case(int bf16, int big, int64_t K, int64_t N, int64_t T, int ep) { check_case_geo(bf16, big, 0, K, N, T, ep); }

/* k_mmh1 at every geometry: lanes a row 32 / 64 / 128 and the choice by K; K's chunks ragged over
 * the lanes and MMH_U steps, N ragged over a block's rows, every token tile */
static void check_gemv_geometries(int bf16) {
    static const int tprs[] = {0, 32, 64, 128};
    static const int64_t Ks[] = {264, 2056, 4104};
    static const int64_t Tg[] = {1, 2, 4, 7};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++)
            for (int t = 0; t < 4; t += 1 + (i + k) % 2) check_case_geo(bf16, 0, tprs[i], Ks[k], 13 + 4 * k, Tg[t], (i + k + t) % 3);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_mmh_emu.cc");
    if (h) {
        *(void **)&emu_mmh = dlsym(h, "sb_emu_mmh");
        *(void **)&emu_f2bf = dlsym(h, "sb_emu_f2bf");
        CHECK(emu_mmh && emu_f2bf);
    }
    if (emu_mmh && emu_f2bf) {
        const float special[] = {0.0f, -0.0f, 1.0f, -1.5f, 65504.0f, 1e-40f, 3.0e38f, INFINITY, -INFINITY, 1.00390625f, 1.01171875f};
        int bad = 0;
        for (int i = 0; i < 100000; i++) {
            const float f = i < 11 ? special[i] : test_rand_normal(&seed) * ldexpf(1.0f, (int)(test_rand_u64(&seed) % 60) - 30);
            bad += emu_f2bf(f) != qk_fp32_to_bf16(f);
        }
        CHECKF(bad == 0, "cu_f2bf: %d of 100000 values differ from qk_fp32_to_bf16", bad);
        for (int bf16 = 0; bf16 < 2; bf16++) {
            static const int64_t Tg[] = {1, 2, 3, 5, 8};
            for (int i = 0; i < 5; i++) check_case(bf16, 0, 264, 37, Tg[i], i % 3);
            check_gemv_geometries(bf16);
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
