/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model.c — load a model: map and validate the GGUF, pick the architecture, read its
 * hyperparameters, load the tokenizer, then build the graph once to bind every weight it needs by
 * name, shape and type (so a bad file fails here, with the tensor named, not at the first token).
 * Layer 2 (runtime).
 */
#define _DEFAULT_SOURCE /* madvise, MADV_RANDOM */
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
#include <sys/mman.h>
#include <unistd.h>

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
    const uint8_t *skip;
} prefetch_job;

static sb_status prefetch_cb(void *ctx) {
    const prefetch_job *j = ctx;
    return rt_model_prefetch(j->f, j->p, j->skip);
}

static sb_status prefetch(const gguf_file *f, const char *path, const rt_model_params *p, const uint8_t *skip) {
    prefetch_job j = {f, p, skip};
    return f->heap ? prefetch_cb(&j) : fio_guarded(path, f->map, f->map_size, prefetch_cb, &j);
}

static sb_status check_values(const gguf_file *f, const char *path, const gguf_tensor *t) {
    return f->heap ? rt_check_values(t) : fio_guarded(path, f->map, f->map_size, check_values_cb, (void *)t);
}

/* Build the decode graph once: binds and checks every weight, sums what the graph reads, scans
 * 1-D weights (norms, biases, rope factors: cheap) or, with check_tensors, every weight for NaN/Inf,
 * and refuses tensors of the file that the graph does not read. A weight whose every reader is a
 * get_rows of it (an embedding table: gemma4's per-layer one, an untied token_embd) is "gathered":
 * its bytes also go to gather_bytes, and m->gathered marks it for the prefetch and madvise. */
static sb_status bind_weights(rt_model *m, const rt_model_params *p) {
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    const size_t nt = (size_t)(m->file.n_tensors ? m->file.n_tensors : 1);
    uint8_t *bound = (uint8_t *)calloc(nt, 1), *full = (uint8_t *)calloc(nt, 1);
    m->gathered = (uint8_t *)calloc(nt, 1);
    if (!bound || !full || !m->gathered) {
        free(bound);
        free(full);
        ir_graph_free(g);
        return sb_fail(SB_ERR_OOM, "model: %lld tensor flags", (long long)m->file.n_tensors);
    }
    rt_build b = {.g = g, .m = m, .T = 1, .n_out = 1, .n_ctx = 1, .kv_type = SB_TYPE_F32};
    sb_status s = rt_build_decoder(&b);
    for (int32_t i = 0; s == SB_OK && i < g->n_nodes; i++) { /* which weights something other than get_rows(w, .) reads */
        const ir_node *n = &g->nodes[i];
        for (int j = 0; j < IR_MAX_SRC; j++) {
            if (n->src[j] == IR_NONE || g->nodes[n->src[j]].op != IR_OP_WEIGHT || (n->op == IR_OP_GET_ROWS && j == 0)) continue;
            full[gguf_find_tensor(&m->file, g->nodes[n->src[j]].name) - m->file.tensors] = 1;
        }
    }
    for (int32_t i = 0; s == SB_OK && i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_WEIGHT) continue;
        const gguf_tensor *t = gguf_find_tensor(&m->file, n->name);
        const size_t ti = (size_t)(t - m->file.tensors);
        if (bound[ti]) continue; /* the same weight read twice (tied embeddings) */
        bound[ti] = 1;
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        m->weight_bytes += t->nbytes;
        if (!full[ti]) {
            m->gathered[ti] = 1;
            m->gather_bytes += t->nbytes;
        } else if (t->type >= 0 && t->type < SB_TYPE_COUNT) {
            m->step_type_bytes[t->type] += t->nbytes;
        }
        if ((p && p->check_tensors) || rt_tensor_is_1d(t)) s = check_values(&m->file, m->path, t);
    }
    if (s == SB_OK) s = rt_check_unused(&m->file, bound, m->hp.arch, m->path);
    free(bound);
    free(full);
    ir_graph_free(g);
    return s;
}

/* Gathered tables are read a row at a time in token order: tell the kernel not to read ahead
 * around each row (128 KiB per fault by default, ~18 rows of E2B's per-layer table for one). */
static void advise_gathered(const rt_model *m) {
    if (m->file.heap || !m->file.map) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int64_t i = 0; i < m->file.n_tensors; i++) {
        const gguf_tensor *t = &m->file.tensors[i];
        if (!m->gathered[i] || t->nbytes < 16 * pg) continue;
        const uintptr_t a = ((uintptr_t)t->data + pg - 1) & ~(pg - 1), e = ((uintptr_t)t->data + t->nbytes) & ~(pg - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_RANDOM); /* advice only: a failure changes no result */
    }
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
    if (s == SB_OK) advise_gathered(m);
    if (s == SB_OK && p && p->progress) s = prefetch(&m->file, path, p, m->gathered);
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
    free(m->gathered);
    free(m);
}
