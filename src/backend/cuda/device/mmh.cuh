/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/mmh.cuh — the half-weight (F16 / BF16) matrix products' device code, for
 * k_mmf.cu's launchers: dst [N,T] = W x with W [K,N] of 16-bit floats and x [K,T] f32.
 * Math: the reference's (llama.cpp's CPU): every activation rounded to the weight's type first
 * (round to nearest even), products of two 16-bit floats (exact in f32), f32 sums; only the order
 * of the sums differs from op_matmul.
 * - mmh_gemv_multi (T <= 8, decode): blocks of 4 rows, WPR warps a row, each thread 8 weights (one
 *   16-byte load) a step with U loads in flight, every token of the tile from the same load; one
 *   matrix (k_mmh1), or up to three over one x (a layer's Q/K/V), or a gate / up pair writing the
 *   GLU (k_mmh1_multi); traffic: the weights once (2 bytes a value), x from L1.
 * - mmh_tile (T > 8, prefill): 128 threads own 64 rows x 64 tokens; per K step of 32 the block
 *   stages W (64 x 32 halves) and x rounded to halves (64 x 32) in shared memory (row stride 40
 *   halves: the 8 rows a fragment load touches fall in distinct banks), each warp 32 rows x 32
 *   tokens of mma.sync.m16n8k16 (f32 accumulators); the next step's global loads are in registers
 *   while the current step's MMAs run, and the first weights load before the PDL wait. Traffic:
 *   weights once per 64 tokens, x once per 64 rows (as f32).
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_mmh_emu
 * (tests/codegen/emu: the MMA's fragments exchanged between the warp's fibers), so both functions
 * take their block coordinates as arguments.
 * Non-goals: F32 weights (k_mmf: a TF32 tensor-core product would round the weights).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_MMH_CUH
#define SB_BACKEND_CUDA_DEVICE_MMH_CUH

#include "backend/cuda/device/gemv_dot.cuh"

/* f32 -> bf16 bits, round to nearest even (finite values and infinities; a NaN stays a NaN) —
 * __float2bfloat16_rn's result, without cuda_bf16.h */
static __device__ __forceinline__ uint16_t cu_f2bf(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
/* a value of the weight type HT (CU_T_F16 / CU_T_BF16): to its bits, from its bits */
template <int HT> static __device__ __forceinline__ uint32_t mmh_bits(float f) { return HT == CU_T_F16 ? cu_f2h(f) : cu_f2bf(f); }
template <int HT> static __device__ __forceinline__ float mmh_val(uint32_t b) {
    return HT == CU_T_F16 ? cu_h2f((uint16_t)b) : cu_bf2f((uint16_t)b);
}
/* two f32 activations rounded to HT, packed low | high (an MMA operand register) */
template <int HT> static __device__ __forceinline__ uint32_t mmh_pack(float lo, float hi) { return mmh_bits<HT>(lo) | mmh_bits<HT>(hi) << 16; }

#ifdef SB_CUDA_EMU_H
/* host emulation (tests/codegen/emu/cuda_emu.h) */
#define MMH_MMA(HT, d, a, b) emu_mma_m16n8k16((d), (a), (b), (HT) == CU_T_BF16)
#else
/* d += A (16 x 16, row-major fragments a[4]) x B (16 x 8, column fragments b[2]), f32 accumulators:
 * PTX's m16n8k16 layout — a[0] rows g, k 2t..2t+1; a[1] rows g + 8; a[2], a[3] the same at k + 8;
 * b[0] k 2t..2t+1 of column g, b[1] at k + 8; d[0..1] row g, columns 2t..2t+1, d[2..3] row g + 8
 * (g = lane / 4, t = lane % 4) */
template <int HT> static __device__ __forceinline__ void mmh_mma(float *d, const uint32_t *a, const uint32_t *b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (HT == CU_T_F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#define MMH_MMA(HT, d, a, b) mmh_mma<HT>((d), (a), (b))
#endif

/* ---- T <= 8: WPR warps a row ---- */

/* one 16-byte step of a row (8 weights at k = 8 k8) into acc for the NC tokens (nt live) of x:
 * XS 0: x f32 [K, NC] in global memory, each value rounded to HT here; XS 1: x already rounded,
 * as HT bits [K, NC] in shared memory (mmh_stage_x); XS 2: f32 unrounded (an experiment: not the
 * reference's math) */
template <int HT, int NC, int XS>
static __device__ __forceinline__ void mmh_gemv_step(uint4 wv, const void *x, int64_t K, int64_t k8, int nt, float *acc) {
    const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
    float w[8];
#pragma unroll
    for (int i = 0; i < 4; i++) w[2 * i] = mmh_val<HT>(ww[i] & 0xFFFFu), w[2 * i + 1] = mmh_val<HT>(ww[i] >> 16);
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (c >= nt) continue;
        if (XS == 1) {
            const uint4 xh = *(const uint4 *)((const uint16_t *)x + c * K + 8 * k8);
            const uint32_t xw[4] = {xh.x, xh.y, xh.z, xh.w};
#pragma unroll
            for (int i = 0; i < 4; i++) acc[c] += w[2 * i] * mmh_val<HT>(xw[i] & 0xFFFFu) + w[2 * i + 1] * mmh_val<HT>(xw[i] >> 16);
            continue;
        }
        const float4 *xp = (const float4 *)((const float *)x + c * K + 8 * k8);
        const float4 x0 = xp[0], x1 = xp[1];
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int i = 0; i < 8; i++) acc[c] += w[i] * (XS == 2 ? xv[i] : mmh_val<HT>(mmh_bits<HT>(xv[i])));
    }
}

/* row n's dot with the NC tokens (nt live) of x into acc (partials of this thread; the caller
 * reduces): thread j of the row's S = 32 WPR threads takes the 16-byte steps j, j + S, ... K % 8
 * == 0, rows 16-byte aligned. */
template <int HT, int NC, int S, int XS>
static __device__ __forceinline__ void mmh_gemv_row(const uint8_t *row, const void *x, int64_t K, int nt, int j, float *acc) {
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    const uint4 *wr = (const uint4 *)row;
    for (int64_t k8 = j; k8 < K / 8; k8 += S) mmh_gemv_step<HT, NC, XS>(wr[k8], x, K, k8, nt, acc);
}

/* x's nt token rows (f32 [K]) rounded to HT bits into xs [nt, K] by the block's nth threads (XS 1) */
template <int HT>
static __device__ __forceinline__ void mmh_stage_x(uint16_t *xs, const float *x, int64_t K, int nt, int nth) {
    for (int64_t i = threadIdx.x; i < (int64_t)nt * K; i += nth) xs[i] = (uint16_t)mmh_bits<HT>(x[i]);
    __syncthreads();
}

/* A block's 4 rows (128 WPR threads, WPR warps a row): warp w takes row rows[w / WPR] (NULL: none)
 * and the block's row sums for the nt <= NC tokens land in part[c][r] (r: the block row), summed
 * over the row's warps in warp order. Every thread calls it (it ends at a barrier). */
template <int HT, int NC, int WPR, int XS>
static __device__ __forceinline__ void mmh_rows4(float (&part)[NC][4][WPR], const uint8_t *const (&rows)[4], const void *x, int64_t K, int nt) {
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, ri = wp / WPR, wi = wp % WPR;
    if (rows[ri]) { /* no early return: every warp meets the barrier */
        float acc[NC];
        mmh_gemv_row<HT, NC, 32 * WPR, XS>(rows[ri], x, K, nt, wi * 32 + lane, acc);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float v = warp_sum(acc[c]);
            if (lane == 0 && c < nt) part[c][ri][wi] = v;
        }
    }
    __syncthreads();
}
template <int NC, int WPR> static __device__ __forceinline__ float mmh_part_sum(const float (&part)[NC][4][WPR], int c, int r) {
    float v = 0.0f;
#pragma unroll
    for (int q = 0; q < WPR; q++) v += part[c][r][q];
    return v;
}

/* Several matrices over one x in one launch (a layer's Q, K, V): segment k's rows take nb[k] blocks
 * of 4 in order, each as k_mmh1's block. Or (glu 1 SwiGLU, 2 GeGLU) a gate / up pair of one shape:
 * block b takes gate rows 2b, 2b + 1 and the same rows of up, and writes act(gate) * up (cu_glu's
 * f32 math, the GLU kernel's) into segment 0's dst; segment 1 has none. A token's results leave as
 * one store of consecutive floats (through shared memory): an LM head may write its logits straight
 * into page-locked host memory, where each store is a transfer over PCIe (k_mmvq1 does the same). */
#define MMHV_SEGS 3
struct mmhv_seg {
    const uint8_t *w;
    float *dst;
    const float *add;
    int64_t N;
    int bcast;
    unsigned nb; /* blocks */
};
struct mmhv_set {
    mmhv_seg s[MMHV_SEGS];
    int n, glu;
};

template <int HT, int NC, int WPR, int XS>
static __device__ __forceinline__ void mmh_gemv_multi(const mmhv_set &m, const float *x, int64_t K, int64_t T, unsigned bx, uint16_t *xs) {
    int k = 0;
    while (k + 1 < m.n && bx >= m.s[k].nb) bx -= m.s[k].nb, k++;
    const mmhv_seg &sg = m.s[k];
    const int64_t rb = 2 * K, N = sg.N;
    const int nt = (int)(T < NC ? T : NC);
    __shared__ float part[NC][4][WPR];
    /* the block's rows: 4 of the segment from 4 bx, or (glu) rows 2 bx, 2 bx + 1 of gate (block
     * rows 0, 1) and of up (2, 3) */
    const int64_t r0 = (int64_t)bx * (m.glu ? 2 : 4), nr = (m.glu ? 2 : 4) < N - r0 ? (m.glu ? 2 : 4) : N - r0;
    const uint8_t *const w0 = m.glu ? m.s[0].w : sg.w, *const w1 = m.glu ? m.s[1].w : sg.w + 2 * rb;
    prefetch_rows(w0 + (uint64_t)(r0 * rb), (uint64_t)((m.glu || nr < 2 ? nr : 2) * rb), threadIdx.x, 128 * WPR);
    if (m.glu || nr > 2) prefetch_rows(w1 + (uint64_t)(r0 * rb), (uint64_t)((m.glu ? nr : nr - 2) * rb), threadIdx.x, 128 * WPR);
    CU_PDL_ENTRY();
    const uint8_t *const rows[4] = {w0 + r0 * rb, nr > 1 ? w0 + (r0 + 1) * rb : NULL, (m.glu || nr > 2) ? w1 + r0 * rb : NULL,
                                    (m.glu ? nr > 1 : nr > 3) ? w1 + (r0 + 1) * rb : NULL};
    if (XS == 1) mmh_stage_x<HT>(xs, x, K, nt, 128 * WPR);
    mmh_rows4<HT, NC, WPR, XS>(part, rows, XS == 1 ? (const void *)xs : (const void *)x, K, nt);
    if (m.glu) {
        const int c = threadIdx.x / 2, i = threadIdx.x % 2;
        if (c < nt && i < nr) m.s[0].dst[c * N + r0 + i] = cu_glu(mmh_part_sum(part, c, i), mmh_part_sum(part, c, i + 2), m.glu == 2);
        return;
    }
    const int c = threadIdx.x / 4, i = threadIdx.x % 4;
    if (c < nt && i < nr) {
        const float v = mmh_part_sum(part, c, i);
        sg.dst[c * N + r0 + i] = sg.add ? v + sg.add[sg.bcast ? r0 + i : c * N + r0 + i] : v;
    }
}

/* the block bx of k_mmh1's grid (ceil(N / 4) blocks of 4 rows; by = 0): NC >= T tokens, dst [T,N] =
 * W x + (add: [N] bias when bcast, else [T,N]) — mmh_gemv_multi's block of one segment */
template <int HT, int NC, int WPR, int XS>
static __device__ __forceinline__ void mmh_gemv_block(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T,
                                                      const float *add, int bcast, unsigned bx, uint16_t *xs) {
    mmhv_set m = {};
    m.s[0] = mmhv_seg{w, dst, add, N, bcast, 0xFFFFFFFFu};
    m.n = 1;
    mmh_gemv_multi<HT, NC, WPR, XS>(m, x, K, T, bx, xs);
}

/* ---- T > 8: 64 x 64 tiles on tensor cores ---- */

#define MMH_BN 64
#define MMH_BT 64
#define MMH_KS 32
#define MMH_LD 40 /* halves a staged row: 80 bytes, 20 words (g * 20 + t distinct mod 32) */

/* A warp's M x 4 accumulator tiles (m16n8 C fragments, g = lane >> 2, t = lane & 3) into dst [T, N]:
 * tile (m, n) holds rows row0 + 16m .. +15 and tokens tok0 + 8n .. +7; rows past N and tokens past
 * T are not written; add (bias [N] where bcast, else [T, N]) is added as each value is stored. */
template <int M>
static __device__ __forceinline__ void mmh_store_acc(float *dst, const float (&acc)[M][4][4], int64_t N, int64_t T, int64_t row0, int64_t tok0,
                                                     int g, int t, const float *add, bool bcast) {
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = row0 + 16 * m + g + 8 * (i >> 1), tok = tok0 + 8 * n + 2 * t + (i & 1);
                if (row < N && tok < T) {
                    const int64_t o = tok * N + row;
                    dst[o] = add ? acc[m][n][i] + add[bcast ? row : o] : acc[m][n][i];
                }
            }
}

/* the block (bx, by) of the grid (ceil(N / 64), ceil(T / 64)), 128 threads; w rows are 2K bytes
 * (16-byte aligned: K % 32 == 0), x token rows K floats; dst [T,N] = W x + (add: [N] bias when
 * bcast, else [T,N]) */
template <int HT>
static __device__ __forceinline__ void mmh_tile(float *dst, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t T, const float *add,
                                                int bcast, unsigned bx, unsigned by) {
    __shared__ __align__(16) uint16_t ws[MMH_BN][MMH_LD];
    __shared__ __align__(16) uint16_t xs[MMH_BT][MMH_LD];
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wr = wp & 1, wt = wp >> 1; /* warp: rows 32 wr .., tokens 32 wt .. */
    const int64_t n0 = (int64_t)bx * MMH_BN, t0 = (int64_t)by * MMH_BT;
    float acc[2][4][4] = {};
    uint4 wreg[2];  /* this thread's next weights: rows u / 4, 8 halves at 8 (u % 4), u = tid + 128 i */
    float4 xreg[4]; /* and activations: tokens u / 8, 4 floats at 4 (u % 8) */
    auto fetch_w = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, r = u >> 2, q = u & 3;
            wreg[i] = n0 + r < N ? *(const uint4 *)(w + (uint64_t)(n0 + r) * (uint64_t)(2 * K) + 2 * (k0 + 8 * q)) : make_uint4(0, 0, 0, 0);
        }
    };
    auto fetch_x = [&](int64_t k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i, tk = u >> 3, q = u & 7;
            xreg[i] = t0 + tk < T ? *(const float4 *)(x + (t0 + tk) * K + k0 + 4 * q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    };
    auto store = [&]() {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int u = tid + 128 * i, r = u >> 2, q = u & 3;
            *(uint4 *)&ws[r][8 * q] = wreg[i];
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = tid + 128 * i, tk = u >> 3, q = u & 7;
            *(uint2 *)&xs[tk][4 * q] = make_uint2(mmh_pack<HT>(xreg[i].x, xreg[i].y), mmh_pack<HT>(xreg[i].z, xreg[i].w));
        }
    };
    fetch_w(0); /* weights: never written by a kernel, so before the wait */
    CU_PDL_ENTRY();
    fetch_x(0);
    store();
    __syncthreads();
    for (int64_t k0 = 0; k0 < K; k0 += MMH_KS) {
        const bool more = k0 + MMH_KS < K;
        if (more) fetch_w(k0 + MMH_KS), fetch_x(k0 + MMH_KS);
#pragma unroll
        for (int ks = 0; ks < MMH_KS; ks += 16) {
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                const int r = 32 * wr + 16 * m + g;
                a[m][0] = *(const uint32_t *)&ws[r][ks + 2 * t];
                a[m][1] = *(const uint32_t *)&ws[r + 8][ks + 2 * t];
                a[m][2] = *(const uint32_t *)&ws[r][ks + 2 * t + 8];
                a[m][3] = *(const uint32_t *)&ws[r + 8][ks + 2 * t + 8];
            }
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const int c = 32 * wt + 8 * n + g;
                b[n][0] = *(const uint32_t *)&xs[c][ks + 2 * t];
                b[n][1] = *(const uint32_t *)&xs[c][ks + 2 * t + 8];
            }
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int n = 0; n < 4; n++) MMH_MMA(HT, acc[m][n], a[m], b[n]);
        }
        __syncthreads();
        if (more) {
            store();
            __syncthreads();
        }
    }
    mmh_store_acc<2>(dst, acc, N, T, n0 + 32 * wr, t0 + 32 * wt, g, t, add, bcast);
}

#endif
