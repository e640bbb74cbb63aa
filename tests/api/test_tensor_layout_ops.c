/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_tensor_layout_ops.c — the ops of the public op table added after the first wave
 * (sonicboom.h: layer_norm, exact gelu, concat/cat, permute/transpose): eagerly against plain C
 * written here from torch's definitions (double math) on fresh random inputs (seed printed);
 * every permutation of a 4-D value; a compiled graph of all of them, large enough to run on
 * several threads, against the same ops applied eagerly with its outputs poisoned (NaN) first;
 * and the build-time errors (status, and the op, shapes and reason in the message).
 */
#include "test.h"

#include "sonicboom.h"
#include "api/tensor_lib.h"

#include <time.h>

static uint64_t seed;

static float frand(void) { return (float)((double)(test_rand_u64(&seed) >> 11) / 9007199254740992.0 * 4.0 - 2.0); }

/* an f32 tensor of n_dims dims ne with random values (kept in *vals when asked) */
static sb_tensor *mkf(int nd, const int64_t *ne, float **vals) {
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)ne[i];
    float *v = (float *)malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = frand();
    sb_tensor *t = NULL;
    CHECKF(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, nd, ne, v, n * sizeof *v, &t) == SB_OK, "create: %s", sb_last_error());
    if (vals) *vals = v;
    else free(v);
    return t;
}




/* t holds n values equal to ref within tol and has shape ne[0..nd) (then t is freed) */
static void check_op(const char *what, sb_tensor *t, const float *ref, size_t n, double tol, int nd, const int64_t *ne) {
    if (!t) return;
    sb_tensor_info info;
    CHECK(sb_tensor_get_info(t, &info) == SB_OK);
    for (int i = 0; i < 4; i++) CHECKF(info.ne[i] == (i < nd ? ne[i] : 1), "%s: ne[%d] = %lld", what, i, (long long)info.ne[i]);
    size_t k = 0;
    float *v = rd(t, &k);
    CHECKF(k == n, "%s: %zu values, expected %zu", what, k, n);
    const double e = maxrel(v, ref, n < k ? n : k);
    CHECKF(e <= tol, "%s: max rel error %g > %g", what, e, tol);
    free(v);
    sb_tensor_free(t);
}

/* torch.nn.functional.layer_norm over ne[0] in double: (x - mean) / sqrt(var + eps) * w + b */
static void ref_layer_norm(float *y, const float *x, const float *w, const float *b, int64_t E, int64_t T, double eps) {
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * E;
        double mean = 0, var = 0;
        for (int64_t e = 0; e < E; e++) mean += xr[e];
        mean /= (double)E;
        for (int64_t e = 0; e < E; e++) var += (xr[e] - mean) * (xr[e] - mean);
        var /= (double)E;
        for (int64_t e = 0; e < E; e++) y[t * E + e] = (float)((xr[e] - mean) / sqrt(var + eps) * (w ? w[e] : 1.0) + (b ? b[e] : 0.0));
    }
}

static float ref_gelu(float x) { return (float)(0.5 * x * (1.0 + erf(x / sqrt(2.0)))); }

static void test_norm_gelu(void) {
    const int64_t E = 40, T = 6, ne[2] = {E, T}, ne1[1] = {E};
    const size_t n = (size_t)(E * T);
    float *x, *w, *b, *ref = (float *)malloc(n * sizeof *ref);
    sb_tensor *tx = mkf(2, ne, &x), *tw = mkf(1, ne1, &w), *tb = mkf(1, ne1, &b);
    sb_tensor *xwb[3] = {tx, tw, tb};
    ref_layer_norm(ref, x, NULL, NULL, E, T, 1e-5);
    check_op("layer_norm (default eps)", op("layer_norm", xwb, 1, NULL, 0), ref, n, 1e-5, 2, ne);
    const double eps = 0.25;
    ref_layer_norm(ref, x, w, NULL, E, T, eps);
    check_op("layer_norm (weight)", op("layer_norm", xwb, 2, &eps, 1), ref, n, 1e-5, 2, ne);
    ref_layer_norm(ref, x, w, b, E, T, eps);
    check_op("layer_norm (weight, bias)", op("layer_norm", xwb, 3, &eps, 1), ref, n, 1e-5, 2, ne);
    /* a row of one value repeated: variance 0, the result 0 (not NaN) with eps > 0 */
    float flat[8] = {3, 3, 3, 3, 3, 3, 3, 3}, zero[8] = {0};
    const int64_t nf[1] = {8};
    sb_tensor *tf = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 1, nf, flat, sizeof flat, &tf) == SB_OK);
    check_op("layer_norm (flat row)", op("layer_norm", &tf, 1, NULL, 0), zero, 8, 0, 1, nf);
    sb_tensor_free(tf);
    for (size_t i = 0; i < n; i++) ref[i] = ref_gelu(x[i]);
    check_op("gelu", op("gelu", &tx, 1, NULL, 0), ref, n, 1e-6, 2, ne);
    /* gelu is not gelu_tanh: gelu(2) = 2 Phi(2) = 1.9544997; gelu_tanh(2) = 1.95460 (1.95508 by the fp16 table) */
    const float two = 2;
    sb_tensor *t2 = NULL, *g1, *g2;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 1, (const int64_t[1]){1}, &two, sizeof two, &t2) == SB_OK);
    g1 = op("gelu", &t2, 1, NULL, 0), g2 = op("gelu_tanh", &t2, 1, NULL, 0);
    float v1 = 0, v2 = 0;
    size_t k;
    CHECK(g1 && g2 && sb_tensor_read_f32(g1, &v1, 1, &k) == SB_OK && sb_tensor_read_f32(g2, &v2, 1, &k) == SB_OK);
    CHECKF(fabsf(v1 - 1.9544997f) < 1e-6f && fabsf(v2 - v1) > 5e-5f, "gelu(2) %.8g, gelu_tanh(2) %.8g", v1, v2);
    sb_tensor_free(g1), sb_tensor_free(g2), sb_tensor_free(t2);
    sb_tensor_free(tx), sb_tensor_free(tw), sb_tensor_free(tb);
    free(x), free(w), free(b), free(ref);
}

/* element (i0,i1,i2,i3) of a contiguous value of shape ne */
static size_t at(const int64_t *ne, const int64_t *i) { return (size_t)(i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))); }

static void ref_concat(float *y, float *const *xs, const int64_t (*nes)[4], int nx, int dim) {
    int64_t out[4] = {nes[0][0], nes[0][1], nes[0][2], nes[0][3]};
    out[dim] = 0;
    for (int s = 0; s < nx; s++) out[dim] += nes[s][dim];
    int64_t i[4];
    for (i[3] = 0; i[3] < out[3]; i[3]++)
        for (i[2] = 0; i[2] < out[2]; i[2]++)
            for (i[1] = 0; i[1] < out[1]; i[1]++)
                for (i[0] = 0; i[0] < out[0]; i[0]++) {
                    int64_t j[4] = {i[0], i[1], i[2], i[3]};
                    int s = 0;
                    while (j[dim] >= nes[s][dim]) j[dim] -= nes[s][dim], s++;
                    y[at(out, i)] = xs[s][at(nes[s], j)];
                }
}

static void test_concat(void) {
    /* three sources of [5,3,2,2] differing along each dim in turn */
    for (int dim = 0; dim < 4; dim++) {
        int64_t nes[3][4];
        float *xs[3];
        sb_tensor *ts[3];
        size_t total = 0;
        for (int s = 0; s < 3; s++) {
            const int64_t base[4] = {5, 3, 2, 2};
            memcpy(nes[s], base, sizeof base);
            nes[s][dim] = 1 + s * 2 + dim % 2; /* 1|2, 3|4, 5|6 */
            ts[s] = mkf(4, nes[s], &xs[s]);
            total += (size_t)(nes[s][0] * nes[s][1] * nes[s][2] * nes[s][3]);
        }
        float *ref = (float *)malloc(total * sizeof *ref);
        ref_concat(ref, xs, (const int64_t(*)[4])nes, 3, dim);
        int64_t out[4] = {5, 3, 2, 2};
        out[dim] = nes[0][dim] + nes[1][dim] + nes[2][dim];
        const double d = dim;
        char what[32];
        snprintf(what, sizeof what, "concat dim %d", dim);
        check_op(what, op(dim % 2 ? "cat" : "concat", ts, 3, &d, 1), ref, total, 0, 4, out);
        for (int s = 0; s < 3; s++) sb_tensor_free(ts[s]), free(xs[s]);
        free(ref);
    }
    /* the same tensor twice, 2-D: [a; a] along ne[1] */
    const int64_t ne[2] = {7, 2}, ne2[2] = {7, 4};
    float *a;
    sb_tensor *ta = mkf(2, ne, &a), *aa[2] = {ta, ta};
    float ref[28];
    memcpy(ref, a, 14 * sizeof *a), memcpy(ref + 14, a, 14 * sizeof *a);
    const double one = 1;
    check_op("concat (a, a)", op("concat", aa, 2, &one, 1), ref, 28, 0, 2, ne2);
    sb_tensor_free(ta), free(a);
}

/* y = x permuted by perm: y.ne[k] = x.ne[perm[k]] */
static void ref_permute(float *y, const float *x, const int64_t *ne, const int *perm) {
    const int64_t on[4] = {ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]};
    int64_t i[4];
    for (i[3] = 0; i[3] < on[3]; i[3]++)
        for (i[2] = 0; i[2] < on[2]; i[2]++)
            for (i[1] = 0; i[1] < on[1]; i[1]++)
                for (i[0] = 0; i[0] < on[0]; i[0]++) {
                    int64_t j[4];
                    for (int k = 0; k < 4; k++) j[perm[k]] = i[k];
                    y[at(on, i)] = x[at(ne, j)];
                }
}

static void test_permute(void) {
    const int64_t ne[4] = {3, 4, 5, 2};
    const size_t n = 120;
    float *x, ref[120];
    sb_tensor *tx = mkf(4, ne, &x);
    int checked = 0, views = 0;
    for (int p = 0; p < 256; p++) {
        const int perm[4] = {p & 3, (p >> 2) & 3, (p >> 4) & 3, p >> 6};
        if ((1 << perm[0] | 1 << perm[1] | 1 << perm[2] | 1 << perm[3]) != 15) continue;
        ref_permute(ref, x, ne, perm);
        const double args[4] = {perm[0], perm[1], perm[2], perm[3]};
        const int64_t out[4] = {ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]};
        sb_tensor *t = op("permute", &tx, 1, args, 4);
        sb_tensor_info info;
        CHECK(t && sb_tensor_get_info(t, &info) == SB_OK);
        views += t && info.is_view;
        char what[48];
        snprintf(what, sizeof what, "permute %d,%d,%d,%d", perm[0], perm[1], perm[2], perm[3]);
        check_op(what, t, ref, n, 0, 4, out);
        checked++;
    }
    CHECK_EQ_INT(checked, 24);
    CHECK_EQ_INT(views, 1); /* only the identity keeps the memory order of a value with no dim of 1 */
    /* transpose of a matrix; fewer args leave the later dims in place */
    const int64_t m[2] = {6, 9}, mt[2] = {9, 6};
    float *a, at2[54];
    sb_tensor *ta = mkf(2, m, &a);
    for (int64_t r = 0; r < 9; r++)
        for (int64_t c = 0; c < 6; c++) at2[c * 9 + r] = a[r * 6 + c];
    const double d01[2] = {0, 1}, d10[2] = {1, 0};
    check_op("transpose 0 1", op("transpose", &ta, 1, d01, 2), at2, 54, 0, 2, mt);
    check_op("permute 1 0", op("permute", &ta, 1, d10, 2), at2, 54, 0, 2, mt);
    /* moving a dim of 1 keeps the order: a view of the same memory, no copy */
    const int64_t col[2] = {6, 1}, colt[2] = {1, 6};
    sb_tensor *tc = mkf(2, col, NULL), *v = op("transpose", &tc, 1, d01, 2);
    sb_tensor_info info;
    CHECK(v && sb_tensor_get_info(v, &info) == SB_OK && info.is_view && info.ne[0] == 1 && info.ne[1] == 6);
    float *cv = rd(tc, NULL);
    check_op("transpose of a column (view)", v, cv, 6, 0, 2, colt);
    sb_tensor_free(tc), sb_tensor_free(ta), sb_tensor_free(tx);
    free(cv), free(a), free(x);
}

/* one graph of all four ops, big enough for the row-parallel paths (>= 16384 elements a node):
 * y = permute(concat(gelu(layer_norm(x, w, b)), x2; dim 1), 1 0); compiled on 2 threads vs eager */
static void test_graph(void) {
    const int64_t E = 256, T = 80, T2 = 16, ne[2] = {E, T}, ne2[2] = {E, T2}, ne1[1] = {E};
    float *x;
    sb_tensor *tx = mkf(2, ne, &x), *tx2 = mkf(2, ne2, NULL), *tw = mkf(1, ne1, NULL), *tb = mkf(1, ne1, NULL);
    sb_graph *g = NULL;
    sb_value vx = -1, vx2 = -1, vw = -1, vb = -1, h = -1, y = -1, c = -1, p = -1, dead = -1;
    CHECK(sb_graph_create(&g) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, ne, &vx) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x2", SB_TYPE_F32, 2, ne2, &vx2) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_DATA, tw, &vw) == SB_OK && sb_graph_tensor(g, SB_INPUT_DATA, tb, &vb) == SB_OK);
    const double eps = 1e-5, one = 1, d10[2] = {1, 0};
    CHECK(sb_graph_op(g, "layer_norm", (sb_value[3]){vx, vw, vb}, 3, &eps, 1, &h) == SB_OK);
    CHECK(sb_graph_op(g, "gelu", &h, 1, NULL, 0, &y) == SB_OK);
    CHECK(sb_graph_op(g, "concat", (sb_value[2]){y, vx2}, 2, &one, 1, &c) == SB_OK);
    CHECK(sb_graph_op(g, "permute", &c, 1, d10, 2, &p) == SB_OK);
    CHECK(sb_graph_op(g, "transpose", &h, 1, d10, 2, &dead) == SB_OK); /* no output reads it */
    sb_tensor_info vi;
    CHECK(sb_graph_value_info(g, p, &vi) == SB_OK && vi.ne[0] == T + T2 && vi.ne[1] == E && !vi.is_view);
    CHECK(sb_graph_output(g, p, "y") == SB_OK && sb_graph_output(g, h, "h") == SB_OK);
    char text[8192];
    size_t tn;
    CHECK(sb_graph_print(g, text, sizeof text, &tn) == SB_OK && strstr(text, "layer_norm(") && strstr(text, "eps=9.99999975e-06") &&
          strstr(text, "concat(") && strstr(text, "dim=1") && strstr(text, "perm=1,0,2,3") && strstr(text, "gelu("));
    const sb_compile_params cp = {.n_threads = 2};
    sb_program *pr = NULL;
    CHECKF(sb_graph_compile(g, &cp, &pr) == SB_OK && pr, "compile: %s", sb_last_error());
    sb_graph_free(g);
    /* the planner: the weight and bias fused into one chain, the unused transpose gone */
    CHECK(sb_program_print(pr, text, sizeof text, &tn) == SB_OK && strstr(text, "layer_norm(") && strstr(text, "[mul @1; add @2]") &&
          strstr(text, "perm=1,0,2,3") && !strstr(text, "perm=1,0,2,3 : f32[80,256]"));
    /* eager, step by step */
    sb_tensor *xwb[3] = {tx, tw, tb}, *e1 = op("layer_norm", xwb, 3, &eps, 1), *e2 = op("gelu", &e1, 1, NULL, 0);
    sb_tensor *cc[2] = {e2, tx2}, *e3 = op("concat", cc, 2, &one, 1), *e4 = op("permute", &e3, 1, d10, 2);
    /* outputs poisoned with NaN, written in place */
    const size_t ny = (size_t)(E * (T + T2)), nh = (size_t)(E * T);
    float *nan = (float *)malloc(ny * sizeof *nan);
    for (size_t i = 0; i < ny; i++) nan[i] = NAN;
    const int64_t ney[2] = {T + T2, E};
    sb_tensor *oy = NULL, *oh = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, ney, nan, ny * sizeof *nan, &oy) == SB_OK &&
          sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, ne, nan, nh * sizeof *nan, &oh) == SB_OK);
    sb_tensor *in[2] = {tx, tx2}, *out[2] = {oy, oh};
    CHECKF(sb_program_run(pr, in, 2, out, 2) == SB_OK && out[0] == oy && out[1] == oh, "run: %s", sb_last_error());
    float *cy = rd(oy, NULL), *ch = rd(oh, NULL), *ey = rd(e4, NULL), *eh = rd(e1, NULL);
    CHECKF(maxrel(cy, ey, ny) == 0 && maxrel(ch, eh, nh) == 0, "compiled vs eager: %g %g", maxrel(cy, ey, ny), maxrel(ch, eh, nh));
    /* and the eager result against the plain C reference */
    float *w = rd(tw, NULL), *b = rd(tb, NULL), *x2 = rd(tx2, NULL), *r1 = (float *)malloc(ny * sizeof *r1), *r2 = (float *)malloc(ny * sizeof *r2);
    ref_layer_norm(r1, x, w, b, E, T, eps);
    for (size_t i = 0; i < nh; i++) r1[i] = ref_gelu(r1[i]);
    memcpy(r1 + nh, x2, (ny - nh) * sizeof *r1); /* concat along ne[1] of [E,T] and [E,T2] */
    const int perm[4] = {1, 0, 2, 3};
    const int64_t nec[4] = {E, T + T2, 1, 1};
    ref_permute(r2, r1, nec, perm);
    CHECKF(maxrel(cy, r2, ny) <= 1e-5, "graph vs plain C: %g", maxrel(cy, r2, ny));
    sb_program_free(pr);
    sb_tensor *all[] = {tx, tx2, tw, tb, e1, e2, e3, e4, oy, oh};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) sb_tensor_free(all[i]);
    free(x), free(nan), free(cy), free(ch), free(ey), free(eh), free(w), free(b), free(x2), free(r1), free(r2);
}

/* status SB_ERR_INVALID_ARG and every fragment in the message */
#define BAD(call, ...)                                                                                          \
    do {                                                                                                        \
        o = NULL;                                                                                               \
        const sb_status st_ = (call);                                                                           \
        const char *want_[] = {__VA_ARGS__};                                                                    \
        int ok_ = st_ == SB_ERR_INVALID_ARG && !o;                                                              \
        for (size_t k_ = 0; k_ < sizeof want_ / sizeof *want_; k_++) ok_ = ok_ && strstr(sb_last_error(), want_[k_]); \
        CHECKF(ok_, "%s: status %d, message \"%s\"", #call, (int)st_, sb_last_error());                        \
    } while (0)

static void test_errors(void) {
    const int64_t n83[2] = {8, 3}, n63[2] = {6, 3}, n82[2] = {8, 2}, n8[1] = {8};
    sb_tensor *a = mkf(2, n83, NULL), *b = mkf(2, n63, NULL), *c = mkf(2, n82, NULL), *w = mkf(1, n8, NULL), *o;
    const int32_t ids[3] = {0, 1, 2};
    sb_tensor *i = NULL, *h = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_I32, 1, (const int64_t[1]){3}, ids, sizeof ids, &i) == SB_OK);
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F16, 2, n82, NULL, 0, &h) == SB_OK);
    sb_tensor *ab[2] = {a, b}, *ac[2] = {a, c}, *ai[2] = {a, i}, *ba[2] = {b, a}, *aw[3] = {a, w, b};
    const double d0 = 0, d1 = 1, d4 = 4, dd[2] = {0, 0}, d5[2] = {5, 0}, nan = NAN, neg = -1;
    BAD(sb_tensor_op("concat", ab, 2, &d1, 1, &o), "concat(f32[8,3], f32[6,3])", "source 1 has ne[0] = 6, source 0 8 (only ne[1] may differ)");
    BAD(sb_tensor_op("concat", ac, 2, &d0, 1, &o), "concat(f32[8,3], f32[8,2])", "(only ne[0] may differ)");
    BAD(sb_tensor_op("concat", ab, 2, &d4, 1, &o), "concat(f32[8,3], f32[6,3])", "dim must be an integer 0..3");
    BAD(sb_tensor_op("concat", ab, 1, &d0, 1, &o), "concat: 1 sources, expected 2..8");
    BAD(sb_tensor_op("concat", ab, 2, NULL, 0, &o), "concat: 0 numbers, expected 1..1");
    BAD(sb_tensor_op("cat", ai, 2, &d0, 1, &o), "cat(f32[8,3], i32[3])", "source 1 is i32");
    BAD(sb_tensor_op("permute", &a, 1, dd, 2, &o), "permute(f32[8,3])", "0,0,2,3 is not a permutation of 0..3");
    BAD(sb_tensor_op("permute", &a, 1, d5, 2, &o), "permute(f32[8,3])", "dims must be integers 0..3");
    BAD(sb_tensor_op("permute", &h, 1, (const double[2]){1, 0}, 2, &o), "permute(f16[8,2])", "permute: input must be f32");
    BAD(sb_tensor_op("transpose", &a, 1, &d0, 1, &o), "transpose: 1 numbers, expected 2..2");
    BAD(sb_tensor_op("layer_norm", ba, 2, NULL, 0, &o), "layer_norm(f32[6,3], f32[8,3])", "its weight must be f32 [6] or the result's shape f32[6,3]");
    BAD(sb_tensor_op("layer_norm", aw, 3, NULL, 0, &o), "layer_norm(f32[8,3], f32[8], f32[6,3])", "its bias must be f32 [8]");
    BAD(sb_tensor_op("layer_norm", &a, 1, &nan, 1, &o), "layer_norm(f32[8,3])", "eps must be finite and >= 0");
    BAD(sb_tensor_op("layer_norm", &a, 1, &neg, 1, &o), "eps must be finite and >= 0");
    BAD(sb_tensor_op("layer_norm", &h, 1, NULL, 0, &o), "layer_norm(f16[8,2])", "input must be f32");
    BAD(sb_tensor_op("gelu", &a, 1, &d0, 1, &o), "gelu: 1 numbers, expected 0..0");
    /* in a graph: the same checks, and a failed op appends nothing */
    sb_graph *g = NULL;
    sb_value va = -1, vc = -1, v = -1;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "a", SB_TYPE_F32, 2, n83, &va) == SB_OK &&
          sb_graph_input(g, SB_INPUT_DATA, "c", SB_TYPE_F32, 2, n82, &vc) == SB_OK);
    char before[2048], after[2048];
    size_t tn;
    CHECK(sb_graph_print(g, before, sizeof before, &tn) == SB_OK);
    BAD(sb_graph_op(g, "concat", (sb_value[2]){va, vc}, 2, &d0, 1, &v), "concat(f32[8,3], f32[8,2])", "only ne[0] may differ");
    BAD(sb_graph_op(g, "permute", &va, 1, (const double[4]){3, 2, 1, 1}, 4, &v), "3,2,1,1 is not a permutation");
    CHECK(sb_graph_print(g, after, sizeof after, &tn) == SB_OK && !strcmp(before, after) && v == -1);
    CHECK(sb_graph_op(g, "concat", (sb_value[2]){va, vc}, 2, &d1, 1, &v) == SB_OK && sb_graph_value_info(g, v, &(sb_tensor_info){0}) == SB_OK);
    sb_graph_free(g);
    int found = 0;
    for (int k = 0; sb_op_name(k); k++)
        for (int j = 0; j < 6; j++) found += !strcmp(sb_op_name(k), (const char *[]){"layer_norm", "gelu", "concat", "cat", "permute", "transpose"}[j]);
    CHECK_EQ_INT(found, 6);
    sb_tensor *all[] = {a, b, c, w, i, h};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) sb_tensor_free(all[k]);
}

int main(void) {
    seed = (uint64_t)time(NULL) * 2654435761u + 7;
    printf("seed %llu\n", (unsigned long long)seed);
    test_norm_gelu();
    test_concat();
    test_permute();
    test_graph();
    test_errors();
    return test_summary();
}
