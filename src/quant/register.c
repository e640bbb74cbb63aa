/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/register.c — fills the converter columns of the traits table (to_float, from_float_ref,
 * vec_dot_type) exactly once, thread-safely (pthread_once), on the first qk_get().
 * Layer 1 (quant).
 * vec_dot_type is the CPU activation format of formats.md §3.1: Q4_0/Q5_0/Q8_0/IQ4_NL (and the
 * other 32-block types MXFP4/NVFP4/Q1_0/Q2_0) pair with Q8_0; Q4_1/Q5_1 with Q8_1; K-quants,
 * IQ4_XS and the other 256-block types with Q8_K; F32/F16/BF16 with themselves. Types without a
 * converter here keep NULL function pointers.
 * from_float_ref is ggml's quantize_row_*_ref (for IQ4_NL that is the ntry = -1 ref, not what
 * llama-quantize writes: see qk_chunk_quantizer()).
 */
#include "quant/quant.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The table to fill. Every caller passes the same table (types.c has one), so racing atomic stores
 * of the same pointer are harmless; pthread_once orders the fill before every return. */
static qk_traits *_Atomic pending;
static atomic_bool done;   /* fast path: set (release) once fill() has completed */

static void set(qk_traits *t, int type, qk_to_float_fn to, qk_from_float_fn from, int vdt) {
    t[type].to_float = to;
    t[type].from_float_ref = from;
    t[type].vec_dot_type = vdt;
}

static void fill(void) {
    qk_traits *t = atomic_load(&pending);
    set(t, SB_TYPE_F32, qk_fp32_to_fp32_row, qk_fp32_copy_row, SB_TYPE_F32);
    set(t, SB_TYPE_F16, qk_fp16_to_fp32_row, qk_fp32_to_fp16_row, SB_TYPE_F16);
    set(t, SB_TYPE_BF16, qk_bf16_to_fp32_row, qk_fp32_to_bf16_row, SB_TYPE_BF16);
    set(t, SB_TYPE_Q4_0, qk_dequantize_row_q4_0, qk_quantize_row_q4_0_ref, SB_TYPE_Q8_0);
    set(t, SB_TYPE_Q4_1, qk_dequantize_row_q4_1, qk_quantize_row_q4_1_ref, SB_TYPE_Q8_1);
    set(t, SB_TYPE_Q5_0, qk_dequantize_row_q5_0, qk_quantize_row_q5_0_ref, SB_TYPE_Q8_0);
    set(t, SB_TYPE_Q5_1, qk_dequantize_row_q5_1, qk_quantize_row_q5_1_ref, SB_TYPE_Q8_1);
    set(t, SB_TYPE_Q8_0, qk_dequantize_row_q8_0, qk_quantize_row_q8_0_ref, SB_TYPE_Q8_0);
    set(t, SB_TYPE_Q8_1, qk_dequantize_row_q8_1, qk_quantize_row_q8_1_ref, SB_TYPE_Q8_1);
    set(t, SB_TYPE_Q2_K, qk_dequantize_row_q2_K, qk_quantize_row_q2_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_Q3_K, qk_dequantize_row_q3_K, qk_quantize_row_q3_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_Q4_K, qk_dequantize_row_q4_K, qk_quantize_row_q4_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_Q5_K, qk_dequantize_row_q5_K, qk_quantize_row_q5_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_Q6_K, qk_dequantize_row_q6_K, qk_quantize_row_q6_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_Q8_K, qk_dequantize_row_q8_K, qk_quantize_row_q8_K_ref, SB_TYPE_Q8_K);
    set(t, SB_TYPE_IQ4_NL, qk_dequantize_row_iq4_nl, qk_quantize_row_iq4_nl_ref, SB_TYPE_Q8_0);
    set(t, SB_TYPE_IQ4_XS, qk_dequantize_row_iq4_xs, qk_quantize_row_iq4_xs_ref, SB_TYPE_Q8_K);

    /* formats without converters here: only the pairing (formats.md §3.1) */
    static const int q8_0_pair[] = {SB_TYPE_MXFP4, SB_TYPE_NVFP4, SB_TYPE_Q1_0, SB_TYPE_Q2_0};
    static const int q8_K_pair[] = {SB_TYPE_IQ2_XXS, SB_TYPE_IQ2_XS, SB_TYPE_IQ2_S, SB_TYPE_IQ3_XXS,
                                    SB_TYPE_IQ3_S, SB_TYPE_IQ1_S, SB_TYPE_IQ1_M, SB_TYPE_TQ1_0, SB_TYPE_TQ2_0};
    for (size_t i = 0; i < sizeof q8_0_pair / sizeof q8_0_pair[0]; i++) t[q8_0_pair[i]].vec_dot_type = SB_TYPE_Q8_0;
    for (size_t i = 0; i < sizeof q8_K_pair / sizeof q8_K_pair[0]; i++) t[q8_K_pair[i]].vec_dot_type = SB_TYPE_Q8_K;
}

void qk_register_converters(qk_traits *table) {
    if (atomic_load_explicit(&done, memory_order_acquire)) return;
    atomic_store(&pending, table);
    pthread_once(&once, fill);
    atomic_store_explicit(&done, true, memory_order_release);
}
