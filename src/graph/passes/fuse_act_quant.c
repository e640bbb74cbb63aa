/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_act_quant.c — the gated activation of the FFN (silu(gate)*up or
 * gelu_tanh(gate)*up) followed by the quantization of down's input becomes one node: the f32
 * product row never reaches memory. Applies when the activation has no other consumer.
 * Numerics are unchanged (same f32 values, then the same quantizer).
 * Layer 2 (graph). Pre: quantize_once ran. Post: verified.
 *
 * before:
 *   %9 = swiglu(%7, %8) : f32[256,4]
 *   %10 = quantize(%9) : Q8_K[256,4]
 * after:
 *   %9 = glu_quant(%7, %8) act=swiglu : Q8_K[256,4]
 */
#include "graph/plan.h"

#include <stdlib.h>

sb_status pass_fuse_act_quant(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_act_quant) return SB_OK;
    int32_t n = g->n_nodes;
    int32_t *uses = malloc((size_t)(n ? n : 1) * sizeof *uses);
    if (!uses) return sb_fail(SB_ERR_OOM, "fuse_act_quant: use counts");
    ir_use_counts(g, uses);
    for (int32_t i = 0; i < n; i++) {
        const ir_node q = g->nodes[i];
        if (q.op != IR_OP_QUANTIZE) continue;
        const ir_node a = g->nodes[q.src[0]];
        if ((a.op != IR_OP_SWIGLU && a.op != IR_OP_GEGLU) || uses[q.src[0]] != 1) continue;
        ir_node f = ir_proto(IR_OP_GLU_QUANT);
        f.src[0] = a.src[0];
        f.src[1] = a.src[1];
        f.ip[0] = a.op;
        f.dtype = q.dtype;
        ir_ref r = ir_append(g, &f);
        if (r == IR_NONE) break;
        ir_replace_uses(g, i, r);
    }
    free(uses);
    SB_TRY(g->status);
    return ir_compact(g);
}
