/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_group_jobs.c — split-K partials as a value the consumer sums: a matmul group
 * (pass fuse_matmul_group) whose every result is read only by the jobs of the launch of jobs that
 * runs right after it (pass fuse_rope_jobs; a prefill layer's K, V, Q and their RoPE and cache
 * writes), each job reading it as its x, is marked (ip[IR_GROUP_JOBS_SUM], ir_group_jobs_sum): where
 * its launch splits K, it leaves the split's partials unreduced and the jobs sum them as they load x
 * (the reduce kernel's order: the same bits) — no reduce kernel. Where it does not split, the group
 * writes its results as ever. The results keep their memory (the unsplit case writes them).
 * Nodes between the group and the jobs may be only ones that launch nothing (views, results, inputs,
 * stores another launch performs). Targets ask through group_jobs_fits (shape and types only; CUDA:
 * a T > 8 int8 MMA group without a GLU).
 * Layer 2 (graph). Pre: verified; after fuse_rope_jobs. Post: verified; groups marked, nothing moved.
 *
 * before (T = 16):
 *   %15 = matmul_group(%14, %4, %5, %3, %6) n=3 addends=0x4 : f32[128,16]
 *   %16 = result(%15) k=1 : f32[128,16]
 *   %17 = result(%15) k=2 : f32[256,16]
 *   %18 = reshape(%15) : f32[64,2,16]
 *   %19 = rope_store(%8, %18, %1) ... jobs_next=%20 : f16[128,16]
 *   %20 = kv_store(%9, %16, %1) jobs_next=%22 : f16[128,16]
 *   %21 = reshape(%17) : f32[64,4,16]
 *   %22 = rope(%21, %1) ... : f32[64,4,16]
 * after: the same, with " jobs_sum_partials" on %15 (tests/graph/fuse_group_jobs.ir).
 */
#include "graph/plan.h"

static bool in_launch(const ir_graph *g, ir_ref first, ir_ref q) { /* is q a job of the launch starting at first? */
    for (ir_ref j = first; j != IR_NONE; j = ir_job_next(&g->nodes[j], j))
        if (j == q) return true;
    return false;
}

/* is every reader of v (through views of it) a job of the launch starting at first, reading it as its x? */
static bool read_by_jobs_only(const ir_graph *g, ir_ref v, ir_ref first) {
    for (ir_ref q = v + 1; q < g->n_nodes; q++) {
        const ir_node *qn = &g->nodes[q];
        if (qn->op == IR_OP_RESULT) continue; /* names its producer, reads nothing */
        for (int a = 0; a < IR_MAX_SRC && qn->src[a] != IR_NONE; a++) {
            if (qn->src[a] != v) continue;
            if (qn->op == IR_OP_RESHAPE || qn->op == IR_OP_VIEW) {
                if (!read_by_jobs_only(g, q, first)) return false;
            } else if (!in_launch(g, first, q) || a != ir_job_x_src(qn)) {
                return false;
            }
        }
    }
    return true;
}

sb_status pass_fuse_group_jobs(ir_graph *g, const pass_ctx *cx) {
    const plan_target *t = cx->target;
    if (!t || !t->group_jobs_fits) return SB_OK;
    for (ir_ref i = 0; i < g->n_nodes; i++) {
        ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_MATMUL_GROUP || ir_group_glu(n) || !t->group_jobs_fits(g, n)) continue;
        ir_ref j = i + 1; /* the next node that launches work: the launch of jobs */
        while (j < g->n_nodes && ir_launches_nothing(&g->nodes[j])) j++;
        if (j >= g->n_nodes || !ir_is_job_op(g->nodes[j].op) || !t->rope_job_fits || !t->rope_job_fits(g, &g->nodes[j], 0)) continue;
        bool ok = true;
        for (int k = 0; k < ir_group_n(n) && ok; k++) {
            const ir_ref m = k ? ir_result_of(g, i, k) : i;
            ok = m != IR_NONE && read_by_jobs_only(g, m, j);
        }
        n->ip[IR_GROUP_JOBS_SUM] = ok;
    }
    return SB_OK;
}
