/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_mmf_emu.c — the CUDA F32-weight GEMM (k_mmft, device/mmf_tile.cuh) without a
 * GPU: its device code runs under the host emulation (tests/runtime/cuda_mmf_emu.cc, tests/codegen/emu)
 * on random weights and activations into NaN-poisoned outputs, against op_matmul (f64 sums) plus the
 * epilogue: within 1e-5 of the sum of |terms| per output (f32 sums of <= 1039 terms; one k step
 * missed or doubled is off by ~1e-3 of it). Shapes: ragged row and token tiles (N 200 over 128-row
 * tiles, N 37 under one; T 9 / 64 / 77 / 130 over 64-token tiles), K 16 (one step), 520 (float4
 * loads, the last K step partial), 517, 1039 and 78 (K % 4 = 1, 3, 2: scalar loads), x one float off 16-byte
 * alignment (scalar loads with K % 4 == 0); no epilogue, a bias, a residual.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: speed; FFMA's contraction on the device (test_cuda_ops on a GPU).
 */
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

typedef int (*mmft_fn)(float *, const float *, long long, long long, const float *, long long, const float *, int, int *);
static mmft_fn emu_mmft;
static uint64_t seed = 0xF32F32ull;

/* xoff: x starts that many floats past a 64-byte boundary; ep 0 none, 1 bias [N], 2 residual [T,N];
 * v4_want: the loads the launcher must pick */
static void check_case(int64_t K, int64_t N, int64_t T, int xoff, int ep, int v4_want) {
    char label[96];
    snprintf(label, sizeof label, "F32 K=%lld N=%lld T=%lld%s%s", (long long)K, (long long)N, (long long)T, xoff ? " x+1" : "",
             ep == 1 ? " + bias" : ep == 2 ? " + residual" : "");
    float *w = aligned_alloc(64, (size_t)((N * K * 4 + 63) & ~(int64_t)63));
    float *xa = aligned_alloc(64, (size_t)(((T * K + xoff) * 4 + 63) & ~(int64_t)63)), *x = xa + xoff;
    float *add = malloc((size_t)(T * N) * sizeof *add), *dst = malloc((size_t)(T * N) * sizeof *dst);
    float *ref = malloc((size_t)(T * N) * sizeof *ref), *wrow = malloc((size_t)K * sizeof *wrow);
    for (int64_t i = 0; i < N * K; i++) w[i] = 0.05f * test_rand_normal(&seed);
    for (int64_t i = 0; i < T * K; i++) x[i] = test_rand_normal(&seed) * (i % 11 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < T * N; i++) add[i] = test_rand_normal(&seed), dst[i] = NAN;
    int v4 = -1;
    CHECKF(emu_mmft(dst, w, K, N, x, T, ep ? add : NULL, ep == 1, &v4) == 0, "%s: emulation deadlocked", label);
    CHECKF(v4 == v4_want, "%s: %s loads, expected %s", label, v4 ? "float4" : "scalar", v4_want ? "float4" : "scalar");
    op_matmul(ref, w, SB_TYPE_F32, x, K, N, T, 0, N, wrow);
    int bad = 0, unwritten = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double r = ref[t * N + n], mag = 0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)w[n * K + k] * x[t * K + k]);
            if (ep) r += add[ep == 1 ? n : t * N + n], mag += fabs(add[ep == 1 ? n : t * N + n]);
            const float got = dst[t * N + n];
            if (got != got) unwritten++;
            else if (!(fabs(got - r) <= 1e-5 * mag + 1e-30) && bad++ < 3)
                fprintf(stderr, "%s: [t %lld, n %lld] %.9g, reference %.9g\n", label, (long long)t, (long long)n, got, r);
        }
    CHECKF(unwritten == 0 && bad == 0, "%s: %d outputs unwritten, %d off the reference", label, unwritten, bad);
    free(w), free(xa), free(add), free(dst), free(ref), free(wrow);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_mmf_emu.cc");
    if (h) {
        *(void **)&emu_mmft = dlsym(h, "sb_emu_mmft");
        CHECK(emu_mmft);
    }
    if (emu_mmft) {
        check_case(16, 200, 9, 0, 0, 1);
        check_case(520, 200, 64, 0, 1, 1);
        check_case(520, 200, 130, 0, 2, 1);
        check_case(517, 200, 77, 0, 0, 0);
        check_case(1039, 37, 9, 0, 1, 0);
        check_case(78, 131, 20, 0, 2, 0);
        check_case(256, 200, 77, 1, 2, 0);
        check_case(64, 128, 64, 0, 0, 1);
    }
    emu_build_done(h);
    return test_summary();
}
