/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_elementwise.c — chains of elementwise ops (add, mul, scale, softcap, silu,
 * gelu_tanh) with at most one row reduction (rms_norm) become one FUSED node: bias add, residual
 * add, post-norm x weight + residual, output bias + softcap. Each intermediate has exactly one
 * consumer (the next step), so nothing observable disappears. The fused node processes one row
 * at a time and applies the steps in order in f32, so results are bit-identical to the chain.
 * Layer 2 (graph). Runs after the quantize fusions (which claim norm->quantize first).
 * Pre: verified. Post: verified; chains of >= 2 steps replaced. Step encoding: see ir.h (FUSED).
 *
 * before (gemma3: x + RMSNorm(a; post_attention_norm)):
 *   %20 = rms_norm(%19) eps=1e-06 : f32[64,4]
 *   %21 = mul(%20, %3) : f32[64,4]
 *   %22 = add(%21, %10) : f32[64,4]
 * after:
 *   %20 = fused(%19, %3, %10) [rms_norm eps=1e-06; mul @1; add @2] : f32[64,4]
 */
#include "graph/plan.h"

#include <stdlib.h>
#include <string.h>

// ---- chain discovery ----

static bool same_shape(const ir_node *a, const ir_node *b) { return !memcmp(a->ne, b->ne, sizeof a->ne); }

static bool fusable(const ir_node *n) { return (ir_ops[n->op].flags & OPF_EW) && n->dtype == SB_TYPE_F32; }

/* The source slot of binary node n that carries the chain (full shape), preferring a fusable
 * single-use producer when want_pred; -1 if none qualifies. */
static int chain_slot(const ir_graph *g, const ir_node *n, const int32_t *uses, const uint8_t *absorbed, bool want_pred,
                      bool have_reduction) {
    int nsrc = (n->op == IR_OP_ADD || n->op == IR_OP_MUL) ? 2 : 1;
    for (int j = 0; j < nsrc; j++) {
        const ir_node *s = &g->nodes[n->src[j]];
        if (!same_shape(s, n)) continue;
        if (!want_pred) return j;
        if (fusable(s) && uses[n->src[j]] == 1 && !absorbed[n->src[j]] &&
            !(have_reduction && (ir_ops[s->op].flags & OPF_REDUCE)))
            return j;
    }
    return -1;
}

// ---- pass ----

sb_status pass_fuse_elementwise(ir_graph *g, const pass_ctx *cx) {
    if (cx->target && !cx->target->fuse_elementwise) return SB_OK;
    int32_t n = g->n_nodes;
    int32_t *uses = malloc((size_t)(n ? n : 1) * sizeof *uses);
    uint8_t *absorbed = calloc((size_t)(n ? n : 1), 1);
    if (!uses || !absorbed) {
        free(uses);
        free(absorbed);
        return sb_fail(SB_ERR_OOM, "fuse_elementwise: %d nodes", (int)n);
    }
    ir_use_counts(g, uses);
    for (int32_t i = n - 1; i >= 0; i--) {
        if (absorbed[i] || !fusable(&g->nodes[i])) continue;
        ir_ref chain[IR_MAX_FUSE];
        int len = 0;
        bool red = false;
        ir_ref cur = i;
        /* walk backwards from the chain's last node */
        for (;;) {
            chain[len++] = cur;
            const ir_node *c = &g->nodes[cur];
            if (ir_ops[c->op].flags & OPF_REDUCE) red = true;
            if (len == IR_MAX_FUSE) break;
            int j = chain_slot(g, c, uses, absorbed, true, red);
            if (j < 0) break;
            cur = c->src[j];
        }
        if (len < 2) continue;
        /* chain[len-1] is the first step; build the fused node */
        ir_node f = ir_proto(IR_OP_FUSED);
        const ir_node *head = &g->nodes[chain[len - 1]];
        int hs = chain_slot(g, head, uses, absorbed, false, false);
        SB_ASSERT(hs >= 0);
        f.src[0] = head->src[hs];
        int nsrc = 1;
        bool ok = true;
        for (int k = len - 1, step = 0; k >= 0; k--, step++) {
            const ir_node *c = &g->nodes[chain[k]];
            int opd = 0;
            if (c->op == IR_OP_ADD || c->op == IR_OP_MUL) {
                ir_ref in = (k == len - 1) ? head->src[hs] : chain[k + 1];
                ir_ref other = c->src[0] == in ? c->src[1] : c->src[0];
                for (int s = 1; s < nsrc; s++)
                    if (f.src[s] == other) opd = s;
                if (!opd) {
                    if (nsrc == IR_MAX_SRC) {
                        ok = false;
                        break;
                    }
                    opd = nsrc;
                    f.src[nsrc++] = other;
                }
            }
            f.ip[1 + step] = (int32_t)c->op | (opd << 8);
            f.fp[step] = c->fp[0];
        }
        if (!ok) continue;
        f.ip[0] = len;
        snprintf(f.name, IR_NAME_MAX, "%s", g->nodes[i].name);
        ir_ref r = ir_append(g, &f);
        if (r == IR_NONE) break;
        ir_replace_uses(g, i, r);
        for (int k = 0; k < len; k++) absorbed[chain[k]] = 1;
    }
    free(uses);
    free(absorbed);
    SB_TRY(g->status);
    return ir_compact(g);
}
