/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/gemv_dot.cuh — the T = 1 quantized row dot shared by k_mmvq.cu (one matrix)
 * and k_gemv.cu (several matrices): one lane's dp4a partial over sub-blocks
 * j0, j0 + step, ... (one row, or two rows with both rows' loads in flight), the row size of each
 * dp4a weight type, and the L2 prefetch of weight rows a block may issue before its PDL wait.
 * Layer 0 (backend/cuda), device code (+ one host helper). Invariant: every T = 1 kernel sums a
 * row through mmvq_part / mmvq_part2 in the same order, so fused and single launches give the
 * same bits. Math: k_mmvq.cu's header comment.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_GEMV_DOT_CUH
#define SB_BACKEND_CUDA_DEVICE_GEMV_DOT_CUH

#include "backend/cuda/device/unpack.cuh"

/* Weights are never written by a kernel, so a T = 1 block may pull its rows into L2 before it
 * waits for the previous kernel (PDL): bytes from p, 128 a thread per step (+2.5% tg64, H200). */
static __device__ __forceinline__ void prefetch_rows(const uint8_t *p, uint64_t bytes, int tid, int nth) {
#ifdef __CUDA_ARCH__ /* (a no-op in host emulation: tests/codegen/emu) */
    for (uint64_t o = (uint64_t)tid * 128; o < bytes; o += (uint64_t)nth * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#endif
}

/* acc += one sub-block's dot: d8 * (d0*s0 + d1*s1 + dm*sum q), the min term only for types that
 * have one; Q2_K's two halves' mins: dm * sum q[0..15] + dm1 * sum q[16..31] (every T = 1 kernel
 * and k_mmvq's token tiles step through here: the same bits). The min terms use the exact integer
 * sum of the activation, not the q8_1 sum field: llama.cpp's CPU dots (so the reference logits) use
 * s = F16(d * sum q) for Q4_1 / Q5_1, which the CUDA quantizer does not store (s = F16(sum x),
 * formats.md §3.2) and d8 (d rounded to f16) cannot rebuild (F16(d8 * sum q) was tried: d8's own
 * rounding is of the size of s's, so it lands as far from the reference's s as the exact term). The first H200 run, with
 * q8_1 activations for these types, measured 7.5-7.7e-4 NMSE from their references (limit 1e-3;
 * docs/cuda.md) */
template <int TYPE> static __device__ __forceinline__ void mmvq_sub_acc(float *acc, const cu_wsub &ws, const int *qy, float d8) {
    int s0, s1, sq = 0;
    cu_dp4a_halves(ws.w, qy, &s0, &s1);
    if (TYPE == CU_T_Q2_K) {
        const int h0 = cu_dp4a_sum16(qy), h1 = cu_dp4a_sum16(qy + 4);
        *acc += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + (ws.dm * (float)h0 + ws.dm1 * (float)h1));
        return;
    }
    if (ws.dm != 0.0f) sq = cu_dp4a_sum(qy);
    *acc += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + ws.dm * (float)sq);
}

/* lane partials of T = 1 row dots, R rows at once: sub-blocks j0, j0 + step, ... of rows[0..n)
 * (n <= R live rows; the others untouched) with activation x, every row's weight loads of a step
 * in flight together. Each row's arithmetic is the same sub-block order through mmvq_sub_acc
 * whatever R is, so every T = 1 kernel (one row, two, an LM head's R) gives the same bits. */
template <int TYPE, int XQ, int R>
static __device__ __forceinline__ void mmvq_part_rows(const uint8_t *const *rows, int n, const uint8_t *x, int64_t K, int j0, int step,
                                                      float *acc) {
    const int nsb = (int)(K / 32);
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    for (int j = j0; j < nsb; j += step) {
        cu_wsub ws[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < n) cu_unpack<TYPE>(rows[r], j, &ws[r]);
        float d8;
        const int *qy = cu_act_sub<XQ>(x, K, 0, j, &d8);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < n) mmvq_sub_acc<TYPE>(&acc[r], ws[r], qy, d8);
    }
}

/* one lane's partial of one row (mmvq_part_rows with R = 1) */
template <int TYPE, int XQ>
static __device__ __forceinline__ float mmvq_part(const uint8_t *row, const uint8_t *x, int64_t K, int j0, int step) {
    float acc;
    mmvq_part_rows<TYPE, XQ, 1>(&row, 1, x, K, j0, step, &acc);
    return acc;
}

/* two rows' lane partials, both rows' weight loads in flight together (R = 2) */
template <int TYPE, int XQ>
static __device__ __forceinline__ void mmvq_part2(const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0, int step,
                                                  float *pa, float *pb) {
    const uint8_t *rows[2] = {ra, rb};
    float acc[2];
    mmvq_part_rows<TYPE, XQ, 2>(rows, 2, x, K, j0, step, acc);
    *pa = acc[0], *pb = acc[1];
}

/* bytes of one K-value row of a dp4a weight type (0: no dp4a path) */
static __host__ __device__ __forceinline__ uint64_t mmvq_row_bytes(int type, int64_t K) {
    switch (type) {
    case CU_T_Q4_0: return (uint64_t)(K / 32) * sizeof(blk_q4_0);
    case CU_T_Q4_1: return (uint64_t)(K / 32) * sizeof(blk_q4_1);
    case CU_T_Q5_0: return (uint64_t)(K / 32) * sizeof(blk_q5_0);
    case CU_T_Q5_1: return (uint64_t)(K / 32) * sizeof(blk_q5_1);
    case CU_T_Q8_0: return (uint64_t)(K / 32) * sizeof(blk_q8_0);
    case CU_T_IQ4_NL: return (uint64_t)(K / 32) * sizeof(blk_iq4_nl);
    case CU_T_Q2_K: return (uint64_t)(K / 256) * sizeof(blk_q2_K);
    case CU_T_Q3_K: return (uint64_t)(K / 256) * sizeof(blk_q3_K);
    case CU_T_Q4_K: return (uint64_t)(K / 256) * sizeof(blk_q4_K);
    case CU_T_Q5_K: return (uint64_t)(K / 256) * sizeof(blk_q5_K);
    case CU_T_Q6_K: return (uint64_t)(K / 256) * sizeof(blk_q6_K);
    case CU_T_IQ4_XS: return (uint64_t)(K / 256) * sizeof(blk_iq4_xs);
    default: return 0;
    }
}

/* a type of CU_MMVQ_K_TYPES (unpack.cuh): q8_K activations too */
static __host__ __device__ __forceinline__ bool mmvq_k_type(int type) {
#define CU_X(t) type == t ||
    return CU_MMVQ_K_TYPES(CU_X) false;
#undef CU_X
}

#endif
