/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_model_validate.c — load-time validation of a model against nonsense: each case
 * rewrites a shared test model with one change (a key, a tensor added or poisoned, the vocabulary
 * cut) and asserts the status and the words of the one-line message. Hyperparameters against the
 * tensors (block_count both ways, head count vs width, vocabulary vs embedding rows, vocab_size),
 * ranges (epsilon, RoPE base and factor), MoE / non-causal / unknown tensors refused, NaN/Inf in
 * 1-D weights by default and in matrices with check_tensors, a vocabulary-only file, the missing
 * pre-tokenizer warning, NaN logits as SB_ERR_NUMERIC (session and generation), and n_ctx capped at
 * the trained context unless allowed (with a warning). Also: the unmodified files still load.
 */
#include "runtime/batch.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "format/gguf_write.h"
#include "test.h"
#include "tmp_dir.h"

#include <unistd.h>

/* One change to a model file. */
typedef struct edit {
    const char *key;        /* key to set ('u' u32, 'f' f32, 'b' bool) or remove ('r') */
    int kind;
    double num;
    const char *add_name;   /* add a copy of tensor add_from under this name */
    const char *add_from;
    const char *poke;       /* F32 tensor whose element poke_at becomes poke_val */
    int64_t poke_at;
    float poke_val;
    int64_t n_tokens;       /* > 0: keep only the first n_tokens entries of the vocabulary arrays */
} edit;

static int set_key(gguf_writer *w, const edit *e) {
    switch (e->kind) {
    case 'u': return gguf_writer_set_u32(w, e->key, (uint32_t)e->num) == SB_OK;
    case 'f': return gguf_writer_set_f32(w, e->key, (float)e->num) == SB_OK;
    case 'b': return gguf_writer_set_bool(w, e->key, e->num != 0) == SB_OK;
    case 'r': return gguf_writer_remove(w, e->key) == SB_OK;
    default: return 1;
    }
}

static int cut_vocab(gguf_writer *w, const gguf_file *f, int64_t n) {
    const gguf_kv *tk = gguf_find(f, "tokenizer.ggml.tokens"), *sc = gguf_find(f, "tokenizer.ggml.scores"),
                  *ty = gguf_find(f, "tokenizer.ggml.token_type");
    return tk && sc && ty && gguf_writer_set_str_array(w, tk->key, tk->strs, (uint64_t)n) == SB_OK &&
           gguf_writer_set_raw(w, sc->key, SB_GGUF_ARRAY, sc->elem_type, (uint64_t)n, sc->data) == SB_OK &&
           gguf_writer_set_raw(w, ty->key, SB_GGUF_ARRAY, ty->elem_type, (uint64_t)n, ty->data) == SB_OK;
}

/* Write src with edit e applied to tmp file `name`; returns its path or NULL. */
static const char *mutate(const char *src, const char *name, const edit *e) {
    gguf_file f;
    if (gguf_open(src, &f) != SB_OK) return NULL;
    gguf_writer *w;
    float *poked = NULL;
    int ok = gguf_writer_create(&w) == SB_OK;
    for (int64_t i = 0; ok && i < f.n_kv; i++) ok = gguf_writer_copy_kv(w, &f.kvs[i]) == SB_OK;
    ok = ok && set_key(w, e) && (e->n_tokens <= 0 || cut_vocab(w, &f, e->n_tokens));
    for (int64_t i = 0; ok && i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        const void *data = t->data;
        if (e->poke && !strcmp(t->name, e->poke)) {
            ok = t->type == SB_TYPE_F32 && (poked = (float *)malloc(t->nbytes)) != NULL;
            if (!ok) break;
            memcpy(poked, t->data, t->nbytes);
            poked[e->poke_at] = e->poke_val;
            data = poked;
        }
        ok = gguf_writer_add_tensor(w, t->name, t->type, 4, t->ne, data) == SB_OK;
        if (ok && e->add_from && !strcmp(t->name, e->add_from))
            ok = gguf_writer_add_tensor(w, e->add_name, t->type, 4, t->ne, t->data) == SB_OK;
    }
    const char *out = tmp_path(name);
    ok = ok && gguf_writer_write(w, out) == SB_OK;
    gguf_writer_free(w);
    free(poked);
    gguf_close(&f);
    return ok ? out : NULL;
}

/* Load src with edit e (check_tensors as given): the status must be want and the message hold every
 * needle (up to three). */
static void expect(const char *src, const edit *e, bool check, sb_status want, const char *n1, const char *n2, const char *n3) {
    const char *p = mutate(src, "m.gguf", e);
    CHECKF(p != NULL, "mutate %s", src);
    if (!p) return;
    rt_model *m = NULL;
    rt_model_params mp = {.check_tensors = check};
    sb_status s = rt_model_load(p, &mp, &m);
    const char *msg = sb_last_error();
    CHECKF(s == want && (s == SB_OK) == (m != NULL) && (!n1 || strstr(msg, n1)) && (!n2 || strstr(msg, n2)) && (!n3 || strstr(msg, n3)),
           "edit %s%s%s: want %s with \"%s\" \"%s\" \"%s\", got %s: %s", e->key ? e->key : "", e->add_name ? e->add_name : "",
           e->poke ? e->poke : "", sb_status_str(want), n1 ? n1 : "", n2 ? n2 : "", n3 ? n3 : "", sb_status_str(s), msg);
    rt_model_free(m);
    unlink(p);
}

// ---- log capture ----

static char logged[4096];
static void capture(sb_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == SB_LOG_WARN && strlen(logged) + strlen(msg) + 2 < sizeof logged) {
        strcat(logged, msg);
        strcat(logged, "\n");
    }
}

// ---- the cases ----

static void hparams(const char *qwen2, const char *llama, const char *gemma3) {
    /* the files as they are */
    expect(qwen2, &(edit){0}, true, SB_OK, NULL, NULL, NULL);
    expect(llama, &(edit){0}, true, SB_OK, NULL, NULL, NULL);
    expect(gemma3, &(edit){0}, true, SB_OK, NULL, NULL, NULL);
    /* block_count against the blk.N tensors, both ways */
    expect(qwen2, &(edit){.key = "qwen2.block_count", .kind = 'u', .num = 1}, false, SB_ERR_MODEL_HPARAM, "qwen2.block_count = 1",
           "layer 1", "blk.1.");
    expect(qwen2, &(edit){.key = "qwen2.block_count", .kind = 'u', .num = 3}, false, SB_ERR_MODEL_HPARAM, "qwen2.block_count = 3",
           "layers 0..1 only", NULL);
    /* ranges */
    expect(qwen2, &(edit){.key = "qwen2.attention.layer_norm_rms_epsilon", .kind = 'f', .num = -1}, false, SB_ERR_MODEL_HPARAM,
           "layer_norm_rms_epsilon = -1", "must be > 0", NULL);
    expect(qwen2, &(edit){.key = "qwen2.attention.layer_norm_rms_epsilon", .kind = 'f', .num = 0}, false, SB_ERR_MODEL_HPARAM,
           "layer_norm_rms_epsilon = 0", NULL, NULL);
    expect(qwen2, &(edit){.key = "qwen2.attention.layer_norm_rms_epsilon", .kind = 'f', .num = NAN}, false, SB_ERR_MODEL_HPARAM,
           "layer_norm_rms_epsilon", "not finite", NULL);
    expect(qwen2, &(edit){.key = "qwen2.rope.freq_base", .kind = 'f', .num = 0}, false, SB_ERR_MODEL_HPARAM, "rope.freq_base = 0",
           "must be > 0", NULL);
    expect(qwen2, &(edit){.key = "qwen2.rope.freq_base", .kind = 'f', .num = -10000}, false, SB_ERR_MODEL_HPARAM,
           "rope.freq_base = -10000", NULL, NULL);
    expect(llama, &(edit){.key = "llama.rope.scaling.factor", .kind = 'f', .num = 1e-44}, false, SB_ERR_MODEL_HPARAM,
           "rope.scaling.factor", "finite inverse", NULL);
    expect(gemma3, &(edit){.key = "gemma3.rope.freq_base_swa", .kind = 'f', .num = -1}, false, SB_ERR_MODEL_HPARAM,
           "rope.freq_base_swa = -1", NULL, NULL);
    expect(qwen2, &(edit){.key = "qwen2.context_length", .kind = 'u', .num = 0}, false, SB_ERR_MODEL_HPARAM, "context_length 0",
           NULL, NULL);
    /* head count against the width: 256 is not a multiple of 6 (and no key_length) */
    expect(qwen2, &(edit){.key = "qwen2.attention.head_count", .kind = 'u', .num = 6}, false, SB_ERR_MODEL_HPARAM,
           "embedding_length 256 is not a multiple of qwen2.attention.head_count 6", NULL, NULL);
    /* feed_forward_length against the shapes: the tensor, its shape and the expected one */
    expect(qwen2, &(edit){.key = "qwen2.feed_forward_length", .kind = 'u', .num = 512}, false, SB_ERR_MODEL_TENSOR_SHAPE,
           "ffn_gate.weight", "[256, 768, 1, 1]", "expected [256, 512]");
    /* vocabulary against the embedding rows, and <arch>.vocab_size */
    expect(qwen2, &(edit){.n_tokens = 100}, false, SB_ERR_MODEL_TENSOR_SHAPE, "tokenizer.ggml.tokens has 100 tokens",
           "token_embd.weight has 512 rows", NULL);
    expect(llama, &(edit){.key = "llama.vocab_size", .kind = 'u', .num = 1000}, false, SB_ERR_MODEL_HPARAM, "llama.vocab_size = 1000",
           "512 rows", NULL);
}

static void structure(const char *qwen2, const char *llama) {
    expect(qwen2, &(edit){.key = "qwen2.expert_count", .kind = 'u', .num = 8}, false, SB_ERR_UNSUPPORTED, "qwen2.expert_count = 8",
           "mixture-of-experts", NULL);
    expect(qwen2, &(edit){.add_name = "blk.0.ffn_gate_exps.weight", .add_from = "blk.0.ffn_gate.weight"}, false, SB_ERR_UNSUPPORTED,
           "blk.0.ffn_gate_exps.weight", "mixture-of-experts", NULL);
    expect(qwen2, &(edit){.key = "qwen2.attention.causal", .kind = 'b', .num = 0}, false, SB_ERR_UNSUPPORTED, "attention.causal = false",
           NULL, NULL);
    expect(qwen2, &(edit){.key = "qwen2.nextn_predict_layers", .kind = 'u', .num = 1}, false, SB_ERR_UNSUPPORTED,
           "nextn_predict_layers = 1", NULL, NULL);
    /* tensors the graph would ignore: a fused qkv beside q/k/v, an unknown global, an odd layer name */
    expect(qwen2, &(edit){.add_name = "blk.0.attn_qkv.weight", .add_from = "blk.0.attn_q.weight"}, false, SB_ERR_MODEL_TENSOR_EXTRA,
           "\"blk.0.attn_qkv.weight\"", "not used by the qwen2 graph", NULL);
    expect(qwen2, &(edit){.add_name = "cls_out.weight", .add_from = "output_norm.weight"}, false, SB_ERR_MODEL_TENSOR_EXTRA,
           "\"cls_out.weight\"", NULL, NULL);
    expect(llama, &(edit){.add_name = "blk.01.attn_norm.weight", .add_from = "blk.1.attn_norm.weight"}, false,
           SB_ERR_MODEL_TENSOR_EXTRA, "\"blk.01.attn_norm.weight\"", NULL, NULL);
    /* a vocabulary-only file */
    char voc[4096];
    snprintf(voc, sizeof voc, "%s", test_data_path("vocab/ggml-vocab-qwen2.gguf"));
    rt_model *m = NULL;
    sb_status s = rt_model_load(voc, NULL, &m);
    CHECKF(s == SB_ERR_MODEL_TENSOR_MISSING && m == NULL && strstr(sb_last_error(), "has a vocabulary but no weights") &&
           strstr(sb_last_error(), "token_embd.weight"), "%s: %s", sb_status_str(s), sb_last_error());
}

static void values(const char *qwen2, const char *llama) {
    /* 1-D tensors are scanned by default */
    expect(qwen2, &(edit){.poke = "blk.0.attn_norm.weight", .poke_at = 3, .poke_val = NAN}, false, SB_ERR_MODEL_NAN,
           "\"blk.0.attn_norm.weight\"", "NaN", "column 3");
    expect(qwen2, &(edit){.poke = "blk.1.attn_k.bias", .poke_at = 7, .poke_val = -INFINITY}, false, SB_ERR_MODEL_NAN,
           "\"blk.1.attn_k.bias\"", "-Inf", "column 7");
    expect(qwen2, &(edit){.poke = "output_norm.weight", .poke_at = 0, .poke_val = INFINITY}, false, SB_ERR_MODEL_NAN,
           "\"output_norm.weight\"", "+Inf", NULL);
    expect(llama, &(edit){.poke = "rope_freqs.weight", .poke_at = 2, .poke_val = 0}, false, SB_ERR_MODEL_NAN, "\"rope_freqs.weight\"",
           "must be > 0", "column 2");
    /* matrices: only with check_tensors (row and column named) */
    const edit big = {.poke = "blk.0.ffn_down.weight", .poke_at = 768 * 5 + 9, .poke_val = NAN};
    expect(qwen2, &big, true, SB_ERR_MODEL_NAN, "\"blk.0.ffn_down.weight\"", "row 5", "column 9");
    /* ... without it the model loads, and the NaN logits it computes are an error, never sampled */
    const char *p = mutate(qwen2, "nan.gguf", &big);
    rt_model *m = NULL;
    CHECK(p && rt_model_load(p, NULL, &m) == SB_OK);
    if (!m) return;
    rt_session *s;
    rt_session_params sp = {.n_ctx = 64, .n_threads = 2};
    CHECK(rt_session_create(m, &sp, &s) == SB_OK);
    const int32_t toks[4] = {1, 300, 301, 302};
    sb_status st = rt_session_eval(s, toks, 4, false, NULL);
    CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "NaN logits") && strstr(sb_last_error(), "position 3"), "%s: %s",
           sb_status_str(st), sb_last_error());
    CHECK(rt_session_n_cached(s) == 0 && rt_session_logits(s) == NULL);
    float *all = (float *)malloc(4 * 512 * sizeof *all);
    st = rt_session_eval(s, toks, 4, true, all);
    CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "position 0"), "%s: %s", sb_status_str(st), sb_last_error());
    free(all);
    rt_sampler *smp;
    CHECK(rt_sampler_create(NULL, 512, &smp) == SB_OK);
    rt_generate_params gp = {.n_predict = 4};
    rt_generate_result res;
    st = rt_generate(s, smp, toks, 4, &gp, NULL, NULL, &res);
    CHECKF(st == SB_ERR_NUMERIC && res.n_generated == 0, "generate: %s (%lld tokens): %s", sb_status_str(st),
           (long long)res.n_generated, sb_last_error());
    rt_sampler_free(smp);
    rt_session_free(s);
    /* the batched engine: a step whose rows hold NaN fails naming the first bad item, and changes
     * nothing (no sequence grows, no rows to read) */
    rt_engine *e = NULL;
    const rt_engine_params ep = {.n_seq_max = 2, .n_ctx = 64, .n_threads = 2, .kv_type = SB_TYPE_F32};
    CHECK(rt_engine_create(m, &ep, &e) == SB_OK);
    int32_t a = -1, b = -1;
    if (e && kv_pool_seq_open(rt_engine_pool(e), &a) == SB_OK && kv_pool_seq_open(rt_engine_pool(e), &b) == SB_OK) {
        const rt_batch_item items[5] = {{a, 1, false}, {a, 300, true}, {b, 301, false}, {b, 302, true}, {b, 303, true}};
        st = rt_engine_step(e, items, 5, NULL);
        CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "NaN logits (item 1, sequence 0, token 300"), "engine: %s: %s",
               sb_status_str(st), sb_last_error());
        int64_t nr = 7;
        CHECK(kv_pool_seq_len(rt_engine_pool(e), a) == 0 && kv_pool_seq_len(rt_engine_pool(e), b) == 0 && !rt_engine_logits(e, &nr) && nr == 0);
    }
    rt_engine_free(e);
    rt_model_free(m);
    unlink(p);
}

static void context_and_pre(const char *qwen2) {
    rt_model *m = NULL;
    CHECK(rt_model_load(qwen2, NULL, &m) == SB_OK);
    if (!m) return;
    rt_session *s = NULL;
    rt_session_params sp = {.n_ctx = 8192, .n_threads = 1};
    sb_status st = rt_session_create(m, &sp, &s);
    CHECKF(st == SB_ERR_INVALID_ARG && !s && strstr(sb_last_error(), "n_ctx 8192") && strstr(sb_last_error(), "4096") &&
           strstr(sb_last_error(), "qwen2.context_length"), "%s: %s", sb_status_str(st), sb_last_error());
    sp.n_ctx = 4096;
    CHECK(rt_session_create(m, &sp, &s) == SB_OK);
    rt_session_free(s);
    s = NULL;
    logged[0] = 0;
    sb_log_set(capture, NULL, SB_LOG_WARN);
    sp.n_ctx = 8192;
    sp.allow_ctx_extend = 1;
    CHECK(rt_session_create(m, &sp, &s) == SB_OK && rt_session_n_ctx(s) == 8192);
    CHECKF(strstr(logged, "n_ctx 8192 exceeds the model's trained context length 4096"), "logged: %s", logged);
    rt_session_free(s);
    rt_model_free(m);
    /* a BPE vocabulary without tokenizer.ggml.pre: the default, said at warn level */
    char voc[4096];
    snprintf(voc, sizeof voc, "%s", test_data_path("vocab/ggml-vocab-qwen2.gguf"));
    const char *p = mutate(voc, "nopre.gguf", &(edit){.key = "tokenizer.ggml.pre", .kind = 'r'});
    gguf_file f;
    tok_vocab *v = NULL;
    logged[0] = 0;
    CHECK(p && gguf_open(p, &f) == SB_OK);
    if (p) {
        CHECK(tok_vocab_load_gguf(&f, &v) == SB_OK);
        CHECKF(strstr(logged, "tokenizer.ggml.pre is missing") && strstr(logged, "\"default\""), "logged: %s", logged);
        tok_vocab_free(v);
        gguf_close(&f);
        unlink(p);
    }
    sb_log_set(NULL, NULL, SB_LOG_WARN);
}

int main(void) {
    char qwen2[4096], llama[4096], gemma3[4096];
    snprintf(qwen2, sizeof qwen2, "%s", test_data_path("models/test-qwen2-f32.gguf"));
    snprintf(llama, sizeof llama, "%s", test_data_path("models/test-llama-f32.gguf"));
    snprintf(gemma3, sizeof gemma3, "%s", test_data_path("models/test-gemma3-f32.gguf"));
    if (access(qwen2, R_OK) || access(llama, R_OK) || access(gemma3, R_OK)) {
        printf("SKIP: the shared test models are absent\n");
        return 77;
    }
    if (!tmp_dir_create("validate")) return 1;
    hparams(qwen2, llama, gemma3);
    structure(qwen2, llama);
    values(qwen2, llama);
    context_and_pre(qwen2);
    tmp_dir_remove();
    return test_summary();
}
