/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_attn_decode_emu.cc — the contiguous-cache attention kernels WITH their host
 * launchers (backend/cuda/k_attention.cu: k_attn variants 1 / 2 and k_attn_combine;
 * k_attn_decode.cu: k_attn_dec's small layout, warp path and tiles, the SMALL_ONLY kernel;
 * k_attn_deep.cu: the depth-class split and merge kernels) built for the host: test_cuda_attn_decode_emu
 * compiles this file with the host C++ compiler against tests/codegen/emu/cuda_emu.h and its
 * cuda_runtime.h, so cu_attention itself picks the kernel and sizes the grid as on the GPU (with
 * the device's multiprocessors and cu_config given here) and each launch runs whole.
 */
#include "backend/cuda/k_attention.cu"
#include "backend/cuda/k_attn_decode.cu"
#include "backend/cuda/k_attn_deep.cu"
#include "emu_library.h" /* cu_cfg (emu_cfg), cu_sm_count (emu_sms), cu_pdl_on, sb_fail (emu_err) */

/* cu_attention of dims = {D, Hq, Hkv, T, ctx, ring, depth_max}, f = {scale, softcap}, i = {ctype,
 * window, nsplit, variant, kmin, hpb, warp, small, attn_pre} (cu_attn_args' fields: the C test sees
 * no backend header) into dst, with NaN-poisoned scratch (cu_attention_scratch floats) and zeroed
 * split counters, which it must leave zeroed (else -3). *path: 1 k_attn_deep (cu_attn_deep_fits), 2
 * k_attn_dec (cu_attn_decode_fits), 3 k_attn. 0, -1 on an emulation failure (a deadlock) or the
 * launcher's status (its text on stderr). The first call fixes the multiprocessors (sms) for good:
 * the launchers cache them. */
extern "C" int sb_emu_attention(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const long long *dims,
                                const float *f, const int *i, int sms, int *path) {
    emu_sms = sms;
    emu_cfg.attn_pre = i[8];
    emu_cfg.attn_deep_kmin = 32;
    cu_attn_args a = {};
    a.D = dims[0], a.Hq = dims[1], a.Hkv = dims[2], a.T = dims[3], a.ctx = dims[4], a.ring = dims[5], a.depth_max = dims[6];
    a.scale = f[0], a.softcap = f[1];
    a.ctype = i[0], a.window = i[1], a.nsplit = i[2], a.variant = i[3], a.kmin = i[4], a.hpb = i[5], a.warp = i[6], a.small = i[7];
    static unsigned cnt[CU_ATT_COUNTERS];
    const uint64_t ns = cu_attention_scratch(&a);
    float *scratch = ns ? (float *)aligned_alloc(16, (ns * 4 + 15) / 16 * 16) : nullptr;
    for (uint64_t e = 0; e < ns; e++) scratch[e] = __int_as_float(0x7fc00000);
    *path = a.variant == 4 && a.T == 1 && cu_attn_decode_fits(&a, cnt, scratch) ? (scratch && cu_attn_deep_fits(&a) ? 1 : 2) : 3;
    const sb_status st = cu_attention(nullptr, dst, q, k, v, pos, &a, scratch, cnt);
    free(scratch);
    if (st != SB_OK) {
        fprintf(stderr, "cu_attention: %s\n", emu_err);
        return st == SB_ERR_DEVICE ? -1 : (int)st;
    }
    for (int e = 0; e < CU_ATT_COUNTERS; e++)
        if (cnt[e]) return -3;
    return 0;
}
