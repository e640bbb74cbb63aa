/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_mma_emu.c — the CUDA int8 tensor-core GEMM (backend/cuda/device/
 * mma_tile.cuh: k_mma, k_mma_reduce) without a GPU: its device code runs under the host emulation
 * (tests/runtime/cuda_mma_emu.cc, tests/codegen/emu: ldmatrix and the s8 m16n8k32 / m16n8k16 MMAs
 * exchange the warp's registers per PTX's layouts) for every weight type it takes — on q8_1: Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K; on q8_K: Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS — in
 * each tile shape (128 x 64, 64 x 64, 64 x 32; 32 x 64, the 256 x 8 decode tile and 128 x 32 whole
 * and split 3 ways over K with the reduce kernel; 128 x 64 split too), over ragged tiles (N 96, T
 * 40, 8 and 5; K 768, or 704 for the 32-value blocks: a last K step of two sub-blocks), with no epilogue, a bias or a
 * residual, into NaN-poisoned outputs, against the f64 dot of the reference dequantizers' weights
 * and activations within 1e-5 of the sum of |terms|; the epilogue's non-finite flag stays 0 there and
 * is set by one infinite residual entry (Q4_K, every tile; not the last-block reduce, which needs a
 * GPU's counters). The types that ran on the H200 for sessions
 * (Q4_0 / Q5_0 / Q8_0 / Q4_K / Q5_K / Q6_K) passing here is what vouches for the emulated fragment
 * layouts; the later ones (Q4_1, Q5_1, IQ4_NL, Q3_K, IQ4_XS) then check the kernel.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: the segment groups and the paired gate/up (test_cuda_ops on a GPU); speed.
 */
#include "dev_layout.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#define K_MAX 768
#define N_ 96
#define T_ 40

typedef int (*mma_fn)(int, int, int, int, float *, const uint8_t *, long long, long long, const uint8_t *, long long, const float *, int,
                      float *, unsigned *);
static mma_fn emu_mma;
static uint64_t seed = 0x1A7E5EEDull;

/* T tokens (<= T_): 40 spans ragged token tiles; 5 is a lone partial tile (cu_config.mma_min_t below 9) */
static void check_type(int type, int q8k, int T) {
    const qk_traits *tr = qk_get(type);
    /* K: six K steps, split 3 ways in whole steps (as the launchers split); 704 for the 32-value blocks:
     * the last split's last step two sub-blocks */
    const int K = tr->blck == 256 ? 768 : 704;
    const uint64_t rb = (uint64_t)(K / tr->blck) * (uint64_t)tr->type_size;
    uint8_t *w = aligned_alloc(256, (size_t)((N_ * rb + 255) & ~(uint64_t)255) + 256);
    const size_t xrb = q8k ? K / 256 * sizeof(blk_q8_K) : K / 32 * sizeof(blk_q8_1);
    uint8_t *xq = aligned_alloc(64, (T_ * xrb + 63) & ~(size_t)63);
    float *wf = malloc(sizeof(float) * N_ * K), *xf = malloc(sizeof(float) * T_ * K), *xd = malloc(sizeof(float) * T_ * K);
    float *add = malloc(sizeof(float) * T_ * N_), *dst = malloc(sizeof(float) * T_ * N_), *part = malloc(sizeof(float) * 3 * T_ * N_);
    for (int n = 0; n < N_; n++) {
        float row[K_MAX];
        const float sc = n % 3 == 0 ? 2.0f : 0.05f;
        for (int k = 0; k < K; k++) row[k] = sc * test_rand_normal(&seed) + (n % 5 == 0 ? sc : 0.0f);
        tr->from_float_ref(row, w + (uint64_t)n * rb, K);
        tr->to_float(w + (uint64_t)n * rb, wf + n * K, K);
    }
    w = test_to_dev_layout(type, w, N_ * rb); /* the kernels read the device's layout */
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < K; k++) xf[t * K + k] = test_rand_normal(&seed) * (k % 13 == 0 ? 6.0f : 1.0f);
        if (q8k) {
            qk_quantize_row_q8_K_ref(xf + t * K, xq + t * xrb, K);
            qk_dequantize_row_q8_K(xq + t * xrb, xd + t * K, K);
        } else {
            qk_quantize_row_q8_1_ref(xf + t * K, xq + t * xrb, K);
            qk_dequantize_row_q8_1(xq + t * xrb, xd + t * K, K);
        }
    }
    for (int i = 0; i < T_ * N_; i++) add[i] = test_rand_normal(&seed);
    static const char *tile_name[10] = {"128x64", "64x64", "64x32", "32x64", "32x64 split 3", "256x8", "256x8 split 3", "128x32", "128x32 split 3",
                                        "128x64 split 3"};
    for (int tile = 0; tile < 10; tile++) {
        const int ep = (tile + type) % 3;
        for (int i = 0; i < T_ * N_; i++) dst[i] = NAN;
        for (int i = 0; i < 3 * T_ * N_; i++) part[i] = NAN;
        unsigned flag = 0;
        const int rc = emu_mma(type, q8k, tile, 3, dst, w, N_, K, xq, T, ep ? add : NULL, ep == 1, part, &flag);
        CHECKF(rc == 0, "%s x %s %s T %d: emulation returned %d", tr->name, q8k ? "q8_K" : "q8_1", tile_name[tile], T, rc);
        CHECKF(flag == 0, "%s x %s %s T %d: finite outputs flagged non-finite", tr->name, q8k ? "q8_K" : "q8_1", tile_name[tile], T);
        int bad = 0, unwritten = 0;
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N_; n++) {
                double ref = 0, mag = 0;
                for (int k = 0; k < K; k++) ref += (double)wf[n * K + k] * xd[t * K + k], mag += fabs((double)wf[n * K + k] * xd[t * K + k]);
                const double e = ep == 1 ? add[n] : ep == 2 ? add[t * N_ + n] : 0.0;
                ref += e, mag += fabs(e);
                const float got = dst[t * N_ + n];
                if (got != got) unwritten++;
                else if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30) && bad++ < 3)
                    fprintf(stderr, "%s x %s %s: [t %d, n %d] %.9g, reference %.9g\n", tr->name, q8k ? "q8_K" : "q8_1", tile_name[tile], t, n, got, ref);
            }
        CHECKF(unwritten == 0 && bad == 0, "%s x %s %s T %d (%s): %d outputs unwritten, %d off the reference", tr->name, q8k ? "q8_K" : "q8_1",
               tile_name[tile], T, ep == 1 ? "bias" : ep == 2 ? "residual" : "no epilogue", unwritten, bad);
        if (type == SB_TYPE_Q4_K && T == T_) { /* one infinite addend: the flag is set, whole or split */
            const int at = (T - 1) * N_ + N_ - 1 - tile;
            const float keep = add[at];
            add[at] = INFINITY;
            flag = 0;
            CHECK(emu_mma(type, q8k, tile, 3, dst, w, N_, K, xq, T, add, 0, part, &flag) == 0);
            CHECKF(flag == 1 && isinf(dst[at]), "%s x %s %s: an infinite output at %d not flagged (flag %u)", tr->name, q8k ? "q8_K" : "q8_1",
                   tile_name[tile], at, flag);
            add[at] = keep;
        }
    }
    free(w), free(xq), free(wf), free(xf), free(xd), free(add), free(dst), free(part);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_mma_emu.cc");
    if (h) {
        *(void **)&emu_mma = dlsym(h, "sb_emu_mma");
        CHECK(emu_mma != NULL && test_dev_layout_load(h));
    }
    if (emu_mma && emu_to_dev_layout) {
        static const int on_q81[] = {SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0, SB_TYPE_Q5_1, SB_TYPE_Q8_0,
                                     SB_TYPE_IQ4_NL, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K};
        static const int on_q8k[] = {SB_TYPE_Q3_K, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_IQ4_XS};
        for (size_t i = 0; i < sizeof on_q81 / sizeof on_q81[0]; i++) check_type(on_q81[i], 0, T_), check_type(on_q81[i], 0, 8), check_type(on_q81[i], 0, 5);
        for (size_t i = 0; i < sizeof on_q8k / sizeof on_q8k[0]; i++) check_type(on_q8k[i], 1, T_), check_type(on_q8k[i], 1, 8), check_type(on_q8k[i], 1, 5);
        float d;
        CHECK(emu_mma(SB_TYPE_Q2_K, 1, 0, 1, &d, NULL, 0, 0, NULL, 0, NULL, 0, NULL, NULL) == -2); /* Q2_K: k_mmq's */
    }
    emu_build_done(h);
    return test_summary();
}
