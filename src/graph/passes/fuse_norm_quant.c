/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_norm_quant.c — RMSNorm (times its weight) followed by the activation
 * quantization becomes one node that writes the quantized activation directly: the normalised
 * f32 row never reaches memory. Applies when the norm (and the mul) have no other consumer.
 * Numerics are unchanged (the fused kernel computes the same f32 row, then quantizes it).
 * Layer 2 (graph). Pre: quantize_once ran. Post: verified.
 *
 * before:
 *   %5 = rms_norm(%4) eps=1e-06 : f32[256,4]
 *   %6 = mul(%5, %2) : f32[256,4]
 *   %7 = quantize(%6) : Q8_K[256,4]
 * after:
 *   %5 = rms_norm_quant(%4, %2) eps=1e-06 : Q8_K[256,4]
 */
#include "fuse_quant.h"

static bool is_row_vec(const ir_node *b, const ir_node *a) {
    return b->ne[0] == a->ne[0] && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && b->dtype == SB_TYPE_F32;
}

/* rms_norm, or mul(rms_norm, row vector) in either order, each with no other consumer ->
 * rms_norm_quant(x, weight or IR_NONE) with the norm's eps. */
static bool match_norm(const ir_graph *g, const int32_t *uses, ir_ref x, ir_node *f) {
    ir_ref norm = IR_NONE, w = IR_NONE;
    const ir_node *X = &g->nodes[x];
    if (X->op == IR_OP_RMS_NORM && uses[x] == 1) {
        norm = x;
    } else if (X->op == IR_OP_MUL && uses[x] == 1) {
        for (int j = 0; j < 2; j++) {
            ir_ref a = X->src[j], b = X->src[1 - j];
            if (g->nodes[a].op == IR_OP_RMS_NORM && uses[a] == 1 && is_row_vec(&g->nodes[b], &g->nodes[a])) {
                norm = a, w = b;
                break;
            }
        }
    }
    if (norm == IR_NONE) return false;
    *f = ir_proto(IR_OP_RMS_NORM_QUANT);
    f->src[0] = g->nodes[norm].src[0];
    f->src[1] = w;
    f->fp[0] = g->nodes[norm].fp[0];
    return true;
}

sb_status pass_fuse_norm_quant(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_norm_quant) return SB_OK;
    return fuse_into_quantize(g, "fuse_norm_quant", match_norm);
}
