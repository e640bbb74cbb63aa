/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_rope.cu — rotary position embedding (NORMAL and NEOX, freq factors, linear
 * scaling) and the KV-cache column write (F32, or F16 rounded to nearest even).
 * Math (architectures.md §0.3, ops_ref.c op_rope): theta_i = s * ((p * b^(-2/n_rot)^i) / ff_i),
 * the power taken by repeated f32 multiplication as ggml does (so the last bits match the CPU at
 * large p); (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos), both times attn_factor; pairs are
 * (2i, 2i+1) in NORMAL mode and (i, i + n_rot/2) in NEOX mode; dims >= n_rot are copied.
 * Positions come from device memory (pos[t]), so a captured CUDA graph serves every step.
 * k_rope_store (a ROPE_STORE node: the planner's fuse_rope_store): the same math written into the KV cache column
 * pos[t] (F32 or F16) instead of dst — rope + kv_store of K in one kernel; a paged cache's column is
 * rows[t] (cu_rope_args.rows, the slots), the rotation still at pos[t]; a sliding-window ring's column is
 * that mod its rows (cu_rope_args.ring, kv_row) for every cache write here.
 * Geometry: rope: grid (T, H / hpb), block (n_rot/2 threads, one pair each, <= 512; hpb heads, so a
 * block has >= 256 threads) plus the tail copy.
 * kv_store: grid (Dkv/256, T), one element a thread, written at column pos[t].
 * k_rope_jobs (executor fusion): up to four of those in one launch, each job's math unchanged.
 * k_rope_norm (cu_rope_norm, rope_norm.h; a rope with a head norm, pass fuse_norm_rope): each head
 * RMS-normalised [* w] as it is loaded, then rotated the same way, into dst or the cache; blocks of
 * k_rope's size in one dimension, one row of threads a head (device/rope_norm.cuh).
 * Traffic: rope reads and writes 4*D*H*T bytes; kv_store reads 4*Dkv*T, writes (2|4)*Dkv*T.
 * Tested against: op_rope and op_kv_store (tests/runtime/test_cuda_ops.c, whole-model tests).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/rope_norm.cuh"
#include "backend/cuda/device/split.cuh"
#include "backend/cuda/rope_norm.h"

#include <string.h>

__global__ void k_rope(float *dst, const float *x, const int32_t *pos, int64_t D, int64_t H, int n_rot, int mode, float theta_scale,
                       float freq_scale, float attn_factor, const float *ff) {
    CU_PDL_ENTRY();
    const int64_t t = blockIdx.x, h = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    if (h >= H) return;
    const int half = n_rot / 2;
    const float *src = x + (t * H + h) * D;
    float *out = dst + (t * H + h) * D;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        int ia, ib;
        float ya, yb;
        rope_pair(src, i, n_rot, mode, pos[t], theta_scale, freq_scale, attn_factor, ff, &ia, &ib, &ya, &yb);
        out[ia] = ya;
        out[ib] = yb;
    }
    if (out != src)
        for (int64_t d = n_rot + threadIdx.x; d < D; d += blockDim.x) out[d] = src[d];
}

/* rope written straight into a KV cache column (the K path: rope then kv_store, fused) */
template <typename C> static __device__ __forceinline__ void cstore(C *c, int64_t i, float v);
template <> __device__ __forceinline__ void cstore<float>(float *c, int64_t i, float v) { c[i] = v; }
template <> __device__ __forceinline__ void cstore<uint16_t>(uint16_t *c, int64_t i, float v) { c[i] = cu_f2h(v); }

template <typename C>
__global__ void k_rope_store(C *cache, const float *x, const int32_t *pos, const int32_t *rows, int64_t ring, int64_t D, int64_t H, int n_rot,
                             int mode, float theta_scale, float freq_scale, float attn_factor, const float *ff) {
    CU_PDL_ENTRY();
    const int64_t t = blockIdx.x, h = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    if (h >= H) return;
    const int half = n_rot / 2;
    const float *src = x + (t * H + h) * D;
    C *out = cache + kv_row(rows[t], ring) * H * D + h * D;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        int ia, ib;
        float ya, yb;
        rope_pair(src, i, n_rot, mode, pos[t], theta_scale, freq_scale, attn_factor, ff, &ia, &ib, &ya, &yb);
        cstore(out, ia, ya);
        cstore(out, ib, yb);
    }
    for (int64_t d = n_rot + threadIdx.x; d < D; d += blockDim.x) cstore(out, d, src[d]);
}

extern "C" sb_status cu_rope(cu_stream s, float *dst, const float *x, const int32_t *pos, const cu_rope_args *a) {
    if (a->T <= 0) return SB_OK;
    int th = a->n_rot / 2;
    th = th < 32 ? 32 : th > 512 ? 512 : (th + 31) / 32 * 32;
    const int hpb = th < 256 ? 256 / th : 1; /* heads per block: >= 256 threads, not 32-thread blocks */
    const dim3 g((unsigned)a->T, cu_div_up(a->H, hpb)), b((unsigned)th, (unsigned)hpb);
    if (a->cache) {
        const int32_t *rows = a->rows ? a->rows : pos;
        if (a->ctype == CU_T_F16)
            cu_launch(k_rope_store<uint16_t>, g, b, (cudaStream_t)s, (uint16_t *)a->cache, x, pos, rows, a->ring, a->D, a->H, a->n_rot, a->mode,
                      a->theta_scale, a->freq_scale, a->attn_factor, a->ff);
        else
            cu_launch(k_rope_store<float>, g, b, (cudaStream_t)s, (float *)a->cache, x, pos, rows, a->ring, a->D, a->H, a->n_rot, a->mode,
                      a->theta_scale, a->freq_scale, a->attn_factor, a->ff);
        return cu_after_launch("k_rope_store");
    }
    cu_launch(k_rope, g, b, (cudaStream_t)s, dst, x, pos, a->D, a->H, a->n_rot, a->mode, a->theta_scale,
                                                                          a->freq_scale, a->attn_factor, a->ff);
    return cu_after_launch("k_rope");
}

/* cu_rope_norm: device/rope_norm.cuh's blocks, grid (T, H / hpb) */
template <typename C>
__global__ void __launch_bounds__(512) k_rope_norm(float *dst, C *cache, const float *x, const int32_t *pos, const cu_rope_args a, float eps,
                                                   const float *w) {
    CU_PDL_ENTRY();
    __shared__ double part[ROPE_NORM_WARPS];
    rope_norm_block<C>(dst, cache, x, pos, a, eps, w, part);
}

extern "C" sb_status cu_rope_norm(cu_stream s, float *dst, const float *x, const int32_t *pos, const cu_rope_args *a, float eps, const float *w) {
    if (a->T <= 0) return SB_OK;
    int nt, hpb;
    rope_norm_geometry(a->n_rot, &nt, &hpb);
    const dim3 g((unsigned)a->T, cu_div_up(a->H, hpb)), b((unsigned)(nt * hpb));
    if (a->cache && a->ctype == CU_T_F16)
        cu_launch(k_rope_norm<uint16_t>, g, b, (cudaStream_t)s, (float *)NULL, (uint16_t *)a->cache, x, pos, *a, eps, w);
    else
        cu_launch(k_rope_norm<float>, g, b, (cudaStream_t)s, dst, (float *)a->cache, x, pos, *a, eps, w);
    return cu_after_launch("k_rope_norm");
}

__global__ void k_kv_store(void *cache, int f16, int64_t Dkv, const float *x, const int32_t *pos, int64_t ring) {
    CU_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (i >= Dkv) return;
    const float v = x[t * Dkv + i];
    const int64_t o = kv_row(pos[t], ring) * Dkv + i;
    if (f16)
        ((uint16_t *)cache)[o] = cu_f2h(v);
    else
        ((float *)cache)[o] = v;
}

extern "C" sb_status cu_kv_store(cu_stream s, void *cache, int ctype, int64_t Dkv, const float *x, const int32_t *pos, int64_t T, int64_t ring) {
    if (T <= 0) return SB_OK;
    cu_launch(k_kv_store, dim3(cu_div_up(Dkv, 256), (unsigned)T), 256, (cudaStream_t)s, cache, ctype == CU_T_F16, Dkv, x, pos, ring);
    return cu_after_launch("k_kv_store");
}

/* cu_rope_jobs: a 1-D grid of 256-thread blocks, job k taking blocks [b0[k], b0[k + 1]); in a rope job
 * item e < T*H*half is pair e % half of head e / half (one warp a head of 64 dims, as k_rope's
 * blocks), then the T*H*(D - n_rot) unrotated dims; in a store job item e is element e of x */
typedef struct rj_set {
    cu_rope_job j[CU_ROPE_JOBS_MAX];
    unsigned b0[CU_ROPE_JOBS_MAX + 1];
    int n;
} rj_set;

template <typename C>
static __device__ __forceinline__ void rj_put(const cu_rope_job &jb, int64_t th, int64_t t, int64_t h, int64_t d, const int32_t *pos, float v) {
    const cu_rope_args &a = jb.a;
    if (a.cache) cstore((C *)a.cache + kv_row((a.rows ? a.rows : pos)[t], a.ring) * a.H * a.D + h * a.D, d, v);
    else jb.dst[th * a.D + d] = v;
}

/* element o of a job's x: loaded, or summed from the partials of the GEMM that computes it by the
 * reduce kernel's own sum (mma_split_sum), so the same bits */
static __device__ __forceinline__ float rj_x(const cu_rope_job &jb, int64_t o) {
    const cu_split_src &sp = jb.src;
    return sp.part ? mma_split_sum(sp.part, o, o % sp.N, sp.nsplit, sp.TN, sp.ep) : jb.x[o];
}

template <typename C>
static __device__ __forceinline__ void rj_run(const cu_rope_job &jb, int64_t e, const int32_t *pos) {
    const cu_rope_args &a = jb.a;
    if (jb.store) { /* cu_kv_store */
        if (e >= a.D * a.T) return;
        const int64_t t = e / a.D;
        cstore((C *)a.cache, kv_row((a.rows ? a.rows : pos)[t], a.ring) * a.D + e % a.D, rj_x(jb, e));
        return;
    }
    const int half = a.n_rot / 2;
    const int64_t np = a.T * a.H * half, nc = a.T * a.H * (a.D - a.n_rot);
    if (e < np) { /* rope_pair's pairs and math, x through rj_x */
        const int64_t th = e / half, t = th / a.H, h = th % a.H;
        const int i = (int)(e % half);
        int ia, ib;
        rope_pair_index(i, a.n_rot, a.mode, &ia, &ib);
        float ya, yb;
        rope_rot(rj_x(jb, th * a.D + ia), rj_x(jb, th * a.D + ib), i, pos[t], a.theta_scale, a.freq_scale, a.attn_factor, a.ff, &ya, &yb);
        rj_put<C>(jb, th, t, h, ia, pos, ya);
        rj_put<C>(jb, th, t, h, ib, pos, yb);
    } else if (e < np + nc) {
        const int64_t e2 = e - np, w = a.D - a.n_rot, th = e2 / w, t = th / a.H, h = th % a.H, d = a.n_rot + e2 % w;
        if (a.cache || jb.dst != jb.x || jb.src.part) rj_put<C>(jb, th, t, h, d, pos, rj_x(jb, th * a.D + d));
    }
}

__global__ void __launch_bounds__(256) k_rope_jobs(const rj_set js, const int32_t *pos) {
    CU_PDL_ENTRY();
    int k = 0;
#pragma unroll
    for (int q = 1; q < CU_ROPE_JOBS_MAX; q++)
        if (q < js.n && blockIdx.x >= js.b0[q]) k = q;
    const cu_rope_job &jb = js.j[k];
    const int64_t e = (int64_t)(blockIdx.x - js.b0[k]) * 256 + threadIdx.x;
    if (jb.a.cache && jb.a.ctype == CU_T_F16) rj_run<uint16_t>(jb, e, pos);
    else rj_run<float>(jb, e, pos);
}

extern "C" sb_status cu_rope_jobs(cu_stream s, const cu_rope_job *jobs, int n, const int32_t *pos) {
    if (n < 1 || n > CU_ROPE_JOBS_MAX) return sb_fail(SB_ERR_INTERNAL, "cuda: %d rope / kv_store jobs in one launch", n);
    rj_set js;
    memset(&js, 0, sizeof js);
    js.n = n;
    for (int k = 0; k < n; k++) {
        const cu_rope_args &a = jobs[k].a;
        const int64_t items = jobs[k].store ? a.D * a.T : a.T * a.H * (a.n_rot / 2 + (a.D - a.n_rot));
        js.j[k] = jobs[k];
        js.b0[k + 1] = js.b0[k] + (unsigned)cu_div_up(items, 256);
    }
    for (int k = n + 1; k <= CU_ROPE_JOBS_MAX; k++) js.b0[k] = js.b0[n];
    if (js.b0[n] == 0) return SB_OK;
    cu_launch(k_rope_jobs, dim3(js.b0[n]), 256, (cudaStream_t)s, js, pos);
    return cu_after_launch("k_rope_jobs");
}

/* The PTX (virtual) architecture the loaded kernels were compiled for, x10 (90 = compute_90): below
 * 90 CU_PDL_ENTRY compiled to nothing, so programmatic dependent launch must stay off even on a
 * Hopper GPU (e.g. a build for sm_80 only, running its sm_80 code there). 0 if unknown. */
extern "C" int cu_kernels_ptx_version(void) {
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, k_kv_store) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return fa.ptxVersion;
}
