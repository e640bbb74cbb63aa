/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/cuda_fusion.c — the CUDA executor's fusion planning (contract: cuda_fusion.h). Each pass
 * below looks for one pattern in the plan's node order and memory plan and records it in the
 * tables; exec_cuda.c then launches accordingly. The passes, in cuda_fusions_plan's order: V's
 * kv_store and K's rope_store folded into a decode GEMV launch, the rope jobs' launches and the
 * groups whose partials they sum (indexes of the planner's marks: passes fuse_launch_store,
 * fuse_rope_jobs, fuse_group_jobs), split-K partials summed by the norm after a lone GEMM. (Matmul
 * addends, add + norm, rope + store, Q's rope and the output quantize in the attention, the matmul
 * groups of decode GEMVs and prefill int8 MMA GEMMs and their GLU, the stores and jobs above are
 * the planner's passes: graph/passes/; so are the shape-only predicates below that the CUDA plan
 * target gives those passes.)
 * Safety is always the same two questions: does what a moved or fused kernel reads exist
 * (unchanged) at its new place, and can what it writes clash with anything in between.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA

#include "runtime/cuda_fusion.h"

#include "base/status.h"
#include "quant/types.h"

#include "backend/cuda/kernels.h"

#include <string.h>


/* arena byte range of value i (its alias root); false for inputs (their own buffers) */
static bool arena_range(const plan *p, ir_ref i, uint64_t *lo, uint64_t *hi) {
    const plan_value *v = &p->vals[p->vals[i].alias];
    if (v->input >= 0 || p->vals[i].input >= 0) return false;
    *lo = v->offset;
    *hi = v->offset + v->bytes;
    return true;
}

/* do values a and b share memory? A value moved to the private region (c->moved, by alias root)
 * shares it only with the views of its own root */
static bool overlap(const plan *p, const cuda_fusions *c, ir_ref a, ir_ref b) {
    const ir_ref ra = p->vals[a].alias, rb = p->vals[b].alias;
    if (c->moved && (c->moved[ra] != UINT64_MAX || c->moved[rb] != UINT64_MAX)) return ra == rb;
    uint64_t a0, a1, b0, b1;
    if (!arena_range(p, a, &a0, &a1) || !arena_range(p, b, &b0, &b1)) return false;
    return a0 < b1 && b0 < a1;
}

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
 * cu_glu_quant would). At T > 8 (mma 1) where one int8 MMA launch that never splits K
 * (cu_mma_multi_split 1 with any scratch) takes them as row pairs (cu_matmul_mma_multi pair_glu): one
 * weight type cu_mma_glu_pair_ok takes (a Qwen2.5-0.5B Q4_K_M file's Q5_0 gate/up), one row count. */
static bool glu_pair_fits(const ir_graph *g, const ir_node *grp, bool mma) {
    if (grp->op != IR_OP_MATMUL_GROUP || ir_group_n(grp) != 2 || grp->ip[1]) return false;
    const ir_node *x = &g->nodes[grp->src[0]];
    const cu_gemv_seg sg[2] = {{.wtype = g->nodes[ir_group_weight(grp, 0)].dtype, .N = g->nodes[ir_group_weight(grp, 0)].ne[1]},
                               {.wtype = g->nodes[ir_group_weight(grp, 1)].dtype, .N = g->nodes[ir_group_weight(grp, 1)].ne[1]}};
    if (x->ne[1] == 1) return cu_gemv_reg_fits(sg, 2, x->ne[0], x->dtype, true);
    return mma && x->ne[1] > 8 && cu_mma_on() && cu_has_mma(sg[0].wtype, x->dtype) && sg[0].wtype == sg[1].wtype &&
           cu_mma_glu_pair_ok(sg[0].wtype) && sg[0].N == sg[1].N && cu_mma_multi_split(sg, 2, x->ne[0], x->dtype, x->ne[1], UINT64_MAX) == 1;
}
bool cf_glu_pair_ok(const ir_graph *g, const ir_node *grp) { return glu_pair_fits(g, grp, true); }
bool cf_glu_pair_ok_decode(const ir_graph *g, const ir_node *grp) { return glu_pair_fits(g, grp, false); }

bool cf_mma_takes(const ir_node *w, const ir_node *x) { return x->ne[1] > 8 && cu_mma_on() && cu_has_mma(w->dtype, x->dtype); }
bool cf_mma_ok(const ir_graph *g, const ir_node *m) { /* a T > 8 matmul the int8 MMA GEMM takes */
    return m->op == IR_OP_MATMUL && cf_mma_takes(&g->nodes[m->src[0]], &g->nodes[m->src[1]]);
}

bool cf_group_member_ok(const ir_graph *g, const ir_node *m) { return cf_multi_ok(g, m) || cf_mma_ok(g, m); }

/* May matmuls mem[0..n) (one activation) be one launch? T = 1: the multi-GEMV kernel mixes any of
 * its types. T > 8: the int8 MMA launch takes one weight type, or two that cu_mma_pair takes (pair;
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

static bool is_output(const plan *p, ir_ref v) { /* is v's memory a plan output's? */
    for (int32_t k = 0; k < p->n_outputs; k++)
        if (p->vals[p->outputs[k].node].alias == p->vals[v].alias) return true;
    return false;
}

typedef struct priv_slot { /* a slot of the private region after the plan's */
    uint64_t off, bytes;
    int32_t free_after; /* the last node that reads the value it holds */
} priv_slot;

/* per alias root: its last reader in the plan's order (-1: none; malloc'd, NULL when out of memory).
 * A skipped reader's work may run later (e.g. a RoPE the attention applies): it reads as late as its
 * own readers. */
static int32_t *last_readers(const plan *p, const cuda_fusions *c) {
    const ir_graph *g = p->g;
    int32_t *last = (int32_t *)malloc((size_t)g->n_nodes * sizeof *last);
    if (!last) return NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) last[i] = -1;
    for (int32_t q = g->n_nodes - 1; q >= 0; q--) {
        const ir_ref rq = p->vals[q].alias >= 0 ? p->vals[q].alias : q;
        const int32_t at_q = c->skip[q] && last[rq] > q ? last[rq] : q;
        for (int a = 0; a < IR_MAX_SRC; a++) {
            const ir_ref sr = g->nodes[q].src[a];
            if (sr == IR_NONE || p->vals[sr].alias < 0) continue;
            if (at_q > last[p->vals[sr].alias]) last[p->vals[sr].alias] = at_q;
        }
    }
    return last;
}

/* a slot of the private region (after the plan's) for a value of b bytes written at node i and read
 * until node fa: one whose value's readers are all before i, or a new one while there are fewer than
 * max; UINT64_MAX if neither */
static uint64_t slot_take(priv_slot *slot, int *ns, int max, uint64_t *at, uint64_t b, int32_t i, int32_t fa) {
    int sl = -1;
    for (int k = 0; k < *ns && sl < 0; k++)
        if (slot[k].free_after < i && slot[k].bytes >= b) sl = k;
    if (sl < 0 && *ns < max) {
        slot[*ns] = (priv_slot){*at, b, 0};
        *at += b;
        sl = (*ns)++;
    }
    if (sl < 0) return UINT64_MAX;
    slot[sl].free_after = fa > i ? fa : i;
    return slot[sl].off;
}

/* the K split of the launch of T > 8 group grp (pass fuse_matmul_group) at the plan's T, with scratch
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

/* the T > 8 matmul group whose member's product value v is (the group itself or one of its RESULTs), or -1 */
static int32_t mma_group_of(const ir_graph *g, ir_ref v) {
    const ir_ref grp = g->nodes[v].op == IR_OP_RESULT ? g->nodes[v].src[0] : v;
    const ir_node *n = &g->nodes[grp];
    return n->op == IR_OP_MATMUL_GROUP && g->nodes[n->src[0]].ne[1] > 8 ? grp : -1;
}

/* a rope job's input x: (x, pos, ff?) for a ROPE, (cache, x, pos, ...) for a ROPE_STORE or KV_STORE */
static ir_ref job_x(const ir_node *n) { return n->src[n->op == IR_OP_ROPE ? 0 : 1]; }
/* does node j launch work at its own place? (not skipped — done by another launch —, nor a view, a result or an input) */
static bool runs_alone(const ir_graph *g, const cuda_fusions *c, int32_t j) {
    const ir_op op = g->nodes[j].op;
    return !c->skip[j] && op != IR_OP_RESHAPE && op != IR_OP_VIEW && op != IR_OP_RESULT && !(ir_ops[op].flags & OPF_INPUT);
}
/* a node cu_rope_jobs takes as a job (a rope that normalises its heads, pass fuse_norm_rope, runs
 * alone: a job rotates one pair a thread and has no head sum) */
static bool job_takes(const ir_graph *g, const ir_node *n) {
    if (n->op == IR_OP_KV_STORE)
        return g->nodes[n->src[1]].dtype == SB_TYPE_F32 && (n->dtype == SB_TYPE_F32 || n->dtype == SB_TYPE_F16) && !ir_rope_norm_of(n).kind;
    return (n->op == IR_OP_ROPE || n->op == IR_OP_ROPE_STORE) && g->nodes[job_x(n)].ne[3] == 1 && !ir_rope_norm_of(n).kind;
}
/* is v (through views) a product of a T > 8 matmul group (pass fuse_matmul_group) that splits K at the plan's T (group_split)? */
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

/* The executor's index of the planner's launches of jobs (pass fuse_rope_jobs): rnext[j] = the next
 * job of j's launch; every job but the first is skipped (the first launches them all); gjobs[i] =
 * group i leaves a split's partials to them (pass fuse_group_jobs). */
static void index_rope_jobs(const ir_graph *g, cuda_fusions *c) {
    for (int32_t j = 0; j < g->n_nodes; j++) {
        const ir_ref nx = ir_job_next(&g->nodes[j], j);
        if (nx == IR_NONE) continue;
        c->rnext[j] = nx;
        c->skip[nx] = 1;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) c->gjobs[i] = ir_group_jobs_sum(&g->nodes[i]); /* pass fuse_group_jobs */
}

/* Pass fuse_group_jobs' plan_target.group_jobs_fits: a T > 8 MATMUL_GROUP (pass fuse_matmul_group)
 * whose results only the rope jobs launched right after it read (a prefill layer's K, V, Q, their
 * RoPE and cache writes). Where the group splits K at run time (run_mma_group), those jobs sum the
 * partials themselves (k_mma_reduce's order: the same bits) and the reduce kernel is left out. */
bool cf_group_jobs_ok(const ir_graph *g, const ir_node *grp) {
    return grp->op == IR_OP_MATMUL_GROUP && !ir_group_glu(grp) && g->nodes[grp->src[0]].ne[1] > 8;
}

/* A lone MATMUL m on the int8 MMA path (T > 8; no group, no GLU) whose result v goes only into the
 * residual sum h = v + o that the RMS_NORM_QUANT n right after it normalizes (nothing runs between):
 * either m adds o itself (its addend: h is m) and n reads it, or n is the planner's add_rms_norm_quant and v is its
 * one operand. Where m splits K at run time, it leaves the partials unreduced and n sums them —
 * mma_split_sum with o as the epilogue: k_mma_reduce's order, and x + b == b + x in f32, so the
 * same h, which n writes to h's memory — and the reduce kernel leaves the chain (a prefill layer's
 * O and down projections at small T; planned where m would split with scratch enough and the norm's
 * rows fit one wave of its 1024-thread blocks — past that the separate kernels measured faster —
 * used where m does split at run time). n reads o and the partials while its blocks write h and its
 * output: the output must overlap neither o nor h (h may be o exactly: one thread reads, then writes,
 * an element). Where the plan put n's output over o (dead after h in its order), that output moves
 * to a slot of its own after the plan's region, shared by such norms whose readers are past.
 * nsum[m] = n. */
#define NORM_SLOTS 4
static void plan_norm_sums(const plan *p, cuda_fusions *c, const int32_t *uses, uint64_t *at) {
    const ir_graph *g = p->g;
    int32_t *last = last_readers(p, c);
    if (!last) return;
    priv_slot slot[NORM_SLOTS];
    int ns = 0;
    for (int32_t m = 0; m < g->n_nodes && cu_mma_small_mode() == 2; m++) { /* mode 2: the partials go to a reduce kernel */
        const ir_node *mn = &g->nodes[m];
        if (c->skip[m] || !cf_mma_ok(g, mn)) continue; /* a lone MATMUL: a group's members are one MATMUL_GROUP */
        const cu_gemv_seg sg = mm_seg(g, mn);
        const ir_node *x = &g->nodes[mn->src[1]];
        if (cu_mma_multi_split(&sg, 1, x->ne[0], x->dtype, x->ne[1], UINT64_MAX) < 2) continue; /* never splits */
        const bool own = ir_matmul_addend(mn) != IR_NONE; /* m adds o itself; else n's fused ADD does */
        if (!own && (uses[m] != 1 || p->vals[m].alias != m)) continue;
        int32_t n = m + 1;
        while (n < g->n_nodes && !runs_alone(g, c, n)) n++;
        if (n >= g->n_nodes) continue;
        const ir_node *nn = &g->nodes[n];
        if (nn->op != (own ? IR_OP_RMS_NORM_QUANT : IR_OP_ADD_RMS_NORM_QUANT) || ir_nelem(nn) != ir_nelem(mn) ||
            cu_norm_rows_fit(nn->dtype, nn->ne[0], ir_nrows(nn)))
            continue;
        ir_ref h, o;
        if (own) {
            if (nn->src[0] != m) continue;
            h = m, o = ir_matmul_addend(mn);
        } else { /* n = add_rms_norm_quant(v, o) or (o, v), the sum its result 1 */
            if (nn->src[0] != m && nn->src[1] != m) continue;
            h = ir_result_of(g, n, 1), o = nn->src[0] == m ? nn->src[1] : nn->src[0];
            if (h == IR_NONE || ir_nelem(&g->nodes[o]) != ir_nelem(mn)) continue;
        }
        if (overlap(p, c, n, h)) continue;
        if (overlap(p, c, n, o)) { /* n's output to a slot of its own */
            if (p->vals[n].alias != n || p->vals[n].input >= 0 || c->moved[n] != UINT64_MAX || is_output(p, n)) continue;
            const uint64_t off = slot_take(slot, &ns, NORM_SLOTS, at, cf_align(p->vals[n].bytes), n, last[n]);
            if (off == UINT64_MAX) continue;
            c->moved[n] = off;
        }
        c->nsum[m] = n;
    }
    free(last);
}

sb_status cuda_fusions_plan(const plan *p, cuda_fusions *c, const cu_config *cfg) {
    const ir_graph *g = p->g;
    int32_t *uses = (int32_t *)malloc((size_t)g->n_nodes * sizeof *uses);
    c->skip = (uint8_t *)calloc((size_t)g->n_nodes, 1);
    c->rnext = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->rnext);
    c->gjobs = (uint8_t *)calloc((size_t)g->n_nodes, 1);
    c->vstore = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->vstore);
    c->moved = (uint64_t *)malloc((size_t)g->n_nodes * sizeof *c->moved);
    c->krope = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->krope);
    c->nsum = (int32_t *)malloc((size_t)g->n_nodes * sizeof *c->nsum);
    if (!uses || !c->skip || !c->rnext || !c->gjobs || !c->vstore || !c->moved || !c->krope || !c->nsum) {
        free(uses);
        return sb_fail(SB_ERR_OOM, "cuda: fusion tables of %d nodes", (int)g->n_nodes);
    }
    ir_use_counts(g, uses);
    for (int32_t i = 0; i < g->n_nodes; i++) c->rnext[i] = c->vstore[i] = c->krope[i] = c->nsum[i] = -1,
        c->moved[i] = UINT64_MAX;
    const uint64_t base = cf_align(p->arena_bytes);
    uint64_t at = base;
    index_launch_stores(g, c);
    index_rope_jobs(g, c);
    if (cfg->norm_sums) plan_norm_sums(p, c, uses, &at);
    c->moved_bytes = at - base;
    free(uses);
    return SB_OK;
}

void cuda_fusions_free(cuda_fusions *f) {
    free(f->skip);
    free(f->rnext);
    free(f->gjobs);
    free(f->vstore);
    free(f->moved);
    free(f->krope);
    free(f->nsum);
    memset(f, 0, sizeof *f);
}

#endif /* SB_HAVE_CUDA */
