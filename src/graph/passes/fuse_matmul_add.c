/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_matmul_add.c — an add whose one operand is a matmul read by nothing else
 * becomes that matmul's third source: y = W x + b, the bias ([N], broadcast over the tokens) or
 * the residual ([N,T]) added as each output element is written (a GEMV or GEMM epilogue). The
 * product never reaches memory on its own, and one launch replaces two. Numerics are unchanged:
 * the same f32 product, then the same f32 add (x + y == y + x exactly).
 * Targets whose matmul kernels have that epilogue ask for it (plan_target.fuse_matmul_add).
 * Layer 2 (graph). Pre: verified; after fuse_elementwise (an add a chain took stays there), before
 * fuse_add_norm (an add a matmul can write is taken here first).
 * Post: verified; the fused node takes the add's place (every source precedes it), the bare
 * matmul is dropped.
 *
 * before:
 *   %22 = matmul(%3, %14) : f32[256,2]
 *   %23 = add(%22, %6) : f32[256,2]
 *   ...
 *   %28 = matmul(%7, %27) : f32[256,2]
 *   %29 = add(%0, %28) : f32[256,2]
 * after:
 *   %22 = matmul(%3, %14, %6) : f32[256,2]
 *   ...
 *   %27 = matmul(%7, %26, %0) : f32[256,2]
 */
#include "graph/plan.h"

#include <string.h>

/* Source k of add a (a matmul without a third source, read only by a) and the other operand, an
 * f32 value of the product's shape or a [N] row: the pair fuses. */
static bool fusable(const ir_graph *g, const int32_t *uses, const ir_node *a, int k) {
    const ir_node *m = &g->nodes[a->src[k]], *o = &g->nodes[a->src[1 - k]];
    if (m->op != IR_OP_MATMUL || m->src[2] != IR_NONE || uses[a->src[k]] != 1) return false;
    if (o->dtype != SB_TYPE_F32 || memcmp(a->ne, m->ne, sizeof a->ne)) return false;
    const bool row = o->ne[0] == m->ne[0] && o->ne[1] == 1 && o->ne[2] == 1 && o->ne[3] == 1;
    return row || !memcmp(o->ne, m->ne, sizeof o->ne);
}

/* add i of a fusable matmul -> that matmul with the add's other operand as its third source */
static sb_status fuse_add_into_matmul(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    (void)cx;
    ir_node *a = &g->nodes[i];
    if (a->op != IR_OP_ADD) return SB_OK;
    const int k = fusable(g, uses, a, 0) ? 0 : fusable(g, uses, a, 1) ? 1 : -1;
    if (k < 0) return SB_OK;
    const ir_ref mi = a->src[k], o = a->src[1 - k];
    ir_node f = g->nodes[mi];
    f.src[2] = o;
    if (a->name[0]) memcpy(f.name, a->name, sizeof f.name);
    *a = f; /* in place: the matmul and o both precede the add */
    uses[mi] = 0;
    *changed = true;
    return SB_OK;
}

sb_status pass_fuse_matmul_add(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_matmul_add) return SB_OK;
    return pass_rewrite_nodes(g, fuse_add_into_matmul, cx);
}
