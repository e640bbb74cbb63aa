/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_attn_paged_emu.cc — the paged attention kernel (backend/cuda/device/
 * attn_paged.cuh) built for the host: test_cuda_attn_paged_emu compiles this file with the host C++
 * compiler against tests/codegen/emu/cuda_emu.h and runs its grid as k_attn_paged.cu's launcher
 * sizes it (a block of 4 warps per (query head, token)).
 */
#include "backend/cuda/device/attn_paged.cuh"

/* dims = {D, Hq, Hkv, T, n_tbl}, f = {scale, softcap}, i = {ctype, window, bs} (cu_attn_paged_args'
 * fields: the C test sees no backend header); -1: a deadlock in the emulation */
extern "C" int sb_emu_attn_paged(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                                 const long long *dims, const float *f, const int *i) {
    const cu_attn_paged_args a = {.D = dims[0], .Hq = dims[1], .Hkv = dims[2], .T = dims[3], .ctype = i[0], .scale = f[0],
                                  .softcap = f[1], .window = i[1], .bs = i[2], .n_tbl = dims[4]};
    const dim3 grid{(unsigned)a.Hq, (unsigned)a.T, 1};
    if (a.ctype == CU_T_F16) return emu_run3(grid, 32 * PA_WARPS, [&] { k_attn_paged<true>(dst, q, k, v, pos, tbl, a); });
    return emu_run3(grid, 32 * PA_WARPS, [&] { k_attn_paged<false>(dst, q, k, v, pos, tbl, a); });
}
