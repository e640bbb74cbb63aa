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
#include "backend/cuda/device/gemv_dot.cuh"

#include <string.h>

/* T = 1 GEMVs over one activation in one launch (cu_matmul_q8_multi): Q/K/V, gate/up, or a single
 * matrix. Blocks of 4 (or 8: cu_gemv_set_tuning) warps; a row group of WPR warps (1, or 4 for K above
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
    int wtype, f16;
    unsigned nb; /* blocks of this segment */
    int rot, rmode, D; /* RoPE before the cache write (rot > 0): items are rotation pairs, then passthrough rows */
    float ts, fs, af;
    const float *ff;
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
    switch (wtype) { /* mmvq_k_type: q8_1 or q8_K */
    case CU_T_Q2_K: return mmvq_part_call<CU_T_Q2_K, XQ>(row, x, K, j0, step);
    case CU_T_Q3_K: return mmvq_part_call<CU_T_Q3_K, XQ>(row, x, K, j0, step);
    case CU_T_Q4_K: return mmvq_part_call<CU_T_Q4_K, XQ>(row, x, K, j0, step);
    case CU_T_Q5_K: return mmvq_part_call<CU_T_Q5_K, XQ>(row, x, K, j0, step);
    case CU_T_Q6_K: return mmvq_part_call<CU_T_Q6_K, XQ>(row, x, K, j0, step);
    case CU_T_IQ4_XS: return mmvq_part_call<CU_T_IQ4_XS, XQ>(row, x, K, j0, step);
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: return mmvq_part_call<CU_T_Q4_0, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q4_1: return mmvq_part_call<CU_T_Q4_1, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q5_0: return mmvq_part_call<CU_T_Q5_0, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q5_1: return mmvq_part_call<CU_T_Q5_1, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_Q8_0: return mmvq_part_call<CU_T_Q8_0, CU_T_Q8_1>(row, x, K, j0, step);
        case CU_T_IQ4_NL: return mmvq_part_call<CU_T_IQ4_NL, CU_T_Q8_1>(row, x, K, j0, step);
        default: break;
        }
    }
    return 0.0f; /* unreachable: the launcher checks the types */
}

template <int XQ>
static __device__ __forceinline__ void mmvq_part2_any(int wtype, const uint8_t *ra, const uint8_t *rb, const uint8_t *x, int64_t K, int j0,
                                                      int step, float *pa, float *pb) {
    switch (wtype) { /* mmvq_k_type: q8_1 or q8_K */
    case CU_T_Q2_K: mmvq_part2_call<CU_T_Q2_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q3_K: mmvq_part2_call<CU_T_Q3_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q4_K: mmvq_part2_call<CU_T_Q4_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q5_K: mmvq_part2_call<CU_T_Q5_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_Q6_K: mmvq_part2_call<CU_T_Q6_K, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    case CU_T_IQ4_XS: mmvq_part2_call<CU_T_IQ4_XS, XQ>(ra, rb, x, K, j0, step, pa, pb); return;
    default: break;
    }
    if (XQ == CU_T_Q8_1) {
        switch (wtype) {
        case CU_T_Q4_0: mmvq_part2_call<CU_T_Q4_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q4_1: mmvq_part2_call<CU_T_Q4_1, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q5_0: mmvq_part2_call<CU_T_Q5_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q5_1: mmvq_part2_call<CU_T_Q5_1, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_Q8_0: mmvq_part2_call<CU_T_Q8_0, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        case CU_T_IQ4_NL: mmvq_part2_call<CU_T_IQ4_NL, CU_T_Q8_1>(ra, rb, x, K, j0, step, pa, pb); return;
        default: break;
        }
    }
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
        for (; r + 1 < R; r += 2) mseg_item_pair<XQ, WPR>(g, item0 + (int64_t)r * G + grp, item0 + (int64_t)(r + 1) * G + grp, x, K, pos, red);
    for (; r < R; r++) mseg_item<XQ, WPR>(g, item0 + (int64_t)r * G + grp, x, K, pos, red);
}

static int gf_sms = 0; /* multiprocessors (blocks per launch target), read once */
static int gf_rows = 1, gf_prefetch = 1, gf_nw = 4;
extern "C" void cu_gemv_set_tuning(int rows_per_group, int prefetch, int warps) {
    gf_nw = warps == 8 ? 8 : 4;
    gf_rows = rows_per_group > 0 ? rows_per_group : 1;
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

/* launch with R items per row group (gf_rows; 1: one item a group, the most blocks — k_mmvq's shape;
 * fewer, longer-running blocks measured slower) */
template <int XQ, int WPR, int NW>
static void gf_launch1(cudaStream_t st, mseg_set m, const int64_t *items, const uint8_t *xq, int64_t K, const int32_t *pos) {
    constexpr int G = NW / WPR;
    const int R = gf_rows;
    unsigned blocks = 0;
    for (int k = 0; k < m.n; k++) blocks += (m.s[k].nb = cu_div_up(items[k], (int64_t)G * R));
    cu_launch(k_gemv_fused<XQ, WPR, NW>, blocks, NW * 32, st, m, xq, K, pos, R, gf_prefetch);
}

template <int XQ>
static void gf_launch(int wpr, cudaStream_t st, const mseg_set &m, const int64_t *items, const uint8_t *xq, int64_t K, const int32_t *pos) {
    if (gf_nw == 4) { /* 128-thread blocks (k_mmvq's shape) */
        if (wpr == 4) gf_launch1<XQ, 4, 4>(st, m, items, xq, K, pos);
        else gf_launch1<XQ, 1, 4>(st, m, items, xq, K, pos);
    } else {
        if (wpr == 4) gf_launch1<XQ, 4, 8>(st, m, items, xq, K, pos);
        else gf_launch1<XQ, 1, 8>(st, m, items, xq, K, pos);
    }
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
 * segment (K's rotation + cache store, SB_CUDA_ROPEK) takes two rows a group: a rotation pair.
 * Segments are of weight type TYPE, or (TYPE2 != TYPE) of TYPE2: a Q/K/V launch whose V has its own
 * type (Q4_K_M files: Q4_K with a Q6_K V, or Q5_0 with Q8_0 where rows are not 256-multiples); the
 * type is uniform within a block (blocks do not straddle segments), so the branch does not diverge.
 * PAIR (an FFN's gate and up, segments 0 and 1 of one N and type): rows u = 2k, 2k + 1 of a group
 * are gate and up row p = gi * RW/2 + k, and act(gate) * up (src_glu's f32 math) goes to segment 0's
 * dst — the GLU the quantizer after the launch then only quantizes (segment 1's dst is not written). */
template <int TYPE, int TYPE2> static __device__ __forceinline__ void reg_fetch(int wtype, const uint8_t *row, int j, cu_wraw *r) {
    if (TYPE2 == TYPE || wtype == TYPE) cu_fetch<TYPE>(row, j, r);
    else cu_fetch<TYPE2>(row, j, r);
}
template <int TYPE, int TYPE2> static __device__ __forceinline__ void reg_decode(int wtype, const cu_wraw *r, int j, cu_wsub *ws) {
    if (TYPE2 == TYPE || wtype == TYPE) cu_decode<TYPE>(r, j, ws);
    else cu_decode<TYPE2>(r, j, ws);
}
template <int XQ, int TYPE, int TYPE2, int WPR, int NW, int RW, int SPL, bool PAIR>
__global__ void __launch_bounds__(NW * 32) k_gemv_reg(mseg_set m, const uint8_t *x, int64_t K, const int32_t *pos) {
    static_assert(TYPE2 == TYPE || (TYPE != CU_T_Q2_K && TYPE2 != CU_T_Q2_K), "k_gemv_reg: Q2_K's sub-block sum only as the one type");
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
            if (row[u] >= 0 && j < nsb) reg_fetch<TYPE, TYPE2>(gu.wtype, gu.w + (uint64_t)row[u] * gu.rb, j, &raw[u][t]);
        }
    }
    CU_PDL_WAIT();
    const bool first = lane == 0 && wi == 0;
    float addv[RW];
    int32_t p0 = 0;
    if (first) {
#pragma unroll
        for (int u = 0; u < RW; u++) {
            const mseg &gu = PAIR ? m.s[u & 1] : g;
            addv[u] = gu.ep.add && row[u] >= 0 ? gu.ep.add[row[u]] : 0.0f;
        }
        if (g.cache) p0 = pos[0];
    }
    float acc[RW];
#pragma unroll
    for (int u = 0; u < RW; u++) acc[u] = 0.0f;
    int qx[SPL][8];
    uint32_t d8r[SPL]; /* the scales' raw bits: converted at use, so no load waits for another */
#pragma unroll
    for (int t = 0; t < SPL; t++) { /* every activation load in flight before any use */
        const int j = wi * 32 + lane + t * 32 * WPR;
        if (j < nsb) {
            const int *qy = cu_act_sub_raw<XQ>(x, K, 0, j, &d8r[t]);
#pragma unroll
            for (int i = 0; i < 8; i++) qx[t][i] = qy[i];
        }
    }
#pragma unroll
    for (int t = 0; t < SPL; t++) {
        const int j = wi * 32 + lane + t * 32 * WPR;
        if (j >= nsb) continue;
#pragma unroll
        for (int u = 0; u < RW; u++) {
            if (row[u] < 0) continue;
            cu_wsub ws;
            reg_decode<TYPE, TYPE2>(g.wtype, &raw[u][t], j, &ws);
            mmvq_sub_acc<TYPE>(&acc[u], ws, qx[t], cu_act_d<XQ>(d8r[t])); /* TYPE2's arithmetic is TYPE's (not Q2_K) */
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
        cache_put(g, (int64_t)p0 * g.N + row[0], ya);
        cache_put(g, (int64_t)p0 * g.N + row[RW - 1], yb);
        return;
    }
#pragma unroll
    for (int u = 0; u < RW; u++) {
        const int64_t n = row[u];
        if (n < 0) continue;
        const float v = g.ep.add ? acc[u] + addv[u] : acc[u];
        if (g.rot == 0) g.dst[n] = v;
        if (g.cache) cache_put(g, (int64_t)p0 * g.N + n, v);
    }
}

// ---- registers-before-the-wait launch ----

static int reg_on = 1; /* cu_gemv_set_reg */
static int reg_one = 1; /* cu_gemv_set_reg_one */
extern "C" void cu_gemv_set_reg_one(int on) { reg_one = on ? 1 : 0; }
extern "C" void cu_gemv_set_reg(int on) { reg_on = on ? 1 : 0; }
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
        if (!PAIR && rot && reg_one) {
            static int occ2;
            const int res2 = gf_occupancy(k_gemv_reg<XQ, TYPE, TYPE2, WPR, REG_NW, 2 * R0, SPL, PAIR>, REG_NW * 32, &occ2);
            int64_t b1 = 0;
            for (int k = 0; k < m.n; k++) b1 += cu_div_up(reg_groups(m.s[k], 2, true), (int64_t)G);
            m2.one = b1 <= (int64_t)res2 * gf_sms;
        }
        reg_launch3<XQ, TYPE, TYPE2, WPR, 2 * R0, SPL, PAIR>(st, m2, xq, K, pos);
    }
}

template <int XQ, int TYPE, int TYPE2 = TYPE>
static void reg_launch1(cudaStream_t st, const mseg_set &m, const uint8_t *xq, int64_t K, const int32_t *pos) {
    const int nsb = (int)(K / 32);
    if (m.glu) { /* reg_fits: one weight type, K <= CU_MMVQ_LONG_K (one warp a row) */
        if (nsb <= 32) reg_launch2<XQ, TYPE, TYPE, 1, 1, true>(st, m, xq, K, pos);
        else reg_launch2<XQ, TYPE, TYPE, 1, 2, true>(st, m, xq, K, pos);
    } else if (K <= CU_MMVQ_LONG_K) {
        if (nsb <= 32) reg_launch2<XQ, TYPE, TYPE2, 1, 1>(st, m, xq, K, pos);
        else reg_launch2<XQ, TYPE, TYPE2, 1, 2>(st, m, xq, K, pos);
    } else {
        if (nsb <= 128) reg_launch2<XQ, TYPE, TYPE2, 4, 1>(st, m, xq, K, pos);
        else reg_launch2<XQ, TYPE, TYPE2, 4, 2>(st, m, xq, K, pos);
    }
}

/* the second weight type a launch may mix with its first (reg_fits; reg_launch): the Q/K/V pairs of
 * the usual K-quant mixes — Q4_K_M / Q5_K_M give V (and some layers' other tensors) Q6_K, and their
 * fallbacks for rows that are not 256-multiples give Q5_0 with Q8_0 */
static int reg_mix = 1; /* cu_gemv_set_reg_mix */
extern "C" void cu_gemv_set_reg_mix(int on) { reg_mix = on ? 1 : 0; }
static int reg_type2(int t) {
    if (!reg_mix) return -1;
    switch (t) {
    case CU_T_Q5_0: return CU_T_Q8_0;
    case CU_T_Q4_K: case CU_T_Q5_K: return CU_T_Q6_K;
    default: return -1;
    }
}

/* REG applies: on, one weight type with a dp4a path for xtype (or its reg_type2 beside it), K within
 * two sub-blocks a lane (K <= 8192) */
static bool reg_fits(const cu_gemv_seg *seg, int n, int64_t K, int xtype, bool pair) {
    if (!reg_on || n < 1 || K > 8192 || K % 32) return false;
    if (pair && (n != 2 || seg[1].wtype != seg[0].wtype || seg[0].N != seg[1].N || K > CU_MMVQ_LONG_K || seg[0].cache ||
                 seg[1].cache || seg[0].rot > 0 || seg[1].rot > 0))
        return false;
    const bool kq = mmvq_k_type(seg[0].wtype);
    if (xtype == CU_T_Q8_K ? !kq : kq) return false; /* k-quants on q8_1 (SB_CUDA_ACT=q8_1) take k_gemv_fused */
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
        m.s[k] = mseg{seg[k].dst, (const uint8_t *)seg[k].w, mmvq_row_bytes(t, K), seg[k].N, seg[k].ep, seg[k].cache, t,
                      seg[k].ctype == CU_T_F16, 0, seg[k].rot, seg[k].rmode, (int)seg[k].D,
                      seg[k].theta_scale, seg[k].freq_scale, seg[k].attn_factor, seg[k].ff};
    }
    if (total == 0) return SB_OK;
    const cudaStream_t st = (cudaStream_t)s;
    const uint8_t *x = (const uint8_t *)xq;
    if (reg_fits(seg, n, K, xtype, glu != 0)) return reg_launch(st, m, x, K, pos);
    if (xtype == CU_T_Q8_1) gf_launch<CU_T_Q8_1>(wpr, st, m, items, x, K, pos);
    else gf_launch<CU_T_Q8_K>(wpr, st, m, items, x, K, pos);
    return cu_after_launch("k_gemv_fused");
}
