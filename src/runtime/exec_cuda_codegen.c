/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_codegen.c — the executor's use of generated kernels (codegen/, docs/codegen.md):
 * which nodes get one, compiled or loaded from the caches, autotuned against the hand-written
 * kernel on the real buffers before any capture, launched by cx_cg_try.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- generated kernels (codegen/, docs/codegen.md) ----
/* The executor's one codegen helper: cx_cg_prepare (from cx_plan_get, so before any capture) turns
 * every node that would launch cu_ew_rows / cu_rms_norm_quant / cu_add_rms_norm_quant /
 * cu_glu_quant / cu_quantize_act into a generated kernel — compiled (or loaded from the caches),
 * autotuned over its variants with CUDA events on the real arena buffers (each variant once to warm
 * up, then 10 timed launches; the outputs are rewritten by every later run) with the hand-written
 * kernel timed as one more candidate, unless a winner is cached — and records it in c->cg;
 * cx_run_node's CG_TRY launches it instead of the hand-written kernel (unless that one won). Every
 * variant computes the hand-written kernel's bits (cg.h cg_variants), so which one wins — a timing,
 * different from process to process — never changes a result; nodes of one group share one tuning.
 * cu_config.codegen 1 (default): generated or hand-written per group, as autotuned; 0:
 * hand-written only; 2 (tests): generated only, a node codegen cannot do
 * is an error instead of a fallback. Without NVRTC: hand-written (logged once at INFO, `sb run -v`). */
typedef struct cg_node {
    void *fn; /* loaded kernel; NULL = the hand-written launcher */
    unsigned grid, block;
    int n_params;
    int64_t rows;
    ir_ref ref[CG_MAX_PARAMS];
} cg_node;

static int cg_mode(void) { return cu_cfg()->codegen; }

static void cg_fill(const crun *r, const cg_node *k, cg_params *pp) {
    for (int j = 0; j < CG_MAX_PARAMS; j++) pp->p[j] = j < k->n_params && k->ref[j] != IR_NONE ? dptr(r, k->ref[j]) : NULL;
    pp->rows = k->rows;
}

/* cx_run_node's hook: true when node i ran as a generated kernel (its launch status in *st) */
bool cx_cg_try(crun *r, int32_t i, sb_status *st) {
    if (!r->c->cg || !r->c->cg[i].fn) return false;
    cg_params pp;
    cg_fill(r, &r->c->cg[i], &pp);
    *st = cu_gen_launch(r->cx->s, r->c->cg[i].fn, r->c->cg[i].grid, r->c->cg[i].block, &pp);
    return true;
}

/* one node's part of cx_cg_prepare: its group, its variants (all in one source: cg_emit_bundle), the
 * kernel names and the bundle's index in the compile list */
typedef struct cg_pnode {
    int32_t node;
    cg_group grp;
    cg_variant v[CG_MAX_VARIANTS];
    char kname[CG_MAX_VARIANTS][40];
    int nv, win, job;
    bool tune, hand; /* hand: the hand-written kernel is a candidate */
} cg_pnode;

sb_status cx_run_node(crun *r, int32_t i);

/* time every variant of pn (each warmed up once, then 10 launches between events) and, with
 * `hand`, the hand-written kernel the same way (cx_run_node: the node has no generated kernel yet),
 * in CG_TUNE_ROUNDS interleaved rounds, each candidate's fastest round counting; keep the fastest
 * generated variant unless the hand-written kernel beats it by more than CG_TUNE_HAND_MARGIN
 * (CG_TUNE_HAND: the hand-written one). Why the rounds and the margin: one round picked between
 * near-equal candidates by noise, so a decode plan's 49 norm nodes ran the generated kernel in one
 * process and the hand-written one in the next (bodies 3.4 vs 4.0 µs on the H200: ~2% of tg64).
 * The margin is wide because these timings (the same kernel back to back, no PDL) are not what a
 * kernel costs in a step's chain: with a 2% margin fresh processes still chose the hand-written
 * norm for one of the decode plan's two norm groups now and then (its ncu body 4.05 µs vs 3.5
 * generated), and tg64 spread over 1,571-1,649 where generated-only (SB_CODEGEN=2) measured
 * 1,638-1,642 in the same run (H200, session 9). Still (session 14): one fresh cache in ~20 decoded at
 * 1,588-1,613, the hand-written level (SB_CODEGEN=0: 1,592-1,615; the others 1,650-1,697), so at one
 * row the hand-written kernel is no candidate (cx_cg_prepare; SB_CODEGEN_HAND1=1 restores it). */
#define CG_TUNE_ROUNDS 3
#define CG_TUNE_HAND_MARGIN 0.85f
static sb_status cg_tune_node(crun *r, cg_pnode *pn, void **fn, void **ev, bool hand) {
    float t[CG_MAX_VARIANTS + 1];
    const int nc = pn->nv + (hand ? 1 : 0);
    cg_params pp;
    cg_fill(r, &r->c->cg[pn->node], &pp);
    for (int round = 0; round < CG_TUNE_ROUNDS; round++)
        for (int j = 0; j < nc; j++) {
            unsigned grid = 0, block = 0;
            if (j < pn->nv) cg_geometry(&pn->grp, pn->v[j], &grid, &block);
            for (int k = 0; k < 11; k++) {
                if (k == 1) SB_TRY(cu_event_record(ev[0], r->cx->s)); /* after the warm-up */
                SB_TRY(j < pn->nv ? cu_gen_launch(r->cx->s, fn[j], grid, block, &pp) : cx_run_node(r, pn->node));
            }
            SB_TRY(cu_event_record(ev[1], r->cx->s));
            SB_TRY(cu_stream_sync(r->cx->s));
            float ms = 0;
            SB_TRY(cu_event_ms(ev[0], ev[1], &ms));
            if (round == 0 || ms < t[j]) t[j] = ms;
        }
    int win = -1;
    for (int j = 0; j < pn->nv; j++)
        if (win < 0 || t[j] < t[win]) win = j;
    if (hand && (win < 0 || t[pn->nv] < CG_TUNE_HAND_MARGIN * t[win])) win = CG_TUNE_HAND;
    pn->win = win;
    return SB_OK;
}

/* a node codegen could not do: an error with codegen 2, else a warning and the hand-written kernel */
static sb_status cg_refuse(int mode, const ir_node *n, int32_t i, sb_status st) {
    st = sb_fail_context(st, "codegen: node %%%d %s \"%s\"", (int)i, ir_ops[n->op].name, n->name);
    if (mode == 2) return st;
    sb_log(SB_LOG_WARN, "%s (the hand-written kernel runs instead)", sb_last_error());
    return SB_OK;
}

sb_status cx_cg_prepare(exec_cuda *cx, const plan *p, cplan *c) {
    const int mode = cg_mode();
    if (!mode) return SB_OK;
    const bool hand1 = cu_cfg()->codegen_hand1 != 0;
    sb_status ls = cg_nvrtc_load();
    if (ls != SB_OK) {
        static int told;
        if (!__atomic_fetch_add(&told, 1, __ATOMIC_RELAXED)) sb_log(SB_LOG_INFO, "%s: hand-written kernels only", sb_last_error());
        return mode == 2 ? ls : SB_OK;
    }
    static char tag[192]; /* device 0, asked once (cudaGetDeviceProperties is slow); a race writes the same text */
    static int arch;
    if (!__atomic_load_n(&arch, __ATOMIC_ACQUIRE)) {
        char dev[128];
        int ma = 0, mi = 0;
        SB_TRY(cu_device_name(0, dev, sizeof dev, &ma, &mi));
        snprintf(tag, sizeof tag, "%s sm_%d %d SMs", dev, ma * 10 + mi, cx->sms);
        __atomic_store_n(&arch, ma * 10 + mi, __ATOMIC_RELEASE);
    }
    const ir_graph *g = p->g;
    const int32_t nn = g->n_nodes;
    c->cg = (cg_node *)calloc((size_t)nn, sizeof *c->cg);
    cg_pnode *pn = (cg_pnode *)calloc((size_t)nn, sizeof *pn);
    const size_t maxj = (size_t)nn; /* one bundle per node at most */
    char **src = (char **)calloc(maxj, sizeof *src), (*name)[40] = (char(*)[40])calloc(maxj, 40);
    const char **srcs = (const char **)calloc(maxj, sizeof *srcs), **names = (const char **)calloc(maxj, sizeof *names);
    cg_binary *bin = (cg_binary *)calloc(maxj, sizeof *bin);
    sb_status *bst = (sb_status *)calloc(maxj, sizeof *bst);
    void *ev[2] = {NULL, NULL};
    sb_status st = c->cg && pn && src && name && srcs && names && bin && bst ? SB_OK : sb_fail(SB_ERR_OOM, "cuda: codegen tables of %d nodes", (int)nn);
    int npn = 0, nj = 0;
    /* 1: groups and their bundles (each distinct bundle once: layers share shapes) */
    for (int32_t i = 0; st == SB_OK && i < nn; i++) {
        const ir_node *n = &g->nodes[i];
        if (c->fu.skip && c->fu.skip[i]) continue;
        if (ir_fused_tail_of(n).op) continue; /* a chain with its quantize tail: cu_ew_quant_rows (no generated form) */
        switch (n->op) {
        case IR_OP_FUSED: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU: case IR_OP_GELU_TANH:
        case IR_OP_RMS_NORM: case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_ADD_RMS_NORM_QUANT: case IR_OP_GLU_QUANT: break;
        default: continue;
        }
        cg_pnode *q = &pn[npn];
        sb_status gs = cg_group_from_node(g, i, IR_NONE, &q->grp);
        if (gs != SB_OK) {
            st = cg_refuse(mode, n, i, gs);
            continue;
        }
        q->node = i;
        /* the norm quantizers' variants keep the hand-written kernel's reduction layout (cg.h) */
        if (q->grp.kind == CG_RMS_NORM_QUANT || q->grp.kind == CG_ADD_RMS_NORM_QUANT) q->grp.hand_reg = cu_act_fast();
        q->nv = cg_variants(&q->grp, q->v);
        /* the hand-written kernel is a candidate too (codegen 2: generated only), but not for one
         * row (a decode step's): back-to-back timings of one-block kernels picked it now and then where
         * the generated ones are faster in the step's chain (cg_tune_node); a cached pick of it there
         * is tuned again. codegen_hand1: a candidate at one row too. */
        const bool hand = mode == 1 && (q->grp.rows > 1 || hand1);
        int cached = cg_tune_get(&q->grp, tag);
        if (cached == CG_TUNE_HAND && !hand) cached = -1;
        if (cached == CG_TUNE_HAND && mode == 1) {
            cg_count_tune(false, true);
            continue;
        }
        q->tune = (q->nv > 1 || hand) && (cached < 0 || cached >= q->nv);
        q->hand = hand;
        q->win = cached >= 0 && cached < q->nv ? cached : 0;
        /* every variant in one source, whether tuning or not: one compile, one cache entry */
        char *s = NULL, nm[40];
        sb_status es = cg_emit_bundle(&q->grp, q->v, q->nv, &s, nm, q->kname);
        if (es != SB_OK) {
            st = cg_refuse(mode, n, i, es);
            continue;
        }
        int k = 0;
        while (k < nj && strcmp(name[k], nm)) k++;
        if (k == nj) {
            src[nj] = s, srcs[nj] = s;
            memcpy(name[nj], nm, 40);
            names[nj] = name[nj];
            nj++;
        } else {
            free(s);
        }
        q->job = k;
        npn++;
    }
    /* 2: compile (or load from the caches) every distinct bundle, in parallel */
    if (st == SB_OK && nj) {
        sb_status cs = cg_get_binaries(srcs, names, nj, arch, 0, bin, bst);
        if (cs != SB_OK && mode == 2) st = cs;
    }
    /* 3: load, autotune on the real buffers, record */
    if (st == SB_OK && npn) st = cu_events_create(ev, 2);
    crun r = {.cx = cx, .p = p, .c = c, .arena = (uint8_t *)cx->arena};
    for (int k = 0; st == SB_OK && k < npn; k++) {
        cg_pnode *q = &pn[k];
        const ir_node *n = &g->nodes[q->node];
        void *fn[CG_MAX_VARIANTS] = {0};
        if (q->tune) { /* an earlier node of this plan had the same group: its winner, so one run uses one
                        * kernel per group, as every later run does (they read the winner from the cache) */
            const int won = cg_tune_get(&q->grp, tag);
            if (won == CG_TUNE_HAND && q->hand) {
                cg_count_tune(false, true);
                continue;
            }
            if (won >= 0 && won < q->nv) q->tune = false, q->win = won;
        }
        sb_status ns = SB_OK;
        ns = bst[q->job];
        if (ns != SB_OK) ns = sb_fail(ns, "%s: compile failed (see the first error above)", names[q->job]);
        for (int j = 0; ns == SB_OK && j < q->nv; j++)
            if (q->tune || j == q->win) ns = cu_gen_load(bin[q->job].data, q->kname[j], &fn[j]);
        cg_node *cn = &c->cg[q->node];
        cn->n_params = q->grp.n_params;
        cn->rows = q->grp.rows;
        memcpy(cn->ref, q->grp.ref, sizeof cn->ref);
        if (ns == SB_OK && q->tune) {
            ns = cg_tune_node(&r, q, fn, ev, q->hand);
            if (ns == SB_OK && (mode == 1 || cg_tune_get(&q->grp, tag) != CG_TUNE_HAND)) cg_tune_put(&q->grp, tag, q->win);
        }
        if (ns != SB_OK) {
            st = cg_refuse(mode, n, q->node, ns);
            continue;
        }
        cg_count_tune(q->tune, q->win == CG_TUNE_HAND);
        if (q->win == CG_TUNE_HAND) continue; /* the hand-written kernel was faster */
        cg_geometry(&q->grp, q->v[q->win], &cn->grid, &cn->block);
        cn->fn = fn[q->win];
    }
    if (ev[0]) cu_events_destroy(ev, 2);
    for (int k = 0; src && k < nj; k++) free(src[k]);
    free(pn), free(src), free(name), free(srcs), free(names), free(bin), free(bst);
    return st;
}

/* where matmul m writes: its own memory, or with its ADD fused the ADD's, *ep then adding the ADD's
 * other operand (broadcast when that is one row of a several-row result); ep->add NULL: no ADD */

#endif
