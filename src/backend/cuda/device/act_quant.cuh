/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/act_quant.cuh — the device math of 8-bit activation quantization, shared by
 * k_quantize.cu (standalone and norm/GLU-fused kernels), the GEMV prologues of k_mmvq.cu (the
 * activation built in shared memory by every block) and NVRTC-generated kernels: one copy.
 *  - q8_1 (formats.md §3.2, CUDA semantics, as llama.cpp's quantize_q8_1): q8_1_store in common.cuh.
 *  - q8_K (formats.md §2.7, the CPU reference quantize_row_q8_K_ref), per 256 values: max = the
 *    signed value of largest |x| (first on ties); iscale = -127/max; q = min(127, nint(iscale*x))
 *    (round half even); d = 1/iscale (fp32); bsums[g] = sum of q over 16 values; all zero when
 *    max == 0.
 *  - value sources: plain, RMSNorm (x*scale [*w]), GLU (act(g)*u with ggml's fp16-table GELU or SiLU).
 *  - the RMSNorm scale: sum of squares in double (as ops_ref.c), 1/sqrtf(mean + eps).
 * Layer 0 (backend/cuda), device code only, no host includes (NVRTC-includable).
 * Invariant: every caller quantizes through quant_row / q8_K_store / q8_1_store, so fused and
 * unfused paths give the same bits for the same input values.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_ACT_QUANT_CUH
#define SB_BACKEND_CUDA_DEVICE_ACT_QUANT_CUH

#include "backend/cuda/device/common.cuh"

static __device__ __forceinline__ float silu1q(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gelu1q(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return __half2float(__float2half_rn(g));
}

/* q8_K: element 32k + lane of the 256-block is v[k] (the whole warp stores one block) */
static __device__ __forceinline__ void q8_K_store(blk_q8_K *b, const float v[8], int lane) {
    float ba = -1.0f, bv = 0.0f;
    int bi = 1 << 30;
#pragma unroll
    for (int k = 0; k < 8; k++) { /* indices grow with k: strict > keeps the first */
        const float a = fabsf(v[k]);
        if (a > ba) ba = a, bv = v[k], bi = 32 * k + lane;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, ba, o), ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oa > ba || (oa == ba && oi < bi)) ba = oa, bv = ov, bi = oi;
    }
    if (ba == 0.0f) {
#pragma unroll
        for (int k = 0; k < 8; k++) b->qs[32 * k + lane] = 0;
        if (lane < 16) b->bsums[lane] = 0;
        if (lane == 0) b->d = 0.0f;
        return;
    }
    const float iscale = -127.0f / bv;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        int q = __float2int_rn(iscale * v[k]);
        q = q < 127 ? q : 127;
        b->qs[32 * k + lane] = (int8_t)q;
        int s = q; /* sum over the 16 lanes of this half-warp = bsums[2k + lane/16] */
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if ((lane & 15) == 0) b->bsums[2 * k + lane / 16] = (int16_t)s;
    }
    if (lane == 0) b->d = 1.0f / iscale;
}

// ---- value sources: element i of the row ----

struct src_plain {
    const float *x;
    __device__ float operator()(int64_t i) const { return x[i]; }
};
struct src_norm {
    const float *x, *w;
    float sc;
    __device__ float operator()(int64_t i) const {
        const float v = x[i] * sc;
        return w ? v * w[i] : v;
    }
};
struct src_glu {
    const float *g, *u;
    int gelu;
    __device__ float operator()(int64_t i) const {
        const float a = g[i];
        return (gelu ? gelu1q(a) : silu1q(a)) * u[i];
    }
};

/* quantize row elements [0, E) read through f into dst, by a block of NT threads (warp w takes
 * blocks w, w + NT/32, ...) */
template <int XQ, int NT, typename F> static __device__ __forceinline__ void quant_row(void *dst, int64_t E, const F &f) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (XQ == CU_T_Q8_1) {
        for (int64_t b = w; b < E / 32; b += NT / 32) q8_1_store((blk_q8_1 *)dst + b, f(b * 32 + lane), lane);
    } else {
        for (int64_t b = w; b < E / 256; b += NT / 32) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = f(b * 256 + 32 * k + lane);
            q8_K_store((blk_q8_K *)dst + b, v, lane);
        }
    }
}

static __device__ __forceinline__ uint64_t act_row_bytes(int xq, int64_t E) {
    return xq == CU_T_Q8_1 ? (uint64_t)(E / 32) * sizeof(blk_q8_1) : (uint64_t)(E / 256) * sizeof(blk_q8_K);
}

/* RMSNorm scale of one row by a block of NT threads: sum of (v*v) in double over thread-strided
 * partials, warp sums, then the NT/32 warp partials in order (part: NT/32 doubles of shared
 * memory). With b != NULL the row is x + b, also written to sum_out (which may be x or b: each
 * element is read, then written, by one thread); the caller reads the row back from sum_out after
 * this function's barrier. Ends with __syncthreads(). */
template <int NT>
static __device__ __forceinline__ float block_rms_scale(const float *xr, const float *br, float *sr, int64_t E, float eps, double *part) {
    double acc = 0.0;
    if (br) {
        for (int64_t i = threadIdx.x; i < E; i += NT) {
            const float v = xr[i] + br[i];
            sr[i] = v;
            acc += (double)(v * v);
        }
    } else {
        for (int64_t i = threadIdx.x; i < E; i += NT) {
            const float v = xr[i];
            acc += (double)(v * v);
        }
    }
    acc = warp_sum_d(acc);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < NT / 32; k++) sum += part[k];
    const float mean = (float)(sum / (double)E);
    return 1.0f / sqrtf(mean + eps);
}

#endif
