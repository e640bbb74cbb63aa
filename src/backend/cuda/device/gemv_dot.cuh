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

#include "backend/cuda/device/gemv_unit.cuh"

/* Weights are never written by a kernel, so a T = 1 block may pull its rows into L2 before it
 * waits for the previous kernel (PDL): bytes from p, 128 a thread per step (+2.5% tg64, H200). */
static __device__ __forceinline__ void prefetch_rows(const uint8_t *p, uint64_t bytes, int tid, int nth) {
#ifdef __CUDA_ARCH__ /* (a no-op in host emulation: tests/codegen/emu) */
    for (uint64_t o = (uint64_t)tid * 128; o < bytes; o += (uint64_t)nth * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#endif
}


/* lane partials of T = 1 row dots, R rows at once: sub-blocks j0, j0 + step, ... of rows[0..n)
 * (n <= R live rows; the others untouched) with activation x, every row's weight loads of a step
 * in flight together. Each row's arithmetic is the same unit order through gv_acc (gemv_unit.cuh)
 * whatever R is, so every T = 1 kernel (one row, two, an LM head's R) gives the same bits. */
template <int TYPE, int XQ, int R>
static __device__ __forceinline__ void mmvq_part_rows(const uint8_t *const *rows, int n, const uint8_t *x, int64_t K, int j0, int step,
                                                      float *acc) {
    const int nsb = (int)(K / 32);
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    for (int j = j0; j < nsb; j += step) {
        cu_wsub ws[R];
        uint32_t sc[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < n) gv_unpack<TYPE, XQ>(rows[r], j, &ws[r], &sc[r]);
        int qy[8];
        uint32_t d8r;
        gv_act_raw<TYPE, XQ>(x, K, j, qy, &d8r);
        const float d8 = cu_act_d<XQ>(d8r);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (r < n) gv_acc<TYPE, XQ>(&acc[r], ws[r], sc[r], qy, d8);
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

/* device bytes of one K-value row of a dp4a weight type (0: no dp4a path): Q3_K / Q6_K rows in
 * the device's padded blocks (weight_layout.cuh) */
static __host__ __device__ __forceinline__ uint64_t mmvq_row_bytes(int type, int64_t K) {
    switch (type) {
    case CU_T_Q4_0: return (uint64_t)(K / 32) * sizeof(blk_q4_0);
    case CU_T_Q4_1: return (uint64_t)(K / 32) * sizeof(blk_q4_1);
    case CU_T_Q5_0: return (uint64_t)(K / 32) * sizeof(blk_q5_0);
    case CU_T_Q5_1: return (uint64_t)(K / 32) * sizeof(blk_q5_1);
    case CU_T_Q8_0: return (uint64_t)(K / 32) * sizeof(blk_q8_0);
    case CU_T_IQ4_NL: return (uint64_t)(K / 32) * sizeof(blk_iq4_nl);
    case CU_T_Q2_K: return (uint64_t)(K / 256) * sizeof(blk_q2_K);
    case CU_T_Q3_K: return (uint64_t)(K / 256) * CU_Q3_K_DEV_BYTES;
    case CU_T_Q4_K: return (uint64_t)(K / 256) * sizeof(blk_q4_K);
    case CU_T_Q5_K: return (uint64_t)(K / 256) * sizeof(blk_q5_K);
    case CU_T_Q6_K: return (uint64_t)(K / 256) * CU_Q6_K_DEV_BYTES;
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
