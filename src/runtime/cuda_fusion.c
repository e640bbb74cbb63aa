/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/cuda_fusion.c — the CUDA executor's fusion tables (contract: cuda_fusion.h): indexes of
 * the planner's marks — V's kv_store and K's rope_store a decode GEMV launch performs (pass
 * fuse_launch_store), the rope jobs' launches (fuse_rope_jobs), the groups whose split partials
 * those jobs sum (fuse_group_jobs), the norms that sum a lone GEMM's (fuse_norm_sums) — and the
 * shape-only predicates the CUDA plan target gives those passes and the executor's kernel choice.
 * The memory plan gives every value its place (plan_memory keeps what a launch's jobs or a summing
 * norm read live long enough); nothing here reads it.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA

#include "runtime/cuda_fusion.h"

#include "base/status.h"
#include "quant/types.h"

#include "backend/cuda/kernels.h"

#include <string.h>


bool cf_multi_ok(const ir_graph *g, const ir_node *m) {
    if (m->op != IR_OP_MATMUL) return false;
    const ir_node *w = &g->nodes[m->src[0]], *x = &g->nodes[m->src[1]];
    return x->ne[1] == 1 && ir_nrows(x) == 1 &&
           ((x->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(w->dtype)) || (x->dtype == SB_TYPE_Q8_K && cu_has_mmvq_q8k(w->dtype)));
}

/* matmul m as a segment for cu_gemv_reg_fits: its weight type and rows */
static cu_gemv_seg mm_seg(const ir_graph *g, const ir_node *m) {
    const ir_node *w = &g->nodes[m->src[0]];
    return (cu_gemv_seg){.wtype = w->dtype, .N = w->ne[1]};
}

/* a lone T = 1 GEMV that the registers-before-the-wait kernel takes goes through the fused-GEMV
 * entry as a group of one (k_mmvq otherwise: the wide LM head, whose rows exceed GF_ROWS_MAX, and
 * types or shapes k_gemv_reg refuses) */
bool cf_reg_single(const ir_graph *g, const ir_node *m) {
    const ir_node *w = &g->nodes[m->src[0]], *x = &g->nodes[m->src[1]];
    const cu_gemv_seg q = mm_seg(g, m);
    return cu_gemv_reg_fits(&q, 1, w->ne[0], x->dtype, false);
}

/* May the T = 1 launch of launch — a lone matmul the multi-GEMV entry takes, or a planner group of
 * them (MATMUL_GROUP, one launch) — also perform store (pass fuse_launch_store)? V's kv_store: the
 * launch writes the member's rows into the cache at the positions as well. K's rope_store
 * (cf_launch_store_ok only, cu_config.fuse_ropek): the launch rotates them first — heads of its
 * rows, plain or neox. */
static bool store_launch(const ir_graph *g, const ir_node *launch) {
    return launch->op == IR_OP_MATMUL_GROUP ? g->nodes[launch->src[0]].ne[1] == 1 : cf_multi_ok(g, launch);
}
bool cf_launch_vstore_ok(const ir_graph *g, const ir_node *launch, const ir_node *store) {
    return store_launch(g, launch) && store->op == IR_OP_KV_STORE && !ir_rope_norm_of(store).kind;
}
bool cf_launch_store_ok(const ir_graph *g, const ir_node *launch, const ir_node *store) {
    if (cf_launch_vstore_ok(g, launch, store)) return true;
    if (!store_launch(g, launch) || store->op != IR_OP_ROPE_STORE || ir_rope_norm_of(store).kind) return false; /* no head sum there */
    const ir_node *x = &g->nodes[store->src[1]]; /* (cache, x, pos, ff?) */
    const ir_rope_params rp = ir_rope_of(store);
    return x->ne[2] == 1 && rp.n_rot <= x->ne[0] && rp.n_rot % 2 == 0 && (rp.mode == IR_ROPE_NORMAL || rp.mode == IR_ROPE_NEOX);
}

/* The executor's index of the planner's by_launch stores: vstore[v] / krope[v] = the kv_store /
 * rope_store that the launch computing value v (a matmul, a group, or its RESULT; the store's x
 * through views) performs; the store itself is skipped. */
static void index_launch_stores(const ir_graph *g, cuda_fusions *c) {
    for (int32_t s = 0; s < g->n_nodes; s++) {
        if (!ir_store_by_launch(&g->nodes[s])) continue;
        ir_ref v = g->nodes[s].src[1];
        while (g->nodes[v].op == IR_OP_RESHAPE) v = g->nodes[v].src[0];
        if (g->nodes[s].op == IR_OP_KV_STORE) c->vstore[v] = s;
        else c->krope[v] = s;
        c->skip[s] = 1;
    }
}

/* May group grp (gate and up, MATMUL_GROUP of two without addends: pass fuse_group_glu) write
 * act(gate) * up itself? At T = 1 where one k_gemv_reg launch takes the two as gate/up row pairs: it
 * multiplies them in its epilogue (src_glu's f32 math, so the quantize after it sees the values
 * cu_glu_quant would). At T >= mma_min_t (mma 1) where one int8 MMA launch that never splits K
 * (cu_mma_multi_split 1 with any scratch) takes them as row pairs (cu_matmul_mma_multi pair_glu): one
 * weight type cu_mma_glu_pair_ok takes (a Qwen2.5-0.5B Q4_K_M file's Q5_0 gate/up), one row count. */
static bool glu_pair_fits(const ir_graph *g, const ir_node *grp, bool mma) {
    if (grp->op != IR_OP_MATMUL_GROUP || ir_group_n(grp) != 2 || ir_group_has_addends(grp)) return false;
    const ir_node *x = &g->nodes[grp->src[0]];
    const cu_gemv_seg sg[2] = {{.wtype = g->nodes[ir_group_weight(grp, 0)].dtype, .N = g->nodes[ir_group_weight(grp, 0)].ne[1]},
                               {.wtype = g->nodes[ir_group_weight(grp, 1)].dtype, .N = g->nodes[ir_group_weight(grp, 1)].ne[1]}};
    if (x->ne[1] == 1) return cu_gemv_reg_fits(sg, 2, x->ne[0], x->dtype, true);
    return mma && x->ne[1] >= cu_mma_min_t() && cu_mma_on() && cu_has_mma(sg[0].wtype, x->dtype) && sg[0].wtype == sg[1].wtype &&
           cu_mma_glu_pair_ok(sg[0].wtype) && sg[0].N == sg[1].N && cu_mma_multi_split(sg, 2, x->ne[0], x->dtype, x->ne[1], UINT64_MAX) == 1;
}
bool cf_glu_pair_ok(const ir_graph *g, const ir_node *grp) { return glu_pair_fits(g, grp, true); }
bool cf_glu_pair_ok_decode(const ir_graph *g, const ir_node *grp) { return glu_pair_fits(g, grp, false); }

bool cf_mma_takes(const ir_node *w, const ir_node *x) { return x->ne[1] >= cu_mma_min_t() && cu_mma_on() && cu_has_mma(w->dtype, x->dtype); }
bool cf_mma_ok(const ir_graph *g, const ir_node *m) { /* a T >= mma_min_t matmul the int8 MMA GEMM takes */
    return m->op == IR_OP_MATMUL && cf_mma_takes(&g->nodes[m->src[0]], &g->nodes[m->src[1]]);
}

bool cf_group_member_ok(const ir_graph *g, const ir_node *m) { return cf_multi_ok(g, m) || cf_mma_ok(g, m); }

/* May matmuls mem[0..n) (one activation) be one launch? T = 1: the multi-GEMV kernel mixes any of
 * its types. T >= mma_min_t: the int8 MMA launch takes one weight type, or two that cu_mma_pair takes (pair;
 * a Q4_K_M file's V may be Q8_0 beside Q5_0 K and Q), members side by side in the plan only where
 * adjacent (nothing between one and the next but inputs; cu_config.mma_group 2). */
static bool group_fits(const ir_graph *g, const ir_ref *mem, int n, bool pair, bool adjacent) {
    const ir_node *x = &g->nodes[g->nodes[mem[0]].src[1]];
    if (x->ne[1] == 1) return true;
    const int wt = g->nodes[g->nodes[mem[0]].src[0]].dtype;
    int wt2 = wt; /* a second type beside the leader's */
    for (int k = 1; k < n; k++) {
        const int mt = g->nodes[g->nodes[mem[k]].src[0]].dtype;
        if (mt != wt && (wt2 != wt ? mt != wt2 : !pair || !cu_mma_pair(wt, mt, x->dtype))) return false;
        if (mt != wt) wt2 = mt;
        for (ir_ref q = mem[k - 1] + 1; adjacent && q < mem[k]; q++)
            if (!(ir_ops[g->nodes[q].op].flags & OPF_INPUT)) return false;
    }
    return true;
}
bool cf_group_fits(const ir_graph *g, const ir_ref *mem, int n) { return group_fits(g, mem, n, true, false); }
bool cf_group_fits_one_type(const ir_graph *g, const ir_ref *mem, int n) { return group_fits(g, mem, n, false, false); }
bool cf_group_fits_adjacent(const ir_graph *g, const ir_ref *mem, int n) { return group_fits(g, mem, n, true, true); }
bool cf_group_fits_adjacent_one_type(const ir_graph *g, const ir_ref *mem, int n) { return group_fits(g, mem, n, false, true); }

bool cf_blas_takes(const ir_node *w, const ir_node *x) { /* runs alone: no executor fusion takes f32 activations */
    return x->dtype == SB_TYPE_F32 && ir_nrows(x) == x->ne[1] && cu_blas_on(w->dtype, x->ne[1]);
}
bool cf_blas_ok(const ir_graph *g, const ir_node *m) {
    return m->op == IR_OP_MATMUL && cf_blas_takes(&g->nodes[m->src[0]], &g->nodes[m->src[1]]);
}

/* the K split of the launch of T >= mma_min_t group grp (pass fuse_matmul_group) at the plan's T, with scratch
 * enough (cu_mma_multi_split, as run_mma_group asks it; 0: its members launched one by one) */
static int group_split(const ir_graph *g, const ir_node *grp) {
    cu_gemv_seg seg[CU_MULTI_MAX];
    const int ns = ir_group_n(grp) < CU_MULTI_MAX ? ir_group_n(grp) : CU_MULTI_MAX;
    for (int j = 0; j < ns; j++) {
        const ir_node *w = &g->nodes[ir_group_weight(grp, j)];
        seg[j] = (cu_gemv_seg){.wtype = w->dtype, .N = w->ne[1]};
    }
    const ir_node *x = &g->nodes[grp->src[0]];
    return cu_mma_multi_split(seg, ns, x->ne[0], x->dtype, x->ne[1], UINT64_MAX);
}

/* the T >= mma_min_t matmul group whose member's product value v is (the group itself or one of its RESULTs), or -1 */
static int32_t mma_group_of(const ir_graph *g, ir_ref v) {
    const ir_ref grp = g->nodes[v].op == IR_OP_RESULT ? g->nodes[v].src[0] : v;
    const ir_node *n = &g->nodes[grp];
    return n->op == IR_OP_MATMUL_GROUP && g->nodes[n->src[0]].ne[1] >= cu_mma_min_t() ? grp : -1;
}

/* a rope job's input x: (x, pos, ff?) for a ROPE, (cache, x, pos, ...) for a ROPE_STORE or KV_STORE */
static ir_ref job_x(const ir_node *n) { return n->src[ir_job_x_src(n)]; }
/* a node cu_rope_jobs takes as a job (a rope that normalises its heads, pass fuse_norm_rope, runs
 * alone: a job rotates one pair a thread and has no head sum) */
static bool job_takes(const ir_graph *g, const ir_node *n) {
    if (n->op == IR_OP_KV_STORE)
        return g->nodes[n->src[1]].dtype == SB_TYPE_F32 && (n->dtype == SB_TYPE_F32 || n->dtype == SB_TYPE_F16) && !ir_rope_norm_of(n).kind;
    return (n->op == IR_OP_ROPE || n->op == IR_OP_ROPE_STORE) && g->nodes[job_x(n)].ne[3] == 1 && !ir_rope_norm_of(n).kind;
}
/* is v (through views) a product of a T >= mma_min_t matmul group (pass fuse_matmul_group) that splits K at the plan's T (group_split)? */
static bool group_of_splits(const ir_graph *g, ir_ref v) {
    while (g->nodes[v].op == IR_OP_RESHAPE || g->nodes[v].op == IR_OP_VIEW) v = g->nodes[v].src[0];
    const int32_t grp = mma_group_of(g, v);
    return grp >= 0 && group_split(g, &g->nodes[grp]) > 1;
}

/* Pass fuse_rope_jobs' plan_target.rope_job_fits: up to CU_ROPE_JOBS_MAX jobs in one cu_rope_jobs
 * launch (a prefill layer's K rope + cache write, V cache write and Q rope). A ROPE after the first
 * job (a prefill layer's Q rope after K's and V's stores; the memory plan keeps their inputs off its
 * output) joins by cu_config.rope_inplace: 1 always, 2 only where it reads a product of a group that
 * splits K, 0 never. Where the group splits, the jobs then sum its partials (pass fuse_group_jobs) —
 * no reduce kernel, no rope kernel (H200, Qwen2.5-0.5B: pp64 +2%, first token -2%). Where it does
 * not split (T = 512), Q's rope joining alone measured slower (pp512 -1%, at depth 4096 -2.5%) when
 * its output moved to a private slot; the executor's rule then joined it wherever the memory plan's
 * layout happened not to clash. */
bool cf_rope_job_ok(const ir_graph *g, const ir_node *job, int k) { return job_takes(g, job) && k >= 0; }
bool cf_rope_job_ok_split(const ir_graph *g, const ir_node *job, int k) {
    return job_takes(g, job) && (k == 0 || job->op != IR_OP_ROPE || group_of_splits(g, job_x(job)));
}
bool cf_rope_job_ok_no_rope(const ir_graph *g, const ir_node *job, int k) {
    return job_takes(g, job) && (k == 0 || job->op != IR_OP_ROPE);
}

/* The planner's launches of jobs (pass fuse_rope_jobs, ir_job_next): every job but the first is
 * skipped (the first launches them all, following the links). */
static void index_rope_jobs(const ir_graph *g, cuda_fusions *c) {
    for (int32_t j = 0; j < g->n_nodes; j++) {
        const ir_ref nx = ir_job_next(&g->nodes[j], j);
        if (nx != IR_NONE) c->skip[nx] = 1;
    }
}

/* Pass fuse_group_jobs' plan_target.group_jobs_fits: a T >= mma_min_t MATMUL_GROUP (pass fuse_matmul_group)
 * whose results only the rope jobs launched right after it read (a prefill layer's K, V, Q, their
 * RoPE and cache writes). Where the group splits K at run time (run_mma_group), those jobs sum the
 * partials themselves (k_mma_reduce's order: the same bits) and the reduce kernel is left out. */
bool cf_group_jobs_ok(const ir_graph *g, const ir_node *grp) {
    return grp->op == IR_OP_MATMUL_GROUP && !ir_group_glu(grp) && g->nodes[grp->src[0]].ne[1] >= cu_mma_min_t();
}

/* Pass fuse_norm_sums' plan_target.norm_sum_fits: a lone MATMUL m on the int8 MMA path (T >= mma_min_t; no
 * group, no GLU) whose residual sum the RMS_NORM_QUANT n right after it normalizes. Where m splits K
 * at run time, it leaves the partials unreduced and n sums them — mma_split_sum with m's addend as
 * the epilogue: k_mma_reduce's order, and x + b == b + x in f32, so the same h — and the reduce kernel
 * leaves the chain (a prefill layer's O and down projections at small T). Planned where m would split
 * with scratch enough (cu_mma_small_mode 2: the partials go to a reduce kernel) and the norm's rows
 * do not fit one wave of its 1024-thread blocks — there the separate kernels measured faster. */
bool cf_norm_sum_ok(const ir_graph *g, const ir_node *m, const ir_node *n) {
    if (cu_mma_small_mode() != 2 || !cf_mma_ok(g, m)) return false;
    const cu_gemv_seg sg = mm_seg(g, m);
    const ir_node *x = &g->nodes[m->src[1]];
    return cu_mma_multi_split(&sg, 1, x->ne[0], x->dtype, x->ne[1], UINT64_MAX) >= 2 && !cu_norm_rows_fit(n->dtype, n->ne[0], ir_nrows(n));
}

sb_status cuda_fusions_plan(const plan *p, cuda_fusions *c, const cu_config *cfg) {
    (void)cfg; /* its switches are the target's (exec_cuda_target) */
    const ir_graph *g = p->g;
    c->skip = (uint8_t *)calloc((size_t)g->n_nodes, 1);
    c->vstore = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->vstore);
    c->krope = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->krope);
    c->nsum = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->nsum);
    if (!c->skip || !c->vstore || !c->krope || !c->nsum)
        return sb_fail(SB_ERR_OOM, "cuda: fusion tables of %d nodes", (int)g->n_nodes);
    for (int32_t i = 0; i < g->n_nodes; i++) c->vstore[i] = c->krope[i] = c->nsum[i] = -1;
    index_launch_stores(g, c);
    index_rope_jobs(g, c);
    for (int32_t n = 0; n < g->n_nodes; n++) { /* pass fuse_norm_sums: nsum[m] = n */
        const ir_ref m = ir_norm_sums_of(&g->nodes[n], n);
        if (m != IR_NONE) c->nsum[m] = n;
    }
    return SB_OK;
}

void cuda_fusions_free(cuda_fusions *f) {
    free(f->skip);
    free(f->vstore);
    free(f->krope);
    free(f->nsum);
    memset(f, 0, sizeof *f);
}

#endif /* SB_HAVE_CUDA */
