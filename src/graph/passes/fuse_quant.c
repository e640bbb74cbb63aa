/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_quant.c — the QUANTIZE-node walk of the quantize fusions (fuse_quant.h).
 * Layer 2 (graph). Runs once per plan: the matcher is called through a pointer once per QUANTIZE.
 */
#include "fuse_quant.h"

#include <stdlib.h>

sb_status fuse_into_quantize(ir_graph *g, const char *pass, quant_fuse_fn fuse) {
    int32_t n = g->n_nodes;
    int32_t *uses = ir_use_counts_new(g);
    if (!uses) return sb_fail_context(SB_ERR_OOM, "%s", pass);
    for (int32_t i = 0; i < n; i++) {
        const ir_node q = g->nodes[i];   /* a copy: ir_append may move g->nodes */
        if (q.op != IR_OP_QUANTIZE) continue;
        ir_node f;
        if (!fuse(g, uses, q.src[0], &f)) continue;
        f.dtype = q.dtype;
        ir_ref r = ir_append(g, &f);
        if (r == IR_NONE) break;
        ir_replace_uses(g, i, r);
    }
    free(uses);
    SB_TRY(g->status);
    return ir_compact(g);
}
