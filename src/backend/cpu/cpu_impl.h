/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_impl.h — the per-ISA kernel tables behind cpu_kernels.h. Private to backend/cpu.
 * Layer 0 (backend/cpu). Each ISA file (cpu_scalar.c, cpu_avx2.c, cpu_avx512.c) fills one table;
 * a NULL entry means "use the next lower ISA's kernel" (the dispatcher merges the tables).
 * A dot kernel computes, for one weight row w of n elements and nc (1..CPU_MAX_NC) activation rows
 * a + c*a_stride, out[c*o_stride] = dot(w, a_c). n is a positive multiple of the weight's block.
 * Non-goals: argument checking (done once in cpu_kernels.c).
 */
#ifndef SB_BACKEND_CPU_IMPL_H
#define SB_BACKEND_CPU_IMPL_H

#include "sonicboom.h"

#include <stddef.h>
#include <stdint.h>

#define CPU_MAX_NC 4 /* activation rows one kernel call handles (register budget of AVX2) */

typedef void (*cpu_dot_fn)(int64_t n, const void *w, const void *a, size_t a_stride, int nc, float *out,
                           size_t o_stride);
typedef void (*cpu_quant_fn)(const float *x, void *dst, int64_t n);

/* Two weight rows (w0, w1) x one activation row: out[0], out[1]. Optional (GEMV fast path). */
typedef void (*cpu_dot2_fn)(int64_t n, const void *w0, const void *w1, const void *a, float *out);

/* Rows 0..nr-1 of W (wrow bytes apart) x one activation row: out[r]. Optional (GEMV fast path);
 * when present it serves every T = 1 call, single dots included (so both agree bit for bit). */
typedef void (*cpu_gemv_fn)(int64_t n, const void *W, size_t wrow, int64_t nr, const void *a, float *out);

typedef struct cpu_kernel_table {
    cpu_dot_fn dot[SB_TYPE_COUNT];     /* indexed by weight type */
    cpu_dot2_fn dot2[SB_TYPE_COUNT];   /* NULL: use dot row by row */
    cpu_gemv_fn gemv[SB_TYPE_COUNT];   /* NULL: use dot2 / dot */
    cpu_quant_fn quant[SB_TYPE_COUNT]; /* indexed by activation type (Q8_0, Q8_1, Q8_K) */
} cpu_kernel_table;

/* fp16 bits -> fp32 for every pattern (exact; filled before any kernel runs). */
extern float cpu_fp16_table[65536];

/* Prefill GEMM through decoded row tiles (cpu_tile.inc: 16 rows for AVX-512 VNNI, 8 for AVX2). */
#include "base/status.h"
#include "base/threadpool.h"
#include <stdbool.h>
#define CPU_TILE_MIN_T 8 /* below this many tokens the row kernels win (tile decode not amortised) */
bool cpu_tile_supported_avx512(int wtype);
sb_status cpu_tile_matmul_avx512(tp_pool *pool, int wt, int at, const void *W, size_t wrow, int64_t K, int64_t N,
                                 const void *act, size_t arow, int64_t T, float *out);
bool cpu_tile_supported_avx2(int wtype);
sb_status cpu_tile_matmul_avx2(tp_pool *pool, int wt, int at, const void *W, size_t wrow, int64_t K, int64_t N,
                               const void *act, size_t arow, int64_t T, float *out);

void cpu_fill_scalar(cpu_kernel_table *t);
void cpu_fill_avx2(cpu_kernel_table *t);
void cpu_fill_avx512(cpu_kernel_table *t);

#endif
