/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_mmvq.cu — quantized matrix x q8_1 activations with dp4a (MMVQ-style GEMV; also
 * the first-slice prefill GEMM: token tiles of 8 over grid.y).
 * Math: y[n,t] = sum over 32-element sub-blocks j of W row n:
 *   d8_j,t * (dw0 * dot(w[0..15], qy[0..15]) + dw1 * dot(w[16..31], qy[16..31]) + dm * sum qy),
 * where each weight sub-block is first unpacked to 32 signed int8 (w) in element order:
 *   Q4_0 q-8, Q5_0 q-16, Q8_0 q (dw = d);  Q4_K/Q5_K q (dw = d*sc_j, dm = -dmin*m_j);
 *   Q6_K q-32 (dw0/dw1 = d*scales[2j], d*scales[2j+1]).
 * The offsets are applied in the integer domain (exact), so unlike llama.cpp's MMVQ no term uses
 * the q8_1 sum s (formats.md §3.4); sum qy comes from a dp4a against 0x01010101.
 * Geometry: 128-thread blocks, one warp per output row (4 rows a block, grid.x = N/4), lane l
 * takes sub-blocks l, l+32, ...; NC = 1, 2, 4 or 8 (>= T up to 8) tokens per pass share each
 * unpacked sub-block;
 * grid.y = ceil(T/8) token tiles. Warp reduction by shuffles, lane 0 writes NC outputs.
 * Variant 3 (default for T > 8): a shared-memory tiled GEMM, 64 rows x 32 tokens a block (k_mmq):
 * weight bytes read once per 32 tokens instead of per 8, activations once per 64 rows (H200
 * pp512 13.0k -> 23-25k tok/s); 1 (SB_CUDA_MMQ=1) the token tiles above; 2 four rows per warp
 * sharing each activation load (k_mmvq_rows). T = 1 extras: k_mmvq_long (K > CU_MMVQ_LONG_K: 4
 * warps per row, partial sums in shared memory) and k_mmvq_multi (several matrices over one
 * activation in one launch: Q/K/V, gate/up; each row the very warp code of k_mmvq).
 * Traffic: decode reads the weights once (bytes(W) = N*K*bpw/8) plus N/4 blocks x K*36/32 B of
 * activations (L1/L2-resident), writes 4*N*T. Intensity ~ 2*T FLOP per weight byte x 8/bpw:
 * bandwidth-bound for T <= 8; prefill re-reads W once per 8-token tile (from L2 for per-layer
 * matrices up to ~50 MB) and is dp4a-throughput-bound.
 * Tested against: op_matmul on the dequantized weights and activations (f64 accumulation)
 * in tests/runtime/test_cuda_ops.c, and every quantized test model against llama.cpp's logits.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/device/unpack.cuh"

#include <string.h>

/* Weights are never written by a kernel, so a T = 1 block may pull its rows into L2 before it
 * waits for the previous kernel (PDL): bytes from p, 128 a thread per step (+2.5% tg64, H200). */
static __device__ __forceinline__ void prefetch_rows(const uint8_t *p, uint64_t bytes, int tid, int nth) {
    for (uint64_t o = (uint64_t)tid * 128; o < bytes; o += (uint64_t)nth * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
}

#define MMVQ_WARPS 4
#define MMVQ_NC 8

/* one lane's partial of a T = 1 row dot: sub-blocks j0, j0 + step, ... of W row `row` with
 * activation x (shared by every T = 1 kernel, so fused and single launches are bit-identical) */
template <int TYPE, int XQ>
static __device__ __forceinline__ float mmvq_part(const uint8_t *row, const uint8_t *x, int64_t K, int j0, int step) {
    const int nsb = (int)(K / 32);
    float acc = 0.0f;
    for (int j = j0; j < nsb; j += step) {
        cu_wsub ws;
        cu_unpack<TYPE>(row, j, &ws);
        float d8;
        const int *qy = cu_act_sub<XQ>(x, K, 0, j, &d8);
        int s0 = 0, s1 = 0, sq = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) s0 = __dp4a(ws.w[i], qy[i], s0);
#pragma unroll
        for (int i = 4; i < 8; i++) s1 = __dp4a(ws.w[i], qy[i], s1);
        if (ws.dm != 0.0f) {
#pragma unroll
            for (int i = 0; i < 8; i++) sq = __dp4a(0x01010101, qy[i], sq);
        }
        acc += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + ws.dm * (float)sq);
    }
    return acc;
}

/* two rows' lane partials in one loop (both rows' weight loads in flight together); each row's
 * arithmetic is mmvq_part's, so the sums are the same bits */
template <int TYPE, int XQ>
static __device__ __forceinline__ void mmvq_part2(const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0, int step,
                                                  float *pa, float *pb) {
    const int nsb = (int)(K / 32);
    float acc[2] = {0.0f, 0.0f};
    for (int j = j0; j < nsb; j += step) {
        cu_wsub ws[2];
        cu_unpack<TYPE>(ra, j, &ws[0]);
        cu_unpack<TYPE>(rb, j, &ws[1]);
        float d8;
        const int *qy = cu_act_sub<XQ>(x, K, 0, j, &d8);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int s0 = 0, s1 = 0, sq = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) s0 = __dp4a(ws[r].w[i], qy[i], s0);
#pragma unroll
            for (int i = 4; i < 8; i++) s1 = __dp4a(ws[r].w[i], qy[i], s1);
            if (ws[r].dm != 0.0f) {
#pragma unroll
                for (int i = 0; i < 8; i++) sq = __dp4a(0x01010101, qy[i], sq);
            }
            acc[r] += d8 * (ws[r].d0 * (float)s0 + ws[r].d1 * (float)s1 + ws[r].dm * (float)sq);
        }
    }
    *pa = acc[0], *pb = acc[1];
}

/* one output row at T = 1 by one warp, reduced to every lane */
template <int TYPE, int XQ> static __device__ __forceinline__ float mmvq_row1(const uint8_t *row, const uint8_t *x, int64_t K, int lane) {
    return warp_sum(mmvq_part<TYPE, XQ>(row, x, K, lane, 32));
}

template <int TYPE, int XQ, int NC>
__global__ void __launch_bounds__(MMVQ_WARPS * 32) k_mmvq(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N,
                                                          const uint8_t *x, int64_t T, cu_epilogue ep) {
    if (NC == 1) {
        const int64_t r0 = (int64_t)blockIdx.x * MMVQ_WARPS, r1 = r0 + MMVQ_WARPS < N ? r0 + MMVQ_WARPS : N;
        prefetch_rows(w + (uint64_t)r0 * rb, (uint64_t)(r1 - r0) * rb, threadIdx.x, MMVQ_WARPS * 32);
    }
    CU_PDL_ENTRY();
    const int lane = threadIdx.x & 31;
    const int64_t n = (int64_t)blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    const uint8_t *row = w + (uint64_t)n * rb;
    if (NC == 1) { /* T = 1 (decode) */
        const float v = mmvq_row1<TYPE, XQ>(row, x, K, lane);
        if (lane == 0) dst[n] = ep.add ? v + ep.add[n] : v;
        return;
    }
    const int64_t t0 = (int64_t)blockIdx.y * NC;
    const int nt = (int)(T - t0 < NC ? T - t0 : NC);
    const int nsb = (int)(K / 32);
    float acc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) acc[c] = 0.0f;
    for (int j = lane; j < nsb; j += 32) {
        cu_wsub ws;
        cu_unpack<TYPE>(row, j, &ws);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nt) {
                float d8;
                const int *qy = cu_act_sub<XQ>(x, K, t0 + c, j, &d8);
                int s0 = 0, s1 = 0, sq = 0;
#pragma unroll
                for (int i = 0; i < 4; i++) s0 = __dp4a(ws.w[i], qy[i], s0);
#pragma unroll
                for (int i = 4; i < 8; i++) s1 = __dp4a(ws.w[i], qy[i], s1);
                if (ws.dm != 0.0f) {
#pragma unroll
                    for (int i = 0; i < 8; i++) sq = __dp4a(0x01010101, qy[i], sq);
                }
                acc[c] += d8 * (ws.d0 * (float)s0 + ws.d1 * (float)s1 + ws.dm * (float)sq);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        const float v = warp_sum(acc[c]);
        if (lane == 0 && c < nt) dst[(t0 + c) * N + n] = ep.add ? v + ep.add[ep.bcast ? n : (t0 + c) * N + n] : v;
    }
}

/* T = 1 with a long K (more than MMVQ_LONG sub-blocks, e.g. ffn_down): the block's 4 warps share
 * one row (warp w takes sub-blocks w*32 + lane, stepping 128), partial sums meet in shared memory
 * in warp order — a quarter of the serial memory round trips per row of k_mmvq. The multi-GEMV
 * launch never takes such matrices (exec_cuda plan_groups), so fused == unfused still holds. */
#define MMVQ_LONG (CU_MMVQ_LONG_K / 32)
template <int TYPE, int XQ>
__global__ void __launch_bounds__(MMVQ_WARPS * 32) k_mmvq_long(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N,
                                                               const uint8_t *x, cu_epilogue ep) {
    prefetch_rows(w + (uint64_t)blockIdx.x * rb, rb, threadIdx.x, MMVQ_WARPS * 32);
    CU_PDL_ENTRY();
    __shared__ float part[MMVQ_WARPS];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    const int64_t n = blockIdx.x;
    const uint8_t *row = w + (uint64_t)n * rb;
    float acc = mmvq_part<TYPE, XQ>(row, x, K, threadIdx.x, MMVQ_WARPS * 32);
    acc = warp_sum(acc);
    if (lane == 0) part[wp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < MMVQ_WARPS; k++) v += part[k];
        dst[n] = ep.add ? v + ep.add[n] : v;
    }
}

/* Variant 2 for token tiles (T > 8): each warp owns MMVQ_R consecutive rows and reuses every
 * activation load (8 ints + scale per 32 values per token) for all of them — a quarter of the
 * activation traffic through L1/L2 of variant 1, which re-reads the activations once per row. */
#define MMVQ_R 4
template <int TYPE, int XQ>
__global__ void __launch_bounds__(MMVQ_WARPS * 32) k_mmvq_rows(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N,
                                                               const uint8_t *x, int64_t T, cu_epilogue ep) {
    CU_PDL_ENTRY();
    const int lane = threadIdx.x & 31;
    const int64_t n0 = ((int64_t)blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5)) * MMVQ_R;
    if (n0 >= N) return;
    const int64_t t0 = (int64_t)blockIdx.y * MMVQ_NC;
    const int nt = (int)(T - t0 < MMVQ_NC ? T - t0 : MMVQ_NC);
    const int nsb = (int)(K / 32);
    float acc[MMVQ_R][MMVQ_NC];
#pragma unroll
    for (int r = 0; r < MMVQ_R; r++)
#pragma unroll
        for (int c = 0; c < MMVQ_NC; c++) acc[r][c] = 0.0f;
    for (int j = lane; j < nsb; j += 32) {
        cu_wsub ws[MMVQ_R];
#pragma unroll
        for (int r = 0; r < MMVQ_R; r++) {
            if (n0 + r < N) {
                cu_unpack<TYPE>(w + (uint64_t)(n0 + r) * rb, j, &ws[r]);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) ws[r].w[i] = 0;
                ws[r].d0 = ws[r].d1 = ws[r].dm = 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < MMVQ_NC; c++) {
            if (c < nt) {
                float d8;
                const int *qp = cu_act_sub<XQ>(x, K, t0 + c, j, &d8);
                int qy[8];
#pragma unroll
                for (int i = 0; i < 8; i++) qy[i] = qp[i];
                int sq = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) sq = __dp4a(0x01010101, qy[i], sq);
#pragma unroll
                for (int r = 0; r < MMVQ_R; r++) {
                    int s0 = 0, s1 = 0;
#pragma unroll
                    for (int i = 0; i < 4; i++) s0 = __dp4a(ws[r].w[i], qy[i], s0);
#pragma unroll
                    for (int i = 4; i < 8; i++) s1 = __dp4a(ws[r].w[i], qy[i], s1);
                    acc[r][c] += d8 * (ws[r].d0 * (float)s0 + ws[r].d1 * (float)s1 + ws[r].dm * (float)sq);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < MMVQ_R; r++)
#pragma unroll
        for (int c = 0; c < MMVQ_NC; c++) {
            const float v = warp_sum(acc[r][c]);
            if (lane == 0 && c < nt && n0 + r < N) {
                const int64_t o = (t0 + c) * N + n0 + r;
                dst[o] = ep.add ? v + ep.add[ep.bcast ? n0 + r : o] : v;
            }
        }
}

/* Variant 3 for token tiles (T > 8): a shared-memory tiled dp4a GEMM (MMQ-style). A block owns
 * 64 rows x 32 tokens; per step of 8 sub-blocks (256 values of K) it unpacks the 64 x 8 weight
 * sub-blocks once into shared memory (int8 x 32 + d0/d1/dm each) and the 32 x 8 activation
 * sub-blocks (8 ints, scale, sum of q), then each thread accumulates 4 rows x 2 tokens from shared
 * memory. Each weight byte is read once per 32 tokens and each activation once per 64 rows (vs
 * once per 8 tokens and once per row in variant 1). Row strides are padded to 65 ints so the 16
 * rows a warp touches fall in 16 banks. */
#define MQ_BN 64
#define MQ_BT 32
#define MQ_KB 8
#define MQ_LD (MQ_KB * 8 + 1)
template <int TYPE, int XQ>
__global__ void __launch_bounds__(256) k_mmq(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N, const uint8_t *x,
                                             int64_t T, cu_epilogue ep) {
    CU_PDL_ENTRY();
    __shared__ int ws[MQ_BN][MQ_LD];
    __shared__ float wd[MQ_BN][MQ_KB][3];
    __shared__ int xs[MQ_BT][MQ_LD];
    __shared__ float xd[MQ_BT][MQ_KB];
    __shared__ int xq[MQ_BT][MQ_KB];
    const int tid = threadIdx.x;
    const int64_t n0 = (int64_t)blockIdx.x * MQ_BN, t0 = (int64_t)blockIdx.y * MQ_BT;
    const int nsb = (int)(K / 32);
    const int tr = tid % 16, tt = tid / 16; /* rows tr + 16i (i < 4), tokens tt + 16c (c < 2) */
    float acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = 0.0f;
    for (int j0 = 0; j0 < nsb; j0 += MQ_KB) {
        /* weights: 64 rows x 8 sub-blocks, 2 per thread (8 neighbouring sub-blocks of a row per 8 threads) */
#pragma unroll
        for (int u2 = 0; u2 < 2; u2++) {
            const int u = tid + 256 * u2, r = u / MQ_KB, jj = u % MQ_KB;
            cu_wsub t;
            if (n0 + r < N && j0 + jj < nsb) {
                cu_unpack<TYPE>(w + (uint64_t)(n0 + r) * rb, j0 + jj, &t);
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) t.w[i] = 0;
                t.d0 = t.d1 = t.dm = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) ws[r][jj * 8 + i] = t.w[i];
            wd[r][jj][0] = t.d0, wd[r][jj][1] = t.d1, wd[r][jj][2] = t.dm;
        }
        /* activations: 32 tokens x 8 sub-blocks, one per thread */
        {
            const int t = tid / MQ_KB, jj = tid % MQ_KB;
            if (t0 + t < T && j0 + jj < nsb) {
                float d8;
                const int *qp = cu_act_sub<XQ>(x, K, t0 + t, j0 + jj, &d8);
                int sq = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const int q = qp[i];
                    xs[t][jj * 8 + i] = q;
                    sq = __dp4a(0x01010101, q, sq);
                }
                xd[t][jj] = d8;
                xq[t][jj] = sq;
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) xs[t][jj * 8 + i] = 0;
                xd[t][jj] = 0.0f;
                xq[t][jj] = 0;
            }
        }
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < MQ_KB; jj++) {
            int xv[2][8];
            float d8[2];
            int sq[2];
#pragma unroll
            for (int c = 0; c < 2; c++) {
#pragma unroll
                for (int i = 0; i < 8; i++) xv[c][i] = xs[tt + 16 * c][jj * 8 + i];
                d8[c] = xd[tt + 16 * c][jj];
                sq[c] = xq[tt + 16 * c][jj];
            }
#pragma unroll
            for (int i4 = 0; i4 < 4; i4++) {
                const int r = tr + 16 * i4;
                int wv[8];
#pragma unroll
                for (int i = 0; i < 8; i++) wv[i] = ws[r][jj * 8 + i];
                const float d0 = wd[r][jj][0], d1 = wd[r][jj][1], dm = wd[r][jj][2];
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    int s0 = 0, s1 = 0;
#pragma unroll
                    for (int i = 0; i < 4; i++) s0 = __dp4a(wv[i], xv[c][i], s0);
#pragma unroll
                    for (int i = 4; i < 8; i++) s1 = __dp4a(wv[i], xv[c][i], s1);
                    acc[i4][c] += d8[c] * (d0 * (float)s0 + d1 * (float)s1 + dm * (float)sq[c]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i4 = 0; i4 < 4; i4++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int64_t n = n0 + tr + 16 * i4, t = t0 + tt + 16 * c;
            if (n < N && t < T) {
                const int64_t o = t * N + n;
                dst[o] = ep.add ? acc[i4][c] + ep.add[ep.bcast ? n : o] : acc[i4][c];
            }
        }
}

/* T = 1 GEMVs over one activation in one launch (cu_matmul_q8_multi): Q/K/V, gate/up, or a single
 * matrix. 256-thread blocks of GF_WARPS warps; a row group of WPR warps (1, or 4 for K above
 * CU_MMVQ_LONG_K: warp w of the group takes sub-blocks w*32 + lane stepping 128, partials meet in
 * shared memory in warp order — k_mmvq_long's arithmetic) owns one item at a time; a block owns
 * R items per group (interleaved: item0 + g + r*G), grid.x covers every segment's blocks in order.
 * Items: rows, or for a RoPE segment rotation pairs then unrotated rows (K's rope + cache write).
 * Before waiting for the previous kernel (PDL), each block prefetches its weight rows into L2:
 * weights are never written by a kernel, so this overlaps the previous kernel's tail.
 * Prologue (PRO): GP_NONE reads the q8 activation from global memory; GP_NORM builds it in shared
 * memory from f32 x: rms_norm(x) [* w] (block_rms_scale + quant_row, the very math of
 * k_rms_norm_quant); GP_GLU from act(g) * u (k_glu_quant's). Every block redoes the prologue
 * (K values, L2-resident) instead of a separate kernel and a round trip through global memory. */
enum { GP_NONE = 0, GP_NORM = 1, GP_GLU = 2 };
#define GF_WARPS 8
#define GF_MAXK 8192 /* the largest prologue activation (act_build in registers; 9.2 KB of q8_1 in shared memory) */
typedef struct mseg {
    float *dst;
    const uint8_t *w;
    uint64_t rb;
    int64_t N;
    cu_epilogue ep;
    void *cache;
    int wtype, f16;
    unsigned nb; /* blocks of this segment */
    int rot, rmode, D; /* RoPE before the cache write (rot > 0): items are rotation pairs, then passthrough rows */
    float ts, fs, af;
    const float *ff;
} mseg;
typedef struct mseg_set {
    mseg s[CU_MULTI_MAX];
    int n;
} mseg_set;
typedef struct gpro {
    const float *x, *w, *g, *u;
    float eps;
    int gelu;
} gpro;

/* The fused kernel picks the weight type at run time (segments of mixed types share a launch).
 * Each type's dot is a separate (not inlined) function, so a kernel instance fetches only the code
 * of the types it runs instead of every type's inlined body (instruction-cache footprint). */
template <int TYPE, int XQ>
static __device__ __noinline__ float mmvq_part_call(const uint8_t *row, const uint8_t *x, int64_t K, int j0, int step) {
    return mmvq_part<TYPE, XQ>(row, x, K, j0, step);
}
template <int TYPE, int XQ>
static __device__ __noinline__ void mmvq_part2_call(const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0, int step, float *pa,
                                                    float *pb) {
    mmvq_part2<TYPE, XQ>(ra, rb, x, K, j0, step, pa, pb);
}

template <int XQ>
static __device__ __forceinline__ float mmvq_part_any(int wtype, const uint8_t *row, const uint8_t *x, int64_t K, int j0, int step) {
    switch (wtype) {
    case CU_T_Q4_K: return mmvq_part_call<CU_T_Q4_K, XQ>(row, x, K, j0, step);
    case CU_T_Q5_K: return mmvq_part_call<CU_T_Q5_K, XQ>(row, x, K, j0, step);
    case CU_T_Q6_K: return mmvq_part_call<CU_T_Q6_K, XQ>(row, x, K, j0, step);
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: return mmvq_part_call<CU_T_Q4_0, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q5_0: return mmvq_part_call<CU_T_Q5_0, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q8_0: return mmvq_part_call<CU_T_Q8_0, CU_T_Q8_1>(row, x, K, j0, step);
        default: break;
        }
    }
    return 0.0f; /* unreachable: the launcher checks the types */
}

template <int XQ>
static __device__ __forceinline__ void mmvq_part2_any(int wtype, const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0,
                                                      int step, float *pa, float *pb) {
    switch (wtype) {
    case CU_T_Q4_K: mmvq_part2_call<CU_T_Q4_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q5_K: mmvq_part2_call<CU_T_Q5_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q6_K: mmvq_part2_call<CU_T_Q6_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: mmvq_part2_call<CU_T_Q4_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q5_0: mmvq_part2_call<CU_T_Q5_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q8_0: mmvq_part2_call<CU_T_Q8_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        default: break;
        }
    }
    *pa = *pb = 0.0f; /* unreachable: the launcher checks the types */
}

/* row ra (and rb2 >= 0) of segment g dotted with x by a group of WPR warps; every lane of the group
 * gets the sums. red: GF_WARPS * 2 floats of shared memory (WPR > 1). Called by every thread. */
template <int XQ, int WPR>
static __device__ __forceinline__ void group_dot2(const mseg &g, int64_t ra, int64_t rb2, bool live, const uint8_t *x, int64_t K, float *red,
                                                  float *va, float *vb) {
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, wi = wp % WPR;
    float a = 0.0f, b = 0.0f;
    if (live && rb2 >= 0) {
        mmvq_part2_any<XQ>(g.wtype, g.w + (uint64_t)ra * g.rb, g.w + (uint64_t)rb2 * g.rb, x, K, wi * 32 + lane, WPR * 32, &a, &b);
        a = warp_sum(a);
        b = warp_sum(b);
    } else if (live) {
        a = warp_sum(mmvq_part_any<XQ>(g.wtype, g.w + (uint64_t)ra * g.rb, x, K, wi * 32 + lane, WPR * 32));
    }
    if (WPR > 1) {
        __syncthreads(); /* red is reused by every item */
        if (lane == 0) red[2 * wp] = a, red[2 * wp + 1] = b;
        __syncthreads();
        a = b = 0.0f;
        const int w0 = wp - wi;
#pragma unroll
        for (int k = 0; k < WPR; k++) a += red[2 * (w0 + k)], b += red[2 * (w0 + k) + 1];
    }
    *va = a, *vb = b;
}

static __device__ __forceinline__ void cache_put(const mseg &g, int64_t o, float v) {
    if (g.f16) ((uint16_t *)g.cache)[o] = cu_f2h(v);
    else ((float *)g.cache)[o] = v;
}

/* a plain segment's row n = v: the epilogue add, dst, and the KV cache column when asked */
static __device__ __forceinline__ void plain_out(const mseg &g, int64_t n, float v, const int32_t *pos) {
    v = g.ep.add ? v + g.ep.add[n] : v;
    g.dst[n] = v;
    if (g.cache) cache_put(g, (int64_t)pos[0] * g.N + n, v);
}

/* item n of segment g: compute and write it (the whole group calls it; live = n is real) */
template <int XQ, int WPR>
static __device__ __forceinline__ void mseg_item(const mseg &g, int64_t n, const uint8_t *x, int64_t K, const int32_t *pos, float *red) {
    const bool first = (threadIdx.x & 31) == 0 && (threadIdx.x >> 5) % WPR == 0;
    if (g.rot > 0) { /* item n: a rotation pair of one head, or (after all pairs) a row past n_rot */
        const int half = g.rot / 2;
        const int64_t H = g.N / g.D, np = H * half, nr = H * (g.D - g.rot);
        const bool live = n < np + nr;
        int64_t ra = 0, rb2 = -1;
        int pi = 0;
        if (live && n < np) {
            const int64_t h = n / half;
            pi = (int)(n % half);
            ra = h * g.D + (g.rmode == 2 ? pi : 2 * pi);
            rb2 = h * g.D + (g.rmode == 2 ? pi + half : 2 * pi + 1);
        } else if (live) {
            const int64_t q = n - np, h = q / (g.D - g.rot);
            ra = h * g.D + g.rot + q % (g.D - g.rot);
        }
        float va, vb;
        group_dot2<XQ, WPR>(g, ra, rb2, live, x, K, red, &va, &vb);
        if (live && first) {
            va = g.ep.add ? va + g.ep.add[ra] : va;
            const int64_t o = (int64_t)pos[0] * g.N;
            if (rb2 >= 0) {
                vb = g.ep.add ? vb + g.ep.add[rb2] : vb;
                float ya, yb;
                rope_rot(va, vb, pi, pos[0], g.ts, g.fs, g.af, g.ff, &ya, &yb);
                va = ya, vb = yb;
                cache_put(g, o + rb2, vb);
            }
            cache_put(g, o + ra, va);
        }
        return;
    }
    const bool live = n < g.N;
    float v, unused;
    group_dot2<XQ, WPR>(g, live ? n : 0, -1, live, x, K, red, &v, &unused);
    if (live && first) plain_out(g, n, v, pos);
}

/* items n0 < n1 of a plain (no RoPE) segment at once: both rows' loads in flight together */
template <int XQ, int WPR>
static __device__ __forceinline__ void mseg_item_pair(const mseg &g, int64_t n0, int64_t n1, const uint8_t *x, int64_t K, const int32_t *pos,
                                                      float *red) {
    const bool first = (threadIdx.x & 31) == 0 && (threadIdx.x >> 5) % WPR == 0;
    const bool l0 = n0 < g.N, l1 = n1 < g.N;
    float v0, v1;
    group_dot2<XQ, WPR>(g, l0 ? n0 : 0, l1 ? n1 : -1, l0, x, K, red, &v0, &v1);
    if (first && l0) plain_out(g, n0, v0, pos);
    if (first && l1) plain_out(g, n1, v1, pos);
}


template <int XQ, int PRO, int WPR, int VM, int NW>
__global__ void __launch_bounds__(NW * 32) k_gemv_fused(mseg_set m, const uint8_t *xq, int64_t K, const int32_t *pos, gpro pr, int R,
                                                             int prefetch) {
    __shared__ __align__(16) uint8_t sx[PRO == GP_NONE ? 16 : (XQ == CU_T_Q8_1 ? GF_MAXK / 32 * sizeof(blk_q8_1) : GF_MAXK / 256 * sizeof(blk_q8_K))];
    __shared__ double part[NW];
    __shared__ float red[2 * NW];
    constexpr int G = NW / WPR;
    unsigned b = blockIdx.x;
    int k = 0;
    while (k + 1 < m.n && b >= m.s[k].nb) b -= m.s[k].nb, k++;
    const mseg &g = m.s[k];
    const int64_t item0 = (int64_t)b * G * R;
    if (prefetch && g.rot == 0 && item0 < g.N) { /* this block's rows */
        const int64_t r1 = item0 + (int64_t)G * R < g.N ? item0 + (int64_t)G * R : g.N;
        prefetch_rows(g.w + (uint64_t)item0 * g.rb, (uint64_t)(r1 - item0) * g.rb, threadIdx.x, NW * 32);
    }
    CU_PDL_ENTRY();
    const uint8_t *x = xq;
    if (PRO == GP_NORM) {
        act_build<XQ, NW * 32, AQ_NORM, VM>(sx, K, pr.x, pr.w, pr.eps, NULL, NULL, NULL, NULL, 0, part);
        __syncthreads();
        x = sx;
    } else if (PRO == GP_GLU) {
        act_build<XQ, NW * 32, AQ_GLU, VM>(sx, K, NULL, NULL, 0.0f, NULL, NULL, pr.g, pr.u, pr.gelu, part);
        __syncthreads();
        x = sx;
    }
    const int grp = (threadIdx.x >> 5) / WPR;
    int r = 0;
    if (g.rot == 0) /* two rows at a time */
        for (; r + 1 < R; r += 2) mseg_item_pair<XQ, WPR>(g, item0 + (int64_t)r * G + grp, item0 + (int64_t)(r + 1) * G + grp, x, K, pos, red);
    for (; r < R; r++) mseg_item<XQ, WPR>(g, item0 + (int64_t)r * G + grp, x, K, pos, red);
}

static int mmvq_variant = 3; /* cu_mmvq_set_variant */

template <int TYPE, int XQ>
static sb_status launch_type(cudaStream_t s, float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N, const uint8_t *x,
                             int64_t T, cu_epilogue ep) {
    if (mmvq_variant == 3 && T > MMVQ_NC) {
        const dim3 g3(cu_div_up(N, MQ_BN), cu_div_up(T, MQ_BT));
        cu_launch(k_mmq<TYPE, XQ>, g3, 256, s, dst, w, rb, K, N, x, T, ep);
        return cu_after_launch("k_mmq");
    }
    if (mmvq_variant == 2 && T > MMVQ_NC) {
        const dim3 g2(cu_div_up(N, MMVQ_WARPS * MMVQ_R), cu_div_up(T, MMVQ_NC));
        cu_launch(k_mmvq_rows<TYPE, XQ>, g2, MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, T, ep);
        return cu_after_launch("k_mmvq_rows");
    }
    if (T == 1 && K / 32 > MMVQ_LONG) {
        cu_launch(k_mmvq_long<TYPE, XQ>, dim3((unsigned)N), MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, ep);
        return cu_after_launch("k_mmvq_long");
    }
    /* token counts per pass 1, 2, 4, 8 (each tile skips its missing tokens): half the instantiations */
    const int nc = T <= 1 ? 1 : T <= 2 ? 2 : T <= 4 ? 4 : MMVQ_NC;
    const dim3 grid(cu_div_up(N, MMVQ_WARPS), cu_div_up(T, nc));
    const int th = MMVQ_WARPS * 32;
    switch (nc) {
    case 1: cu_launch(k_mmvq<TYPE, XQ, 1>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    case 2: cu_launch(k_mmvq<TYPE, XQ, 2>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    case 4: cu_launch(k_mmvq<TYPE, XQ, 4>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    default: cu_launch(k_mmvq<TYPE, XQ, 8>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    }
    return cu_after_launch("k_mmvq");
}

static uint64_t row_bytes(int type, int64_t K) {
    switch (type) {
    case CU_T_Q4_0: return (uint64_t)(K / 32) * sizeof(blk_q4_0);
    case CU_T_Q5_0: return (uint64_t)(K / 32) * sizeof(blk_q5_0);
    case CU_T_Q8_0: return (uint64_t)(K / 32) * sizeof(blk_q8_0);
    case CU_T_Q4_K: return (uint64_t)(K / 256) * sizeof(blk_q4_K);
    case CU_T_Q5_K: return (uint64_t)(K / 256) * sizeof(blk_q5_K);
    case CU_T_Q6_K: return (uint64_t)(K / 256) * sizeof(blk_q6_K);
    default: return 0;
    }
}

extern "C" bool cu_has_mmvq(int type) { return row_bytes(type, 256) != 0; }

extern "C" void cu_mmvq_set_variant(int v) { mmvq_variant = v == 1 || v == 2 ? v : 3; }

static int gf_sms = 0; /* multiprocessors (blocks per launch target), read once */
static int gf_bps = 8, gf_rows = 0, gf_prefetch = 1, gf_nw_none = 4;
extern "C" void cu_gemv_set_tuning(int blocks_per_sm, int rows_per_group, int prefetch, int warps_plain) {
    gf_nw_none = warps_plain == 8 ? 8 : 4;
    gf_bps = blocks_per_sm > 0 ? blocks_per_sm : 8;
    gf_rows = rows_per_group > 0 ? rows_per_group : 0;
    gf_prefetch = prefetch ? 1 : 0;
}

/* blocks of kernel k a multiprocessor holds at once (registers, shared memory), read once */
template <typename K> static int gf_occupancy(K k, int threads, int *cache) {
    if (*cache <= 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0) != cudaSuccess || n < 1) n = 1;
        *cache = n;
    }
    return *cache;
}

/* launch k with blocks sized for the items: R items per row group, enough blocks to fill every
 * multiprocessor's resident slots (at most gf_bps each), no more waves than needed */
template <int XQ, int PRO, int WPR, int VM, int NW = GF_WARPS>
static void gf_launch1(cudaStream_t st, mseg_set m, const int64_t *items, const uint8_t *xq, int64_t K, const int32_t *pos, const gpro &pr) {
    static int occ;
    const int res = gf_occupancy(k_gemv_fused<XQ, PRO, WPR, VM, NW>, NW * 32, &occ);
    const int bps = gf_bps < res ? gf_bps : res, G = NW / WPR;
    int64_t total = 0;
    for (int k = 0; k < m.n; k++) total += items[k];
    /* without a prologue a block costs nothing to start: one item per group, the most blocks
     * (k_mmvq's shape; fewer, longer-running blocks measured slower); with one, items per group
     * from the occupancy target, so the prologue is not redone by more blocks than fit */
    int R = PRO == GP_NONE && gf_rows <= 0 ? 1 : gf_rows;
    if (R <= 0) {
        const int64_t per = (int64_t)G * bps * gf_sms;
        R = (int)((total + per - 1) / per);
        if (R < 1) R = 1;
    }
    unsigned blocks = 0;
    for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = cu_div_up(items[k], (int64_t)G * R));
    cu_launch(k_gemv_fused<XQ, PRO, WPR, VM, NW>, blocks, NW * 32, st, m, xq, K, pos, pr, R, gf_prefetch);
}

template <int XQ, int PRO>
static void gf_launch(int wpr, bool small, cudaStream_t st, const mseg_set &m, const int64_t *items, const uint8_t *xq, int64_t K,
                      const int32_t *pos, const gpro &pr) {
    if (PRO == GP_NONE && gf_nw_none == 4) { /* no prologue: 128-thread blocks (k_mmvq's shape) */
        if (wpr == 4) gf_launch1<XQ, PRO, 4, 1, 4>(st, m, items, xq, K, pos, pr);
        else gf_launch1<XQ, PRO, 1, 1, 4>(st, m, items, xq, K, pos, pr);
    } else if (PRO == GP_NONE) {
        if (wpr == 4) gf_launch1<XQ, PRO, 4, 1>(st, m, items, xq, K, pos, pr);
        else gf_launch1<XQ, PRO, 1, 1>(st, m, items, xq, K, pos, pr);
    } else if (small) {
        if (wpr == 4) gf_launch1<XQ, PRO, 4, 8>(st, m, items, xq, K, pos, pr);
        else gf_launch1<XQ, PRO, 1, 8>(st, m, items, xq, K, pos, pr);
    } else {
        if (wpr == 4) gf_launch1<XQ, PRO, 4, AQ_MAXV>(st, m, items, xq, K, pos, pr);
        else gf_launch1<XQ, PRO, 1, AQ_MAXV>(st, m, items, xq, K, pos, pr);
    }
}

extern "C" sb_status cu_matmul_q8_multi(cu_stream s, const cu_gemv_seg *seg, int n, int64_t K, const void *xq, int xtype, const int32_t *pos,
                                        const cu_gemv_pro *pro) {
    if (n < 1 || n > CU_MULTI_MAX) return sb_fail(SB_ERR_INTERNAL, "cuda: %d GEMV segments (1..%d)", n, CU_MULTI_MAX);
    const int pk = pro ? pro->kind : CU_PRO_NONE;
    if (pk != CU_PRO_NONE && !aq_fits(xtype, K, GF_WARPS * 32))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: GEMV prologue over K = %lld (at most %d, whole activation blocks)", (long long)K, GF_MAXK);
    if (pk == CU_PRO_NONE && !xq) return sb_fail(SB_ERR_INTERNAL, "cuda: multi-GEMV without an activation");
    const int wpr = K > CU_MMVQ_LONG_K ? 4 : 1;
    if (!gf_sms) gf_sms = cu_sm_count() > 0 ? cu_sm_count() : 132;
    mseg_set m;
    memset(&m, 0, sizeof m);
    m.n = n;
    int64_t items[CU_MULTI_MAX];
    for (int k = 0; k < n; k++) {
        const int t = seg[k].wtype;
        const bool kq = t == CU_T_Q4_K || t == CU_T_Q5_K || t == CU_T_Q6_K;
        if (!(xtype == CU_T_Q8_1 ? cu_has_mmvq(t) : xtype == CU_T_Q8_K && kq))
            return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no dp4a GEMV for weight type %d x activation type %d", t, xtype);
        if (seg[k].cache && seg[k].ctype != CU_T_F32 && seg[k].ctype != CU_T_F16)
            return sb_fail(SB_ERR_UNSUPPORTED, "cuda: KV cache of type %d (F32 or F16)", seg[k].ctype);
        if (seg[k].rot > 0 && (!seg[k].cache || seg[k].D <= 0 || seg[k].N % seg[k].D || seg[k].rot % 2 || seg[k].rot > seg[k].D))
            return sb_fail(SB_ERR_UNSUPPORTED, "cuda: GEMV segment with RoPE of %d dims over heads of %lld (N %lld)", seg[k].rot,
                           (long long)seg[k].D, (long long)seg[k].N);
        /* a RoPE segment has N/D * (rot/2 + D - rot) items (pairs, then unrotated rows) */
        items[k] = seg[k].rot > 0 ? seg[k].N / seg[k].D * (seg[k].rot / 2 + seg[k].D - seg[k].rot) : seg[k].N;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        const int t = seg[k].wtype;
        total += items[k];
        m.s[k] = mseg{seg[k].dst, (const uint8_t *)seg[k].w, row_bytes(t, K), seg[k].N, seg[k].ep, seg[k].cache, t,
                      seg[k].ctype == CU_T_F16, 0, seg[k].rot, seg[k].rmode, (int)seg[k].D,
                      seg[k].theta_scale, seg[k].freq_scale, seg[k].attn_factor, seg[k].ff};
    }
    if (total == 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *x = (const uint8_t *)xq;
    gpro pr = {NULL, NULL, NULL, NULL, 0.0f, 0};
    if (pk == CU_PRO_NORM) pr = gpro{pro->x, pro->w, NULL, NULL, pro->eps, 0};
    if (pk == CU_PRO_GLU) pr = gpro{NULL, NULL, pro->g, pro->u, 0.0f, pro->gelu ? 1 : 0};
    const bool small = aq_fits(xtype, K, GF_WARPS * 32, 8);
    if (xtype == CU_T_Q8_1) {
        if (pk == CU_PRO_NORM) gf_launch<CU_T_Q8_1, GP_NORM>(wpr, small, st, m, items, x, K, pos, pr);
        else if (pk == CU_PRO_GLU) gf_launch<CU_T_Q8_1, GP_GLU>(wpr, small, st, m, items, x, K, pos, pr);
        else gf_launch<CU_T_Q8_1, GP_NONE>(wpr, small, st, m, items, x, K, pos, pr);
    } else {
        if (pk == CU_PRO_NORM) gf_launch<CU_T_Q8_K, GP_NORM>(wpr, small, st, m, items, x, K, pos, pr);
        else if (pk == CU_PRO_GLU) gf_launch<CU_T_Q8_K, GP_GLU>(wpr, small, st, m, items, x, K, pos, pr);
        else gf_launch<CU_T_Q8_K, GP_NONE>(wpr, small, st, m, items, x, K, pos, pr);
    }
    return cu_after_launch("k_gemv_fused");
}

extern "C" sb_status cu_matmul_q8(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype,
                                  int64_t T, const cu_epilogue *epp) {
    if (T <= 0 || N <= 0) return SB_OK;
    const cu_epilogue ep = epp ? *epp : cu_epilogue{NULL, 0};
    const uint64_t rb = row_bytes(wtype, K);
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *wb = (const uint8_t *)w, *x = (const uint8_t *)xq;
    if (xtype == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: return launch_type<CU_T_Q4_0, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q5_0: return launch_type<CU_T_Q5_0, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q8_0: return launch_type<CU_T_Q8_0, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q4_K: return launch_type<CU_T_Q4_K, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q5_K: return launch_type<CU_T_Q5_K, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q6_K: return launch_type<CU_T_Q6_K, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        default: break;
        }
    } else if (xtype == CU_T_Q8_K) {
        switch (wtype) {
        case CU_T_Q4_K: return launch_type<CU_T_Q4_K, CU_T_Q8_K>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q5_K: return launch_type<CU_T_Q5_K, CU_T_Q8_K>(st, dst, wb, rb, K, N, x, T, ep);
        case CU_T_Q6_K: return launch_type<CU_T_Q6_K, CU_T_Q8_K>(st, dst, wb, rb, K, N, x, T, ep);
        default: break;
        }
    }
    return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no dp4a GEMV for weight type %d x activation type %d", wtype, xtype);
}
