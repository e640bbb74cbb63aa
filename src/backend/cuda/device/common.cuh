/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/common.cuh — pure __device__ helpers shared by every hand-written kernel
 * family and by NVRTC-generated code (no host dependencies, no includes beyond quant/blocks.h,
 * weight_layout.cuh and cuda_fp16.h): fp16/bf16 conversion, warp and block reductions, and
 * per-element dequantization of every block format this backend reads.
 * Layer 0 (backend/cuda). Invariants: the dequantizers match quant/*.c's dequantize_row_* bit for
 * bit (the same f32 products in the same order); they exist once, here.
 * Non-goals: vectorized multi-element dequant (the GEMV reads blocks through k_mmvq.cu's dots).
 * References: formats.md §2 (block layouts), quant/blocks.h (structs and bit diagrams).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_COMMON_CUH
#define SB_BACKEND_CUDA_DEVICE_COMMON_CUH

#include "backend/cuda/device/weight_layout.cuh"
#include "quant/blocks.h"

#include <cuda_fp16.h>
#include <stdint.h>

/* type ids (ggml numbering, include/sonicboom.h); repeated here so device code needs no host header */
enum {
    CU_T_F32 = 0, CU_T_F16 = 1, CU_T_Q4_0 = 2, CU_T_Q4_1 = 3, CU_T_Q5_0 = 6, CU_T_Q5_1 = 7, CU_T_Q8_0 = 8,
    CU_T_Q8_1 = 9, CU_T_Q2_K = 10, CU_T_Q8_K = 15, CU_T_Q3_K = 11, CU_T_Q4_K = 12, CU_T_Q5_K = 13, CU_T_Q6_K = 14,
    CU_T_IQ4_NL = 20, CU_T_IQ4_XS = 23, CU_T_BF16 = 30,
};

// ---- conversions ----

static __device__ __forceinline__ float cu_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
static __device__ __forceinline__ uint16_t cu_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
static __device__ __forceinline__ float cu_bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

// ---- reductions ----

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* The block-wide sum of v (each thread's part), every thread of the block calling it and getting the
 * total: warp_sum_d in every warp, lane 0 of warp w < NW storing its partial in part[w], one
 * __syncthreads(), then part[w0], ..., part[w0 + nw - 1] added in that order to 0.0 (by default all
 * NW warps: the whole block). Warps from NW on (a block larger than its summing threads) join the
 * barrier and store nothing. part: NW doubles of shared memory. Barrier contract: exactly one
 * __syncthreads() inside, none after the reads — the caller must pass another barrier before part
 * is written again (a second call with the same part). */
template <int NW>
static __device__ __forceinline__ double block_sum_d(double v, double *part, int w0 = 0, int nw = NW) {
    v = warp_sum_d(v);
    const unsigned w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0 && w < (unsigned)NW) part[w] = v;
    __syncthreads();
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < nw; k++) sum += part[w0 + k];
    return sum;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- activations (ops_ref.c's op_silu1, and ggml's fp16-table GELU: the value rounded to f16 on
// the way in and out; saturated beyond +-10) ----

static __device__ __forceinline__ float cu_silu(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float cu_gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
    return __half2float(__float2half_rn(g));
}
/* a GLU value: act(g) * u, GELU where gelu, else SiLU — one copy for every kernel that computes it
 * (the GLU kernels, the quantizers, the gate/up launches that write it: the same bits) */
static __device__ __forceinline__ float cu_glu(float g, float u, int gelu) { return (gelu ? cu_gelu(g) : cu_silu(g)) * u; }

// ---- activation quantization shared by k_quantize.cu and k_attention.cu (bit-identical) ----

/* q8_1: element `lane` of the 32-block is v (the whole warp calls it) */
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

// ---- programmatic dependent launch (cu_launch.cuh) ----

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CU_PDL_ENTRY() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
/* the two halves, for a kernel that does work between them (loads of data no kernel writes) */
#define CU_PDL_LAUNCH() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define CU_PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define CU_PDL_ENTRY() ((void)0)
#define CU_PDL_LAUNCH() ((void)0)
#define CU_PDL_WAIT() ((void)0)
#endif

/* a kernel's dynamic shared memory, 16-byte aligned (the host emulation's: emu_dsmem, tests/codegen/emu) */
#ifdef SB_CUDA_EMU_H
#define CU_DYN_SMEM(name) unsigned char *name = emu_dsmem
#else
#define CU_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

// ---- KV cache rows ----

/* The cache row holding position (or a paged cache's slot) j >= 0: j itself, or j mod ring in a
 * sliding-window ring cache of `ring` rows (graph/ir.h ir_input_kv_ring; ring 0: a linear cache).
 * Every kernel that writes a cache row or reads a key goes through it (ops_ref.h's op_attn_row on
 * the CPU); masks and RoPE stay on the logical position j. */
static __device__ __forceinline__ int64_t kv_row(int64_t j, int64_t ring) {
    return ring > 0 ? (int64_t)((uint32_t)j % (uint32_t)ring) : j; /* positions and rings fit 31 bits */
}
/* the row of position j + k from r0 = kv_row(j, ring), 0 <= k < ring (keys of one window): a compare
 * where kv_row would divide — a loop over keys takes its first row once */
static __device__ __forceinline__ int64_t kv_row_next(int64_t r0, int k, int64_t ring) {
    const int64_t r = r0 + k;
    return ring > 0 && r >= ring ? r - ring : r;
}
/* the row of position j in a paged cache (the batched engine's pool): row j % bs of block
 * tbl[j / bs] (positions fit 31 bits); as device/attn_paged.cuh's pa_row */
static __device__ __forceinline__ int64_t kv_row_tbl(int64_t j, const int32_t *tbl, int bs) {
    return (int64_t)tbl[(uint32_t)j / (uint32_t)bs] * bs + (int64_t)((uint32_t)j % (uint32_t)bs);
}

// ---- RoPE (k_rope.cu, and Q's rotation inside k_attention.cu: one helper, so both are bit-identical) ----

/* rotate pair i of a head (NORMAL: 2i, 2i+1; NEOX (mode 2): i, i + n_rot/2) at position p; products
 * rounded separately (no contraction), as the CPU reference */
/* rotate the pair (x0, x1) of pair index i at position p */
static __device__ __forceinline__ void rope_rot(float x0, float x1, int i, int32_t p, float theta_scale, float freq_scale, float attn_factor,
                                                const float *ff, float *ya, float *yb) {
    float theta = (float)p;
    for (int k = 0; k < i; k++) theta *= theta_scale;
    const float f = ff ? ff[i] : 1.0f;
    const float th = freq_scale * (theta / f);
    const float cs = cosf(th) * attn_factor, sn = sinf(th) * attn_factor;
    *ya = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    *yb = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
}
/* the dims of rotation pair i (NORMAL: 2i, 2i+1; NEOX (mode 2): i, i + n_rot/2) */
static __device__ __forceinline__ void rope_pair_index(int i, int n_rot, int mode, int *ia, int *ib) {
    *ia = mode == 2 ? i : 2 * i;
    *ib = mode == 2 ? i + n_rot / 2 : 2 * i + 1;
}
static __device__ __forceinline__ void rope_pair(const float *src, int i, int n_rot, int mode, int32_t p, float theta_scale, float freq_scale,
                                                 float attn_factor, const float *ff, int *ia, int *ib, float *ya, float *yb) {
    rope_pair_index(i, n_rot, mode, ia, ib);
    rope_rot(src[*ia], src[*ib], i, p, theta_scale, freq_scale, attn_factor, ff, ya, yb);
}

/* the IQ4 code points (quant/blocks.h's host table, which device code cannot read) */
static __constant__ int8_t cu_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ---- per-element dequantization (row-major: element e of a row starting at `row`; Q3_K / Q6_K
// rows in the device's padded blocks, weight_layout.cuh) ----

static __device__ __forceinline__ void k4_scale_min(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static __device__ __forceinline__ float cu_deq1(int type, const uint8_t *row, int64_t e) {
    switch (type) {
    case CU_T_F32: return ((const float *)row)[e];
    case CU_T_F16: return cu_h2f(((const uint16_t *)row)[e]);
    case CU_T_BF16: return cu_bf2f(((const uint16_t *)row)[e]);
    case CU_T_Q4_0: {
        const blk_q4_0 *b = (const blk_q4_0 *)row + e / 32;
        const int i = (int)(e % 32), q = (b->qs[i % 16] >> (4 * (i / 16))) & 0xF;
        return (float)(q - 8) * cu_h2f(b->d);
    }
    case CU_T_Q4_1: {
        const blk_q4_1 *b = (const blk_q4_1 *)row + e / 32;
        const int i = (int)(e % 32), q = (b->qs[i % 16] >> (4 * (i / 16))) & 0xF;
        return (float)q * cu_h2f(b->d) + cu_h2f(b->m);
    }
    case CU_T_Q5_0: {
        const blk_q5_0 *b = (const blk_q5_0 *)row + e / 32;
        const int i = (int)(e % 32);
        const uint32_t qh = (uint32_t)b->qh[0] | (uint32_t)b->qh[1] << 8 | (uint32_t)b->qh[2] << 16 | (uint32_t)b->qh[3] << 24;
        const int q = ((b->qs[i % 16] >> (4 * (i / 16))) & 0xF) | (int)(((qh >> i) & 1) << 4);
        return (float)(q - 16) * cu_h2f(b->d);
    }
    case CU_T_Q5_1: {
        const blk_q5_1 *b = (const blk_q5_1 *)row + e / 32;
        const int i = (int)(e % 32);
        const uint32_t qh = (uint32_t)b->qh[0] | (uint32_t)b->qh[1] << 8 | (uint32_t)b->qh[2] << 16 | (uint32_t)b->qh[3] << 24;
        const int q = ((b->qs[i % 16] >> (4 * (i / 16))) & 0xF) | (int)(((qh >> i) & 1) << 4);
        return (float)q * cu_h2f(b->d) + cu_h2f(b->m);
    }
    case CU_T_Q8_0: {
        const blk_q8_0 *b = (const blk_q8_0 *)row + e / 32;
        return (float)b->qs[e % 32] * cu_h2f(b->d);
    }
    case CU_T_Q8_1: {
        const blk_q8_1 *b = (const blk_q8_1 *)row + e / 32;
        return (float)b->qs[e % 32] * cu_h2f(b->d);
    }
    case CU_T_Q8_K: {
        const blk_q8_K *b = (const blk_q8_K *)row + e / 256;
        return (float)b->qs[e % 256] * b->d;
    }
    case CU_T_IQ4_NL: {
        const blk_iq4_nl *b = (const blk_iq4_nl *)row + e / 32;
        const int i = (int)(e % 32), q = (b->qs[i % 16] >> (4 * (i / 16))) & 0xF;
        return cu_h2f(b->d) * (float)cu_kvalues_iq4nl[q];
    }
    case CU_T_Q2_K: {
        const blk_q2_K *b = (const blk_q2_K *)row + e / 256;
        const int i = (int)(e % 256), r = i % 128;
        const uint8_t sc = b->scales[i / 16];
        const int q = (b->qs[32 * (i / 128) + r % 32] >> (2 * (r / 32))) & 3;
        const float dl = cu_h2f(b->d) * (float)(sc & 0xF), ml = cu_h2f(b->dmin) * (float)(sc >> 4);
        return dl * (float)q - ml;
    }
    case CU_T_Q3_K: {
        const blk_q3_K *b = (const blk_q3_K *)(row + (uint64_t)(e / 256) * CU_Q3_K_DEV_BYTES);
        const int i = (int)(e % 256), r = i % 128, j = i / 16;
        const int lo = j < 8 ? b->scales[j] & 0xF : b->scales[j - 8] >> 4;
        const int hi = (b->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        const int sc = (lo | hi << 4) - 32;
        const int k = i % 32;
        const int v = ((b->qs[32 * (i / 128) + k] >> (2 * (r / 32))) & 3) - ((b->hmask[k] >> (i / 32)) & 1 ? 0 : 4);
        return (cu_h2f(b->d) * (float)sc) * (float)v;
    }
    case CU_T_Q4_K: {
        const blk_q4_K *b = (const blk_q4_K *)row + e / 256;
        const int i = (int)(e % 256), j = i / 32;
        int sc, m;
        k4_scale_min(j, b->scales, &sc, &m);
        const int q = (b->qs[32 * (i / 64) + i % 32] >> (4 * (j % 2))) & 0xF;
        return (cu_h2f(b->d) * (float)sc) * (float)q - cu_h2f(b->dmin) * (float)m;
    }
    case CU_T_Q5_K: {
        const blk_q5_K *b = (const blk_q5_K *)row + e / 256;
        const int i = (int)(e % 256), j = i / 32;
        int sc, m;
        k4_scale_min(j, b->scales, &sc, &m);
        const int q = ((b->qs[32 * (i / 64) + i % 32] >> (4 * (j % 2))) & 0xF) + 16 * ((b->qh[i % 32] >> j) & 1);
        return (cu_h2f(b->d) * (float)sc) * (float)q - cu_h2f(b->dmin) * (float)m;
    }
    case CU_T_Q6_K: {
        const blk_q6_K *b = (const blk_q6_K *)(row + (uint64_t)(e / 256) * CU_Q6_K_DEV_BYTES);
        const int i = (int)(e % 256), n = i / 128, r = i % 128, g = r / 32, l = r % 32;
        const int lo = (b->ql[64 * n + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0xF;
        const int hi = (b->qh[32 * n + l] >> (2 * g)) & 3;
        return (cu_h2f(b->d) * (float)b->scales[i / 16]) * (float)((lo | hi << 4) - 32);
    }
    case CU_T_IQ4_XS: {
        const blk_iq4_xs *b = (const blk_iq4_xs *)row + e / 256;
        const int i = (int)(e % 256), ib = i / 32, k = i % 32;
        const int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4);
        const int q = (b->qs[16 * ib + k % 16] >> (4 * (k / 16))) & 0xF;
        return (cu_h2f(b->d) * (float)(ls - 32)) * (float)cu_kvalues_iq4nl[q];
    }
    default: return __int_as_float(0x7fc00000); /* refused at plan time; NaN if ever reached */
    }
}

#endif
