/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cpu/cpu_kernels.h — CPU matrix kernels: activation quantizers, dot products and
 * GEMV/GEMM of every supported weight type against the activation format it pairs with.
 * Layer 0 (backend/cpu; sees base and quant only). Raw pointers, element counts and ggml type ids:
 * no graphs, models or GGUF here.
 * Pairing (formats.md §3.1): Q4_0/Q5_0/Q8_0/IQ4_NL x Q8_0; Q4_1/Q5_1 x Q8_1; Q2_K..Q6_K/IQ4_XS x
 * Q8_K; F32/F16/BF16 x F32 (activations stay f32: exact products, and GEMV is bandwidth-bound
 * anyway — ggml converts them to F16/BF16 instead; see docs/cpu-kernels.md).
 * Activation quantizers follow llama.cpp's x86 semantics on every ISA (formats.md §3.2): Q8_0/Q8_1
 * use id = 127/amax and round-half-even; Q8_K is the reference. Bit-exact across ISAs.
 * Dot products: integer partial sums are exact; the float combination order differs per ISA, so
 * results agree across ISAs to a few ulps of sum|w*a|, not bit for bit.
 * ISA: chosen once from cpuid (scalar < avx2 < avx512); SB_CPU_ISA=scalar|avx2|avx512 caps it.
 * Non-goals: weight repacking (rows are read in their GGUF layout), non-x86 SIMD, IQ1/2/3 types.
 */
#ifndef SB_BACKEND_CPU_KERNELS_H
#define SB_BACKEND_CPU_KERNELS_H

#include "base/status.h"
#include "base/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- instruction-set selection ----

typedef enum cpu_isa {
    CPU_ISA_SCALAR = 0, /* plain C, any CPU */
    CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CPU_ISA_AVX512 = 2, /* the AVX2 set + AVX-512 F/BW/VL/DQ + VNNI */
} cpu_isa;

/* "scalar", "avx2", "avx512"; "?" for other values. */
const char *cpu_isa_name(cpu_isa isa);

/* True when this machine (CPU and OS) can run isa's kernels. */
bool cpu_isa_available(cpu_isa isa);

/* The ISA the kernels use now: the best available, capped by $SB_CPU_ISA when it is set to a
 * known name (an unknown value is ignored). Decided on first use. */
cpu_isa cpu_isa_active(void);

/* Force an ISA (tests, benchmarks). SB_ERR_UNSUPPORTED when this machine cannot run it. Not
 * thread-safe against concurrent kernel calls. */
sb_status cpu_isa_set(cpu_isa isa);

// ---- type pairing ----

/* The activation format (ggml type id) a weight type is multiplied with here, or -1 when the CPU
 * kernels do not support the weight type. */
int cpu_act_type(int wtype);

/* Bytes of one quantized activation row of K elements for weight type wtype (K must be a multiple
 * of the weight's block size); SB_ERR_UNSUPPORTED / SB_ERR_INVALID_ARG otherwise. */
sb_status cpu_act_row_bytes(int wtype, int64_t K, size_t *out);

// ---- kernels ----

/* y[i] = gelu(g[i]) * u[i] with ggml's CPU GELU: 0 for g <= -10, g for g >= 10, else
 * table[fp16(g)] as fp16, table = 65536 fp16 entries + 1 pad (ops' op_gelu_table). Bits equal to
 * op_geglu's for every finite g on every ISA (cpu_geglu.c). */
void cpu_geglu(float *y, const float *g, const float *u, int64_t n, const uint16_t *table);

/* Quantize n floats (a multiple of the format's block: 32 for Q8_0/Q8_1, 256 for Q8_K) into
 * act_type blocks. act_type F32 copies. Since blocks are independent, T rows of K are quantized by
 * one call with n = T*K when K is a multiple of the block. */
sb_status cpu_quantize_act(int act_type, const float *x, void *dst, int64_t n);

/* *out = dot(row of n weights of type wtype, activation row in cpu_act_type(wtype) format). */
sb_status cpu_vec_dot(int wtype, int64_t n, float *out, const void *w_row, const void *act_row);

/* out(T, N) = act(T, K) x W(N, K)^T: W holds N rows of K weights of type wtype (each row
 * K/blck blocks, rows contiguous), act holds T rows in cpu_act_type(wtype) format (rows
 * contiguous, cpu_act_row_bytes each), out[t*N + n] gets the dot of activation row t with weight
 * row n. Output rows are split over the pool's threads (pool may be NULL: one thread).
 * T = 1 (decode) streams W once and allocates nothing. T > 1: each weight block is decoded once per
 * group of up to 4 activation rows; with T >= 8, weight tiles (16 rows on avx512, 8 on avx2) are
 * decoded into per-thread scratch and multiplied with vpdpbusd / vpmaddubsw (cpu_tile.inc), which
 * allocates ~T*K*1.4 bytes per call (SB_ERR_OOM if that fails). */
sb_status cpu_matmul(tp_pool *pool, int wtype, const void *W, int64_t K, int64_t N, const void *act, int64_t T,
                     float *out);

#endif
