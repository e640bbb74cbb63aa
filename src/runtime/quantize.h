/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/quantize.h — llama-quantize's per-tensor type rules (formats.md §4: eligibility,
 * categories, tensor order, the mixes Q2_K..Q8_0/IQ4_*, output/tied-embedding rule, shape
 * fallback) and the file-level pipeline that writes a quantized GGUF whose tensor data, types,
 * shapes, order and metadata layout equal llama-quantize's.
 * Layer 2 (runtime; uses base, quant, format).
 * Invariants: tensors are processed in llama-quantize's order (layer number, then name bytes);
 * rows are quantized independently, so any thread count gives the same bytes; memory is bounded by
 * the largest tensor (output data is staged in an unlinked scratch file next to the output, the
 * writer streams it into "<out>.tmp.<pid>" and renames).
 * Non-goals: imatrix, --pure, --tensor-type overrides, IQ1/IQ2/IQ3/TQ/MXFP4 mixes, split files.
 * References: llama.cpp src/llama-quant.cpp (tensor_allows_quantization, llama_tensor_get_type_impl,
 * tensor_type_fallback, llama_model_quantize_impl).
 */
#ifndef SB_RUNTIME_QUANTIZE_H
#define SB_RUNTIME_QUANTIZE_H

#include "sonicboom.h"
#include "format/gguf.h"
#include "format/gguf_write.h"

#include <stdbool.h>
#include <stdint.h>

// ---- mixes (llama_ftype) ----

typedef struct rt_qmix {
    const char *name;  /* "Q4_K_M" */
    int ftype;         /* llama_ftype value written to general.file_type */
    int default_type;  /* sb_type every eligible tensor starts from */
} rt_qmix;

/* The mix named `name` (case-insensitive), or NULL. */
const rt_qmix *rt_qmix_find(const char *name);
/* Mix i in the documented order (F32, F16, BF16, Q8_0, ...), NULL past the end. */
const rt_qmix *rt_qmix_at(int i);

// ---- per-tensor rules ----

/* Model facts the rules read (from general.architecture and <arch>.* keys). */
typedef struct rt_qmodel {
    bool falcon;       /* arch == "falcon" */
    bool is_70b;       /* arch llama, 80 layers, n_head != n_head_kv (LLM_TYPE_70B) */
    int n_layer;       /* <arch>.block_count */
    int n_gqa;         /* n_head / n_head_kv of layer 0 (0 when unknown) */
    int n_expert;      /* <arch>.expert_count (0 when absent) */
} rt_qmodel;

/* Counters that advance as tensors are typed in file order (quantize_state_impl). */
typedef struct rt_qstate {
    int n_attn_v, i_attn_v;        /* attn_v-like tensors: total, seen so far */
    int i_ffn_down, i_ffn_gate, i_ffn_up;
    bool has_output;               /* output.weight exists (else token_embd is tied) */
    int n_fallback;                /* tensors that needed the shape fallback */
} rt_qstate;

/* llama-quantize's tensor_allows_quantization (n_dims as ggml_n_dims). */
bool rt_quant_allows(const char *name, int n_dims);

/* The type llama-quantize gives tensor `name` (n_dims, ne, current type cur_type) under mix `m`;
 * advances the counters in *st. Call in file order after setting st->n_attn_v/has_output
 * (rt_qstate_init). SB_ERR_UNSUPPORTED when no fallback type fits ne[0]; SB_ERR_MODEL_HPARAM for an
 * expert tensor whose layer cannot be parsed. */
sb_status rt_quant_tensor_type(const rt_qmix *m, const rt_qmodel *model, rt_qstate *st, const char *name,
                               int n_dims, const int64_t ne[4], int cur_type, int *out_type);

/* Count attn_v-like tensors and output.weight among n names. */
void rt_qstate_init(rt_qstate *st, const char *const *names, int64_t n);

/* Read the model facts from a parsed file's metadata (missing keys leave zeros). */
sb_status rt_qmodel_from_gguf(const gguf_file *f, rt_qmodel *out);

/* llama-quantize's tensor order: layer number from "blk.%d." (-1 when none) ascending, then
 * strcmp. Returns <0, 0, >0. */
int rt_quant_order(const char *a, const char *b);

// ---- pipeline ----

/* Fill dst (nrows*ne0 floats, rows [row0, row0+nrows) of the tensor) with F32 values. Called from
 * worker threads concurrently for disjoint row ranges. */
typedef sb_status (*rt_fill_fn)(void *ctx, int64_t tensor_index, int64_t row0, int64_t nrows, float *dst);

/* One tensor to write. Exactly one of data (bytes of `type`) or fill (F32 producer; type must be
 * SB_TYPE_F32) is set. */
typedef struct rt_qtensor {
    const char *name;
    int n_dims;
    int64_t ne[4];
    int type;
    const void *data;
} rt_qtensor;

typedef struct rt_qopts {
    int n_threads;                         /* <= 0: number of online cores */
    sb_progress_fn progress;               /* may be NULL */
    void *progress_user;
    int64_t pool_rows;                     /* > 0: of a tensor produced by fill, only the first pool_rows rows are
                                            * filled and quantized; row r >= pool_rows is a copy of row r % pool_rows
                                            * (sb synth --fast: valid blocks, the exact mix, no per-row work) */
} rt_qopts;

/* Quantize n tensors under mix m into `out`. The writer w already holds the metadata in its final
 * order (general.quantization_version and general.file_type are set here, at the end); tensors are
 * added here. fill/fill_ctx serve tensors whose data is NULL. */
sb_status rt_quantize_tensors(gguf_writer *w, const rt_qmix *m, const rt_qmodel *model, const rt_qtensor *ts,
                              int64_t n, rt_fill_fn fill, void *fill_ctx, const char *out, const rt_qopts *o);

/* The whole `sb quantize`: read in, copy its metadata in order, quantize, write out atomically. */
sb_status rt_quantize_file(const char *in, const char *out, const char *type_name, const rt_qopts *o);

#endif
