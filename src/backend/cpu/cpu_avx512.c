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
#include "cpu_isa.h"

#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

CPU_ISA_BEGIN(CPU_ISA_AVX512)

#define KX_VNNI 1
#include "cpu_x86.inc"

void cpu_fill_avx512(cpu_kernel_table *t) { kx_fill(t); }

CPU_ISA_END
