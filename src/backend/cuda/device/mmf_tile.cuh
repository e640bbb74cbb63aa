/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/mmf_tile.cuh — the F32-weight GEMM for T > 8 (prefill), for k_mmf.cu's
 * launcher: dst [T,N] = W x (+ add: [N] bias when bcast, else [T,N]), W [K,N] f32 (row n: K floats),
 * x [K,T] f32 (token t: K floats).
 * Math: exact f32 products fused into f32 sums (FFMA, as k_mmf; no TF32: the F32 models are the
 * precision reference), k ascending per output; only the order of the sums differs from op_matmul.
 * Geometry: a block of 128 threads owns 128 rows x 64 tokens; per K step of 16 it stages W (128 x 16)
 * and x (64 x 16) transposed in shared memory (k-major: ws[k][row], xs[k][token], double-buffered,
 * one barrier a step); thread (tn = lane % 16, tt = lane / 16 + 2 warp) owns rows 4 tn .. + 3 and
 * 64 + 4 tn .. + 3, tokens 4 tt .. + 3 and 32 + 4 tt .. + 3: 8 x 8 accumulators, per k two float4
 * reads of W and two of x (16 distinct float4 a warp for W, 2 for x: no bank conflicts) for 64 FFMAs.
 * The next step's global loads are in registers while the current step's FFMAs run; the first
 * weights load before the PDL wait. V4 (K % 4 == 0, W and x 16-byte aligned): float4 loads; else
 * scalar loads, each k checked against K. Rows past N and tokens past T load zeros, store nothing.
 * Traffic and roofline (gemma4-e4b's per-layer projection, N 10752, K 2560, T 512): 28.2 GFLOP;
 * bytes that must move from DRAM 137 MB (W 110 MB once, x 5 MB, dst 22 MB) = 46 us at 3 TB/s, vs
 * 0.42 ms of FFMA at H100's 67 TFLOP/s: compute-bound. Through L2: W once per 64 tokens (880 MB), x
 * once per 128 rows (440 MB). Expected 40-60 % of the FP32 peak (27-40 TFLOP/s), unmeasured.
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_mmf_emu
 * (tests/codegen/emu), so it takes its block coordinates as arguments.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_MMF_TILE_CUH
#define SB_BACKEND_CUDA_DEVICE_MMF_TILE_CUH

#include "backend/cuda/device/gemv_dot.cuh"

#define MMFT_BN 128 /* rows a block */
#define MMFT_BT 64  /* tokens a block */
#define MMFT_KS 16  /* k a step */
#define MMFT_LW 132 /* floats a staged k row of W (16-byte aligned rows; the transposing stores 2-way conflicted) */
#define MMFT_LX 68  /* ... of x */

/* the block (bx, by) of the grid (ceil(N / 128), ceil(T / 64)), 128 threads */
template <bool V4>
static __device__ __forceinline__ void mmft_tile(float *dst, const float *w, int64_t K, int64_t N, const float *x, int64_t T,
                                                 const float *add, int bcast, unsigned bx, unsigned by) {
    __shared__ __align__(16) float ws[2][MMFT_KS][MMFT_LW];
    __shared__ __align__(16) float xs[2][MMFT_KS][MMFT_LX];
    const int tid = threadIdx.x, lane = tid & 31, tn = lane & 15, tt = (lane >> 4) + 2 * (tid >> 5);
    const int64_t n0 = (int64_t)bx * MMFT_BN, t0 = (int64_t)by * MMFT_BT;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    /* this thread's next loads: element u = tid + 128 i of a tile is row (token) u / 4, k 4 (u % 4) .. + 3 */
    float4 wreg[4], xreg[2];
    auto load4 = [&](const float *src, int64_t rows, int64_t r, int64_t k) -> float4 {
        if (r >= rows) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const float *p = src + r * K + k;
        if (V4) return k < K ? *(const float4 *)p : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        return make_float4(k < K ? p[0] : 0.0f, k + 1 < K ? p[1] : 0.0f, k + 2 < K ? p[2] : 0.0f, k + 3 < K ? p[3] : 0.0f);
    };
    auto fetch_w = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i;
            wreg[i] = load4(w, N, n0 + (u >> 2), k0 + 4 * (u & 3));
        }
    };
    auto fetch_x = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i;
            xreg[i] = load4(x, T, t0 + (u >> 2), k0 + 4 * (u & 3));
        }
    };
    auto store = [&](int b) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i, r = u >> 2, k = 4 * (u & 3);
            ws[b][k][r] = wreg[i].x, ws[b][k + 1][r] = wreg[i].y, ws[b][k + 2][r] = wreg[i].z, ws[b][k + 3][r] = wreg[i].w;
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, c = u >> 2, k = 4 * (u & 3);
            xs[b][k][c] = xreg[i].x, xs[b][k + 1][c] = xreg[i].y, xs[b][k + 2][c] = xreg[i].z, xs[b][k + 3][c] = xreg[i].w;
        }
    };
    fetch_w(0); /* weights: never written by a kernel, so before the wait */
    CU_PDL_ENTRY();
    fetch_x(0);
    store(0);
    __syncthreads();
    int b = 0;
    for (int64_t k0 = 0; k0 < K; k0 += MMFT_KS, b ^= 1) {
        const bool more = k0 + MMFT_KS < K;
        if (more) fetch_w(k0 + MMFT_KS), fetch_x(k0 + MMFT_KS);
#pragma unroll
        for (int k = 0; k < MMFT_KS; k++) {
            const float4 a0 = *(const float4 *)&ws[b][k][4 * tn], a1 = *(const float4 *)&ws[b][k][64 + 4 * tn];
            const float4 b0 = *(const float4 *)&xs[b][k][4 * tt], b1 = *(const float4 *)&xs[b][k][32 + 4 * tt];
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        /* buffer b ^ 1 was last read before the previous step's barrier; this step's barrier keeps
         * the next step's reads of it after these stores, and this step's reads of b before the
         * next step's stores into b */
        if (more) store(b ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t tok = t0 + (j < 4 ? 4 * tt + j : 32 + 4 * tt + j - 4);
        if (tok >= T) continue;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int64_t row = n0 + (i < 4 ? 4 * tn + i : 64 + 4 * tn + i - 4);
            if (row < N) {
                const int64_t o = tok * N + row;
                dst[o] = add ? acc[i][j] + add[bcast ? row : o] : acc[i][j];
            }
        }
    }
}

#endif
