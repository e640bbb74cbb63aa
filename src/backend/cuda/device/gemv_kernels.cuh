/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/gemv_kernels.cuh — the multi-GEMV kernels (k_gemv_fused, k_gemv_reg) and their
 * per-item helpers; what they compute and how they are launched: k_gemv.cu, whose host code (grid
 * sizing, type dispatch, reg_fits) uses them.
 * Layer 0 (backend/cuda), device code. Also built for the host by tests/runtime/test_cuda_gemv_emu
 * (tests/codegen/emu).
 */
#ifndef SB_BACKEND_CUDA_DEVICE_GEMV_KERNELS_CUH
#define SB_BACKEND_CUDA_DEVICE_GEMV_KERNELS_CUH

#include "backend/cuda/device/gemv_dot.cuh"
#include "backend/cuda/kernels.h"

/* T = 1 GEMVs over one activation in one launch (cu_matmul_q8_multi): Q/K/V, gate/up, or a single
 * matrix. Blocks of 4 (or 8: cu_config.gf_warps) warps; a row group of WPR warps (1, or 4 for K above
 * CU_MMVQ_LONG_K: warp w of the group takes sub-blocks w*32 + lane stepping 128, partials meet in
 * shared memory in warp order — k_mmvq_long's arithmetic) owns one item at a time; a block owns
 * R items per group (interleaved: item0 + g + r*G), grid.x covers every segment's blocks in order.
 * Items: rows, or for a RoPE segment rotation pairs then unrotated rows (K's rope + cache write).
 * Before waiting for the previous kernel (PDL), each block prefetches its weight rows into L2:
 * weights are never written by a kernel, so this overlaps the previous kernel's tail. */
typedef struct mseg {
    float *dst;
    const uint8_t *w;
    uint64_t rb;
    int64_t N;
    cu_epilogue ep;
    void *cache;
    const int32_t *crow; /* with cache: the row written is crow[0] (pos, or a paged cache's slot) */
    int wtype, f16;
    unsigned nb; /* blocks of this segment */
    int rot, rmode, D; /* RoPE before the cache write (rot > 0): items are rotation pairs, then passthrough rows */
    float ts, fs, af;
    const float *ff;
    int64_t ring; /* with cache: a sliding-window ring of this many rows, the row written kv_row(crow[0], ring); 0: linear */
} mseg;
typedef struct mseg_set {
    mseg s[CU_MULTI_MAX];
    int n;
    int glu; /* k_gemv_reg's PAIR launches: 1 SiLU, 2 GELU (segments 0 = gate, 1 = up, paired row by row) */
    int one; /* k_gemv_reg with RW == 2 for a RoPE segment's pairs: the other segments take one row a group */
} mseg_set;

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
#define CU_X(t) \
    case t: return mmvq_part_call<t, XQ>(row, x, K, j0, step);
    switch (wtype) { /* q8_1 or q8_K */
        CU_MMVQ_K_TYPES(CU_X)
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
            CU_MMVQ_Q81_TYPES(CU_X)
        default: break;
        }
    }
#undef CU_X
    return 0.0f; /* unreachable: the launcher checks the types */
}

template <int XQ>
static __device__ __forceinline__ void mmvq_part2_any(int wtype, const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0,
                                                      int step, float *pa, float *pb) {
#define CU_X(t) \
    case t: mmvq_part2_call<t, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    switch (wtype) { /* q8_1 or q8_K */
        CU_MMVQ_K_TYPES(CU_X)
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
            CU_MMVQ_Q81_TYPES(CU_X)
        default: break;
        }
    }
#undef CU_X
    *pa = *pb = 0.0f; /* unreachable: the launcher checks the types */
}

/* row ra (and rb2 >= 0) of segment g dotted with x by a group of WPR warps; every lane of the group
 * gets the sums. red: 2 floats a warp of shared memory (WPR > 1). Called by every thread. */
template <int XQ, int WPR>
static __device__ __forceinline__ void group_dot2(const mseg &g, int64_t ra, int64_t rb2, bool live, const uint8_t *x, int64_t K, float *red,
                                                  float *va, float *vb) {
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, wi = wp % WPR;
    float a = 0.0f, b = 0.0f;
    if (live && rb2 >= 0) {
        mmvq_part2_any<XQ>(g.wtype, g.w + (uint64_t)ra * g.rb, g.w + (uint64_t)rb2 * g.rb, x, K, wi * 32 + lane, WPR * 32,
                           &a, &b);
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
static __device__ __forceinline__ void plain_out(const mseg &g, int64_t n, float v) {
    v = g.ep.add ? v + g.ep.add[n] : v;
    g.dst[n] = v;
    if (g.cache) cache_put(g, kv_row(g.crow[0], g.ring) * g.N + n, v);
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
            const int64_t o = kv_row(g.crow[0], g.ring) * g.N;
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
    if (live && first) plain_out(g, n, v);
}

/* items n0 < n1 of a plain (no RoPE) segment at once: both rows' loads in flight together */
template <int XQ, int WPR>
static __device__ __forceinline__ void mseg_item_pair(const mseg &g, int64_t n0, int64_t n1, const uint8_t *x, int64_t K, float *red) {
    const bool first = (threadIdx.x & 31) == 0 && (threadIdx.x >> 5) % WPR == 0;
    const bool l0 = n0 < g.N, l1 = n1 < g.N;
    float v0, v1;
    group_dot2<XQ, WPR>(g, l0 ? n0 : 0, l1 ? n1 : -1, l0, x, K, red, &v0, &v1);
    if (first && l0) plain_out(g, n0, v0);
    if (first && l1) plain_out(g, n1, v1);
}


template <int XQ, int WPR, int NW>
__global__ void __launch_bounds__(NW * 32) k_gemv_fused(mseg_set m, const uint8_t *x, int64_t K, const int32_t *pos, int R, int prefetch) {
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
    const int grp = (threadIdx.x >> 5) / WPR;
    int r = 0;
    if (g.rot == 0) /* two rows at a time */
        for (; r + 1 < R; r += 2) mseg_item_pair<XQ, WPR>(g, item0 + (int64_t)r * G + grp, item0 + (int64_t)(r + 1) * G + grp, x, K, red);
    for (; r < R; r++) mseg_item<XQ, WPR>(g, item0 + (int64_t)r * G + grp, x, K, pos, red);
}

/* Registers before the wait (REG, the default where it applies: no RoPE segment, every segment of
 * one weight type): a group of WPR warps owns RW consecutive rows; each lane fetches the raw words
 * of its sub-blocks of those rows (cu_fetch: SPL sub-blocks a lane, j = wi*32 + lane + t*32*WPR)
 * into registers BEFORE waiting for the previous kernel — weights are never written, and the
 * bench/cuda_floor.cu stream test measured this form the fastest (1.34 µs a 3.1 MB kernel, vs 1.75
 * with an L2 prefetch and 1.91 with loads after the wait). After the wait: the epilogue operands
 * and the activation sub-blocks are loaded together, then cu_decode + the dp4a sums (mmvq_part's
 * order, so results are k_gemv_fused's bits), warp and group sums, one store. Grids are sized for
 * one wave (RW = 2 when one row a group would need more blocks than the GPU holds). A RoPE
 * segment (K's rotation + cache store, cu_config.fuse_ropek) takes two rows a group: a rotation pair.
 * Segments are of weight type TYPE, or (TYPE2 != TYPE) of TYPE2: a Q/K/V launch whose V has its own
 * type (Q4_K_M files: Q4_K with a Q6_K V, or Q5_0 with Q8_0 where rows are not 256-multiples); the
 * type is uniform within a block (blocks do not straddle segments), so the branch does not diverge.
 * PAIR (an FFN's gate and up, segments 0 and 1 of one N and type): rows u = 2k, 2k + 1 of a group
 * are gate and up row p = gi * RW/2 + k, and act(gate) * up (src_glu's f32 math) goes to segment 0's
 * dst — the GLU the quantizer after the launch then only quantizes (segment 1's dst is not written). */
template <int XQ, int TYPE, int TYPE2> static __device__ __forceinline__ void reg_fetch(int wtype, const uint8_t *row, int j, cu_wraw *r) {
    if (TYPE2 == TYPE || wtype == TYPE) gv_fetch<TYPE, XQ>(row, j, r);
    else gv_fetch<TYPE2, XQ>(row, j, r);
}
template <int XQ, int TYPE, int TYPE2>
static __device__ __forceinline__ void reg_decode(int wtype, const cu_wraw *r, int j, cu_wsub *ws, uint32_t *sc) {
    if (TYPE2 == TYPE || wtype == TYPE) gv_decode<TYPE, XQ>(r, j, ws, sc);
    else gv_decode<TYPE2, XQ>(r, j, ws, sc);
}
template <int XQ, int TYPE, int TYPE2, int WPR, int NW, int RW, int SPL, bool PAIR>
__global__ void __launch_bounds__(NW * 32) k_gemv_reg(mseg_set m, const uint8_t *x, int64_t K, const int32_t *pos) {
    static_assert(TYPE2 == TYPE || (TYPE != CU_T_Q2_K && TYPE2 != CU_T_Q2_K), "k_gemv_reg: Q2_K's sub-block sum only as the one type");
    static_assert(TYPE2 == TYPE || (!gv_q3k<TYPE, XQ>() && !gv_q3k<TYPE2, XQ>()), "k_gemv_reg: Q3_K's units only as the one type");
    __shared__ float red[NW * RW];
    constexpr int G = NW / WPR;
    CU_PDL_LAUNCH();
    unsigned b = blockIdx.x;
    int k = 0;
    while (k + 1 < m.n && b >= m.s[k].nb) b -= m.s[k].nb, k++;
    const mseg &g = m.s[k];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, wi = wp % WPR, grp = wp / WPR;
    const int64_t gi = (int64_t)b * G + grp; /* this group's item */
    const int nsb = (int)(K / 32);
    /* its rows (-1: none). A RoPE segment (K's rotation + cache store; RW == 2, the host's rule):
     * items are rotation pairs of one head (NEOX: rows i, i + rot/2; NORMAL: 2i, 2i + 1), then the
     * unrotated rows past n_rot two at a time — k_gemv_fused's mseg_item, in groups of two rows */
    int64_t row[RW];
    int pi = -1;
    if (PAIR) {
#pragma unroll
        for (int u = 0; u < RW; u++) row[u] = gi * (RW / 2) + u / 2 < m.s[0].N ? gi * (RW / 2) + u / 2 : -1;
    } else if (RW == 2 && g.rot > 0) {
        const int half = g.rot / 2, pass = g.D - g.rot;
        const int64_t np = g.N / g.D * half, nr = g.N / g.D * pass;
        if (gi < np) {
            const int64_t h = gi / half;
            pi = (int)(gi % half);
            row[0] = h * g.D + (g.rmode == 2 ? pi : 2 * pi);
            row[RW - 1] = h * g.D + (g.rmode == 2 ? pi + half : 2 * pi + 1);
        } else {
#pragma unroll
            for (int u = 0; u < RW; u++) {
                const int64_t q = (gi - np) * 2 + u;
                row[u] = q < nr ? q / pass * g.D + g.rot + q % pass : -1;
            }
        }
    } else if (RW == 2 && m.one) {
        row[0] = gi < g.N ? gi : -1;
        row[1] = -1;
    } else {
#pragma unroll
        for (int u = 0; u < RW; u++) row[u] = gi * RW + u < g.N ? gi * RW + u : -1;
    }
    cu_wraw raw[RW][SPL];
#pragma unroll
    for (int u = 0; u < RW; u++) {
        const mseg &gu = PAIR ? m.s[u & 1] : g;
#pragma unroll
        for (int t = 0; t < SPL; t++) {
            const int j = wi * 32 + lane + t * 32 * WPR;
            if (row[u] >= 0 && j < nsb) reg_fetch<XQ, TYPE, TYPE2>(gu.wtype, gu.w + (uint64_t)row[u] * gu.rb, j, &raw[u][t]);
        }
    }
    CU_PDL_WAIT();
    const bool first = lane == 0 && wi == 0;
    float addv[RW];
    int32_t p0 = 0; /* the rotation position */
    int64_t c0 = 0; /* the cache row */
    if (first) {
#pragma unroll
        for (int u = 0; u < RW; u++) {
            const mseg &gu = PAIR ? m.s[u & 1] : g;
            addv[u] = gu.ep.add && row[u] >= 0 ? gu.ep.add[row[u]] : 0.0f;
        }
        if (g.cache) p0 = pos[0], c0 = kv_row(g.crow[0], g.ring);
    }
    float acc[RW];
#pragma unroll
    for (int u = 0; u < RW; u++) acc[u] = 0.0f;
    int qx[SPL][8];
    uint32_t d8r[SPL]; /* the scales' raw bits: converted at use, so no load waits for another */
#pragma unroll
    for (int t = 0; t < SPL; t++) { /* every activation load in flight before any use */
        const int j = wi * 32 + lane + t * 32 * WPR;
        if (j < nsb) gv_act_raw<TYPE, XQ>(x, K, j, qx[t], &d8r[t]);
    }
#pragma unroll
    for (int t = 0; t < SPL; t++) {
        const int j = wi * 32 + lane + t * 32 * WPR;
        if (j >= nsb) continue;
#pragma unroll
        for (int u = 0; u < RW; u++) {
            if (row[u] < 0) continue;
            cu_wsub ws;
            uint32_t sc;
            reg_decode<XQ, TYPE, TYPE2>(g.wtype, &raw[u][t], j, &ws, &sc);
            gv_acc<TYPE, XQ>(&acc[u], ws, sc, qx[t], cu_act_d<XQ>(d8r[t])); /* TYPE2's arithmetic is TYPE's (not Q2_K, Q3_K) */
        }
    }
#pragma unroll
    for (int u = 0; u < RW; u++) acc[u] = warp_sum(acc[u]);
    if (WPR > 1) { /* the group's warps in warp order (k_mmvq_long's arithmetic) */
        if (lane == 0)
#pragma unroll
            for (int u = 0; u < RW; u++) red[wp * RW + u] = acc[u];
        __syncthreads();
#pragma unroll
        for (int u = 0; u < RW; u++) {
            float a = 0.0f;
#pragma unroll
            for (int q = 0; q < WPR; q++) a += red[(wp - wi + q) * RW + u];
            acc[u] = a;
        }
    }
    if (!first) return;
    if (PAIR) { /* act(gate) * up, as src_glu */
#pragma unroll
        for (int u = 0; u < RW; u += 2) {
            if (row[u] < 0) continue;
            const float gv = m.s[0].ep.add ? acc[u] + addv[u] : acc[u], uv = m.s[1].ep.add ? acc[u + 1] + addv[u + 1] : acc[u + 1];
            m.s[0].dst[row[u]] = cu_glu(gv, uv, m.glu == 2);
        }
        return;
    }
    if (pi >= 0) { /* a rotation pair: RoPE, then both into the cache (dst is not written) */
        float ya, yb;
        rope_rot(g.ep.add ? acc[0] + addv[0] : acc[0], g.ep.add ? acc[RW - 1] + addv[RW - 1] : acc[RW - 1], pi, p0, g.ts, g.fs, g.af, g.ff, &ya,
                 &yb);
        cache_put(g, c0 * g.N + row[0], ya);
        cache_put(g, c0 * g.N + row[RW - 1], yb);
        return;
    }
#pragma unroll
    for (int u = 0; u < RW; u++) {
        const int64_t n = row[u];
        if (n < 0) continue;
        const float v = g.ep.add ? acc[u] + addv[u] : acc[u];
        if (g.rot == 0) g.dst[n] = v;
        if (g.cache) cache_put(g, c0 * g.N + n, v);
    }
}

#endif
