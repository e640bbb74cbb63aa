/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/attn_paged.cuh — the paged attention kernels (k_attn_paged.cu launches them;
 * tests/runtime/test_cuda_attn_paged_emu runs them on the CPU under tests/codegen/emu/cuda_emu.h):
 * k_attn_paged<F16, false> (one block per (query head, token): all its visible keys, out directly),
 * k_attn_paged<F16, true> (a key split per blockIdx.z: a partial (m, l, acc[D]) per active split,
 * or out directly where only split 0 is active; with counters the last split block of a (head,
 * token) to arrive merges them, pa_merge) and k_attn_paged_merge (the partials to out, pa_merge).
 * Whichever writes out also writes its q8_1 blocks where a.xq is set (pa_out: q8_1_store, the
 * quantizer's code, so the bytes cu_quantize_act of out would write).
 * Math, geometry and the split: k_attn_paged.cu's header. With a.q_rope.n_rot > 0 each block first rotates
 * its q (pa_q_rope: through shared memory, two barriers) and reads it from there.
 */
#ifndef SB_CUDA_DEVICE_ATTN_PAGED_CUH
#define SB_CUDA_DEVICE_ATTN_PAGED_CUH

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"
#include "backend/cuda/kernels.h"

#include <math.h>

#define PA_WARPS 4
#define PA_PAIRS 8 /* pairs of dimensions a lane holds at most: D <= 2 * 32 * PA_PAIRS */
static_assert(2 * 32 * PA_PAIRS == CU_ATT_PAGED_MAX_D, "kernels.h's paged head_dim bound is this kernel's");

/* elements e, e + 1 (e even) of a cache: one 4-byte load of two halves, or one float2 */
template <bool F16> static __device__ __forceinline__ float2 pa_load(const void *c, int64_t e) {
    if (F16) {
        const uint32_t u = ((const uint32_t *)c)[e / 2];
        return make_float2(cu_h2f((uint16_t)(u & 0xFFFF)), cu_h2f((uint16_t)(u >> 16)));
    }
    return ((const float2 *)c)[e / 2];
}

/* the cache row of key position j of the token whose table row is row_tbl: its block's row, or (a.ring
 * > 0: a contiguous sliding-window ring, no table) kv_row(j, a.ring) — ops_ref.h's op_attn_row */
static __device__ __forceinline__ int64_t pa_row(const int32_t *row_tbl, int64_t j, const cu_attn_paged_args &a) {
    return a.ring > 0 ? kv_row(j, a.ring) : (int64_t)row_tbl[j / a.bs] * a.bs + j % a.bs;
}

/* the first visible key of a token at position p (its last is p) */
static __device__ __forceinline__ int64_t pa_lo(int64_t p, int window) { return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0; }

/* nh heads of one token's q (contiguous from q) into shared memory sq, the first a.q_rope.n_rot dims of each
 * rotated at position p (k_rope's math through rope_pair: bit-identical to cu_rope); the whole block
 * of NT threads calls it, and sq is ready for every thread when it returns */
template <int NT>
static __device__ __forceinline__ void pa_q_rope(float *sq, const float *q, int nh, int64_t D, int32_t p, const cu_attn_paged_args &a) {
    for (int64_t e = threadIdx.x; e < nh * D; e += NT) sq[e] = q[e];
    __syncthreads();
    const cu_attn_rope &qr = a.q_rope;
    const int half = qr.n_rot / 2;
    for (int i = threadIdx.x; i < nh * half; i += NT) { /* pairs are disjoint: rotated in place */
        const int g = i / half, r = i - g * half;
        int ia, ib;
        float ya, yb;
        rope_pair(sq + g * D, r, qr.n_rot, qr.mode, p, qr.theta_scale, qr.freq_scale, qr.attn_factor, qr.ff, &ia, &ib, &ya, &yb);
        sq[g * D + ia] = ya, sq[g * D + ib] = yb;
    }
    __syncthreads();
}

/* the split of n visible keys over S splits: *kps = max(kmin, ceil(n / S)) keys a split (kmin 0:
 * CU_ATT_DEC_KMIN); returns the active splits ceil(n / kps) (1..S). The split kernel and the merge
 * both compute it from pos, so one captured launch serves every depth. */
static __device__ __forceinline__ int pa_active(int64_t n, int S, int kmin, int64_t *kps) {
    const int64_t km = kmin > 0 ? kmin : CU_ATT_DEC_KMIN;
    *kps = (n + S - 1) / S;
    if (*kps < km) *kps = km;
    return (int)((n + *kps - 1) / *kps);
}

/* dims d of (head h, token t) = o: out[d], and with a.xq its q8_1 block (q8_1_store, as
 * cu_quantize_act of out: the same bits); with a.xq (D % 32 == 0) the caller's whole warp calls it
 * for 32 consecutive d of the head, lane i dim 32 k + i */
static __device__ __forceinline__ void pa_out(float *dst, int64_t t, int64_t h, int64_t d, float o, const cu_attn_paged_args &a) {
    const int64_t e = (t * a.Hq + h) * a.D + d;
    dst[e] = o;
    if (a.xq) q8_1_store((blk_q8_1 *)a.xq + e / 32, o, (int)(e & 31));
}

/* out of (head h, token t) = sum_z f_z acc_z / sum_z f_z l_z over its na (> 1) partials, f_z =
 * exp(m_z - max m) (0 for m_z = -inf), and its q8_1 blocks with a.xq (pa_out); the whole block of
 * 32 * PA_WARPS threads calls it (s_f: CU_ATT_PAGED_MAX_SPLITS floats of shared memory) */
static __device__ __forceinline__ void pa_merge(float *dst, const float *part, int64_t t, int h, int na, const cu_attn_paged_args &a, float *s_f) {
    const int64_t R = a.D + 2;
    const float *pp = part + (t * a.Hq + h) * a.nsplit * R;
    float M = -INFINITY;
    for (int z = 0; z < na; z++) M = fmaxf(M, pp[z * R]);
    for (int z = threadIdx.x; z < na; z += 32 * PA_WARPS) s_f[z] = pp[z * R] == -INFINITY ? 0.0f : expf(pp[z * R] - M);
    __syncthreads();
    float L = 0.0f;
    for (int z = 0; z < na; z++) L += s_f[z] * pp[z * R + 1];
    for (int64_t d = threadIdx.x; d < a.D; d += 32 * PA_WARPS) { /* with xq (D % 32 == 0) whole warps */
        float o = 0.0f;
        for (int z = 0; z < na; z++) o += s_f[z] * pp[z * R + 2 + d];
        pa_out(dst, t, h, d, o / L, a);
    }
}

template <bool F16, bool SPLIT>
__global__ void __launch_bounds__(32 * PA_WARPS)
    k_attn_paged(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl,
                 cu_attn_paged_args a, float *part, unsigned *cnt) {
    CU_PDL_ENTRY();
    __shared__ float s_acc[PA_WARPS][2 * 32 * PA_PAIRS];
    __shared__ float s_m[PA_WARPS], s_l[PA_WARPS];
    __shared__ float s_q[2 * 32 * PA_PAIRS]; /* q rotated (a.q_rope.n_rot > 0) */
    __shared__ float s_f[SPLIT ? CU_ATT_PAGED_MAX_SPLITS : 1]; /* the in-kernel merge's (cnt) */
    __shared__ int s_last;
    const int h = blockIdx.x, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t t = blockIdx.y, P = a.D / 2, Dkv = a.D * a.Hkv, kvh = h / (a.Hq / a.Hkv);
    const int64_t p = pos[t], lo = pa_lo(p, a.window);
    int64_t j0 = lo, j1 = p + 1; /* this block's keys [j0, j1) */
    int na = 1;
    if (SPLIT) {
        int64_t kps;
        na = pa_active(p - lo + 1, a.nsplit, a.kmin, &kps);
        if ((int)blockIdx.z >= na) return; /* no keys at this depth: its partial is never read */
        j0 = lo + (int64_t)blockIdx.z * kps;
        j1 = j0 + kps < p + 1 ? j0 + kps : p + 1;
    }
    const float *qv = q + (t * a.Hq + h) * a.D;
    if (a.q_rope.n_rot > 0) { /* Q's RoPE on load; after the split's early return: every thread of the block is here */
        pa_q_rope<32 * PA_WARPS>(s_q, qv, 1, a.D, (int32_t)p, a);
        qv = s_q;
    }
    float2 qr[PA_PAIRS], acc[PA_PAIRS];
#pragma unroll
    for (int i = 0; i < PA_PAIRS; i++) {
        const int64_t pi = lane + 32 * i;
        qr[i] = pi < P ? make_float2(qv[2 * pi], qv[2 * pi + 1]) : make_float2(0.0f, 0.0f);
        acc[i] = make_float2(0.0f, 0.0f);
    }
    const int32_t *row_tbl = tbl + t * a.n_tbl;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = j0 + w; j < j1; j += PA_WARPS) {
        const int64_t base = pa_row(row_tbl, j, a) * Dkv + kvh * a.D;
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
    if (SPLIT && na > 1) { /* the partial of split z: (m, l, acc[D]) unnormalized, for k_attn_paged_merge */
        float *pp = part + ((t * a.Hq + h) * a.nsplit + blockIdx.z) * (a.D + 2);
        if (threadIdx.x == 0) pp[0] = mx, pp[1] = sum;
        for (int64_t d = threadIdx.x; d < a.D; d += 32 * PA_WARPS) {
            float o = 0.0f;
            for (int x = 0; x < PA_WARPS; x++) o += wt[x] * s_acc[x][d];
            pp[2 + d] = o;
        }
        if (!cnt) return; /* k_attn_paged_merge follows */
        if (!block_arrives_last(&cnt[t * a.Hq + h], (unsigned)na, &s_last)) return;
        pa_merge(dst, part, t, h, na, a, s_f);
        if (threadIdx.x == 0) cnt[t * a.Hq + h] = 0; /* ready for the next attention */
        return;
    }
    for (int64_t d = threadIdx.x; d < a.D; d += 32 * PA_WARPS) { /* all the keys in this block: as the unsplit kernel, bit for bit */
        float o = 0.0f;
        for (int x = 0; x < PA_WARPS; x++) o += wt[x] * s_acc[x][d];
        pa_out(dst, t, h, d, o / sum, a);
    }
}

/* grid (Hq, T), 32 * PA_WARPS threads: out = sum_z f_z acc_z / sum_z f_z l_z over the na active
 * partials of (h, t) (na from pos, as the split kernel), f_z = exp(m_z - max m) (0 for m_z = -inf);
 * nothing where na == 1 (split 0 wrote out) */
__global__ void __launch_bounds__(32 * PA_WARPS) k_attn_paged_merge(float *dst, const float *part, const int32_t *pos, cu_attn_paged_args a) {
    CU_PDL_ENTRY();
    __shared__ float s_f[CU_ATT_PAGED_MAX_SPLITS];
    const int h = blockIdx.x;
    const int64_t t = blockIdx.y, p = pos[t], lo = pa_lo(p, a.window);
    int64_t kps;
    const int na = pa_active(p - lo + 1, a.nsplit, a.kmin, &kps);
    if (na == 1) return;
    pa_merge(dst, part, t, h, na, a, s_f);
}

#endif
