/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/batch.c — the batched engine (batch.h): parameter defaults, the plan cache per (T, n_out)
 * class (classes readied by rt_engine_warmup kept, RT_ENGINE_PLANS more replaced least recently
 * used first), binding plan inputs to the pool and staging buffers, the all-or-nothing step
 * (validate → reserve blocks → stage → run → check logits → commit, or undo the reservations), and
 * the warm-up (every class of a step's limits built and run once on padding where the backend asks).
 * Layer 2 (runtime); composes kv_pool.h, graph/plan.h, runtime/backends.h, runtime/arch/arch.h.
 */
#include "runtime/batch.h"
#include "runtime/arch/arch.h"
#include "runtime/backends.h"
#include "runtime/finite.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "graph/plan.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct eplan {
    int64_t T, n_out;
    plan *p;
    void **data;        /* bound input slots */
    uint64_t last_use;
    bool kept;          /* readied by rt_engine_warmup: never replaced */
} eplan;

struct rt_engine {
    const rt_model *m;
    rt_engine_params prm;
    kv_pool *pool;
    backend *be;
    eplan *plans;       /* [n_plans]: the kept ones and RT_ENGINE_PLANS more */
    int n_plans;
    uint64_t clock;
    int64_t tbl_len;
    /* staging, [n_batch] each (tbl: [n_batch * tbl_len]) */
    int32_t *tok, *pos, *slots, *rows, *tbl;
    /* per sequence, [n_seq_max]: tokens this step, positions handed out so far, first index in grouped */
    int64_t *cnt, *next, *first;
    int32_t *touched, *grouped; /* sequences in this step; [n_batch] tokens grouped by sequence */
    kv_pool_undo *undo;         /* [n_seq_max] reservations of this step */
    float *out;                 /* plan output rows (grow_out) */
    int64_t out_rows_cap;
    int64_t n_out_last;         /* rows of the last successful step at the front of out, in item order */
    int64_t *row_nonfinite;           /* [n_batch] check_logits': each row's first non-finite logit, or -1 */
    tp_pool *host_tp;           /* host work of a step (the logits check) on CUDA; NULL on the CPU: inline */
    rt_engine_stats st;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- output rows ----

/* the output rows: page-locked where the backend has such memory (CUDA writes logits there
 * directly), else malloc */
static void free_out(rt_engine *e) {
    if (e->out && e->be && e->be->ops->host_free) e->be->ops->host_free(e->be, e->out);
    else free(e->out);
    e->out = NULL;
    e->out_rows_cap = 0;
}

static sb_status grow_out(rt_engine *e, int64_t rows) {
    if (rows <= e->out_rows_cap) return SB_OK;
    free_out(e);
    const size_t bytes = (size_t)(rows * e->m->hp.n_vocab) * sizeof *e->out;
    void *o = NULL;
    if (e->be->ops->host_alloc) SB_TRY(e->be->ops->host_alloc(e->be, bytes, &o));
    else o = malloc(bytes);
    if (!o) return sb_fail(SB_ERR_OOM, "engine: %lld logit rows", (long long)rows);
    e->out = (float *)o;
    e->out_rows_cap = rows;
    return SB_OK;
}

// ---- plans ----

static void drop_plan(rt_engine *e, eplan *x) {
    if (x->p && e->be) e->be->ops->forget(e->be, x->p);
    plan_free(x->p);
    free(x->data);
    memset(x, 0, sizeof *x);
}

static sb_status bind_plan(rt_engine *e, eplan *x) {
    const plan *p = x->p;
    x->data = (void **)calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *x->data);
    if (!x->data) return sb_fail(SB_ERR_OOM, "engine: plan bindings");
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        long long l;
        char kind;
        switch (in->kind) {
        case IR_OP_TOKENS: x->data[i] = e->tok; break;
        case IR_OP_POS: x->data[i] = e->pos; break;
        case IR_OP_SLOTS: x->data[i] = e->slots; break;
        case IR_OP_BLOCK_TABLE: x->data[i] = e->tbl; break;
        case IR_OP_OUT_ROWS: x->data[i] = e->rows; break;
        case IR_OP_WEIGHT: {
            const gguf_tensor *t = gguf_find_tensor(&e->m->file, in->name);
            if (!t) return sb_fail(SB_ERR_INTERNAL, "engine: plan input \"%s\" names no tensor", in->name);
            x->data[i] = (void *)t->data; /* read-only */
            break;
        }
        case IR_OP_KV:
            if (sscanf(in->name, "cache_%c.%lld", &kind, &l) != 2 || l < 0 || l >= e->m->hp.n_layer_kv || (kind != 'k' && kind != 'v'))
                return sb_fail(SB_ERR_INTERNAL, "engine: plan input \"%s\" is no KV buffer", in->name);
            x->data[i] = kv_pool_layer(e->pool, l, kind == 'v');
            break;
        default: return sb_fail(SB_ERR_INTERNAL, "engine: plan input %d has kind %d", i, in->kind);
        }
    }
    return SB_OK;
}

static sb_status get_plan(rt_engine *e, int64_t T, int64_t n_out, eplan **out) {
    eplan *victim = NULL; /* an empty entry, else the least recently used one not kept */
    for (int i = 0; i < e->n_plans; i++) {
        eplan *x = &e->plans[i];
        if (x->p && x->T == T && x->n_out == n_out) {
            x->last_use = ++e->clock;
            *out = x;
            return SB_OK;
        }
        if (!x->kept && (!victim || (victim->p && (!x->p || x->last_use < victim->last_use)))) victim = x;
    }
    if (!victim) return sb_fail(SB_ERR_INTERNAL, "engine: every plan entry is kept");
    drop_plan(e, victim);
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    rt_build b = {.g = g, .m = e->m, .T = T, .n_out = n_out, .n_ctx = kv_pool_rows(e->pool), .kv_type = e->prm.kv_type,
                  .block_size = kv_pool_block_size(e->pool), .n_blk_max = e->tbl_len};
    sb_status st = rt_build_decoder(&b);
    if (st == SB_OK) st = backend_plan(e->be, g, NULL, 0, &victim->p);
    ir_graph_free(g);
    if (st == SB_OK) st = bind_plan(e, victim);
    if (st != SB_OK) {
        drop_plan(e, victim);
        return st;
    }
    victim->T = T;
    victim->n_out = n_out;
    victim->last_use = ++e->clock;
    e->st.n_plans_built++;
    *out = victim;
    return SB_OK;
}

// ---- create / free ----

static sb_status fill_defaults(const rt_model *m, rt_engine_params *p) {
    if (p->block_size == 0) p->block_size = 16;
    if (p->n_seq_max == 0) p->n_seq_max = 4;
    if (p->n_ctx == 0) p->n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (p->n_batch == 0) p->n_batch = 512;
    if (p->n_threads == 0) {
        const long nc = sysconf(_SC_NPROCESSORS_ONLN);
        p->n_threads = nc > 0 ? (int)nc : 1;
    }
    if (p->block_size < 1 || p->block_size > 1024)
        return sb_fail(SB_ERR_INVALID_ARG, "engine: block_size %d out of range (1..1024)", p->block_size);
    if (p->n_seq_max < 1 || p->n_seq_max > 65536) return sb_fail(SB_ERR_INVALID_ARG, "engine: n_seq_max %d out of range (1..65536)", p->n_seq_max);
    if (p->n_ctx < 1 || p->n_ctx > m->hp.n_ctx_train)
        return sb_fail(SB_ERR_INVALID_ARG, "engine: n_ctx %lld out of range (1..%lld, the model's trained context)", (long long)p->n_ctx,
                       (long long)m->hp.n_ctx_train);
    if (p->n_blocks == 0) p->n_blocks = (int64_t)p->n_seq_max * ((p->n_ctx + p->block_size - 1) / p->block_size);
    if (p->n_blocks < 1 || p->n_blocks > ((int64_t)1 << 24))
        return sb_fail(SB_ERR_INVALID_ARG, "engine: n_blocks %lld out of range (1..16777216)", (long long)p->n_blocks);
    if (p->n_batch < 1 || p->n_batch > 65536) return sb_fail(SB_ERR_INVALID_ARG, "engine: n_batch %lld out of range (1..65536)", (long long)p->n_batch);
    if (p->kv_type != SB_TYPE_F32 && p->kv_type != SB_TYPE_F16)
        return sb_fail(SB_ERR_INVALID_ARG, "engine: KV cache type %d must be F32 or F16", p->kv_type);
    if (p->n_threads < 0 || p->n_threads > 256) return sb_fail(SB_ERR_INVALID_ARG, "engine: n_threads %d out of range (0 = all cores, ..256)", p->n_threads);
    if (p->device < 0 || p->device > 2) return sb_fail(SB_ERR_INVALID_ARG, "engine: device %d (0 = CPU, 1 = CUDA, 2 = auto)", p->device);
    return SB_OK;
}

static sb_status kv_copy(void *ctx, void *buf, uint64_t dst, uint64_t src, uint64_t bytes) {
    backend *be = (backend *)ctx;
    return be->ops->kv_copy(be, buf, dst, src, bytes);
}

/* the backend of device 0 (CPU) or 1 (CUDA), and the decode plan on it: an architecture or device
 * that cannot run the paged graph fails here */
static sb_status create_backend(rt_engine *e) {
    const char *name = e->prm.device == 1 ? "cuda" : "cpu";
    const backend_kind *k = backend_kind_find(name);
    char why[256] = "";
    if (!k || !k->available(why, sizeof why))
        return sb_fail(SB_ERR_UNSUPPORTED, "engine: device %s: %s", name, k ? why : "this build has no such backend");
    const backend_params bp = {.n_threads = e->prm.n_threads, .max_tokens = e->prm.n_batch};
    SB_TRY(k->create(&bp, &e->be));
    if (e->be->ops->kv_copy) kv_pool_set_copy(e->pool, kv_copy, e->be); /* copy-on-write in the device's copy */
    if (e->prm.device == 1) { /* the host's share of a CUDA step, on up to 8 threads */
        const long nc = sysconf(_SC_NPROCESSORS_ONLN);
        SB_TRY(tp_create(nc < 1 ? 1 : nc > 8 ? 8 : (int)nc, &e->host_tp));
    }
    eplan *x;
    return get_plan(e, 1, 1, &x);
}

static void drop_backend(rt_engine *e) {
    free_out(e);
    for (int i = 0; i < e->n_plans; i++) drop_plan(e, &e->plans[i]);
    e->st.n_plans_warm = 0;
    if (e->be) e->be->ops->free(e->be);
    e->be = NULL;
    kv_pool_set_copy(e->pool, NULL, NULL);
    tp_free(e->host_tp);
    e->host_tp = NULL;
}

/* device auto: CUDA where a device is usable and runs the model's paged graph, else the CPU */
static sb_status create_backend_auto(rt_engine *e) {
    const backend_kind *k = backend_kind_find("cuda");
    char why[256] = "no CUDA in this build";
    if (k && k->available(why, sizeof why)) {
        e->prm.device = 1;
        if (create_backend(e) == SB_OK) return SB_OK;
        snprintf(why, sizeof why, "%s", sb_last_error());
        drop_backend(e);
    }
    sb_log(SB_LOG_INFO, "engine: device auto: the CPU (%s)", why);
    e->prm.device = 0;
    return create_backend(e);
}

static sb_status alloc_buffers(rt_engine *e) {
    const int64_t nb = e->prm.n_batch, ns = e->prm.n_seq_max;
    e->tok = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    e->pos = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    e->slots = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    e->rows = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    e->grouped = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    e->tbl = (int32_t *)malloc((size_t)(nb * e->tbl_len) * sizeof(int32_t));
    e->cnt = (int64_t *)calloc((size_t)ns, sizeof(int64_t));
    e->next = (int64_t *)calloc((size_t)ns, sizeof(int64_t));
    e->first = (int64_t *)calloc((size_t)ns, sizeof(int64_t));
    e->touched = (int32_t *)malloc((size_t)ns * sizeof(int32_t));
    e->row_nonfinite = (int64_t *)malloc((size_t)nb * sizeof *e->row_nonfinite);
    e->undo = (kv_pool_undo *)malloc((size_t)ns * sizeof(kv_pool_undo));
    e->plans = (eplan *)calloc(RT_ENGINE_PLANS, sizeof *e->plans);
    e->n_plans = e->plans ? RT_ENGINE_PLANS : 0;
    if (!e->plans || !e->tok || !e->pos || !e->slots || !e->rows || !e->grouped || !e->tbl || !e->cnt || !e->next || !e->first || !e->touched || !e->undo || !e->row_nonfinite)
        return sb_fail(SB_ERR_OOM, "engine: staging buffers for %lld tokens", (long long)nb);
    return SB_OK;
}

sb_status rt_engine_create(const rt_model *m, const rt_engine_params *p, rt_engine **out) {
    *out = NULL;
    SB_TRY(gguf_check_size(&m->file, m->path));
    rt_engine_params prm = p ? *p : (rt_engine_params){0};
    SB_TRY(fill_defaults(m, &prm));
    rt_engine *e = (rt_engine *)calloc(1, sizeof *e);
    if (!e) return sb_fail(SB_ERR_OOM, "engine");
    e->m = m;
    e->prm = prm;
    const kv_pool_params kp = {.n_blocks = prm.n_blocks, .block_size = prm.block_size, .n_seq_max = prm.n_seq_max, .n_ctx = prm.n_ctx,
                               .kv_type = prm.kv_type};
    sb_status st = kv_pool_create(m, &kp, &e->pool);
    if (st == SB_OK) {
        e->tbl_len = kv_pool_table_len(e->pool);
        st = alloc_buffers(e);
    }
    if (st == SB_OK) st = e->prm.device == 2 ? create_backend_auto(e) : create_backend(e);
    if (st != SB_OK) {
        rt_engine_free(e);
        return st;
    }
    *out = e;
    return SB_OK;
}

void rt_engine_free(rt_engine *e) {
    if (!e) return;
    if (e->pool) drop_backend(e);
    kv_pool_free(e->pool);
    free(e->tok), free(e->pos), free(e->slots), free(e->rows), free(e->grouped), free(e->tbl);
    free(e->cnt), free(e->next), free(e->first), free(e->touched), free(e->undo), free(e->row_nonfinite);
    free(e->plans);
    free(e);
}

// ---- a step ----

/* smallest power of two >= n, at most cap */
static int64_t bucket(int64_t n, int64_t cap) {
    int64_t b = 1;
    while (b < n) b *= 2;
    return b < cap ? b : cap;
}

/* check every item and count tokens per sequence (e->cnt, e->touched); nothing changes on failure */
static sb_status validate(rt_engine *e, const rt_batch_item *items, int64_t n, int32_t *n_touched) {
    const int64_t V = e->m->hp.n_vocab;
    *n_touched = 0;
    sb_status st = SB_OK;
    for (int64_t i = 0; i < n && st == SB_OK; i++) {
        if (!kv_pool_seq_is_open(e->pool, items[i].seq)) {
            char what[64];
            snprintf(what, sizeof what, "engine step: item %lld", (long long)i);
            st = kv_pool_seq_valid(e->pool, items[i].seq, what);
        }
        if (st == SB_OK && (items[i].token < 0 || items[i].token >= V))
            st = sb_fail(SB_ERR_RANGE, "engine step: item %lld: token %d is outside the vocabulary [0, %lld)", (long long)i, items[i].token,
                         (long long)V);
        if (st == SB_OK && e->cnt[items[i].seq]++ == 0) e->touched[(*n_touched)++] = items[i].seq;
    }
    int64_t need = 0;
    for (int32_t k = 0; k < *n_touched && st == SB_OK; k++) {
        const int32_t s = e->touched[k];
        const int64_t len = kv_pool_seq_len(e->pool, s);
        if (len + e->cnt[s] > e->prm.n_ctx)
            st = sb_fail(SB_ERR_CONTEXT_FULL, "engine step: sequence %d: %lld cached + %lld new tokens exceed n_ctx %lld", s, (long long)len,
                         (long long)e->cnt[s], (long long)e->prm.n_ctx);
        need += kv_pool_blocks_needed(e->pool, s, e->cnt[s]);
    }
    if (st == SB_OK && need > kv_pool_blocks_available(e->pool)) {
        const kv_pool_stats ps = kv_pool_get_stats(e->pool);
        st = sb_fail(SB_ERR_CONTEXT_FULL, "engine step: the KV pool has no room: %lld tokens need %lld new blocks of %d; %lld of %lld are "
                     "free or evictable (%lld held by open sequences)", (long long)n, (long long)need, kv_pool_block_size(e->pool),
                     (long long)kv_pool_blocks_available(e->pool), (long long)ps.n_blocks, (long long)ps.n_used);
    }
    if (st != SB_OK)
        for (int64_t i = 0; i < n; i++)
            if (items[i].seq >= 0 && items[i].seq < e->prm.n_seq_max) e->cnt[items[i].seq] = 0;
    return st;
}

/* the staging buffers for items (reserved) padded to T tokens; returns the logit rows wanted */
static int64_t stage(rt_engine *e, const rt_batch_item *items, int64_t n, int64_t T) {
    const int32_t bs = kv_pool_block_size(e->pool), scratch = kv_pool_scratch_block(e->pool);
    int64_t n_out = 0;
    for (int64_t i = 0; i < T; i++) {
        int32_t *col = e->tbl + i * e->tbl_len;
        int64_t nb = 0;
        if (i < n) {
            const int32_t s = items[i].seq;
            const int64_t p = kv_pool_seq_len(e->pool, s) + e->next[s]++;
            e->tok[i] = items[i].token;
            e->pos[i] = (int32_t)p;
            e->slots[i] = (int32_t)kv_pool_row(e->pool, s, p);
            nb = (kv_pool_seq_len(e->pool, s) + e->cnt[s] + bs - 1) / bs;
            memcpy(col, kv_pool_seq_blocks(e->pool, s), (size_t)nb * sizeof *col);
            if (items[i].logits) e->rows[n_out++] = (int32_t)i;
        } else { /* padding: position 0 of the scratch block */
            e->tok[i] = 0;
            e->pos[i] = 0;
            e->slots[i] = scratch * bs;
        }
        for (int64_t k = nb; k < e->tbl_len; k++) col[k] = scratch;
    }
    return n_out;
}

typedef struct finite_job {
    const float *l;
    int64_t V;
    int64_t *at; /* per row: rt_nonfinite_at */
} finite_job;

static void rows_finite(void *ctx, int64_t r0, int64_t r1, int tid) {
    (void)tid;
    const finite_job *j = (const finite_job *)ctx;
    for (int64_t r = r0; r < r1; r++) j->at[r] = rt_nonfinite_at(j->l + r * j->V, j->V);
}

/* SB_ERR_NUMERIC naming the first non-finite logit of the step's rows (scanned in parallel on
 * CUDA: B x n_vocab floats a step) */
static sb_status check_logits(rt_engine *e, int64_t n_rows, const rt_batch_item *items) {
    const int64_t V = e->m->hp.n_vocab;
    finite_job j = {.l = e->out, .V = V, .at = e->row_nonfinite};
    tp_run(e->host_tp, n_rows, 1, rows_finite, &j);
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t i = e->row_nonfinite[r];
        if (i < 0) continue;
        return sb_fail(SB_ERR_NUMERIC, "engine step: the forward pass produced %s logits (item %d, sequence %d, token %d, logit %lld): "
                       "the model's weights or hyperparameters hold non-finite or extreme values", isnan(e->out[r * V + i]) ? "NaN" : "infinite",
                       e->rows[r], items[e->rows[r]].seq, items[e->rows[r]].token, (long long)i);
    }
    return SB_OK;
}

static sb_status run_plan(rt_engine *e, int64_t T, int64_t n_out, const rt_batch_item *items, float *logits) {
    const int64_t V = e->m->hp.n_vocab, n_out_b = n_out ? bucket(n_out, T) : 1;
    for (int64_t k = n_out; k < n_out_b; k++) e->rows[k] = 0; /* padding rows: computed, dropped */
    if (n_out_b == T)
        for (int64_t k = 0; k < T; k++) e->rows[k] = (int32_t)k; /* no out_rows input: every row, in order */
    eplan *x;
    SB_TRY(get_plan(e, T, n_out_b, &x));
    SB_TRY(grow_out(e, n_out_b));
    const int32_t oi = plan_find_output(x->p, "logits");
    if (oi < 0 || oi >= 4) return sb_fail(SB_ERR_INTERNAL, "engine: plan has no logits output");
    float *dst[4] = {0};
    dst[oi] = e->out;
    SB_TRY(e->be->ops->run(e->be, x->p, x->data, x->p->n_inputs, dst));
    if (n_out_b == T) { /* keep the wanted rows, in item order, at the front */
        int64_t r = 0;
        for (int64_t i = 0; i < T && r < n_out; i++)
            if (items[i].logits) {
                if (r != i) memmove(e->out + r * V, e->out + i * V, (size_t)V * sizeof *e->out);
                e->rows[r++] = (int32_t)i;
            }
    }
    /* the rows are scanned unless the kernel that wrote them checked them (a one-row step's LM head) */
    if (backend_output_finite(e->be, oi) != 1) SB_TRY(check_logits(e, n_out, items));
    if (logits && n_out) memcpy(logits, e->out, (size_t)(n_out * V) * sizeof *logits);
    e->n_out_last = n_out;
    return SB_OK;
}

sb_status rt_engine_step(rt_engine *e, const rt_batch_item *items, int64_t n, float *logits) {
    if (n < 1 || n > e->prm.n_batch)
        return sb_fail(SB_ERR_INVALID_ARG, "engine step: %lld items (1..n_batch %lld)", (long long)n, (long long)e->prm.n_batch);
    SB_TRY(gguf_check_size(&e->m->file, e->m->path));
    const double t0 = now_s();
    e->n_out_last = 0;
    int32_t nt;
    SB_TRY(validate(e, items, n, &nt));
    sb_status st = SB_OK;
    int32_t reserved = 0;
    for (; reserved < nt && st == SB_OK; reserved++) {
        const int32_t s = e->touched[reserved];
        st = kv_pool_reserve(e->pool, s, e->cnt[s], &e->undo[reserved]);
        if (st != SB_OK) break;
    }
    const int64_t T = bucket(n, e->prm.n_batch);
    if (st == SB_OK) st = run_plan(e, T, stage(e, items, n, T), items, logits);
    if (st == SB_OK) { /* commit: each sequence's tokens in item order */
        int64_t off = 0;
        for (int32_t k = 0; k < nt; k++) e->first[e->touched[k]] = off, off += e->cnt[e->touched[k]];
        for (int64_t i = 0; i < n; i++) e->grouped[e->first[items[i].seq]++] = items[i].token;
        off = 0;
        for (int32_t k = 0; k < nt; k++) {
            kv_pool_commit(e->pool, &e->undo[k], e->grouped + off, e->cnt[e->touched[k]]);
            off += e->cnt[e->touched[k]];
        }
    } else {
        for (int32_t k = reserved - 1; k >= 0; k--) kv_pool_unreserve(e->pool, &e->undo[k]);
    }
    for (int32_t k = 0; k < nt; k++) e->cnt[e->touched[k]] = e->next[e->touched[k]] = 0;
    if (st != SB_OK) return st;
    e->st.n_steps++;
    e->st.n_tokens += n;
    e->st.seconds += now_s() - t0;
    return SB_OK;
}

kv_pool *rt_engine_pool(rt_engine *e) { return e->pool; }
const rt_model *rt_engine_model(const rt_engine *e) { return e->m; }
int64_t rt_engine_n_batch(const rt_engine *e) { return e->prm.n_batch; }

int rt_engine_device(const rt_engine *e) { return e->prm.device; }
struct backend *rt_engine_backend(const rt_engine *e) { return e->be; }

const float *rt_engine_logits(const rt_engine *e, int64_t *n_rows) {
    *n_rows = e->n_out_last;
    return e->n_out_last ? e->out : NULL;
}

rt_engine_stats rt_engine_get_stats(const rt_engine *e) {
    rt_engine_stats s = e->st;
    s.pool = kv_pool_get_stats(e->pool);
    s.n_graph_captures = e->be->ops->stats(e->be).graph_captures;
    return s;
}

// ---- warm-up ----

#define WARM_VALUES 20 /* bucket values of one limit: 17 at most (n_batch <= 65536) */

/* the values bucket(n, cap) takes for n in [1, limit], ascending, into v; their count */
static int class_values(int64_t limit, int64_t cap, int64_t v[WARM_VALUES]) {
    int k = 0;
    for (int64_t n = 1;; n *= 2) {
        const int64_t b = bucket(n < limit ? n : limit, cap);
        if (k == 0 || v[k - 1] != b) v[k++] = b;
        if (n >= limit) return k;
    }
}

/* room for n_new more kept entries (some may be kept already) besides RT_ENGINE_PLANS replaceable ones */
static sb_status grow_plans(rt_engine *e, int n_new) {
    const int want = (int)e->st.n_plans_warm + n_new + RT_ENGINE_PLANS;
    if (want <= e->n_plans) return SB_OK;
    eplan *p = (eplan *)realloc(e->plans, (size_t)want * sizeof *p);
    if (!p) return sb_fail(SB_ERR_OOM, "engine: %d plan entries", want);
    memset(p + e->n_plans, 0, (size_t)(want - e->n_plans) * sizeof *p);
    e->plans = p;
    e->n_plans = want;
    return SB_OK;
}

/* class (T, n_out): its plan built and kept; with run, one run of padding only on the backend's
 * warm op into the engine's output rows (the memory later steps write, so a graph captured now is
 * the one they replay) */
static sb_status warm_class(rt_engine *e, int64_t T, int64_t n_out, bool run) {
    eplan *x;
    SB_TRY(get_plan(e, T, n_out, &x));
    if (!x->kept) x->kept = true, e->st.n_plans_warm++;
    if (!run) return SB_OK;
    stage(e, NULL, 0, T);
    for (int64_t k = 0; k < n_out; k++) e->rows[k] = n_out == T ? (int32_t)k : 0;
    const int32_t oi = plan_find_output(x->p, "logits");
    if (oi < 0 || oi >= 4) return sb_fail(SB_ERR_INTERNAL, "engine: plan has no logits output");
    float *dst[4] = {0};
    dst[oi] = e->out;
    return e->be->ops->warm(e->be, x->p, x->data, x->p->n_inputs, dst);
}

sb_status rt_engine_warmup(rt_engine *e, int64_t max_tokens, int64_t max_rows) {
    if (max_tokens < 1 || max_tokens > e->prm.n_batch)
        return sb_fail(SB_ERR_INVALID_ARG, "engine warm-up: max_tokens %lld (1..n_batch %lld)", (long long)max_tokens, (long long)e->prm.n_batch);
    if (max_rows < 1 || max_rows > max_tokens)
        return sb_fail(SB_ERR_INVALID_ARG, "engine warm-up: max_rows %lld (1..max_tokens %lld)", (long long)max_rows, (long long)max_tokens);
    SB_TRY(gguf_check_size(&e->m->file, e->m->path));
    int64_t Ts[WARM_VALUES], rows[WARM_VALUES][WARM_VALUES];
    int nT = class_values(max_tokens, e->prm.n_batch, Ts), nr[WARM_VALUES], n = 0;
    int64_t most_rows = 1;
    for (int i = 0; i < nT; i++) {
        nr[i] = class_values(max_rows < Ts[i] ? max_rows : Ts[i], Ts[i], rows[i]);
        n += nr[i];
        most_rows = rows[i][nr[i] - 1] > most_rows ? rows[i][nr[i] - 1] : most_rows;
    }
    SB_TRY(grow_plans(e, n));
    SB_TRY(grow_out(e, most_rows)); /* before any run: the rows' memory stays where graphs write it */
    /* the largest classes first (the device arena grows to its size once, at the first); a second
     * pass recaptures what a later growth dropped and replays the rest */
    const bool run = e->be->ops->warm != NULL;
    for (int pass = 0; pass < (run ? 2 : 1); pass++)
        for (int i = nT - 1; i >= 0; i--)
            for (int j = nr[i] - 1; j >= 0; j--) SB_TRY(warm_class(e, Ts[i], rows[i][j], run));
    return SB_OK;
}
