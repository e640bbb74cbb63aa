/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/dce.c — dead-compute elimination: compute only what an output needs, and only for
 * the rows that get logits. select_rows(x, out_rows) is moved up through row-wise producers
 * (norms, elementwise ops, matmul's activation side, gated activations) as long as the producer has
 * no other consumer, so the vocab matmul, the final norm and the last layer's FFN run on n_out
 * rows instead of T (llama.cpp drops rows the same way before the last FFN). Broadcast operands
 * (weights, [ne0] vectors) are kept; row-shaped operands get their own select_rows, merged by CSE
 * (so the residual and the norm path of one value share one select). It stops at non-row-wise ops
 * (attention, rope, get_rows, reshape). Then nodes no output or kv_store reaches are dropped.
 * Layer 2 (graph). Pre: verified graph. Post: verified, compacted; same outputs.
 *
 * before (T = 4, n_out = 1):
 *   %5 = rms_norm(%4) eps=1e-06 : f32[64,4]
 *   %6 = mul(%5, %2) : f32[64,4]
 *   %7 = matmul(%3, %6) : f32[512,4]
 *   %8 = select_rows(%7, %1) : f32[512,1]
 *   %9 = output(%8) : f32[512,1] "logits"
 * after:
 *   %5 = select_rows(%4, %1) : f32[64,1]
 *   %6 = rms_norm(%5) eps=1e-06 : f32[64,1]
 *   %7 = mul(%6, %2) : f32[64,1]
 *   %8 = matmul(%3, %7) : f32[512,1]
 *   %9 = output(%8) : f32[512,1] "logits"
 */
#include "graph/plan.h"

#include <stdlib.h>

// ---- one rewrite ----

/* Is source j of x a broadcast operand (kept as is when rows are selected)? */
static bool is_broadcast(const ir_graph *g, const ir_node *x, int j) {
    const ir_node *s = &g->nodes[x->src[j]];
    if (x->op == IR_OP_MATMUL && j == 0) return true;
    if (ir_ops[s->op].flags & OPF_INPUT) return true;
    return x->ne[1] != 1 && s->ne[1] == 1 && s->ne[2] == 1 && s->ne[3] == 1;
}

/* Try to move select_rows node `si` above its producer. Returns true when rewritten. */
static bool push_select(ir_graph *g, ir_ref si, const int32_t *uses) {
    const ir_node s = g->nodes[si];
    const ir_node x = g->nodes[s.src[0]];
    if (uses[s.src[0]] != 1 || !(ir_ops[x.op].flags & OPF_ROWWISE)) return false;
    if (x.ne[2] != 1 || x.ne[3] != 1 || x.op == IR_OP_OUTPUT) return false;
    /* every non-broadcast source must be [*, T] like x */
    for (int j = 0; j < IR_MAX_SRC && x.src[j] != IR_NONE; j++) {
        if (is_broadcast(g, &x, j)) continue;
        const ir_node *o = &g->nodes[x.src[j]];
        if (o->ne[1] != x.ne[1] || o->ne[2] != 1 || o->ne[3] != 1 || o->dtype != SB_TYPE_F32) return false;
    }
    ir_node nx = x;
    for (int j = 0; j < IR_MAX_SRC && x.src[j] != IR_NONE; j++) {
        if (is_broadcast(g, &x, j)) continue;
        ir_node sel = ir_proto(IR_OP_SELECT_ROWS);
        sel.src[0] = x.src[j];
        sel.src[1] = s.src[1];
        nx.src[j] = ir_find_or_append(g, &sel);
        if (nx.src[j] == IR_NONE) return false;
    }
    ir_ref r = ir_append(g, &nx);
    if (r == IR_NONE) return false;
    ir_replace_uses(g, si, r);
    return true;
}

// ---- pass ----

sb_status pass_dce(ir_graph *g, const pass_ctx *cx) {
    (void)cx;
    SB_TRY(ir_compact(g));
    for (;;) {
        int32_t *uses = ir_use_counts_new(g);
        if (!uses) return SB_ERR_OOM;
        bool changed = false;
        int32_t n = g->n_nodes;
        for (int32_t i = 0; i < n && !changed; i++)
            if (g->nodes[i].op == IR_OP_SELECT_ROWS) changed = push_select(g, i, uses);
        free(uses);
        SB_TRY(g->status);
        if (!changed) break;
        SB_TRY(ir_compact(g));
    }
    return SB_OK;
}
