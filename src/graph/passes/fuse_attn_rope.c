/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_attn_rope.c — Q's RoPE, read only by the attention at the same positions,
 * moves into the attention: it reads the unrotated q and rotates each head as it loads it (the
 * same f32 rotation). The rotated q never reaches memory and one launch goes. Liveness keeps the
 * unrotated q intact until the attention reads it, so nothing here depends on the memory plan.
 * Targets whose attention kernels rotate q ask for it, for at most attn_rope_max_t tokens (CUDA:
 * a decode step; prefill plans keep Q's rope in their rope-jobs launch) and heads of at most
 * attn_fuse_max_head_dim dims (0: any). Paged attentions (a block table) take it the same way, up
 * to attn_rope_paged_max_t tokens where that is larger (CUDA: the batched engine's steps of up to 8
 * sequences; where their GEMVs run a matrix at a time, Q's rope would be a launch of its own): their
 * rope and attention both read the logical positions (pos), so only the freq factors' slot
 * differs (src[5] after the table, ir_attn_q_rope_ff_slot).
 * A rope that normalises its heads (pass fuse_norm_rope) stays: the attention kernels rotate q
 * pair by pair and have no head sum.
 * Layer 2 (graph). Pre: verified. Post: verified; the rope is dropped.
 *
 * before (T = 1):
 *   %23 = rope(%22, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f32[64,4]
 *   %24 = attention(%23, %17, %19, %1) n_head_kv=2 head_dim=64 scale=0.125 : f32[256]
 * after:
 *   %23 = attention(%22, %17, %19, %1) n_head_kv=2 head_dim=64 scale=0.125 q_rope=64 mode=neox
 *         base=1000000 fscale=1 : f32[256]
 */
#include "graph/plan.h"

/* the most tokens t's attentions (paged: with a block table) rotate q for */
static int64_t rope_max_t(const plan_target *t, bool paged) {
    return paged && t->attn_rope_paged_max_t > t->attn_rope_max_t ? t->attn_rope_paged_max_t : t->attn_rope_max_t;
}

/* attention i whose q is a rope read by it alone, at its positions -> the attention rotates q */
static sb_status fuse_rope_into_attn(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    ir_node *a = &g->nodes[i];
    if (a->op != IR_OP_ATTENTION || ir_attn_q_rope(a).n_rot) return SB_OK;
    const ir_node *r = &g->nodes[a->src[0]];
    if (r->op != IR_OP_ROPE || uses[a->src[0]] != 1 || r->src[1] != a->src[3] || ir_rope_norm_of(r).kind) return SB_OK;
    if (cx->target && r->ne[2] > rope_max_t(cx->target, ir_attn_block_size(a) > 0)) return SB_OK;
    if (cx->target && cx->target->attn_fuse_max_head_dim > 0 && ir_attn_of(a).head_dim > cx->target->attn_fuse_max_head_dim) return SB_OK;
    a->ip[5] = ir_rope_of(r).n_rot, a->ip[6] = ir_rope_of(r).mode;
    a->fp[2] = ir_rope_of(r).freq_base, a->fp[3] = ir_rope_of(r).freq_scale, a->fp[4] = ir_rope_attn_factor(r);
    a->src[ir_attn_q_rope_ff_slot(a)] = r->src[2]; /* freq factors or IR_NONE */
    a->src[0] = r->src[0];
    *changed = true;
    return SB_OK;
}

sb_status pass_fuse_attn_rope(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && rope_max_t(cx->target, true) <= 0) return SB_OK;
    return pass_rewrite_nodes(g, fuse_rope_into_attn, cx);
}
