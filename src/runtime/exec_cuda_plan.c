/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_plan.c — per-plan device state (cplan): input bindings to device memory (a
 * weight read only as a get_rows table by the tokens stays in host memory: its rows go through the
 * plan's per-run stage), the executor-level fusion tables (cuda_fusion.h),
 * the arena size with split scratch, generated kernels; found by plan pointer or built on a plan's
 * first run.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cx_drop_graphs(cplan *c) {
    for (int k = 0; k < CX_DEPTH_CLASSES; k++) {
        cu_graph_destroy(c->graph[k]);
        c->graph[k] = NULL;
    }
}

void cx_plan_clear(cplan *c) {
    cx_drop_graphs(c);
    free(c->dptr);
    cuda_fusions_free(&c->fu);
    free(c->cg);
    cu_free(c->d_stage);
    cu_host_free(c->h_stage);
    free(c->gathers);
    free(c->runtime);
    memset(c, 0, sizeof *c);
}

// ---- per-plan state ----

void exec_cuda_assume_device(int cc_major, int sms) { cu_assume_device(cc_major, sms); }
bool exec_cuda_blaslt_available(char *why, size_t cap) { return cu_blaslt_available(why, cap); }
void exec_cuda_assume_blaslt(int on) { cu_blaslt_assume(on); }

/* as a new context would plan p: nodes fused away (skips, what 0), gate/up launches that write their
 * GLU (1: the planner's gated groups), or matmuls whose norm sums their
 * split partials (2) */
static int32_t count_planned(const plan *p, const cu_config *cfg, int what) {
    cuda_fusions c = {0};
    int32_t n = -1;
    cfg = cfg ? cfg : &cu_config_default;
    const cu_config *prev = cu_cfg_bind(cfg);
    if (cuda_fusions_plan(p, &c, cfg) == SB_OK) {
        n = 0;
        for (int32_t i = 0; i < p->g->n_nodes; i++) /* gate/up launches: the planner's gated groups too */
            n += what == 0 ? c.skip[i] : what == 1 ? ir_group_glu(&p->g->nodes[i]) != 0 : c.nsum[i] >= 0;
    }
    cuda_fusions_free(&c); /* every table (cuda_fusions_plan allocates them all) */
    cu_cfg_bind(prev);
    return n;
}
int32_t exec_cuda_count_fusions(const plan *p, const cu_config *c) { return count_planned(p, c, 0); }
int32_t exec_cuda_count_glu_pairs(const plan *p, const cu_config *c) { return count_planned(p, c, 1); }
int32_t exec_cuda_count_norm_sums(const plan *p, const cu_config *c) { return count_planned(p, c, 2); }

/* the words of p's slots and block-table inputs, in input order (run_bound stages them so) */
static uint64_t paged_words(const plan *p) {
    uint64_t w = 0;
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (p->inputs[i].kind == IR_OP_SLOTS || p->inputs[i].kind == IR_OP_BLOCK_TABLE) w += (uint64_t)ir_nelem(&p->g->nodes[p->inputs[i].node]);
    return w;
}

/* per node of p: 1 for a weight read only as the table of get_rows by the tokens input (at least
 * once), which then stays in host memory; decided from the plan's shape alone */
static uint8_t *host_gathered(const plan *p) {
    const ir_graph *g = p->g;
    uint8_t *gat = (uint8_t *)calloc((size_t)g->n_nodes, 1), *full = (uint8_t *)calloc((size_t)g->n_nodes, 1);
    if (!gat || !full) {
        free(full);
        free(gat);
        return NULL;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int k = 0; k < IR_MAX_SRC; k++) {
            const ir_ref w = n->src[k];
            if (w == IR_NONE || g->nodes[w].op != IR_OP_WEIGHT) continue;
            const bool gather = n->op == IR_OP_GET_ROWS && k == 0 && g->nodes[n->src[1]].op == IR_OP_TOKENS;
            (gather ? gat : full)[w] = 1;
        }
    }
    for (int32_t i = 0; i < g->n_nodes; i++) gat[i] = gat[i] && !full[i];
    free(full);
    return gat;
}

int32_t exec_cuda_host_gathers(const plan *p, ir_ref *out, int32_t cap) {
    uint8_t *gat = host_gathered(p);
    if (!gat) return -1;
    int32_t n = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (gat[i]) {
            if (n < cap) out[n] = i;
            n++;
        }
    free(gat);
    return n;
}

#define STAGE_ALIGN 256 /* each gather's rows start aligned (cu_malloc's own alignment) */

/* c's per-run weight inputs (plan_input.per_run; a host-gathered table is not one: its rows are
 * staged instead), placed in the stage from off on; returns the end */
static sb_status stage_runtime(cplan *c, const plan *p, const uint8_t *gat, uint64_t *off) {
    int32_t nr = 0;
    for (int32_t i = 0; i < p->n_inputs; i++) nr += p->inputs[i].per_run && p->inputs[i].kind == IR_OP_WEIGHT && !gat[p->inputs[i].node];
    if (!nr) return SB_OK;
    c->runtime = (cruntime *)calloc((size_t)nr, sizeof *c->runtime);
    if (!c->runtime) return sb_fail(SB_ERR_OOM, "cuda: %d per-run inputs", (int)nr);
    for (int32_t i = 0; i < p->n_inputs; i++) {
        if (!p->inputs[i].per_run || p->inputs[i].kind != IR_OP_WEIGHT || gat[p->inputs[i].node]) continue;
        *off = (*off + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
        const ir_node *n = &p->g->nodes[p->inputs[i].node];
        const uint64_t nb = ir_nbytes(n);
        c->runtime[c->n_runtime++] = (cruntime){.in = i, .off = *off, .bytes = nb, .type = n->dtype};
        *off += cu_dev_bytes(n->dtype, nb);
    }
    return SB_OK;
}

/* c's stage: the paged words, then the per-run weight inputs, then the rows of each get_rows of a
 * host-gathered table (gat); its device buffer and page-locked staging (none when empty) */
static sb_status stage_buffers(cplan *c, const plan *p, const uint8_t *gat) {
    const ir_graph *g = p->g;
    c->paged_words = paged_words(p);
    uint64_t off = c->paged_words * 4;
    SB_TRY(stage_runtime(c, p, gat, &off));
    int32_t ng = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) ng += g->nodes[i].op == IR_OP_GET_ROWS && gat[g->nodes[i].src[0]];
    if (ng) {
        c->gathers = (cgather *)calloc((size_t)ng, sizeof *c->gathers);
        if (!c->gathers) return sb_fail(SB_ERR_OOM, "cuda: %d host gathers", (int)ng);
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op != IR_OP_GET_ROWS || !gat[n->src[0]]) continue;
        const ir_node *w = &g->nodes[n->src[0]];
        cgather *gt = &c->gathers[c->n_gathers++];
        off = (off + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
        *gt = (cgather){.node = i, .w_in = p->vals[n->src[0]].input, .tok_in = p->vals[n->src[1]].input, .off = off, .type = w->dtype, .T = n->ne[1]};
        if (qk_row_bytes(w->dtype, w->ne[0], &gt->row_bytes) || gt->w_in < 0 || gt->tok_in < 0)
            return sb_fail(SB_ERR_INTERNAL, "cuda: get_rows %%%d of \"%s\" (type %s) cannot be gathered on the host", (int)i, w->name,
                           ir_dtype_name(w->dtype));
        gt->dev_row_bytes = cu_dev_bytes(w->dtype, gt->row_bytes);
        off += (uint64_t)n->ne[1] * gt->dev_row_bytes;
    }
    c->stage_bytes = off;
    if (!off) return SB_OK;
    /* whole units, as cx_devbuf_get's: a run-time matrix last in the stage is read up to 2 bytes past its end by the GEMVs */
    const uint64_t dev_bytes = (off + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    SB_TRY(cu_malloc((void **)&c->d_stage, (size_t)dev_bytes, "per-run inputs: paged KV slots and block tables, run-time data, gathered rows"));
    return cu_host_alloc((void **)&c->h_stage, (size_t)off, "per-run inputs (staging)");
}

const cgather *cx_gather_of(const cplan *c, int32_t node) {
    for (int32_t k = 0; k < c->n_gathers; k++)
        if (c->gathers[k].node == node) return &c->gathers[k];
    return NULL;
}

sb_status cx_plan_get(exec_cuda *cx, const plan *p, const exec_bindings *b, cplan **out) {
    cplan *free_slot = NULL;
    for (int i = 0; i < CX_MAX_PLANS; i++) {
        if (cx->plans[i].p == p) {
            *out = &cx->plans[i];
            return SB_OK;
        }
        if (!cx->plans[i].p && !free_slot) free_slot = &cx->plans[i];
    }
    if (!free_slot)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: %d plans are live on this device context already (its limit; free programs compiled for CUDA "
                       "that are no longer used)", CX_MAX_PLANS);
    cplan *c = free_slot;
    memset(c, 0, sizeof *c);
    c->dptr = (void **)calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *c->dptr);
    if (!c->dptr) return sb_fail(SB_ERR_OOM, "cuda: plan bindings");
    uint8_t *gat = host_gathered(p);
    sb_status st = gat ? stage_buffers(c, p, gat) : sb_fail(SB_ERR_OOM, "cuda: plan weight flags");
    uint64_t w = 0; /* int32 words into d_stage */
    for (int32_t i = 0; st == SB_OK && i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        const ir_node *n = &p->g->nodes[in->node];
        switch (in->kind) {
        case IR_OP_SLOTS: case IR_OP_BLOCK_TABLE:
            c->dptr[i] = (int32_t *)c->d_stage + w;
            w += (uint64_t)ir_nelem(n);
            break;
        case IR_OP_TOKENS: c->dptr[i] = cx->d_tok; break;
        case IR_OP_POS: c->dptr[i] = cx->d_pos; break;
        case IR_OP_OUT_ROWS: c->dptr[i] = cx->d_rows; break;
        case IR_OP_WEIGHT:
            if (gat[in->node]) break; /* stays in host memory: its rows go through the stage (dptr NULL) */
            if (in->per_run) { /* read from the stage, where each run copies it */
                for (int32_t k = 0; k < c->n_runtime; k++)
                    if (c->runtime[k].in == i) c->dptr[i] = c->d_stage + c->runtime[k].off;
                break;
            }
            st = cx_devbuf_get(cx, b->data[i], ir_nbytes(n), n->dtype, in->name, &c->dptr[i]);
            break;
        case IR_OP_KV: st = cx_devbuf_get(cx, b->data[i], ir_nbytes(n), -1, in->name, &c->dptr[i]); break;
        default: st = sb_fail(SB_ERR_INTERNAL, "cuda: plan input %d has kind %d", (int)i, in->kind);
        }
    }
    free(gat);
    uint64_t scratch = 0;
    bool blas = false; /* a matmul of the plan runs on cuBLASLt: its workspace */
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_ATTENTION && cx_attn_on_paged_kernel(cx, p, &p->g->nodes[i])) {
            const cu_attn_paged_args a = cx_attn_paged_args(cx, p, &p->g->nodes[i]); /* the paged kernel's key-split partials */
            uint64_t f = cu_attention_paged_scratch(&a);
            if (f > scratch) scratch = f;
            if (ir_attn_block_size(&p->g->nodes[i]) > 0 && a.T == 1) { /* k_attn_deep's partials at any depth class (cx_attn_paged_on_dec) */
                const cu_attn_args d = cx_attn_paged_dec_args(cx, p, &p->g->nodes[i], 0);
                f = cu_attn_deep_scratch(&d);
                if (f > scratch) scratch = f;
            }
        } else if (p->g->nodes[i].op == IR_OP_ATTENTION) {
            cu_attn_args a = cx_attn_args(cx, p, &p->g->nodes[i]);
            uint64_t f = cu_attention_scratch(&a);
            if (f > scratch) scratch = f;
            if ((cx->cfg.attn_variant == 3 || cx->cfg.attn_variant == 4) && a.T > 1) { /* the flash prefill's key-split partials */
                f = cu_fattn_scratch(&a);
                if (f > scratch) scratch = f;
            }
        } else if (cf_blas_ok(p->g, &p->g->nodes[i])) { /* cuBLASLt: x as halves (+ a chunk of F16 weight rows) */
            const ir_node *mw = &p->g->nodes[p->g->nodes[i].src[0]], *mx = &p->g->nodes[p->g->nodes[i].src[1]];
            const uint64_t f = (cu_blas_scratch_bytes(mw->dtype, mw->ne[0], mw->ne[1], mx->ne[1]) + 3) / 4;
            if (f > scratch) scratch = f;
            blas = true;
        } else if (p->g->nodes[i].op == IR_OP_MATMUL_GROUP && p->g->nodes[p->g->nodes[i].src[0]].ne[1] >= cu_mma_min_t()) {
            const ir_node *gn = &p->g->nodes[i], *mx = &p->g->nodes[gn->src[0]]; /* a split group's partials: its members' together */
            uint64_t f = 0;
            for (int j = 0; j < ir_group_n(gn); j++) {
                const ir_node *mw = &p->g->nodes[ir_group_weight(gn, j)];
                f += cu_mma_small_scratch(mw->ne[0], mw->ne[1], mx->ne[1]);
            }
            if (f > scratch) scratch = f;
        } else if (p->g->nodes[i].op == IR_OP_MATMUL && cu_mma_small_mode()) { /* split-K partials of the small-T GEMM */
            const ir_node *mw = &p->g->nodes[p->g->nodes[i].src[0]], *mx = &p->g->nodes[p->g->nodes[i].src[1]];
            if (mx->ne[1] >= cu_mma_min_t() && cu_has_mma(mw->dtype, mx->dtype)) {
                uint64_t f = cu_mma_small_scratch(mw->ne[0], mw->ne[1], mx->ne[1]);
                if (f > scratch) scratch = f;
            }
        }
    if (st == SB_OK && cx->cfg.fuse) st = cuda_fusions_plan(p, &c->fu, &cx->cfg);
    if (st == SB_OK && c->fu.skip && plan_dump_wants(NULL, "launches")) cuda_fusions_print(p, &c->fu, stderr); /* asked by a developer */
    if (st == SB_OK && blas && !cx->d_blas_ws) {
        st = cu_malloc(&cx->d_blas_ws, CU_BLASLT_WORKSPACE, "cuBLASLt workspace");
        if (st == SB_OK) cx->st.device_bytes += CU_BLASLT_WORKSPACE;
    }
    c->scratch_off = cf_align(p->arena_bytes);
    c->arena_need = c->scratch_off + cf_align(scratch * 4);
    if (st == SB_OK && c->arena_need > cx->arena_bytes) {
        st = cu_stream_sync(cx->s);
        if (st == SB_OK) {
            for (int i = 0; i < CX_MAX_PLANS; i++) cx_drop_graphs(&cx->plans[i]); /* graphs bake in the old arena */
            cu_free(cx->arena);
            cx->st.device_bytes -= cx->arena_bytes;
            cx->arena = NULL;
            cx->arena_bytes = 0;
            st = cu_malloc(&cx->arena, (size_t)c->arena_need, "activation arena");
            if (st == SB_OK) {
                cx->arena_bytes = c->arena_need;
                cx->st.device_bytes += c->arena_need;
            }
        }
    }
    if (st == SB_OK) st = cx_cg_prepare(cx, p, c); /* compiled, loaded and autotuned here: never during a capture */
    if (st != SB_OK) {
        cx_plan_clear(c); /* the bindings and every fusion table */
        return st;
    }
    c->p = p;
    *out = c;
    return SB_OK;
}

#endif
