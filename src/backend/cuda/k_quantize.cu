/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_quantize.cu — f32 activations -> 8-bit activation blocks for the dp4a GEMVs,
 * alone or fused behind RMSNorm (x weight) or SiLU/GELU(gate) x up. Two formats:
 *  - q8_1 (formats.md §3.2, CUDA semantics, as llama.cpp's quantize_q8_1), per 32 values: amax
 *    and sum = warp max / warp sum of the unquantized x; d = amax/127; q = amax == 0 ? 0 :
 *    roundf(x/d) (division, ties away from zero); ds = (F16(d), F16(sum)).
 *  - q8_K (formats.md §2.7, the CPU reference quantize_row_q8_K_ref, which llama.cpp's CPU uses for
 *    K-quant weights), per 256 values: max = the signed value of largest |x| (first on ties);
 *    iscale = -127/max; q = min(127, nint(iscale*x)) (round half even); d = 1/iscale (fp32);
 *    bsums[g] = sum of q over 16 values; all zero when max == 0. Used so K-quant models on CUDA
 *    round activations exactly as the references were computed (docs/cuda.md).
 * RMSNorm: sum of squares in double over the row (as ops_ref.c), scale = 1/sqrtf(mean + eps),
 * v = (x*scale)*w. GLU: v = act(g)*u with k_rows.cu's activations.
 * Geometry: one 1024-thread block per row. q8_1: warp w takes 32-blocks w, w+32, ..., lane = element.
 * q8_K: warp w takes 256-blocks w, w+32, ...; lane l holds elements 32k + l (k < 8), so a warp load
 * is one coalesced 128-byte row segment; max/sum by shuffles; half-warp sums give bsums.
 * Traffic: reads 4*E (x; +4E for w or u) per row, writes 36/32*E (q8_1) or 292/256*E (q8_K);
 * bandwidth-bound, one pass.
 * Tested against: the CPU reference of the unfused chain (tests/runtime/test_cuda_ops.c: norm/glu
 * -> quantize -> matmul) and the whole-model tests (K-quant models vs llama.cpp at ~1e-10 needs
 * q8_K to be bit-exact with quantize_row_q8_K_ref).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"

#define Q_THREADS 1024 /* one 32- or 256-value block per warp for rows up to 1024 / 8192 values: no serial rounds */

static __device__ __forceinline__ float silu1q(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float gelu1q(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return __half2float(__float2half_rn(g));
}

// ---- block stores (the whole warp stores one block) ----

/* q8_K: element 32k + lane of the 256-block is v[k] */
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

/* the value source of each kernel: element i of row r */
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

/* quantize row elements [0, E) read through f (indices relative to the row) into dst */
template <int XQ, typename F> static __device__ __forceinline__ void quant_row(void *dst, int64_t E, const F &f) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (XQ == CU_T_Q8_1) {
        for (int64_t b = w; b < E / 32; b += Q_THREADS / 32) q8_1_store((blk_q8_1 *)dst + b, f(b * 32 + lane), lane);
    } else {
        for (int64_t b = w; b < E / 256; b += Q_THREADS / 32) {
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

template <int XQ> __global__ void __launch_bounds__(Q_THREADS) k_quantize(uint8_t *dst, const float *x, int64_t E) {
    CU_PDL_ENTRY();
    const int64_t r = blockIdx.x;
    quant_row<XQ>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, src_plain{x + r * E});
}

/* with b != NULL (executor fusion of the residual add before the norm): the row is x + b, written
 * to sum (which may be x or b: each element is read, then written, by one thread) and read back
 * from there after the barrier for the quantization pass */
template <int XQ>
__global__ void __launch_bounds__(Q_THREADS) k_rms_norm_quant(uint8_t *dst, const float *x, const float *wt, int64_t E, float eps,
                                                              const float *b, float *sum_out) {
    CU_PDL_ENTRY();
    __shared__ double part[Q_THREADS / 32];
    const int64_t r = blockIdx.x;
    const float *xr = x + r * E;
    double acc = 0.0;
    if (b) {
        const float *br = b + r * E;
        float *sr = sum_out + r * E;
        for (int64_t i = threadIdx.x; i < E; i += Q_THREADS) {
            const float v = xr[i] + br[i];
            sr[i] = v;
            acc += (double)(v * v);
        }
        xr = sr;
    } else {
        for (int64_t i = threadIdx.x; i < E; i += Q_THREADS) {
            const float v = xr[i];
            acc += (double)(v * v);
        }
    }
    acc = warp_sum_d(acc);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < Q_THREADS / 32; k++) sum += part[k];
    const float mean = (float)(sum / (double)E);
    const float sc = 1.0f / sqrtf(mean + eps);
    quant_row<XQ>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, src_norm{xr, wt, sc});
}

template <int XQ> __global__ void __launch_bounds__(Q_THREADS) k_glu_quant(uint8_t *dst, const float *g, const float *u, int64_t E, int gelu) {
    CU_PDL_ENTRY();
    const int64_t r = blockIdx.x;
    quant_row<XQ>(dst + act_row_bytes(XQ, E) * (uint64_t)r, E, src_glu{g + r * E, u + r * E, gelu});
}

static sb_status bad_type(int xq) { return sb_fail(SB_ERR_UNSUPPORTED, "cuda: activation type %d (Q8_1 or Q8_K only)", xq); }

extern "C" sb_status cu_quantize_act(cu_stream s, int xq, void *dst, const float *x, int64_t E, int64_t rows) {
    if (rows <= 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    if (xq == CU_T_Q8_1) cu_launch(k_quantize<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, E);
    else if (xq == CU_T_Q8_K) cu_launch(k_quantize<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, E);
    else return bad_type(xq);
    return cu_after_launch("k_quantize");
}

extern "C" sb_status cu_rms_norm_quant(cu_stream s, int xq, void *dst, const float *x, const float *w, int64_t E, int64_t rows, float eps) {
    if (rows <= 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    if (xq == CU_T_Q8_1) cu_launch(k_rms_norm_quant<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, NULL, NULL);
    else if (xq == CU_T_Q8_K) cu_launch(k_rms_norm_quant<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, NULL, NULL);
    else return bad_type(xq);
    return cu_after_launch("k_rms_norm_quant");
}

extern "C" sb_status cu_add_rms_norm_quant(cu_stream s, int xq, void *dst, float *sum_out, const float *x, const float *b, const float *w,
                                           int64_t E, int64_t rows, float eps) {
    if (rows <= 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    if (xq == CU_T_Q8_1) cu_launch(k_rms_norm_quant<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, b, sum_out);
    else if (xq == CU_T_Q8_K) cu_launch(k_rms_norm_quant<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, x, w, E, eps, b, sum_out);
    else return bad_type(xq);
    return cu_after_launch("k_add_rms_norm_quant");
}

extern "C" sb_status cu_glu_quant(cu_stream s, int xq, void *dst, const float *g, const float *u, int64_t E, int64_t rows, bool gelu) {
    if (rows <= 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    if (xq == CU_T_Q8_1) cu_launch(k_glu_quant<CU_T_Q8_1>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, g, u, E, gelu ? 1 : 0);
    else if (xq == CU_T_Q8_K) cu_launch(k_glu_quant<CU_T_Q8_K>, (unsigned)rows, Q_THREADS, st, (uint8_t *)dst, g, u, E, gelu ? 1 : 0);
    else return bad_type(xq);
    return cu_after_launch("k_glu_quant");
}
