/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/k_fattn_mma.cu — flash-attention prefill (T > 1) on f16 tensor cores
 * (mma.sync.m16n8k16 f16 x f16 -> f32), FlashAttention-2 style: the contract of k_fattn.cu's
 * cu_attention_prefill (causal by pos[t], GQA kv head h / (Hq/Hkv), sliding window, score softcap,
 * scale, Q's fused RoPE with rope_pair's math, the fused q8_1 output, dst [D*Hq, T]) for F16 KV
 * caches and head_dim 64, 128, 256 or 512 on sm_80+ (256 / 512 where their shared memory fits:
 * sm_90; 512 not on sm_80); cu_attention_prefill sends those here while cu_config.fattn_mma is on
 * (default; SB_TUNE=fattn_mma=0 keeps k_fattn.cu up to 128, cu_attention at 256 and the paged
 * kernel at 512 — exec_cuda_impl.h cx_attn_on_paged_kernel / cx_attn_on_flash). The device code is
 * device/fattn_mma.cuh (host-emulated by tests/runtime/test_cuda_fattn_mma_emu).
 * Math: for query (t, h) at p = pos[t], keys j in [lo, p] (lo = p - window + 1 clamped to 0, or 0)
 * of kv head h / (Hq/Hkv): s_j = (q . k_j) * scale, softcap c*tanh(s/c), out = softmax(s) . v.
 * Q is rotated in f32 (rope_pair, from global memory) then rounded to f16 once; K and V are the
 * cache's f16; S = Q K^T accumulates in f32; the online softmax (running max m and sum l per query
 * row) is f32; P = exp(s - m) is rounded to f16 for P V (f32 accumulation) and l sums the ROUNDED
 * p, so the weights the output uses sum to exactly l. Expected error: relative ~1e-3 per output
 * (f16 Q and P, 11-bit mantissas), NMSE ~1e-7..1e-6 against the f32 reference.
 * Geometry: a block = 4 warps of one q head; grid (query tiles, Hq, key splits), the longest key
 * ranges first. Per head_dim (FM_BQ / FM_DW / FM_QREG in the header, fm_bk here):
 *   D 64, 128: 64 queries (BQ), warp w rows 16w..16w+15 with all of O; key tiles of 64 (BK); Q's
 *     A fragments in registers for the whole block. Shared: Q + 4 tiles = 5 x 64 x (D + 8) halves
 *     (45 / 85 KB); registers (sm_90, ptxas) 164 / 228, no spills.
 *   D 256: 64 queries, a warp's O 16 x 256 f32 = 128 registers a thread, so Q's A fragments come
 *     per k-step from Q's shared rows (ldmatrix.x4) and BK = 32 (64 needed 255 registers and
 *     spilled): Q 33 KB + 4 tiles 66 KB (102 KB with the output staging: two blocks an sm_90 SM);
 *     244 registers, no spills.
 *   D 512: 32 queries, two warps a row group (warps 2g, 2g+1: rows 16g..16g+15), each holding
 *     O's dims 256 h .. 256 h + 255 and computing the whole S (16 x 32 over 512 dims: S's MMAs
 *     twice, 1.5x the block's MMA work; their m and l are the same bits); BK 32; Q 33 KB + 4 tiles
 *     130 KB = 163 KB (one block an SM); 245 registers, no spills.
 * Key tiles over the block's [min lo, max p] (with a window only the tiles its queries see: a block
 * at depth 4096 under window 512 loads ~(512 + BQ) / BK tiles, not the prefix) staged in shared
 * memory as f16 [key][dim] rows padded by 8 halves (stride D + 8: conflict-free 32-bit fragment
 * loads and ldmatrix rows), K and V double-buffered with cp.async (16-byte chunks, rows past the
 * range zero-filled) so that tile i+1 loads while tile i is computed. Per tile and warp:
 * S (16 x BK) = D/16 k-steps x BK/8 n-tiles of m16n8k16 (B = K rows, 32-bit shared loads); scale,
 * softcap, mask (-inf) in f32; row max over a lane's 16 values then shfl_xor 1, 2 (the 4 lanes of
 * a row); P to f16 A fragments straight from the S accumulators; O (16 x D) += P V with V's B
 * fragments from ldmatrix.x4.trans on the [key][dim] tile. A warp none of whose rows sees a key of
 * the tile skips its math (causal diagonal, window); it still joins the loads and barriers; one
 * whose rows all see the whole tile skips the mask. O's n-tiles: the warp's DW dims (D, or 256).
 * Output: the O fragments and (m, l) go through shared memory (over the K/V buffers) to a
 * lane-per-dim writer: dst = O / l and, with xq, q8_1_store (whole warps, D % 32 == 0).
 * Key split (few query tiles, e.g. 64 new tokens over a cached prefix): as k_fattn.cu — split z
 * of S takes whole BK tiles of the block's range (no more splits than tiles), writes (m, l, O) per
 * query to scratch [tile][S][BQ][D + 4] (m, l, 2 pad, O), and the last block of the tile
 * (counters, reset by it) merges them: M = max m_z, f_z = exp(m_z - M) (0 for m_z = -inf), O = sum f_z O_z, l = sum f_z l_z.
 * Fragment layouts (PTX ISA 9.7.14.5.8, mma.m16n8k16 .f16; g = lane >> 2, c = lane & 3):
 *   A 16x16 row: reg0 = (A[g][2c], A[g][2c+1]), reg1 = A[g+8][2c..], reg2 = A[g][2c+8..], reg3 = A[g+8][2c+8..]
 *   B 16x8 col:  reg0 = (B[2c][g], B[2c+1][g]), reg1 = (B[2c+8][g], B[2c+9][g])
 *   C 16x8 f32:  c0, c1 = C[g][2c], C[g][2c+1]; c2, c3 = C[g+8][2c], C[g+8][2c+1]
 *   (low half of a register = the lower column/row index). So S's C fragments of n-tiles 2k and
 *   2k+1 are, rounded and paired, exactly P's A fragment of k-step k. B = K^T: B[dim][key] =
 *   K[key][dim], two consecutive dims of one key: one 32-bit load. ldmatrix .x4 .trans: lanes
 *   8i..8i+7 give the row addresses of 8x8 matrix i, lane l receives from matrix i the elements
 *   [2c][g], [2c+1][g] (transposed) into register i: with matrices (keys 0-7, dims 0-7),
 *   (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15) of V [key][dim] the four
 *   registers are the B fragments of two 8-dim n-tiles.
 * Traffic: K/V rows of the visible range once per (query tile, q head): 64 queries share each
 * load (k_fattn.cu: 16). Work per (query, key): 2*D MACs on tensor cores; the scalar part is ~10
 * f32 ops per (query, key) (scale, mask, max, exp, sum). Latency: per tile 2 barriers + the loads
 * hidden behind the previous tile's math; Q's staging and the merge issue all of a step's global
 * loads at once (float4) — one load at a time made them most of the kernel. Measured (H200, ncu
 * bodies, Qwen2.5-0.5B shape, 14/2 heads, D 64; bench/NOTES.md session 7): T = 512 at depth 0
 * 17.7 µs a layer (predicted 8-12; 40.8 before the batched loads), 64 new over 512 cached 14.4 µs
 * (9 splits of one key tile each, then the merge; k_fattn.cu 26.7).
 * Head_dim 256 / 512 (and the shared tile code at 64 / 128) are unmeasured on a GPU.
 * Tested against: op_attention (tests/runtime/test_cuda_ops.c test_flash_attention, MMA on and
 * off, head_dim 64..512), every test model; the device code under the host emulation
 * (tests/runtime/test_cuda_fattn_mma_emu: head_dim 64..512, windows, softcap, GQA, key splits, q8_1,
 * sliding-window ring caches). A ring (cu_attn_args.ring): key j at row kv_row(j, ring); the keys a
 * block loads span at most window + T - 1 <= ring positions, and k_fattn_ws's early loads (keys below
 * the run's first position) are rows this step does not write.
 */
#include "backend/cuda/cu_launch.cuh"
#include "backend/cuda/device/fattn_mma.cuh"

static int fm_cc = -1, fm_sms = 0;
static int fw_optin(void);

/* shared memory of k_fattn_mma<D, BK>: Q and 2 x (K, V) tiles of f16, or after the loop Q, the f32
 * output staging and the merge factors */
static size_t fm_smem_bytes(int D, int BK) {
    const size_t bq = FM_BQ(D), q = bq * (D + 8) * 2, kv = q + (size_t)4 * BK * (D + 8) * 2;
    const size_t stage = q + (bq * (D + 4) + bq * FM_SMAX) * 4;
    return kv > stage ? kv : stage;
}
/* keys a tile: 64, or 32 at head_dim 256 / 512 (256 with 64 keys: 255 registers and spills; with 32: 102 KB, two blocks an SM) */
static int fm_bk(int D) { return D <= 128 ? 64 : 32; }

/* more than fm_tmin queries (default 1: every prefill). At 64 new tokens over a cached 512 the f32
 * kernel (k_fattn.cu) took 26.7 µs a layer and this one 14.4 (H200, with its Q staging and merge
 * loads batched): first token 2.28-2.30 vs 2.54 ms with 64, pp64 @ d4096 24.8k vs 14.3k, pp64
 * equal (bench/NOTES.md, session 7); before that batching it lost at T = 64 (session 5). */
extern "C" bool cu_fattn_mma_takes(const cu_attn_args *a) {
    if (!cu_cfg()->fattn_mma || !cu_fattn_args_ok(a) || a->T <= cu_cfg()->fattn_mma_tmin || a->ctype != CU_T_F16) return false;
    if (a->D != 64 && a->D != 128 && a->D != 256 && a->D != 512) return false;
    if (fm_cc < 0) fm_cc = cu_cc_major();
    /* head_dim 256: 102 KB of shared memory a block, 512: 163 KB (sm_90: 227; sm_80: 163, 256 only; sm_86: 99, neither) */
    return fm_cc >= 8 && (a->D <= 128 || fm_smem_bytes((int)a->D, fm_bk((int)a->D)) <= (size_t)fw_optin());
}

/* k_fattn_ws for at most FW_TMAX queries (cu_config.fattn_ws; SB_TUNE=fattn_ws=0 off) */
#define FW_TMAX 64
static bool fw_takes(const cu_attn_args *a) { return cu_cfg()->fattn_ws && a->T <= FW_TMAX && a->D <= 128; }

/* the key split S over blocks of bq queries: enough (tile, head, split) blocks for ~per_sm a
 * multiprocessor (k_fattn_mma: 4 of 4 warps; k_fattn_ws: 1, its rings fill the shared memory), at
 * most FM_SMAX; 1 when the tiles alone fill the GPU or the counters are too few */
static int fa_splits(const cu_attn_args *a, int split_on, int bq, int per_sm) {
    const int64_t blocks = (a->T + bq - 1) / bq * a->Hq;
    if (!fm_sms) fm_sms = cu_sm_count() > 0 ? cu_sm_count() : 132;
    int s = (int)(per_sm * (int64_t)fm_sms / (blocks > 0 ? blocks : 1));
    s = s > FM_SMAX ? FM_SMAX : s < 1 ? 1 : s;
    if (!split_on || blocks > CU_ATT_COUNTERS) s = 1;
    return s;
}
static int fm_splits(const cu_attn_args *a, int split_on) { return fa_splits(a, split_on, FM_BQ(a->D), a->D <= 128 ? 4 : 2); }
static int fw_splits(const cu_attn_args *a, int split_on) { return fa_splits(a, split_on, FW_BQ, 1); }

/* floats of partials for S splits of blocks of bq queries (0: no split) */
static uint64_t fa_split_floats(const cu_attn_args *a, int bq, int S) {
    return S > 1 ? (uint64_t)((a->T + bq - 1) / bq) * (uint64_t)a->Hq * (uint64_t)S * (uint64_t)bq * (uint64_t)FM_PS(a->D) : 0;
}

extern "C" uint64_t cu_fattn_mma_scratch(const cu_attn_args *a, int split_on) {
    if (!cu_fattn_mma_takes(a)) return 0;
    const uint64_t fm = fa_split_floats(a, FM_BQ(a->D), fm_splits(a, split_on));
    const uint64_t fw = a->D <= 128 ? fa_split_floats(a, FW_BQ, fw_splits(a, split_on)) : 0; /* k_fattn_ws: head_dim 64 / 128 */
    return fm > fw ? fm : fw;
}

/* both kernels' launch: the shared-memory opt-in above 48 KB once per kernel (*attr), then the grid */
typedef void (*fa_kernel)(float *, const float *, const uint16_t *, const uint16_t *, const int32_t *, int, int, int, float, float, int, int64_t,
                          fm_rope, blk_q8_1 *, float *, unsigned *);
static sb_status fa_launch(fa_kernel kern, const char *name, int *attr, size_t smem, int threads, cudaStream_t st, float *dst, const float *q,
                           const void *k, const void *v, const int32_t *pos, const cu_attn_args *a, dim3 grid, fm_rope rp, float *scratch,
                           unsigned *counters) {
    if (!*attr) {
        const cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return sb_fail(SB_ERR_DEVICE, "cuda: %s shared memory of %zu bytes: %s", name, smem, cudaGetErrorString(e));
        *attr = 1;
    }
    cu_launch_smem(kern, grid, threads, smem, st, dst, q, (const uint16_t *)k, (const uint16_t *)v, pos, (int)a->T, (int)a->Hq, (int)a->Hkv,
                   a->scale, a->softcap, a->window, a->ring, rp, (blk_q8_1 *)a->xq, scratch, counters);
    return cu_after_launch(name);
}

template <int D, int BK>
static sb_status fm_launch(cudaStream_t st, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                           dim3 grid, fm_rope rp, float *scratch, unsigned *counters) {
    static int attr;
    return fa_launch(k_fattn_mma<D, BK>, "k_fattn_mma", &attr, fm_smem_bytes(D, BK), FM_WARPS * 32, st, dst, q, k, v, pos, a, grid, rp, scratch,
                     counters);
}

/* k_fattn_ws<D, NW, NB> with the deepest ring (NB <= 3) the device's per-block shared memory holds;
 * NW: 8 warps at head_dim 64 where one slot each fits (sm_80 / sm_90), else 4; 2 at 128 (a ring slot
 * of 4 warps would not fit sm_86's 99 KB) */
template <int D, int NW, int NB> static size_t fw_smem_bytes() { return (size_t)FW_BQ * (D + 8) * 2 + (size_t)NW * NB * 2 * FM_BK * (D + 8) * 2; }
template <int D, int NW, int NB>
static sb_status fw_launch1(cudaStream_t st, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                            dim3 grid, fm_rope rp, float *scratch, unsigned *counters) {
    static int attr;
    return fa_launch(k_fattn_ws<D, NW, NB>, "k_fattn_ws", &attr, fw_smem_bytes<D, NW, NB>(), NW * 32, st, dst, q, k, v, pos, a, grid, rp, scratch,
                     counters);
}
static int fw_optin(void) { /* the device's per-block shared memory opt-in, minus ~4 KB of the kernel's static arrays */
    static int optin;
    if (!optin) {
        int dev = 0, b = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) b = 48 << 10;
        optin = b - (4 << 10);
    }
    return optin;
}
template <int D, int NW>
static sb_status fw_launch(cudaStream_t st, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                           dim3 grid, fm_rope rp, float *scratch, unsigned *counters) {
    const int optin = fw_optin();
    if (fw_smem_bytes<D, NW, 3>() <= (size_t)optin) return fw_launch1<D, NW, 3>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    if (fw_smem_bytes<D, NW, 2>() <= (size_t)optin) return fw_launch1<D, NW, 2>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    return fw_launch1<D, NW, 1>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
}

extern "C" sb_status cu_fattn_mma(cu_stream s, float *dst, const float *q, const void *k, const void *v, const int32_t *pos, const cu_attn_args *a,
                                  int split_on, float *scratch, uint64_t scratch_floats, unsigned *counters) {
    if (!cu_fattn_mma_takes(a) || ((uintptr_t)k | (uintptr_t)v) % 16)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: tensor-core flash attention with cache type %d, head_dim %lld, caches at %p / %p (F16, 64 / 128 / "
                       "256 / 512, 16-byte aligned, sm_80+ only)", a->ctype, (long long)a->D, k, v);
    if (a->T <= 0) return SB_OK;
    const cu_attn_rope *qr = &a->q_rope;
    const fm_rope rp = {qr->ff, qr->n_rot, qr->mode, qr->theta_scale, qr->freq_scale, qr->attn_factor};
    const bool ws = fw_takes(a);
    int S = ws ? fw_splits(a, split_on) : fm_splits(a, split_on);
    if (S > 1 && (!scratch || !counters || scratch_floats < cu_fattn_mma_scratch(a, split_on) || (uintptr_t)scratch % 16)) S = 1;
    const dim3 grid(cu_div_up(a->T, ws ? FW_BQ : FM_BQ(a->D)), (unsigned)a->Hq, (unsigned)S);
    const cudaStream_t st = (cudaStream_t)s;
    /* 8 warps (one ring slot each: 147 KB) where the device holds them — H200 first token 1.51 vs 1.65 ms
     * with 4 warps and 3 slots, pp64 +7% (session 14); sm_86's 99 KB: 4 */
    if (ws && a->D == 64 && cu_cfg()->fattn_ws_warps == 8 && fw_smem_bytes<64, 8, 1>() <= (size_t)fw_optin())
        return fw_launch<64, 8>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    if (ws)
        return a->D == 64 ? fw_launch<64, 4>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters)
                          : fw_launch<128, 2>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    switch (a->D) {
    case 64: return fm_launch<64, 64>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    case 128: return fm_launch<128, 64>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    case 256: return fm_launch<256, 32>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    default: return fm_launch<512, 32>(st, dst, q, k, v, pos, a, grid, rp, scratch, counters);
    }
}
