/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * ops/ops_ref.h — the plain-C reference implementation of every op in ops/ops.def: the oracle
 * every fast path is tested against, and what the CPU executor runs where no kernel exists.
 * Layer 1 (ops; sees base and quant). Destination first; inputs const; shapes in comments with
 * ne[0] first (E = row length, T = rows/tokens, D = head_dim, Hq/Hkv heads, C = cache length).
 * Numerics follow llama.cpp's CPU backend (architectures.md §0): f32 math, RMSNorm sums squares
 * in double, RoPE thetas by repeated multiplication in f32, softmax with max subtraction and a
 * double sum, GELU through ggml's fp16 table (emulated exactly: fp16(gelu(fp16(x)))).
 * Preconditions (checked by the caller — the executor validates bound data): indices in range,
 * types supported (op_type_supported). Ranges [r0, r1) let callers split work over threads.
 * Non-goals: speed (no SIMD, no threads), strided tensors.
 */
#ifndef SB_OPS_OPS_REF_H
#define SB_OPS_OPS_REF_H

#include <stdbool.h>
#include <stdint.h>

// ---- types ----

/* True when rows of `type` can be converted to f32 (F32, F16, BF16, or a registered dequantizer). */
bool op_can_dequantize(int type);
/* True when f32 rows can be converted to `type` (F32, F16, BF16, or a registered quantizer). */
bool op_can_quantize(int type);
/* dst[n] = src row of n elements of `type` as f32. */
void op_dequantize_row(float *dst, const void *src, int type, int64_t n);
/* dst = n f32 values as one row of `type` (n a multiple of its block size). */
void op_quantize_row(void *dst, int type, const float *src, int64_t n);
/* Bytes of one row of n elements of type (0 if invalid). */
uint64_t op_row_bytes(int type, int64_t n);

// ---- rows / elementwise ----

/* dst [E,T] = rows tok[t] of w [E,V] (type wtype), rows t in [t0,t1). */
void op_get_rows(float *dst, const void *w, int wtype, int64_t E, const int32_t *tok, int64_t t0, int64_t t1);
/* dst [E,n] = x [E,*] rows idx[i]. */
void op_select_rows(float *dst, const float *x, int64_t E, const int32_t *idx, int64_t n);
/* dst [E,n,outer] = x [E,b,outer] rows [start, start+n) of every outer block. */
void op_slice(float *dst, const float *x, int64_t E, int64_t b, int64_t start, int64_t n, int64_t outer);
/* One row: y = x / sqrt(sum(x^2)/E + eps) (ggml_compute_forward_rms_norm_f32). dst may be x. */
void op_rms_norm_row(float *dst, const float *x, int64_t E, float eps);
/* rows [r0,r1) of x [E,*]. */
void op_rms_norm(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1, float eps);
/* dst[i] = a[i] + b[i % nb] for i in [0, n): nb = E (broadcast row) or n (same shape). */
void op_add(float *dst, const float *a, const float *b, int64_t n, int64_t nb);
void op_mul(float *dst, const float *a, const float *b, int64_t n, int64_t nb);
void op_scale(float *dst, const float *x, int64_t n, float s);
/* c * tanh(x / c) */
void op_softcap(float *dst, const float *x, int64_t n, float c);
void op_silu(float *dst, const float *x, int64_t n);
void op_gelu_tanh(float *dst, const float *x, int64_t n);
/* silu(g) * u ; gelu_tanh(g) * u */
void op_swiglu(float *dst, const float *g, const float *u, int64_t n);
void op_geglu(float *dst, const float *g, const float *u, int64_t n);
/* scalar forms (shared with fused chains) */
float op_silu1(float x);
float op_gelu_tanh1(float x);
/* The table behind the GELU above: 65536 fp16 values indexed by fp16(x), then one zero pad entry
 * (vector gathers read 4 bytes). Built on first use; never freed. */
const uint16_t *op_gelu_table(void);

/* One row: y = (x - mean) / sqrt(var + eps), var the biased variance (torch's layer_norm without
 * weight; ggml_compute_forward_norm_f32: sums in double). dst may be x. */
void op_layer_norm_row(float *dst, const float *x, int64_t E, float eps);
/* rows [r0,r1) of x [E,*]. */
void op_layer_norm(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1, float eps);
/* exact GELU: 0.5 x (1 + erf(x / sqrt 2)), in double, rounded to f32 (torch's approximate="none"). */
void op_gelu(float *dst, const float *x, int64_t n);

// ---- layout copies (the IR has no strides: these write a new contiguous value) ----

/* dst = the n sources joined along dimension d: source i is chunk[i] = ne0*..*ne_d of its
 * elements per step of the outer dimensions (outer = ne_{d+1}*..*ne3, equal for all); dst holds
 * for each outer index the sources' chunks in order. */
void op_concat(float *dst, const float *const *src, const int64_t *chunk, int n, int64_t outer);
/* dst rows [r0,r1) (a row = ne0 of dst; rows counted over dst's ne1*ne2*ne3) of x [ne] permuted:
 * dst.ne[k] = ne[perm[k]], dst[i0,i1,i2,i3] = x at index i_k along x's dimension perm[k]. */
void op_permute(float *dst, const float *x, const int64_t ne[4], const int32_t perm[4], int64_t r0, int64_t r1);

// ---- planner-made ops (fusions of the above; results are bit-identical to the unfused chain) ----

/* One row: dst (row of `type`) = quantize(rms_norm(x) [* w]) (w may be NULL); tmp = E floats. */
void op_rms_norm_quant_row(void *dst, int type, const float *x, const float *w, int64_t E, float eps, float *tmp);
/* One row: dst = quantize(act(g) * u), act = gelu_tanh when gelu else silu; tmp = E floats. */
void op_glu_quant_row(void *dst, int type, const float *g, const float *u, int64_t E, bool gelu, float *tmp);

// ---- matmul ----

/* dst [N,T] rows n in [n0,n1) of y = W x: w [K,N] of type wtype, xf [K,T] f32 (already converted
 * from the activation type), wrow = scratch of K floats. Dot products accumulate in double. */
void op_matmul(float *dst, const void *w, int wtype, const float *xf, int64_t K, int64_t N, int64_t T,
               int64_t n0, int64_t n1, float *wrow);

// ---- rope / kv / attention ----

typedef struct op_rope_args {
    int64_t D, H;           /* x is [D,H,*] */
    int32_t n_rot;          /* even, <= D */
    int32_t mode;           /* 0 normal (adjacent pairs), 2 neox (halves) */
    float freq_base, freq_scale, attn_factor;
    const float *ff;        /* [n_rot/2] freq factors or NULL */
    bool norm;              /* rotate rms_norm(head) [* norm_w] instead of the head (a ROPE with a head norm) */
    float norm_eps;
    const float *norm_w;    /* [D] or NULL */
} op_rope_args;
/* dst [D,H,T] tokens [t0,t1) = rope(x) at pos[t] (architectures.md §0.3). dst may be x. With norm,
 * each head is first op_rms_norm_row'd [and op_mul'd by norm_w] into its dst head: the bits of
 * rms_norm, mul and rope one after the other. */
void op_rope(float *dst, const float *x, const int32_t *pos, const op_rope_args *a, int64_t t0, int64_t t1);

/* cache [Dkv,C] (f32 or f16) column pos[t] = x[:,t], t in [0,T). */
void op_kv_store(void *cache, int ctype, int64_t Dkv, const float *x, const int32_t *pos, int64_t T);

typedef struct op_attn_args {
    int64_t D, Hq, Hkv;     /* q [D,Hq,*]; caches [D*Hkv, C] */
    int ctype;              /* cache type: SB_TYPE_F32 | SB_TYPE_F16 */
    float scale, softcap;   /* softcap 0 = none */
    int32_t window;         /* 0 = none */
    int64_t ring;           /* 0: position j at cache row j; else a ring of this many rows (row j mod ring); no table */
    /* paged caches (NULL table = contiguous: position j is row j): position j of token t is row
     * table[t * n_tbl + j / bs] * bs + j % bs */
    const int32_t *table;
    int64_t n_tbl;
    int32_t bs;
} op_attn_args;
/* The cache row holding position j of token t's sequence. */
static inline int64_t op_attn_row(const op_attn_args *a, int64_t t, int64_t j) {
    if (a->table) return (int64_t)a->table[t * a->n_tbl + j / a->bs] * a->bs + j % a->bs;
    return a->ring ? j % a->ring : j;
}
/* the attention's softmax over scores[0, n) given their max mx, in place: e = expf(s - mx), summed in
 * double; returns 1/sum as a float (the probabilities are e * that). op_attention's rule, one copy for
 * every CPU attention that reproduces it. */
float op_softmax_exp(float *scores, int64_t n, float mx);
/* rows [r0,r1) of x [E,*]: dst = exp(x - max) / sum (op_softmax_exp's rule). dst may be x. */
void op_softmax(float *dst, const float *x, int64_t E, int64_t r0, int64_t r1);
/* dst [D*Hq,T] for the (t,h) pairs i in [i0,i1) with i = t*Hq + h. scores = scratch of
 * max(pos)+1 floats. */
void op_attention(float *dst, const float *q, const void *k, const void *v, const int32_t *pos,
                  const op_attn_args *a, int64_t i0, int64_t i1, float *scores);

#endif
