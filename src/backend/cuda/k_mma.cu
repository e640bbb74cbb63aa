/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_mma.cu — the quantized GEMM from T = cu_config.mma_min_t (3) on int8 tensor cores: dst [N,T] = W x for
 * quantized weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL on q8_1; Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS on
 * q8_K, Q4_K..Q6_K also on q8_1; not Q2_K, whose sub-blocks have two scales and two mins: k_mmq).
 * Math: the same as k_mmvq.cu's k_mmq, y[n,t] = sum over 32-value sub-blocks j of
 *   d8_j,t * (d0 * s0 + d1 * s1 + dm * sq), s = int8 dot of the unpacked weight sub-block (unpack.cuh)
 * with the activation sub-block, sq = sum of the activation's q (the min term of Q4_1, Q5_1, Q4_K,
 * Q5_K: DM); s comes from mma.sync.m16n8k32.s8 (Q6_K and Q3_K, whose scales cover 16 values: two
 * m16n8k16, K6), converted to f32
 * exactly (|s| < 2^22: the 1.5*2^23 bias, no I2F; in the 32-row tile the MMAs add the bias, MA_BIAS). Results equal k_mmq's up to the f32
 * summation order.
 * Geometry: 256 threads (8 warps), a block owns BN rows x BT tokens (128 x 64, 64 x 64 or
 * 64 x 32, chosen from the grid size in launch_mma); per step of 4 sub-blocks (128 values of K)
 * it decodes BN x 4 weight sub-blocks and stages BT x 4 activation sub-blocks in shared memory
 * (row stride 36 ints = 144 bytes: the 8 rows of an ldmatrix matrix, or the 8 rows x 4 columns of
 * a 32-bit fragment load, fall in distinct banks; weight fragments by ldmatrix.x4 — not in the
 * Q4_K / Q5_K 128-row tile —, activation fragments by ldmatrix.x2 in the 32-row tile, 32-bit
 * loads elsewhere: ldmatrix's fixed order took those tiles past their registers), then each warp
 * runs 32 rows x BT/(8/(BN/32)) tokens of m16n8 tiles, all of a sub-block's MMAs
 * issued before their int32 results are scaled into f32 accumulators. Software pipeline: the raw
 * words of the next step (cu_fetch) are loaded before this step's math and decoded (cu_decode)
 * after it; the first step's weight words before the PDL wait (weights are never written by a
 * kernel), so their HBM latency passes under the previous kernel's tail.
 * Traffic: weights read once per BT tokens, activations once per BN rows. H200: 20-40 TMAC/s,
 * bound by instruction issue (~31 warp-instructions an MMA, half of them the per-sub-block f32
 * scaling, 4 an int32 result — 2 in the 32-row tile of Q4_0 / Q5_0 / Q8_0, MA_BIAS) with ~2 blocks per SM (bench/NOTES.md, session 6: staging the loads
 * in shared memory did not help).
 * Small T (cu_matmul_mma_small, SB_TUNE=mma_small=1|2, default 2; the rule above
 * launch_mma_small): for 8 < T <= 512 the same kernel as a 32 x 64 tile (8 warps along tokens, one
 * 32-row pair of m16 tiles each; only threads < 128 stage weights) with K split across gridDim.z
 * so that ~3 blocks per SM have work; each split writes raw f32 sums to scratch [split][T][N] and
 * the last block of a tile to arrive (threadfence + a counter per tile, reset by it; or the
 * k_mma_reduce kernel) sums them in split order and applies the epilogue. Per-value arithmetic is
 * unchanged; results differ from the unsplit path only in the f32 summation order across splits.
 * Traffic of the split: 2 x split x T x N x 4 bytes of partials through L2 (T 64: 3.2 MB for the
 * N 896 Q/O, 6 MB for the down projection; well under 1 us of L2 bandwidth spread over the GPU)
 * against 0.55-3.6 MB of weights per GEMM; the reducing block reads split x 8 KB (two splits'
 * loads, 16 per thread, in flight at once) as the tile's serial tail.
 * Needs sm_80+ (mma.sync s8); the launcher refuses older devices (k_mmq stays the fallback).
 * Segments (cu_matmul_mma_multi, ma_segs): up to CU_MULTI_MAX matrices of one type (or two that
 * cu_mma_pair takes) over the same activations in one launch — the grid's x tiles split between
 * them, each block computing exactly what the matrix's own launch would (the executor's prefill
 * gate/up and K/V/Q groups); split where every member splits alike (ma_small_split).
 * Paired gate/up (cu_matmul_mma_multi pair_glu; Q4_0 / Q5_0 / Q8_0, never split): one segment of
 * row pairs, each warp's two m16 tiles the gate and the up of the same 16 rows, so the epilogue
 * writes act(gate) * up — cu_glu_quant's f32 values, bit for bit — and the GLU_QUANT after it only
 * quantizes (H200, Qwen2.5-0.5B Q4_K_M: pp64 +2.6%, pp512 +0.9%).
 * Tested against: op_matmul (f64) and the CPU executor's q8_K path in tests/runtime/test_cuda_ops.c
 * (test_mma_groups: the executor's groups vs the same GEMMs unfused; test_mma_glu_pair: the paired
 * launch vs the unpaired group, byte for byte).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/mma_tile.cuh"

static int mma_sms = 0, mma_cc = -1; /* device properties, read once */

extern "C" void cu_mma_forget_device(void) { mma_cc = -1, mma_sms = 0; } /* cu_assume_device: read them again */
extern "C" bool cu_mma_on(void) { return cu_cfg()->mmq == 4; }
extern "C" int64_t cu_mma_min_t(void) { return cu_cfg()->mma_min_t; }



template <int TYPE, int XQ, int BN, int BT, bool SPLIT, int TYPE2 = TYPE>
static sb_status mma_go(ma_segs sg, unsigned gz, cudaStream_t s, uint64_t rb, int64_t K, const uint8_t *x, int64_t T, int spb, float *part,
                        unsigned *cnt) {
    const dim3 grid(ma_tiles(&sg, BN), cu_div_up(T, BT), gz);
    cu_launch(k_mma<TYPE, XQ, BN, BT, SPLIT, TYPE2>, grid, 256, s, sg, rb, K, x, T, spb, part, cnt);
    return cu_after_launch(SPLIT ? "k_mma (split K)" : "k_mma");
}

/* tile choice (mma_tile 0; measured on the H200, bench/NOTES.md): 128 x 64 when that grid fills
 * the GPU's block slots (2 per SM) at least once, else 64 x 64 when it gives half an SM's worth of
 * blocks per SM, else 64 x 32; mma_tile 1, 2, 3 force 128 x 64, 64 x 64, 64 x 32 */
template <int TYPE, int XQ, int TYPE2 = TYPE>
static sb_status launch_mma(cudaStream_t s, ma_segs sg, uint64_t rb, int64_t K, const uint8_t *x, int64_t T) {
    if (!mma_sms) mma_sms = cu_sm_count();
    const int64_t slots = 2 * (int64_t)mma_sms;
    const int tile = cu_cfg()->mma_tile ? cu_cfg()->mma_tile
                     : (int64_t)ma_tiles(&sg, 128) * cu_div_up(T, 64) >= slots ? 1
                     : (int64_t)ma_tiles(&sg, 64) * cu_div_up(T, 64) >= slots / 4 ? 2
                                                                                  : 3;
    if (tile == 1) return mma_go<TYPE, XQ, 128, 64, false, TYPE2>(sg, 1, s, rb, K, x, T, 0, NULL, NULL);
    if (tile == 2) return mma_go<TYPE, XQ, 64, 64, false, TYPE2>(sg, 1, s, rb, K, x, T, 0, NULL, NULL);
    return mma_go<TYPE, XQ, 64, 32, false, TYPE2>(sg, 1, s, rb, K, x, T, 0, NULL, NULL);
}

/* ---- the small-T path (cu_matmul_mma_small; default mode 2 for T <= 512, SB_TUNE=mma_small) ----
 * For T <= mma_small_tmax (default 512; with 256: H200, Qwen2.5-0.5B Q4_K_M, mode 2 against the tiles
 * above: pp64 27.7k vs 13.7k tok/s, pp128 44.8k vs 23.9k, pp256 56.7k vs 40.2k; first token
 * after a cached 512 + 64 new 3.14 vs 5.48 ms; mode 1's last-block reduction measured slower
 * than mode 2's separate k_mma_reduce) the tiles above leave
 * most SMs idle: at T 64 the N 896 matrices of Qwen2.5-0.5B give 14 blocks of 64 x 64 on 132 SMs,
 * K/V (N 128) 2, the down projection (N 896, K 4864) 14 blocks of 38 K steps each. Rule here:
 * tile 32 rows x 64 tokens (one m16 pair per warp, 8 warps along tokens; <= 80 registers, so 3
 * blocks per SM); grid0 = ceil(N/32) x ceil(T/64) tiles; with S = 3 x SMs block slots and
 * steps = ceil(K / 128) K steps:
 *   grid0 >= S: launch_mma's tiles (the GPU is full already; e.g. an LM head over T tokens), else
 *   split = min(steps, S / grid0, MMA_SPLIT_MAX), then evened out
 *   (steps_per = ceil(steps / split), split = ceil(steps / steps_per): no empty split);
 *   split = 1 also when the scratch cannot hold split x T x N floats.
 * H200 (132 SMs, S 396), T 64: Q/O (N 896, K 896) 28 tiles x 7 splits of 1 step = 196 blocks
 * (was 14 blocks of 7 steps); K/V (N 128) 4 x 7 = 28 (was 2); gate/up (N 4864, K 896) 152 x 2
 * splits of 4 steps = 304 (was 76 of 7); down (N 896, K 4864) 28 x 13 splits of 3 steps = 364
 * (was 14 of 38). Partials: split x T x N f32 (3 MB at most here, L2-resident), written once
 * and read once by the last block of each tile (counters) or k_mma_reduce (no counters, or more
 * tiles than CU_ATT_COUNTERS). */
#define MMA_SMALL_T 512 /* default T limit of the small path (H200 pp512: 56,971 vs 53,414 with 256) */


extern "C" int cu_mma_small_mode(void) { return cu_cfg()->mma_small; }



/* the small path's tiles by T (there the MMAs wait on their weights' loads, so each tile stages as
 * many weight sub-blocks a K step as its warps' MMAs can use, and K is split to fill the GPU):
 * - T <= 8 (a step of 3 to 8 decoding sequences): 256 rows x 8 tokens (8 warps along rows, one
 *   m16n8 pair each), 1,024 weight sub-blocks a K step;
 * - 8 < T <= 32: 128 x 32 (4 warps along rows, 2 along tokens, two pairs each), 512 sub-blocks;
 * - 32 < T <= 64: 128 x 64 (four pairs each); above 64, 32 x 64.
 * H100, Llama-3.1-8B Q4_K gate/up: T 8 51 us (dp4a token tiles 128, 32 x 64 136); T 16 82 us (148),
 * T 32 89 (172), T 64 131 (225). */
#define MA_DEC_BN 256
#define MA_DEC_BT 8
#define MA_MID_BN 128
static bool ma_dec_tile(int64_t T) { return T <= MA_DEC_BT; }
/* the 128-row tile's tokens for T, 0: not one */
static int ma_mid_tile(int64_t T) { return T <= MA_DEC_BT ? 0 : T <= 32 ? 32 : T <= 64 ? 64 : 0; }
static int ma_small_bn(int64_t T) { return ma_dec_tile(T) ? MA_DEC_BN : ma_mid_tile(T) ? MA_MID_BN : 32; }
static int ma_small_bt(int64_t T) { return ma_dec_tile(T) ? MA_DEC_BT : ma_mid_tile(T) ? ma_mid_tile(T) : 64; }

/* splits of K (>= 1) and sub-blocks per split for (K, N, T) under the rule above, scratch_floats
 * of scratch available; with mma_split_waves (default) the split that minimizes waves of blocks
 * (grid0 x split over the slots) x (K steps a block + 1) plus 2 steps for the reduce — the same
 * splits as the one-wave rule at T 64 on the H200, and K split 5 ways instead of not at all for the
 * down projection (K 4864, 224 tiles) at T 512 */
static int mma_small_split(int64_t K, int64_t N, int64_t T, uint64_t scratch_floats, int *spb) {
    if (!mma_sms) mma_sms = cu_sm_count();
    const int bn = ma_small_bn(T), bt = ma_small_bt(T);
    const int64_t slots = MA_MINB(bn) * (int64_t)mma_sms, nsb = K / 32, steps = (nsb + MA_KB - 1) / MA_KB;
    const int64_t grid0 = (int64_t)cu_div_up(N, bn) * cu_div_up(T, bt);
    int64_t split = 1;
    if (cu_cfg()->mma_split_waves) { /* the split of fewest waves x (steps a block + 1), a reduce counted as 2 steps */
        for (int64_t s = 1, best = INT64_MAX; s <= steps && s <= MMA_SPLIT_MAX; s++) {
            int sb = 0;
            const int64_t se = ma_split_steps(nsb, s, &sb), per = sb / MA_KB;
            const int64_t cost = (grid0 * se + slots - 1) / slots * (per + 1) + (se > 1 ? 2 : 0);
            if (cost < best) best = cost, split = se;
        }
    } else { /* the most splits that keep the blocks to one wave */
        split = grid0 >= slots ? 1 : slots / grid0;
        if (split > steps) split = steps;
        if (split > MMA_SPLIT_MAX) split = MMA_SPLIT_MAX;
        if (split < 1) split = 1;
    }
    int sb = 0;
    split = ma_split_steps(nsb, split, &sb);
    if ((uint64_t)split * (uint64_t)N * (uint64_t)T > scratch_floats) split = 1, sb = (int)nsb;
    *spb = sb;
    return (int)split;
}

extern "C" uint64_t cu_mma_small_scratch(int64_t K, int64_t N, int64_t T) {
    if (T > cu_cfg()->mma_small_tmax || T <= 0 || N <= 0 || K < 32) return 0;
    int spb = 0;
    const int split = mma_small_split(K, N, T, UINT64_MAX, &spb);
    return split > 1 ? (uint64_t)split * (uint64_t)N * (uint64_t)T : 0;
}

/* the K split of one small-T launch (>= 1) and its sub-blocks a split (*spb), or 0: not one launch.
 * One segment: mma_small_split. Several (a prefill plan's gate/up, Q/K): unsplit where their tiles
 * together do not split; else their common split — the split each would take alone, so each result
 * has the bits of its own launch (Q/K at T 64 on the H200: 7 each) — where the scratch holds
 * split x T x sum N floats (sg->poff: each segment's partials after the earlier ones'); 0 where the
 * members would split differently or the scratch is short (the caller then launches them one by one) */

static int ma_small_split(ma_segs *sg, int64_t K, int64_t T, uint64_t scratch_floats, int *spb) {
    const int bn = ma_small_bn(T);
    const int64_t N = bn * (int64_t)ma_tiles(sg, bn); /* the rows the tiles cover */
    for (int q = 0; q < CU_MULTI_MAX; q++) sg->poff[q] = 0;
    /* one segment: its own rows, as cu_mma_small_scratch sizes the partials (split x T x N floats;
     * the tiles' rows ask for more where N is no multiple of the tile's — the 256-row decode tile
     * and a 896-row matrix — and the launch then fell back to no split where the scratch was sized
     * exactly: slower, and other bits than the same matrix in a group) */
    if (sg->n == 1) return mma_small_split(K, sg->pair_glu ? 2 * sg->N[0] : sg->N[0], T, scratch_floats, spb); /* pairs: 2 rows each */
    if (mma_small_split(K, N, T, UINT64_MAX, spb) == 1) return 1;
    if (!cu_cfg()->mma_group_split) return 0;
    int split = 0, per = 0;
    uint64_t off = 0;
    for (int q = 0; q < sg->n; q++) {
        int pq = 0;
        const int sq = mma_small_split(K, bn * cu_div_up(sg->N[q], bn), T, UINT64_MAX, &pq);
        if (q > 0 && (sq != split || pq != per)) return 0;
        split = sq, per = pq;
        sg->poff[q] = (int64_t)off;
        off += (uint64_t)sq * (uint64_t)T * (uint64_t)sg->N[q];
    }
    if (off > scratch_floats) return 0;
    *spb = per;
    return split;
}

/* one small-path launch in tile BN x BT: unsplit, or split K ways with the reduce its partials need */
template <int TYPE, int XQ, int BN, int BT, int TYPE2 = TYPE>
static sb_status small_go(cudaStream_t s, ma_segs sg, uint64_t rb, int64_t K, const uint8_t *x, int64_t T, int split, int spb, float *scratch,
                          unsigned *counters, cu_split_src *srcs) {
    if (split == 1) return mma_go<TYPE, XQ, BN, BT, false, TYPE2>(sg, 1, s, rb, K, x, T, 0, NULL, NULL);
    const unsigned tiles = ma_tiles(&sg, BN) * cu_div_up(T, BT);
    unsigned *cnt = counters && !srcs && tiles <= CU_ATT_COUNTERS ? counters : NULL;
    sb_status r = mma_go<TYPE, XQ, BN, BT, true, TYPE2>(sg, (unsigned)split, s, rb, K, x, T, spb, scratch, cnt);
    if (r != SB_OK || cnt) return r;
    if (srcs) { /* the consumer sums the partials itself (and so could not flag a non-finite sum) */
        for (int q = 0; q < sg.n; q++)
            if (sg.ep[q].nonfinite) return sb_fail(SB_ERR_INTERNAL, "cuda: a non-finite flag on GEMM partials left to their consumer");
        for (int q = 0; q < sg.n; q++) srcs[q] = cu_split_src{scratch + sg.poff[q], split, T * sg.N[q], sg.N[q], sg.ep[q]};
        return SB_OK;
    }
    int64_t outs = 0;
    for (int q = 0; q < sg.n; q++) outs += sg.N[q] * T;
    cu_launch(k_mma_reduce, dim3(cu_div_up(outs, 256)), 256, s, sg, (const float *)scratch, T, split);
    return cu_after_launch("k_mma_reduce");
}

template <int TYPE, int XQ, int TYPE2 = TYPE>
static sb_status launch_mma_small(cudaStream_t s, ma_segs sg, uint64_t rb, int64_t K, const uint8_t *x, int64_t T, float *scratch,
                                  uint64_t scratch_floats, unsigned *counters, cu_split_src *srcs) {
    int spb = 0;
    const int split = ma_small_split(&sg, K, T, scratch ? scratch_floats : 0, &spb);
    if (split < 1) return sb_fail(SB_ERR_INTERNAL, "cuda: %d GEMM segments that split K differently in one launch", sg.n);
    if (split > 1 && sg.pair_glu) return sb_fail(SB_ERR_INTERNAL, "cuda: a paired gate/up GEMM that splits K (%d ways)", split);
    if (ma_dec_tile(T)) return small_go<TYPE, XQ, MA_DEC_BN, MA_DEC_BT, TYPE2>(s, sg, rb, K, x, T, split, spb, scratch, counters, srcs);
    if (ma_mid_tile(T) == 32) return small_go<TYPE, XQ, MA_MID_BN, 32, TYPE2>(s, sg, rb, K, x, T, split, spb, scratch, counters, srcs);
    if (ma_mid_tile(T) == 64) return small_go<TYPE, XQ, MA_MID_BN, 64, TYPE2>(s, sg, rb, K, x, T, split, spb, scratch, counters, srcs);
    if (split == 1 && (int64_t)ma_tiles(&sg, 32) * cu_div_up(T, 64) >= MA_MINB(32) * (int64_t)mma_sms) /* the 32-row tiles fill the GPU: the usual tiles */
        return launch_mma<TYPE, XQ, TYPE2>(s, sg, rb, K, x, T);
    return small_go<TYPE, XQ, 32, 64, TYPE2>(s, sg, rb, K, x, T, split, spb, scratch, counters, srcs);
}

/* small: NULL = the tiles of launch_mma; else the small-T path where T <= mma_small_tmax */
typedef struct mma_small_args {
    float *scratch;
    uint64_t scratch_floats;
    unsigned *counters;
    cu_split_src *srcs; /* non-NULL: a split leaves its partials unreduced, described here per segment */
} mma_small_args;

template <int TYPE, int XQ, int TYPE2 = TYPE>
static sb_status launch_any(cudaStream_t s, const ma_segs &sg, uint64_t rb, int64_t K, const uint8_t *x, int64_t T, const mma_small_args *sm) {
    if (sm && T <= cu_cfg()->mma_small_tmax) return launch_mma_small<TYPE, XQ, TYPE2>(s, sg, rb, K, x, T, sm->scratch, sm->scratch_floats, sm->counters, sm->srcs);
    return launch_mma<TYPE, XQ, TYPE2>(s, sg, rb, K, x, T);
}

/* two weight types one launch may mix: Q4_0 or Q5_0 beside Q8_0 on q8_1 activations (a Q4_K_M file's
 * V beside its K and Q where rows are not 256-multiples); each block decodes its segment's own type */
extern "C" bool cu_mma_pair(int a, int b, int xtype) {
    if (a == b) return true;
    const bool la = a == CU_T_Q4_0 || a == CU_T_Q5_0, lb = b == CU_T_Q4_0 || b == CU_T_Q5_0;
    return xtype == CU_T_Q8_1 && ((la && b == CU_T_Q8_0) || (lb && a == CU_T_Q8_0));
}

/* every dp4a weight type but Q2_K (two scales and two mins a sub-block); the K-quants Q3_K / IQ4_XS
 * only on their q8_K activations (q8_1 there is cu_config.act_q8_1's diagnostic: k_mmq takes it) */
extern "C" bool cu_has_mma(int wtype, int xtype) {
    if (mma_cc < 0) mma_cc = cu_cc_major();
    if (mma_cc < 8) return false;
    const bool kq = wtype == CU_T_Q4_K || wtype == CU_T_Q5_K || wtype == CU_T_Q6_K;
    if (xtype == CU_T_Q8_K) return kq || wtype == CU_T_Q3_K || wtype == CU_T_IQ4_XS;
    return xtype == CU_T_Q8_1 && (kq || wtype == CU_T_Q4_0 || wtype == CU_T_Q5_0 || wtype == CU_T_Q8_0 || wtype == CU_T_Q4_1 ||
                                  wtype == CU_T_Q5_1 || wtype == CU_T_IQ4_NL);
}

static sb_status matmul_mma(cu_stream s, const ma_segs &sg, int wtype, int64_t K, const void *xq, int xtype, int64_t T, const mma_small_args *sm) {
    if (T <= 0) return SB_OK;
    if (!cu_has_mma(wtype, xtype))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: no int8 MMA GEMM for weight type %d x activation type %d (compute capability %d)", wtype,
                       xtype, mma_cc);
    if (K % 32 || (xtype == CU_T_Q8_K && K % 256) || (mmvq_k_type(wtype) && K % 256))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: int8 MMA GEMM with K %lld (a multiple of the block size)", (long long)K);
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *x = (const uint8_t *)xq;
    int w2 = wtype; /* a second type (cu_mma_pair): the legacy one leads, Q8_0 segments are TYPE2's */
    for (int q = 0; q < sg.n; q++)
        if (sg.wt[q] != wtype) w2 = sg.wt[q];
    if (w2 != wtype) {
        if (!cu_mma_pair(wtype, w2, xtype)) return sb_fail(SB_ERR_INTERNAL, "cuda: int8 MMA launch mixing weight types %d and %d", wtype, w2);
        const int lead = wtype == CU_T_Q8_0 ? w2 : wtype;
        ma_segs s2 = sg;
        for (int q = 0; q < sg.n; q++) s2.t2[q] = sg.wt[q] == CU_T_Q8_0;
        s2.rb2 = mmvq_row_bytes(CU_T_Q8_0, K);
        const uint64_t rbl = mmvq_row_bytes(lead, K);
        if (lead == CU_T_Q4_0) return launch_any<CU_T_Q4_0, CU_T_Q8_1, CU_T_Q8_0>(st, s2, rbl, K, x, T, sm);
        return launch_any<CU_T_Q5_0, CU_T_Q8_1, CU_T_Q8_0>(st, s2, rbl, K, x, T, sm);
    }
    const uint64_t rb = mmvq_row_bytes(wtype, K); /* the dp4a GEMVs' types: every type cu_has_mma takes */
    if (xtype == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: return launch_any<CU_T_Q4_0, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q5_0: return launch_any<CU_T_Q5_0, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q8_0: return launch_any<CU_T_Q8_0, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q4_1: return launch_any<CU_T_Q4_1, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q5_1: return launch_any<CU_T_Q5_1, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_IQ4_NL: return launch_any<CU_T_IQ4_NL, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q4_K: return launch_any<CU_T_Q4_K, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        case CU_T_Q5_K: return launch_any<CU_T_Q5_K, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        default: return launch_any<CU_T_Q6_K, CU_T_Q8_1>(st, sg, rb, K, x, T, sm);
        }
    }
    switch (wtype) {
    case CU_T_Q3_K: return launch_any<CU_T_Q3_K, CU_T_Q8_K>(st, sg, rb, K, x, T, sm);
    case CU_T_Q4_K: return launch_any<CU_T_Q4_K, CU_T_Q8_K>(st, sg, rb, K, x, T, sm);
    case CU_T_Q5_K: return launch_any<CU_T_Q5_K, CU_T_Q8_K>(st, sg, rb, K, x, T, sm);
    case CU_T_IQ4_XS: return launch_any<CU_T_IQ4_XS, CU_T_Q8_K>(st, sg, rb, K, x, T, sm);
    default: return launch_any<CU_T_Q6_K, CU_T_Q8_K>(st, sg, rb, K, x, T, sm);
    }
}

static ma_segs ma_one(float *dst, const void *w, int wtype, int64_t N, const cu_epilogue *ep) {
    ma_segs sg = {};
    sg.w[0] = (const uint8_t *)w, sg.dst[0] = dst, sg.N[0] = N, sg.ep[0] = ep ? *ep : cu_epilogue{NULL, 0}, sg.wt[0] = wtype, sg.n = 1;
    return sg;
}

extern "C" sb_status cu_matmul_mma(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype, int64_t T,
                                   const cu_epilogue *ep) {
    if (N <= 0) return SB_OK;
    return matmul_mma(s, ma_one(dst, w, wtype, N, ep), wtype, K, xq, xtype, T, NULL);
}

extern "C" sb_status cu_matmul_mma_small(cu_stream s, float *dst, const void *w, int wtype, int64_t K, int64_t N, const void *xq, int xtype,
                                         int64_t T, const cu_epilogue *ep, float *scratch, uint64_t scratch_floats, unsigned *counters) {
    if (N <= 0) return SB_OK;
    const mma_small_args sm = {scratch, scratch_floats, counters, NULL};
    return matmul_mma(s, ma_one(dst, w, wtype, N, ep), wtype, K, xq, xtype, T, &sm);
}

/* segments of one weight type (or a cu_mma_pair), each with rows, in one launch: 0 where not (the caller launches them
 * one by one), else the launch's split of K (ma_small_split; 1 above the small path's T limit) */
extern "C" int cu_mma_multi_split(const cu_gemv_seg *seg, int n, int64_t K, int xtype, int64_t T, uint64_t scratch_floats) {
    if (n < 1 || n > CU_MULTI_MAX || T < cu_mma_min_t() || !cu_has_mma(seg[0].wtype, xtype)) return 0;
    ma_segs sg = {};
    int w2 = seg[0].wtype;
    for (int q = 0; q < n; q++) {
        if (seg[q].wtype != seg[0].wtype) {
            if ((w2 != seg[0].wtype && seg[q].wtype != w2) || !cu_mma_pair(seg[0].wtype, seg[q].wtype, xtype)) return 0;
            w2 = seg[q].wtype;
        }
        if (seg[q].N <= 0 || seg[q].cache || seg[q].rot) return 0;
        sg.N[q] = seg[q].N;
    }
    sg.n = n;
    if (!cu_cfg()->mma_small || T > cu_cfg()->mma_small_tmax) return 1;
    int spb = 0;
    return ma_small_split(&sg, K, T, scratch_floats, &spb);
}

extern "C" bool cu_mma_glu_pair_ok(int wtype) { return ma_glu_pair_type(wtype); }

extern "C" sb_status cu_matmul_mma_multi(cu_stream s, const cu_gemv_seg *seg, int n, int64_t K, const void *xq, int xtype, int64_t T, float *scratch,
                                         uint64_t scratch_floats, cu_split_src *srcs, int pair_glu) {
    if (srcs) srcs[0].part = NULL; /* unless a split leaves partials */
    if (cu_mma_multi_split(seg, n, K, xtype, T, scratch ? scratch_floats : 0) < 1)
        return sb_fail(SB_ERR_INTERNAL, "cuda: %d GEMM segments that one int8 MMA launch does not take (T %lld)", n, (long long)T);
    ma_segs sg = {};
    for (int q = 0; q < n; q++) sg.w[q] = (const uint8_t *)seg[q].w, sg.dst[q] = seg[q].dst, sg.N[q] = seg[q].N, sg.ep[q] = seg[q].ep, sg.wt[q] = seg[q].wtype;
    sg.n = n;
    if (pair_glu) { /* gate and up as one segment of row pairs (ma_segs.pair_glu) */
        if (n != 2 || seg[0].N != seg[1].N || seg[0].wtype != seg[1].wtype || !cu_mma_glu_pair_ok(seg[0].wtype) || seg[0].ep.add || seg[1].ep.add ||
            seg[0].ep.nonfinite || seg[1].ep.nonfinite)
            return sb_fail(SB_ERR_INTERNAL, "cuda: a paired gate/up GEMM of %d segments, %lld and %lld rows", n, (long long)seg[0].N,
                           (long long)seg[n > 1].N);
        sg.n = 1, sg.pair_glu = pair_glu;
        srcs = NULL;
    }
    const mma_small_args sm = {scratch, scratch ? scratch_floats : 0, NULL, srcs};
    return matmul_mma(s, sg, seg[0].wtype, K, xq, xtype, T, cu_cfg()->mma_small ? &sm : NULL);
}
