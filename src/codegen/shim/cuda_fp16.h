/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/shim/cuda_fp16.h — the part of <cuda_fp16.h> the device headers use, for NVRTC (which
 * finds the toolkit's cuda_fp16.h only when the CUDA include folder is installed and passed with
 * -I; a machine with just the NVRTC library has none). The conversions are the same PTX
 * instructions cuda_fp16.hpp emits (cvt.rn.f16.f32 / cvt.f32.f16), so the bits are identical.
 * Layer 3 (codegen), embedded as an in-memory NVRTC header; never on a host include path.
 */
#ifndef SB_NVRTC_CUDA_FP16_H
#define SB_NVRTC_CUDA_FP16_H
struct __half {
    unsigned short x;
};
static __device__ __forceinline__ __half __ushort_as_half(unsigned short u) {
    __half h;
    h.x = u;
    return h;
}
static __device__ __forceinline__ unsigned short __half_as_ushort(__half h) { return h.x; }
static __device__ __forceinline__ __half __float2half_rn(float f) {
    __half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
    return h;
}
static __device__ __forceinline__ float __half2float(__half h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x));
    return f;
}
#endif
