/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/split.cuh — device helpers of the tiled / split kernels (attention, flash
 * prefill, the split-K GEMM): cp.async copies into shared memory, the flash prefills' per-query span
 * and key split, the "last block to arrive merges" step and the split-K GEMM's sum of its partials.
 * One copy each, shared by k_attn_decode, k_attn_deep, k_fattn, k_fattn_mma, k_attention and k_mma
 * (each had its own), and by k_rope's jobs that sum a GEMM's partials in place of its reduce.
 * Kept out of common.cuh: the NVRTC-generated kernels include common.cuh and have none of cp.async,
 * uint4 or atomics. The host emulation (tests/codegen/emu) has ldmatrix and plain copies for cp.async.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_SPLIT_CUH
#define SB_BACKEND_CUDA_DEVICE_SPLIT_CUH

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/kernels.h"

// ---- asynchronous copies into shared memory (sm_80+; plain copies below) ----

/* 16 bytes global -> shared; with valid false 16 zero bytes and nothing read (cp.async's zero fill) */
static __device__ __forceinline__ void cu_cp16(void *s, const void *g, bool valid = true) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(g), "r"(n) : "memory");
#else
    *(uint4 *)s = valid ? *(const uint4 *)g : make_uint4(0, 0, 0, 0);
#endif
}
static __device__ __forceinline__ void cu_cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* wait until at most N of this thread's committed groups are in flight */
template <int N> static __device__ __forceinline__ void cu_cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// ---- tensor-core fragments from shared memory ----

/* ldmatrix .x4 / .x2 (b16 8 x 8 matrices; sm_75+): lane l gives the address of row l % 8 of matrix
 * l / 8 (16 bytes, 16-byte aligned) and receives row l / 4, elements 2 (l % 4), +1 of each matrix —
 * for 8-bit data row l / 4, bytes 4 (l % 4) .. + 3: an m16n8k32 s8 fragment register. .x2 reads
 * the addresses of lanes 0..15. */
static __device__ __forceinline__ void cu_ldsm_x4(int r[4], const void *s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(sa));
#elif defined(SB_CUDA_EMU_H) /* host emulation (tests/codegen/emu) */
    emu_ldsm(r, s, 4);
#else
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
static __device__ __forceinline__ void cu_ldsm_x2(int r[2], const void *s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(sa));
#elif defined(SB_CUDA_EMU_H)
    emu_ldsm(r, s, 2);
#else
    r[0] = r[1] = 0;
#endif
}

/* the first key a query at position p sees: p - window + 1 with a window, else 0 */
static __device__ __forceinline__ int64_t attn_window_lo(int64_t p, int window) { return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0; }

/* query t's position p and first visible key lo (p - window + 1 with a window, else 0); past T: p -1,
 * lo INT_MAX (no key) — the flash-attention prefill kernels' per-query span */
static __device__ __forceinline__ void attn_span(const int32_t *pos, int t, int T, int window, int *p, int *lo) {
    *p = -1, *lo = 0x7fffffff;
    if (t < T) {
        *p = pos[t];
        *lo = (int)attn_window_lo(*p, window);
    }
}

/* the flash-attention prefills' key split: split z of S over whole BK-key tiles of [kmin, kmax], no
 * more splits than tiles; returns that count Se (the same in every block of a tile) and, for z < Se,
 * narrows kmin, kmax to split z's tiles (kmin > kmax: none) */
static __device__ __forceinline__ int attn_split_keys(int S, int z, int BK, int *kmin, int *kmax) {
    const int nt = *kmax >= *kmin ? (*kmax - *kmin) / BK + 1 : 1, Se = S < nt ? S : nt;
    if (z < Se && Se > 1) {
        const int per = (nt + Se - 1) / Se;
        const int b0 = *kmin + z * per * BK, b1 = b0 + per * BK - 1;
        *kmin = b0;
        *kmax = b1 < *kmax ? b1 : *kmax;
    }
    return Se;
}

/* the split kernels' "last block merges": called by every thread of a block after it wrote its
 * partial; true in the block that is the n-th to arrive at *cnt (threadfence, a block barrier, one
 * atomic by thread 0 through the __shared__ flag; the last also fences before reading the others'
 * partials). The caller's merge resets *cnt for the next launch. */
static __device__ __forceinline__ bool block_arrives_last(unsigned *cnt, unsigned n, int *s_flag) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) *s_flag = atomicAdd(cnt, 1u) == n - 1;
    __syncthreads();
    if (!*s_flag) return false;
    __threadfence();
    return true;
}

// ---- the split-K GEMM's partials (k_mma.cu; summed also by the consumers that skip its reduce: k_rope.cu) ----

#define MMA_SPLIT_MAX 16 /* K splits of the small path at most (k_mma.cu mma_small_split) */

/* dst[o] = v, raising the epilogue's non-finite flag (kernels.h) when v is NaN or infinite */
static __device__ __forceinline__ void epi_store(float *dst, int64_t o, float v, const cu_epilogue &ep) {
    dst[o] = v;
    if (ep.nonfinite && !isfinite(v)) *ep.nonfinite = 1u;
}

/* sum of the nsplit (<= MMA_SPLIT_MAX) partials [nsplit][T][N] at o = t * N + row, in split order
 * from 0, plus the epilogue (k_mma_reduce; the last block of a tile adds in the same order,
 * bit-identical). Every partial is loaded before the first add: one load per add in a loop was one
 * L2 round trip per split (H200: 3.1-3.3 µs a reduce of 7 splits at T = 64, 4.8 of 5 at T = 512). */
static __device__ __forceinline__ float mma_split_sum(const float *part, int64_t o, int64_t row, int nsplit, int64_t TN, const cu_epilogue &ep) {
    float p[MMA_SPLIT_MAX];
#pragma unroll
    for (int z = 0; z < MMA_SPLIT_MAX; z++)
        if (z < nsplit) p[z] = __ldcg(part + z * TN + o);
    const float e = ep.add ? ep.add[ep.bcast ? row : o] : 0.0f;
    float v = 0.0f;
#pragma unroll
    for (int z = 0; z < MMA_SPLIT_MAX; z++)
        if (z < nsplit) v += p[z];
    return ep.add ? v + e : v;
}

#endif
