/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_norm_rope.c — a per-head RMSNorm (rms_norm over ne[0] = the head dim, then
 * optionally times a [D] weight) read only by the RoPE that rotates it becomes part of that rope:
 * the rope normalises each head row as it loads it (ir_rope_norm_of). Qwen3, Gemma 3 and Gemma 4
 * norm Q and K this way before RoPE; the normed f32 heads never reach memory and one node (one
 * launch on CUDA, one dispatch and barrier on the CPU) replaces two. fuse_rope_store, after it,
 * carries the norm into K's rope_store. Numerics: the norm's scale as rms_norm computes it, the
 * value rounded after the scale and after the weight as rms_norm then mul did, then the same
 * rotation — the same bits wherever the executor sums the squares in the order of its rms_norm.
 * Targets whose rope runs the norm ask for it (plan_target.fuse_norm_rope).
 * Layer 2 (graph). Pre: verified; before fuse_elementwise (which would take the norm and its
 * weight into a FUSED chain). Post: verified; the norm and its mul are dropped.
 *
 * before:
 *   %14 = rms_norm(%13) eps=1e-06 : f32[64,2,2]
 *   %15 = mul(%14, %5) : f32[64,2,2]
 *   %16 = rope(%15, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f32[64,2,2]
 * after:
 *   %14 = rope(%13, %1, %5) n_rot=64 mode=neox base=1000000 fscale=1 norm*w eps=1e-06 : f32[64,2,2]
 * A kv_store of a head norm (through reshapes; Gemma 4's weightless V norm) takes it the same way,
 * its head dim in ip[0]: the normed V never reaches memory.
 *   %17 = rms_norm(%16) eps=1e-06 : f32[64,2,2]
 *   %18 = reshape(%17) : f32[128,2]
 *   %19 = kv_store(%9, %18, %1) : f16[128,16]
 * after:
 *   %17 = reshape(%16) : f32[128,2]
 *   %18 = kv_store(%9, %17, %1) norm head_dim=64 eps=1e-06 : f16[128,16]
 * Not fused: a norm (or its product) that anything else reads, a weight that is not f32 [D], a
 * rope or store that already has a norm.
 */
#include "graph/plan.h"

#include <stdint.h>

/* is w an f32 [D] row the head norm's weight can be? */
static bool head_weight(const ir_node *w, int64_t D) {
    return w->dtype == SB_TYPE_F32 && w->ne[0] == D && w->ne[1] == 1 && w->ne[2] == 1 && w->ne[3] == 1;
}

/* the rms_norm that value x is (or its product with a weight; each read only by the next), or
 * IR_NONE; *weight the weight or IR_NONE */
static ir_ref norm_of(const ir_graph *g, const int32_t *uses, ir_ref x, ir_ref *weight) {
    *weight = IR_NONE;
    if (uses[x] != 1) return IR_NONE;
    const ir_node *m = &g->nodes[x];
    if (m->op == IR_OP_MUL) {
        const ir_node *a = &g->nodes[m->src[0]];
        if (a->op != IR_OP_RMS_NORM || uses[m->src[0]] != 1 || !head_weight(&g->nodes[m->src[1]], m->ne[0])) return IR_NONE;
        *weight = m->src[1];
        return m->src[0];
    }
    return m->op == IR_OP_RMS_NORM ? x : IR_NONE;
}

/* kv_store i of a head norm through reshapes read only by the next: the store normalises instead,
 * its x the norm's input through the reshape the store read ([Dkv, T] still: the heads are
 * consecutive rows). Returns whether it changed. */
static bool fold_into_store(ir_graph *g, const int32_t *uses, int32_t i) {
    ir_ref x = g->nodes[i].src[1], outer = IR_NONE;
    while (g->nodes[x].op == IR_OP_RESHAPE && uses[x] == 1) outer = outer == IR_NONE ? x : outer, x = g->nodes[x].src[0];
    ir_ref w;
    const ir_ref nm = norm_of(g, uses, x, &w);
    const int64_t D = nm != IR_NONE ? g->nodes[nm].ne[0] : 0, Dkv = g->nodes[i].ne[0];
    if (nm == IR_NONE || Dkv % D || D > INT32_MAX) return false;
    if (outer != IR_NONE) g->nodes[outer].src[0] = g->nodes[nm].src[0]; /* [Dkv, T] over the unnormed heads */
    else g->nodes[i].src[1] = g->nodes[nm].src[0];                       /* a norm over whole rows: already [Dkv, T] */
    ir_node *s = &g->nodes[i];
    s->src[3] = w;
    s->ip[0] = (int32_t)D;
    s->ip[IR_ROPE_NORM] = w != IR_NONE ? IR_ROPE_NORM_WEIGHT : IR_ROPE_NORM_PLAIN;
    s->fp[IR_ROPE_NORM_EPS] = ir_f0(&g->nodes[nm]);
    return true;
}

/* rope i of a head norm: the rope normalises instead, reading the norm's input. Returns whether
 * it changed. */
static bool fold_into_rope(ir_graph *g, const int32_t *uses, int32_t i) {
    ir_node *r = &g->nodes[i];
    ir_ref w;
    const ir_ref nm = norm_of(g, uses, r->src[0], &w);
    if (nm == IR_NONE) return false;
    const ir_ref ff = ir_rope_ff(r);
    r->src[0] = g->nodes[nm].src[0];
    r->src[2] = ff != IR_NONE ? ff : w;
    r->src[3] = ff != IR_NONE ? w : IR_NONE;
    r->ip[IR_ROPE_NORM] = w != IR_NONE ? IR_ROPE_NORM_WEIGHT : IR_ROPE_NORM_PLAIN;
    r->fp[IR_ROPE_NORM_EPS] = ir_f0(&g->nodes[nm]);
    return true; /* in place: the norm's input and the weight precede the norm, which precedes the rope */
}

/* rope or kv_store i without a norm of its own that reads a head norm -> it normalises itself */
static sb_status fold_norm_at(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed) {
    (void)cx;
    const ir_node *n = &g->nodes[i];
    if (ir_rope_norm_of(n).kind != IR_ROPE_NORM_NONE) return SB_OK;
    if (n->op == IR_OP_ROPE) *changed |= fold_into_rope(g, uses, i);
    else if (n->op == IR_OP_KV_STORE) *changed |= fold_into_store(g, uses, i);
    return SB_OK;
}

sb_status pass_fuse_norm_rope(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_norm_rope) return SB_OK;
    return pass_rewrite_nodes(g, fold_norm_at, cx);
}
