/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/arch.h — what architecture files share: the hyperparameter readers, the weight
 * binder that checks name/shape/type against the file, and the one decoder-graph builder that
 * serves the plain dense decoders (qwen2, qwen3, llama, gemma3 differ only in data: rt_hparams);
 * an architecture with another block shape (gemma4) brings its own builder (rt_arch.build), which
 * rt_build_decoder calls instead.
 * Layer 2 (runtime). Builders only record IR; a missing tensor, wrong shape or a type the CPU cannot
 * run becomes a sticky status with the tensor named (SB_ERR_MODEL_TENSOR_*).
 * Adding an architecture = one file with its load_hparams (and build, if it needs one) + a line in
 * model.c's table.
 */
#ifndef SB_RUNTIME_ARCH_H
#define SB_RUNTIME_ARCH_H

#include "runtime/model.h"

/* Graph-building context for one shape (T tokens, n_out logit rows, KV length n_ctx; sliding-window
 * layers' caches are rings of n_swa_ring rows when that is > 0). */
typedef struct rt_build {
    ir_graph *g;
    const rt_model *m;
    int64_t T, n_out, n_ctx;
    int64_t n_swa_ring;         /* 0: every cache holds n_ctx positions */
    int kv_type;                /* SB_TYPE_F32 or SB_TYPE_F16 */
    /* paged KV (runtime/kv_pool.h): block_size > 0 makes n_ctx the pool's physical rows, K/V
     * written at the slots input and attention read through a block_table input of n_blk_max
     * blocks a token (graph/builder_paged.c); 0 = one contiguous cache */
    int32_t block_size;
    int64_t n_blk_max;
    sb_status status;           /* first binding failure (message in sb_last_error at that time) */
    char error[512];
} rt_build;

/* The weight named by fmt..., checked against the expected shape (ne1 = 0 for 1-D). Returns
 * IR_NONE (and records the failure) when it is required and missing, or has another shape or an
 * unsupported type; returns IR_NONE silently when optional and absent. */
ir_ref rt_weight(rt_build *b, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Layer l's K (kind 'k') or V ('v') cache input, "cache_k.<l>" of [Dkv, n_ctx] — a ring of
 * n_swa_ring rows for a sliding-window layer when the session keeps rings. */
ir_ref rt_kv_cache(rt_build *b, int64_t l, char kind, int64_t Dkv);
/* How a graph writes and reads its KV caches: contiguous (slots = pos, no table) or, when
 * b->block_size > 0, paged (a slots input for kv_store's rows, a block-table input for attention;
 * created here, after the caller's pos). rt_attention is ir_attention or ir_attention_paged. */
typedef struct rt_kv_io {
    ir_ref pos, slots, table;
} rt_kv_io;
rt_kv_io rt_kv_inputs(rt_build *b, ir_ref pos);
ir_ref rt_attention(rt_build *b, const rt_kv_io *io, ir_ref q, ir_ref k, ir_ref v, const ir_attn_params *ap);

/* Build the forward graph of the model for b->T tokens into b->g: logits [n_vocab, n_out] as
 * output "logits". */
sb_status rt_build_decoder(rt_build *b);

// ---- hyperparameter helpers (key = "<arch>.<suffix>") ----
sb_status rt_hp_u32(const gguf_file *f, const char *arch, const char *suffix, bool required, uint32_t def, int64_t *out);
sb_status rt_hp_f32(const gguf_file *f, const char *arch, const char *suffix, bool required, float def, float *out);
/* The generic keys of architectures.md §1 (n_embd, n_layer, heads, head dims, rope base/scaling,
 * eps, n_ff, context). */
sb_status rt_hp_common(const gguf_file *f, rt_hparams *hp);
/* rt_hp_common, accepting per-layer arrays for feed_forward_length, head_count and head_count_kv
 * (hp->layer_*; the scalars then hold the largest value). */
sb_status rt_hp_common_per_layer(const gguf_file *f, rt_hparams *hp);
/* rt_hp_common plus what the full-head-RoPE SiLU families (llama, qwen2, qwen3) share:
 * rope.dimension_count must equal the head dim; rope_mode as given, act = SiLU. */
sb_status rt_hp_full_rope_silu(const gguf_file *f, rt_hparams *hp, int32_t rope_mode);

sb_status rt_arch_qwen2_hparams(const gguf_file *f, rt_hparams *hp);
sb_status rt_arch_qwen3_hparams(const gguf_file *f, rt_hparams *hp);
sb_status rt_arch_llama_hparams(const gguf_file *f, rt_hparams *hp);
sb_status rt_arch_gemma3_hparams(const gguf_file *f, rt_hparams *hp);
sb_status rt_arch_gemma4_hparams(const gguf_file *f, rt_hparams *hp);
/* Gemma 4's graph (architectures.md §6.5): per-layer embeddings, shared KV, two head sizes. */
sb_status rt_build_gemma4(rt_build *b);

#endif
