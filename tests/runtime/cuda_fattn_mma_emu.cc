/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_fattn_mma_emu.cc — the tensor-core flash-attention prefill's kernels (backend/
 * cuda/device/fattn_mma.cuh: k_fattn_mma, k_fattn_ws) built for the host: test_cuda_fattn_mma_emu
 * compiles this file with the host C++ compiler against tests/codegen/emu/cuda_emu.h (threads as
 * fibers, the m16n8k16 MMA's and ldmatrix's (.trans) fragment exchange, cp.async as plain copies,
 * dynamic shared memory NaN-filled before every block) and runs one launch's grid as k_fattn_mma.cu's
 * launcher shapes it: (query tiles, Hq, S key splits) of 4 warps, 64-key tiles up to head_dim 128
 * and 32 at 256 / 512; or k_fattn_ws (16 queries, 2 warps with 2 ring slots) at head_dim 64 / 128.
 */
#include "backend/cuda/device/fattn_mma.cuh"

template <int D, int BK> static int mma(float *dst, const float *q, const uint16_t *k, const uint16_t *v, const int32_t *pos, int T, int Hq, int Hkv,
                                        float scale, float softcap, int window, int ring, int S, blk_q8_1 *xq, float *part, unsigned *cnt) {
    const dim3 grid{(unsigned)((T + FM_BQ(D) - 1) / FM_BQ(D)), (unsigned)Hq, (unsigned)S};
    const fm_rope rp = {};
    return emu_run3(grid, FM_WARPS * 32,
                    [&] { k_fattn_mma<D, BK>(dst, q, k, v, pos, T, Hq, Hkv, scale, softcap, window, ring, rp, xq, part, cnt); });
}
template <int D> static int ws(float *dst, const float *q, const uint16_t *k, const uint16_t *v, const int32_t *pos, int T, int Hq, int Hkv,
                               float scale, float softcap, int window, int ring, int S, blk_q8_1 *xq, float *part, unsigned *cnt) {
    const dim3 grid{(unsigned)((T + FW_BQ - 1) / FW_BQ), (unsigned)Hq, (unsigned)S};
    const fm_rope rp = {};
    return emu_run3(grid, 2 * 32, [&] { k_fattn_ws<D, 2, 2>(dst, q, k, v, pos, T, Hq, Hkv, scale, softcap, window, ring, rp, xq, part, cnt); });
}

/* queries a block of the launch (the scratch's row tiles): k_fattn_ws 16, else FM_BQ(D) */
extern "C" int sb_emu_fattn_bq(int D, int use_ws) { return use_ws ? FW_BQ : FM_BQ(D); }
extern "C" int sb_emu_fattn_ps(int D) { return FM_PS(D); }

/* dst [T][Hq][D] (and xq's q8_1 blocks when not NULL) for q [T][Hq][D], F16 caches k / v [C][Hkv][D],
 * pos [T]; f = {scale, softcap}; i = {D, T, Hq, Hkv, window, S, use_ws, ring (0: linear; else a
 * sliding-window ring of that many rows)}; part / cnt: the split's
 * scratch (tiles x Hq x S x BQ x FM_PS(D) floats) and counters (tiles x Hq, zero). 0, -1 on a
 * deadlock, -2 for a head_dim the kernels do not take. */
extern "C" int sb_emu_fattn_mma(float *dst, const float *q, const uint16_t *k, const uint16_t *v, const int32_t *pos, const float *f, const int *i,
                                blk_q8_1 *xq, float *part, unsigned *cnt) {
    const int D = i[0], T = i[1], Hq = i[2], Hkv = i[3], window = i[4], S = i[5], use_ws = i[6], ring = i[7];
    if (use_ws) {
        if (D == 64) return ws<64>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
        if (D == 128) return ws<128>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
        return -2;
    }
    switch (D) {
    case 64: return mma<64, 64>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
    case 128: return mma<128, 64>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
    case 256: return mma<256, 32>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
    case 512: return mma<512, 32>(dst, q, k, v, pos, T, Hq, Hkv, f[0], f[1], window, ring, S, xq, part, cnt);
    default: return -2;
    }
}
