/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/chunk.c — qk_quantize_chunk: quantize a tensor's rows exactly as llama-quantize does
 * without an imatrix (ggml_quantize_chunk with quant_weights == NULL), formats.md §2.14, §4.1.
 * Layer 1 (quant).
 * Code path per type (read from ggml-quants.c quantize_<type>() with quant_weights == NULL):
 *   Q4_0 Q4_1 Q5_0 Q5_1 Q8_0            quantize_row_*_ref on the whole chunk
 *   Q2_K Q3_K Q4_K Q5_K Q6_K            quantize_row_*_K_ref on the whole chunk
 *   IQ4_NL                              quantize_iq4_nl, ntry = 7 (NOT quantize_row_iq4_nl_ref)
 *   IQ4_XS                              quantize_iq4_xs, ntry = 7 (== quantize_row_iq4_xs_ref)
 *   F16 / BF16 / F32                    ggml_fp32_to_fp16_row / ggml_fp32_to_bf16_row_ref / copy
 * Every block is a pure function of its own 32 or 256 inputs without an imatrix, so quantizing
 * row by row equals quantizing the chunk at once.
 * Non-goals: imatrix quantization; threading (callers split rows).
 */
#include "quant/quant.h"
#include "base/ckd.h"
#include "base/status.h"

qk_from_float_fn qk_chunk_quantizer(int type) {
    switch (type) {
    case SB_TYPE_IQ4_NL: return qk_quantize_row_iq4_nl;
    case SB_TYPE_Q8_1:
    case SB_TYPE_Q8_K: return NULL;   /* activation formats: llama-quantize never writes them */
    default: break;
    }
    const qk_traits *t = qk_get(type);
    return (t && !t->removed) ? t->from_float_ref : NULL;
}

sb_status qk_quantize_chunk(int type, const float *src, void *dst, int64_t nrows, int64_t n_per_row) {
    const qk_traits *t = qk_get(type);
    if (!t || t->removed) return sb_fail(SB_ERR_UNSUPPORTED, "quantize: type id %d is not a valid ggml type", type);
    const qk_from_float_fn q = qk_chunk_quantizer(type);
    if (!q) return sb_fail(SB_ERR_UNSUPPORTED, "quantize: no quantizer for type %s", t->name);
    if (nrows < 0 || n_per_row < 0)
        return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: nrows %lld / n_per_row %lld negative", t->name,
                       (long long)nrows, (long long)n_per_row);
    if (n_per_row % t->blck)
        return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: n_per_row %lld is not a multiple of the block size %lld",
                       t->name, (long long)n_per_row, (long long)t->blck);
    uint64_t row_bytes = 0, total = 0;
    if (qk_row_bytes(type, n_per_row, &row_bytes) || ckd_mul(&total, row_bytes, (uint64_t)nrows))
        return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: %lld x %lld elements overflow", t->name,
                       (long long)nrows, (long long)n_per_row);
    if (nrows == 0 || n_per_row == 0) return SB_OK;
    if (!src || !dst) return sb_fail(SB_ERR_INVALID_ARG, "quantize %s: NULL src or dst", t->name);
    for (int64_t r = 0; r < nrows; r++) {
        q(src + r * n_per_row, (char *)dst + (size_t)r * (size_t)row_bytes, n_per_row);
    }
    return SB_OK;
}
