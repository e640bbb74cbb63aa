/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_mmf.cu — matrix x f32 activations for weights without a dp4a path: F32, F16 and
 * BF16 (the float models). F16 / BF16 take device/mmh.cuh's kernels where their shapes allow
 * (k_mmh1: T <= 8, a row over 32..128 lanes, 16-byte weight loads; k_mmh: T > 8, tensor-core
 * tiles of 64 x 64, or of 128 x 128 from T = cu_config.mmh_big on (k_mmh_big: device/mmh_big.cuh);
 * SB_TUNE=mmh=0: k_mmf). F32 weights
 * with f32 activations and T > 8 take device/mmf_tile.cuh's tiled GEMM (k_mmft) from T =
 * cu_config.mmf_tile on (SB_TUNE=mmf_tile=0: k_mmf always). It also reads every quantized type by
 * per-element dequantization (correct, not fast: each element re-derives its block's scale), which
 * the plans no longer ask for: every quantized type has a dp4a GEMV (k_mmvq.cu) since 2026-12-01.
 * k_mmf itself — Math: y[n,t] = sum_k deq(W)[k,n] * x[k,t], f32 accumulation per lane, then a warp sum (x first
 * rounded to F16/BF16 for F16/BF16 weights, round to nearest even, as llama.cpp's CPU does); x is f32
 * or q8_K blocks (dequantized q*d on the fly: the CPU pairs Q2_K/Q3_K/IQ4_XS with Q8_K).
 * Geometry: 128-thread blocks, one warp per output row (grid.x = N/4); lane l takes k = l, l+32,
 * ... (coalesced 4/2-byte loads for float weights); NC = min(T, 8) tokens per pass; grid.y tiles T.
 * Traffic: float weights: N*K*(2|4) bytes once per 8-token tile + x from L1/L2; bandwidth-bound.
 * Tested against: op_matmul (f64 accumulation) in tests/runtime/test_cuda_ops.c and the F32/F16/
 * BF16 and Q4_1/Q5_1/Q2_K/Q3_K/IQ4 test models against llama.cpp's logits.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/gemv_dot.cuh"
#include "backend/cuda/device/mmf_tile.cuh"
#include "backend/cuda/device/mmh.cuh"
#include "backend/cuda/device/mmh_big.cuh"

#include <cuda_bf16.h>

#define MMF_WARPS 4
#define MMF_NC 8

template <int NC>
__global__ void __launch_bounds__(MMF_WARPS * 32) k_mmf(float *dst, const uint8_t *w, int wtype, uint64_t rb, int64_t K, int64_t N,
                                                        const void *xv, int xtype, int64_t T, cu_epilogue ep) {
    CU_PDL_ENTRY();
    const float *x = (const float *)xv;
    const uint64_t xrb = (uint64_t)(K / 256) * sizeof(blk_q8_K); /* q8_K activation row */
    const int lane = threadIdx.x & 31;
    const int64_t n = (int64_t)blockIdx.x * MMF_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    const int64_t t0 = (int64_t)blockIdx.y * NC;
    const int nt = (int)(T - t0 < NC ? T - t0 : NC);
    const uint8_t *row = w + (uint64_t)n * rb;
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    for (int64_t k = lane; k < K; k += 32) {
        float wv;
        if (wtype == CU_T_F32) wv = ((const float *)row)[k];
        else if (wtype == CU_T_F16) wv = cu_h2f(((const uint16_t *)row)[k]);
        else if (wtype == CU_T_BF16) wv = cu_bf2f(((const uint16_t *)row)[k]);
        else wv = cu_deq1(wtype, row, k);
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c < nt) {
                float xe = xtype == CU_T_F32 ? x[(t0 + c) * K + k] : cu_deq1(CU_T_Q8_K, (const uint8_t *)xv + (uint64_t)(t0 + c) * xrb, k);
                /* half weights: the activation rounded to the weight's type first, as llama.cpp's CPU
                 * (and so the references) multiply them; an unrounded BF16 product lands 6e-5 NMSE
                 * away from the qwen2 bf16 reference, the rounded one 1e-6 */
                if (wtype == CU_T_F16) xe = __half2float(__float2half_rn(xe));
                else if (wtype == CU_T_BF16) xe = __bfloat162float(__float2bfloat16_rn(xe));
                acc[c] += wv * xe;
            }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        const float v = warp_sum(acc[c]);
        if (lane == 0 && c < nt) dst[(t0 + c) * N + n] = ep.add ? v + ep.add[ep.bcast ? n : (t0 + c) * N + n] : v;
    }
}

/* F16 / BF16 weights (device/mmh.cuh): T <= 8 a row over 32..128 lanes with 16-byte weight loads ... */
template <int HT, int NC, int TPR>
__global__ void __launch_bounds__(128) k_mmh1(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T, cu_epilogue ep) {
    mmh_gemv_block<HT, NC, TPR>(dst, w, K, N, x, T, ep.add, ep.bcast, blockIdx.x);
}
/* ... and T > 8 in 64 x 64 tiles on tensor cores (sm_80+) */
template <int HT>
__global__ void __launch_bounds__(128) k_mmh(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T, cu_epilogue ep) {
    mmh_tile<HT>(dst, w, K, N, x, T, ep.add, ep.bcast, blockIdx.x, blockIdx.y);
}

/* F32 weights, T > 8: 128 x 64 tiles of exact f32 FFMAs (device/mmf_tile.cuh) */
template <bool V4>
__global__ void __launch_bounds__(128) k_mmft(float *dst, const float *w, int64_t K, int64_t N, const float *x, int64_t T, cu_epilogue ep) {
    mmft_tile<V4>(dst, w, K, N, x, T, ep.add, ep.bcast, blockIdx.x, blockIdx.y);
}

static sb_status launch_mmft(cudaStream_t st, float *dst, const float *w, int64_t K, int64_t N, const float *x, int64_t T, cu_epilogue ep) {
    const dim3 grid(cu_div_up(N, MMFT_BN), cu_div_up(T, MMFT_BT));
    if (K % 4 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)x % 16 == 0) cu_launch(k_mmft<true>, grid, 128, st, dst, w, K, N, x, T, ep);
    else cu_launch(k_mmft<false>, grid, 128, st, dst, w, K, N, x, T, ep);
    return cu_after_launch("k_mmft");
}

/* ... or, from T = cu_config.mmh_big on, in 128 x 128 tiles of 8 warps (device/mmh_big.cuh); two
 * blocks an SM (<= 128 registers: ptxas fits them without spills) */
template <int HT>
__global__ void __launch_bounds__(256, 2) k_mmh_big(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T,
                                                 cu_epilogue ep) {
    mmh_big_tile<HT>(dst, w, K, N, x, T, ep.add, ep.bcast, blockIdx.x, blockIdx.y);
}

static int mmh_cc = -1;

template <int HT>
static sb_status launch_mmh(cudaStream_t st, float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T, cu_epilogue ep) {
    if (T > MMF_NC && cu_cfg()->mmh_big && T >= cu_cfg()->mmh_big) {
        cu_launch(k_mmh_big<HT>, dim3(cu_div_up(N, MMHB_BN), cu_div_up(T, MMHB_BT)), 256, st, dst, w, K, N, x, T, ep);
        return cu_after_launch("k_mmh_big");
    }
    if (T > MMF_NC) {
        cu_launch(k_mmh<HT>, dim3(cu_div_up(N, MMH_BN), cu_div_up(T, MMH_BT)), 128, st, dst, w, K, N, x, T, ep);
        return cu_after_launch("k_mmh");
    }
    const int tpr = mmh_gemv_tpr(K);
    const dim3 grid(cu_div_up(N, 128 / tpr), 1);
    mmh_gemv_pick<HT>(T, tpr, [&](auto s) {
        using S = decltype(s);
        cu_launch(k_mmh1<HT, S::NC, S::TPR>, grid, 128, st, dst, w, K, N, x, T, ep);
    });
    return cu_after_launch("k_mmh1");
}

static uint64_t row_bytes(int type, int64_t K) { /* float rows, or a dp4a type's (every quantized type here) */
    if (type == CU_T_F32) return (uint64_t)K * 4;
    if (type == CU_T_F16 || type == CU_T_BF16) return (uint64_t)K * 2;
    return mmvq_row_bytes(type, K);
}

extern "C" sb_status cu_matmul_f32(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *x, int xtype,
                                   int64_t T, const cu_epilogue *epp) {
    if (T <= 0 || N <= 0) return SB_OK;
    const cu_epilogue ep = epp ? *epp : cu_epilogue{NULL, 0};
    if (xtype != CU_T_F32 && !(xtype == CU_T_Q8_K && K % 256 == 0))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: f32-path matmul with activation type %d (F32 or Q8_K)", xtype);
    const uint64_t rb = row_bytes(wtype, K);
    if (!rb) return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no f32-activation matmul for weight type %d", wtype);
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *wb = (const uint8_t *)w;
    if (mmh_cc < 0) mmh_cc = cu_cc_major();
    /* half weights: 16-byte loads (K % 8), tensor-core tiles (K % 32, sm_80+); x 16-byte aligned */
    if (cu_cfg()->mmh && (wtype == CU_T_F16 || wtype == CU_T_BF16) && xtype == CU_T_F32 && K % 8 == 0 && (uintptr_t)x % 16 == 0 &&
        (uintptr_t)w % 16 == 0 && (T <= MMF_NC || (K % MMH_KS == 0 && mmh_cc >= 8))) {
        if (wtype == CU_T_F16) return launch_mmh<CU_T_F16>(st, dst, wb, K, N, (const float *)x, T, ep);
        return launch_mmh<CU_T_BF16>(st, dst, wb, K, N, (const float *)x, T, ep);
    }
    if (cu_cfg()->mmf_tile && T >= cu_cfg()->mmf_tile && wtype == CU_T_F32 && xtype == CU_T_F32 && T > MMF_NC)
        return launch_mmft(st, dst, (const float *)w, K, N, (const float *)x, T, ep);
    const int nc = T <= 4 ? (int)T : MMF_NC; /* 1..4 exact; larger T in tiles of 8 */
    const dim3 grid(cu_div_up(N, MMF_WARPS), cu_div_up(T, nc));
    const int th = MMF_WARPS * 32;
    switch (nc) {
    case 1: cu_launch(k_mmf<1>, grid, th, st, dst, wb, wtype, rb, K, N, x, xtype, T, ep); break;
    case 2: cu_launch(k_mmf<2>, grid, th, st, dst, wb, wtype, rb, K, N, x, xtype, T, ep); break;
    case 3: cu_launch(k_mmf<3>, grid, th, st, dst, wb, wtype, rb, K, N, x, xtype, T, ep); break;
    case 4: cu_launch(k_mmf<4>, grid, th, st, dst, wb, wtype, rb, K, N, x, xtype, T, ep); break;
    default: cu_launch(k_mmf<8>, grid, th, st, dst, wb, wtype, rb, K, N, x, xtype, T, ep); break;
    }
    return cu_after_launch("k_mmf");
}
