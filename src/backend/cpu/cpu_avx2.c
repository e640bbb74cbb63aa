/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_avx2.c — the x86 kernels (cpu_x86.inc) built for AVX2 + FMA + F16C.
 * Layer 0 (backend/cpu). The target pragma scopes the ISA to this file, so the rest of the build
 * stays portable; cpu_kernels.c only installs this table when cpuid reports the AVX2 set.
 * Non-goals: AVX-VNNI (VEX) variants; machines with AVX-512 VNNI use cpu_avx512.c instead.
 */
#include "cpu_impl.h"
#include "cpu_isa.h"

#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

CPU_ISA_BEGIN(CPU_ISA_AVX2)

#define KX_VNNI 0
#include "cpu_x86.inc"

void cpu_fill_avx2(cpu_kernel_table *t) { kx_fill(t); }

CPU_ISA_END
