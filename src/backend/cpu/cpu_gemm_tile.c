/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_gemm_tile.c — prefill GEMM through decoded, row-interleaved weight tiles
 * (AVX-512VL + VNNI, 256-bit vectors). For T >= CPU_TILE_MIN_T tokens this replaces the
 * per-row dot kernels of cpu_x86.inc, whose float tail (cvt + 2 multiplies per block, row and
 * token) capped them at ~5-7 int8 MACs per vector op.
 * Layer 0 (backend/cpu).
 * Scheme (all weight types alike): every weight element is decoded once per call into an
 * unsigned byte q (= the type's integer value + off, 0..255), and every unit of U elements
 * (U = 16 or 32: the type's scale granularity) gets a float scale ws and a float min wm, so that
 *     w = ws * (q - off) + wm                                       (per element of the unit)
 * e.g. Q5_0: q = 5-bit value, off 16, ws = d; Q4_K: q = nibble, off 0, ws = d*sc_j,
 * wm = -dmin*m_j; Q8_0/IQ4: q = value + 128, off 128. Activations are copied to plain int8 rows
 * with per-unit sums S = sum(y) and scales A (Q8_0/Q8_1: the block d; Q8_K: the superblock d).
 *     out[t][r] = sum_u A_tu * (ws_ru * (I_rtu - off*S_tu) + wm_ru * S_tu),  I = sum q*y (exact int)
 * Tile layout: TR rows (16 here, in zmm; 8 in the AVX2 instance) interleaved in 4-byte groups,
 * [K/4][TR rows][4 B], so one vpdpbusd with a broadcast activation dword advances TR rows x 4
 * elements; per unit and token the float work is one cvt + (mul +) fma for TR rows (vs 3 ops per
 * row in the row kernels).
 * Exactness: I - off*S is exact in int32; results differ from the row kernels only in float
 * rounding order (the S-based min term uses the exact Σy instead of Q8_1's fp16 s).
 * Memory: per call T*K*(1 + 8/U) bytes of activation copies + ~(16K + 10K/U*4) bytes per thread,
 * allocated per call (prefill only; the T = 1 decode path allocates nothing).
 * Non-goals: persistent repacking (tiles are decoded per call into per-thread scratch), GEMV.
 * The code is in cpu_tile.inc; this file instantiates it for AVX-512 VNNI.
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
#define TILE_FN(name) name##_avx512
#include "cpu_tile.inc"

CPU_ISA_END
