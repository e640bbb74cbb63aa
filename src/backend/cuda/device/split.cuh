/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/split.cuh — device helpers of the tiled / split kernels (attention, flash
 * prefill, the split-K GEMM): cp.async copies into shared memory, the flash prefills' per-query span
 * and key split, and the "last block to arrive merges" step. One copy each, shared by k_attn_decode,
 * k_attn_deep, k_fattn, k_fattn_mma, k_attention and k_mma (each had its own).
 * Kept out of common.cuh: the NVRTC-generated kernels and their CPU emulation (tests/codegen/emu)
 * include common.cuh and have none of cp.async, uint4 or atomics.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_SPLIT_CUH
#define SB_BACKEND_CUDA_DEVICE_SPLIT_CUH

#include "backend/cuda/device/common.cuh"

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

#endif
