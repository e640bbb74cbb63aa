/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda.c — the CUDA executor (exec_cuda.h): maps every plan input to device memory,
 * then walks the planned nodes in order, one launcher call (backend/cuda/kernels.h) per node, on
 * one stream; plans are captured once as a CUDA Graph and replayed (T = 1 plans on their first
 * run, other shapes — prefill chunks — on their second).
 * Layer 2 (runtime). Memory: computed values live at their plan offset in one device arena
 * (grown to the largest plan seen; growing drops every captured graph, since graphs bake in
 * pointers); split partials (attention's, the small-T GEMM's: one region, the larger of the two
 * needs, used by one kernel at a time) follow the plan region; tokens/pos/out_rows sit in fixed
 * device buffers refreshed before each run (outside the graph). Weights and KV caches are device
 * copies keyed by the host pointer the session binds (uploaded on first sight, never again).
 * Invariants: a graph is replayed only with the arena it was captured with; validation happens on
 * the host before anything is enqueued, so a bad token/position changes no device state.
 * Executor-level fusions (default on, cu_config.fuse 0 off): planned per plan by cuda_fusion.c (the
 * tables in cplan.fu), carried out here by the launch each fused node's work moved into.
 * Generated kernels (default; cu_config.codegen 0 off): cg_prepare / CG_TRY below (docs/codegen.md).
 * Non-goals: overlap of independent nodes, multiple streams (docs/cuda.md).
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind (runtime/backends.h) */

#include "runtime/exec_cuda.h"

#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cu_config.h"
#include "backend/cuda/cu_device.h"
#include "backend/cuda/kernels.h"
#include "codegen/cg.h"
#include "runtime/cuda_fusion.h"

#define CX_MAX_PLANS 16
#define PROF_FAMILIES (IR_OP_COUNT + SB_TYPE_COUNT) /* ops, then matmul per weight type */

typedef struct devbuf {
    const void *host;
    void *dev;
    uint64_t bytes;
} devbuf;

#define CX_MAX_OUT 4 /* outputs a graph run may have written directly (direct_root; a plan with more copies them) */
#define CX_DEPTH_CLASSES 12 /* 0: any depth; c >= 1: every attention sees at most attn_small << (c - 1) keys (depth_class) */

typedef struct cplan {
    const plan *p;
    void **dptr;          /* device pointer per input slot */
    uint64_t scratch_off; /* attention / small-T GEMM split partials, after the plan region */
    uint64_t arena_need;
    /* captured graphs, one per depth class (depth_class: a decode step whose attention sees few
     * keys gets kernels specialised for that, e.g. the small-depth attention's own kernel) */
    cu_graph graph[CX_DEPTH_CLASSES];
    void *graph_arena[CX_DEPTH_CLASSES]; /* the arena each was captured with */
    int32_t n_kernels[CX_DEPTH_CLASSES];
    bool graph_direct[CX_DEPTH_CLASSES];           /* its kernels write outputs straight to their destinations (graph_out) */
    float *graph_out[CX_DEPTH_CLASSES][CX_MAX_OUT];
    int64_t runs;         /* runs of this plan so far */
    cuda_fusions fu;      /* executor-level fusion (cx->cfg.fuse; cuda_fusion.h): all NULL when off */
    struct cg_node *cg;   /* per node: its generated kernel (cg_prepare; NULL table or fn: hand-written) */
} cplan;

struct exec_cuda {
    cu_stream s;
    devbuf *bufs;
    int32_t n_bufs, cap_bufs;
    cplan plans[CX_MAX_PLANS];
    void *arena;
    uint64_t arena_bytes;
    int32_t *d_in;        /* device inputs [3 * max_tokens], h_in's layout: one copy a run */
    int32_t *d_tok, *d_pos, *d_rows; /* into d_in */
    unsigned *d_cnt;      /* CU_ATT_COUNTERS zeroed split counters (attention's in-kernel merge) */
    int32_t *h_in;        /* page-locked staging [3 * max_tokens]: tokens, positions, out_rows */
    int64_t max_tokens;
    cu_config cfg;        /* every setting (cu_config.h); bound to the thread for each call into the backend */
    int sms;
    exec_cuda_stats st;
    /* profile: device ms and kernel launches per family, runs profiled */
    double prof_ms[PROF_FAMILIES];
    int64_t prof_k[PROF_FAMILIES];
    int64_t prof_runs;
    void **ev;
    int32_t n_ev;
};

// ---- availability / context ----

bool exec_cuda_available(char *why, size_t cap) {
    int n = 0;
    sb_status s = cu_device_count(&n);
    if (s != SB_OK || n < 1) {
        if (cap) snprintf(why, cap, "no usable CUDA device: %s", s != SB_OK ? sb_last_error() : "device count is 0");
        return false;
    }
    return true;
}

sb_status exec_cuda_device_memory(uint64_t *free_b, uint64_t *total_b) {
    *free_b = *total_b = 0;
    int n = 0;
    SB_TRY(cu_device_count(&n));
    if (n < 1) return sb_fail(SB_ERR_DEVICE, "cuda: no CUDA device");
    SB_TRY(cu_set_device(0));
    size_t f = 0, t = 0;
    SB_TRY(cu_mem_info(&f, &t));
    *free_b = f, *total_b = t;
    return SB_OK;
}

sb_status exec_cuda_create(int64_t max_tokens, const cu_config *cfg, exec_cuda **out) {
    *out = NULL;
    /* token counts become grid.y of several launches, which CUDA caps at 65535 */
    if (max_tokens < 1 || max_tokens > 65535)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: batch of %lld tokens (the CUDA executor takes 1..65535 per chunk)", (long long)max_tokens);
    int n = 0;
    SB_TRY(cu_device_count(&n));
    if (n < 1) return sb_fail(SB_ERR_DEVICE, "cuda: no CUDA device");
    SB_TRY(cu_set_device(0));
    cu_config c = cfg ? *cfg : cu_config_default;
    if (!cfg) SB_TRY(cu_config_tune(&c, getenv("SB_TUNE"))); /* experiments only: cu_config.h */
    exec_cuda *cx = (exec_cuda *)calloc(1, sizeof *cx);
    if (!cx) return sb_fail(SB_ERR_OOM, "cuda context");
    cx->max_tokens = max_tokens;
    cx->cfg = c;
    sb_status st = cu_stream_create(&cx->s);
    size_t ib = (size_t)max_tokens * sizeof(int32_t);
    if (st == SB_OK) st = cu_malloc((void **)&cx->d_in, 3 * ib, "input buffer");
    if (st == SB_OK) cx->d_tok = cx->d_in, cx->d_pos = cx->d_in + max_tokens, cx->d_rows = cx->d_in + 2 * max_tokens;
    if (st == SB_OK) st = cu_host_alloc((void **)&cx->h_in, 3 * ib, "input staging");
    if (st == SB_OK) st = cu_malloc((void **)&cx->d_cnt, CU_ATT_COUNTERS * sizeof(unsigned), "attention split counters");
    if (st == SB_OK) st = cu_memset(cx->d_cnt, 0, CU_ATT_COUNTERS * sizeof(unsigned), cx->s);
    if (st == SB_OK) st = cu_stream_sync(cx->s);
    if (st != SB_OK) {
        exec_cuda_free(cx);
        return st;
    }
    cx->st.device_bytes = 3 * ib;
    cx->sms = cu_sm_count();
    *out = cx;
    return SB_OK;
}

static void cplan_drop_graphs(cplan *c) {
    for (int k = 0; k < CX_DEPTH_CLASSES; k++) {
        cu_graph_destroy(c->graph[k]);
        c->graph[k] = NULL;
    }
}

static void cplan_clear(cplan *c) {
    cplan_drop_graphs(c);
    free(c->dptr);
    cuda_fusions_free(&c->fu);
    free(c->cg);
    memset(c, 0, sizeof *c);
}

void exec_cuda_free(exec_cuda *cx) {
    if (!cx) return;
    if (cg_get_stats().kernels + cg_get_stats().memory > 0 && sb_log_enabled(SB_LOG_INFO)) { /* `sb run -v`: the codegen line */
        char line[320];
        cg_stats_line(line, sizeof line);
        sb_log(SB_LOG_INFO, "%s", line);
    }
    if (cx->s) cu_stream_sync(cx->s);
    for (int i = 0; i < CX_MAX_PLANS; i++) cplan_clear(&cx->plans[i]);
    for (int32_t i = 0; i < cx->n_bufs; i++) cu_free(cx->bufs[i].dev);
    free(cx->bufs);
    if (cx->ev) cu_events_destroy(cx->ev, cx->n_ev);
    free(cx->ev);
    cu_free(cx->arena);
    cu_free(cx->d_in);
    cu_free(cx->d_cnt);
    cu_host_free(cx->h_in);
    cu_stream_destroy(cx->s);
    free(cx);
}

/* a setting plans are built with changed: every plan (and its captured graph, which bakes in kernel
 * arguments) is dropped, and rebuilt (without re-uploads) on its next run */
static void drop_plans(exec_cuda *cx) {
    cu_stream_sync(cx->s);
    for (int i = 0; i < CX_MAX_PLANS; i++) cplan_clear(&cx->plans[i]);
}

sb_status exec_cuda_host_alloc(exec_cuda *cx, size_t bytes, void **out) { return cu_host_alloc(out, bytes, "host buffer"); }
void exec_cuda_host_free(exec_cuda *cx, void *p) { cu_host_free(p); }
const cu_config *exec_cuda_config(const exec_cuda *cx) { return &cx->cfg; }

/* A change of a setting that shapes plans or captured kernels drops every plan (and graph); the
 * run-level ones (capture, direct outputs, poison, profiling) are read at each run. */
void exec_cuda_set_config(exec_cuda *cx, const cu_config *c) {
    cu_config was = cx->cfg, now = *c;
    was.graphs = now.graphs, was.direct_out = now.direct_out, was.poison = now.poison, was.profile = now.profile;
    if (memcmp(&was, &now, sizeof now)) drop_plans(cx);
    cx->cfg = *c;
}

typedef struct prof_row {
    int fam;
    double ms;
} prof_row;

static int prof_cmp(const void *a, const void *b) {
    const double x = ((const prof_row *)a)->ms, y = ((const prof_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t exec_cuda_profile_report(exec_cuda *cx, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!cx || cx->prof_runs == 0 || cap == 0) return 0;
    prof_row rows[PROF_FAMILIES];
    int n = 0;
    double total = 0;
    int64_t kt = 0;
    for (int f = 0; f < PROF_FAMILIES; f++)
        if (cx->prof_k[f]) rows[n++] = (prof_row){f, cx->prof_ms[f]}, total += cx->prof_ms[f], kt += cx->prof_k[f];
    qsort(rows, (size_t)n, sizeof *rows, prof_cmp);
    const double runs = (double)cx->prof_runs;
    size_t w = (size_t)snprintf(buf, cap, "%-22s %10s %8s %6s  (%lld runs; %.1f us and %.1f kernels per run)\n", "family", "us/run", "kernels",
                                "share", (long long)cx->prof_runs, 1e3 * total / runs, (double)kt / runs);
    for (int i = 0; i < n && w < cap; i++) {
        char name[40];
        const int f = rows[i].fam;
        if (f < IR_OP_COUNT)
            snprintf(name, sizeof name, "%s", ir_ops[f].name);
        else
            snprintf(name, sizeof name, "matmul %s", ir_dtype_name(f - IR_OP_COUNT));
        w += (size_t)snprintf(buf + w, cap - w, "%-22s %10.1f %8.1f %5.1f%%\n", name, 1e3 * rows[i].ms / runs, (double)cx->prof_k[f] / runs,
                              total > 0 ? 100 * rows[i].ms / total : 0.0);
    }
    memset(cx->prof_ms, 0, sizeof cx->prof_ms);
    memset(cx->prof_k, 0, sizeof cx->prof_k);
    cx->prof_runs = 0;
    return w < cap ? w : cap - 1;
}
exec_cuda_stats exec_cuda_get_stats(const exec_cuda *cx) { return cx->st; }

void exec_cuda_forget(exec_cuda *cx, const plan *p) {
    if (!cx) return;
    for (int i = 0; i < CX_MAX_PLANS; i++)
        if (cx->plans[i].p == p) {
            cu_stream_sync(cx->s);
            cplan_clear(&cx->plans[i]);
        }
}

// ---- target and capability check ----

void exec_cuda_target(const cu_config *c, plan_target *t) {
    plan_target_reference(t);
    t->name = "cuda";
    t->wants_quantized_act = true;
    for (int w = 0; w < SB_TYPE_COUNT; w++) t->act_type[w] = cu_has_mmvq(w) ? SB_TYPE_Q8_1 : SB_TYPE_F32;
    /* K-quant weights: q8_K activations, rounded exactly as llama.cpp's CPU (and so the reference
     * logits) round them — q8_1's per-32 scales round differently and land 1.4-2e-3 NMSE away
     * from the references on the test models (docs/cuda.md). cu_config.act_q8_1 restores llama.cpp's
     * CUDA semantics. */
    if (!(c ? c : &cu_config_default)->act_q8_1)
        for (int w = 0; w < SB_TYPE_COUNT; w++)
            if (cu_has_mmvq_q8k(w)) t->act_type[w] = SB_TYPE_Q8_K; /* Q2_K..Q6_K, IQ4_XS */
    t->fuse_norm_quant = t->fuse_act_quant = t->fuse_elementwise = true;
}

sb_status exec_cuda_check(const plan *p) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const ir_node *s0 = n->src[0] != IR_NONE ? &g->nodes[n->src[0]] : NULL;
        const ir_node *s1 = n->src[1] != IR_NONE ? &g->nodes[n->src[1]] : NULL;
        switch (n->op) {
        case IR_OP_TOKENS: case IR_OP_POS: case IR_OP_OUT_ROWS: case IR_OP_WEIGHT: case IR_OP_RESHAPE: case IR_OP_OUTPUT:
        case IR_OP_RMS_NORM: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU:
        case IR_OP_GELU_TANH: case IR_OP_SWIGLU: case IR_OP_GEGLU: case IR_OP_FUSED: case IR_OP_ROPE: case IR_OP_SELECT_ROWS:
            if (n->op == IR_OP_FUSED && n->ip[0] > 7)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: fused chain %%%d of %d steps (at most 7)", (int)i, n->ip[0]);
            if (n->op == IR_OP_ROPE && n->ip[0] / 2 > 512)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: rope %%%d rotates %d dims (at most 1024)", (int)i, n->ip[0]);
            break;
        case IR_OP_KV:
            if (n->dtype != SB_TYPE_F32 && n->dtype != SB_TYPE_F16)
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: KV cache \"%s\" of type %s (F32 or F16 only)", n->name, ir_dtype_name(n->dtype));
            break;
        case IR_OP_KV_STORE: break;
        case IR_OP_GET_ROWS:
            if (!cu_can_dequantize(s0->dtype))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: tensor \"%s\" of type %s cannot be read by get_rows (no CUDA dequantizer)",
                               s0->name, ir_dtype_name(s0->dtype));
            break;
        case IR_OP_MATMUL: {
            bool ok = (s1->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(s0->dtype)) || (s1->dtype == SB_TYPE_Q8_K && cu_can_dequantize(s0->dtype)) ||
                      (s1->dtype == SB_TYPE_F32 && cu_can_dequantize(s0->dtype));
            if (!ok)
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: tensor \"%s\" of type %s x activation %s: no CUDA matmul", s0->name,
                               ir_dtype_name(s0->dtype), ir_dtype_name(s1->dtype));
            break;
        }
        case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_GLU_QUANT:
            if ((n->dtype != SB_TYPE_Q8_1 || n->ne[0] % 32) && (n->dtype != SB_TYPE_Q8_K || n->ne[0] % 256))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: no quantizer for activation type %s of %lld values (node %%%d)",
                               ir_dtype_name(n->dtype), (long long)n->ne[0], (int)i);
            break;
        case IR_OP_ATTENTION:
            if (n->ip[1] > 256 || n->ip[1] < 1)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention %%%d with head_dim %d (1..256)", (int)i, n->ip[1]);
            break;
        default:
            return sb_fail(SB_ERR_UNSUPPORTED, "cuda: op %s (node %%%d) has no CUDA kernel",
                           (unsigned)n->op < IR_OP_COUNT ? ir_ops[n->op].name : "?", (int)i);
        }
    }
    return SB_OK;
}

// ---- device buffers keyed by host pointer ----

static sb_status devbuf_get(exec_cuda *cx, const void *host, uint64_t bytes, const char *name, void **dev) {
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host) {
            if (cx->bufs[i].bytes < bytes)
                return sb_fail(SB_ERR_INTERNAL, "cuda: buffer \"%s\" bound with %llu bytes, cached with %llu", name,
                               (unsigned long long)bytes, (unsigned long long)cx->bufs[i].bytes);
            *dev = cx->bufs[i].dev;
            return SB_OK;
        }
    if (cx->n_bufs == cx->cap_bufs) {
        int32_t cap = cx->cap_bufs ? 2 * cx->cap_bufs : 256;
        devbuf *nb = (devbuf *)realloc(cx->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return sb_fail(SB_ERR_OOM, "cuda: buffer table of %d entries", (int)cap);
        cx->bufs = nb;
        cx->cap_bufs = cap;
    }
    void *d;
    char what[128];
    snprintf(what, sizeof what, "\"%.100s\"", name);
    /* whole 256-byte units: the GEMVs' aligned word loads (cu_ld_words_a2) read up to 2 bytes past a matrix's last block */
    SB_TRY(cu_malloc(&d, (size_t)((bytes + 255) & ~(uint64_t)255), what));
    sb_status st = cu_memcpy_h2d(d, host, (size_t)bytes, cx->s);
    if (st == SB_OK) st = cu_stream_sync(cx->s); /* the host buffer may be pageable/mmap'd: finish before returning */
    if (st != SB_OK) {
        cu_free(d);
        return st;
    }
    cx->bufs[cx->n_bufs++] = (devbuf){host, d, bytes};
    cx->st.device_bytes += bytes;
    *dev = d;
    return SB_OK;
}

sb_status exec_cuda_kv_download(exec_cuda *cx, void *host_kv, uint64_t bytes) {
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host_kv) return cu_memcpy_d2h(host_kv, cx->bufs[i].dev, (size_t)(bytes < cx->bufs[i].bytes ? bytes : cx->bufs[i].bytes), cx->s);
    return sb_fail(SB_ERR_INVALID_ARG, "cuda: %p is no device-mapped KV cache", host_kv);
}

// ---- per-plan state ----

/* Variant 4's grid splits per kv head (k_attn_decode.cu): enough splits of kmin keys to cover the
 * capacity C, at most mul * SMs / Hkv (default 2: ~2 blocks per SM at the deepest context; fewer
 * when the capacity is short) and 256; the kernel activates max(1, ceil(depth / kps)) of them. */
static int attn_nsplit_dec(const exec_cuda *cx, int64_t Hkv, int64_t C) {
    int64_t ns = (C + cx->cfg.attn_kmin - 1) / cx->cfg.attn_kmin;
    const int64_t most = Hkv > 0 ? ((int64_t)cx->cfg.attn_splits * cx->sms + Hkv - 1) / Hkv : 1;
    if (ns > most) ns = most;
    if (ns > 256) ns = 256;
    return ns < 1 ? 1 : (int)ns;
}

static int attn_nsplit(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    const int64_t T = q->ne[2], Hq = q->ne[1], C = k->ne[1];
    if (T > 1) return 1;
    if (cx->cfg.attn_variant == 4) return attn_nsplit_dec(cx, n->ip[0], C);
    int64_t ns = ((int64_t)cx->cfg.attn_splits * cx->sms + Hq - 1) / Hq;
    int64_t cap = (C + 63) / 64;
    if (ns > cap) ns = cap;
    if (ns > 64) ns = 64;
    return ns < 1 ? 1 : (int)ns;
}

static cu_attn_args attn_args(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    return (cu_attn_args){.D = q->ne[0], .Hq = q->ne[1], .Hkv = n->ip[0], .T = q->ne[2], .ctype = k->dtype, .scale = n->fp[0],
                          .softcap = n->fp[1], .window = n->ip[2], .nsplit = attn_nsplit(cx, p, n),
                          .variant = cx->cfg.attn_variant == 1 ? 1 : cx->cfg.attn_variant == 4 ? 4 : 2, .kmin = cx->cfg.attn_kmin,
                          .hpb = cx->cfg.attn_hpb, .ctx = k->ne[1], .warp = cx->cfg.attn_warp, .small = cx->cfg.attn_small};
}

void exec_cuda_assume_device(int cc_major, int sms) { cu_assume_device(cc_major, sms); }

/* as a new context would plan p: nodes fused away (skips, what 0), gate/up launches that write their
 * GLU (1), or matmuls whose norm sums their split partials (2) */
static int32_t count_planned(const plan *p, const cu_config *cfg, int what) {
    cuda_fusions c = {0};
    int32_t n = -1;
    cfg = cfg ? cfg : &cu_config_default;
    const cu_config *prev = cu_cfg_bind(cfg);
    if (cuda_fusions_plan(p, &c, cfg) == SB_OK) {
        n = 0;
        for (int32_t i = 0; i < p->g->n_nodes; i++) n += what == 0 ? c.skip[i] : what == 1 ? c.gpair[i] >= 0 : c.nsum[i] >= 0;
    }
    cuda_fusions_free(&c); /* every table (cuda_fusions_plan allocates them all) */
    cu_cfg_bind(prev);
    return n;
}
int32_t exec_cuda_count_fusions(const plan *p, const cu_config *c) { return count_planned(p, c, 0); }
int32_t exec_cuda_count_glu_pairs(const plan *p, const cu_config *c) { return count_planned(p, c, 1); }
int32_t exec_cuda_count_norm_sums(const plan *p, const cu_config *c) { return count_planned(p, c, 2); }

static sb_status cg_prepare(exec_cuda *cx, const plan *p, cplan *c); /* generated kernels (below) */

static sb_status cplan_get(exec_cuda *cx, const plan *p, const exec_bindings *b, cplan **out) {
    cplan *free_slot = NULL;
    for (int i = 0; i < CX_MAX_PLANS; i++) {
        if (cx->plans[i].p == p) {
            *out = &cx->plans[i];
            return SB_OK;
        }
        if (!cx->plans[i].p && !free_slot) free_slot = &cx->plans[i];
    }
    if (!free_slot) return sb_fail(SB_ERR_INTERNAL, "cuda: more than %d live plans (exec_cuda_forget missing?)", CX_MAX_PLANS);
    cplan *c = free_slot;
    memset(c, 0, sizeof *c);
    c->dptr = (void **)calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *c->dptr);
    if (!c->dptr) return sb_fail(SB_ERR_OOM, "cuda: plan bindings");
    sb_status st = SB_OK;
    for (int32_t i = 0; st == SB_OK && i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        const ir_node *n = &p->g->nodes[in->node];
        switch (in->kind) {
        case IR_OP_TOKENS: c->dptr[i] = cx->d_tok; break;
        case IR_OP_POS: c->dptr[i] = cx->d_pos; break;
        case IR_OP_OUT_ROWS: c->dptr[i] = cx->d_rows; break;
        case IR_OP_WEIGHT:
        case IR_OP_KV: st = devbuf_get(cx, b->data[i], ir_nbytes(n), in->name, &c->dptr[i]); break;
        default: st = sb_fail(SB_ERR_INTERNAL, "cuda: plan input %d has kind %d", (int)i, in->kind);
        }
    }
    uint64_t scratch = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_ATTENTION) {
            cu_attn_args a = attn_args(cx, p, &p->g->nodes[i]);
            uint64_t f = cu_attention_scratch(&a);
            if (f > scratch) scratch = f;
            if ((cx->cfg.attn_variant == 3 || cx->cfg.attn_variant == 4) && a.T > 1) { /* the flash prefill's key-split partials */
                f = cu_fattn_scratch(&a);
                if (f > scratch) scratch = f;
            }
        } else if (p->g->nodes[i].op == IR_OP_MATMUL && cu_mma_small_mode()) { /* split-K partials of the small-T GEMM */
            const ir_node *mw = &p->g->nodes[p->g->nodes[i].src[0]], *mx = &p->g->nodes[p->g->nodes[i].src[1]];
            if (mx->ne[1] > 8 && cu_has_mma(mw->dtype, mx->dtype)) {
                uint64_t f = cu_mma_small_scratch(mw->ne[0], mw->ne[1], mx->ne[1]);
                if (f > scratch) scratch = f;
            }
        }
    if (st == SB_OK && cx->cfg.fuse) st = cuda_fusions_plan(p, &c->fu, &cx->cfg);
    for (int32_t i = 0; st == SB_OK && c->fu.mnext && i < p->g->n_nodes; i++) { /* a split MMA group's partials: its members' together */
        if (c->fu.mnext[i] < 0 || c->fu.skip[i]) continue;
        uint64_t f = 0;
        for (int32_t m = i; m >= 0; m = c->fu.mnext[m]) {
            const ir_node *mw = &p->g->nodes[p->g->nodes[m].src[0]], *mx = &p->g->nodes[p->g->nodes[m].src[1]];
            f += cu_mma_small_scratch(mw->ne[0], mw->ne[1], mx->ne[1]);
        }
        if (f > scratch) scratch = f;
    }
    c->scratch_off = cf_align(p->arena_bytes) + cf_align(c->fu.moved_bytes);
    c->arena_need = c->scratch_off + cf_align(scratch * 4);
    if (st == SB_OK && c->arena_need > cx->arena_bytes) {
        st = cu_stream_sync(cx->s);
        if (st == SB_OK) {
            for (int i = 0; i < CX_MAX_PLANS; i++) cplan_drop_graphs(&cx->plans[i]); /* graphs bake in the old arena */
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
    if (st == SB_OK) st = cg_prepare(cx, p, c); /* compiled, loaded and autotuned here: never during a capture */
    if (st != SB_OK) {
        cplan_clear(c); /* the bindings and every fusion table */
        return st;
    }
    c->p = p;
    *out = c;
    return SB_OK;
}

// ---- node dispatch ----

typedef struct crun {
    exec_cuda *cx;
    const plan *p;
    cplan *c;
    uint8_t *arena;
    int32_t n_kernels;
    int64_t depth_max; /* a bound on the keys any attention of this run sees (0: none known; depth_class) */
    /* outputs written by their kernels straight into page-locked host memory (exec_cuda.direct_out):
     * the roots of their memory (direct_root), and every view of them, live at direct_dst */
    int n_direct;
    ir_ref direct_node[CX_MAX_OUT];
    float *direct_dst[CX_MAX_OUT];
    /* an MMA group's unreduced split partials for the rope jobs launched right after it (plan_group_jobs):
     * the alias roots of its results and their partials; n 0: none pending */
    int gsrc_n;
    ir_ref gsrc_root[CU_MULTI_MAX];
    cu_split_src gsrc[CU_MULTI_MAX];
    /* a lone GEMM's unreduced split partials for the RMS_NORM_QUANT nsum_for right after it (plan_norm_sums; 0: none) */
    int32_t nsum_for, nsum_mm;
    cu_split_src nsum_src;
} crun;

/* where value i is written directly: it is the root of such an output or a view of it (same
 * memory); NULL if not */
static float *direct_at(const crun *r, ir_ref i) {
    for (int k = 0; k < r->n_direct; k++)
        if (r->direct_node[k] == i || r->direct_node[k] == r->p->vals[i].alias) return r->direct_dst[k];
    return NULL;
}

static void *dptr(const crun *r, ir_ref i) {
    const plan_value *v = &r->p->vals[i];
    float *d = direct_at(r, i);
    if (d) return d;
    if (v->input >= 0) return r->c->dptr[v->input];
    if (r->c->fu.moved) { /* hoisted multi-GEMV results live in the private region (plan_groups) */
        const ir_ref root = v->alias;
        if (root >= 0 && r->c->fu.moved[root] != UINT64_MAX) return r->arena + r->c->fu.moved[root] + (v->offset - r->p->vals[root].offset);
    }
    return r->arena + v->offset;
}

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

// ---- generated kernels (codegen/, docs/codegen.md) ----
/* The executor's one codegen helper: cg_prepare (from cplan_get, so before any capture) turns
 * every node that would launch cu_ew_rows / cu_rms_norm_quant / cu_add_rms_norm_quant /
 * cu_glu_quant / cu_quantize_act into a generated kernel — compiled (or loaded from the caches),
 * autotuned over its variants with CUDA events on the real arena buffers (each variant once to warm
 * up, then 10 timed launches; the outputs are rewritten by every later run) with the hand-written
 * kernel timed as one more candidate, unless a winner is cached — and records it in c->cg;
 * run_node's CG_TRY launches it instead of the hand-written kernel (unless that one won). Every
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

/* run_node's hook: true when node i ran as a generated kernel (its launch status in *st) */
static bool cg_try(crun *r, int32_t i, sb_status *st) {
    if (!r->c->cg || !r->c->cg[i].fn) return false;
    cg_params pp;
    cg_fill(r, &r->c->cg[i], &pp);
    *st = cu_gen_launch(r->cx->s, r->c->cg[i].fn, r->c->cg[i].grid, r->c->cg[i].block, &pp);
    return true;
}
#define CG_TRY(r, i)                                 \
    do {                                             \
        sb_status cg_st_;                            \
        if (cg_try(r, i, &cg_st_)) return cg_st_;    \
    } while (0)

/* one node's part of cg_prepare: its group, its variants (all in one source: cg_emit_bundle), the
 * kernel names and the bundle's index in the compile list */
typedef struct cg_pnode {
    int32_t node;
    cg_group grp;
    cg_variant v[CG_MAX_VARIANTS];
    char kname[CG_MAX_VARIANTS][40];
    int nv, win, job;
    bool tune, hand; /* hand: the hand-written kernel is a candidate */
} cg_pnode;

static sb_status run_node(crun *r, int32_t i);

/* time every variant of pn (each warmed up once, then 10 launches between events) and, with
 * `hand`, the hand-written kernel the same way (run_node: the node has no generated kernel yet),
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
 * row the hand-written kernel is no candidate (cg_prepare; SB_CODEGEN_HAND1=1 restores it). */
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
                SB_TRY(j < pn->nv ? cu_gen_launch(r->cx->s, fn[j], grid, block, &pp) : run_node(r, pn->node));
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

static sb_status cg_prepare(exec_cuda *cx, const plan *p, cplan *c) {
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
        if (n->op == IR_OP_GLU_QUANT && c->fu.gpair && c->fu.gpair[n->src[0]] == i) continue; /* only quantizes (plan_glu_pairs) */
        switch (n->op) {
        case IR_OP_FUSED: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU: case IR_OP_GELU_TANH:
        case IR_OP_RMS_NORM: case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_GLU_QUANT: break;
        default: continue;
        }
        cg_pnode *q = &pn[npn];
        const ir_ref add = n->op == IR_OP_RMS_NORM_QUANT && c->fu.epi && c->fu.epi[i] >= 0 ? c->fu.epi[i] : IR_NONE;
        sb_status gs = cg_group_from_node(g, i, add, &q->grp);
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
static float *matmul_out(crun *r, int32_t m, cu_epilogue *ep) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[m];
    const ir_ref o = r->c->fu.epi ? cf_epi_operand(g, &r->c->fu, m) : IR_NONE;
    *ep = (cu_epilogue){0};
    if (o == IR_NONE) return (float *)dptr(r, m);
    *ep = (cu_epilogue){.add = (const float *)dptr(r, o), .bcast = ir_nelem(&g->nodes[o]) == n->ne[0] && ir_nrows(n) != 1};
    return (float *)dptr(r, r->c->fu.epi[m]);
}

/* matmul i alone (its epilogue ADD fused): the int8 MMA GEMM for T > 8, else the dp4a or f32
 * GEMVs; the caller has counted the launch (a split-K reduce counts itself) */
static sb_status run_matmul_one(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i], *w = &g->nodes[n->src[0]], *x = &g->nodes[n->src[1]];
    cu_stream s = r->cx->s;
    cu_epilogue epb;
    float *dst = matmul_out(r, i, &epb);
    const cu_epilogue *ep = epb.add ? &epb : NULL;
    if (cf_mma_ok(g, n)) { /* prefill: int8 tensor cores */
        if (cu_mma_small_mode()) { /* small T: K split over blocks, partials in the scratch region (shared with attention's) */
            const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = cu_mma_small_scratch(w->ne[0], w->ne[1], x->ne[1]);
            if (r->c->fu.nsum && r->c->fu.nsum[i] >= 0 && cu_mma_small_mode() == 2) { /* a split leaves its partials to the norm after it */
                const cu_gemv_seg sg = {.dst = dst, .w = dptr(r, n->src[0]), .wtype = w->dtype, .N = w->ne[1], .ep = epb};
                cu_split_src src;
                SB_TRY(cu_matmul_mma_multi(s, &sg, 1, w->ne[0], dptr(r, n->src[1]), x->dtype, x->ne[1], (float *)(r->arena + r->c->scratch_off), cap,
                                           &src, 0));
                if (src.part) r->nsum_for = r->c->fu.nsum[i], r->nsum_mm = i, r->nsum_src = src;
                return SB_OK;
            }
            const bool counters = cu_mma_small_mode() == 1;
            if (!counters && need > 0 && need <= cap) r->n_kernels++; /* split: k_mma_reduce after it */
            return cu_matmul_mma_small(s, dst, dptr(r, n->src[0]), w->dtype, w->ne[0], w->ne[1], dptr(r, n->src[1]), x->dtype, x->ne[1], ep,
                                       (float *)(r->arena + r->c->scratch_off), cap, counters ? r->cx->d_cnt : NULL);
        }
        return cu_matmul_mma(s, dst, dptr(r, n->src[0]), w->dtype, w->ne[0], w->ne[1], dptr(r, n->src[1]), x->dtype, x->ne[1], ep);
    }
    if ((x->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(w->dtype)) || (x->dtype == SB_TYPE_Q8_K && cu_has_mmvq_q8k(w->dtype)))
        return cu_matmul_q8(s, dst, dptr(r, n->src[0]), w->dtype, w->ne[0], w->ne[1], dptr(r, n->src[1]), x->dtype, x->ne[1], ep);
    return cu_matmul_f32(s, dst, dptr(r, n->src[0]), w->dtype, w->ne[0], w->ne[1], dptr(r, n->src[1]), x->dtype, x->ne[1], ep); /* f32 or q8_K */
}

/* a group of T > 8 matmuls (plan_mma_groups) led by i: one launch where cu_mma_multi_split, else
 * each in turn here */
static sb_status run_matmul_group(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i], *w = &g->nodes[n->src[0]], *x = &g->nodes[n->src[1]];
    cu_gemv_seg seg[CU_MULTI_MAX] = {{0}};
    int ns = 0;
    for (int32_t m = i; m >= 0 && ns < CU_MULTI_MAX; m = r->c->fu.mnext[m]) {
        const ir_node *mn = &g->nodes[m], *mw = &g->nodes[mn->src[0]];
        cu_gemv_seg *q = &seg[ns++];
        *q = (cu_gemv_seg){.w = dptr(r, mn->src[0]), .wtype = mw->dtype, .N = mw->ne[1]};
        q->dst = matmul_out(r, m, &q->ep);
    }
    const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4; /* split-K partials: the scratch region, as run_matmul_one */
    const int split = cu_mma_multi_split(seg, ns, w->ne[0], x->dtype, x->ne[1], cap);
    const int32_t f = r->c->fu.gpair ? r->c->fu.gpair[i] : -1; /* a GLU it must write (plan_mma_glu_pairs) */
    if (f >= 0 && split != 1) /* the GLU_QUANT would quantize the gate alone: never silently */
        return sb_fail(SB_ERR_INTERNAL, "cuda: gate/up group %%%d planned to write its GLU, launched %s", (int)i,
                       split > 1 ? "with K split" : "one by one");
    if (split > 0) {
        const bool jobs = r->c->fu.gjobs && r->c->fu.gjobs[i] && split > 1; /* the rope jobs after it sum the partials */
        r->n_kernels += split > 1 && !jobs ? 2 : 1; /* a split: k_mma_reduce after it */
        cu_split_src srcs[CU_MULTI_MAX];
        const int pair_glu = f >= 0 ? (g->nodes[f].ip[0] == IR_OP_GEGLU ? 2 : 1) : 0;
        SB_TRY(cu_matmul_mma_multi(r->cx->s, seg, ns, w->ne[0], dptr(r, n->src[1]), x->dtype, x->ne[1], (float *)(r->arena + r->c->scratch_off),
                                   cap, jobs ? srcs : NULL, pair_glu));
        if (jobs && srcs[0].part) {
            int q = 0;
            for (int32_t m = i; m >= 0 && q < ns; m = r->c->fu.mnext[m], q++) {
                r->gsrc_root[q] = r->p->vals[cf_mm_out(&r->c->fu, m)].alias;
                r->gsrc[q] = srcs[q];
            }
            r->gsrc_n = ns;
        }
        return SB_OK;
    }
    for (int32_t m = i; m >= 0; m = r->c->fu.mnext[m]) {
        r->n_kernels++;
        SB_TRY(run_matmul_one(r, m));
    }
    return SB_OK;
}

/* a job whose x is a result of the MMA group just launched reads that group's partials */
static void rope_job_src(const crun *r, ir_ref x, cu_rope_job *jb) {
    for (int q = 0; q < r->gsrc_n; q++)
        if (r->gsrc_root[q] == r->p->vals[x].alias) jb->src = r->gsrc[q];
}

/* ROPE or KV_STORE node i as a cu_rope_job (a ROPE fused with its kv_store writes the cache; x from
 * the partials of the group before it where those were left unreduced) */
static cu_rope_job rope_job(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    if (n->op == IR_OP_KV_STORE) {
        const ir_node *x = &g->nodes[n->src[1]];
        cu_rope_job jb = {.store = true, .x = (const float *)dptr(r, n->src[1]),
                          .a = {.D = n->ne[0], .H = 1, .T = x->ne[1], .cache = dptr(r, i), .ctype = n->dtype}};
        rope_job_src(r, n->src[1], &jb);
        return jb;
    }
    const ir_node *x = &g->nodes[n->src[0]];
    cu_rope_job jb = {.dst = (float *)dptr(r, i), .x = (const float *)dptr(r, n->src[0]),
                      .a = {.D = x->ne[0], .H = x->ne[1], .T = x->ne[2], .n_rot = n->ip[0], .mode = n->ip[1],
                            .theta_scale = powf(n->fp[0], -2.0f / (float)n->ip[0]), .freq_scale = n->fp[1], .attn_factor = n->fp[2],
                            .ff = n->src[2] != IR_NONE ? (const float *)dptr(r, n->src[2]) : NULL}};
    if (r->c->fu.epi && r->c->fu.epi[i] >= 0) { /* fused with the kv_store that follows: write the cache */
        jb.a.cache = dptr(r, r->c->fu.epi[i]);
        jb.a.ctype = g->nodes[r->c->fu.epi[i]].dtype;
    }
    rope_job_src(r, n->src[0], &jb);
    return jb;
}

/* the ROPE / KV_STORE jobs chained from i (plan_rope_jobs) in one launch; every job reads the same
 * positions (one plan: one pos input) */
static sb_status run_rope_jobs(crun *r, int32_t i) {
    cu_rope_job jobs[CU_ROPE_JOBS_MAX];
    int n = 0;
    for (int32_t m = i; m >= 0 && n < CU_ROPE_JOBS_MAX; m = r->c->fu.rnext[m]) jobs[n++] = rope_job(r, m);
    const ir_node *f = &r->p->g->nodes[i];
    r->n_kernels++;
    r->gsrc_n = 0; /* consumed */
    return cu_rope_jobs(r->cx->s, jobs, n, (const int32_t *)dptr(r, f->src[f->op == IR_OP_KV_STORE ? 2 : 1]));
}

static sb_status run_node(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
#define SRC(j) (&g->nodes[n->src[j]])
#define SP(j) dptr(r, n->src[j])
    switch (n->op) {
    case IR_OP_GET_ROWS: {
        const ir_node *w = SRC(0);
        uint64_t rb = 0;
        qk_row_bytes(w->dtype, w->ne[0], &rb);
        r->n_kernels++;
        return cu_get_rows(s, dst, SP(0), w->dtype, n->ne[0], rb, SP(1), n->ne[1]);
    }
    case IR_OP_RMS_NORM: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU:
    case IR_OP_GELU_TANH: {
        cu_ew_chain c = {.n = 1};
        c.st[0] = (cu_ew_step){.op = ew_code(n->op), .f = n->fp[0]};
        if (n->op == IR_OP_ADD || n->op == IR_OP_MUL) {
            c.st[0].opd = SP(1);
            c.st[0].bcast = bcast(SRC(1), n);
        }
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_ew_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c);
    }
    case IR_OP_FUSED: {
        cu_ew_chain c = {.n = n->ip[0]};
        for (int k = 0; k < n->ip[0]; k++) {
            const int op = n->ip[1 + k] & 0xff, opd = n->ip[1 + k] >> 8;
            c.st[k] = (cu_ew_step){.op = ew_code(op), .f = n->fp[k]};
            if (opd) {
                c.st[k].opd = SP(opd);
                c.st[k].bcast = bcast(SRC(opd), n);
            }
        }
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_ew_rows(s, dst, SP(0), n->ne[0], ir_nrows(n), &c);
    }
    case IR_OP_SWIGLU: case IR_OP_GEGLU:
        r->n_kernels++;
        return cu_glu(s, dst, SP(0), SP(1), ir_nelem(n), n->op == IR_OP_GEGLU);
    case IR_OP_QUANTIZE:
        r->n_kernels++;
        CG_TRY(r, i);
        return cu_quantize_act(s, n->dtype, dst, SP(0), n->ne[0], ir_nrows(n));
    case IR_OP_RMS_NORM_QUANT:
        r->n_kernels++;
        if (r->nsum_for == i) { /* the GEMM before it left its split partials: h = their sum + o (plan_norm_sums) */
            cu_split_src src = r->nsum_src;
            r->nsum_for = 0;
            if (r->c->fu.epi && r->c->fu.epi[i] >= 0) { /* h = ADD(v, o) fused here: o as the partials' epilogue */
                const ir_node *a = &g->nodes[r->c->fu.epi[i]];
                const ir_ref o = a->src[0] == r->nsum_mm ? a->src[1] : a->src[0];
                src.ep = (cu_epilogue){.add = (const float *)dptr(r, o), .bcast = 0};
            }
            return cu_rms_norm_quant_split(s, n->dtype, dst, (float *)dptr(r, n->src[0]), &src, n->src[1] != IR_NONE ? SP(1) : NULL, n->ne[0],
                                           ir_nrows(n), n->fp[0]);
        }
        CG_TRY(r, i); /* with the fused residual ADD when c->fu.epi[i] >= 0 (cg_prepare chose the group) */
        if (r->c->fu.epi && r->c->fu.epi[i] >= 0) { /* the residual ADD before it, fused */
            const ir_node *a = &g->nodes[r->c->fu.epi[i]];
            return cu_add_rms_norm_quant(s, n->dtype, dst, (float *)dptr(r, r->c->fu.epi[i]), dptr(r, a->src[0]), dptr(r, a->src[1]),
                                         n->src[1] != IR_NONE ? SP(1) : NULL, n->ne[0], ir_nrows(n), n->fp[0]);
        }
        return cu_rms_norm_quant(s, n->dtype, dst, SP(0), n->src[1] != IR_NONE ? SP(1) : NULL, n->ne[0], ir_nrows(n), n->fp[0]);
    case IR_OP_GLU_QUANT:
        r->n_kernels++;
        if (r->c->fu.gpair && r->c->fu.gpair[n->src[0]] == i) /* its gate/up launch wrote act(gate) * up into the gate's memory */
            return cu_quantize_act(s, n->dtype, dst, SP(0), n->ne[0], ir_nrows(n));
        CG_TRY(r, i);
        return cu_glu_quant(s, n->dtype, dst, SP(0), SP(1), n->ne[0], ir_nrows(n), n->ip[0] == IR_OP_GEGLU);
    case IR_OP_MATMUL: {
        const ir_node *w = SRC(0), *x = SRC(1);
        if (r->c->fu.mnext && r->c->fu.mnext[i] >= 0) return run_matmul_group(r, i);
        r->n_kernels++;
        if (r->c->fu.gnext && (r->c->fu.gnext[i] >= 0 || r->c->fu.vstore[i] >= 0 || r->c->fu.krope[i] >= 0 ||
                            (cf_multi_ok(g, n) && n->ne[0] <= GF_ROWS_MAX && (r->cx->cfg.gemv_single || cf_reg_single(g, n))))) { /* one launch for the group (Q/K/V, gate/up), or a T = 1 GEMV */
            cu_gemv_seg seg[CU_MULTI_MAX];
            int ns = 0;
            for (int32_t m = i; m >= 0 && ns < CU_MULTI_MAX; m = r->c->fu.gnext[m]) {
                const ir_node *mn = &g->nodes[m], *mw = &g->nodes[mn->src[0]];
                cu_gemv_seg *q = &seg[ns++];
                *q = (cu_gemv_seg){.w = dptr(r, mn->src[0]), .wtype = mw->dtype, .N = mw->ne[1]};
                q->dst = matmul_out(r, m, &q->ep);
                if (r->c->fu.vstore[m] >= 0) {
                    q->cache = dptr(r, r->c->fu.vstore[m]);
                    q->ctype = g->nodes[r->c->fu.vstore[m]].dtype;
                }
                if (r->c->fu.krope[m] >= 0) { /* K: rotate, then write the cache of the rope's kv_store */
                    const ir_node *rn = &g->nodes[r->c->fu.krope[m]], *rx = &g->nodes[rn->src[0]];
                    const int32_t kvs = r->c->fu.epi[r->c->fu.krope[m]];
                    q->cache = dptr(r, kvs);
                    q->ctype = g->nodes[kvs].dtype;
                    q->rot = rn->ip[0];
                    q->rmode = rn->ip[1];
                    q->D = (int)rx->ne[0];
                    q->theta_scale = powf(rn->fp[0], -2.0f / (float)rn->ip[0]);
                    q->freq_scale = rn->fp[1];
                    q->attn_factor = rn->fp[2];
                    q->ff = rn->src[2] != IR_NONE ? (const float *)dptr(r, rn->src[2]) : NULL;
                }
            }
            const int pair_glu = r->c->fu.gpair[i] >= 0 ? (g->nodes[r->c->fu.gpair[i]].ip[0] == IR_OP_GEGLU ? 2 : 1) : 0; /* gate/up writing the GLU */
            return cu_matmul_q8_multi(s, seg, ns, w->ne[0], SP(1), x->dtype, r->cx->d_pos, pair_glu);
        }
        return run_matmul_one(r, i);
    }
    case IR_OP_RESHAPE: case IR_OP_OUTPUT: return SB_OK;
    case IR_OP_ROPE: {
        if ((r->c->fu.rnext && r->c->fu.rnext[i] >= 0) || r->gsrc_n) return run_rope_jobs(r, i);
        cu_rope_job jb = rope_job(r, i);
        r->n_kernels++;
        return cu_rope(s, jb.dst, jb.x, SP(1), &jb.a);
    }
    case IR_OP_KV_STORE:
        if ((r->c->fu.rnext && r->c->fu.rnext[i] >= 0) || r->gsrc_n) return run_rope_jobs(r, i);
        r->n_kernels++;
        return cu_kv_store(s, dst, n->dtype, n->ne[0], SP(1), SP(2), SRC(1)->ne[1]);
    case IR_OP_ATTENTION: {
        cu_attn_args a = attn_args(r->cx, r->p, n);
        a.depth_max = r->depth_max;
        const void *q = SP(0);
        if (r->c->fu.qrope && r->c->fu.qrope[i] >= 0) { /* Q's RoPE fused: the unrotated q, and the rope's parameters */
            const ir_node *rn = &g->nodes[r->c->fu.qrope[i]];
            q = dptr(r, rn->src[0]);
            a.q_rot = rn->ip[0];
            a.q_mode = rn->ip[1];
            a.q_theta_scale = powf(rn->fp[0], -2.0f / (float)rn->ip[0]);
            a.q_freq_scale = rn->fp[1];
            a.q_attn_factor = rn->fp[2];
            a.q_ff = rn->src[2] != IR_NONE ? (const float *)dptr(r, rn->src[2]) : NULL;
        }
        if (r->c->fu.epi && r->c->fu.epi[i] >= 0) a.xq = dptr(r, r->c->fu.epi[i]); /* the QUANTIZE after it, fused */
        if ((r->cx->cfg.attn_variant == 3 || r->cx->cfg.attn_variant == 4) && cu_fattn_supported(&a)) { /* prefill: flash attention (k_fattn.cu) */
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

static sb_status enqueue_all(crun *r) {
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
    int32_t *fam = cx->cfg.profile ? (int32_t *)calloc((size_t)g->n_nodes + 1, sizeof *fam) : NULL;
    int32_t *kn = cx->cfg.profile ? (int32_t *)calloc((size_t)g->n_nodes + 1, sizeof *kn) : NULL;
    if (cx->cfg.profile && (!fam || !kn)) {
        free(fam), free(kn);
        return sb_fail(SB_ERR_OOM, "cuda: profile");
    }
    sb_status st = SB_OK;
    if (cx->cfg.profile) st = cu_event_record(cx->ev[ne++], cx->s);
    for (int32_t i = 0; st == SB_OK && i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (ir_ops[n->op].flags & OPF_INPUT) continue;
        if (r->c->fu.skip && r->c->fu.skip[i]) continue; /* done by the matmul before it */
        const int32_t k0 = r->n_kernels;
        st = run_node(r, i);
        if (st != SB_OK) {
            st = sb_fail_context(st, "cuda: node %%%d %s \"%s\"", (int)i, ir_ops[n->op].name, n->name);
            break;
        }
        if (cx->cfg.profile && r->n_kernels > k0) {
            fam[ne] = prof_family(r->p, n);
            kn[ne] = r->n_kernels - k0;
            st = cu_event_record(cx->ev[ne++], cx->s);
        }
    }
    if (cx->cfg.profile && st == SB_OK) {
        st = cu_stream_sync(cx->s);
        for (int32_t k = 1; st == SB_OK && k < ne; k++) {
            float ms = 0;
            st = cu_event_ms(cx->ev[k - 1], cx->ev[k], &ms);
            cx->prof_ms[fam[k]] += ms;
            cx->prof_k[fam[k]] += kn[k];
        }
        cx->prof_runs++;
    }
    free(fam);
    free(kn);
    return st;
}

// ---- run ----

/* the keys bound of depth class c (0: none) */
static int64_t class_depth(const exec_cuda *cx, int c) { return c >= 1 ? (int64_t)cx->cfg.attn_small << (c - 1) : 0; }

/* the depth class of a run: for one token (a decode step) at position pos, the smallest c >= 1 with
 * pos + 1 <= attn_small << (c - 1) (no attention of the step sees more keys: a window only lowers
 * it) — class 1 takes the small-depth layout's compact kernel, deeper classes k_attn_deep.cu sized
 * for their bound; 0 otherwise (any depth: the all-modes kernel). Each class has its own captured
 * graph: the graph of a step is chosen by the host, which knows pos. */
static int depth_class(const exec_cuda *cx, const plan *p, const exec_bindings *b) {
    if (p->n_tokens != 1 || cx->cfg.attn_variant != 4 || cx->cfg.attn_small <= 0 || !cx->cfg.attn_class) return 0;
    for (int32_t i = 0; i < p->n_inputs; i++) {
        if (p->inputs[i].kind != IR_OP_POS) continue;
        const int64_t need = (int64_t)((const int32_t *)b->data[i])[0] + 1;
        for (int c = 1; c < (cx->cfg.attn_deep ? CX_DEPTH_CLASSES : 2); c++)
            if (need <= class_depth(cx, c)) return c;
        return 0;
    }
    return 0;
}

/* the memory output o may be written straight into its destination through (its root value), or
 * IR_NONE: only where the root is a computed value exactly the output's size whose memory nothing
 * but views of it (the OUTPUT node, reshapes) shares and nothing but those reads — so its producing
 * kernel is the only one that touches the destination */
static ir_ref direct_root(const plan *p, ir_ref o) {
    const ir_ref root = p->vals[o].alias >= 0 ? p->vals[o].alias : o;
    const plan_value *rv = &p->vals[root];
    if (rv->input >= 0 || p->vals[o].offset != rv->offset || p->vals[o].bytes != rv->bytes) return IR_NONE;
    for (int32_t i = 0; i < p->g->n_nodes; i++) {
        const ir_node *n = &p->g->nodes[i];
        const bool view = n->op == IR_OP_OUTPUT || n->op == IR_OP_RESHAPE;
        if (i != root && p->vals[i].alias == root && !view) return IR_NONE;
        for (int k = 0; k < IR_MAX_SRC && !view; k++)
            if (n->src[k] == root) return IR_NONE;
    }
    return root;
}

static sb_status run_bound(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out) {
    const int32_t *rows = NULL;
    SB_TRY(plan_check_bindings(p, b->data, b->n_data, &rows));
    int64_t n_rows = 0;
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const ir_node *n = &p->g->nodes[p->inputs[i].node];
        int64_t cnt = n->op == IR_OP_TOKENS || n->op == IR_OP_POS || n->op == IR_OP_OUT_ROWS ? n->ne[0] : 0;
        if (cnt > cx->max_tokens)
            return sb_fail(SB_ERR_INVALID_ARG, "exec_cuda: input \"%s\" has %lld entries, the context takes %lld", p->inputs[i].name,
                           (long long)cnt, (long long)cx->max_tokens);
        if (n->op == IR_OP_OUT_ROWS) n_rows = n->ne[0];
    }
    cplan *c = NULL;
    SB_TRY(cplan_get(cx, p, b, &c));
    /* per-step inputs into the fixed device buffer (graph replays read them there), through
     * page-locked staging of the same layout, copied as one span (the previous run has finished
     * with it: every run ends synchronized) */
    int32_t *h_tok = cx->h_in, *h_pos = cx->h_in + cx->max_tokens, *h_rows = cx->h_in + 2 * cx->max_tokens;
    size_t in_bytes = 0; /* the span of h_in this run's inputs reach */
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        const size_t nb = (size_t)p->g->nodes[in->node].ne[0] * 4;
        if (in->kind == IR_OP_TOKENS) {
            memcpy(h_tok, b->data[i], nb);
            in_bytes = nb > in_bytes ? nb : in_bytes;
        }
        if (in->kind == IR_OP_POS) {
            memcpy(h_pos, b->data[i], nb);
            in_bytes = (size_t)cx->max_tokens * 4 + nb > in_bytes ? (size_t)cx->max_tokens * 4 + nb : in_bytes;
        }
    }
    if (n_rows > 0) {
        if (rows)
            memcpy(h_rows, rows, (size_t)n_rows * 4);
        else
            for (int64_t k = 0; k < n_rows; k++) h_rows[k] = (int32_t)(p->n_tokens - n_rows + k);
        in_bytes = (size_t)(2 * cx->max_tokens + n_rows) * 4;
    }
    if (cx->cfg.poison) SB_TRY(cu_memset(cx->arena, 0xFF, (size_t)cx->arena_bytes, cx->s));
    const int dc = depth_class(cx, p, b);
    crun r = {.cx = cx, .p = p, .c = c, .arena = (uint8_t *)cx->arena, .depth_max = class_depth(cx, dc)};
    /* decode plans are captured on their first run; other shapes (prefill chunks, whose sizes vary
     * per request) on their second, so a one-off shape does not pay the capture */
    const bool use_graph = cx->cfg.graphs && !cx->cfg.profile && (p->n_tokens == 1 || c->runs >= 1);
    c->runs++;
    /* outputs written straight into page-locked destinations by the kernels that compute them
     * (direct_root; graph runs only: a destination is checked once, when its graph is captured) */
    bool direct = use_graph && cx->cfg.direct_out && p->n_outputs <= CX_MAX_OUT && out;
    bool outs_same = true; /* the destinations the step's graph was captured with */
    for (int32_t k = 0; k < p->n_outputs && k < CX_MAX_OUT; k++) outs_same = outs_same && c->graph_out[dc][k] == (out ? out[k] : NULL);
    if (direct) {
        const bool checked = c->graph[dc] && c->graph_direct[dc] && outs_same;
        for (int32_t k = 0; k < p->n_outputs; k++) {
            const ir_ref root = out[k] ? direct_root(p, p->outputs[k].node) : IR_NONE;
            if (root == IR_NONE || !(checked || cu_is_pinned(out[k]))) continue;
            r.direct_node[r.n_direct] = root;
            r.direct_dst[r.n_direct++] = out[k];
        }
        direct = r.n_direct > 0;
    }
    if (in_bytes) SB_TRY(cu_memcpy_h2d(cx->d_in, cx->h_in, in_bytes, cx->s));
    if (use_graph) {
        if (!c->graph[dc] || c->graph_arena[dc] != cx->arena || c->graph_direct[dc] != direct || (direct && !outs_same)) {
            cu_graph_destroy(c->graph[dc]);
            c->graph[dc] = NULL;
            SB_TRY(cu_graph_begin(cx->s));
            sb_status st = enqueue_all(&r);
            cu_graph gr = NULL;
            sb_status st2 = cu_graph_end(cx->s, &gr); /* always end the capture, even after a failed launch */
            if (st != SB_OK) {
                cu_graph_destroy(gr);
                return st;
            }
            SB_TRY(st2);
            c->graph[dc] = gr;
            c->graph_arena[dc] = cx->arena;
            c->graph_direct[dc] = direct;
            for (int32_t k = 0; k < CX_MAX_OUT; k++) c->graph_out[dc][k] = direct && k < p->n_outputs ? out[k] : NULL;
            c->n_kernels[dc] = r.n_kernels;
            cx->st.graph_captures++;
        }
        SB_TRY(cu_graph_launch(c->graph[dc], cx->s));
        cx->st.graph_replays++;
        cx->st.direct_replays += direct;
        cx->st.kernels_last_run = c->n_kernels[dc];
    } else {
        SB_TRY(enqueue_all(&r));
        cx->st.eager_runs++;
        cx->st.kernels_last_run = r.n_kernels;
    }
    for (int32_t k = 0; out && k < p->n_outputs; k++) {
        if (!out[k] || direct_at(&r, p->outputs[k].node)) continue;
        const ir_node *n = &p->g->nodes[p->outputs[k].node];
        SB_TRY(cu_memcpy_d2h_async(out[k], dptr(&r, p->outputs[k].node), (size_t)ir_nelem(n) * sizeof(float), cx->s));
    }
    SB_TRY(cu_stream_sync(cx->s));
    return SB_OK;
}

sb_status exec_cuda_run(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out) {
    if (!cx || !p || !b) return sb_fail(SB_ERR_INVALID_ARG, "exec_cuda: NULL context, plan or bindings");
    const cu_config *prev = cu_cfg_bind(&cx->cfg);
    const sb_status st = run_bound(cx, p, b, out);
    cu_cfg_bind(prev);
    return st;
}

#endif
