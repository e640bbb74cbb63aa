/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model.h — a loaded model: the mapped GGUF file, its architecture, hyperparameters and
 * tokenizer, with every weight the architecture needs bound and checked by name, shape and type.
 * Layer 2 (runtime). A model is immutable after rt_model_load and shared read-only by any number of
 * sessions on any threads. Weights stay in the read-only mapping (no copy, no conversion: a model
 * keeps the types its file has), or with no_mmap in a heap copy of the file. Sessions re-check the
 * mapped file's size (gguf_check_size) when created and before each evaluation.
 * Non-goals: MoE, multimodal towers.
 */
#ifndef SB_RUNTIME_MODEL_H
#define SB_RUNTIME_MODEL_H

#include "format/gguf.h"
#include "graph/ir.h"
#include "runtime/tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

#define RT_MAX_LAYERS 512

typedef enum rt_ffn_act { RT_ACT_SILU = 0, RT_ACT_GELU = 1 } rt_ffn_act;

/* Everything a builder needs, read from `<arch>.*` keys (architectures.md §1 and the arch sections). */
typedef struct rt_hparams {
    char arch[32];
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    int32_t n_rot;
    int32_t rope_mode;          /* IR_ROPE_NORMAL | IR_ROPE_NEOX (hard-coded per arch, §7) */
    float eps;
    float rope_base, rope_freq_scale;          /* full-attention layers */
    float rope_base_swa, rope_freq_scale_swa;  /* sliding-window layers */
    int32_t n_swa;              /* window length, 0 = none */
    uint8_t is_swa[RT_MAX_LAYERS];
    float attn_scale;           /* kq scale */
    float embd_scale;           /* token embedding multiplier (gemma: sqrt(n_embd)), 1 otherwise */
    float final_softcap;        /* 0 = off */
    rt_ffn_act act;
    bool qk_norm;               /* per-head q/k RMSNorm (qwen3, gemma3) */
    bool post_norms;            /* gemma3 post-attention / post-ffw norms */
    /* per-layer shapes: every architecture fills them (the scalars above, unless the file holds
     * per-layer arrays, which only gemma4 accepts); the scalars then hold the largest value */
    int64_t layer_n_head[RT_MAX_LAYERS], layer_n_head_kv[RT_MAX_LAYERS], layer_n_ff[RT_MAX_LAYERS];
    int64_t head_dim_swa;       /* head dim of sliding-window layers (gemma4: key_length_swa), else head_dim */
    int32_t n_rot_swa;          /* rotated dims of sliding-window layers, else n_rot */
    int64_t n_layer_kv;         /* layers [0, n_layer_kv) own a KV cache; later ones read an earlier one's (gemma4) */
    int64_t n_embd_per_layer;   /* gemma4 per-layer-embedding width P; 0 = none */
} rt_hparams;

/* Head dim of layer l. */
static inline int64_t rt_hp_head_dim(const rt_hparams *hp, int64_t l) { return hp->is_swa[l] ? hp->head_dim_swa : hp->head_dim; }
/* The layer whose KV cache layer l attends over: l itself, or for a shared-KV layer (gemma4,
 * architectures.md §6.3) layer n_layer_kv-2 when l is sliding-window, n_layer_kv-1 when global. */
static inline int64_t rt_hp_kv_layer(const rt_hparams *hp, int64_t l) {
    return l < hp->n_layer_kv ? l : hp->n_layer_kv - (hp->is_swa[l] ? 2 : 1);
}
/* Values per position of layer l's own K (and of its V) cache; 0 when the layer owns none. */
static inline int64_t rt_hp_kv_dim(const rt_hparams *hp, int64_t l) {
    return l < hp->n_layer_kv ? hp->layer_n_head_kv[l] * rt_hp_head_dim(hp, l) : 0;
}

typedef struct rt_model rt_model;
struct rt_build;

typedef struct rt_arch {
    const char *name;           /* general.architecture */
    /* Fill hp from the file (hp->arch, n_vocab already set). */
    sb_status (*load_hparams)(const gguf_file *f, rt_hparams *hp);
    /* Record the forward graph (arch.h's rt_build); NULL = the shared dense decoder. */
    sb_status (*build)(struct rt_build *b);
} rt_arch;

struct rt_model {
    gguf_file file;
    const rt_arch *arch;
    rt_hparams hp;
    tok_vocab *vocab;
    uint64_t n_params, weight_bytes; /* over the weights the graph reads */
    /* of weight_bytes: the tables the graph only gathers rows of (gemma4's per-layer embeddings, an
     * untied token_embd): a step reads one row of each per token, never the whole table */
    uint64_t gather_bytes;
    uint64_t step_type_bytes[SB_TYPE_COUNT]; /* rt_model_step_bytes by weight type (a backend may store some types larger) */
    uint8_t *gathered;          /* [file.n_tensors]: 1 = only gathered (rt_model_prefetch skips it) */
    char path[1024];
};

typedef struct rt_model_params {
    bool check_tensors;         /* scan every weight for NaN/Inf at load (SB_ERR_MODEL_NAN); 1-D weights always are */
    /* NULL, or: read every page of the tensor data at load, reporting bytes done of total after
     * each tensor (last call done == total); nonzero cancels with SB_ERR_CANCELLED. */
    int (*progress)(void *user, uint64_t done, uint64_t total, const char *what);
    void *progress_user;
    bool no_mmap;               /* read the file into memory instead of mapping it */
} rt_model_params;

/* Read every page of f's tensor data once, in file order, calling p->progress after each tensor
 * (model_prefetch.c). SB_OK when p->progress is NULL (nothing read); SB_ERR_CANCELLED when the
 * callback returns nonzero. */
sb_status rt_model_prefetch(const gguf_file *f, const rt_model_params *p, const uint8_t *skip);

/* Bytes a decode step reads in full: the weights less the gathered tables. */
static inline uint64_t rt_model_step_bytes(const rt_model *m) { return m->weight_bytes - m->gather_bytes; }

sb_status rt_model_load(const char *path, const rt_model_params *p, rt_model **out);
void rt_model_free(rt_model *m);

/* The architecture table entry for a name, or NULL. */
const rt_arch *rt_arch_find(const char *name, size_t len);

#endif
