/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/ops/test_ops_ref.c — every reference op against a straightforward double-precision
 * re-computation on random inputs (seeded), plus the llama.cpp-specific details: RMSNorm's
 * rounding, RoPE pair layouts (normal/neox, partial n_rot, freq factors, linear scaling), GQA
 * head mapping, causal/sliding-window masks, attention softcap, fp16 KV rounding, GELU's fp16 table.
 */
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "test.h"

#include "sonicboom.h"

static uint64_t rng = 0x5eed1234abcdull;

static void fill(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(&rng) * s;
}

static double max_rel(const float *a, const double *b, int64_t n) {
    double m = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m / (scale > 0 ? scale : 1);
}

// ---- rms_norm ----

static void test_rms_norm(void) {
    enum { E = 96, R = 5 };
    float x[E * R], y[E * R];
    double ref[E * R];
    fill(x, E * R, 3.0f);
    const float eps = 1e-6f;
    op_rms_norm(y, x, E, 0, R, eps);
    for (int r = 0; r < R; r++) {
        double s = 0;
        for (int i = 0; i < E; i++) s += (double)x[r * E + i] * x[r * E + i];
        double sc = 1.0 / sqrt(s / E + eps);
        for (int i = 0; i < E; i++) ref[r * E + i] = x[r * E + i] * sc;
    }
    CHECKF(max_rel(y, ref, E * R) < 1e-6, "rms_norm rel err %g", max_rel(y, ref, E * R));
    /* in place gives the same bits */
    float z[E * R];
    memcpy(z, x, sizeof z);
    op_rms_norm(z, z, E, 0, R, eps);
    CHECK(!memcmp(z, y, sizeof z));
    /* a zero row stays finite with eps > 0 */
    float zero[E] = {0}, out[E];
    op_rms_norm_row(out, zero, E, eps);
    CHECK(out[0] == 0.0f && out[E - 1] == 0.0f);
}

// ---- elementwise ----

static void test_elementwise(void) {
    enum { E = 16, R = 3, N = E * R };
    float a[N], b[N], bv[E], y[N];
    double ref[N];
    fill(a, N, 2.0f);
    fill(b, N, 2.0f);
    fill(bv, E, 2.0f);
    op_add(y, a, b, N, N);
    for (int i = 0; i < N; i++) ref[i] = (double)a[i] + b[i];
    CHECK(max_rel(y, ref, N) < 1e-7);
    op_add(y, a, bv, N, E);
    for (int i = 0; i < N; i++) ref[i] = (double)a[i] + bv[i % E];
    CHECK(max_rel(y, ref, N) < 1e-7);
    op_mul(y, a, bv, N, E);
    for (int i = 0; i < N; i++) ref[i] = (double)a[i] * bv[i % E];
    CHECK(max_rel(y, ref, N) < 1e-7);
    op_mul(y, a, b, N, N);
    for (int i = 0; i < N; i++) ref[i] = (double)a[i] * b[i];
    CHECK(max_rel(y, ref, N) < 1e-7);
    op_scale(y, a, N, 0.125f);
    for (int i = 0; i < N; i++) ref[i] = a[i] * 0.125;
    CHECK(max_rel(y, ref, N) < 1e-7);
    op_softcap(y, a, N, 1.5f);
    for (int i = 0; i < N; i++) ref[i] = 1.5 * tanh(a[i] / 1.5);
    CHECKF(max_rel(y, ref, N) < 1e-6, "softcap %g", max_rel(y, ref, N));
    op_silu(y, a, N);
    for (int i = 0; i < N; i++) ref[i] = a[i] / (1.0 + exp(-(double)a[i]));
    CHECKF(max_rel(y, ref, N) < 1e-6, "silu %g", max_rel(y, ref, N));
    op_swiglu(y, a, b, N);
    for (int i = 0; i < N; i++) ref[i] = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
    CHECKF(max_rel(y, ref, N) < 1e-6, "swiglu %g", max_rel(y, ref, N));
    /* GELU: the fp16 table costs ~1e-3 relative; the exact formula must be within that */
    op_gelu_tanh(y, a, N);
    for (int i = 0; i < N; i++) {
        double x = a[i];
        ref[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    CHECKF(max_rel(y, ref, N) < 2e-3, "gelu %g", max_rel(y, ref, N));
    float gg[N];
    op_geglu(gg, a, b, N);
    int same = 1;
    for (int i = 0; i < N; i++) same &= gg[i] == y[i] * b[i];
    CHECK(same);
    /* table emulation details: results are fp16 values; saturation at +-10 */
    CHECK(op_gelu_tanh1(-10.0f) == 0.0f && op_gelu_tanh1(12.5f) == 12.5f);
    float v = op_gelu_tanh1(0.3f);
    CHECK(qk_fp16_to_fp32(qk_fp32_to_fp16(v)) == v);
    /* the table equals fp16(gelu_f32(fp16(x))) (ggml_table_gelu_f16) over [-12, 12] */
    int bad = 0;
    for (int i = -24000; i <= 24000; i++) {
        float x = (float)i * 0.0005f, want;
        if (x <= -10.0f) want = 0.0f;
        else if (x >= 10.0f) want = x;
        else {
            float h = qk_fp16_to_fp32(qk_fp32_to_fp16(x));
            want = qk_fp16_to_fp32(qk_fp32_to_fp16(0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)))));
        }
        bad += op_gelu_tanh1(x) != want;
    }
    CHECK_EQ_INT(bad, 0);
}

// ---- conversions, get_rows, select_rows ----

static void test_rows(void) {
    enum { E = 8, V = 6 };
    float w[E * V], out[E * 3];
    uint16_t wh[E * V];
    fill(w, E * V, 1.0f);
    for (int i = 0; i < E * V; i++) wh[i] = qk_fp32_to_fp16(w[i]);
    int32_t tok[3] = {5, 0, 2};
    op_get_rows(out, w, SB_TYPE_F32, E, tok, 0, 3);
    CHECK(!memcmp(out, w + 5 * E, E * 4) && !memcmp(out + E, w, E * 4) && !memcmp(out + 2 * E, w + 2 * E, E * 4));
    op_get_rows(out, wh, SB_TYPE_F16, E, tok, 0, 3);
    CHECK(out[E + 3] == qk_fp16_to_fp32(wh[3]) && out[2 * E] == qk_fp16_to_fp32(wh[2 * E]));
    float sel[E * 2];
    int32_t idx[2] = {4, 1};
    op_select_rows(sel, w, E, idx, 2);
    CHECK(!memcmp(sel, w + 4 * E, E * 4) && !memcmp(sel + E, w + E, E * 4));
    /* slice: w seen as [E, 3, 2] (6 rows); rows 1..2 of each block of 3 -> rows 1, 2, 4, 5 */
    float sl[E * 4];
    op_slice(sl, w, E, 3, 1, 2, 2);
    CHECK(!memcmp(sl, w + E, 2 * E * 4) && !memcmp(sl + 2 * E, w + 4 * E, 2 * E * 4));
    CHECK(op_can_dequantize(SB_TYPE_F32) && op_can_dequantize(SB_TYPE_F16) && op_can_quantize(SB_TYPE_BF16));
    CHECK(op_row_bytes(SB_TYPE_F16, 8) == 16 && op_row_bytes(SB_TYPE_Q8_0, 64) == 68 && op_row_bytes(SB_TYPE_Q8_0, 33) == 0);
    float back[E];
    uint16_t h[E];
    op_quantize_row(h, SB_TYPE_F16, w, E);
    op_dequantize_row(back, h, SB_TYPE_F16, E);
    CHECK(back[1] == qk_fp16_to_fp32(qk_fp32_to_fp16(w[1])));
}

// ---- fused planner ops == their chains ----

static void test_fused_rows(void) {
    enum { E = 64 };
    float x[E], w[E], g[E], u[E], tmp[E], a[E];
    uint16_t got[E], want[E];
    fill(x, E, 2), fill(w, E, 1), fill(g, E, 2), fill(u, E, 1);
    op_rms_norm_quant_row(got, SB_TYPE_F16, x, w, E, 1e-5f, tmp);
    op_rms_norm_row(a, x, E, 1e-5f);
    op_mul(a, a, w, E, E);
    op_quantize_row(want, SB_TYPE_F16, a, E);
    CHECK(!memcmp(got, want, sizeof got));
    op_rms_norm_quant_row(got, SB_TYPE_F16, x, NULL, E, 1e-5f, tmp);
    op_rms_norm_row(a, x, E, 1e-5f);
    op_quantize_row(want, SB_TYPE_F16, a, E);
    CHECK(!memcmp(got, want, sizeof got));
    for (int gelu = 0; gelu < 2; gelu++) {
        op_glu_quant_row(got, SB_TYPE_BF16, g, u, E, gelu, tmp);
        if (gelu) op_geglu(a, g, u, E); else op_swiglu(a, g, u, E);
        op_quantize_row(want, SB_TYPE_BF16, a, E);
        CHECK(!memcmp(got, want, sizeof got));
    }
}

// ---- matmul ----

static void test_matmul(void) {
    enum { K = 64, N = 7, T = 3 };
    float w[K * N], x[K * T], y[N * T], wrow[K];
    double ref[N * T];
    fill(w, K * N, 0.5f);
    fill(x, K * T, 1.0f);
    op_matmul(y, w, SB_TYPE_F32, x, K, N, T, 0, 3, wrow);
    op_matmul(y, w, SB_TYPE_F32, x, K, N, T, 3, N, wrow); /* split ranges cover all rows */
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)w[n * K + k] * x[t * K + k];
            ref[t * N + n] = s;
        }
    CHECKF(max_rel(y, ref, N * T) < 1e-6, "matmul f32 %g", max_rel(y, ref, N * T));
    uint16_t wh[K * N];
    for (int i = 0; i < K * N; i++) wh[i] = qk_fp32_to_fp16(w[i]);
    op_matmul(y, wh, SB_TYPE_F16, x, K, N, T, 0, N, wrow);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)qk_fp16_to_fp32(wh[n * K + k]) * x[t * K + k];
            ref[t * N + n] = s;
        }
    CHECKF(max_rel(y, ref, N * T) < 1e-6, "matmul f16 %g", max_rel(y, ref, N * T));
}

// ---- rope ----

static void rope_ref(double *out, const float *x, int D, int H, int T, const int32_t *pos, int n_rot, int mode, double base,
                     double scale, const float *ff) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const float *v = x + (t * H + h) * D;
            double *o = out + (t * H + h) * D;
            for (int d = 0; d < D; d++) o[d] = v[d];
            for (int i = 0; i < n_rot / 2; i++) {
                double th = scale * pos[t] * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
                int a = mode == 2 ? i : 2 * i, b = mode == 2 ? i + n_rot / 2 : 2 * i + 1;
                o[a] = v[a] * cos(th) - v[b] * sin(th);
                o[b] = v[a] * sin(th) + v[b] * cos(th);
            }
        }
}

static void test_rope(void) {
    enum { D = 16, H = 3, T = 4 };
    float x[D * H * T], y[D * H * T], ff[D / 2];
    double ref[D * H * T];
    int32_t pos[T] = {0, 1, 7, 100};
    fill(x, D * H * T, 1.0f);
    for (int i = 0; i < D / 2; i++) ff[i] = 1.0f + 0.5f * (float)i;
    struct {
        int n_rot, mode;
        float base, scale;
        bool ff;
    } cases[] = {{16, 0, 10000, 1, false}, {16, 2, 1e6f, 1, false}, {8, 2, 10000, 0.125f, false}, {16, 0, 500000, 1, true}, {12, 0, 10000, 1, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op_rope_args a = {.D = D, .H = H, .n_rot = cases[c].n_rot, .mode = cases[c].mode, .freq_base = cases[c].base,
                          .freq_scale = cases[c].scale, .attn_factor = 1.0f, .ff = cases[c].ff ? ff : NULL};
        op_rope(y, x, pos, &a, 0, T);
        rope_ref(ref, x, D, H, T, pos, cases[c].n_rot, cases[c].mode, cases[c].base, cases[c].scale, cases[c].ff ? ff : NULL);
        CHECKF(max_rel(y, ref, D * H * T) < 2e-5, "rope case %zu err %g", c, max_rel(y, ref, D * H * T));
        /* dims >= n_rot are copied */
        CHECK(y[D - 1] == x[D - 1] || cases[c].n_rot == D);
        /* position 0 is the identity */
        int id = 1;
        for (int d = 0; d < D * H; d++) id &= y[d] == x[d];
        CHECK(id);
        /* in place */
        float z[D * H * T];
        memcpy(z, x, sizeof z);
        op_rope(z, z, pos, &a, 0, T);
        CHECK(!memcmp(z, y, sizeof z));
    }
}

// ---- kv + attention ----

static void attn_ref(double *out, const float *q, const float *k, const float *v, int D, int Hq, int Hkv, int T,
                     const int32_t *pos, double scale, int window, double cap) {
    int Dkv = D * Hkv;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hq; h++) {
            int kvh = h / (Hq / Hkv), p = pos[t];
            double s[256], mx = -1e300, sum = 0;
            for (int j = 0; j <= p; j++) {
                bool vis = !(window > 0 && p - j >= window);
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)q[(t * Hq + h) * D + e] * k[j * Dkv + kvh * D + e];
                d *= scale;
                if (cap > 0) d = cap * tanh(d / cap);
                s[j] = vis ? d : -INFINITY;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j <= p; j++) sum += (s[j] = exp(s[j] - mx));
            for (int e = 0; e < D; e++) {
                double o = 0;
                for (int j = 0; j <= p; j++) o += s[j] / sum * v[j * Dkv + kvh * D + e];
                out[(t * Hq + h) * D + e] = o;
            }
        }
}

static void test_attention(void) {
    enum { D = 8, Hq = 4, Hkv = 2, C = 16, T = 5, Dkv = D * Hkv };
    float q[D * Hq * T], kx[Dkv * T], vx[Dkv * T], k[Dkv * C], v[Dkv * C], out[D * Hq * T], sc[C];
    double ref[D * Hq * T];
    int32_t pos[T] = {3, 4, 5, 6, 7};
    fill(q, D * Hq * T, 1.0f);
    fill(k, Dkv * C, 1.0f); /* positions 0..2 hold earlier tokens */
    fill(v, Dkv * C, 1.0f);
    fill(kx, Dkv * T, 1.0f);
    fill(vx, Dkv * T, 1.0f);
    op_kv_store(k, SB_TYPE_F32, Dkv, kx, pos, T);
    op_kv_store(v, SB_TYPE_F32, Dkv, vx, pos, T);
    CHECK(!memcmp(k + 3 * Dkv, kx, Dkv * 4) && !memcmp(v + 7 * Dkv, vx + 4 * Dkv, Dkv * 4));
    struct {
        int window;
        float cap;
    } cases[] = {{0, 0}, {3, 0}, {0, 2.0f}, {1, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        op_attn_args a = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = SB_TYPE_F32, .scale = 0.35f, .softcap = cases[c].cap,
                          .window = cases[c].window};
        op_attention(out, q, k, v, pos, &a, 0, 7, sc);
        op_attention(out, q, k, v, pos, &a, 7, T * Hq, sc);
        attn_ref(ref, q, k, v, D, Hq, Hkv, T, pos, 0.35, cases[c].window, cases[c].cap);
        CHECKF(max_rel(out, ref, D * Hq * T) < 1e-5, "attention case %zu err %g", c, max_rel(out, ref, D * Hq * T));
    }
    /* window 1: each query sees only itself -> output = its own v */
    op_attn_args a1 = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = SB_TYPE_F32, .scale = 1, .window = 1};
    op_attention(out, q, k, v, pos, &a1, 0, T * Hq, sc);
    CHECK(fabsf(out[(2 * Hq + 3) * D + 1] - v[5 * Dkv + 1 * D + 1]) < 1e-6f);
    /* f16 cache: values rounded when stored, read back exactly */
    uint16_t kh[Dkv * C], vh[Dkv * C];
    float kr[Dkv * C], vr[Dkv * C];
    for (int i = 0; i < Dkv * C; i++) kh[i] = qk_fp32_to_fp16(k[i]), vh[i] = qk_fp32_to_fp16(v[i]);
    op_kv_store(kh, SB_TYPE_F16, Dkv, kx, pos, T);
    CHECK(kh[3 * Dkv + 5] == qk_fp32_to_fp16(kx[5]));
    for (int i = 0; i < Dkv * C; i++) kr[i] = qk_fp16_to_fp32(kh[i]), vr[i] = qk_fp16_to_fp32(vh[i]);
    op_attn_args ah = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = SB_TYPE_F16, .scale = 0.35f};
    op_attention(out, q, kh, vh, pos, &ah, 0, T * Hq, sc);
    attn_ref(ref, q, kr, vr, D, Hq, Hkv, T, pos, 0.35, 0, 0);
    CHECKF(max_rel(out, ref, D * Hq * T) < 1e-5, "attention f16 err %g", max_rel(out, ref, D * Hq * T));
}

int main(void) {
    printf("seed %llx\n", (unsigned long long)rng);
    test_rms_norm();
    test_elementwise();
    test_rows();
    test_fused_rows();
    test_matmul();
    test_rope();
    test_attention();
    return test_summary();
}
