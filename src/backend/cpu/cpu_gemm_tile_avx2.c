/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_gemm_tile_avx2.c — the decoded-tile prefill GEMM (cpu_tile.inc; design notes in
 * cpu_gemm_tile.c) for AVX2 CPUs without VNNI: vpmaddubsw + vpmaddwd per 8 rows x 4 elements,
 * 4 tokens per microkernel, types whose decoded bytes stay <= 63 (not Q8_0/IQ4_NL/IQ4_XS).
 * Layer 0 (backend/cpu).
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
#define TILE_FN(name) name##_avx2
#include "cpu_tile.inc"

CPU_ISA_END
