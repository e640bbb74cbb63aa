/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_mmvq.cu — quantized matrix x q8_1 activations with dp4a (MMVQ-style GEMV; also
 * the first-slice prefill GEMM: token tiles of 8 over grid.y).
 * Math: y[n,t] = sum over 32-element sub-blocks j of W row n:
 *   d8_j,t * (dw0 * dot(w[0..15], qy[0..15]) + dw1 * dot(w[16..31], qy[16..31]) + dm * sum qy),
 * where each weight sub-block is first unpacked to 32 signed int8 (w) in element order
 * (device/unpack.cuh, every quantized weight type of the runtime):
 *   Q4_0 q-8, Q5_0 q-16, Q8_0 q (dw = d);  Q4_1/Q5_1 q (dw = d, dm = m);  IQ4_NL/IQ4_XS the code
 *   point (dw = d, d*(ls-32));  Q4_K/Q5_K q (dw = d*sc_j, dm = -dmin*m_j);  Q6_K q-32, Q3_K
 *   q-4*(1-hbit) (dw0/dw1 per 16-value half);  Q2_K q (dw0/dw1 and a min per half, dm/dm1).
 * The offsets are applied in the integer domain (exact), so unlike llama.cpp's MMVQ no term uses
 * the q8_1 sum s (formats.md §3.4); sum qy comes from a dp4a against 0x01010101.
 * Geometry: 128-thread blocks, one warp per output row (4 rows a block, grid.x = N/4), lane l
 * takes sub-blocks l, l+32, ...; NC = 2, 4 or 8 (>= T up to 8) tokens per pass share each
 * unpacked sub-block (T = 1: k_mmvq1, one row a warp or R over many rows);
 * grid.y = ceil(T/8) token tiles. Warp reduction by shuffles, lane 0 writes NC outputs.
 * Variant 3 (default for T > 8): a shared-memory tiled GEMM, 64 rows x 32 tokens a block (k_mmq):
 * weight bytes read once per 32 tokens instead of per 8, activations once per 64 rows (H200
 * pp512 13.0k -> 23-25k tok/s); 1 (SB_TUNE=mmq=1) the token tiles above; 2 four rows per warp
 * sharing each activation load (k_mmvq_rows). T = 1 extras: k_mmvq_long (K > CU_MMVQ_LONG_K: 4
 * warps per row, partial sums in shared memory); several matrices over one activation in one
 * launch are k_gemv.cu's (the same row dots: device/gemv_dot.cuh).
 * Traffic: decode reads the weights once (bytes(W) = N*K*bpw/8) plus N/4 blocks x K*36/32 B of
 * activations (L1/L2-resident), writes 4*N*T. Intensity ~ 2*T FLOP per weight byte x 8/bpw:
 * bandwidth-bound for T <= 8; prefill re-reads W once per 8-token tile (from L2 for per-layer
 * matrices up to ~50 MB) and is dp4a-throughput-bound.
 * Tested against: op_matmul on the dequantized weights and activations (f64 accumulation)
 * in tests/runtime/test_cuda_ops.c, and every quantized test model against llama.cpp's logits.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/gemv_dot.cuh"
#include "backend/cuda/device/split.cuh"

#include <string.h>

#define MMVQ_WARPS 4
#define MMVQ_NC 8

template <int TYPE, int XQ, int NC>
__global__ void __launch_bounds__(MMVQ_WARPS * 32) k_mmvq(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N,
                                                          const uint8_t *x, int64_t T, cu_epilogue ep) {
    const int64_t r0 = (int64_t)blockIdx.x * MMVQ_WARPS; /* the block's rows into L2 before the wait, as k_mmvq1's */
    if (blockIdx.y == 0) prefetch_rows(w + (uint64_t)r0 * rb, (uint64_t)((N - r0 < MMVQ_WARPS ? N - r0 : MMVQ_WARPS)) * rb, threadIdx.x, MMVQ_WARPS * 32);
    CU_PDL_ENTRY();
    const int lane = threadIdx.x & 31;
    const int64_t n = r0 + (threadIdx.x >> 5);
    if (n >= N) return;
    const uint8_t *row = w + (uint64_t)n * rb;
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
                mmvq_sub_acc<TYPE>(&acc[c], ws, qy, d8);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        const float v = warp_sum(acc[c]);
        if (lane == 0 && c < nt) dst[(t0 + c) * N + n] = ep.add ? v + ep.add[ep.bcast ? n : (t0 + c) * N + n] : v;
    }
}

/* T = 1 (decode): a warp takes R consecutive rows (mmvq_part_rows: every row's loads of a
 * sub-block step in flight together), lane l sub-blocks l, l + 32, ...; one row a warp except over
 * many rows (an LM head: a bandwidth-bound stream of 100+ MB), where R rows a warp keep R times the
 * bytes in flight of one row a warp (the Q8_0 head of a 0.5B model ran at 3.0 TB/s with one row, 46%
 * of warps active, 3.6 with two on the H200). The rows' bits do not depend on R. The block's
 * 4 * R results leave as one store of consecutive floats (through shared memory): an LM head may
 * write its logits straight into page-locked host memory (exec_cuda's direct outputs), where each store
 * instruction is a transfer over PCIe — 32 bytes a block, not 4 a row. */
template <int TYPE, int XQ, int R>
__global__ void __launch_bounds__(MMVQ_WARPS * 32) k_mmvq1(float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N, const uint8_t *x,
                                                           cu_epilogue ep) {
    const int64_t r0 = (int64_t)blockIdx.x * MMVQ_WARPS * R, r1 = r0 + MMVQ_WARPS * R < N ? r0 + MMVQ_WARPS * R : N;
    prefetch_rows(w + (uint64_t)r0 * rb, (uint64_t)(r1 - r0) * rb, threadIdx.x, MMVQ_WARPS * 32);
    CU_PDL_ENTRY();
    __shared__ float res[MMVQ_WARPS * R];
    const int lane = threadIdx.x & 31;
    const int64_t n0 = r0 + (int64_t)(threadIdx.x >> 5) * R;
    if (n0 < N) { /* no early return: every warp meets the barrier */
        const int n = N - n0 < R ? (int)(N - n0) : R;
        const uint8_t *rows[R];
#pragma unroll
        for (int r = 0; r < R; r++) rows[r] = w + (uint64_t)(n0 + r) * rb;
        float acc[R];
        mmvq_part_rows<TYPE, XQ, R>(rows, n, x, K, lane, 32, acc);
        float mine = 0.0f; /* lane r keeps row r's sum (every lane has every sum after the butterfly) */
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float v = warp_sum(acc[r]);
            if (lane == r) mine = v;
        }
        if (lane < n) res[(threadIdx.x >> 5) * R + lane] = ep.add ? mine + ep.add[n0 + lane] : mine;
    }
    __syncthreads();
    if (threadIdx.x < r1 - r0) {
        epi_store(dst, r0 + threadIdx.x, res[threadIdx.x], ep);
    }
}

/* T = 1 with a long K (more than MMVQ_LONG sub-blocks, e.g. ffn_down): the block's 4 warps share
 * one row (warp w takes sub-blocks w*32 + lane, stepping 128), partial sums meet in shared memory
 * in warp order — a quarter of the serial memory round trips per row of k_mmvq. k_gemv.cu's
 * four-warp groups do exactly this, so fused == unfused still holds. */
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
        v = ep.add ? v + ep.add[n] : v;
        epi_store(dst, n, v, ep);
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
                ws[r].d0 = ws[r].d1 = ws[r].dm = ws[r].dm1 = 0.0f;
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
#pragma unroll
                for (int r = 0; r < MMVQ_R; r++) mmvq_sub_acc<TYPE>(&acc[r][c], ws[r], qy, d8);
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
    constexpr bool M2 = TYPE == CU_T_Q2_K; /* two min terms a sub-block (mmvq_sub_acc): dm1 and the first half's sum too */
    __shared__ int ws[MQ_BN][MQ_LD];
    __shared__ float wd[MQ_BN][MQ_KB][M2 ? 4 : 3];
    __shared__ int xs[MQ_BT][MQ_LD];
    __shared__ float xd[MQ_BT][MQ_KB];
    __shared__ int xq[MQ_BT][MQ_KB];
    __shared__ int xh[M2 ? MQ_BT : 1][MQ_KB];
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
                t.d0 = t.d1 = t.dm = t.dm1 = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) ws[r][jj * 8 + i] = t.w[i];
            wd[r][jj][0] = t.d0, wd[r][jj][1] = t.d1, wd[r][jj][2] = t.dm;
            if (M2) wd[r][jj][M2 ? 3 : 0] = t.dm1;
        }
        /* activations: 32 tokens x 8 sub-blocks, one per thread */
        {
            const int t = tid / MQ_KB, jj = tid % MQ_KB;
            if (t0 + t < T && j0 + jj < nsb) {
                float d8;
                const int *qp = cu_act_sub<XQ>(x, K, t0 + t, j0 + jj, &d8);
                int sq = 0, sh = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) { /* staged and summed in one pass over the loads */
                    const int q = qp[i];
                    xs[t][jj * 8 + i] = q;
                    sq = __dp4a(0x01010101, q, sq);
                    if (i == 3) sh = sq;
                }
                xd[t][jj] = d8;
                xq[t][jj] = sq;
                if (M2) xh[M2 ? t : 0][jj] = sh;
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) xs[t][jj * 8 + i] = 0;
                xd[t][jj] = 0.0f;
                xq[t][jj] = 0;
                if (M2) xh[M2 ? t : 0][jj] = 0;
            }
        }
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < MQ_KB; jj++) {
            int xv[2][8];
            float d8[2];
            int sq[2], sh[2];
#pragma unroll
            for (int c = 0; c < 2; c++) {
#pragma unroll
                for (int i = 0; i < 8; i++) xv[c][i] = xs[tt + 16 * c][jj * 8 + i];
                d8[c] = xd[tt + 16 * c][jj];
                sq[c] = xq[tt + 16 * c][jj];
                sh[c] = M2 ? xh[M2 ? tt + 16 * c : 0][jj] : 0;
            }
#pragma unroll
            for (int i4 = 0; i4 < 4; i4++) {
                const int r = tr + 16 * i4;
                int wv[8];
#pragma unroll
                for (int i = 0; i < 8; i++) wv[i] = ws[r][jj * 8 + i];
                const float d0 = wd[r][jj][0], d1 = wd[r][jj][1], dm = wd[r][jj][2], dm1 = M2 ? wd[r][jj][M2 ? 3 : 0] : 0.0f;
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    int s0, s1;
                    cu_dp4a_halves(wv, xv[c], &s0, &s1);
                    if (M2) /* mmvq_sub_acc's Q2_K arithmetic */
                        acc[i4][c] += d8[c] * (d0 * (float)s0 + d1 * (float)s1 + (dm * (float)sh[c] + dm1 * (float)(sq[c] - sh[c])));
                    else
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

#define MMVQ_WIDE_N 65536      /* T = 1 launches of at least this many rows take cu_config.head_rows rows a warp */

/* the T > 8 dp4a variant: cu_config.mmq 1 or 2, else 3 (mmq 4 takes the int8 MMA where it applies, this elsewhere) */
static int mmvq_variant(void) { return cu_cfg()->mmq == 1 || cu_cfg()->mmq == 2 ? cu_cfg()->mmq : 3; }

template <int TYPE, int XQ>
static sb_status launch_type(cudaStream_t s, float *dst, const uint8_t *w, uint64_t rb, int64_t K, int64_t N, const uint8_t *x,
                             int64_t T, cu_epilogue ep) {
    if (mmvq_variant() == 3 && T > MMVQ_NC) {
        const dim3 g3(cu_div_up(N, MQ_BN), cu_div_up(T, MQ_BT));
        cu_launch(k_mmq<TYPE, XQ>, g3, 256, s, dst, w, rb, K, N, x, T, ep);
        return cu_after_launch("k_mmq");
    }
    if (mmvq_variant() == 2 && T > MMVQ_NC) {
        const dim3 g2(cu_div_up(N, MMVQ_WARPS * MMVQ_R), cu_div_up(T, MMVQ_NC));
        cu_launch(k_mmvq_rows<TYPE, XQ>, g2, MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, T, ep);
        return cu_after_launch("k_mmvq_rows");
    }
    if (T == 1 && K / 32 > MMVQ_LONG) {
        cu_launch(k_mmvq_long<TYPE, XQ>, dim3((unsigned)N), MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, ep);
        return cu_after_launch("k_mmvq_long");
    }
    if (T == 1) {
        const int R = N >= MMVQ_WIDE_N ? cu_cfg()->head_rows : 1;
        const dim3 g1(cu_div_up(N, (int64_t)MMVQ_WARPS * R));
        if (R == 4) cu_launch(k_mmvq1<TYPE, XQ, 4>, g1, MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, ep);
        else if (R == 2) cu_launch(k_mmvq1<TYPE, XQ, 2>, g1, MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, ep);
        else cu_launch(k_mmvq1<TYPE, XQ, 1>, g1, MMVQ_WARPS * 32, s, dst, w, rb, K, N, x, ep);
        return cu_after_launch("k_mmvq1");
    }
    /* token counts per pass 2, 4, 8 (each tile skips its missing tokens): half the instantiations */
    const int nc = T <= 2 ? 2 : T <= 4 ? 4 : MMVQ_NC;
    const dim3 grid(cu_div_up(N, MMVQ_WARPS), cu_div_up(T, nc));
    const int th = MMVQ_WARPS * 32;
    switch (nc) {
    case 2: cu_launch(k_mmvq<TYPE, XQ, 2>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    case 4: cu_launch(k_mmvq<TYPE, XQ, 4>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    default: cu_launch(k_mmvq<TYPE, XQ, 8>, grid, th, s, dst, w, rb, K, N, x, T, ep); break;
    }
    return cu_after_launch("k_mmvq");
}

extern "C" bool cu_has_mmvq(int type) { return mmvq_row_bytes(type, 256) != 0; }
extern "C" bool cu_has_mmvq_q8k(int type) { return mmvq_k_type(type) && cu_has_mmvq(type); }


extern "C" sb_status cu_matmul_q8(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype,
                                  int64_t T, const cu_epilogue *epp) {
    if (T <= 0 || N <= 0) return SB_OK;
    const cu_epilogue ep = epp ? *epp : cu_epilogue{NULL, 0, NULL};
    if (ep.nonfinite && T != 1) return sb_fail(SB_ERR_INTERNAL, "cuda: a non-finite flag on a %lld-token dp4a GEMV", (long long)T);
    const uint64_t rb = mmvq_row_bytes(wtype, K);
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *wb = (const uint8_t *)w, *x = (const uint8_t *)xq;
    if (xtype == CU_T_Q8_1) {
#define CU_X(t) \
    case t: return launch_type<t, CU_T_Q8_1>(st, dst, wb, rb, K, N, x, T, ep);
        switch (wtype) {
            CU_MMVQ_Q81_TYPES(CU_X)
            CU_MMVQ_K_TYPES(CU_X)
        default: break;
        }
#undef CU_X
    } else if (xtype == CU_T_Q8_K) {
#define CU_X(t) \
    case t: return launch_type<t, CU_T_Q8_K>(st, dst, wb, rb, K, N, x, T, ep);
        switch (wtype) {
            CU_MMVQ_K_TYPES(CU_X)
        default: break;
        }
#undef CU_X
    }
    return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no dp4a GEMV for weight type %d x activation type %d", wtype, xtype);
}
