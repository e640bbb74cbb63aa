/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_attn_paged_emu.cc — the paged attention kernels (backend/cuda/device/
 * attn_paged.cuh) built for the host: test_cuda_attn_paged_emu compiles this file with the host C++
 * compiler against tests/codegen/emu/cuda_emu.h and runs their grids as k_attn_paged.cu's launcher
 * sizes them: S <= 1 the unsplit kernel (a block of 4 warps per (query head, token)); S > 1 the
 * split kernel over (query head, token, split) into scratch, then k_attn_paged_merge over (query
 * head, token), or (in_kernel) its last block a (head, token) merging over counters; with hb > 0 the
 * grouped kernels (device/attn_paged_gqa.cuh) as launch_gqa sizes them (F16 head_dim 64 / 128 / 256 /
 * 512, F32 64 / 128; every instance cap HBC a hb can take), writing the q8_1 output too where asked;
 * and the plain q8_1 quantizer (device/act_quant.cuh) that output is compared with.
 */
#include "backend/cuda/device/attn_paged_gqa.cuh"
#include "backend/cuda/device/act_quant.cuh"

/* the grouped kernel's instance HBC (a.hb <= HBC heads a block): grid (Hq / hb, T, S); S > 1 then
 * merged by the last split block over counters (in_kernel, D <= 128: which must leave them zeroed,
 * else -3), by k_attn_paged_gqa_merge_warps over (Hq / hb, T) (D <= 128) or by
 * k_attn_paged_gqa_merge over (Hq, T, D / 128) */
template <int D, bool F16, int HBC> static int run_gqa(float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                                       const int32_t *tbl, const cu_attn_paged_args &a, float *scratch, bool in_kernel) {
    const unsigned nb = (unsigned)(a.Hq / a.hb);
    if (a.nsplit <= 1)
        return emu_run3(dim3{nb, (unsigned)a.T, 1}, 32 * PG_WARPS,
                        [&] { k_attn_paged_gqa<D, F16, HBC, false>(dst, q, k, v, pos, tbl, a, nullptr, nullptr); });
    static unsigned cnt[CU_ATT_COUNTERS];
    if (in_kernel && (D > 128 || a.T * a.Hq > CU_ATT_COUNTERS)) return -2;
    unsigned *c = in_kernel ? cnt : nullptr;
    if (emu_run3(dim3{nb, (unsigned)a.T, (unsigned)a.nsplit}, 32 * PG_WARPS,
                 [&] { k_attn_paged_gqa<D, F16, HBC, true>(dst, q, k, v, pos, tbl, a, scratch, c); }))
        return -1;
    if (in_kernel) {
        for (int i = 0; i < CU_ATT_COUNTERS; i++)
            if (cnt[i]) return -3;
        return 0;
    }
    if (D <= 128) return emu_run3(dim3{nb, (unsigned)a.T, 1}, 32 * PG_WARPS, [&] { k_attn_paged_gqa_merge_warps<D>(dst, scratch, pos, a); });
    return emu_run3(dim3{(unsigned)a.Hq, (unsigned)a.T, (unsigned)(a.D / 128)}, 32 * PG_WARPS, [&] { k_attn_paged_gqa_merge(dst, scratch, pos, a); });
}

/* the instance k_attn_paged.cu's gqa_kernel_hb picks: HBC the power of two >= hb, within the shape's
 * register bound (HBC EPL <= 64) */
template <int D, bool F16> static int gqa_hb(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                                             const cu_attn_paged_args &a, float *scratch, bool in_kernel) {
    if (a.hb < 1 || a.hb > 8 || (a.Hq / a.Hkv) % a.hb) return -2;
    if (a.hb <= 1) return run_gqa<D, F16, 1>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
    if (a.hb <= 2) return run_gqa<D, F16, 2>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
    if (a.hb <= 4) return run_gqa<D, F16, 4>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
    if constexpr (8 * pg_shape<D, F16>::EPL <= 64) return run_gqa<D, F16, 8>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
    return -2;
}

static int gqa(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl, const cu_attn_paged_args &a,
               float *scratch, bool in_kernel) {
    if (a.ctype == CU_T_F16) switch (a.D) {
        case 64: return gqa_hb<64, true>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        case 128: return gqa_hb<128, true>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        case 256: return gqa_hb<256, true>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        case 512: return gqa_hb<512, true>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        }
    if (a.ctype == CU_T_F32) switch (a.D) {
        case 64: return gqa_hb<64, false>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        case 128: return gqa_hb<128, false>(dst, q, k, v, pos, tbl, a, scratch, in_kernel);
        }
    return -2;
}

/* in_kernel: the split's last block merges (zeroed counters, which it must leave zeroed: else -3) */
template <bool F16> static int run(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                                   const cu_attn_paged_args &a, float *scratch, bool in_kernel) {
    const dim3 grid{(unsigned)a.Hq, (unsigned)a.T, 1};
    if (a.nsplit <= 1) return emu_run3(grid, 32 * PA_WARPS, [&] { k_attn_paged<F16, false>(dst, q, k, v, pos, tbl, a, nullptr, nullptr); });
    const dim3 split{(unsigned)a.Hq, (unsigned)a.T, (unsigned)a.nsplit};
    static unsigned cnt[CU_ATT_COUNTERS];
    if (in_kernel) {
        if (a.T * a.Hq > CU_ATT_COUNTERS) return -2;
        if (emu_run3(split, 32 * PA_WARPS, [&] { k_attn_paged<F16, true>(dst, q, k, v, pos, tbl, a, scratch, cnt); })) return -1;
        for (int i = 0; i < CU_ATT_COUNTERS; i++)
            if (cnt[i]) return -3;
        return 0;
    }
    if (emu_run3(split, 32 * PA_WARPS, [&] { k_attn_paged<F16, true>(dst, q, k, v, pos, tbl, a, scratch, nullptr); })) return -1;
    return emu_run3(grid, 32 * PA_WARPS, [&] { k_attn_paged_merge(dst, scratch, pos, a); });
}

/* dims = {D, Hq, Hkv, T, n_tbl}, f = {scale, softcap, q_rope.theta_scale, .freq_scale, .attn_factor},
 * i = {ctype, window, bs, nsplit, kmin, hb, q_rope.n_rot, .mode, in_kernel merge (a split over counters),
 * ring (0: the table; else a contiguous sliding-window ring of that many rows)},
 * q_ff = q_rope.ff, xq = the q8_1 output (NULL: none; cu_attn_paged_args' fields: the C
 * test sees no backend header); scratch: T Hq S (D + 2) floats (hb > 0: D + 4) with S > 1; -1: a
 * deadlock in the emulation, -2: a grouped shape not built here */
extern "C" int sb_emu_attn_paged(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                                 const long long *dims, const float *f, const int *i, const float *q_ff, float *scratch, void *xq) {
    const cu_attn_paged_args a = {.D = dims[0], .Hq = dims[1], .Hkv = dims[2], .T = dims[3], .ctype = i[0], .scale = f[0],
                                  .softcap = f[1], .window = i[1], .bs = i[2], .n_tbl = dims[4], .ring = i[9], .nsplit = i[3], .kmin = i[4], .hb = i[5],
                                  .q_rope = {.n_rot = i[6], .mode = i[7], .theta_scale = f[2], .freq_scale = f[3], .attn_factor = f[4],
                                             .ff = q_ff}, .xq = xq};
    if (a.hb > 0) return gqa(dst, q, k, v, pos, tbl, a, scratch, i[8] != 0);
    if (a.ctype == CU_T_F16) return run<true>(dst, q, k, v, pos, tbl, a, scratch, i[8] != 0);
    return run<false>(dst, q, k, v, pos, tbl, a, scratch, i[8] != 0);
}

/* rows of E values (E % 32 == 0) to q8_1 blocks as cu_quantize_act does it (k_quant_rows<Q8_1, AQ_PLAIN>:
 * 1024 threads a row, quant_row): what a fused q8_1 output must equal byte for byte */
extern "C" int sb_emu_quant_q8_1(uint8_t *xq, const float *y, long long E, long long rows) {
    return emu_run((unsigned)rows, 1024, [&] {
        const int64_t r = blockIdx.x;
        quant_row<CU_T_Q8_1, 1024>(xq + act_row_bytes(CU_T_Q8_1, E) * (uint64_t)r, E, src_plain{y + r * E});
    });
}
