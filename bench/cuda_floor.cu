// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
/*
 * bench/cuda_floor.cu — the per-kernel floor of a captured decode step on this GPU: a chain of N
 * dependent launches (N = 126, our Qwen2.5-0.5B decode step) captured once as a CUDA graph and
 * replayed, with and without programmatic dependent launch (PDL). Kernels: (a) empty, one block;
 * (b) empty, 132 x 256 threads; (c) a dependent 896-float read + write through global memory, one
 * block (the shape of a norm / residual hand-off between two decode kernels); (d) as (c) with 528
 * blocks of 256 threads each reading the 896 floats (a GEMV prologue's access pattern).
 * (e)-(i): GEMV-like kernels streaming 3.1 MB of weights each, with the weight loads before or
 * after the PDL wait (see k_stream). (j)-(l): the same phases inside ONE persistent kernel with a grid-wide
 * barrier between phases (see k_persist) — what a decode megakernel would pay instead of the launch chain.
 * (m)-(n): phases handed off by flag-carrying data instead of a barrier (see k_ll).
 * Prints µs per kernel for each. Standalone (nvcc bench/cuda_floor.cu -arch=sm_90 -o floor).
 * Non-goal: anything the runtime uses; this is a measurement of the hardware + driver floor.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ void pdl_entry() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory");
#endif
}

__global__ void k_empty(float *x) { pdl_entry(); }
__global__ void k_pass(float *x, float *y, int n) {
    pdl_entry();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] + 1.0f;
}
__global__ void k_wide(float *x, float *y, int n) {
    pdl_entry();
    __shared__ float s[1024];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = s[i] + 1.0f;
}
/* (o)-(r): the (d) shape with the hand-off spread: block b reads replica b % R of the 896 floats (R
 * copies 4 KB apart, so each lives in other L2 lines) and blocks 0..R-1 each write one replica — do
 * 528 blocks reading the same 28 lines queue on them? R = 0: 528 blocks, block 0 alone does (c)'s
 * work (the grid's size without the shared reads). */
__global__ void k_wide_rep(float *x, float *y, int n, int R) {
    pdl_entry();
    __shared__ float s[1024];
    if (R == 0) {
        if (blockIdx.x == 0)
            for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] + 1.0f;
        return;
    }
    const float *xr = x + (size_t)(blockIdx.x % R) * 1024;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = xr[i];
    __syncthreads();
    if ((int)blockIdx.x < R)
        for (int i = threadIdx.x; i < n; i += blockDim.x) y[(size_t)blockIdx.x * 1024 + i] = s[i] + 1.0f;
}

/* (e)-(i): a GEMV-like step — 132 blocks x 512 threads, each block streaming its own 24 KB slice
 * of this kernel's 3.1 MB weight matrix (every kernel its own matrix: 96 x 3.1 MB does not fit the
 * 50 MB L2, so weights come from HBM), reading the previous kernel's 132 outputs and writing one
 * value per block. MODE: 0 (e) weights loaded after the PDL wait; 1 (f) loaded into registers
 * before it; 2 (g) cp.async into shared memory before it; 3 (h) prefetched into L2 before it and
 * loaded after; 4 (i) one TMA bulk copy into shared memory before it. The question: do loads
 * issued before griddepcontrol.wait overlap the previous kernels? */
#define ST_THREADS 512
#define ST_N16 1536 /* 16-byte words a block: 24 KB */
/* the stand-in "dot": every weight word folded into acc (so no load is dead code), then the block's
 * sum of acc, returned to thread 0 (red: ST_THREADS / 32 shared floats) */
static __device__ __forceinline__ float fold_block_sum(float acc, const uint4 *r, int nw, float *red) {
    for (int k = 0; k < nw; k++) acc += __int_as_float((r[k].x ^ r[k].y ^ r[k].z ^ r[k].w) & 0x3f800000);
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    float s = 0.0f;
    if (threadIdx.x == 0)
        for (int k = 0; k < ST_THREADS / 32; k++) s += red[k];
    return s;
}

template <int MODE>
__global__ void __launch_bounds__(ST_THREADS) k_stream(const float *x, float *y, const uint4 *w) {
    extern __shared__ __align__(16) uint4 sm[];
    __shared__ __align__(8) unsigned long long bar;
    __shared__ float red[ST_THREADS / 32];
    const uint4 *wb = w + (size_t)blockIdx.x * ST_N16;
    const int tid = threadIdx.x;
    uint4 r[ST_N16 / ST_THREADS];
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (MODE == 1)
        for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = wb[tid + k * ST_THREADS];
    if (MODE == 2) {
        for (int k = 0; k < ST_N16 / ST_THREADS; k++) {
            const unsigned d = (unsigned)__cvta_generic_to_shared(sm + tid + k * ST_THREADS);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(wb + tid + k * ST_THREADS) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    if (MODE == 3)
        for (int k = tid; k < ST_N16 / 8; k += ST_THREADS) asm volatile("prefetch.global.L2 [%0];" ::"l"(wb + 8 * k));
    if (MODE == 4 && tid == 0) {
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar), d = (unsigned)__cvta_generic_to_shared(sm);
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(ST_N16 * 16) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d), "l"(wb),
                     "r"(ST_N16 * 16), "r"(b) : "memory");
    }
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    float acc = x[tid % 132];
    if (MODE == 0 || MODE == 3)
        for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = wb[tid + k * ST_THREADS];
#if __CUDA_ARCH__ >= 900
    if (MODE == 2) asm volatile("cp.async.wait_all;" ::: "memory");
    if (MODE == 2 || MODE == 4) __syncthreads();
    if (MODE == 4) {
        const unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
        asm volatile("{\n\t.reg .pred p;\n\tW_%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t@!p bra W_%=;\n\t}" ::"r"(b) : "memory");
    }
#endif
    if (MODE == 2 || MODE == 4)
        for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = sm[tid + k * ST_THREADS];
    const float s = fold_block_sum(acc, r, ST_N16 / ST_THREADS, red);
    if (tid == 0) y[blockIdx.x] = s;
}

/* a captured graph's replay time in µs (5 warm-ups, then the mean of 50 replays); destroys it */
static int replay_us(cudaGraph_t g, cudaStream_t st, float *us) {
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int w = 0; w < 5; w++) CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int reps = 50;
    CK(cudaEventRecord(e0, st));
    for (int r = 0; r < reps; r++) CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    *us = 1000.0f * ms / reps;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return 0;
}

/* (j)-(l): one launch of 132 blocks x 512 threads runs NP phases; between phases a grid barrier (a
 * monotonic counter: arrive with a release add, spin on an acquire load until the generation is full).
 * A phase reads the previous phase's 132 outputs and writes one value a block. MODE 0 (j): no weights
 * (the barrier + hand-off alone); 1 (k): each phase streams its 24 KB slice of its own 3.1 MB matrix,
 * loaded after the barrier; 2 (l): the next phase's slice is loaded into registers BEFORE arriving at
 * the barrier (the prefetch a megakernel would do). */
__device__ __forceinline__ void grid_barrier(unsigned *cnt, unsigned nb) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old, v;
        asm volatile("atom.add.release.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(cnt) : "memory");
        const unsigned target = (old / nb + 1) * nb;
        do asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
        while ((int)(v - target) < 0);
    }
    __syncthreads();
}
template <int MODE>
__global__ void __launch_bounds__(ST_THREADS) k_persist(float *a, float *b, const uint4 *w, unsigned *cnt, int np) {
    __shared__ float red[ST_THREADS / 32];
    const int tid = threadIdx.x;
    uint4 r[ST_N16 / ST_THREADS];
    if (MODE == 2)
        for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = w[(size_t)blockIdx.x * ST_N16 + tid + k * ST_THREADS];
    for (int p = 0; p < np; p++) {
        const float *x = p % 2 ? b : a;
        float *y = p % 2 ? a : b;
        const uint4 *wb = w + ((size_t)p * gridDim.x + blockIdx.x) * ST_N16;
        float acc = x[tid % 132];
        if (MODE == 1)
            for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = wb[tid + k * ST_THREADS];
        const float s = fold_block_sum(acc, r, MODE != 0 ? ST_N16 / ST_THREADS : 0, red);
        if (tid == 0) y[blockIdx.x] = s;
        if (MODE == 2 && p + 1 < np)
            for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = wb[gridDim.x * ST_N16 + tid + k * ST_THREADS];
        grid_barrier(cnt, gridDim.x);
    }
}

/* (m)-(n): the same phases handed off without a barrier, through data that carries its own flag (8-byte
 * (value, flag) stores, single-copy atomic; the consumers spin on the 132 words they need until every flag
 * is this launch's phase) — the "LL" protocol of NCCL. MODE 0 (m): no weights; 1 (n): the next phase's
 * 3.1 MB slice in registers before spinning. The flag base is this launch's generation, taken from an
 * arrival counter at entry. ll holds NP x 132 words (a phase's own buffer: no reuse races). */
template <int MODE>
__global__ void __launch_bounds__(ST_THREADS) k_ll(unsigned long long *ll, const uint4 *w, unsigned *cnt, int np) {
    __shared__ float red[ST_THREADS / 32];
    __shared__ unsigned s_gen;
    const int tid = threadIdx.x;
    if (tid == 0) s_gen = atomicAdd(cnt, 1u) / gridDim.x + 1;
    __syncthreads();
    const unsigned gen = s_gen;
    uint4 r[ST_N16 / ST_THREADS];
    for (int p = 0; p < np; p++) {
        const uint4 *wb = w + ((size_t)p * gridDim.x + blockIdx.x) * ST_N16;
        if (MODE == 1)
            for (int k = 0; k < ST_N16 / ST_THREADS; k++) r[k] = wb[tid + k * ST_THREADS];
        float acc = 0.0f;
        if (p > 0 && tid < 132) { /* spin on the previous phase's word */
            const unsigned want = gen * 4096u + (unsigned)p;
            unsigned long long v;
            do asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(ll + (size_t)(p - 1) * 132 + tid) : "memory");
            while ((unsigned)(v >> 32) != want);
            acc = __int_as_float((unsigned)v);
        }
        const float s = fold_block_sum(acc, r, MODE == 1 ? ST_N16 / ST_THREADS : 0, red);
        if (tid == 0) {
            const unsigned long long v = ((unsigned long long)(gen * 4096u + (unsigned)p + 1) << 32) | __float_as_uint(s * 1e-30f);
            asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(ll + (size_t)p * 132 + blockIdx.x), "l"(v) : "memory");
        }
        __syncthreads();
    }
}

static int run_persist(const char *name, int mode, int np, float *a, float *b, cudaStream_t st) {
    static uint4 *wbuf;
    static unsigned *cnt;
    if (!wbuf) CK(cudaMalloc(&wbuf, (size_t)np * 132 * ST_N16 * 16));
    if (!cnt) { CK(cudaMalloc(&cnt, 4)); CK(cudaMemset(cnt, 0, 4)); }
    static unsigned long long *ll;
    static unsigned *cnt2;
    if (mode >= 3 && !ll) { CK(cudaMalloc(&ll, (size_t)np * 132 * 8)); CK(cudaMemset(ll, 0, (size_t)np * 132 * 8)); CK(cudaMalloc(&cnt2, 4)); CK(cudaMemset(cnt2, 0, 4)); }
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cfg.stream = st;
    cfg.gridDim = 132;
    cfg.blockDim = ST_THREADS;
    if (mode == 0) CK(cudaLaunchKernelEx(&cfg, k_persist<0>, a, b, (const uint4 *)wbuf, cnt, np));
    if (mode == 1) CK(cudaLaunchKernelEx(&cfg, k_persist<1>, a, b, (const uint4 *)wbuf, cnt, np));
    if (mode == 2) CK(cudaLaunchKernelEx(&cfg, k_persist<2>, a, b, (const uint4 *)wbuf, cnt, np));
    if (mode == 3) CK(cudaLaunchKernelEx(&cfg, k_ll<0>, ll, (const uint4 *)wbuf, cnt2, np));
    if (mode == 4) CK(cudaLaunchKernelEx(&cfg, k_ll<1>, ll, (const uint4 *)wbuf, cnt2, np));
    CK(cudaStreamEndCapture(st, &g));
    float us;
    if (replay_us(g, st, &us)) return 1;
    printf("%-44s      : %6.2f us per phase  (%d phases, %.1f us per launch)\n", name, us / np, np, us);
    return 0;
}

static int run(const char *name, int kind, int pdl, int nk, float *a, float *b, cudaStream_t st) {
    static uint4 *wbuf;
    if (kind >= 4 && !wbuf) CK(cudaMalloc(&wbuf, (size_t)nk * 132 * ST_N16 * 16));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < nk; k++) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = pdl;
        cfg.stream = st;
        float *x = k % 2 ? b : a, *y = k % 2 ? a : b;
        if (kind == 0) { cfg.gridDim = 1; cfg.blockDim = 32; CK(cudaLaunchKernelEx(&cfg, k_empty, x)); }
        if (kind == 1) { cfg.gridDim = 132; cfg.blockDim = 256; CK(cudaLaunchKernelEx(&cfg, k_empty, x)); }
        if (kind == 2) { cfg.gridDim = 1; cfg.blockDim = 256; CK(cudaLaunchKernelEx(&cfg, k_pass, x, y, 896)); }
        if (kind == 3) { cfg.gridDim = 528; cfg.blockDim = 256; CK(cudaLaunchKernelEx(&cfg, k_wide, x, y, 896)); }
        if (kind >= 9) {
            static const int reps[4] = {0, 4, 16, 64};
            cfg.gridDim = 528; cfg.blockDim = 256;
            CK(cudaLaunchKernelEx(&cfg, k_wide_rep, x, y, 896, reps[kind - 9]));
        }
        const uint4 *wk = wbuf + (size_t)k * 132 * ST_N16;
        cfg.gridDim = 132;
        cfg.blockDim = ST_THREADS;
        cfg.dynamicSmemBytes = kind == 6 || kind == 8 ? ST_N16 * 16 : 0;
        if (kind == 4) CK(cudaLaunchKernelEx(&cfg, k_stream<0>, (const float *)x, y, wk));
        if (kind == 5) CK(cudaLaunchKernelEx(&cfg, k_stream<1>, (const float *)x, y, wk));
        if (kind == 6) CK(cudaLaunchKernelEx(&cfg, k_stream<2>, (const float *)x, y, wk));
        if (kind == 7) CK(cudaLaunchKernelEx(&cfg, k_stream<3>, (const float *)x, y, wk));
        if (kind == 8) CK(cudaLaunchKernelEx(&cfg, k_stream<4>, (const float *)x, y, wk));
    }
    CK(cudaStreamEndCapture(st, &g));
    float us;
    if (replay_us(g, st, &us)) return 1;
    printf("%-44s PDL %d: %6.2f us per kernel (%d kernels, %.1f us per graph)\n", name, pdl, us / nk, nk, us);
    return 0;
}

int main(void) {
    float *a, *b;
    CK(cudaMalloc(&a, 65536 * 4));
    CK(cudaMalloc(&b, 65536 * 4));
    CK(cudaMemset(a, 0, 65536 * 4));
    CK(cudaMemset(b, 0, 65536 * 4));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    const char *names[13] = {"(a) empty, 1 block", "(b) empty, 132 x 256", "(c) 896-float hand-off, 1 block", "(d) 896-float read by 528 blocks",
                            "(e) 3.1 MB stream, loads after the wait", "(f) 3.1 MB stream, registers before the wait",
                            "(g) 3.1 MB stream, cp.async before the wait", "(h) 3.1 MB stream, L2 prefetch before the wait",
                            "(i) 3.1 MB stream, TMA bulk before the wait",
                             "(o) 528 blocks, block 0 alone hands off", "(p) (d) from 4 replicas", "(q) (d) from 16 replicas",
                             "(r) (d) from 64 replicas"};
    const int only = getenv("FLOOR_KINDS") ? atoi(getenv("FLOOR_KINDS")) : -1; /* -1 all, else kinds >= 9 and (c), (d) only */
    for (int kind = 0; kind < 13; kind++)
        if (only < 0 || kind >= 9 || kind == 2 || kind == 3)
        for (int pdl = 0; pdl < 2; pdl++)
            if (run(names[kind], kind, pdl, kind >= 4 ? 96 : 126, a, b, st)) return 1;
    if (only >= 0) return 0;
    if (run_persist("(j) persistent, barrier + hand-off", 0, 126, a, b, st)) return 1;
    if (run_persist("(k) persistent, 3.1 MB loaded after barrier", 1, 96, a, b, st)) return 1;
    if (run_persist("(l) persistent, 3.1 MB prefetched before", 2, 96, a, b, st)) return 1;
    if (run_persist("(m) persistent, flag-carrying hand-off", 3, 96, a, b, st)) return 1;
    if (run_persist("(n) persistent, flags + 3.1 MB prefetched", 4, 96, a, b, st)) return 1;
    return 0;
}
