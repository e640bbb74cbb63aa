/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/fattn_mma.cuh — the device code of the tensor-core flash-attention prefill
 * (k_fattn_mma.cu's launchers; its header comment documents the math, geometry per head_dim,
 * fragments, key split and traffic): the PTX wrappers, Q's staging, one key tile's S / softmax /
 * P V (fm_tile), the K/V tile copies, the split partials and their merge, the writer, and the two
 * kernels k_fattn_mma (64 or 32 queries a block) and k_fattn_ws (16 queries, warps split the keys).
 * A header so that the host emulation (tests/runtime/cuda_fattn_mma_emu.cc against
 * tests/codegen/emu/cuda_emu.h) runs the same device code: test_cuda_fattn_mma_emu.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_FATTN_MMA_CUH
#define SB_BACKEND_CUDA_DEVICE_FATTN_MMA_CUH

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/split.cuh"

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#define FM_WARPS 4
#define FM_BK 64 /* keys a tile (k_fattn_ws; k_fattn_mma: its BK) */
#define FM_SMAX 16
/* k_fattn_mma's geometry per head_dim D (4 warps always): queries a block (16 rows a warp group),
 * the dims of O a warp holds (D / FM_DW(D) warps share a row group: 2 at 512), and Q's A fragments
 * in registers for the whole block (D <= 128) or loaded per k-step from shared memory (ldmatrix) */
#define FM_BQ(D) ((D) <= 256 ? 64 : 32)
#define FM_DW(D) ((D) <= 256 ? (D) : 256)
#define FM_QREG(D) ((D) <= 128)
#define FM_PS(D) ((D) + 4) /* floats a query's partial (m, l, 2 pad, O): 16-byte aligned rows */

/* the kernels' dynamic shared memory (the host emulation's is emu_dsmem) */
#ifdef SB_CUDA_EMU_H
#define FM_DYN_SMEM(name) unsigned char *name = emu_dsmem
#else
#define FM_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

typedef struct fm_rope {
    const float *ff;
    int n_rot, mode;
    float ts, fs, af;
} fm_rope;

// ---- PTX wrappers (sm_80+; the launcher never runs this file's kernel below that) ----

/* c += A B, m16n8k16, f16 inputs, f32 accumulators */
static __device__ __forceinline__ void fm_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(SB_CUDA_EMU_H) /* host emulation (tests/codegen/emu) */
    const uint32_t b[2] = {b0, b1};
    emu_mma_m16n8k16(c, a, b, false);
#endif
}
static __device__ __forceinline__ void fm_ldsm_x4_trans(uint32_t r[4], const void *s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sa));
#elif defined(SB_CUDA_EMU_H)
    emu_ldsm_trans(r, s, 4);
#else
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
static __device__ __forceinline__ uint32_t fm_pack(float lo, float hi) {
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) | (uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16;
}
static __device__ __forceinline__ float fm_round(float x) { return __half2float(__float2half_rn(x)); }

// ---- the parts both kernels share ----

/* Q rows t0 .. t0 + BQ - 1 of head h as f16 [BQ][D + 8] in shared memory (zeros past T), rotated
 * (rp) at their positions s_p[r], by NTH threads. Without RoPE: every thread's float4 loads issued at
 * once, then converted (one memory round trip; one load at a time measured ~40% of this kernel's
 * stall samples). With RoPE: plain values (and zeros past T), then the rotated pairs (disjoint
 * elements). The caller's barrier makes them visible. */
template <int D, int BQ, int NTH>
static __device__ __forceinline__ void fm_stage_q(uint16_t *sq, const float *q, int t0, int T, int Hq, int h, const fm_rope &rp, const int *s_p) {
    constexpr int SR = D + 8;
    const int tid = threadIdx.x;
    if (rp.n_rot == 0 && ((uintptr_t)q & 15) == 0) {
        constexpr int V4 = BQ * D / 4 / NTH, C4 = V4 < 16 ? V4 : 16; /* float4s a thread, in flight at once */
#pragma unroll 1
        for (int u0 = 0; u0 < V4; u0 += C4) {
            float4 qv[C4];
#pragma unroll
            for (int u = 0; u < C4; u++) {
                const int i = tid + (u0 + u) * NTH, r = i / (D / 4), t = t0 + r;
                qv[u] = t < T ? *((const float4 *)(q + ((int64_t)t * Hq + h) * D) + i % (D / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int u = 0; u < C4; u++) {
                const int i = tid + (u0 + u) * NTH, r = i / (D / 4);
                *(uint2 *)&sq[r * SR + 4 * (i % (D / 4))] = make_uint2(fm_pack(qv[u].x, qv[u].y), fm_pack(qv[u].z, qv[u].w));
            }
        }
    } else {
        for (int i = tid; i < BQ * D; i += NTH) {
            const int r = i / D, d = i % D, t = t0 + r;
            if (t >= T) sq[r * SR + d] = 0;
            else if (d >= rp.n_rot) sq[r * SR + d] = __half_as_ushort(__float2half_rn(q[((int64_t)t * Hq + h) * D + d]));
        }
        if (rp.n_rot > 0) {
            const int half = rp.n_rot / 2;
            for (int i = tid; i < BQ * half; i += NTH) {
                const int r = i / half, pi = i % half, t = t0 + r;
                if (t >= T) continue;
                int a, b;
                float xa, xb;
                rope_pair(q + ((int64_t)t * Hq + h) * D, pi, rp.n_rot, rp.mode, s_p[r], rp.ts, rp.fs, rp.af, rp.ff, &a, &b, &xa, &xb);
                sq[r * SR + a] = __half_as_ushort(__float2half_rn(xa));
                sq[r * SR + b] = __half_as_ushort(__float2half_rn(xb));
            }
        }
    }
}

/* Q's A fragments of the warp's 16 rows r0 - g .. r0 - g + 15 (this lane's rows r0 and r0 + 8) */
template <int D> static __device__ __forceinline__ void fm_q_frags(uint32_t (&qa)[D / 16][4], const uint16_t *sq, int r0, int c) {
    constexpr int SR = D + 8;
#pragma unroll
    for (int k = 0; k < D / 16; k++) {
        qa[k][0] = *(const uint32_t *)&sq[r0 * SR + 16 * k + 2 * c];
        qa[k][1] = *(const uint32_t *)&sq[(r0 + 8) * SR + 16 * k + 2 * c];
        qa[k][2] = *(const uint32_t *)&sq[r0 * SR + 16 * k + 2 * c + 8];
        qa[k][3] = *(const uint32_t *)&sq[(r0 + 8) * SR + 16 * k + 2 * c + 8];
    }
}

/* Q's A fragments for fm_tile: qf(k, a) gives k-step k's (dims 16k..16k+15) — from registers
 * (fm_q_frags, D <= 128), or from Q's shared rows by ldmatrix.x4 per k-step (D 256 / 512: O's
 * 16 x DW f32 accumulators leave no room for all of Q). The smem form: lane l gives the address of
 * row (l & 15) of the warp's 16, dims 8 (l >> 4) of the k-step: matrices (rows 0-7, dims 0-7),
 * (rows 8-15, dims 0-7), (rows 0-7, dims 8-15), (rows 8-15, dims 8-15) = A's registers 0..3. */
template <int D> struct fm_qreg {
    const uint32_t (&qa)[D / 16][4];
    __device__ __forceinline__ void operator()(int k, uint32_t a[4]) const { a[0] = qa[k][0], a[1] = qa[k][1], a[2] = qa[k][2], a[3] = qa[k][3]; }
};
struct fm_qsmem {
    const uint16_t *row; /* sq + (first row of the warp + (lane & 15)) * SR + 8 * (lane >> 4) */
    __device__ __forceinline__ void operator()(int k, uint32_t a[4]) const { cu_ldsm_x4((int *)a, row + 16 * k); }
};

/* one key tile (BK keys from kb: K at sk, V at sv, f16 [key][dim] rows of stride D + 8 in shared
 * memory) for a warp's 16 query rows: S = Q K^T over all D dims (qf: Q's A fragments), scale,
 * softcap, the mask (keys past a row's position qp or before its qlo, or past kmax: -inf), the
 * online softmax's running (m, l) and O += P V for the DW dims d0 .. d0 + DW - 1 of O that the warp
 * holds. [wlo, wp]: the keys every row of the warp sees (the mask is skipped for a tile inside).
 * Warps that share rows (DW < D) compute the same S, m and l. */
template <int D, int BK, int DW, class QF>
static __device__ __forceinline__ void fm_tile(const uint16_t *sk, const uint16_t *sv, const QF &qf, int kb, int kmax, int wlo, int wp,
                                               const int qp[2], const int qlo[2], float scale, float softcap, float m[2], float l[2],
                                               float (&o)[DW / 8][4], int d0) {
    constexpr int SR = D + 8, KS = D / 16, NT = DW / 8, NJ = BK / 8;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    float s[NJ][4];
#pragma unroll
    for (int j = 0; j < NJ; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < KS; k++) {
        uint32_t qa[4];
        qf(k, qa);
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            const uint16_t *kr = sk + (8 * j + g) * SR + 16 * k + 2 * c;
            fm_mma(s[j], qa, *(const uint32_t *)kr, *(const uint32_t *)(kr + 8));
        }
    }
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = s[j][e] * scale;
            if (softcap > 0.0f) v = tanhf(v / softcap) * softcap;
            s[j][e] = v;
        }
    if (kb < wlo || kb + BK - 1 > wp || kb + BK - 1 > kmax) /* some row does not see every key of the tile */
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = kb + 8 * j + 2 * c + (e & 1), ri = e >> 1;
                if (key > qp[ri] || key < qlo[ri] || key > kmax) s[j][e] = -INFINITY;
            }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
    float ms[2];
#pragma unroll
    for (int ri = 0; ri < 2; ri++) {
        mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 1));
        mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 2));
        const float mn = fmaxf(m[ri], mx[ri]);
        ms[ri] = mn == -INFINITY ? 0.0f : mn; /* no key yet: exp(-inf - 0) = 0, no NaN */
        const float corr = expf(m[ri] - ms[ri]);
        m[ri] = mn;
        l[ri] *= corr;
#pragma unroll
        for (int n = 0; n < NT; n++) o[n][2 * ri] *= corr, o[n][2 * ri + 1] *= corr;
    }
#pragma unroll
    for (int k = 0; k < BK / 16; k++) { /* keys 16k..16k+15: P's A fragment from S's n-tiles 2k, 2k+1 */
        float p[2][4];
#pragma unroll
        for (int jj = 0; jj < 2; jj++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                p[jj][e] = fm_round(expf(s[2 * k + jj][e] - ms[e >> 1]));
                l[e >> 1] += p[jj][e];
            }
        const uint32_t pa[4] = {fm_pack(p[0][0], p[0][1]), fm_pack(p[0][2], p[0][3]), fm_pack(p[1][0], p[1][1]), fm_pack(p[1][2], p[1][3])};
        const uint16_t *vr = sv + (16 * k + (lane & 15)) * SR + d0 + 8 * (lane >> 4);
#pragma unroll
        for (int dn = 0; dn < DW / 16; dn++) {
            uint32_t vb[4];
            fm_ldsm_x4_trans(vb, vr + 16 * dn);
            fm_mma(o[2 * dn], pa, vb[0], vb[1]);
            fm_mma(o[2 * dn + 1], pa, vb[2], vb[3]);
        }
    }
}

/* K/V tile of BK keys kb.. (rows past kmax zero; key j at cache row kv_row(j, ring)) into sk / sv, by
 * NTH threads from thread index i0: 2 * BK * D/8 chunks of 16 bytes */
template <int D, int BK, int NTH>
static __device__ __forceinline__ void fm_issue_tile(uint16_t *sk, uint16_t *sv, const uint16_t *kc, const uint16_t *vc, int kb, int kmax, int64_t Dkv,
                                                     int64_t ring, int kvh, int i0) {
    constexpr int SR = D + 8, CH = D / 8;
    for (int i = i0; i < 2 * BK * CH; i += NTH) {
        const int isv = i >= BK * CH, rem = isv ? i - BK * CH : i;
        const int r = rem / CH, ch = rem % CH, j = kb + r;
        const bool ok = j <= kmax;
        const uint16_t *src = isv ? vc : kc;
        if (ok) src += kv_row(j, ring) * Dkv + (int64_t)kvh * D + ch * 8;
        cu_cp16((isv ? sv : sk) + r * SR + ch * 8, src, ok);
    }
    cu_cp_commit();
}

/* a block's rows as a split's partial: (m, l, 2 pad, O) per query (16-byte rows) at pz */
template <int D, int BQ, int NTH>
static __device__ __forceinline__ void fm_put_partial(float *pz, const float *so, const float *s_m, const float *s_l) {
    constexpr int SO = D + 4, P4 = FM_PS(D) / 4;
    for (int i = threadIdx.x; i < BQ * P4; i += NTH) {
        const int r = i / P4, e = i % P4;
        ((float4 *)pz)[i] = e == 0 ? make_float4(s_m[r], s_l[r], 0.0f, 0.0f) : *(const float4 *)&so[r * SO + 4 * (e - 1)];
    }
}

/* the last split block's merge of the Se partials at pt ([Se][BQ][PS]) into so (O) and s_l (the sums):
 * M = max m_z, f_z = exp(m_z - M) (0 for m_z = -inf), O = sum f_z O_z, l = sum f_z l_z; sf: BQ x
 * FM_SMAX floats of shared memory. Every load of a step issued before its first use, in the split order. */
template <int D, int BQ, int NTH>
static __device__ __forceinline__ void fm_merge(const float *pt, int Se, float *so, float *sf, float *s_l) {
    constexpr int SO = D + 4, PS = FM_PS(D), P4 = PS / 4;
    const int tid = threadIdx.x;
    if (tid < BQ) { /* row tid: the common max, each split's factor, the merged sum */
        float mz[FM_SMAX], lz[FM_SMAX];
#pragma unroll
        for (int zz = 0; zz < FM_SMAX; zz++)
            if (zz < Se) {
                const float *pr = pt + ((int64_t)zz * BQ + tid) * PS;
                mz[zz] = __ldcg(pr), lz[zz] = __ldcg(pr + 1);
            }
        float M = -INFINITY;
#pragma unroll
        for (int zz = 0; zz < FM_SMAX; zz++)
            if (zz < Se) M = fmaxf(M, mz[zz]);
        float L = 0.0f;
#pragma unroll
        for (int zz = 0; zz < FM_SMAX; zz++)
            if (zz < Se) {
                const float f = mz[zz] == -INFINITY ? 0.0f : expf(mz[zz] - M);
                sf[tid * FM_SMAX + zz] = f;
                L += lz[zz] * f;
            }
        s_l[tid] = L;
    }
    __syncthreads();
    /* O: each thread's float4s in chunks of C4, two splits' loads in flight at once (8 rounds of
     * scalar loads a split made the merge most of the kernel at 64 queries over 512 cached);
     * the same sum order as one split at a time */
    constexpr int V4 = BQ * D / 4 / NTH, C4 = V4 < 8 ? V4 : 8; /* float4s a thread */
#pragma unroll 1
    for (int c0 = 0; c0 < V4; c0 += C4) {
        float4 acc[C4];
#pragma unroll
        for (int u = 0; u < C4; u++) acc[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int zz = 0; zz < Se; zz += 2) {
            const bool two = zz + 1 < Se;
            float4 a[C4], b[C4];
#pragma unroll
            for (int u = 0; u < C4; u++) {
                const int i = tid + (c0 + u) * NTH, r = i / (D / 4), c = i % (D / 4);
                const float4 *pa = (const float4 *)(pt + ((int64_t)zz * BQ + r) * PS) + 1 + c;
                a[u] = __ldcg(pa);
                if (two) b[u] = __ldcg(pa + BQ * P4);
            }
#pragma unroll
            for (int u = 0; u < C4; u++) {
                const int r = (tid + (c0 + u) * NTH) / (D / 4);
                const float f = sf[r * FM_SMAX + zz];
                acc[u].x += a[u].x * f, acc[u].y += a[u].y * f, acc[u].z += a[u].z * f, acc[u].w += a[u].w * f;
                if (two) {
                    const float f1 = sf[r * FM_SMAX + zz + 1];
                    acc[u].x += b[u].x * f1, acc[u].y += b[u].y * f1, acc[u].z += b[u].z * f1, acc[u].w += b[u].w * f1;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < C4; u++) {
            const int i = tid + (c0 + u) * NTH;
            *(float4 *)&so[i / (D / 4) * SO + 4 * (i % (D / 4))] = acc[u];
        }
    }
}

/* out = O / l for the block's rows (so [BQ][D + 4], s_l), a warp a row, lane = dim (+ 32 k); with xq
 * the q8_1 blocks too (whole warps) */
template <int D, int BQ, int NW>
static __device__ __forceinline__ void fm_write_out(float *dst, blk_q8_1 *xq, const float *so, const float *s_l, int t0, int T, int Hq, int h) {
    constexpr int SO = D + 4;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int r = w; r < BQ; r += NW) {
        const int t = t0 + r;
        if (t >= T) break; /* rows grow with r: warp-uniform */
        const int64_t ob = ((int64_t)t * Hq + h) * D;
        const float inv = 1.0f / s_l[r];
#pragma unroll
        for (int k = 0; k < D / 32; k++) {
            const int d = lane + 32 * k;
            const float v = so[r * SO + d] * inv;
            dst[ob + d] = v;
            if (xq) q8_1_store(xq + (ob + d) / 32, v, lane);
        }
    }
}

/* the block's rows (so, s_m, s_l): with Se > 1 key splits its partial, and the last split block of
 * the row tile merges them all (resetting its counter for the next kernel); then out = O / l */
template <int D, int BQ, int NW>
static __device__ __forceinline__ void fm_finish(float *dst, blk_q8_1 *xq, float *part, unsigned *cnt, int S, int z, int Se, float *so, float *sf,
                                                 const float *s_m, float *s_l, int *s_last, int t0, int T, int Hq, int h) {
    if (Se > 1) {
        const int64_t tile = (int64_t)blockIdx.x * Hq + h;
        fm_put_partial<D, BQ, NW * 32>(part + (tile * S + z) * BQ * FM_PS(D), so, s_m, s_l);
        if (!block_arrives_last(&cnt[tile], (unsigned)Se, s_last)) return;
        fm_merge<D, BQ, NW * 32>(part + tile * S * BQ * FM_PS(D), Se, so, sf, s_l);
        if (threadIdx.x == 0) cnt[tile] = 0;
        __syncthreads();
    }
    fm_write_out<D, BQ, NW>(dst, xq, so, s_l, t0, T, Hq, h);
}

// ---- 64 queries a block (32 at head_dim 512), 16 rows a warp group ----

/* BK: keys a tile (k_fattn_mma.cu fm_bk: 64 up to head_dim 128, 32 at 256 / 512) */
template <int D, int BK>
__global__ void __launch_bounds__(FM_WARPS * 32, D == 64 ? 3 : 2)
    k_fattn_mma(float *dst, const float *q, const uint16_t *kc, const uint16_t *vc, const int32_t *pos, int T, int Hq, int Hkv, float scale,
                float softcap, int window, int64_t kv_ring, fm_rope rp, blk_q8_1 *xq, float *part, unsigned *cnt) {
    CU_PDL_ENTRY();
    constexpr int BQ = FM_BQ(D);        /* queries a block */
    constexpr int DW = FM_DW(D);        /* dims of O a warp holds */
    constexpr int DS = D / DW;          /* warps a row group (sharing its rows, splitting O's dims) */
    constexpr int SR = D + 8;           /* shared row stride (halves) */
    constexpr int TILE = BK * SR;       /* halves of one K (or V) tile */
    constexpr int SO = D + 4;           /* the f32 output staging's row stride */
    constexpr int NT = DW / 8;          /* the warp's O n-tiles (8 dims) */
    constexpr int KS = D / 16;          /* S's k-steps */
    constexpr int NTH = FM_WARPS * 32;
    static_assert(BQ / 16 * DS == FM_WARPS, "a warp per (row group, dim slice)");
    FM_DYN_SMEM(fm_smem);
    uint16_t *sq = (uint16_t *)fm_smem;                 /* [BQ][SR] f16 Q */
    uint16_t *skv = sq + BQ * SR;                       /* K0, V0, K1, V1 tiles */
    float *so = (float *)skv;                           /* [BQ][SO] f32 output staging after the loop */
    float *sf = so + BQ * SO;                           /* [BQ][FM_SMAX] merge factors */
    __shared__ int s_p[BQ], s_lo[BQ], s_last;
    __shared__ float s_m[BQ], s_l[BQ];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, c = lane & 3;
    const int h = blockIdx.y, kvh = h / (Hq / Hkv);
    const int t0 = (gridDim.x - 1 - blockIdx.x) * BQ; /* the longest key ranges first */
    const int64_t Dkv = (int64_t)D * Hkv;
    if (tid < BQ) {
        int p, lo;
        attn_span(pos, t0 + tid, T, window, &p, &lo);
        s_p[tid] = p, s_lo[tid] = lo;
    }
    __syncthreads();
    /* the block's key range, by every warp (no second barrier) */
    int kmin = 0x7fffffff, kmax = -1;
    for (int r = lane; r < BQ; r += 32)
        if (s_p[r] >= 0) kmin = min(kmin, s_lo[r]), kmax = max(kmax, s_p[r]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, o));
        kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, o));
    }
    /* key split z of S (gridDim.z), as k_fattn.cu: whole BK tiles of [kmin, kmax]; Se is the same
     * in every block of the tile; a split with no keys still writes its (empty) partials */
    const int S = gridDim.z, z = blockIdx.z;
    const int Se = attn_split_keys(S, z, BK, &kmin, &kmax); /* kmin > kmax: no keys here */
    if (z >= Se) return; /* the whole block */
    if (kmin <= kmax) fm_issue_tile<D, BK, NTH>(skv, skv + TILE, kc, vc, kmin, kmax, Dkv, kv_ring, kvh, tid); /* overlaps Q's staging */
    fm_stage_q<D, BQ, NTH>(sq, q, t0, T, Hq, h, rp, s_p);
    __syncthreads();
    const int rg = w / DS, d0 = (w % DS) * DW; /* the warp's rows 16 rg .. + 15 and O's dims d0 .. + DW - 1 */
    const int r0 = 16 * rg + g;                 /* this lane's rows: r0 and r0 + 8 */
    const int qp[2] = {s_p[r0], s_p[r0 + 8]}, qlo[2] = {s_lo[r0], s_lo[r0 + 8]};
    /* the warp's key range [wmin, wmax], and the keys every one of its rows sees [wlo, wp] (empty
     * when a row lies past T) */
    int wmin = 0x7fffffff, wmax = -1, wlo = 0, wp = 0x7fffffff;
    for (int r = 16 * rg; r < 16 * rg + 16; r++) {
        if (s_p[r] >= 0) wmin = min(wmin, s_lo[r]), wmax = max(wmax, s_p[r]);
        wlo = max(wlo, s_lo[r]), wp = min(wp, s_p[r]);
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    auto loop = [&](const auto &qf) {
        int it = 0;
        for (int kb = kmin; kb <= kmax; kb += BK, it++) {
            const int b = it & 1;
            if (kb + BK <= kmax) { /* the next tile into the other buffer (its readers passed the last barrier) */
                fm_issue_tile<D, BK, NTH>(skv + 2 * (b ^ 1) * TILE, skv + 2 * (b ^ 1) * TILE + TILE, kc, vc, kb + BK, kmax, Dkv, kv_ring, kvh, tid);
                cu_cp_wait<1>();
            } else {
                cu_cp_wait<0>();
            }
            __syncthreads(); /* tile kb visible to every warp */
            if (wmax >= kb && wmin <= kb + BK - 1) /* warp-uniform */
                fm_tile<D, BK, DW>(skv + 2 * b * TILE, skv + 2 * b * TILE + TILE, qf, kb, kmax, wlo, wp, qp, qlo, scale, softcap, m, l, o, d0);
            __syncthreads(); /* every warp is done with buffer b before it is refilled */
        }
    };
    if constexpr (FM_QREG(D)) {
        uint32_t qa[KS][4];
        fm_q_frags<D>(qa, sq, r0, c);
        loop(fm_qreg<D>{qa});
    } else {
        loop(fm_qsmem{sq + (16 * rg + (lane & 15)) * SR + 8 * (lane >> 4)});
    }
    /* l: the 4 lanes of a row hold parts of its sum */
#pragma unroll
    for (int ri = 0; ri < 2; ri++) {
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
    }
    /* stage (m, l, O) per row in shared memory over the K/V buffers (the loop's last barrier
     * passed: nobody reads them any more; no cp.async is in flight); Q's rows stay untouched */
#pragma unroll
    for (int n = 0; n < NT; n++) {
        *(float2 *)&so[r0 * SO + d0 + 8 * n + 2 * c] = make_float2(o[n][0], o[n][1]);
        *(float2 *)&so[(r0 + 8) * SO + d0 + 8 * n + 2 * c] = make_float2(o[n][2], o[n][3]);
    }
    if (c == 0 && d0 == 0) s_m[r0] = m[0], s_l[r0] = l[0], s_m[r0 + 8] = m[1], s_l[r0 + 8] = l[1];
    __syncthreads();
    fm_finish<D, BQ, FM_WARPS>(dst, xq, part, cnt, S, z, Se, so, sf, s_m, s_l, &s_last, t0, T, Hq, h);
}

// ---- 16 queries a block, its warps splitting the keys (few queries over a cached prefix) ----

/* k_fattn_ws: the first token after a cached prefix (64 new tokens over 512: one 64-query tile a
 * head) ran k_fattn_mma as 9 key splits of one tile each and a merge by the last block — 14.7 µs a
 * layer of which the merge of 9 x 64 x 68 floats by one block was a serial tail. Here a block owns
 * 16 queries of one head (m16: every warp the same rows), its NW warps take the key tiles of its
 * range round-robin (warp w: tiles w, w + NW, ...), each through its own ring of NB K/V buffers
 * with warp-level cp.async (no block barrier in the loop); the warps' (m, l, O) meet once in shared
 * memory. Cache rows below the lowest position of the run are older than this launch's
 * predecessors (positions are host-written before the run starts; the rows by earlier runs), so the
 * tiles of those keys are issued BEFORE the PDL wait, under the previous kernel. A range longer than
 * NW x FW_TPW tiles is split over blocks (gridDim.z) as k_fattn_mma's, the last block merging 16 rows.
 * The tile math (fm_tile), Q's staging, the merge and the writer are k_fattn_mma's; the warp merge
 * (M = max m_w, f_w = exp(m_w - M), O = sum f_w O_w, l = sum f_w l_w) is the split merge's. */
#define FW_BQ 16
#define FW_TPW 3 /* key tiles a warp before the range is split over blocks */
template <int D, int NW, int NB>
__global__ void __launch_bounds__(NW * 32)
    k_fattn_ws(float *dst, const float *q, const uint16_t *kc, const uint16_t *vc, const int32_t *pos, int T, int Hq, int Hkv, float scale,
               float softcap, int window, int64_t kv_ring, fm_rope rp, blk_q8_1 *xq, float *part, unsigned *cnt) {
    CU_PDL_LAUNCH();
    constexpr int SR = D + 8, TILE = FM_BK * SR, SO = D + 4, NT = D / 8, KS = D / 16, NTH = NW * 32;
    FM_DYN_SMEM(fm_smem);
    uint16_t *sq = (uint16_t *)fm_smem;  /* [16][SR] f16 Q */
    uint16_t *skv = sq + FW_BQ * SR;     /* warp w's ring: NB x (K, V) tiles */
    float *so = (float *)skv;            /* after the loop: [NW][16][SO] the warps' O (warp 0's: the merged O) */
    __shared__ int s_p[FW_BQ], s_last;
    __shared__ float s_mw[NW][FW_BQ], s_lw[NW][FW_BQ], s_m[FW_BQ], s_l[FW_BQ], sf[FW_BQ * FM_SMAX];
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, c = lane & 3;
    const int h = blockIdx.y, kvh = h / (Hq / Hkv);
    const int t0 = (gridDim.x - 1 - blockIdx.x) * FW_BQ; /* the longest key ranges first */
    const int64_t Dkv = (int64_t)D * Hkv;
    /* before the wait: every warp reads the 16 rows' spans (lane r and r + 16: row r), the block's
     * key range, and the lowest position of the run (pm) */
    int p, lo;
    attn_span(pos, t0 + (lane & 15), T, window, &p, &lo);
    if (w == 0 && lane < FW_BQ) s_p[lane] = p;
    int kmin = p >= 0 ? lo : 0x7fffffff, kmax = p, wlo = lo, wp = p >= 0 ? p : -1, pm = 0x7fffffff;
    for (int t = lane; t < T; t += 32) pm = min(pm, pos[t]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, o));
        kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, o));
        wlo = max(wlo, __shfl_xor_sync(0xffffffffu, wlo, o));
        wp = min(wp, __shfl_xor_sync(0xffffffffu, wp, o));
        pm = min(pm, __shfl_xor_sync(0xffffffffu, pm, o));
    }
    const int qp[2] = {__shfl_sync(0xffffffffu, p, g), __shfl_sync(0xffffffffu, p, g + 8)};
    const int qlo[2] = {__shfl_sync(0xffffffffu, lo, g), __shfl_sync(0xffffffffu, lo, g + 8)};
    /* the split: z of Sa = min(S, ceil(tiles / (NW FW_TPW))) over whole tiles (the same Sa in every
     * block of the row tile) */
    const int S = gridDim.z, z = blockIdx.z;
    const int ntr = kmax >= kmin ? (kmax - kmin) / FM_BK + 1 : 1, Sw = (ntr + NW * FW_TPW - 1) / (NW * FW_TPW);
    const int Se = attn_split_keys(S < Sw ? S : Sw, z, FM_BK, &kmin, &kmax);
    if (z >= Se) return;
    const int nts = kmin <= kmax ? (kmax - kmin) / FM_BK + 1 : 0; /* this split's tiles */
    const int nwt = nts > w ? (nts - w + NW - 1) / NW : 0;      /* warp w's: w, w + NW, ... */
    uint16_t *ring = skv + (size_t)w * NB * 2 * TILE;
    /* the warp's i-th tile into ring slot i % NB; always one commit (empty past its tiles), so that
     * before tile i exactly NB - 1 later groups may be pending */
    auto issue = [&](int i) {
        if (i < nwt) {
            uint16_t *sk = ring + (i % NB) * 2 * TILE;
            fm_issue_tile<D, FM_BK, 32>(sk, sk + TILE, kc, vc, kmin + (w + i * NW) * FM_BK, kmax, Dkv, kv_ring, kvh, lane);
        } else {
            cu_cp_commit();
        }
    };
    int issued = 0;
    while (issued < NB && issued < nwt && kmin + (w + issued * NW) * FM_BK + FM_BK - 1 < pm) issue(issued++); /* old keys only */
    CU_PDL_WAIT();
    while (issued < NB) issue(issued++);
    fm_stage_q<D, FW_BQ, NTH>(sq, q, t0, T, Hq, h, rp, s_p);
    __syncthreads();
    uint32_t qa[KS][4];
    fm_q_frags<D>(qa, sq, g, c);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int i = 0; i < nwt; i++) {
        cu_cp_wait<NB - 1>();
        __syncwarp(); /* every lane's copies of tile i landed */
        const uint16_t *sk = ring + (i % NB) * 2 * TILE;
        fm_tile<D, FM_BK, D>(sk, sk + TILE, fm_qreg<D>{qa}, kmin + (w + i * NW) * FM_BK, kmax, wlo, wp, qp, qlo, scale, softcap, m, l, o, 0);
        __syncwarp(); /* every lane is done with slot i % NB */
        issue(i + NB);
    }
    cu_cp_wait<0>();
#pragma unroll
    for (int ri = 0; ri < 2; ri++) {
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 1);
        l[ri] += __shfl_xor_sync(0xffffffffu, l[ri], 2);
    }
    __syncthreads(); /* every warp is past its ring: the staging goes over it */
    float *ow = so + (size_t)w * FW_BQ * SO;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        *(float2 *)&ow[g * SO + 8 * n + 2 * c] = make_float2(o[n][0], o[n][1]);
        *(float2 *)&ow[(g + 8) * SO + 8 * n + 2 * c] = make_float2(o[n][2], o[n][3]);
    }
    if (c == 0) s_mw[w][g] = m[0], s_lw[w][g] = l[0], s_mw[w][g + 8] = m[1], s_lw[w][g + 8] = l[1];
    __syncthreads();
    /* the warps' merge, in warp order: element (r, d) by one thread, into warp 0's staging */
    for (int i = tid; i < FW_BQ * D; i += NTH) {
        const int r = i / D, d = i % D;
        float M = -INFINITY;
#pragma unroll
        for (int v = 0; v < NW; v++) M = fmaxf(M, s_mw[v][r]);
        float acc = 0.0f, L = 0.0f;
#pragma unroll
        for (int v = 0; v < NW; v++) {
            const float f = s_mw[v][r] == -INFINITY ? 0.0f : expf(s_mw[v][r] - M);
            acc += so[((size_t)v * FW_BQ + r) * SO + d] * f;
            L += s_lw[v][r] * f;
        }
        so[r * SO + d] = acc;
        if (d == 0) s_m[r] = M, s_l[r] = L;
    }
    __syncthreads();
    fm_finish<D, FW_BQ, NW>(dst, xq, part, cnt, S, z, Se, so, sf, s_m, s_l, &s_last, t0, T, Hq, h);
}

#endif
