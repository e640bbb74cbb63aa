/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_device.cu — device discovery over the statically linked CUDA runtime
 * (cu_device.h). Errors become SB_ERR_DEVICE with the runtime's own error name and text.
 */
#include "backend/cuda/cu_device.h"
#include "base/status.h"

#include <cuda_runtime.h>
#include <string.h>

static sb_status cu_fail(cudaError_t e, const char *what) {
    return sb_fail(SB_ERR_DEVICE, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

extern "C" sb_status cu_device_count(int *n) {
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e != cudaSuccess) {
        *n = 0;
        cudaGetLastError(); /* clear the sticky-free error state */
        return cu_fail(e, "cudaGetDeviceCount");
    }
    return SB_OK;
}

extern "C" sb_status cu_device_name(int i, char *name, size_t cap, int *cc_major, int *cc_minor) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) return cu_fail(e, "cudaGetDeviceProperties");
    if (cap) {
        strncpy(name, p.name, cap - 1);
        name[cap - 1] = 0;
    }
    *cc_major = p.major;
    *cc_minor = p.minor;
    return SB_OK;
}
