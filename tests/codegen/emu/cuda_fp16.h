/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/emu/cuda_fp16.h — the four fp16 conversions of cuda_fp16.h that the device headers
 * use (and __half2, a pair of them: __half22float2 is cuda_emu.h's), for the CPU emulation of generated kernels (cuda_emu.h): _Float16 rounds to nearest even,
 * as cvt.rn.f16.f32 does.
 */
#ifndef SB_CUDA_EMU_FP16_H
#define SB_CUDA_EMU_FP16_H
#include <cstring>
struct __half {
    unsigned short x;
};
static inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline __half __float2half_rn(float f) {
    _Float16 v = (_Float16)f;
    __half h;
    memcpy(&h.x, &v, 2);
    return h;
}
struct alignas(4) __half2 {
    __half x, y;
};
static inline float __half2float(__half h) {
    _Float16 v;
    memcpy(&v, &h.x, 2);
    return (float)v;
}
#endif
