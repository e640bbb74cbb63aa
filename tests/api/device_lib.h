/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/device_lib.h — device scenarios of the tensor API, each run on a device `dev` against
 * the same work on the CPU: test_tensor_device.c runs them on a stand-in device backend (host
 * memory copies, so CI without a GPU checks every coherence rule), test_tensor_cuda.c on a real
 * GPU. Scenarios: a llama decoder block traced into a prefill and a decode program sharing their
 * caches; eager ops; the ops no built-in model uses (layer_norm, gelu, concat, permute) eager and
 * compiled; a cache written eagerly on the CPU between device runs; outputs written in
 * place and read back by device programs; two views of one weight; the mixed-device refusal.
 * Include after test.h, sonicboom.h and tensor_lib.h; tolerances (allowed max relative difference
 * from the CPU) are the scenarios' arguments: dl_check_all runs every one.
 */
#ifndef SB_TESTS_DEVICE_LIB_H
#define SB_TESTS_DEVICE_LIB_H

#include <stdbool.h>
#include <string.h>

static uint64_t dl_seed = 0x9e3779b97f4a7c15ull;

static float dl_rand(void) { return (float)((double)(test_rand_u64(&dl_seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

/* a tensor on dev of f32 [a,b] (b 1: 1-D), data given or random (vals: a copy, may be NULL) */
static sb_tensor *dl_f32(int dev, int64_t a, int64_t b, const float *data) {
    const int64_t ne[2] = {a, b};
    float *v = (float *)malloc((size_t)(a * b) * sizeof *v);
    for (int64_t i = 0; i < a * b; i++) v[i] = data ? data[i] : dl_rand();
    sb_tensor *t = NULL;
    const sb_status st = sb_tensor_create(dev, SB_TYPE_F32, b > 1 ? 2 : 1, ne, v, (size_t)(a * b) * sizeof *v, &t);
    CHECKF(st == SB_OK, "create on %d: %s", dev, sb_last_error());
    free(v);
    return t;
}

static sb_tensor *dl_i32(int dev, int64_t n, const int32_t *v) {
    sb_tensor *t = NULL;
    CHECK(sb_tensor_create(dev, SB_TYPE_I32, 1, &n, v, (size_t)n * sizeof *v, &t) == SB_OK);
    return t;
}

/* max relative difference of two tensors' values (inf when counts differ) */
static double dl_diff(const sb_tensor *a, const sb_tensor *b) {
    size_t na = 0, nb = 0;
    float *x = rd(a, &na), *y = rd(b, &nb);
    const double d = na == nb ? maxrel(x, y, na) : INFINITY;
    free(x), free(y);
    return d;
}

static int dl_device_of(const sb_tensor *t) {
    sb_tensor_info i;
    return sb_tensor_get_info(t, &i) == SB_OK ? i.device : -1;
}

// ---- a llama decoder block (layer 0 of a model), traced ----

typedef struct dl_block {
    sb_model *m;
    int64_t E, Hq, Hkv, D, C;
} dl_block;

static sb_value dl_w(sb_graph *g, const dl_block *b, const char *name, sb_tensor **keep) {
    sb_value v = -1;
    sb_tensor *t = NULL;
    CHECKF(sb_tensor_from_weight(b->m, name, &t) == SB_OK, "%s: %s", name, sb_last_error());
    if (t) CHECK(sb_graph_tensor(g, SB_INPUT_DATA, t, &v) == SB_OK);
    *keep = t;
    return v;
}

static sb_value dl_op(sb_graph *g, const char *op, const sb_value *s, int n, const double *a, int na) {
    sb_value v = -1;
    CHECKF(sb_graph_op(g, op, s, n, a, na, &v) == SB_OK, "%s: %s", op, sb_last_error());
    return v;
}

/* g with y as its one output "y", compiled for dev and freed; the program (NULL on failure) */
static sb_program *dl_compile(sb_graph *g, sb_value y, int dev, const char *what) {
    CHECK(sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = NULL;
    const sb_compile_params cp = {.device = dev};
    CHECKF(sb_graph_compile(g, &cp, &pr) == SB_OK, "compile %s (device %d): %s", what, dev, sb_last_error());
    sb_graph_free(g);
    return pr;
}

/* y = block(x) for T tokens at positions pos (run-time inputs x [E,T], pos [T]), writing the caches
 * kc, vc ([Hkv*D, C]); compiled for device dev */
static sb_program *dl_block_program(const dl_block *b, int64_t T, sb_tensor *kc, sb_tensor *vc, int dev) {
    sb_graph *g = NULL;
    CHECK(sb_graph_create(&g) == SB_OK);
    const int64_t nx[2] = {b->E, T}, np[1] = {T};
    sb_value x, pos, K, V;
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, nx, &x) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_POS, "pos", SB_TYPE_I32, 1, np, &pos) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_CACHE, kc, &K) == SB_OK && sb_graph_tensor(g, SB_INPUT_CACHE, vc, &V) == SB_OK);
    sb_tensor *w[9];
    const char *names[9] = {"blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
                            "blk.0.attn_output.weight", "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                            "blk.0.ffn_down.weight"};
    sb_value wv[9];
    for (int i = 0; i < 9; i++) wv[i] = dl_w(g, b, names[i], &w[i]);
    const double eps = 1e-5, rope[3] = {(double)b->D, 0, 500000};
    const double vq[3] = {(double)b->D, (double)b->Hq, (double)T}, vk[3] = {(double)b->D, (double)b->Hkv, (double)T};
    const double vk2[2] = {(double)(b->D * b->Hkv), (double)T}, nh = (double)b->Hkv;
    sb_value h = dl_op(g, "rms_norm", (sb_value[2]){x, wv[0]}, 2, &eps, 1);
    sb_value q = dl_op(g, "linear", (sb_value[2]){h, wv[1]}, 2, NULL, 0);
    sb_value k = dl_op(g, "linear", (sb_value[2]){h, wv[2]}, 2, NULL, 0);
    sb_value v = dl_op(g, "linear", (sb_value[2]){h, wv[3]}, 2, NULL, 0);
    q = dl_op(g, "rope", (sb_value[2]){dl_op(g, "view", &q, 1, vq, 3), pos}, 2, rope, 3);
    k = dl_op(g, "rope", (sb_value[2]){dl_op(g, "view", &k, 1, vk, 3), pos}, 2, rope, 3);
    k = dl_op(g, "view", &k, 1, vk2, 2);
    sb_value ks = dl_op(g, "kv_store", (sb_value[3]){K, k, pos}, 3, NULL, 0);
    sb_value vs = dl_op(g, "kv_store", (sb_value[3]){V, v, pos}, 3, NULL, 0);
    sb_value a = dl_op(g, "attention", (sb_value[4]){q, ks, vs, pos}, 4, &nh, 1);
    sb_value x2 = dl_op(g, "add", (sb_value[2]){x, dl_op(g, "linear", (sb_value[2]){a, wv[4]}, 2, NULL, 0)}, 2, NULL, 0);
    sb_value h2 = dl_op(g, "rms_norm", (sb_value[2]){x2, wv[5]}, 2, &eps, 1);
    sb_value gu = dl_op(g, "swiglu",
                        (sb_value[2]){dl_op(g, "linear", (sb_value[2]){h2, wv[6]}, 2, NULL, 0), dl_op(g, "linear", (sb_value[2]){h2, wv[7]}, 2, NULL, 0)},
                        2, NULL, 0);
    sb_value y = dl_op(g, "add", (sb_value[2]){x2, dl_op(g, "linear", (sb_value[2]){gu, wv[8]}, 2, NULL, 0)}, 2, NULL, 0);
    char what[48];
    snprintf(what, sizeof what, "the block (T %lld)", (long long)T);
    sb_program *pr = dl_compile(g, y, dev, what);
    for (int i = 0; i < 9; i++) sb_tensor_free(w[i]); /* the program keeps its own references */
    return pr;
}

/* run a block program on x at positions p0.. (T of them); the output (NULL on failure) */
static sb_tensor *dl_block_run(sb_program *pr, sb_tensor *x, int64_t T, int32_t p0) {
    int32_t pos[64];
    for (int64_t t = 0; t < T; t++) pos[t] = p0 + (int32_t)t;
    sb_tensor *tp = dl_i32(SB_DEVICE_CPU, T, pos), *in[2] = {x, tp}, *out[1] = {NULL};
    const sb_status st = sb_program_run(pr, in, 2, out, 1);
    CHECKF(st == SB_OK, "block run at %d: %s", (int)p0, sb_last_error());
    sb_tensor_free(tp);
    return out[0];
}

/* the block's prefill (5 tokens) and 3 decode steps on dev, their caches shared, against the same on
 * the CPU: every output, and the caches read back after the device runs */
static void dl_check_block(const dl_block *b, int dev, double tol) {
    const int64_t KD = b->Hkv * b->D, T = 5, ne[2] = {KD, b->C};
    sb_tensor *kc[2] = {0}, *vc[2] = {0}; /* [0] on dev, [1] on the CPU; zeros */
    sb_program *pf[2], *dc[2];
    for (int i = 0; i < 2; i++) {
        const int d = i ? SB_DEVICE_CPU : dev;
        CHECK(sb_tensor_create(d, SB_TYPE_F32, 2, ne, NULL, 0, &kc[i]) == SB_OK && sb_tensor_create(d, SB_TYPE_F32, 2, ne, NULL, 0, &vc[i]) == SB_OK);
        pf[i] = dl_block_program(b, T, kc[i], vc[i], d);
        dc[i] = dl_block_program(b, 1, kc[i], vc[i], d);
    }
    sb_tensor *x = dl_f32(SB_DEVICE_CPU, b->E, T, NULL); /* run-time inputs may be on either device */
    sb_tensor *y[2] = {pf[0] ? dl_block_run(pf[0], x, T, 0) : NULL, pf[1] ? dl_block_run(pf[1], x, T, 0) : NULL};
    CHECKF(y[0] && y[1] && dl_diff(y[0], y[1]) <= tol, "block prefill: %g", y[0] && y[1] ? dl_diff(y[0], y[1]) : -1.0);
    CHECK(!y[0] || dl_device_of(y[0]) == dev);
    sb_tensor_free(y[0]), sb_tensor_free(y[1]);
    sb_tensor_free(x);
    for (int step = 0; step < 3; step++) {
        x = dl_f32(dev, b->E, 1, NULL);
        y[0] = dc[0] ? dl_block_run(dc[0], x, 1, (int32_t)(T + step)) : NULL;
        y[1] = dc[1] ? dl_block_run(dc[1], x, 1, (int32_t)(T + step)) : NULL;
        CHECKF(y[0] && y[1] && dl_diff(y[0], y[1]) <= tol, "block decode step %d: %g", step, y[0] && y[1] ? dl_diff(y[0], y[1]) : -1.0);
        sb_tensor_free(y[0]), sb_tensor_free(y[1]), sb_tensor_free(x);
    }
    /* the caches the device wrote, read back: the CPU's (8 columns written, the rest 0) */
    CHECKF(dl_diff(kc[0], kc[1]) <= tol && dl_diff(vc[0], vc[1]) <= tol, "caches after the runs: %g %g", dl_diff(kc[0], kc[1]),
           dl_diff(vc[0], vc[1]));
    size_t n = 0;
    float *kv = rd(kc[0], &n);
    CHECK(n == (size_t)(KD * b->C) && kv[7 * KD] != 0 && kv[8 * KD] == 0);
    free(kv);
    for (int i = 0; i < 2; i++) {
        sb_program_free(pf[i]), sb_program_free(dc[i]);
        sb_tensor_free(kc[i]), sb_tensor_free(vc[i]);
    }
}

// ---- eager ops ----

/* ops on dev tensors (a model's weight view joining them) against the same on CPU tensors; a cache
 * written by an eager kv_store on dev and read back; the results on dev */
static void dl_check_eager(const dl_block *b, int dev, double tol) {
    const int64_t E = b->E, T = 3, D = b->D, C = 8;
    float *xv = (float *)malloc((size_t)(E * T) * sizeof *xv);
    for (int64_t i = 0; i < E * T; i++) xv[i] = dl_rand();
    sb_tensor *x[2] = {dl_f32(dev, E, T, xv), dl_f32(SB_DEVICE_CPU, E, T, xv)}, *wq = NULL, *wn = NULL;
    CHECK(sb_tensor_from_weight(b->m, "blk.0.attn_q.weight", &wq) == SB_OK && sb_tensor_from_weight(b->m, "blk.0.attn_norm.weight", &wn) == SB_OK);
    const double eps = 1e-5, s = 0.5;
    sb_tensor *r[2][6] = {{0}};
    for (int i = 0; i < 2; i++) {
        r[i][0] = op("rms_norm", (sb_tensor *[2]){x[i], wn}, 2, &eps, 1);
        r[i][1] = r[i][0] ? op("linear", (sb_tensor *[2]){r[i][0], wq}, 2, NULL, 0) : NULL;
        r[i][2] = r[i][1] ? op("softmax", &r[i][1], 1, NULL, 0) : NULL;
        r[i][3] = op("add", (sb_tensor *[2]){x[i], x[i]}, 2, NULL, 0);
        r[i][4] = op("scale", &r[i][3], 1, &s, 1);
        r[i][5] = op("reshape", &r[i][4], 1, (const double[2]){(double)(E * T), 1}, 2);
    }
    const char *names[6] = {"rms_norm", "linear", "softmax", "add", "scale", "reshape"};
    for (int k = 0; k < 6; k++) {
        CHECKF(r[0][k] && r[1][k] && dl_diff(r[0][k], r[1][k]) <= tol, "eager %s on device %d", names[k], dev);
        CHECKF(!r[0][k] || dl_device_of(r[0][k]) == dev, "eager %s: result on device %d", names[k], r[0][k] ? dl_device_of(r[0][k]) : -1);
    }
    /* kv_store into a dev cache, attention over it, the cache read back */
    const int32_t pos[3] = {2, 5, 0};
    sb_tensor *kc[2], *k[2], *p[2], *q[2], *ks[2] = {0}, *at[2] = {0};
    float *kvv = (float *)malloc((size_t)(D * T) * sizeof *kvv), *qv = (float *)malloc((size_t)(D * 2 * T) * sizeof *qv);
    for (int64_t i = 0; i < D * T; i++) kvv[i] = dl_rand();
    for (int64_t i = 0; i < D * 2 * T; i++) qv[i] = dl_rand();
    for (int i = 0; i < 2; i++) {
        const int d = i ? SB_DEVICE_CPU : dev;
        const int64_t nc[2] = {D, C}, nq[3] = {D, 2, T};
        kc[i] = q[i] = NULL;
        CHECK(sb_tensor_create(d, SB_TYPE_F32, 2, nc, NULL, 0, &kc[i]) == SB_OK);
        CHECK(sb_tensor_create(d, SB_TYPE_F32, 3, nq, qv, (size_t)(D * 2 * T) * sizeof *qv, &q[i]) == SB_OK);
        k[i] = dl_f32(d, D, T, kvv);
        p[i] = dl_i32(d, T, pos);
        ks[i] = op("kv_store", (sb_tensor *[3]){kc[i], k[i], p[i]}, 3, NULL, 0);
        at[i] = ks[i] ? op("attention", (sb_tensor *[4]){q[i], ks[i], ks[i], p[i]}, 4, (const double[1]){1}, 1) : NULL;
    }
    CHECKF(dl_diff(kc[0], kc[1]) == 0, "eager kv_store on device %d: the cache read back", dev);
    CHECKF(at[0] && at[1] && dl_diff(at[0], at[1]) <= tol, "eager attention on device %d", dev);
    for (int i = 0; i < 2; i++) {
        for (int k2 = 0; k2 < 6; k2++) sb_tensor_free(r[i][k2]);
        sb_tensor *all[] = {x[i], kc[i], k[i], p[i], q[i], ks[i], at[i]};
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) sb_tensor_free(all[j]);
    }
    sb_tensor_free(wq), sb_tensor_free(wn);
    free(xv), free(kvv), free(qv);
}

/* a tensor on dev of f32 [ne] (nd dims) with the values v */
static sb_tensor *dl_f32n(int dev, int nd, const int64_t *ne, const float *v) {
    int64_t n = 1;
    for (int k = 0; k < nd; k++) n *= ne[k];
    sb_tensor *t = NULL;
    CHECKF(sb_tensor_create(dev, SB_TYPE_F32, nd, ne, v, (size_t)n * sizeof *v, &t) == SB_OK, "create on %d: %s", dev, sb_last_error());
    return t;
}

/* the ops no built-in model uses (layer_norm with and without weight and bias, the exact gelu,
 * concat along each dim, permute and transpose that copy) eagerly on dev against the same on CPU
 * tensors, and permute(concat(gelu(layer_norm(x, w, b)), x2; dim 1), 1 0) compiled for dev against
 * the CPU's program; every result on dev */
static void dl_check_tensor_ops(int dev, double tol) {
    enum { E = 37, T = 5, T2 = 3, NR = 9 };
    float xv[E * T], x2v[E * T2], wv[E], bv[E], cv[4 * 3 * 5];
    for (int i = 0; i < E * T; i++) xv[i] = 3.0f * dl_rand() + (i / E % 2 ? 20.0f : 0.0f);
    for (int i = 0; i < E * T2; i++) x2v[i] = dl_rand();
    for (int i = 0; i < E; i++) wv[i] = 1.0f + 0.5f * dl_rand(), bv[i] = dl_rand();
    for (int i = 0; i < 60; i++) cv[i] = dl_rand();
    const int64_t nx[2] = {E, T}, nx2[2] = {E, T2}, nw[1] = {E}, nc[3] = {4, 3, 5};
    sb_tensor *in[2][5], *r[2][NR] = {{0}};
    const double eps = 1e-6, d0 = 0, d1 = 1, d2 = 2, perm[3] = {2, 0, 1}, tr[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
        const int d = i ? SB_DEVICE_CPU : dev;
        sb_tensor **t = in[i];
        t[0] = dl_f32n(d, 2, nx, xv), t[1] = dl_f32n(d, 2, nx2, x2v), t[2] = dl_f32n(d, 1, nw, wv), t[3] = dl_f32n(d, 1, nw, bv);
        t[4] = dl_f32n(d, 3, nc, cv);
        r[i][0] = op("layer_norm", t, 1, NULL, 0);
        r[i][1] = op("layer_norm", (sb_tensor *[3]){t[0], t[2], t[3]}, 3, &eps, 1);
        r[i][2] = op("gelu", t, 1, NULL, 0);
        r[i][3] = op("concat", (sb_tensor *[2]){t[0], t[1]}, 2, &d1, 1);
        r[i][4] = op("cat", (sb_tensor *[3]){t[0], t[0], t[0]}, 3, &d0, 1);
        r[i][5] = op("concat", (sb_tensor *[2]){t[4], t[4]}, 2, &d2, 1);
        r[i][6] = op("permute", &t[4], 1, perm, 3);
        r[i][7] = op("transpose", t, 1, tr, 2);
        r[i][8] = op("transpose", &t[4], 1, (const double[2]){1, 2}, 2);
    }
    const char *names[NR] = {"layer_norm", "layer_norm (w, b)", "gelu", "concat dim 1", "cat dim 0 (x3)", "concat dim 2 (3-D)",
                             "permute 2,0,1", "transpose 0 1", "transpose 1 2 (3-D)"};
    for (int k = 0; k < NR; k++) {
        CHECKF(r[0][k] && r[1][k] && dl_diff(r[0][k], r[1][k]) <= tol, "eager %s on device %d: %g", names[k], dev,
               r[0][k] && r[1][k] ? dl_diff(r[0][k], r[1][k]) : -1.0);
        CHECKF(!r[0][k] || dl_device_of(r[0][k]) == dev, "eager %s: result on device %d", names[k], r[0][k] ? dl_device_of(r[0][k]) : -1);
    }
    /* compiled: the four ops in one program */
    sb_program *pr[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        sb_graph *g = NULL;
        sb_value vx = -1, vx2 = -1, vw = -1, vb = -1;
        CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, nx, &vx) == SB_OK &&
              sb_graph_input(g, SB_INPUT_DATA, "x2", SB_TYPE_F32, 2, nx2, &vx2) == SB_OK &&
              sb_graph_input(g, SB_INPUT_DATA, "w", SB_TYPE_F32, 1, nw, &vw) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "b", SB_TYPE_F32, 1, nw, &vb) == SB_OK);
        sb_value y = dl_op(g, "layer_norm", (sb_value[3]){vx, vw, vb}, 3, &eps, 1);
        y = dl_op(g, "gelu", &y, 1, NULL, 0);
        y = dl_op(g, "concat", (sb_value[2]){y, vx2}, 2, &d1, 1);
        y = dl_op(g, "permute", &y, 1, (const double[2]){1, 0}, 2);
        pr[i] = dl_compile(g, y, i ? SB_DEVICE_CPU : dev, "the layer_norm/gelu/concat/permute program");
    }
    sb_tensor *out[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (pr[i]) CHECKF(sb_program_run(pr[i], in[i], 4, &out[i], 1) == SB_OK, "run on %d: %s", i ? SB_DEVICE_CPU : dev, sb_last_error());
    CHECKF(out[0] && out[1] && dl_diff(out[0], out[1]) <= tol, "compiled layer_norm/gelu/concat/permute on device %d", dev);
    CHECKF(!out[0] || dl_device_of(out[0]) == dev, "compiled: result on device %d", out[0] ? dl_device_of(out[0]) : -1);
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < NR; k++) sb_tensor_free(r[i][k]);
        for (int k = 0; k < 5; k++) sb_tensor_free(in[i][k]);
        sb_tensor_free(out[i]);
        sb_program_free(pr[i]);
    }
}

/* an op on a CPU tensor and a dev tensor: refused, naming the op and both devices */
static void dl_check_mixed(int dev) {
    sb_tensor *a = dl_f32(SB_DEVICE_CPU, 8, 2, NULL), *b = dl_f32(dev, 8, 2, NULL), *o = (sb_tensor *)1;
    CHECK(sb_tensor_op("add", (sb_tensor *[2]){a, b}, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG && !o);
    CHECKF(strstr(sb_last_error(), "add: source 0 is on cpu, source 1 on cuda"), "%s", sb_last_error());
    sb_tensor_free(a), sb_tensor_free(b);
}

/* two views of one weight (one buffer address): one bound into a device program, the other used
 * eagerly on dev and freed — its device copy dropped under the program, which must still run right */
static void dl_check_weight_views(const dl_block *b, int dev, double tol) {
    sb_tensor *w1 = NULL, *w2 = NULL;
    CHECK(sb_tensor_from_weight(b->m, "blk.0.ffn_up.weight", &w1) == SB_OK && sb_tensor_from_weight(b->m, "blk.0.ffn_up.weight", &w2) == SB_OK);
    sb_graph *g = NULL;
    sb_value vx = -1, vw = -1, y;
    const int64_t nx[2] = {b->E, 2};
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, nx, &vx) == SB_OK &&
          sb_graph_tensor(g, SB_INPUT_DATA, w1, &vw) == SB_OK);
    y = dl_op(g, "linear", (sb_value[2]){vx, vw}, 2, NULL, 0);
    sb_program *pr = dl_compile(g, y, dev, "x * a weight view");
    sb_tensor_free(w1);
    sb_tensor *x = dl_f32(dev, b->E, 2, NULL), *xc = NULL;
    float *xv = rd(x, NULL);
    xc = dl_f32(SB_DEVICE_CPU, b->E, 2, xv);
    free(xv);
    sb_tensor *ref = op("linear", (sb_tensor *[2]){xc, w2}, 2, NULL, 0);
    for (int round = 0; round < 3; round++) {
        sb_tensor *out[1] = {NULL};
        CHECKF(pr && sb_program_run(pr, &x, 1, out, 1) == SB_OK && out[0] && dl_diff(out[0], ref) <= tol, "weight views, round %d: %s", round,
               sb_last_error());
        sb_tensor_free(out[0]);
        if (round == 0) { /* the second view on dev, then freed */
            sb_tensor *e = op("linear", (sb_tensor *[2]){x, w2}, 2, NULL, 0);
            CHECK(e && dl_diff(e, ref) <= tol);
            sb_tensor_free(e);
            sb_tensor_free(w2);
            w2 = NULL;
        }
    }
    sb_program_free(pr);
    sb_tensor_free(x), sb_tensor_free(xc), sb_tensor_free(ref), sb_tensor_free(w2);
}

// ---- host writes between device runs ----

/* a program reading tensor c, bound for good: y = c (scaled by 1) */
static sb_program *dl_echo_program(sb_tensor *c, int dev) {
    sb_graph *g = NULL;
    sb_value vc, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_tensor(g, SB_INPUT_DATA, c, &vc) == SB_OK);
    y = dl_op(g, "scale", &vc, 1, (const double[1]){1}, 1);
    return dl_compile(g, y, dev, "the echo program");
}

/* a program that stores x [D,1] at pos into cache c and returns the cache (scaled by 1) */
static sb_program *dl_store_program(sb_tensor *c, int64_t D, int dev) {
    sb_graph *g = NULL;
    sb_value vc = -1, vx = -1, vp = -1, y;
    const int64_t nx[2] = {D, 1}, np[1] = {1};
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_tensor(g, SB_INPUT_CACHE, c, &vc) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, nx, &vx) == SB_OK && sb_graph_input(g, SB_INPUT_POS, "pos", SB_TYPE_I32, 1, np, &vp) == SB_OK);
    y = dl_op(g, "kv_store", (sb_value[3]){vc, vx, vp}, 3, NULL, 0);
    y = dl_op(g, "scale", &y, 1, (const double[1]){1}, 1);
    return dl_compile(g, y, dev, "the store program");
}

static void dl_store(sb_program *pr, sb_tensor *x, int32_t pos, sb_tensor **out) {
    sb_tensor *tp = dl_i32(SB_DEVICE_CPU, 1, &pos), *in[2] = {x, tp};
    CHECKF(sb_program_run(pr, in, 2, out, 1) == SB_OK, "store at %d: %s", (int)pos, sb_last_error());
    sb_tensor_free(tp);
}

/* a CPU cache written by a dev program, then by an eager CPU kv_store, then by the dev program again,
 * then by a CPU program: every write seen by every later reader (against the expected columns) */
static void dl_check_cache_handoff(int dev) {
    const int64_t D = 8, C = 6;
    const int64_t nc[2] = {D, C};
    sb_tensor *c = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, nc, NULL, 0, &c) == SB_OK);
    sb_program *on_dev = dl_store_program(c, D, dev), *on_cpu = dl_store_program(c, D, SB_DEVICE_CPU);
    float want[48] = {0}, col[8];
    sb_tensor *y = NULL;
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < D; i++) col[i] = want[step * D + i] = (float)(step * 10 + i + 1);
        sb_tensor *x = dl_f32(step == 1 ? SB_DEVICE_CPU : dev, D, 1, col);
        if (step == 1) { /* eagerly on the CPU, into the cache the device run wrote last */
            sb_tensor *tp = dl_i32(SB_DEVICE_CPU, 1, &(int32_t){1}), *xc = dl_f32(SB_DEVICE_CPU, D, 1, col);
            sb_tensor *r = op("kv_store", (sb_tensor *[3]){c, xc, tp}, 3, NULL, 0);
            sb_tensor_free(r), sb_tensor_free(tp), sb_tensor_free(xc);
        } else {
            sb_tensor_free(y);
            y = NULL;
            dl_store(step == 3 ? on_cpu : on_dev, x, step, &y);
            CHECKF(y && dl_device_of(y) == (step == 3 ? SB_DEVICE_CPU : dev), "step %d: output device", step);
        }
        sb_tensor_free(x);
        size_t n = 0;
        float *got = rd(c, &n), *out = y ? rd(y, NULL) : NULL;
        CHECKF(n == (size_t)(D * C) && !memcmp(got, want, sizeof want), "step %d: the cache read back", step);
        if (step != 1) CHECKF(out && !memcmp(out, want, sizeof want), "step %d: the program's view of the cache", step);
        free(got), free(out);
    }
    /* and the device program sees the CPU program's write */
    sb_tensor_free(y);
    y = NULL;
    for (int i = 0; i < D; i++) col[i] = want[4 * D + i] = -1.0f - (float)i;
    sb_tensor *x = dl_f32(dev, D, 1, col);
    dl_store(on_dev, x, 4, &y);
    float *out = y ? rd(y, NULL) : NULL;
    CHECKF(out && !memcmp(out, want, sizeof want), "the device program after a CPU program's write");
    free(out);
    sb_tensor_free(x), sb_tensor_free(y);
    sb_program_free(on_dev), sb_program_free(on_cpu);
    sb_tensor_free(c);
}

/* an output written in place into a tensor that device programs read: as a run-time input (sent
 * each run) and bound for good (its device copy follows the host write) */
static void dl_check_inplace(int dev) {
    const int64_t N = 16;
    sb_tensor *buf = dl_f32(dev, N, 1, NULL), *src = NULL;
    sb_program *echo = dl_echo_program(buf, dev); /* buf bound: a device copy */
    sb_graph *g = NULL;
    sb_value vx, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    y = dl_op(g, "scale", &vx, 1, (const double[1]){2}, 1);
    CHECK(sb_graph_output(g, y, "y") == SB_OK);
    sb_program *twice = NULL, *twice_cpu = NULL;
    const sb_compile_params cp = {.device = dev}, cpu = {.device = SB_DEVICE_CPU};
    CHECK(sb_graph_compile(g, &cp, &twice) == SB_OK && sb_graph_compile(g, &cpu, &twice_cpu) == SB_OK);
    sb_graph_free(g);
    float v[16];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) v[i] = (float)(round * 100 + i);
        src = dl_f32(round == 1 ? SB_DEVICE_CPU : dev, N, 1, v);
        sb_tensor *out[1] = {buf};
        /* buf = 2 * src, written in place by a device (or, round 1, a CPU) program */
        CHECKF(sb_program_run(round == 1 ? twice_cpu : twice, &src, 1, out, 1) == SB_OK && out[0] == buf, "round %d: %s", round, sb_last_error());
        /* buf read as a run-time input of a device program: 4 * src */
        sb_tensor *o4[1] = {NULL};
        CHECK(sb_program_run(twice, &buf, 1, o4, 1) == SB_OK);
        /* buf bound for good in a device program: 2 * src */
        sb_tensor *oe[1] = {NULL};
        CHECK(echo && sb_program_run(echo, NULL, 0, oe, 1) == SB_OK);
        float *a = o4[0] ? rd(o4[0], NULL) : NULL, *e = oe[0] ? rd(oe[0], NULL) : NULL;
        bool ok4 = a != NULL, oke = e != NULL;
        for (int i = 0; i < N && a && e; i++) ok4 = ok4 && a[i] == 4 * v[i], oke = oke && e[i] == 2 * v[i];
        CHECKF(ok4, "round %d: a run-time input written in place before the run", round);
        CHECKF(oke, "round %d: a bound tensor written in place before the run", round);
        free(a), free(e);
        sb_tensor_free(o4[0]), sb_tensor_free(oe[0]), sb_tensor_free(src);
    }
    sb_program_free(echo), sb_program_free(twice), sb_program_free(twice_cpu);
    sb_tensor_free(buf);
}

// ---- every scenario ----

/* every scenario on dev: eager ops and weight views within tol_eager, the traced block within
 * tol_block (the model's scenarios skip when the shared test data is absent) */
static void dl_check_all(int dev, double tol_eager, double tol_block) {
    dl_check_mixed(dev);
    dl_check_tensor_ops(dev, tol_eager);
    dl_check_cache_handoff(dev);
    dl_check_inplace(dev);
    dl_block b = {.C = 16};
    const sb_status st = sb_model_load(test_data_path("models/test-llama-f32.gguf"), NULL, &b.m);
    if (st == SB_ERR_IO) {
        printf("SKIP block and eager weights: shared test data absent\n");
        return;
    }
    CHECKF(st == SB_OK, "load: %s", sb_last_error());
    if (st != SB_OK) return;
    sb_model_info mi;
    CHECK(sb_model_get_info(b.m, &mi) == SB_OK);
    b.E = mi.n_embd, b.Hq = mi.n_head, b.Hkv = mi.n_head_kv, b.D = mi.head_dim;
    dl_check_eager(&b, dev, tol_eager);
    dl_check_block(&b, dev, tol_block);
    dl_check_weight_views(&b, dev, tol_eager);
    sb_model_free(b.m);
}

#endif
