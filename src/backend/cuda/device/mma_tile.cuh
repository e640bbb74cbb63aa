/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/mma_tile.cuh — the int8 tensor-core GEMM's kernels (k_mma, k_mma_reduce) and
 * their helpers; math, geometry, traffic and measurements: k_mma.cu's header comment, whose launchers
 * (tile choice, split-K rule, segments) use them.
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_mma_emu
 * (tests/codegen/emu: the s8 MMAs and ldmatrix exchange the warp's registers per PTX's layouts).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_MMA_TILE_CUH
#define SB_BACKEND_CUDA_DEVICE_MMA_TILE_CUH

#include "backend/cuda/device/gemv_dot.cuh"
#include "backend/cuda/device/split.cuh"

#define MA_KB 4
#define MA_LD (MA_KB * 8 + 4)
#define MA_MINB(BN) ((BN) == 32 ? 3 : 2) /* blocks per SM the registers allow: 32-row tiles 3 (<= 80 registers), others 2 */

/* The int32 results come out of the MMAs biased: their accumulator input is MA_BIAS = the bits of
 * 1.5 * 2^23 (12582912.0f), so a result b = MA_BIAS + s (|s| < 2^22: no overflow) read as a float is
 * exactly 12582912 + s. Then float(s) = b - 12582912 (one FADD, exact), and float(s) * d (d of at most
 * 22 significant bits: an f16 scale, or one times a 6-bit sub-block scale, so -12582912 * d is exact too)
 * is fmaf(b, d, -12582912 * d) with the one rounding of the product: the same bits as the FMUL, and
 * the IADD + FADD of a conversion gone (2 instructions a result instead of 4). Only in the 32-row tile
 * of Q4_0 / Q5_0 / Q8_0 / IQ4_XS (k_mma's BIAS; IQ4_XS's d * (ls - 32) has at most 17 significant bits): the extra registers spilled the 64/128-row tiles and the K-quants'
 * two-scale sub-blocks. */
#define MA_BIAS 0x4B400000
#define MA_BIAS_F 12582912.0f
/* exact int -> float for |s| < 2^22, from an unbiased result (the IADD + FADD form) */
static __device__ __forceinline__ float i2f_exact(int s) { return __int_as_float(s + MA_BIAS) - MA_BIAS_F; }
/* float(s) * d from a biased result b (nd = -MA_BIAS_F * d, exact: see above) */
static __device__ __forceinline__ float ma_scaled(int b, float d, float nd) { return fmaf(__int_as_float(b), d, nd); }

/* the weight types a paired gate/up launch takes (kernel and host: cu_mma_glu_pair_ok): the K-quants'
 * 128-row tiles are at their register limit */
static __host__ __device__ constexpr bool ma_glu_pair_type(int t) { return t == CU_T_Q4_0 || t == CU_T_Q5_0 || t == CU_T_Q8_0; }

/* c = a . b + cin (cin: 0, or MA_BIAS for biased results) */
static __device__ __forceinline__ void mma_k32(int c[4], int a0, int a1, int a2, int a3, int b0, int b1, int cin) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(cin));
#elif defined(SB_CUDA_EMU_H) /* host emulation (tests/codegen/emu) */
    const int a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
    emu_mma_s8(c, a, b, cin, 1);
#else
    c[0] = c[1] = c[2] = c[3] = 0; /* never launched below sm_80 (cu_matmul_mma checks) */
#endif
}

static __device__ __forceinline__ void mma_k16(int c[4], int a0, int a1, int b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(0));
#elif defined(SB_CUDA_EMU_H)
    const int a[2] = {a0, a1}, b[1] = {b0};
    emu_mma_s8(c, a, b, 0, 0);
#else
    c[0] = c[1] = c[2] = c[3] = 0;
#endif
}

/* The output segments of one launch: up to CU_MULTI_MAX weight matrices of one type (or a
 * cu_mma_pair) over the same activations (a prefill plan's gate/up, K/V/Q), each with its rows, destination and epilogue; block
 * x of the grid works for segment s when x0[s] <= x < x0[s + 1] (x0 in tiles of the launch's BN).
 * A single matrix is one segment. */
struct ma_segs {
    const uint8_t *w[CU_MULTI_MAX];
    float *dst[CU_MULTI_MAX];
    int64_t N[CU_MULTI_MAX];
    cu_epilogue ep[CU_MULTI_MAX];
    int x0[CU_MULTI_MAX + 1];
    int64_t poff[CU_MULTI_MAX]; /* split K: where segment s's partials [split][T][N[s]] start (ma_small_split) */
    int wt[CU_MULTI_MAX];       /* weight types: one, or a legacy type and Q8_0 (cu_mma_pair) */
    unsigned char t2[CU_MULTI_MAX]; /* segment s of the launch's second type (TYPE2), rows of rb2 bytes */
    uint64_t rb2;
    int n;
    /* 1 SiLU, 2 GELU: one segment of N row pairs — w[0] the gate's rows, w[1] the up's, one type, no
     * epilogue —, each warp's two m16 tiles a gate and an up tile of the same 16 rows, dst[0] =
     * act(gate) * up (cu_glu_quant's values); x0 in tiles of BN / 2 pairs; never split */
    int pair_glu;
};

/* the x extent of each segment in tiles of BN rows (sg->x0); the grid's x (host: the launchers, and the
 * emulation's driver) */
static inline unsigned ma_tiles(ma_segs *sg, int BN) {
    const int rows = sg->pair_glu ? BN / 2 : BN; /* paired gate/up: BN / 2 pairs a tile */
    sg->x0[0] = 0;
    for (int q = 0; q < sg->n; q++) sg->x0[q + 1] = sg->x0[q] + (int)((sg->N[q] + rows - 1) / rows);
    for (int q = sg->n + 1; q <= CU_MULTI_MAX; q++) sg->x0[q] = sg->x0[sg->n];
    return (unsigned)sg->x0[sg->n];
}

/* K of nsb sub-blocks split about `split` ways in whole K steps (MA_KB sub-blocks): *spb sub-blocks
 * a split (the last may be shorter), and the splits that gives, none empty (k_mma.cu's launchers,
 * and the host emulation's driver) */
static inline int ma_split_steps(int64_t nsb, int64_t split, int *spb) {
    const int64_t steps = (nsb + MA_KB - 1) / MA_KB, per = (steps + split - 1) / split;
    *spb = (int)(per * MA_KB);
    return (int)((steps + per - 1) / per);
}

/* SPLIT: block z of the grid covers sub-blocks [z * spb, min(nsb, (z + 1) * spb)) of K (spb a multiple
 * of MA_KB: whole K steps, so a step never crosses a super-block, which IACC's sums rely on) and writes
 * its raw sums to its segment's partials part + poff[s], [z][T][N[s]]; with cnt the last block of each (x, y) tile to arrive (a counter
 * per tile, reset by that block) sums the partials of the tile (mma_split_sum), else k_mma_reduce
 * does. !SPLIT: the whole of K, written through the epilogue (spb, part, cnt unused). */
template <int TYPE, int XQ, int BN, int BT, bool SPLIT, int TYPE2 = TYPE>
__global__ void __launch_bounds__(256, MA_MINB(BN)) k_mma(const ma_segs sg, uint64_t rb, int64_t K, const uint8_t *x, int64_t T, int spb,
                                                float *part, unsigned *cnt) {
    int sgi = 0; /* this block's segment */
#pragma unroll
    for (int q = 1; q < CU_MULTI_MAX; q++)
        if (q < sg.n && (int)blockIdx.x >= sg.x0[q]) sgi = q;
    if (SPLIT) part += sg.poff[sgi];
    const uint8_t *const w = sg.w[sgi];
    /* a block's segment of the second type (block-uniform): its fetch and decode, its row bytes */
    static_assert(TYPE2 == TYPE || (TYPE2 == CU_T_Q8_0 && (TYPE == CU_T_Q4_0 || TYPE == CU_T_Q5_0)), "k_mma: a second type only beside Q4_0 / Q5_0");
    const bool t2 = TYPE2 != TYPE && sg.t2[sgi];
    if (t2) rb = sg.rb2;
    float *const dst = sg.dst[sgi];
    const int64_t N = sg.N[sgi];
    const cu_epilogue ep = sg.ep[sgi];
    constexpr int WR = BN / 32; /* warps along rows */
    constexpr int WT = 8 / WR;  /* warps along tokens */
    constexpr int WN = BT / WT; /* tokens per warp */
    constexpr int NT = WN / 8;  /* n8 tiles per warp */
    constexpr int U = BN * MA_KB >= 256 ? BN * MA_KB / 256 : 1; /* weight sub-blocks each thread stages per step */
    constexpr int WSUB = BN * MA_KB; /* weight sub-blocks per step (BN 32: only threads < 128 stage one) */
    constexpr bool K6 = TYPE == CU_T_Q6_K || TYPE == CU_T_Q3_K;                                          /* a scale per 16 values */
    constexpr bool DM = TYPE == CU_T_Q4_K || TYPE == CU_T_Q5_K || TYPE == CU_T_Q4_1 || TYPE == CU_T_Q5_1; /* a min term */
    static_assert(TYPE != CU_T_Q2_K, "k_mma: Q2_K has a scale and a min per 16 values (k_mmq takes it)");
    /* biased MMA results, ma_scaled (see MA_BIAS); not IQ4_NL, whose 32-row tile then spilled 16 bytes (ptxas, sm_90) */
    /* integer sums over a super-block: on q8_K (one activation scale a super-block) the K-quants' and
     * IQ4_XS's MMA results are summed as isc * s in int32 over the super-block's sub-blocks (one IMAD a
     * result, two for K6), then scaled once by dsb * d8 (|sum| < 2^28 for each such type; the largest,
     * Q6_K's: 16 halves x 16 x 127 x 32 x 128); DM's min term stays a float FMA a sub-block. Only up to
     * two n8 tiles a warp (the 128 x 64 tile's 32 more registers spilled hundreds of bytes, ptxas) and
     * not in the 8-token decode tile, whose spills then grew and which ran 3-8 % slower (bench/NOTES.md) */
    constexpr bool IACC = XQ == CU_T_Q8_K && TYPE2 == TYPE && (K6 || DM || TYPE == CU_T_IQ4_XS) && NT <= 2 && BT > 8;
    constexpr bool BIAS = !K6 && !DM && !IACC && BN == 32 && TYPE != CU_T_IQ4_NL;
    static_assert(NT >= 1 && WR >= 1 && WR * WT == 8 && BT * MA_KB <= 256 && (WSUB % 256 == 0 || WSUB < 256), "k_mma tile shape");
    __shared__ __align__(16) int ws[BN][MA_LD];
    __shared__ float2 wd[MA_KB][BN]; /* (d0, d1), (d0, dm) or with BIAS (d0, -MA_BIAS_F * d0): dm is 0 there; with
                                      * IACC (isc0, isc1) or (isc0, dm) as bits */
    __shared__ float wsd[IACC ? BN : 1]; /* IACC: the step's super-block scale dsb a row */
    __shared__ __align__(16) int xs[BT][MA_LD];
    __shared__ __align__(8) float xd[MA_KB][BT];
    __shared__ __align__(8) float xm[MA_KB][BT]; /* d8 * sum q (DM types) */
    const int tid = threadIdx.x, lane = tid & 31, wp = tid >> 5;
    const int g = lane >> 2, tig = lane & 3;
    const int wr = wp % WR, wt = wp / WR;
    const int pair = ma_glu_pair_type(TYPE) ? sg.pair_glu : 0; /* paired gate/up rows (block-uniform) */
    const int64_t n0 = (int64_t)((int)blockIdx.x - sg.x0[sgi]) * (pair ? BN / 2 : BN), t0 = (int64_t)blockIdx.y * BT;
    const int nsb = (int)(K / 32);
    const int jb = SPLIT ? (int)blockIdx.z * spb : 0; /* this block's sub-blocks [jb, je) */
    const int je = SPLIT ? min(nsb, jb + spb) : nsb;
    float acc[2][NT][4];
    int iacc[IACC ? 2 : 1][NT][4]; /* IACC: this super-block's integer sums */
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[m][n][c] = 0.0f, iacc[IACC ? m : 0][n][c] = 0;
    /* software pipeline: the raw words of step j0 + MA_KB are loaded into registers before step
     * j0's tensor-core work, decoded into shared memory after it */
    cu_wraw raw[U];
    int xr[8];
    uint32_t xd8r = 0; /* the activation scale's raw bits (cu_act_d) */
    const int at = tid / MA_KB, aj = tid % MA_KB; /* this thread's activation sub-block */
    auto fetch_w = [&](int j0) { /* weights: never written by a kernel, so also before the PDL wait */
#pragma unroll
        for (int u2 = 0; u2 < U; u2++) {
            const int u = tid + 256 * u2, r = u / MA_KB, jj = u % MA_KB;
            /* paired: tile row r is row (r / 32) * 16 + r % 16 of the gate (r / 16 even) or the up */
            const int64_t wrow = n0 + (pair ? (r >> 5) * 16 + (r & 15) : r);
            const uint8_t *wm = pair && (r & 16) ? sg.w[1] : w;
            if ((WSUB >= 256 || u < WSUB) && wrow < N && j0 + jj < je) {
                if (t2) cu_fetch<TYPE2>(wm + (uint64_t)wrow * rb, j0 + jj, &raw[u2]);
                else cu_fetch<TYPE>(wm + (uint64_t)wrow * rb, j0 + jj, &raw[u2]);
            } else {
                cu_wraw_zero(&raw[u2]);
            }
        }
    };
    auto fetch_x = [&](int j0) { /* activations: after the wait; the scale's raw bits, converted in store */
        xd8r = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) xr[i] = 0;
        if (at < BT && t0 + at < T && j0 + aj < je) {
            const int *qp = cu_act_sub_raw<XQ>(x, K, t0 + at, j0 + aj, &xd8r);
#pragma unroll
            for (int i = 0; i < 8; i++) xr[i] = qp[i];
        }
    };
    auto store = [&](int j0) {
#pragma unroll
        for (int u2 = 0; u2 < U; u2++) {
            const int u = tid + 256 * u2, r = u / MA_KB, jj = u % MA_KB;
            if (WSUB < 256 && u >= WSUB) continue; /* BN 32: rows 0..31 only */
            cu_wsub t;
            if (t2) cu_decode<TYPE2>(&raw[u2], j0 + jj, &t);
            else cu_decode<TYPE>(&raw[u2], j0 + jj, &t);
            *(int4 *)&ws[r][jj * 8] = make_int4(t.w[0], t.w[1], t.w[2], t.w[3]);
            *(int4 *)&ws[r][jj * 8 + 4] = make_int4(t.w[4], t.w[5], t.w[6], t.w[7]);
            if (IACC) {
                wd[jj][r] = make_float2(__int_as_float(t.isc0), K6 ? __int_as_float(t.isc1) : t.dm);
                if (jj == 0) wsd[r] = t.dsb; /* a step lies in one super-block (MA_KB divides 8) */
            } else {
                wd[jj][r] = make_float2(t.d0, K6 ? t.d1 : BIAS ? -MA_BIAS_F * t.d0 : t.dm); /* once a row, not in every warp */
            }
        }
        if (at < BT) {
            *(int4 *)&xs[at][aj * 8] = make_int4(xr[0], xr[1], xr[2], xr[3]);
            *(int4 *)&xs[at][aj * 8 + 4] = make_int4(xr[4], xr[5], xr[6], xr[7]);
            const float xd8 = cu_act_d<XQ>(xd8r);
            xd[aj][at] = xd8;
            if (DM) {
                xm[aj][at] = xd8 * (float)cu_dp4a_sum(xr);
            }
        }
    };
    fetch_w(jb); /* the first step's weights load under the previous kernel's tail */
    CU_PDL_ENTRY();
    fetch_x(jb);
    store(jb);
    __syncthreads();
    for (int j0 = jb; j0 < je; j0 += MA_KB) {
        const bool more = j0 + MA_KB < je;
        if (more) fetch_w(j0 + MA_KB), fetch_x(j0 + MA_KB);
#pragma unroll
        for (int jj = 0; jj < MA_KB; jj++) {
            /* fragments by ldmatrix (row stride 144 bytes: a matrix's 8 rows in distinct bank groups):
             * a[m] rows g, g + 8 x bytes 4 tig (+ 16); b[n] token g x bytes 4 tig (+ 16) — b only in the
             * small-T tile and a not in the Q4_K / Q5_K 128-row one: ldmatrix's fixed order took those
             * past their registers (spills); there 32-bit shared loads */
            constexpr bool LDA = !(BN == 128 && DM), LDB = BN == 32;
            int a[2][4], b[NT][2];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                if (LDA) {
                    cu_ldsm_x4(a[m], &ws[wr * 32 + m * 16 + (lane & 15)][jj * 8 + 4 * (lane >> 4)]);
                } else {
                    const int r = wr * 32 + m * 16 + g;
                    a[m][0] = ws[r][jj * 8 + tig];
                    a[m][1] = ws[r + 8][jj * 8 + tig];
                    a[m][2] = ws[r][jj * 8 + 4 + tig];
                    a[m][3] = ws[r + 8][jj * 8 + 4 + tig];
                }
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                if (LDB) {
                    cu_ldsm_x2(b[n], &xs[wt * WN + n * 8 + (lane & 7)][jj * 8 + 4 * ((lane >> 3) & 1)]);
                } else {
                    const int c = wt * WN + n * 8 + g;
                    b[n][0] = xs[c][jj * 8 + tig];
                    b[n][1] = xs[c][jj * 8 + 4 + tig];
                }
            }
            float2 sw[2][2]; /* rows g and g + 8 of each m tile (with BIAS, .y = -MA_BIAS_F * d0: ma_scaled's nd) */
#pragma unroll
            for (int m = 0; m < 2; m++) {
                sw[m][0] = wd[jj][wr * 32 + m * 16 + g];
                sw[m][1] = wd[jj][wr * 32 + m * 16 + g + 8];
            }
            /* every tensor-core op of this sub-block first (independent: in flight together), then the scaling */
            int s[2][NT][4], s1[K6 ? 2 : 1][NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++)
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    if (K6) {
                        mma_k16(s[m][n], a[m][0], a[m][1], b[n][0]);
                        mma_k16(s1[K6 ? m : 0][n], a[m][2], a[m][3], b[n][1]);
                    } else {
                        mma_k32(s[m][n], a[m][0], a[m][1], a[m][2], a[m][3], b[n][0], b[n][1], BIAS ? MA_BIAS : 0);
                    }
                }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const int c = wt * WN + n * 8 + 2 * tig;
                float2 sm = make_float2(0.0f, 0.0f);
                if (DM) sm = *(const float2 *)&xm[jj][c];
                if (IACC) {
#pragma unroll
                    for (int m = 0; m < 2; m++)
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const float2 dw = sw[m][i >> 1];
                            iacc[IACC ? m : 0][n][i] += __float_as_int(dw.x) * s[m][n][i];
                            if (K6) iacc[IACC ? m : 0][n][i] += __float_as_int(dw.y) * s1[K6 ? m : 0][n][i];
                            if (DM) acc[m][n][i] += dw.y * (i & 1 ? sm.y : sm.x);
                        }
                    continue;
                }
                const float2 d8 = *(const float2 *)&xd[jj][c];
#pragma unroll
                for (int m = 0; m < 2; m++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float2 dw = sw[m][i >> 1];
                        const float dt = i & 1 ? d8.y : d8.x;
                        if (K6) {
                            acc[m][n][i] += dt * (dw.x * i2f_exact(s[m][n][i]) + dw.y * i2f_exact(s1[K6 ? m : 0][n][i]));
                        } else {
                            acc[m][n][i] += dt * (BIAS ? ma_scaled(s[m][n][i], dw.x, dw.y) : dw.x * i2f_exact(s[m][n][i]));
                            if (DM) acc[m][n][i] += dw.y * (i & 1 ? sm.y : sm.x); /* DM: never BIAS */
                        }
                    }
            }
        }
        if (IACC && ((j0 & 4) || !more)) { /* the super-block's last step (or the split's): its sums, scaled once */
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const float2 d8 = *(const float2 *)&xd[0][wt * WN + n * 8 + 2 * tig];
#pragma unroll
                for (int m = 0; m < 2; m++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float ds = wsd[wr * 32 + m * 16 + g + 8 * (i >> 1)];
                        acc[m][n][i] += ds * (i & 1 ? d8.y : d8.x) * (float)iacc[IACC ? m : 0][n][i];
                        iacc[IACC ? m : 0][n][i] = 0;
                    }
            }
        }
        __syncthreads();
        if (more) {
            store(j0 + MA_KB);
            __syncthreads();
        }
    }
    if (!SPLIT && pair) { /* m 0 the gate, m 1 the up of rows n0 + 16 wr + g (+ 8): act(gate) * up */
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = n0 + wr * 16 + g + 8 * (i >> 1), t = t0 + wt * WN + n * 8 + 2 * tig + (i & 1);
                if (row < N && t < T) dst[t * N + row] = cu_glu(acc[0][n][i], acc[1][n][i], pair == 2);
            }
        return;
    }
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = n0 + wr * 32 + m * 16 + g + 8 * (i >> 1);
                const int64_t t = t0 + wt * WN + n * 8 + 2 * tig + (i & 1);
                if (row < N && t < T) {
                    const int64_t o = t * N + row;
                    if (SPLIT) {
                        part[(int64_t)blockIdx.z * T * N + o] = acc[m][n][i];
                    } else {
                        const float v = ep.add ? acc[m][n][i] + ep.add[ep.bcast ? row : o] : acc[m][n][i];
                        epi_store(dst, o, v, ep);
                    }
                }
            }
    if (SPLIT && cnt) { /* the last split block of this tile reduces it (threadfence reduction) */
        __shared__ int last;
        const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
        if (!block_arrives_last(&cnt[tile], (unsigned)gridDim.z, &last)) return;
        /* this thread's PER outputs of the tile (rows fastest: coalesced), all their loads of 2
         * splits in flight at once, summed in split order from 0 (as mma_split_sum) */
        constexpr int PER = BN * BT / 256;
        const int nsplit = (int)gridDim.z;
        const int64_t TN = T * N;
        int64_t o[PER];
        bool ok[PER];
        float v[PER];
#pragma unroll
        for (int p = 0; p < PER; p++) {
            const int e = tid + 256 * p;
            const int64_t row = n0 + e % BN, t = t0 + e / BN;
            ok[p] = row < N && t < T;
            o[p] = ok[p] ? t * N + row : 0;
            v[p] = 0.0f;
        }
        int z = 0;
        for (; z + 2 <= nsplit; z += 2) {
            float l[2][PER];
#pragma unroll
            for (int q = 0; q < 2; q++)
#pragma unroll
                for (int p = 0; p < PER; p++) l[q][p] = ok[p] ? __ldcg(part + (z + q) * TN + o[p]) : 0.0f;
#pragma unroll
            for (int q = 0; q < 2; q++)
#pragma unroll
                for (int p = 0; p < PER; p++) v[p] += l[q][p];
        }
        for (; z < nsplit; z++)
#pragma unroll
            for (int p = 0; p < PER; p++) v[p] += ok[p] ? __ldcg(part + z * TN + o[p]) : 0.0f;
#pragma unroll
        for (int p = 0; p < PER; p++)
            if (ok[p]) {
                const int64_t row = o[p] % N;
                const float y = ep.add ? v[p] + ep.add[ep.bcast ? row : o[p]] : v[p];
                epi_store(dst, o[p], y, ep);
            }
        if (tid == 0) cnt[tile] = 0; /* ready for the next kernel that uses the counters */
    }
}

/* the split-K reduction as its own kernel (no counters): one thread per output of every segment,
 * segment s's T x N[s] outputs after the earlier segments' (its partials at poff[s]) */
__global__ void k_mma_reduce(const ma_segs sg, const float *part, int64_t T, int nsplit) {
    CU_PDL_ENTRY();
    int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int q = 0; q < CU_MULTI_MAX; q++) {
        if (q >= sg.n) return;
        const int64_t TN = T * sg.N[q];
        if (o < TN) {
            const float y = mma_split_sum(part + sg.poff[q], o, o % sg.N[q], nsplit, TN, sg.ep[q]);
            epi_store(sg.dst[q], o, y, sg.ep[q]);
            return;
        }
        o -= TN;
    }
}

#endif
