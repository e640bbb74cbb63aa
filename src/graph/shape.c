/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/shape.c — the op info table (from ops/ops.def) and one shape/dtype function per op:
 * given a node's op, sources and params, derive its ne[4] and dtype or say why it cannot.
 * Layer 2 (graph). Builders call ir_infer_shape and assert success (a misuse is a builder bug);
 * the verifier calls it after every pass and compares, so shapes cannot drift from the table.
 * Non-goals: broadcasting beyond "row vector [ne0] over all rows".
 */
#include "graph/ir.h"

#include "quant/types.h"

#include <string.h>

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define OP(NAME, name, min_src, max_src, flags) [IR_OP_##NAME] = {#name, min_src, max_src, flags},
#include "ops/ops.def"
#undef OP
};

// ---- helpers ----

#define FAIL(...) return sb_fail(SB_ERR_INTERNAL, __VA_ARGS__)

static const ir_node *S(const ir_graph *g, const ir_node *n, int i) {
    ir_ref r = n->src[i];
    return (r >= 0 && r < g->n_nodes) ? &g->nodes[r] : NULL;
}

static bool same_ne(const int64_t *a, const int64_t *b) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static void set(ir_node *n, int dtype, int64_t a, int64_t b, int64_t c, int64_t d) {
    n->dtype = dtype;
    n->ne[0] = a, n->ne[1] = b, n->ne[2] = c, n->ne[3] = d;
}

static bool is_row_vec(const ir_node *b, const ir_node *a) {
    return b->ne[0] == a->ne[0] && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1;
}

/* The second operand of a binary row-wise op: [ne0] or the same shape, f32. */
static sb_status check_operand(const ir_node *n, const ir_node *a, const ir_node *b) {
    if (!b || b->dtype != SB_TYPE_F32) FAIL("%s: operand must be f32", ir_ops[n->op].name);
    if (!same_ne(a->ne, b->ne) && !is_row_vec(b, a))
        FAIL("%s: operand [%lld,%lld,%lld,%lld] is neither [%lld] nor the input's shape", ir_ops[n->op].name,
             (long long)b->ne[0], (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3], (long long)a->ne[0]);
    return SB_OK;
}

static bool is_f32(const ir_node *x) { return x && x->dtype == SB_TYPE_F32; }
static bool is_i32_vec(const ir_node *x) {
    return x && x->dtype == SB_TYPE_I32 && x->ne[1] == 1 && x->ne[2] == 1 && x->ne[3] == 1;
}

/* ROPE / ROPE_STORE / KV_STORE's head norm (ir_rope_norm_of) over heads of D dims: none (and no
 * eps), or eps in (0, 1) and, with a weight, an f32 [D] */
static sb_status check_rope_norm(const ir_graph *g, const ir_node *n, int64_t D) {
    const ir_rope_norm rn = ir_rope_norm_of(n);
    if (rn.kind == IR_ROPE_NORM_NONE) {
        if (rn.eps != 0.0f) FAIL("%s: norm eps without a norm", ir_ops[n->op].name);
        return SB_OK;
    }
    if (rn.kind != IR_ROPE_NORM_PLAIN && rn.kind != IR_ROPE_NORM_WEIGHT) FAIL("%s: norm kind %d", ir_ops[n->op].name, rn.kind);
    if (!(rn.eps > 0.0f && rn.eps < 1.0f)) FAIL("%s: norm eps %g (must be in (0, 1))", ir_ops[n->op].name, rn.eps);
    const ir_node *w = rn.weight != IR_NONE ? S(g, n, ir_nsrc(n) - 1) : NULL;
    if (rn.kind == IR_ROPE_NORM_WEIGHT && (!is_f32(w) || w->ne[0] != D || w->ne[1] != 1 || w->ne[2] != 1 || w->ne[3] != 1))
        FAIL("%s: norm weight must be f32 [D=%lld]", ir_ops[n->op].name, (long long)D);
    return SB_OK;
}

/* FUSED's quantize tail (ir_fused_tail_of): none, or a quantize / norm-quantize of the chain's
 * [ne0] rows into a block type that divides ne0, the norm's weight f32 [ne0] among the sources */
static sb_status check_fused_tail(const ir_graph *g, const ir_node *n, const ir_node *a, int ns) {
    const ir_fused_tail t = ir_fused_tail_of(n);
    if (!t.op) {
        if (t.type || t.weight || n->fp[IR_MAX_FUSE] != 0.0f) FAIL("fused: tail params without a tail");
        return SB_OK;
    }
    if (t.op != IR_OP_QUANTIZE && t.op != IR_OP_RMS_NORM_QUANT) FAIL("fused: tail op %d (quantize or rms_norm_quant)", (int)t.op);
    if (!qk_valid(t.type) || t.type == SB_TYPE_F32) FAIL("fused: tail type %d is not a quantized type", t.type);
    if (a->ne[0] % qk_get(t.type)->blck) FAIL("fused: tail: ne0 %lld not a multiple of the block", (long long)a->ne[0]);
    if (t.weight < 0 || t.weight >= ns || (t.weight && t.op != IR_OP_RMS_NORM_QUANT)) FAIL("fused: tail weight src %d", t.weight);
    if (t.weight && !(is_f32(S(g, n, t.weight)) && is_row_vec(S(g, n, t.weight), a))) FAIL("fused: tail weight must be f32 [ne0]");
    if (t.op == IR_OP_QUANTIZE && n->fp[IR_MAX_FUSE] != 0.0f) FAIL("fused: quantize tail with an eps");
    return SB_OK;
}

/* ATTENTION's fused Q rope (ir_attn_q_rope): a rotation of the head, freq factors f32 [>= n_rot/2] */
static sb_status attn_q_rope_check(const ir_graph *g, const ir_node *n, const ir_node *q) {
    const ir_rope_params rp = ir_attn_q_rope(n);
    const ir_ref ffr = ir_attn_q_rope_ff(n);
    const ir_node *ff = ffr != IR_NONE ? &g->nodes[ffr] : NULL;
    if (!rp.n_rot) return SB_OK; /* a fifth source is then the block table (checked with block_size) */
    if (rp.n_rot < 2 || rp.n_rot % 2 || rp.n_rot > q->ne[0] || rp.n_rot > 1024) FAIL("attention: q rope n_rot %d vs D %lld", rp.n_rot, (long long)q->ne[0]);
    if (rp.mode != IR_ROPE_NORMAL && rp.mode != IR_ROPE_NEOX) FAIL("attention: q rope mode %d", rp.mode);
    if (!(rp.freq_base > 0.0f) || !(rp.freq_scale > 0.0f)) FAIL("attention: q rope freq_base and freq_scale must be > 0");
    if (ff && (!is_f32(ff) || ff->ne[0] < rp.n_rot / 2)) FAIL("attention: q rope freq factors must be f32 [>= n_rot/2]");
    return SB_OK;
}

/* MATMUL_GROUP: n in 2..IR_MAX_SRC-1 members of one activation x [K,T] (each weight [K,N_j]), the
 * addends its mask names after the weights, each [N_j] or [N_j,T] f32; gated: gate and up alone */
static sb_status group_check(const ir_graph *g, const ir_node *n, int ns) {
    const int m = ir_group_n(n);
    const ir_node *x = S(g, n, 0);
    if (m < 2 || 1 + m > ns || n->ip[1] < 0 || n->ip[1] >= (1 << m) || 1 + m + __builtin_popcount((unsigned)n->ip[1]) != ns)
        FAIL("matmul_group: %d members with addend mask %d over %d sources", m, n->ip[1], ns);
    if (x->ne[2] != 1 || x->ne[3] != 1 || !qk_valid(x->dtype)) FAIL("matmul_group: x must be 2-D");
    for (int j = 0; j < m; j++) {
        const ir_node *w = S(g, n, 1 + j);
        if (w->ne[0] != x->ne[0] || w->ne[2] != 1 || w->ne[3] != 1) FAIL("matmul_group: member %d: w [%lld,..] vs x ne0 %lld", j, (long long)w->ne[0], (long long)x->ne[0]);
        const ir_ref ar = ir_group_addend(n, j);
        if (ar == IR_NONE) continue;
        const ir_node *o = &g->nodes[ar];
        const bool row = o->ne[0] == w->ne[1] && o->ne[1] == 1 && o->ne[2] == 1 && o->ne[3] == 1;
        if (o->dtype != SB_TYPE_F32 || !(row || (o->ne[0] == w->ne[1] && o->ne[1] == x->ne[1] && o->ne[2] == 1 && o->ne[3] == 1)))
            FAIL("matmul_group: member %d's addend is neither [%lld] nor [%lld,%lld] f32", j, (long long)w->ne[1], (long long)w->ne[1], (long long)x->ne[1]);
    }
    if (n->ip[2] && (n->ip[2] != IR_OP_SWIGLU && n->ip[2] != IR_OP_GEGLU))
        FAIL("matmul_group: glu %d (swiglu or geglu)", n->ip[2]);
    if (n->ip[2] && (m != 2 || n->ip[1] || S(g, n, 1)->ne[1] != S(g, n, 2)->ne[1]))
        FAIL("matmul_group: a gated group is gate and up of one width, without addends");
    return SB_OK;
}

// ---- shape of each op ----

sb_status ir_infer_shape(const ir_graph *g, ir_node *n) {
    if ((unsigned)n->op >= IR_OP_COUNT) FAIL("node op %d out of range", (int)n->op);
    const ir_op_info *oi = &ir_ops[n->op];
    int ns = 0;
    while (ns < IR_MAX_SRC && n->src[ns] != IR_NONE) ns++;
    for (int i = ns; i < IR_MAX_SRC; i++)
        if (n->src[i] != IR_NONE) FAIL("%s: source %d set after an absent source", oi->name, i);
    if (ns < oi->min_src || ns > oi->max_src)
        FAIL("%s: %d sources, expected %d..%d", oi->name, ns, oi->min_src, oi->max_src);
    for (int i = 0; i < ns; i++)
        if (!S(g, n, i)) FAIL("%s: source %d = %d is not a node", oi->name, i, (int)n->src[i]);
    const ir_node *a = ns > 0 ? S(g, n, 0) : NULL, *b = ns > 1 ? S(g, n, 1) : NULL;
    int64_t ne[4];
    memcpy(ne, n->ne, sizeof ne);
    ir_node r = *n;

    switch (n->op) {
    case IR_OP_TOKENS:
    case IR_OP_POS:
    case IR_OP_OUT_ROWS:
    case IR_OP_SLOTS:
        if (ne[0] < 1 || ne[1] != 1 || ne[2] != 1 || ne[3] != 1) FAIL("%s: shape must be [n>=1]", oi->name);
        set(&r, SB_TYPE_I32, ne[0], 1, 1, 1);
        break;
    case IR_OP_BLOCK_TABLE:
        if (ne[0] < 1 || ne[1] < 1 || ne[2] != 1 || ne[3] != 1) FAIL("block_table: shape must be [n_blk>=1, T>=1]");
        set(&r, SB_TYPE_I32, ne[0], ne[1], 1, 1);
        break;
    case IR_OP_WEIGHT:
    case IR_OP_KV:
        for (int i = 0; i < 4; i++)
            if (ne[i] < 1) FAIL("%s \"%s\": ne[%d] = %lld", oi->name, n->name, i, (long long)ne[i]);
        if (!qk_valid(n->dtype)) FAIL("%s \"%s\": invalid dtype %d", oi->name, n->name, n->dtype);
        if (n->op == IR_OP_KV && (n->dtype != SB_TYPE_F32 && n->dtype != SB_TYPE_F16))
            FAIL("kv \"%s\": dtype must be f32 or f16", n->name);
        if (n->op == IR_OP_KV && (ne[2] != 1 || ne[3] != 1)) FAIL("kv \"%s\": must be [Dkv, C]", n->name);
        if (n->op == IR_OP_KV && (n->ip[0] < 0 || n->ip[0] > 1)) FAIL("kv \"%s\": ring flag %d", n->name, n->ip[0]);
        if (ne[0] % qk_get(n->dtype)->blck) FAIL("weight \"%s\": ne0 %lld not a multiple of the block", n->name, (long long)ne[0]);
        if (!n->name[0]) FAIL("%s: needs a name", oi->name);
        break;
    case IR_OP_GET_ROWS:
        if (a->ne[2] != 1 || a->ne[3] != 1 || !is_i32_vec(b)) FAIL("get_rows: needs w [E,V] and i32 [T]");
        set(&r, SB_TYPE_F32, a->ne[0], b->ne[0], 1, 1);
        break;
    case IR_OP_RMS_NORM:
    case IR_OP_SCALE:
    case IR_OP_SOFTCAP:
    case IR_OP_SILU:
    case IR_OP_GELU_TANH:
    case IR_OP_SOFTMAX:
        if (!is_f32(a)) FAIL("%s: input must be f32", oi->name);
        if (n->op == IR_OP_SOFTCAP && !(n->fp[0] > 0.0f)) FAIL("softcap: cap must be > 0");
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_LAYER_NORM:
    case IR_OP_GELU:
        if (!is_f32(a)) FAIL("%s: input must be f32", oi->name);
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_CONCAT: SB_TRY(ir_shape_concat(g, n, ns, r.ne)); r.dtype = SB_TYPE_F32; break;
    case IR_OP_PERMUTE: SB_TRY(ir_shape_permute(g, n, r.ne)); r.dtype = SB_TYPE_F32; break;
    case IR_OP_ADD:
    case IR_OP_MUL:
        if (!is_f32(a)) FAIL("%s: input must be f32", oi->name);
        SB_TRY(check_operand(n, a, b));
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_SWIGLU:
    case IR_OP_GEGLU:
        if (!is_f32(a) || !is_f32(b) || !same_ne(a->ne, b->ne)) FAIL("%s: gate and up must be f32 of one shape", oi->name);
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_MATMUL:
        if (a->ne[2] != 1 || a->ne[3] != 1) FAIL("matmul: w must be 2-D");
        if (b->ne[0] != a->ne[0]) FAIL("matmul: K mismatch: w ne0 %lld, x ne0 %lld", (long long)a->ne[0], (long long)b->ne[0]);
        if (b->ne[2] != 1 || b->ne[3] != 1) FAIL("matmul: x must be 2-D");
        if (!qk_valid(b->dtype)) FAIL("matmul: bad x dtype");
        set(&r, SB_TYPE_F32, a->ne[1], b->ne[1], 1, 1);
        if (ns > 2) SB_TRY(check_operand(n, &r, S(g, n, 2))); /* the added bias or residual */
        break;
    case IR_OP_MATMUL_GROUP: SB_TRY(group_check(g, n, ns)); set(&r, SB_TYPE_F32, b->ne[1], a->ne[1], 1, 1); break;
    case IR_OP_VIEW:
        if (!is_f32(a) || n->ip[0] < 0 || ne[0] < 1 || ne[1] < 1 || ne[2] < 1 || ne[3] < 1 ||
            n->ip[0] + ne[0] * ne[1] * ne[2] * ne[3] > ir_nelem(a))
            FAIL("view: elements [%d, +%lld) of an f32 value of %lld", n->ip[0], (long long)(ne[0] * ne[1] * ne[2] * ne[3]),
                 (long long)ir_nelem(a));
        set(&r, SB_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        break;
    case IR_OP_RESHAPE:
        for (int i = 0; i < 4; i++)
            if (ne[i] < 1) FAIL("reshape: ne[%d] = %lld", i, (long long)ne[i]);
        if (ne[0] * ne[1] * ne[2] * ne[3] != ir_nelem(a)) FAIL("reshape: element count changes");
        if (a->dtype != SB_TYPE_F32 && ne[0] != a->ne[0]) FAIL("reshape: a block-typed value keeps its rows");
        set(&r, a->dtype, ne[0], ne[1], ne[2], ne[3]);
        break;
    case IR_OP_ROPE: {
        const ir_node *ff = ir_rope_ff(n) != IR_NONE ? S(g, n, ns - 1 - (n->ip[IR_ROPE_NORM] == IR_ROPE_NORM_WEIGHT)) : NULL;
        int32_t n_rot = n->ip[0], mode = n->ip[1];
        if (!is_f32(a) || a->ne[3] != 1) FAIL("rope: x must be f32 [D,H,T]");
        if (!is_i32_vec(b) || b->ne[0] != a->ne[2]) FAIL("rope: pos must be i32 [T=%lld]", (long long)a->ne[2]);
        if (n_rot < 2 || n_rot % 2 || n_rot > a->ne[0] || n_rot > 1024) FAIL("rope: n_rot %d vs D %lld", n_rot, (long long)a->ne[0]);
        if (mode != IR_ROPE_NORMAL && mode != IR_ROPE_NEOX) FAIL("rope: mode %d", mode);
        if (ff && (!is_f32(ff) || ff->ne[0] < n_rot / 2)) FAIL("rope: freq factors must be f32 [>= n_rot/2]");
        if (!(n->fp[0] > 0.0f) || !(n->fp[1] > 0.0f)) FAIL("rope: freq_base and freq_scale must be > 0");
        if (ns > 3 + (n->ip[IR_ROPE_NORM] == IR_ROPE_NORM_WEIGHT)) FAIL("rope: %d sources (x, pos, ff?, norm weight?)", ns);
        SB_TRY(check_rope_norm(g, n, a->ne[0]));
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], 1);
        break;
    }
    case IR_OP_ROPE_STORE: {
        const bool rows = n->ip[IR_STORE_ROWS] != 0; /* (cache, x, pos, rows, ff?), else (cache, x, pos, ff?) */
        const ir_node *pos = S(g, n, 2), *ff = ir_rope_ff(n) != IR_NONE ? S(g, n, 3 + rows) : NULL, *rw = rows && ns > 3 ? S(g, n, 3) : NULL;
        int32_t n_rot = n->ip[0], mode = n->ip[1];
        if (a->op != IR_OP_KV && a->op != IR_OP_KV_STORE && a->op != IR_OP_ROPE_STORE) FAIL("rope_store: src0 must be a kv cache");
        if (ns > 4 + rows + (n->ip[IR_ROPE_NORM] == IR_ROPE_NORM_WEIGHT))
            FAIL("rope_store: %d sources (cache, x, pos, rows?, ff?, norm weight?)", ns);
        if (rows && (!rw || !is_i32_vec(rw) || rw->ne[0] != b->ne[2])) FAIL("rope_store: rows must be i32 [T=%lld]", (long long)b->ne[2]);
        if (!is_f32(b) || b->ne[3] != 1 || b->ne[0] * b->ne[1] != a->ne[0])
            FAIL("rope_store: x must be f32 [D,H,T] with D*H = Dkv %lld", (long long)a->ne[0]);
        if (!is_i32_vec(pos) || pos->ne[0] != b->ne[2]) FAIL("rope_store: pos must be i32 [T=%lld]", (long long)b->ne[2]);
        if (n_rot < 2 || n_rot % 2 || n_rot > b->ne[0] || n_rot > 1024) FAIL("rope_store: n_rot %d vs D %lld", n_rot, (long long)b->ne[0]);
        if (mode != IR_ROPE_NORMAL && mode != IR_ROPE_NEOX) FAIL("rope_store: mode %d", mode);
        if (ff && (!is_f32(ff) || ff->ne[0] < n_rot / 2)) FAIL("rope_store: freq factors must be f32 [>= n_rot/2]");
        if (!(n->fp[0] > 0.0f) || !(n->fp[1] > 0.0f)) FAIL("rope_store: freq_base and freq_scale must be > 0");
        SB_TRY(check_rope_norm(g, n, b->ne[0]));
        set(&r, a->dtype, a->ne[0], a->ne[1], 1, 1);
        break;
    }
    case IR_OP_KV_STORE: {
        const ir_node *pos = S(g, n, 2);
        if (a->op != IR_OP_KV && a->op != IR_OP_KV_STORE && a->op != IR_OP_ROPE_STORE) FAIL("kv_store: src0 must be a kv cache");
        if (!is_f32(b) || b->ne[0] != a->ne[0] || b->ne[2] != 1 || b->ne[3] != 1)
            FAIL("kv_store: x must be f32 [Dkv=%lld, T]", (long long)a->ne[0]);
        if (!is_i32_vec(pos) || pos->ne[0] != b->ne[1]) FAIL("kv_store: pos must be i32 [T]");
        const ir_rope_norm rn = ir_rope_norm_of(n);
        if (ns > 3 + (rn.kind == IR_ROPE_NORM_WEIGHT)) FAIL("kv_store: %d sources (cache, x, pos, norm weight?)", ns);
        if (rn.kind && (rn.head_dim < 1 || a->ne[0] % rn.head_dim)) FAIL("kv_store: norm head dim %d vs Dkv %lld", rn.head_dim, (long long)a->ne[0]);
        SB_TRY(check_rope_norm(g, n, rn.head_dim));
        set(&r, a->dtype, a->ne[0], a->ne[1], 1, 1);
        break;
    }
    case IR_OP_ATTENTION: {
        const ir_node *v = S(g, n, 2), *pos = S(g, n, 3);
        int32_t hkv = n->ip[0], D = n->ip[1];
        if (!is_f32(a) || a->ne[3] != 1 || a->ne[0] != D) FAIL("attention: q must be f32 [D=%d,Hq,T]", D);
        if (hkv < 1 || a->ne[1] % hkv) FAIL("attention: Hq %lld not a multiple of Hkv %d", (long long)a->ne[1], hkv);
        if (b->ne[0] != (int64_t)D * hkv || !same_ne(b->ne, v->ne) || b->dtype != v->dtype)
            FAIL("attention: k/v must be [Dkv=%lld, C] of one type", (long long)D * hkv);
        if (b->dtype != SB_TYPE_F32 && b->dtype != SB_TYPE_F16) FAIL("attention: cache must be f32/f16");
        if (!is_i32_vec(pos) || pos->ne[0] != a->ne[2]) FAIL("attention: pos must be i32 [T]");
        if (n->ip[2] < 0 || n->fp[1] < 0.0f) FAIL("attention: window/softcap must be >= 0");
        if (n->ip[3] || (ns > 4 && !n->ip[5])) SB_TRY(ir_shape_paged_attention(g, n, ns)); /* the block table (graph/builder_paged.c) */
        else if (ns > 5) FAIL("attention: %d sources on a contiguous cache (q, k, v, pos, freq factors)", ns);
        SB_TRY(attn_q_rope_check(g, n, a));
        if (n->ip[4] && (!qk_valid(n->ip[4] - 1) || n->ip[4] - 1 == SB_TYPE_F32 || D % qk_get(n->ip[4] - 1)->blck))
            FAIL("attention: quantized output type %d for head_dim %d", n->ip[4] - 1, D);
        set(&r, SB_TYPE_F32, a->ne[0] * a->ne[1], a->ne[2], 1, 1);
        break;
    }
    case IR_OP_SELECT_ROWS:
        if (!is_f32(a) || a->ne[2] != 1 || a->ne[3] != 1 || !is_i32_vec(b)) FAIL("select_rows: needs f32 [E,T], i32 [n]");
        set(&r, SB_TYPE_F32, a->ne[0], b->ne[0], 1, 1);
        break;
    case IR_OP_SLICE:
        if (!is_f32(a)) FAIL("slice: input must be f32");
        if (n->ip[0] < 0 || n->ip[1] < 1 || (int64_t)n->ip[0] + n->ip[1] > a->ne[1])
            FAIL("slice: [%d, %d + %d) is not inside ne1 = %lld", n->ip[0], n->ip[0], n->ip[1], (long long)a->ne[1]);
        set(&r, SB_TYPE_F32, a->ne[0], n->ip[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_ADD_RMS_NORM_QUANT: {
        const ir_node *w = ns > 2 ? S(g, n, 2) : NULL;
        if (!is_f32(a) || !is_f32(b) || !same_ne(a->ne, b->ne)) FAIL("add_rms_norm_quant: a and b must be f32 of one shape");
        if (!qk_valid(n->dtype) || n->dtype == SB_TYPE_F32) FAIL("add_rms_norm_quant: f32 -> a non-f32 type");
        if (a->ne[0] % qk_get(n->dtype)->blck) FAIL("add_rms_norm_quant: ne0 not a multiple of the block");
        if (w && !(is_f32(w) && is_row_vec(w, a))) FAIL("add_rms_norm_quant: weight must be f32 [ne0]");
        set(&r, n->dtype, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    }
    case IR_OP_RESULT: {
        const int k = n->ip[0];
        if (k < 1 || k >= ir_result_count(a)) FAIL("result: %s has no result %d", ir_ops[a->op].name, k);
        if (a->op == IR_OP_MATMUL_GROUP) { /* member k's product */
            set(&r, SB_TYPE_F32, S(g, a, 1 + k)->ne[1], S(g, a, 0)->ne[1], 1, 1);
            break;
        }
        if (a->op == IR_OP_ATTENTION) { /* its output quantized */
            if (!a->ip[4]) FAIL("result: this attention writes no quantized output");
            set(&r, a->ip[4] - 1, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
            break;
        }
        if (a->op == IR_OP_FUSED) { /* its chain's result quantized */
            set(&r, ir_fused_tail_of(a).type, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
            break;
        }
        const ir_node *a0 = S(g, a, 0); /* ADD_RMS_NORM_QUANT's result 1: a + b */
        set(&r, SB_TYPE_F32, a0->ne[0], a0->ne[1], a0->ne[2], a0->ne[3]);
        break;
    }
    case IR_OP_OUTPUT:
        if (!is_f32(a)) FAIL("output: must be f32");
        if (!n->name[0]) FAIL("output: needs a name");
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_QUANTIZE:
        if (!is_f32(a) || !qk_valid(n->dtype) || n->dtype == SB_TYPE_F32) FAIL("quantize: f32 -> a non-f32 type");
        if (a->ne[0] % qk_get(n->dtype)->blck) FAIL("quantize: ne0 %lld not a multiple of the block", (long long)a->ne[0]);
        set(&r, n->dtype, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_RMS_NORM_QUANT:
        if (!is_f32(a) || !qk_valid(n->dtype) || n->dtype == SB_TYPE_F32) FAIL("rms_norm_quant: f32 -> a non-f32 type");
        if (a->ne[0] % qk_get(n->dtype)->blck) FAIL("rms_norm_quant: ne0 not a multiple of the block");
        if (b && !(is_f32(b) && is_row_vec(b, a))) FAIL("rms_norm_quant: weight must be f32 [ne0]");
        set(&r, n->dtype, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_GLU_QUANT:
        if (!is_f32(a) || !is_f32(b) || !same_ne(a->ne, b->ne)) FAIL("glu_quant: gate and up must be f32 of one shape");
        if (n->ip[0] != IR_OP_SWIGLU && n->ip[0] != IR_OP_GEGLU) FAIL("glu_quant: act %d", n->ip[0]);
        if (!qk_valid(n->dtype) || n->dtype == SB_TYPE_F32 || a->ne[0] % qk_get(n->dtype)->blck) FAIL("glu_quant: bad type");
        set(&r, n->dtype, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    case IR_OP_FUSED: {
        int nsteps = n->ip[0], reductions = 0;
        if (!is_f32(a)) FAIL("fused: input must be f32");
        if (nsteps < 1 || nsteps > IR_MAX_FUSE) FAIL("fused: %d steps", nsteps);
        for (int i = 0; i < nsteps; i++) {
            int op = n->ip[1 + i] & 0xff, opd = n->ip[1 + i] >> 8;
            if (op >= IR_OP_COUNT || !(ir_ops[op].flags & OPF_EW)) FAIL("fused: step %d op %d is not elementwise", i, op);
            if (ir_ops[op].flags & OPF_REDUCE) reductions++;
            bool binary = op == IR_OP_ADD || op == IR_OP_MUL;
            if (binary != (opd > 0)) FAIL("fused: step %d operand %d", i, opd);
            if (binary) {
                if (opd >= ns) FAIL("fused: step %d operand src %d absent", i, opd);
                ir_node tmp = *n;
                tmp.op = (ir_op)op;
                SB_TRY(check_operand(&tmp, a, S(g, n, opd)));
            }
            if (op == IR_OP_SOFTCAP && !(n->fp[i] > 0.0f)) FAIL("fused: softcap cap must be > 0");
        }
        if (reductions > 1) FAIL("fused: %d row reductions (at most 1)", reductions);
        SB_TRY(check_fused_tail(g, n, a, ns));
        set(&r, SB_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
    }
    default:
        FAIL("op %d has no shape function", (int)n->op);
    }
    n->dtype = r.dtype;
    memcpy(n->ne, r.ne, sizeof n->ne);
    return SB_OK;
}

uint64_t ir_nbytes(const ir_node *n) {
    uint64_t rb = 0, total = 0;
    if (qk_row_bytes(n->dtype, n->ne[0], &rb)) return 0;
    if (__builtin_mul_overflow(rb, (uint64_t)ir_nrows(n), &total)) return 0;
    return total;
}
