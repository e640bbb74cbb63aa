/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model.c — load a model: map and validate the GGUF, pick the architecture, read its
 * hyperparameters, load the tokenizer, then build the graph once to bind every weight it needs by
 * name, shape and type (so a bad file fails here, with the tensor named, not at the first token).
 * Layer 2 (runtime).
 */
#include "runtime/model.h"
#include "runtime/arch/arch.h"
#include "runtime/model_check.h"
#include "base/file_io.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rt_arch archs[] = {
    {"qwen2", rt_arch_qwen2_hparams, NULL},
    {"qwen3", rt_arch_qwen3_hparams, NULL},
    {"llama", rt_arch_llama_hparams, NULL},
    {"gemma3", rt_arch_gemma3_hparams, NULL},
    {"gemma4", rt_arch_gemma4_hparams, rt_build_gemma4},
};

const rt_arch *rt_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i].name) == len && !memcmp(archs[i].name, name, len)) return &archs[i];
    return NULL;
}

/* The NaN/Inf scan of one weight (model_check.c) reads its whole mapping: under fio_guarded, so a
 * file truncated meanwhile fails as SB_ERR_IO, not SIGBUS (the scan's one-row buffer is lost then). */
static sb_status check_values_cb(void *t) { return rt_check_values((const gguf_tensor *)t); }

/* The load-progress prefetch touches every page of the mapping: under fio_guarded too. */
typedef struct prefetch_job {
    const gguf_file *f;
    const rt_model_params *p;
} prefetch_job;

static sb_status prefetch_cb(void *ctx) { return rt_model_prefetch(((prefetch_job *)ctx)->f, ((prefetch_job *)ctx)->p); }

static sb_status prefetch(const gguf_file *f, const char *path, const rt_model_params *p) {
    prefetch_job j = {f, p};
    return f->heap ? prefetch_cb(&j) : fio_guarded(path, f->map, f->map_size, prefetch_cb, &j);
}

static sb_status check_values(const gguf_file *f, const char *path, const gguf_tensor *t) {
    return f->heap ? rt_check_values(t) : fio_guarded(path, f->map, f->map_size, check_values_cb, (void *)t);
}

/* Build the decode graph once: binds and checks every weight, sums what the graph reads, scans
 * 1-D weights (norms, biases, rope factors: cheap) or, with check_tensors, every weight for NaN/Inf,
 * and refuses tensors of the file that the graph does not read. */
static sb_status bind_weights(rt_model *m, const rt_model_params *p) {
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    uint8_t *bound = (uint8_t *)calloc((size_t)(m->file.n_tensors ? m->file.n_tensors : 1), 1);
    if (!bound) {
        ir_graph_free(g);
        return sb_fail(SB_ERR_OOM, "model: %lld tensor flags", (long long)m->file.n_tensors);
    }
    rt_build b = {.g = g, .m = m, .T = 1, .n_out = 1, .n_ctx = 1, .kv_type = SB_TYPE_F32};
    sb_status s = rt_build_decoder(&b);
    for (int32_t i = 0; s == SB_OK && i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_WEIGHT) continue;
        const gguf_tensor *t = gguf_find_tensor(&m->file, n->name);
        if (bound[t - m->file.tensors]) continue; /* the same weight read twice (tied embeddings) */
        bound[t - m->file.tensors] = 1;
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        m->weight_bytes += t->nbytes;
        if ((p && p->check_tensors) || rt_tensor_is_1d(t)) s = check_values(&m->file, m->path, t);
    }
    if (s == SB_OK) s = rt_check_unused(&m->file, bound, m->hp.arch, m->path);
    free(bound);
    ir_graph_free(g);
    return s;
}

sb_status rt_model_load(const char *path, const rt_model_params *p, rt_model **out) {
    *out = NULL;
    rt_model *m = (rt_model *)calloc(1, sizeof *m);
    if (!m) return sb_fail(SB_ERR_OOM, "model struct");
    snprintf(m->path, sizeof m->path, "%s", path);
    sb_status s = gguf_open_ex(path, p && p->no_mmap, &m->file);
    sb_strview arch = {0};
    if (s == SB_OK) {
        s = gguf_get_str(&m->file, "general.architecture", &arch);
        if (s != SB_OK) s = sb_fail_context(SB_ERR_MODEL_ARCH, "%s: no general.architecture string", path);
    }
    if (s == SB_OK) {
        m->arch = rt_arch_find(arch.ptr, arch.len);
        if (!m->arch)
            s = sb_fail(SB_ERR_MODEL_ARCH, "%s: architecture \"%.*s\" is not supported (qwen2, qwen3, llama, gemma3, gemma4)", path,
                        (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    }
    if (s == SB_OK) {
        snprintf(m->hp.arch, sizeof m->hp.arch, "%s", m->arch->name);
        s = rt_check_unsupported(&m->file, m->hp.arch, path);
    }
    if (s == SB_OK) {
        const gguf_tensor *emb = gguf_find_tensor(&m->file, "token_embd.weight");
        if (!emb && m->file.n_tensors == 0 && gguf_find(&m->file, "tokenizer.ggml.tokens"))
            s = sb_fail(SB_ERR_MODEL_TENSOR_MISSING, "%s has a vocabulary but no weights (tensor \"token_embd.weight\" is missing; "
                        "a vocabulary-only file?)", path);
        else if (!emb) s = sb_fail(SB_ERR_MODEL_TENSOR_MISSING, "%s: tensor \"token_embd.weight\" is missing", path);
        else m->hp.n_vocab = emb->ne[1];
    }
    if (s == SB_OK) s = m->arch->load_hparams(&m->file, &m->hp);
    if (s == SB_OK) s = rt_check_layers(&m->file, &m->hp, path);
    if (s == SB_OK) s = tok_vocab_load_gguf(&m->file, &m->vocab);
    if (s == SB_OK && tok_n_tokens(m->vocab) != m->hp.n_vocab)
        s = sb_fail(SB_ERR_MODEL_TENSOR_SHAPE, "model: %s: tokenizer.ggml.tokens has %d tokens but token_embd.weight has %lld rows "
                    "(they must be equal: row i is token i)", path, tok_n_tokens(m->vocab), (long long)m->hp.n_vocab);
    if (s == SB_OK) s = bind_weights(m, p);
    if (s == SB_OK && p && p->progress) s = prefetch(&m->file, path, p);
    if (s != SB_OK) {
        rt_model_free(m);
        return s;
    }
    *out = m;
    return SB_OK;
}

void rt_model_free(rt_model *m) {
    if (!m) return;
    tok_vocab_free(m->vocab);
    gguf_close(&m->file);
    free(m);
}
