/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_fattn.cu — flash-attention prefill (T > 1): causal attention over the KV cache
 * with GQA, sliding window, score softcap, F32/F16 caches, Q's fused RoPE and the fused q8_1
 * output — the contract of cu_attention with nsplit 1 (k_attention.cu; the T = 1 decode kernels
 * stay there).
 * Math (ops_ref.c op_attention): for query (t, h) at p = pos[t], keys j in [lo, p] of kv head
 * h / (Hq/Hkv): s_j = (q . k_j) * scale, softcap c*tanh(s/c); out = softmax(s) . v, online
 * softmax in f32 (running max per query, per-lane partial sums reduced once at the end).
 * Geometry: one block of 8 warps per (query tile of 16 tokens, q head). Head dims <= 64: two key
 * groups of 4 warps (tiles of 64 keys, group g takes keys 32g..32g+31: half the serial tile steps
 * per block), each warp 4 queries, the groups merged through shared memory at the end; <= 128:
 * one group, 2 queries a warp. Per tile (staged in shared memory as f32, rows padded to stay
 * 16-byte aligned and bank-spread; the next tile is loaded into registers while this one is
 * computed) a warp scores lane = key against its queries (q from shared memory, broadcast),
 * updates the running max by one warp max per query, writes the probabilities to shared memory,
 * then accumulates P.V with lane = dims lane + 32i. Warps whose queries see none of their 32 keys
 * skip them (causal diagonal, window). Larger heads keep the k_attention.cu path
 * (cu_fattn_supported).
 * Traffic: each K/V row of the visible range is read once per (query tile, q head) instead of
 * once per (query, q head): /BQ of k_attn's prefill reads; ~2*D FMAs per visible (query, key)
 * pair, no tensor cores yet. H200, Qwen2.5-0.5B shape, T = 512: 61 µs a layer at depth 0 (k_attn
 * 335), 633 at depth 4096 (k_attn 4,517; one group: 571) — latency-bound by the serial key tiles.
 * F16 caches with head_dim 64 or 128 on sm_80+ go to the tensor-core kernel of k_fattn_mma.cu
 * instead (cu_config.fattn_mma, default on; SB_TUNE=fattn_mma=0 keeps them here).
 * A sliding-window ring cache (cu_attn_args.ring): key j at row kv_row(j, ring); a block's keys
 * [kmin, kmax] span at most window + T - 1 <= ring positions, so no two share a row.
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c) and every test model.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"

#include <math.h>

#define FA_WARPS 8
#define FA_BK 32

typedef struct fa_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} fa_rope;

template <int DL, int G>
__global__ void __launch_bounds__(FA_WARPS * 32, 2) k_fattn(float *dst, const float *q, const void *kc, const void *vc, const int32_t *pos, int T,
                                                         int D, int Hq, int Hkv, int f16, float scale, float softcap, int window,
                                                         int64_t ring, fa_rope rp, blk_q8_1 *xq, float *part, unsigned *cnt) {
    CU_PDL_ENTRY();
    constexpr int DM = 32 * DL;             /* max head dim */
    /* G key groups: group gi takes keys 32 gi .. 32 gi + 31 of each tile */
    constexpr int BQ = G == 1 && DL == 2 ? 32 : 16; /* queries per block */
    constexpr int WG = FA_WARPS / G;        /* warps per group */
    constexpr int QW = BQ / WG;             /* queries per warp */
    constexpr int BK = FA_BK * G;           /* keys per tile */
    constexpr int SK = DM + 4;              /* K row stride (floats) */
    constexpr int PE = BK * DM / 4 / (FA_WARPS * 32); /* 4-value chunks of K (and V) each thread prefetches per tile */
    __shared__ __align__(16) float sq[BQ][DM];
    __shared__ __align__(16) float sk[BK][SK];
    __shared__ __align__(16) float sv[BK][DM];
    __shared__ __align__(16) float sp[FA_WARPS][QW][FA_BK];
    __shared__ int s_p[BQ], s_lo[BQ], s_rng[2], s_last;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int gi = w / WG, wq = (w % WG) * QW; /* this warp's key group and first query */
    const int h = blockIdx.y, kvh = h / (Hq / Hkv);
    const int t0 = (gridDim.x - 1 - blockIdx.x) * BQ; /* the longest key ranges first */
    const int Dp = (D + 3) & ~3;
    const int64_t Dkv = (int64_t)D * Hkv;
    if (tid < BQ) {
        int p, lo;
        attn_span(pos, t0 + tid, T, window, &p, &lo);
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
    /* key split z of S (gridDim.z): whole BK tiles of [kmin, kmax], the same tiles the unsplit
     * block walks; a split with none still writes its (empty) partials for the merge */
    const int S = gridDim.z, z = blockIdx.z;
    int kmin = s_rng[0], kmax = s_rng[1];
    /* the splits this tile uses: no more than its key tiles (a shallow tile runs unsplit: the
     * other z blocks leave at once and its block writes the output directly); Se is the same in
     * every block of the tile (s_rng) */
    const int Se = attn_split_keys(S, z, BK, &kmin, &kmax); /* kmin > kmax: no keys here */
    if (z >= Se) return; /* the whole block */
    int wmin = 0x7fffffff, wmax = -1, qp[QW], qlo[QW];
#pragma unroll
    for (int i = 0; i < QW; i++) {
        qp[i] = s_p[wq + i], qlo[i] = s_lo[wq + i];
        if (qp[i] >= 0) wmin = min(wmin, qlo[i]), wmax = max(wmax, qp[i]);
    }
    float m[QW], l[QW], acc[QW][DL];
#pragma unroll
    for (int i = 0; i < QW; i++) {
        m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < DL; k++) acc[i][k] = 0.0f;
    }
    /* software pipeline: the next K/V tile is loaded into registers (4-value chunks: 16-byte loads
     * when head_dim % 4 == 0) while this one is computed; chunk e of this thread is row rc >> 16,
     * values 4 * (rc & 0xFFFF).. of the tile (computed once: no division in the loop) */
    const int Dp4 = Dp / 4;
    const bool vec = D % 4 == 0;
    int rc[PE];
#pragma unroll
    for (int e = 0; e < PE; e++) {
        const int i = tid + FA_WARPS * 32 * e;
        rc[e] = i < BK * Dp4 ? (i / Dp4) << 16 | (i % Dp4) : -1;
    }
    float4 pk[PE], pv[PE];
    auto fetch = [&](int kb) {
#pragma unroll
        for (int e = 0; e < PE; e++) {
            pk[e] = pv[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            const int j = kb + (rc[e] >> 16), c = 4 * (rc[e] & 0xFFFF);
            if (rc[e] < 0 || j > kmax) continue;
            const int64_t o = kv_row(j, ring) * Dkv + (int64_t)kvh * D + c;
            if (vec && !f16) {
                pk[e] = *(const float4 *)((const float *)kc + o);
                pv[e] = *(const float4 *)((const float *)vc + o);
            } else if (vec) {
                const uint2 a = *(const uint2 *)((const uint16_t *)kc + o), b = *(const uint2 *)((const uint16_t *)vc + o);
                pk[e] = make_float4(cu_h2f((uint16_t)a.x), cu_h2f((uint16_t)(a.x >> 16)), cu_h2f((uint16_t)a.y), cu_h2f((uint16_t)(a.y >> 16)));
                pv[e] = make_float4(cu_h2f((uint16_t)b.x), cu_h2f((uint16_t)(b.x >> 16)), cu_h2f((uint16_t)b.y), cu_h2f((uint16_t)(b.y >> 16)));
            } else {
                float tk[4], tv[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    tk[u] = c + u < D ? (f16 ? cu_h2f(((const uint16_t *)kc)[o + u]) : ((const float *)kc)[o + u]) : 0.0f;
                    tv[u] = c + u < D ? (f16 ? cu_h2f(((const uint16_t *)vc)[o + u]) : ((const float *)vc)[o + u]) : 0.0f;
                }
                pk[e] = make_float4(tk[0], tk[1], tk[2], tk[3]);
                pv[e] = make_float4(tv[0], tv[1], tv[2], tv[3]);
            }
        }
    };
    fetch(kmin);
    for (int kb = kmin; kb <= kmax; kb += BK) {
        __syncthreads(); /* the previous tile's readers are done */
#pragma unroll
        for (int e = 0; e < PE; e++) {
            if (rc[e] < 0) continue;
            const int r = rc[e] >> 16, c = 4 * (rc[e] & 0xFFFF);
            *(float4 *)&sk[r][c] = pk[e];
            *(float4 *)&sv[r][c] = pv[e];
        }
        __syncthreads();
        if (kb + BK <= kmax) fetch(kb + BK);
        const int kg = kb + FA_BK * gi; /* this group's 32 keys */
        if (wmax < kg || wmin > kg + FA_BK - 1) continue; /* none of this warp's queries sees these keys */
        const int j = kg + lane;
        float s[QW];
#pragma unroll
        for (int i = 0; i < QW; i++) s[i] = 0.0f;
#pragma unroll 4
        for (int d4 = 0; d4 < Dp4; d4++) {
            const float4 kv = *(const float4 *)&sk[FA_BK * gi + lane][4 * d4];
#pragma unroll
            for (int i = 0; i < QW; i++) {
                const float4 qv = *(const float4 *)&sq[wq + i][4 * d4];
                s[i] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
            }
        }
#pragma unroll
        for (int i = 0; i < QW; i++) {
            float si = s[i] * scale;
            if (softcap > 0.0f) si = tanhf(si / softcap) * softcap;
            if (j > qp[i] || j < qlo[i] || j > kmax) si = -INFINITY;
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
                for (int k = 0; k < DL; k++) vv[u][k] = sv[FA_BK * gi + jj + u][lane + 32 * k];
#pragma unroll
            for (int i = 0; i < QW; i++) {
                const float4 p4 = *(const float4 *)&sp[w][i][jj];
#pragma unroll
                for (int k = 0; k < DL; k++) acc[i][k] += p4.x * vv[0][k] + p4.y * vv[1][k] + p4.z * vv[2][k] + p4.w * vv[3][k];
            }
        }
        __syncwarp();
    }
    float L[QW];
#pragma unroll
    for (int i = 0; i < QW; i++) L[i] = warp_sum(l[i]);
    if (G > 1) { /* group 1 hands (m, l, acc) to group 0 through the K tile's memory, which merges */
        float *xm = &sk[0][0], *xl = xm + BQ, *xa = xl + BQ; /* BQ + BQ + BQ*DM floats <= BK*SK */
        __syncthreads(); /* every warp is done with the last tile */
        if (gi == 1) {
#pragma unroll
            for (int i = 0; i < QW; i++) {
                if (lane == 0) xm[wq + i] = m[i], xl[wq + i] = L[i];
#pragma unroll
                for (int k = 0; k < DL; k++) xa[(wq + i) * DM + lane + 32 * k] = acc[i][k];
            }
        }
        __syncthreads();
        if (gi == 1 && Se == 1) return;
#pragma unroll
        for (int i = 0; i < QW && gi == 0; i++) {
            const float m1 = xm[wq + i], M = fmaxf(m[i], m1);
            const float f0 = m[i] == -INFINITY ? 0.0f : expf(m[i] - M), f1 = m1 == -INFINITY ? 0.0f : expf(m1 - M);
            L[i] = L[i] * f0 + xl[wq + i] * f1;
#pragma unroll
            for (int k = 0; k < DL; k++) acc[i][k] = acc[i][k] * f0 + xa[(wq + i) * DM + lane + 32 * k] * f1;
            m[i] = M; /* acc and L are now relative to M (the key split's partials carry it) */
        }
    }
    if (Se > 1) { /* group 0 writes (m, L, acc) per query; the last split block of the tile merges */
        const int64_t tile = (int64_t)blockIdx.x * Hq + h;
        constexpr int PS = DM + 2;
        if (gi == 0)
#pragma unroll
            for (int i = 0; i < QW; i++) {
                float *pp = part + ((tile * S + z) * BQ + wq + i) * PS;
                if (lane == 0) pp[0] = m[i], pp[1] = L[i];
#pragma unroll
                for (int k = 0; k < DL; k++) pp[2 + lane + 32 * k] = acc[i][k];
            }
        if (!block_arrives_last(&cnt[tile], (unsigned)Se, &s_last)) return;
        if (gi == 0)
#pragma unroll
            for (int i = 0; i < QW; i++) {
                const float *pp = part + (tile * S * BQ + wq + i) * PS;
                float M = -INFINITY;
                for (int zz = 0; zz < Se; zz++) M = fmaxf(M, __ldcg(pp + (int64_t)zz * BQ * PS));
                float Ls = 0.0f, as[DL];
#pragma unroll
                for (int k = 0; k < DL; k++) as[k] = 0.0f;
                for (int zz = 0; zz < Se; zz++) {
                    const float *pz = pp + (int64_t)zz * BQ * PS;
                    const float mz = __ldcg(pz);
                    const float f = mz == -INFINITY ? 0.0f : expf(mz - M);
                    Ls += __ldcg(pz + 1) * f;
#pragma unroll
                    for (int k = 0; k < DL; k++) as[k] += __ldcg(pz + 2 + lane + 32 * k) * f;
                }
                L[i] = Ls;
#pragma unroll
                for (int k = 0; k < DL; k++) acc[i][k] = as[k];
            }
        if (tid == 0) cnt[tile] = 0; /* for the next kernel that counts on it */
        if (gi != 0) return;
    }
#pragma unroll
    for (int i = 0; i < QW; i++) {
        const int t = t0 + wq + i;
        if (t >= T) continue; /* warp-uniform */
        const int64_t o = ((int64_t)t * Hq + h) * D;
#pragma unroll
        for (int k = 0; k < DL; k++) {
            const int d = lane + 32 * k;
            if (d >= D) continue; /* with xq, D % 32 == 0: whole warps */
            const float v = acc[i][k] / L[i];
            dst[o + d] = v;
            if (xq) q8_1_store(xq + (o + d) / 32, v, lane);
        }
    }
}

/* cu_config.fattn_split (SB_TUNE=fattn_split=0 turns it off): on by default since the H200 run of
 * session 5 — every ops and model test passed with it, first token after a cached 512 + 64 new 2.73
 * vs 3.34 ms, pp64 @ d4096 13.8k vs 6.2k, pp64 and pp512 at depth 0 unchanged (27.6k, 55.6k) */


/* the launch shape: queries per block, max head dim, and the key split S — enough (tile, head,
 * split) blocks for ~2 a multiprocessor, at most FA_SMAX, 1 when the tiles alone fill the GPU */
#define FA_SMAX 8
static void fattn_shape(const cu_attn_args *a, int *bq, int *dm, int *S) {
    const bool g2 = a->D <= 64 && cu_cfg()->fattn_groups == 2;
    *bq = a->D <= 64 && !g2 ? 32 : 16;
    *dm = a->D <= 64 ? 64 : 128;
    const int64_t blocks = (a->T + *bq - 1) / *bq * a->Hq;
    const int sms = cu_sm_count() > 0 ? cu_sm_count() : 132;
    int s = (int)(2 * (int64_t)sms / (blocks > 0 ? blocks : 1));
    s = s > FA_SMAX ? FA_SMAX : s < 1 ? 1 : s;
    if (!cu_cfg()->fattn_split || blocks > CU_ATT_COUNTERS) s = 1;
    *S = s;
}

/* does k_fattn (this file's f32 kernel) take a: the flash prefill's contract, head_dim <= 128 */
static bool fattn_simt(const cu_attn_args *a) { return cu_fattn_args_ok(a) && a->D <= 128; }

/* floats of split partials k_fattn takes (cu_fattn_scratch: the larger of this and the tensor-core
 * kernel's, which falls back to k_fattn for caches that are not 16-byte aligned) */
static uint64_t fattn_scratch_scalar(const cu_attn_args *a) {
    if (!fattn_simt(a)) return 0;
    int bq, dm, S;
    fattn_shape(a, &bq, &dm, &S);
    return S > 1 ? (uint64_t)((a->T + bq - 1) / bq) * (uint64_t)a->Hq * (uint64_t)S * (uint64_t)bq * (uint64_t)(dm + 2) : 0;
}

extern "C" uint64_t cu_fattn_scratch(const cu_attn_args *a) {
    const uint64_t f = fattn_scratch_scalar(a), fm = cu_fattn_mma_scratch(a, cu_cfg()->fattn_split);
    return f > fm ? f : fm;
}

extern "C" bool cu_fattn_args_ok(const cu_attn_args *a) {
    return a->T > 1 && a->nsplit == 1 && a->D > 0 && a->Hkv > 0 && a->Hq % a->Hkv == 0 && (a->ctype == CU_T_F32 || a->ctype == CU_T_F16) &&
           a->T <= 0x7fffffff;
}

extern "C" bool cu_fattn_supported(const cu_attn_args *a) { return fattn_simt(a) || cu_fattn_mma_takes(a); }

extern "C" sb_status cu_attention_prefill(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                          const cu_attn_args *a, float *scratch, uint64_t scratch_floats, unsigned *counters) {
    if (a->T <= 0) return SB_OK;
    if (!cu_fattn_supported(a))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: flash-attention prefill with T %lld, head_dim %lld, %lld/%lld heads, %d splits, cache type %d",
                       (long long)a->T, (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->nsplit, a->ctype);
    if (a->q_rope.n_rot < 0 || a->q_rope.n_rot > a->D || a->q_rope.n_rot % 2)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with a fused RoPE of %d dims (head_dim %lld)", a->q_rope.n_rot, (long long)a->D);
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    /* F16 cache, head_dim 64 / 128 / 256 / 512, sm_80+: tensor cores; past 128 only there (unaligned
     * caches: cu_fattn_mma's error) */
    if (cu_fattn_mma_takes(a) && (((uintptr_t)k | (uintptr_t)v) % 16 == 0 || !fattn_simt(a)))
        return cu_fattn_mma(s, dst, q, k, v, pos, a, cu_cfg()->fattn_split, scratch, scratch_floats, counters);
    const cudaStream_t st = (cudaStream_t)s;
    const cu_attn_rope *qr = &a->q_rope;
    const fa_rope rp = {qr->ff, qr->n_rot, qr->mode, qr->theta_scale, qr->freq_scale, qr->attn_factor};
    blk_q8_1 *xq = (blk_q8_1 *)a->xq;
    const int f16 = a->ctype == CU_T_F16, T = (int)a->T;
    int bq, dm, S;
    fattn_shape(a, &bq, &dm, &S);
    if (S > 1 && (!scratch || !counters || scratch_floats < fattn_scratch_scalar(a))) S = 1;
    const dim3 grid(cu_div_up(T, bq), (unsigned)a->Hq, (unsigned)S);
    if (a->D <= 64 && cu_cfg()->fattn_groups == 2)
        cu_launch(k_fattn<2, 2>, grid, FA_WARPS * 32, st, dst, q, k, v, pos, T, (int)a->D, (int)a->Hq, (int)a->Hkv, f16, a->scale, a->softcap,
                  a->window, a->ring, rp, xq, scratch, counters);
    else if (a->D <= 64)
        cu_launch(k_fattn<2, 1>, grid, FA_WARPS * 32, st, dst, q, k, v, pos, T, (int)a->D, (int)a->Hq, (int)a->Hkv, f16, a->scale, a->softcap,
                  a->window, a->ring, rp, xq, scratch, counters);
    else
        cu_launch(k_fattn<4, 1>, grid, FA_WARPS * 32, st, dst, q, k, v, pos, T, (int)a->D, (int)a->Hq, (int)a->Hkv, f16, a->scale, a->softcap,
                  a->window, a->ring, rp, xq, scratch, counters);
    return cu_after_launch("k_fattn");
}
