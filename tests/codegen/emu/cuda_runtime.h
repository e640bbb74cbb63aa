/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/emu/cuda_runtime.h — just enough of the CUDA runtime API for a whole k_*.cu file (its
 * kernels and its host launcher, through backend/cuda/cu_launch.cuh) to run under cuda_emu.h: a
 * launch (cudaLaunchKernelEx) runs the kernel's grid at once with emu_run3 (blocks of
 * blockDim.x * y * z threads, every block's dynamic shared memory NaN-filled, at most emu_dsmem);
 * a deadlock or a launch past those limits is the error cudaGetLastError returns (and clears).
 * Streams are plain pointers, function attributes are accepted and ignored, PDL attributes too.
 * Found through -Itests/codegen/emu (emu_build.h) by cu_launch.cuh's #include <cuda_runtime.h>.
 * What the launchers call of the library (sb_fail, cu_cfg, cu_sm_count, cu_pdl_on): emu_library.h.
 */
#ifndef SB_CUDA_EMU_RUNTIME_H
#define SB_CUDA_EMU_RUNTIME_H

#include <cstddef>

typedef struct CUstream_st *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorLaunchFailure = 719, cudaErrorInvalidConfiguration = 9 };
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
typedef struct cudaLaunchAttribute {
    cudaLaunchAttributeID id;
    struct {
        int programmaticStreamSerializationAllowed;
    } val;
} cudaLaunchAttribute;
typedef struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned numAttrs;
} cudaLaunchConfig_t;

static cudaError_t emu_last_error = cudaSuccess;

template <typename... KArgs, typename... Args>
static inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *cfg, void (*k)(KArgs...), Args... args) {
    const unsigned threads = cfg->blockDim.x * cfg->blockDim.y * cfg->blockDim.z;
    if (cfg->dynamicSmemBytes > sizeof emu_dsmem || cfg->blockDim.y != 1 || cfg->blockDim.z != 1) return emu_last_error = cudaErrorInvalidConfiguration;
    if (emu_run3(cfg->gridDim, threads, [&] { k(args...); })) return emu_last_error = cudaErrorLaunchFailure;
    return cudaSuccess;
}
static inline cudaError_t cudaGetLastError() {
    const cudaError_t e = emu_last_error;
    emu_last_error = cudaSuccess;
    return e;
}
static inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaErrorLaunchFailure ? "emulation deadlock" : e ? "emulation: launch configuration" : "no error";
}
static inline const char *cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorEmulation" : "cudaSuccess"; }
template <typename F> static inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }

#endif
