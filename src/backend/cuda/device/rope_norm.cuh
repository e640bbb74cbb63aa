/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/rope_norm.cuh — the device code of k_rope.cu's normed rope (a ROPE or
 * ROPE_STORE with a head norm, pass fuse_norm_rope; host entry cu_rope_norm, rope_norm.h): each
 * head row RMS-normalised [* w] as it is loaded, then rotated with rope_rot (cu_rope's math) and
 * written to dst or into the KV cache column.
 * Layout: 1-D blocks of nt * hpb threads (rope_norm_geometry), row k of nt threads (a multiple of
 * 32) taking head blockIdx.y * hpb + k of token blockIdx.x; lane r of a row takes pairs r, r + nt,
 * ... and the dims past n_rot likewise.
 * Numerics: the scale is op_rms_norm_row's expression, x * scale and the weight's product rounded
 * apart as rms_norm then mul (no contraction), so the bits of the ops apart — except the sum of
 * squares: in double, lane r summing dims r, r + nt, ..., then the warp butterflies and the row's
 * warp partials in order (the CPU sums in index order; both in double, they round alike unless the
 * squares of a head span more than ~2^29, and then differ in the last bit of the scale).
 * Layer 0 (backend/cuda), device code only; a header so the host emulation runs it
 * (tests/runtime/test_cuda_rope_emu).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_ROPE_NORM_CUH
#define SB_BACKEND_CUDA_DEVICE_ROPE_NORM_CUH

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/kernels.h"

#define ROPE_NORM_WARPS 16 /* the most warps a block has (512 threads) */

/* the threads a head row takes (n_rot/2 rounded up to a warp, 32..512) and the heads a block takes
 * (blocks of >= 256 threads): k_rope's geometry, in one dimension */
static __host__ __device__ inline void rope_norm_geometry(int n_rot, int *nt, int *hpb) {
    int th = n_rot / 2;
    th = th < 32 ? 32 : th > 512 ? 512 : (th + 31) / 32 * 32;
    *nt = th;
    *hpb = th < 256 ? 256 / th : 1;
}

/* 1 / sqrt(mean(src^2) + eps) of head row src [D] as its row of nt threads sums it (the file's
 * order); every thread of the block calls it (a block barrier when nt > 32; rows past the heads,
 * valid false, add nothing). part: ROPE_NORM_WARPS doubles of shared memory. */
static __device__ __forceinline__ float rope_norm_scale(const float *src, int64_t D, float eps, int nt, bool valid, double *part) {
    const int r = (int)(threadIdx.x % (unsigned)nt);
    double acc = 0.0;
    if (valid)
        for (int64_t d = r; d < D; d += nt) {
            const float v = src[d];
            acc += (double)(v * v);
        }
    if (nt > 32) { /* the row's warps: partials w0 .. w0 + nt/32 - 1 of the block's */
        const int w0 = (int)(threadIdx.x / (unsigned)nt) * (nt / 32);
        acc = block_sum_d<ROPE_NORM_WARPS>(acc, part, w0, nt / 32);
    } else {
        acc = warp_sum_d(acc);
    }
    const float mean = (float)(acc / (double)D);
    return 1.0f / sqrtf(mean + eps);
}

/* dim d of the normed head: x * scale, times w[d] (each product rounded) */
static __device__ __forceinline__ float rope_normed(const float *src, int64_t d, float sc, const float *w) {
    const float v = __fmul_rn(src[d], sc);
    return w ? __fmul_rn(v, w[d]) : v;
}

static __device__ __forceinline__ void rope_norm_put(float *o, int64_t d, float v) { o[d] = v; }
static __device__ __forceinline__ void rope_norm_put(uint16_t *o, int64_t d, float v) { o[d] = cu_f2h(v); }

/* this thread's share of block blockIdx of the normed rope of x [D,H,T] (a: cu_rope's args; w the
 * norm's weight or NULL): out = dst [D,H,T], or cache (C = float | uint16_t for F32 | F16) column
 * rows[t] (or pos[t] when rows is NULL), mod a.ring in a ring cache */
template <typename C>
static __device__ __forceinline__ void rope_norm_block(float *dst, C *cache, const float *x, const int32_t *pos, const cu_rope_args &a,
                                                       float eps, const float *w, double *part) {
    int nt, hpb;
    rope_norm_geometry(a.n_rot, &nt, &hpb);
    const int64_t t = blockIdx.x, h = (int64_t)blockIdx.y * hpb + threadIdx.x / (unsigned)nt;
    const bool valid = h < a.H;
    const float *src = x + (t * a.H + (valid ? h : 0)) * a.D;
    const float sc = rope_norm_scale(src, a.D, eps, nt, valid, part);
    if (!valid) return;
    const int r = (int)(threadIdx.x % (unsigned)nt), half = a.n_rot / 2;
    const int32_t p = pos[t];
    for (int i = r; i < half; i += nt) {
        int ia, ib;
        rope_pair_index(i, a.n_rot, a.mode, &ia, &ib);
        float ya, yb;
        rope_rot(rope_normed(src, ia, sc, w), rope_normed(src, ib, sc, w), i, p, a.theta_scale, a.freq_scale, a.attn_factor, a.ff, &ya, &yb);
        if (cache) {
            C *o = cache + kv_row((a.rows ? a.rows : pos)[t], a.ring) * a.H * a.D + h * a.D;
            rope_norm_put(o, ia, ya), rope_norm_put(o, ib, yb);
        } else {
            dst[(t * a.H + h) * a.D + ia] = ya, dst[(t * a.H + h) * a.D + ib] = yb;
        }
    }
    for (int64_t d = a.n_rot + r; d < a.D; d += nt) {
        const float v = rope_normed(src, d, sc, w);
        if (cache) rope_norm_put(cache + kv_row((a.rows ? a.rows : pos)[t], a.ring) * a.H * a.D + h * a.D, d, v);
        else dst[(t * a.H + h) * a.D + d] = v;
    }
}

#endif
