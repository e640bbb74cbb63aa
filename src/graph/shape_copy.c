/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/shape_copy.c — the shape functions of the copying layout ops, concat and permute (for
 * graph/shape.c). Both take f32 values and produce a new contiguous f32 value: the IR has no
 * strides, so a permuted or joined value is written out once (ops/ops_ref.c: op_concat,
 * op_permute).
 * Layer 2 (graph).
 */
#include "graph/ir.h"

#include "quant/types.h"

sb_status ir_shape_concat(const ir_graph *g, const ir_node *n, int ns, int64_t ne[4]) {
    const int dim = ir_concat_dim(n);
    if (dim < 0 || dim > 3) return sb_fail(SB_ERR_INTERNAL, "concat: dim %d (0..3)", dim);
    const ir_node *a = &g->nodes[n->src[0]];
    for (int k = 0; k < 4; k++) ne[k] = a->ne[k];
    ne[dim] = 0;
    for (int i = 0; i < ns; i++) {
        const ir_node *s = &g->nodes[n->src[i]];
        if (s->dtype != SB_TYPE_F32) return sb_fail(SB_ERR_INTERNAL, "concat: source %d must be f32", i);
        for (int k = 0; k < 4; k++)
            if (k != dim && s->ne[k] != a->ne[k])
                return sb_fail(SB_ERR_INTERNAL, "concat: source %d has ne[%d] = %lld, source 0 %lld (only ne[%d] may differ)", i, k,
                               (long long)s->ne[k], (long long)a->ne[k], dim);
        ne[dim] += s->ne[dim];
    }
    return SB_OK;
}

sb_status ir_shape_permute(const ir_graph *g, const ir_node *n, int64_t ne[4]) {
    const ir_node *a = &g->nodes[n->src[0]];
    if (a->dtype != SB_TYPE_F32) return sb_fail(SB_ERR_INTERNAL, "permute: input must be f32");
    unsigned seen = 0;
    for (int k = 0; k < 4; k++) {
        const int32_t p = n->ip[k];
        if (p < 0 || p > 3 || (seen & (1u << p)))
            return sb_fail(SB_ERR_INTERNAL, "permute: %d,%d,%d,%d is not a permutation of 0..3", n->ip[0], n->ip[1], n->ip[2], n->ip[3]);
        seen |= 1u << p;
        ne[k] = a->ne[p];
    }
    return SB_OK;
}
