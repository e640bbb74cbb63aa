/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_attn_quant.c — the quantization of an attention's output (the output
 * projection's activation) moves into the attention: it writes the quantized blocks beside its f32
 * output (each block lies in one head), as its result 1, which replaces the quantize node. The
 * same values and rounding; one launch and one read of the output go. The memory plan gives the
 * result its place at the attention's step, apart from everything the attention reads.
 * Targets ask for it with the type their attention writes (attn_quant_type; CUDA: q8_1), for heads
 * of at most attn_fuse_max_head_dim dims (0: any); paged attentions (a block table) too.
 * Layer 2 (graph). Pre: verified, after quantize_once. Post: verified; the quantize is dropped.
 *
 * before:
 *   %23 = attention(%22, %17, %19, %1) n_head_kv=2 head_dim=64 scale=0.125 : f32[256]
 *   %24 = quantize(%23) : Q8_1[256]
 * after:
 *   %23 = attention(%22, %17, %19, %1) n_head_kv=2 head_dim=64 scale=0.125 out=Q8_1 : f32[256]
 *   %24 = result(%23) k=1 : Q8_1[256]
 */
#include "graph/plan.h"

#include "quant/types.h"

#include <stdlib.h>

static bool wanted(const ir_graph *g, const ir_node *q, int32_t type, int32_t max_hd) {
    if (q->op != IR_OP_QUANTIZE || q->dtype != type) return false;
    const ir_node *a = &g->nodes[q->src[0]];
    return a->op == IR_OP_ATTENTION && ir_attn_quant_type(a) < 0 && ir_attn_of(a).head_dim % qk_get(type)->blck == 0 &&
           (max_hd <= 0 || ir_attn_of(a).head_dim <= max_hd);
}

sb_status pass_fuse_attn_quant(ir_graph *g, const pass_ctx *cx) {
    const int32_t type = cx->target ? cx->target->attn_quant_type : SB_TYPE_Q8_1, max_hd = cx->target ? cx->target->attn_fuse_max_head_dim : 0;
    if (type <= SB_TYPE_F32 || !qk_valid(type)) return SB_OK;
    const int32_t n = g->n_nodes;
    bool changed = false;
    for (int32_t i = 0; i < n; i++) {
        if (!wanted(g, &g->nodes[i], type, max_hd)) continue;
        const ir_ref a = g->nodes[i].src[0];
        g->nodes[a].ip[4] = type + 1;
        ir_node r = ir_proto(IR_OP_RESULT);
        r.src[0] = a;
        r.ip[0] = 1;
        const ir_ref res = ir_append(g, &r);
        if (res == IR_NONE) return ir_graph_status(g);
        ir_replace_uses(g, i, res);
        changed = true;
    }
    return changed ? ir_compact(g) : SB_OK;
}
