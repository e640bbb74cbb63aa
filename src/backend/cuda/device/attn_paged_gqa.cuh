/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/attn_paged_gqa.cuh — the paged attention's grouped kernels (k_attn_paged.cu
 * launches them where cu_attn_paged_args.hb > 0; tests/runtime/test_cuda_attn_paged_emu runs them on
 * the CPU): k_attn_paged_gqa<D, F16, HBC, SPLIT> (one block per (hb <= HBC query heads of one kv
 * head, token, split), so each K/V row it reads serves all of them), the last split block's merge
 * (D <= 128, counters: pg_merge_block, a warp a head) or k_attn_paged_gqa_merge_warps (the same code
 * as a kernel of its own, no counters) and k_attn_paged_gqa_merge (D 256 / 512: float4 columns over
 * threads and splits over warps).
 * Math: k_attn_paged.cu's header (op_attention with a table). Shapes (pg_shape): F16 caches of head_dim
 * 64 / 128 / 256 / 512, F32 of 64 / 128; hb any divisor of G = Hq / Hkv up to 8 (4 at 512), the
 * instance's HBC the power of two >= hb (heads hh >= hb of an instance are skipped, block-uniformly).
 * Geometry: 256 threads (PG_WARPS 8 warps); blockIdx.x = kvh * (G / hb) + i: query heads h0 + hh,
 * h0 = blockIdx.x hb, hh < hb; blockIdx.y the token; blockIdx.z the split (pa_active's, as the
 * per-head split kernel: keys [j0, j1)). A row is CH = D / EPC 16-byte chunks (EPC: 8 halves or 4
 * floats); LPK = min(CH, 32) lanes read a key (lane r of its group holds chunks r + LPK c, c < NC =
 * CH / LPK), so a warp reads KPW = 32 / LPK keys at once (F16 D 64: 4 keys of 8 lanes; D 128: 2;
 * F32 D 64: 2; D >= 256 F16, D 128 F32: 1) and the block NG = 8 KPW key groups. Group gi = w KPW +
 * lane / LPK takes keys j0 + gi + 2 NG u and j0 + gi + NG + 2 NG u (two keys an iteration: 2 x 2 NC
 * 16-byte loads of K and V in flight a lane; the loop's trip count is the warp's, lanes past j1 load
 * an earlier row and skip the update, so every lane takes part in the shuffles). HB scores a key: HB
 * NC EPC FMAs a lane, HB sums over the group's lanes (xor shuffles LPK / 2 .. 1: warp_sum at LPK 32);
 * one online softmax (m, l, acc[NC EPC]) per head per group. The KPW groups of a warp are merged by
 * xor shuffles (LPK, 2 LPK, ..), then the 8 warps through shared memory a head at a time (8 x D
 * floats). q and acc in registers: HBC NC EPC floats each (<= 64: HBC <= 8, <= 4 at F16 D 512). Q's
 * RoPE (a.q_rope.n_rot > 0): the block rotates its hb heads' q into s_acc first (pa_q_rope,
 * bit-identical to cu_rope), loads qr from there, and meets at a barrier before the keys.
 * Split partials (na > 1): (m, l, 0, 0, acc[D]) at part[((t Hq + h) S + z) (D + 4)] (16-byte
 * aligned rows for the merges' float4 loads). D <= 128: with counters (T Hq <= CU_ATT_COUNTERS) the
 * last split block of (h0, t) to arrive merges its hb heads, warp hh head h0 + hh (pg_merge_warp: m,
 * l of the na splits a lane each, warp max and sum, then float4 columns over lanes — D 64: 16
 * columns x 2 split groups — every split a lane in order, 8 loads in flight), and resets its counter;
 * without counters k_attn_paged_gqa_merge_warps (grid (Hq / hb, T)) runs the same code after the
 * split kernel: the same bits. D 256 / 512: k_attn_paged_gqa_merge, grid (Hq, T, D / 128), 256
 * threads: thread (float4 column c4 of 32, warp zg of 8) sums splits zg, zg + 8, ... (8 loads in
 * flight), the 8 sums added in shared memory. na == 1: split 0 writes out itself, bit for bit as the
 * unsplit kernel, and nothing merges. With a.xq whichever writes out writes its q8_1 blocks too
 * (pa_out; pg_merge_warp shuffles its float4 columns to a value a lane for q8_1_store).
 * Traffic a step (n visible keys, Hkv kv heads, b bytes an element): K/V 2 n D b Hkv bytes read once
 * from HBM per group of hb heads (G / hb times in all: once where hb = G), q hb D 4 a block; partials
 * T Hq na (D + 4) 4 bytes written and read once through L2. Estimates on an H100 (~3.0 TB/s, 132
 * SMs; kmin 64):
 *   Qwen2.5-0.5B decode (D 64, Hq 14, Hkv 2, hb 7, F16), depth 128-192, B = 1: 2 blocks a split, S 4
 *   (keys of the table's reach / 64), 2-3 active: 4-6 blocks of one iteration (64 keys: a group's 2),
 *   K/V 48 KB a layer from L2, read once (the per-head kernel: 14 x 3 blocks, 4 warps walking 16 keys
 *   each, one dependent row load per key; its kv heads' rows read 7 times); the last block merges 7
 *   heads (one warp each: 2 L2 round trips).
 *   gemma4-e4b global layer at depth 4096 (D 512, Hq 8, Hkv 2, hb 4): K/V 16.8 MB (5.6 us at the
 *   roofline), 128 blocks, 8 keys a warp; partials 1.1 MB; its 7 global layers ~117 MB a step.
 *   gemma3-1b global layer (D 256, Hq 4, Hkv 1, hb 4): K/V 4.2 MB (1.4 us), 64 blocks.
 * Expected: ~60-70% of the roofline for the deep layers (a block has 8 warps x 2 keys x 2 NC KB of
 * loads in flight: 16-32 KB an SM), plus ~1 launch's latency a layer at D <= 128 (the last block
 * merges) and ~2 at D 256 / 512 (split kernel + merge).
 */
#ifndef SB_CUDA_DEVICE_ATTN_PAGED_GQA_CUH
#define SB_CUDA_DEVICE_ATTN_PAGED_GQA_CUH

#include "backend/cuda/device/attn_paged.cuh"

#define PG_WARPS 8

/* a row of D elements (halves: F16, else floats) as 16-byte chunks over the lanes of a key group */
template <int D, bool F16> struct pg_shape {
    static constexpr int EPC = F16 ? 8 : 4;          /* elements a 16-byte chunk */
    static constexpr int CH = D / EPC;               /* chunks a row */
    static constexpr int LPK = CH < 32 ? CH : 32;    /* lanes a key */
    static constexpr int NC = CH / LPK;              /* chunks a lane */
    static constexpr int KPW = 32 / LPK;             /* keys a warp reads at once */
    static constexpr int NG = PG_WARPS * KPW;        /* key groups a block */
    static constexpr int EPL = NC * EPC;             /* elements a lane */
    static_assert(D % EPC == 0 && CH % LPK == 0 && 32 % LPK == 0, "grouped paged attention: head_dim 64 / 128 / 256 / 512");
};

/* a 16-byte chunk as EPC floats (8 halves or 4 floats) */
template <bool F16> static __device__ __forceinline__ void pg_unpack(const uint4 u, float *f) {
    if constexpr (F16) {
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) f[2 * i] = cu_h2f((uint16_t)(w[i] & 0xFFFF)), f[2 * i + 1] = cu_h2f((uint16_t)(w[i] >> 16));
    } else {
        f[0] = __uint_as_float(u.x), f[1] = __uint_as_float(u.y), f[2] = __uint_as_float(u.z), f[3] = __uint_as_float(u.w);
    }
}

/* chunks r + LPK c (c < NC) of the row at element base (a multiple of EPC) of a cache */
template <class S> static __device__ __forceinline__ void pg_row(const void *c, int64_t base, int r, uint4 out[S::NC]) {
#pragma unroll
    for (int i = 0; i < S::NC; i++) out[i] = ((const uint4 *)c)[base / S::EPC + r + S::LPK * i];
}

/* v summed over the LPK lanes of the caller's key group (xor butterfly; LPK 32: warp_sum's) */
template <int LPK> static __device__ __forceinline__ float pg_group_sum(float v) {
#pragma unroll
    for (int o = LPK / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* the scores of one key for heads hh < hb: s[hh] = q_hh . k * scale (softcapped), group sums */
template <class S, bool F16, int HBC>
static __device__ __forceinline__ void pg_scores(const float qr[HBC][S::NC][S::EPC], const uint4 kc[S::NC], int hb, const cu_attn_paged_args &a,
                                                 float s[HBC]) {
    float kf[S::NC][S::EPC];
#pragma unroll
    for (int c = 0; c < S::NC; c++) pg_unpack<F16>(kc[c], kf[c]);
#pragma unroll
    for (int hh = 0; hh < HBC; hh++) {
        s[hh] = 0.0f;
        if (hh >= hb) continue; /* block-uniform */
        float x = 0.0f;
#pragma unroll
        for (int c = 0; c < S::NC; c++)
#pragma unroll
            for (int e = 0; e < S::EPC; e++) x += qr[hh][c][e] * kf[c][e];
        x = pg_group_sum<S::LPK>(x) * a.scale;
        s[hh] = a.softcap > 0.0f ? tanhf(x / a.softcap) * a.softcap : x;
    }
}

/* the online softmax states (m, l, acc) of the warp's KPW key groups merged into each group (xor
 * shuffles over LPK, 2 LPK, ..; a group that saw no key, m = -inf, weighs 0); nothing at KPW 1 */
template <class S, int HBC>
static __device__ __forceinline__ void pg_merge_groups(float m[HBC], float l[HBC], float acc[HBC][S::NC][S::EPC], int hb) {
#pragma unroll
    for (int hh = 0; hh < HBC; hh++) {
        if (hh >= hb) continue;
#pragma unroll
        for (int o = S::LPK; o < 32; o <<= 1) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[hh], o), lo = __shfl_xor_sync(0xffffffffu, l[hh], o);
            const float M = fmaxf(m[hh], mo), f = m[hh] == -INFINITY ? 0.0f : expf(m[hh] - M), fo = mo == -INFINITY ? 0.0f : expf(mo - M);
            l[hh] = l[hh] * f + lo * fo;
#pragma unroll
            for (int c = 0; c < S::NC; c++)
#pragma unroll
                for (int e = 0; e < S::EPC; e++) {
                    const float x = __shfl_xor_sync(0xffffffffu, acc[hh][c][e], o);
                    acc[hh][c][e] = acc[hh][c][e] * f + x * fo;
                }
            m[hh] = M;
        }
    }
}

#define PG_ZMAX (CU_ATT_PAGED_GQA_MAX_SPLITS / 32) /* splits a lane in pg_merge_warp's m, l */

/* out of (head h, token t) = sum_z f_z acc_z / sum_z f_z l_z over its na (> 1) partials, f_z =
 * exp(m_z - max m) (0 for m_z = -inf), by the calling warp: lane z % 32 reads m_z, l_z (one round
 * trip), warp max, f_z to s_f (CU_ATT_PAGED_GQA_MAX_SPLITS floats, the warp's own), L a warp sum;
 * then float4 column c4 = lane % C4 (C4 = min(32, D / 4)) of split group zg = lane / C4 sums splits
 * zg, zg + 32 / C4, .. in order (8 loads in flight), the groups added by xor shuffles */
template <int D>
static __device__ __forceinline__ void pg_merge_warp(float *dst, const float *part, int64_t t, int64_t h, int na, const cu_attn_paged_args &a,
                                                     float *s_f) {
    constexpr int C4 = D / 4 < 32 ? D / 4 : 32, R = D + 4;
    const int lane = threadIdx.x % 32, c4 = lane % C4, zg = lane / C4;
    const float *pp = part + (t * a.Hq + h) * a.nsplit * R;
    float mz[PG_ZMAX], lz[PG_ZMAX], M = -INFINITY, L = 0.0f;
#pragma unroll
    for (int i = 0; i < PG_ZMAX; i++) {
        const int z = lane + 32 * i;
        mz[i] = z < na ? __ldcg(pp + z * R) : -INFINITY;
        lz[i] = z < na ? __ldcg(pp + z * R + 1) : 0.0f;
        M = fmaxf(M, mz[i]);
    }
    M = warp_max(M);
#pragma unroll
    for (int i = 0; i < PG_ZMAX; i++) {
        const float f = mz[i] == -INFINITY ? 0.0f : expf(mz[i] - M);
        if (lane + 32 * i < na) s_f[lane + 32 * i] = f;
        L += f * lz[i];
    }
    L = warp_sum(L);
    __syncwarp();
    float *out = dst + (t * a.Hq + h) * D;
#pragma unroll
    for (int c0 = 0; c0 < D / 4; c0 += C4) {
        const float4 *col = (const float4 *)(pp + 4) + c0 + c4;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
        for (int z = zg; z < na; z += 32 / C4) {
            const float4 x = __ldcg(col + z * (R / 4));
            const float f = s_f[z];
            o.x += f * x.x, o.y += f * x.y, o.z += f * x.z, o.w += f * x.w;
        }
#pragma unroll
        for (int s = C4; s < 32; s <<= 1) {
            o.x += __shfl_xor_sync(0xffffffffu, o.x, s), o.y += __shfl_xor_sync(0xffffffffu, o.y, s);
            o.z += __shfl_xor_sync(0xffffffffu, o.z, s), o.w += __shfl_xor_sync(0xffffffffu, o.w, s);
        }
        if (zg == 0) ((float4 *)out)[c0 + c4] = make_float4(o.x / L, o.y / L, o.z / L, o.w / L);
        if (a.xq) /* every lane holds its column's sum; of this pass's 4 C4 dims, 32 b + lane is column 8 b + lane / 4's */
#pragma unroll
            for (int b = 0; b < C4 / 8; b++) {
                const int src = 8 * b + lane / 4;
                const float x = __shfl_sync(0xffffffffu, o.x, src), y = __shfl_sync(0xffffffffu, o.y, src);
                const float z = __shfl_sync(0xffffffffu, o.z, src), u = __shfl_sync(0xffffffffu, o.w, src);
                const float mine = lane % 4 == 0 ? x : lane % 4 == 1 ? y : lane % 4 == 2 ? z : u;
                q8_1_store((blk_q8_1 *)a.xq + ((t * a.Hq + h) * D + 4 * c0) / 32 + b, mine / L, lane);
            }
    }
}

/* the hb heads h0 .. h0 + hb - 1 of token t merged, warp hh head h0 + hh (pg_merge_warp; s_f
 * [PG_WARPS][CU_ATT_PAGED_GQA_MAX_SPLITS] floats) */
template <int D>
static __device__ __forceinline__ void pg_merge_block(float *dst, const float *part, int64_t t, int64_t h0, int na, const cu_attn_paged_args &a,
                                                      float (*s_f)[CU_ATT_PAGED_GQA_MAX_SPLITS]) {
    const int w = threadIdx.x / 32;
    if (w < a.hb) pg_merge_warp<D>(dst, part, t, h0 + w, na, a, s_f[w]);
}

template <int D, bool F16, int HBC, bool SPLIT>
__global__ void __launch_bounds__(32 * PG_WARPS, 1)
    k_attn_paged_gqa(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl, cu_attn_paged_args a,
                     float *part, unsigned *cnt) {
    using S = pg_shape<D, F16>;
    constexpr bool WMERGE = SPLIT && D <= 128; /* the last block merges (with counters) */
    CU_PDL_ENTRY();
    __shared__ __align__(16) float s_acc[PG_WARPS][D]; /* first q rotated (a.q_rope.n_rot > 0: hb D <= 8 D floats), then the warps' acc */
    __shared__ float s_m[PG_WARPS][HBC], s_l[PG_WARPS][HBC];
    __shared__ float s_f[WMERGE ? PG_WARPS : 1][CU_ATT_PAGED_GQA_MAX_SPLITS];
    __shared__ int s_last;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane % S::LPK, g = lane / S::LPK, hb = a.hb;
    const int64_t G = a.Hq / a.Hkv, nhb = G / hb, kvh = blockIdx.x / nhb, h0 = (int64_t)blockIdx.x * hb;
    const int64_t t = blockIdx.y, Dkv = (int64_t)D * a.Hkv;
    const int64_t p = pos[t], lo = pa_lo(p, a.window);
    int64_t j0 = lo, j1 = p + 1;
    int na = 1;
    if (SPLIT) {
        int64_t kps;
        na = pa_active(p - lo + 1, a.nsplit, a.kmin, &kps);
        if ((int)blockIdx.z >= na) return;
        j0 = lo + (int64_t)blockIdx.z * kps;
        j1 = j0 + kps < p + 1 ? j0 + kps : p + 1;
    }
    float qr[HBC][S::NC][S::EPC], acc[HBC][S::NC][S::EPC], m[HBC], l[HBC];
    const float *qb = q + (t * a.Hq + h0) * D; /* the hb heads' q */
    if (a.q_rope.n_rot > 0) { /* Q's RoPE on load, staged in s_acc; after the split's early return: every thread is here */
        pa_q_rope<32 * PG_WARPS>(&s_acc[0][0], qb, hb, D, (int32_t)p, a);
        qb = &s_acc[0][0];
    }
#pragma unroll
    for (int hh = 0; hh < HBC; hh++) {
#pragma unroll
        for (int c = 0; c < S::NC; c++) {
            const float4 *qv = (const float4 *)(qb + hh * D + S::EPC * (r + S::LPK * c));
#pragma unroll
            for (int e4 = 0; e4 < S::EPC / 4; e4++) {
                const float4 x = hh < hb ? qv[e4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                qr[hh][c][4 * e4] = x.x, qr[hh][c][4 * e4 + 1] = x.y, qr[hh][c][4 * e4 + 2] = x.z, qr[hh][c][4 * e4 + 3] = x.w;
            }
#pragma unroll
            for (int e = 0; e < S::EPC; e++) acc[hh][c][e] = 0.0f;
        }
        m[hh] = -INFINITY, l[hh] = 0.0f;
    }
    if (a.q_rope.n_rot > 0) __syncthreads(); /* every warp has its q before any writes its acc over it */
    const int32_t *row_tbl = tbl + t * a.n_tbl;
    for (int64_t jw = j0 + w * S::KPW; jw < j1; jw += 2 * S::NG) { /* the warp's keys: every lane iterates together */
        const int64_t ja = jw + g, jb = ja + S::NG;
        const bool hasa = ja < j1, hasb = jb < j1; /* hasb: hasa too */
        const int64_t ra = hasa ? ja : jw; /* a lane past j1 reads the warp's first row and drops its scores */
        const int64_t ba = pa_row(row_tbl, ra, a) * Dkv + kvh * D;
        const int64_t bb = hasb ? pa_row(row_tbl, jb, a) * Dkv + kvh * D : ba;
        uint4 ka[S::NC], kb[S::NC], va[S::NC], vb[S::NC];
        pg_row<S>(k, ba, r, ka);
        pg_row<S>(k, bb, r, kb);
        pg_row<S>(v, ba, r, va);
        pg_row<S>(v, bb, r, vb);
        float sa[HBC], sb[HBC];
        pg_scores<S, F16, HBC>(qr, ka, hb, a, sa);
        pg_scores<S, F16, HBC>(qr, kb, hb, a, sb);
        if (!hasa) continue;
        float fa[S::NC][S::EPC], fb[S::NC][S::EPC];
#pragma unroll
        for (int c = 0; c < S::NC; c++) pg_unpack<F16>(va[c], fa[c]), pg_unpack<F16>(vb[c], fb[c]);
#pragma unroll
        for (int hh = 0; hh < HBC; hh++) {
            if (hh >= hb) continue;
            const float sbh = hasb ? sb[hh] : -INFINITY; /* sa is finite: m_new too */
            const float m_new = fmaxf(m[hh], fmaxf(sa[hh], sbh)), corr = expf(m[hh] - m_new);
            const float ea = expf(sa[hh] - m_new), eb = hasb ? expf(sbh - m_new) : 0.0f;
            l[hh] = l[hh] * corr + ea + eb;
            m[hh] = m_new;
#pragma unroll
            for (int c = 0; c < S::NC; c++)
#pragma unroll
                for (int e = 0; e < S::EPC; e++) acc[hh][c][e] = acc[hh][c][e] * corr + ea * fa[c][e] + eb * fb[c][e];
        }
    }
    pg_merge_groups<S, HBC>(m, l, acc, hb); /* lanes of group 0 now hold the warp's (m, l, acc) */
    if (lane == 0)
#pragma unroll
        for (int hh = 0; hh < HBC; hh++) s_m[w][hh] = m[hh], s_l[w][hh] = l[hh];
#pragma unroll
    for (int hh = 0; hh < HBC; hh++) { /* the 8 warps' (m, l, acc) of head h0 + hh merged */
        if (hh >= hb) continue;
        if (lane < S::LPK)
#pragma unroll
            for (int c = 0; c < S::NC; c++)
#pragma unroll
                for (int e = 0; e < S::EPC; e++) s_acc[w][S::EPC * (lane + S::LPK * c) + e] = acc[hh][c][e];
        __syncthreads();
        float mx = -INFINITY, sum = 0.0f, wt[PG_WARPS];
#pragma unroll
        for (int x = 0; x < PG_WARPS; x++) mx = fmaxf(mx, s_m[x][hh]);
#pragma unroll
        for (int x = 0; x < PG_WARPS; x++) { /* a warp that saw no key (m = -inf) weighs 0 */
            wt[x] = s_m[x][hh] == -INFINITY ? 0.0f : expf(s_m[x][hh] - mx);
            sum += wt[x] * s_l[x][hh];
        }
        const int64_t h = h0 + hh;
        if (SPLIT && na > 1) {
            float *pp = part + ((t * a.Hq + h) * a.nsplit + blockIdx.z) * (D + 4);
            if (threadIdx.x == 0) pp[0] = mx, pp[1] = sum, pp[2] = 0.0f, pp[3] = 0.0f;
            for (int d = threadIdx.x; d < D; d += 32 * PG_WARPS) {
                float o = 0.0f;
#pragma unroll
                for (int x = 0; x < PG_WARPS; x++) o += wt[x] * s_acc[x][d];
                pp[4 + d] = o;
            }
        } else {
            for (int d = threadIdx.x; d < D; d += 32 * PG_WARPS) { /* whole warps (D % 32 == 0): pa_out's q8_1 blocks */
                float o = 0.0f;
#pragma unroll
                for (int x = 0; x < PG_WARPS; x++) o += wt[x] * s_acc[x][d];
                pa_out(dst, t, h, d, o / sum, a);
            }
        }
        __syncthreads(); /* s_acc is the next head's */
    }
    if (WMERGE) { /* (a plain if: the non-merging instances still reference s_f, s_last) */
        if (na <= 1 || !cnt) return; /* k_attn_paged_gqa_merge_warps follows where there are no counters */
        if (!block_arrives_last(&cnt[t * a.Hq + h0], (unsigned)na, &s_last)) return;
        pg_merge_block<D>(dst, part, t, h0, na, a, s_f);
        if (threadIdx.x == 0) cnt[t * a.Hq + h0] = 0; /* ready for the next attention */
    }
}

/* grid (Hq / hb, T), 32 * PG_WARPS threads, D <= 128: the split kernel's last-block merge
 * (pg_merge_block) as a kernel of its own, where there are no counters; nothing where na == 1 */
template <int D>
__global__ void __launch_bounds__(32 * PG_WARPS)
    k_attn_paged_gqa_merge_warps(float *dst, const float *part, const int32_t *pos, cu_attn_paged_args a) {
    CU_PDL_ENTRY();
    __shared__ float s_f[PG_WARPS][CU_ATT_PAGED_GQA_MAX_SPLITS];
    const int64_t t = blockIdx.y, p = pos[t], lo = pa_lo(p, a.window);
    int64_t kps;
    const int na = pa_active(p - lo + 1, a.nsplit, a.kmin, &kps);
    if (na == 1) return;
    pg_merge_block<D>(dst, part, t, (int64_t)blockIdx.x * a.hb, na, a, s_f);
}

/* grid (Hq, T, D / 128), 32 * PG_WARPS threads: columns [128 blockIdx.z, +128) of out = sum_z f_z
 * acc_z / sum_z f_z l_z over the na active partials of (h, t), f_z = exp(m_z - max m) (0 for m_z =
 * -inf); nothing where na == 1 */
__global__ void __launch_bounds__(32 * PG_WARPS) k_attn_paged_gqa_merge(float *dst, const float *part, const int32_t *pos, cu_attn_paged_args a) {
    CU_PDL_ENTRY();
    __shared__ float s_f[CU_ATT_PAGED_GQA_MAX_SPLITS], s_l[CU_ATT_PAGED_GQA_MAX_SPLITS];
    __shared__ float4 s_o[PG_WARPS][32];
    __shared__ float s_M;
    const int h = blockIdx.x, c4 = threadIdx.x % 32, zg = threadIdx.x / 32;
    const int64_t t = blockIdx.y, p = pos[t], lo = pa_lo(p, a.window), R = a.D + 4;
    int64_t kps;
    const int na = pa_active(p - lo + 1, a.nsplit, a.kmin, &kps);
    if (na == 1) return;
    const float *pp = part + (t * a.Hq + h) * a.nsplit * R;
    for (int z = threadIdx.x; z < na; z += 32 * PG_WARPS) s_f[z] = pp[z * R], s_l[z] = pp[z * R + 1];
    __syncthreads();
    if (threadIdx.x == 0) {
        float M = -INFINITY;
        for (int z = 0; z < na; z++) M = fmaxf(M, s_f[z]);
        s_M = M;
    }
    __syncthreads();
    for (int z = threadIdx.x; z < na; z += 32 * PG_WARPS) s_f[z] = s_f[z] == -INFINITY ? 0.0f : expf(s_f[z] - s_M);
    __syncthreads();
    const float4 *col = (const float4 *)(pp + 4 + 128 * blockIdx.z) + c4;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int z = zg; z < na; z += PG_WARPS) {
        const float4 x = col[z * (R / 4)];
        const float f = s_f[z];
        o.x += f * x.x, o.y += f * x.y, o.z += f * x.z, o.w += f * x.w;
    }
    s_o[zg][c4] = o;
    __syncthreads();
    if (threadIdx.x < 128) {
        float L = 0.0f, r = 0.0f;
        for (int z = 0; z < na; z++) L += s_f[z] * s_l[z];
        for (int g = 0; g < PG_WARPS; g++) r += ((const float *)s_o[g])[threadIdx.x];
        pa_out(dst, t, h, 128 * blockIdx.z + threadIdx.x, r / L, a); /* warps 0..3 whole */
    }
}

#endif
