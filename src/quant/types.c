/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/types.c — the qk_traits table (formats.md §1.4) with designated initialisers.
 * The converter columns are filled from the per-format files (quant/<format>.c) through quant/quant.h.
 */
#include "quant/types.h"
#include "quant/quant.h"
#include "base/ckd.h"

#include <stddef.h>

#define T(id, nm, bl, sz, q) [id] = { .name = nm, .blck = bl, .type_size = sz, .is_quantized = q, .vec_dot_type = id }
#define R(id) [id] = { .name = NULL, .blck = 0, .type_size = 0, .removed = true, .vec_dot_type = id }

static qk_traits traits[SB_TYPE_COUNT] = {
    T(SB_TYPE_F32, "F32", 1, 4, false),
    T(SB_TYPE_F16, "F16", 1, 2, false),
    T(SB_TYPE_Q4_0, "Q4_0", 32, 18, true),
    T(SB_TYPE_Q4_1, "Q4_1", 32, 20, true),
    R(4), R(5),
    T(SB_TYPE_Q5_0, "Q5_0", 32, 22, true),
    T(SB_TYPE_Q5_1, "Q5_1", 32, 24, true),
    T(SB_TYPE_Q8_0, "Q8_0", 32, 34, true),
    T(SB_TYPE_Q8_1, "Q8_1", 32, 36, true),
    T(SB_TYPE_Q2_K, "Q2_K", 256, 84, true),
    T(SB_TYPE_Q3_K, "Q3_K", 256, 110, true),
    T(SB_TYPE_Q4_K, "Q4_K", 256, 144, true),
    T(SB_TYPE_Q5_K, "Q5_K", 256, 176, true),
    T(SB_TYPE_Q6_K, "Q6_K", 256, 210, true),
    T(SB_TYPE_Q8_K, "Q8_K", 256, 292, true),
    T(SB_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, true),
    T(SB_TYPE_IQ2_XS, "IQ2_XS", 256, 74, true),
    T(SB_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, true),
    T(SB_TYPE_IQ1_S, "IQ1_S", 256, 50, true),
    T(SB_TYPE_IQ4_NL, "IQ4_NL", 32, 18, true),
    T(SB_TYPE_IQ3_S, "IQ3_S", 256, 110, true),
    T(SB_TYPE_IQ2_S, "IQ2_S", 256, 82, true),
    T(SB_TYPE_IQ4_XS, "IQ4_XS", 256, 136, true),
    T(SB_TYPE_I8, "I8", 1, 1, false),
    T(SB_TYPE_I16, "I16", 1, 2, false),
    T(SB_TYPE_I32, "I32", 1, 4, false),
    T(SB_TYPE_I64, "I64", 1, 8, false),
    T(SB_TYPE_F64, "F64", 1, 8, false),
    T(SB_TYPE_IQ1_M, "IQ1_M", 256, 56, true),
    T(SB_TYPE_BF16, "BF16", 1, 2, false),
    R(31), R(32), R(33),
    T(SB_TYPE_TQ1_0, "TQ1_0", 256, 54, true),
    T(SB_TYPE_TQ2_0, "TQ2_0", 256, 66, true),
    R(36), R(37), R(38),
    T(SB_TYPE_MXFP4, "MXFP4", 32, 17, true),
    T(SB_TYPE_NVFP4, "NVFP4", 64, 36, true),
    T(SB_TYPE_Q1_0, "Q1_0", 128, 18, true),
    T(SB_TYPE_Q2_0, "Q2_0", 64, 18, true),
};

#undef T
#undef R

const qk_traits *qk_get(int type) {
    if (type < 0 || type >= SB_TYPE_COUNT) return NULL;
    qk_register_converters(traits); /* idempotent; fills to_float/from_float_ref/vec_dot_type */
    return &traits[type];
}

bool qk_valid(int type) {
    const qk_traits *t = qk_get(type);
    return t && !t->removed;
}

int qk_row_bytes(int type, int64_t n, uint64_t *out) {
    const qk_traits *t = qk_get(type);
    if (!t || t->removed || n < 0 || n % t->blck) return 1;
    return ckd_mul(out, (uint64_t)(n / t->blck), (uint64_t)t->type_size);
}

// ---- public wrappers ----

const char *sb_type_name(int type) {
    const qk_traits *t = qk_get(type);
    return t ? t->name : NULL;
}

sb_status sb_type_size(int type, int64_t *block_elems, int64_t *block_bytes) {
    const qk_traits *t = qk_get(type);
    if (!t || t->removed) return SB_ERR_RANGE;
    if (block_elems) *block_elems = t->blck;
    if (block_bytes) *block_bytes = t->type_size;
    return SB_OK;
}
