/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_chain_quant.c — a FUSED chain whose f32 result a QUANTIZE or an RMS_NORM_QUANT
 * reads takes that quantizer as its tail: the chain's node writes its f32 result (result 0, still
 * the residual stream the next add reads) and the quantized row (result 1, what the next matmuls
 * read) in one step, reading the row while it is still in the cache. On sandwich-norm models (Gemma
 * 2/3/4) each layer's post-attention and post-FFN norm + residual add is such a chain: one launch
 * less each. Numerics are unchanged: the same chain, then the same norm, weight and rounding of its
 * f32 row (ir.h ir_fused_tail_of has the encoding).
 * Targets ask for it with the most rows a chain may have (plan_target.chain_quant_max_t; 0: never).
 * A chain takes one tail (the first quantizer of its result in graph order); a norm's weight must
 * precede the chain (an input) and find a free source slot.
 * Layer 2 (graph). Pre: fuse_elementwise, fuse_norm_quant and fuse_add_norm ran. Post: verified;
 * the quantizer is dropped.
 *
 * before:
 *   %20 = fused(%19, %3, %10) [rms_norm eps=1e-06; mul @1; add @2] : f32[256,2]
 *   %21 = rms_norm_quant(%20, %4) eps=1e-06 : Q8_K[256,2]
 *   ...
 *   %30 = add(%20, %29) : f32[256,2]
 * after:
 *   %20 = fused(%19, %3, %10, %4) [rms_norm eps=1e-06; mul @1; add @2 | rms_norm_quant @3 eps=1e-06 Q8_K] : f32[256,2]
 *   %21 = result(%20) k=1 : Q8_K[256,2]
 *   ...
 *   %30 = add(%20, %29) : f32[256,2]
 */
#include "graph/plan.h"

#include <stdint.h>
#include <string.h>

/* the source slot of FUSED f holding w (an existing one, or the first free one), or 0 when f has
 * no slot left */
static int weight_slot(const ir_node *f, ir_ref w) {
    for (int s = 1; s < IR_MAX_SRC; s++)
        if (f->src[s] == w || f->src[s] == IR_NONE) return s;
    return 0;
}

/* does quantizer q (a copy) tail the chain it reads? Fills *slot with the weight's source slot */
static bool takes_tail(const ir_graph *g, const ir_node *q, int64_t max_t, int *slot) {
    if (q->op != IR_OP_QUANTIZE && q->op != IR_OP_RMS_NORM_QUANT) return false;
    const ir_ref f = q->src[0];
    const ir_node *F = &g->nodes[f];
    if (F->op != IR_OP_FUSED || ir_fused_tail_of(F).op || ir_nrows(F) > max_t) return false;
    *slot = 0;
    const ir_ref w = q->op == IR_OP_RMS_NORM_QUANT ? q->src[1] : IR_NONE;
    if (w == IR_NONE) return true;
    *slot = w < f ? weight_slot(F, w) : 0; /* a weight computed after the chain could depend on it */
    return *slot > 0;
}

sb_status pass_fuse_chain_quant(ir_graph *g, const pass_ctx *cx) {
    const int64_t max_t = cx->target ? cx->target->chain_quant_max_t : INT64_MAX;
    if (max_t <= 0) return SB_OK;
    const int32_t n = g->n_nodes;
    bool changed = false;
    for (int32_t i = 0; i < n; i++) {
        const ir_node q = g->nodes[i]; /* a copy: ir_append may move g->nodes */
        int slot = 0;
        if (!takes_tail(g, &q, max_t, &slot)) continue;
        ir_node *F = &g->nodes[q.src[0]];
        if (slot) F->src[slot] = q.src[1];
        F->ip[IR_FUSED_TAIL] = (int32_t)q.op;
        F->ip[IR_FUSED_TAIL + 1] = q.dtype;
        F->ip[IR_FUSED_TAIL + 2] = slot;
        F->fp[IR_MAX_FUSE] = q.op == IR_OP_RMS_NORM_QUANT ? ir_f0(&q) : 0.0f;
        ir_node r = ir_proto(IR_OP_RESULT);
        r.src[0] = q.src[0];
        r.ip[0] = 1;
        memcpy(r.name, q.name, sizeof r.name);
        const ir_ref res = ir_append(g, &r);
        if (res == IR_NONE) return ir_graph_status(g);
        ir_replace_uses(g, i, res);
        changed = true;
    }
    return changed ? ir_compact(g) : SB_OK;
}
