/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_attn_decode.cu — decode attention (T == 1), variant 4 (SB_TUNE=attn_variant=4; reached
 * through cu_attention): blocks of hpb query heads of one kv head and one key split; the number of
 * ACTIVE splits and the heads per block follow the position, which is read from device memory (one
 * captured graph serves every step).
 * Math (ops_ref.c op_attention): for query head h at p = pos[0], keys j in [lo, p] (lo = p-window+1
 * with a window) of kv head h / G: s_j = (q . k_j) * scale, then c*tanh(s_j/c) with a softcap;
 * out = sum_j softmax(s)_j v_j; online softmax in f32 (running max m, sum l, rescaled acc).
 * Geometry: a 1-D grid, 256 threads (8 warps); block L = kvh + Hkv * (head block + nhb * split), so
 * the kv head is L % Hkv whatever the mode and blocks of split 0 come first. S (nsplit) is fixed per
 * plan from the context capacity (exec_cuda.c attn_nsplit). At depth n = p-lo+1 each split takes
 * kps = max(kmin, ceil(n/S)) keys and na = ceil(n/kps) splits are active; blocks of the other splits
 * exit at once. Two modes, chosen per launch from n: lo (hpb_lo heads a block, default 1: the work
 * of a kv head spread over G blocks, its K/V read G times, from L2) while its active blocks Hkv *
 * ceil(G/hpb_lo) * na fit one per SM (lo_blocks: Qwen2.5-0.5B on 132 SMs up to na 9, depth 576);
 * hi (hpb_hi = G: each K/V byte read once) deeper. SB_TUNE=attn_hpb=n (cu_attn_args.hpb) forces n
 * in both. The grid holds both modes' blocks.
 * A block walks its keys in tiles of TK (<= 128, sized on the host so everything fits 48 KB of
 * shared memory): the K tile and the V tile are issued at once as two cp.async groups (16-byte
 * copies when a row is a multiple of 16 bytes, plain element copies otherwise) into rows padded by
 * 16 bytes (conflict-free 16-byte row reads). Before pos is read, the blocks that are split 0 (at
 * least in lo mode) issue split 0's first spec = min(tile, kmin, capacity) keys (cache rows [0,
 * spec): inside the cache whatever p is) into the top rows [tk - spec, tk) of the tiles, and the
 * raw q of lo mode's heads; so pos, q and the first K/V tile are one round trip when split 0 holds
 * <= spec keys. A block whose keys they are not (a window, hi mode's splits >= 1) loads its own at
 * row 0, after letting them land only when its rows reach tk - spec (not at depth 4096: 64 of 128). q goes to shared memory and is rotated in place (RoPE on load: rope_rot, bit-identical to
 * k_rope). Scores: Gb heads x nk keys, tpk threads a (head, key) (a power of two: as many as 256
 * threads allow, at most a row's 16-byte chunks), shuffle-added; warp g updates head g's (m, l) and
 * turns scores into probabilities (expf); P.V: thread = ((head, dim) pair, key group): R = 256 /
 * (Gb*D) key groups when two or more fit (lo mode: Gb*D = 64 -> 4 groups of every 4th key), else
 * up to 8 pairs a thread; acc rescaled per tile, groups added through shared memory at the end.
 * na == 1: the block writes out = acc / l (and the q8_1 blocks of the output, D % 32 == 0) directly
 * — no partials, no counter. na > 1: each block writes (m[Gb], l[Gb], pad, acc[Gb*D]) to scratch,
 * threadfence, an atomic counter per head block; the last-arriving block merges: m, l of all
 * (split, head) into shared memory (one round trip), factors exp(m_s - M) and 1/L per head, then
 * Gb*D/4 float4 columns x Rm = 256/(Gb*D/4) threads, each summing every Rm-th split (16-byte L2
 * loads, 8 in flight), Rm partial sums added in shared memory; it resets its counter to 0 (the next
 * attention of the stream finds 0s).
 * Traffic at depth n, F16 cache: K+V 2*n*D*2*Hkv bytes (Qwen2.5-0.5B: 512*n, 2 MB at n 4096, 0.5 µs
 * of HBM at 4 TB/s; F32 twice that), read once from HBM in hi mode (G times, from L2, in lo mode:
 * n <= 576 -> <= 2 MB of L2 reads); q Gb*D*4 per block; partials na*(blocks of a split)*(8+Gb*D)*4
 * bytes written and read once through L2 (hi, kmin 64, n 4096: 65 splits x 456 floats = 118 KB per
 * kv head).
 * Latency chain after the PDL wait: depth <= kmin (lo: 14 blocks for Qwen): pos + q + K/V tile
 * (issued together; L2: just stored) -> out = 2 round trips, plus ~8 barriers, the RoPE (cosf/sinf)
 * and ~64 FMAs of score and of P.V per thread. Depth 4096 (hi, kmin 64: 65 of 66 splits, 130
 * blocks, one 64-key tile each): pos -> q, K/V tile (HBM, 16 KB a block) -> partials + threadfence
 * -> atomic -> m, l -> acc (5 batches of 8 loads for 33 splits a thread: Rm 2) -> out = ~7 round
 * trips, 5 of them L2. Predicted ~2-2.5 µs a call at depth <= 64 (v3 9.9 µs measured) and ~4-5 µs at
 * depth 4096.
 * Warp path (SB_TUNE=attn_warp=n, cu_attn_args.warp; off by default; only with hpb_lo 1): at depths
 * n <= warp (checked on the device after pos is read, so one captured graph still serves every step)
 * the blocks of lo mode's split 0 (one query head each) skip the tiles: q to shared memory and
 * rotated, one barrier (the speculative rows landed too), then warp w < nw = min(8, ceil(n/32))
 * takes 32-key chunks w, w + nw, ...: lane = key, its whole K row in registers (8 16-byte loads in
 * flight; from the speculative rows in shared memory when they are the keys: window-free n <= spec)
 * with its V row prefetched into L1, score, warp max / sum by shuffles, online softmax over its
 * chunks; P.V lane = dims lane + 32 i, key k's probability broadcast by a shuffle. One warp (n <=
 * 32): it writes out and the q8_1 blocks from registers (no more barriers); more: (m, l, acc[D]) a
 * warp into the tile region, a barrier, thread d merges dim d. Past AD_WKEYS (256) keys: splits of
 * 256 keys (a chunk a warp; block L = head block + nbx_lo * split as lo mode, at most S splits: warp
 * is clamped to 256 * S, and the grid holds Hq * ceil(min(warp, capacity) / 256) blocks), each
 * writing the hpb-1 partial (m, l, pad, acc[D]) to scratch, threadfence, the head block's counter;
 * the last merges (ad_warp_merge: m, l in one round trip, 256 / D threads a dim over the splits).
 * Depth 4096 (Qwen): 14 x 17 blocks (2 a SM), pos -> K rows (HBM/L2; V prefetched to L1) -> block
 * merge -> partial + fence -> atomic -> m, l -> acc (5 loads a thread) -> out: ~6 round trips, K/V
 * read 7 times from L2 (14 MB). Chain at depth <= 64 (Qwen, F16):
 * pos + q + K/V rows (one round trip, as the tiled path) -> RoPE -> 1 barrier (2-3 with 33..64
 * keys) -> 2 x 8 shared loads + 64 FMAs (score) -> 10 shuffles, 1 expf -> 32 x (shuffle + 2
 * shared loads + 2 FMAs) (P.V) -> store (+ 2 shuffle reductions for q8_1); vs the tiled path's ~8
 * barriers, scores through shared memory, a softmax warp, 4 key groups summed through shared memory.
 * Small-depth layout (SB_TUNE=attn_small=1: up to 64 keys, 2: up to 128; cu_attn_args.small; off by
 * default; only with hpb_lo 1; checked on the device before the warp path, so one captured graph
 * still serves every step): lo mode's split-0 blocks (one query head each) as the warp path up to
 * the barrier after q (RoPE: rope_rot, one pair a thread, as before), then the keys' work spread
 * over all 8 warps (ad_small_head): scores with 4 threads a key (64 keys a pass: 16 dims a thread
 * at D 64, two 16-byte loads + 16 FMAs, 2 shuffles) into shared memory, each warp's max (5
 * shuffles), a barrier, the block max from 8 shared loads; P.V with warp w over keys w, w + 8, ...
 * and lanes over dims (p = expf(s - M): op_attention's plain two-pass softmax, no rescaling; at 64
 * keys 8 keys a warp: 8 expf + 8 FMAs a dim, no shuffles), the 8 partial (l, acc[D]) through shared
 * memory, a barrier, thread d adds dim d over 8 warps, out = acc / l, the q8_1 blocks by warps 0
 * and 1 (D 64). K/V rows from the speculative rows (window-free n <= spec) when its scratch fits
 * clear of them and q (small_off), else from global memory (L2). Chain at depth <= 64 (Qwen, F16):
 * pos + q + K/V rows (one round trip) -> RoPE -> 1 barrier -> 2 shared 16-byte loads + 16 FMAs + 2
 * shuffles (+ a second pass past 64 keys) -> 5 shuffles -> barrier -> 8 shared loads -> 8 x (shared
 * load, expf, 2 V loads, 2 FMAs; independent but the acc chain) -> barrier -> 8 x 2 shared loads
 * + adds -> store (+ q8_1: 2 shuffle reductions); vs the warp path's 64 dependent FMAs of the row
 * dot and 32 x (shuffle + FMA) of P.V in one warp.
 * A sliding-window ring cache (cu_attn_args.ring): key j at row kv_row(j, ring) in every load; the
 * speculative rows [0, spec) are keys 0..spec-1 only where they are read (lo == 0: p < window <= ring).
 * Rings take their own instantiations (RING): a linear cache's kernels carry no row arithmetic per
 * key (it cost the small layout 16 registers and ~11% of its time). A paged cache (cu_attn_args.tbl:
 * the batched engine's B = 1 step at a depth class, cu_attn_decode_paged_fits) takes the SMALL_ONLY
 * kernel's PAGED instantiation (key j at row kv_row_tbl(j, tbl, bs)) or k_attn_deep's; the linear
 * and ring instantiations compile to the same PTX as before it existed.
 * Requires: G <= 8, D <= 256, F32 or F16 cache, S <= 256, counters for every head block
 * (cu_attention falls back to variant 2 without them).
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c: attention, rope+attention, the
 * Q/K/V block and the decode-depth cases for variant 4, with heads per block auto, 1, 3 and G; the
 * warp path up to depth 1024 and 32, and on with 3 heads a block (where it is off); the small layout
 * up to 64 and 128 keys, depths 0..128 with windows, softcap, head_dim 64..256, q8_1 output);
 * without a GPU test_cuda_attn_decode_emu, and test_cuda_attn_paged_dec_emu for the paged form).
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"

#include <math.h>

#define AD_THREADS 256
#define AD_WARPS (AD_THREADS / 32)
#define AD_GMAX 8   /* query heads per kv head (one warp each in the softmax step) */
#define AD_DMAX 256 /* head_dim */
#define AD_ACC (AD_GMAX * AD_DMAX / AD_THREADS) /* (head, dim) outputs per thread */
#define AD_TKMAX 128                            /* keys per shared-memory tile */
#define AD_SMAX 256                             /* grid splits */
#define AD_SMEM (48 * 1024 - 64)                /* dynamic shared memory (the default limit, less the static `last`) */
#define AD_WDIMS (AD_DMAX / 32)                 /* the warp path's output dims a lane: lane + 32 i */
#define AD_WKEYS (AD_WARPS * 32)                /* the warp path's keys a split (a 32-key chunk a warp) */
#define AD_SKMAX 128                            /* the small layout's most keys (2 passes of 64 keys) */
#define AD_STPK 4                               /* the small layout's threads a key in the scores */

typedef struct ad_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} ad_rope;

typedef struct ad_args {
    int D, G, f16, vec;     /* vec: rows are whole 16-byte chunks (16-byte copies and reads) */
    int window, S, kmin;    /* S: grid splits; kmin: fewest keys per split */
    int tk, ks, tile_off;   /* tile keys, padded row bytes, byte offset of the K tile in shared memory */
    int Hkv, hp;            /* kv heads; hp = max(hpb_lo, hpb_hi): the query heads the shared-memory layout holds */
    int hpb_lo, hpb_hi;     /* query heads per block at small depth (lo mode) and deeper (hi mode) */
    int lo_blocks;          /* lo mode while its active blocks Hkv * ceil(G / hpb_lo) * na <= lo_blocks */
    int spec;               /* keys of the first tile loaded before pos is read (blocks that are split 0; 0: none) */
    int pre;                /* the small-only kernel issues its speculative K/V copies before the PDL wait */
    int warp;               /* the warp path at depths n <= warp (0: off; only with hpb_lo 1) */
    int small;              /* the small layout at depths n <= small (<= AD_SKMAX; 0: off; only with hpb_lo 1) */
    int small_off;          /* byte offset of its scratch when the keys are the speculative rows (0: read them from global memory then) */
    int small_off0;         /* byte offset of its scratch otherwise (after q) */
    int64_t Dkv;            /* cache row length (elements) */
    int64_t ring;           /* a sliding-window ring cache of this many rows: key j at row kv_row(j, ring); 0: linear */
    float scale, softcap;
    const int32_t *tbl;     /* a paged cache (PAGED instantiations only): key j at row kv_row_tbl(j, tbl, bs) */
    int bs;
} ad_args;

/* the row of key j0 + k from r0 = kv_row(j0, ring): through the block table when tbl (a constant
 * NULL in the instantiations without one, so their code keeps no table arithmetic) */
static __device__ __forceinline__ int64_t ad_row(int64_t r0, int64_t j0, int k, int64_t ring, const int32_t *tbl, int bs) {
    return tbl ? kv_row_tbl(j0 + k, tbl, bs) : kv_row_next(r0, k, ring);
}

/* keys j+k0 .. j+k1-1 of one kv head's rows (cache c; key i at row kv_row(i, ring), or through the
 * block table tbl) into shared rows k0 .. k1-1 of ks bytes */
static __device__ __forceinline__ void ad_load_tile(unsigned char *sdst, const void *c, int64_t j, int k0, int k1, int64_t head_el, int64_t ring,
                                                    const int32_t *tbl, const ad_args &a) {
    const int es = a.f16 ? 2 : 4, rb = a.D * es, nk = k1 - k0;
    const int64_t stride = a.Dkv * es;
    const unsigned char *src = (const unsigned char *)c + head_el * es;
    sdst += k0 * a.ks;
    if (nk <= 0) return;
    const int64_t r0 = kv_row(j + k0, ring); /* key j + k0 + key at row kv_row_next(r0, key) */
    if (a.vec) {
        const int cpr = rb / 16;
        for (int i = threadIdx.x; i < nk * cpr; i += AD_THREADS) {
            const int key = i / cpr, part = i - key * cpr;
            cu_cp16(sdst + key * a.ks + part * 16, src + ad_row(r0, j + k0, key, ring, tbl, a.bs) * stride + part * 16);
        }
    } else if (a.f16) {
        for (int i = threadIdx.x; i < nk * a.D; i += AD_THREADS) {
            const int key = i / a.D, d = i - key * a.D;
            ((uint16_t *)(sdst + key * a.ks))[d] = ((const uint16_t *)(src + ad_row(r0, j + k0, key, ring, tbl, a.bs) * stride))[d];
        }
    } else {
        for (int i = threadIdx.x; i < nk * a.D; i += AD_THREADS) {
            const int key = i / a.D, d = i - key * a.D;
            ((float *)(sdst + key * a.ks))[d] = ((const float *)(src + ad_row(r0, j + k0, key, ring, tbl, a.bs) * stride))[d];
        }
    }
}

static __device__ __forceinline__ float ad_lo(unsigned u) { return cu_h2f((uint16_t)(u & 0xffffu)); }
static __device__ __forceinline__ float ad_hi(unsigned u) { return cu_h2f((uint16_t)(u >> 16)); }

/* part `part` of q . row for one key, of tpk parts (chunks part, part + tpk, ...: 8 halves or 4
 * floats with vec, else single elements): q f32 in shared memory, the row in shared memory in the
 * cache's type */
static __device__ __forceinline__ float ad_dot_part(const float *q, const unsigned char *row, int part, int tpk, const ad_args &a) {
    float s0 = 0.0f, s1 = 0.0f;
    if (a.vec && a.f16) {
        const uint4 *r = (const uint4 *)row;
        for (int c = part; c < a.D / 8; c += tpk) {
            const uint4 u = r[c];
            const float *qq = q + 8 * c;
            s0 += qq[0] * ad_lo(u.x) + qq[1] * ad_hi(u.x) + qq[2] * ad_lo(u.y) + qq[3] * ad_hi(u.y);
            s1 += qq[4] * ad_lo(u.z) + qq[5] * ad_hi(u.z) + qq[6] * ad_lo(u.w) + qq[7] * ad_hi(u.w);
        }
    } else if (a.vec) {
        const float4 *r = (const float4 *)row, *qq = (const float4 *)q;
        for (int c = part; c < a.D / 4; c += 2 * tpk) {
            const float4 u = r[c], x = qq[c];
            s0 += x.x * u.x + x.y * u.y + x.z * u.z + x.w * u.w;
            if (c + tpk < a.D / 4) {
                const float4 u1 = r[c + tpk], x1 = qq[c + tpk];
                s1 += x1.x * u1.x + x1.y * u1.y + x1.z * u1.z + x1.w * u1.w;
            }
        }
    } else if (a.f16) {
        for (int d = part; d < a.D; d += tpk) s0 += q[d] * cu_h2f(((const uint16_t *)row)[d]);
    } else {
        for (int d = part; d < a.D; d += tpk) s0 += q[d] * ((const float *)row)[d];
    }
    return s0 + s1;
}

static __device__ __forceinline__ float ad_vld(const unsigned char *sv, int key, int d, const ad_args &a) {
    return a.f16 ? cu_h2f(((const uint16_t *)(sv + key * a.ks))[d]) : ((const float *)(sv + key * a.ks))[d];
}

/* out (and its q8_1 blocks) for this thread's (head, dim) pairs: the whole warp calls it (D % 32 == 0 with xq) */
static __device__ __forceinline__ void ad_store(float *dst, blk_q8_1 *xq, int64_t h0, const float *acc, const int *gi, const float *linv, int GD, int D) {
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = threadIdx.x + i * AD_THREADS;
        if (e < GD) {
            const float v = acc[i] * linv[gi[i]];
            dst[h0 * D + e] = v;
            if (xq) q8_1_store(xq + (h0 * D + e) / 32, v, e & 31); /* a 32-block lies in one head: e & 31 == lane */
        }
    }
}

/* the scores of one tile: ss[g][k] = softcap(q_g . k_k * scale) for Gb heads x nk keys, tpk threads
 * per (head, key) (a power of two <= 32, as many as 256 threads allow), their parts added by
 * shuffles; the loop bound is the same for every thread (the shuffles need whole warps) */
static __device__ __forceinline__ void ad_scores(float *ss, const float *sq, const unsigned char *sk, int Gb, int nk, const ad_args &a) {
    const int nch = a.vec ? (a.f16 ? a.D / 8 : a.D / 4) : a.D;
    int tpk = 1;
    while (tpk < 32 && 2 * tpk <= nch && Gb * nk * 2 * tpk <= AD_THREADS) tpk *= 2;
    const int total = Gb * nk * tpk;
    for (int base = 0; base < total; base += AD_THREADS) {
        const int i = base + (int)threadIdx.x, slot = i / tpk, part = i & (tpk - 1);
        const bool valid = i < total;
        const int g = valid ? slot / nk : 0, k = valid ? slot - g * nk : 0;
        float s = valid ? ad_dot_part(sq + g * a.D, sk + k * a.ks, part, tpk, a) : 0.0f;
        for (int o = tpk / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (valid && part == 0) {
            s *= a.scale;
            if (a.softcap > 0.0f) s = tanhf(s / a.softcap) * a.softcap;
            ss[g * a.tk + k] = s;
        }
    }
}

/* this block's q (Gb heads from qh) into shared memory, rotated (k_rope's math) when rp.n_rot > 0;
 * qr: the raw values already loaded (thread tid holds elements tid + i*AD_THREADS) */
static __device__ __forceinline__ void ad_q_to_shared(float *sq, const float *qr, int GDb, int Gb, int32_t p, const ad_rope &rp, const ad_args &a) {
#pragma unroll
    for (int i = 0; i < AD_ACC; i++)
        if ((int)threadIdx.x + i * AD_THREADS < GDb) sq[threadIdx.x + i * AD_THREADS] = qr[i];
    if (rp.n_rot <= 0) return;
    __syncthreads();
    const int half = rp.n_rot / 2;
    for (int i = threadIdx.x; i < Gb * half; i += AD_THREADS) { /* pairs are disjoint: rotated in place */
        const int g = i / half, r = i - g * half;
        const int ia = rp.mode == 2 ? r : 2 * r, ib = rp.mode == 2 ? r + half : 2 * r + 1;
        float ya, yb;
        rope_rot(sq[g * a.D + ia], sq[g * a.D + ib], r, p, rp.ts, rp.fs, rp.af, rp.ff, &ya, &yb);
        sq[g * a.D + ia] = ya;
        sq[g * a.D + ib] = yb;
    }
}

// ---- the warp path (a.warp: depth n <= a.warp, one query head a block) ----

static __device__ __forceinline__ void ad_prefetch_l1(const unsigned char *g) {
#ifdef __CUDA_ARCH__ /* (a no-op in host emulation: tests/codegen/emu) */
    asm volatile("prefetch.global.L1 [%0];" ::"l"(g));
#else
    (void)g;
#endif
}

/* q . row for one whole row (no parts), the row in global or shared memory (generic loads), up to
 * 8 16-byte loads in flight (unrolled: a global row is one round trip, not one per chunk) */
static __device__ __forceinline__ float ad_row_dot(const float *q, const unsigned char *row, const ad_args &a) {
    float s0 = 0.0f, s1 = 0.0f;
    if (a.vec && a.f16) {
        const uint4 *r = (const uint4 *)row;
#pragma unroll 8
        for (int c = 0; c < a.D / 8; c++) {
            const uint4 u = r[c];
            const float *qq = q + 8 * c;
            s0 += qq[0] * ad_lo(u.x) + qq[1] * ad_hi(u.x) + qq[2] * ad_lo(u.y) + qq[3] * ad_hi(u.y);
            s1 += qq[4] * ad_lo(u.z) + qq[5] * ad_hi(u.z) + qq[6] * ad_lo(u.w) + qq[7] * ad_hi(u.w);
        }
    } else if (a.vec) {
        const float4 *r = (const float4 *)row, *qq = (const float4 *)q;
#pragma unroll 8
        for (int c = 0; c < a.D / 4; c++) {
            const float4 u = r[c], x = qq[c];
            s0 += x.x * u.x + x.y * u.y;
            s1 += x.z * u.z + x.w * u.w;
        }
    } else if (a.f16) {
#pragma unroll 8
        for (int d = 0; d < a.D; d++) s0 += q[d] * cu_h2f(((const uint16_t *)row)[d]);
    } else {
#pragma unroll 8
        for (int d = 0; d < a.D; d++) s0 += q[d] * ((const float *)row)[d];
    }
    return s0 + s1;
}

static __device__ __forceinline__ float ad_row_at(const unsigned char *row, int d, int f16) {
    return f16 ? cu_h2f(((const uint16_t *)row)[d]) : ((const float *)row)[d];
}

/* out for one query head (h0) of kv head rows kg/vg (global, at the head's first element, rows
 * `stride` bytes apart, keys lo..lo+n-1) or, when sk (not NULL), of shared rows sk/sv (a.ks bytes
 * apart, key i at row i; keys 0..n-1). Warp w < nw = min(8, ceil(n/32)) takes 32-key chunks w, w +
 * nw, ...: lane = key; its K row is read whole (one round trip; its V row prefetched into L1 at the
 * same time), the score, the chunk's max and sum by shuffles, online softmax across its chunks;
 * P.V with lane = dims lane + 32 i, the probability of key k broadcast by a shuffle (V rows: L1 or
 * shared hits). One warp: it writes out (and the q8_1 blocks: dims 32 i.. a warp) itself; more:
 * (m, l, acc[D]) a warp to shared memory `wp` (the tile region: after a barrier when the keys are
 * there), one barrier, thread d < D merges dim d over the warps (the same factors exp(m_w - M) in
 * every thread) and writes it, warp i the q8_1 block i. sq: the rotated q in shared memory (the
 * caller's barrier passed). */
static __device__ __forceinline__ void ad_warp_head(float *dst, blk_q8_1 *xq, const unsigned char *kg, const unsigned char *vg, int64_t stride,
                                                    const unsigned char *sk, const unsigned char *sv, float *wp, const float *sq, int64_t lo,
                                                    int n, int64_t h0, float *pp, int64_t ring, const ad_args &a) {
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, D = a.D;
    const int nch = (n + 31) / 32, nw = nch < AD_WARPS ? nch : AD_WARPS; /* block-uniform */
    const int rb = D * (a.f16 ? 2 : 4);
    const int64_t r_lo = kv_row(lo, ring); /* key lo + k at row kv_row_next(r_lo, k) */
    float m = -INFINITY, l = 0.0f, acc[AD_WDIMS];
#pragma unroll
    for (int i = 0; i < AD_WDIMS; i++) acc[i] = 0.0f;
    if (w < nw) {
        for (int c = w; c < nch; c += nw) { /* warp-uniform bounds (the shuffles need whole warps) */
            const int k0 = c * 32, nk = n - k0 < 32 ? n - k0 : 32;
            const bool valid = lane < nk;
            float s = -INFINITY;
            if (valid) {
                const int64_t kr_row = kv_row_next(r_lo, k0 + lane, ring);
                const unsigned char *kr = sk ? sk + (k0 + lane) * a.ks : kg + kr_row * stride;
                if (!sk)
                    for (int o = 0; o < rb; o += 128) ad_prefetch_l1(vg + kr_row * stride + o); /* lines of this key's V row */
                s = ad_row_dot(sq, kr, a) * a.scale;
                if (a.softcap > 0.0f) s = tanhf(s / a.softcap) * a.softcap;
            }
            const float mn = fmaxf(m, warp_max(s)); /* finite: lane 0's key is valid */
            const float e = valid ? expf(s - mn) : 0.0f, cf = expf(m - mn); /* the first chunk: exp(-inf) = 0 rescales the zeros */
            l = l * cf + warp_sum(e);
            m = mn;
#pragma unroll
            for (int i = 0; i < AD_WDIMS; i++) acc[i] *= cf;
#pragma unroll 8
            for (int k = 0; k < nk; k++) {
                const float pk = __shfl_sync(0xffffffffu, e, k);
                const unsigned char *vr = sk ? sv + (k0 + k) * a.ks : vg + kv_row_next(r_lo, k0 + k, ring) * stride;
#pragma unroll
                for (int i = 0; i < AD_WDIMS; i++)
                    if (lane + 32 * i < D) acc[i] += pk * ad_row_at(vr, lane + 32 * i, a.f16);
            }
        }
    }
    if (nw == 1 && pp) { /* a split's partial (m, l, pad, acc[D]) straight from warp 0's registers */
        if (w == 0) {
            if (lane == 0) pp[0] = m, pp[1] = l;
#pragma unroll
            for (int i = 0; i < AD_WDIMS; i++)
                if (lane + 32 * i < D) pp[4 + lane + 32 * i] = acc[i];
        }
        return;
    }
    if (nw == 1) { /* warp 0 holds every key: out = acc / l, straight from registers */
        if (w == 0) {
            const float linv = 1.0f / l;
#pragma unroll
            for (int i = 0; i < AD_WDIMS; i++) {
                const int d = lane + 32 * i;
                if (32 * i >= D) break; /* warp-uniform */
                const float v = acc[i] * linv;
                if (d < D) dst[h0 * D + d] = v;
                if (xq) q8_1_store(xq + (h0 * D + 32 * i) / 32, v, lane); /* D % 32 == 0 with xq: every lane's d < D */
            }
        }
        return;
    }
    if (sk) __syncthreads(); /* every warp is done with the shared rows `wp` may overlap */
    float *wm = wp, *wl = wp + AD_WARPS, *wa = wp + 2 * AD_WARPS;
    if (w < nw) {
        if (lane == 0) wm[w] = m, wl[w] = l;
#pragma unroll
        for (int i = 0; i < AD_WDIMS; i++)
            if (lane + 32 * i < D) wa[w * D + lane + 32 * i] = acc[i];
    }
    __syncthreads();
    if (w * 32 < D) { /* whole warps: the q8_1 stores need them */
        float M = -INFINITY;
        for (int v = 0; v < nw; v++) M = fmaxf(M, wm[v]);
        float Ls = 0.0f, o = 0.0f;
        for (int v = 0; v < nw; v++) {
            const float f = expf(wm[v] - M);
            Ls += wl[v] * f;
            if (tid < D) o += wa[v * D + tid] * f;
        }
        if (pp) { /* a split's partial: (M, L, pad, the unnormalised sums) */
            if (tid == 0) pp[0] = M, pp[1] = Ls;
            if (tid < D) pp[4 + tid] = o;
            return;
        }
        o *= 1.0f / Ls;
        if (tid < D) dst[h0 * D + tid] = o;
        if (xq) q8_1_store(xq + (h0 * D + tid) / 32, o, lane);
    }
}

/* the last-arriving split block of head h0 (one query head a block) merges the na partials pk[s *
 * (4 + D)] = (m, l, pad, acc[D]) into out (and its q8_1 blocks): m and l of every split into
 * shared memory (one round trip), warp 0 the factors exp(m_s - M) and 1/L, then R = 256 / D
 * threads a dim each summing every R-th split's acc * factor (8 loads in flight), the R sums added;
 * `sm`: >= 2 * na + 4 + 256 floats of shared memory; resets the counter */
static __device__ __forceinline__ void ad_warp_merge(float *dst, blk_q8_1 *xq, const float *pk, int na, float *sm, unsigned *cnt, int64_t h0,
                                                     const ad_args &a) {
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, D = a.D, PS = 4 + D;
    float *sf = sm, *sl = sm + na, *linv = sl + na, *red = linv + 4;
    for (int s = tid; s < na; s += AD_THREADS) sf[s] = __ldcg(pk + (int64_t)s * PS), sl[s] = __ldcg(pk + (int64_t)s * PS + 1);
    __syncthreads();
    if (w == 0) {
        float M = -INFINITY;
        for (int s = lane; s < na; s += 32) M = fmaxf(M, sf[s]);
        M = warp_max(M);
        float Ls = 0.0f;
        for (int s = lane; s < na; s += 32) {
            const float f = expf(sf[s] - M); /* every split holds a key: m finite */
            Ls += sl[s] * f;
            sf[s] = f;
        }
        Ls = warp_sum(Ls);
        if (lane == 0) linv[0] = 1.0f / Ls;
    }
    __syncthreads();
    const int R = AD_THREADS / D, r = tid / D, d = tid - r * D; /* D <= 256: R >= 1 */
    if (r < R) {
        float sum = 0.0f;
#pragma unroll 8
        for (int s = r; s < na; s += R) sum += __ldcg(pk + (int64_t)s * PS + 4 + d) * sf[s];
        red[r * D + d] = sum;
    }
    __syncthreads();
    if (w * 32 < D) { /* whole warps: the q8_1 stores need them */
        float o = 0.0f;
        if (tid < D)
            for (int q = 0; q < R; q++) o += red[q * D + tid];
        o *= linv[0];
        if (tid < D) dst[h0 * D + tid] = o;
        if (xq) q8_1_store(xq + (h0 * D + tid) / 32, o, lane);
    }
    if (tid == 0) cnt[0] = 0; /* ready for the next attention */
}

/* the small layout (a.small: depth n <= a.small <= AD_SKMAX, one query head a block): out for query
 * head h0 of kv head rows kg/vg (global, at the head's first element, rows `stride` bytes apart, keys
 * lo..lo+n-1) or, when sk (not NULL), of shared rows sk/sv (a.ks bytes apart, key i at row i). The
 * work of the keys is spread over the 8 warps (the warp path leaves 7 of 8 idle up to 32 keys):
 * scores with AD_STPK = 4 threads a key (thread tid: key tid / 4 + 64 r, chunks tid % 4, tid % 4 + 4,
 * ...: 16 dims each at D 64), their parts added by 2 shuffles, into shared memory; each warp's max
 * (5 shuffles) into shared memory, one barrier, every thread the block max M (8 shared loads); P.V
 * with warp w over keys w, w + 8, ... and lanes over dims lane + 32 i: p_k = expf(s_k - M) (the
 * score a broadcast shared load; op_attention's plain two-pass max / exp / sum), acc += p_k v_k, no
 * shuffles; the 8 partial (l, acc[D]) through shared memory, one barrier, thread d < D adds dim d
 * over the warps and writes out = acc / l (and warp i the q8_1 block i). ws: AD_SKMAX + 2 *
 * AD_WARPS + AD_WARPS * D floats of shared memory overlapping neither q (sq) nor the rows sk/sv;
 * sq: the rotated q (the caller's barrier passed). Global rows through the block table when tbl. */
static __device__ __forceinline__ void ad_small_head(float *dst, blk_q8_1 *xq, const unsigned char *kg, const unsigned char *vg, int64_t stride,
                                                     const unsigned char *sk, const unsigned char *sv, float *ws, const float *sq, int64_t lo,
                                                     int n, int64_t h0, int64_t ring, const int32_t *tbl, const ad_args &a) {
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, D = a.D;
    float *ssc = ws, *wm = ws + AD_SKMAX, *wl = wm + AD_WARPS, *wa = wl + AD_WARPS;
    const int part = tid & (AD_STPK - 1);
    const int64_t r_lo = kv_row(lo, ring); /* key lo + k at row kv_row_next(r_lo, k) */
    float mx = -INFINITY;
    for (int k0 = 0; k0 < n; k0 += AD_THREADS / AD_STPK) { /* block-uniform bounds (the shuffles need whole warps) */
        const int k = k0 + tid / AD_STPK;
        const bool valid = k < n; /* the same for the 4 threads of a key */
        float s = valid ? ad_dot_part(sq, sk ? sk + k * a.ks : kg + ad_row(r_lo, lo, k, ring, tbl, a.bs) * stride, part, AD_STPK, a) : 0.0f;
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        s += __shfl_xor_sync(0xffffffffu, s, 1); /* the same bits in the 4 threads: (s0 + s2) + (s1 + s3) */
        if (valid) {
            s *= a.scale;
            if (a.softcap > 0.0f) s = tanhf(s / a.softcap) * a.softcap;
            if (part == 0) ssc[k] = s;
            mx = fmaxf(mx, s);
        }
    }
    mx = warp_max(mx);
    if (lane == 0) wm[w] = mx; /* -inf for a warp without keys */
    __syncthreads();
    float M = wm[0];
#pragma unroll
    for (int v = 1; v < AD_WARPS; v++) M = fmaxf(M, wm[v]); /* finite: key 0 exists */
    float l = 0.0f, acc[AD_WDIMS];
#pragma unroll
    for (int i = 0; i < AD_WDIMS; i++) acc[i] = 0.0f;
#pragma unroll 4
    for (int k = w; k < n; k += AD_WARPS) { /* warp-uniform; no shuffles: each lane its own dims */
        const float pk = expf(ssc[k] - M);
        const unsigned char *vr = sk ? sv + k * a.ks : vg + ad_row(r_lo, lo, k, ring, tbl, a.bs) * stride;
        l += pk;
#pragma unroll
        for (int i = 0; i < AD_WDIMS; i++)
            if (lane + 32 * i < D) acc[i] += pk * ad_row_at(vr, lane + 32 * i, a.f16);
    }
    if (lane == 0) wl[w] = l;
#pragma unroll
    for (int i = 0; i < AD_WDIMS; i++)
        if (lane + 32 * i < D) wa[w * D + lane + 32 * i] = acc[i];
    __syncthreads();
    if (w * 32 < D) { /* whole warps: the q8_1 stores need them */
        float o = 0.0f, L = 0.0f;
#pragma unroll
        for (int v = 0; v < AD_WARPS; v++) {
            L += wl[v];
            if (tid < D) o += wa[v * D + tid];
        }
        o *= 1.0f / L;
        if (tid < D) dst[h0 * D + tid] = o;
        if (xq) q8_1_store(xq + (h0 * D + tid) / 32, o, lane); /* D % 32 == 0 with xq: every lane's tid < D */
    }
}

/* SMALL_ONLY: the small-depth layout alone (cu_attn_args.depth_max <= small: the host knows every depth
 * this launch sees is one it takes), launched with lo mode's split-0 blocks only; the other modes'
 * code is left out, a fraction of the full kernel's instructions (the H200's profile of the full
 * kernel at depth <= 5 showed a third of its stall samples waiting for instruction fetch). A depth
 * it does not take (a host bug) writes NaN, never a plausible result.
 * PAGED (SMALL_ONLY only, no ring): a paged cache, key j at row kv_row_tbl(j, a.tbl, a.bs) (the
 * batched engine's B = 1 step). Only table entries of positions <= p are valid (plan_check_paged),
 * so pos is read first (host-written before the graph) and the speculative copies take keys 0 ..
 * min(spec, p + 1) - 1, none when the window starts past 0; the rest is the contiguous code. */
template <bool SMALL_ONLY, bool RING, bool PAGED = false>
__global__ void __launch_bounds__(AD_THREADS) k_attn_dec(float *dst, const float *q, const void *kc, const void *vc, const int32_t *pos,
                                                         ad_args a, ad_rope rp, float *part, unsigned *cnt, blk_q8_1 *xq) {
    static_assert(!PAGED || (SMALL_ONLY && !RING), "k_attn_dec: a paged cache takes the small-only kernel of a linear one");
    /* SMALL_ONLY with a.pre: the speculative K/V rows (cache rows [0, spec), earlier steps' but for
     * row p, which is re-read after the wait) are issued BEFORE the PDL wait, under the previous kernel */
    const bool pre = SMALL_ONLY && a.pre;
    if (pre)
        CU_PDL_LAUNCH();
    else
        CU_PDL_ENTRY();
    CU_DYN_SMEM(ad_sm);
    __shared__ int last;
    const int64_t ring = RING ? a.ring : 0; /* a constant 0 for linear caches: no row arithmetic per key */
    const int32_t *tbl = PAGED ? a.tbl : nullptr; /* a constant NULL but for paged caches */
    const int L = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int D = a.D, G = a.G, Hkv = a.Hkv;
    const int kvh = L % Hkv; /* the same in both modes: block L = kvh + Hkv * (head block + nhb * split) */
    const int nhb_lo = (G + a.hpb_lo - 1) / a.hpb_lo, nhb_hi = (G + a.hpb_hi - 1) / a.hpb_hi;
    const int nbx_lo = Hkv * nhb_lo, nbx_hi = Hkv * nhb_hi;
    float *sq = (float *)ad_sm, *ss = sq + a.hp * D, *sm_m = ss + a.hp * a.tk, *sm_l = sm_m + a.hp, *sm_c = sm_l + a.hp;
    unsigned char *sk = ad_sm + a.tile_off, *sv = sk + a.tk * a.ks;
    const int64_t head_el = (int64_t)kvh * D;
    /* before pos is known: split 0's first keys (when this block is split 0: every block L < the
     * larger head-block count, at least in lo mode), and the raw q of lo mode's heads */
    const bool spec = a.spec > 0 && L < (nbx_lo > nbx_hi ? nbx_lo : nbx_hi);
    const int soff = a.tk - a.spec; /* they go to the top rows [tk - spec, tk): a first tile of <= tk - spec keys at row 0 does not wait for them */
    int nspec = a.spec;
    if (PAGED && spec) { /* table entries up to p only; from key 0 only where the window starts there */
        const int64_t p0 = pos[0];
        nspec = attn_window_lo(p0, a.window) > 0 ? 0 : p0 + 1 < a.spec ? (int)p0 + 1 : a.spec;
    }
    if (spec) {
        ad_load_tile(sk + soff * a.ks, kc, 0, 0, nspec, head_el, ring, tbl, a);
        cu_cp_commit();
        ad_load_tile(sv + soff * a.ks, vc, 0, 0, nspec, head_el, ring, tbl, a);
        cu_cp_commit();
    }
    if (pre) CU_PDL_WAIT();
    const int hb_lo = (L % nbx_lo) / Hkv, g0_lo = hb_lo * a.hpb_lo, Gb_lo = G - g0_lo < a.hpb_lo ? G - g0_lo : a.hpb_lo;
    float qr[AD_ACC];
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = tid + i * AD_THREADS;
        qr[i] = e < Gb_lo * D ? q[((int64_t)kvh * G + g0_lo) * D + e] : 0.0f;
    }
    const int64_t p = pos[0];
    const int64_t lo = attn_window_lo(p, a.window);
    const int64_t n = p - lo + 1;
    if (n <= a.small) { /* the small layout: lo mode's split-0 blocks, one query head each (hpb_lo 1: the host) */
        if (L >= nbx_lo) {
            if (spec) cu_cp_wait<0>();
            return;
        }
        ad_q_to_shared(sq, qr, D, 1, (int32_t)p, rp, a);
        if (spec) cu_cp_wait<0>(); /* the speculative rows landed (read below when they are the keys) */
        __syncthreads();
        const bool in_smem = a.small_off > 0 && spec && lo == 0 && n <= a.spec; /* keys 0..n-1 are the speculative rows */
        const int es = a.f16 ? 2 : 4;
        if (pre && in_smem) { /* row p was copied before the wait (every copy landed: the barrier above): this step's, re-read */
            const int cpr = D * es / 16; /* spec > 0 only with whole 16-byte rows (a.vec) */
            const int64_t rp = tbl ? kv_row_tbl(p, tbl, a.bs) : p;
            const unsigned char *kr = (const unsigned char *)kc + (rp * a.Dkv + head_el) * es, *vr = (const unsigned char *)vc + (rp * a.Dkv + head_el) * es;
            for (int i = tid; i < 2 * cpr; i += AD_THREADS) {
                const int c = i < cpr ? i : i - cpr;
                unsigned char *row = (i < cpr ? sk : sv) + (soff + p) * a.ks;
                *(uint4 *)(row + 16 * c) = *(const uint4 *)((i < cpr ? kr : vr) + 16 * c);
            }
            __syncthreads();
        }
        ad_small_head(dst, xq, (const unsigned char *)kc + head_el * es, (const unsigned char *)vc + head_el * es, a.Dkv * es,
                      in_smem ? sk + soff * a.ks : NULL, in_smem ? sv + soff * a.ks : NULL, (float *)(ad_sm + (in_smem ? a.small_off : a.small_off0)),
                      sq, lo, (int)n, (int64_t)kvh * G + g0_lo, ring, tbl, a);
        return;
    }
    if (SMALL_ONLY) { /* not a depth this kernel takes: a visible NaN (dst and the q8_1 scales) */
        if (spec) cu_cp_wait<0>();
        const int64_t h0 = (int64_t)kvh * G + g0_lo;
        if (L < nbx_lo && tid < D) {
            dst[h0 * D + tid] = __int_as_float(0x7fc00000);
            if (xq && tid % 32 == 0) xq[(h0 * D + tid) / 32].d = cu_f2h(__int_as_float(0x7fc00000));
        }
        return;
    }
    if (n <= a.warp) { /* the warp path: lo mode's blocks, one query head each (hpb_lo 1: the host), AD_WKEYS keys a split */
        const int naw = (int)((n + AD_WKEYS - 1) / AD_WKEYS), spw = L / nbx_lo, bxw = L - spw * nbx_lo; /* naw <= S: the host */
        if (spw >= naw) {
            if (spec) cu_cp_wait<0>();
            return;
        }
        ad_q_to_shared(sq, qr, D, 1, (int32_t)p, rp, a);
        if (spec) cu_cp_wait<0>(); /* the speculative rows landed: read below when they are the keys, overwritten by the merge otherwise */
        __syncthreads();
        const bool in_smem = spec && lo == 0 && n <= a.spec; /* keys 0..n-1 are the speculative rows (naw 1) */
        const int es = a.f16 ? 2 : 4;
        const int64_t h0w = (int64_t)kvh * G + g0_lo, jw = (int64_t)spw * AD_WKEYS;
        const int nkw = (int)(n - jw < AD_WKEYS ? n - jw : AD_WKEYS);
        float *pkw = naw > 1 ? part + (int64_t)bxw * a.S * (4 + D) : NULL; /* the hpb 1 partial layout: (m, l, pad, acc[D]) a split */
        ad_warp_head(dst, xq, (const unsigned char *)kc + head_el * es, (const unsigned char *)vc + head_el * es, a.Dkv * es,
                     in_smem ? sk + soff * a.ks : NULL, in_smem ? sv + soff * a.ks : NULL, (float *)sk, sq, lo + jw, nkw, h0w,
                     pkw ? pkw + (int64_t)spw * (4 + D) : NULL, ring, a);
        if (naw == 1) return;
        if (!block_arrives_last(&cnt[bxw], (unsigned)naw, &last)) return;
        ad_warp_merge(dst, xq, pkw, naw, (float *)sk, cnt + bxw, h0w, a);
        return;
    }
    int64_t kps = (n + a.S - 1) / a.S;
    if (kps < a.kmin) kps = a.kmin;
    const int na = (int)((n + kps - 1) / kps);
    /* the mode: HPB heads a block (lo: spread over more blocks) while lo mode's blocks fit lo_blocks */
    const bool lom = (int64_t)nbx_lo * na <= a.lo_blocks;
    const int hpb = lom ? a.hpb_lo : a.hpb_hi, nbx = lom ? nbx_lo : nbx_hi;
    const int sp = L / nbx, bx = L - sp * nbx, hb = bx / Hkv, g0 = hb * hpb, Gb = G - g0 < hpb ? G - g0 : hpb, GDb = Gb * D;
    if (sp >= na) { /* an empty split */
        if (spec) cu_cp_wait<0>();
        return;
    }
    const int64_t j0 = lo + sp * kps, j1 = j0 + kps < p + 1 ? j0 + kps : p + 1;
    const int64_t h0 = (int64_t)kvh * G + g0; /* first query head of this block */
    if (!lom && a.hpb_lo != a.hpb_hi) { /* hi mode's heads: q again */
#pragma unroll
        for (int i = 0; i < AD_ACC; i++) {
            const int e = tid + i * AD_THREADS;
            qr[i] = e < GDb ? q[h0 * D + e] : 0.0f;
        }
    }
    ad_q_to_shared(sq, qr, GDb, Gb, (int32_t)p, rp, a); /* read after the first tile's barrier */
    if (tid < Gb) sm_m[tid] = -INFINITY, sm_l[tid] = 0.0f;

    /* P.V: thread = ((head, dim) pair, key group): R = 256 / (Gb*D) key groups when two or more fit
     * (group kg takes keys kg, kg+R, ...; one pair a thread), else one group and pairs
     * tid + i*256; the groups' sums are added at the end */
    const int R = GDb <= AD_THREADS / 2 ? AD_THREADS / GDb : 1, kg = R > 1 ? tid / GDb : 0;
    int gi[AD_ACC], di[AD_ACC];
    bool own[AD_ACC];
    float acc[AD_ACC];
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = R > 1 ? tid - kg * GDb : tid + i * AD_THREADS;
        own[i] = R > 1 ? i == 0 && tid < R * GDb : e < GDb;
        gi[i] = own[i] ? e / D : 0;
        di[i] = own[i] ? e - gi[i] * D : 0;
        acc[i] = 0.0f;
    }
    for (int64_t jt = j0; jt < j1; jt += a.tk) {
        const int nk = (int)(j1 - jt < a.tk ? j1 - jt : a.tk);
        unsigned char *tkk = sk, *tkv = sv; /* this tile's rows */
        if (spec && jt == j0 && jt == 0 && nk <= a.spec) { /* this tile is on its way (the two newest groups) */
            tkk += soff * a.ks;
            tkv += soff * a.ks;
        } else {
            if (spec && jt == j0 && nk > soff) { /* rows the speculative copies (not this block's keys) still write: let them land */
                cu_cp_wait<0>();
                __syncthreads();
            }
            ad_load_tile(sk, kc, jt, 0, nk, head_el, ring, tbl, a);
            cu_cp_commit();
            ad_load_tile(sv, vc, jt, 0, nk, head_el, ring, tbl, a);
            cu_cp_commit();
        }
        cu_cp_wait<1>(); /* this thread's K copies landed (groups complete in order; older ones, the speculative ones too) */
        __syncthreads();
        ad_scores(ss, sq, tkk, Gb, nk, a);
        __syncthreads();
        if (w < Gb) { /* warp w: head w's running max and sum; scores -> probabilities */
            float *sr = ss + w * a.tk;
            float mt = -INFINITY;
            for (int k = lane; k < nk; k += 32) mt = fmaxf(mt, sr[k]);
            mt = warp_max(mt);
            const float mo = sm_m[w], mn = fmaxf(mo, mt); /* finite: the tile holds a key */
            float sum = 0.0f;
            for (int k = lane; k < nk; k += 32) {
                const float e = expf(sr[k] - mn);
                sr[k] = e;
                sum += e;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float c = expf(mo - mn);
                sm_c[w] = c;
                sm_l[w] = sm_l[w] * c + sum;
                sm_m[w] = mn;
            }
        }
        cu_cp_wait<0>(); /* V too */
        __syncthreads();
#pragma unroll
        for (int i = 0; i < AD_ACC; i++)
            if (own[i]) acc[i] *= sm_c[gi[i]];
        int k = kg;
        for (; k + 3 * R < nk; k += 4 * R) { /* 4 keys x this thread's pairs of shared-memory loads in flight */
#pragma unroll
            for (int i = 0; i < AD_ACC; i++)
                if (own[i]) {
                    const float *pr = ss + gi[i] * a.tk + k;
                    acc[i] += pr[0] * ad_vld(tkv, k, di[i], a) + pr[R] * ad_vld(tkv, k + R, di[i], a) +
                              pr[2 * R] * ad_vld(tkv, k + 2 * R, di[i], a) + pr[3 * R] * ad_vld(tkv, k + 3 * R, di[i], a);
                }
        }
        for (; k < nk; k += R) {
#pragma unroll
            for (int i = 0; i < AD_ACC; i++)
                if (own[i]) acc[i] += ss[gi[i] * a.tk + k] * ad_vld(tkv, k, di[i], a);
        }
        __syncthreads(); /* the next tile overwrites sk, sv, ss */
    }
    if (R > 1) { /* the key groups' sums, in the tile region (free now), into the threads tid < GDb */
        float *red = (float *)sk;
        if (own[0]) red[tid] = acc[0];
        __syncthreads();
        if (tid < GDb) {
            float sum = 0.0f;
            for (int r = 0; r < R; r++) sum += red[r * GDb + tid];
            acc[0] = sum;
        }
        /* later writers of the tile region (the merge) pass the barriers below first */
    }

    if (na == 1) { /* the only active split: out directly */
        float *linv = sm_c; /* the last tile's factors are consumed */
        if (tid < Gb) linv[tid] = 1.0f / sm_l[tid];
        __syncthreads();
        ad_store(dst, xq, h0, acc, gi, linv, GDb, D);
        return;
    }
    const int AO = (2 * hpb + 3) & ~3, PS = AO + hpb * D; /* one split's partial: m[Gb], l[Gb], padding, acc[Gb*D] at a 16-byte offset */
    float *pk = part + (int64_t)bx * a.S * PS;
    float *pp = pk + (int64_t)sp * PS;
    if (tid < Gb) pp[tid] = sm_m[tid], pp[hpb + tid] = sm_l[tid];
#pragma unroll
    for (int i = 0; i < AD_ACC; i++)
        if (tid + i * AD_THREADS < GDb) pp[AO + tid + i * AD_THREADS] = acc[i];
    if (!block_arrives_last(&cnt[bx], (unsigned)na, &last)) return;
    /* the merge, in the tile region of shared memory: m and l of every (split, head), then factors
     * f[s][g] = exp(m - M_g) and 1/L_g; then Rm = AD_THREADS / columns threads per column of 4 (or 1)
     * acc floats, each summing every Rm-th split's acc * f (16-byte L2 loads, 8 in flight), and the
     * Rm partial sums of each float added up */
    float *sf = (float *)sk, *sl = sf + na * Gb, *linv = sl + na * Gb, *red = sf + ((2 * na * Gb + Gb + 3) & ~3); /* red 16-byte aligned */
#pragma unroll 4 /* the loads of every pass in flight (hi mode at depth 4096: 65 x 7 pairs, 2 passes a thread) */
    for (int i = tid; i < na * Gb; i += AD_THREADS) {
        const int s = i / Gb, g = i - s * Gb;
        sf[i] = __ldcg(pk + (int64_t)s * PS + g);
        sl[i] = __ldcg(pk + (int64_t)s * PS + hpb + g);
    }
    __syncthreads();
    if (w < Gb) {
        float M = -INFINITY;
        for (int s = lane; s < na; s += 32) M = fmaxf(M, sf[s * Gb + w]);
        M = warp_max(M);
        float Ls = 0.0f;
        for (int s = lane; s < na; s += 32) {
            const float m = sf[s * Gb + w], f = m == -INFINITY ? 0.0f : expf(m - M);
            Ls += sl[s * Gb + w] * f;
            sf[s * Gb + w] = f;
        }
        Ls = warp_sum(Ls);
        if (lane == 0) linv[w] = 1.0f / Ls;
    }
    __syncthreads();
    const int vw = D % 4 == 0 ? 4 : 1, ncol = GDb / vw, Rm = ncol < AD_THREADS ? AD_THREADS / ncol : 1;
    for (int it = tid; it < ncol * Rm; it += AD_THREADS) {
        const int c = it % ncol, r = it / ncol, g = c * vw / D;
        const float *pc = pk + AO + c * vw;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (vw == 4) {
#pragma unroll 8
            for (int s = r; s < na; s += Rm) {
                const float4 x = __ldcg((const float4 *)(pc + (int64_t)s * PS));
                const float f = sf[s * Gb + g];
                sum.x += x.x * f, sum.y += x.y * f, sum.z += x.z * f, sum.w += x.w * f;
            }
            *(float4 *)(red + r * GDb + c * 4) = sum;
        } else {
#pragma unroll 8
            for (int s = r; s < na; s += Rm) sum.x += __ldcg(pc + (int64_t)s * PS) * sf[s * Gb + g];
            red[r * GDb + c] = sum.x;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < AD_ACC; i++) {
        const int e = tid + i * AD_THREADS;
        acc[i] = 0.0f;
        if (e < GDb)
            for (int r = 0; r < Rm; r++) acc[i] += red[r * GDb + e];
    }
    ad_store(dst, xq, h0, acc, gi, linv, GDb, D);
    if (tid == 0) cnt[bx] = 0; /* ready for the next attention */
}

/* bytes of shared memory before the K tile: q [hp*D], scores [hp*tk], m/l/c [3hp] floats, 16-aligned */
static int ad_tile_off(int hp, int D, int tk) { return ((hp * D + hp * tk + 3 * hp) * 4 + 15) / 16 * 16; }


/* the two modes' query heads per block: a->hpb > 0 forces it (at most G) in both; 0 (auto): 1 at
 * small depth, G deeper — or G in both when lo mode's head blocks would need more split counters
 * than there are */
static void ad_modes(const cu_attn_args *a, int G, int *hpb_lo, int *hpb_hi) {
    if (a->hpb > 0) {
        *hpb_lo = *hpb_hi = a->hpb < G ? a->hpb : G;
        return;
    }
    *hpb_hi = G;
    *hpb_lo = a->nsplit > 1 && a->Hq > CU_ATT_COUNTERS ? G : 1;
}

/* the small layout's most keys for a (0: off): a->small up to AD_SKMAX, with one query head a block
 * (hpb_lo) and its scratch (scores, m and l a warp, acc[D] a warp) after q within AD_SMEM */
static int ad_small_keys(const cu_attn_args *a, int hpb_lo) {
    const int sbytes = (AD_SKMAX + 2 * AD_WARPS + AD_WARPS * (int)a->D) * 4, q_end = ((int)a->D * 4 + 15) / 16 * 16;
    if (a->small <= 0 || hpb_lo != 1 || q_end + sbytes > AD_SMEM) return 0; /* D <= 256: 1,024 + 8,768 bytes */
    return a->small < AD_SKMAX ? a->small : AD_SKMAX;
}

static uint64_t ad_partial_floats(int hpb, int64_t D) { return (uint64_t)((2 * hpb + 3) & ~3) + (uint64_t)hpb * (uint64_t)D; }

extern "C" uint64_t cu_attn_decode_scratch(const cu_attn_args *a) {
    if (a->nsplit <= 1 || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq / a->Hkv < 1) return 0;
    const int G = (int)(a->Hq / a->Hkv);
    int lo = 0, hi = 0;
    ad_modes(a, G, &lo, &hi);
    const uint64_t fl = (uint64_t)((G + lo - 1) / lo) * ad_partial_floats(lo, a->D), fh = (uint64_t)((G + hi - 1) / hi) * ad_partial_floats(hi, a->D);
    const uint64_t own = (uint64_t)a->Hkv * (uint64_t)a->nsplit * (fl > fh ? fl : fh), deep = cu_attn_deep_scratch(a); /* k_attn_deep.cu at any class */
    return own > deep ? own : deep;
}

extern "C" bool cu_attn_decode_paged_fits(const cu_attn_args *a) {
    cu_attn_args b = *a;
    b.nsplit = 1; /* the shape checks alone: neither kernel below uses the all-modes kernel's splits */
    if (a->T != 1 || a->bs <= 0 || a->ring > 0 || a->depth_max <= 0 || !cu_attn_decode_fits(&b, NULL, NULL)) return false;
    int lo, hi;
    ad_modes(a, (int)(a->Hq / a->Hkv), &lo, &hi);
    const int small = ad_small_keys(a, lo);
    if (small > 0 && a->depth_max <= small) return true; /* the SMALL_ONLY kernel */
    return cu_attn_deep_fits(a) && (a->D * a->Hkv * (a->ctype == CU_T_F16 ? 2 : 4)) % 16 == 0;
}

/* whether cu_attn_decode takes a (every check it makes below); cu_attention sends the rest
 * (e.g. more than AD_GMAX query heads per kv head) to variant 2 */
extern "C" bool cu_attn_decode_fits(const cu_attn_args *a, const unsigned *counters, const float *scratch) {
    if (a->T != 1 || a->D <= 0 || a->D > AD_DMAX || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq / a->Hkv > AD_GMAX || a->nsplit < 1 ||
        a->nsplit > AD_SMAX || a->Hkv > 65535 || (a->ctype != CU_T_F32 && a->ctype != CU_T_F16) || a->q_rope.n_rot < 0 || a->q_rope.n_rot > a->D ||
        a->q_rope.n_rot % 2 || (a->xq && a->D % 32))
        return false;
    if (a->nsplit == 1) return true;
    int lo, hi;
    ad_modes(a, (int)(a->Hq / a->Hkv), &lo, &hi);
    const int G = (int)(a->Hq / a->Hkv), nbx_lo = (int)a->Hkv * ((G + lo - 1) / lo), nbx_hi = (int)a->Hkv * ((G + hi - 1) / hi);
    return counters && scratch && (nbx_lo > nbx_hi ? nbx_lo : nbx_hi) <= CU_ATT_COUNTERS;
}

extern "C" sb_status cu_attn_decode(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                                    const cu_attn_args *a, float *scratch, unsigned *counters) {
    if (a->T != 1 || a->D <= 0 || a->D > AD_DMAX || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq / a->Hkv > AD_GMAX || a->nsplit < 1 ||
        a->nsplit > AD_SMAX || a->Hkv > 65535)
        return sb_fail(SB_ERR_UNSUPPORTED,
                       "cuda: decode attention (variant 4) with %lld tokens, head_dim %lld, %lld/%lld heads, %d splits (T 1, head_dim <= %d, "
                       "at most %d query heads per kv head, 1..%d splits)",
                       (long long)a->T, (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->nsplit, AD_DMAX, AD_GMAX, AD_SMAX);
    if (a->ctype != CU_T_F32 && a->ctype != CU_T_F16)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention (variant 4) with cache type %d (F32 or F16 only)", a->ctype);
    if (a->q_rope.n_rot < 0 || a->q_rope.n_rot > a->D || a->q_rope.n_rot % 2)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention with a fused RoPE of %d dims (head_dim %lld)", a->q_rope.n_rot, (long long)a->D);
    if (a->xq && a->D % 32)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention writing q8_1 blocks with head_dim %lld (a multiple of 32 only)", (long long)a->D);
    if (a->tbl && (!cu_attn_decode_paged_fits(a) || (cu_attn_deep_fits(a) && !scratch)))
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention through a block table (block size %d) at depth bound %lld: neither the small "
                       "layout's kernel nor k_attn_deep takes it (head_dim %lld, %lld/%lld heads, cache type %d%s)", a->bs, (long long)a->depth_max,
                       (long long)a->D, (long long)a->Hq, (long long)a->Hkv, a->ctype, scratch ? "" : ", no scratch");
    if (scratch && cu_attn_deep_fits(a)) /* a bounded depth past the small layout */
        return cu_attn_deep(s, dst, q, k, v, pos, a, scratch);
    ad_args g = {};
    g.D = (int)a->D;
    g.G = (int)(a->Hq / a->Hkv);
    g.Hkv = (int)a->Hkv;
    ad_modes(a, g.G, &g.hpb_lo, &g.hpb_hi);
    g.hp = g.hpb_lo > g.hpb_hi ? g.hpb_lo : g.hpb_hi;
    const int nbx_lo = g.Hkv * ((g.G + g.hpb_lo - 1) / g.hpb_lo), nbx_hi = g.Hkv * ((g.G + g.hpb_hi - 1) / g.hpb_hi);
    if (a->nsplit > 1 && (!counters || (nbx_lo > nbx_hi ? nbx_lo : nbx_hi) > CU_ATT_COUNTERS || !scratch))
        return sb_fail(SB_ERR_UNSUPPORTED,
                       "cuda: decode attention (variant 4) with %d splits and %d head blocks (%lld/%lld heads, %d query heads a block) needs a "
                       "split counter per head block (%d counters) and scratch",
                       a->nsplit, nbx_lo > nbx_hi ? nbx_lo : nbx_hi, (long long)a->Hq, (long long)a->Hkv, g.hpb_lo < g.hpb_hi ? g.hpb_lo : g.hpb_hi,
                       CU_ATT_COUNTERS);
    g.f16 = a->ctype == CU_T_F16;
    const int es = g.f16 ? 2 : 4, rb = g.D * es;
    g.vec = rb % 16 == 0 && (uintptr_t)k % 16 == 0 && (uintptr_t)v % 16 == 0;
    g.window = a->window;
    g.S = a->nsplit;
    g.kmin = a->kmin > 0 ? a->kmin : CU_ATT_DEC_KMIN;
    g.ks = (rb + 15) / 16 * 16 + 16;
    g.Dkv = a->D * a->Hkv;
    g.ring = a->ring;
    g.scale = a->scale;
    g.softcap = a->softcap;
    g.pre = cu_cfg()->attn_pre;
    g.tbl = a->tbl;
    g.bs = a->bs;
    /* the warp path: up to AD_WKEYS keys one block a query head; deeper, splits of AD_WKEYS keys (at
     * most S: the scratch and counters of lo mode) merged by the last one */
    const int64_t wcap = (int64_t)AD_WKEYS * g.S;
    g.warp = a->warp > 0 && g.hpb_lo == 1 ? (int)(a->warp < wcap ? a->warp : wcap) : 0;
    /* the tile region also holds the merge (m, l [S*hp], 1/L [hp], Rm partial sums of hp*D floats,
     * Rm*hp*D <= max(4*AD_THREADS, hp*D)) and the key groups' sums (AD_THREADS floats) */
    const int GD = g.hp * g.D, red = GD > 4 * AD_THREADS ? GD : 4 * AD_THREADS;
    const int merge_bytes0 = g.S > 1 ? (2 * g.S * g.hp + g.hp + red) * 4 + 16 : AD_THREADS * 4;
    const int wm1 = 2 * AD_WARPS + AD_WARPS * g.D, wm2 = 2 * g.S + 4 + AD_THREADS; /* the warp path's (m, l, acc[D]) a warp; its merge */
    const int warp_bytes = g.warp ? (wm1 > wm2 ? wm1 : wm2) * 4 : 0;
    const int merge_bytes = merge_bytes0 > warp_bytes ? merge_bytes0 : warp_bytes;
    int tk = AD_TKMAX, smem = 0;
    for (; tk >= 1; tk--) {
        const int tiles = 2 * tk * g.ks;
        smem = ad_tile_off(g.hp, g.D, tk) + (tiles > merge_bytes ? tiles : merge_bytes);
        if (smem <= AD_SMEM) break;
    }
    if (tk < 1)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: decode attention (variant 4): head_dim %d with %d heads a block does not fit %d bytes of shared memory",
                       g.D, g.hp, AD_SMEM);
    g.tk = tk;
    g.tile_off = ad_tile_off(g.hp, g.D, tk);
    /* keys of split 0's first tile issued before pos is read: at most a tile, kmin (the keys at
     * depth <= kmin) and the capacity (rows past it are not the cache's); none with element copies
     * (plain loads would hold pos's load back) */
    g.spec = a->ctx > 0 && g.vec ? (int)(a->ctx < (int64_t)tk ? a->ctx : tk) : 0;
    if (g.spec > g.kmin) g.spec = g.kmin;
    /* the small layout: its scratch (scores, m and l a warp, acc[D] a warp) after q (small_off0);
     * when the keys are the speculative rows also clear of them (small_off): below the K rows [tile_off
     * + soff * ks, ...) or in the gap between the K tile's end and the V rows [.. + soff * ks, ...);
     * neither: those keys read from global memory (L2) instead */
    g.small = ad_small_keys(a, g.hpb_lo);
    if (g.small > 0) {
        const int sbytes = (AD_SKMAX + 2 * AD_WARPS + AD_WARPS * g.D) * 4, q_end = (g.D * 4 + 15) / 16 * 16, soff = tk - g.spec;
        g.small_off0 = q_end;
        if (smem < q_end + sbytes) smem = q_end + sbytes;
        if (g.spec > 0 && q_end + sbytes <= g.tile_off + soff * g.ks)
            g.small_off = q_end;
        else if (g.spec > 0 && sbytes <= soff * g.ks)
            g.small_off = g.tile_off + tk * g.ks;
    }
    /* the grid: hi mode's Hkv * nhb_hi * S blocks, or more so that lo mode has a block per head
     * block and split up to one block per SM; lo mode while its active blocks fit that */
    static int ad_sms = 0;
    if (!ad_sms) ad_sms = cu_sm_count() > 0 ? cu_sm_count() : 1;
    const int sms = ad_sms;
    const int s_lo = sms / nbx_lo < 1 ? 1 : (sms / nbx_lo < g.S ? sms / nbx_lo : g.S);
    const int64_t grid_hi = (int64_t)nbx_hi * g.S, grid_lo = (int64_t)nbx_lo * s_lo, grid_t = grid_hi > grid_lo ? grid_hi : grid_lo;
    const int64_t lo_cap = sms > nbx_lo ? sms : nbx_lo;
    g.lo_blocks = (int)(lo_cap < grid_t ? lo_cap : grid_t); /* the tiled modes as without the warp path */
    /* the warp path's splits: ceil(min(warp, capacity) / AD_WKEYS) blocks a head (<= S) */
    const int64_t wdeep = a->ctx > 0 && a->ctx < g.warp ? a->ctx : g.warp, grid_w = (int64_t)nbx_lo * ((wdeep + AD_WKEYS - 1) / AD_WKEYS);
    const int64_t grid = grid_t > grid_w ? grid_t : grid_w;
    const cu_attn_rope *qr = &a->q_rope;
    const ad_rope rp = {qr->ff, qr->n_rot, qr->mode, qr->theta_scale, qr->freq_scale, qr->attn_factor};
    /* every depth takes the small layout: its own kernel, its blocks; a ring cache, a paged one (always
     * this kernel: cu_attn_decode_paged_fits) their own instantiations */
    const bool small = a->depth_max > 0 && g.small > 0 && a->depth_max <= g.small;
    void (*kern)(float *, const float *, const void *, const void *, const int32_t *, ad_args, ad_rope, float *, unsigned *, blk_q8_1 *) =
        small ? (g.tbl ? k_attn_dec<true, false, true> : g.ring ? k_attn_dec<true, true> : k_attn_dec<true, false>)
              : (g.ring ? k_attn_dec<false, true> : k_attn_dec<false, false>);
    cu_launch_smem(kern, dim3((unsigned)(small ? nbx_lo : grid)), AD_THREADS, (size_t)smem, (cudaStream_t)s, dst, q, k, v, pos, g, rp, scratch,
                   counters, (blk_q8_1 *)a->xq);
    return cu_after_launch("k_attn_dec");
}
