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

template <int HT, int WPR, int XS>
static int gemv_wx(float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T, const float *add, int bcast) {
    const unsigned grid = (unsigned)((N + 3) / 4), nth = 128 * WPR;
    uint16_t *xs = (uint16_t *)emu_dsmem;
    if (T == 1) return emu_run(grid, nth, [&] { mmh_gemv_block<HT, 1, WPR, XS>(dst, w, K, N, x, T, add, bcast, blockIdx.x, xs); });
    if (T == 2) return emu_run(grid, nth, [&] { mmh_gemv_block<HT, 2, WPR, XS>(dst, w, K, N, x, T, add, bcast, blockIdx.x, xs); });
    if (T <= 4) return emu_run(grid, nth, [&] { mmh_gemv_block<HT, 4, WPR, XS>(dst, w, K, N, x, T, add, bcast, blockIdx.x, xs); });
    return emu_run(grid, nth, [&] { mmh_gemv_block<HT, 8, WPR, XS>(dst, w, K, N, x, T, add, bcast, blockIdx.x, xs); });
}

/* k_mmh1's blocks as k_mmf.cu launches them for cu_config.mmh_wpr / mmh_xs (variant 10 wpr + xs;
 * xs 1: x rounded once into shared memory) */
template <int HT>
static int gemv(int wx, float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T, const float *add, int bcast) {
    switch (wx) {
    case 11: return gemv_wx<HT, 1, 1>(dst, w, K, N, x, T, add, bcast);
    case 20: return gemv_wx<HT, 2, 0>(dst, w, K, N, x, T, add, bcast);
    case 21: return gemv_wx<HT, 2, 1>(dst, w, K, N, x, T, add, bcast);
    default: return gemv_wx<HT, 1, 0>(dst, w, K, N, x, T, add, bcast);
    }
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

/* dst [T,N] = W x (+ add) as k_mmf.cu's launcher runs it: T <= 8 k_mmh1's blocks (variant: 10 WPR + XS,
 * cu_config.mmh_wpr / mmh_xs), else k_mmh's tiles (variant 1: k_mmh_big's, cu_config.mmh_big);
 * bf16 0: F16 weights. 0, or -1 on a deadlock */
extern "C" int sb_emu_mmh(int bf16, int variant, float *dst, const uint8_t *w, long long K, long long N, const float *x, long long T,
                          const float *add, int bcast) {
    if (T <= 8) return bf16 ? gemv<CU_T_BF16>(variant, dst, w, K, N, x, T, add, bcast) : gemv<CU_T_F16>(variant, dst, w, K, N, x, T, add, bcast);
    if (variant) return bf16 ? big<CU_T_BF16>(dst, w, K, N, x, T, add, bcast) : big<CU_T_F16>(dst, w, K, N, x, T, add, bcast);
    return bf16 ? tile<CU_T_BF16>(dst, w, K, N, x, T, add, bcast) : tile<CU_T_F16>(dst, w, K, N, x, T, add, bcast);
}

extern "C" unsigned sb_emu_f2bf(float f) { return cu_f2bf(f); }

template <int HT, int WPR, int XS>
static int multi_wx(const mmhv_set &m, unsigned blocks, const float *x, long long K, long long T) {
    uint16_t *xs = (uint16_t *)emu_dsmem;
    if (T == 1) return emu_run(blocks, 128 * WPR, [&] { mmh_gemv_multi<HT, 1, WPR, XS>(m, x, K, T, blockIdx.x, xs); });
    if (T == 2) return emu_run(blocks, 128 * WPR, [&] { mmh_gemv_multi<HT, 2, WPR, XS>(m, x, K, T, blockIdx.x, xs); });
    if (T <= 4) return emu_run(blocks, 128 * WPR, [&] { mmh_gemv_multi<HT, 4, WPR, XS>(m, x, K, T, blockIdx.x, xs); });
    return emu_run(blocks, 128 * WPR, [&] { mmh_gemv_multi<HT, 8, WPR, XS>(m, x, K, T, blockIdx.x, xs); });
}

/* k_mmh1_multi's blocks (variant 10: a warp a row; 21: 2 warps a row, x in shared memory) over n
 * segments (w[k], dst[k], add[k] with bcast[k], N[k] rows), or a gate / up pair (glu 1 SwiGLU, 2
 * GeGLU) writing into dst[0]; 0, or -1 on a deadlock */
extern "C" int sb_emu_mmh_multi(int bf16, int variant, int n, const uint8_t *const *w, float *const *dst, const float *const *add,
                                const int *bcast, const long long *N, long long K, const float *x, long long T, int glu) {
    mmhv_set m = {};
    m.n = n, m.glu = glu;
    unsigned blocks = 0;
    for (int k = 0; k < n; k++) {
        m.s[k] = mmhv_seg{w[k], dst[k], add[k], N[k], bcast[k], 0};
        m.s[k].nb = glu ? (k ? 0u : (unsigned)((N[0] + 1) / 2)) : (unsigned)((N[k] + 3) / 4);
        blocks += m.s[k].nb;
    }
    if (variant == 21) return bf16 ? multi_wx<CU_T_BF16, 2, 1>(m, blocks, x, K, T) : multi_wx<CU_T_F16, 2, 1>(m, blocks, x, K, T);
    return bf16 ? multi_wx<CU_T_BF16, 1, 0>(m, blocks, x, K, T) : multi_wx<CU_T_F16, 1, 0>(m, blocks, x, K, T);
}
