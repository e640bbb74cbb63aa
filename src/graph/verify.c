/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/verify.c — the IR verifier, run after building and after every pass in the pipeline.
 * Layer 2 (graph). Checks: op in range, sources strictly earlier (topological order), arity,
 * shape and dtype equal to what the op's shape function derives, inputs named, OUTPUT names
 * unique, kv_store chains rooted at a kv input, select_rows rows from an i32 input, every RESULT
 * right after its producer and its lower results, ring caches read only by windowed attention
 * of at most C - window + 1 tokens, a rope job's link (ir_job_next) to a later rope or store node, a norm's (ir_norm_sums_of) to an
 * earlier matmul.
 * Failure: SB_ERR_INTERNAL naming the node index, op and reason (a pass or builder bug).
 * Non-goals: checking numerics or bound data (the executor validates data per run).
 */
#include "graph/ir.h"

#include <string.h>

/* attention node i may read a ring cache only with a window, and one of >= window + T - 1 rows */
static sb_status check_ring_reader(const ir_graph *g, int32_t i) {
    const ir_node *n = &g->nodes[i];
    const ir_ref rk = ir_kv_root(g, n->src[1]), rv = ir_kv_root(g, n->src[2]);
    const bool ring_k = rk != IR_NONE && ir_kv_is_ring(&g->nodes[rk]), ring_v = rv != IR_NONE && ir_kv_is_ring(&g->nodes[rv]);
    if ((ring_k || ring_v) && (ring_k != ring_v || g->nodes[rk].ne[1] != g->nodes[rv].ne[1]))
        return sb_fail(SB_ERR_INTERNAL, "ir verify: attention %%%d reads K and V caches of different ring lengths", (int)i);
    for (int j = 1; j <= 2; j++) {
        ir_ref kv = ir_kv_root(g, n->src[j]);
        if (kv == IR_NONE || !ir_kv_is_ring(&g->nodes[kv])) continue;
        const int64_t C = g->nodes[kv].ne[1], W = ir_attn_of(n).window, T = g->nodes[n->src[0]].ne[2];
        if (W <= 0 || C < W + T - 1)
            return sb_fail(SB_ERR_INTERNAL, "ir verify: attention %%%d reads the ring cache \"%s\" of %lld rows with window %lld and %lld tokens "
                           "(a ring needs a window and window + T - 1 rows)", (int)i, g->nodes[kv].name, (long long)C, (long long)W, (long long)T);
    }
    return SB_OK;
}

sb_status ir_verify(const ir_graph *g) {
    if (g->status != SB_OK) return sb_fail(g->status, "ir: the graph recorded an earlier failure");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if ((unsigned)n->op >= IR_OP_COUNT) return sb_fail(SB_ERR_INTERNAL, "ir verify: node %d op %d out of range", (int)i, (int)n->op);
        for (int j = 0; j < IR_MAX_SRC && n->src[j] != IR_NONE; j++)
            if (n->src[j] < 0 || n->src[j] >= i)
                return sb_fail(SB_ERR_INTERNAL, "ir verify: node %%%d (%s) source %d = %%%d is not earlier", (int)i,
                               ir_ops[n->op].name, j, (int)n->src[j]);
        ir_node c = *n;
        sb_status s = ir_infer_shape(g, &c);
        if (s != SB_OK) return sb_fail_context(s, "ir verify: node %%%d (%s)", (int)i, ir_ops[n->op].name);
        if (c.dtype != n->dtype || memcmp(c.ne, n->ne, sizeof c.ne))
            return sb_fail(SB_ERR_INTERNAL, "ir verify: node %%%d (%s) shape %s[%lld,%lld,%lld,%lld], op derives %s[%lld,%lld,%lld,%lld]",
                           (int)i, ir_ops[n->op].name, ir_dtype_name(n->dtype), (long long)n->ne[0], (long long)n->ne[1],
                           (long long)n->ne[2], (long long)n->ne[3], ir_dtype_name(c.dtype), (long long)c.ne[0],
                           (long long)c.ne[1], (long long)c.ne[2], (long long)c.ne[3]);
        if (n->op == IR_OP_OUTPUT)
            for (int32_t k = 0; k < i; k++)
                if (g->nodes[k].op == IR_OP_OUTPUT && !strcmp(g->nodes[k].name, n->name))
                    return sb_fail(SB_ERR_INTERNAL, "ir verify: output \"%s\" defined twice (%%%d, %%%d)", n->name, (int)k, (int)i);
        if ((n->op == IR_OP_WEIGHT || n->op == IR_OP_KV) && !memchr(n->name, 0, IR_NAME_MAX))
            return sb_fail(SB_ERR_INTERNAL, "ir verify: node %%%d name not terminated", (int)i);
        if (n->op == IR_OP_RESULT) {
            const ir_node *prev = &g->nodes[i - 1];
            int prev_k = prev->op == IR_OP_RESULT ? ir_result_index(prev) : 0;
            ir_ref prev_p = prev->op == IR_OP_RESULT ? prev->src[0] : i - 1;
            if (prev_p != n->src[0] || ir_result_index(n) <= prev_k)
                return sb_fail(SB_ERR_INTERNAL, "ir verify: result %%%d of %%%d is not right after its producer and its lower results",
                               (int)i, (int)n->src[0]);
        }
        const ir_ref nx = ir_job_next(n, i); /* pass fuse_rope_jobs: a later job, read by none of its launch */
        if (nx != IR_NONE && (nx >= g->n_nodes || !ir_is_job_op(g->nodes[nx].op)))
            return sb_fail(SB_ERR_INTERNAL, "ir verify: job %%%d links to %%%d, no rope / store job", (int)i, (int)nx);
        const ir_ref mm = ir_norm_sums_of(n, i); /* pass fuse_norm_sums: an earlier matmul */
        if (mm != IR_NONE && (mm < 0 || g->nodes[mm].op != IR_OP_MATMUL))
            return sb_fail(SB_ERR_INTERNAL, "ir verify: norm %%%d sums the partials of %%%d, no matmul", (int)i, (int)mm);
        if (n->op == IR_OP_ATTENTION) SB_TRY(check_ring_reader(g, i));
        if (n->op == IR_OP_SELECT_ROWS && g->nodes[n->src[1]].op != IR_OP_OUT_ROWS)
            return sb_fail(SB_ERR_INTERNAL, "ir verify: select_rows %%%d rows must come from out_rows", (int)i);
    }
    return SB_OK;
}
