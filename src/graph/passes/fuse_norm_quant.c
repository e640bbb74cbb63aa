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
#include "graph/plan.h"

#include <stdlib.h>

static bool is_row_vec(const ir_node *b, const ir_node *a) {
    return b->ne[0] == a->ne[0] && b->ne[1] == 1 && b->ne[2] == 1 && b->ne[3] == 1 && b->dtype == SB_TYPE_F32;
}

sb_status pass_fuse_norm_quant(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_norm_quant) return SB_OK;
    int32_t n = g->n_nodes;
    int32_t *uses = malloc((size_t)(n ? n : 1) * sizeof *uses);
    if (!uses) return sb_fail(SB_ERR_OOM, "fuse_norm_quant: use counts");
    ir_use_counts(g, uses);
    for (int32_t i = 0; i < n; i++) {
        const ir_node q = g->nodes[i];
        if (q.op != IR_OP_QUANTIZE) continue;
        ir_ref x = q.src[0], norm = IR_NONE, w = IR_NONE;
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
        if (norm == IR_NONE) continue;
        ir_node f = ir_proto(IR_OP_RMS_NORM_QUANT);
        f.src[0] = g->nodes[norm].src[0];
        f.src[1] = w;
        f.fp[0] = g->nodes[norm].fp[0];
        f.dtype = q.dtype;
        ir_ref r = ir_append(g, &f);
        if (r == IR_NONE) break;
        ir_replace_uses(g, i, r);
    }
    free(uses);
    SB_TRY(g->status);
    return ir_compact(g);
}
