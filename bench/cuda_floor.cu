// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
/*
 * bench/cuda_floor.cu — the per-kernel floor of a captured decode step on this GPU: a chain of N
 * dependent launches (N = 126, our Qwen2.5-0.5B decode step) captured once as a CUDA graph and
 * replayed, with and without programmatic dependent launch (PDL). Kernels: (a) empty, one block;
 * (b) empty, 132 x 256 threads; (c) a dependent 896-float read + write through global memory, one
 * block (the shape of a norm / residual hand-off between two decode kernels); (d) as (c) with 528
 * blocks of 256 threads each reading the 896 floats (a GEMV prologue's access pattern).
 * Prints µs per kernel for each. Standalone (nvcc bench/cuda_floor.cu -arch=sm_90 -o floor).
 * Non-goal: anything the runtime uses; this is a measurement of the hardware + driver floor.
 */
#include <cuda_runtime.h>
#include <stdio.h>

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

static int run(const char *name, int kind, int pdl, int nk, float *a, float *b, cudaStream_t st) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
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
    }
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int w = 0; w < 5; w++) CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int reps = 50;
    cudaEventRecord(e0, st);
    for (int r = 0; r < reps; r++) CK(cudaGraphLaunch(ge, st));
    cudaEventRecord(e1, st);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    printf("%-44s PDL %d: %6.2f us per kernel (%d kernels, %.1f us per graph)\n", name, pdl, 1000.0 * ms / reps / nk, nk, 1000.0 * ms / reps);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return 0;
}

int main(void) {
    float *a, *b;
    CK(cudaMalloc(&a, 4096 * 4));
    CK(cudaMalloc(&b, 4096 * 4));
    CK(cudaMemset(a, 0, 4096 * 4));
    CK(cudaMemset(b, 0, 4096 * 4));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    const char *names[4] = {"(a) empty, 1 block", "(b) empty, 132 x 256", "(c) 896-float hand-off, 1 block", "(d) 896-float read by 528 blocks"};
    for (int kind = 0; kind < 4; kind++)
        for (int pdl = 0; pdl < 2; pdl++)
            if (run(names[kind], kind, pdl, 126, a, b, st)) return 1;
    return 0;
}
