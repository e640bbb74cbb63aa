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
 * llama-quantize's flags (rt_qrules): --pure, --tensor-type, --output-tensor-type,
 * --token-embedding-type, --leave-output-tensor, --allow-requantize and --imatrix (runtime/imatrix.h;
 * the weighted quantizers are quant/imatrix.c's qk_quantize_chunk_w, not byte-verified against
 * llama.cpp).
 * Non-goals: IQ1/IQ2/IQ3/TQ/MXFP4 mixes (refused with SB_ERR_UNSUPPORTED), split files, pruning.
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

/* A --tensor-type override: a compiled PCRE2 pattern searched in the tensor name, and its type. */
typedef struct rt_qoverride {
    void *code;        /* pcre2_code (8-bit) */
    int type;
} rt_qoverride;

/* llama-quantize's per-tensor flags (llama_model_quantize_params). All-zero except the two types
 * (-1) is "no flags": rt_qrules_default. */
typedef struct rt_qrules {
    bool pure;                     /* --pure: no mix rules (overrides and the shape fallback still apply) */
    bool leave_output;             /* --leave-output-tensor: output.weight is copied as is */
    bool has_imatrix;              /* an importance matrix is used (changes Q4_0/Q5_0/IQ4 ffn_down rules) */
    int output_type;               /* --output-tensor-type: sb type, -1 = from the mix */
    int token_embd_type;           /* --token-embedding-type: sb type, -1 = from the mix */
    const rt_qoverride *overrides; /* --tensor-type, in command-line order; the first match wins */
    int n_overrides;
} rt_qrules;

/* No flags. */
rt_qrules rt_qrules_default(void);

struct rt_qopts;

/* Counters that advance as tensors are typed in file order (quantize_state_impl). */
typedef struct rt_qstate {
    int n_attn_v, i_attn_v;        /* attn_v-like tensors: total, seen so far */
    int i_ffn_down, i_ffn_gate, i_ffn_up;
    bool has_output;               /* output.weight exists (else token_embd is tied) */
    int n_fallback;                /* tensors that needed the shape fallback */
    const rt_qrules *rules;        /* NULL = no flags; set after rt_qstate_init */
} rt_qstate;

/* llama-quantize's tensor_allows_quantization (n_dims as ggml_n_dims). */
bool rt_quant_allows(const char *name, int n_dims);

/* The type llama-quantize gives tensor `name` (n_dims, ne, current type cur_type) under mix `m`;
 * advances the counters in *st. Call in file order after setting st->n_attn_v/has_output
 * (rt_qstate_init). SB_ERR_UNSUPPORTED when no fallback type fits ne[0]; SB_ERR_MODEL_HPARAM for an
 * expert tensor whose layer cannot be parsed. */
sb_status rt_quant_tensor_type(const rt_qmix *m, const rt_qmodel *model, rt_qstate *st, const char *name,
                               int n_dims, const int64_t ne[4], int cur_type, int *out_type);

/* The sb type whose ggml name is `name` (case-insensitive: "q4_K", "Q8_0", "f16"). SB_ERR_INVALID_ARG
 * for an unknown name (the message lists the valid ones), SB_ERR_UNSUPPORTED for a type this build
 * cannot quantize to (IQ1/IQ2/IQ3, TQ, MXFP4, ...: the type is named). `what` names the flag. */
sb_status rt_qtype_parse(const char *name, const char *what, int *type);

/* Turn the text flags of o (output/token-embedding type names, --tensor-type lists, pure,
 * leave_output) into *r; *ov receives the compiled overrides (free with rt_qrules_free), r points
 * into it. Errors name the flag: SB_ERR_INVALID_ARG (unknown type, bad pattern), SB_ERR_UNSUPPORTED
 * (a type without a quantizer). */
sb_status rt_qrules_build(const struct rt_qopts *o, rt_qrules *r, rt_qoverride **ov);
void rt_qrules_free(rt_qoverride *ov, int n);

/* The type of the first --tensor-type pattern found in `name`; -1 when none matches, -2 when the
 * matcher fails (out of memory, match limit). */
int rt_qrules_match(const rt_qrules *r, const char *name);

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

struct rt_imatrix;

/* Sizes for llama-quantize's summary line ("model size = ... -> quantized size = ..."). */
typedef struct rt_qstats {
    uint64_t n_elements;  /* elements of every tensor */
    uint64_t bytes_in;    /* tensor data bytes of the input (all tensors, without padding) */
    uint64_t bytes_out;   /* tensor data bytes of the output */
} rt_qstats;

typedef struct rt_qopts {
    int n_threads;                         /* <= 0: number of online cores */
    sb_progress_fn progress;               /* may be NULL */
    void *progress_user;
    int64_t pool_rows;                     /* > 0: of a tensor produced by fill, only the first pool_rows rows are
                                            * filled and quantized; row r >= pool_rows is a copy of row r % pool_rows
                                            * (sb synth --fast: valid blocks, the exact mix, no per-row work) */
    bool allow_requantize;                 /* false: a tensor converted from a quantized type fails
                                            * (llama-quantize's "requantizing from type X is disabled") */
    const rt_qrules *rules;                /* NULL = no flags */
    const struct rt_imatrix *imatrix;      /* per-column importance weights; NULL = none */
    rt_qstats *stats;                      /* filled on success when not NULL */
    /* rt_quantize_file only: the flags as text, turned into rules / imatrix there */
    const char *output_type_name, *token_embd_type_name;   /* NULL = from the mix */
    const char *const *tt_patterns;        /* --tensor-type PATTERN=TYPE, split */
    const char *const *tt_types;
    int n_tt;
    bool pure, leave_output;
    const char *imatrix_path;              /* NULL = none */
} rt_qopts;

/* Quantize n tensors under mix m into `out`. The writer w already holds the metadata in its final
 * order (general.quantization_version and general.file_type are set here, at the end); tensors are
 * added here. fill/fill_ctx serve tensors whose data is NULL. */
sb_status rt_quantize_tensors(gguf_writer *w, const rt_qmix *m, const rt_qmodel *model, const rt_qtensor *ts,
                              int64_t n, rt_fill_fn fill, void *fill_ctx, const char *out, const rt_qopts *o);

/* The whole `sb quantize`: read in, copy its metadata in order, quantize, write out atomically.
 * Mix names as llama-quantize's (case-insensitive), its aliases Q3_K/Q4_K/Q5_K and its numeric
 * ftypes; Q2_K_S requires an imatrix for its Q2_K tensors (SB_ERR_INVALID_ARG without); the
 * IQ1/IQ2/IQ3/TQ/MXFP4 mixes give SB_ERR_UNSUPPORTED naming the mix. */
sb_status rt_quantize_file(const char *in, const char *out, const char *type_name, const rt_qopts *o);

#endif
