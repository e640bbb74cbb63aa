/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/cuda_fusion_print.c — the executor's own fusions of a plan as text, after the planner's
 * IR dump (SB_DUMP_IR=after-all, or a spec naming "launches"): one line per node that takes part in
 * one, in the IR's %numbers, so the two read together show every fusion that runs. Example:
 *   %20 result: also stores V into %21;
 *   %21 kv_store: in %17's launch;
 * Layer 2 (runtime), CUDA builds only. Prints only when asked (the caller checks the spec).
 */
#ifdef SB_HAVE_CUDA

#include "runtime/cuda_fusion.h"

/* the jobs after i of i's launch of jobs (pass fuse_rope_jobs: ir_job_next) */
static void chain(FILE *f, const char *what, const ir_graph *g, int32_t i) {
    if (ir_job_next(&g->nodes[i], i) == IR_NONE) return;
    fprintf(f, " %s", what);
    for (ir_ref m = ir_job_next(&g->nodes[i], i); m != IR_NONE; m = ir_job_next(&g->nodes[m], m)) fprintf(f, " %%%d", (int)m);
    fprintf(f, ";");
}

/* the node whose launch performs skipped node j (its launch of jobs; its V store or K rope:
 * a matmul, a matmul group or one of its results, which its group launches), or -1 */
static int32_t leader_of(const ir_graph *g, const cuda_fusions *c, int32_t j) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (c->vstore[i] == j || c->krope[i] == j) return g->nodes[i].op == IR_OP_RESULT ? g->nodes[i].src[0] : c->skip[i] ? leader_of(g, c, i) : i;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (c->skip[i]) continue;
        for (ir_ref m = ir_job_next(&g->nodes[i], i); m != IR_NONE; m = ir_job_next(&g->nodes[m], m))
            if (m == j) return i;
    }
    return -1;
}

static bool annotated(const ir_graph *g, const cuda_fusions *c, int32_t i) {
    return c->skip[i] || c->vstore[i] >= 0 || ir_job_next(&g->nodes[i], i) != IR_NONE || ir_group_jobs_sum(&g->nodes[i]) ||
           c->krope[i] >= 0 || c->nsum[i] >= 0;
}

void cuda_fusions_print(const plan *p, const cuda_fusions *c, FILE *f) {
    const ir_graph *g = p->g;
    int32_t skipped = 0;
    fprintf(f, "// ---- CUDA executor fusions (nodes of the plan above) ----\n");
    for (int32_t i = 0; c->skip && i < g->n_nodes; i++) {
        if (!annotated(g, c, i)) continue;
        skipped += c->skip[i];
        fprintf(f, "%%%d %s:", (int)i, ir_ops[g->nodes[i].op].name);
        if (c->skip[i]) {
            const int32_t l = leader_of(g, c, i);
            if (l >= 0) fprintf(f, " in %%%d's launch;", (int)l);
            else fprintf(f, " done by another node's launch;");
        }
        if (!c->skip[i]) chain(f, "one rope-jobs launch with", g, i);
        if (c->vstore[i] >= 0) fprintf(f, " also stores V into %%%d;", (int)c->vstore[i]);
        if (c->krope[i] >= 0) fprintf(f, " also rotates K into %%%d;", (int)c->krope[i]);
        if (c->nsum[i] >= 0) fprintf(f, " leaves its split-K partials to %%%d;", (int)c->nsum[i]);
        if (ir_group_jobs_sum(&g->nodes[i])) fprintf(f, " its rope jobs sum its partials;");
        fputc('\n', f);
    }
    fprintf(f, "// %d nodes run inside other launches\n", (int)skipped);
}

#endif /* SB_HAVE_CUDA */
