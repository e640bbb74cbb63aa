/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * ops/ops_ref.c — reference (plain C) implementations of the ops in ops/ops.def.
 * Layer 1 (ops). Each function restates its math once; the loops are the llama2.c kind.
 * Numerics mirror ggml's CPU ops where that decides the last bits (see ops_ref.h); the tests in
 * tests/ops compare each one with a double-precision re-computation.
 * Non-goals: SIMD, threads (callers split ranges), strides.
 */
#include "ops/ops_ref.h"

#include "base/status.h"
#include "quant/fp16.h"
#include "quant/types.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

// ---- types ----

bool op_can_dequantize(int type) {
    if (type == SB_TYPE_F32 || type == SB_TYPE_F16 || type == SB_TYPE_BF16) return true;
    const qk_traits *t = qk_get(type);
    return t && !t->removed && t->blck > 0 && t->to_float;
}

bool op_can_quantize(int type) {
    if (type == SB_TYPE_F32 || type == SB_TYPE_F16 || type == SB_TYPE_BF16) return true;
    const qk_traits *t = qk_get(type);
    return t && !t->removed && t->blck > 0 && t->from_float_ref;
}

uint64_t op_row_bytes(int type, int64_t n) {
    uint64_t b = 0;
    if (qk_row_bytes(type, n, &b)) return 0;
    return b;
}

void op_dequantize_row(float *dst, const void *src, int type, int64_t n) {
    if (type == SB_TYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
    } else if (type == SB_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) dst[i] = qk_fp16_to_fp32(h[i]);
    } else if (type == SB_TYPE_BF16) {
        const uint16_t *h = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++) dst[i] = qk_bf16_to_fp32(h[i]);
    } else {
        const qk_traits *t = qk_get(type);
        SB_ASSERT(t && t->to_float);
        t->to_float(src, dst, n);
    }
}

void op_quantize_row(void *dst, int type, const float *src, int64_t n) {
    if (type == SB_TYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
    } else if (type == SB_TYPE_F16) {
        uint16_t *h = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++) h[i] = qk_fp32_to_fp16(src[i]);
    } else if (type == SB_TYPE_BF16) {
        uint16_t *h = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++) h[i] = qk_fp32_to_bf16(src[i]);
    } else {
        const qk_traits *t = qk_get(type);
        SB_ASSERT(t && t->from_float_ref);
        t->from_float_ref(src, dst, n);
    }
}

// ---- rows / elementwise ----

void op_get_rows(float *dst, const void *w, int wtype, int64_t E, const int32_t *tok, int64_t t0, int64_t t1) {
    uint64_t rb = op_row_bytes(wtype, E);
    for (int64_t t = t0; t < t1; t++)
        op_dequantize_row(dst + t * E, (const uint8_t *)w + (uint64_t)tok[t] * rb, wtype, E);
}

void op_slice(float *dst, const float *x, int64_t E, int64_t b, int64_t start, int64_t n, int64_t outer) {
    for (int64_t o = 0; o < outer; o++) memmove(dst + o * n * E, x + (o * b + start) * E, (size_t)(n * E) * sizeof(float));
}

void op_select_rows(float *dst, const float *x, int64_t E, const int32_t *idx, int64_t n) {
    for (int64_t i = 0; i < n; i++) memmove(dst + i * E, x + (int64_t)idx[i] * E, (size_t)E * sizeof(float));
}

/* y = x * (1 / sqrt(mean + eps)), mean = (sum of x^2 in double) / E, rounded to f32 (ggml). */
void op_rms_norm_row(float *dst, const float *x, int64_t E, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < E; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)E);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < E; i++) dst[i] = x[i] * scale;
}

void op_rms_norm(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1, float eps) {
    for (int64_t r = r0; r < r1; r++) op_rms_norm_row(dst + r * E, x + r * E, E, eps);
}

void op_layer_norm_row(float *dst, const float *x, int64_t E, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < E; i++) sum += (double)x[i];
    const float mean = (float)(sum / (double)E);
    double sum2 = 0.0;
    for (int64_t i = 0; i < E; i++) {
        const float v = x[i] - mean;
        dst[i] = v;
        sum2 += (double)(v * v);
    }
    const float var = (float)(sum2 / (double)E);
    const float scale = 1.0f / sqrtf(var + eps);
    for (int64_t i = 0; i < E; i++) dst[i] *= scale;
}

void op_layer_norm(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1, float eps) {
    for (int64_t r = r0; r < r1; r++) op_layer_norm_row(dst + r * E, x + r * E, E, eps);
}

void op_gelu(float *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = (float)(0.5 * (double)x[i] * (1.0 + erf((double)x[i] * 0.70710678118654752440)));
}

void op_concat(float *dst, const float *const *src, const int64_t *chunk, int n, int64_t outer) {
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            memcpy(dst, src[i] + o * chunk[i], (size_t)chunk[i] * sizeof(float));
            dst += chunk[i];
        }
}

void op_permute(float *dst, const float *x, const int64_t ne[4], const int32_t perm[4], int64_t r0, int64_t r1) {
    const int64_t st[4] = {1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]}; /* x's element strides */
    const int64_t on[4] = {ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]};
    const int64_t s0 = st[perm[0]];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % on[1], i2 = r / on[1] % on[2], i3 = r / (on[1] * on[2]);
        const float *xr = x + i1 * st[perm[1]] + i2 * st[perm[2]] + i3 * st[perm[3]];
        float *y = dst + r * on[0];
        for (int64_t i0 = 0; i0 < on[0]; i0++) y[i0] = xr[i0 * s0];
    }
}

void op_add(float *dst, const float *a, const float *b, int64_t n, int64_t nb) {
    if (nb == n) {
        for (int64_t i = 0; i < n; i++) dst[i] = a[i] + b[i];
        return;
    }
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t i = 0; i < nb; i++) dst[r + i] = a[r + i] + b[i];
}

void op_mul(float *dst, const float *a, const float *b, int64_t n, int64_t nb) {
    if (nb == n) {
        for (int64_t i = 0; i < n; i++) dst[i] = a[i] * b[i];
        return;
    }
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t i = 0; i < nb; i++) dst[r + i] = a[r + i] * b[i];
}

void op_scale(float *dst, const float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) dst[i] = x[i] * s;
}

/* ggml: scale(1/c), tanh, scale(c) */
void op_softcap(float *dst, const float *x, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) dst[i] = tanhf(x[i] * inv) * c;
}

float op_silu1(float x) { return x / (1.0f + expf(-x)); }

/* ggml's GELU: for -10 < x < 10, table[fp16(x)] where table[h] = fp16(gelu_f32(H(h))) — 65536
 * entries built once (pthread_once), 128 KiB. x <= -10 gives 0, x >= 10 gives x. */
static uint16_t gelu_table[65536 + 1]; /* + 1 pad: a 4-byte gather at the last index stays inside */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_init(void) {
    for (uint32_t i = 0; i < 65536; i++) {
        const float h = qk_fp16_to_fp32((uint16_t)i);
        const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)));
        gelu_table[i] = qk_fp32_to_fp16(g);
    }
}

static inline float gelu_lookup(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return qk_fp16_to_fp32(gelu_table[qk_fp32_to_fp16(x)]);
}

const uint16_t *op_gelu_table(void) {
    pthread_once(&gelu_once, gelu_init);
    return gelu_table;
}

float op_gelu_tanh1(float x) {
    pthread_once(&gelu_once, gelu_init);
    return gelu_lookup(x);
}

void op_silu(float *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = op_silu1(x[i]);
}

void op_gelu_tanh(float *dst, const float *x, int64_t n) {
    pthread_once(&gelu_once, gelu_init);
    for (int64_t i = 0; i < n; i++) dst[i] = gelu_lookup(x[i]);
}

void op_swiglu(float *dst, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = op_silu1(g[i]) * u[i];
}

/* ggml_vec_geglu_f32: x >= 10 gives x * u (the table is bypassed). */
void op_geglu(float *dst, const float *g, const float *u, int64_t n) {
    pthread_once(&gelu_once, gelu_init);
    for (int64_t i = 0; i < n; i++) dst[i] = gelu_lookup(g[i]) * u[i];
}

// ---- planner-made ops ----

void op_rms_norm_quant_row(void *dst, int type, const float *x, const float *w, int64_t E, float eps, float *tmp) {
    op_rms_norm_row(tmp, x, E, eps);
    if (w) op_mul(tmp, tmp, w, E, E);
    op_quantize_row(dst, type, tmp, E);
}

void op_glu_quant_row(void *dst, int type, const float *g, const float *u, int64_t E, bool gelu, float *tmp) {
    if (gelu)
        op_geglu(tmp, g, u, E);
    else
        op_swiglu(tmp, g, u, E);
    op_quantize_row(dst, type, tmp, E);
}

// ---- matmul ----

void op_matmul(float *dst, const void *w, int wtype, const float *xf, int64_t K, int64_t N, int64_t T,
               int64_t n0, int64_t n1, float *wrow) {
    const uint64_t rb = op_row_bytes(wtype, K);
    for (int64_t n = n0; n < n1; n++) {
        op_dequantize_row(wrow, (const uint8_t *)w + (uint64_t)n * rb, wtype, K);
        for (int64_t t = 0; t < T; t++) {
            const float *x = xf + t * K;
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += (double)wrow[k] * (double)x[k];
            dst[t * N + n] = (float)acc;
        }
    }
}

// ---- rope ----

/* theta_i = s * p * b^(-2i/n_rot) / ff_i with b^(-2/n_rot) raised by repeated f32 multiplication,
 * as ggml_rope_cache_init does (the order decides the last bits at large p). */
void op_rope(float *dst, const float *x, const int32_t *pos, const op_rope_args *a, int64_t t0, int64_t t1) {
    const int64_t D = a->D, H = a->H;
    const int32_t half = a->n_rot / 2;
    const float theta_scale = powf(a->freq_base, -2.0f / (float)a->n_rot);
    for (int64_t t = t0; t < t1; t++) {
        float cs[512], sn[512]; /* n_rot/2 <= 512 is checked by the IR shape function */
        float theta = (float)pos[t];
        for (int32_t i = 0; i < half; i++) {
            const float ff = a->ff ? a->ff[i] : 1.0f;
            const float th = a->freq_scale * (theta / ff);
            cs[i] = cosf(th) * a->attn_factor;
            sn[i] = sinf(th) * a->attn_factor;
            theta *= theta_scale;
        }
        for (int64_t h = 0; h < H; h++) {
            const float *src = x + (t * H + h) * D;
            float *out = dst + (t * H + h) * D;
            if (a->norm) { /* the head normalised in place of its output, then rotated there */
                op_rms_norm_row(out, src, D, a->norm_eps);
                if (a->norm_w) op_mul(out, out, a->norm_w, D, D);
                src = out;
            }
            for (int32_t i = 0; i < half; i++) {
                const int64_t ia = a->mode == 2 ? i : 2 * i;
                const int64_t ib = a->mode == 2 ? i + half : 2 * i + 1;
                const float x0 = src[ia], x1 = src[ib];
                out[ia] = x0 * cs[i] - x1 * sn[i];
                out[ib] = x0 * sn[i] + x1 * cs[i];
            }
            if (out != src)
                for (int64_t d = a->n_rot; d < D; d++) out[d] = src[d];
        }
    }
}

// ---- kv cache ----

void op_kv_store(void *cache, int ctype, int64_t Dkv, const float *x, const int32_t *pos, int64_t T) {
    for (int64_t t = 0; t < T; t++) {
        if (ctype == SB_TYPE_F16) {
            uint16_t *c = (uint16_t *)cache + (int64_t)pos[t] * Dkv;
            for (int64_t i = 0; i < Dkv; i++) c[i] = qk_fp32_to_fp16(x[t * Dkv + i]);
        } else {
            memcpy((float *)cache + (int64_t)pos[t] * Dkv, x + t * Dkv, (size_t)Dkv * sizeof(float));
        }
    }
}

// ---- attention ----

/* dot(q, cache row) and out += p * cache row, with the cache type branch outside the loop */
static inline float kv_dot(const float *q, const void *c, int ctype, int64_t base, int64_t D) {
    float s = 0.0f;
    if (ctype == SB_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)c + base;
        for (int64_t d = 0; d < D; d++) s += q[d] * qk_fp16_to_fp32(h[d]);
    } else {
        const float *f = (const float *)c + base;
        for (int64_t d = 0; d < D; d++) s += q[d] * f[d];
    }
    return s;
}

static inline void kv_axpy(float *out, float p, const void *c, int ctype, int64_t base, int64_t D) {
    if (ctype == SB_TYPE_F16) {
        const uint16_t *h = (const uint16_t *)c + base;
        for (int64_t d = 0; d < D; d++) out[d] += p * qk_fp16_to_fp32(h[d]);
    } else {
        const float *f = (const float *)c + base;
        for (int64_t d = 0; d < D; d++) out[d] += p * f[d];
    }
}

float op_softmax_exp(float *scores, int64_t n, float mx) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        const float e = expf(scores[j] - mx);
        scores[j] = e;
        sum += (double)e;
    }
    return (float)(1.0 / sum);
}

void op_softmax(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        float *y = dst + r * E, mx = -INFINITY;
        const float *xr = x + r * E;
        for (int64_t i = 0; i < E; i++) mx = xr[i] > mx ? xr[i] : mx;
        for (int64_t i = 0; i < E; i++) y[i] = xr[i];
        const float inv = op_softmax_exp(y, E, mx);
        for (int64_t i = 0; i < E; i++) y[i] *= inv;
    }
}

/* For query (t, h) at position p: s_j = (q . k_j) * scale (then c*tanh(s/c) if softcap) for
 * j in [lo, p]; P = softmax(s) (max subtracted, sum in double); out = sum_j P_j v_j. */
void op_attention(float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                  const op_attn_args *a, int64_t i0, int64_t i1, float *scores) {
    const int64_t D = a->D, Hq = a->Hq, Dkv = a->D * a->Hkv;
    const int64_t group = a->Hq / a->Hkv;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = i / Hq, h = i % Hq, kvh = h / group;
        const float *qv = q + (t * Hq + h) * D;
        float *out = dst + (t * Hq + h) * D;
        const int64_t p = pos[t];
        int64_t lo = 0;
        if (a->window > 0 && p - a->window + 1 > 0) lo = p - a->window + 1;
        float mx = -INFINITY;
        for (int64_t j = lo; j <= p; j++) {
            float s = kv_dot(qv, k, a->ctype, op_attn_row(a, t, j) * Dkv + kvh * D, D) * a->scale;
            if (a->softcap > 0.0f) s = tanhf(s / a->softcap) * a->softcap;
            scores[j - lo] = s;
            if (s > mx) mx = s;
        }
        const float inv = op_softmax_exp(scores, p - lo + 1, mx);
        for (int64_t d = 0; d < D; d++) out[d] = 0.0f;
        for (int64_t j = lo; j <= p; j++) kv_axpy(out, scores[j - lo] * inv, v, a->ctype, op_attn_row(a, t, j) * Dkv + kvh * D, D);
    }
}
