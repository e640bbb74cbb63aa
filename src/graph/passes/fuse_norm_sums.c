/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_norm_sums.c — split-K partials as a value the norm sums: a lone MATMUL m whose
 * result v goes only into the residual sum h = v + o that the RMS_NORM_QUANT n right after it
 * normalizes — m adds o itself (its addend: h is m) and n reads m, or n is an ADD_RMS_NORM_QUANT of
 * v and o — is summed by n (ip[IR_NORM_SUMS] = n - m, ir_norm_sums_of): where m's launch splits K,
 * it leaves the partials unreduced and n sums them with o as their epilogue (the reduce kernel's
 * order: the same h), writing h to h's memory. n then reads o too, so the memory plan keeps o live
 * until n (plan_memory): n's output never lands on o.
 * Nodes between m and n may be only ones that launch nothing (views, results, inputs, stores another
 * launch performs). Targets ask through norm_sum_fits (shape and types only; CUDA: an int8 MMA GEMM
 * that splits K at the plan's T, and a norm too wide for one wave of its blocks).
 * Layer 2 (graph). Pre: verified; after fuse_add_norm and fuse_matmul_add. Post: verified; norms
 * marked, nothing moved.
 *
 * before (T = 16):
 *   %25 = matmul(%7, %24, %0) : f32[256,16]
 *   %26 = rms_norm_quant(%25, %10) eps=9.99999997e-07 : Q8_K[256,16]
 * after: " sums_partials_of=%25" on %26 (tests/graph/fuse_norm_sums.ir).
 */
#include "graph/plan.h"

/* the norm summing matmul m's partials: the next node that launches work, of the shape above; IR_NONE if none */
static ir_ref norm_of(const ir_graph *g, const int32_t *uses, ir_ref m) {
    const ir_node *mn = &g->nodes[m];
    const bool own = ir_matmul_addend(mn) != IR_NONE; /* m adds o itself; else n's fused ADD does */
    ir_ref n = m + 1;
    while (n < g->n_nodes && ir_launches_nothing(&g->nodes[n])) n++;
    if (n >= g->n_nodes) return IR_NONE;
    const ir_node *nn = &g->nodes[n];
    if (nn->op != (own ? IR_OP_RMS_NORM_QUANT : IR_OP_ADD_RMS_NORM_QUANT) || ir_nelem(nn) != ir_nelem(mn)) return IR_NONE;
    if (own) return nn->src[0] == m ? n : IR_NONE;
    if (uses[m] != 1 || (nn->src[0] != m && nn->src[1] != m) || ir_result_of(g, n, 1) == IR_NONE) return IR_NONE;
    const ir_ref o = nn->src[0] == m ? nn->src[1] : nn->src[0];
    return ir_nelem(&g->nodes[o]) == ir_nelem(mn) ? n : IR_NONE;
}

static sb_status mark_norm_sum(ir_graph *g, int32_t *uses, ir_ref m, const pass_ctx *cx, bool *changed) {
    (void)changed; /* marks only: nothing to compact */
    if (g->nodes[m].op != IR_OP_MATMUL) return SB_OK;
    const ir_ref n = norm_of(g, uses, m);
    if (n != IR_NONE && ir_norm_sums_of(&g->nodes[n], n) == IR_NONE && cx->target->norm_sum_fits(g, &g->nodes[m], &g->nodes[n]))
        g->nodes[n].ip[IR_NORM_SUMS] = n - m;
    return SB_OK;
}

sb_status pass_fuse_norm_sums(ir_graph *g, const pass_ctx *cx) {
    if (!cx->target || !cx->target->norm_sum_fits) return SB_OK;
    return pass_rewrite_nodes(g, mark_norm_sum, cx);
}
