/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_tensor_api.c — the public tensor / graph / program ABI (sonicboom.h, ABI level 2):
 * every eager op against a plain C reference on fresh random inputs (seed printed), a compiled
 * graph against the same ops applied eagerly, dead values dropped by the planner, a quantized
 * weight used in place, outputs poisoned before they are written, and every error path with its
 * status and the words of its message.
 */
#include "test.h"

#include "sonicboom.h"
#include "api/tensor_lib.h"

#include <math.h>
#include <time.h>

static uint64_t seed;

static float frand(void) { return (float)((double)(test_rand_u64(&seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static sb_tensor *mk(int type, int nd, int64_t a, int64_t b, int64_t c, const void *data, size_t size) {
    const int64_t ne[4] = {a, b, c, 1};
    sb_tensor *t = NULL;
    sb_status st = sb_tensor_create(SB_DEVICE_CPU, type, nd, ne, data, size, &t);
    CHECKF(st == SB_OK, "create: %s", sb_last_error());
    return t;
}

static sb_tensor *mkf(int nd, int64_t a, int64_t b, int64_t c, float **vals) {
    const size_t n = (size_t)(a * b * c);
    float *v = (float *)malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = frand();
    sb_tensor *t = mk(SB_TYPE_F32, nd, a, b, c, v, n * sizeof *v);
    if (vals) *vals = v;
    else free(v);
    return t;
}




static void check_op(const char *name, sb_tensor *t, const float *ref, size_t n, double tol) {
    size_t k = 0;
    if (!t) return;
    float *v = rd(t, &k);
    CHECKF(k == n, "%s: %zu values, expected %zu", name, k, n);
    double e = maxrel(v, ref, n < k ? n : k);
    CHECKF(e <= tol, "%s: max rel error %g > %g", name, e, tol);
    free(v);
    sb_tensor_free(t);
}

/* what SB_DEVICE_CUDA gives on this machine: SB_OK with a GPU; else SB_ERR_UNSUPPORTED (a build
 * without CUDA) or SB_ERR_DEVICE (no usable GPU), the reason named after "SB_DEVICE_CUDA: " */
static sb_status cuda_expect(void) {
    sb_backend_info bi;
    CHECK(sb_backend_get_info(&bi) == SB_OK);
    return !bi.cuda_compiled ? SB_ERR_UNSUPPORTED : bi.cuda_devices > 0 ? SB_OK : SB_ERR_DEVICE;
}

static void test_tensors(void) {
    CHECK_EQ_INT(sb_abi_level(), SB_ABI_LEVEL);
    CHECK(SB_ABI_LEVEL >= 2);
    const int32_t ids[5] = {3, -1, 7, 0, 42};
    sb_tensor *t = mk(SB_TYPE_I32, 1, 5, 1, 1, ids, sizeof ids);
    float buf[8];
    for (int i = 0; i < 8; i++) buf[i] = -99;
    size_t n = 0;
    CHECK(sb_tensor_read_f32(t, buf, 3, &n) == SB_ERR_BUFFER_TOO_SMALL && n == 5);
    CHECK(buf[0] == 3 && buf[1] == -1 && buf[2] == 7 && buf[3] == -99); /* nothing past cap */
    CHECK(sb_tensor_read_f32(t, buf, 8, &n) == SB_OK && n == 5 && buf[4] == 42 && buf[5] == -99);
    sb_tensor_info info;
    CHECK(sb_tensor_get_info(t, &info) == SB_OK && info.type == SB_TYPE_I32 && info.n_dims == 1 && info.ne[0] == 5 &&
          info.ne[1] == 1 && info.nbytes == 20 && !info.is_view);
    sb_tensor_free(t);
    sb_tensor_free(NULL);
    /* f16 round trip, zeros */
    const uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0}; /* 1, -2, 0.5, 0 */
    t = mk(SB_TYPE_F16, 2, 2, 2, 1, h, sizeof h);
    CHECK(sb_tensor_read_f32(t, buf, 8, &n) == SB_OK && n == 4 && buf[0] == 1 && buf[1] == -2 && buf[2] == 0.5f && buf[3] == 0);
    sb_tensor_free(t);
    t = mk(SB_TYPE_F32, 3, 4, 3, 2, NULL, 0);
    float *z = rd(t, &n);
    CHECK(n == 24 && z[0] == 0 && z[23] == 0);
    free(z);
    sb_tensor_free(t);
    /* errors */
    const int64_t ne[4] = {4, 2, 1, 1}, bad[4] = {0, 2, 1, 1}, odd[4] = {16, 1, 1, 1};
    sb_tensor *o = (sb_tensor *)1;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 0, ne, NULL, 0, &o) == SB_ERR_INVALID_ARG && !o);
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 5, ne, NULL, 0, &o) == SB_ERR_INVALID_ARG);
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, bad, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "ne[0] = 0"));
    const int64_t huge[4] = {(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40, 1};
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 3, huge, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "2^48"));
    CHECK(sb_tensor_create(SB_DEVICE_CPU, 4, 2, ne, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "type 4"));
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_Q8_0, 1, odd, NULL, 0, &o) == SB_ERR_INVALID_ARG &&
          strstr(sb_last_error(), "multiple of Q8_0's block of 32"));
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, ne, buf, 31, &o) == SB_ERR_INVALID_ARG &&
          strstr(sb_last_error(), "needs 32 bytes of data, 31 given"));
    /* devices: CUDA where this machine has one, else refused with the reason; AUTO falls back to the CPU */
    const sb_status cu = cuda_expect();
    sb_status st = sb_tensor_create(SB_DEVICE_CUDA, SB_TYPE_F32, 2, ne, NULL, 0, &o);
    CHECKF(st == cu && (cu == SB_OK ? o != NULL : !o && strstr(sb_last_error(), "sb_tensor_create: SB_DEVICE_CUDA: ") != NULL), "cuda tensor: %d %s",
           st, sb_last_error());
    CHECK(!o || (sb_tensor_get_info(o, &info) == SB_OK && info.device == SB_DEVICE_CUDA));
    sb_tensor_free(o);
    CHECK(sb_tensor_create(SB_DEVICE_AUTO, SB_TYPE_F32, 2, ne, NULL, 0, &o) == SB_OK && o);
    CHECK(sb_tensor_get_info(o, &info) == SB_OK && info.device == (cu == SB_OK ? SB_DEVICE_CUDA : SB_DEVICE_CPU));
    sb_tensor_free(o);
    CHECK(sb_tensor_create(7, SB_TYPE_F32, 2, ne, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "device 7"));
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, NULL, NULL, 0, &o) == SB_ERR_INVALID_ARG);
    CHECK(sb_tensor_get_info(NULL, &info) == SB_ERR_INVALID_ARG);
    CHECK(sb_tensor_read_f32(NULL, buf, 1, &n) == SB_ERR_INVALID_ARG);
}

/* the elementwise and row ops against plain C */
static void test_eager_pointwise(void) {
    const int64_t E = 24, T = 5;
    const size_t n = (size_t)(E * T);
    float *a, *b, *w, *ref = (float *)malloc(n * sizeof *ref);
    sb_tensor *ta = mkf(2, E, T, 1, &a), *tb = mkf(2, E, T, 1, &b), *tw = mkf(1, E, 1, 1, &w);
    sb_tensor *ab[2] = {ta, tb}, *aw[2] = {ta, tw};
    for (size_t i = 0; i < n; i++) ref[i] = a[i] + b[i];
    check_op("add", op("add", ab, 2, NULL, 0), ref, n, 0);
    for (size_t i = 0; i < n; i++) ref[i] = a[i] * w[i % E];
    check_op("mul (broadcast)", op("mul", aw, 2, NULL, 0), ref, n, 0);
    const double s = 0.37;
    for (size_t i = 0; i < n; i++) ref[i] = a[i] * (float)s;
    check_op("scale", op("scale", ab, 1, &s, 1), ref, n, 0);
    for (size_t i = 0; i < n; i++) ref[i] = a[i] / (1 + expf(-a[i]));
    check_op("silu", op("silu", ab, 1, NULL, 0), ref, n, 1e-6);
    for (size_t i = 0; i < n; i++) ref[i] = 0.5f * a[i] * (1 + tanhf(0.7978845608f * (a[i] + 0.044715f * a[i] * a[i] * a[i])));
    check_op("gelu_tanh", op("gelu_tanh", ab, 1, NULL, 0), ref, n, 2e-3); /* ggml's fp16 table */
    for (size_t i = 0; i < n; i++) ref[i] = a[i] / (1 + expf(-a[i])) * b[i];
    check_op("swiglu", op("swiglu", ab, 2, NULL, 0), ref, n, 1e-6);
    const double cap = 0.5;
    for (size_t i = 0; i < n; i++) ref[i] = 0.5f * tanhf(a[i] / 0.5f);
    check_op("softcap", op("softcap", ab, 1, &cap, 1), ref, n, 1e-6);
    const double eps = 1e-5;
    for (int64_t t = 0; t < T; t++) {
        double ss = 0;
        for (int64_t e = 0; e < E; e++) ss += (double)a[t * E + e] * a[t * E + e];
        const double sc = 1.0 / sqrt(ss / (double)E + eps);
        for (int64_t e = 0; e < E; e++) ref[t * E + e] = (float)(a[t * E + e] * sc) * w[e];
    }
    check_op("rms_norm (weight)", op("rms_norm", aw, 2, &eps, 1), ref, n, 1e-6);
    for (int64_t t = 0; t < T; t++) {
        double mx = -1e30, sum = 0;
        for (int64_t e = 0; e < E; e++) mx = a[t * E + e] > mx ? a[t * E + e] : mx;
        for (int64_t e = 0; e < E; e++) sum += exp(a[t * E + e] - mx);
        for (int64_t e = 0; e < E; e++) ref[t * E + e] = (float)(exp(a[t * E + e] - mx) / sum);
    }
    check_op("softmax", op("softmax", ab, 1, NULL, 0), ref, n, 1e-6);
    /* reshape: a view of the same memory; slice copies columns 1..3 */
    const double shape[3] = {(double)E / 2, 2, (double)T};
    sb_tensor *r = op("view", ab, 1, shape, 3);
    sb_tensor_info info;
    CHECK(r && sb_tensor_get_info(r, &info) == SB_OK && info.is_view && info.n_dims == 3 && info.ne[0] == E / 2 && info.ne[2] == T);
    check_op("reshape", r, a, n, 0);
    const double sl[2] = {1, 3};
    for (int64_t t = 0; t < 3; t++) memcpy(ref + t * E, a + (t + 1) * E, (size_t)E * sizeof *ref);
    check_op("slice", op("slice", ab, 1, sl, 2), ref, (size_t)(E * 3), 0);
    sb_tensor_free(ta), sb_tensor_free(tb), sb_tensor_free(tw);
    free(a), free(b), free(w), free(ref);
}

/* linear (f32 weight + bias), embedding, rope, kv_store + attention */
static void test_eager_model_ops(void) {
    const int64_t K = 32, N = 12, T = 3;
    float *x, *w, *bias;
    sb_tensor *tx = mkf(2, K, T, 1, &x), *tw = mkf(2, K, N, 1, &w), *tb = mkf(1, N, 1, 1, &bias);
    float ref[12 * 32];
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)w[j * K + k] * x[t * K + k];
            ref[t * N + j] = (float)acc + bias[j];
        }
    sb_tensor *xwb[3] = {tx, tw, tb};
    check_op("linear", op("linear", xwb, 3, NULL, 0), ref, (size_t)(N * T), 1e-5);
    /* embedding(idx, w): rows of w [K, N] */
    const int32_t idx[4] = {11, 0, 5, 5};
    sb_tensor *ti = mk(SB_TYPE_I32, 1, 4, 1, 1, idx, sizeof idx);
    for (int i = 0; i < 4; i++) memcpy(ref + i * K, w + idx[i] * K, (size_t)K * sizeof *ref);
    sb_tensor *iw[2] = {ti, tw};
    check_op("embedding", op("embedding", iw, 2, NULL, 0), ref, (size_t)(4 * K), 0);
    const int32_t badidx[4] = {11, 0, 12, 5};
    sb_tensor *tbad = mk(SB_TYPE_I32, 1, 4, 1, 1, badidx, sizeof badidx), *o = NULL;
    sb_tensor *bw[2] = {tbad, tw};
    CHECK(sb_tensor_op("embedding", bw, 2, NULL, 0, &o) == SB_ERR_RANGE && !o && strstr(sb_last_error(), "token 12"));
    /* rope, normal mode, on x [D=8, H=2, T=3] at positions 4, 9, 0 */
    const int64_t D = 8, H = 2;
    float *q;
    sb_tensor *tq = mkf(3, D, H, T, &q);
    const int32_t pos[3] = {4, 9, 0};
    sb_tensor *tp = mk(SB_TYPE_I32, 1, T, 1, 1, pos, sizeof pos);
    const double rargs[4] = {(double)D, 0, 10000, 1};
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < D / 2; i++) {
                const double th = pos[t] * pow(10000.0, -2.0 * (double)i / (double)D);
                const float *v = q + (t * H + h) * D + 2 * i;
                ref[(t * H + h) * D + 2 * i] = (float)(v[0] * cos(th) - v[1] * sin(th));
                ref[(t * H + h) * D + 2 * i + 1] = (float)(v[0] * sin(th) + v[1] * cos(th));
            }
    sb_tensor *qp[2] = {tq, tp};
    sb_tensor *rq = op("rope", qp, 2, rargs, 4);
    check_op("rope", rq, ref, (size_t)(D * H * T), 1e-5);
    /* kv_store writes columns 4, 9, 0 of an f32 cache [Dkv=8, C=12]; attention (Hq=2, Hkv=1) */
    const int64_t C = 12;
    sb_tensor *kc = mk(SB_TYPE_F32, 2, D, C, 1, NULL, 0), *vc = mk(SB_TYPE_F32, 2, D, C, 1, NULL, 0);
    float *k, *v;
    sb_tensor *tk = mkf(2, D, T, 1, &k), *tv = mkf(2, D, T, 1, &v);
    sb_tensor *ks[3] = {kc, tk, tp}, *vs[3] = {vc, tv, tp};
    sb_tensor *kc2 = op("kv_store", ks, 3, NULL, 0), *vc2 = op("kv_store", vs, 3, NULL, 0);
    sb_tensor_info info;
    CHECK(kc2 && sb_tensor_get_info(kc2, &info) == SB_OK && info.is_view && info.ne[1] == C);
    size_t nk;
    float *kcache = rd(kc, &nk);
    CHECK(nk == (size_t)(D * C) && !memcmp(kcache + 9 * D, k + 1 * D, (size_t)D * sizeof *k) && kcache[D] == 0);
    free(kcache);
    /* attention after the store: query t sees positions <= pos[t] that were written (others are 0) */
    sb_tensor *qk[4] = {tq, kc2, vc2, tp};
    const double aargs[2] = {1, 0.5};
    float *kv_k = rd(kc, NULL), *kv_v = rd(vc, NULL);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++) {
            const float *qq = q + (t * H + h) * D;
            double s[12], mx = -1e30, sum = 0;
            for (int64_t j = 0; j <= pos[t]; j++) {
                double d = 0;
                for (int64_t e = 0; e < D; e++) d += (double)qq[e] * kv_k[j * D + e];
                s[j] = d * 0.5;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = 0; j <= pos[t]; j++) sum += (s[j] = exp(s[j] - mx));
            for (int64_t e = 0; e < D; e++) {
                double acc = 0;
                for (int64_t j = 0; j <= pos[t]; j++) acc += s[j] / sum * kv_v[j * D + e];
                ref[t * H * D + h * D + e] = (float)acc;
            }
        }
    check_op("attention", op("attention", qk, 4, aargs, 2), ref, (size_t)(D * H * T), 1e-5);
    free(kv_k), free(kv_v);
    /* a position past the cache */
    const int32_t far[3] = {4, 12, 0};
    sb_tensor *tfar = mk(SB_TYPE_I32, 1, T, 1, 1, far, sizeof far);
    sb_tensor *kf[3] = {kc, tk, tfar};
    CHECK(sb_tensor_op("kv_store", kf, 3, NULL, 0, &o) == SB_ERR_CONTEXT_FULL && !o && strstr(sb_last_error(), "position 12"));
    /* an f16 cache: eagerly refused (outputs are f32), inside a graph written; its value is no output */
    sb_tensor *hc = mk(SB_TYPE_F16, 2, D, C, 1, NULL, 0);
    sb_tensor *hs[3] = {hc, tk, tp};
    CHECK(sb_tensor_op("kv_store", hs, 3, NULL, 0, &o) == SB_ERR_UNSUPPORTED && !o && strstr(sb_last_error(), "f32"));
    sb_graph *g = NULL;
    sb_value vc16 = -1, vk = -1, vpos = -1, st16 = -1;
    const int64_t nk2[2] = {D, T}, np[1] = {T};
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_tensor(g, SB_INPUT_CACHE, hc, &vc16) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "k", SB_TYPE_F32, 2, nk2, &vk) == SB_OK &&
          sb_graph_input(g, SB_INPUT_POS, "pos", SB_TYPE_I32, 1, np, &vpos) == SB_OK);
    CHECK(sb_graph_op(g, "kv_store", (sb_value[3]){vc16, vk, vpos}, 3, NULL, 0, &st16) == SB_OK);
    CHECK(sb_graph_output(g, st16, "cache") == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "f16[8,12]; outputs are f32"));
    sb_compile_params bad = {.n_threads = -1};
    sb_program *pr = NULL;
    CHECK(sb_graph_compile(g, &bad, &pr) == SB_ERR_INVALID_ARG && !pr && strstr(sb_last_error(), "n_threads -1"));
    sb_graph_free(g);
    sb_tensor_free(hc);
    CHECK(sb_tensor_from_weight(NULL, "x", &o) == SB_ERR_INVALID_ARG);
    CHECK(sb_program_run(NULL, NULL, 0, &o, 0) == SB_ERR_INVALID_ARG);
    sb_tensor *all[] = {tx, tw, tb, ti, tbad, tq, tp, kc, vc, tk, tv, kc2, vc2, tfar};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) sb_tensor_free(all[i]);
    free(x), free(w), free(bias), free(q), free(k), free(v);
}

/* the shape and kind checks of ops: status and the op/shape words of the message */
static void test_op_errors(void) {
    sb_tensor *a = mkf(2, 8, 3, 1, NULL), *b = mkf(2, 6, 3, 1, NULL), *o = (sb_tensor *)1;
    const int32_t ids[3] = {0, 1, 2};
    sb_tensor *i = mk(SB_TYPE_I32, 1, 3, 1, 1, ids, sizeof ids);
    sb_tensor *ab[2] = {a, b}, *ai[2] = {a, i}, *aa[4] = {a, a, a, i};
    CHECK(sb_tensor_op("addd", ab, 2, NULL, 0, &o) == SB_ERR_NOT_FOUND && !o && strstr(sb_last_error(), "\"addd\""));
    CHECK(sb_tensor_op("add", ab, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "add(f32[8,3], f32[6,3])"));
    CHECK(sb_tensor_op("add", ab, 1, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "1 sources, expected 2..2"));
    CHECK(sb_tensor_op("scale", ab, 1, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "0 numbers, expected 1..1"));
    const double nan = NAN, big[2] = {5, 2};
    CHECK(sb_tensor_op("scale", ab, 1, &nan, 1, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "not finite"));
    CHECK(sb_tensor_op("matmul", ab, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "matmul(f32[8,3], f32[6,3])") &&
          strstr(sb_last_error(), "K mismatch"));
    CHECK(sb_tensor_op("add", ai, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "i32"));
    CHECK(sb_tensor_op("embedding", ab, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "i32 vector of token ids"));
    CHECK(sb_tensor_op("slice", ab, 1, big, 2, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "slice(f32[8,3])"));
    const double sh[2] = {5, 5};
    CHECK(sb_tensor_op("reshape", ab, 1, sh, 2, &o) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "element count"));
    const double hk = 1;
    CHECK(sb_tensor_op("attention", aa, 4, &hk, 1, &o) == SB_ERR_INVALID_ARG &&
          strstr(sb_last_error(), "attention(f32[8,3], f32[8,3], f32[8,3], i32[3]): attention: pos must be i32 [T]"));
    CHECK(sb_tensor_op(NULL, ab, 2, NULL, 0, &o) == SB_ERR_INVALID_ARG);
    CHECK(sb_op_name(0) && !sb_op_name(1000) && !sb_op_name(-1));
    int found = 0;
    for (int k = 0; sb_op_name(k); k++) found += !strcmp(sb_op_name(k), "softmax") || !strcmp(sb_op_name(k), "linear");
    CHECK(found == 2);
    sb_tensor_free(a), sb_tensor_free(b), sb_tensor_free(i);
}

/* a graph: x -> rms_norm(w) -> linear(W) -> silu -> + x2, and an unused branch; compiled vs eager,
 * dead values gone from the plan, outputs poisoned first, in-place outputs, run errors */
static void test_graph(void) {
    const int64_t E = 16, N = 16, T = 4;
    sb_tensor *w = mkf(1, E, 1, 1, NULL), *W = mkf(2, E, N, 1, NULL), *x = mkf(2, E, T, 1, NULL), *x2 = mkf(2, N, T, 1, NULL);
    sb_graph *g = NULL;
    CHECK(sb_graph_create(&g) == SB_OK && g);
    const int64_t ne[2] = {E, T};
    sb_value vx = -1, vx2 = -1, vw = -1, vW = -1, h = -1, y = -1, dead = -1, tmp = -1;
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, ne, &vx) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x2", SB_TYPE_F32, 2, ne, &vx2) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_DATA, w, &vw) == SB_OK && sb_graph_tensor(g, SB_INPUT_DATA, W, &vW) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_DATA, w, &tmp) == SB_OK && tmp == vw); /* bound once */
    const double eps = 1e-6;
    sb_value s[3] = {vx, vw};
    CHECK(sb_graph_op(g, "rms_norm", s, 2, &eps, 1, &h) == SB_OK);
    s[0] = h, s[1] = vW;
    CHECK(sb_graph_op(g, "linear", s, 2, NULL, 0, &y) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &y, 1, NULL, 0, &y) == SB_OK);
    s[0] = y, s[1] = vx2;
    CHECK(sb_graph_op(g, "add", s, 2, NULL, 0, &y) == SB_OK);
    CHECK(sb_graph_op(g, "gelu_tanh", &h, 1, NULL, 0, &dead) == SB_OK); /* never an output */
    sb_tensor_info vi;
    CHECK(sb_graph_value_info(g, y, &vi) == SB_OK && vi.type == SB_TYPE_F32 && vi.ne[0] == N && vi.ne[1] == T && vi.n_dims == 2);
    CHECK(sb_graph_value_info(g, 999, &vi) == SB_ERR_INVALID_ARG);
    sb_program *pr = NULL;
    CHECK(sb_graph_compile(g, NULL, &pr) == SB_ERR_INVALID_ARG && !pr && strstr(sb_last_error(), "no outputs"));
    CHECK(sb_graph_output(g, y, "y") == SB_OK);
    CHECK(sb_graph_output(g, h, "y") == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "\"y\" is taken"));
    char text[8192];
    size_t tn;
    CHECK(sb_graph_print(g, text, sizeof text, &tn) == SB_OK && strstr(text, "gelu_tanh") && strstr(text, "rms_norm"));
    CHECK(sb_graph_print(g, text, 4, &tn) == SB_ERR_BUFFER_TOO_SMALL && tn > 4 && strlen(text) == 3);
    sb_compile_params cp = {.device = SB_DEVICE_CUDA};
    const sb_status cu = cuda_expect();
    CHECK(sb_graph_compile(g, &cp, &pr) == cu && (cu == SB_OK ? pr != NULL : !pr && strstr(sb_last_error(), "sb_graph_compile: SB_DEVICE_CUDA: ") != NULL));
    sb_program_free(pr);
    pr = NULL;
    cp = (sb_compile_params){.device = 5};
    CHECK(sb_graph_compile(g, &cp, &pr) == SB_ERR_INVALID_ARG && !pr && strstr(sb_last_error(), "device 5"));
    cp = (sb_compile_params){.n_threads = 2};
    CHECK(sb_graph_compile(g, &cp, &pr) == SB_OK && pr);
    /* the planner dropped the dead branch */
    CHECK(sb_program_print(pr, text, sizeof text, &tn) == SB_OK && !strstr(text, "gelu_tanh"));
    /* run: output poisoned with NaN is overwritten; compare with the same ops eagerly */
    sb_tensor *in[2] = {x, x2}, *out[1] = {NULL};
    CHECK(sb_program_run(pr, in, 2, out, 1) == SB_OK && out[0]);
    sb_tensor *e1, *e2, *e3, *e4;
    sb_tensor *xs[2] = {x, w};
    e1 = op("rms_norm", xs, 2, &eps, 1);
    sb_tensor *l[2] = {e1, W};
    e2 = op("linear", l, 2, NULL, 0);
    e3 = op("silu", &e2, 1, NULL, 0);
    sb_tensor *ad[2] = {e3, x2};
    e4 = op("add", ad, 2, NULL, 0);
    size_t n1, n2;
    sb_tensor *first = out[0];
    float *c = rd(out[0], &n1), *ev = rd(e4, &n2);
    CHECKF(n1 == n2 && maxrel(c, ev, n1) <= 1e-6, "compiled vs eager: %g", maxrel(c, ev, n1));
    /* device auto: CUDA where usable, else the CPU; the same values, outputs on that device */
    sb_program *pa = NULL;
    cp = (sb_compile_params){.device = SB_DEVICE_AUTO};
    CHECKF(sb_graph_compile(g, &cp, &pa) == SB_OK && pa, "auto: %s", sb_last_error());
    sb_tensor *oa[1] = {NULL};
    CHECKF(pa && sb_program_run(pa, in, 2, oa, 1) == SB_OK && oa[0], "auto run: %s", sb_last_error());
    if (oa[0]) {
        float *ca = rd(oa[0], NULL);
        CHECK(sb_tensor_get_info(oa[0], &vi) == SB_OK && vi.device == (cu == SB_OK ? SB_DEVICE_CUDA : SB_DEVICE_CPU));
        CHECKF(maxrel(ca, c, n1) <= (cu == SB_OK ? 1e-4 : 1e-6), "auto vs cpu: %g", maxrel(ca, c, n1));
        free(ca);
    }
    sb_tensor_free(oa[0]);
    sb_program_free(pa);
    /* in place, poisoned first */
    const int64_t one[2] = {N, T};
    float *nan = (float *)malloc((size_t)(N * T) * sizeof *nan);
    for (int64_t k = 0; k < N * T; k++) nan[k] = NAN;
    sb_tensor *dst = NULL;
    CHECK(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, 2, one, nan, (size_t)(N * T) * sizeof *nan, &dst) == SB_OK);
    sb_tensor *keep = dst;
    out[0] = dst;
    CHECK(sb_program_run(pr, in, 2, out, 1) == SB_OK && out[0] == keep);
    float *c2 = rd(dst, &n1);
    CHECK(maxrel(c2, c, n1) == 0);
    /* run errors */
    out[0] = NULL;
    CHECK(sb_program_run(pr, in, 1, out, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "1 inputs given, the graph declared 2") && !out[0]);
    CHECK(sb_program_run(pr, in, 2, out, 2) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "room for 2 outputs"));
    sb_tensor *swapped[2] = {x, W};
    CHECK(sb_program_run(pr, swapped, 2, out, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "input 1 (\"x2\") is f32[16,16], the graph declared f32[16,4]") &&
          !out[0]);
    out[0] = w;
    CHECK(sb_program_run(pr, in, 2, out, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "out[0] is f32[16]"));
    /* graph-building errors */
    sb_value v;
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 2, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "\"x\" is taken"));
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "i", SB_TYPE_I32, 2, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "cannot be a data input"));
    CHECK(sb_graph_input(g, SB_INPUT_TOKENS, "t", SB_TYPE_I32, 2, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "i32 [T], not i32[16,4]"));
    CHECK(sb_graph_input(g, SB_INPUT_TOKENS, "t", SB_TYPE_I32, 1, ne, &v) == SB_OK);
    CHECK(sb_graph_input(g, SB_INPUT_TOKENS, "t2", SB_TYPE_I32, 1, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "one per graph"));
    CHECK(sb_graph_input(g, SB_INPUT_CACHE, "c", SB_TYPE_F32, 2, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "sb_graph_tensor"));
    CHECK(sb_graph_input(g, 9, "k", SB_TYPE_F32, 2, ne, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "kind 9"));
    CHECK(sb_graph_input(g, SB_INPUT_DATA, "", SB_TYPE_F32, 2, ne, &v) == SB_ERR_INVALID_ARG);
    CHECK(sb_graph_tensor(g, SB_INPUT_TOKENS, x, &v) == SB_ERR_INVALID_ARG);
    CHECK(sb_graph_output(g, 12345, "z") == SB_ERR_INVALID_ARG);
    s[0] = vx, s[1] = 777;
    CHECK(sb_graph_op(g, "add", s, 2, NULL, 0, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "not a value of this graph"));
    s[1] = vW;
    CHECK(sb_graph_op(g, "swiglu", s, 2, NULL, 0, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "swiglu(f32[16,4], f32[16,16])"));
    sb_value vp, q3, at;
    const int64_t ne3[3] = {4, 4, 4};
    CHECK(sb_graph_input(g, SB_INPUT_POS, NULL, SB_TYPE_I32, 1, ne3, &vp) == SB_OK);
    CHECK(sb_graph_op(g, "view", &vx, 1, (const double[3]){4, 4, 4}, 3, &q3) == SB_OK);
    sb_value qkv[4] = {q3, vx, vx, vp};
    CHECK(sb_graph_op(g, "attention", qkv, 4, (const double[1]){1}, 1, &at) == SB_ERR_INVALID_ARG &&
          strstr(sb_last_error(), "source 1 must be a KV cache"));
    qkv[3] = vx;
    CHECK(sb_graph_op(g, "rope", (sb_value[2]){q3, vx}, 2, (const double[2]){4, 0}, 2, &at) == SB_ERR_INVALID_ARG &&
          strstr(sb_last_error(), "source 1 must be the pos input"));
    /* the graph still works after failed ops: a second program with both outputs */
    CHECK(sb_graph_output(g, h, "h") == SB_OK);
    sb_program *pr2 = NULL;
    CHECK(sb_graph_compile(g, NULL, &pr2) == SB_OK);
    sb_graph_free(g); /* programs outlive their graph */
    sb_tensor *o2[2] = {NULL, NULL};
    const int32_t tk[16] = {0, 1, 2, 3};
    sb_tensor *ttok = mk(SB_TYPE_I32, 1, 16, 1, 1, tk, sizeof tk), *tpos = mk(SB_TYPE_I32, 1, 4, 1, 1, tk, 4 * sizeof *tk);
    sb_tensor *in4[4] = {x, x2, ttok, tpos}; /* tokens and pos are declared, unused: the planner dropped them */
    CHECKF(sb_program_run(pr2, in4, 4, o2, 2) == SB_OK && o2[0] && o2[1], "%s", sb_last_error());
    float *c3 = rd(o2[0], &n1), *hv = rd(o2[1], &n2), *he = rd(e1, NULL);
    CHECK(maxrel(c3, c, n1) <= 1e-6 && maxrel(hv, he, n2) <= 1e-6);
    sb_program_free(pr2);
    sb_program_free(pr);
    sb_program_free(NULL);
    sb_graph_free(NULL);
    sb_tensor *all[] = {first, ttok, tpos, w, W, x, x2, e1, e2, e3, e4, dst, o2[0], o2[1]};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) sb_tensor_free(all[k]);
    free(c), free(ev), free(nan), free(c2), free(c3), free(hv), free(he);
}

/* a model's quantized weight, zero-copy, in a linear: against the dequantized weight in double */
static void test_weights(void) {
    sb_model *m = NULL;
    sb_status st = sb_model_load(test_data_path("models/test-llama-q8_0.gguf"), NULL, &m);
    if (st == SB_ERR_IO) {
        printf("SKIP weights: shared test data absent\n");
        return;
    }
    CHECKF(st == SB_OK, "load: %s", sb_last_error());
    sb_tensor *w = NULL, *o = (sb_tensor *)1;
    CHECK(sb_tensor_from_weight(m, "no.such.weight", &o) == SB_ERR_NOT_FOUND && !o && strstr(sb_last_error(), "no.such.weight"));
    CHECK(sb_tensor_from_weight(m, "blk.0.attn_q.weight", &w) == SB_OK);
    sb_tensor_info info;
    CHECK(sb_tensor_get_info(w, &info) == SB_OK && info.type == SB_TYPE_Q8_0 && info.is_view && info.n_dims == 2);
    const int64_t K = info.ne[0], N = info.ne[1], T = 3;
    float *wf = rd(w, NULL), *x;
    sb_tensor *tx = mkf(2, K, T, 1, &x);
    sb_tensor *xw[2] = {tx, w};
    sb_tensor *y = op("linear", xw, 2, NULL, 0);
    float *ref = (float *)malloc((size_t)(N * T) * sizeof *ref), *yv = y ? rd(y, NULL) : NULL;
    double num = 0, den = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (double)wf[j * K + k] * x[t * K + k];
            ref[t * N + j] = (float)acc;
            if (yv) num += (yv[t * N + j] - acc) * (yv[t * N + j] - acc), den += acc * acc;
        }
    CHECKF(yv && num / den < 1e-4, "q8_0 linear NMSE %g", num / den); /* activations are quantized to q8_0 */
    /* a weight cannot be a cache */
    sb_graph *g;
    sb_value v;
    CHECK(sb_graph_create(&g) == SB_OK);
    CHECK(sb_graph_tensor(g, SB_INPUT_CACHE, w, &v) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "read-only"));
    CHECK(sb_graph_tensor(g, SB_INPUT_DATA, w, &v) == SB_OK);
    sb_tensor *w2 = NULL;
    sb_value v2 = -1;
    CHECK(sb_tensor_from_weight(m, "blk.0.attn_q.weight", &w2) == SB_OK && sb_graph_tensor(g, SB_INPUT_DATA, w2, &v2) == SB_OK &&
          v2 == v); /* two views of one weight: one value */
    sb_tensor_free(w2);
    char text[4096];
    size_t tn;
    CHECK(sb_graph_print(g, text, sizeof text, &tn) == SB_OK && strstr(text, "blk.0.attn_q.weight") && strstr(text, "Q8_0[256,256]"));
    sb_graph_free(g);
    /* a weight is read-only */
    float zero = 0;
    CHECK(sb_tensor_write(w, &zero, sizeof zero) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "weight"));
    sb_tensor_free(y), sb_tensor_free(tx), sb_tensor_free(w);
    free(wf), free(x), free(ref), free(yv);
    sb_model_free(m);
}

/* sb_tensor_write: new data read back, seen by a view, used by the next run of a program (an input
 * refilled, not remade); wrong sizes and NULL refused with the old data kept */
static void test_write(void) {
    const int64_t N = 37;
    float *a, *b = (float *)malloc((size_t)N * sizeof *b);
    sb_tensor *t = mkf(1, N, 1, 1, &a), *view = NULL;
    for (int64_t i = 0; i < N; i++) b[i] = frand();
    CHECK(sb_tensor_op("reshape", &t, 1, (const double[1]){(double)N}, 1, &view) == SB_OK);
    CHECK(sb_tensor_write(t, b, (size_t)N * sizeof *b) == SB_OK);
    float *got = rd(t, NULL), *gv = rd(view, NULL);
    CHECK(!memcmp(got, b, (size_t)N * sizeof *b) && !memcmp(gv, b, (size_t)N * sizeof *b));
    free(got), free(gv);
    CHECK(sb_tensor_write(t, a, (size_t)(N - 1) * sizeof *a) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "148 bytes of data, 144 given"));
    CHECK(sb_tensor_write(NULL, a, 4) == SB_ERR_INVALID_ARG && sb_tensor_write(t, NULL, 4) == SB_ERR_INVALID_ARG);
    got = rd(t, NULL);
    CHECK(!memcmp(got, b, (size_t)N * sizeof *b)); /* a refused write changes nothing */
    free(got);
    /* a program's input refilled between runs */
    sb_graph *g = NULL;
    sb_value vx, y;
    CHECK(sb_graph_create(&g) == SB_OK && sb_graph_input(g, SB_INPUT_DATA, "x", SB_TYPE_F32, 1, &N, &vx) == SB_OK);
    CHECK(sb_graph_op(g, "silu", &vx, 1, NULL, 0, &y) == SB_OK && sb_graph_output(g, y, "y") == SB_OK);
    sb_program *pr = NULL;
    CHECK(sb_graph_compile(g, &(sb_compile_params){.n_threads = 1}, &pr) == SB_OK);
    sb_graph_free(g);
    sb_tensor *out[1] = {NULL}, *ref = NULL;
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < N; i++) b[i] = frand();
        CHECK(sb_tensor_write(t, b, (size_t)N * sizeof *b) == SB_OK && sb_program_run(pr, &t, 1, out, 1) == SB_OK);
        CHECK(sb_tensor_op("silu", &t, 1, NULL, 0, &ref) == SB_OK);
        float *o = rd(out[0], NULL), *r = rd(ref, NULL);
        CHECK(!memcmp(o, r, (size_t)N * sizeof *o));
        for (int64_t i = 0; i < N; i++) CHECK(fabsf(r[i] - b[i] / (1 + expf(-b[i]))) <= 1e-5f * (1 + fabsf(r[i])));
        free(o), free(r);
        sb_tensor_free(ref);
    }
    sb_tensor_free(out[0]);
    sb_program_free(pr);
    sb_tensor_free(view), sb_tensor_free(t);
    free(a), free(b);
}

int main(void) {
    seed = (uint64_t)time(NULL) * 2654435761u + 1;
    printf("seed %llu\n", (unsigned long long)seed);
    test_tensors();
    test_eager_pointwise();
    test_eager_model_ops();
    test_op_errors();
    test_graph();
    test_weights();
    test_write();
    return test_summary();
}
