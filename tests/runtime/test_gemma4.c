/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_gemma4.c — the gemma4 architecture beyond test_model_refs' logits: each case
 * rewrites shared/testdata/models/test-gemma4-f32.gguf with one change and checks the result.
 *  - refusals: inconsistent keys and tensors fail at load with their SB_ERR_MODEL_* status (or
 *    SB_ERR_UNSUPPORTED naming "mixture-of-experts" for any one of 26B-A4B's MoE keys or expert
 *    tensors) and a message naming the key, layer or tensor;
 *  - equivalences that prove the optional parts are wired: per-layer arrays for head counts and FFN
 *    widths holding the scalar values give the same logits bit for bit; a layer without attn_v
 *    (V := K) equals one whose attn_v holds attn_k's weights; layer_output_scale 1 changes nothing,
 *    2 on the last layer almost nothing (the output norm is scale-invariant up to eps), 2 on layer 2
 *    a lot;
 *  - structure: shared-KV layers own no cache (rt_hp_kv_dim 0, no kv input in the graph, they read
 *    the cache of layer K-2 / K-1), and the PLE table is read by one get_rows only;
 *  - chat: Gemma 4's vocabulary ends generation at <eos>, <turn|> and <|tool_response> only, and its
 *    template is recognised (tests/api/cli_run_chat_gemma4.sh runs sb run --chat on such a model).
 * Skips (77) when the shared test models are absent.
 */
#include "runtime/arch/arch.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "format/gguf_write.h"
#include "test.h"
#include "tmp_dir.h"

#include <math.h>
#include <unistd.h>

/* One change to the model file. */
typedef struct g4edit {
    const char *key;        /* 'u' u32, 'f' f32, 'r' remove, 'a' u32 array of n values all = num */
    int kind;
    double num;
    int n;
    const char *drop;       /* leave this tensor out */
    const char *data_to;    /* write data_from's data under data_to's (existing) name */
    const char *data_from;
    const char *add;        /* add an F32 [add_ne0] tensor filled with add_val */
    int64_t add_ne0;
    float add_val;
} g4edit;

static int set_key(gguf_writer *w, const g4edit *e) {
    uint32_t arr[64];
    switch (e->kind) {
    case 'u': return gguf_writer_set_u32(w, e->key, (uint32_t)e->num) == SB_OK;
    case 'f': return gguf_writer_set_f32(w, e->key, (float)e->num) == SB_OK;
    case 'r': return gguf_writer_remove(w, e->key) == SB_OK;
    case 'a':
        for (int i = 0; i < e->n && i < 64; i++) arr[i] = (uint32_t)e->num;
        return gguf_writer_set_raw(w, e->key, SB_GGUF_ARRAY, SB_GGUF_UINT32, (uint64_t)e->n, arr) == SB_OK;
    default: return 1;
    }
}

static const char *mutate(const char *src, const char *name, const g4edit *e) {
    gguf_file f;
    if (gguf_open(src, &f) != SB_OK) return NULL;
    gguf_writer *w;
    int ok = gguf_writer_create(&w) == SB_OK;
    for (int64_t i = 0; ok && i < f.n_kv; i++) ok = gguf_writer_copy_kv(w, &f.kvs[i]) == SB_OK;
    ok = ok && set_key(w, e);
    const gguf_tensor *from = e->data_from ? gguf_find_tensor(&f, e->data_from) : NULL;
    float *added = NULL;
    for (int64_t i = 0; ok && i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (e->drop && !strcmp(t->name, e->drop)) continue;
        const void *data = e->data_to && !strcmp(t->name, e->data_to) && from ? from->data : t->data;
        ok = gguf_writer_add_tensor(w, t->name, t->type, 4, t->ne, data) == SB_OK;
    }
    if (ok && e->add) {
        added = (float *)malloc((size_t)e->add_ne0 * sizeof *added);
        for (int64_t i = 0; added && i < e->add_ne0; i++) added[i] = e->add_val;
        ok = added && gguf_writer_add_tensor(w, e->add, SB_TYPE_F32, 1, (int64_t[4]){e->add_ne0, 1, 1, 1}, added) == SB_OK;
    }
    const char *out = tmp_path(name);
    ok = ok && gguf_writer_write(w, out) == SB_OK;
    gguf_writer_free(w);
    free(added);
    gguf_close(&f);
    return ok ? out : NULL;
}

/* Loading src with edit e gives status want and a message holding n1 and n2 (when not NULL). */
static void refused(const char *src, const g4edit *e, sb_status want, const char *n1, const char *n2) {
    const char *p = mutate(src, "bad.gguf", e);
    CHECKF(p != NULL, "mutate %s", e->key ? e->key : e->drop ? e->drop : "?");
    if (!p) return;
    rt_model *m = NULL;
    sb_status s = rt_model_load(p, NULL, &m);
    const char *msg = sb_last_error();
    CHECKF(s == want && !m && (!n1 || strstr(msg, n1)) && (!n2 || strstr(msg, n2)), "edit %s%s%s: want %s with \"%s\" \"%s\", got %s: %s",
           e->key ? e->key : "", e->drop ? e->drop : "", e->add ? e->add : "", sb_status_str(want), n1 ? n1 : "", n2 ? n2 : "",
           sb_status_str(s), msg);
    rt_model_free(m);
    unlink(p);
}

static void refusals(const char *src) {
    const char *shared = "gemma4.attention.shared_kv_layers";
    refused(src, &(g4edit){.key = shared, .kind = 'u', .num = 8}, SB_ERR_MODEL_HPARAM, "shared_kv_layers = 8", "leaves no layer");
    refused(src, &(g4edit){.key = shared, .kind = 'u', .num = 7}, SB_ERR_MODEL_HPARAM, "layer 1 (sliding) shares the KV of layer -1",
            "does not exist");
    refused(src, &(g4edit){.key = shared, .kind = 'u', .num = 6}, SB_ERR_MODEL_HPARAM, "layer 3 (global) shares the KV of layer 1",
            "is sliding");
    refused(src, &(g4edit){.key = shared, .kind = 'u', .num = 3}, SB_ERR_MODEL_HPARAM, "layer 5 (sliding) shares the KV of layer 3",
            "is global");
    refused(src, &(g4edit){.key = shared, .kind = 'u', .num = 0}, SB_ERR_MODEL_TENSOR_MISSING, "blk.4.attn_k.weight", NULL);
    refused(src, &(g4edit){.key = "gemma4.attention.sliding_window_pattern", .kind = 'r'}, SB_ERR_MODEL_HPARAM,
            "gemma4.attention.sliding_window_pattern", "missing");
    refused(src, &(g4edit){.key = "gemma4.attention.sliding_window_pattern", .kind = 'u', .num = 6}, SB_ERR_MODEL_HPARAM,
            "sliding_window_pattern must be 8 bools", NULL);
    refused(src, &(g4edit){.key = "gemma4.attention.sliding_window", .kind = 'u', .num = 0}, SB_ERR_MODEL_HPARAM,
            "sliding_window = 0", NULL);
    refused(src, &(g4edit){.key = "gemma4.attention.value_length_swa", .kind = 'u', .num = 32}, SB_ERR_MODEL_HPARAM,
            "key_length_swa 64 and value_length_swa 32", NULL);
    refused(src, &(g4edit){.key = "gemma4.attention.key_length_swa", .kind = 'r'}, SB_ERR_MODEL_HPARAM,
            "gemma4.attention.key_length_swa", "missing");
    refused(src, &(g4edit){.key = "gemma4.rope.dimension_count_swa", .kind = 'u', .num = 65}, SB_ERR_MODEL_HPARAM,
            "dimension_count_swa = 65", NULL);
    refused(src, &(g4edit){.key = "gemma4.embedding_length_per_layer_input", .kind = 'u', .num = 0}, SB_ERR_MODEL_TENSOR_EXTRA,
            "per_layer_token_embd.weight", "not used by the gemma4 graph");
    refused(src, &(g4edit){.key = "gemma4.embedding_length_per_layer_input", .kind = 'u', .num = 16}, SB_ERR_MODEL_TENSOR_SHAPE,
            "per_layer_token_embd.weight", "expected [128, 512]");
    refused(src, &(g4edit){.key = "gemma4.attention.head_count_kv", .kind = 'u', .num = 3}, SB_ERR_MODEL_HPARAM,
            "head_count_kv 3 are inconsistent", NULL);
    refused(src, &(g4edit){.key = "gemma4.attention.head_count", .kind = 'a', .num = 4, .n = 7}, SB_ERR_MODEL_HPARAM,
            "gemma4.attention.head_count", "7 values for 8 layers");
    refused(src, &(g4edit){.key = "gemma4.expert_count", .kind = 'u', .num = 4}, SB_ERR_UNSUPPORTED, "mixture-of-experts", NULL);
    /* Gemma 4 26B-A4B (architectures.md 6.8): its keys and expert tensors, each alone, name the feature */
    refused(src, &(g4edit){.key = "gemma4.expert_used_count", .kind = 'u', .num = 8}, SB_ERR_UNSUPPORTED, "expert_used_count = 8",
            "mixture-of-experts");
    refused(src, &(g4edit){.add = "blk.0.ffn_gate_inp.weight", .add_ne0 = 256, .add_val = 1}, SB_ERR_UNSUPPORTED,
            "blk.0.ffn_gate_inp.weight", "mixture-of-experts");
    refused(src, &(g4edit){.add = "blk.3.ffn_gate_up_exps.weight", .add_ne0 = 256, .add_val = 1}, SB_ERR_UNSUPPORTED,
            "blk.3.ffn_gate_up_exps.weight", "mixture-of-experts");
    refused(src, &(g4edit){.add = "blk.1.ffn_down_exps.scale", .add_ne0 = 4, .add_val = 1}, SB_ERR_UNSUPPORTED,
            "blk.1.ffn_down_exps.scale", "mixture-of-experts");
    refused(src, &(g4edit){.drop = "rope_freqs.weight"}, SB_ERR_MODEL_TENSOR_MISSING, "rope_freqs.weight", NULL);
    refused(src, &(g4edit){.drop = "blk.3.attn_k_norm.weight"}, SB_ERR_MODEL_TENSOR_MISSING, "blk.3.attn_k_norm.weight", NULL);
    refused(src, &(g4edit){.drop = "per_layer_proj_norm.weight"}, SB_ERR_MODEL_TENSOR_MISSING, "per_layer_proj_norm.weight", NULL);
    refused(src, &(g4edit){.add = "blk.0.layer_output_scale.weight", .add_ne0 = 2, .add_val = 1}, SB_ERR_MODEL_TENSOR_SHAPE,
            "blk.0.layer_output_scale.weight", "expected [1, 1]");
    refused(src, &(g4edit){.add = "blk.5.attn_k.weight", .add_ne0 = 256, .add_val = 1}, SB_ERR_MODEL_TENSOR_EXTRA,
            "blk.5.attn_k.weight", "not used");
}

// ---- logits of edited files ----

enum { NTOK = 20 };
static const int32_t toks[NTOK] = {1, 492, 55, 287, 81, 137, 376, 190, 487, 116, 160, 497, 138, 283, 317, 507, 132, 157, 68, 224};

/* The logits of every position of toks for src with edit e (NULL: unchanged), malloc'd; NULL on failure. */
static float *logits_of(const char *src, const g4edit *e, int64_t *V) {
    const char *p = e ? mutate(src, "eq.gguf", e) : src;
    rt_model *m = NULL;
    rt_session *s = NULL;
    float *out = NULL;
    if (p && rt_model_load(p, NULL, &m) == SB_OK && rt_session_create(m, &(rt_session_params){.n_ctx = 64, .n_threads = 2}, &s) == SB_OK) {
        *V = m->hp.n_vocab;
        out = (float *)malloc((size_t)(NTOK * *V) * sizeof *out);
        if (out && rt_session_eval(s, toks, NTOK, true, out) != SB_OK) {
            free(out);
            out = NULL;
        }
    }
    if (!out) printf("logits_of %s: %s\n", e && e->key ? e->key : "file", sb_last_error());
    rt_session_free(s);
    rt_model_free(m);
    if (e && p) unlink(p);
    return out;
}

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return den > 0 ? num / den : INFINITY;
}

static void equivalences(const char *src) {
    int64_t V = 0;
    float *base = logits_of(src, NULL, &V);
    CHECK(base != NULL);
    if (!base) return;
    const int64_t n = NTOK * V;
    struct {
        g4edit e;
        double lo, hi; /* want lo <= NMSE vs base <= hi */
    } cases[] = {
        {{.key = "gemma4.feed_forward_length", .kind = 'a', .num = 512, .n = 8}, 0, 0},
        {{.key = "gemma4.attention.head_count", .kind = 'a', .num = 4, .n = 8}, 0, 0},
        {{.key = "gemma4.attention.head_count_kv", .kind = 'a', .num = 2, .n = 8}, 0, 0},
        {{.add = "blk.2.layer_output_scale.weight", .add_ne0 = 1, .add_val = 1.0f}, 0, 0},
        {{.add = "blk.7.layer_output_scale.weight", .add_ne0 = 1, .add_val = 2.0f}, 0, 1e-10},
        {{.add = "blk.2.layer_output_scale.weight", .add_ne0 = 1, .add_val = 2.0f}, 1e-4, INFINITY},
        {{.data_to = "blk.0.attn_v.weight", .data_from = "blk.0.attn_k.weight"}, 1e-4, INFINITY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float *l = logits_of(src, &cases[i].e, &V);
        CHECKF(l != NULL, "case %zu", i);
        if (!l) continue;
        const double d = nmse(l, base, n);
        CHECKF(d >= cases[i].lo && d <= cases[i].hi, "case %zu (%s%s%s): NMSE vs the file %.3e, want [%.0e, %.0e]", i,
               cases[i].e.key ? cases[i].e.key : "", cases[i].e.add ? cases[i].e.add : "", cases[i].e.data_to ? cases[i].e.data_to : "",
               d, cases[i].lo, cases[i].hi);
        free(l);
    }
    /* no attn_v: V := K, the same as an attn_v holding attn_k's weights */
    float *same = logits_of(src, &(g4edit){.data_to = "blk.0.attn_v.weight", .data_from = "blk.0.attn_k.weight"}, &V);
    float *none = logits_of(src, &(g4edit){.drop = "blk.0.attn_v.weight"}, &V);
    CHECK(same && none);
    if (same && none) CHECKF(nmse(none, same, n) == 0, "V := K: NMSE %.3e against attn_v = attn_k", nmse(none, same, n));
    free(same);
    free(none);
    free(base);
}

// ---- structure ----

static void structure(const char *src) {
    rt_model *m = NULL;
    CHECK(rt_model_load(src, NULL, &m) == SB_OK);
    if (!m) return;
    const rt_hparams *hp = &m->hp;
    const int64_t kv_dim[8] = {128, 128, 128, 256, 0, 0, 0, 0}, kv_layer[8] = {0, 1, 2, 3, 2, 2, 2, 3};
    CHECK_EQ_INT(hp->n_layer, 8);
    CHECK_EQ_INT(hp->n_layer_kv, 4);
    for (int64_t l = 0; l < 8 && hp->n_layer == 8; l++) {
        CHECKF(rt_hp_kv_dim(hp, l) == kv_dim[l], "layer %lld: kv dim %lld", (long long)l, (long long)rt_hp_kv_dim(hp, l));
        CHECKF(rt_hp_kv_layer(hp, l) == kv_layer[l], "layer %lld: reads layer %lld's cache", (long long)l, (long long)rt_hp_kv_layer(hp, l));
    }
    ir_graph *g;
    CHECK(ir_graph_create(&g) == SB_OK);
    rt_build b = {.g = g, .m = m, .T = 3, .n_out = 3, .n_ctx = 16, .kv_type = SB_TYPE_F32};
    CHECK(rt_build_decoder(&b) == SB_OK);
    int kv = 0, ple_uses = 0, ple_rows = 0, slices = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        if (nd->op == IR_OP_KV) {
            long long l = -1;
            CHECKF(sscanf(nd->name, "cache_%*c.%lld", &l) == 1 && l >= 0 && l < 4, "kv input \"%s\"", nd->name);
            kv++;
        }
        slices += nd->op == IR_OP_SLICE;
        for (int j = 0; j < IR_MAX_SRC && nd->src[j] != IR_NONE; j++)
            if (g->nodes[nd->src[j]].op == IR_OP_WEIGHT && !strcmp(g->nodes[nd->src[j]].name, "per_layer_token_embd.weight"))
                ple_uses++, ple_rows += nd->op == IR_OP_GET_ROWS;
    }
    CHECK_EQ_INT(kv, 8);             /* K and V of layers 0..3 only */
    CHECK_EQ_INT(slices, 8);         /* one PLE slice per layer */
    CHECK(ple_uses == 1 && ple_rows == 1); /* the table is only gathered */
    ir_graph_free(g);
    rt_model_free(m);
}

// ---- chat: the end-of-generation set of Gemma 4's vocabulary ----

static void eog(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s", test_data_path("vocab/ggml-vocab-gemma-4.gguf"));
    gguf_file f;
    if (access(path, R_OK) || gguf_open(path, &f) != SB_OK) {
        printf("SKIP eog: %s absent\n", path);
        return;
    }
    tok_vocab *v = NULL;
    CHECK(tok_vocab_load_gguf(&f, &v) == SB_OK);
    if (v) {
        /* <eos> 1, <turn|> 106, <|tool_response> 50 end a turn; <bos> 2, <|turn> 105, <|channel> 100 do not */
        CHECK(tok_find(v, "<turn|>", 7) == 106 && tok_find(v, "<|tool_response>", 16) == 50);
        CHECK(tok_is_eog(v, 1) && tok_is_eog(v, 106) && tok_is_eog(v, 50));
        CHECK(!tok_is_eog(v, 2) && !tok_is_eog(v, 105) && !tok_is_eog(v, 100));
        CHECK(tok_chat_kind_of(v) == TOK_CHAT_GEMMA4_THOUGHT);
    }
    tok_vocab_free(v);
    gguf_close(&f);
}

int main(void) {
    char src[4096];
    snprintf(src, sizeof src, "%s", test_data_path("models/test-gemma4-f32.gguf"));
    if (access(src, R_OK)) {
        printf("SKIP: %s is absent\n", src);
        return 77;
    }
    if (!tmp_dir_create("gemma4")) return 1;
    refusals(src);
    equivalences(src);
    structure(src);
    eog();
    tmp_dir_remove();
    return test_summary();
}
