/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_exec_cpu.c — the CPU executor end to end on small graphs:
 *  - embedding -> rms_norm x w -> output matmul -> select_rows, checked against a double-precision
 *    re-computation (explicit and default out_rows);
 *  - one transformer block (GQA attention with RoPE and a KV cache, SwiGLU FFN, residuals):
 *    planned with the reference target and with the CPU target (quantize-once + fusions) gives the
 *    same logits; prefill of T tokens == prefill of T-1 then a decode step; 1 thread == 2 threads;
 *    the adds as matmul addends (fuse_matmul_add) give the same bits;
 *  - quantized weights (Q8_0, Q4_K) through quantize-once and the CPU kernels stay within NMSE 1e-3
 *    of the f32-activation reference;
 *  - bad bindings: unbound input, small arena, token out of range, position past the cache,
 *    out_rows out of range — each its own status, nothing run.
 */
#include "runtime/exec_cpu.h"

#include "backend/cpu/cpu_kernels.h"
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"

static uint64_t rng = 0x1234feedull;

static float *rnd(int64_t n, float s) { return test_rand_normals(&rng, n, s); }

typedef struct bind {
    const char *name;
    void *ptr;
} bind;

/* run p with the named buffers; returns the status, out[0] = first output */
static sb_status run(const plan *p, const bind *bs, int nb, tp_pool *pool, const float **out, void **arena_keep) {
    void *data[64] = {0};
    for (int i = 0; i < p->n_inputs; i++)
        for (int j = 0; j < nb; j++)
            if (!strcmp(p->inputs[i].name, bs[j].name)) data[i] = bs[j].ptr;
    uint64_t need = exec_cpu_arena_bytes(p, tp_threads(pool));
    void *arena = aligned_alloc(PLAN_ALIGN, (need + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    exec_bindings b = {.data = data, .n_data = p->n_inputs, .arena = arena, .arena_bytes = need};
    sb_status s = exec_cpu_run(p, &b, pool, out);
    *arena_keep = arena;
    return s;
}

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return num / (den > 0 ? den : 1);
}

// ---- 1: embedding -> norm -> matmul ----

static void test_small_e2e(void) {
    enum { E = 32, V = 16, T = 3 };
    float *emb = rnd(E * V, 1), *nw = rnd(E, 1), *wo = rnd(E * V, 0.2f);
    ir_graph *g;
    CHECK(ir_graph_create(&g) == SB_OK);
    ir_ref tok = ir_input_tokens(g, T), rows = ir_input_out_rows(g, 2);
    ir_ref x = ir_get_rows(g, ir_input_weight(g, "emb", SB_TYPE_F32, (int64_t[4]){E, V, 1, 1}), tok);
    x = ir_mul(g, ir_rms_norm(g, x, 1e-5f), ir_input_weight(g, "nw", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1}));
    x = ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_F32, (int64_t[4]){E, V, 1, 1}), x);
    ir_output(g, ir_select_rows(g, x, rows), "logits");
    int32_t toks[T] = {3, 15, 0}, sel[2] = {2, 0};
    for (int tgt = 0; tgt < 2; tgt++) {
        plan_target t;
        if (tgt) exec_cpu_target(&t); else plan_target_reference(&t);
        plan *p = NULL;
        CHECKF(plan_build(g, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
        if (!p) continue;
        for (int dflt = 0; dflt < 2; dflt++) {
            bind bs[] = {{"tokens", toks}, {"out_rows", dflt ? NULL : sel}, {"emb", emb}, {"nw", nw}, {"wo", wo}};
            const float *out[1] = {0};
            void *arena;
            sb_status s = run(p, bs, 5, NULL, out, &arena);
            CHECKF(s == SB_OK, "%s", sb_last_error());
            double maxerr = 0;
            for (int r = 0; r < 2; r++) {
                int t = dflt ? 1 + r : sel[r];
                const float *e = emb + toks[t] * E;
                double ss = 0;
                for (int i = 0; i < E; i++) ss += (double)e[i] * e[i];
                double sc = 1 / sqrt(ss / E + 1e-5);
                for (int v = 0; v < V; v++) {
                    double acc = 0;
                    for (int i = 0; i < E; i++) acc += e[i] * sc * nw[i] * wo[v * E + i];
                    maxerr = fmax(maxerr, fabs(acc - out[0][r * V + v]));
                }
            }
            CHECKF(maxerr < 1e-4, "target %d default %d max err %g", tgt, dflt, maxerr);
            free(arena);
        }
        plan_free(p);
    }
    ir_graph_free(g);
    free(emb), free(nw), free(wo);
}

// ---- 2: a transformer block ----

enum { E = 256, V = 64, D = 32, HQ = 8, HKV = 2, F = 512, C = 16, DKV = D * HKV };

typedef struct weights {
    int wtype;          /* type of the big matrices */
    void *emb, *wq, *wk, *wv, *wo, *wg, *wu, *wd, *out;
    float *an, *fn, *on, *bq;
} weights;

static void *mk(int type, int64_t K, int64_t N, float s) {
    float *f = rnd(K * N, s);
    if (type == SB_TYPE_F32) return f;
    uint64_t rb = 0;
    qk_row_bytes(type, K, &rb);
    void *q = malloc(rb * (uint64_t)N);
    for (int64_t n = 0; n < N; n++) op_quantize_row((uint8_t *)q + rb * (uint64_t)n, type, f + n * K, K);
    free(f);
    return q;
}

static void weights_init(weights *w, int type) {
    w->wtype = type;
    w->emb = mk(SB_TYPE_F32, E, V, 1);
    w->wq = mk(type, E, E, 0.06f), w->wk = mk(type, E, DKV, 0.06f), w->wv = mk(type, E, DKV, 0.06f);
    w->wo = mk(type, E, E, 0.06f), w->wg = mk(type, E, F, 0.06f), w->wu = mk(type, E, F, 0.06f);
    w->wd = mk(type, F, E, 0.04f), w->out = mk(type, E, V, 0.06f);
    w->an = rnd(E, 0.2f), w->fn = rnd(E, 0.2f), w->on = rnd(E, 0.2f), w->bq = rnd(E, 0.1f);
    for (int i = 0; i < E; i++) w->an[i] += 1, w->fn[i] += 1, w->on[i] += 1;
}

static void weights_free(weights *w) {
    void *p[] = {w->emb, w->wq, w->wk, w->wv, w->wo, w->wg, w->wu, w->wd, w->out, w->an, w->fn, w->on, w->bq};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

static ir_graph *block_graph(int64_t T, int64_t n_out, int type) {
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref tok = ir_input_tokens(g, T), pos = ir_input_pos(g, T), rows = ir_input_out_rows(g, n_out);
#define WT(name, ty, a, b) ir_input_weight(g, name, ty, (int64_t[4]){a, b, 1, 1})
    ir_ref x = ir_get_rows(g, WT("emb", SB_TYPE_F32, E, V), tok);
    ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), WT("an", SB_TYPE_F32, E, 1));
    ir_ref q = ir_add(g, ir_matmul(g, WT("wq", type, E, E), h), WT("bq", SB_TYPE_F32, E, 1));
    ir_ref k = ir_matmul(g, WT("wk", type, E, DKV), h), v = ir_matmul(g, WT("wv", type, E, DKV), h);
    ir_rope_params rp = {.n_rot = D, .mode = IR_ROPE_NEOX, .freq_base = 10000, .freq_scale = 1};
    q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, HQ, T, 1}), pos, IR_NONE, &rp);
    k = ir_rope(g, ir_reshape(g, k, (int64_t[4]){D, HKV, T, 1}), pos, IR_NONE, &rp);
    ir_ref kc = ir_kv_store(g, ir_input_kv(g, "k0", SB_TYPE_F32, (int64_t[4]){DKV, C, 1, 1}),
                            ir_reshape(g, k, (int64_t[4]){DKV, T, 1, 1}), pos);
    ir_ref vc = ir_kv_store(g, ir_input_kv(g, "v0", SB_TYPE_F32, (int64_t[4]){DKV, C, 1, 1}), v, pos);
    ir_attn_params ap = {.n_head_kv = HKV, .head_dim = D, .scale = 1.0f / sqrtf((float)D)};
    x = ir_add(g, x, ir_matmul(g, WT("wo", type, E, E), ir_attention(g, q, kc, vc, pos, &ap)));
    h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), WT("fn", SB_TYPE_F32, E, 1));
    ir_ref ff = ir_swiglu(g, ir_matmul(g, WT("wg", type, E, F), h), ir_matmul(g, WT("wu", type, E, F), h));
    x = ir_add(g, x, ir_matmul(g, WT("wd", type, F, E), ff));
    x = ir_matmul(g, WT("out", type, E, V), ir_mul(g, ir_rms_norm(g, x, 1e-6f), WT("on", SB_TYPE_F32, E, 1)));
    ir_output(g, ir_select_rows(g, x, rows), "logits");
#undef WT
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}

/* evaluate tokens [p0, p0+T) at positions p0.. with all-row logits into dst [V, T] */
static sb_status eval(const weights *w, const plan_target *t, int64_t T, const int32_t *toks, int32_t p0, float *kc, float *vc,
                      tp_pool *pool, float *dst, int64_t n_out, const int32_t *rows) {
    ir_graph *g = block_graph(T, n_out, w->wtype);
    plan *p = NULL;
    sb_status s = plan_build(g, t, NULL, &p);
    ir_graph_free(g);
    if (s != SB_OK) return s;
    int32_t pos[64];
    for (int i = 0; i < T; i++) pos[i] = p0 + i;
    bind bs[] = {{"tokens", (void *)toks}, {"pos", pos}, {"out_rows", (void *)rows}, {"emb", w->emb}, {"an", w->an},
                 {"wq", w->wq}, {"bq", w->bq}, {"wk", w->wk}, {"wv", w->wv}, {"k0", kc}, {"v0", vc}, {"wo", w->wo},
                 {"fn", w->fn}, {"wg", w->wg}, {"wu", w->wu}, {"wd", w->wd}, {"out", w->out}, {"on", w->on}};
    const float *out[1] = {0};
    void *arena = NULL;
    s = run(p, bs, (int)(sizeof bs / sizeof bs[0]), pool, out, &arena);
    if (s == SB_OK) memcpy(dst, out[0], (size_t)(V * n_out) * sizeof(float));
    free(arena);
    plan_free(p);
    return s;
}

static void test_block(int type, double tol_vs_ref) {
    weights w;
    weights_init(&w, type);
    int32_t toks[6] = {1, 7, 33, 2, 60, 9}, all[6] = {0, 1, 2, 3, 4, 5};
    plan_target ref, cpu;
    plan_target_reference(&ref);
    exec_cpu_target(&cpu);
    float kc[DKV * C], vc[DKV * C], a[V * 6], b[V * 6], c[V * 6], d[V];
    tp_pool *pool = NULL;
    CHECK(tp_create(2, &pool) == SB_OK);
    /* reference target, all rows */
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    CHECKF(eval(&w, &ref, 6, toks, 0, kc, vc, NULL, a, 6, all) == SB_OK, "%s", sb_last_error());
    /* cpu target (quantize-once + fusions), 2 threads */
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    CHECKF(eval(&w, &cpu, 6, toks, 0, kc, vc, pool, b, 6, all) == SB_OK, "%s", sb_last_error());
    double e1 = nmse(b, a, V * 6);
    CHECKF(e1 < tol_vs_ref, "type %s: cpu target vs reference NMSE %g", ir_dtype_name(type), e1);
    /* same target, 1 thread: bit-identical */
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    CHECK(eval(&w, &cpu, 6, toks, 0, kc, vc, NULL, c, 6, all) == SB_OK);
    CHECK(!memcmp(b, c, sizeof b));
    /* the bias and residual adds as matmul addends (pass fuse_matmul_add; with and without the add+norm
     * fusion taking the residuals first): bit-identical */
    for (int an = 0; an < 2; an++) {
        plan_target mt = cpu;
        mt.fuse_matmul_add = true;
        mt.fuse_add_norm = an;
        memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc), memset(c, 0x7f, sizeof c);
        CHECKF(eval(&w, &mt, 6, toks, 0, kc, vc, pool, c, 6, all) == SB_OK, "%s", sb_last_error());
        CHECKF(!memcmp(b, c, sizeof b), "type %s: matmul addends (add+norm %d) change the logits", ir_dtype_name(type), an);
    }
    /* prefill 5 (logits of the last row only, default rows) then decode 1 == row 5 of the batch */
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    CHECK(eval(&w, &cpu, 5, toks, 0, kc, vc, pool, c, 1, NULL) == SB_OK);
    double e2 = nmse(c, b + 4 * V, V);
    CHECKF(e2 < 1e-10, "prefill last row vs batch row 4 NMSE %g", e2);
    CHECK(eval(&w, &cpu, 1, toks + 5, 5, kc, vc, pool, d, 1, NULL) == SB_OK);
    double e3 = nmse(d, b + 5 * V, V);
    CHECKF(e3 < (type == SB_TYPE_F32 ? 1e-10 : 1e-6), "decode vs batch row 5 NMSE %g", e3);
    printf("block %s: cpu-vs-ref NMSE %.3g, prefill/decode NMSE %.3g %.3g\n", ir_dtype_name(type), e1, e2, e3);
    tp_free(pool);
    weights_free(&w);
}

// ---- 2b: a rope or store with its head norm (pass fuse_norm_rope) == rms_norm, mul, rope, store apart ----

/* Q: a weighted norm, NEOX over all dims; K: a plain norm, NORMAL over half the dims with freq
 * factors (the tail dims normed, not rotated), stored into an f16 cache (ROPE_STORE); V: a plain
 * norm into its f16 cache (a KV_STORE with the head norm, gemma4's V). Random
 * inputs, poisoned arena and cache; the CPU target with the pass against the same target without
 * it and the reference target: the same bytes. */
static void test_norm_rope(void) {
    enum { ND = 64, NHQ = 4, NHK = 2, NT = 3, NC = 8 };
    float *xq = rnd(ND * NHQ * NT, 3), *xk = rnd(ND * NHK * NT, 0.5f), *xv = rnd(ND * NHK * NT, 2), *w = rnd(ND, 1), *ff = rnd(ND / 4, 1);
    for (int i = 0; i < ND / 4; i++) ff[i] = 1.0f + fabsf(ff[i]);
    int32_t pos[NT] = {5, 0, 7};
    ir_graph *g;
    CHECK(ir_graph_create(&g) == SB_OK);
    ir_ref p_in = ir_input_pos(g, NT);
    ir_ref q = ir_input_weight(g, "xq", SB_TYPE_F32, (int64_t[4]){ND, NHQ, NT, 1});
    ir_ref k = ir_input_weight(g, "xk", SB_TYPE_F32, (int64_t[4]){ND, NHK, NT, 1});
    ir_ref wn = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){ND, 1, 1, 1}), fr = ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){ND / 4, 1, 1, 1});
    ir_ref kc = ir_input_kv(g, "cache_k", SB_TYPE_F16, (int64_t[4]){ND * NHK, NC, 1, 1});
    ir_ref vc = ir_input_kv(g, "cache_v", SB_TYPE_F16, (int64_t[4]){ND * NHK, NC, 1, 1});
    ir_ref v = ir_rms_norm(g, ir_input_weight(g, "xv", SB_TYPE_F32, (int64_t[4]){ND, NHK, NT, 1}), 1e-6f);
    ir_kv_store(g, vc, ir_reshape(g, v, (int64_t[4]){ND * NHK, NT, 1, 1}), p_in); /* gemma4's V: a weightless norm, no rope */
    ir_rope_params rq = {.n_rot = ND, .mode = IR_ROPE_NEOX, .freq_base = 10000, .freq_scale = 1};
    ir_rope_params rk = {.n_rot = ND / 2, .mode = IR_ROPE_NORMAL, .freq_base = 1e6f, .freq_scale = 0.5f};
    q = ir_rope(g, ir_mul(g, ir_rms_norm(g, q, 1e-6f), wn), p_in, IR_NONE, &rq);
    k = ir_rope(g, ir_rms_norm(g, k, 1e-5f), p_in, fr, &rk);
    ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){ND * NHK, NT, 1, 1}), p_in); /* a root: the cache is state */
    ir_output(g, q, "q");
    plan_target tg[3];
    exec_cpu_target(&tg[0]);
    tg[1] = tg[0], tg[1].fuse_norm_rope = false;
    plan_target_reference(&tg[2]);
    float qo[3][ND * NHQ * NT];
    uint16_t cache[3][ND * NHK * NC], vcache[3][ND * NHK * NC];
    for (int v = 0; v < 3; v++) {
        plan *p = NULL;
        CHECKF(plan_build(g, &tg[v], NULL, &p) == SB_OK, "%s", sb_last_error());
        if (!p) continue;
        int normed = 0;
        for (int i = 0; i < p->g->n_nodes; i++) normed += ir_rope_norm_of(&p->g->nodes[i]).kind != IR_ROPE_NORM_NONE;
        CHECK_EQ_INT(normed, v == 0 ? 3 : 0); /* Q's rope, K's rope_store, V's kv_store */
        memset(cache[v], 0xff, sizeof cache[v]), memset(vcache[v], 0xff, sizeof vcache[v]);
        void *data[16] = {0};
        const bind bs[] = {{"pos", pos}, {"xq", xq}, {"xk", xk}, {"w", w}, {"ff", ff}, {"cache_k", cache[v]}, {"xv", xv}, {"cache_v", vcache[v]}};
        for (int i = 0; i < p->n_inputs; i++)
            for (int j = 0; j < 8; j++)
                if (!strcmp(p->inputs[i].name, bs[j].name)) data[i] = bs[j].ptr;
        const uint64_t need = exec_cpu_arena_bytes(p, 1);
        void *arena = aligned_alloc(PLAN_ALIGN, (need + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
        memset(arena, 0xff, need);
        exec_bindings b = {.data = data, .n_data = p->n_inputs, .arena = arena, .arena_bytes = need};
        const float *out[1] = {0};
        CHECKF(exec_cpu_run(p, &b, NULL, out) == SB_OK, "%s", sb_last_error());
        memcpy(qo[v], out[0], sizeof qo[v]);
        free(arena);
        plan_free(p);
    }
    CHECK(!memcmp(qo[0], qo[1], sizeof qo[0]) && !memcmp(qo[0], qo[2], sizeof qo[0]));
    CHECK(!memcmp(cache[0], cache[1], sizeof cache[0]) && !memcmp(cache[0], cache[2], sizeof cache[0]));
    CHECK(!memcmp(vcache[0], vcache[1], sizeof vcache[0]) && !memcmp(vcache[0], vcache[2], sizeof vcache[0]));
    bool finite = true; /* every q value and every written cache row was written */
    for (int i = 0; i < ND * NHQ * NT; i++) finite &= isfinite(qo[0][i]);
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < ND * NHK; i++) finite &= cache[0][pos[t] * ND * NHK + i] != 0xffff && vcache[0][pos[t] * ND * NHK + i] != 0xffff;
    CHECK(finite);
    /* one value by hand: q head 1 of token 2, pair 3 (NEOX: dims 3 and 35) */
    const float *x = xq + (2 * NHQ + 1) * ND;
    double ss = 0;
    for (int i = 0; i < ND; i++) ss += (double)x[i] * x[i];
    const double sc = 1 / sqrt(ss / ND + 1e-6), th = 7 * pow(10000.0, -2.0 * 3 / ND);
    const double want = x[3] * sc * w[3] * cos(th) - x[35] * sc * w[35] * sin(th);
    CHECKF(fabs(qo[0][(2 * NHQ + 1) * ND + 3] - want) < 1e-4, "q[3] %g, by hand %g", qo[0][(2 * NHQ + 1) * ND + 3], want);
    printf("norm + rope: Q (weighted norm, neox), K's rope_store (plain norm, normal, ff, partial), V's normed kv_store bit-identical to the ops apart\n");
    ir_graph_free(g);
    free(xq), free(xk), free(xv), free(w), free(ff);
}

// ---- 3: the executor's attention == the reference op ----

static void test_attention_vs_ref(int AD, int AT) {
    enum { AHQ = 6, AHKV = 3, AC = 48 };
    const int ADKV = AD * AHKV;
    float *q = rnd(AD * AHQ * AT, 1), *kx = rnd(ADKV * AT, 1), *vx = rnd(ADKV * AT, 1);
    float *k0 = rnd(ADKV * AC, 1), *v0 = rnd(ADKV * AC, 1);
    int32_t pos[40];
    for (int i = 0; i < AT; i++) pos[i] = 9 + i;
    struct { int ctype, window; float cap; } cases[] = {{SB_TYPE_F32, 0, 0}, {SB_TYPE_F16, 0, 0}, {SB_TYPE_F32, 4, 0}, {SB_TYPE_F16, 3, 5.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ct = cases[c].ctype;
        size_t es = ct == SB_TYPE_F16 ? 2 : 4;
        uint8_t *kc = malloc(ADKV * AC * es), *vc = malloc(ADKV * AC * es), *kr = malloc(ADKV * AC * es), *vr = malloc(ADKV * AC * es);
        for (int i = 0; i < ADKV * AC; i++) {
            op_quantize_row(kc + i * es, ct, k0 + i, 1);
            op_quantize_row(vc + i * es, ct, v0 + i, 1);
        }
        memcpy(kr, kc, ADKV * AC * es), memcpy(vr, vc, ADKV * AC * es);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref P = ir_input_pos(g, AT);
        ir_ref Q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){AD, AHQ, AT, 1});
        ir_ref K = ir_kv_store(g, ir_input_kv(g, "k", ct, (int64_t[4]){ADKV, AC, 1, 1}),
                               ir_input_weight(g, "kx", SB_TYPE_F32, (int64_t[4]){ADKV, AT, 1, 1}), P);
        ir_ref Vv = ir_kv_store(g, ir_input_kv(g, "v", ct, (int64_t[4]){ADKV, AC, 1, 1}),
                                ir_input_weight(g, "vx", SB_TYPE_F32, (int64_t[4]){ADKV, AT, 1, 1}), P);
        ir_attn_params ap = {.n_head_kv = AHKV, .head_dim = AD, .scale = 0.2f, .window = cases[c].window, .softcap = cases[c].cap};
        ir_output(g, ir_attention(g, Q, K, Vv, P, &ap), "o");
        plan_target t;
        exec_cpu_target(&t);
        plan *p = NULL;
        CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
        bind bs[] = {{"pos", pos}, {"q", q}, {"k", kc}, {"v", vc}, {"kx", kx}, {"vx", vx}};
        const float *out[1] = {0};
        void *arena = NULL;
        CHECKF(run(p, bs, 6, NULL, out, &arena) == SB_OK, "%s", sb_last_error());
        /* reference: the plain op on its own copy of the caches */
        float *ref = malloc(sizeof(float) * AD * AHQ * AT), sc[AC];
        op_kv_store(kr, ct, ADKV, kx, pos, AT);
        op_kv_store(vr, ct, ADKV, vx, pos, AT);
        CHECK(!memcmp(kr, kc, ADKV * AC * es) && !memcmp(vr, vc, ADKV * AC * es));
        op_attn_args a = {.D = AD, .Hq = AHQ, .Hkv = AHKV, .ctype = ct, .scale = 0.2f, .softcap = cases[c].cap, .window = cases[c].window};
        op_attention(ref, q, kr, vr, pos, &a, 0, AHQ * AT, sc);
        double e = out[0] ? nmse(out[0], ref, AD * AHQ * AT) : 1;
        CHECKF(e < 1e-12, "attention case %zu: exec vs ref NMSE %g", c, e);
        free(arena);
        plan_free(p);
        ir_graph_free(g);
        free(kc), free(vc), free(kr), free(vr), free(ref);
    }
    free(q), free(kx), free(vx), free(k0), free(v0);
}

// ---- 4: the executor's swiglu == the reference op (vector exp on AVX2) ----

static void test_swiglu_vs_ref(void) {
    enum { SE = 136, ST = 3, SN = SE * ST };
    float *gt = rnd(SN, 4), *up = rnd(SN, 1);
    gt[0] = -95.0f, gt[1] = 95.0f, gt[2] = 0.0f, gt[3] = -20.0f, gt[4] = 30.0f, gt[5] = 1e-6f; /* clamps and edges */
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref G = ir_input_weight(g, "g", SB_TYPE_F32, (int64_t[4]){SE, ST, 1, 1}), U = ir_input_weight(g, "u", SB_TYPE_F32, (int64_t[4]){SE, ST, 1, 1});
    ir_output(g, ir_swiglu(g, G, U), "y");
    plan_target t;
    exec_cpu_target(&t);
    plan *p = NULL;
    CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
    bind bs[] = {{"g", gt}, {"u", up}};
    const float *out[1] = {0};
    void *arena = NULL;
    CHECK(run(p, bs, 2, NULL, out, &arena) == SB_OK);
    float ref[SN];
    op_swiglu(ref, gt, up, SN);
    double worst = 0;
    for (int i = 0; i < SN && out[0]; i++) {
        double d = fabs((double)out[0][i] - ref[i]) / (fabs(ref[i]) + 1e-30);
        if (ref[i] != out[0][i] && d > worst) worst = d;
    }
    CHECKF(worst < 1e-6, "swiglu exec vs ref: worst relative error %g", worst);
    CHECK(out[0] && fabsf(out[0][0]) < 1e-30f && isfinite(out[0][1]) && fabsf(out[0][1] - 95.0f * up[1]) <= 1e-5f * fabsf(95.0f * up[1]));
    free(arena);
    plan_free(p);
    ir_graph_free(g);
    free(gt), free(up);
}

// ---- 5: bad bindings ----

static void test_errors(void) {
    weights w;
    weights_init(&w, SB_TYPE_F32);
    plan_target t;
    exec_cpu_target(&t);
    float kc[DKV * C], vc[DKV * C], out[V * 2];
    int32_t toks[2] = {1, 2}, bad_tok[2] = {1, V}, rows_bad[1] = {2};
    CHECK(eval(&w, &t, 2, toks, 0, kc, vc, NULL, out, 1, NULL) == SB_OK);
    CHECK(eval(&w, &t, 2, bad_tok, 0, kc, vc, NULL, out, 1, NULL) == SB_ERR_RANGE && strstr(sb_last_error(), "token"));
    CHECK(eval(&w, &t, 2, toks, C - 1, kc, vc, NULL, out, 1, NULL) == SB_ERR_CONTEXT_FULL);
    CHECK(eval(&w, &t, 2, toks, -1, kc, vc, NULL, out, 1, NULL) == SB_ERR_RANGE);
    CHECK(eval(&w, &t, 2, toks, 0, kc, vc, NULL, out, 1, rows_bad) == SB_ERR_RANGE);
    CHECK(eval(&w, &t, 2, toks, 0, NULL, vc, NULL, out, 1, NULL) == SB_ERR_INVALID_ARG);
    /* capability check: a weight type with neither a kernel nor a dequantizer */
    {
        ir_graph *gg;
        ir_graph_create(&gg);
        ir_ref xx = ir_input_weight(gg, "x", SB_TYPE_F32, (int64_t[4]){256, 2, 1, 1});
        ir_ref ww = ir_input_weight(gg, "w.iq1", SB_TYPE_IQ1_S, (int64_t[4]){256, 4, 1, 1});
        ir_output(gg, ir_matmul(gg, ww, xx), "y");
        plan *pp = NULL;
        CHECK(plan_build(gg, &t, NULL, &pp) == SB_OK);
        if (!op_can_dequantize(SB_TYPE_IQ1_S) && cpu_act_type(SB_TYPE_IQ1_S) < 0)
            CHECK(exec_cpu_check(pp) == SB_ERR_MODEL_TENSOR_TYPE && strstr(sb_last_error(), "w.iq1"));
        plan_free(pp);
        ir_graph_free(gg);
        ir_graph *g2 = block_graph(2, 1, SB_TYPE_F32);
        CHECK(plan_build(g2, &t, NULL, &pp) == SB_OK && exec_cpu_check(pp) == SB_OK);
        plan_free(pp);
        ir_graph_free(g2);
    }
    /* arena too small */
    ir_graph *g = block_graph(2, 1, SB_TYPE_F32);
    plan *p = NULL;
    CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
    void *data[64] = {0};
    char arena[256] __attribute__((aligned(64)));
    exec_bindings b = {.data = data, .n_data = p->n_inputs, .arena = arena, .arena_bytes = sizeof arena};
    CHECK(exec_cpu_run(p, &b, NULL, NULL) == SB_ERR_INVALID_ARG);
    b.n_data = 3;
    CHECK(exec_cpu_run(p, &b, NULL, NULL) == SB_ERR_INVALID_ARG);
    plan_free(p);
    ir_graph_free(g);
    weights_free(&w);
}

int main(void) {
    test_small_e2e();
    test_block(SB_TYPE_F32, 1e-10);
    if (qk_get(SB_TYPE_Q8_0)->from_float_ref && qk_get(SB_TYPE_Q4_K)->from_float_ref) {
        test_block(SB_TYPE_Q8_0, 1e-3);
        test_block(SB_TYPE_Q4_K, 1e-3);
    } else {
        printf("SKIP quantized blocks: no reference quantizers registered\n");
    }
    test_attention_vs_ref(40, 5);   /* generic dims, one token block */
    test_attention_vs_ref(64, 37);  /* register-blocked PV, several token blocks, 4-chain QK */
    test_attention_vs_ref(64, 1);   /* decode path */
    test_swiglu_vs_ref();
    test_norm_rope();
    test_errors();
    return test_summary();
}
