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
#include "fuse_quant.h"

/* swiglu / geglu with no other consumer -> glu_quant(gate, up) act=<op>. */
static bool match_glu(const ir_graph *g, const int32_t *uses, ir_ref x, ir_node *f) {
    const ir_node a = g->nodes[x];
    if ((a.op != IR_OP_SWIGLU && a.op != IR_OP_GEGLU) || uses[x] != 1) return false;
    *f = ir_proto(IR_OP_GLU_QUANT);
    f->src[0] = a.src[0];
    f->src[1] = a.src[1];
    f->ip[0] = a.op;
    return true;
}

sb_status pass_fuse_act_quant(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_act_quant) return SB_OK;
    return fuse_into_quantize(g, "fuse_act_quant", match_glu);
}
