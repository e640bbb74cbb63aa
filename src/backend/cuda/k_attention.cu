/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attention.cu — causal attention over the KV cache with GQA, sliding window and
 * score softcap; split-K over the KV length ("flash-decoding") for decode.
 * Math (ops_ref.c op_attention): for query (t, h) at p = pos[t], keys j in [lo, p] (lo from the
 * window) of kv head h / (Hq/Hkv): s_j = (q . k_j) * scale, then c*tanh(s_j/c) if softcap;
 * out = sum_j softmax(s)_j v_j. Online softmax in f32 (running max m, sum l, rescaled acc).
 * Positions (and so the KV length) are read from device memory: one captured graph serves
 * every decode step; the split count is fixed per plan and each split takes ceil(n/nsplit) keys.
 * Geometry: k_attn: grid (Hq, T, nsplit), 4 warps; lane l holds acc dims l, l+32, ... (D <= 256,
 * 8 registers). Variant 1 (SB_TUNE=attn_variant=1): warp w takes keys w, w+4, ... of its split, scores by
 * warp shuffle sums — ~2 dependent memory latencies per key. Variant 2 (default): warp w takes
 * 32-key tiles w, w+4, ..., lane = key for the score (q from shared memory), then a V pass with 4
 * keys' loads in flight. H200, Qwen2.5-0.5B: v2 1.9x faster at depth 4096, ~6% slower at depth 0.
 * The 4 warps merge through shared memory. nsplit == 1 writes out directly, else (m, l, acc[D])
 * partials go to scratch and the last split block of each (t, h) (an atomic counter per row,
 * reset by that block) stages them in shared memory and merges (k_attn_combine only without
 * counters). Executor fusions: Q's RoPE applied as q is loaded (rope_pair, bit-identical to
 * k_rope), and the output's q8_1 blocks written beside it (D % 32 == 0: a 32-block is one warp).
 * Traffic: reads K and V of every visible key once per query head: 2*(p-lo+1)*D*(4|2) bytes per
 * (t, h) — GQA groups re-read the same kv head from L2; decode at depth 4096, D 64, F32 cache:
 * 2 MB per layer for 2 kv heads. Bandwidth-bound at decode; prefill (T x Hq blocks) is a plain
 * (non-tensor-core) kernel: first slice, not flash attention.
 * Variant 4 (decode, T == 1, with counters): cu_attention hands over to k_attn_decode.cu (one
 * block per (kv head, split), splits active by depth); its prefill (T > 1) runs variant 2 here.
 * A sliding-window ring cache (cu_attn_args.ring): key j at row kv_row(j, ring).
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c) and the whole-model tests.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"

#include <math.h>

#define ATT_WARPS 4
#define ATT_DL 8 /* dims per lane: D <= 256 */
#define ATT_MERGE_SMEM 2048 /* floats of split partials the merging block stages in shared memory */

static __device__ __forceinline__ float kv_ld(const void *c, int f16, int64_t i) {
    return f16 ? cu_h2f(((const uint16_t *)c)[i]) : ((const float *)c)[i];
}

/* dot(q, K row) for one lane: q in shared memory (broadcast reads), the row contiguous */
static __device__ __forceinline__ float row_dot(const float *sq, const void *kc, int f16, int64_t base, int D) {
    float s0 = 0.0f, s1 = 0.0f;
    if (!f16 && D % 4 == 0) {
        const float4 *r = (const float4 *)((const float *)kc + base);
        for (int d = 0; d < D / 4; d += 2) { /* two independent chains */
            const float4 a = r[d];
            s0 += sq[4 * d] * a.x + sq[4 * d + 1] * a.y + sq[4 * d + 2] * a.z + sq[4 * d + 3] * a.w;
            if (d + 1 < D / 4) {
                const float4 b = r[d + 1];
                s1 += sq[4 * d + 4] * b.x + sq[4 * d + 5] * b.y + sq[4 * d + 6] * b.z + sq[4 * d + 7] * b.w;
            }
        }
    } else if (f16 && D % 2 == 0) {
        const __half2 *r = (const __half2 *)((const uint16_t *)kc + base);
        for (int d = 0; d < D / 2; d++) {
            const float2 a = __half22float2(r[d]);
            s0 += sq[2 * d] * a.x + sq[2 * d + 1] * a.y;
        }
    } else {
        for (int d = 0; d < D; d++) s0 += sq[d] * kv_ld(kc, f16, base + d);
    }
    return s0 + s1;
}

/* VARIANT 1: each warp walks its keys one at a time (lanes over dims; a shuffle sum per key).
 * VARIANT 2: each warp takes 32 keys at once, one per lane (a whole-row dot from registers and
 * shared q), one max/sum shuffle per 32 keys, then a coalesced V pass (lanes over dims, the 32
 * probabilities broadcast by shuffle): ~3 dependent memory latencies per 32 keys instead of ~64. */
typedef struct attn_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} attn_rope;

/* the merge of nsplit partials (m, l, acc[D]) of row o into dst (k_attn_combine, and the last split
 * block of k_attn); ld: read through L2 (partials of other blocks of this kernel) or plainly */
template <bool L2>
static __device__ __forceinline__ void attn_merge(float *dst, blk_q8_1 *xq, const float *pp, int64_t o, int D, int nsplit, int tid, int nth) {
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, L2 ? __ldcg(pp + s * (D + 2)) : pp[s * (D + 2)]);
    for (int d = tid; d < D; d += nth) {
        float L = 0.0f, a = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            const float m = L2 ? __ldcg(pp + s * (D + 2)) : pp[s * (D + 2)];
            if (m == -INFINITY) continue;
            const float f = expf(m - M);
            L += (L2 ? __ldcg(pp + s * (D + 2) + 1) : pp[s * (D + 2) + 1]) * f;
            a += (L2 ? __ldcg(pp + s * (D + 2) + 2 + d) : pp[s * (D + 2) + 2 + d]) * f;
        }
        const float v = a / L;
        dst[o * D + d] = v;
        if (xq) q8_1_store(xq + (o * D + d) / 32, v, d & 31); /* whole warps: D % 32 == 0 */
    }
}

template <int VARIANT>
__global__ void __launch_bounds__(ATT_WARPS * 32) k_attn(float *dst, const float *q, const void *kc, const void *vc, const int32_t *pos,
                                                         int D, int Hq, int Hkv, int f16, float scale, float softcap, int window,
                                                         int64_t ring, int nsplit, float *part, attn_rope rp, unsigned *cnt, blk_q8_1 *xq) {
    CU_PDL_ENTRY();
    __shared__ float sm_m[ATT_WARPS], sm_l[ATT_WARPS];
    __shared__ float sm_acc[ATT_WARPS][ATT_DL * 32];
    __shared__ float sm_q[ATT_DL * 32];
    const int h = blockIdx.x, sp = blockIdx.z;
    const int64_t t = blockIdx.y;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int kvh = h / (Hq / Hkv);
    const int64_t Dkv = (int64_t)D * Hkv;
    const int64_t p = pos[t];
    const int64_t lo = (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
    const int64_t n = p - lo + 1, chunk = (n + nsplit - 1) / nsplit;
    const int64_t j0 = lo + sp * chunk, j1 = j0 + chunk < p + 1 ? j0 + chunk : p + 1;

    float qv[ATT_DL], acc[ATT_DL];
    const float *qr = q + (t * Hq + h) * D;
    if (rp.n_rot > 0) { /* Q's RoPE on load (k_rope's math via rope_pair) */
        for (int i = threadIdx.x; i < rp.n_rot / 2; i += ATT_WARPS * 32) {
            int ia, ib;
            float ya, yb;
            rope_pair(qr, i, rp.n_rot, rp.mode, (int32_t)p, rp.ts, rp.fs, rp.af, rp.ff, &ia, &ib, &ya, &yb);
            sm_q[ia] = ya;
            sm_q[ib] = yb;
        }
        for (int d = rp.n_rot + threadIdx.x; d < D; d += ATT_WARPS * 32) sm_q[d] = qr[d];
        __syncthreads();
        qr = sm_q;
    } else if (VARIANT == 2) {
        for (int d = threadIdx.x; d < D; d += ATT_WARPS * 32) sm_q[d] = qr[d];
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < ATT_DL; k++) {
        const int d = lane + 32 * k;
        qv[k] = d < D ? qr[d] : 0.0f;
        acc[k] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    if (VARIANT == 2) {
        for (int64_t jb = j0 + 32 * w; jb < j1; jb += 32 * ATT_WARPS) {
            const int64_t j = jb + lane;
            const bool ok = j < j1;
            float s = -INFINITY;
            if (ok) {
                s = row_dot(sm_q, kc, f16, kv_row(j, ring) * Dkv + (int64_t)kvh * D, D) * scale;
                if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
            }
            const float mn = fmaxf(m, warp_max(s)); /* finite: key jb is valid */
            const float corr = expf(m - mn);
            const float e = ok ? expf(s - mn) : 0.0f;
            l = l * corr + warp_sum(e);
#pragma unroll
            for (int k = 0; k < ATT_DL; k++) acc[k] *= corr;
            const int nv = (int)(j1 - jb < 32 ? j1 - jb : 32);
            int jj = 0;
            for (; jj + 4 <= nv; jj += 4) { /* 4 keys' V loads in flight, then the same accumulation order */
                float pj[4], vv[4][ATT_DL];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    pj[u] = __shfl_sync(0xffffffffu, e, jj + u);
                    const int64_t base = kv_row(jb + jj + u, ring) * Dkv + (int64_t)kvh * D;
#pragma unroll
                    for (int k = 0; k < ATT_DL; k++) {
                        const int d = lane + 32 * k;
                        vv[u][k] = d < D ? kv_ld(vc, f16, base + d) : 0.0f;
                    }
                }
#pragma unroll
                for (int u = 0; u < 4; u++)
#pragma unroll
                    for (int k = 0; k < ATT_DL; k++)
                        if (lane + 32 * k < D) acc[k] += pj[u] * vv[u][k];
            }
            for (; jj < nv; jj++) {
                const float pj = __shfl_sync(0xffffffffu, e, jj);
                const int64_t base = kv_row(jb + jj, ring) * Dkv + (int64_t)kvh * D;
#pragma unroll
                for (int k = 0; k < ATT_DL; k++) {
                    const int d = lane + 32 * k;
                    if (d < D) acc[k] += pj * kv_ld(vc, f16, base + d);
                }
            }
            m = mn;
        }
    } else
    for (int64_t j = j0 + w; j < j1; j += ATT_WARPS) {
        const int64_t base = kv_row(j, ring) * Dkv + (int64_t)kvh * D;
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_DL; k++) {
            const int d = lane + 32 * k;
            if (d < D) s += qv[k] * kv_ld(kc, f16, base + d);
        }
        s = warp_sum(s) * scale;
        if (softcap > 0.0f) s = tanhf(s / softcap) * softcap;
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn), e = expf(s - mn);
        l = l * corr + e;
#pragma unroll
        for (int k = 0; k < ATT_DL; k++) {
            const int d = lane + 32 * k;
            acc[k] = acc[k] * corr + (d < D ? e * kv_ld(vc, f16, base + d) : 0.0f);
        }
        m = mn;
    }
    if (lane == 0) sm_m[w] = m, sm_l[w] = l;
#pragma unroll
    for (int k = 0; k < ATT_DL; k++) sm_acc[w][lane + 32 * k] = acc[k];
    __syncthreads();
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < ATT_WARPS; k++) M = fmaxf(M, sm_m[k]);
    float L = 0.0f, f[ATT_WARPS];
#pragma unroll
    for (int k = 0; k < ATT_WARPS; k++) {
        f[k] = sm_m[k] == -INFINITY ? 0.0f : expf(sm_m[k] - M);
        L += sm_l[k] * f[k];
    }
    const int64_t o = t * Hq + h;
    for (int d = threadIdx.x; d < D; d += ATT_WARPS * 32) {
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_WARPS; k++) a += sm_acc[k][d] * f[k];
        if (nsplit == 1) {
            const float v = a / L;
            dst[o * D + d] = v;
            if (xq) q8_1_store(xq + (o * D + d) / 32, v, d & 31); /* the output's q8_1 blocks too (D % 32 == 0) */
        } else
            part[(o * nsplit + sp) * (D + 2) + 2 + d] = a;
    }
    if (nsplit > 1 && threadIdx.x == 0) {
        part[(o * nsplit + sp) * (D + 2)] = M;
        part[(o * nsplit + sp) * (D + 2) + 1] = L;
    }
    if (nsplit > 1 && cnt) { /* the last split block of (t, h) merges (threadfence reduction) */
        __shared__ int last;
        if (!block_arrives_last(&cnt[o], (unsigned)nsplit, &last)) return;
        const float *pp = part + o * nsplit * (D + 2);
        const int np = nsplit * (D + 2);
        if (np <= ATT_MERGE_SMEM) { /* stage the partials in shared memory: parallel L2 reads, then the same merge */
            __shared__ float sm_part[ATT_MERGE_SMEM];
#pragma unroll 4
            for (int i = threadIdx.x; i < np; i += ATT_WARPS * 32) sm_part[i] = __ldcg(pp + i);
            __syncthreads();
            attn_merge<false>(dst, xq, sm_part, o, D, nsplit, threadIdx.x, ATT_WARPS * 32);
        } else {
            attn_merge<true>(dst, xq, pp, o, D, nsplit, threadIdx.x, ATT_WARPS * 32);
        }
        if (threadIdx.x == 0) cnt[o] = 0; /* ready for the next attention */
    }
}

__global__ void k_attn_combine(float *dst, const float *part, int D, int Hq, int nsplit, blk_q8_1 *xq) {
    CU_PDL_ENTRY();
    const int64_t o = (int64_t)blockIdx.y * Hq + blockIdx.x;
    attn_merge<false>(dst, xq, part + o * nsplit * (D + 2), o, D, nsplit, threadIdx.x, blockDim.x);
}

extern "C" uint64_t cu_attention_scratch(const cu_attn_args *a) {
    if (a->variant == 4 && a->T == 1) return cu_attn_decode_scratch(a); /* >= the line below (variant 2's fallback fits) */
    return a->nsplit > 1 ? (uint64_t)a->T * (uint64_t)a->Hq * (uint64_t)a->nsplit * (uint64_t)(a->D + 2) : 0;
}

extern "C" sb_status cu_attention(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                  const cu_attn_args *a, float *scratch, unsigned *counters) {
    if (a->T <= 0) return SB_OK;
    if (a->variant == 4 && a->T == 1 && cu_attn_decode_fits(a, counters, scratch))
        return cu_attn_decode(s, dst, q, k, v, pos, a, scratch, counters); /* k_attn_decode.cu; other shapes: variant 2 below */
    if (a->D > ATT_DL * 32 || a->D <= 0 || a->Hkv <= 0 || a->Hq % a->Hkv || a->nsplit < 1)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with head_dim %lld, %lld/%lld heads, %d splits (head_dim <= %d)",
                       (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->nsplit, ATT_DL * 32);
    if (a->q_rope.n_rot < 0 || a->q_rope.n_rot > a->D || a->q_rope.n_rot % 2)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with a fused RoPE of %d dims (head_dim %lld)", a->q_rope.n_rot, (long long)a->D);
    const cudaStream_t st = (cudaStream_t)s;
    const dim3 grid((unsigned)a->Hq, (unsigned)a->T, (unsigned)a->nsplit);
    const cu_attn_rope *qr = &a->q_rope;
    const attn_rope rp = {qr->ff, qr->n_rot, qr->mode, qr->theta_scale, qr->freq_scale, qr->attn_factor};
    unsigned *cnt = counters && a->T * a->Hq <= CU_ATT_COUNTERS ? counters : NULL;
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    blk_q8_1 *xq = (blk_q8_1 *)a->xq;
    if (a->variant != 1) /* 2, and variant 4's prefill (T > 1) or its decode without counters */
        cu_launch(k_attn<2>, grid, ATT_WARPS * 32, st, dst, q, k, v, pos, (int)a->D, (int)a->Hq, (int)a->Hkv, a->ctype == CU_T_F16, a->scale,
                                                   a->softcap, a->window, a->ring, a->nsplit, scratch, rp, cnt, xq);
    else
        cu_launch(k_attn<1>, grid, ATT_WARPS * 32, st, dst, q, k, v, pos, (int)a->D, (int)a->Hq, (int)a->Hkv, a->ctype == CU_T_F16, a->scale,
                                                   a->softcap, a->window, a->ring, a->nsplit, scratch, rp, cnt, xq);
    sb_status r = cu_after_launch("k_attn");
    if (r != SB_OK || a->nsplit == 1 || cnt) return r;
    cu_launch(k_attn_combine, dim3((unsigned)a->Hq, (unsigned)a->T), a->D < 32 ? 32 : ((unsigned)a->D + 31) / 32 * 32, st, dst, scratch, (int)a->D,
                                                                                                                 (int)a->Hq, a->nsplit, xq);
    return cu_after_launch("k_attn_combine");
}
