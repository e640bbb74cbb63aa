/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/device/tensor_ops.cuh — the device code of k_rows.cu's kernels for the tensor ABI's
 * ops that the built-in models never use: layer_norm, the exact (erf) gelu, concat and permute.
 * Math (ops_ref.c, matched where it decides the bits): layer_norm as op_layer_norm_row (the sum in
 * double, its mean rounded to f32; v = x - mean in f32, the sum of v*v in double, var rounded to
 * f32; y = v * (1 / sqrtf(var + eps))); gelu as op_gelu (0.5 x (1 + erf(x / sqrt 2)) in double,
 * rounded once); concat as op_concat (dst row o = source 0's chunk o, source 1's, ...); permute as
 * op_permute (y.ne[k] = x.ne[perm[k]]).
 * Geometry: layer_norm one LN_THREADS block a row (thread t owns elements t, t + LN_THREADS, ...
 * through all three passes, so dst may be x); the copies a 2-D grid (tensor_copy_grid): x over
 * the inner elements of a row, y over the rows, both walked in strides when the row count or
 * length passes the grid's caps; gelu a 1-D grid walked in strides.
 * Layer 0 (backend/cuda), device code only; a header so the host emulation runs it
 * (tests/runtime/test_cuda_tensor_ops_emu). Not given to NVRTC.
 */
#ifndef SB_BACKEND_CUDA_DEVICE_TENSOR_OPS_CUH
#define SB_BACKEND_CUDA_DEVICE_TENSOR_OPS_CUH

#include "backend/cuda/device/common.cuh"

#define LN_THREADS 256
#define COPY_THREADS 256
#define COPY_MAX_X 65536u /* blocks along a row (each then strides over it) */
#define COPY_MAX_Y 65535u /* CUDA's gridDim.y limit: blocks over the rows (each then strides) */
#define CONCAT_MAX_SRC 8

/* the grid of a copy over rows of inner elements, at most max_x x max_y blocks (the launchers pass
 * COPY_MAX_X / COPY_MAX_Y; the emulation test smaller caps, so the strides run) */
static inline dim3 tensor_copy_grid(int64_t inner, int64_t rows, unsigned max_x, unsigned max_y) {
    const int64_t bx = (inner + COPY_THREADS - 1) / COPY_THREADS;
    return dim3{(unsigned)(bx < (int64_t)max_x ? bx : max_x), (unsigned)(rows < (int64_t)max_y ? rows : max_y), 1};
}

// ---- layer_norm ----

/* the block's sum of v (each thread's part): block_sum_d over the LN_THREADS / 32 warps, then a
 * barrier; every thread returns it. part: LN_THREADS / 32 doubles of shared memory, free again
 * when this returns. */
static __device__ __forceinline__ double ln_block_sum(double v, double *part) {
    const double sum = block_sum_d<LN_THREADS / 32>(v, part);
    __syncthreads(); /* part is reused by the next sum */
    return sum;
}

/* y = layer_norm(x) over one row of E values (op_layer_norm_row) by a block of LN_THREADS threads;
 * each thread rewrites only the values it read, so y may be x */
static __device__ __forceinline__ void layer_norm_row(float *y, const float *x, int64_t E, float eps, double *part) {
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < E; i += LN_THREADS) acc += (double)x[i];
    const float mean = (float)(ln_block_sum(acc, part) / (double)E);
    acc = 0.0;
    for (int64_t i = threadIdx.x; i < E; i += LN_THREADS) {
        const float v = x[i] - mean;
        y[i] = v;
        acc += (double)(v * v);
    }
    const float var = (float)(ln_block_sum(acc, part) / (double)E);
    const float scale = 1.0f / sqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < E; i += LN_THREADS) y[i] *= scale;
}

// ---- gelu (exact) ----

/* op_gelu's value: in double, rounded to f32 once */
static __device__ __forceinline__ float gelu_erf(float x) {
    return (float)(0.5 * (double)x * (1.0 + erf((double)x * 0.70710678118654752440)));
}

/* y[i] = gelu_erf(x[i]) for the elements this thread owns of a tensor_copy_grid over (n, 1) */
static __device__ __forceinline__ void gelu_elems(float *y, const float *x, int64_t n) {
    const int64_t step = (int64_t)gridDim.x * COPY_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * COPY_THREADS + threadIdx.x; i < n; i += step) y[i] = gelu_erf(x[i]);
}

// ---- concat ----

/* dst [total, outer] where row o is source 0's chunk o, source 1's chunk o, ... (op_concat);
 * chunk[i]: source i's elements up to and including the joined dim; total: their sum */
typedef struct concat_args {
    const float *src[CONCAT_MAX_SRC];
    int64_t chunk[CONCAT_MAX_SRC];
    int n;
    int64_t total, outer;
} concat_args;

/* the elements this thread owns of a tensor_copy_grid over (total, outer) */
static __device__ __forceinline__ void concat_elems(float *dst, const concat_args &a) {
    const int64_t sx = (int64_t)gridDim.x * COPY_THREADS;
    for (int64_t o = blockIdx.y; o < a.outer; o += gridDim.y)
        for (int64_t j = (int64_t)blockIdx.x * COPY_THREADS + threadIdx.x; j < a.total; j += sx) {
            int i = 0;
            int64_t off = j;
            while (i < a.n - 1 && off >= a.chunk[i]) off -= a.chunk[i++];
            dst[o * a.total + j] = a.src[i][o * a.chunk[i] + off];
        }
}

// ---- permute ----

/* y [on[0], on[1], on[2], on[3]] with y[i0,i1,i2,i3] = x at i0*st[0] + i1*st[1] + i2*st[2] + i3*st[3]
 * (op_permute: on[k] = x.ne[perm[k]], st[k] = x's element stride of dim perm[k]) */
typedef struct permute_args {
    int64_t on[4], st[4];
} permute_args;

/* the elements this thread owns of a tensor_copy_grid over (on[0], on[1] * on[2] * on[3]) */
static __device__ __forceinline__ void permute_elems(float *dst, const float *x, const permute_args &a) {
    const int64_t rows = a.on[1] * a.on[2] * a.on[3], sx = (int64_t)gridDim.x * COPY_THREADS;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t i1 = r % a.on[1], i2 = r / a.on[1] % a.on[2], i3 = r / (a.on[1] * a.on[2]);
        const float *xr = x + i1 * a.st[1] + i2 * a.st[2] + i3 * a.st[3];
        for (int64_t i0 = (int64_t)blockIdx.x * COPY_THREADS + threadIdx.x; i0 < a.on[0]; i0 += sx) dst[r * a.on[0] + i0] = xr[i0 * a.st[0]];
    }
}

/* permute_args of x [ne] permuted by perm (a permutation of 0..3) */
static inline permute_args permute_args_of(const int64_t ne[4], const int32_t perm[4]) {
    const int64_t st[4] = {1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]};
    permute_args a;
    for (int k = 0; k < 4; k++) a.on[k] = ne[perm[k]], a.st[k] = st[perm[k]];
    return a;
}

#endif
