/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_rope_emu.cc — the normed rope's device code (backend/cuda/device/rope_norm.cuh,
 * k_rope_norm) built for the host: test_cuda_rope_emu compiles this file with the host C++ compiler
 * against tests/codegen/emu/cuda_emu.h and runs it as cu_rope_norm launches it (grid (T, H / hpb),
 * nt * hpb threads).
 */
#include "backend/cuda/device/rope_norm.cuh"

/* cu_rope_norm's launch: into dst, or with cache (f16 when f16) at rows[t] (NULL: pos[t]), mod ring
 * (a sliding-window ring cache of that many rows; 0: linear) */
extern "C" int sb_emu_rope_norm(float *dst, void *cache, int f16, const float *x, const int32_t *pos, const int32_t *rows, long long D,
                                long long H, long long T, int n_rot, int mode, float theta_scale, float freq_scale, const float *ff, float eps,
                                const float *w, long long ring) {
    cu_rope_args a = {};
    a.D = D, a.H = H, a.T = T, a.n_rot = n_rot, a.mode = mode, a.theta_scale = theta_scale, a.freq_scale = freq_scale;
    a.attn_factor = 1.0f, a.ff = ff, a.cache = cache, a.ctype = f16 ? CU_T_F16 : CU_T_F32, a.rows = rows, a.ring = ring;
    int nt, hpb;
    rope_norm_geometry(n_rot, &nt, &hpb);
    return emu_run3(dim3{(unsigned)T, (unsigned)((H + hpb - 1) / hpb), 1}, (unsigned)(nt * hpb), [&] {
        __shared__ double part[ROPE_NORM_WARPS];
        if (cache && f16) rope_norm_block<uint16_t>(nullptr, (uint16_t *)cache, x, pos, a, eps, w, part);
        else rope_norm_block<float>(dst, (float *)cache, x, pos, a, eps, w, part);
    });
}
