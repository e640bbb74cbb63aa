/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/quant.h — reference (plain C) quantize/dequantize entry points of every block format.
 * Layer 1 (quant). Bit-exact with llama.cpp's quantize_row_*_ref / dequantize_row_* (formats.md §2),
 * verified against testdata/quant/<type>.qv by tests/quant/test_conformance.c.
 * Block structs live in quant/blocks.h, scalar conversions in quant/fp16.h.
 * Conventions for every function here:
 *  - n (elements) must be a multiple of the type's block size (SB_ASSERT: a caller bug otherwise);
 *    x and y must not overlap.
 *  - Every output byte is written (also where ggml leaves bytes untouched; noted per function).
 *  - Pure functions of their input; no allocation, no global state, thread-safe.
 *  - NaN/Inf inputs give defined but meaningless blocks (as in llama.cpp); never UB or a crash.
 * Non-goals: the IQ1/IQ2/IQ3/TQ/MXFP4/NVFP4 formats; SIMD.
 */
#ifndef SB_QUANT_QUANT_H
#define SB_QUANT_QUANT_H

#include "quant/types.h"

#include <stdint.h>

/* Fill the converter columns of the traits table (called once, thread-safe, by qk_get). */
void qk_register_converters(qk_traits *table);

// ---- scalar rows (F32 / F16 / BF16) ----

void qk_fp32_to_fp16_row(const float *x, void *y, int64_t n);  /* RNE (ggml_fp32_to_fp16_row) */
void qk_fp16_to_fp32_row(const void *x, float *y, int64_t n);
void qk_fp32_to_bf16_row(const float *x, void *y, int64_t n);  /* ggml_fp32_to_bf16_row_ref */
void qk_bf16_to_fp32_row(const void *x, float *y, int64_t n);
void qk_fp32_copy_row(const float *x, void *y, int64_t n);     /* F32 "quantize" = copy */
void qk_fp32_to_fp32_row(const void *x, float *y, int64_t n);  /* F32 "dequantize" = copy */

// ---- legacy 32-blocks (q4.c, q5.c, q8_0.c) ----

void qk_quantize_row_q4_0_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q4_1_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q5_0_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q5_1_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q8_0_ref(const float *x, void *y, int64_t n);  /* roundf, id = 1/d */
void qk_dequantize_row_q4_0(const void *x, float *y, int64_t n);
void qk_dequantize_row_q4_1(const void *x, float *y, int64_t n);
void qk_dequantize_row_q5_0(const void *x, float *y, int64_t n);
void qk_dequantize_row_q5_1(const void *x, float *y, int64_t n);
void qk_dequantize_row_q8_0(const void *x, float *y, int64_t n);

// ---- activation formats (q8_act.c, formats.md §2.6, §2.7, §3.2) ----

void qk_quantize_row_q8_1_ref(const float *x, void *y, int64_t n);  /* s = F16(d * Σq) */
void qk_quantize_row_q8_K_ref(const float *x, void *y, int64_t n);  /* zero block: bsums = 0 too */
/* The x86 AVX/AVX2 activation quantizers of llama.cpp's CPU backend: d = amax/127 (stored F16),
 * id = 127/amax, q = round-half-even(x*id) saturated to int8. CPU kernels use these so that
 * matmul results match llama.cpp on x86; they differ from the _ref versions on ties. */
void qk_quantize_row_q8_0_x86(const float *x, void *y, int64_t n);
void qk_quantize_row_q8_1_x86(const float *x, void *y, int64_t n);
void qk_dequantize_row_q8_1(const void *x, float *y, int64_t n);    /* y = qs*d (ggml has none) */
void qk_dequantize_row_q8_K(const void *x, float *y, int64_t n);

// ---- K-quants (k_quants.c) ----

void qk_quantize_row_q2_K_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q3_K_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q4_K_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q5_K_ref(const float *x, void *y, int64_t n);
void qk_quantize_row_q6_K_ref(const float *x, void *y, int64_t n);
void qk_dequantize_row_q2_K(const void *x, float *y, int64_t n);
void qk_dequantize_row_q3_K(const void *x, float *y, int64_t n);
void qk_dequantize_row_q4_K(const void *x, float *y, int64_t n);
void qk_dequantize_row_q5_K(const void *x, float *y, int64_t n);
void qk_dequantize_row_q6_K(const void *x, float *y, int64_t n);

// ---- IQ4 (iq4.c, formats.md §2.12) ----

/* quantize_row_iq4_nl_ref (ntry = -1): ggml's CPU from_float (KV-cache copies). A block whose
 * |max| < 1e-15 stores d = 0 and qs = 0 (ggml leaves its scratch L there, i.e. undefined). */
void qk_quantize_row_iq4_nl_ref(const float *x, void *y, int64_t n);
/* quantize_iq4_nl without imatrix (ntry = 7): what llama-quantize writes for IQ4_NL. */
void qk_quantize_row_iq4_nl(const float *x, void *y, int64_t n);
/* quantize_iq4_xs without imatrix (ntry = 7) == quantize_row_iq4_xs_ref. */
void qk_quantize_row_iq4_xs_ref(const float *x, void *y, int64_t n);
void qk_dequantize_row_iq4_nl(const void *x, float *y, int64_t n);
void qk_dequantize_row_iq4_xs(const void *x, float *y, int64_t n);

// ---- per-tensor quantization as llama-quantize does it (chunk.c) ----

/* Quantize nrows rows of n_per_row fp32 values into dst (nrows * row_bytes bytes) exactly as
 * ggml_quantize_chunk(type, ..., imatrix = NULL) does: the code path per type is listed in
 * chunk.c. Returns SB_ERR_UNSUPPORTED for a type without a quantizer here (and for Q8_1/Q8_K,
 * which are activation-only formats), SB_ERR_INVALID_ARG for NULL pointers, negative counts or
 * n_per_row not a multiple of the block size. */
sb_status qk_quantize_chunk(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row);

/* The quantizer qk_quantize_chunk uses for `type` (NULL when none): for most types this is
 * traits->from_float_ref; for IQ4_NL it is qk_quantize_row_iq4_nl (ntry = 7), not the ref. */
qk_from_float_fn qk_chunk_quantizer(int type);

// ---- importance-matrix quantization (llama-quantize --imatrix) ----

/* One row of n values (a multiple of the block) with per-column importance qw[0..n): ggml's
 * quantize_row_<type>_impl / quantize_<type> with quant_weights (formats.md §2 "With an imatrix").
 * The legacy types use the row-wide σ² = Σx²/n; the K-quants and IQ4 a per-super-block σ². */
void qk_quantize_row_q4_0_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q4_1_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q5_0_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q5_1_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q2_K_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q3_K_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q4_K_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q5_K_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_q6_K_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_iq4_nl_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qk_quantize_row_iq4_xs_imatrix(const float *x, void *y, int64_t n, const float *qw);

/* qk_quantize_chunk with importance weights qw (n_per_row values, the same for every row; NULL =
 * qk_quantize_chunk): ggml_quantize_chunk(type, ..., imatrix = qw). Types whose llama.cpp
 * quantizer ignores the weights (Q8_0, F16, BF16, F32) quantize as without them. Same errors as
 * qk_quantize_chunk. */
sb_status qk_quantize_chunk_w(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                              const float *qw);

#endif
