/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/quantize_once.c — give every matmul whose target multiplies in a low-precision
 * activation type (plan_target.act_type[weight type]: Q8_K for K-quants, Q8_0 for 32-blocks, F16
 * for F16 weights on CPU, as llama.cpp's vec_dot_type) a QUANTIZE input, and create exactly ONE
 * quantize node per (activation, act type): Q, K and V read one; gate and up read one. Matmuls
 * whose activation has plan_target.act_f32_min_rows rows or more (when set) keep it f32.
 * Layer 2 (graph). Pre: verified. Post: verified; no matmul with a quantizing weight type reads an
 * f32 activation. No-op when the target does not want quantized activations.
 *
 * before (w types q4_K, q4_K, q6_K: all pair with q8_K):
 *   %6 = matmul(%1, %5) : f32[64,4] "q"
 *   %7 = matmul(%2, %5) : f32[32,4] "k"
 *   %8 = matmul(%3, %5) : f32[32,4] "v"
 * after:
 *   %6 = quantize(%5) : Q8_K[256,4]
 *   %7 = matmul(%1, %6) : f32[64,4] "q"
 *   %8 = matmul(%2, %6) : f32[32,4] "k"
 *   %9 = matmul(%3, %6) : f32[32,4] "v"
 */
#include "graph/plan.h"

sb_status pass_quantize_once(ir_graph *g, const pass_ctx *cx) {
    const plan_target *t = cx->target;
    if (!t || !t->wants_quantized_act) return SB_OK;
    int32_t n = g->n_nodes;
    for (int32_t i = 0; i < n; i++) {
        ir_node *m = &g->nodes[i];
        if (m->op != IR_OP_MATMUL) continue;
        const ir_node *w = &g->nodes[m->src[0]], *x = &g->nodes[m->src[1]];
        if (x->dtype != SB_TYPE_F32 || (unsigned)w->dtype >= SB_TYPE_COUNT) continue;
        int32_t a = t->act_type[w->dtype];
        if (a < 0 || a == SB_TYPE_F32) continue;
        if (t->act_f32_min_rows > 0 && ir_nrows(x) >= t->act_f32_min_rows) continue; /* the target multiplies these in f32 */
        ir_node q = ir_proto(IR_OP_QUANTIZE);
        q.src[0] = m->src[1];
        q.dtype = a;
        ir_ref r = ir_find_or_append(g, &q);
        SB_TRY(g->status);
        g->nodes[i].src[1] = r; /* re-fetch: the append may have moved the array */
    }
    return ir_compact(g);
}
