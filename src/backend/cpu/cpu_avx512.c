/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_avx512.c — the x86 kernels (cpu_x86.inc) built with AVX-512 F/BW/VL/DQ + VNNI.
 * Layer 0 (backend/cpu). Vectors stay 256 bits wide; what changes is that the u8 x s8 products of
 * the 32-element formats use vpdpbusd (one instruction instead of vpmaddubsw + vpmaddwd + add,
 * and no int16 saturation), and the compiler may use EVEX encodings and 32 vector registers.
 * GEMV is bandwidth-bound, so 512-bit vectors would not move it; for prefill they are the next
 * step (docs/cpu-kernels.md).
 * Installed only when cpuid + XCR0 report all of F/BW/VL/DQ/VNNI.
 */
#include "cpu_impl.h"

#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* The ISA is scoped to this file: GCC takes a target pragma, clang an attribute push applied to
 * every function defined below (headers are included first so they are not affected). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#endif

#define KX_VNNI 1
#include "cpu_x86.inc"

void cpu_fill_avx512(cpu_kernel_table *t) { kx_fill(t); }

#if defined(__clang__)
#pragma clang attribute pop
#endif
