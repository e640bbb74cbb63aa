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

/* Programmatic dependent launch (Hopper+, cu_set_pdl): every kernel is launched with
 * programmatic stream serialization, so the next kernel of the stream (or captured graph) is
 * scheduled while this one still runs; each kernel starts with CU_PDL_ENTRY (device/common.cuh):
 * allow its own dependents, then wait for its prerequisite grid to complete and flush — before
 * any memory access, so the ordering is exactly the stream order. */
#include "backend/cuda/cu_config.h"
template <class T> struct cu_id {
    typedef T type;
};
/* the attributes of every launch (at[0..2)): programmatic stream serialization when cu_pdl_on, the
 * returns how many */
static inline unsigned cu_launch_attrs(cudaLaunchAttribute *at) {
    unsigned n = 0;
    if (cu_pdl_on()) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    return n;
}

/* launch k on s with `smem` bytes of dynamic shared memory (above 48 KB the caller has set k's
 * cudaFuncAttributeMaxDynamicSharedMemorySize) and the PDL attribute when cu_pdl_flag; cu_launch:
 * the same without dynamic shared memory */
template <typename... KArgs>
static inline void cu_launch_smem(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, typename cu_id<KArgs>::type... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[2];
    cfg.attrs = at;
    cfg.numAttrs = cu_launch_attrs(at);
    (void)cudaLaunchKernelEx(&cfg, k, args...); /* an error stays for cu_after_launch's cudaGetLastError */
}
template <typename... KArgs>
static inline void cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, cudaStream_t s, typename cu_id<KArgs>::type... args) {
    cu_launch_smem(k, grid, block, 0, s, args...);
}

#endif
