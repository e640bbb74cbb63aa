/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * quant/types.h — the type-traits table: the single source of truth for every ggml type id's name,
 * block size and bytes per block (formats.md §1.4), and for its reference row converters.
 * Layer 1 (quant; depends on base only).
 * Invariants: ids keep ggml's numbering; removed ids have blck == 0 and name NULL; sizes here are
 * the only sizes anyone uses (GGUF validation, loaders, kernels, quantize).
 * Non-goals: kernels (backend/cpu), per-tensor quantization mixes (runtime/quantize).
 */
#ifndef SB_QUANT_TYPES_H
#define SB_QUANT_TYPES_H

#include "sonicboom.h"

#include <stdbool.h>
#include <stdint.h>

/* Reference converters (plain C, -ffp-contract=off). n is a multiple of blck. */
typedef void (*qk_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*qk_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct qk_traits {
    const char *name;          /* "Q4_K"; NULL for removed ids */
    int64_t blck;              /* elements per block; 0 for removed ids */
    int64_t type_size;         /* bytes per block */
    bool is_quantized;         /* a block format (not F32/F16/BF16/int/F64) */
    bool removed;              /* a removed/deprecated id: files holding it are rejected */
    qk_to_float_fn to_float;   /* dequantize (NULL where the format has no dequantizer here) */
    qk_from_float_fn from_float_ref; /* reference quantize (llama.cpp quantize_row_*_ref) */
    int vec_dot_type;          /* activation format this weight type pairs with on CPU (formats.md §3.1) */
} qk_traits;

/* Traits of id `type`, or NULL when type is outside [0, SB_TYPE_COUNT). */
const qk_traits *qk_get(int type);

/* True when `type` names a live (non-removed) type. */
bool qk_valid(int type);

/* Bytes of one row of n elements (n must be a multiple of blck); 0 and nonzero return on overflow
 * or a bad n. */
int qk_row_bytes(int type, int64_t n, uint64_t *out);

#endif
