/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_rope_jobs.c — ROPE / ROPE_STORE / KV_STORE nodes that run one after another (a
 * prefill layer's K rope + cache write, V cache write and Q rope after its K, V, Q group) become the
 * jobs of one launch: each job but the last links to the next (ip[IR_JOB_NEXT], ir_job_next); the
 * launch runs at the first job's place and the others run nowhere else. The jobs run side by side,
 * so the memory plan keeps every value a job reads until the launch's last job (plan_memory): no
 * job's output lands over another job's input, whatever the plan's order.
 * Nodes between two jobs may be only ones that launch nothing: views, results, inputs and stores
 * another launch performs (by_launch). A job joins while it reads no earlier job's output (through
 * views), rotates at the launch's one set of positions (a KV_STORE rotates nothing) and the target
 * takes it as job k (rope_job_fits: shape and types only; CUDA: cu_rope_jobs' jobs, a Q rope after
 * the stores only where its group splits K — cuda_fusion.c), up to rope_jobs_max jobs.
 * Layer 2 (graph). Pre: verified; the last pass (links are node distances: no compaction after it).
 * Post: verified; jobs linked, no node added or removed.
 *
 * before (T = 64; the group's K, V, Q):
 *   %20 = rope_store(%9, %17, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f16[128,128]
 *   %21 = kv_store(%10, %16, %1) : f16[128,128]
 *   %22 = reshape(%18) : f32[64,4,64]
 *   %23 = rope(%22, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f32[64,4,64]
 * after: " jobs_next=%21" on %20, " jobs_next=%23" on %21 (tests/graph/fuse_rope_jobs.ir).
 */
#include "graph/plan.h"

#include <stdlib.h>

/* the positions a job rotates at: (x, pos, ...) for a ROPE, (cache, x, pos, ...) for a ROPE_STORE; a KV_STORE none */
static ir_ref job_pos(const ir_node *n) { return n->op == IR_OP_KV_STORE ? IR_NONE : n->src[ir_job_pos_src(n)]; }

static ir_ref root_of(const ir_graph *g, ir_ref v) {
    while (g->nodes[v].op == IR_OP_RESHAPE || g->nodes[v].op == IR_OP_VIEW) v = g->nodes[v].src[0];
    return v;
}

/* does node j read (through views) the output of a job mem[0..n)? */
static bool reads_a_job(const ir_graph *g, ir_ref j, const ir_ref *mem, int n) {
    for (int a = 0; a < IR_MAX_SRC && g->nodes[j].src[a] != IR_NONE; a++) {
        const ir_ref r = root_of(g, g->nodes[j].src[a]);
        for (int q = 0; q < n; q++)
            if (r == mem[q]) return true;
    }
    return false;
}

static bool job_ok(const ir_graph *g, const plan_target *t, ir_ref i, int k) {
    const ir_node *n = &g->nodes[i];
    return ir_is_job_op(n->op) && !ir_store_by_launch(n) && t->rope_job_fits(g, n, k);
}

/* the jobs of the launch starting at i into mem (mem[0] = i); their count */
static int gather_jobs(const ir_graph *g, const plan_target *t, ir_ref i, ir_ref *mem, int max) {
    int n = 1;
    mem[0] = i;
    ir_ref pos = job_pos(&g->nodes[i]); /* the launch's one rotation positions (IR_NONE: none yet) */
    for (ir_ref j = i + 1; j < g->n_nodes && n < max; j++) {
        const ir_node *m = &g->nodes[j];
        if (ir_launches_nothing(m)) continue;
        if (!job_ok(g, t, j, n) || reads_a_job(g, j, mem, n)) break;
        if (job_pos(m) != IR_NONE && pos != IR_NONE && job_pos(m) != pos) break;
        if (pos == IR_NONE) pos = job_pos(m);
        mem[n++] = j;
    }
    return n;
}

sb_status pass_fuse_rope_jobs(ir_graph *g, const pass_ctx *cx) {
    const plan_target *t = cx->target;
    if (!t || !t->rope_job_fits || t->rope_jobs_max < 2) return SB_OK;
    const int max = t->rope_jobs_max < 16 ? t->rope_jobs_max : 16;
    for (ir_ref i = 0; i < g->n_nodes; i++) {
        if (!job_ok(g, t, i, 0)) continue;
        ir_ref mem[16];
        const int n = gather_jobs(g, t, i, mem, max);
        for (int q = 0; q + 1 < n; q++) g->nodes[mem[q]].ip[IR_JOB_NEXT] = mem[q + 1] - mem[q];
        i = mem[n - 1]; /* a launch's jobs start no other */
    }
    return SB_OK;
}
