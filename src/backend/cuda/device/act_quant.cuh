/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/act_quant.cuh — the device math of 8-bit activation quantization, shared by
 * k_quantize.cu (standalone and norm/GLU-fused kernels) and NVRTC-generated kernels: one copy.
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
        return cu_glu(g[i], u[i], gelu);
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
 * partials, then block_sum_d over the NT/32 warps (part: NT/32 doubles of shared memory). With
 * b != NULL the row is x + b, also written to sum_out (which may be x or b: each element is read,
 * then written, by one thread); the caller reads the row back from sum_out after this function's
 * barrier (block_sum_d's, the last one in it). */
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
    const double sum = block_sum_d<NT / 32>(acc, part);
    const float mean = (float)(sum / (double)E);
    return 1.0f / sqrtf(mean + eps);
}

// ---- one row in registers: the fast path of every norm / GLU quantization ----

/* act_build: quantize one row of E values, built as x (AQ_PLAIN), rms_norm(x [+ b]) [* w]
 * (AQ_NORM; with b the sum x + b is also written to sum_out) or act(g) * u (AQ_GLU), by a block
 * of NT threads, every input value loaded once into registers with all loads in flight at once.
 * Layout: quantization blocks (32 values for q8_1, 256 for q8_K) go round-robin to the warps;
 * lane l of a warp holds values 32k + l of each of its blocks. The RMSNorm sum of squares is
 * summed in double per thread in that order, then by warp, then the NT/32 warp partials in order
 * (part: NT/32 doubles of shared memory), so a given NT gives the same bits wherever it runs
 * (the standalone kernels of k_quantize.cu use 256).
 * Rows that do not fit (aq_fits) take quant_row's loop instead. */
#define AQ_MAXV 32 /* values per thread: rows of up to 8192 values with 256 threads */
enum { AQ_PLAIN = 0, AQ_NORM = 1, AQ_GLU = 2 };

/* does a row of E values fit act_build with nt threads and vmax values a thread? */
static __host__ __device__ __forceinline__ bool aq_fits(int xq, int64_t E, int nt, int vmax = AQ_MAXV) {
    const int bs = xq == CU_T_Q8_1 ? 32 : 256;
    if (E <= 0 || E % bs) return false;
    const int64_t per_warp_blocks = vmax / (bs / 32); /* quantization blocks a warp can hold */
    return per_warp_blocks > 0 && E / bs <= per_warp_blocks * (nt / 32);
}

/* VMAX (<= AQ_MAXV): the register budget, values a thread (fewer registers for short rows) */
template <int XQ, int NT, int KIND, int VMAX = AQ_MAXV>
static __device__ __forceinline__ void act_build(void *dst, int64_t E, const float *x, const float *w, float eps, const float *b,
                                                 float *sum_out, const float *g, const float *u, int gelu, double *part) {
    constexpr int BS = XQ == CU_T_Q8_1 ? 32 : 256, PER = BS / 32, JM = VMAX / PER < 1 ? 1 : VMAX / PER, NW = NT / 32, NV = JM * PER;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int64_t nb = E / BS;
    /* phase 1: every load in flight (no value is used before all are issued: a use right after its
     * load would serialize the round trips across the branches of the unrolled loop) */
    float v[NV], wv[KIND == AQ_NORM ? NV : 1], bv[KIND == AQ_PLAIN ? 1 : NV];
#pragma unroll
    for (int j = 0; j < JM; j++) {
        const int64_t bk = wp + (int64_t)NW * j;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int64_t e = bk * BS + 32 * k + lane;
            const int i = j * PER + k;
            v[i] = 0.0f;
            if (KIND != AQ_PLAIN) bv[i] = 0.0f;
            if (KIND == AQ_NORM) wv[i] = 1.0f;
            if (bk < nb) {
                if (KIND == AQ_GLU) {
                    v[i] = g[e];
                    bv[i] = u[e];
                } else {
                    v[i] = x[e];
                    if (KIND == AQ_NORM && b) bv[i] = b[e];
                    if (KIND == AQ_NORM && w) wv[i] = w[e];
                }
            }
        }
    }
    /* phase 2: the values (GLU; the residual sum, also stored) */
#pragma unroll
    for (int j = 0; j < JM; j++) {
        const int64_t bk = wp + (int64_t)NW * j;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int i = j * PER + k;
            if (bk < nb) {
                if (KIND == AQ_GLU) v[i] = cu_glu(v[i], bv[i], gelu);
                if (KIND == AQ_NORM && b) {
                    v[i] = v[i] + bv[i];
                    sum_out[bk * BS + 32 * k + lane] = v[i];
                }
            }
        }
    }
    if (KIND == AQ_NORM) {
        double acc = 0.0;
#pragma unroll
        for (int i = 0; i < NV; i++) acc += (double)(v[i] * v[i]); /* unused slots are 0 */
        const double sum = block_sum_d<NW>(acc, part);
        const float mean = (float)(sum / (double)E);
        const float sc = 1.0f / sqrtf(mean + eps);
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const float t = v[i] * sc;
            v[i] = w ? t * wv[i] : t; /* (x*scale)*w, as ops_ref.c */
        }
    }
#pragma unroll
    for (int j = 0; j < JM; j++) {
        const int64_t bk = wp + (int64_t)NW * j;
        if (bk < nb) {
            if (XQ == CU_T_Q8_1) q8_1_store((blk_q8_1 *)dst + bk, v[j], lane);
            else q8_K_store((blk_q8_K *)dst + bk, &v[j * PER], lane);
        }
    }
}

#endif
