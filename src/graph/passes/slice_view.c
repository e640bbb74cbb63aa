/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/slice_view.c — a SLICE whose elements lie contiguously in its source (one token:
 * the source [a,b,1,1]; or every row of ne1) becomes a VIEW of them: its readers read the source
 * where the slice lies, and the copy, its launch and its memory leave the plan (Gemma 4's
 * per-layer input, sliced for each layer from one [256 x n_layer] row a token: one kernel a layer
 * at decode). The memory plan puts a VIEW at its source's offset plus 4 * ip[0] bytes. Only where
 * that offset keeps PLAN_ALIGN (the kernels' vector loads assume aligned rows) and the source is
 * computed, not a plan input (an input's views carry no offset).
 * Targets ask through slice_view (the executor runs VIEW as a view, as RESHAPE).
 * Layer 2 (graph). Pre: verified. Post: verified; the same values, read in place.
 *
 * before (T = 1):
 *   %165 = reshape(%164) : f32[32,8]
 *   %166 = slice(%165) start=5 n=1 : f32[32]
 * after:
 *   %165 = reshape(%164) : f32[32,8]
 *   %166 = view(%165) offset=160 : f32[32]
 */
#include "graph/plan.h"

#include <stdint.h>
#include <string.h>

/* the value x is a view of (through views), or x */
static ir_ref view_root(const ir_graph *g, ir_ref x) {
    while (ir_ops[g->nodes[x].op].flags & OPF_VIEW) x = g->nodes[x].src[0];
    return x;
}

/* element offset of SLICE n in its source where its elements are contiguous and aligned there; -1 if not */
static int64_t slice_offset(const ir_graph *g, const ir_node *n) {
    if (n->op != IR_OP_SLICE) return -1;
    const ir_node *x = &g->nodes[n->src[0]];
    const bool one_token = x->ne[2] == 1 && x->ne[3] == 1, whole = n->ip[0] == 0 && n->ip[1] == x->ne[1];
    const int64_t off = x->ne[0] * n->ip[0];
    if (!(one_token || whole) || (off * 4) % PLAN_ALIGN || off > INT32_MAX) return -1;
    if (ir_ops[g->nodes[view_root(g, n->src[0])].op].flags & OPF_INPUT) return -1;
    return off;
}

sb_status pass_slice_view(ir_graph *g, const pass_ctx *cx) {
    if (!cx->target || !cx->target->slice_view) return SB_OK;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const int64_t off = slice_offset(g, &g->nodes[i]);
        if (off < 0) continue;
        ir_node v = ir_proto(IR_OP_VIEW);
        v.src[0] = g->nodes[i].src[0];
        v.ip[0] = (int32_t)off;
        memcpy(v.ne, g->nodes[i].ne, sizeof v.ne);
        memcpy(v.name, g->nodes[i].name, sizeof v.name);
        SB_TRY(ir_infer_shape(g, &v));
        g->nodes[i] = v;
    }
    return SB_OK;
}
