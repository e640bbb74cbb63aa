/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_dispatch.c — one node of a plan to its launches (matmuls: exec_cuda_matmul.c,
 * attention: exec_cuda_attention.c; here rope / cache-store jobs, norms, quantizers, elementwise
 * chains, row ops), and the walk over a plan's nodes (with per-family profiling when asked).
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"
#include "backend/cuda/rope_norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define SRC(j) (&g->nodes[n->src[j]])
#define SP(j) dptr(r, n->src[j])

/* an elementwise op, or a FUSED chain of them (pass fuse_elementwise; with its quantize tail: pass
 * fuse_chain_quant), as one cu_ew_rows launch or its generated kernel */
static sb_status run_elementwise(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
    if (n->op == IR_OP_FUSED) {
        cu_ew_chain c = {.n = ir_fused_steps(n)};
        for (int k = 0; k < ir_fused_steps(n); k++) {
            const ir_fused_step fs = ir_fused_step_of(n, k);
            const int opd = fs.operand;
            c.st[k] = (cu_ew_step){.op = ew_code(fs.op), .f = fs.f};
            if (opd) {
                c.st[k].opd = SP(opd);
                c.st[k].bcast = cx_bcast(SRC(opd), n);
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
    cu_ew_chain c = {.n = 1};
    c.st[0] = (cu_ew_step){.op = ew_code(n->op), .f = ir_f0(n)};
    if (n->op == IR_OP_ADD || n->op == IR_OP_MUL) {
        c.st[0].opd = SP(1);
        c.st[0].bcast = cx_bcast(SRC(1), n);
    }
    r->n_kernels++;
    CG_TRY(r, i);
    return cu_ew_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c);
}

/* RMS_NORM_QUANT or ADD_RMS_NORM_QUANT: the norm (summing the GEMM's split partials before it
 * where pass fuse_norm_sums left them) and the quantizer in one launch */
static sb_status run_norm_quant(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
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

/* ROPE, ROPE_STORE or KV_STORE i: with the jobs chained from it (pass fuse_rope_jobs) as one launch,
 * else alone (normalising each head first where pass fuse_norm_rope put a norm in it) */
static sb_status run_rope_store(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
    if (ir_job_next(n, i) != IR_NONE || r->gsrc_n) return run_rope_jobs(r, i);
    if (n->op != IR_OP_KV_STORE) {
        cu_rope_job jb = rope_job(r, i);
        r->n_kernels++;
        const ir_rope_norm nm = ir_rope_norm_of(n); /* pass fuse_norm_rope: each head normed as it is loaded */
        if (nm.kind != IR_ROPE_NORM_NONE)
            return cu_rope_norm(s, jb.dst, jb.x, SP(ir_job_pos_src(n)), &jb.a, nm.eps,
                                nm.weight != IR_NONE ? (const float *)dptr(r, nm.weight) : NULL);
        return cu_rope(s, jb.dst, jb.x, SP(ir_job_pos_src(n)), &jb.a);
    }
    r->n_kernels++;
    if (ir_rope_norm_of(n).kind) { /* pass fuse_norm_rope: each head normed, stored at pos — cu_rope_norm rotating nothing */
        const ir_rope_norm nm = ir_rope_norm_of(n);
        const cu_rope_args a = {.D = nm.head_dim, .H = n->ne[0] / nm.head_dim, .T = SRC(1)->ne[1], .n_rot = 0, .mode = 0,
                                .theta_scale = 1.0f, .freq_scale = 1.0f, .attn_factor = 1.0f, .cache = dst, .ctype = n->dtype,
                                .ring = ir_kv_ring(g, i)};
        return cu_rope_norm(s, NULL, SP(1), SP(2), &a, nm.eps, nm.weight != IR_NONE ? (const float *)dptr(r, nm.weight) : NULL);
    }
    return cu_kv_store(s, dst, n->dtype, n->ne[0], SP(1), SP(2), SRC(1)->ne[1], ir_kv_ring(g, i));
}

/* node i of r's plan to its launches (counted in r->n_kernels) */
sb_status cx_run_node(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
    switch (n->op) {
    case IR_OP_GET_ROWS: {
        const ir_node *w = SRC(0);
        const cgather *gt = cx_gather_of(r->c, i);
        uint64_t rb = 0;
        qk_row_bytes(w->dtype, w->ne[0], &rb);
        rb = cu_dev_bytes(w->dtype, rb); /* rows as the device stores them (cu_layout.h) */
        r->n_kernels++;
        if (gt) /* the table stays in host memory: this run's rows are in the stage, in token order */
            return cu_get_rows(s, dst, r->c->d_stage + gt->off, w->dtype, n->ne[0], rb, NULL, n->ne[1]);
        return cu_get_rows(s, dst, SP(0), w->dtype, n->ne[0], rb, SP(1), n->ne[1]);
    }
    case IR_OP_RMS_NORM: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU:
    case IR_OP_GELU_TANH: case IR_OP_FUSED: return run_elementwise(r, i);
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
    case IR_OP_RMS_NORM_QUANT: case IR_OP_ADD_RMS_NORM_QUANT: return run_norm_quant(r, i);
    case IR_OP_RESULT: return SB_OK; /* written by its producer */
    case IR_OP_GLU_QUANT:
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_glu_quant(s, n->dtype, dst, SP(0), SP(1), n->ne[0], ir_nrows(n), ir_glu_act(n) == IR_OP_GEGLU);
    case IR_OP_MATMUL: case IR_OP_MATMUL_GROUP: return cx_run_matmul(r, i);
    case IR_OP_RESHAPE: case IR_OP_VIEW: case IR_OP_OUTPUT: return SB_OK; /* views */
    case IR_OP_ROPE: case IR_OP_ROPE_STORE: case IR_OP_KV_STORE: return run_rope_store(r, i);
    case IR_OP_ATTENTION: return cx_run_attention(r, i);
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
