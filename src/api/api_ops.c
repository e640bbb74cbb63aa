/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_ops.c — the public op names of sonicboom.h (torch.nn.functional's where an op has a
 * twin) mapped onto the IR ops of ops/ops.def: which sources and numbers each takes, the checks
 * the public API adds (i32 sources must be the tokens/pos inputs the planner range-checks,
 * attention reads caches), and the shape function's verdict before anything is appended.
 * Layer 3 (api). One row per public name; an op of ops.def without a row here is not public
 * (inputs, planner-made ops, select_rows, output).
 */
#include "api/api_tensor.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum { K_ANY, K_TOK, K_POS, K_CACHE } src_kind;

typedef struct op_row {
    const char *name;
    ir_op op;
    int min_src, max_src, min_args, max_args;
    src_kind kind[IR_MAX_SRC];
} op_row;

/* "linear", "embedding", "rms_norm" / "layer_norm" with a weight (and bias) reorder or extend the
 * IR op; "transpose" is a two-dim permute; a permute that keeps the memory order is a reshape (a
 * view); the rest are 1:1 */
static const op_row rows[] = {
    {"embedding", IR_OP_GET_ROWS, 2, 2, 0, 0, {K_TOK, K_ANY}},
    {"get_rows", IR_OP_GET_ROWS, 2, 2, 0, 0, {K_ANY, K_TOK}},
    {"linear", IR_OP_MATMUL, 2, 3, 0, 0, {K_ANY}},
    {"matmul", IR_OP_MATMUL, 2, 2, 0, 0, {K_ANY}},
    {"add", IR_OP_ADD, 2, 2, 0, 0, {K_ANY}},
    {"mul", IR_OP_MUL, 2, 2, 0, 0, {K_ANY}},
    {"scale", IR_OP_SCALE, 1, 1, 1, 1, {K_ANY}},
    {"softcap", IR_OP_SOFTCAP, 1, 1, 1, 1, {K_ANY}},
    {"silu", IR_OP_SILU, 1, 1, 0, 0, {K_ANY}},
    {"gelu_tanh", IR_OP_GELU_TANH, 1, 1, 0, 0, {K_ANY}},
    {"swiglu", IR_OP_SWIGLU, 2, 2, 0, 0, {K_ANY}},
    {"geglu", IR_OP_GEGLU, 2, 2, 0, 0, {K_ANY}},
    {"rms_norm", IR_OP_RMS_NORM, 1, 2, 1, 1, {K_ANY}},
    {"softmax", IR_OP_SOFTMAX, 1, 1, 0, 0, {K_ANY}},
    {"reshape", IR_OP_RESHAPE, 1, 1, 1, 4, {K_ANY}},
    {"view", IR_OP_RESHAPE, 1, 1, 1, 4, {K_ANY}},
    {"slice", IR_OP_SLICE, 1, 1, 2, 2, {K_ANY}},
    {"rope", IR_OP_ROPE, 2, 3, 2, 4, {K_ANY, K_POS, K_ANY}},
    {"kv_store", IR_OP_KV_STORE, 3, 3, 0, 0, {K_CACHE, K_ANY, K_POS}},
    {"attention", IR_OP_ATTENTION, 4, 4, 1, 4, {K_ANY, K_CACHE, K_CACHE, K_POS}},
    {"scaled_dot_product_attention", IR_OP_ATTENTION, 4, 4, 1, 4, {K_ANY, K_CACHE, K_CACHE, K_POS}},
    {"layer_norm", IR_OP_LAYER_NORM, 1, 3, 0, 1, {K_ANY}},
    {"gelu", IR_OP_GELU, 1, 1, 0, 0, {K_ANY}},
    {"concat", IR_OP_CONCAT, 2, IR_MAX_SRC, 1, 1, {K_ANY}},
    {"cat", IR_OP_CONCAT, 2, IR_MAX_SRC, 1, 1, {K_ANY}},
    {"permute", IR_OP_PERMUTE, 1, 1, 1, 4, {K_ANY}},
    {"transpose", IR_OP_PERMUTE, 1, 1, 2, 2, {K_ANY}},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

SB_API const char *sb_op_name(int i) { return i >= 0 && i < N_ROWS ? rows[i].name : NULL; }

static const op_row *find_row(const char *name) {
    for (int i = 0; name && i < N_ROWS; i++)
        if (!strcmp(rows[i].name, name)) return &rows[i];
    return NULL;
}

int api_op_src_kind(const char *op, int i) {
    const op_row *r = find_row(op);
    if (!r || i < 0 || i >= IR_MAX_SRC) return -1;
    static const int map[] = {[K_ANY] = SB_INPUT_DATA, [K_TOK] = SB_INPUT_TOKENS, [K_POS] = SB_INPUT_POS, [K_CACHE] = SB_INPUT_CACHE};
    return map[r->kind[i]];
}

const char *api_shape_str(char *buf, size_t cap, int type, const int64_t ne[4]) {
    int nd = 4;
    while (nd > 1 && ne[nd - 1] == 1) nd--;
    int k = snprintf(buf, cap, "%s[", ir_dtype_name(type));
    for (int i = 0; i < nd && k > 0 && (size_t)k < cap; i++) k += snprintf(buf + k, cap - (size_t)k, "%s%lld", i ? "," : "", (long long)ne[i]);
    if (k > 0 && (size_t)k < cap) snprintf(buf + k, cap - (size_t)k, "]");
    return buf;
}

/* "rope: x f32[64,4,3], pos i32[2]: " style prefix of every failure: the op and its sources */
static sb_status fail_op(const ir_graph *g, const op_row *r, const ir_ref *src, int n_src, const char *why) {
    char msg[512], sh[96];
    int k = snprintf(msg, sizeof msg, "%s(", r->name);
    for (int i = 0; i < n_src && k > 0 && (size_t)k < sizeof msg; i++) {
        const ir_node *n = &g->nodes[src[i]];
        k += snprintf(msg + k, sizeof msg - (size_t)k, "%s%s", i ? ", " : "", api_shape_str(sh, sizeof sh, n->dtype, n->ne));
    }
    return sb_fail(SB_ERR_INVALID_ARG, "%s): %s", msg, why);
}

/* the source kind rules of the public API (see the file comment) */
static sb_status check_kinds(const ir_graph *g, const op_row *r, const ir_ref *src, int n_src) {
    for (int i = 0; i < n_src && i < IR_MAX_SRC; i++) {
        const ir_node *n = &g->nodes[src[i]];
        char why[160];
        why[0] = 0;
        if (r->kind[i] == K_TOK && n->op != IR_OP_TOKENS) snprintf(why, sizeof why, "source %d must be the tokens input (i32 ids)", i);
        if (r->kind[i] == K_POS && n->op != IR_OP_POS) snprintf(why, sizeof why, "source %d must be the pos input (i32 positions)", i);
        if (r->kind[i] == K_CACHE && n->op != IR_OP_KV && n->op != IR_OP_KV_STORE)
            snprintf(why, sizeof why, "source %d must be a KV cache (a cache input or a kv_store result)", i);
        if (r->kind[i] == K_ANY && n->dtype == SB_TYPE_I32) snprintf(why, sizeof why, "source %d is i32, which this op does not take", i);
        if (why[0]) return fail_op(g, r, src, n_src, why);
    }
    return SB_OK;
}

/* n's shape by the op's shape function, or the failure re-worded for the caller */
static sb_status infer(const ir_graph *g, const op_row *r, const ir_ref *src, int n_src, ir_node *n) {
    if (ir_infer_shape(g, n) == SB_OK) return SB_OK;
    char why[256];
    snprintf(why, sizeof why, "%s", sb_last_error());
    return fail_op(g, r, src, n_src, why);
}

static bool is_int(double v, double lo, double hi) { return v == floor(v) && v >= lo && v <= hi; }

/* fill the prototype's params from args (per the table in sonicboom.h) */
static sb_status set_params(const ir_graph *g, const op_row *r, const ir_ref *src, int n_src, const double *a, int na, ir_node *n) {
    switch (r->op) {
    case IR_OP_SCALE:
    case IR_OP_SOFTCAP:
    case IR_OP_RMS_NORM:
        if (!isfinite(a[0])) return fail_op(g, r, src, n_src, "its number is not finite");
        n->fp[0] = (float)a[0];
        return SB_OK;
    case IR_OP_RESHAPE:
        for (int i = 0; i < 4; i++) {
            if (i < na && !is_int(a[i], 1, 9.0e15)) return fail_op(g, r, src, n_src, "dims must be integers >= 1");
            n->ne[i] = i < na ? (int64_t)a[i] : 1;
        }
        if (!api_dims_ok(n->ne)) return fail_op(g, r, src, n_src, "more than 2^48 elements");
        return SB_OK;
    case IR_OP_LAYER_NORM:
        n->fp[0] = na > 0 ? (float)a[0] : 1e-5f; /* torch's default eps */
        if (!isfinite(n->fp[0]) || n->fp[0] < 0) return fail_op(g, r, src, n_src, "eps must be finite and >= 0");
        return SB_OK;
    case IR_OP_CONCAT:
        if (!is_int(a[0], 0, 3)) return fail_op(g, r, src, n_src, "dim must be an integer 0..3 (ne[dim])");
        n->ip[0] = (int32_t)a[0];
        return SB_OK;
    case IR_OP_PERMUTE:
        for (int i = 0; i < na; i++)
            if (!is_int(a[i], 0, 3)) return fail_op(g, r, src, n_src, "dims must be integers 0..3");
        for (int i = 0; i < 4; i++) n->ip[i] = i; /* dims not named stay */
        if (!strcmp(r->name, "transpose")) {
            n->ip[(int)a[0]] = (int32_t)a[1], n->ip[(int)a[1]] = (int32_t)a[0];
        } else {
            for (int i = 0; i < na; i++) n->ip[i] = (int32_t)a[i];
        }
        return SB_OK;
    case IR_OP_SLICE:
        if (!is_int(a[0], 0, INT32_MAX) || !is_int(a[1], 1, INT32_MAX)) return fail_op(g, r, src, n_src, "start >= 0 and n >= 1 must be integers");
        n->ip[0] = (int32_t)a[0], n->ip[1] = (int32_t)a[1];
        return SB_OK;
    case IR_OP_ROPE:
        if (!is_int(a[0], 0, 1024) || !is_int(a[1], 0, 2)) return fail_op(g, r, src, n_src, "n_rot and mode must be integers (mode 0 or 2)");
        n->ip[0] = (int32_t)a[0], n->ip[1] = (int32_t)a[1];
        n->fp[0] = na > 2 ? (float)a[2] : 10000.0f;
        n->fp[1] = na > 3 ? (float)a[3] : 1.0f;
        n->fp[2] = 1.0f; /* attention factor */
        return SB_OK;
    case IR_OP_ATTENTION: {
        const int64_t D = g->nodes[src[0]].ne[0];
        if (!is_int(a[0], 1, 65536)) return fail_op(g, r, src, n_src, "n_head_kv must be an integer >= 1");
        if (na > 2 && !is_int(a[2], 0, INT32_MAX)) return fail_op(g, r, src, n_src, "window must be an integer >= 0");
        n->ip[0] = (int32_t)a[0], n->ip[1] = (int32_t)D, n->ip[2] = na > 2 ? (int32_t)a[2] : 0;
        n->fp[0] = na > 1 ? (float)a[1] : 1.0f / sqrtf((float)D);
        n->fp[1] = na > 3 ? (float)a[3] : 0.0f;
        if (!isfinite(n->fp[0]) || !isfinite(n->fp[1])) return fail_op(g, r, src, n_src, "scale and softcap must be finite");
        return SB_OK;
    }
    default: return SB_OK;
    }
}

/* the later steps of linear (bias), rms_norm (weight) and layer_norm (weight, bias): an add / mul
 * of that source, which must be f32 [ne0] or the result's shape */
static sb_status check_second(const ir_graph *g, const op_row *r, const ir_ref *src, int n_src, const ir_node *first, ir_op op,
                              ir_ref operand) {
    if (operand == IR_NONE) return SB_OK;
    const ir_node *b = &g->nodes[operand];
    const bool same = !memcmp(b->ne, first->ne, sizeof b->ne);
    const bool row = b->ne[0] == first->ne[0] && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1;
    if (b->dtype != SB_TYPE_F32 || (!same && !row)) {
        char why[160], sh[96];
        snprintf(why, sizeof why, "its %s must be f32 [%lld] or the result's shape %s", op == IR_OP_ADD ? "bias" : "weight",
                 (long long)first->ne[0], api_shape_str(sh, sizeof sh, first->dtype, first->ne));
        return fail_op(g, r, src, n_src, why);
    }
    return SB_OK;
}

/* Does permuting x by perm leave its elements in memory order (only dims of size 1 move)? */
static bool keeps_order(const ir_node *x, const int32_t *perm) {
    int last = -1;
    for (int k = 0; k < 4; k++) {
        if (x->ne[perm[k]] == 1) continue;
        if (perm[k] < last) return false;
        last = perm[k];
    }
    return true;
}

sb_status api_graph_apply(ir_graph *g, const char *op, const ir_ref *src_in, int n_src, const double *args, int n_args, ir_ref *out) {
    const op_row *r = find_row(op);
    if (!r) return sb_fail(SB_ERR_NOT_FOUND, "op \"%s\" is not in the op table (sb_op_name lists them)", op ? op : "(null)");
    for (int i = 0; i < n_src; i++)
        if (src_in[i] < 0 || src_in[i] >= g->n_nodes)
            return sb_fail(SB_ERR_INVALID_ARG, "%s: source %d is %d, not a value of this graph", r->name, i, (int)src_in[i]);
    if (n_src < r->min_src || n_src > r->max_src)
        return sb_fail(SB_ERR_INVALID_ARG, "%s: %d sources, expected %d..%d", r->name, n_src, r->min_src, r->max_src);
    if (n_args < r->min_args || n_args > r->max_args || (n_args > 0 && !args))
        return sb_fail(SB_ERR_INVALID_ARG, "%s: %d numbers, expected %d..%d", r->name, n_args, r->min_args, r->max_args);
    SB_TRY(check_kinds(g, r, src_in, n_src));
    ir_ref src[IR_MAX_SRC];
    for (int i = 0; i < IR_MAX_SRC; i++) src[i] = i < n_src ? src_in[i] : IR_NONE;
    ir_ref extra[2] = {IR_NONE, IR_NONE}; /* applied after the op: a mul (weight) then an add (bias) */
    ir_node n = ir_proto(r->op);
    if (!strcmp(r->name, "embedding") || !strcmp(r->name, "linear")) { /* torch order (x, w) -> the IR's (w, x) */
        n.src[0] = src[1], n.src[1] = src[0];
        extra[1] = src[2];
    } else if (r->op == IR_OP_RMS_NORM || r->op == IR_OP_LAYER_NORM) {
        n.src[0] = src[0];
        extra[0] = src[1], extra[1] = src[2];
    } else {
        for (int i = 0; i < n_src; i++) n.src[i] = src[i];
    }
    SB_TRY(set_params(g, r, src_in, n_src, args, n_args, &n));
    SB_TRY(infer(g, r, src_in, n_src, &n));
    SB_TRY(check_second(g, r, src_in, n_src, &n, IR_OP_MUL, extra[0]));
    SB_TRY(check_second(g, r, src_in, n_src, &n, IR_OP_ADD, extra[1]));
    if (r->op == IR_OP_PERMUTE && keeps_order(&g->nodes[src[0]], ir_permute_perm(&n))) { /* the same memory order: a view */
        const ir_node p = n;
        n = ir_proto(IR_OP_RESHAPE);
        n.src[0] = src[0];
        memcpy(n.ne, p.ne, sizeof n.ne);
        SB_TRY(infer(g, r, src_in, n_src, &n));
    }
    ir_ref v = ir_append(g, &n);
    for (int k = 0; k < 2; k++)
        if (v != IR_NONE && extra[k] != IR_NONE) {
            ir_node m = ir_proto(k == 0 ? IR_OP_MUL : IR_OP_ADD);
            m.src[0] = v, m.src[1] = extra[k];
            v = ir_append(g, &m);
        }
    if (v == IR_NONE) {
        const sb_status st = ir_graph_status(g);
        return st == SB_ERR_OOM ? st : sb_fail(SB_ERR_INTERNAL, "%s: the builder refused what its shape function accepted", r->name);
    }
    *out = v;
    return SB_OK;
}
