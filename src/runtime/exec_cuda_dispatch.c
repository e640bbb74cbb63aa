/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_dispatch.c — one node of a plan to its launches: matmuls (alone, as multi-GEMV
 * or the planner's groups with their fused epilogues), rope / cache-store jobs, attention, norms, quantizers,
 * elementwise chains; and the walk over a plan's nodes (with per-family profiling when asked).
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"
#include "backend/cuda/rope_norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bcast(const ir_node *o, const ir_node *n) { return ir_nelem(o) == n->ne[0] && ir_nrows(n) != 1; }

static int ew_code(int op) {
    switch (op) {
    case IR_OP_ADD: return CU_EW_ADD;
    case IR_OP_MUL: return CU_EW_MUL;
    case IR_OP_SCALE: return CU_EW_SCALE;
    case IR_OP_SOFTCAP: return CU_EW_SOFTCAP;
    case IR_OP_SILU: return CU_EW_SILU;
    case IR_OP_GELU_TANH: return CU_EW_GELU;
    case IR_OP_RMS_NORM: return CU_EW_RMS_NORM;
    default: return 0;
    }
}

/* the epilogue adding addend o (IR_NONE: none) to the product whose value is node v */
static cu_epilogue addend_ep(crun *r, ir_ref o, ir_ref v) {
    const ir_graph *g = r->p->g;
    if (o == IR_NONE) return (cu_epilogue){0};
    return (cu_epilogue){.add = (const float *)dptr(r, o), .bcast = bcast(&g->nodes[o], &g->nodes[v])};
}

static float *matmul_out(crun *r, int32_t m, cu_epilogue *ep) {
    *ep = addend_ep(r, ir_matmul_addend(&r->p->g->nodes[m]), m);
    return (float *)dptr(r, m);
}

/* does the dp4a GEMV (cu_matmul_q8) take weight w times activation x? */
static bool q8_gemv_takes(const ir_node *w, const ir_node *x) {
    return (x->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(w->dtype)) || (x->dtype == SB_TYPE_Q8_K && cu_has_mmvq_q8k(w->dtype));
}

/* weight wr times activation xr into dst with epilogue epb (add NULL: none), as a lone matmul runs:
 * cuBLASLt for f32 activations where cu_blas_on says (cu_config.blas_min_t / blas_quant tokens or
 * more), the int8 MMA GEMM for T > 8, else the dp4a or f32 GEMVs. nsum_node: the lone matmul whose
 * split partials a norm may sum (pass fuse_norm_sums; -1: a group's member). The caller has counted the
 * launch (a split-K reduce, cuBLASLt's extra launches count themselves). */
static sb_status run_matmul_wx(crun *r, ir_ref wr, ir_ref xr, float *dst, cu_epilogue epb, int32_t nsum_node) {
    const ir_graph *g = r->p->g;
    const ir_node *w = &g->nodes[wr], *x = &g->nodes[xr];
    cu_stream s = r->cx->s;
    const cu_epilogue *ep = epb.add || epb.nonfinite ? &epb : NULL;
    if (epb.nonfinite && !(x->ne[1] == 1 && q8_gemv_takes(w, x))) /* run_matmul_one arms it for that path only */
        return sb_fail(SB_ERR_INTERNAL, "cuda: a non-finite flag on a matmul no T = 1 dp4a GEMV runs");
    if (r->cx->d_blas_ws && cf_blas_takes(w, x)) { /* large T: cuBLASLt, the weight as F16 / BF16 (scratch: cx_plan_get) */
        const sb_status st = cu_matmul_blas(s, dst, dptr(r, wr), w->dtype, w->ne[0], w->ne[1], (const float *)dptr(r, xr), x->ne[1], ep,
                                            r->arena + r->c->scratch_off, r->c->arena_need - r->c->scratch_off, r->cx->d_blas_ws);
        if (st != SB_ERR_UNSUPPORTED) { /* no cuBLASLt algorithm for the shape: the kernels below (x still f32) */
            r->n_kernels += cu_blas_launches(w->dtype, w->ne[0], w->ne[1], ep) - 1;
            return st;
        }
    }
    if (cf_mma_takes(w, x)) { /* prefill: int8 tensor cores */
        if (cu_mma_small_mode()) { /* small T: K split over blocks, partials in the scratch region (shared with attention's) */
            const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = cu_mma_small_scratch(w->ne[0], w->ne[1], x->ne[1]);
            if (nsum_node >= 0 && r->c->fu.nsum && r->c->fu.nsum[nsum_node] >= 0 && cu_mma_small_mode() == 2) { /* a split leaves its partials to the norm after it */
                const cu_gemv_seg sg = {.dst = dst, .w = dptr(r, wr), .wtype = w->dtype, .N = w->ne[1], .ep = epb};
                cu_split_src src;
                SB_TRY(cu_matmul_mma_multi(s, &sg, 1, w->ne[0], dptr(r, xr), x->dtype, x->ne[1], (float *)(r->arena + r->c->scratch_off), cap,
                                           &src, 0));
                if (src.part) r->nsum_for = r->c->fu.nsum[nsum_node], r->nsum_mm = nsum_node, r->nsum_src = src;
                return SB_OK;
            }
            const bool counters = cu_mma_small_mode() == 1;
            if (!counters && need > 0 && need <= cap) r->n_kernels++; /* split: k_mma_reduce after it */
            return cu_matmul_mma_small(s, dst, dptr(r, wr), w->dtype, w->ne[0], w->ne[1], dptr(r, xr), x->dtype, x->ne[1], ep,
                                       (float *)(r->arena + r->c->scratch_off), cap, counters ? r->cx->d_cnt : NULL);
        }
        return cu_matmul_mma(s, dst, dptr(r, wr), w->dtype, w->ne[0], w->ne[1], dptr(r, xr), x->dtype, x->ne[1], ep);
    }
    if (q8_gemv_takes(w, x))
        return cu_matmul_q8(s, dst, dptr(r, wr), w->dtype, w->ne[0], w->ne[1], dptr(r, xr), x->dtype, x->ne[1], ep);
    return cu_matmul_f32(s, dst, dptr(r, wr), w->dtype, w->ne[0], w->ne[1], dptr(r, xr), x->dtype, x->ne[1], ep); /* f32 or q8_K */
}

/* matmul i alone (its epilogue ADD fused; run_matmul_wx). Where it writes an output straight to
 * the caller from a T = 1 dp4a GEMV (an LM head), that kernel also flags a non-finite value in the
 * output's slot of h_nonfinite, so the host need not read the logits again to know. */
static sb_status run_matmul_one(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i], *x = &g->nodes[n->src[1]];
    cu_epilogue epb;
    float *dst = matmul_out(r, i, &epb);
    const int slot = direct_slot(r, i);
    if (slot >= 0 && x->ne[1] == 1 && q8_gemv_takes(&g->nodes[n->src[0]], x)) {
        epb.nonfinite = r->cx->h_nonfinite + slot;
        r->checked |= 1u << slot;
    }
    return run_matmul_wx(r, n->src[0], n->src[1], dst, epb, i);
}

static cu_gemv_seg launch_seg(crun *r, int32_t i, int j);

/* a T > 8 MATMUL_GROUP i (pass fuse_matmul_group): one int8 MMA launch where cu_mma_multi_split
 * takes its members (a gated one writing act(gate) * up: pass fuse_group_glu), else each member in
 * turn as a lone matmul; the launch counts itself */
static sb_status run_mma_group(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i], *x = &g->nodes[n->src[0]];
    const int ns = ir_group_n(n);
    if (ns > CU_MULTI_MAX) return sb_fail(SB_ERR_INTERNAL, "cuda: group %%%d of %d GEMMs", (int)i, ns);
    cu_gemv_seg seg[CU_MULTI_MAX];
    for (int j = 0; j < ns; j++) seg[j] = launch_seg(r, i, j); /* a gated group's up: no dst */
    const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4; /* split-K partials: the scratch region, as run_matmul_wx */
    const bool mma = cf_mma_takes(&g->nodes[ir_group_weight(n, 0)], x); /* the int8 MMA GEMMs on (cu_config.mmq 4) */
    const int split = mma ? cu_mma_multi_split(seg, ns, x->ne[0], x->dtype, x->ne[1], cap) : 0;
    const ir_op glu = ir_group_glu(n);
    if (glu && split != 1) /* the quantize after it would quantize the gate alone: never silently */
        return sb_fail(SB_ERR_INTERNAL, "cuda: gate/up group %%%d planned to write its GLU, launched %s", (int)i,
                       split > 1 ? "with K split" : "one by one");
    if (split > 0) {
        const bool jobs = ir_group_jobs_sum(n) && split > 1; /* the rope jobs after it sum the partials (pass fuse_group_jobs) */
        r->n_kernels += split > 1 && !jobs ? 2 : 1; /* a split: k_mma_reduce after it */
        cu_split_src srcs[CU_MULTI_MAX];
        const int pair_glu = glu ? (glu == IR_OP_GEGLU ? 2 : 1) : 0;
        SB_TRY(cu_matmul_mma_multi(r->cx->s, seg, ns, x->ne[0], dptr(r, n->src[0]), x->dtype, x->ne[1], (float *)(r->arena + r->c->scratch_off),
                                   cap, jobs ? srcs : NULL, pair_glu));
        if (jobs && srcs[0].part) {
            for (int q = 0; q < ns; q++) {
                r->gsrc_root[q] = r->p->vals[q ? ir_result_of(g, i, q) : i].alias;
                r->gsrc[q] = srcs[q];
            }
            r->gsrc_n = ns;
        }
        return SB_OK;
    }
    for (int j = 0; j < ns; j++) {
        r->n_kernels++;
        SB_TRY(run_matmul_wx(r, ir_group_weight(n, j), n->src[0], seg[j].dst, seg[j].ep, -1));
    }
    return SB_OK;
}

/* a job whose x is a result of the MMA group just launched reads that group's partials */
static void rope_job_src(const crun *r, ir_ref x, cu_rope_job *jb) {
    for (int q = 0; q < r->gsrc_n; q++)
        if (r->gsrc_root[q] == r->p->vals[x].alias) jb->src = r->gsrc[q];
}

/* ROPE, ROPE_STORE (writes the cache, not an f32 result) or KV_STORE node i as a cu_rope_job (x
 * from the partials of the group before it where those were left unreduced) */
static cu_rope_job rope_job(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    if (n->op == IR_OP_KV_STORE) {
        const ir_node *x = &g->nodes[n->src[1]];
        cu_rope_job jb = {.store = true, .x = (const float *)dptr(r, n->src[1]),
                          .a = {.D = n->ne[0], .H = 1, .T = x->ne[1], .cache = dptr(r, i), .ctype = n->dtype, .rows = (const int32_t *)dptr(r, n->src[2]),
                                .ring = ir_kv_ring(g, i)}};
        rope_job_src(r, n->src[1], &jb);
        return jb;
    }
    const bool store = n->op == IR_OP_ROPE_STORE; /* (cache, x, pos, rows?, ff?), else (x, pos, ff?) */
    const ir_ref xs = n->src[store], ffs = ir_rope_ff(n), rows = store ? ir_store_rows(n) : IR_NONE;
    const ir_node *x = &g->nodes[xs];
    cu_rope_job jb = {.dst = store ? NULL : (float *)dptr(r, i), .x = (const float *)dptr(r, xs),
                      .a = {.D = x->ne[0], .H = x->ne[1], .T = x->ne[2], .n_rot = ir_rope_of(n).n_rot, .mode = ir_rope_of(n).mode,
                            .theta_scale = powf(ir_rope_of(n).freq_base, -2.0f / (float)ir_rope_of(n).n_rot), .freq_scale = ir_rope_of(n).freq_scale, .attn_factor = ir_rope_attn_factor(n),
                            .ff = ffs != IR_NONE ? (const float *)dptr(r, ffs) : NULL,
                            .cache = store ? dptr(r, i) : NULL, .ctype = store ? n->dtype : 0,
                            .rows = rows != IR_NONE ? (const int32_t *)dptr(r, rows) : NULL, .ring = store ? ir_kv_ring(g, i) : 0}};
    rope_job_src(r, xs, &jb);
    return jb;
}

/* the ROPE / KV_STORE jobs chained from i (pass fuse_rope_jobs) in one launch; every rotation reads the
 * same positions (the pass's job_pos), every cache write its own rows (cu_rope_args.rows) */
static sb_status run_rope_jobs(crun *r, int32_t i) {
    cu_rope_job jobs[CU_ROPE_JOBS_MAX];
    int n = 0;
    const ir_node *f = &r->p->g->nodes[i];
    ir_ref pos = f->src[ir_job_pos_src(f)]; /* a kv_store's rows where no job rotates (unread then) */
    for (ir_ref m = i; m != IR_NONE && n < CU_ROPE_JOBS_MAX; m = ir_job_next(&r->p->g->nodes[m], m)) {
        jobs[n++] = rope_job(r, m);
        const ir_node *mn = &r->p->g->nodes[m];
        if (mn->op != IR_OP_KV_STORE) pos = mn->src[ir_job_pos_src(mn)];
    }
    r->n_kernels++;
    r->gsrc_n = 0; /* consumed */
    return cu_rope_jobs(r->cx->s, jobs, n, (const int32_t *)dptr(r, pos));
}

/* member j of T = 1 launch node i (a lone matmul, or a MATMUL_GROUP) as a segment: weight, result
 * and addend, and the V kv_store or K rope_store the launch also writes (cuda_fusion.c) */
static cu_gemv_seg launch_seg(crun *r, int32_t i, int j) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    const bool group = n->op == IR_OP_MATMUL_GROUP;
    const ir_ref wr = group ? ir_group_weight(n, j) : n->src[0], o = group ? ir_group_addend(n, j) : ir_matmul_addend(n);
    const ir_ref v = j ? ir_result_of(g, i, j) : i;
    const ir_node *w = &g->nodes[wr];
    if (v == IR_NONE) /* a gated group's up: multiplied into the gate's result, written nowhere */
        return (cu_gemv_seg){.w = dptr(r, wr), .wtype = w->dtype, .N = w->ne[1]};
    cu_gemv_seg q = {.w = dptr(r, wr), .wtype = w->dtype, .N = w->ne[1], .dst = (float *)dptr(r, v), .ep = addend_ep(r, o, v)};
    if (r->c->fu.vstore && r->c->fu.vstore[v] >= 0) {
        const ir_node *sn = &g->nodes[r->c->fu.vstore[v]];
        q.cache = dptr(r, r->c->fu.vstore[v]);
        q.ctype = sn->dtype;
        q.rows = (const int32_t *)dptr(r, ir_store_rows(sn)); /* pos, or a paged plan's slots */
        q.ring = ir_kv_ring(g, r->c->fu.vstore[v]);
    }
    if (r->c->fu.krope && r->c->fu.krope[v] >= 0) { /* K: rotate, then write the cache of the rope_store */
        const int32_t kvs = r->c->fu.krope[v];
        const ir_node *rn = &g->nodes[kvs], *rx = &g->nodes[rn->src[1]];
        q.cache = dptr(r, kvs);
        q.ctype = rn->dtype;
        q.rows = (const int32_t *)dptr(r, ir_store_rows(rn)); /* rotated at the launch's pos, written here */
        q.ring = ir_kv_ring(g, kvs);
        q.rot = ir_rope_of(rn).n_rot;
        q.rmode = ir_rope_of(rn).mode;
        q.D = (int)rx->ne[0];
        q.theta_scale = powf(ir_rope_of(rn).freq_base, -2.0f / (float)ir_rope_of(rn).n_rot);
        q.freq_scale = ir_rope_of(rn).freq_scale;
        q.attn_factor = ir_rope_attn_factor(rn);
        q.ff = ir_rope_store_ff(rn) != IR_NONE ? (const float *)dptr(r, ir_rope_store_ff(rn)) : NULL;
    }
    return q;
}

/* a T = 1 launch of the dp4a GEMVs (cu_matmul_q8_multi): a lone matmul, or every member of a
 * MATMUL_GROUP (a gated one writing act(gate) * up); the caller counted it */
static sb_status run_gemv_launch(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    const bool group = n->op == IR_OP_MATMUL_GROUP;
    const ir_node *x = &g->nodes[n->src[group ? 0 : 1]];
    const int m = group ? ir_group_n(n) : 1;
    if (x->ne[1] != 1 || m > CU_MULTI_MAX) return sb_fail(SB_ERR_INTERNAL, "cuda: launch %%%d of %d GEMVs at T = %lld", (int)i, m, (long long)x->ne[1]);
    cu_gemv_seg seg[CU_MULTI_MAX];
    for (int j = 0; j < m; j++) seg[j] = launch_seg(r, i, j);
    const ir_op glu = ir_group_glu(n);
    const int pair_glu = glu ? (glu == IR_OP_GEGLU ? 2 : 1) : 0; /* a gated group (pass fuse_group_glu): gate/up writing the GLU */
    return cu_matmul_q8_multi(r->cx->s, seg, m, x->ne[0], dptr(r, n->src[group ? 0 : 1]), x->dtype, r->cx->d_pos, pair_glu);
}

/* the Q RoPE attention n applies as it loads q (pass fuse_attn_rope; n_rot 0: none, q is rotated
 * already), for either argument struct (cu_attn_args, cu_attn_paged_args) */
static cu_attn_rope attn_q_rope(crun *r, const ir_node *n) {
    const ir_rope_params rp = ir_attn_q_rope(n);
    if (!rp.n_rot) return (cu_attn_rope){0};
    const ir_ref ff = ir_attn_q_rope_ff(n);
    return (cu_attn_rope){.n_rot = rp.n_rot, .mode = rp.mode, .theta_scale = powf(rp.freq_base, -2.0f / (float)rp.n_rot),
                          .freq_scale = rp.freq_scale, .attn_factor = ir_attn_q_rope_attn_factor(n),
                          .ff = ff != IR_NONE ? (const float *)dptr(r, ff) : NULL};
}

/* concat i: cu_concat with each source's chunk (its elements up to and including the joined dim),
 * as exec_cpu's */
static sb_status run_concat(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    const int d = ir_concat_dim(n);
    const float *src[IR_MAX_SRC];
    int64_t chunk[IR_MAX_SRC], outer = 1;
    int ns = 0;
    for (; ns < IR_MAX_SRC && n->src[ns] != IR_NONE; ns++) {
        const ir_node *x = &g->nodes[n->src[ns]];
        src[ns] = (const float *)dptr(r, n->src[ns]);
        chunk[ns] = 1;
        for (int k = 0; k <= d; k++) chunk[ns] *= x->ne[k];
    }
    for (int k = d + 1; k < 4; k++) outer *= n->ne[k];
    return cu_concat(r->cx->s, (float *)dptr(r, i), src, chunk, ns, outer);
}

sb_status cx_run_node(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
#define SRC(j) (&g->nodes[n->src[j]])
#define SP(j) dptr(r, n->src[j])
    switch (n->op) {
    case IR_OP_GET_ROWS: {
        const ir_node *w = SRC(0);
        const cgather *gt = cx_gather_of(r->c, i);
        uint64_t rb = 0;
        qk_row_bytes(w->dtype, w->ne[0], &rb);
        r->n_kernels++;
        if (gt) /* the table stays in host memory: this run's rows are in the stage, in token order */
            return cu_get_rows(s, dst, r->c->d_stage + gt->off, w->dtype, n->ne[0], rb, NULL, n->ne[1]);
        return cu_get_rows(s, dst, SP(0), w->dtype, n->ne[0], rb, SP(1), n->ne[1]);
    }
    case IR_OP_RMS_NORM: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU:
    case IR_OP_GELU_TANH: {
        cu_ew_chain c = {.n = 1};
        c.st[0] = (cu_ew_step){.op = ew_code(n->op), .f = ir_f0(n)};
        if (n->op == IR_OP_ADD || n->op == IR_OP_MUL) {
            c.st[0].opd = SP(1);
            c.st[0].bcast = bcast(SRC(1), n);
        }
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_ew_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c);
    }
    case IR_OP_FUSED: {
        cu_ew_chain c = {.n = ir_fused_steps(n)};
        for (int k = 0; k < ir_fused_steps(n); k++) {
            const ir_fused_step fs = ir_fused_step_of(n, k);
            const int opd = fs.operand;
            c.st[k] = (cu_ew_step){.op = ew_code(fs.op), .f = fs.f};
            if (opd) {
                c.st[k].opd = SP(opd);
                c.st[k].bcast = bcast(SRC(opd), n);
            }
        }
        r->n_kernels++;
        const ir_fused_tail t = ir_fused_tail_of(n);
        const ir_ref q = t.op ? ir_result_of(g, i, 1) : IR_NONE;
        if (q != IR_NONE) /* its quantize tail (pass fuse_chain_quant): hand-written only (cx_cg_prepare leaves it) */
            return cu_ew_quant_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c, t.type, dptr(r, q), t.op == IR_OP_RMS_NORM_QUANT,
                                    t.weight ? (const float *)SP(t.weight) : NULL, t.eps);
        CG_TRY(r, i);
        return cu_ew_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c);
    }
    case IR_OP_SOFTMAX:
        r->n_kernels++;
        return cu_softmax(s, dst, SP(0), n->ne[0], ir_nrows(n));
    case IR_OP_LAYER_NORM:
        r->n_kernels++;
        return cu_layer_norm(s, dst, SP(0), n->ne[0], ir_nrows(n), ir_f0(n));
    case IR_OP_GELU:
        r->n_kernels++;
        return cu_gelu_erf(s, dst, SP(0), ir_nelem(n));
    case IR_OP_CONCAT:
        r->n_kernels++;
        return run_concat(r, i);
    case IR_OP_PERMUTE:
        r->n_kernels++;
        return cu_permute(s, dst, SP(0), SRC(0)->ne, ir_permute_perm(n));
    case IR_OP_SWIGLU: case IR_OP_GEGLU:
        r->n_kernels++;
        return cu_glu(s, dst, SP(0), SP(1), ir_nelem(n), n->op == IR_OP_GEGLU);
    case IR_OP_QUANTIZE:
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_quantize_act(s, n->dtype, dst, SP(0), n->ne[0], ir_nrows(n));
    case IR_OP_RMS_NORM_QUANT:
    case IR_OP_ADD_RMS_NORM_QUANT: {
        const bool add = n->op == IR_OP_ADD_RMS_NORM_QUANT; /* (a, b, w?): the sum is its result 1 */
        const float *w = n->src[add ? 2 : 1] != IR_NONE ? SP(add ? 2 : 1) : NULL;
        float *sum = add ? (float *)dptr(r, ir_result_of(g, i, 1)) : NULL;
        r->n_kernels++;
        if (r->nsum_for == i) { /* the GEMM before it left its split partials: h = their sum + o (pass fuse_norm_sums) */
            cu_split_src src = r->nsum_src;
            r->nsum_for = 0;
            if (add) { /* h = v + o summed here: o as the partials' epilogue */
                const ir_ref o = n->src[0] == r->nsum_mm ? n->src[1] : n->src[0];
                src.ep = (cu_epilogue){.add = (const float *)dptr(r, o), .bcast = 0};
            }
            return cu_rms_norm_quant_split(s, n->dtype, dst, add ? sum : (float *)SP(0), &src, w, n->ne[0], ir_nrows(n), ir_f0(n));
        }
        CG_TRY(r, i);
        if (add) return cu_add_rms_norm_quant(s, n->dtype, dst, sum, SP(0), SP(1), w, n->ne[0], ir_nrows(n), ir_f0(n));
        return cu_rms_norm_quant(s, n->dtype, dst, SP(0), w, n->ne[0], ir_nrows(n), ir_f0(n));
    }
    case IR_OP_RESULT: return SB_OK; /* written by its producer */
    case IR_OP_GLU_QUANT:
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_glu_quant(s, n->dtype, dst, SP(0), SP(1), n->ne[0], ir_nrows(n), ir_glu_act(n) == IR_OP_GEGLU);
    case IR_OP_MATMUL: {
        r->n_kernels++;
        if (r->c->fu.skip && (r->c->fu.vstore[i] >= 0 || r->c->fu.krope[i] >= 0 ||
                              (cf_multi_ok(g, n) && n->ne[0] <= GF_ROWS_MAX && (r->cx->cfg.gemv_single || cf_reg_single(g, n)))))
            return run_gemv_launch(r, i); /* a T = 1 GEMV through the multi entry, with its cache write if any */
        return run_matmul_one(r, i);
    }
    case IR_OP_MATMUL_GROUP:
        if (SRC(0)->ne[1] > 1) return run_mma_group(r, i);
        r->n_kernels++;
        return run_gemv_launch(r, i);
    case IR_OP_RESHAPE: case IR_OP_VIEW: case IR_OP_OUTPUT: return SB_OK; /* views */
    case IR_OP_ROPE:
    case IR_OP_ROPE_STORE: {
        if (ir_job_next(n, i) != IR_NONE || r->gsrc_n) return run_rope_jobs(r, i);
        cu_rope_job jb = rope_job(r, i);
        r->n_kernels++;
        const ir_rope_norm nm = ir_rope_norm_of(n); /* pass fuse_norm_rope: each head normed as it is loaded */
        if (nm.kind != IR_ROPE_NORM_NONE)
            return cu_rope_norm(s, jb.dst, jb.x, SP(ir_job_pos_src(n)), &jb.a, nm.eps,
                                nm.weight != IR_NONE ? (const float *)dptr(r, nm.weight) : NULL);
        return cu_rope(s, jb.dst, jb.x, SP(ir_job_pos_src(n)), &jb.a);
    }
    case IR_OP_KV_STORE:
        if (ir_job_next(n, i) != IR_NONE || r->gsrc_n) return run_rope_jobs(r, i);
        r->n_kernels++;
        if (ir_rope_norm_of(n).kind) { /* pass fuse_norm_rope: each head normed, stored at pos — cu_rope_norm rotating nothing */
            const ir_rope_norm nm = ir_rope_norm_of(n);
            const cu_rope_args a = {.D = nm.head_dim, .H = n->ne[0] / nm.head_dim, .T = SRC(1)->ne[1], .n_rot = 0, .mode = 0,
                                    .theta_scale = 1.0f, .freq_scale = 1.0f, .attn_factor = 1.0f, .cache = dst, .ctype = n->dtype,
                                    .ring = ir_kv_ring(g, i)};
            return cu_rope_norm(s, NULL, SP(1), SP(2), &a, nm.eps, nm.weight != IR_NONE ? (const float *)dptr(r, nm.weight) : NULL);
        }
        return cu_kv_store(s, dst, n->dtype, n->ne[0], SP(1), SP(2), SRC(1)->ne[1], ir_kv_ring(g, i));
    case IR_OP_ATTENTION: {
        if (cx_attn_paged_on_dec(r->cx, r->p, n, r->depth_max)) { /* a paged B = 1 step at a depth class: the session's kernels through the table */
            cu_attn_args a = cx_attn_paged_dec_args(r->cx, r->p, n, r->depth_max);
            a.tbl = (const int32_t *)SP(4);
            a.q_rope = attn_q_rope(r, n);
            if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
            const bool deep = cu_attn_deep_fits(&a); /* k_attn_deep + its merge; else the small layout's own kernel */
            const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = deep ? cu_attn_deep_scratch(&a) : 0;
            if (need > cap) /* cx_plan_get sized the scratch region for it */
                return sb_fail(SB_ERR_INTERNAL, "cuda: paged decode attention needs %llu floats of scratch, %llu planned", (unsigned long long)need,
                               (unsigned long long)cap);
            r->n_kernels += deep ? 2 : 1;
            return cu_attn_decode(s, dst, SP(0), SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
        }
        if (cx_attn_on_paged_kernel(r->cx, r->p, n)) { /* k_attn_paged.cu; a contiguous cache as one block of its C rows */
            const bool paged = ir_attn_block_size(n) > 0;
            cu_attn_paged_args pa = cx_attn_paged_args(r->cx, r->p, n);
            pa.q_rope = attn_q_rope(r, n);
            if (ir_attn_quant_type(n) >= 0) pa.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
            const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = cu_attention_paged_scratch(&pa);
            if (need > cap) /* cx_plan_get sized the scratch region for it */
                return sb_fail(SB_ERR_INTERNAL, "cuda: paged attention of %d splits needs %llu floats of scratch, %llu planned", pa.nsplit,
                               (unsigned long long)need, (unsigned long long)cap);
            r->n_kernels += cu_attention_paged_launches(&pa, true); /* a split merged by its last block, or by k_attn_paged_merge */
            return cu_attention_paged(s, dst, SP(0), SP(1), SP(2), SP(3), paged ? (const int32_t *)SP(4) : r->cx->d_zero, &pa,
                                      need ? (float *)(r->arena + r->c->scratch_off) : NULL, r->cx->d_cnt);
        }
        cu_attn_args a = cx_attn_args(r->cx, r->p, n);
        a.depth_max = r->depth_max;
        const void *q = SP(0);
        a.q_rope = attn_q_rope(r, n);
        if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
        if (cx_attn_on_flash(r->cx, r->p, n)) { /* prefill: flash attention (k_fattn.cu, k_fattn_mma.cu) */
            r->n_kernels++;
            return cu_attention_prefill(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off),
                                        (r->c->arena_need - r->c->scratch_off) / 4, r->cx->d_cnt);
        }
        const bool dec4 = a.variant == 4 && a.T == 1 && (a.nsplit == 1 || a.Hkv <= CU_ATT_COUNTERS); /* k_attn_decode.cu: one kernel */
        r->n_kernels += (!dec4 && a.nsplit > 1 && a.T * a.Hq > CU_ATT_COUNTERS) || (dec4 && cu_attn_deep_fits(&a)) ? 2 : 1;
        return cu_attention(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
    }
    case IR_OP_SELECT_ROWS:
        r->n_kernels++;
        return cu_select_rows(s, dst, SP(0), n->ne[0], SP(1), n->ne[1]);
    case IR_OP_SLICE: { /* x [a,b,c,d] -> [a,n,c,d] */
        const ir_node *x = SRC(0);
        r->n_kernels++;
        return cu_slice_rows(s, dst, SP(0), x->ne[0], x->ne[1], ir_slice_start(n), ir_slice_len(n), x->ne[2] * x->ne[3]);
    }
    default: return sb_fail(SB_ERR_INTERNAL, "cuda: op %s has no CUDA implementation", ir_ops[n->op].name);
    }
#undef SRC
#undef SP
}

static int prof_family(const plan *p, const ir_node *n) {
    if (n->op == IR_OP_MATMUL) {
        const int wt = p->g->nodes[n->src[0]].dtype;
        if (wt >= 0 && wt < SB_TYPE_COUNT) return IR_OP_COUNT + wt;
    }
    return (int)n->op;
}

/* the events of one profiled run into the family and per-node sums: event k closes node nd[k], kn[k]
 * kernels (a graph other than the last one profiled starts the per-node sums again) */
static sb_status prof_account(exec_cuda *cx, const plan *p, const int32_t *kn, const int32_t *nd, int32_t ne) {
    const ir_graph *g = p->g;
    if (cx->prof_g != g || cx->prof_nodes != g->n_nodes) {
        double *ms = (double *)calloc((size_t)g->n_nodes, sizeof *ms);
        char(*lab)[PROF_LABEL] = (char(*)[PROF_LABEL])calloc((size_t)g->n_nodes, sizeof *lab);
        if (!ms || !lab) {
            free(ms), free(lab);
            return sb_fail(SB_ERR_OOM, "cuda: profile");
        }
        free(cx->prof_node_ms), free(cx->prof_node_label);
        cx->prof_node_ms = ms, cx->prof_node_label = lab;
        cx->prof_g = g, cx->prof_nodes = g->n_nodes;
    }
    sb_status st = cu_stream_sync(cx->s);
    for (int32_t k = 1; st == SB_OK && k < ne; k++) {
        float ms = 0;
        st = cu_event_ms(cx->ev[k - 1], cx->ev[k], &ms);
        const ir_node *n = &g->nodes[nd[k]];
        const int fam = prof_family(p, n);
        cx->prof_ms[fam] += ms;
        cx->prof_k[fam] += kn[k];
        cx->prof_node_ms[nd[k]] += ms;
        if (!cx->prof_node_label[nd[k]][0])
            snprintf(cx->prof_node_label[nd[k]], PROF_LABEL, "%%%d %s \"%.24s\" [%lld,%lld,%lld]", (int)nd[k], ir_ops[n->op].name, n->name,
                     (long long)n->ne[0], (long long)n->ne[1], (long long)n->ne[2]);
    }
    cx->prof_runs++;
    return st;
}

sb_status cx_enqueue_all(crun *r) {
    const ir_graph *g = r->p->g;
    exec_cuda *cx = r->cx;
    r->n_kernels = 0;
    if (cx->cfg.profile && cx->n_ev < g->n_nodes + 1) { /* profiling only: events for every node boundary */
        if (cx->ev) cu_events_destroy(cx->ev, cx->n_ev);
        free(cx->ev);
        cx->n_ev = 0;
        cx->ev = (void **)calloc((size_t)g->n_nodes + 1, sizeof *cx->ev);
        if (!cx->ev) return sb_fail(SB_ERR_OOM, "cuda: profile events");
        SB_TRY(cu_events_create(cx->ev, g->n_nodes + 1));
        cx->n_ev = g->n_nodes + 1;
    }
    int32_t ne = 0;
    /* per event k: the kernels and the node it closes */
    int32_t *kn = cx->cfg.profile ? (int32_t *)calloc((size_t)g->n_nodes + 1, sizeof *kn) : NULL;
    int32_t *nd = cx->cfg.profile ? (int32_t *)calloc((size_t)g->n_nodes + 1, sizeof *nd) : NULL;
    if (cx->cfg.profile && (!kn || !nd)) {
        free(kn), free(nd);
        return sb_fail(SB_ERR_OOM, "cuda: profile");
    }
    sb_status st = SB_OK;
    if (cx->cfg.profile) st = cu_event_record(cx->ev[ne++], cx->s);
    for (int32_t i = 0; st == SB_OK && i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (ir_ops[n->op].flags & OPF_INPUT) continue;
        if (r->c->fu.skip && r->c->fu.skip[i]) continue; /* done by the matmul before it */
        const int32_t k0 = r->n_kernels;
        st = cx_run_node(r, i);
        if (st != SB_OK) {
            st = sb_fail_context(st, "cuda: node %%%d %s \"%s\"", (int)i, ir_ops[n->op].name, n->name);
            break;
        }
        if (cx->cfg.profile && r->n_kernels > k0) {
            kn[ne] = r->n_kernels - k0;
            nd[ne] = i;
            st = cu_event_record(cx->ev[ne++], cx->s);
        }
    }
    if (cx->cfg.profile && st == SB_OK) st = prof_account(cx, r->p, kn, nd, ne);
    free(kn);
    free(nd);
    return st;
}

#endif
