/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_group_glu.c — a gate/up matmul group whose two products only a GLU reads writes
 * act(gate) * up itself: the launch that computes a row of gate and the same row of up multiplies
 * them there, so up's product never reaches memory and the GLU's read of both goes. The group keeps
 * one result (the gated product, the gate's shape); the GLU_QUANT becomes a QUANTIZE of it. The
 * same f32 math as the GLU kernel (act(gate) * up), so the quantized values are the same.
 * Targets ask through group_glu_fits (shape and types only; CUDA: the decode GEMV kernel that
 * pairs gate and up rows).
 * Layer 2 (graph). Pre: verified; after fuse_act_quant (it makes the GLU_QUANT) and
 * fuse_matmul_group (it makes the group). Post: verified; up's RESULT is dropped.
 *
 * before (T = 1):
 *   %30 = matmul_group(%29, %11, %12) n=2 addends=0 : f32[512]
 *   %31 = result(%30) k=1 : f32[512]
 *   %32 = glu_quant(%30, %31) act=swiglu : Q8_K[512]
 * after:
 *   %30 = matmul_group(%29, %11, %12) n=2 addends=0 glu=swiglu : f32[512]
 *   %31 = quantize(%30) : Q8_K[512]
 */
#include "graph/plan.h"

#include <string.h>

/* GLU_QUANT f's gate and up: the two results of one ungated group without addends, read by f alone
 * (the group's own value by f and its RESULT only) */
static bool wanted(const ir_graph *g, const pass_ctx *cx, const int32_t *uses, const ir_node *f) {
    if (f->op != IR_OP_GLU_QUANT) return false;
    const ir_ref gs = f->src[0], us = f->src[1];
    const ir_node *grp = &g->nodes[gs];
    if (grp->op != IR_OP_MATMUL_GROUP || ir_group_n(grp) != 2 || ir_group_has_addends(grp) || ir_group_glu(grp)) return false;
    if (ir_result_of(g, gs, 1) != us || uses[gs] != 2 || uses[us] != 1) return false; /* f, and up's RESULT */
    return cx->target->group_glu_fits && cx->target->group_glu_fits(g, grp);
}

/* glu_quant i of a wanted group -> the group gates itself, i a quantize of its one result */
static sb_status fuse_glu_into_group(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    ir_node *f = &g->nodes[i];
    if (!wanted(g, cx, uses, f)) return SB_OK;
    g->nodes[f->src[0]].ip[2] = (int32_t)ir_glu_act(f);
    ir_node q = ir_proto(IR_OP_QUANTIZE);
    q.src[0] = f->src[0];
    q.dtype = f->dtype;
    memcpy(q.name, f->name, sizeof q.name);
    const sb_status st = ir_infer_shape(g, &q);
    *f = q; /* up's RESULT has no reader now: ir_compact drops it */
    *changed = true;
    return st;
}

sb_status pass_fuse_group_glu(ir_graph *g, const pass_ctx *cx) {
    if (!cx->target || !cx->target->group_glu_fits) return SB_OK;
    return pass_rewrite_nodes(g, fuse_glu_into_group, cx);
}
