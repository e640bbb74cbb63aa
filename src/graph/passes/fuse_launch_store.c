/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_launch_store.c — a decode step's K and V reach their caches from the launch
 * that computes them: the kv_store of a T = 1 matmul's (or matmul group member's) result, and the
 * rope_store of one through views of it, are marked by_launch — that launch writes the cache row
 * (rotating K first) as it writes the result, and nothing runs at the store's place. The store
 * stays in the graph (the cache value its readers read, in order); only who performs it changes.
 * Safe where the store is its value's only reader, writes at rows the launch can read before it
 * runs (the POS input, or a paged plan's SLOTS; a rope_store rotates at POS), and no node between
 * the launch and the store reads or writes that cache (the launch runs first). Rope freq factors
 * must be a plan input (the launch reads them whenever it runs).
 * Targets ask through launch_store_fits (shape and types only; CUDA: the decode GEMV kernels that
 * take a cache segment).
 * Layer 2 (graph). Pre: verified; after fuse_rope_store (it makes the rope_store),
 * fuse_matmul_group and fuse_group_glu (they make the launches). Post: verified; stores marked.
 *
 * before (T = 1):
 *   %15 = matmul_group(%14, %4, %5, %3, %6) n=3 addends=0x4 : f32[128]
 *   %16 = result(%15) k=1 : f32[128]
 *   %18 = reshape(%15) : f32[64,2]
 *   %19 = rope_store(%8, %18, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f16[128,16]
 *   %20 = kv_store(%9, %16, %1) : f16[128,16]
 * after: the same, with " by_launch" on %19 and %20.
 */
#include "graph/plan.h"

static bool stores_into(const ir_node *n, ir_ref cin) { /* a kv_store or rope_store writing cache input cin */
    return (n->op == IR_OP_KV_STORE || n->op == IR_OP_ROPE_STORE) && n->src[0] == cin;
}

/* does any node in (from, to) read or write the cache input cin (directly or through a store into it)? */
static bool cache_touched(const ir_graph *g, ir_ref cin, int32_t from, int32_t to) {
    for (int32_t q = from + 1; q < to; q++) {
        const ir_node *qn = &g->nodes[q];
        if (stores_into(qn, cin)) return true;
        for (int a = 0; a < IR_MAX_SRC; a++) {
            const ir_ref sr = qn->src[a];
            if (sr != IR_NONE && (sr == cin || stores_into(&g->nodes[sr], cin))) return true;
        }
    }
    return false;
}

/* readers of v: its use count less its RESULT nodes (they name their producer, not read it) */
static int32_t value_uses(const ir_graph *g, const int32_t *uses, ir_ref v) {
    int32_t n = uses[v];
    for (ir_ref r = v + 1; r < g->n_nodes && g->nodes[r].op == IR_OP_RESULT && g->nodes[r].src[0] == v; r++) n--;
    return n;
}

/* the store v goes to alone — a kv_store of v, or a rope_store of v through single-use reshapes — at
 * the step's positions; IR_NONE if none */
static ir_ref store_of(const ir_graph *g, const int32_t *uses, ir_ref v) {
    if (value_uses(g, uses, v) != 1) return IR_NONE;
    ir_ref cur = v;
    for (int32_t q = v + 1; q < g->n_nodes; q++) {
        const ir_node *qn = &g->nodes[q];
        if (qn->op == IR_OP_RESULT) continue; /* v's results do not read it */
        const int xs = qn->op == IR_OP_KV_STORE || qn->op == IR_OP_ROPE_STORE ? 1 : 0; /* (cache, x, pos, ff?) */
        bool reads = false;
        for (int a = 0; a < IR_MAX_SRC; a++) reads |= qn->src[a] == cur;
        if (!reads) continue;
        if (qn->op == IR_OP_RESHAPE && uses[q] == 1) {
            cur = q;
            continue;
        }
        if (!xs) return IR_NONE; /* read by something other than a store */
        const ir_op rows = g->nodes[ir_store_rows(qn)].op; /* the step's positions, or a paged plan's slots */
        const bool ok = (qn->op == IR_OP_KV_STORE ? cur == v : qn->op == IR_OP_ROPE_STORE) && qn->src[xs] == cur &&
                        (qn->op == IR_OP_KV_STORE || g->nodes[qn->src[2]].op == IR_OP_POS) && (rows == IR_OP_POS || rows == IR_OP_SLOTS) &&
                        !ir_store_by_launch(qn);
        const ir_ref ff = qn->op == IR_OP_ROPE_STORE ? ir_rope_store_ff(qn) : IR_NONE;
        if (ok && ff != IR_NONE && !(ir_ops[g->nodes[ff].op].flags & OPF_INPUT)) return IR_NONE;
        return ok ? q : IR_NONE;
    }
    return IR_NONE;
}

/* T = 1 launch i (a matmul or a group): mark the stores of its results it may perform. Marks only:
 * no node goes unread, so *changed stays (nothing to compact). */
static sb_status mark_launch_stores(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    (void)changed;
    const ir_node *n = &g->nodes[i];
    if ((n->op != IR_OP_MATMUL && n->op != IR_OP_MATMUL_GROUP) || g->nodes[n->src[n->op == IR_OP_MATMUL]].ne[1] != 1) return SB_OK;
    const int m = n->op == IR_OP_MATMUL_GROUP ? ir_result_count(n) : 1; /* a gated group: its one result */
    for (int j = 0; j < m; j++) {
        const ir_ref v = j ? ir_result_of(g, i, j) : i, s = store_of(g, uses, v);
        if (s == IR_NONE || cache_touched(g, g->nodes[s].src[0], i, s) || !cx->target->launch_store_fits(g, n, &g->nodes[s])) continue;
        g->nodes[s].ip[IR_STORE_BY_LAUNCH] = 1;
    }
    return SB_OK;
}

sb_status pass_fuse_launch_store(ir_graph *g, const pass_ctx *cx) {
    if (!cx->target || !cx->target->launch_store_fits) return SB_OK;
    return pass_rewrite_nodes(g, mark_launch_stores, cx);
}
