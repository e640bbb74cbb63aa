/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_add_norm.c — a residual add whose sum feeds a fused norm→quantize becomes one
 * node with two results: the quantized normalised row (result 0, what the next matmul reads) and
 * the sum itself (result 1, the residual stream the block's later add reads). One node, one
 * dispatch and one barrier replace two, and the norm reads the sum while it is still in cache.
 * Numerics are unchanged: the same f32 a + b, then the same norm, weight and rounding.
 * Targets that run ADD_RMS_NORM_QUANT ask for it (plan_target.fuse_add_norm).
 * Layer 2 (graph). Pre: fuse_norm_quant and fuse_matmul_add ran (a residual a matmul adds is not an add here). Post: verified; the add is dropped.
 *
 * before:
 *   %20 = add(%18, %19) : f32[256,2]
 *   %21 = rms_norm_quant(%20, %10) eps=9.99999997e-07 : Q8_K[256,2]
 *   ...
 *   %30 = add(%20, %29) : f32[256,2]
 * after:
 *   %20 = add_rms_norm_quant(%18, %19, %10) eps=9.99999997e-07 : Q8_K[256,2]
 *   %21 = result(%20) k=1 : f32[256,2]
 *   ...
 *   %30 = add(%21, %29) : f32[256,2]
 * When nothing else reads the sum (the last layer's add before the output norm) no result node is
 * made and the executor never writes the sum; a target whose kernel always writes it
 * (plan_target.add_norm_writes_sum) leaves that add alone.
 */
#include "graph/plan.h"

#include <string.h>

/* q (an RMS_NORM_QUANT) reads an ADD of two f32 values of one shape (not a broadcast bias) */
static bool fusable(const ir_graph *g, const ir_node *q) {
    const ir_node *a = &g->nodes[q->src[0]];
    if (a->op != IR_OP_ADD) return false;
    const ir_node *x = &g->nodes[a->src[0]], *y = &g->nodes[a->src[1]];
    return x->dtype == SB_TYPE_F32 && y->dtype == SB_TYPE_F32 && !memcmp(x->ne, y->ne, sizeof x->ne);
}

/* rms_norm_quant i of a fusable add -> add_rms_norm_quant, the sum its result 1 where others read it */
static sb_status fuse_add_into_norm(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    ir_node *q = &g->nodes[i];
    if (q->op != IR_OP_RMS_NORM_QUANT || !fusable(g, q)) return SB_OK;
    const ir_ref add = q->src[0];
    if (cx->target && cx->target->add_norm_writes_sum && uses[add] < 2) return SB_OK; /* no result to write the sum to */
    const ir_node *a = &g->nodes[add];
    /* in place: the add's sources precede it, so they precede q; q depends on nothing else
     * but its weight, so the add's other readers may all read the result after q */
    q->op = IR_OP_ADD_RMS_NORM_QUANT;
    q->src[2] = q->src[1];
    q->src[0] = a->src[0], q->src[1] = a->src[1];
    if (uses[add] > 1) {
        ir_node r = ir_proto(IR_OP_RESULT);
        r.src[0] = i;
        r.ip[0] = 1;
        const ir_ref res = ir_append(g, &r); /* may move the array: q and a are stale after it */
        if (res == IR_NONE) return ir_graph_status(g);
        ir_set_name(g, res, "%s", g->nodes[add].name);
        ir_replace_uses(g, add, res);
    }
    *changed = true;
    return SB_OK;
}

sb_status pass_fuse_add_norm(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_add_norm) return SB_OK;
    return pass_rewrite_nodes(g, fuse_add_into_norm, cx);
}
