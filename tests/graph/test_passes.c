/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/graph/test_passes.c — golden tests of every planner pass: each case builds a graph with
 * the builder API, runs the passes it depends on, prints the IR (must equal the "# before"
 * section of tests/graph/<case>.ir), runs the pass under test plus the verifier, and prints again
 * (must equal "# after"). SB_UPDATE_GOLDEN=1 rewrites the files (review the diff!).
 * Also: the verifier rejects broken graphs, the memory plan never overlaps two live values and
 * reuses memory, SB_DUMP_IR output, the whole pipeline on a small transformer block.
 */
#include "graph/plan.h"
#include "test.h"

#include "sonicboom.h"

#include <time.h>

// ---- golden driver ----

static char *read_text(const char *path) {
    size_t n = 0;
    unsigned char *p = test_read_file(path, &n);
    if (!p) return NULL;
    char *s = realloc(p, n + 1);
    if (!s) { free(p); return NULL; }
    s[n] = 0;
    return s;
}

/* got against the golden file at path (SB_UPDATE_GOLDEN=1 rewrites the file first): fails when
 * the file is missing, or naming it and printing got when it differs. */
static void check_golden(const char *path, const char *got) {
    if (getenv("SB_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "w");
        if (f) fputs(got, f), fclose(f);
    }
    char *want = read_text(path);
    CHECKF(want != NULL, "%s missing", path);
    if (want) CHECKF(!strcmp(want, got), "%s differs; got:\n%s", path, got);
    free(want);
}

static void golden(const char *name, ir_graph *g, const pass_fn *pre, int n_pre, pass_fn fn, const plan_target *t) {
    pass_ctx cx = {.target = t};
    for (int i = 0; i < n_pre; i++) CHECK(pre[i](g, &cx) == SB_OK);
    CHECK(ir_verify(g) == SB_OK);
    char *before = ir_print_str(g);
    sb_status s = fn(g, &cx);
    CHECKF(s == SB_OK, "%s: pass failed: %s", name, sb_last_error());
    s = ir_verify(g);
    CHECKF(s == SB_OK, "%s: verify after pass: %s", name, sb_last_error());
    char *after = ir_print_str(g);
    size_t len = strlen(before) + strlen(after) + 32;
    char *got = malloc(len);
    snprintf(got, len, "# before\n%s# after\n%s", before, after);
    char path[256];
    snprintf(path, sizeof path, "tests/graph/%s.ir", name);
    check_golden(path, got);
    free(got);
    free(before);
    free(after);
}

/* passes a then b (b may be NULL) leave g as it was */
static void check_unchanged(ir_graph *g, const pass_ctx *cx, pass_fn a, pass_fn b) {
    char *before = ir_print_str(g);
    CHECK(a(g, cx) == SB_OK && (!b || b(g, cx) == SB_OK));
    char *after = ir_print_str(g);
    CHECK(before && after && !strcmp(before, after));
    free(before), free(after);
}

static ir_graph *new_graph(void) {
    ir_graph *g = NULL;
    CHECK(ir_graph_create(&g) == SB_OK);
    return g;
}

static ir_ref W(ir_graph *g, const char *name, int type, int64_t a, int64_t b) {
    return ir_input_weight(g, name, type, (int64_t[4]){a, b, 1, 1});
}

/* CPU-like target with a fixed pairing (independent of the quant tables) */
static void test_target(plan_target *t) {
    plan_target_reference(t);
    t->name = "test";
    t->wants_quantized_act = true;
    t->act_type[SB_TYPE_Q4_K] = SB_TYPE_Q8_K;
    t->act_type[SB_TYPE_Q6_K] = SB_TYPE_Q8_K;
    t->act_type[SB_TYPE_Q8_0] = SB_TYPE_Q8_0;
    t->act_type[SB_TYPE_Q4_0] = SB_TYPE_Q8_0;
    t->fuse_norm_quant = t->fuse_act_quant = t->fuse_elementwise = true;
}

// ---- cases ----

/* prefill T=4 with logits for one row: select_rows climbs above the output head and the last FFN */
static void case_dce(void) {
    ir_graph *g = new_graph();
    const int64_t E = 64, V = 512, F = 128, T = 4;
    ir_ref tok = ir_input_tokens(g, T), rows = ir_input_out_rows(g, 1);
    ir_ref emb = W(g, "token_embd.weight", SB_TYPE_F32, E, V);
    ir_ref nw = W(g, "blk.0.ffn_norm.weight", SB_TYPE_F32, E, 1), up = W(g, "blk.0.ffn_up.weight", SB_TYPE_F32, E, F);
    ir_ref down = W(g, "blk.0.ffn_down.weight", SB_TYPE_F32, F, E), onw = W(g, "output_norm.weight", SB_TYPE_F32, E, 1);
    ir_ref bias = W(g, "output.bias", SB_TYPE_F32, V, 1), dead_w = W(g, "unused.weight", SB_TYPE_F32, E, 8);
    ir_ref x = ir_set_name(g, ir_get_rows(g, emb, tok), "inp_embd");
    ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), nw);
    ir_matmul(g, dead_w, h); /* nobody reads it */
    ir_ref f = ir_matmul(g, down, ir_silu(g, ir_matmul(g, up, h)));
    x = ir_set_name(g, ir_add(g, x, f), "blk.0.out");
    ir_ref l = ir_add(g, ir_matmul(g, emb, ir_mul(g, ir_rms_norm(g, x, 1e-6f), onw)), bias);
    ir_output(g, ir_select_rows(g, l, rows), "logits");
    CHECK(ir_graph_status(g) == SB_OK);
    golden("dce", g, NULL, 0, pass_dce, NULL);
    /* the vocab matmul now runs on 1 row */
    int found = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_MATMUL && g->nodes[i].ne[0] == V) {
            found = 1;
            CHECK_EQ_INT(g->nodes[i].ne[1], 1);
        }
    CHECK(found);
    ir_graph_free(g);
}

/* q/k/v share one quantize, gate/up share one, a q8_0 weight gets its own, f32 weights none */
static ir_graph *attn_ffn_graph_t(bool gemma, int64_t T) {
    ir_graph *g = new_graph();
    const int64_t E = 256, Dkv = 128, F = 512, C = 16, D = 64;
    ir_ref x0 = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1}); /* stands for the residual stream */
    ir_ref pos = ir_input_pos(g, T);
    ir_ref an = W(g, "blk.0.attn_norm.weight", SB_TYPE_F32, E, 1);
    ir_ref wq = W(g, "blk.0.attn_q.weight", SB_TYPE_Q4_K, E, E), wk = W(g, "blk.0.attn_k.weight", SB_TYPE_Q4_K, E, Dkv);
    ir_ref wv = W(g, "blk.0.attn_v.weight", SB_TYPE_Q6_K, E, Dkv), bq = W(g, "blk.0.attn_q.bias", SB_TYPE_F32, E, 1);
    ir_ref wo = W(g, "blk.0.attn_output.weight", SB_TYPE_Q8_0, E, E);
    ir_ref kc = ir_input_kv(g, "cache_k_l0", SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
    ir_ref vc = ir_input_kv(g, "cache_v_l0", SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
    ir_ref h = ir_mul(g, ir_rms_norm(g, x0, 1e-6f), an);
    ir_ref q = ir_add(g, ir_matmul(g, wq, h), bq), k = ir_matmul(g, wk, h), v = ir_matmul(g, wv, h);
    ir_rope_params rp = {.n_rot = D, .mode = IR_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
    q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, E / D, T, 1}), pos, IR_NONE, &rp);
    k = ir_rope(g, ir_reshape(g, k, (int64_t[4]){D, Dkv / D, T, 1}), pos, IR_NONE, &rp);
    ir_ref ks = ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){Dkv, T, 1, 1}), pos), vs = ir_kv_store(g, vc, v, pos);
    ir_attn_params ap = {.n_head_kv = 2, .head_dim = D, .scale = 0.125f};
    ir_ref a = ir_matmul(g, wo, ir_attention(g, q, ks, vs, pos, &ap));
    ir_ref x1;
    if (gemma) {
        ir_ref pn = W(g, "blk.0.post_attention_norm.weight", SB_TYPE_F32, E, 1);
        x1 = ir_add(g, ir_mul(g, ir_rms_norm(g, a, 1e-6f), pn), x0);
    } else {
        x1 = ir_add(g, x0, a);
    }
    ir_ref fn = W(g, "blk.0.ffn_norm.weight", SB_TYPE_F32, E, 1);
    ir_ref wg = W(g, "blk.0.ffn_gate.weight", SB_TYPE_Q4_K, E, F), wu = W(g, "blk.0.ffn_up.weight", SB_TYPE_Q4_K, E, F);
    ir_ref wd = W(g, "blk.0.ffn_down.weight", SB_TYPE_Q6_K, F, E);
    ir_ref h2 = ir_mul(g, ir_rms_norm(g, x1, 1e-6f), fn);
    ir_ref gg = ir_matmul(g, wg, h2), uu = ir_matmul(g, wu, h2);
    ir_ref act = gemma ? ir_geglu(g, gg, uu) : ir_swiglu(g, gg, uu);
    ir_ref x2 = ir_add(g, x1, ir_matmul(g, wd, act));
    ir_output(g, ir_softcap(g, ir_scale(g, x2, 0.5f), 30.0f), "out");
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}
static ir_graph *attn_ffn_graph(bool gemma) { return attn_ffn_graph_t(gemma, 2); }

static void case_quantize_once(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(false);
    golden("quantize_once", g, NULL, 0, pass_quantize_once, &t);
    int nq = 0;
    for (int i = 0; i < g->n_nodes; i++) nq += g->nodes[i].op == IR_OP_QUANTIZE;
    CHECK_EQ_INT(nq, 4); /* qkv (q8_K), wo (q8_0), gate/up (q8_K), down (q8_K) */
    ir_graph_free(g);
    /* a target without quantized activations leaves the graph alone */
    plan_target r;
    plan_target_reference(&r);
    g = attn_ffn_graph(false);
    char *a = ir_print_str(g);
    pass_ctx cx = {.target = &r};
    CHECK(pass_quantize_once(g, &cx) == SB_OK);
    char *b = ir_print_str(g);
    CHECK(!strcmp(a, b));
    free(a), free(b);
    ir_graph_free(g);
}

/* plan_target.act_f32_min_rows: matmuls whose activation has that many rows keep it f32 (no
 * quantize node), fewer rows still quantize, 0 never keeps; the whole pipeline over such a graph
 * verifies and leaves no quantizing node (norm / GLU quantize fusions have nothing to fuse) */
static int count_quantizing(const ir_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_op op = g->nodes[i].op;
        n += op == IR_OP_QUANTIZE || op == IR_OP_RMS_NORM_QUANT || op == IR_OP_GLU_QUANT || op == IR_OP_ADD_RMS_NORM_QUANT;
    }
    return n;
}
static void case_act_f32_rows(void) {
    const struct { int64_t T, min_rows; int quantize; } cs[] = {{3, 4, 4}, {4, 4, 0}, {9, 4, 0}, {4, 0, 4}, {4, 5, 4}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        plan_target t;
        test_target(&t);
        t.act_f32_min_rows = cs[k].min_rows;
        ir_graph *g = attn_ffn_graph_t(false, cs[k].T);
        pass_ctx cx = {.target = &t};
        CHECK(pass_quantize_once(g, &cx) == SB_OK);
        CHECK(ir_verify(g) == SB_OK);
        CHECKF(count_quantizing(g) == cs[k].quantize, "T %lld, act_f32_min_rows %lld: %d quantize nodes, want %d", (long long)cs[k].T,
               (long long)cs[k].min_rows, count_quantizing(g), cs[k].quantize);
        for (int i = 0; i < g->n_nodes; i++) /* a matmul reads f32 exactly where the rule keeps it */
            if (g->nodes[i].op == IR_OP_MATMUL && g->nodes[g->nodes[i].src[0]].dtype != SB_TYPE_F32)
                CHECK((g->nodes[g->nodes[i].src[1]].dtype == SB_TYPE_F32) == (cs[k].quantize == 0));
        ir_graph_free(g);
        g = attn_ffn_graph_t(false, cs[k].T);
        t.fuse_add_norm = t.fuse_matmul_add = t.fuse_rope_store = true;
        CHECK(pass_run_pipeline(g, &t, &(plan_dump){.spec = "", .f = NULL}) == SB_OK);
        CHECK((count_quantizing(g) == 0) == (cs[k].quantize == 0));
        ir_graph_free(g);
    }
}

static void case_fuse_norm_quant(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(false);
    pass_fn pre[] = {pass_quantize_once};
    golden("fuse_norm_quant", g, pre, 1, pass_fuse_norm_quant, &t);
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == IR_OP_RMS_NORM_QUANT;
    CHECK_EQ_INT(n, 2);
    ir_graph_free(g);
}

static void case_fuse_act_quant(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(true);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant};
    golden("fuse_act_quant", g, pre, 2, pass_fuse_act_quant, &t);
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == IR_OP_GLU_QUANT && g->nodes[i].ip[0] == IR_OP_GEGLU;
    CHECK_EQ_INT(n, 1);
    ir_graph_free(g);
}

/* K's rope into its cache store (the rope's only reader, through a reshape, at the same positions);
 * Q's rope, read by the attention, stays; a rope read twice stays; a target without the flag is left alone */
static void case_fuse_rope_store(void) {
    plan_target t;
    test_target(&t);
    t.fuse_rope_store = true;
    ir_graph *g = attn_ffn_graph(false);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise};
    golden("fuse_rope_store", g, pre, 4, pass_fuse_rope_store, &t);
    int n = 0, ropes = 0, stores = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        n += g->nodes[i].op == IR_OP_ROPE_STORE;
        ropes += g->nodes[i].op == IR_OP_ROPE;
        stores += g->nodes[i].op == IR_OP_KV_STORE;
    }
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(ropes, 1); /* Q's */
    CHECK_EQ_INT(stores, 1); /* V's */
    ir_graph_free(g);
    /* the rotated K also read elsewhere: no fusion */
    g = new_graph();
    ir_ref pos = ir_input_pos(g, 2);
    ir_ref cache = ir_input_kv(g, "cache_k.0", SB_TYPE_F16, (int64_t[4]){16, 8, 1, 1});
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){8, 2, 2, 1});
    ir_rope_params rp = {.n_rot = 8, .mode = IR_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
    ir_ref k = ir_rope(g, x, pos, IR_NONE, &rp);
    ir_ref st = ir_kv_store(g, cache, ir_reshape(g, k, (int64_t[4]){16, 2, 1, 1}), pos);
    ir_output(g, ir_reshape(g, k, (int64_t[4]){16, 2, 1, 1}), "k");
    ir_attn_params ap = {.n_head_kv = 2, .head_dim = 8, .scale = 0.5f};
    ir_output(g, ir_attention(g, x, st, st, pos, &ap), "y");
    char *before = ir_print_str(g);
    pass_ctx cx = {.target = &t};
    CHECK(pass_fuse_rope_store(g, &cx) == SB_OK);
    char *after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(after);
    /* ... and a reference target never fuses */
    ir_graph_free(g);
    g = attn_ffn_graph(false);
    plan_target r;
    plan_target_reference(&r);
    free(before);
    before = ir_print_str(g);
    cx.target = &r;
    CHECK(pass_fuse_rope_store(g, &cx) == SB_OK);
    after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(before), free(after);
    ir_graph_free(g);
}

/* Q's bias and the attention's residual add become matmul addends; the FFN's residual add, which
 * the elementwise chain after it took, stays there; a product read twice stays a plain matmul; a
 * target without the flag is left alone */
/* a qwen3 / gemma4 attention input: q and k normed per head with weights before their ropes (K's
 * with freq factors), V normed without a weight before its kv_store (gemma4); with
 * k_read_elsewhere the normed K is an output too */
static ir_graph *qk_norm_graph(bool k_read_elsewhere) {
    ir_graph *g = new_graph();
    const int64_t E = 256, D = 64, Hq = 4, Hkv = 2, T = 2, C = 16;
    ir_ref h = ir_input_weight(g, "h", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_ref pos = ir_input_pos(g, T);
    ir_ref wq = W(g, "blk.0.attn_q.weight", SB_TYPE_Q8_0, E, Hq * D), wk = W(g, "blk.0.attn_k.weight", SB_TYPE_Q8_0, E, Hkv * D);
    ir_ref wv = W(g, "blk.0.attn_v.weight", SB_TYPE_Q8_0, E, Hkv * D), ff = W(g, "rope_freqs.weight", SB_TYPE_F32, D / 2, 1);
    ir_ref qn = W(g, "blk.0.attn_q_norm.weight", SB_TYPE_F32, D, 1), kn = W(g, "blk.0.attn_k_norm.weight", SB_TYPE_F32, D, 1);
    ir_ref kc = ir_input_kv(g, "cache_k.0", SB_TYPE_F16, (int64_t[4]){Hkv * D, C, 1, 1});
    ir_ref vc = ir_input_kv(g, "cache_v.0", SB_TYPE_F16, (int64_t[4]){Hkv * D, C, 1, 1});
    ir_rope_params rp = {.n_rot = D, .mode = IR_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
    ir_ref q = ir_reshape(g, ir_matmul(g, wq, h), (int64_t[4]){D, Hq, T, 1});
    q = ir_rope(g, ir_mul(g, ir_rms_norm(g, q, 1e-6f), qn), pos, IR_NONE, &rp);
    ir_ref k = ir_rms_norm(g, ir_reshape(g, ir_matmul(g, wk, h), (int64_t[4]){D, Hkv, T, 1}), 1e-6f);
    if (k_read_elsewhere) ir_output(g, k, "k_normed");
    k = ir_rope(g, ir_mul(g, k, kn), pos, ff, &rp);
    ir_ref v = ir_rms_norm(g, ir_reshape(g, ir_matmul(g, wv, h), (int64_t[4]){D, Hkv, T, 1}), 1e-6f);
    ir_ref ks = ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){Hkv * D, T, 1, 1}), pos);
    ir_ref vs = ir_kv_store(g, vc, ir_reshape(g, v, (int64_t[4]){Hkv * D, T, 1, 1}), pos);
    ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 1.0f};
    ir_output(g, ir_attention(g, q, ks, vs, pos, &ap), "out");
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}

static int count_normed_ropes(const ir_graph *g, ir_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op && ir_rope_norm_of(&g->nodes[i]).kind != IR_ROPE_NORM_NONE;
    return n;
}

/* pass fuse_norm_rope: Q's and K's weighted head norms go into their ropes (the golden file), K's
 * keeps its freq factors beside the weight, V's weightless norm goes into its kv_store;
 * fuse_rope_store then carries K's norm into the rope_store. Not fused: a norm read elsewhere, a
 * reference target. */
static void case_fuse_norm_rope(void) {
    plan_target t;
    test_target(&t);
    t.fuse_norm_rope = t.fuse_rope_store = true;
    ir_graph *g = qk_norm_graph(false);
    golden("fuse_norm_rope", g, NULL, 0, pass_fuse_norm_rope, &t);
    CHECK_EQ_INT(count_normed_ropes(g, IR_OP_ROPE), 2);
    int norms = 0, muls = 0;
    for (int i = 0; i < g->n_nodes; i++) norms += g->nodes[i].op == IR_OP_RMS_NORM, muls += g->nodes[i].op == IR_OP_MUL;
    CHECK_EQ_INT(norms, 0); /* V's went into its kv_store */
    CHECK_EQ_INT(muls, 0);
    CHECK_EQ_INT(count_normed_ropes(g, IR_OP_KV_STORE), 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_ROPE) continue;
        const bool is_k = n->ne[1] == 2;
        CHECK(ir_rope_norm_of(n).kind == IR_ROPE_NORM_WEIGHT && ir_rope_norm_of(n).eps == 1e-6f);
        CHECK(!strcmp(g->nodes[ir_rope_norm_of(n).weight].name, is_k ? "blk.0.attn_k_norm.weight" : "blk.0.attn_q_norm.weight"));
        CHECK(is_k ? !strcmp(g->nodes[ir_rope_ff(n)].name, "rope_freqs.weight") : ir_rope_ff(n) == IR_NONE);
    }
    pass_ctx cx = {.target = &t};
    CHECK(pass_fuse_rope_store(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    CHECK_EQ_INT(count_normed_ropes(g, IR_OP_ROPE_STORE), 1);
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_ROPE_STORE) continue;
        CHECK(!strcmp(g->nodes[ir_rope_norm_of(n).weight].name, "blk.0.attn_k_norm.weight"));
        CHECK(!strcmp(g->nodes[ir_rope_ff(n)].name, "rope_freqs.weight"));
    }
    ir_graph_free(g);
    /* the normed K also read elsewhere: K's rope keeps its input, Q's still fuses */
    g = qk_norm_graph(true);
    CHECK(pass_fuse_norm_rope(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    CHECK_EQ_INT(count_normed_ropes(g, IR_OP_ROPE), 1);
    int left = 0;
    for (int i = 0; i < g->n_nodes; i++) left += g->nodes[i].op == IR_OP_RMS_NORM;
    CHECK_EQ_INT(left, 1); /* K's */
    ir_graph_free(g);
    /* a reference target never fuses */
    plan_target r;
    plan_target_reference(&r);
    g = qk_norm_graph(false);
    char *before = ir_print_str(g);
    cx.target = &r;
    CHECK(pass_fuse_norm_rope(g, &cx) == SB_OK);
    char *after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(before), free(after);
    ir_graph_free(g);
}

static void case_fuse_matmul_add(void) {
    plan_target t;
    test_target(&t);
    t.fuse_matmul_add = true;
    ir_graph *g = attn_ffn_graph(false);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise};
    golden("fuse_matmul_add", g, pre, 4, pass_fuse_matmul_add, &t);
    int with = 0, adds = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        with += ir_matmul_addend(&g->nodes[i]) != IR_NONE;
        adds += g->nodes[i].op == IR_OP_ADD;
    }
    CHECK_EQ_INT(with, 2);
    CHECK_EQ_INT(adds, 0);
    ir_graph_free(g);
    /* read twice, and a reference target */
    g = new_graph();
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){64, 2, 1, 1});
    ir_ref m = ir_matmul(g, W(g, "w", SB_TYPE_F32, 64, 32), x);
    ir_output(g, ir_add(g, m, W(g, "b", SB_TYPE_F32, 32, 1)), "y");
    ir_output(g, m, "m");
    ir_output(g, ir_add(g, ir_matmul(g, W(g, "w2", SB_TYPE_F32, 64, 32), x), W(g, "b2", SB_TYPE_F32, 32, 1)), "z");
    plan_target r;
    plan_target_reference(&r);
    pass_ctx cx = {.target = &r};
    char *before = ir_print_str(g);
    CHECK(pass_fuse_matmul_add(g, &cx) == SB_OK);
    char *after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(after);
    cx.target = &t;
    CHECK(pass_fuse_matmul_add(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    with = adds = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        with += ir_matmul_addend(&g->nodes[i]) != IR_NONE;
        adds += g->nodes[i].op == IR_OP_ADD;
    }
    CHECK_EQ_INT(with, 1); /* z's */
    CHECK_EQ_INT(adds, 1); /* y's: its product is an output too */
    free(before);
    ir_graph_free(g);
    /* the shape rule: an addend is [N] or the product's shape */
    g = new_graph();
    x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){64, 2, 1, 1});
    ir_node bad = ir_proto(IR_OP_MATMUL);
    bad.src[0] = W(g, "w", SB_TYPE_F32, 64, 32), bad.src[1] = x, bad.src[2] = W(g, "b", SB_TYPE_F32, 16, 1);
    CHECK(ir_infer_shape(g, &bad) != SB_OK && strstr(sb_last_error(), "matmul: operand"));
    ir_graph_free(g);
}

/* a paged decode (T = 1): Q's rope (with freq factors) into the paged attention, whose block table
 * stays src[4] and freq factors go to src[5]; the text form shows both; 2 tokens keep the rope
 * unless attn_rope_paged_max_t takes them (3 then keep it); the shape rule refuses a sixth source
 * on a contiguous attention. The paged attention writes its output's q8_1 too (fuse_attn_quant). */
static void case_fuse_attn_rope_paged(void) {
    plan_target t;
    test_target(&t);
    t.attn_rope_max_t = 1;
    t.attn_quant_type = SB_TYPE_Q8_1;
    pass_ctx cx = {.target = &t};
    static const struct { int64_t T, paged_max_t; bool want; } cs[] = {{1, 0, true}, {2, 0, false}, {2, 2, true}, {3, 2, false}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t nt = cs[k].T;
        const bool want = cs[k].want;
        t.attn_rope_paged_max_t = cs[k].paged_max_t;
        ir_graph *g = new_graph();
        ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){64, 4, nt, 1});
        ir_ref kc = ir_input_kv(g, "k", SB_TYPE_F16, (int64_t[4]){128, 64, 1, 1}), vc = ir_input_kv(g, "v", SB_TYPE_F16, (int64_t[4]){128, 64, 1, 1});
        ir_ref pos = ir_input_pos(g, nt), tbl = ir_input_block_table(g, 4, nt), ff = W(g, "ff", SB_TYPE_F32, 32, 1);
        const ir_rope_params rp = {.n_rot = 64, .mode = IR_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
        const ir_attn_params ap = {.n_head_kv = 2, .head_dim = 64, .scale = 0.125f};
        const ir_ref att = ir_attention_paged(g, ir_rope(g, q, pos, ff, &rp), kc, vc, pos, tbl, 16, &ap);
        ir_output(g, att, "y");
        ir_node qn = ir_proto(IR_OP_QUANTIZE); /* the O projection's activation (read by nothing here) */
        qn.src[0] = att, qn.dtype = SB_TYPE_Q8_1;
        ir_append(g, &qn);
        CHECK(ir_graph_status(g) == SB_OK && ir_verify(g) == SB_OK);
        CHECK(pass_fuse_attn_quant(g, &cx) == SB_OK && ir_verify(g) == SB_OK); /* first: the rope pass's compaction drops the dead quantize */
        CHECK(pass_fuse_attn_rope(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
        int ropes = 0, fused = 0, quants = 0, results = 0;
        for (int32_t i = 0; i < g->n_nodes; i++) {
            const ir_node *n = &g->nodes[i];
            ropes += n->op == IR_OP_ROPE;
            quants += n->op == IR_OP_QUANTIZE;
            results += n->op == IR_OP_ATTENTION && ir_attn_quant_type(n) == SB_TYPE_Q8_1; /* its result 1 read by nothing here: compacted away */
            if (n->op != IR_OP_ATTENTION || !ir_attn_q_rope(n).n_rot) continue;
            fused++;
            CHECK(ir_attn_block_size(n) == 16 && g->nodes[n->src[4]].op == IR_OP_BLOCK_TABLE && ir_attn_q_rope_ff(n) == n->src[5] &&
                  !strcmp(g->nodes[n->src[5]].name, "ff") && g->nodes[n->src[0]].op == IR_OP_WEIGHT);
            char *txt = ir_print_str(g);
            CHECKF(txt && strstr(txt, "block_size=16 q_rope=64 mode=neox"), "paged attention with q rope prints as: %s", txt ? txt : "(null)");
            free(txt);
            ir_node bad = *n; /* the same sources on a contiguous attention: one too many */
            bad.ip[3] = 0;
            CHECK(ir_infer_shape(g, &bad) != SB_OK && strstr(sb_last_error(), "6 sources"));
        }
        CHECKF(fused == want && ropes == !want, "T=%lld (paged bound %lld): %d attentions rotate q, %d ropes left", (long long)nt,
               (long long)t.attn_rope_paged_max_t, fused, ropes);
        CHECK_EQ_INT(quants, 0);
        CHECK_EQ_INT(results, 1);
        ir_graph_free(g);
    }
}

/* decode (T = 1): Q's rope into the attention, the attention's q8_1 output as its result 1; a
 * 2-token plan with attn_rope_max_t 1 keeps the rope, heads past attn_fuse_max_head_dim keep both;
 * a reference target changes nothing */
static void case_fuse_attn(void) {
    plan_target t;
    test_target(&t);
    t.act_type[SB_TYPE_Q8_0] = SB_TYPE_Q8_1; /* the O projection's activation: the type the attention writes */
    t.attn_rope_max_t = 1;
    t.attn_quant_type = SB_TYPE_Q8_1;
    t.fuse_rope_store = true;
    ir_graph *g = attn_ffn_graph_t(false, 1);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_rope_store};
    golden("fuse_attn_rope", g, pre, 5, pass_fuse_attn_rope, &t);
    pass_ctx cx = {.target = &t};
    char *before = ir_print_str(g);
    CHECK(pass_fuse_attn_quant(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    char *after = ir_print_str(g);
    size_t len = strlen(before) + strlen(after) + 32;
    char *got = malloc(len);
    snprintf(got, len, "# before\n%s# after\n%s", before, after);
    check_golden("tests/graph/fuse_attn_quant.ir", got);
    free(got), free(before), free(after);
    int ropes = 0, results = 0, q_rope = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        ropes += n->op == IR_OP_ROPE;
        results += n->op == IR_OP_RESULT && g->nodes[n->src[0]].op == IR_OP_ATTENTION;
        q_rope += n->op == IR_OP_ATTENTION && ir_attn_q_rope(n).n_rot == 64;
    }
    CHECK_EQ_INT(ropes, 0);
    CHECK_EQ_INT(results, 1);
    CHECK_EQ_INT(q_rope, 1);
    ir_graph_free(g);
    /* two tokens: past attn_rope_max_t */
    g = attn_ffn_graph_t(false, 2);
    CHECK(pass_fuse_attn_rope(g, &cx) == SB_OK);
    int r2 = 0;
    for (int i = 0; i < g->n_nodes; i++) r2 += g->nodes[i].op == IR_OP_ROPE;
    CHECK_EQ_INT(r2, 2);
    ir_graph_free(g);
    /* heads of 64 dims past a target's attn_fuse_max_head_dim of 32: the rope and the quantize stay */
    plan_target narrow = t;
    narrow.attn_fuse_max_head_dim = 32;
    cx.target = &narrow;
    g = attn_ffn_graph_t(false, 1);
    CHECK(pass_quantize_once(g, &cx) == SB_OK);
    check_unchanged(g, &cx, pass_fuse_attn_rope, pass_fuse_attn_quant);
    ir_graph_free(g);
    /* a reference target */
    plan_target r;
    plan_target_reference(&r);
    cx.target = &r;
    g = attn_ffn_graph_t(false, 1);
    CHECK(pass_quantize_once(g, &cx) == SB_OK);
    check_unchanged(g, &cx, pass_fuse_attn_rope, pass_fuse_attn_quant);
    ir_graph_free(g);
}

/* decode (T = 1): Q, K and V (one activation; Q's bias an addend) as one group of three, gate and up
 * as one of two, each member one the target's fits() accepts; the O and down projections (other
 * activations) stay; a target whose fits() refuses Q6_K groups K and Q only; 2 tokens past the
 * target's limit group nothing */
static bool not_q6k(const ir_graph *g, const ir_node *m) { return g->nodes[m->src[0]].dtype != SB_TYPE_Q6_K; }
/* the test target grouping decode matmuls (with their addends), up to three a group */
static void decode_group_target(plan_target *t) {
    test_target(t);
    t->fuse_matmul_add = true;
    t->matmul_group_max_t = 1;
    t->matmul_group_max = 3;
}

static void case_fuse_matmul_group(void) {
    plan_target t;
    decode_group_target(&t);
    ir_graph *g = attn_ffn_graph_t(false, 1);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add};
    golden("fuse_matmul_group", g, pre, 5, pass_fuse_matmul_group, &t);
    int groups = 0, members = 0, results = 0, matmuls = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_MATMUL_GROUP) groups++, members += ir_group_n(n);
        results += n->op == IR_OP_RESULT;
        matmuls += n->op == IR_OP_MATMUL;
    }
    CHECK_EQ_INT(groups, 2);
    CHECK_EQ_INT(members, 5);
    CHECK_EQ_INT(results, 3);
    CHECK_EQ_INT(matmuls, 2);
    ir_graph_free(g);
    t.group_member_fits = not_q6k; /* V (Q6_K) and down stay alone */
    g = attn_ffn_graph_t(false, 1);
    pass_ctx cx = {.target = &t};
    for (int k = 0; k < 5; k++) CHECK(pre[k](g, &cx) == SB_OK);
    CHECK(pass_fuse_matmul_group(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    int sizes = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_MATMUL_GROUP) sizes = sizes * 10 + ir_group_n(&g->nodes[i]);
    CHECK_EQ_INT(sizes, 22); /* K + Q, gate + up */
    ir_graph_free(g);
    g = attn_ffn_graph_t(false, 2);
    for (int k = 0; k < 5; k++) CHECK(pre[k](g, &cx) == SB_OK);
    char *before = ir_print_str(g);
    CHECK(pass_fuse_matmul_group(g, &cx) == SB_OK);
    char *after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(before), free(after);
    ir_graph_free(g);
}

/* decode: the gate/up group gated (its up's result and the GLU go, a quantize of the gated product
 * stays); Q/K/V untouched; a target without group_glu_fits, or one refusing, gates nothing */
static bool glu_yes(const ir_graph *g, const ir_node *grp) { return g && grp; }
static bool glu_no(const ir_graph *g, const ir_node *grp) { return !g || !grp; }
static void case_fuse_group_glu(void) {
    plan_target t;
    decode_group_target(&t);
    t.group_glu_fits = glu_yes;
    ir_graph *g = attn_ffn_graph_t(false, 1);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_matmul_group};
    golden("fuse_group_glu", g, pre, 6, pass_fuse_group_glu, &t);
    int gated = 0, glus = 0, results = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        gated += n->op == IR_OP_MATMUL_GROUP && ir_group_glu(n) == IR_OP_SWIGLU;
        glus += n->op == IR_OP_GLU_QUANT;
        results += n->op == IR_OP_RESULT;
    }
    CHECK_EQ_INT(gated, 1);
    CHECK_EQ_INT(glus, 0);
    CHECK_EQ_INT(results, 2); /* K's and V's */
    ir_graph_free(g);
    bool (*const refuse[2])(const ir_graph *, const ir_node *) = {NULL, glu_no};
    for (int k = 0; k < 2; k++) {
        t.group_glu_fits = refuse[k];
        g = attn_ffn_graph_t(false, 1);
        pass_ctx cx = {.target = &t};
        for (int q = 0; q < 6; q++) CHECK(pre[q](g, &cx) == SB_OK);
        check_unchanged(g, &cx, pass_fuse_group_glu, NULL);
        ir_graph_free(g);
    }
}

/* prefill (T = 16): the same pass for a target grouping more tokens (CUDA's int8 MMA launch):
 * group_fits takes one weight type a group here, so K and Q (Q4_K) are one group, V (Q6_K) stays
 * alone though it reads the same activation, gate and up are one; fuse_group_glu then gates gate/up
 * as at T = 1. A target whose members need more than 8 tokens groups nothing at T = 4. */
static bool prefill_member(const ir_graph *g, const ir_node *m) { return g->nodes[m->src[1]].ne[1] > 8; }
static bool one_weight_type(const ir_graph *g, const ir_ref *mem, int n) {
    for (int k = 1; k < n; k++)
        if (g->nodes[g->nodes[mem[k]].src[0]].dtype != g->nodes[g->nodes[mem[0]].src[0]].dtype) return false;
    return true;
}
static void case_fuse_matmul_group_prefill(void) {
    plan_target t;
    decode_group_target(&t);
    t.matmul_group_max_t = INT64_MAX;
    t.group_member_fits = prefill_member;
    t.group_fits = one_weight_type;
    t.group_glu_fits = glu_yes;
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_matmul_group};
    ir_graph *g = attn_ffn_graph_t(false, 16);
    golden("fuse_matmul_group_prefill", g, pre, 5, pass_fuse_matmul_group, &t);
    int sizes = 0, matmuls = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op == IR_OP_MATMUL_GROUP) sizes = sizes * 10 + ir_group_n(&g->nodes[i]);
        matmuls += g->nodes[i].op == IR_OP_MATMUL;
    }
    CHECK_EQ_INT(sizes, 22); /* K + Q, gate + up */
    CHECK_EQ_INT(matmuls, 3); /* V, O, down */
    ir_graph_free(g);
    g = attn_ffn_graph_t(false, 16);
    golden("fuse_group_glu_prefill", g, pre, 6, pass_fuse_group_glu, &t);
    int gated = 0;
    for (int i = 0; i < g->n_nodes; i++) gated += g->nodes[i].op == IR_OP_MATMUL_GROUP && ir_group_glu(&g->nodes[i]) == IR_OP_SWIGLU;
    CHECK_EQ_INT(gated, 1);
    ir_graph_free(g);
    g = attn_ffn_graph_t(false, 4);
    pass_ctx cx = {.target = &t};
    for (int k = 0; k < 5; k++) CHECK(pre[k](g, &cx) == SB_OK);
    check_unchanged(g, &cx, pass_fuse_matmul_group, NULL);
    ir_graph_free(g);
}

static void case_fuse_elementwise(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(true);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant};
    golden("fuse_elementwise", g, pre, 3, pass_fuse_elementwise, &t);
    ir_graph_free(g);
    /* an intermediate with two readers stays materialised */
    g = new_graph();
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){8, 2, 1, 1});
    ir_ref s = ir_scale(g, x, 2.0f);
    ir_ref a = ir_add(g, s, x);
    ir_output(g, ir_silu(g, a), "y");
    ir_output(g, s, "s");
    pass_ctx cx = {.target = &t};
    CHECK(pass_fuse_elementwise(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    char *txt = ir_print_str(g);
    CHECKF(strstr(txt, "fused(%1, %0) [add @1; silu]") && strstr(txt, "scale(%0)"), "%s", txt);
    free(txt);
    ir_graph_free(g);
}

// ---- verifier ----

static void test_verifier(void) {
    ir_graph *g = new_graph();
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){8, 2, 1, 1});
    ir_ref y = ir_rms_norm(g, x, 1e-5f);
    ir_output(g, y, "y");
    CHECK(ir_verify(g) == SB_OK);
    g->nodes[y].ne[0] = 9; /* shape drift */
    CHECK(ir_verify(g) == SB_ERR_INTERNAL && strstr(sb_last_error(), "rms_norm"));
    g->nodes[y].ne[0] = 8;
    g->nodes[y].src[0] = 2; /* not earlier */
    CHECK(ir_verify(g) == SB_ERR_INTERNAL);
    g->nodes[y].src[0] = x;
    g->nodes[y].src[1] = x; /* arity */
    CHECK(ir_verify(g) == SB_ERR_INTERNAL);
    g->nodes[y].src[1] = IR_NONE;
    ir_output(g, y, "y"); /* duplicate output name */
    CHECK(ir_verify(g) == SB_ERR_INTERNAL && strstr(sb_last_error(), "twice"));
    ir_graph_free(g);
    /* a bad name is a sticky builder error, not a crash */
    g = new_graph();
    char longname[100];
    memset(longname, 'a', 99);
    longname[99] = 0;
    CHECK(ir_input_weight(g, longname, SB_TYPE_F32, (int64_t[4]){4, 1, 1, 1}) == IR_NONE);
    CHECK(ir_rms_norm(g, IR_NONE, 1e-5f) == IR_NONE);
    CHECK(ir_graph_status(g) == SB_ERR_INVALID_ARG);
    plan *p = NULL;
    plan_target t;
    plan_target_reference(&t);
    CHECK(plan_build(g, &t, NULL, &p) == SB_ERR_INVALID_ARG && p == NULL);
    ir_graph_free(g);
    /* inconsistent shapes (e.g. from a model's hparams) are a sticky error naming op and dims */
    g = new_graph();
    ir_ref w = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){64, 8, 1, 1});
    x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){32, 2, 1, 1});
    CHECK(ir_matmul(g, w, x) == IR_NONE);
    CHECK(ir_graph_status(g) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "matmul") && strstr(sb_last_error(), "K mismatch"));
    CHECK(ir_add(g, x, x) == IR_NONE && ir_graph_status(g) == SB_ERR_INVALID_ARG);
    ir_graph_free(g);
    g = new_graph();
    ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){16, 6, 2, 1});
    ir_ref kv = ir_input_kv(g, "k", SB_TYPE_F32, (int64_t[4]){64, 8, 1, 1}), pos = ir_input_pos(g, 2);
    ir_attn_params ap = {.n_head_kv = 4, .head_dim = 16, .scale = 1};
    CHECK(ir_attention(g, q, kv, kv, pos, &ap) == IR_NONE && strstr(sb_last_error(), "Hq 6 not a multiple of Hkv 4"));
    ir_graph_free(g);
}

// ---- memory plan ----

static void check_no_overlap(const plan *p) {
    const ir_graph *g = p->g;
    int n = g->n_nodes;
    int32_t *last = calloc((size_t)n, sizeof *last);
    for (int i = 0; i < n; i++) last[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < IR_MAX_SRC && g->nodes[i].src[j] != IR_NONE; j++) {
            int r = p->vals[g->nodes[i].src[j]].alias;
            if (last[r] < i) last[r] = i;
        }
    for (int i = 0; i < n; i++)
        if (g->nodes[i].op == IR_OP_OUTPUT) last[p->vals[i].alias] = n;
    int bad = 0;
    for (int a = 0; a < n; a++) {
        const plan_value *va = &p->vals[a];
        if (va->input >= 0 || va->alias != a) continue;
        CHECK(va->offset % PLAN_ALIGN == 0 && va->offset + va->bytes <= p->arena_bytes);
        for (int b = a + 1; b < n; b++) {
            const plan_value *vb = &p->vals[b];
            if (vb->input >= 0 || vb->alias != b) continue;
            int born = g->nodes[b].op == IR_OP_RESULT ? g->nodes[b].src[0] : b; /* a result is written at its producer's step */
            bool live_together = born <= last[a]; /* b defined while a still read */
            bool overlap = va->offset < vb->offset + vb->bytes && vb->offset < va->offset + va->bytes;
            if (live_together && overlap) bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(last);
}

static void test_memplan(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(true);
    plan *p = NULL;
    plan_dump d = {.spec = "", .f = NULL};
    CHECKF(plan_build(g, &t, &d, &p) == SB_OK, "%s", sb_last_error());
    if (!p) return;
    check_no_overlap(p);
    CHECK(p->arena_bytes > 0 && p->arena_bytes < p->naive_bytes);
    CHECK_EQ_INT(p->n_outputs, 1);
    CHECK(plan_find_input(p, "cache_k_l0") >= 0 && plan_find_input(p, "nope") == -1 && plan_find_output(p, "out") == 0);
    /* kv_store results alias the cache inputs */
    for (int i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_KV_STORE) CHECK(p->vals[i].input >= 0 && p->vals[i].alias != i);
    /* golden plan text */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    plan_print(p, f);
    fclose(f);
    check_golden("tests/graph/memplan.txt", buf);
    free(buf);
    plan_free(p);
    ir_graph_free(g);
}

// ---- pipeline + dump ----

static void test_pipeline_dump(void) {
    plan_target t;
    test_target(&t);
    ir_graph *g = attn_ffn_graph(false);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    plan_dump d = {.spec = "after:dce,fuse_elementwise", .f = f};
    plan *p = NULL;
    CHECK(plan_build(g, &t, &d, &p) == SB_OK);
    fclose(f);
    CHECK(strstr(buf, "// ---- IR after dce") && strstr(buf, "// ---- IR after fuse_elementwise"));
    CHECK(!strstr(buf, "after quantize_once"));
    free(buf);
    plan_free(p);
    buf = NULL;
    f = open_memstream(&buf, &len);
    d = (plan_dump){.spec = "after-all", .f = f};
    CHECK(plan_build(g, &t, &d, &p) == SB_OK);
    fclose(f);
    int np = 0;
    const pass_info *pl = pass_pipeline(&np);
    CHECK(np == 19 && !strcmp(pl[0].name, "dce") && !strcmp(pl[14].name, "fuse_launch_store") && !strcmp(pl[15].name, "slice_view") &&
          !strcmp(pl[16].name, "fuse_rope_jobs") && !strcmp(pl[17].name, "fuse_group_jobs") &&
          !strcmp(pl[18].name, "fuse_norm_sums"));
    for (int i = 0; i < np; i++) {
        char key[80];
        snprintf(key, sizeof key, "IR after %s", pl[i].name);
        CHECK(strstr(buf, key) != NULL);
    }
    CHECK(strstr(buf, "memory plan") && strstr(buf, "arena "));
    free(buf);
    plan_free(p);
    /* spec NULL reads SB_DUMP_IR from the environment */
    buf = NULL;
    f = open_memstream(&buf, &len);
    setenv("SB_DUMP_IR", "after:fuse_act_quant", 1);
    d = (plan_dump){.spec = NULL, .f = f};
    CHECK(plan_build(g, &t, &d, &p) == SB_OK);
    unsetenv("SB_DUMP_IR");
    fclose(f);
    CHECK(strstr(buf, "IR after fuse_act_quant") && !strstr(buf, "IR after dce") && strstr(buf, "glu_quant("));
    free(buf);
    plan_free(p);
    /* the whole pipeline: the final graph is golden too */
    golden("pipeline", g, NULL, 0, pass_dce, &t);
    ir_graph_free(g);
    g = attn_ffn_graph(false);
    CHECK(pass_run_pipeline(g, &t, &(plan_dump){.spec = "", .f = NULL}) == SB_OK);
    char *txt = ir_print_str(g);
    check_golden("tests/graph/pipeline_final.ir", txt);
    free(txt);
    ir_graph_free(g);
}

// ---- a multi-layer model ----

/* qwen2-shaped stack of L layers, T tokens, logits for n_out rows */
static ir_graph *stack_graph(int L, int64_t T, int64_t n_out) {
    ir_graph *g = new_graph();
    const int64_t E = 256, Dkv = 64, F = 512, V = 1024, C = 1024, D = 32;
    ir_ref tok = ir_input_tokens(g, T), pos = ir_input_pos(g, T), rows = ir_input_out_rows(g, n_out);
    ir_ref emb = W(g, "token_embd.weight", SB_TYPE_Q4_K, E, V);
    ir_ref x = ir_get_rows(g, emb, tok);
    ir_rope_params rp = {.n_rot = D, .mode = IR_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
    ir_attn_params ap = {.n_head_kv = 2, .head_dim = D, .scale = 0.17f};
    /* one node per statement: C leaves the order of a call's arguments open, and node numbers (the
     * golden text) must not depend on the compiler */
    for (int l = 0; l < L; l++) {
        char nm[64];
#define LW(s, ty, a, b) (snprintf(nm, sizeof nm, "blk.%d." s, l), W(g, nm, ty, a, b))
        ir_ref h = ir_rms_norm(g, x, 1e-6f);
        h = ir_mul(g, h, LW("attn_norm.weight", SB_TYPE_F32, E, 1));
        ir_ref wq = LW("attn_q.weight", SB_TYPE_Q4_K, E, E), bq = LW("attn_q.bias", SB_TYPE_F32, E, 1);
        ir_ref q = ir_add(g, ir_matmul(g, wq, h), bq);
        ir_ref wk = LW("attn_k.weight", SB_TYPE_Q4_K, E, Dkv), bk = LW("attn_k.bias", SB_TYPE_F32, Dkv, 1);
        ir_ref k = ir_add(g, ir_matmul(g, wk, h), bk);
        ir_ref wv = LW("attn_v.weight", SB_TYPE_Q6_K, E, Dkv), bv = LW("attn_v.bias", SB_TYPE_F32, Dkv, 1);
        ir_ref v = ir_add(g, ir_matmul(g, wv, h), bv);
        q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, E / D, T, 1}), pos, IR_NONE, &rp);
        k = ir_rope(g, ir_reshape(g, k, (int64_t[4]){D, Dkv / D, T, 1}), pos, IR_NONE, &rp);
        snprintf(nm, sizeof nm, "cache_k_l%d", l);
        ir_ref kc = ir_input_kv(g, nm, SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
        kc = ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){Dkv, T, 1, 1}), pos);
        snprintf(nm, sizeof nm, "cache_v_l%d", l);
        ir_ref vc = ir_input_kv(g, nm, SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
        vc = ir_kv_store(g, vc, v, pos);
        ir_ref wo = LW("attn_output.weight", SB_TYPE_Q4_K, E, E);
        x = ir_add(g, x, ir_matmul(g, wo, ir_attention(g, q, kc, vc, pos, &ap)));
        h = ir_rms_norm(g, x, 1e-6f);
        h = ir_mul(g, h, LW("ffn_norm.weight", SB_TYPE_F32, E, 1));
        ir_ref wg = LW("ffn_gate.weight", SB_TYPE_Q4_K, E, F), wu = LW("ffn_up.weight", SB_TYPE_Q4_K, E, F);
        ir_ref gate = ir_matmul(g, wg, h);
        ir_ref f = ir_swiglu(g, gate, ir_matmul(g, wu, h));
        ir_ref wd = LW("ffn_down.weight", SB_TYPE_Q6_K, F, E);
        x = ir_set_name(g, ir_add(g, x, ir_matmul(g, wd, f)), "blk.%d.out", l);
#undef LW
    }
    ir_ref on = W(g, "output_norm.weight", SB_TYPE_F32, E, 1);
    x = ir_matmul(g, emb, ir_mul(g, ir_rms_norm(g, x, 1e-6f), on));
    ir_output(g, ir_select_rows(g, x, rows), "logits");
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}

static void test_stack(void) {
    plan_target t;
    test_target(&t);
    const int L = 24;
    ir_graph *g = stack_graph(L, 512, 1);
    plan *p = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECKF(plan_build(g, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!p) return;
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("24-layer T=512 graph: %d -> %d nodes, plan_build %.1f ms, arena %llu bytes (naive %llu)\n", (int)g->n_nodes,
           (int)p->g->n_nodes, ms, (unsigned long long)p->arena_bytes, (unsigned long long)p->naive_bytes);
    CHECK(ms < 2000);
    check_no_overlap(p);
    /* one quantize per layer for attention, one for gate/up (fused with the norms), and one each
     * for wo and down (wo's input is attention, down's the fused glu) */
    int nq = 0, nnq = 0, ng = 0, full_rows = 0, one_row = 0, nfused = 0;
    for (int i = 0; i < p->g->n_nodes; i++) {
        const ir_node *n = &p->g->nodes[i];
        nq += n->op == IR_OP_QUANTIZE;
        nnq += n->op == IR_OP_RMS_NORM_QUANT;
        ng += n->op == IR_OP_GLU_QUANT;
        nfused += n->op == IR_OP_FUSED;
        if (n->op == IR_OP_MATMUL) {
            if (n->ne[1] == 512) full_rows++;
            if (n->ne[1] == 1) one_row++;
        }
    }
    CHECK_EQ_INT(nnq, 2 * L + 1);
    CHECK_EQ_INT(ng, L);
    CHECK_EQ_INT(nq, L); /* wo's input */
    /* last layer: wo, gate, up, down and the vocab matmul on 1 row; q/k/v of every layer on 512 */
    CHECK_EQ_INT(one_row, 5);
    CHECK_EQ_INT(full_rows, 7 * L - 4);
    CHECK_EQ_INT(nfused, 0); /* qwen2 has no elementwise chains: bias and residual adds are single steps */
    plan_free(p);
    ir_graph_free(g);
}

/* residual adds that feed a fused norm: every one but layer 0's attention norm input (the
 * embedding) becomes add_rms_norm_quant; the sum another add reads becomes its result 1, the last
 * one (read by the output norm only) none; the memory plan keeps results apart from what their
 * producer reads; a reference target and a broadcast add are left alone */
static void case_fuse_add_norm(void) {
    plan_target t;
    test_target(&t);
    t.fuse_add_norm = true;
    const int L = 2;
    ir_graph *g = stack_graph(L, 2, 2);
    pass_fn pre[] = {pass_dce, pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant};
    golden("fuse_add_norm", g, pre, 4, pass_fuse_add_norm, &t);
    int fused = 0, results = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        fused += g->nodes[i].op == IR_OP_ADD_RMS_NORM_QUANT;
        results += g->nodes[i].op == IR_OP_RESULT;
        if (g->nodes[i].op == IR_OP_RESULT) CHECK(g->nodes[i - 1].op == IR_OP_ADD_RMS_NORM_QUANT && ir_result_of(g, i - 1, 1) == i);
    }
    CHECK_EQ_INT(fused, 2 * L);   /* ffn norms, layer 1's attention norm, the output norm */
    CHECK_EQ_INT(results, 2 * L - 1);
    ir_graph_free(g);
    /* the whole pipeline with it: plan memory never overlaps a result with its producer's inputs */
    g = stack_graph(24, 512, 1);
    plan *p = NULL;
    CHECKF(plan_build(g, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
    if (p) {
        check_no_overlap(p);
        int nr = 0;
        for (int i = 0; i < p->g->n_nodes; i++) nr += p->g->nodes[i].op == IR_OP_RESULT;
        CHECK(nr > 24);
        plan_free(p);
    }
    ir_graph_free(g);
    /* a reference target never fuses; a broadcast (bias) add feeding a norm is not a residual */
    plan_target r;
    plan_target_reference(&r);
    r.fuse_norm_quant = true;
    g = new_graph();
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){256, 2, 1, 1});
    ir_ref bias = W(g, "b", SB_TYPE_F32, 256, 1), y = ir_input_weight(g, "y", SB_TYPE_F32, (int64_t[4]){256, 2, 1, 1});
    ir_ref s = ir_add(g, x, y);
    ir_output(g, ir_matmul(g, W(g, "w", SB_TYPE_Q4_K, 256, 8), ir_rms_norm(g, s, 1e-6f)), "o1");
    ir_output(g, ir_matmul(g, W(g, "w2", SB_TYPE_Q4_K, 256, 8), ir_rms_norm(g, ir_add(g, x, bias), 1e-6f)), "o2");
    ir_output(g, s, "sum");
    pass_ctx cx = {.target = &t};
    CHECK(pass_quantize_once(g, &cx) == SB_OK && pass_fuse_norm_quant(g, &cx) == SB_OK);
    char *before = ir_print_str(g);
    cx.target = &r;
    CHECK(pass_fuse_add_norm(g, &cx) == SB_OK);
    char *after = ir_print_str(g);
    CHECK(!strcmp(before, after));
    free(after);
    cx.target = &t;
    CHECK(pass_fuse_add_norm(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    int nf = 0, nadd = 0;
    for (int i = 0; i < g->n_nodes; i++) nf += g->nodes[i].op == IR_OP_ADD_RMS_NORM_QUANT, nadd += g->nodes[i].op == IR_OP_ADD;
    CHECK_EQ_INT(nf, 1);
    CHECK_EQ_INT(nadd, 1); /* the bias add */
    free(before);
    ir_graph_free(g);
}

/* a RESULT must sit right after its producer (and its lower results) */
static void test_verify_results(void) {
    ir_graph *g = new_graph();
    ir_ref a = ir_input_weight(g, "a", SB_TYPE_F32, (int64_t[4]){256, 2, 1, 1}), b = ir_input_weight(g, "b", SB_TYPE_F32, (int64_t[4]){256, 2, 1, 1});
    ir_node f = ir_proto(IR_OP_ADD_RMS_NORM_QUANT);
    f.dtype = SB_TYPE_Q8_K, f.src[0] = a, f.src[1] = b, f.fp[0] = 1e-6f;
    ir_ref q = ir_append(g, &f);
    ir_node r = ir_proto(IR_OP_RESULT);
    r.src[0] = q, r.ip[0] = 1;
    ir_ref res = ir_append(g, &r);
    CHECK(q != IR_NONE && res == q + 1 && ir_verify(g) == SB_OK);
    CHECK_EQ_INT(g->nodes[res].dtype, SB_TYPE_F32);
    g->nodes[res].ip[0] = 2; /* no result 2 */
    CHECK(ir_verify(g) != SB_OK);
    g->nodes[res].ip[0] = 1;
    ir_ref other = ir_add(g, a, b); /* a node between the producer and a second result */
    (void)other;
    ir_append(g, &r);
    CHECK(ir_verify(g) != SB_OK);
    ir_graph_free(g);
}

/* slice_view: a computed [16, 4] row's slice 1 (64 bytes on: aligned) becomes a view the memory
 * plan puts 64 bytes into the row's memory; slices that are not contiguous (a second token),
 * not aligned (4-wide rows: 16 and 32 bytes on) or of a plan input stay copies; a target without
 * slice_view converts nothing */
static ir_graph *slice_graph(int64_t a, int64_t tokens, bool of_input) {
    ir_graph *g = new_graph();
    const ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){a, 4, tokens, 1});
    const ir_ref h = of_input ? x : ir_scale(g, x, 2.0f);
    const ir_ref s1 = ir_slice(g, h, 1, 1), s2 = ir_slice(g, h, 2, 1); /* in this order on every compiler */
    ir_output(g, ir_add(g, s1, s2), "y");
    return g;
}
static int count_op(const ir_graph *g, ir_op op) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += g->nodes[i].op == op;
    return k;
}
static void case_slice_view(void) {
    plan_target t;
    test_target(&t);
    t.slice_view = true;
    ir_graph *g = slice_graph(16, 1, false);
    golden("slice_view", g, NULL, 0, pass_slice_view, &t);
    ir_graph_free(g);
    g = slice_graph(16, 1, false);
    plan *p = NULL;
    CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
    if (p) {
        int views = 0;
        for (int i = 0; i < p->g->n_nodes; i++) {
            const ir_node *n = &p->g->nodes[i];
            if (n->op != IR_OP_VIEW) continue;
            const plan_value *v = &p->vals[i], *root = &p->vals[v->alias];
            CHECKF(v->offset == root->offset + 4 * (uint64_t)n->ip[0] && v->alias == n->src[0], "view %%%d at %llu, root at %llu, ip %d", i,
                   (unsigned long long)v->offset, (unsigned long long)root->offset, n->ip[0]);
            views++;
        }
        CHECK_EQ_INT(views, 2);
        plan_free(p);
    }
    ir_graph_free(g);
    const int64_t no[3][2] = {{16, 2}, {4, 1}, {16, 1}}; /* a second token; 16- and 32-byte offsets; (of an input) */
    for (int k = 0; k < 3; k++) {
        g = slice_graph(no[k][0], no[k][1], k == 2);
        pass_ctx cx = {.target = &t};
        check_unchanged(g, &cx, pass_slice_view, NULL);
        CHECK_EQ_INT(count_op(g, IR_OP_SLICE), 2);
        ir_graph_free(g);
    }
    t.slice_view = false;
    g = slice_graph(16, 1, false);
    pass_ctx cx = {.target = &t};
    check_unchanged(g, &cx, pass_slice_view, NULL);
    ir_graph_free(g);
}

/* fuse_launch_store, decode: the Q/K/V group's K rope_store and V kv_store are marked by_launch
 * (the stores stay, marked); a target refusing rope_stores marks V's only; at 2 tokens, or without
 * launch_store_fits, nothing; a node between the launch and the store that reads the cache keeps
 * that store (the gemma-style graph's k norm does not: it reads K, not the cache) */
static bool store_any(const ir_graph *g, const ir_node *l, const ir_node *s) { return g && l && s; }
static bool store_kv_only(const ir_graph *g, const ir_node *l, const ir_node *s) { return g && l && s->op == IR_OP_KV_STORE; }
static int count_by_launch(const ir_graph *g) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += ir_store_by_launch(&g->nodes[i]);
    return k;
}
static void case_fuse_launch_store(void) {
    plan_target t;
    decode_group_target(&t);
    t.fuse_rope_store = true;
    t.launch_store_fits = store_any;
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_rope_store, pass_fuse_matmul_group};
    ir_graph *g = attn_ffn_graph_t(false, 1);
    golden("fuse_launch_store", g, pre, 7, pass_fuse_launch_store, &t);
    int ks = 0;
    for (int i = 0; i < g->n_nodes; i++) ks += g->nodes[i].op == IR_OP_ROPE_STORE && ir_store_by_launch(&g->nodes[i]);
    CHECK_EQ_INT(count_by_launch(g), 2);
    CHECK_EQ_INT(ks, 1);
    ir_graph_free(g);
    bool (*const fits[2])(const ir_graph *, const ir_node *, const ir_node *) = {store_kv_only, NULL};
    for (int k = 0; k < 2; k++) {
        t.launch_store_fits = fits[k];
        g = attn_ffn_graph_t(false, 1);
        pass_ctx cx = {.target = &t};
        for (int q = 0; q < 7; q++) CHECK(pre[q](g, &cx) == SB_OK);
        CHECK(pass_fuse_launch_store(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
        CHECK_EQ_INT(count_by_launch(g), 1 - k);
        ir_graph_free(g);
    }
    t.launch_store_fits = store_any;
    g = attn_ffn_graph_t(false, 2);
    pass_ctx cx = {.target = &t};
    for (int q = 0; q < 7; q++) CHECK(pre[q](g, &cx) == SB_OK);
    check_unchanged(g, &cx, pass_fuse_launch_store, NULL);
    ir_graph_free(g);
    /* a store into V's cache between the launch and V's store keeps V's store the executor's (the
     * launch would write first); z's, right after its matmul, is marked */
    g = new_graph();
    const int64_t E = 256, Dkv = 128, C = 16;
    ir_ref pos = ir_input_pos(g, 1), x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    ir_ref vc = ir_input_kv(g, "cache_v_l0", SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
    ir_ref v = ir_matmul(g, W(g, "wv", SB_TYPE_Q4_K, E, Dkv), x), z = ir_matmul(g, W(g, "wz", SB_TYPE_Q4_K, E, Dkv), x);
    ir_ref zs = ir_kv_store(g, vc, z, pos), vs = ir_kv_store(g, vc, v, pos);
    CHECK(ir_graph_status(g) == SB_OK);
    CHECK(pass_fuse_launch_store(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    CHECK(ir_store_by_launch(&g->nodes[zs]) && !ir_store_by_launch(&g->nodes[vs]));
    ir_graph_free(g);
}

/* fuse_rope_jobs, prefill (T = 16, K, V, Q one group, a target whose group takes any types):
 * K's rope_store, V's kv_store and Q's rope run one after another and become one launch of three
 * jobs (the golden file); a target refusing a rope after the first job links the two stores only;
 * rope_jobs_max 2 likewise; without rope_job_fits nothing. The memory plan then keeps what every job
 * reads until the launch's last job: no job's output over another job's input (fails without
 * plan_memory's keep_job_reads: Q's rope output lands on K's and V's freed memory). */
static bool job_any(const ir_graph *g, const ir_node *j, int k) { return g && j && k >= 0; }
static bool job_no_late_rope(const ir_graph *g, const ir_node *j, int k) { return g && (k == 0 || j->op != IR_OP_ROPE); }
static int count_links(const ir_graph *g) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += ir_job_next(&g->nodes[i], i) != IR_NONE;
    return k;
}
static void rope_jobs_target(plan_target *t) {
    decode_group_target(t);
    t->fuse_rope_store = true;
    t->matmul_group_max_t = INT64_MAX;
    t->group_member_fits = prefill_member;
    t->group_fits = NULL;
    t->rope_jobs_max = 4;
    t->rope_job_fits = job_any;
}
/* every arena value a job of a launch reads against every job's output in it */
static int job_clashes(const plan *p) {
    const ir_graph *g = p->g;
    int bad = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (ir_job_next(&g->nodes[i], i) == IR_NONE) continue;
        for (int32_t a = i; a != IR_NONE; a = ir_job_next(&g->nodes[a], a)) {
            const plan_value *out = &p->vals[p->vals[a].alias];
            if (out->input >= 0) continue; /* a store: the cache */
            for (int32_t b = i; b != IR_NONE; b = ir_job_next(&g->nodes[b], b))
                for (int s = 0; s < IR_MAX_SRC && g->nodes[b].src[s] != IR_NONE; s++) {
                    const plan_value *in = &p->vals[p->vals[g->nodes[b].src[s]].alias];
                    if (in->input >= 0 || in == out) continue;
                    bad += in->offset < out->offset + out->bytes && out->offset < in->offset + in->bytes;
                }
        }
    }
    return bad;
}
static void case_fuse_rope_jobs(void) {
    plan_target t;
    rope_jobs_target(&t);
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_rope_store, pass_fuse_matmul_group, pass_fuse_group_glu};
    ir_graph *g = attn_ffn_graph_t(false, 16);
    golden("fuse_rope_jobs", g, pre, 8, pass_fuse_rope_jobs, &t);
    CHECK_EQ_INT(count_links(g), 2);
    ir_graph_free(g);
    for (int k = 0; k < 3; k++) { /* no late rope; at most 2 jobs; no callback */
        plan_target u = t;
        if (k == 0) u.rope_job_fits = job_no_late_rope;
        if (k == 1) u.rope_jobs_max = 2;
        if (k == 2) u.rope_job_fits = NULL;
        g = attn_ffn_graph_t(false, 16);
        pass_ctx cx = {.target = &u};
        for (int q = 0; q < 8; q++) CHECK(pre[q](g, &cx) == SB_OK);
        CHECK(pass_fuse_rope_jobs(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
        CHECK_EQ_INT(count_links(g), k == 2 ? 0 : 1);
        ir_graph_free(g);
    }
    /* the whole pipeline and the memory plan: the launch's jobs clash nowhere */
    g = attn_ffn_graph_t(false, 16);
    plan *p = NULL;
    plan_dump d = {.spec = "", .f = NULL};
    CHECKF(plan_build(g, &t, &d, &p) == SB_OK, "%s", sb_last_error());
    if (p) {
        CHECK_EQ_INT(count_links(p->g), 2);
        CHECK_EQ_INT(job_clashes(p), 0);
        check_no_overlap(p);
        plan_free(p);
    }
    ir_graph_free(g);
    /* a link to a node that is no job fails the verifier */
    g = attn_ffn_graph_t(false, 16);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == IR_OP_ROPE_STORE || g->nodes[i].op == IR_OP_KV_STORE) {
            g->nodes[i].ip[IR_JOB_NEXT] = g->n_nodes - i; /* past the end */
            break;
        }
    CHECK(ir_verify(g) != SB_OK && strstr(sb_last_error(), "links to"));
    ir_graph_free(g);
}

/* fuse_group_jobs: the T = 16 K, V, Q group whose results only the launch of jobs after it reads
 * (K's rope_store, V's kv_store, Q's rope) is marked (the golden file); where Q's rope is no job of
 * that launch (rope_jobs_max 2), or the target has no group_jobs_fits, nothing is */
static bool group_any(const ir_graph *g, const ir_node *grp) { return g && grp; }
static int count_jobs_sum(const ir_graph *g) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += ir_group_jobs_sum(&g->nodes[i]);
    return k;
}
static void case_fuse_group_jobs(void) {
    plan_target t;
    rope_jobs_target(&t);
    t.group_jobs_fits = group_any;
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_rope_store, pass_fuse_matmul_group, pass_fuse_group_glu, pass_fuse_rope_jobs};
    ir_graph *g = attn_ffn_graph_t(false, 16);
    golden("fuse_group_jobs", g, pre, 9, pass_fuse_group_jobs, &t);
    CHECK_EQ_INT(count_jobs_sum(g), 1);
    ir_graph_free(g);
    for (int k = 0; k < 2; k++) {
        plan_target u = t;
        if (k == 0) u.rope_jobs_max = 2;
        if (k == 1) u.group_jobs_fits = NULL;
        g = attn_ffn_graph_t(false, 16);
        pass_ctx cx = {.target = &u};
        for (int q = 0; q < 9; q++) CHECK(pre[q](g, &cx) == SB_OK);
        CHECK(pass_fuse_group_jobs(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
        CHECK_EQ_INT(count_jobs_sum(g), 0);
        ir_graph_free(g);
    }
}

/* fuse_norm_sums: at T = 16 the O projection adds the residual x itself and the ffn norm after it
 * sums its partials (the golden file: sums_partials_of on that norm); a target refusing marks
 * nothing. The memory plan keeps x (the matmul's addend, last read by the matmul) live until the
 * norm: the norm's output never lands on it (fails without plan_memory's keep_norm_sum_reads). */
static bool norm_sum_any(const ir_graph *g, const ir_node *m, const ir_node *n) { return g && m && n; }
static int count_norm_sums(const ir_graph *g, ir_ref *norm) {
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (ir_norm_sums_of(&g->nodes[i], i) != IR_NONE) k++, *norm = i;
    return k;
}
static void case_fuse_norm_sums(void) {
    plan_target t;
    rope_jobs_target(&t);
    t.norm_sum_fits = norm_sum_any;
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise, pass_fuse_matmul_add,
                     pass_fuse_add_norm, pass_fuse_rope_store, pass_fuse_matmul_group, pass_fuse_group_glu};
    ir_graph *g = attn_ffn_graph_t(false, 16);
    golden("fuse_norm_sums", g, pre, 9, pass_fuse_norm_sums, &t);
    ir_ref nn = IR_NONE;
    CHECK_EQ_INT(count_norm_sums(g, &nn), 1);
    ir_graph_free(g);
    plan_target u = t;
    u.norm_sum_fits = NULL;
    g = attn_ffn_graph_t(false, 16);
    pass_ctx cx = {.target = &u};
    for (int q = 0; q < 9; q++) CHECK(pre[q](g, &cx) == SB_OK);
    check_unchanged(g, &cx, pass_fuse_norm_sums, NULL);
    ir_graph_free(g);
    /* r = silu(x) computed, h = W1 r + r (the matmul adds r), y = W2 rms_norm_quant(h): r's last reader
     * is the matmul, so without the norm's read of it the norm's output would reuse r's memory */
    g = new_graph();
    const ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){256, 16, 1, 1});
    const ir_ref r = ir_silu(g, x);
    const ir_ref h = ir_add(g, ir_matmul(g, W(g, "w1", SB_TYPE_Q4_K, 256, 256), r), r);
    const ir_ref wn = W(g, "wn", SB_TYPE_F32, 256, 1); /* one node-making call an argument list (clang's order is gcc's reverse) */
    const ir_ref hn = ir_mul(g, ir_rms_norm(g, h, 1e-6f), wn);
    ir_output(g, ir_matmul(g, W(g, "w2", SB_TYPE_Q4_K, 256, 256), hn), "y");
    CHECK(ir_graph_status(g) == SB_OK);
    plan *p = NULL;
    plan_dump d = {.spec = "", .f = NULL};
    CHECKF(plan_build(g, &t, &d, &p) == SB_OK, "%s", sb_last_error());
    if (p && count_norm_sums(p->g, &nn) == 1) {
        const ir_ref m = ir_norm_sums_of(&p->g->nodes[nn], nn), o = ir_matmul_addend(&p->g->nodes[m]);
        CHECK(o != IR_NONE && p->vals[p->vals[o].alias].input < 0);
        const plan_value *vn = &p->vals[nn], *vo = &p->vals[p->vals[o].alias];
        CHECKF(vn->offset >= vo->offset + vo->bytes || vo->offset >= vn->offset + vn->bytes,
               "norm %%%d at %llu over the addend %%%d at %llu", (int)nn, (unsigned long long)vn->offset, (int)o, (unsigned long long)vo->offset);
        check_no_overlap(p);
    } else {
        CHECK(0);
    }
    plan_free(p);
    ir_graph_free(g);
}

/* a paged decode step's K rope and stores (rotated at pos, written at the slots): fuse_rope_store
 * makes rope_store(cache, x, pos, slots, ff) with ir_store_rows the slots and the freq factors after
 * them; fuse_launch_store then marks both stores by_launch, as on a contiguous cache; the verifier
 * refuses a fifth source without the rows flag and rows of the wrong length */
static void case_paged_stores(void) {
    plan_target t;
    decode_group_target(&t);
    t.fuse_rope_store = true;
    t.launch_store_fits = store_any;
    ir_graph *g = new_graph();
    const int64_t E = 256, Dkv = 128, D = 64, C = 32;
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1}), pos = ir_input_pos(g, 1), slots = ir_input_slots(g, 1);
    ir_ref ff = W(g, "rope_freqs.weight", SB_TYPE_F32, D / 2, 1);
    ir_ref kc = ir_input_kv(g, "cache_k_l0", SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
    ir_ref vc = ir_input_kv(g, "cache_v_l0", SB_TYPE_F16, (int64_t[4]){Dkv, C, 1, 1});
    ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), W(g, "blk.0.attn_norm.weight", SB_TYPE_F32, E, 1));
    ir_ref k = ir_matmul(g, W(g, "wk", SB_TYPE_Q4_K, E, Dkv), h), v = ir_matmul(g, W(g, "wv", SB_TYPE_Q6_K, E, Dkv), h);
    ir_rope_params rp = {.n_rot = D, .mode = IR_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
    k = ir_rope(g, ir_reshape(g, k, (int64_t[4]){D, Dkv / D, 1, 1}), pos, ff, &rp);
    ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){Dkv, 1, 1, 1}), slots);
    ir_kv_store(g, vc, v, slots);
    ir_output(g, h, "h");
    CHECK(ir_graph_status(g) == SB_OK);
    pass_ctx cx = {.target = &t};
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_rope_store, pass_fuse_matmul_group};
    for (int q = 0; q < 4; q++) CHECK(pre[q](g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    int rs = 0, ropes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        ropes += n->op == IR_OP_ROPE;
        if (n->op != IR_OP_ROPE_STORE) continue;
        rs++;
        CHECK(g->nodes[n->src[2]].op == IR_OP_POS && g->nodes[ir_store_rows(n)].op == IR_OP_SLOTS && ir_rope_store_ff(n) != IR_NONE &&
              !strcmp(g->nodes[ir_rope_store_ff(n)].name, "rope_freqs.weight"));
        ir_node bad = *n; /* the flag off: five sources */
        bad.ip[IR_STORE_ROWS] = 0;
        CHECK(ir_infer_shape(g, &bad) != SB_OK);
        bad = *n; /* rows that are no i32 [T]: the cache */
        bad.src[3] = n->src[0];
        CHECK(ir_infer_shape(g, &bad) != SB_OK);
    }
    CHECK_EQ_INT(rs, 1);
    CHECK_EQ_INT(ropes, 0);
    CHECK(pass_fuse_launch_store(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
    CHECK_EQ_INT(count_by_launch(g), 2);
    ir_graph_free(g);
}

// ---- chains with a quantize tail ----

/* gemma-shaped sandwich norms (no attention), T tokens, two layers: each layer's post-norm + residual
 * chains, the first read by the FFN's pre-norm (an rms_norm_quant tail), the second by a matmul (a
 * quantize tail), the third by the next pre-norm */
static ir_graph *sandwich_graph(int64_t T) {
    ir_graph *g = new_graph();
    const int64_t E = 256, V = 512;
    ir_ref x = W(g, "x", SB_TYPE_F32, E, T);
    for (int l = 0; l < 2; l++) {
        char nm[64];
#define LW(s, ty, a, b) (snprintf(nm, sizeof nm, "blk.%d." s, l), W(g, nm, ty, a, b))
        ir_ref h = ir_rms_norm(g, x, 1e-6f);
        h = ir_mul(g, h, LW("attn_norm.weight", SB_TYPE_F32, E, 1));
        ir_ref a = ir_matmul(g, LW("attn_q.weight", SB_TYPE_Q4_K, E, E), h);
        a = ir_rms_norm(g, a, 1e-6f);
        a = ir_mul(g, a, LW("post_attention_norm.weight", SB_TYPE_F32, E, 1));
        x = ir_add(g, a, x);
        h = ir_rms_norm(g, x, 1e-6f);
        h = ir_mul(g, h, LW("ffn_norm.weight", SB_TYPE_F32, E, 1));
        ir_ref f = ir_matmul(g, LW("ffn_up.weight", SB_TYPE_Q4_K, E, E), h);
        f = ir_rms_norm(g, f, 1e-6f);
        f = ir_mul(g, f, LW("post_ffw_norm.weight", SB_TYPE_F32, E, 1));
        x = ir_add(g, f, x);
        ir_ref p = ir_matmul(g, LW("inp_gate.weight", SB_TYPE_Q4_K, E, E), x);
        p = ir_rms_norm(g, p, 1e-6f);
        p = ir_mul(g, p, LW("post_norm.weight", SB_TYPE_F32, E, 1));
        x = ir_set_name(g, ir_add(g, p, x), "blk.%d.out", l);
#undef LW
    }
    ir_ref h = ir_rms_norm(g, x, 1e-6f);
    h = ir_mul(g, h, W(g, "output_norm.weight", SB_TYPE_F32, E, 1));
    ir_output(g, ir_matmul(g, W(g, "output.weight", SB_TYPE_Q4_K, E, V), h), "logits");
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}

static int count_tails(const ir_graph *g) {
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) n += ir_fused_tail_of(&g->nodes[i]).op != 0;
    return n;
}

static void case_fuse_chain_quant(void) {
    plan_target t;
    test_target(&t);
    t.chain_quant_max_t = 2;
    pass_fn pre[] = {pass_quantize_once, pass_fuse_norm_quant, pass_fuse_act_quant, pass_fuse_elementwise};
    ir_graph *g = sandwich_graph(2);
    golden("fuse_chain_quant", g, pre, 4, pass_fuse_chain_quant, &t);
    CHECK_EQ_INT(count_tails(g), 6);
    /* the verifier refuses a broken tail: an f32 type, a weight slot past the sources, an eps on a
     * plain quantize, tail params without a tail */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ir_node *f = &g->nodes[i];
        if (ir_fused_tail_of(f).op != IR_OP_RMS_NORM_QUANT) continue;
        const ir_node keep = *f;
        for (int k = 0; k < 4; k++) {
            if (k == 0) f->ip[IR_FUSED_TAIL + 1] = SB_TYPE_F32;
            if (k == 1) f->ip[IR_FUSED_TAIL + 2] = 6;
            if (k == 2) f->ip[IR_FUSED_TAIL] = IR_OP_QUANTIZE, f->ip[IR_FUSED_TAIL + 2] = 0;
            if (k == 3) f->ip[IR_FUSED_TAIL] = 0;
            CHECKF(ir_verify(g) == SB_ERR_INTERNAL, "broken tail %d of %%%d verified", k, (int)i);
            *f = keep;
        }
        CHECK(ir_verify(g) == SB_OK);
        break;
    }
    ir_graph_free(g);
    /* more rows than the target allows, or a target that never asks: unchanged */
    for (int k = 0; k < 2; k++) {
        t.chain_quant_max_t = k ? 0 : 2;
        g = sandwich_graph(k ? 2 : 3);
        pass_ctx cx = {.target = &t};
        for (int q = 0; q < 4; q++) CHECK(pre[q](g, &cx) == SB_OK);
        check_unchanged(g, &cx, pass_fuse_chain_quant, NULL);
        ir_graph_free(g);
    }
    /* a chain whose eight sources are taken keeps its norm quantizer apart (no slot for the weight);
     * the same chain with the weight among its operands takes it */
    t.chain_quant_max_t = 1;
    for (int shared = 0; shared < 2; shared++) {
        g = new_graph();
        const int64_t E = 256;
        ir_ref x = W(g, "x", SB_TYPE_F32, E, 1), nw = W(g, "nw", SB_TYPE_F32, E, 1);
        for (int k = 0; k < 7; k++) {
            char nm[16];
            snprintf(nm, sizeof nm, "b%d", k);
            x = ir_add(g, x, shared && k == 6 ? nw : W(g, nm, SB_TYPE_F32, E, 1));
        }
        ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), nw);
        ir_output(g, ir_matmul(g, W(g, "w", SB_TYPE_Q4_K, E, 64), h), "y");
        ir_output(g, x, "x_out");
        pass_ctx cx = {.target = &t};
        for (int q = 0; q < 4; q++) CHECK(pre[q](g, &cx) == SB_OK);
        CHECK(pass_fuse_chain_quant(g, &cx) == SB_OK && ir_verify(g) == SB_OK);
        CHECK_EQ_INT(count_tails(g), shared);
        ir_graph_free(g);
    }
}

// ---- the rewrite frame ----

/* what probe_rewrite saw (the nodes offered, in order?) and what it does: at append_at an add of
 * the node with itself (changed), at bad_at an add of mismatched shapes whose failure it ignores,
 * at fail_at a failure it returns */
static struct {
    int32_t calls, last;
    bool in_order;
    ir_ref append_at, bad_at, fail_at;
} probe;

static void probe_reset(void) {
    probe.calls = 0, probe.last = -1, probe.in_order = true;
    probe.append_at = probe.bad_at = probe.fail_at = IR_NONE;
}

static sb_status probe_rewrite(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    (void)uses, (void)cx;
    probe.in_order &= i == probe.last + 1;
    probe.last = i, probe.calls++;
    if (i == probe.fail_at) return SB_ERR_INVALID_ARG;
    ir_node a = ir_proto(IR_OP_ADD);
    a.src[0] = a.src[1] = i;
    if (i == probe.bad_at) a.src[1] = 0, ir_append(g, &a), *changed = true; /* its failure stays in g->status */
    if (i == probe.append_at) {
        if (ir_append(g, &a) == IR_NONE) return ir_graph_status(g);
        *changed = true;
    }
    return SB_OK;
}

/* x f32[64,2], w f32[32] (a source bad_at can mismatch), a dead mul(x, x), y = add(x, x) output */
static ir_graph *frame_graph(void) {
    ir_graph *g = new_graph();
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){64, 2, 1, 1});
    W(g, "w", SB_TYPE_F32, 32, 1);
    ir_mul(g, x, x);
    ir_output(g, ir_add(g, x, x), "y");
    CHECK(ir_graph_status(g) == SB_OK && g->n_nodes == 5);
    return g;
}

/* pass_rewrite_nodes offers every node on entry in order, compacts only when a rewrite changed the
 * graph, and returns a failing rewrite's status or a sticky graph status without compacting */
static void test_rewrite_frame(void) {
    pass_ctx cx = {.target = NULL};
    ir_graph *g = frame_graph();
    probe_reset();
    CHECK(pass_rewrite_nodes(g, probe_rewrite, &cx) == SB_OK);
    CHECK(probe.calls == 5 && probe.in_order);
    CHECK_EQ_INT(g->n_nodes, 5); /* nothing changed: the dead mul stays */
    probe_reset();
    probe.append_at = 3;
    CHECK(pass_rewrite_nodes(g, probe_rewrite, &cx) == SB_OK && ir_verify(g) == SB_OK);
    CHECK(probe.calls == 5 && probe.in_order); /* the appended add is not offered */
    CHECK_EQ_INT(g->n_nodes, 3); /* compacted: x, add, output */
    ir_graph_free(g);

    g = frame_graph();
    probe_reset();
    probe.append_at = 0, probe.fail_at = 2;
    CHECK(pass_rewrite_nodes(g, probe_rewrite, &cx) == SB_ERR_INVALID_ARG);
    CHECK(probe.calls == 3 && probe.last == 2); /* the walk stops at the failure */
    CHECK_EQ_INT(g->n_nodes, 6);                /* and nothing is compacted */
    ir_graph_free(g);

    g = frame_graph();
    probe_reset();
    probe.bad_at = 1; /* add(w, x): [32] + [64,2] */
    CHECK(pass_rewrite_nodes(g, probe_rewrite, &cx) != SB_OK);
    CHECK(ir_graph_status(g) != SB_OK && g->n_nodes == 5);
    ir_graph_free(g);
}

int main(void) {
    test_stack();
    case_fuse_add_norm();
    case_fuse_chain_quant();
    test_verify_results();
    case_dce();
    case_quantize_once();
    case_act_f32_rows();
    case_fuse_norm_quant();
    case_fuse_act_quant();
    case_fuse_elementwise();
    case_fuse_rope_store();
    case_fuse_norm_rope();
    case_fuse_matmul_add();
    case_fuse_attn();
    case_fuse_attn_rope_paged();
    case_fuse_matmul_group();
    case_fuse_group_glu();
    case_fuse_matmul_group_prefill();
    case_fuse_launch_store();
    case_fuse_rope_jobs();
    case_fuse_group_jobs();
    case_fuse_norm_sums();
    case_paged_stores();
    case_slice_view();
    test_verifier();
    test_memplan();
    test_pipeline_dump();
    test_rewrite_frame();
    return test_summary();
}
