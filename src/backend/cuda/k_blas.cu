/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_blas.cu — large-T GEMMs through cuBLASLt (cu_blaslt.h): y [N,T] = W x (+ a bias or
 * a residual) for F16 / BF16 weights as stored and for every dp4a weight type dequantized to F16
 * in chunks of rows, with x converted f32 -> F16 / BF16 (round to nearest even, as llama.cpp's CPU
 * rounds it for half weights) into scratch by k_blas_x. F32 accumulation and output.
 * Layer 0 (backend/cuda). Dequantization: k_blas_deq, one thread a 32-value sub-block, through
 * device/unpack.cuh's decoders (the int8 GEMM's operands: value = d0|d1 * q + dm|dm1, the
 * dequantizer's own f32 product) rounded to F16 — 2 bytes a weight written once a run, then read
 * by the GEMM. Scratch: cu_blas_scratch_bytes (x's halves, then at most CU_BLAS_CHUNK_BYTES of
 * weight rows). Launches: k_blas_x, then per chunk k_blas_deq (quantized only) + the cuBLASLt
 * GEMM, then k_ew_rows for a bias (cu_blas_launches counts them; cuBLASLt may split its own).
 * Tested against: op_matmul (f64 sums) in tests/runtime/test_cuda_ops.c (test_blas_gemm).
 */
#include "backend/cuda/cu_blaslt.h"
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/gemv_dot.cuh"
#include "backend/cuda/device/unpack.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define BLAS_THREADS 256

/* x [n] f32 -> F16 (BF false) or BF16 bits */
template <bool BF> __global__ void __launch_bounds__(BLAS_THREADS) k_blas_x(uint16_t *dst, const float *x, int64_t n) {
    CU_PDL_ENTRY();
    for (int64_t i = (int64_t)blockIdx.x * BLAS_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * BLAS_THREADS)
        dst[i] = BF ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : cu_f2h(x[i]);
}

/* rows [0, rows) of w (rb bytes each, K values) -> F16 dst [rows, K]: thread = sub-block (row, j) */
template <int TYPE> __global__ void __launch_bounds__(BLAS_THREADS) k_blas_deq(uint16_t *dst, const uint8_t *w, uint64_t rb, int64_t K,
                                                                                int64_t rows) {
    CU_PDL_ENTRY();
    const int64_t subs = K / 32, id = (int64_t)blockIdx.x * BLAS_THREADS + threadIdx.x;
    if (id >= rows * subs) return;
    const int64_t row = id / subs;
    const int j = (int)(id % subs);
    cu_wsub o;
    cu_unpack<TYPE>(w + (uint64_t)row * rb, j, &o);
    uint4 *out = (uint4 *)(dst + row * K + (int64_t)j * 32); /* 64 bytes: K % 32 == 0, dst 16-byte aligned */
#pragma unroll
    for (int q = 0; q < 4; q++) { /* 8 values a store */
        uint32_t h[4];
#pragma unroll
        for (int p = 0; p < 4; p++) {
            uint16_t v2[2];
#pragma unroll
            for (int b = 0; b < 2; b++) {
                const int e = 8 * q + 2 * p + b;
                const int qv = (int)(int8_t)((uint32_t)o.w[e / 4] >> (8 * (e % 4)));
                const float m = TYPE == CU_T_Q2_K && e >= 16 ? o.dm1 : o.dm;
                v2[b] = cu_f2h((e < 16 ? o.d0 : o.d1) * (float)qv + m);
            }
            h[p] = (uint32_t)v2[0] | ((uint32_t)v2[1] << 16);
        }
        out[q] = make_uint4(h[0], h[1], h[2], h[3]);
    }
}

static bool half_type(int t) { return t == CU_T_F16 || t == CU_T_BF16; }

extern "C" bool cu_blas_takes(int wtype) { return half_type(wtype) || cu_dp4a_type(wtype); }

extern "C" bool cu_blas_on(int wtype, int64_t T) {
    const cu_config *c = cu_cfg();
    const int min_t = half_type(wtype) ? c->blas_min_t : c->blas_quant; /* 0: never */
    if (min_t <= 0 || T < min_t || !cu_blas_takes(wtype)) return false;
    return cu_blaslt_available(NULL, 0);
}

/* weight rows a chunk dequantizes at once: all N, or a multiple of 64 within CU_BLAS_CHUNK_BYTES */
static int64_t chunk_rows(int64_t K, int64_t N) {
    int64_t r = (int64_t)(CU_BLAS_CHUNK_BYTES / (2 * (uint64_t)K));
    if (r >= N) return N;
    r = r / 64 * 64;
    return r < 64 ? 64 : r;
}

static uint64_t align256(uint64_t b) { return (b + 255) & ~(uint64_t)255; }

extern "C" uint64_t cu_blas_scratch_bytes(int wtype, int64_t K, int64_t N, int64_t T) {
    const uint64_t xb = align256((uint64_t)T * (uint64_t)K * 2);
    return half_type(wtype) ? xb : xb + align256((uint64_t)chunk_rows(K, N) * (uint64_t)K * 2);
}

extern "C" int cu_blas_launches(int wtype, int64_t K, int64_t N, const cu_epilogue *ep) {
    const int64_t cr = chunk_rows(K, N), chunks = half_type(wtype) ? 1 : (N + cr - 1) / cr;
    return 1 + (int)chunks * (half_type(wtype) ? 1 : 2) + (ep && ep->add && ep->bcast ? 1 : 0);
}

static sb_status launch_deq(cudaStream_t st, uint16_t *dst, const uint8_t *w, int wtype, uint64_t rb, int64_t K, int64_t rows) {
    const dim3 grid(cu_div_up(rows * (K / 32), BLAS_THREADS)), th(BLAS_THREADS);
    switch (wtype) {
#define CU_X(type)                                                    \
    case type: cu_launch(k_blas_deq<type>, grid, th, st, dst, w, rb, K, rows); break;
        CU_MMVQ_K_TYPES(CU_X)
        CU_MMVQ_Q81_TYPES(CU_X)
#undef CU_X
    default: return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no F16 dequantizer for weight type %d", wtype);
    }
    return cu_after_launch("k_blas_deq");
}

extern "C" sb_status cu_matmul_blas(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const float *x, int64_t T,
                                    const cu_epilogue *ep, void *scratch, uint64_t scratch_bytes, void *workspace) {
    cudaStream_t st = (cudaStream_t)s;
    if (!cu_blas_takes(wtype) || (!half_type(wtype) && K % 32))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no cuBLASLt GEMM for weight type %d, K %lld", wtype, (long long)K);
    if (scratch_bytes < cu_blas_scratch_bytes(wtype, K, N, T) || !workspace)
        return sb_fail(SB_ERR_INTERNAL, "cuda: cuBLASLt GEMM given %llu bytes of scratch, needs %llu", (unsigned long long)scratch_bytes,
                       (unsigned long long)cu_blas_scratch_bytes(wtype, K, N, T));
    const int64_t n = T * K;
    uint16_t *xh = (uint16_t *)scratch, *wh = (uint16_t *)((uint8_t *)scratch + align256((uint64_t)n * 2));
    const unsigned grid = (unsigned)(n / BLAS_THREADS + 1 < 65536 ? n / BLAS_THREADS + 1 : 65536);
    if (wtype == CU_T_BF16) cu_launch(k_blas_x<true>, dim3(grid), dim3(BLAS_THREADS), st, xh, x, n);
    else cu_launch(k_blas_x<false>, dim3(grid), dim3(BLAS_THREADS), st, xh, x, n);
    SB_TRY(cu_after_launch("k_blas_x"));
    const float *res = ep && ep->add && !ep->bcast ? ep->add : NULL; /* a residual [N, T]: beta 1 (may be dst) */
    const int htype = wtype == CU_T_BF16 ? SB_TYPE_BF16 : SB_TYPE_F16;
    if (half_type(wtype)) {
        SB_TRY(cu_blaslt_gemm(s, dst, N, w, xh, htype, K, N, T, res, workspace));
    } else {
        const uint64_t rb = mmvq_row_bytes(wtype, K);
        const int64_t cr = chunk_rows(K, N);
        for (int64_t n0 = 0; n0 < N; n0 += cr) {
            const int64_t nc = N - n0 < cr ? N - n0 : cr;
            SB_TRY(launch_deq(st, wh, (const uint8_t *)w + (uint64_t)n0 * rb, wtype, rb, K, nc));
            const sb_status st = cu_blaslt_gemm(s, dst + n0, N, wh, xh, htype, K, nc, T, res ? res + n0 : NULL, workspace);
            if (st == SB_ERR_UNSUPPORTED && n0 > 0) /* rows written already (a residual added): never a silent fallback */
                return sb_fail(SB_ERR_DEVICE, "cuda: cuBLASLt took the first %lld rows of %lld, not the rest", (long long)n0, (long long)N);
            SB_TRY(st);
        }
    }
    if (ep && ep->add && ep->bcast) { /* a bias row over every token */
        cu_ew_chain c = {};
        c.n = 1;
        c.st[0].op = CU_EW_ADD;
        c.st[0].bcast = 1;
        c.st[0].opd = ep->add;
        return cu_ew_rows(s, dst, dst, N, T, &c);
    }
    return SB_OK;
}
