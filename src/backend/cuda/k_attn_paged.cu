/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attn_paged.cu — attention over a paged KV cache (a block table per token: many
 * sequences in one step, runtime/batch.h; and a contiguous cache of heads past cu_attention's 256 as
 * one block of its C rows). A step of one token at a depth class the session's decode kernels take
 * runs on them through its table instead (cu_attn_decode with cu_attn_args.tbl; exec_cuda_plan.c
 * cx_attn_paged_on_dec).
 * Math (op_attention with a table, ops_ref.c): for token t at position p = pos[t] and query head h,
 * over the visible keys j in [lo, p], lo = max(0, p - window + 1) (window 0: lo = 0), each stored at
 * cache row tbl[t][j / bs] * bs + j % bs: s_j = q.k_j * scale, softcapped (cap * tanh(s / cap)) when
 * softcap > 0; out = sum_j softmax(s)_j v_j. Kv head h / (Hq / Hkv).
 * Geometry: 128-thread blocks, grid (Hq, T, S); its 4 warps take keys j = j0 + w, j0 + w + 4, ...
 * < j1; lanes hold pairs of head dimensions (pair i = lane + 32 k, D/2 pairs, D <= 512), so each
 * key's row is read coalesced (half2 / float2) and its score is a warp sum. Each warp keeps an online
 * softmax (max, sum, acc); the 4 are merged in shared memory at the end.
 * Key split (flash-decoding; S = a->nsplit, chosen by the caller from shapes): with n = p - lo + 1
 * read on the device (one captured graph serves every depth), kps = max(kmin, ceil(n / S)) and
 * na = ceil(n / kps); split z < na takes [lo + z kps, min(lo + (z + 1) kps, p + 1)) and writes its
 * partial (m, l, acc[D]) to scratch[((t Hq + h) S + z) (D + 2)]; splits z >= na return at once.
 * The na partials are then merged: M = max m_z, f_z = exp(m_z - M), out = sum f_z acc_z / sum f_z
 * l_z — by the last split block of the (head, token) to arrive (an atomic counter a (head, token),
 * threadfences; T * Hq <= CU_ATT_COUNTERS: one launch, as the contiguous decode kernel), else by
 * k_attn_paged_merge (grid (Hq, T)) after it: the same code (pa_merge), so the same bits. Where
 * na == 1 split 0 writes out itself, exactly as S = 1 does, and nothing merges. S = 1: one launch of
 * the unsplit kernel, no scratch.
 * Traffic: per (token, head) the visible keys' K and V rows (2 * D * bytes each), read once per query
 * head (kv heads shared by G query heads are re-read from L2); ~4 FLOP per byte of K/V: bandwidth
 * and latency bound — the split is for latency: T * Hq blocks of one serial key walk each leave most
 * SMs idle at decode (gemma4's 8 global heads: 8 blocks). Partials: T Hq na (D + 2) floats written
 * and read once through L2. Same results as the contiguous kernels up to f32 summation order (the
 * softmax is online here).
 * Grouped variant (a->hb > 0, cu_config.attn_gqa, on by default; F16 caches of D 64 / 128 / 256 /
 * 512, F32 of D 64 / 128): a block serves hb query heads of one kv head (hb | Hq / Hkv, up to 8:
 * Qwen2.5's 7 in one block), so each K/V row is read once for them, with 16-byte loads spread over
 * key groups of 8-32 lanes — device/attn_paged_gqa.cuh (its geometry, traffic and estimates); same
 * split rule (pa_active), up to CU_ATT_PAGED_GQA_MAX_SPLITS, partials of D + 4 floats; merged by
 * the last split block (D <= 128, counters, a warp a head) or by a merge kernel of its own.
 * Quantized output (a->xq, pass fuse_attn_quant): whichever block writes a head's out (the unsplit
 * block, split 0 alone, the merging block or merge kernel) also writes its q8_1 blocks with the
 * quantizer's q8_1_store over the same values — the bytes cu_quantize_act of out writes.
 * The kernels are device/attn_paged.cuh and device/attn_paged_gqa.cuh. Tested against: ops_ref.c
 * op_attention (paged) through tests/runtime/test_cuda_ops.c on a GPU and test_cuda_attn_paged_emu on
 * the CPU (S 1..128), and the batched engine against CUDA sessions through tests/api/test_batch.c.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/attn_paged.cuh"
#include "backend/cuda/device/attn_paged_gqa.cuh"

extern "C" uint64_t cu_attention_paged_scratch(const cu_attn_paged_args *a) {
    return a->nsplit > 1 ? (uint64_t)a->T * (uint64_t)a->Hq * (uint64_t)a->nsplit * (uint64_t)(a->D + (a->hb > 0 ? 4 : 2)) : 0;
}

extern "C" bool cu_attention_paged_merges_in_kernel(const cu_attn_paged_args *a) {
    return a->nsplit > 1 && (a->hb <= 0 || a->D <= 128) && a->T * a->Hq <= CU_ATT_COUNTERS;
}

extern "C" int cu_attention_paged_launches(const cu_attn_paged_args *a, bool counters) {
    return a->nsplit > 1 && !(counters && cu_attention_paged_merges_in_kernel(a)) ? 2 : 1;
}

/* the grouped kernel's instance cap for hb heads a block: the power of two >= hb */
static int gqa_cap(int hb) { return hb <= 1 ? 1 : hb <= 2 ? 2 : hb <= 4 ? 4 : 8; }

/* elements of a row a lane of the grouped kernel holds for a's shape (pg_shape's EPL); 0: a shape
 * it has no instance of */
static int gqa_lane_elems(const cu_attn_paged_args *a) {
    if (a->ctype == CU_T_F16)
        return a->D == 64 ? pg_shape<64, true>::EPL : a->D == 128 ? pg_shape<128, true>::EPL : a->D == 256 ? pg_shape<256, true>::EPL
             : a->D == 512 ? pg_shape<512, true>::EPL : 0;
    if (a->ctype == CU_T_F32) return a->D == 64 ? pg_shape<64, false>::EPL : a->D == 128 ? pg_shape<128, false>::EPL : 0;
    return 0;
}

extern "C" bool cu_attention_paged_gqa_ok(const cu_attn_paged_args *a, int hb) {
    const int epl = gqa_lane_elems(a);
    return epl > 0 && hb >= 1 && hb <= 8 && gqa_cap(hb) * epl <= 64 && a->Hkv > 0 && a->Hq % a->Hkv == 0 && (a->Hq / a->Hkv) % hb == 0;
}

/* the grouped kernel's instance for hb heads a block at (D, F16): HBC = gqa_cap(hb), up to the
 * shape's register bound (HBC EPL <= 64; cu_attention_paged_gqa_ok checked it) */
template <int D, bool F16, bool SPLIT> static auto *gqa_kernel_hb(int hb) {
    auto *kf = k_attn_paged_gqa<D, F16, 1, SPLIT>;
    if (hb > 1) kf = k_attn_paged_gqa<D, F16, 2, SPLIT>;
    if (hb > 2) kf = k_attn_paged_gqa<D, F16, 4, SPLIT>;
    if constexpr (8 * pg_shape<D, F16>::EPL <= 64)
        if (hb > 4) kf = k_attn_paged_gqa<D, F16, 8, SPLIT>;
    return kf;
}
template <bool SPLIT> static auto *gqa_kernel(const cu_attn_paged_args *a) {
    if (a->ctype == CU_T_F32) return a->D == 64 ? gqa_kernel_hb<64, false, SPLIT>(a->hb) : gqa_kernel_hb<128, false, SPLIT>(a->hb);
    return a->D == 64 ? gqa_kernel_hb<64, true, SPLIT>(a->hb) : a->D == 128 ? gqa_kernel_hb<128, true, SPLIT>(a->hb)
         : a->D == 256 ? gqa_kernel_hb<256, true, SPLIT>(a->hb) : gqa_kernel_hb<512, true, SPLIT>(a->hb);
}

/* k_attn_paged_gqa (device/attn_paged_gqa.cuh): grid (Hq / hb, T, S); with S > 1 merged by its last
 * blocks (D <= 128, counters: cu_attention_paged_merges_in_kernel), else by
 * k_attn_paged_gqa_merge_warps over (Hq / hb, T) (D <= 128) or k_attn_paged_gqa_merge over (Hq, T,
 * D / 128) after it */
static sb_status launch_gqa(cudaStream_t st, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                            const cu_attn_paged_args *a, float *scratch, unsigned *cnt) {
    if (!cu_attention_paged_gqa_ok(a, a->hb) || a->bs <= 0 || a->n_tbl <= 0 || a->nsplit > CU_ATT_PAGED_GQA_MAX_SPLITS)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: grouped paged attention of head_dim %lld (F16: 64, 128, 256, 512; F32: 64, 128), heads "
                       "%lld/%lld, %d a block (dividing them, <= 8; <= 4 at 512), cache type %d, block size %d, %d splits (<= %d)",
                       (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->hb, a->ctype, a->bs, a->nsplit, CU_ATT_PAGED_GQA_MAX_SPLITS);
    const unsigned nb = (unsigned)(a->Hq / a->hb);
    if (a->nsplit <= 1) {
        cu_launch(gqa_kernel<false>(a), dim3(nb, (unsigned)a->T), 32 * PG_WARPS, st, dst, q, k, v, pos, tbl, *a, (float *)NULL, (unsigned *)NULL);
        return cu_after_launch("k_attn_paged_gqa");
    }
    if (!scratch) return sb_fail(SB_ERR_INTERNAL, "cuda: paged attention of %d splits without scratch", a->nsplit);
    unsigned *merge_cnt = cnt && cu_attention_paged_merges_in_kernel(a) ? cnt : NULL; /* the last split block merges */
    cu_launch(gqa_kernel<true>(a), dim3(nb, (unsigned)a->T, (unsigned)a->nsplit), 32 * PG_WARPS, st, dst, q, k, v, pos, tbl, *a, scratch,
              merge_cnt);
    SB_TRY(cu_after_launch("k_attn_paged_gqa (split)"));
    if (merge_cnt) return SB_OK;
    if (a->D <= 128) {
        cu_launch(a->D == 64 ? k_attn_paged_gqa_merge_warps<64> : k_attn_paged_gqa_merge_warps<128>, dim3(nb, (unsigned)a->T), 32 * PG_WARPS, st,
                  dst, (const float *)scratch, pos, *a);
        return cu_after_launch("k_attn_paged_gqa_merge_warps");
    }
    cu_launch(k_attn_paged_gqa_merge, dim3((unsigned)a->Hq, (unsigned)a->T, (unsigned)(a->D / 128)), 32 * PG_WARPS, st, dst,
              (const float *)scratch, pos, *a);
    return cu_after_launch("k_attn_paged_gqa_merge");
}

extern "C" sb_status cu_attention_paged(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                        const int32_t *tbl, const cu_attn_paged_args *a, float *scratch, unsigned *cnt) {
    if (a->T <= 0) return SB_OK;
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: paged attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    if (a->hb > 0) return launch_gqa((cudaStream_t)s, dst, q, k, v, pos, tbl, a, scratch, cnt);
    if (a->D % 2 || a->D > 2 * 32 * PA_PAIRS || a->Hkv <= 0 || a->Hq % a->Hkv || a->bs <= 0 || a->n_tbl <= 0 ||
        (a->ctype != CU_T_F16 && a->ctype != CU_T_F32) || a->nsplit > CU_ATT_PAGED_MAX_SPLITS)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: paged attention of head_dim %lld (even, <= %d), heads %lld/%lld, block size %d, cache type %d, "
                       "%d splits (<= %d)", (long long)a->D, 2 * 32 * PA_PAIRS, (long long)a->Hq, (long long)a->Hkv, a->bs, a->ctype, a->nsplit,
                       CU_ATT_PAGED_MAX_SPLITS);
    const bool f16 = a->ctype == CU_T_F16;
    const cudaStream_t st = (cudaStream_t)s;
    if (a->nsplit <= 1) {
        const dim3 grid((unsigned)a->Hq, (unsigned)a->T);
        cu_launch(f16 ? k_attn_paged<true, false> : k_attn_paged<false, false>, grid, 32 * PA_WARPS, st, dst, q, k, v, pos, tbl, *a,
                  (float *)NULL, (unsigned *)NULL);
        return cu_after_launch("k_attn_paged");
    }
    if (!scratch) return sb_fail(SB_ERR_INTERNAL, "cuda: paged attention of %d splits without scratch", a->nsplit);
    const dim3 grid((unsigned)a->Hq, (unsigned)a->T, (unsigned)a->nsplit);
    unsigned *merge_cnt = cnt && cu_attention_paged_merges_in_kernel(a) ? cnt : NULL; /* the last split block merges */
    cu_launch(f16 ? k_attn_paged<true, true> : k_attn_paged<false, true>, grid, 32 * PA_WARPS, st, dst, q, k, v, pos, tbl, *a, scratch, merge_cnt);
    SB_TRY(cu_after_launch("k_attn_paged (split)"));
    if (merge_cnt) return SB_OK;
    cu_launch(k_attn_paged_merge, dim3((unsigned)a->Hq, (unsigned)a->T), 32 * PA_WARPS, st, dst, (const float *)scratch, pos, *a);
    return cu_after_launch("k_attn_paged_merge");
}
