/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_quantize.cu — f32 activations -> q8_1 blocks (the activation format of every
 * dp4a GEMV), alone or fused behind RMSNorm (x weight) or SiLU/GELU(gate) x up.
 * Math (formats.md §3.2, CUDA semantics, as llama.cpp's quantize_q8_1): per 32 values, amax and
 * sum = warp max / warp sum of the unquantized x; d = amax/127; q = amax == 0 ? 0 : roundf(x/d)
 * (division, ties away from zero); stored ds = (F16(d), F16(sum)) — so s ~ sum x, not d*sum q.
 * RMSNorm: sum of squares in double over the row (as ops_ref.c), scale = 1/sqrtf(mean + eps),
 * v = (x*scale)*w. GLU: v = act(g)*u with k_rows.cu's activations.
 * Geometry: one 256-thread block per row; warp w quantizes 32-blocks w, w+8, ...; lane = element.
 * Traffic: reads 4*E (x; +4E for w or u) per row, writes 36/32*E; bandwidth-bound, one pass.
 * Tested against: the CPU reference of the unfused chain followed by this same rounding rule
 * (tests/runtime/test_cuda_ops.c) and the whole-model tests.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"

#define Q_THREADS 256

static __device__ __forceinline__ float silu1q(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gelu1q(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return __half2float(__float2half_rn(g));
}

/* the whole warp quantizes one 32-block whose element `lane` is v */
static __device__ __forceinline__ void q8_1_store(blk_q8_1 *b, float v, int lane) {
    const float amax = warp_max(fabsf(v));
    const float sum = warp_sum(v);
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    b->qs[lane] = (int8_t)q;
    if (lane == 0) {
        b->d = cu_f2h(d);
        b->s = cu_f2h(sum);
    }
}

__global__ void __launch_bounds__(Q_THREADS) k_quantize_q8_1(blk_q8_1 *dst, const float *x, int64_t E) {
    const int64_t r = blockIdx.x, nb = E / 32;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int64_t b = w; b < nb; b += Q_THREADS / 32) q8_1_store(dst + r * nb + b, x[r * E + b * 32 + lane], lane);
}

extern "C" sb_status cu_quantize_q8_1(cu_stream s, void *dst, const float *x, int64_t E, int64_t rows) {
    if (rows <= 0) return SB_OK;
    k_quantize_q8_1<<<(unsigned)rows, Q_THREADS, 0, (cudaStream_t)s>>>((blk_q8_1 *)dst, x, E);
    return cu_after_launch("k_quantize_q8_1");
}

__global__ void __launch_bounds__(Q_THREADS) k_rms_norm_q8_1(blk_q8_1 *dst, const float *x, const float *wt, int64_t E, float eps) {
    __shared__ double part[Q_THREADS / 32];
    const int64_t r = blockIdx.x, nb = E / 32;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const float *xr = x + r * E;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < E; i += Q_THREADS) {
        const float v = xr[i];
        acc += (double)(v * v);
    }
    acc = warp_sum_d(acc);
    if (lane == 0) part[w] = acc;
    __syncthreads();
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < Q_THREADS / 32; k++) sum += part[k];
    const float mean = (float)(sum / (double)E);
    const float sc = 1.0f / sqrtf(mean + eps);
    for (int64_t b = w; b < nb; b += Q_THREADS / 32) {
        const int64_t i = b * 32 + lane;
        float v = xr[i] * sc;
        if (wt) v = v * wt[i];
        q8_1_store(dst + r * nb + b, v, lane);
    }
}

extern "C" sb_status cu_rms_norm_q8_1(cu_stream s, void *dst, const float *x, const float *w, int64_t E, int64_t rows, float eps) {
    if (rows <= 0) return SB_OK;
    k_rms_norm_q8_1<<<(unsigned)rows, Q_THREADS, 0, (cudaStream_t)s>>>((blk_q8_1 *)dst, x, w, E, eps);
    return cu_after_launch("k_rms_norm_q8_1");
}

__global__ void __launch_bounds__(Q_THREADS) k_glu_q8_1(blk_q8_1 *dst, const float *g, const float *u, int64_t E, int gelu) {
    const int64_t r = blockIdx.x, nb = E / 32;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int64_t b = w; b < nb; b += Q_THREADS / 32) {
        const int64_t i = r * E + b * 32 + lane;
        const float a = g[i];
        q8_1_store(dst + r * nb + b, (gelu ? gelu1q(a) : silu1q(a)) * u[i], lane);
    }
}

extern "C" sb_status cu_glu_q8_1(cu_stream s, void *dst, const float *g, const float *u, int64_t E, int64_t rows, bool gelu) {
    if (rows <= 0) return SB_OK;
    k_glu_q8_1<<<(unsigned)rows, Q_THREADS, 0, (cudaStream_t)s>>>((blk_q8_1 *)dst, g, u, E, gelu ? 1 : 0);
    return cu_after_launch("k_glu_q8_1");
}
