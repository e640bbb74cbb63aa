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
 * Tested against: ops_ref.c op_attention (paged) through tests/runtime/test_cuda_ops.c, and the
 * batched engine against the CUDA session through tests/runtime/test_cuda_batch.c.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"

#include <cuda_fp16.h>
#include <math.h>

#define PA_WARPS 4
#define PA_PAIRS 8 /* pairs of dimensions a lane holds at most: D <= 2 * 32 * PA_PAIRS */

template <bool F16>
static __device__ __forceinline__ float2 pa_load(const void *c, int64_t e) { /* elements e, e + 1 of a cache */
    if (F16) return __half22float2(((const __half2 *)c)[e / 2]);
    return ((const float2 *)c)[e / 2];
}

template <bool F16>
__global__ void __launch_bounds__(32 * PA_WARPS)
    k_attn_paged(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                 cu_attn_paged_args a) {
    CU_PDL_ENTRY();
    __shared__ float s_acc[PA_WARPS][2 * 32 * PA_PAIRS];
    __shared__ float s_m[PA_WARPS], s_l[PA_WARPS];
    const int h = blockIdx.x, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t t = blockIdx.y, P = a.D / 2, Dkv = a.D * a.Hkv, kvh = h / (a.Hq / a.Hkv);
    const float *qv = q + (t * a.Hq + h) * a.D;
    float2 qr[PA_PAIRS], acc[PA_PAIRS];
#pragma unroll
    for (int i = 0; i < PA_PAIRS; i++) {
        const int64_t pi = lane + 32 * i;
        qr[i] = pi < P ? make_float2(qv[2 * pi], qv[2 * pi + 1]) : make_float2(0.0f, 0.0f);
        acc[i] = make_float2(0.0f, 0.0f);
    }
    const int64_t p = pos[t];
    const int64_t lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const int32_t *row_tbl = tbl + t * a.n_tbl;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = lo + w; j <= p; j += PA_WARPS) {
        const int64_t base = ((int64_t)row_tbl[j / a.bs] * a.bs + j % a.bs) * Dkv + kvh * a.D;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < PA_PAIRS; i++) {
            const int64_t pi = lane + 32 * i;
            if (pi < P) {
                const float2 kk = pa_load<F16>(k, base + 2 * pi);
                s += qr[i].x * kk.x + qr[i].y * kk.y;
            }
        }
        s = warp_sum(s) * a.scale;
        if (a.softcap > 0.0f) s = tanhf(s / a.softcap) * a.softcap;
        const float m_new = fmaxf(m, s), corr = expf(m - m_new), e = expf(s - m_new);
        l = l * corr + e;
        m = m_new;
#pragma unroll
        for (int i = 0; i < PA_PAIRS; i++) {
            const int64_t pi = lane + 32 * i;
            if (pi < P) {
                const float2 vv = pa_load<F16>(v, base + 2 * pi);
                acc[i].x = acc[i].x * corr + e * vv.x;
                acc[i].y = acc[i].y * corr + e * vv.y;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < PA_PAIRS; i++) {
        const int64_t pi = lane + 32 * i;
        if (pi < P) s_acc[w][2 * pi] = acc[i].x, s_acc[w][2 * pi + 1] = acc[i].y;
    }
    if (lane == 0) s_m[w] = m, s_l[w] = l;
    __syncthreads();
    float mx = -INFINITY;
    for (int x = 0; x < PA_WARPS; x++) mx = fmaxf(mx, s_m[x]);
    float wt[PA_WARPS], sum = 0.0f;
    for (int x = 0; x < PA_WARPS; x++) { /* a warp that saw no key (m = -inf) weighs 0 */
        wt[x] = s_m[x] == -INFINITY ? 0.0f : expf(s_m[x] - mx);
        sum += wt[x] * s_l[x];
    }
    float *out = dst + (t * a.Hq + h) * a.D;
    for (int64_t d = threadIdx.x; d < a.D; d += 32 * PA_WARPS) {
        float o = 0.0f;
        for (int x = 0; x < PA_WARPS; x++) o += wt[x] * s_acc[x][d];
        out[d] = o / sum;
    }
}

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
