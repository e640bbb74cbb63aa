/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_launch.cuh — host-side helpers shared by the k_*.cu launchers: the error check
 * after a launch (SB_ERR_DEVICE naming the kernel and the CUDA error text) and grid arithmetic.
 * Layer 0 (backend/cuda). Host code only; no device helpers here (those are device/*.cuh).
 */
#ifndef SB_BACKEND_CUDA_LAUNCH_CUH
#define SB_BACKEND_CUDA_LAUNCH_CUH

#include "backend/cuda/kernels.h"
#include "base/status.h"

#include <cuda_runtime.h>

static inline sb_status cu_after_launch(const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return sb_fail(SB_ERR_DEVICE, "cuda: launching %s: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
    return SB_OK;
}

static inline unsigned cu_div_up(int64_t a, int64_t b) { return (unsigned)((a + b - 1) / b); }

#endif
