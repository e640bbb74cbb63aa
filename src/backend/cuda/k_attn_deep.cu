/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attn_deep.cu — decode attention (T == 1) for a step whose depth the host bounds
 * (cu_attn_args.depth_max, a captured graph per depth class: exec_cuda.c depth_class), past the
 * small-depth layout's keys: a split kernel and a merge kernel, reached through cu_attn_decode.
 * Math (ops_ref.c op_attention): for query head h at p = pos[0], keys j in [lo, p] (lo = p-window+1
 * with a window) of kv head h / G: s_j = (q . k_j) * scale, then c*tanh(s_j/c) with a softcap;
 * out = sum_j softmax(s)_j v_j, in f32. Each split computes (m, l, acc) over its keys with a plain
 * two-pass softmax (m = its max, p = expf(s - m), l = sum p, acc = sum p v); the merge takes
 * M = max m_s, out = sum_s expf(m_s - M) acc_s / sum_s expf(m_s - M) l_s.
 * Geometry: the split count S and keys a split kps come from depth_max on the host (dp_geometry:
 * ~2 blocks an SM at depth_max, kps a multiple of 32 in [32, 128] and within the shared memory
 * cap); k_attn_deep's grid is (S, Hkv), 256 threads, a block = one kv head's split, all G query
 * heads (each K/V byte read once, from HBM). At depth n the splits past ceil(n / kps) exit.
 * The point of the kernel is when its loads happen: pos is written by the host before the graph
 * starts (no kernel writes it) and cache rows < p by earlier steps, so a block reads pos and issues
 * its K/V rows < p as cp.async copies into shared memory BEFORE griddepcontrol.wait — under the
 * previous kernels (the Q/K/V GEMV) — and after the wait only q and row p (this step's, just
 * written). Then: scores with 2 threads a key (D/2 dims each, G heads, q from shared memory
 * broadcast, one shuffle; 8 threads a key, fewer FMAs and 3 shuffles a head, measured 2-3% slower on
 * the H200: bench/NOTES.md), softmax a warp a head, P.V with thread = (dim pair, key group), key
 * groups summed through shared memory, the partial (acc[G][D], m[G], l[G]; dp_partial) written to scratch.
 * k_attn_deep_merge (grid Hq, 256 threads, after its PDL wait): thread = (dim quad, split group)
 * issues its splits' acc float4, m and l at once (one round trip up to 128 splits at D 64), M by a
 * block max, the weighted sums; groups and L added through shared memory, out = o / L and its
 * q8_1 blocks.
 * Traffic at depth n (F16 cache, Qwen2.5-0.5B: Hkv 2, D 64, G 7): K+V 2*n*D*2*Hkv bytes = 2 MB at
 * 4096 (HBM, issued before the wait); partials Hkv*S*(2G + G*D)*4 bytes written once and read once
 * from L2 (S 64: 236 KB). Chain after the wait: q + row p (L2) -> RoPE -> scores -> softmax -> P.V
 * -> partial; merge: acc, m, l (one round trip) -> out.
 * H200 (Qwen2.5-0.5B Q4_K_M, F16 cache, sb bench tg64; SB_TUNE=attn_deep=0 is the all-modes kernel of
 * k_attn_decode.cu): d512 1,195 vs 960, d4096 1,132-1,137 vs 914, d16384 951-954 vs 446. ncu at depth
 * ~3.9k (serialized, no PDL overlap): split kernel 8.1 us, merge 3.9 us. Fewest keys a split
 * (SB_TUNE=attn_deep_kmin) 32 (default) / 64 / 128: d512 1,195 / 1,174 / 1,123, d4096 1,135 / 1,136 / 1,066.
 * A sliding-window ring cache (cu_attn_args.ring): key j at row kv_row(j, ring); this step's row p
 * overwrites position p - ring, which lies before the window (ring >= window), so the rows read
 * before the wait are still earlier steps' keys. Rings take their own instantiations (RING), so a
 * linear cache's kernel computes no ring rows.
 * Requires: G <= 8, D <= 256 (gemma's 256: two key groups in P.V, at most 64 keys a split in the 96 KB)
 * with rows of whole 16-byte chunks, F32 or F16 cache, fused q RoPE any,
 * q8_1 output with D % 32 == 0; cu_attn_deep_fits says; cu_attn_decode falls back to its own
 * kernel otherwise. A paged cache (cu_attn_args.tbl: the batched engine's B = 1 step) takes its own
 * instantiations (PAGED: key j at row kv_row_tbl(j, tbl, bs)).
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c, the depth-class
 * cases) and every test model through the graphs of each depth class; without a GPU
 * test_cuda_attn_decode_emu and, through a block table, test_cuda_attn_paged_dec_emu.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"

#include <math.h>

#define DP_THREADS 256
#define DP_GMAX 8
#define DP_DMAX 256
#define DP_KMAX 128                 /* keys a split */
#define DP_SMEM_CAP (96 * 1024)     /* dynamic shared memory a block may take */
#define DP_SMAX 1024                /* splits a kv head (the merge's shared arrays) */

typedef struct dp_args {
    int D, G, Hkv, window, kps, S, ks; /* ks: a row's bytes in shared memory (padded by 16) */
    int64_t Dkv;                       /* cache row length (elements) */
    int64_t ring;                      /* a sliding-window ring cache of this many rows: key j at row kv_row(j, ring); 0: linear */
    float scale, softcap;
    const float *ff;                   /* Q's RoPE (n_rot 0: none) */
    int n_rot, mode;
    float ts, fs, af;
    const int32_t *tbl;                /* a paged cache (PAGED instantiations only): key j at row kv_row_tbl(j, tbl, bs) */
    int bs;
} dp_args;


/* a split's partial in floats: acc[G][D] (16-byte aligned: D % 16 == 0), m[G], l[G], padded to 4 */
static __host__ __device__ __forceinline__ int dp_partial(int G, int D) { return G * D + (2 * G + 3) / 4 * 4; }

/* 8 consecutive cache elements of a shared-memory row as floats */
template <int F16> static __device__ __forceinline__ void dp_row8(const unsigned char *row, int d0, float v[8]) {
    if (F16) {
        const uint4 u = *(const uint4 *)(row + 2 * d0);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            v[2 * e] = cu_h2f((uint16_t)(w[e] & 0xffffu));
            v[2 * e + 1] = cu_h2f((uint16_t)(w[e] >> 16));
        }
    } else {
        const float4 a = *(const float4 *)(row + 4 * d0), b = *(const float4 *)(row + 4 * d0 + 16);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    }
}

/* PAGED (no ring): a paged cache, key j at row kv_row_tbl(j, a.tbl, a.bs) — the batched engine's B = 1
 * step; the keys read are [lo, p], whose table entries are valid (plan_check_paged) and host-written
 * before the graph, as pos */
template <int F16, bool RING, bool PAGED = false>
__global__ void __launch_bounds__(DP_THREADS) k_attn_deep(const float *q, const void *kc, const void *vc, const int32_t *pos, dp_args a,
                                                          float *part) {
    CU_PDL_LAUNCH();
    CU_DYN_SMEM(dp_sm);
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int s = blockIdx.x, kvh = blockIdx.y, D = a.D, G = a.G, kps = a.kps;
    constexpr int es = F16 ? 2 : 4;
    const int64_t p = pos[0]; /* host-written before the graph: no kernel of the step writes it */
    const int64_t ring = RING ? a.ring : 0; /* a constant 0 for linear caches: no row arithmetic per key */
    const int32_t *tbl = PAGED ? a.tbl : nullptr; /* a constant NULL but for paged caches */
    static_assert(!PAGED || !RING, "k_attn_deep: a paged cache has no ring");
    const int64_t j0 = attn_window_lo(p, a.window) + (int64_t)s * kps;
    if (j0 > p) return; /* an inactive split: the merge derives the same count from pos */
    const int nk = (int)(p + 1 - j0 < kps ? p + 1 - j0 : kps), npre = p - j0 < nk ? (int)(p - j0) : nk; /* rows < p: npre */
    unsigned char *sk = dp_sm, *sv = sk + kps * a.ks;
    float *sq = (float *)(sv + kps * a.ks), *ss = sq + G * D, *sml = ss + G * kps, *red = sml + 2 * DP_GMAX;
    const int chunks = D * es / 16;
    const int64_t rs = a.Dkv * es; /* cache row stride in bytes */
    const unsigned char *kg = (const unsigned char *)kc + (int64_t)kvh * D * es;
    const unsigned char *vg = (const unsigned char *)vc + (int64_t)kvh * D * es;
    for (int i = tid; i < npre * chunks; i += DP_THREADS) { /* before the wait: rows earlier steps wrote (a ring's row of p is none of them) */
        const int r = i / chunks, c = i - r * chunks;
        const int64_t o = (tbl ? kv_row_tbl(j0 + r, tbl, a.bs) : kv_row(j0 + r, ring)) * rs + 16 * c;
        cu_cp16(sk + r * a.ks + 16 * c, kg + o);
        cu_cp16(sv + r * a.ks + 16 * c, vg + o);
    }
    cu_cp_commit();
    CU_PDL_WAIT();
    for (int i = tid; i < G * D; i += DP_THREADS) sq[i] = q[(int64_t)kvh * G * D + i];
    if (npre < nk) /* row p: this step's, written by the previous kernel */
        for (int c = tid; c < chunks; c += DP_THREADS) {
            *(uint4 *)(sk + npre * a.ks + 16 * c) = *(const uint4 *)(kg + (tbl ? kv_row_tbl(p, tbl, a.bs) : kv_row(p, ring)) * rs + 16 * c);
            *(uint4 *)(sv + npre * a.ks + 16 * c) = *(const uint4 *)(vg + (tbl ? kv_row_tbl(p, tbl, a.bs) : kv_row(p, ring)) * rs + 16 * c);
        }
    if (a.n_rot > 0) { /* Q's RoPE (k_rope's math through rope_rot: bit-identical), pairs rotated in place */
        __syncthreads();
        const int half = a.n_rot / 2;
        for (int i = tid; i < G * half; i += DP_THREADS) {
            const int g = i / half, r = i - g * half;
            const int ia = a.mode == 2 ? r : 2 * r, ib = a.mode == 2 ? r + half : 2 * r + 1;
            float ya, yb;
            rope_rot(sq[g * D + ia], sq[g * D + ib], r, (int32_t)p, a.ts, a.fs, a.af, a.ff, &ya, &yb);
            sq[g * D + ia] = ya;
            sq[g * D + ib] = yb;
        }
    }
    cu_cp_wait<0>();
    __syncthreads();
    { /* scores: 2 threads a key (kps <= 128 keys in one pass), D/2 dims each */
        const int k = tid >> 1, half = tid & 1, dh = D / 2;
        float sc[DP_GMAX];
#pragma unroll
        for (int h = 0; h < DP_GMAX; h++) sc[h] = 0.0f;
        if (k < nk) {
            const unsigned char *kr = sk + k * a.ks;
            for (int d0 = half * dh; d0 < half * dh + dh; d0 += 8) {
                float kv[8];
                dp_row8<F16>(kr, d0, kv);
#pragma unroll
                for (int h = 0; h < DP_GMAX; h++) {
                    if (h >= G) break;
                    const float4 qa = *(const float4 *)(sq + h * D + d0), qb = *(const float4 *)(sq + h * D + d0 + 4);
                    sc[h] += qa.x * kv[0] + qa.y * kv[1] + qa.z * kv[2] + qa.w * kv[3] + qb.x * kv[4] + qb.y * kv[5] + qb.z * kv[6] + qb.w * kv[7];
                }
            }
        }
#pragma unroll
        for (int h = 0; h < DP_GMAX; h++) sc[h] += __shfl_xor_sync(0xffffffffu, sc[h], 1);
        if (k < nk && half == 0)
#pragma unroll
            for (int h = 0; h < DP_GMAX; h++) {
                if (h >= G) break;
                float v = sc[h] * a.scale;
                if (a.softcap > 0.0f) v = tanhf(v / a.softcap) * a.softcap;
                ss[h * kps + k] = v;
            }
    }
    __syncthreads();
    if (w < G) { /* softmax of head w over the split's keys: m, p = expf(s - m), l */
        float mx = -INFINITY;
        for (int k = lane; k < nk; k += 32) mx = fmaxf(mx, ss[w * kps + k]);
        mx = warp_max(mx);
        float l = 0.0f;
        for (int k = lane; k < nk; k += 32) {
            const float e = expf(ss[w * kps + k] - mx);
            ss[w * kps + k] = e;
            l += e;
        }
        l = warp_sum(l);
        if (lane == 0) sml[w] = mx, sml[DP_GMAX + w] = l;
    }
    __syncthreads();
    { /* P.V: thread = (dim pair dp, key group kg); NG key groups summed through shared memory */
        const int dh = D / 2, NG = DP_THREADS / dh, dp = tid % dh, kg = tid / dh;
        float acc[DP_GMAX][2];
#pragma unroll
        for (int h = 0; h < DP_GMAX; h++) acc[h][0] = acc[h][1] = 0.0f;
        if (kg < NG)
            for (int k = kg; k < nk; k += NG) {
                const unsigned char *vr = sv + k * a.ks;
                float v0, v1;
                if (F16) {
                    const unsigned u = *(const unsigned *)(vr + 4 * dp);
                    v0 = cu_h2f((uint16_t)(u & 0xffffu)), v1 = cu_h2f((uint16_t)(u >> 16));
                } else {
                    const float2 f = *(const float2 *)(vr + 8 * dp);
                    v0 = f.x, v1 = f.y;
                }
#pragma unroll
                for (int h = 0; h < DP_GMAX; h++) {
                    if (h >= G) break;
                    const float pk = ss[h * kps + k];
                    acc[h][0] += pk * v0;
                    acc[h][1] += pk * v1;
                }
            }
        if (kg < NG)
#pragma unroll
            for (int h = 0; h < DP_GMAX; h++) {
                if (h >= G) break;
                red[(kg * G + h) * D + 2 * dp] = acc[h][0];
                red[(kg * G + h) * D + 2 * dp + 1] = acc[h][1];
            }
        __syncthreads();
        float *pp = part + ((int64_t)kvh * a.S + s) * dp_partial(G, D); /* (acc[G][D], m[G], l[G], pad) */
        for (int i = tid; i < G * D; i += DP_THREADS) {
            float o = 0.0f;
            for (int g = 0; g < NG; g++) o += red[g * G * D + i];
            pp[i] = o;
        }
        if (tid < G) pp[G * D + tid] = sml[tid], pp[G * D + G + tid] = sml[DP_GMAX + tid];
    }
}

/* thread = (dim quad dq, split group sg): every load of the thread (its splits' m, l and acc float4)
 * issued at once, one round trip; then the block max M (a barrier), the weighted sums, and the
 * groups and L added through shared memory */
#define DP_MPS 8 /* splits a merge thread holds in registers a round (one round up to 256 / (D / 4) * 8 splits) */
__global__ void __launch_bounds__(DP_THREADS) k_attn_deep_merge(float *dst, blk_q8_1 *xq, const int32_t *pos, const float *part, dp_args a) {
    CU_PDL_ENTRY();
    __shared__ float sw[DP_THREADS / 32], sl[DP_THREADS / 32];
    __shared__ __align__(16) float so[DP_THREADS * 4];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, D = a.D, G = a.G;
    const int h = blockIdx.x, kvh = h / G, g = h - kvh * G, W = dp_partial(G, D), MO = G * D + g, LO = G * D + G + g;
    const int64_t p = pos[0], n = p - attn_window_lo(p, a.window) + 1;
    const int na = (int)((n + a.kps - 1) / a.kps); /* the active splits (<= S: the host sized S for depth_max >= n) */
    if (na > a.S) { /* a depth past the class the host chose (a host bug): a visible NaN, never a plausible result */
        if (tid < D) dst[(int64_t)h * D + tid] = __int_as_float(0x7fc00000);
        if (xq && tid < D && tid % 32 == 0) xq[((int64_t)h * D + tid) / 32].d = cu_f2h(__int_as_float(0x7fc00000));
        return;
    }
    const float *base = part + (int64_t)kvh * a.S * W;
    const int NQ = D / 4, NG = DP_THREADS / NQ, dq = tid % NQ, sg = tid / NQ; /* D % 16 == 0: NQ >= 4 */
    const bool on = sg < NG;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float lsum = 0.0f, M = -INFINITY;
    /* rounds of DP_MPS splits a thread (one round covers NG * DP_MPS splits: D 64, 128). Round 0's
     * loads go out first and stay in registers while the block max M is taken (the m of splits past
     * round 0, if any, read on the way), so up to that many splits the merge is one round trip */
    const int per_round = NG * DP_MPS;
    float4 acc[DP_MPS];
    float ms[DP_MPS], ls[DP_MPS];
    for (int r0 = 0; r0 < na; r0 += per_round) {
#pragma unroll
        for (int i = 0; i < DP_MPS; i++) { /* all of the round's loads at once */
            const int s = r0 + sg + i * NG;
            const bool ok = on && s < na;
            acc[i] = ok ? *(const float4 *)(base + (int64_t)s * W + g * D + 4 * dq) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            ms[i] = ok ? base[(int64_t)s * W + MO] : -INFINITY;
            ls[i] = ok ? base[(int64_t)s * W + LO] : 0.0f;
        }
        if (r0 == 0) { /* the block max over every split */
            float mloc = -INFINITY;
#pragma unroll
            for (int i = 0; i < DP_MPS; i++) mloc = fmaxf(mloc, ms[i]);
            for (int s = per_round + sg; on && s < na; s += NG) mloc = fmaxf(mloc, base[(int64_t)s * W + MO]);
            mloc = warp_max(mloc);
            if (lane == 0) sw[w] = mloc;
            __syncthreads();
#pragma unroll
            for (int v = 0; v < DP_THREADS / 32; v++) M = fmaxf(M, sw[v]);
        }
#pragma unroll
        for (int i = 0; i < DP_MPS; i++) {
            const float f = expf(ms[i] - M); /* 0 for an absent split (m = -inf) */
            o.x += f * acc[i].x, o.y += f * acc[i].y, o.z += f * acc[i].z, o.w += f * acc[i].w;
            if (dq == 0) lsum += f * ls[i];
        }
    }
    *(float4 *)(so + 4 * tid) = o;
    lsum = warp_sum(lsum);
    if (lane == 0) sl[w] = lsum;
    __syncthreads();
    float L = 0.0f;
#pragma unroll
    for (int v = 0; v < DP_THREADS / 32; v++) L += sl[v];
    float out = 0.0f;
    if (tid < D) { /* dim tid: quad tid / 4 of every split group */
        for (int v = 0; v < NG; v++) out += so[4 * (v * NQ + tid / 4) + tid % 4];
        out *= 1.0f / L;
        dst[(int64_t)h * D + tid] = out;
    }
    if (xq && w * 32 < D) q8_1_store(xq + ((int64_t)h * D + tid) / 32, out, lane); /* D % 32 == 0 with xq: whole warps */
}

static int dp_smem(int kps, int D, int G, int es) {
    const int ks = D * es + 16, NG = DP_THREADS / (D / 2);
    return 2 * kps * ks + (G * D + G * kps + 2 * DP_GMAX + NG * G * D) * 4;
}
/* the geometry for depth_max keys: kps (a multiple of 32, 32..128, shared memory <= DP_SMEM_CAP)
 * and S = ceil(depth_max / kps) splits, ~2 blocks an SM; false when no kps fits */
static bool dp_geometry(const cu_attn_args *a, int64_t depth_max, int *kps, int *S) {
    static int sms = 0;
    if (!sms) sms = cu_sm_count() > 0 ? cu_sm_count() : 1;
    const int G = (int)(a->Hq / a->Hkv), es = a->ctype == CU_T_F16 ? 2 : 4, D = (int)a->D;
    int64_t st = 2 * (int64_t)sms / a->Hkv;
    if (st < 1) st = 1;
    int64_t k = (depth_max + st - 1) / st;
    k = (k + 31) / 32 * 32;
    const int kmin = cu_cfg()->attn_deep_kmin < 32 ? 32 : cu_cfg()->attn_deep_kmin > DP_KMAX ? DP_KMAX : cu_cfg()->attn_deep_kmin / 32 * 32;
    if (k < kmin) k = kmin;
    if (k > DP_KMAX) k = DP_KMAX;
    while (k > 32 && dp_smem((int)k, D, G, es) > DP_SMEM_CAP) k -= 32;
    if (dp_smem((int)k, D, G, es) > DP_SMEM_CAP) return false;
    const int64_t s = (depth_max + k - 1) / k;
    if (s > DP_SMAX || s > 65535) return false;
    *kps = (int)k, *S = (int)s;
    return true;
}

static int64_t dp_depth_bound(const cu_attn_args *a, int64_t depth_max) {
    int64_t d = depth_max;
    if (a->ctx > 0 && a->ctx < d) d = a->ctx;
    if (a->window > 0 && a->window < d) d = a->window;
    return d;
}

/* whether these kernels take a — a decode step whose depth bound lies past the small layout's, with
 * splits and a shape they support — and then their geometry */
static bool dp_takes(const cu_attn_args *a, int *kps, int *S) {
    if (a->T != 1 || a->depth_max <= a->small || a->nsplit <= 1 || a->D <= 0 || a->D > DP_DMAX || a->D % 16 || a->Hkv <= 0 ||
        a->Hkv > 65535 || a->Hq % a->Hkv || a->Hq / a->Hkv > DP_GMAX || (a->ctype != CU_T_F32 && a->ctype != CU_T_F16) || a->q_rope.n_rot < 0 ||
        a->q_rope.n_rot > a->D || a->q_rope.n_rot % 2 || (a->xq && a->D % 32))
        return false;
    return dp_geometry(a, dp_depth_bound(a, a->depth_max), kps, S);
}

extern "C" bool cu_attn_deep_fits(const cu_attn_args *a) {
    int kps, S;
    return dp_takes(a, &kps, &S);
}

/* scratch floats for every depth class the kernel may take, so one plan's scratch serves them all:
 * the largest over the class bounds (powers of two) up to the caches' depth ctx and ctx itself —
 * not ctx alone, which the kernel may refuse (too many splits) while a shallower class takes it;
 * 0 when it takes none */
extern "C" uint64_t cu_attn_deep_scratch(const cu_attn_args *a) {
    const int64_t ctx = a->ctx > 0 ? a->ctx : 0, G = a->Hq > 0 && a->Hkv > 0 ? a->Hq / a->Hkv : 0;
    uint64_t most = 0;
    for (int64_t d = 32;; d = d * 2 < ctx ? d * 2 : ctx) {
        cu_attn_args b = *a;
        b.depth_max = d;
        int kps, S;
        if (dp_takes(&b, &kps, &S)) {
            const uint64_t f = (uint64_t)a->Hkv * (uint64_t)S * (uint64_t)dp_partial((int)G, (int)a->D);
            if (f > most) most = f;
        }
        if (d >= ctx) break;
    }
    return most;
}

/* the split kernel for one cache type; past the default 48 KB of dynamic shared memory it opts in
 * once (to DP_SMEM_CAP) */
template <int F16, bool RING, bool PAGED = false>
static sb_status dp_launch(cudaStream_t st, int smem, const float *q, const void *k, const void *v, const int32_t *pos, const dp_args &g,
                           float *scratch) {
    static bool opted = false;
    if (smem > 48 * 1024 && !opted) {
        const cudaError_t e = cudaFuncSetAttribute(k_attn_deep<F16, RING, PAGED>, cudaFuncAttributeMaxDynamicSharedMemorySize, DP_SMEM_CAP);
        if (e != cudaSuccess)
            return sb_fail(SB_ERR_DEVICE, "cuda: k_attn_deep: %d bytes of shared memory: %s (%s)", DP_SMEM_CAP, cudaGetErrorString(e),
                           cudaGetErrorName(e));
        opted = true;
    }
    cu_launch_smem(k_attn_deep<F16, RING, PAGED>, dim3((unsigned)g.S, (unsigned)g.Hkv), DP_THREADS, (size_t)smem, st, q, k, v, pos, g, scratch);
    return SB_OK;
}

extern "C" sb_status cu_attn_deep(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                  const cu_attn_args *a, float *scratch) {
    int kps, S;
    if (!dp_takes(a, &kps, &S) || !scratch)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: deep decode attention with head_dim %lld, %lld/%lld heads, cache type %d, depth bound %lld",
                       (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->ctype, (long long)a->depth_max);
    const int es = a->ctype == CU_T_F16 ? 2 : 4;
    if (((uintptr_t)k | (uintptr_t)v) % 16 || (a->D * a->Hkv * es) % 16)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: deep decode attention needs 16-byte aligned cache rows (head_dim %lld, %lld kv heads)",
                       (long long)a->D, (long long)a->Hkv);
    dp_args g = {};
    g.D = (int)a->D, g.G = (int)(a->Hq / a->Hkv), g.Hkv = (int)a->Hkv, g.window = a->window, g.kps = kps, g.S = S;
    g.ks = (int)a->D * es + 16, g.Dkv = a->D * a->Hkv, g.ring = a->ring, g.scale = a->scale, g.softcap = a->softcap;
    const cu_attn_rope *qr = &a->q_rope;
    g.ff = qr->ff, g.n_rot = qr->n_rot, g.mode = qr->mode, g.ts = qr->theta_scale, g.fs = qr->freq_scale, g.af = qr->attn_factor;
    g.tbl = a->tbl, g.bs = a->bs;
    const int smem = dp_smem(kps, g.D, g.G, es);
    const cudaStream_t st = (cudaStream_t)s;
    const bool f16 = a->ctype == CU_T_F16; /* a ring cache, a paged one take their own instantiations */
    SB_TRY(f16 ? (g.tbl ? dp_launch<1, false, true> : g.ring ? dp_launch<1, true> : dp_launch<1, false>)(st, smem, q, k, v, pos, g, scratch)
               : (g.tbl ? dp_launch<0, false, true> : g.ring ? dp_launch<0, true> : dp_launch<0, false>)(st, smem, q, k, v, pos, g, scratch));
    SB_TRY(cu_after_launch("k_attn_deep"));
    cu_launch(k_attn_deep_merge, dim3((unsigned)a->Hq), DP_THREADS, st, dst, (blk_q8_1 *)a->xq, pos, (const float *)scratch, g);
    return cu_after_launch("k_attn_deep_merge");
}
