/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model.h — a loaded model: the mapped GGUF file, its architecture, hyperparameters and
 * tokenizer, with every weight the architecture needs bound and checked by name, shape and type.
 * Layer 2 (runtime). A model is immutable after rt_model_load and shared read-only by any number of
 * sessions on any threads. Weights stay in the read-only mapping (no copy, no conversion: a model
 * keeps the types its file has), or with no_mmap in a heap copy of the file. Sessions re-check the
 * mapped file's size (gguf_check_size) when created and before each evaluation.
 * Non-goals: MoE, multimodal towers, gemma4 (its own builder later).
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
} rt_hparams;

typedef struct rt_model rt_model;

typedef struct rt_arch {
    const char *name;           /* general.architecture */
    /* Fill hp from the file (hp->arch, n_vocab already set). */
    sb_status (*load_hparams)(const gguf_file *f, rt_hparams *hp);
} rt_arch;

struct rt_model {
    gguf_file file;
    const rt_arch *arch;
    rt_hparams hp;
    tok_vocab *vocab;
    uint64_t n_params, weight_bytes; /* over the weights the graph reads */
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
sb_status rt_model_prefetch(const gguf_file *f, const rt_model_params *p);

sb_status rt_model_load(const char *path, const rt_model_params *p, rt_model **out);
void rt_model_free(rt_model *m);

/* The architecture table entry for a name, or NULL. */
const rt_arch *rt_arch_find(const char *name, size_t len);

#endif
