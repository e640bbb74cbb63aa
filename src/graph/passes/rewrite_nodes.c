/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/rewrite_nodes.c — the frame the node-rewriting passes share (plan.h
 * pass_rewrite_nodes): the use counts once, the pass's rewrite offered every node the graph had
 * on entry, the first error returned as it is, one ir_compact at the end when anything changed.
 * Layer 2 (graph). Runs once per pass per plan: the rewrite is called through a pointer per node.
 */
#include "graph/plan.h"

#include <stdlib.h>

sb_status pass_rewrite_nodes(ir_graph *g, pass_node_rewrite rewrite, const pass_ctx *cx) {
    const int32_t n = g->n_nodes; /* nodes a rewrite appends are not offered */
    int32_t *uses = ir_use_counts_new(g);
    if (!uses) return SB_ERR_OOM;
    sb_status st = SB_OK;
    bool changed = false;
    for (int32_t i = 0; st == SB_OK && i < n; i++) st = rewrite(g, uses, i, cx, &changed);
    free(uses);
    SB_TRY(st);
    SB_TRY(ir_graph_status(g)); /* an append that failed inside a rewrite */
    return changed ? ir_compact(g) : SB_OK;
}
