/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_mmh_emu.cc — the half-weight matrix products' device code (backend/cuda/device/
 * mmh.cuh) built for the host: test_cuda_mmh_emu compiles this file with the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h (threads as fibers, shared memory, shuffles, the m16n8k16 MMA's
 * fragment exchange, ldmatrix; -fsanitize=alignment traps) and runs k_mmh1's, k_mmh's and k_mmh_big's
 * (device/mmh_big.cuh) blocks over the grids k_mmf.cu's launcher gives them.
 */
#include "backend/cuda/device/mmh.cuh"
#include "backend/cuda/device/mmh_big.cuh"

/* k_mmh1's blocks over the launcher's grid, through the dispatch it uses, at tpr lanes a row
 * (0: the launcher's choice by K) */
template <int HT>
static int gemv(float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T, const float *add, int bcast, int tpr) {
    const int tp = tpr ? tpr : mmh_gemv_tpr(K);
    const unsigned grid = (unsigned)((N + 128 / tp - 1) / (128 / tp));
    int rc = 0;
    mmh_gemv_pick<HT>(T, tp, [&](auto s) {
        using S = decltype(s);
        rc = emu_run(grid, 128, [&] { mmh_gemv_block<HT, S::NC, S::TPR>(dst, w, K, N, x, T, add, bcast, blockIdx.x); });
    });
    return rc;
}

template <int HT>
static int tile(float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T, const float *add, int bcast) {
    const unsigned gx = (unsigned)((N + MMH_BN - 1) / MMH_BN), gy = (unsigned)((T + MMH_BT - 1) / MMH_BT);
    for (unsigned by = 0; by < gy; by++)
        if (emu_run(gx, 128, [&] { mmh_tile<HT>(dst, w, K, N, x, T, add, bcast, blockIdx.x, by); })) return -1;
    return 0;
}

template <int HT>
static int big(float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T, const float *add, int bcast) {
    const dim3 grid{(unsigned)((N + MMHB_BN - 1) / MMHB_BN), (unsigned)((T + MMHB_BT - 1) / MMHB_BT), 1};
    return emu_run3(grid, 256, [&] { mmh_big_tile<HT>(dst, w, K, N, x, T, add, bcast, blockIdx.x, blockIdx.y); });
}

/* dst [T,N] = W x (+ add) as k_mmf.cu's launcher runs it: T <= 8 k_mmh1's blocks (tpr lanes a row,
 * 0: by K), else k_mmh's tiles (big: k_mmh_big's, cu_config.mmh_big); bf16 0: F16 weights. 0, or
 * -1 on a deadlock */
extern "C" int sb_emu_mmh(int bf16, int bigt, int tpr, float *dst, const uint8_t *w, long long K, long long N, const float *x,
                          long long T, const float *add, int bcast) {
    if (T <= 8)
        return bf16 ? gemv<CU_T_BF16>(dst, w, K, N, x, T, add, bcast, tpr) : gemv<CU_T_F16>(dst, w, K, N, x, T, add, bcast, tpr);
    if (bigt) return bf16 ? big<CU_T_BF16>(dst, w, K, N, x, T, add, bcast) : big<CU_T_F16>(dst, w, K, N, x, T, add, bcast);
    return bf16 ? tile<CU_T_BF16>(dst, w, K, N, x, T, add, bcast) : tile<CU_T_F16>(dst, w, K, N, x, T, add, bcast);
}

extern "C" unsigned sb_emu_f2bf(float f) { return cu_f2bf(f); }
