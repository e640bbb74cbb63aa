// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
/*
 * bench/cuda_copy_bw.cu — this GPU's device-to-device copy bandwidth, the ceiling that decode
 * speeds are quoted against (bench/matrix.sh): the best of 20 cudaMemcpy's of 2 GiB, counting the
 * bytes read plus the bytes written, timed with CUDA events after a warm-up copy. Prints one
 * number, GB/s (1e9 bytes), on stdout. Standalone: nvcc -O2 bench/cuda_copy_bw.cu -o copy_bw
 * Non-goal: anything the runtime uses.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

int main(void) {
    const size_t bytes = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 0x5A, bytes));   /* not zeros: every byte a real value */
    CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    float best = 1e30f;
    for (int i = 0; i < 20; i++) {
        CK(cudaEventRecord(t0));
        CK(cudaMemcpy(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        if (ms < best) best = ms;
    }
    printf("%.0f\n", 2.0 * (double)bytes / (best * 1e-3) / 1e9);
    return 0;
}
