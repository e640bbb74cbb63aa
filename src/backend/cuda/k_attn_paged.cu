/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attn_paged.cu — attention over a paged KV cache (a block table per token: many
 * sequences in one step, runtime/batch.h).
 * Math (op_attention with a table, ops_ref.c): for token t at position p = pos[t] and query head h,
 * over the visible keys j in [max(0, p - window + 1), p] (window 0: from 0), each stored at cache
 * row tbl[t][j / bs] * bs + j % bs: s_j = q.k_j * scale, softcapped (cap * tanh(s / cap)) when
 * softcap > 0; out = sum_j softmax(s)_j v_j. Kv head h / (Hq / Hkv).
 * Geometry: one 128-thread block per (query head, token); its 4 warps take keys j = lo + w, lo + w +
 * 4, ...; lanes hold pairs of head dimensions (pair i = lane + 32 k, D/2 pairs, D <= 512), so each
 * key's row is read coalesced (half2 / float2) and its score is a warp sum. Each warp keeps an online
 * softmax (max, sum, acc); the 4 are merged in shared memory at the end.
 * Traffic: per (token, head) the visible keys' K and V rows (2 * D * bytes each), read once per query
 * head (kv heads shared by G query heads are re-read from L2); ~4 FLOP per byte of K/V: bandwidth
 * and latency bound. Same results as the contiguous kernels up to f32 summation order (the softmax
 * is online here).
 * The kernel is device/attn_paged.cuh. Tested against: ops_ref.c op_attention (paged) through
 * tests/runtime/test_cuda_ops.c on a GPU and test_cuda_attn_paged_emu on the CPU, and the batched
 * engine against CUDA sessions through tests/api/test_batch.c.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/attn_paged.cuh"

extern "C" sb_status cu_attention_paged(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                        const int32_t *tbl, const cu_attn_paged_args *a) {
    if (a->T <= 0) return SB_OK;
    if (a->D % 2 || a->D > 2 * 32 * PA_PAIRS || a->Hkv <= 0 || a->Hq % a->Hkv || a->bs <= 0 || a->n_tbl <= 0 ||
        (a->ctype != CU_T_F16 && a->ctype != CU_T_F32))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: paged attention of head_dim %lld (even, <= %d), heads %lld/%lld, block size %d, cache type %d",
                       (long long)a->D, 2 * 32 * PA_PAIRS, (long long)a->Hq, (long long)a->Hkv, a->bs, a->ctype);
    const dim3 grid((unsigned)a->Hq, (unsigned)a->T);
    if (a->ctype == CU_T_F16)
        cu_launch(k_attn_paged<true>, grid, 32 * PA_WARPS, (cudaStream_t)s, dst, q, k, v, pos, tbl, *a);
    else
        cu_launch(k_attn_paged<false>, grid, 32 * PA_WARPS, (cudaStream_t)s, dst, q, k, v, pos, tbl, *a);
    return cu_after_launch("k_attn_paged");
}
