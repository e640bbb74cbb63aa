/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/ir.c — graph storage and the editing primitives passes share: append, use counts,
 * replace-all-uses, compact (drop unreachable nodes, restore topological order).
 * Layer 2 (graph). Invariant after ir_compact: sources precede their users; roots are OUTPUT and
 * KV_STORE nodes (a cache write is a side effect kept even when nothing reads it).
 * Non-goals: incremental use lists (graphs are a few thousand nodes; passes recount).
 */
#include "graph/ir.h"

#include "quant/types.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// ---- lifetime ----

sb_status ir_graph_create(ir_graph **out) {
    ir_graph *g = calloc(1, sizeof *g);
    if (!g) return sb_fail(SB_ERR_OOM, "ir: graph (%zu bytes)", sizeof *g);
    *out = g;
    return SB_OK;
}

void ir_graph_free(ir_graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g);
}

sb_status ir_graph_status(const ir_graph *g) { return g ? g->status : SB_ERR_INVALID_ARG; }

sb_status ir_graph_clone(const ir_graph *g, ir_graph **out) {
    ir_graph *c = NULL;
    SB_TRY(ir_graph_create(&c));
    if (g->n_nodes) {
        c->nodes = malloc((size_t)g->n_nodes * sizeof *c->nodes);
        if (!c->nodes) {
            free(c);
            return sb_fail(SB_ERR_OOM, "ir: clone of %d nodes", (int)g->n_nodes);
        }
        memcpy(c->nodes, g->nodes, (size_t)g->n_nodes * sizeof *c->nodes);
    }
    c->n_nodes = c->cap = g->n_nodes;
    c->status = g->status;
    *out = c;
    return SB_OK;
}

// ---- append ----

static ir_ref push(ir_graph *g, const ir_node *n) {
    if (g->status != SB_OK) return IR_NONE;
    if (g->n_nodes == g->cap) {
        int32_t cap = g->cap ? g->cap * 2 : 256;
        ir_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) {
            g->status = sb_fail(SB_ERR_OOM, "ir: growing the graph to %d nodes", (int)cap);
            return IR_NONE;
        }
        g->nodes = p;
        g->cap = cap;
    }
    g->nodes[g->n_nodes] = *n;
    return g->n_nodes++;
}

/* Shape misuse (a builder handing inconsistent shapes, e.g. from unchecked hparams, or a pass bug)
 * becomes the graph's sticky SB_ERR_INVALID_ARG with the shape function's reason: the library
 * never aborts on what may come from a model file. */
static sb_status shape_or_fail(ir_graph *g, ir_node *n) {
    sb_status s = ir_infer_shape(g, n);
    if (s != SB_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", sb_last_error());
        g->status = sb_fail(SB_ERR_INVALID_ARG, "ir: building %s (node %d): %s",
                            (unsigned)n->op < IR_OP_COUNT ? ir_ops[n->op].name : "?", (int)g->n_nodes, why);
    }
    return s == SB_OK ? SB_OK : g->status;
}

ir_ref ir_append(ir_graph *g, const ir_node *proto) {
    if (g->status != SB_OK) return IR_NONE;
    ir_node n = *proto;
    if (shape_or_fail(g, &n) != SB_OK) return IR_NONE;
    return push(g, &n);
}

ir_node ir_proto(ir_op op) {
    ir_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.dtype = SB_TYPE_F32;
    for (int i = 0; i < IR_MAX_SRC; i++) n.src[i] = IR_NONE;
    n.ne[0] = n.ne[1] = n.ne[2] = n.ne[3] = 1;
    return n;
}

ir_ref ir_find_or_append(ir_graph *g, const ir_node *proto) {
    ir_node n = *proto;
    if (g->status != SB_OK || shape_or_fail(g, &n) != SB_OK) return IR_NONE;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *m = &g->nodes[i];
        if (m->op == n.op && m->dtype == n.dtype && !memcmp(m->src, n.src, sizeof n.src) &&
            !memcmp(m->ne, n.ne, sizeof n.ne) && !memcmp(m->ip, n.ip, sizeof n.ip) && !memcmp(m->fp, n.fp, sizeof n.fp))
            return i;
    }
    return push(g, &n);
}

ir_ref ir_set_name(ir_graph *g, ir_ref r, const char *fmt, ...) {
    if (r < 0 || r >= g->n_nodes) return r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->nodes[r].name, IR_NAME_MAX, fmt, ap);
    va_end(ap);
    return r;
}

// ---- uses ----

sb_status ir_use_counts(const ir_graph *g, int32_t *uses) {
    memset(uses, 0, (size_t)g->n_nodes * sizeof *uses);
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < IR_MAX_SRC && g->nodes[i].src[j] != IR_NONE; j++) uses[g->nodes[i].src[j]]++;
    return SB_OK;
}

int32_t *ir_use_counts_new(const ir_graph *g) {
    int32_t *uses = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *uses);
    if (!uses) {
        sb_fail(SB_ERR_OOM, "use counts of %d nodes", (int)g->n_nodes);
        return NULL;
    }
    ir_use_counts(g, uses);
    return uses;
}

void ir_replace_uses(ir_graph *g, ir_ref from, ir_ref to) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (i == to) continue; /* the replacement may read `from` itself */
        for (int j = 0; j < IR_MAX_SRC && g->nodes[i].src[j] != IR_NONE; j++)
            if (g->nodes[i].src[j] == from) g->nodes[i].src[j] = to;
    }
}

// ---- caches ----

ir_ref ir_kv_root(const ir_graph *g, ir_ref c) {
    while (c != IR_NONE && (g->nodes[c].op == IR_OP_KV_STORE || g->nodes[c].op == IR_OP_ROPE_STORE)) c = g->nodes[c].src[0];
    return c != IR_NONE && g->nodes[c].op == IR_OP_KV ? c : IR_NONE;
}

// ---- results ----

ir_ref ir_result_of(const ir_graph *g, ir_ref p, int k) {
    for (ir_ref i = p + 1; i < g->n_nodes && g->nodes[i].op == IR_OP_RESULT && g->nodes[i].src[0] == p; i++)
        if (ir_result_index(&g->nodes[i]) == k) return i;
    return IR_NONE;
}

// ---- compact ----

static bool is_root(const ir_node *n) { return n->op == IR_OP_OUTPUT || n->op == IR_OP_KV_STORE || n->op == IR_OP_ROPE_STORE; }

/* Append the reached RESULT nodes of producer v right after it, in increasing result index (a
 * RESULT depends on its producer only, so this keeps the order topological). Returns the new count. */
static int32_t place_results(const ir_graph *g, const uint8_t *state, int32_t v, int32_t *remap, ir_node *nodes, int32_t m) {
    for (int k = 1; k < ir_result_count(&g->nodes[v]); k++)
        for (int32_t r = 0; r < g->n_nodes; r++) {
            const ir_node *n = &g->nodes[r];
            if (state[r] != 2 || n->op != IR_OP_RESULT || n->src[0] != v || ir_result_index(n) != k) continue;
            remap[r] = m;
            nodes[m++] = *n;
            break;
        }
    return m;
}

sb_status ir_compact(ir_graph *g) {
    int32_t n = g->n_nodes;
    if (n == 0) return SB_OK;
    int32_t *order = malloc((size_t)n * sizeof *order);
    int32_t *remap = malloc((size_t)n * sizeof *remap);
    int32_t *stack = malloc((size_t)n * (IR_MAX_SRC + 1) * sizeof *stack); /* a node may be pushed once per edge */
    uint8_t *state = calloc((size_t)n, 1); /* 0 new, 1 on stack, 2 done */
    ir_node *nodes = malloc((size_t)n * sizeof *nodes);
    sb_status st = SB_OK;
    if (!order || !remap || !stack || !state || !nodes) {
        st = sb_fail(SB_ERR_OOM, "ir: compact of %d nodes", (int)n);
        goto cleanup;
    }
    int32_t k = 0;
    /* mark reachable inputs first so they keep their original order at the top */
    for (int32_t root = 0; root < n; root++) {
        if (!is_root(&g->nodes[root]) || state[root]) continue;
        int32_t sp = 0;
        stack[sp++] = root;
        while (sp) {
            int32_t v = stack[sp - 1];
            if (state[v] == 0) {
                state[v] = 1;
                const ir_node *nd = &g->nodes[v];
                for (int j = IR_MAX_SRC - 1; j >= 0; j--) {
                    ir_ref s = nd->src[j];
                    if (s == IR_NONE) continue;
                    if (s < 0 || s >= n) {
                        st = sb_fail(SB_ERR_INTERNAL, "ir: node %d source %d out of range", (int)v, (int)s);
                        goto cleanup;
                    }
                    if (state[s] == 1) {
                        st = sb_fail(SB_ERR_INTERNAL, "ir: cycle through node %d", (int)s);
                        goto cleanup;
                    }
                    if (state[s] == 0) stack[sp++] = s;
                }
            } else {
                sp--;
                if (state[v] == 1) {
                    state[v] = 2;
                    order[k++] = v;
                }
            }
        }
    }
    /* inputs first (original order), then the rest in DFS post-order */
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (state[i] == 2 && (ir_ops[g->nodes[i].op].flags & OPF_INPUT)) remap[i] = m, nodes[m++] = g->nodes[i];
    for (int32_t i = 0; i < k; i++) {
        int32_t v = order[i];
        if (ir_ops[g->nodes[v].op].flags & OPF_INPUT || g->nodes[v].op == IR_OP_RESULT) continue;
        remap[v] = m;
        nodes[m++] = g->nodes[v];
        if (ir_result_count(&g->nodes[v]) > 1) m = place_results(g, state, v, remap, nodes, m);
    }
    for (int32_t i = 0; i < m; i++)
        for (int j = 0; j < IR_MAX_SRC && nodes[i].src[j] != IR_NONE; j++) nodes[i].src[j] = remap[nodes[i].src[j]];
    memcpy(g->nodes, nodes, (size_t)m * sizeof *nodes);
    g->n_nodes = m;
cleanup:
    free(order);
    free(remap);
    free(stack);
    free(state);
    free(nodes);
    return st;
}

// ---- names ----

const char *ir_dtype_name(int dtype) {
    switch (dtype) {
    case SB_TYPE_F32: return "f32";
    case SB_TYPE_F16: return "f16";
    case SB_TYPE_BF16: return "bf16";
    case SB_TYPE_I32: return "i32";
    default: break;
    }
    const qk_traits *t = qk_get(dtype);
    return t && t->name ? t->name : "?";
}
