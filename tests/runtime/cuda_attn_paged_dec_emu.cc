/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_attn_paged_dec_emu.cc — the session's decode attention kernels WITH their host
 * launchers (backend/cuda/k_attn_decode.cu: the SMALL_ONLY kernel; k_attn_deep.cu: the depth-class
 * split and merge kernels) reading a paged cache through a block table (the batched engine's B = 1
 * step, cu_attn_decode_paged_fits), and the same launch over a contiguous cache; and the plain q8_1
 * quantizer (device/act_quant.cuh) the fused q8_1 output is compared with. Built for the host by
 * test_cuda_attn_paged_dec_emu against tests/codegen/emu/cuda_emu.h, so cu_attn_decode itself picks
 * the kernel and sizes the grid as on the GPU (the device's multiprocessors and cu_config given here).
 */
#include "backend/cuda/k_attn_decode.cu"
#include "backend/cuda/k_attn_deep.cu"
#include "backend/cuda/device/act_quant.cuh"
#include "emu_library.h" /* cu_cfg (emu_cfg), cu_sm_count (emu_sms), cu_pdl_on, sb_fail (emu_err) */

/* cu_attn_decode of one token (T 1, variant 4) with dims = {D, Hq, Hkv, ctx, depth_max, bs}, f = {scale,
 * softcap, q_rope.theta_scale, .freq_scale, .attn_factor}, i = {ctype, window, nsplit, small, attn_pre,
 * q_rope.n_rot, .mode}, q_ff = q_rope.ff, xq the q8_1 output (NULL: none); tbl: the block table of a
 * paged cache of blocks of bs rows (NULL: the contiguous cache, bs unused). NaN-poisoned scratch,
 * zeroed split counters (left zeroed, else -3). *path: 1 k_attn_deep, 2 the SMALL_ONLY kernel, 0 a
 * paged launch cu_attn_decode_paged_fits refuses (nothing launched: the paged kernel's). 0, -1 on
 * an emulation failure or the launcher's status (its text on stderr). The first call fixes sms. */
extern "C" int sb_emu_attn_dec_paged(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                                     const long long *dims, const float *f, const int *i, const float *q_ff, void *xq, int sms, int *path) {
    emu_sms = sms;
    emu_cfg.attn_pre = i[4];
    emu_cfg.attn_deep_kmin = 32;
    cu_attn_args a = {};
    a.D = dims[0], a.Hq = dims[1], a.Hkv = dims[2], a.T = 1, a.ctx = dims[3], a.depth_max = dims[4];
    a.tbl = tbl, a.bs = tbl ? (int)dims[5] : 0;
    a.scale = f[0], a.softcap = f[1];
    a.q_rope = {i[5], i[6], f[2], f[3], f[4], q_ff};
    a.ctype = i[0], a.window = i[1], a.nsplit = i[2], a.variant = 4, a.small = i[3], a.xq = xq;
    const bool deep = cu_attn_deep_fits(&a);
    *path = tbl && !cu_attn_decode_paged_fits(&a) ? 0 : deep ? 1 : 2;
    if (!*path) return 0;
    static unsigned cnt[CU_ATT_COUNTERS];
    const uint64_t n0 = cu_attn_decode_scratch(&a), n1 = cu_attn_deep_scratch(&a), ns = n0 > n1 ? n0 : n1;
    float *scratch = ns ? (float *)aligned_alloc(16, (ns * 4 + 15) / 16 * 16) : nullptr;
    for (uint64_t e = 0; e < ns; e++) scratch[e] = __int_as_float(0x7fc00000);
    const sb_status st = cu_attn_decode(nullptr, dst, q, k, v, pos, &a, scratch, cnt);
    free(scratch);
    if (st != SB_OK) {
        fprintf(stderr, "cu_attn_decode: %s\n", emu_err);
        return st == SB_ERR_DEVICE ? -1 : (int)st;
    }
    for (int e = 0; e < CU_ATT_COUNTERS; e++)
        if (cnt[e]) return -3;
    return 0;
}

/* rows of E values (E % 32 == 0) to q8_1 blocks as cu_quantize_act does it (quant_row, 1024 threads a row) */
extern "C" int sb_emu_quant_q8_1(uint8_t *xq, const float *y, long long E, long long rows) {
    return emu_run((unsigned)rows, 1024, [&] {
        const int64_t r = blockIdx.x;
        quant_row<CU_T_Q8_1, 1024>(xq + act_row_bytes(CU_T_Q8_1, E) * (uint64_t)r, E, src_plain{y + r * E});
    });
}
