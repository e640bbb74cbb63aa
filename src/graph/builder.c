/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/builder.c — the recording builders of graph/ir.h (ggml_add_impl style): fill a node's op,
 * sources and params, derive its shape through the op's shape function, append. Nothing runs.
 * Layer 2 (graph). A wrong shape makes ir_append record a sticky SB_ERR_INVALID_ARG with the shape
 * function's reason. An IR_NONE argument (an earlier failure) propagates as IR_NONE; the sticky
 * g->status reports the first failure once.
 * Non-goals: constant folding, CSE (passes do that where it matters).
 */
#include "graph/ir.h"

#include <string.h>

// ---- helpers ----

static ir_node proto(ir_op op) { return ir_proto(op); }

static ir_ref unary(ir_graph *g, ir_op op, ir_ref x, float f) {
    if (x == IR_NONE) return IR_NONE;
    ir_node n = proto(op);
    n.src[0] = x;
    n.fp[0] = f;
    return ir_append(g, &n);
}

static ir_ref binary(ir_graph *g, ir_op op, ir_ref a, ir_ref b) {
    if (a == IR_NONE || b == IR_NONE) return IR_NONE;
    ir_node n = proto(op);
    n.src[0] = a;
    n.src[1] = b;
    return ir_append(g, &n);
}

static ir_ref input(ir_graph *g, ir_op op, const char *name, int dtype, const int64_t ne[4]) {
    ir_node n = proto(op);
    n.dtype = dtype;
    for (int i = 0; i < 4; i++) n.ne[i] = ne[i];
    if (strlen(name) >= IR_NAME_MAX) {
        if (g->status == SB_OK) g->status = sb_fail(SB_ERR_INVALID_ARG, "ir: input name \"%s\" longer than %d bytes", name, IR_NAME_MAX - 1);
        return IR_NONE;
    }
    strcpy(n.name, name);
    return ir_append(g, &n);
}

// ---- inputs ----

ir_ref ir_input_tokens(ir_graph *g, int64_t T) { return input(g, IR_OP_TOKENS, "tokens", SB_TYPE_I32, (int64_t[4]){T, 1, 1, 1}); }
ir_ref ir_input_pos(ir_graph *g, int64_t T) { return input(g, IR_OP_POS, "pos", SB_TYPE_I32, (int64_t[4]){T, 1, 1, 1}); }
ir_ref ir_input_out_rows(ir_graph *g, int64_t n) { return input(g, IR_OP_OUT_ROWS, "out_rows", SB_TYPE_I32, (int64_t[4]){n, 1, 1, 1}); }
ir_ref ir_input_weight(ir_graph *g, const char *name, int dtype, const int64_t ne[4]) { return input(g, IR_OP_WEIGHT, name, dtype, ne); }
ir_ref ir_input_kv(ir_graph *g, const char *name, int dtype, const int64_t ne[4]) { return input(g, IR_OP_KV, name, dtype, ne); }
ir_ref ir_input_kv_ring(ir_graph *g, const char *name, int dtype, const int64_t ne[4]) {
    ir_ref r = input(g, IR_OP_KV, name, dtype, ne);
    if (r != IR_NONE) g->nodes[r].ip[0] = 1;
    return r;
}

// ---- ops ----

ir_ref ir_get_rows(ir_graph *g, ir_ref w, ir_ref tokens) { return binary(g, IR_OP_GET_ROWS, w, tokens); }
ir_ref ir_rms_norm(ir_graph *g, ir_ref x, float eps) { return unary(g, IR_OP_RMS_NORM, x, eps); }
ir_ref ir_add(ir_graph *g, ir_ref a, ir_ref b) { return binary(g, IR_OP_ADD, a, b); }
ir_ref ir_mul(ir_graph *g, ir_ref a, ir_ref b) { return binary(g, IR_OP_MUL, a, b); }
ir_ref ir_scale(ir_graph *g, ir_ref x, float s) { return unary(g, IR_OP_SCALE, x, s); }
ir_ref ir_softcap(ir_graph *g, ir_ref x, float c) { return unary(g, IR_OP_SOFTCAP, x, c); }
ir_ref ir_silu(ir_graph *g, ir_ref x) { return unary(g, IR_OP_SILU, x, 0.0f); }
ir_ref ir_softmax(ir_graph *g, ir_ref x) { return unary(g, IR_OP_SOFTMAX, x, 0.0f); }
ir_ref ir_gelu_tanh(ir_graph *g, ir_ref x) { return unary(g, IR_OP_GELU_TANH, x, 0.0f); }
ir_ref ir_layer_norm(ir_graph *g, ir_ref x, float eps) { return unary(g, IR_OP_LAYER_NORM, x, eps); }
ir_ref ir_gelu(ir_graph *g, ir_ref x) { return unary(g, IR_OP_GELU, x, 0.0f); }
ir_ref ir_swiglu(ir_graph *g, ir_ref gate, ir_ref up) { return binary(g, IR_OP_SWIGLU, gate, up); }
ir_ref ir_geglu(ir_graph *g, ir_ref gate, ir_ref up) { return binary(g, IR_OP_GEGLU, gate, up); }
ir_ref ir_matmul(ir_graph *g, ir_ref w, ir_ref x) { return binary(g, IR_OP_MATMUL, w, x); }
ir_ref ir_select_rows(ir_graph *g, ir_ref x, ir_ref rows) { return binary(g, IR_OP_SELECT_ROWS, x, rows); }

ir_ref ir_reshape(ir_graph *g, ir_ref x, const int64_t ne[4]) {
    if (x == IR_NONE) return IR_NONE;
    ir_node n = proto(IR_OP_RESHAPE);
    n.src[0] = x;
    for (int i = 0; i < 4; i++) n.ne[i] = ne[i];
    return ir_append(g, &n);
}

ir_ref ir_rope(ir_graph *g, ir_ref x, ir_ref pos, ir_ref freq_factors, const ir_rope_params *p) {
    if (x == IR_NONE || pos == IR_NONE) return IR_NONE;
    ir_node n = proto(IR_OP_ROPE);
    n.src[0] = x;
    n.src[1] = pos;
    n.src[2] = freq_factors;
    n.ip[0] = p->n_rot;
    n.ip[1] = p->mode;
    n.fp[0] = p->freq_base;
    n.fp[1] = p->freq_scale;
    n.fp[2] = 1.0f;
    return ir_append(g, &n);
}

ir_ref ir_kv_store(ir_graph *g, ir_ref cache, ir_ref x, ir_ref pos) {
    if (cache == IR_NONE || x == IR_NONE || pos == IR_NONE) return IR_NONE;
    ir_node n = proto(IR_OP_KV_STORE);
    n.src[0] = cache;
    n.src[1] = x;
    n.src[2] = pos;
    return ir_append(g, &n);
}

ir_ref ir_attention(ir_graph *g, ir_ref q, ir_ref k, ir_ref v, ir_ref pos, const ir_attn_params *p) {
    if (q == IR_NONE || k == IR_NONE || v == IR_NONE || pos == IR_NONE) return IR_NONE;
    ir_node n = proto(IR_OP_ATTENTION);
    n.src[0] = q;
    n.src[1] = k;
    n.src[2] = v;
    n.src[3] = pos;
    n.ip[0] = p->n_head_kv;
    n.ip[1] = p->head_dim;
    n.ip[2] = p->window;
    n.fp[0] = p->scale;
    n.fp[1] = p->softcap;
    return ir_append(g, &n);
}

ir_ref ir_slice(ir_graph *g, ir_ref x, int32_t start, int32_t n) {
    if (x == IR_NONE) return IR_NONE;
    ir_node nd = proto(IR_OP_SLICE);
    nd.src[0] = x;
    nd.ip[0] = start;
    nd.ip[1] = n;
    return ir_append(g, &nd);
}

ir_ref ir_concat(ir_graph *g, const ir_ref *xs, int n, int32_t dim) {
    if (n < 2 || n > IR_MAX_SRC) {
        if (g->status == SB_OK) g->status = sb_fail(SB_ERR_INVALID_ARG, "ir: concat of %d sources (2..%d)", n, IR_MAX_SRC);
        return IR_NONE;
    }
    ir_node nd = proto(IR_OP_CONCAT);
    for (int i = 0; i < n; i++) {
        if (xs[i] == IR_NONE) return IR_NONE;
        nd.src[i] = xs[i];
    }
    nd.ip[0] = dim;
    return ir_append(g, &nd);
}

ir_ref ir_permute(ir_graph *g, ir_ref x, const int32_t perm[4]) {
    if (x == IR_NONE) return IR_NONE;
    ir_node nd = proto(IR_OP_PERMUTE);
    nd.src[0] = x;
    for (int k = 0; k < 4; k++) nd.ip[k] = perm[k];
    return ir_append(g, &nd);
}

ir_ref ir_output(ir_graph *g, ir_ref x, const char *name) {
    if (x == IR_NONE) return IR_NONE;
    ir_node n = proto(IR_OP_OUTPUT);
    n.src[0] = x;
    if (strlen(name) >= IR_NAME_MAX || !name[0]) {
        if (g->status == SB_OK) g->status = sb_fail(SB_ERR_INVALID_ARG, "ir: output name \"%s\" empty or too long", name);
        return IR_NONE;
    }
    strcpy(n.name, name);
    return ir_append(g, &n);
}
