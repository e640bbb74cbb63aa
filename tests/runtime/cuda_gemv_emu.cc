/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/cuda_gemv_emu.cc — the T = 1 multi-GEMV kernels (backend/cuda/device/gemv_kernels.cuh:
 * k_gemv_reg, the decode default, and k_gemv_fused, which picks each segment's weight type at run
 * time) built for the host: test_cuda_gemv_emu compiles this file with the host C++ compiler against
 * tests/codegen/emu/cuda_emu.h (-fsanitize=alignment traps) and runs their grids as k_gemv.cu's
 * launchers size them (one wave aside: every block of the grid).
 * sb_emu_gemv_store: a K (RoPE) and a V segment writing their cache rows, as a decode step's Q/K/V
 * launch does, with the rotation position and the cache row given apart (a paged cache's slot).
 */
#include "backend/cuda/device/gemv_kernels.cuh"
#include "emu_layout.h"

template <int XQ, int TYPE, int WPR, int RW, int SPL, bool PAIR> static int reg(mseg_set m, const uint8_t *x, long long K) {
    constexpr int G = 4 / WPR;
    unsigned blocks = 0;
    if (PAIR) {
        blocks = m.s[0].nb = (unsigned)(((m.s[0].N + RW / 2 - 1) / (RW / 2) + G - 1) / G);
        m.s[1].nb = 0;
    } else {
        for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = (unsigned)(((m.s[k].N + RW - 1) / RW + G - 1) / G));
    }
    return emu_run(blocks, 128, [&] { k_gemv_reg<XQ, TYPE, TYPE, WPR, 4, RW, SPL, PAIR>(m, x, K, nullptr); });
}

/* how 0: RW 1, 1: RW 2, 2: gate/up pairs (segments 0 and 1); K > CU_MMVQ_LONG_K: 4 warps a row; SPL
 * sub-blocks a lane as k_gemv.cu's reg_launch1 picks them (2 past 32 a warp, or 128 a 4-warp group) */
template <int XQ, int TYPE, int WPR, int SPL> static int reg_rw(int how, const mseg_set &m, const uint8_t *x, long long K) {
    if (how == 2) return reg<XQ, TYPE, WPR, 2, SPL, true>(m, x, K);
    return how == 1 ? reg<XQ, TYPE, WPR, 2, SPL, false>(m, x, K) : reg<XQ, TYPE, WPR, 1, SPL, false>(m, x, K);
}
template <int XQ, int TYPE> static int reg_any(int how, const mseg_set &m, const uint8_t *x, long long K) {
    const long long nsb = K / 32;
    if (K > CU_MMVQ_LONG_K) {
        return nsb <= 128 ? reg_rw<XQ, TYPE, 4, 1>(how, m, x, K) : reg_rw<XQ, TYPE, 4, 2>(how, m, x, K);
    }
    return nsb <= 32 ? reg_rw<XQ, TYPE, 1, 1>(how, m, x, K) : reg_rw<XQ, TYPE, 1, 2>(how, m, x, K);
}

template <int XQ> static int fused(mseg_set m, const uint8_t *x, long long K, int R) {
    const int wpr = K > CU_MMVQ_LONG_K ? 4 : 1, G = 4 / wpr;
    unsigned blocks = 0;
    for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = (unsigned)((m.s[k].N + (int64_t)G * R - 1) / ((int64_t)G * R)));
    if (wpr == 4) return emu_run(blocks, 128, [&] { k_gemv_fused<XQ, 4, 4>(m, x, K, nullptr, R, 1); });
    return emu_run(blocks, 128, [&] { k_gemv_fused<XQ, 1, 4>(m, x, K, nullptr, R, 1); });
}

/* n segments (weight type, rows, dst, bias-or-NULL each) over one activation x of q8_1 (xq8k 0) or
 * q8_K blocks; mode 0: k_gemv_reg (one type; how as reg_any; glu 1 / 2: SiLU / GELU pairs), 1:
 * k_gemv_fused with R rows a group. -1: a deadlock, -2: a type / activation the kernel does not take */
extern "C" int sb_emu_gemv(int mode, int xq8k, int n, const int *types, const long long *N, float **dst, const uint8_t **w, const float **add,
                           long long K, const uint8_t *x, int how, int glu) {
    mseg_set m = {};
    m.n = n, m.glu = glu;
    for (int k = 0; k < n; k++) {
        mseg &g = m.s[k];
        g.dst = dst[k], g.w = w[k], g.rb = mmvq_row_bytes(types[k], K), g.N = N[k], g.ep = cu_epilogue{add[k], 1}, g.wtype = types[k];
    }
    if (mode == 1) return xq8k ? fused<CU_T_Q8_K>(m, x, K, how) : fused<CU_T_Q8_1>(m, x, K, how);
#define R1(t) \
    if (types[0] == t) return reg_any<CU_T_Q8_1, t>(how, m, x, K);
#define RK(t) \
    if (types[0] == t) return reg_any<CU_T_Q8_K, t>(how, m, x, K);
    if (!xq8k) {
        R1(CU_T_Q4_0) R1(CU_T_Q4_1) R1(CU_T_Q5_0) R1(CU_T_Q5_1) R1(CU_T_Q8_0) R1(CU_T_IQ4_NL)
    } else {
        RK(CU_T_Q2_K) RK(CU_T_Q3_K) RK(CU_T_Q4_K) RK(CU_T_Q5_K) RK(CU_T_Q6_K) RK(CU_T_IQ4_XS)
    }
#undef R1
#undef RK
    return -2;
}

/* Q8_0 weights on q8_1: segment 0 rotated (NEOX, rot of heads of D, theta_scale ts) into kc, segment
 * 1 into vdst and vc; both caches [N, C] of f16 (else f32), row crow[0] (mod ring: a sliding-window ring
 * of that many rows; 0 linear), rotation at pos[0]. mode 0:
 * k_gemv_reg at two rows a group (one: the V segment one row a group), 1: k_gemv_fused, one item a group */
extern "C" int sb_emu_gemv_store(int mode, int one, long long N, long long K, const uint8_t *wk, const uint8_t *wv, const uint8_t *x, void *kc,
                                 void *vc, int f16, float *vdst, const int32_t *crow, const int32_t *pos, int rot, int D, float ts,
                                 long long ring) {
    mseg_set m = {};
    m.n = 2, m.one = one;
    const uint64_t rb = mmvq_row_bytes(CU_T_Q8_0, K);
    mseg &k = m.s[0], &v = m.s[1];
    k.w = wk, k.rb = rb, k.N = N, k.cache = kc, k.crow = crow, k.wtype = CU_T_Q8_0, k.f16 = f16, k.rot = rot, k.rmode = 2, k.D = D;
    k.ts = ts, k.fs = 1.0f, k.af = 1.0f, k.ring = ring, v.ring = ring;
    v.dst = vdst, v.w = wv, v.rb = rb, v.N = N, v.cache = vc, v.crow = crow, v.wtype = CU_T_Q8_0, v.f16 = f16;
    const long long kitems = N / D * (rot / 2 + D - rot);
    if (mode == 1) {
        k.nb = (unsigned)((kitems + 3) / 4), v.nb = (unsigned)((N + 3) / 4);
        return emu_run(k.nb + v.nb, 128, [&] { k_gemv_fused<CU_T_Q8_1, 1, 4>(m, x, K, pos, 1, 1); });
    }
    k.nb = (unsigned)((N / D * (rot / 2) + (N / D * (D - rot) + 1) / 2 + 3) / 4), v.nb = (unsigned)((one ? N : (N + 1) / 2) + 3) / 4;
    if (K / 32 <= 32) return emu_run(k.nb + v.nb, 128, [&] { k_gemv_reg<CU_T_Q8_1, CU_T_Q8_0, CU_T_Q8_0, 1, 4, 2, 1, false>(m, x, K, pos); });
    return -2;
}
