/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/attn_paged_gqa.cuh — the paged attention's grouped kernels (k_attn_paged.cu
 * launches them where cu_attn_paged_args.hb > 0; tests/runtime/test_cuda_attn_paged_emu runs them on
 * the CPU): k_attn_paged_gqa<NC, HB, SPLIT> (one block per (hb query heads of one kv head, token,
 * split), so each K/V row it reads serves all of them) and k_attn_paged_gqa_merge (the partials to
 * out, float4 columns over threads and splits over warps).
 * Math: k_attn_paged.cu's header (op_attention with a table); F16 caches, D = 256 NC (256 or 512).
 * Geometry: 256 threads (PG_WARPS 8 warps); blockIdx.x = kvh * (G / HB) + hb: query heads
 * h = kvh G + hb HB + i, i < HB; blockIdx.y the token; blockIdx.z the split (pa_active's, as the
 * per-head split kernel: keys [j0, j1)). Warp w takes keys j0 + w + 16 u and j0 + w + 8 + 16 u (two
 * keys an iteration: 2 x 2 NC 16-byte loads of K and V in flight a lane); lane l holds the 16-byte
 * chunks c l + 32 c (c < NC, 8 halves each) of a row, so a warp reads a row's 256 NC halves in NC
 * coalesced 512-byte loads. HB scores a key: HB NC 8 FMAs a lane, HB warp sums; one online softmax
 * (m, l, acc[8 NC]) per head per warp. The 8 warps are merged through shared memory a head at a
 * time (8 x D floats). q and acc in registers: HB NC 8 floats each (HB D <= 2048: HB <= 8 at D 256,
 * <= 4 at D 512). Q's RoPE (a.q_rope.n_rot > 0): the block rotates its HB heads' q into s_acc first
 * (pa_q_rope, bit-identical to cu_rope), loads qr from there, and meets at a barrier before the keys.
 * Split partials (na > 1): (m, l, 0, 0, acc[D]) at part[((t Hq + h) S + z) (D + 4)] (16-byte
 * aligned rows for the merge's float4 loads). k_attn_paged_gqa_merge: grid (Hq, T, D / 128), 256
 * threads: thread (float4 column c4 of 32, warp zg of 8) sums splits zg, zg + 8, ... (8 loads in
 * flight), the 8 sums added in shared memory. na == 1: split 0 writes out itself, bit for bit as
 * the unsplit kernel, and the merge returns.
 * Traffic a step (F16, n visible keys, Hkv kv heads): K/V 4 n D Hkv bytes read once from HBM per
 * group of HB heads (G / HB times in all: once where HB = G), q HB D 4 a block; partials T Hq na
 * (D + 4) 4 bytes written and read once through L2. Estimates at depth 4096 on an H100 (~3.0 TB/s,
 * 132 SMs; kmin 64: 64 splits of 64 keys):
 *   gemma4-e4b global layer (D 512, Hq 8, Hkv 2, HB 4): K/V 16.8 MB (5.6 us at the roofline), 128
 *   blocks, 8 keys a warp; partials 1.1 MB; its 7 global layers ~117 MB a step. Sliding layers
 *   (D 256, window 512) stay on cu_attention: 1 MB each.
 *   gemma3-1b global layer (D 256, Hq 4, Hkv 1, HB 4; it runs here only from a block-table cache):
 *   K/V 4.2 MB (1.4 us), 64 blocks; partials 0.5 MB.
 * Expected: ~60-70% of the roofline for the deep layers (a block has 8 warps x 2 keys x 2 NC KB of
 * loads in flight: 16-32 KB an SM), plus ~2 launches' latency a layer (split kernel + merge).
 */
#ifndef SB_CUDA_DEVICE_ATTN_PAGED_GQA_CUH
#define SB_CUDA_DEVICE_ATTN_PAGED_GQA_CUH

#include "backend/cuda/device/attn_paged.cuh"

#define PG_WARPS 8

/* the 8 halves of a 16-byte chunk as floats */
static __device__ __forceinline__ void pg_h8(const uint4 u, float f[8]) {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) f[2 * i] = cu_h2f((uint16_t)(w[i] & 0xFFFF)), f[2 * i + 1] = cu_h2f((uint16_t)(w[i] >> 16));
}

/* chunks c l + 32 c of the row at element base (a multiple of 8) of an F16 cache */
template <int NC> static __device__ __forceinline__ void pg_row(const void *c, int64_t base, int lane, uint4 r[NC]) {
#pragma unroll
    for (int i = 0; i < NC; i++) r[i] = ((const uint4 *)c)[base / 8 + lane + 32 * i];
}

/* the HB scores of one key: s[hh] = q_hh . k * scale (softcapped), warp sums */
template <int NC, int HB>
static __device__ __forceinline__ void pg_scores(const float qr[HB][NC][8], const uint4 kc[NC], const cu_attn_paged_args &a, float s[HB]) {
    float kf[NC][8];
#pragma unroll
    for (int c = 0; c < NC; c++) pg_h8(kc[c], kf[c]);
#pragma unroll
    for (int hh = 0; hh < HB; hh++) {
        float x = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < 8; e++) x += qr[hh][c][e] * kf[c][e];
        x = warp_sum(x) * a.scale;
        s[hh] = a.softcap > 0.0f ? tanhf(x / a.softcap) * a.softcap : x;
    }
}

template <int NC, int HB, bool SPLIT>
__global__ void __launch_bounds__(32 * PG_WARPS, 1)
    k_attn_paged_gqa(float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const int32_t *tbl, cu_attn_paged_args a,
                     float *part) {
    CU_PDL_ENTRY();
    constexpr int D = 256 * NC;
    __shared__ __align__(16) float s_acc[PG_WARPS][D]; /* first q rotated (a.q_rope.n_rot > 0: HB D <= 8 D floats), then the warps' acc */
    __shared__ float s_m[PG_WARPS][HB], s_l[PG_WARPS][HB];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t G = a.Hq / a.Hkv, nhb = G / HB, kvh = blockIdx.x / nhb, h0 = kvh * G + (blockIdx.x % nhb) * HB;
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
    float qr[HB][NC][8], acc[HB][NC][8], m[HB], l[HB];
    const float *qb = q + (t * a.Hq + h0) * D; /* the HB heads' q */
    if (a.q_rope.n_rot > 0) { /* Q's RoPE on load, staged in s_acc; after the split's early return: every thread is here */
        pa_q_rope<32 * PG_WARPS>(&s_acc[0][0], qb, HB, D, (int32_t)p, a);
        qb = &s_acc[0][0];
    }
#pragma unroll
    for (int hh = 0; hh < HB; hh++) {
        const float4 *qv = (const float4 *)(qb + hh * D);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            const float4 x0 = qv[2 * (lane + 32 * c)], x1 = qv[2 * (lane + 32 * c) + 1];
            const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int e = 0; e < 8; e++) qr[hh][c][e] = xs[e], acc[hh][c][e] = 0.0f;
        }
        m[hh] = -INFINITY, l[hh] = 0.0f;
    }
    if (a.q_rope.n_rot > 0) __syncthreads(); /* every warp has its q before any writes its acc over it */
    const int32_t *row_tbl = tbl + t * a.n_tbl;
    for (int64_t ja = j0 + w; ja < j1; ja += 2 * PG_WARPS) {
        const int64_t jb = ja + PG_WARPS;
        const bool hasb = jb < j1;
        const int64_t ba = ((int64_t)row_tbl[ja / a.bs] * a.bs + ja % a.bs) * Dkv + kvh * D;
        const int64_t bb = hasb ? ((int64_t)row_tbl[jb / a.bs] * a.bs + jb % a.bs) * Dkv + kvh * D : ba;
        uint4 ka[NC], kb[NC], va[NC], vb[NC];
        pg_row<NC>(k, ba, lane, ka);
        pg_row<NC>(k, bb, lane, kb);
        pg_row<NC>(v, ba, lane, va);
        pg_row<NC>(v, bb, lane, vb);
        float sa[HB], sb[HB];
        pg_scores<NC, HB>(qr, ka, a, sa);
        pg_scores<NC, HB>(qr, kb, a, sb);
        float fa[NC][8], fb[NC][8];
#pragma unroll
        for (int c = 0; c < NC; c++) pg_h8(va[c], fa[c]), pg_h8(vb[c], fb[c]);
#pragma unroll
        for (int hh = 0; hh < HB; hh++) {
            const float sbh = hasb ? sb[hh] : -INFINITY; /* sa is finite: m_new too */
            const float m_new = fmaxf(m[hh], fmaxf(sa[hh], sbh)), corr = expf(m[hh] - m_new);
            const float ea = expf(sa[hh] - m_new), eb = hasb ? expf(sbh - m_new) : 0.0f;
            l[hh] = l[hh] * corr + ea + eb;
            m[hh] = m_new;
#pragma unroll
            for (int c = 0; c < NC; c++)
#pragma unroll
                for (int e = 0; e < 8; e++) acc[hh][c][e] = acc[hh][c][e] * corr + ea * fa[c][e] + eb * fb[c][e];
        }
    }
    if (lane == 0)
#pragma unroll
        for (int hh = 0; hh < HB; hh++) s_m[w][hh] = m[hh], s_l[w][hh] = l[hh];
#pragma unroll
    for (int hh = 0; hh < HB; hh++) { /* the 8 warps' (m, l, acc) of head h0 + hh merged */
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < 8; e++) s_acc[w][8 * (lane + 32 * c) + e] = acc[hh][c][e];
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
            float *out = dst + (t * a.Hq + h) * D;
            for (int d = threadIdx.x; d < D; d += 32 * PG_WARPS) {
                float o = 0.0f;
#pragma unroll
                for (int x = 0; x < PG_WARPS; x++) o += wt[x] * s_acc[x][d];
                out[d] = o / sum;
            }
        }
        __syncthreads(); /* s_acc is the next head's */
    }
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
        dst[(t * a.Hq + h) * a.D + 128 * blockIdx.z + threadIdx.x] = r / L;
    }
}

#endif
