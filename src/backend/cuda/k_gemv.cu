/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_gemv.cu — cu_matmul_q8_multi: several T = 1 GEMVs over one activation in one
 * launch (Q/K/V, gate/up; or one matrix), with per-segment epilogues (bias / residual add, KV-cache column, K's RoPE by rotation pairs), and an
 * FFN's gate and up as row pairs writing act(gate) * up (k_gemv_reg PAIR).
 * Each row is the warp (or 4-warp) dot of device/gemv_dot.cuh, so results equal k_mmvq.cu's.
 * Traffic: the weights once (into registers or L2 before the PDL wait), the activation from L2 per
 * block (K values). The RMSNorm / GLU quantization as a prologue every block redoes was built and
 * measured slower three times (sessions 3, 4 and 11, bench/NOTES.md) and removed.
 * Tested against: the CPU reference ops and the unfused path (tests/runtime/test_cuda_ops.c:
 * multi-GEMV, the Q/K/V + RoPE + attention block, GLU pairs) and every test model (gpu.sh's
 * knob runs).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/gemv_kernels.cuh"

#include <string.h>

static int gf_sms = 0; /* multiprocessors (blocks per launch target), read once */

/* blocks of kernel k a multiprocessor holds at once (registers, shared memory), read once */
template <typename K> static int gf_occupancy(K k, int threads, int *cache) {
    if (*cache <= 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0) != cudaSuccess || n < 1) n = 1;
        *cache = n;
    }
    return *cache;
}

/* launch with R items per row group (gf_rows; 1: one item a group, the most blocks — k_mmvq's shape;
 * fewer, longer-running blocks measured slower) */
template <int XQ, int WPR, int NW>
static void gf_launch1(cudaStream_t st, mseg_set m, const int64_t *items, const uint8_t *xq, int64_t K, const int32_t *pos) {
    constexpr int G = NW / WPR;
    const int R = cu_cfg()->gf_rows;
    unsigned blocks = 0;
    for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = cu_div_up(items[k], (int64_t)G * R));
    cu_launch(k_gemv_fused<XQ, WPR, NW>, blocks, NW * 32, st, m, xq, K, pos, R, cu_cfg()->gf_prefetch);
}

template <int XQ>
static void gf_launch(int wpr, cudaStream_t st, const mseg_set &m, const int64_t *items, const uint8_t *xq, int64_t K, const int32_t *pos) {
    if (cu_cfg()->gf_warps != 8) { /* 128-thread blocks (k_mmvq's shape) */
        if (wpr == 4) gf_launch1<XQ, 4, 4>(st, m, items, xq, K, pos);
        else gf_launch1<XQ, 1, 4>(st, m, items, xq, K, pos);
    } else {
        if (wpr == 4) gf_launch1<XQ, 4, 8>(st, m, items, xq, K, pos);
        else gf_launch1<XQ, 1, 8>(st, m, items, xq, K, pos);
    }
}

// ---- registers-before-the-wait launch ----

#define REG_NW 4

/* row groups of segment g at RW rows a group (one: the other segments' single rows beside a RoPE
 * segment at RW == 2): a RoPE segment's rotation pairs, then its unrotated rows two at a time */
static int64_t reg_groups(const mseg &g, int RW, bool one) {
    if (g.rot > 0) return g.N / g.D * (g.rot / 2) + (g.N / g.D * (g.D - g.rot) + 1) / 2;
    return one ? g.N : (g.N + RW - 1) / RW;
}

template <int XQ, int TYPE, int TYPE2, int WPR, int RW, int SPL, bool PAIR>
static void reg_launch3(cudaStream_t st, mseg_set m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    constexpr int G = REG_NW / WPR;
    unsigned blocks = 0;
    if (PAIR) { /* one range of blocks: RW/2 gate/up row pairs a group */
        blocks = m.s[0].nb = cu_div_up(cu_div_up(m.s[0].N, (int64_t)(RW / 2)), (int64_t)G);
        m.s[1].nb = 0;
    } else {
        for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = cu_div_up(reg_groups(m.s[k], RW, m.one), G));
    }
    cu_launch(k_gemv_reg<XQ, TYPE, TYPE2, WPR, REG_NW, RW, SPL, PAIR>, blocks, REG_NW * 32, st, m, xq, K, pos);
}

/* R0 rows a group (1; a PAIR launch 2: one gate/up pair) when that fits one wave of resident
 * blocks, else twice that */
template <int XQ, int TYPE, int TYPE2, int WPR, int SPL, bool PAIR = false>
static void reg_launch2(cudaStream_t st, const mseg_set &m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    constexpr int R0 = PAIR ? 2 : 1, G = REG_NW / WPR;
    static int occ;
    const int res = gf_occupancy(k_gemv_reg<XQ, TYPE, TYPE2, WPR, REG_NW, R0, SPL, PAIR>, REG_NW * 32, &occ);
    int64_t groups = 0; /* of R0 rows */
    bool rot = false;
    if (PAIR) groups = m.s[0].N;
    else
        for (int k = 0; k < m.n; k++) groups += m.s[k].N, rot |= m.s[k].rot > 0;
    if (cu_div_up(groups, (int64_t)G) <= (int64_t)res * gf_sms && !rot) {
        reg_launch3<XQ, TYPE, TYPE2, WPR, R0, SPL, PAIR>(st, m, xq, K, pos);
    } else {
        /* two rows a group for a RoPE segment's pairs; the other segments keep one where that still
         * fits one wave (a Q/K/V launch: 272 blocks instead of 144 for Qwen2.5-0.5B) */
        mseg_set m2 = m;
        if (!PAIR && rot && cu_cfg()->gemv_reg_one) {
            static int occ2;
            const int res2 = gf_occupancy(k_gemv_reg<XQ, TYPE, TYPE2, WPR, REG_NW, 2 * R0, SPL, PAIR>, REG_NW * 32, &occ2);
            int64_t b1 = 0;
            for (int k = 0; k < m.n; k++) b1 += cu_div_up(reg_groups(m.s[k], 2, true), (int64_t)G);
            m2.one = b1 <= (int64_t)res2 * gf_sms;
        }
        reg_launch3<XQ, TYPE, TYPE2, WPR, 2 * R0, SPL, PAIR>(st, m2, xq, K, pos);
    }
}

/* a warp a row up to CU_MMVQ_LONG_K, four past it (k_mmvq1 / k_mmvq_long's rows); one or two
 * sub-blocks a lane */
template <int XQ, int TYPE, int TYPE2, bool PAIR>
static void reg_launch_rows(cudaStream_t st, const mseg_set &m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    const int nsb = (int)(K / 32);
    if (K <= CU_MMVQ_LONG_K) {
        if (nsb <= 32) reg_launch2<XQ, TYPE, TYPE2, 1, 1, PAIR>(st, m, xq, K, pos);
        else reg_launch2<XQ, TYPE, TYPE2, 1, 2, PAIR>(st, m, xq, K, pos);
    } else {
        if (nsb <= 128) reg_launch2<XQ, TYPE, TYPE2, 4, 1, PAIR>(st, m, xq, K, pos);
        else reg_launch2<XQ, TYPE, TYPE2, 4, 2, PAIR>(st, m, xq, K, pos);
    }
}

template <int XQ, int TYPE, int TYPE2 = TYPE>
static void reg_launch1(cudaStream_t st, const mseg_set &m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    if (m.glu) reg_launch_rows<XQ, TYPE, TYPE, true>(st, m, xq, K, pos); /* reg_fits: one weight type */
    else reg_launch_rows<XQ, TYPE, TYPE2, false>(st, m, xq, K, pos);
}

/* the second weight type a launch may mix with its first (reg_fits; reg_launch): the Q/K/V pairs of
 * the usual K-quant mixes — Q4_K_M / Q5_K_M give V (and some layers' other tensors) Q6_K, and their
 * fallbacks for rows that are not 256-multiples give Q5_0 with Q8_0 */
static int reg_type2(int t) {
    if (!cu_cfg()->gemv_reg_mix) return -1;
    switch (t) {
    case CU_T_Q5_0: return CU_T_Q8_0;
    case CU_T_Q4_K: case CU_T_Q5_K: return CU_T_Q6_K;
    default: return -1;
    }
}

/* REG applies: on, one weight type with a dp4a path for xtype (or its reg_type2 beside it), K within
 * two sub-blocks a lane (K <= 8192) */
static bool reg_fits(const cu_gemv_seg *seg, int n, int64_t K, int xtype, bool pair) {
    if (!cu_cfg()->gemv_reg || n < 1 || K > 8192 || K % 32) return false;
    if (pair && (n != 2 || seg[1].wtype != seg[0].wtype || seg[0].N != seg[1].N || seg[0].cache ||
                 seg[1].cache || seg[0].rot > 0 || seg[1].rot > 0))
        return false;
    const bool kq = mmvq_k_type(seg[0].wtype);
    if (xtype == CU_T_Q8_K ? !kq : kq) return false; /* k-quants on q8_1 (SB_TUNE=act_q8_1=1) take k_gemv_fused */
    for (int k = 0; k < n; k++) /* one type, or the first one's reg_type2 */
        if ((seg[k].wtype != seg[0].wtype && seg[k].wtype != reg_type2(seg[0].wtype)) || !mmvq_row_bytes(seg[k].wtype, K))
            return false;
    return true; /* RoPE segments: cu_matmul_q8_multi validated them (cache, D | N, even rot <= D) */
}

static sb_status reg_launch(cudaStream_t st, const mseg_set &m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    const int wtype = m.s[0].wtype;
    bool mixed = false;
    for (int k = 1; k < m.n; k++) mixed |= m.s[k].wtype != wtype;
    switch (wtype) {
    case CU_T_Q4_0: reg_launch1<CU_T_Q8_1, CU_T_Q4_0>(st, m, xq, K, pos); break;
    case CU_T_Q4_1: reg_launch1<CU_T_Q8_1, CU_T_Q4_1>(st, m, xq, K, pos); break;
    case CU_T_Q5_1: reg_launch1<CU_T_Q8_1, CU_T_Q5_1>(st, m, xq, K, pos); break;
    case CU_T_IQ4_NL: reg_launch1<CU_T_Q8_1, CU_T_IQ4_NL>(st, m, xq, K, pos); break;
    case CU_T_Q2_K: reg_launch1<CU_T_Q8_K, CU_T_Q2_K>(st, m, xq, K, pos); break;
    case CU_T_Q3_K: reg_launch1<CU_T_Q8_K, CU_T_Q3_K>(st, m, xq, K, pos); break;
    case CU_T_IQ4_XS: reg_launch1<CU_T_Q8_K, CU_T_IQ4_XS>(st, m, xq, K, pos); break;
    case CU_T_Q5_0:
        if (mixed) reg_launch1<CU_T_Q8_1, CU_T_Q5_0, CU_T_Q8_0>(st, m, xq, K, pos);
        else reg_launch1<CU_T_Q8_1, CU_T_Q5_0>(st, m, xq, K, pos);
        break;
    case CU_T_Q8_0: reg_launch1<CU_T_Q8_1, CU_T_Q8_0>(st, m, xq, K, pos); break;
    case CU_T_Q4_K:
        if (mixed) reg_launch1<CU_T_Q8_K, CU_T_Q4_K, CU_T_Q6_K>(st, m, xq, K, pos);
        else reg_launch1<CU_T_Q8_K, CU_T_Q4_K>(st, m, xq, K, pos);
        break;
    case CU_T_Q5_K:
        if (mixed) reg_launch1<CU_T_Q8_K, CU_T_Q5_K, CU_T_Q6_K>(st, m, xq, K, pos);
        else reg_launch1<CU_T_Q8_K, CU_T_Q5_K>(st, m, xq, K, pos);
        break;
    case CU_T_Q6_K: reg_launch1<CU_T_Q8_K, CU_T_Q6_K>(st, m, xq, K, pos); break;
    default: return sb_fail(SB_ERR_INTERNAL, "cuda: REG GEMV of weight type %d", wtype);
    }
    return cu_after_launch("k_gemv_reg");
}

extern "C" bool cu_gemv_reg_fits(const cu_gemv_seg *seg, int n, int64_t K, int xtype, bool pair_glu) { return reg_fits(seg, n, K, xtype, pair_glu); }

extern "C" sb_status cu_matmul_q8_multi(cu_stream s, const cu_gemv_seg *seg, int n, int64_t K, const void *xq, int xtype, const int32_t *pos,
                                        int glu) {
    if (n < 1 || n > CU_MULTI_MAX) return sb_fail(SB_ERR_INTERNAL, "cuda: %d GEMV segments (1..%d)", n, CU_MULTI_MAX);
    if (glu && !reg_fits(seg, n, K, xtype, true))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: gate/up pairs (%d segments, K = %lld) that k_gemv_reg does not take", n, (long long)K);
    if (!xq) return sb_fail(SB_ERR_INTERNAL, "cuda: multi-GEMV without an activation");
    const int wpr = K > CU_MMVQ_LONG_K ? 4 : 1;
    if (!gf_sms) gf_sms = cu_sm_count() > 0 ? cu_sm_count() : 132;
    mseg_set m;
    memset(&m, 0, sizeof m);
    m.n = n;
    m.glu = glu;
    int64_t items[CU_MULTI_MAX];
    for (int k = 0; k < n; k++) {
        const int t = seg[k].wtype;
        if (!(xtype == CU_T_Q8_1 ? cu_has_mmvq(t) : xtype == CU_T_Q8_K && mmvq_k_type(t)))
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
        m.s[k] = mseg{seg[k].dst, (const uint8_t *)seg[k].w, mmvq_row_bytes(t, K), seg[k].N, seg[k].ep, seg[k].cache, seg[k].rows ? seg[k].rows : pos, t,
                      seg[k].ctype == CU_T_F16, 0, seg[k].rot, seg[k].rmode, (int)seg[k].D,
                      seg[k].theta_scale, seg[k].freq_scale, seg[k].attn_factor, seg[k].ff, seg[k].ring};
    }
    if (total == 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *x = (const uint8_t *)xq;
    if (reg_fits(seg, n, K, xtype, glu != 0)) return reg_launch(st, m, x, K, pos);
    if (xtype == CU_T_Q8_1) gf_launch<CU_T_Q8_1>(wpr, st, m, items, x, K, pos);
    else gf_launch<CU_T_Q8_K>(wpr, st, m, items, x, K, pos);
    return cu_after_launch("k_gemv_fused");
}
