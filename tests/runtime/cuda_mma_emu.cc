/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_mma_emu.cc — the int8 tensor-core GEMM's kernels (backend/cuda/device/
 * mma_tile.cuh: k_mma, k_mma_reduce) built for the host: test_cuda_mma_emu compiles this file with
 * the host C++ compiler against tests/codegen/emu/cuda_emu.h (the warp's fragments exchanged for
 * ldmatrix and the s8 MMAs per PTX's layouts; -fsanitize=alignment traps) and runs one segment's
 * grid as k_mma.cu's launchers would: a tile shape, or the 32 x 64 or 256 x 8 tile with K split over
 * blocks and the reduce kernel after it.
 */
#include "backend/cuda/device/mma_tile.cuh"
#include "emu_layout.h"

template <int TYPE, int XQ, int BN, int BT, bool SPLIT>
static int go(ma_segs sg, uint64_t rb, long long K, const uint8_t *x, long long T, int nsplit, float *part) {
    const unsigned gx = ma_tiles(&sg, BN), gy = (unsigned)((T + BT - 1) / BT);
    int spb = 0; /* a split is whole K steps, as k_mma.cu's launchers make it */
    const int gz = SPLIT ? ma_split_steps(K / 32, nsplit, &spb) : 1;
    if (emu_run3(dim3{gx, gy, (unsigned)gz}, 256, [&] { k_mma<TYPE, XQ, BN, BT, SPLIT>(sg, rb, K, x, T, spb, part, nullptr); })) return -1;
    if (!SPLIT) return 0;
    long long outs = 0;
    for (int q = 0; q < sg.n; q++) outs += T * sg.N[q];
    return emu_run((unsigned)((outs + 255) / 256), 256, [&] { k_mma_reduce(sg, part, T, gz); });
}

template <int TYPE, int XQ>
static int tiles(int tile, ma_segs sg, uint64_t rb, long long K, const uint8_t *x, long long T, int nsplit, float *part) {
    switch (tile) {
    case 0: return go<TYPE, XQ, 128, 64, false>(sg, rb, K, x, T, 0, part);
    case 1: return go<TYPE, XQ, 64, 64, false>(sg, rb, K, x, T, 0, part);
    case 2: return go<TYPE, XQ, 64, 32, false>(sg, rb, K, x, T, 0, part);
    case 3: return go<TYPE, XQ, 32, 64, false>(sg, rb, K, x, T, 0, part);
    case 4: return go<TYPE, XQ, 32, 64, true>(sg, rb, K, x, T, nsplit, part);
    case 5: return go<TYPE, XQ, 256, 8, false>(sg, rb, K, x, T, 0, part);
    case 6: return go<TYPE, XQ, 256, 8, true>(sg, rb, K, x, T, nsplit, part);
    case 7: return go<TYPE, XQ, 128, 32, false>(sg, rb, K, x, T, 0, part);
    case 8: return go<TYPE, XQ, 128, 32, true>(sg, rb, K, x, T, nsplit, part);
    default: return go<TYPE, XQ, 128, 64, true>(sg, rb, K, x, T, nsplit, part);
    }
}

/* dst [T,N] = W x (+ add) for weights of `type` on q8_1 (xq8k 0) or q8_K activations; tile 0..3: the
 * 128 x 64, 64 x 64, 64 x 32 and 32 x 64 tiles, 4: 32 x 64 split nsplit ways (part: nsplit x T x N
 * floats) and reduced; 5, 6: the 256 x 8 decode tile whole and split; 7, 8: the 128 x 32 tile; 9: 128 x 64 split.
 * nonfinite (NULL: none): the epilogue's flag, set to 1 where a value written is not finite. -1: a deadlock, -2: a type the kernel does not take. */
extern "C" int sb_emu_mma(int type, int xq8k, int tile, int nsplit, float *dst, const uint8_t *w, long long N, long long K, const uint8_t *x,
                          long long T, const float *add, int bcast, float *part, unsigned *nonfinite) {
    ma_segs sg = {};
    sg.w[0] = w, sg.dst[0] = dst, sg.N[0] = N, sg.ep[0] = cu_epilogue{add, bcast, nonfinite}, sg.wt[0] = type, sg.n = 1;
    const uint64_t rb = mmvq_row_bytes(type, K);
#define T8(t, xq) \
    if (type == t) return tiles<t, xq>(tile, sg, rb, K, x, T, nsplit, part);
    if (!xq8k) {
        T8(CU_T_Q4_0, CU_T_Q8_1) T8(CU_T_Q4_1, CU_T_Q8_1) T8(CU_T_Q5_0, CU_T_Q8_1) T8(CU_T_Q5_1, CU_T_Q8_1) T8(CU_T_Q8_0, CU_T_Q8_1)
        T8(CU_T_IQ4_NL, CU_T_Q8_1) T8(CU_T_Q4_K, CU_T_Q8_1) T8(CU_T_Q5_K, CU_T_Q8_1) T8(CU_T_Q6_K, CU_T_Q8_1)
    } else {
        T8(CU_T_Q3_K, CU_T_Q8_K) T8(CU_T_Q4_K, CU_T_Q8_K) T8(CU_T_Q5_K, CU_T_Q8_K) T8(CU_T_Q6_K, CU_T_Q8_K) T8(CU_T_IQ4_XS, CU_T_Q8_K)
    }
#undef T8
    return -2;
}
