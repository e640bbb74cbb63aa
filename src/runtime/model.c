/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model.c — load a model: map and validate the GGUF, pick the architecture, read its
 * hyperparameters, load the tokenizer, then build the graph once to bind every weight it needs by
 * name, shape and type (so a bad file fails here, with the tensor named, not at the first token).
 * Layer 2 (runtime).
 */
#include "runtime/model.h"
#include "runtime/arch/arch.h"
#include "base/file_io.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const rt_arch archs[] = {
    {"qwen2", rt_arch_qwen2_hparams},
    {"qwen3", rt_arch_qwen3_hparams},
    {"llama", rt_arch_llama_hparams},
    {"gemma3", rt_arch_gemma3_hparams},
};

const rt_arch *rt_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strlen(archs[i].name) == len && !memcmp(archs[i].name, name, len)) return &archs[i];
    return NULL;
}

typedef struct scan_job {
    const gguf_tensor *t;
    float *buf; /* one row of floats */
} scan_job;

/* NaN/Inf scan of one weight, row by row through its dequantizer (run under fio_guarded: it reads
 * the whole mapping, so a file truncated meanwhile fails as SB_ERR_IO, not SIGBUS). */
static sb_status scan_rows(void *ctx) {
    const gguf_tensor *t = ((scan_job *)ctx)->t;
    float *buf = ((scan_job *)ctx)->buf;
    const qk_traits *tr = qk_get(t->type);
    int64_t n = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t rb;
    if (qk_row_bytes(t->type, n, &rb)) return sb_fail(SB_ERR_INTERNAL, "scan: row bytes of %s", t->name);
    sb_status s = SB_OK;
    for (int64_t r = 0; r < rows && s == SB_OK; r++) {
        tr->to_float(t->data + r * rb, buf, n);
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(buf[i])) {
                s = sb_fail(SB_ERR_MODEL_NAN, "model: tensor \"%s\" holds %s at row %lld, column %lld", t->name,
                            isnan(buf[i]) ? "NaN" : "Inf", (long long)r, (long long)i);
                break;
            }
    }
    return s;
}

static sb_status scan_tensor(const gguf_file *f, const char *path, const gguf_tensor *t) {
    scan_job j = {t, (float *)malloc((size_t)t->ne[0] * sizeof(float))};
    if (!j.buf) return sb_fail(SB_ERR_OOM, "scan: %lld floats", (long long)t->ne[0]);
    sb_status s = f->heap ? scan_rows(&j) : fio_guarded(path, f->map, f->map_size, scan_rows, &j);
    free(j.buf);
    return s;
}

/* Build the decode graph once: binds and checks every weight, and sums what the graph reads. */
static sb_status bind_weights(rt_model *m, const rt_model_params *p) {
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    rt_build b = {.g = g, .m = m, .T = 1, .n_out = 1, .n_ctx = 1, .kv_type = SB_TYPE_F32};
    sb_status s = rt_build_decoder(&b);
    for (int32_t i = 0; s == SB_OK && i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_WEIGHT) continue;
        int dup = 0;
        for (int32_t j = 0; j < i && !dup; j++)
            dup = g->nodes[j].op == IR_OP_WEIGHT && !strcmp(g->nodes[j].name, n->name);
        if (dup) continue;
        const gguf_tensor *t = gguf_find_tensor(&m->file, n->name);
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        m->weight_bytes += t->nbytes;
        if (p && p->check_tensors) s = scan_tensor(&m->file, m->path, t);
    }
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
        if (s != SB_OK) s = sb_fail(SB_ERR_MODEL_ARCH, "%s: no general.architecture string: %s", path, sb_last_error());
    }
    if (s == SB_OK) {
        m->arch = rt_arch_find(arch.ptr, arch.len);
        if (!m->arch)
            s = sb_fail(SB_ERR_MODEL_ARCH, "%s: architecture \"%.*s\" is not supported (qwen2, qwen3, llama, gemma3)", path,
                        (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    }
    if (s == SB_OK) {
        snprintf(m->hp.arch, sizeof m->hp.arch, "%s", m->arch->name);
        const gguf_tensor *emb = gguf_find_tensor(&m->file, "token_embd.weight");
        if (!emb) s = sb_fail(SB_ERR_MODEL_TENSOR_MISSING, "%s: tensor \"token_embd.weight\" is missing", path);
        else m->hp.n_vocab = emb->ne[1];
    }
    if (s == SB_OK) s = m->arch->load_hparams(&m->file, &m->hp);
    if (s == SB_OK) s = tok_vocab_load_gguf(&m->file, &m->vocab);
    if (s == SB_OK && tok_n_tokens(m->vocab) > m->hp.n_vocab)
        s = sb_fail(SB_ERR_MODEL_TENSOR_SHAPE, "%s: the tokenizer has %d tokens but token_embd.weight only %lld rows", path,
                    tok_n_tokens(m->vocab), (long long)m->hp.n_vocab);
    if (s == SB_OK) s = bind_weights(m, p);
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
