/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/unpack.cuh — one 32-value sub-block of a quantized weight row unpacked to 32
 * signed int8 (8 packed ints, element order) plus its scales, and one activation sub-block of a
 * q8_1 / q8_K row: the operands of the int8 tensor-core GEMM (k_mma.cu).
 * Layer 0 (backend/cuda), device code only. Invariants: the same rules as k_mmvq.cu's dp4a dots
 * (formats.md §2): Q4_0 q-8, Q5_0 q-16, Q8_0 q (d0 = d1 = d); Q4_K/Q5_K q (d0 = d1 = d*sc_j,
 * dm = -dmin*m_j, applied to the activation sum); Q6_K q-32 (d0/d1 = d*scales[2j], d*scales[2j+1]
 * for the two 16-value halves). Offsets stay in the integer domain (exact).
 * Non-goals: types without a dp4a/mma path (they take the f32 GEMV).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_UNPACK_CUH
#define SB_BACKEND_CUDA_DEVICE_UNPACK_CUH

#include "backend/cuda/device/common.cuh"

typedef struct cu_wsub {
    int w[8];
    float d0, d1, dm;
} cu_wsub;

/* expand 4 bits (b0..b3) into bit 4 of 4 bytes */
static __device__ __forceinline__ int cu_bits4_to_b4(uint32_t b) {
    return (int)(((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25));
}

/* sub-block j (32 values) of the row at `row` */
template <int TYPE> static __device__ __forceinline__ void cu_unpack(const uint8_t *row, int j, cu_wsub *o) {
    if (TYPE == CU_T_Q4_0) {
        const blk_q4_0 *b = (const blk_q4_0 *)row + j;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = ld_i32_a2(b->qs + 4 * i);
            o->w[i] = __vsubss4(q & 0x0F0F0F0F, 0x08080808);
            o->w[i + 4] = __vsubss4((q >> 4) & 0x0F0F0F0F, 0x08080808);
        }
        o->d0 = o->d1 = cu_h2f(b->d);
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q5_0) {
        const blk_q5_0 *b = (const blk_q5_0 *)row + j;
        const uint32_t qh = (uint32_t)ld_i32_a2(b->qh);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int q = ld_i32_a2(b->qs + 4 * i);
            o->w[i] = __vsubss4((q & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (4 * i)), 0x10101010);
            o->w[i + 4] = __vsubss4(((q >> 4) & 0x0F0F0F0F) | cu_bits4_to_b4(qh >> (16 + 4 * i)), 0x10101010);
        }
        o->d0 = o->d1 = cu_h2f(b->d);
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q8_0) {
        const blk_q8_0 *b = (const blk_q8_0 *)row + j;
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = ld_i32_a2(b->qs + 4 * i);
        o->d0 = o->d1 = cu_h2f(b->d);
        o->dm = 0.0f;
    } else if (TYPE == CU_T_Q4_K || TYPE == CU_T_Q5_K) {
        const int s = j % 8, sh = 4 * (s % 2);
        int sc, m;
        const uint8_t *scales, *qs;
        uint16_t d, dmin;
        if (TYPE == CU_T_Q4_K) {
            const blk_q4_K *b = (const blk_q4_K *)row + j / 8;
            scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
        } else {
            const blk_q5_K *b = (const blk_q5_K *)row + j / 8;
            scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
        }
        k4_scale_min(s, scales, &sc, &m);
        const int *q = (const int *)(qs + 32 * (s / 2));
#pragma unroll
        for (int i = 0; i < 8; i++) o->w[i] = (q[i] >> sh) & 0x0F0F0F0F;
        if (TYPE == CU_T_Q5_K) {
            const int *qh = (const int *)((const blk_q5_K *)row + j / 8)->qh;
#pragma unroll
            for (int i = 0; i < 8; i++) o->w[i] |= (int)((((unsigned)qh[i] >> s) & 0x01010101u) << 4);
        }
        o->d0 = o->d1 = cu_h2f(d) * (float)sc;
        o->dm = -cu_h2f(dmin) * (float)m;
    } else { /* CU_T_Q6_K */
        const blk_q6_K *b = (const blk_q6_K *)row + j / 8;
        const int s = j % 8, n = s / 4, g = s % 4;
        const uint8_t *ql = b->ql + 64 * n + 32 * (g & 1);
        const uint8_t *qh = b->qh + 32 * n;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int lo = (ld_i32_a2(ql + 4 * i) >> (4 * (g >> 1))) & 0x0F0F0F0F;
            const int hi = (int)((((unsigned)ld_i32_a2(qh + 4 * i) >> (2 * g)) & 0x03030303u) << 4);
            o->w[i] = __vsubss4(lo | hi, 0x20202020);
        }
        const float d = cu_h2f(b->d);
        o->d0 = d * (float)b->scales[2 * s];
        o->d1 = d * (float)b->scales[2 * s + 1];
        o->dm = 0.0f;
    }
}

/* activation sub-block j (32 values) of token row t: its 8 ints and scale */
template <int XQ> static __device__ __forceinline__ const int *cu_act_sub(const uint8_t *x, int64_t K, int64_t t, int j, float *d8) {
    if (XQ == CU_T_Q8_1) {
        const blk_q8_1 *xb = (const blk_q8_1 *)x + t * (K / 32) + j;
        *d8 = cu_h2f(xb->d);
        return (const int *)xb->qs;
    }
    const blk_q8_K *xb = (const blk_q8_K *)x + t * (K / 256) + j / 8;
    *d8 = xb->d;
    return (const int *)(xb->qs + 32 * (j % 8));
}

#endif
