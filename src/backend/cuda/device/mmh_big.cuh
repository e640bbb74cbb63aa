/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/mmh_big.cuh — the half-weight (F16 / BF16) prefill GEMM's big tile, for
 * k_mmf.cu's launcher when cu_config.mmh_big (else device/mmh.cuh's 64 x 64 mmh_tile):
 * dst [T,N] = W x (+ add: [N] bias when bcast, else [T,N]), W [K,N] of 16-bit floats, x [K,T] f32.
 * Math: mmh_tile's — every activation rounded to the weight's type (round to nearest even), products
 * of two 16-bit floats (exact in f32) summed in f32 by mma.sync.m16n8k16; only the order of the sums
 * differs from op_matmul.
 * Geometry: 256 threads (8 warps) own 128 rows x 128 tokens; warp (wr = warp % 2, wt = warp / 2) owns
 * rows 64 wr .. + 63 x tokens 32 wt .. + 31: 4 x 4 m16n8 accumulators; per k16 four ldmatrix.x4 for
 * W's fragments and two for x's feed 16 MMAs. K steps of 32: W in a 3-stage cp.async ring (steps i + 1
 * and i + 2 in flight while step i's MMAs run; the first two before the PDL wait), x by registers
 * (step i + 2's f32 loads in flight, rounded to halves into a 2-buffer ring); one barrier a step.
 * Shared rows are 64 bytes, their 16-byte chunks XOR-swizzled by (row / 2) % 4, so the 8 rows an
 * ldmatrix matrix reads fall in distinct bank groups (40 KB in all, under the 48 KB static limit).
 * Requires K % 32 == 0, W rows and x 16-byte aligned (as mmh_tile); rows past N and tokens past T
 * load zeros and store nothing.
 * Traffic and roofline (an 8B model's FFN up, N 14336, K 4096, T 512, F16): 60 GFLOP; bytes that must
 * move from DRAM 134 MB (W 117 MB once, x 8 MB, dst 29 MB) = 45 us at 3 TB/s vs 61 us of f16 MMA at
 * ~990 TFLOP/s dense (mma.sync reaches ~60-70 % of that on H100): compute-bound. Through L2: W once per
 * 128 tokens, x (as f32) once per 128 rows — half of mmh_tile's. Expected 30-45 % of the f16 peak
 * (~300-450 TFLOP/s), unmeasured. k_mmh_big runs it under __launch_bounds__(256, 2): 126 registers,
 * 2 blocks an SM.
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_mmh_emu
 * (tests/codegen/emu: ldmatrix and the MMA exchange the warp's registers; cp.async a plain copy), so
 * it takes its block coordinates as arguments.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_MMH_BIG_CUH
#define SB_BACKEND_CUDA_DEVICE_MMH_BIG_CUH

#include "backend/cuda/device/mmh.cuh"
#include "backend/cuda/device/split.cuh"

#define MMHB_BN 128 /* rows a block */
#define MMHB_BT 128 /* tokens a block */
#define MMHB_KS 32  /* k a step (MMH_KS: the same K % 32 requirement) */

/* the half index of element (row r, k) in a 32-half staged row: 16-byte chunk k / 8 at chunk
 * (k / 8) ^ ((r / 2) % 4) */
static __device__ __forceinline__ int mmhb_at(int r, int k) { return r * MMHB_KS + ((((k >> 3) ^ (r >> 1)) & 3) << 3) + (k & 7); }

/* the block (bx, by) of the grid (ceil(N / 128), ceil(T / 128)), 256 threads */
template <int HT>
static __device__ __forceinline__ void mmh_big_tile(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T,
                                                    const float *add, int bcast, unsigned bx, unsigned by) {
    __shared__ __align__(128) uint16_t ws[3][MMHB_BN * MMHB_KS];
    __shared__ __align__(128) uint16_t xs[2][MMHB_BT * MMHB_KS];
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wr = wp & 1, wt = wp >> 1;
    const int64_t n0 = (int64_t)bx * MMHB_BN, t0 = (int64_t)by * MMHB_BT;
    const int64_t steps = K / MMHB_KS;
    float acc[4][4][4] = {};
    /* W step s into stage s % 3: chunk u = tid + 256 i is row u / 4, halves 8 (u % 4) .. + 7; one
     * commit group a call (empty past the last step, so the wait counts stay uniform) */
    auto issue_w = [&](int64_t s) {
        if (s < steps) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int u = tid + 256 * i, r = u >> 2, c = u & 3;
                const bool ok = n0 + r < N;
                const uint8_t *src = ok ? w + (uint64_t)(n0 + r) * (uint64_t)(2 * K) + 2 * (s * MMHB_KS + 8 * c) : w;
                cu_cp16(&ws[s % 3][mmhb_at(r, 8 * c)], src, ok);
            }
        }
        cu_cp_commit();
    };
    float4 xreg[4]; /* x of one step: element u = tid + 256 i is token u / 8, 4 floats at 4 (u % 8) */
    auto fetch_x = [&](int64_t s) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 256 * i, tk = u >> 3, q = u & 7;
            xreg[i] = t0 + tk < T ? *(const float4 *)(x + (t0 + tk) * K + s * MMHB_KS + 4 * q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    };
    auto store_x = [&](int b) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 256 * i, tk = u >> 3, q = u & 7;
            *(uint2 *)&xs[b][mmhb_at(tk, 4 * q)] = make_uint2(mmh_pack<HT>(xreg[i].x, xreg[i].y), mmh_pack<HT>(xreg[i].z, xreg[i].w));
        }
    };
    issue_w(0); /* weights: never written by a kernel, so before the wait */
    issue_w(1);
    CU_PDL_ENTRY();
    fetch_x(0);
    store_x(0);
    if (steps > 1) fetch_x(1);
    for (int64_t s = 0; s < steps; s++) {
        cu_cp_wait<1>(); /* this thread's copies of step s landed (step s + 1's may be in flight) */
        __syncthreads(); /* everyone's did, x of step s is stored, and step s - 1's reads are done */
        issue_w(s + 2);  /* into stage (s - 1) % 3, free since that barrier */
        if (s + 1 < steps) store_x((int)((s + 1) & 1)); /* into the buffer step s - 1 read */
        if (s + 2 < steps) fetch_x(s + 2);
        const uint16_t *wsb = ws[s % 3], *xsb = xs[s & 1];
#pragma unroll
        for (int ks = 0; ks < MMHB_KS; ks += 16) {
            uint32_t a[4][4], b[4][2];
            /* A: lanes 0-15 rows 0-15 at k ks, lanes 16-31 the same at ks + 8 (matrices a0..a3) */
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const int r = 64 * wr + 16 * m + (lane & 15);
                cu_ldsm_x4((int *)a[m], &wsb[mmhb_at(r, ks + 8 * (lane >> 4))]);
            }
            /* B: matrices (tokens 0-7, k ks), (0-7, ks + 8), (8-15, ks), (8-15, ks + 8) of a token pair of n8 tiles */
#pragma unroll
            for (int p = 0; p < 2; p++) {
                const int c = 32 * wt + 16 * p + (lane & 7) + 8 * (lane >> 4);
                int r4[4];
                cu_ldsm_x4(r4, &xsb[mmhb_at(c, ks + 8 * ((lane >> 3) & 1))]);
                b[2 * p][0] = (uint32_t)r4[0], b[2 * p][1] = (uint32_t)r4[1];
                b[2 * p + 1][0] = (uint32_t)r4[2], b[2 * p + 1][1] = (uint32_t)r4[3];
            }
#pragma unroll
            for (int m = 0; m < 4; m++)
#pragma unroll
                for (int n = 0; n < 4; n++) MMH_MMA(HT, acc[m][n], a[m], b[n]);
        }
    }
    mmh_store_acc<4>(dst, acc, N, T, n0 + 64 * wr, t0 + 32 * wt, g, t, add, bcast);
}

#endif
