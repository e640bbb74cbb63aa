/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_fattn.cu — flash-attention prefill (T > 1): causal attention over the KV cache
 * with GQA, sliding window, score softcap, F32/F16 caches, Q's fused RoPE and the fused q8_1
 * output — the contract of cu_attention with nsplit 1 (k_attention.cu; the T = 1 decode kernels
 * stay there).
 * Math (ops_ref.c op_attention): for query (t, h) at p = pos[t], keys j in [lo, p] of kv head
 * h / (Hq/Hkv): s_j = (q . k_j) * scale, softcap c*tanh(s/c); out = softmax(s) . v, online
 * softmax in f32 (running max per query, per-lane partial sums reduced once at the end).
 * Geometry: one block of 8 warps per (query tile of BQ tokens, q head); warp w owns QW = BQ/8
 * queries. The block walks the union of its queries' key ranges in tiles of 32 keys staged in
 * shared memory (f32, rows padded to stay 16-byte aligned and bank-spread; the next tile is
 * loaded into registers while the current one is computed); per tile a warp
 * scores lane = key against its QW queries (q from shared memory, broadcast), updates the running
 * max by one warp max per query, writes the probabilities to shared memory, then accumulates
 * P.V with lane = dims lane + 32i. Warps whose queries see no key of a tile skip it (causal
 * diagonal, window). D <= 64: BQ 32 (DL 2); D <= 128: BQ 16 (DL 4) — the grids below; larger heads keep the
 * k_attention.cu path (cu_fattn_supported).
 * Traffic: each K/V row of the visible range is read once per (query tile, q head) instead of
 * once per (query, q head): /BQ of k_attn's prefill reads; FMA-bound (~2*D FMAs per visible
 * (query, key) pair), no tensor cores yet.
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c) and every test model.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"

#include <math.h>

#define FA_WARPS 8
#define FA_BK 32

typedef struct fa_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} fa_rope;

template <int DL>
__global__ void __launch_bounds__(FA_WARPS * 32) k_fattn(float *dst, const float *q, const void *kc, const void *vc, const int32_t *pos, int T,
                                                         int D, int Hq, int Hkv, int f16, float scale, float softcap, int window, fa_rope rp,
                                                         blk_q8_1 *xq) {
    CU_PDL_ENTRY();
    constexpr int DM = 32 * DL;             /* max head dim */
    constexpr int BQ = DL == 2 ? 32 : 16;   /* queries per block */
    constexpr int QW = BQ / FA_WARPS;       /* queries per warp */
    constexpr int SK = DM + 4;              /* K row stride (floats) */
    constexpr int PE = FA_BK * DM / (FA_WARPS * 32); /* K (and V) values each thread prefetches per tile */
    __shared__ __align__(16) float sq[BQ][DM];
    __shared__ __align__(16) float sk[FA_BK][SK];
    __shared__ __align__(16) float sv[FA_BK][DM];
    __shared__ __align__(16) float sp[FA_WARPS][QW][FA_BK];
    __shared__ int s_p[BQ], s_lo[BQ], s_rng[2];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int h = blockIdx.y, kvh = h / (Hq / Hkv);
    const int t0 = (gridDim.x - 1 - blockIdx.x) * BQ; /* the longest key ranges first */
    const int Dp = (D + 3) & ~3;
    const int64_t Dkv = (int64_t)D * Hkv;
    if (tid < BQ) {
        const int t = t0 + tid;
        int p = -1, lo = 0x7fffffff;
        if (t < T) {
            p = pos[t];
            lo = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
        }
        s_p[tid] = p, s_lo[tid] = lo;
    }
    for (int i = tid; i < BQ * DM; i += FA_WARPS * 32) {
        const int r = i / DM, d = i % DM, t = t0 + r;
        sq[r][d] = t < T && d < D ? q[((int64_t)t * Hq + h) * D + d] : 0.0f;
    }
    __syncthreads();
    if (rp.n_rot > 0) { /* Q's RoPE on the staged rows (k_rope's math via rope_pair: bit-identical) */
        const int half = rp.n_rot / 2;
        for (int i = tid; i < BQ * half; i += FA_WARPS * 32) { /* each pair read then written by one thread */
            const int r = i / half, pi = i % half;
            if (t0 + r >= T) continue;
            int a, b;
            float xa, xb;
            rope_pair(sq[r], pi, rp.n_rot, rp.mode, s_p[r], rp.ts, rp.fs, rp.af, rp.ff, &a, &b, &xa, &xb);
            sq[r][a] = xa;
            sq[r][b] = xb;
        }
        __syncthreads();
    }
    if (tid == 0) {
        int kmin = 0x7fffffff, kmax = -1;
        for (int r = 0; r < BQ; r++)
            if (s_p[r] >= 0) kmin = min(kmin, s_lo[r]), kmax = max(kmax, s_p[r]);
        s_rng[0] = kmin, s_rng[1] = kmax;
    }
    __syncthreads();
    const int kmin = s_rng[0], kmax = s_rng[1];
    int wmin = 0x7fffffff, wmax = -1, qp[QW], qlo[QW];
#pragma unroll
    for (int i = 0; i < QW; i++) {
        qp[i] = s_p[w * QW + i], qlo[i] = s_lo[w * QW + i];
        if (qp[i] >= 0) wmin = min(wmin, qlo[i]), wmax = max(wmax, qp[i]);
    }
    float m[QW], l[QW], acc[QW][DL];
#pragma unroll
    for (int i = 0; i < QW; i++) {
        m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < DL; k++) acc[i][k] = 0.0f;
    }
    /* software pipeline: the next K/V tile is loaded into registers while this one is computed */
    float pk[PE], pv[PE];
    auto fetch = [&](int kb) {
#pragma unroll
        for (int e = 0; e < PE; e++) {
            const int i = tid + FA_WARPS * 32 * e, r = i / Dp, d = i % Dp, j = kb + r;
            pk[e] = pv[e] = 0.0f;
            if (i < FA_BK * Dp && j <= kmax && d < D) {
                const int64_t o = (int64_t)j * Dkv + (int64_t)kvh * D + d;
                pk[e] = f16 ? cu_h2f(((const uint16_t *)kc)[o]) : ((const float *)kc)[o];
                pv[e] = f16 ? cu_h2f(((const uint16_t *)vc)[o]) : ((const float *)vc)[o];
            }
        }
    };
    fetch(kmin);
    for (int kb = kmin; kb <= kmax; kb += FA_BK) {
        __syncthreads(); /* the previous tile's readers are done */
#pragma unroll
        for (int e = 0; e < PE; e++) {
            const int i = tid + FA_WARPS * 32 * e;
            if (i < FA_BK * Dp) {
                sk[i / Dp][i % Dp] = pk[e];
                sv[i / Dp][i % Dp] = pv[e];
            }
        }
        __syncthreads();
        if (kb + FA_BK <= kmax) fetch(kb + FA_BK);
        if (wmax < kb || wmin > kb + FA_BK - 1) continue; /* none of this warp's queries sees these keys */
        const int j = kb + lane;
        float s[QW];
#pragma unroll
        for (int i = 0; i < QW; i++) s[i] = 0.0f;
        for (int d4 = 0; d4 < Dp / 4; d4++) {
            const float4 kv = *(const float4 *)&sk[lane][4 * d4];
#pragma unroll
            for (int i = 0; i < QW; i++) {
                const float4 qv = *(const float4 *)&sq[w * QW + i][4 * d4];
                s[i] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
            }
        }
#pragma unroll
        for (int i = 0; i < QW; i++) {
            float si = s[i] * scale;
            if (softcap > 0.0f) si = tanhf(si / softcap) * softcap;
            if (j > qp[i] || j < qlo[i]) si = -INFINITY;
            const float mn = fmaxf(m[i], warp_max(si));
            float e = 0.0f;
            if (mn != -INFINITY) {
                const float corr = expf(m[i] - mn);
                e = expf(si - mn);
                l[i] = l[i] * corr + e;
#pragma unroll
                for (int k = 0; k < DL; k++) acc[i][k] *= corr;
                m[i] = mn;
            }
            sp[w][i][lane] = e;
        }
        __syncwarp();
#pragma unroll 2
        for (int jj = 0; jj < FA_BK; jj += 4) {
            float vv[4][DL];
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int k = 0; k < DL; k++) vv[u][k] = sv[jj + u][lane + 32 * k];
#pragma unroll
            for (int i = 0; i < QW; i++) {
                const float4 p4 = *(const float4 *)&sp[w][i][jj];
#pragma unroll
                for (int k = 0; k < DL; k++) acc[i][k] += p4.x * vv[0][k] + p4.y * vv[1][k] + p4.z * vv[2][k] + p4.w * vv[3][k];
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < QW; i++) {
        const int t = t0 + w * QW + i;
        if (t >= T) continue; /* warp-uniform */
        const float L = warp_sum(l[i]);
        const int64_t o = ((int64_t)t * Hq + h) * D;
#pragma unroll
        for (int k = 0; k < DL; k++) {
            const int d = lane + 32 * k;
            if (d >= D) continue; /* with xq, D % 32 == 0: whole warps */
            const float v = acc[i][k] / L;
            dst[o + d] = v;
            if (xq) q8_1_store(xq + (o + d) / 32, v, lane);
        }
    }
}

extern "C" bool cu_fattn_supported(const cu_attn_args *a) {
    return a->T > 1 && a->nsplit == 1 && a->D > 0 && a->D <= 128 && a->Hkv > 0 && a->Hq % a->Hkv == 0 &&
           (a->ctype == CU_T_F32 || a->ctype == CU_T_F16) && a->T <= 0x7fffffff;
}

extern "C" sb_status cu_attention_prefill(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                          const cu_attn_args *a) {
    if (a->T <= 0) return SB_OK;
    if (!cu_fattn_supported(a))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: flash-attention prefill with T %lld, head_dim %lld, %lld/%lld heads, %d splits, cache type %d",
                       (long long)a->T, (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->nsplit, a->ctype);
    if (a->q_rot < 0 || a->q_rot > a->D || a->q_rot % 2)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with a fused RoPE of %d dims (head_dim %lld)", a->q_rot, (long long)a->D);
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    const cudaStream_t st = (cudaStream_t)s;
    const fa_rope rp = {a->q_ff, a->q_rot, a->q_mode, a->q_theta_scale, a->q_freq_scale, a->q_attn_factor};
    blk_q8_1 *xq = (blk_q8_1 *)a->xq;
    const int f16 = a->ctype == CU_T_F16, T = (int)a->T;
    if (a->D <= 64)
        cu_launch(k_fattn<2>, dim3(cu_div_up(T, 32), (unsigned)a->Hq), FA_WARPS * 32, st, dst, q, k, v, pos, T, (int)a->D, (int)a->Hq,
                  (int)a->Hkv, f16, a->scale, a->softcap, a->window, rp, xq);
    else
        cu_launch(k_fattn<4>, dim3(cu_div_up(T, 16), (unsigned)a->Hq), FA_WARPS * 32, st, dst, q, k, v, pos, T, (int)a->D, (int)a->Hq,
                  (int)a->Hkv, f16, a->scale, a->softcap, a->window, rp, xq);
    return cu_after_launch("k_fattn");
}
