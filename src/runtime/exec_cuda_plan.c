/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_plan.c — per-plan device state (cplan): input bindings to device memory (a
 * weight read only as a get_rows table by the tokens stays in host memory: its rows go through the
 * plan's per-run stage), attention split counts, the executor-level fusion tables (cuda_fusion.h),
 * the arena size with split scratch, generated kernels; found by plan pointer or built on a plan's
 * first run.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
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
    if (cx->cfg.attn_variant == 4) return attn_nsplit_dec(cx, ir_attn_of(n).n_head_kv, C);
    int64_t ns = ((int64_t)cx->cfg.attn_splits * cx->sms + Hq - 1) / Hq;
    int64_t cap = (C + 63) / 64;
    if (ns > cap) ns = cap;
    if (ns > 64) ns = 64;
    return ns < 1 ? 1 : (int)ns;
}

cu_attn_args cx_attn_args(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    return (cu_attn_args){.D = q->ne[0], .Hq = q->ne[1], .Hkv = ir_attn_of(n).n_head_kv, .T = q->ne[2], .ctype = k->dtype, .scale = ir_attn_of(n).scale,
                          .softcap = ir_attn_of(n).softcap, .window = ir_attn_of(n).window, .ring = ir_kv_ring(p->g, n->src[1]),
                          .nsplit = attn_nsplit(cx, p, n),
                          .variant = cx->cfg.attn_variant == 1 ? 1 : cx->cfg.attn_variant == 4 ? 4 : 2, .kmin = cx->cfg.attn_kmin,
                          .hpb = cx->cfg.attn_hpb, .ctx = k->ne[1], .warp = cx->cfg.attn_warp, .small = cx->cfg.attn_small};
}

cu_attn_args cx_attn_paged_dec_args(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max) {
    cu_attn_args a = cx_attn_args(cx, p, n);
    const int bs = ir_attn_block_size(n);
    const int64_t reach = bs > 0 ? p->g->nodes[n->src[4]].ne[0] * bs : 0; /* keys the table can name */
    if (reach > 0 && reach < a.ctx) a.ctx = reach;
    a.ring = 0, a.bs = bs, a.depth_max = depth_max;
    if (a.T == 1 && a.variant == 4) a.nsplit = attn_nsplit_dec(cx, a.Hkv, a.ctx);
    return a;
}

bool cx_attn_paged_on_dec(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max) {
    if (ir_attn_block_size(n) <= 0 || depth_max <= 0 || cx->cfg.attn_variant != 4 || p->g->nodes[n->src[0]].ne[2] != 1) return false;
    const cu_attn_args a = cx_attn_paged_dec_args(cx, p, n, depth_max);
    return cu_attn_decode_paged_fits(&a);
}

bool cx_attn_on_flash(const exec_cuda *cx, const plan *p, const ir_node *n) {
    if (ir_attn_block_size(n) > 0 || (cx->cfg.attn_variant != 3 && cx->cfg.attn_variant != 4)) return false;
    const cu_attn_args a = cx_attn_args(cx, p, n);
    return cu_fattn_supported(&a);
}

/* Key splits S of the paged kernel (k_attn_paged.cu): its T * Hq blocks (grouped, hb > 0: T * Hq / hb,
 * at most CU_ATT_PAGED_GQA_MAX_SPLITS) each walk their keys
 * serially, so a decode of few tokens deep in the cache leaves most SMs idle (gemma4's 8 global
 * heads at depth 4096: 8 blocks on 132 SMs; unsplit, H100: 21 tok/s against 304 at depth 0). S gives
 * ~attn_splits (2) blocks per SM at the deepest context a token can see (keys: the table's reach,
 * the cache rows, the window), in splits of at least kmin keys (shallower: fewer of them active,
 * the kernel decides from pos), at most CU_ATT_PAGED_MAX_SPLITS; S = 1 (the unsplit kernel, no
 * scratch) where T * Hq blocks already fill that (prefill, large batches) or keys <= kmin. */
static int attn_nsplit_paged(const exec_cuda *cx, int64_t T, int64_t Hq, int hb, int64_t keys) {
    const int64_t blocks = T * (hb > 0 ? Hq / hb : Hq), want = (int64_t)cx->cfg.attn_splits * cx->sms, kmin = cx->cfg.attn_kmin;
    if (blocks <= 0 || blocks >= want) return 1;
    int64_t ns = (want + blocks - 1) / blocks;
    const int64_t most = (keys + kmin - 1) / kmin;
    if (ns > most) ns = most;
    if (ns > (hb > 0 ? CU_ATT_PAGED_GQA_MAX_SPLITS : CU_ATT_PAGED_MAX_SPLITS)) ns = hb > 0 ? CU_ATT_PAGED_GQA_MAX_SPLITS : CU_ATT_PAGED_MAX_SPLITS;
    return ns < 1 ? 1 : (int)ns;
}

/* the grouped kernel's heads a block (cu_attn_paged_args.hb) under cu_config.attn_gqa: the largest
 * divisor of G = Hq / Hkv <= it that the kernel takes for a's shape (all G heads of a kv head where
 * it can: each K/V row read once for them; Qwen2.5's 7), 0 where none does (attn_gqa 0, head dims
 * or cache types it has no instance of: the per-head kernel) */
static int attn_paged_hb(const exec_cuda *cx, const cu_attn_paged_args *a) {
    for (int hb = cx->cfg.attn_gqa < 8 ? cx->cfg.attn_gqa : 8; hb >= 1; hb--)
        if (cu_attention_paged_gqa_ok(a, hb)) return hb;
    return 0;
}

cu_attn_paged_args cx_attn_paged_args(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    const ir_attn_params ap = ir_attn_of(n);
    const int bs = ir_attn_block_size(n); /* 0: a contiguous cache, one block of its C rows */
    const int64_t C = k->ne[1], n_tbl = bs > 0 ? p->g->nodes[n->src[4]].ne[0] : 1;
    int64_t keys = bs > 0 && n_tbl * bs < C ? n_tbl * bs : C;
    if (ap.window > 0 && ap.window < keys) keys = ap.window;
    cu_attn_paged_args a = {.D = q->ne[0], .Hq = q->ne[1], .Hkv = ap.n_head_kv, .T = q->ne[2], .ctype = k->dtype, .scale = ap.scale,
                            .softcap = ap.softcap, .window = ap.window, .bs = bs > 0 ? bs : (int)C, .n_tbl = n_tbl,
                            .ring = bs > 0 ? 0 : ir_kv_ring(p->g, n->src[1]), .kmin = cx->cfg.attn_kmin};
    a.hb = attn_paged_hb(cx, &a);
    a.nsplit = attn_nsplit_paged(cx, a.T, a.Hq, a.hb, keys);
    return a;
}

void exec_cuda_assume_device(int cc_major, int sms) { cu_assume_device(cc_major, sms); }
bool exec_cuda_blaslt_available(char *why, size_t cap) { return cu_blaslt_available(why, cap); }
void exec_cuda_assume_blaslt(int on) { cu_blaslt_assume(on); }

/* the splits active at n visible keys of S of at least kmin (attn_paged.cuh's pa_active) */
static int64_t paged_active(int64_t n, int S, int kmin, int64_t *kps) {
    const int64_t km = kmin > 0 ? kmin : CU_ATT_DEC_KMIN;
    *kps = S > 1 ? (n + S - 1) / S : n;
    if (S > 1 && *kps < km) *kps = km;
    return S > 1 ? (n + *kps - 1) / *kps : 1;
}

/* one line about attention node n at depth (its last position): the kernel, grid and splits */
static int describe_one(const exec_cuda *cx, const plan *p, int32_t i, int64_t depth, char *buf, size_t cap) {
    const ir_node *n = &p->g->nodes[i];
    const ir_attn_params ap = ir_attn_of(n);
    const int64_t keys = ap.window > 0 && ap.window < depth + 1 ? ap.window : depth + 1;
    const int o = snprintf(buf, cap, "%%%d head_dim %d heads %lld/%d window %d, %lld keys: ", (int)i, (int)ap.head_dim, (long long)p->g->nodes[n->src[0]].ne[1],
                           (int)ap.n_head_kv, (int)ap.window, (long long)keys);
    const size_t rest = (size_t)o < cap ? cap - (size_t)o : 0;
    const int64_t dm = p->n_tokens == 1 ? cx_class_depth(cx, cx_depth_class(cx, depth + 1)) : 0; /* the run's depth bound */
    if (cx_attn_paged_on_dec(cx, p, n, dm)) {
        const cu_attn_args a = cx_attn_paged_dec_args(cx, p, n, dm);
        const bool deep = cu_attn_deep_fits(&a);
        return o + snprintf(buf + o, rest, "%s through the block table (block size %d), depth class of %lld keys\n",
                            deep ? "k_attn_deep + k_attn_deep_merge" : "k_attn_dec small layout (SMALL_ONLY)", a.bs, (long long)dm);
    }
    if (cx_attn_on_paged_kernel(cx, p, n)) {
        const cu_attn_paged_args a = cx_attn_paged_args(cx, p, n);
        int64_t kps;
        const int64_t na = paged_active(keys, a.nsplit, a.kmin, &kps), bx = a.hb > 0 ? a.Hq / a.hb : a.Hq;
        return o + snprintf(buf + o, rest, "%s hb %d grid (%lld, %lld, %d), %d splits: %lld active of %lld keys%s\n",
                            a.hb > 0 ? "k_attn_paged_gqa" : "k_attn_paged", a.hb, (long long)bx, (long long)a.T, a.nsplit > 1 ? a.nsplit : 1,
                            a.nsplit, (long long)na, (long long)kps, cu_attention_paged_launches(&a, true) > 1 ? " + merge" : a.nsplit > 1 ? ", the last merges" : "");
    }
    const cu_attn_args a = cx_attn_args(cx, p, n);
    int64_t kps;
    const int64_t na = paged_active(keys, a.nsplit, a.kmin, &kps);
    return o + snprintf(buf + o, rest, "cu_attention variant %d (T %lld, ctype %d), %d splits of >= %d keys (%lld active), warp path to %d, "
                        "small to %d, deep %d\n", a.variant, (long long)a.T, a.ctype, a.nsplit, a.kmin, (long long)na, a.warp, a.small,
                        cx->cfg.attn_deep);
}

size_t exec_cuda_describe_attention(const plan *p, const cu_config *c, int64_t depth, char *buf, size_t cap) {
    exec_cuda *cx = (exec_cuda *)calloc(1, sizeof *cx);
    if (!cx) return 0;
    cx->cfg = c ? *c : cu_config_default;
    cx->sms = cu_sm_count();
    size_t o = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_ATTENTION) {
            const int k = describe_one(cx, p, i, depth, buf + (o < cap ? o : cap), o < cap ? cap - o : 0);
            o += k > 0 ? (size_t)k : 0;
        }
    free(cx);
    return o;
}

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
        const uint64_t nb = ir_nbytes(&p->g->nodes[p->inputs[i].node]);
        c->runtime[c->n_runtime++] = (cruntime){.in = i, .off = *off, .bytes = nb};
        *off += nb;
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
        *gt = (cgather){.node = i, .w_in = p->vals[n->src[0]].input, .tok_in = p->vals[n->src[1]].input, .off = off, .T = n->ne[1]};
        if (qk_row_bytes(w->dtype, w->ne[0], &gt->row_bytes) || gt->w_in < 0 || gt->tok_in < 0)
            return sb_fail(SB_ERR_INTERNAL, "cuda: get_rows %%%d of \"%s\" (type %s) cannot be gathered on the host", (int)i, w->name,
                           ir_dtype_name(w->dtype));
        off += (uint64_t)n->ne[1] * gt->row_bytes;
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
            st = cx_devbuf_get(cx, b->data[i], ir_nbytes(n), in->name, &c->dptr[i]);
            break;
        case IR_OP_KV: st = cx_devbuf_get(cx, b->data[i], ir_nbytes(n), in->name, &c->dptr[i]); break;
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
        } else if (p->g->nodes[i].op == IR_OP_MATMUL_GROUP && p->g->nodes[p->g->nodes[i].src[0]].ne[1] > 8) {
            const ir_node *gn = &p->g->nodes[i], *mx = &p->g->nodes[gn->src[0]]; /* a split group's partials: its members' together */
            uint64_t f = 0;
            for (int j = 0; j < ir_group_n(gn); j++) {
                const ir_node *mw = &p->g->nodes[ir_group_weight(gn, j)];
                f += cu_mma_small_scratch(mw->ne[0], mw->ne[1], mx->ne[1]);
            }
            if (f > scratch) scratch = f;
        } else if (p->g->nodes[i].op == IR_OP_MATMUL && cu_mma_small_mode()) { /* split-K partials of the small-T GEMM */
            const ir_node *mw = &p->g->nodes[p->g->nodes[i].src[0]], *mx = &p->g->nodes[p->g->nodes[i].src[1]];
            if (mx->ne[1] > 8 && cu_has_mma(mw->dtype, mx->dtype)) {
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
