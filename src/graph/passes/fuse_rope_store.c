/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_rope_store.c — a RoPE whose only reader (through reshapes) is the KV-cache
 * store at the same positions becomes one node that rotates each token's row and writes it into
 * the cache column: the rotated f32 row never reaches the arena, and one node (one dispatch, one
 * barrier on the CPU) replaces two. Numerics are unchanged: the same rotation in f32, then the
 * cache's rounding. Targets that run ROPE_STORE ask for it (plan_target.fuse_rope_store).
 * Layer 2 (graph). Post: verified; the rope and its reshapes are dropped when nothing else reads them.
 *
 * before:
 *   %17 = rope(%16, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f32[64,2,2]
 *   %18 = reshape(%17) : f32[128,2]
 *   %19 = kv_store(%8, %18, %1) : f16[128,16]
 * after:
 *   %17 = rope_store(%8, %16, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f16[128,16]
 * A store at other rows than the rope's positions (a paged decoder's kv_store at the slots input)
 * fuses too, keeping both: rope_store(cache, x, pos, rows, ff?) with ip[IR_STORE_ROWS] set (ir.h).
 * A rope that normalises its heads (pass fuse_norm_rope) keeps its norm: the weight is the store's
 * last source (cache, x, pos, rows?, ff?, w?).
 */
#include "graph/plan.h"

#include <string.h>

/* The ROPE node feeding store s through reshapes that nothing else reads; IR_NONE if none. */
static ir_ref rope_of_store(const ir_graph *g, const int32_t *uses, const ir_node *s) {
    ir_ref x = s->src[1];
    while (g->nodes[x].op == IR_OP_RESHAPE && uses[x] == 1) x = g->nodes[x].src[0];
    const ir_node *r = &g->nodes[x];
    if (r->op != IR_OP_ROPE || uses[x] != 1) return IR_NONE;
    return x;
}

/* kv_store i of a rope read by it alone (through reshapes) -> one rope_store in the store's place */
static sb_status fuse_rope_into_store(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    (void)cx;
    ir_node *s = &g->nodes[i];
    if (s->op != IR_OP_KV_STORE || ir_rope_norm_of(s).kind) return SB_OK; /* a store's own head norm stays its own */
    const ir_ref r = rope_of_store(g, uses, s);
    if (r == IR_NONE) return SB_OK;
    const ir_node *rope = &g->nodes[r];
    ir_node f = *rope; /* its rotation params in ip / fp */
    f.op = IR_OP_ROPE_STORE;
    f.dtype = s->dtype;
    memcpy(f.ne, s->ne, sizeof f.ne);
    memcpy(f.name, s->name, sizeof f.name);
    for (int k = 0; k < IR_MAX_SRC; k++) f.src[k] = IR_NONE;
    const bool rows = rope->src[1] != s->src[2]; /* a paged store: rotated at pos, written at the slots */
    const ir_ref ff = ir_rope_ff(rope), w = ir_rope_norm_of(rope).weight;
    f.ip[IR_STORE_ROWS] = rows;
    int k = 0;
    f.src[k++] = s->src[0], f.src[k++] = rope->src[0], f.src[k++] = rope->src[1];
    if (rows) f.src[k++] = s->src[2];
    if (ff != IR_NONE) f.src[k++] = ff;
    if (w != IR_NONE) f.src[k++] = w; /* a head norm (pass fuse_norm_rope) comes along: ip/fp are the rope's */
    *s = f; /* in place: every source precedes the rope, which precedes the store */
    *changed = true;
    return SB_OK;
}

sb_status pass_fuse_rope_store(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_rope_store) return SB_OK;
    return pass_rewrite_nodes(g, fuse_rope_into_store, cx);
}
