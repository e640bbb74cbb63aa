/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attn_decode.cu — decode attention (T == 1), variant 4 (SB_CUDA_ATTN=4; reached
 * through cu_attention): one block per (kv head, split) computes all G = Hq/Hkv query heads of its
 * kv head, so each K/V row is read once per kv head, and the number of ACTIVE splits follows the
 * position, which is read from device memory (one captured graph serves every step).
 * Math (ops_ref.c op_attention): for query head h at p = pos[0], keys j in [lo, p] (lo = p-window+1
 * with a window) of kv head h / G: s_j = (q . k_j) * scale, then c*tanh(s_j/c) with a softcap;
 * out = sum_j softmax(s)_j v_j; online softmax in f32 (running max m, sum l, rescaled acc).
 * Geometry: grid (Hkv, S), 256 threads (8 warps). S (nsplit) is fixed per plan from the context
 * capacity (exec_cuda.c attn_nsplit). At depth n = p-lo+1 each split takes kps = max(kmin,
 * ceil(n/S)) keys and na = ceil(n/kps) splits are active; blocks of the other splits exit at once.
 * A block walks its keys in tiles of TK (<= 128, sized on the host so everything fits 48 KB of
 * shared memory): the K tile and the V tile are issued at once as two cp.async groups (16-byte
 * copies when a row is a multiple of 16 bytes, plain element copies otherwise) into rows padded by
 * 16 bytes (conflict-free 16-byte row reads); scores for G heads x TK keys (thread = (head, key),
 * q from shared memory, RoPE applied on load with rope_pair, bit-identical to k_rope) go to
 * shared memory while V is still in flight; warp g updates head g's (m, l) and turns scores into
 * probabilities; thread = (head, dim) pairs (8 per thread at most) then rescale their acc and
 * accumulate p * V from shared memory. q is loaded (and rotated) before the split test, so its
 * loads overlap pos's. na == 1 (depth < kmin): the block writes out = acc / l (and the q8_1
 * blocks of the output, D % 32 == 0) directly — no partials, no counter. na > 1: each block
 * writes (m[G], l[G], pad, acc[G*D]) to scratch, threadfence, an atomic counter per kv head; the
 * last-arriving block merges: m, l of all (split, head) into shared memory (one round trip),
 * factors exp(m_s - M) and 1/L per head, then G*D/4 float4 columns x R = 256/(G*D/4) threads,
 * each summing every R-th split (16-byte L2 loads, 8 in flight), R partial sums added in shared
 * memory; it resets its counter to 0 (the next attention of the stream finds 0s).
 * Traffic at depth n, F16 cache: K+V 2*n*D*2*Hkv bytes (Qwen2.5-0.5B: 512*n, 2 MB at n 4096, 0.5 µs
 * of HBM at 4 TB/s; F32 twice that), each K/V byte read once (variant 2 read it G = 7 times, from
 * L2); q G*D*4 per block; partials na*Hkv*(8+G*D)*4 bytes written and read once through L2
 * (Qwen2.5-0.5B, kmin 128, n 4096: 33 splits x 456 floats = 60 KB per kv head).
 * Latency chain (dependent global round trips after the PDL wait): depth 0 (Qwen: 2 blocks): pos
 * (q overlapped) -> K/V tile (L2: just stored) -> out = 2 round trips plus shared-memory steps.
 * Depth 4096 (kmin 128: 33 splits of one 128-key tile, 66 blocks): pos -> K/V tile (HBM, 32 KB a
 * block) -> partials + threadfence -> atomic -> m, l -> acc (3 batches of 8 loads for 17 splits a
 * thread) -> out = ~7 round trips, 5 of them L2. Predicted ~2 µs at depth 0 and ~4 µs at depth
 * 4096 a call (variant 2: 9-12 and ~30).
 * Requires: G <= 8, D <= 256, F32 or F16 cache, S <= 256, counters (cu_attention falls back to
 * variant 2 without them).
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c: attention, rope+attention, the
 * Q/K/V block and the decode-depth cases for variant 4).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"

#include <math.h>

#define AD_THREADS 256
#define AD_WARPS (AD_THREADS / 32)
#define AD_GMAX 8   /* query heads per kv head (one warp each in the softmax step) */
#define AD_DMAX 256 /* head_dim */
#define AD_ACC (AD_GMAX * AD_DMAX / AD_THREADS) /* (head, dim) outputs per thread */
#define AD_TKMAX 128                            /* keys per shared-memory tile */
#define AD_SMAX 256                             /* grid splits */
#define AD_SMEM (48 * 1024 - 64)                /* dynamic shared memory (the default limit, less the static `last`) */

typedef struct ad_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} ad_rope;

typedef struct ad_args {
    int D, G, f16, vec;     /* vec: rows are whole 16-byte chunks (16-byte copies and reads) */
    int window, S, kmin;    /* S: grid splits; kmin: fewest keys per split */
    int tk, ks, tile_off;   /* tile keys, padded row bytes, byte offset of the K tile in shared memory */
    int64_t Dkv;            /* cache row length (elements) */
    float scale, softcap;
} ad_args;

// ---- asynchronous copies (sm_80+; plain copies below) ----

static __device__ __forceinline__ void ad_cp16(void *s, const void *g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(g) : "memory");
#else
    *(uint4 *)s = *(const uint4 *)g;
#endif
}
static __device__ __forceinline__ void ad_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> static __device__ __forceinline__ void ad_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* keys [j, j+nk) of one kv head's rows (cache c, element size es) into shared rows of ks bytes */
static __device__ __forceinline__ void ad_load_tile(unsigned char *sdst, const void *c, int64_t j, int nk, int64_t head_el, const ad_args &a) {
    const int es = a.f16 ? 2 : 4, rb = a.D * es;
    const unsigned char *src = (const unsigned char *)c + (j * a.Dkv + head_el) * es;
    const int64_t stride = a.Dkv * es;
    if (a.vec) {
        const int cpr = rb / 16;
        for (int i = threadIdx.x; i < nk * cpr; i += AD_THREADS) {
            const int key = i / cpr, part = i - key * cpr;
            ad_cp16(sdst + key * a.ks + part * 16, src + key * stride + part * 16);
        }
    } else if (a.f16) {
        for (int i = threadIdx.x; i < nk * a.D; i += AD_THREADS) {
            const int key = i / a.D, d = i - key * a.D;
            ((uint16_t *)(sdst + key * a.ks))[d] = ((const uint16_t *)(src + key * stride))[d];
        }
    } else {
        for (int i = threadIdx.x; i < nk * a.D; i += AD_THREADS) {
            const int key = i / a.D, d = i - key * a.D;
            ((float *)(sdst + key * a.ks))[d] = ((const float *)(src + key * stride))[d];
        }
    }
}

static __device__ __forceinline__ float ad_lo(unsigned u) { return cu_h2f((uint16_t)(u & 0xffffu)); }
static __device__ __forceinline__ float ad_hi(unsigned u) { return cu_h2f((uint16_t)(u >> 16)); }

/* q . row for one key: q f32 in shared memory, the row in shared memory in the cache's type */
static __device__ __forceinline__ float ad_dot(const float *q, const unsigned char *row, const ad_args &a) {
    float s0 = 0.0f, s1 = 0.0f;
    if (a.vec && a.f16) {
        const uint4 *r = (const uint4 *)row;
        for (int c = 0; c < a.D / 8; c++) {
            const uint4 u = r[c];
            const float *qq = q + 8 * c;
            s0 += qq[0] * ad_lo(u.x) + qq[1] * ad_hi(u.x) + qq[2] * ad_lo(u.y) + qq[3] * ad_hi(u.y);
            s1 += qq[4] * ad_lo(u.z) + qq[5] * ad_hi(u.z) + qq[6] * ad_lo(u.w) + qq[7] * ad_hi(u.w);
        }
    } else if (a.vec) {
        const float4 *r = (const float4 *)row, *qq = (const float4 *)q;
        for (int c = 0; c < a.D / 4; c += 2) {
            const float4 u = r[c], x = qq[c];
            s0 += x.x * u.x + x.y * u.y + x.z * u.z + x.w * u.w;
            if (c + 1 < a.D / 4) {
                const float4 u1 = r[c + 1], x1 = qq[c + 1];
                s1 += x1.x * u1.x + x1.y * u1.y + x1.z * u1.z + x1.w * u1.w;
            }
        }
    } else if (a.f16) {
        for (int d = 0; d < a.D; d++) s0 += q[d] * cu_h2f(((const uint16_t *)row)[d]);
    } else {
        for (int d = 0; d < a.D; d++) s0 += q[d] * ((const float *)row)[d];
    }
    return s0 + s1;
}

static __device__ __forceinline__ float ad_vld(const unsigned char *sv, int key, int d, const ad_args &a) {
    return a.f16 ? cu_h2f(((const uint16_t *)(sv + key * a.ks))[d]) : ((const float *)(sv + key * a.ks))[d];
}

/* out (and its q8_1 blocks) for this thread's (head, dim) pairs: the whole warp calls it (D % 32 == 0 with xq) */
static __device__ __forceinline__ void ad_store(float *dst, blk_q8_1 *xq, int64_t h0, const float *acc, const int *gi, const float *linv, int GD, int D) {
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = threadIdx.x + i * AD_THREADS;
        if (e < GD) {
            const float v = acc[i] * linv[gi[i]];
            dst[h0 * D + e] = v;
            if (xq) q8_1_store(xq + (h0 * D + e) / 32, v, e & 31); /* a 32-block lies in one head: e & 31 == lane */
        }
    }
}

__global__ void __launch_bounds__(AD_THREADS) k_attn_dec(float *dst, const float *q, const void *kc, const void *vc, const int32_t *pos,
                                                         ad_args a, ad_rope rp, float *part, unsigned *cnt, blk_q8_1 *xq) {
    CU_PDL_ENTRY();
    extern __shared__ __align__(16) unsigned char ad_sm[];
    __shared__ int last;
    const int kvh = blockIdx.x, sp = blockIdx.y, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int D = a.D, G = a.G, GD = a.G * a.D;
    const int64_t p = pos[0];
    const int64_t lo = (a.window > 0 && p - a.window + 1 > 0) ? p - a.window + 1 : 0;
    float *sq = (float *)ad_sm, *ss = sq + GD, *sm_m = ss + G * a.tk, *sm_l = sm_m + G, *sm_c = sm_l + G;
    unsigned char *sk = ad_sm + a.tile_off, *sv = sk + a.tk * a.ks;
    const int64_t h0 = (int64_t)kvh * G; /* first query head of this kv head */
    const float *qh = q + h0 * D;
    if (rp.n_rot > 0) { /* Q's RoPE on load (k_rope's math via rope_pair) */
        const int half = rp.n_rot / 2, nr = D - rp.n_rot;
        for (int i = tid; i < G * half; i += AD_THREADS) {
            const int g = i / half;
            int ia, ib;
            float ya, yb;
            rope_pair(qh + g * D, i - g * half, rp.n_rot, rp.mode, (int32_t)p, rp.ts, rp.fs, rp.af, rp.ff, &ia, &ib, &ya, &yb);
            sq[g * D + ia] = ya;
            sq[g * D + ib] = yb;
        }
        for (int i = tid; i < G * nr; i += AD_THREADS) {
            const int g = i / nr, d = rp.n_rot + i - g * nr;
            sq[g * D + d] = qh[g * D + d];
        }
    } else {
        for (int i = tid; i < GD; i += AD_THREADS) sq[i] = qh[i];
    }
    if (tid < G) sm_m[tid] = -INFINITY, sm_l[tid] = 0.0f;
    /* the split (after q's loads: they overlap pos's, one round trip less at depth 0) */
    const int64_t n = p - lo + 1;
    int64_t kps = (n + a.S - 1) / a.S;
    if (kps < a.kmin) kps = a.kmin;
    const int na = (int)((n + kps - 1) / kps);
    if (sp >= na) return; /* an empty split */
    const int64_t j0 = lo + sp * kps, j1 = j0 + kps < p + 1 ? j0 + kps : p + 1;

    int gi[AD_ACC], di[AD_ACC]; /* this thread's (head, dim) pairs: e = tid + i*AD_THREADS */
    float acc[AD_ACC];
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = tid + i * AD_THREADS;
        gi[i] = e < GD ? e / D : 0;
        di[i] = e < GD ? e - gi[i] * D : 0;
        acc[i] = 0.0f;
    }
    const int64_t head_el = (int64_t)kvh * D;
    for (int64_t jt = j0; jt < j1; jt += a.tk) {
        const int nk = (int)(j1 - jt < a.tk ? j1 - jt : a.tk);
        ad_load_tile(sk, kc, jt, nk, head_el, a);
        ad_commit();
        ad_load_tile(sv, vc, jt, nk, head_el, a);
        ad_commit();
        ad_wait<1>(); /* this thread's K copies landed (groups complete in order) */
        __syncthreads();
        for (int i = tid; i < G * nk; i += AD_THREADS) { /* scores: thread = (head, key) */
            const int g = i / nk, k = i - g * nk;
            float s = ad_dot(sq + g * D, sk + k * a.ks, a) * a.scale;
            if (a.softcap > 0.0f) s = tanhf(s / a.softcap) * a.softcap;
            ss[g * a.tk + k] = s;
        }
        __syncthreads();
        if (w < G) { /* warp w: head w's running max and sum; scores -> probabilities */
            float *sr = ss + w * a.tk;
            float mt = -INFINITY;
            for (int k = lane; k < nk; k += 32) mt = fmaxf(mt, sr[k]);
            mt = warp_max(mt);
            const float mo = sm_m[w], mn = fmaxf(mo, mt); /* finite: the tile holds a key */
            float sum = 0.0f;
            for (int k = lane; k < nk; k += 32) {
                const float e = expf(sr[k] - mn);
                sr[k] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float c = expf(mo - mn);
                sm_c[w] = c;
                sm_l[w] = sm_l[w] * c + sum;
                sm_m[w] = mn;
            }
        }
        ad_wait<0>(); /* V too */
        __syncthreads();
#pragma unroll
        for (int i = 0; i < AD_ACC; i++)
            if (tid + i * AD_THREADS < GD) acc[i] *= sm_c[gi[i]];
        int k = 0;
        for (; k + 4 <= nk; k += 4) { /* 4 keys x this thread's pairs of shared-memory loads in flight */
#pragma unroll
            for (int i = 0; i < AD_ACC; i++)
                if (tid + i * AD_THREADS < GD) {
                    const float *pr = ss + gi[i] * a.tk + k;
                    acc[i] += pr[0] * ad_vld(sv, k, di[i], a) + pr[1] * ad_vld(sv, k + 1, di[i], a) + pr[2] * ad_vld(sv, k + 2, di[i], a) +
                              pr[3] * ad_vld(sv, k + 3, di[i], a);
                }
        }
        for (; k < nk; k++) {
#pragma unroll
            for (int i = 0; i < AD_ACC; i++)
                if (tid + i * AD_THREADS < GD) acc[i] += ss[gi[i] * a.tk + k] * ad_vld(sv, k, di[i], a);
        }
        __syncthreads(); /* the next tile overwrites sk, sv, ss */
    }

    if (na == 1) { /* the only active split: out directly */
        float *linv = sm_c; /* the last tile's factors are consumed */
        if (tid < G) linv[tid] = 1.0f / sm_l[tid];
        __syncthreads();
        ad_store(dst, xq, h0, acc, gi, linv, GD, D);
        return;
    }
    const int AO = (2 * G + 3) & ~3, PS = AO + GD; /* one split's partial: m[G], l[G], padding, acc[G*D] at a 16-byte offset */
    float *pk = part + (int64_t)kvh * a.S * PS;
    float *pp = pk + (int64_t)sp * PS;
    if (tid < G) pp[tid] = sm_m[tid], pp[G + tid] = sm_l[tid];
#pragma unroll
    for (int i = 0; i < AD_ACC; i++)
        if (tid + i * AD_THREADS < GD) pp[AO + tid + i * AD_THREADS] = acc[i];
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&cnt[kvh], 1u) == (unsigned)na - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* the merge, in the tile region of shared memory: m and l of every (split, head), then factors
     * f[s][g] = exp(m - M_g) and 1/L_g; then R = AD_THREADS / columns threads per column of 4 (or 1)
     * acc floats, each summing every R-th split's acc * f (16-byte L2 loads, 8 in flight), and the
     * R partial sums of each float added up */
    float *sf = (float *)sk, *sl = sf + na * G, *linv = sl + na * G, *red = sf + ((2 * na * G + G + 3) & ~3); /* red 16-byte aligned */
    for (int i = tid; i < na * G; i += AD_THREADS) {
        const int s = i / G, g = i - s * G;
        sf[i] = __ldcg(pk + (int64_t)s * PS + g);
        sl[i] = __ldcg(pk + (int64_t)s * PS + G + g);
    }
    __syncthreads();
    if (w < G) {
        float M = -INFINITY;
        for (int s = lane; s < na; s += 32) M = fmaxf(M, sf[s * G + w]);
        M = warp_max(M);
        float L = 0.0f;
        for (int s = lane; s < na; s += 32) {
            const float m = sf[s * G + w], f = m == -INFINITY ? 0.0f : expf(m - M);
            L += sl[s * G + w] * f;
            sf[s * G + w] = f;
        }
        L = warp_sum(L);
        if (lane == 0) linv[w] = 1.0f / L;
    }
    __syncthreads();
    const int vw = D % 4 == 0 ? 4 : 1, ncol = GD / vw, R = ncol < AD_THREADS ? AD_THREADS / ncol : 1;
    for (int it = tid; it < ncol * R; it += AD_THREADS) {
        const int c = it % ncol, r = it / ncol, g = c * vw / D;
        const float *pc = pk + AO + c * vw;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (vw == 4) {
#pragma unroll 8
            for (int s = r; s < na; s += R) {
                const float4 x = __ldcg((const float4 *)(pc + (int64_t)s * PS));
                const float f = sf[s * G + g];
                sum.x += x.x * f, sum.y += x.y * f, sum.z += x.z * f, sum.w += x.w * f;
            }
            *(float4 *)(red + r * GD + c * 4) = sum;
        } else {
#pragma unroll 8
            for (int s = r; s < na; s += R) sum.x += __ldcg(pc + (int64_t)s * PS) * sf[s * G + g];
            red[r * GD + c] = sum.x;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = tid + i * AD_THREADS;
        acc[i] = 0.0f;
        if (e < GD)
            for (int r = 0; r < R; r++) acc[i] += red[r * GD + e];
    }
    ad_store(dst, xq, h0, acc, gi, linv, GD, D);
    if (tid == 0) cnt[kvh] = 0; /* ready for the next attention */
}

/* bytes of shared memory before the K tile: q [G*D], scores [G*tk], m/l/c [3G] floats, 16-aligned */
static int ad_tile_off(int G, int D, int tk) { return ((G * D + G * tk + 3 * G) * 4 + 15) / 16 * 16; }

extern "C" uint64_t cu_attn_decode_scratch(const cu_attn_args *a) {
    const uint64_t G = a->Hkv > 0 ? (uint64_t)(a->Hq / a->Hkv) : 0;
    return a->nsplit > 1 ? (uint64_t)a->Hkv * (uint64_t)a->nsplit * (((2 * G + 3) & ~(uint64_t)3) + G * (uint64_t)a->D) : 0;
}

extern "C" sb_status cu_attn_decode(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                    const cu_attn_args *a, float *scratch, unsigned *counters) {
    if (a->T != 1 || a->D <= 0 || a->D > AD_DMAX || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq / a->Hkv > AD_GMAX || a->nsplit < 1 ||
        a->nsplit > AD_SMAX || a->Hkv > 65535)
        return sb_fail(SB_ERR_UNSUPPORTED,
                       "cuda: decode attention (variant 4) with %lld tokens, head_dim %lld, %lld/%lld heads, %d splits (T 1, head_dim <= %d, "
                       "at most %d query heads per kv head, 1..%d splits)",
                       (long long)a->T, (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->nsplit, AD_DMAX, AD_GMAX, AD_SMAX);
    if (a->ctype != CU_T_F32 && a->ctype != CU_T_F16)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention (variant 4) with cache type %d (F32 or F16 only)", a->ctype);
    if (a->q_rot < 0 || a->q_rot > a->D || a->q_rot % 2)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with a fused RoPE of %d dims (head_dim %lld)", a->q_rot, (long long)a->D);
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    if (a->nsplit > 1 && (!counters || a->Hkv > CU_ATT_COUNTERS || !scratch))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention (variant 4) with %d splits needs split counters (%lld kv heads, %d counters) and scratch",
                       a->nsplit, (long long)a->Hkv, CU_ATT_COUNTERS);
    ad_args g = {};
    g.D = (int)a->D;
    g.G = (int)(a->Hq / a->Hkv);
    g.f16 = a->ctype == CU_T_F16;
    const int es = g.f16 ? 2 : 4, rb = g.D * es;
    g.vec = rb % 16 == 0 && (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0;
    g.window = a->window;
    g.S = a->nsplit;
    g.kmin = a->kmin > 0 ? a->kmin : CU_ATT_DEC_KMIN;
    g.ks = (rb + 15) / 16 * 16 + 16;
    g.Dkv = a->D * a->Hkv;
    g.scale = a->scale;
    g.softcap = a->softcap;
    /* the merge reuses the tile region: m, l [S*G], 1/L [G], R partial sums of G*D floats (R*G*D <= max(4*AD_THREADS, G*D)) */
    const int GD = g.G * g.D, red = GD > 4 * AD_THREADS ? GD : 4 * AD_THREADS;
    const int merge_bytes = g.S > 1 ? (2 * g.S * g.G + g.G + red) * 4 + 16 : 0;
    int tk = AD_TKMAX, smem = 0;
    for (; tk >= 1; tk--) {
        const int tiles = 2 * tk * g.ks;
        smem = ad_tile_off(g.G, g.D, tk) + (tiles > merge_bytes ? tiles : merge_bytes);
        if (smem <= AD_SMEM) break;
    }
    if (tk < 1)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention (variant 4): head_dim %d with %d heads per kv head does not fit %d bytes of shared memory",
                       g.D, g.G, AD_SMEM);
    g.tk = tk;
    g.tile_off = ad_tile_off(g.G, g.D, tk);
    const ad_rope rp = {a->q_ff, a->q_rot, a->q_mode, a->q_theta_scale, a->q_freq_scale, a->q_attn_factor};
    cu_launch_smem(k_attn_dec, dim3((unsigned)a->Hkv, (unsigned)g.S), AD_THREADS, (size_t)smem, (cudaStream_t)s, dst, q, k, v, pos, g, rp, scratch,
                   counters, (blk_q8_1 *)a->xq);
    return cu_after_launch("k_attn_dec");
}
