/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cpu.c — the CPU executor: validates the bound inputs, then walks the plan's nodes
 * in order; each node is one parallel-for over its rows (tp_run) calling the reference op, except
 * matmul and activation quantization, which go to backend/cpu's kernels (cpu_matmul,
 * cpu_quantize_act) whenever the weight type is supported there.
 * Layer 2 (runtime). Memory: every value lives at plan offset in the caller's arena, views alias
 * their source, inputs are the caller's buffers; after the plan region the arena holds the default
 * out_rows, the shared scratch (a non-f32 activation converted for the reference matmul) and one
 * scratch slice per thread (attention scores / one row). No allocation while running.
 * Non-goals: overlap of independent nodes, weight repacking, other devices.
 */
#include "runtime/exec_cpu.h"

#include "backend/cpu/cpu_kernels.h"
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "runtime/vexp_avx2.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

// ---- target ----

void exec_cpu_target(plan_target *t) {
    plan_target_reference(t);
    t->name = "cpu";
    t->wants_quantized_act = true;
    for (int w = 0; w < SB_TYPE_COUNT; w++) {
        int a = cpu_act_type(w);
        t->act_type[w] = a < 0 ? SB_TYPE_F32 : a;
    }
    /* llama.cpp's CPU rounds activations to the weight's half type before F16/BF16 matmuls
     * (architectures.md §0.5); do the same (the f32 kernel then reads the rounded values), so
     * F16/BF16 files agree with the references at the F32 bound. */
    t->act_type[SB_TYPE_F16] = SB_TYPE_F16;
    t->act_type[SB_TYPE_BF16] = SB_TYPE_BF16;
    t->fuse_norm_quant = t->fuse_act_quant = t->fuse_elementwise = t->fuse_rope_store = t->fuse_norm_rope = t->fuse_add_norm = true;
    t->chain_quant_max_t = INT64_MAX; /* k_fused quantizes each row it finished, at any T */
}

// ---- capability check ----

sb_status exec_cpu_check(const plan *p) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const ir_node *s0 = n->src[0] != IR_NONE ? &g->nodes[n->src[0]] : NULL;
        const ir_node *s1 = n->src[1] != IR_NONE ? &g->nodes[n->src[1]] : NULL;
        switch (n->op) {
        case IR_OP_GET_ROWS:
            if (!op_can_dequantize(s0->dtype))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cpu: tensor \"%s\" of type %s cannot be read by get_rows (no dequantizer)",
                               s0->name, ir_dtype_name(s0->dtype));
            break;
        case IR_OP_MATMUL: {
            int act = cpu_act_type(s0->dtype);
            bool kernel = act >= 0 && act == s1->dtype;
            if (!kernel && !(op_can_dequantize(s0->dtype) && op_can_dequantize(s1->dtype)))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cpu: tensor \"%s\" of type %s x activation %s: no CPU matmul",
                               s0->name, ir_dtype_name(s0->dtype), ir_dtype_name(s1->dtype));
            break;
        }
        case IR_OP_KV_STORE:
        case IR_OP_ROPE_STORE: /* the CPU target does not ask for stores by launch (plan_target.launch_store_fits) */
            if (ir_store_by_launch(n)) return sb_fail(SB_ERR_UNSUPPORTED, "cpu: store %%%d performed by a matmul's launch", (int)i);
            break;
        case IR_OP_MATMUL_GROUP: /* the CPU target does not ask for it (plan_target.matmul_group_max_t) */
            return sb_fail(SB_ERR_UNSUPPORTED, "cpu: matmul group %%%d", (int)i);
        case IR_OP_ATTENTION: /* the CPU target asks for neither (plan_target.attn_rope_max_t, attn_quant_type) */
            if (ir_attn_q_rope(n).n_rot || ir_attn_quant_type(n) >= 0)
                return sb_fail(SB_ERR_UNSUPPORTED, "cpu: attention %%%d with a fused q rope or quantized output", (int)i);
            break;
        case IR_OP_FUSED: /* its quantize tail's type (pass fuse_chain_quant) */
        case IR_OP_QUANTIZE:
        case IR_OP_RMS_NORM_QUANT:
        case IR_OP_ADD_RMS_NORM_QUANT:
        case IR_OP_GLU_QUANT:
        {
            const int32_t type = n->op == IR_OP_FUSED ? ir_fused_tail_of(n).type : n->dtype;
            if (n->op == IR_OP_FUSED && !ir_fused_tail_of(n).op) break;
            bool ok = op_can_quantize(type); /* else cpu_quantize_act, for the formats it pairs with */
            for (int w = 0; w < SB_TYPE_COUNT && !ok; w++) ok = cpu_act_type(w) == type;
            if (!ok)
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cpu: no quantizer for activation type %s (node %%%d)",
                               ir_dtype_name(type), (int)i);
            break;
        }
        default: break;
        }
    }
    return SB_OK;
}

// ---- arena layout ----

static uint64_t al(uint64_t x) { return (x + PLAN_ALIGN - 1) & ~(uint64_t)(PLAN_ALIGN - 1); }

static int64_t out_rows_n(const plan *p) {
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (p->inputs[i].kind == IR_OP_OUT_ROWS) return p->g->nodes[p->inputs[i].node].ne[0];
    return 0;
}

typedef struct layout {
    uint64_t rows, shared, thread, thread_stride, total;
} layout;

static layout arena_layout(const plan *p, int n_threads) {
    layout l;
    l.rows = al(p->arena_bytes);
    l.shared = l.rows + al((uint64_t)out_rows_n(p) * 4);
    l.thread = l.shared + al(p->scratch_shared_f32 * 4);
    uint64_t thr = p->scratch_thread_f32;
    for (int32_t i = 0; i < p->g->n_nodes; i++) { /* blocked prefill attention: K^T, V and scores */
        const ir_node *n = &p->g->nodes[i];
        if (n->op != IR_OP_ATTENTION || n->ne[1] < 2) continue;
        uint64_t C = (uint64_t)p->g->nodes[n->src[1]].ne[1], D = (uint64_t)ir_attn_of(n).head_dim;
        uint64_t need = 2 * D * (C + 8) + C + 16;
        if (need > thr) thr = need;
    }
    l.thread_stride = al(thr * 4);
    l.total = l.thread + l.thread_stride * (uint64_t)(n_threads < 1 ? 1 : n_threads);
    return l;
}

uint64_t exec_cpu_arena_bytes(const plan *p, int n_threads) { return arena_layout(p, n_threads).total; }

// ---- run context ----

typedef struct run {
    const plan *p;
    const ir_graph *g;
    void *const *data;
    uint8_t *arena;
    layout lay;
    tp_pool *pool;
    const int32_t *out_rows;
    /* the node being run */
    const ir_node *n;
    void *dst;
    void *dst1; /* a multi-result node's result 1, or NULL when the graph dropped it */
    const void *s[IR_MAX_SRC];
    op_rope_args rope;
    op_attn_args attn;
    int64_t ring;    /* the cache a store writes: its ring length, 0 = not a ring */
    const float *xf; /* matmul activation as f32 */
} run;

static void *ptr(const run *r, ir_ref i) {
    const plan_value *v = &r->p->vals[i];
    if (v->input >= 0) {
        if (r->g->nodes[i].op == IR_OP_OUT_ROWS || (r->g->nodes[v->alias].op == IR_OP_OUT_ROWS)) return (void *)r->out_rows;
        return r->data[v->input];
    }
    return r->arena + v->offset;
}

static float *scratch(const run *r, int tid) { return (float *)(r->arena + r->lay.thread + r->lay.thread_stride * (uint64_t)tid); }

static const ir_node *src(const run *r, int j) { return &r->g->nodes[r->n->src[j]]; }

// ---- row kernels (tp_range_fn) ----

static void k_get_rows(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    op_get_rows(r->dst, r->s[0], src(r, 0)->dtype, r->n->ne[0], r->s[1], b, e);
}

static void k_rms_norm(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    op_rms_norm(r->dst, r->s[0], r->n->ne[0], b, e, ir_f0(r->n));
}

static void k_softmax(void *c, int64_t b, int64_t e, int tid) {
    (void)tid;
    const run *r = c;
    op_softmax(r->dst, r->s[0], r->n->ne[0], b, e);
}

static void k_layer_norm(void *c, int64_t b, int64_t e, int tid) {
    (void)tid;
    const run *r = c;
    op_layer_norm(r->dst, r->s[0], r->n->ne[0], b, e, ir_f0(r->n));
}

static void k_permute(void *c, int64_t b, int64_t e, int tid) {
    (void)tid;
    const run *r = c;
    op_permute(r->dst, r->s[0], src(r, 0)->ne, ir_permute_perm(r->n), b, e);
}

/* one elementwise step over rows [b,e) of E; operand o is [E] (broadcast) or full */
static void ew_step(int op, float *y, const float *x, const float *o, bool o_bcast, float f, int64_t E, int64_t b, int64_t e) {
    float *yr = y + b * E;
    const float *xr = x + b * E;
    int64_t n = (e - b) * E;
    switch (op) {
    case IR_OP_ADD: op_add(yr, xr, o_bcast ? o : o + b * E, n, o_bcast ? E : n); break;
    case IR_OP_MUL: op_mul(yr, xr, o_bcast ? o : o + b * E, n, o_bcast ? E : n); break;
    case IR_OP_SCALE: op_scale(yr, xr, n, f); break;
    case IR_OP_SOFTCAP: op_softcap(yr, xr, n, f); break;
    case IR_OP_SILU: op_silu(yr, xr, n); break;
    case IR_OP_GELU_TANH: op_gelu_tanh(yr, xr, n); break;
    case IR_OP_GELU: op_gelu(yr, xr, n); break;
    case IR_OP_RMS_NORM: op_rms_norm(y, x, E, b, e, f); break;
    default: SB_ASSERT(!"not an elementwise step");
    }
}

static bool bcast(const ir_node *o, const ir_node *n) { return ir_nelem(o) == n->ne[0] && ir_nrows(n) != 1; }

static void k_ew(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const ir_node *n = r->n;
    const float *o = n->src[1] != IR_NONE ? r->s[1] : NULL;
    ew_step(n->op, r->dst, r->s[0], o, o && bcast(src(r, 1), n), ir_f0(n), n->ne[0], b, e);
}

/* a matmul's third source added to its product in place (x + y == y + x: an ADD node's bits) */
static void k_matmul_add(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    (void)tid;
    ew_step(IR_OP_ADD, r->dst, r->dst, r->s[2], bcast(src(r, 2), r->n), 0.0f, r->n->ne[0], b, e);
}

/* Functions compiled for AVX2+FMA+F16C (AVX2_ATTR, runtime/vexp_avx2.h), called only when
 * cpu_isa_active() >= CPU_ISA_AVX2. SwiGLU over F x T values is the largest non-matmul cost of a
 * prefill (one e^x each), so AVX2 machines take it 8 at a time (exp_avx2). */
AVX2_ATTR static void swiglu_avx2(float *y, const float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 den = _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x)));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(x, den), _mm256_loadu_ps(u + i)));
    }
    if (i < n) op_swiglu(y + i, g + i, u + i, n - i);
}

static void swiglu(float *y, const float *g, const float *u, int64_t n) {
    if (cpu_isa_active() >= CPU_ISA_AVX2)
        swiglu_avx2(y, g, u, n);
    else
        op_swiglu(y, g, u, n);
}

static void k_glu(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    int64_t E = r->n->ne[0];
    if (r->n->op == IR_OP_SWIGLU)
        swiglu((float *)r->dst + b * E, (const float *)r->s[0] + b * E, (const float *)r->s[1] + b * E, (e - b) * E);
    else
        cpu_geglu((float *)r->dst + b * E, (const float *)r->s[0] + b * E, (const float *)r->s[1] + b * E, (e - b) * E, op_gelu_table());
}

static void quantize_rows(int type, void *dst, const float *x, int64_t E, int64_t nrows) {
    if (cpu_quantize_act(type, x, dst, E * nrows) == SB_OK) return;
    uint64_t rb = op_row_bytes(type, E);
    for (int64_t i = 0; i < nrows; i++) op_quantize_row((uint8_t *)dst + rb * (uint64_t)i, type, x + i * E, E);
}

/* rms_norm(x) [* w] of one row of E in row (this thread's scratch; x may be row: the norm reads it
 * before writing), quantized to type into dst: the one norm-quantize of every node that has one */
static void norm_quant_to(int type, void *dst, float *row, const float *x, const float *w, int64_t E, float eps) {
    op_rms_norm_row(row, x, E, eps);
    if (w) op_mul(row, row, w, E, E);
    quantize_rows(type, dst, row, E, 1);
}

/* a FUSED chain's quantize tail (pass fuse_chain_quant): its finished rows [b,e) into result 1, as
 * they are (k_quantize's call) or through norm_quant_to — the bits of the node it replaced */
static void fused_tail(const run *r, int64_t b, int64_t e, int tid) {
    const ir_fused_tail t = ir_fused_tail_of(r->n);
    const int64_t E = r->n->ne[0];
    const uint64_t rb = op_row_bytes(t.type, E);
    const float *y = r->dst;
    if (t.op == IR_OP_QUANTIZE) {
        quantize_rows(t.type, (uint8_t *)r->dst1 + rb * (uint64_t)b, y + b * E, E, e - b);
        return;
    }
    const float *w = t.weight ? r->s[t.weight] : NULL;
    for (int64_t k = b; k < e; k++) norm_quant_to(t.type, (uint8_t *)r->dst1 + rb * (uint64_t)k, scratch(r, tid), y + k * E, w, E, t.eps);
}

static void k_fused(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const ir_node *n = r->n;
    int64_t E = n->ne[0];
    const float *in = r->s[0];
    for (int i = 0; i < ir_fused_steps(n); i++) {
        const ir_fused_step st = ir_fused_step_of(n, i);
        const float *o = st.operand ? r->s[st.operand] : NULL;
        ew_step(st.op, r->dst, in, o, o && bcast(src(r, st.operand), n), st.f, E, b, e);
        in = r->dst; /* later steps run in place */
    }
    if (r->dst1) fused_tail(r, b, e, tid);
}

static void k_quantize(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    int64_t E = r->n->ne[0];
    uint64_t rb = op_row_bytes(r->n->dtype, E);
    quantize_rows(r->n->dtype, (uint8_t *)r->dst + rb * (uint64_t)b, (const float *)r->s[0] + b * E, E, e - b);
}

/* row t of an RMS_NORM_QUANT-style node: rms_norm(x) [* w] in this thread's scratch row, quantized
 * into dst (x may be that scratch row: the norm reads it before writing) */
static void norm_quant_row(const run *r, float *row, const float *x, const float *w, int64_t t) {
    const int64_t E = r->n->ne[0];
    norm_quant_to(r->n->dtype, (uint8_t *)r->dst + op_row_bytes(r->n->dtype, E) * (uint64_t)t, row, x, w, E, ir_f0(r->n));
}

static void k_norm_quant(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    for (int64_t t = b; t < e; t++) norm_quant_row(r, scratch(r, tid), (const float *)r->s[0] + t * r->n->ne[0], r->s[1], t);
}

/* ADD_RMS_NORM_QUANT: per row, the sum a + b (into result 1's memory when the graph keeps it, else
 * this thread's scratch), then k_norm_quant's norm, weight and rounding of it — the bits of ADD
 * followed by RMS_NORM_QUANT */
static void k_add_norm_quant(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const int64_t E = r->n->ne[0];
    float *row = scratch(r, tid);
    for (int64_t t = b; t < e; t++) {
        float *sum = r->dst1 ? (float *)r->dst1 + t * E : row;
        op_add(sum, (const float *)r->s[0] + t * E, (const float *)r->s[1] + t * E, E, E);
        norm_quant_row(r, row, sum, r->s[2], t);
    }
}

static void k_glu_quant(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    int64_t E = r->n->ne[0];
    uint64_t rb = op_row_bytes(r->n->dtype, E);
    float *row = scratch(r, tid);
    for (int64_t t = b; t < e; t++) {
        const float *g = (const float *)r->s[0] + t * E, *u = (const float *)r->s[1] + t * E;
        if (ir_glu_act(r->n) == IR_OP_SWIGLU)
            swiglu(row, g, u, E);
        else
            cpu_geglu(row, g, u, E, op_gelu_table()); /* op_geglu's bits, vectorised */
        quantize_rows(r->n->dtype, (uint8_t *)r->dst + rb * (uint64_t)t, row, E, 1);
    }
}

static void k_matmul_ref(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const ir_node *w = src(r, 0);
    op_matmul(r->dst, r->s[0], w->dtype, r->xf, w->ne[0], w->ne[1], r->n->ne[1], b, e, scratch(r, tid));
}

static void k_rope(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    op_rope(r->dst, r->s[0], r->s[1], &r->rope, b, e);
}

/* op_rope's arguments for the ROPE or ROPE_STORE node r runs, rotating x [D,H,*] (its freq factors
 * and head norm from its sources: ir_rope_ff, ir_rope_norm_of) */
static op_rope_args rope_args(const run *r, const ir_node *x) {
    const ir_node *n = r->n;
    const ir_rope_params rp = ir_rope_of(n);
    const ir_rope_norm nm = ir_rope_norm_of(n);
    const ir_ref ff = ir_rope_ff(n);
    return (op_rope_args){.D = x->ne[0], .H = x->ne[1], .n_rot = rp.n_rot, .mode = rp.mode, .freq_base = rp.freq_base,
                          .freq_scale = rp.freq_scale, .attn_factor = ir_rope_attn_factor(n), .ff = ff != IR_NONE ? ptr(r, ff) : NULL,
                          .norm = nm.kind != IR_ROPE_NORM_NONE, .norm_eps = nm.eps, .norm_w = nm.weight != IR_NONE ? ptr(r, nm.weight) : NULL};
}

/* ROPE_STORE: token t's rotated row in this thread's scratch (op_rope's math), then into the
 * cache column of its row (pos[t], or a paged store's rows[t]: ir_store_rows; op_kv_store's
 * rounding) — the bits of ROPE followed by KV_STORE */
static void k_rope_store(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const int64_t DH = r->rope.D * r->rope.H;
    float *row = scratch(r, tid);
    const int32_t *pos = r->s[2], *rows = ir_store_has_rows(r->n) ? r->s[3] : pos;
    for (int64_t t = b; t < e; t++) {
        op_rope(row, (const float *)r->s[1] + t * DH, pos + t, &r->rope, 0, 1);
        const int32_t at = r->ring ? (int32_t)(rows[t] % r->ring) : rows[t];
        op_kv_store(r->dst, r->n->dtype, r->n->ne[0], row, &at, 1);
    }
}

/* Attention is the one reference op whose scalar form would dominate prefill (T*T*D*H work), so
 * the executor runs its own copy of op_attention's math with vectorisable dot/axpy helpers (8
 * partial sums), compiled twice: plain (SSE2) and for AVX2+FMA+F16C, picked by cpu_isa_active()
 * (so SB_CPU_ISA=scalar also caps this). Same math as op_attention up to summation order;
 * tests/runtime/test_exec_cpu.c compares the two. */
#define ATTN_HELPERS(SFX, ATTR)                                                              \
    ATTR __attribute__((unused)) static float dot_f32##SFX(const float *q, const float *k, int64_t n) {              \
        float acc[8] = {0};                                                                  \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8)                                                           \
            for (int j = 0; j < 8; j++) acc[j] += q[i + j] * k[i + j];                       \
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
        for (; i < n; i++) s += q[i] * k[i];                                                 \
        return s;                                                                            \
    }                                                                                        \
    ATTR __attribute__((unused)) static float dot_f16##SFX(const float *q, const uint16_t *k, int64_t n) {           \
        float acc[8] = {0};                                                                  \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8)                                                           \
            for (int j = 0; j < 8; j++) acc[j] += q[i + j] * qk_fp16_to_fp32(k[i + j]);                \
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
        for (; i < n; i++) s += q[i] * qk_fp16_to_fp32(k[i]);                                          \
        return s;                                                                            \
    }                                                                                        \
    ATTR __attribute__((unused)) static void axpy_f32##SFX(float *y, float a, const float *x, int64_t n) {           \
        for (int64_t i = 0; i < n; i++) y[i] += a * x[i];                                    \
    }                                                                                        \
    ATTR __attribute__((unused)) static void axpy_f16##SFX(float *y, float a, const uint16_t *x, int64_t n) {        \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8)                                                           \
            for (int j = 0; j < 8; j++) y[i + j] += a * qk_fp16_to_fp32(x[i + j]);                     \
        for (; i < n; i++) y[i] += a * qk_fp16_to_fp32(x[i]);                                          \
    }

ATTN_HELPERS(_base, )
ATTN_HELPERS(_avx2c, __attribute__((target("avx2,fma,f16c"))))

/* F16C converts 8 halves in one instruction (the portable helpers above convert one at a time) */

AVX2_ATTR static float dot_f16_avx2(const float *q, const uint16_t *k, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), acc);
    float t[8];
    _mm256_storeu_ps(t, acc);
    float s = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    for (; i < n; i++) s += q[i] * qk_fp16_to_fp32(k[i]);
    return s;
}

AVX2_ATTR static void axpy_f16_avx2(float *y, float a, const uint16_t *x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * qk_fp16_to_fp32(x[i]);
}

typedef struct attn_fns {
    float (*dot_f32)(const float *, const float *, int64_t);
    float (*dot_f16)(const float *, const uint16_t *, int64_t);
    void (*axpy_f32)(float *, float, const float *, int64_t);
    void (*axpy_f16)(float *, float, const uint16_t *, int64_t);
} attn_fns;

static attn_fns attn_pick(void) {
    if (cpu_isa_active() >= CPU_ISA_AVX2) return (attn_fns){dot_f32_avx2c, dot_f16_avx2, axpy_f32_avx2c, axpy_f16_avx2};
    return (attn_fns){dot_f32_base, dot_f16_base, axpy_f32_base, axpy_f16_base};
}

/* Query head h of token t over its visible keys (op_attention's math with the helpers above);
 * scores: scratch of at least pos[t]+1 floats. */
static void attn_pair(const run *r, int64_t t, int64_t h, float *scores, attn_fns fn) {
    const op_attn_args *a = &r->attn;
    const int64_t D = a->D, Hq = a->Hq, Dkv = a->D * a->Hkv, kvh = h / (a->Hq / a->Hkv);
    const bool f16 = a->ctype == SB_TYPE_F16;
    const float *qv = (const float *)r->s[0] + (t * Hq + h) * D;
    float *out = (float *)r->dst + (t * Hq + h) * D;
    const int64_t p = ((const int32_t *)r->s[3])[t];
    const int64_t lo = (a->window > 0 && p - a->window + 1 > 0) ? p - a->window + 1 : 0;
    float mx = -INFINITY;
    for (int64_t j = lo; j <= p; j++) {
        const int64_t base = op_attn_row(a, t, j) * Dkv + kvh * D;
        float sc = f16 ? fn.dot_f16(qv, (const uint16_t *)r->s[1] + base, D) : fn.dot_f32(qv, (const float *)r->s[1] + base, D);
        sc *= a->scale;
        if (a->softcap > 0.0f) sc = tanhf(sc / a->softcap) * a->softcap;
        scores[j - lo] = sc;
        if (sc > mx) mx = sc;
    }
    const float inv = op_softmax_exp(scores, p - lo + 1, mx);
    for (int64_t d = 0; d < D; d++) out[d] = 0.0f;
    for (int64_t j = lo; j <= p; j++) {
        const int64_t base = op_attn_row(a, t, j) * Dkv + kvh * D;
        if (f16)
            fn.axpy_f16(out, scores[j - lo] * inv, (const uint16_t *)r->s[2] + base, D);
        else
            fn.axpy_f32(out, scores[j - lo] * inv, (const float *)r->s[2] + base, D);
    }
}

/* Do tokens [t0, t1) map positions [jlo, jhi] to the same cache rows (always, for a contiguous
 * cache; for a paged one when their block tables agree over those blocks: one sequence)? */
static bool same_blocks(const op_attn_args *a, int64_t t0, int64_t t1, int64_t jlo, int64_t jhi) {
    if (!a->table) return true;
    const int32_t *ref = a->table + t0 * a->n_tbl;
    for (int64_t t = t0 + 1; t < t1; t++)
        for (int64_t blk = jlo / a->bs; blk <= jhi / a->bs; blk++)
            if (a->table[t * a->n_tbl + blk] != ref[blk]) return false;
    return true;
}

/* Prefill attention, blocked (AVX2 machines, T >= 2): one task = one kv head x ATT_TB tokens, so
 * the K rows the block needs are converted once into K^T [D, nj] (scores for 8 keys per FMA, no
 * horizontal sums) and V into f32 [nj, D], shared by the block's ATT_TB x (Hq/Hkv) queries. Same
 * math as op_attention (mask, scale, softcap, max-subtracted softmax with a double sum); only the
 * f32 summation order differs. Scratch per thread: 2*D*(nj+8) + nj floats (nj <= C). */
#define ATT_TB 16

AVX2_ATTR static void att_block_avx2(const run *r, int64_t task, float *scr) {
    const op_attn_args *a = &r->attn;
    const int64_t D = a->D, Hq = a->Hq, Hkv = a->Hkv, Dkv = D * Hkv, G = Hq / Hkv;
    const int64_t T = r->n->ne[1];
    const int64_t kvh = task % Hkv, t0 = (task / Hkv) * ATT_TB, t1 = t0 + ATT_TB < T ? t0 + ATT_TB : T;
    const int32_t *pos = r->s[3];
    const bool f16 = a->ctype == SB_TYPE_F16;
    int64_t jlo = INT64_MAX, jhi = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t p = pos[t], lo = (a->window > 0 && p - a->window + 1 > 0) ? p - a->window + 1 : 0;
        if (lo < jlo) jlo = lo;
        if (p > jhi) jhi = p;
    }
    if (!same_blocks(a, t0, t1, jlo, jhi)) { /* tokens of several sequences: each (token, head) on its own */
        for (int64_t t = t0; t < t1; t++)
            for (int64_t g = 0; g < G; g++) attn_pair(r, t, kvh * G + g, scr, attn_pick());
        return;
    }
    const int64_t nj = jhi - jlo + 1, njp = (nj + 7) & ~(int64_t)7;
    float *kt = scr, *vf = kt + D * njp, *sc = vf + D * njp;
    for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t base = op_attn_row(a, t0, jlo + jj) * Dkv + kvh * D;
        for (int64_t d = 0; d < D; d++) {
            kt[d * njp + jj] = f16 ? qk_fp16_to_fp32(((const uint16_t *)r->s[1])[base + d]) : ((const float *)r->s[1])[base + d];
            vf[jj * D + d] = f16 ? qk_fp16_to_fp32(((const uint16_t *)r->s[2])[base + d]) : ((const float *)r->s[2])[base + d];
        }
    }
    for (int64_t jj = nj; jj < njp; jj++)
        for (int64_t d = 0; d < D; d++) kt[d * njp + jj] = 0.0f;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t p = pos[t], lo = (a->window > 0 && p - a->window + 1 > 0) ? p - a->window + 1 : 0;
        const int64_t j0 = lo - jlo, j1 = p - jlo + 1; /* visible keys [j0, j1) of the block */
        const int64_t b0 = j0 & ~(int64_t)7;
        for (int64_t g = 0; g < G; g++) {
            const int64_t h = kvh * G + g;
            const float *qv = (const float *)r->s[0] + (t * Hq + h) * D;
            float *out = (float *)r->dst + (t * Hq + h) * D;
            int64_t jb = b0;
            for (; jb + 32 <= j1 + 7 && jb + 32 <= njp; jb += 32) { /* 4 independent FMA chains */
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
                for (int64_t d = 0; d < D; d++) {
                    const __m256 qb = _mm256_set1_ps(qv[d]);
                    const float *kr = kt + d * njp + jb;
                    a0 = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kr), a0);
                    a1 = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kr + 8), a1);
                    a2 = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kr + 16), a2);
                    a3 = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kr + 24), a3);
                }
                _mm256_storeu_ps(sc + jb, a0);
                _mm256_storeu_ps(sc + jb + 8, a1);
                _mm256_storeu_ps(sc + jb + 16, a2);
                _mm256_storeu_ps(sc + jb + 24, a3);
            }
            for (; jb < j1; jb += 8) {
                __m256 acc = _mm256_setzero_ps();
                for (int64_t d = 0; d < D; d++) acc = _mm256_fmadd_ps(_mm256_set1_ps(qv[d]), _mm256_loadu_ps(kt + d * njp + jb), acc);
                _mm256_storeu_ps(sc + jb, acc);
            }
            float mx = -INFINITY;
            for (int64_t jj = j0; jj < j1; jj++) {
                float v = sc[jj] * a->scale;
                if (a->softcap > 0.0f) v = tanhf(v / a->softcap) * a->softcap;
                sc[jj] = v;
                if (v > mx) mx = v;
            }
            /* exponentials 8 at a time (exp_avx2, as ggml's softmax uses a vector exp), sum in double */
            const double sum = exp_sum_avx2(sc + j0, sc + j0, NULL, j1 - j0, mx);
            const float inv = (float)(1.0 / sum);
            if (D % 64 == 0) { /* out held in 8 registers per 64 dims across all keys */
                for (int64_t dc = 0; dc < D; dc += 64) {
                    __m256 o[8];
                    for (int k = 0; k < 8; k++) o[k] = _mm256_setzero_ps();
                    for (int64_t j = j0; j < j1; j++) {
                        const __m256 pj = _mm256_set1_ps(sc[j] * inv);
                        const float *vr = vf + j * D + dc;
                        for (int k = 0; k < 8; k++) o[k] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8 * k), o[k]);
                    }
                    for (int k = 0; k < 8; k++) _mm256_storeu_ps(out + dc + 8 * k, o[k]);
                }
            } else {
                for (int64_t d = 0; d < D; d++) out[d] = 0.0f;
                for (int64_t j = j0; j < j1; j++) axpy_f32_avx2c(out, sc[j] * inv, vf + j * D, D);
            }
        }
    }
}

static void k_attention_blocked(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    for (int64_t task = b; task < e; task++) att_block_avx2(r, task, scratch(r, tid));
}

static void k_attention(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const attn_fns fn = attn_pick();
    float *scores = scratch(r, tid);
    for (int64_t i = b; i < e; i++) attn_pair(r, i / r->attn.Hq, i % r->attn.Hq, scores, fn);
}

/* KV_STORE of T rows at their positions' cache rows */
static void kv_store_rows(const run *r, int64_t T) {
    const ir_node *n = r->n;
    const int32_t *pos = r->s[2];
    const int64_t ring = ir_kv_ring(r->g, (ir_ref)(n - r->g->nodes));
    const ir_rope_norm nm = ir_rope_norm_of(n);
    if (nm.kind) { /* each head normed (pass fuse_norm_rope) into the scratch row, then stored: rms_norm [, mul], kv_store's bits */
        const int64_t E = n->ne[0], D = nm.head_dim;
        const float *w = nm.weight != IR_NONE ? ptr(r, nm.weight) : NULL;
        float *row = scratch(r, 0); /* the store runs on this thread alone */
        for (int64_t t = 0; t < T; t++) {
            for (int64_t h = 0; h < E / D; h++) {
                op_rms_norm_row(row + h * D, (const float *)r->s[1] + t * E + h * D, D, nm.eps);
                if (w) op_mul(row + h * D, row + h * D, w, D, D);
            }
            const int32_t at = ring ? (int32_t)(pos[t] % ring) : pos[t];
            op_kv_store(r->dst, n->dtype, E, row, &at, 1);
        }
        return;
    }
    if (!ring) {
        op_kv_store(r->dst, n->dtype, n->ne[0], r->s[1], pos, T);
        return;
    }
    for (int64_t t = 0; t < T; t++) {
        const int32_t at = (int32_t)(pos[t] % ring);
        op_kv_store(r->dst, n->dtype, n->ne[0], (const float *)r->s[1] + t * n->ne[0], &at, 1);
    }
}

static void k_dequant_x(void *c, int64_t b, int64_t e, int tid) {
    const run *r = c;
    const ir_node *x = src(r, 1);
    uint64_t rb = op_row_bytes(x->dtype, x->ne[0]);
    for (int64_t t = b; t < e; t++)
        op_dequantize_row((float *)r->xf + t * x->ne[0], (const uint8_t *)r->s[1] + rb * (uint64_t)t, x->dtype, x->ne[0]);
}

// ---- run ----

/* concat: op_concat with each source's chunk (its elements up to and including the joined dim) */
static void exec_cpu_concat(const ir_graph *g, const ir_node *n, void *dst, const float *const *s) {
    const int d = ir_concat_dim(n);
    int64_t chunk[IR_MAX_SRC], outer = 1;
    int ns = 0;
    for (; ns < IR_MAX_SRC && n->src[ns] != IR_NONE; ns++) {
        const ir_node *x = &g->nodes[n->src[ns]];
        chunk[ns] = 1;
        for (int k = 0; k <= d; k++) chunk[ns] *= x->ne[k];
    }
    for (int k = d + 1; k < 4; k++) outer *= n->ne[k];
    op_concat(dst, s, chunk, ns, outer);
}

static int64_t grain_for(int64_t rows, int threads) {
    int64_t g = rows / (threads * 4);
    return g < 1 ? 1 : g;
}

/* Row-parallel dispatch; a node of fewer than PAR_MIN_ELEMS elements (every elementwise node of
 * a decode step) runs inline on the caller: waking the pool costs more than the work. */
#define PAR_MIN_ELEMS 16384
static void par(tp_pool *pool, int nt, int64_t rows, int64_t elems, tp_range_fn fn, void *ctx) {
    if (rows <= 1 || elems < PAR_MIN_ELEMS || nt <= 1)
        fn(ctx, 0, rows, 0);
    else
        tp_run(pool, rows, grain_for(rows, nt), fn, ctx);
}

/* matmul node i into r->dst: the activation-type kernel, f16/bf16 activations widened for the f32
 * kernel, or the dequantizing reference */
static sb_status run_matmul(run *r, tp_pool *pool, int nt, int32_t i) {
    const ir_node *n = r->n;
    const ir_node *w = src(r, 0), *x = src(r, 1);
    int act = cpu_act_type(w->dtype);
    if (act >= 0 && act == x->dtype) {
        sb_status s = cpu_matmul(pool, w->dtype, r->s[0], w->ne[0], w->ne[1], r->s[1], x->ne[1], r->dst);
        return s != SB_OK ? sb_fail_context(s, "exec: matmul %%%d \"%s\"", (int)i, n->name) : SB_OK;
    }
    if (act == SB_TYPE_F32 && (x->dtype == SB_TYPE_F16 || x->dtype == SB_TYPE_BF16)) {
        /* half-rounded activations, widened back for the f32-activation kernel */
        r->xf = (const float *)(r->arena + r->lay.shared);
        tp_run(pool, x->ne[1], grain_for(x->ne[1], nt), k_dequant_x, r);
        sb_status s = cpu_matmul(pool, w->dtype, r->s[0], w->ne[0], w->ne[1], r->xf, x->ne[1], r->dst);
        return s != SB_OK ? sb_fail_context(s, "exec: matmul %%%d \"%s\"", (int)i, n->name) : SB_OK;
    }
    if (!op_can_dequantize(w->dtype) || !op_can_dequantize(x->dtype))
        return sb_fail(SB_ERR_UNSUPPORTED, "exec: matmul %%%d: weight \"%s\" type %s x activation %s not supported on CPU",
                       (int)i, w->name, ir_dtype_name(w->dtype), ir_dtype_name(x->dtype));
    if (x->dtype == SB_TYPE_F32) {
        r->xf = r->s[1];
    } else {
        r->xf = (const float *)(r->arena + r->lay.shared);
        tp_run(pool, x->ne[1], grain_for(x->ne[1], nt), k_dequant_x, r);
    }
    tp_run(pool, w->ne[1], grain_for(w->ne[1], nt), k_matmul_ref, r);
    return SB_OK;
}

sb_status exec_cpu_run(const plan *p, const exec_bindings *b, tp_pool *pool, const float **out) {
    if (!p || !b) return sb_fail(SB_ERR_INVALID_ARG, "exec: NULL plan or bindings");
    int nt = tp_threads(pool);
    run r = {.p = p, .g = p->g, .data = b->data, .arena = b->arena, .pool = pool};
    r.lay = arena_layout(p, nt);
    if (!b->arena || b->arena_bytes < r.lay.total || ((uintptr_t)b->arena % PLAN_ALIGN))
        return sb_fail(SB_ERR_INVALID_ARG, "exec: arena %p of %llu bytes; need %llu bytes aligned to %d", b->arena,
                       (unsigned long long)b->arena_bytes, (unsigned long long)r.lay.total, PLAN_ALIGN);
    const int32_t *rows = NULL;
    SB_TRY(plan_check_bindings(p, b->data, b->n_data, &rows));
    if (!rows) { /* default: the last n rows */
        int32_t *d = (int32_t *)(r.arena + r.lay.rows);
        int64_t n = out_rows_n(p);
        for (int64_t k = 0; k < n; k++) d[k] = (int32_t)(p->n_tokens - n + k);
        rows = d;
    }
    r.out_rows = rows;

    for (int32_t i = 0; i < p->g->n_nodes; i++) {
        const ir_node *n = &p->g->nodes[i];
        if (ir_ops[n->op].flags & OPF_INPUT) continue;
        r.n = n;
        r.dst = ptr(&r, i);
        for (int j = 0; j < IR_MAX_SRC; j++) r.s[j] = n->src[j] != IR_NONE ? ptr(&r, n->src[j]) : NULL;
        int64_t rows_n = ir_nrows(n);
        switch (n->op) {
        case IR_OP_GET_ROWS: par(pool, nt, n->ne[1], ir_nelem(n), k_get_rows, &r); break;
        case IR_OP_RMS_NORM: par(pool, nt, rows_n, ir_nelem(n), k_rms_norm, &r); break;
        case IR_OP_SOFTMAX: par(pool, nt, rows_n, ir_nelem(n), k_softmax, &r); break;
        case IR_OP_ADD:
        case IR_OP_MUL:
        case IR_OP_SCALE:
        case IR_OP_SOFTCAP:
        case IR_OP_SILU:
        case IR_OP_GELU_TANH:
        case IR_OP_GELU: par(pool, nt, rows_n, ir_nelem(n), k_ew, &r); break;
        case IR_OP_LAYER_NORM: par(pool, nt, rows_n, ir_nelem(n), k_layer_norm, &r); break;
        case IR_OP_PERMUTE: par(pool, nt, rows_n, ir_nelem(n), k_permute, &r); break;
        case IR_OP_CONCAT: exec_cpu_concat(r.g, n, r.dst, (const float *const *)r.s); break;
        case IR_OP_SWIGLU:
        case IR_OP_GEGLU: par(pool, nt, rows_n, ir_nelem(n), k_glu, &r); break;
        case IR_OP_FUSED: {
            const ir_ref res = ir_fused_tail_of(n).op ? ir_result_of(p->g, i, 1) : IR_NONE; /* its quantize tail's rows */
            r.dst1 = res != IR_NONE ? ptr(&r, res) : NULL;
            par(pool, nt, rows_n, ir_nelem(n), k_fused, &r);
            break;
        }
        case IR_OP_QUANTIZE: par(pool, nt, rows_n, ir_nelem(n), k_quantize, &r); break;
        case IR_OP_RMS_NORM_QUANT: par(pool, nt, rows_n, ir_nelem(n), k_norm_quant, &r); break;
        case IR_OP_GLU_QUANT: par(pool, nt, rows_n, ir_nelem(n), k_glu_quant, &r); break;
        case IR_OP_ADD_RMS_NORM_QUANT: {
            const ir_ref res = ir_result_of(p->g, i, 1);
            r.dst1 = res != IR_NONE ? ptr(&r, res) : NULL;
            par(pool, nt, rows_n, ir_nelem(n), k_add_norm_quant, &r);
            break;
        }
        case IR_OP_RESULT: break; /* written by its producer */
        case IR_OP_MATMUL:
            SB_TRY(run_matmul(&r, pool, nt, i));
            if (n->src[2] != IR_NONE) par(pool, nt, rows_n, ir_nelem(n), k_matmul_add, &r); /* + bias or residual */
            break;
        case IR_OP_RESHAPE:
        case IR_OP_VIEW:
        case IR_OP_OUTPUT: break; /* views */
        case IR_OP_ROPE: {
            const ir_node *x = src(&r, 0);
            r.rope = rope_args(&r, x);
            par(pool, nt, x->ne[2], ir_nelem(x), k_rope, &r);
            break;
        }
        case IR_OP_ROPE_STORE: {
            const ir_node *x = src(&r, 1);
            r.ring = ir_kv_ring(p->g, i);
            r.rope = rope_args(&r, x);
            par(pool, nt, x->ne[2], ir_nelem(x), k_rope_store, &r);
            break;
        }
        case IR_OP_KV_STORE: {
            const ir_node *x = src(&r, 1);
            kv_store_rows(&r, x->ne[1]);
            break;
        }
        case IR_OP_ATTENTION: {
            const ir_node *q = src(&r, 0), *k = src(&r, 1);
            r.attn = (op_attn_args){.D = q->ne[0], .Hq = q->ne[1], .Hkv = ir_attn_of(n).n_head_kv, .ctype = k->dtype, .scale = ir_attn_of(n).scale,
                                    .softcap = ir_attn_of(n).softcap, .window = ir_attn_of(n).window,
                                    .ring = ir_kv_ring(p->g, n->src[1])};
            if (ir_attn_block_size(n)) { /* paged: src[4] is the block table [n_tbl, T] */
                r.attn.table = r.s[4];
                r.attn.n_tbl = src(&r, 4)->ne[0];
                r.attn.bs = ir_attn_block_size(n);
            }
            int64_t pairs = q->ne[1] * q->ne[2];
            if (q->ne[2] >= 2 && cpu_isa_active() >= CPU_ISA_AVX2) {
                int64_t tasks = ir_attn_of(n).n_head_kv * ((q->ne[2] + ATT_TB - 1) / ATT_TB);
                tp_run(pool, tasks, 1, k_attention_blocked, &r);
            } else {
                tp_run(pool, pairs, grain_for(pairs, nt), k_attention, &r);
            }
            break;
        }
        case IR_OP_SELECT_ROWS: op_select_rows(r.dst, r.s[0], n->ne[0], r.out_rows, n->ne[1]); break;
        case IR_OP_SLICE: {
            const ir_node *x = src(&r, 0);
            op_slice(r.dst, r.s[0], x->ne[0], x->ne[1], ir_slice_start(n), ir_slice_len(n), x->ne[2] * x->ne[3]);
            break;
        }
        default: return sb_fail(SB_ERR_INTERNAL, "exec: op %s has no CPU implementation", ir_ops[n->op].name);
        }
    }
    if (out)
        for (int32_t k = 0; k < p->n_outputs; k++) out[k] = ptr(&r, p->outputs[k].node);
    return SB_OK;
}
