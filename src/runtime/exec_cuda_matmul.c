/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_matmul.c — a MATMUL or MATMUL_GROUP node to its launches: cuBLASLt, the int8
 * MMA GEMM (alone or as a planner group, K split or not), the dp4a and f32 GEMVs, and the T = 1
 * multi-GEMV launch with its fused epilogues (bias / residual, V's cache store, K's rope and store,
 * a gated group's GLU); an LM head writing the caller's memory also flags non-finite values.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>

/* the epilogue adding addend o (IR_NONE: none) to the product whose value is node v */
static cu_epilogue addend_ep(crun *r, ir_ref o, ir_ref v) {
    const ir_graph *g = r->p->g;
    if (o == IR_NONE) return (cu_epilogue){0};
    return (cu_epilogue){.add = (const float *)dptr(r, o), .bcast = cx_bcast(&g->nodes[o], &g->nodes[v])};
}

static float *matmul_out(crun *r, int32_t m, cu_epilogue *ep) {
    *ep = addend_ep(r, ir_matmul_addend(&r->p->g->nodes[m]), m);
    return (float *)dptr(r, m);
}

/* does the dp4a GEMV (cu_matmul_q8) take weight w times activation x? */
static bool q8_gemv_takes(const ir_node *w, const ir_node *x) {
    return (x->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(w->dtype)) || (x->dtype == SB_TYPE_Q8_K && cu_has_mmvq_q8k(w->dtype));
}

/* does the int8 MMA GEMM of lone matmul nsum_node (-1: a group's member) leave its split partials to
 * the norm after it (pass fuse_norm_sums) instead of reducing them itself? */
static bool partials_to_norm(const crun *r, int32_t nsum_node) {
    return cu_mma_small_mode() == 2 && nsum_node >= 0 && r->c->fu.nsum && r->c->fu.nsum[nsum_node] >= 0;
}

/* does the path run_matmul_wx takes for w x x flag a non-finite value it writes (cu_epilogue.nonfinite)?
 * The T = 1 dp4a GEMV and the int8 MMA GEMMs do, but not a split whose partials a norm sums
 * (nsum_node's) nor cuBLASLt or the f32 GEMVs */
static bool matmul_flags_nonfinite(const crun *r, const ir_node *w, const ir_node *x, int32_t nsum_node) {
    if (r->cx->d_blas_ws && cf_blas_takes(w, x)) return false;
    if (cf_mma_takes(w, x)) return !partials_to_norm(r, nsum_node);
    return x->ne[1] == 1 && q8_gemv_takes(w, x);
}

/* weight wr times activation xr into dst with epilogue epb (add NULL: none), as a lone matmul runs:
 * cuBLASLt for f32 activations where cu_blas_on says (cu_config.blas_min_t / blas_quant tokens or
 * more), the int8 MMA GEMM for T >= mma_min_t, else the dp4a or f32 GEMVs. nsum_node: the lone matmul whose
 * split partials a norm may sum (pass fuse_norm_sums; -1: a group's member). The caller has counted the
 * launch (a split-K reduce, cuBLASLt's extra launches count themselves). */
static sb_status run_matmul_wx(crun *r, ir_ref wr, ir_ref xr, float *dst, cu_epilogue epb, int32_t nsum_node) {
    const ir_graph *g = r->p->g;
    const ir_node *w = &g->nodes[wr], *x = &g->nodes[xr];
    cu_stream s = r->cx->s;
    const cu_epilogue *ep = epb.add || epb.nonfinite ? &epb : NULL;
    if (epb.nonfinite && !matmul_flags_nonfinite(r, w, x, nsum_node)) /* run_matmul_one arms it for those paths only */
        return sb_fail(SB_ERR_INTERNAL, "cuda: a non-finite flag on a matmul whose kernel does not set it");
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
            if (partials_to_norm(r, nsum_node)) { /* a split leaves its partials to the norm after it */
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
 * the caller from a kernel that can (matmul_flags_nonfinite: an LM head's dp4a GEMV or int8 MMA
 * GEMM), that kernel also flags a non-finite value in the output's slot of h_nonfinite, so the host
 * need not read the logits again to know (a batched step's B x n_vocab floats). */
static sb_status run_matmul_one(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i], *x = &g->nodes[n->src[1]];
    cu_epilogue epb;
    float *dst = matmul_out(r, i, &epb);
    const int slot = direct_slot(r, i);
    if (slot >= 0 && matmul_flags_nonfinite(r, &g->nodes[n->src[0]], x, i)) {
        epb.nonfinite = r->cx->h_nonfinite + slot;
        r->checked |= 1u << slot;
    }
    return run_matmul_wx(r, n->src[0], n->src[1], dst, epb, i);
}

static cu_gemv_seg launch_seg(crun *r, int32_t i, int j);

/* a T >= mma_min_t MATMUL_GROUP i (pass fuse_matmul_group): one int8 MMA launch where cu_mma_multi_split
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

sb_status cx_run_matmul(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    if (n->op == IR_OP_MATMUL_GROUP) {
        if (g->nodes[n->src[0]].ne[1] > 1) return run_mma_group(r, i);
        r->n_kernels++;
        return run_gemv_launch(r, i);
    }
    r->n_kernels++;
    if (r->c->fu.skip && (r->c->fu.vstore[i] >= 0 || r->c->fu.krope[i] >= 0 ||
                          (cf_multi_ok(g, n) && n->ne[0] <= GF_ROWS_MAX && (r->cx->cfg.gemv_single || cf_reg_single(g, n)))))
        return run_gemv_launch(r, i); /* a T = 1 GEMV through the multi entry, with its cache write if any */
    return run_matmul_one(r, i);
}

#endif
