/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/session.c — sessions (session.h): KV buffers, a small plan cache keyed by (T, n_out),
 * binding of plan inputs to weights/KV/staging buffers (done once per plan), chunked evaluation,
 * prefix reuse.
 * Layer 2 (runtime); the composition point of graph, backend and model:
 *   graph/plan.h (provides: the plan), runtime/backends.h (provides: the "cpu" and, in builds with
 *   CUDA, "cuda" backend kinds: one backend object a session, driven through backend/backend.h;
 *   backend_plan),
 *   runtime/arch/arch.h (provides: rt_build_decoder).
 */
#include "runtime/session.h"
#include "runtime/arch/arch.h"
#include "runtime/backends.h"
#include "runtime/finite.h"
#include "base/status.h"
#include "graph/plan.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RT_MAX_PLANS 8

typedef struct plan_entry {
    int64_t T, n_out;
    plan *p;
    void **data;        /* bound input slots */
    uint64_t last_use;
} plan_entry;

struct rt_session {
    const rt_model *m;
    rt_session_params prm;
    void **kv;          /* [2*n_layer]: K of layer l at 2l, V at 2l+1, each [Dkv, n_ctx] of kv_type (ring rows for a
                         * sliding-window layer when swa_ring > 0) */
    int64_t swa_ring;   /* rows of each sliding-window layer's ring cache; 0 = no rings */
    uint64_t kv_bytes;  /* allocated for all layers */
    int32_t *cached;    /* [n_ctx] tokens whose K/V are in the cache */
    int64_t n_cached;
    plan_entry plans[RT_MAX_PLANS];
    uint64_t use_clock;
    int32_t *tok_buf, *pos_buf; /* [n_batch] staging for the tokens/pos inputs */
    backend *be;        /* the executor: "cpu", or "cuda" when prm.device == 1 */
    bool logits_pinned; /* logits from the backend's host_alloc */
    float *logits;      /* [n_vocab] of the last evaluated position */
    bool have_logits;
    rt_session_stats st;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- create / free ----

static sb_status get_plan(rt_session *s, int64_t T, int64_t n_out, plan_entry **out);

/* does the GPU's free memory hold the model's weights and its KV cache (kv_total bytes) plus margin?
 * The weights less the gathered tables (rt_model_step_bytes), as the backend stores them
 * (stored_bytes): the CUDA executor keeps a table it only gathers rows of in host memory.
 * SB_ERR_OOM naming the bytes if not; the device-memory query's own error if it fails */
static sb_status gpu_room(const rt_model *m, uint64_t kv_total, uint64_t margin, int64_t n_ctx) {
    uint64_t fr = 0, tot = 0;
    const backend_kind *k = backend_kind_find("cuda");
    if (!k) return sb_fail(SB_ERR_UNSUPPORTED, "session: this build has no CUDA backend");
    SB_TRY(k->memory(&fr, &tot));
    uint64_t wb = 0;
    for (int t = 0; t < SB_TYPE_COUNT; t++) wb += k->stored_bytes ? k->stored_bytes(t, m->step_type_bytes[t]) : m->step_type_bytes[t];
    const uint64_t need = wb + kv_total + margin;
    if (need > fr)
        return sb_fail(SB_ERR_OOM, "session: the model's weights (%llu bytes) and KV cache (%llu bytes, n_ctx %lld)%s need %llu bytes on the GPU; "
                       "%llu of %llu bytes are free", (unsigned long long)wb, (unsigned long long)kv_total, (long long)n_ctx,
                       margin ? " with room to spare" : "", (unsigned long long)need, (unsigned long long)fr, (unsigned long long)tot);
    return SB_OK;
}

/* device auto (2), before anything is allocated: 1 when a CUDA device is usable and its free memory
 * holds the model's weights and the KV cache with a margin (256 MiB: activations, kernels, the
 * runtime's own), else 0 with the reason logged */
static int auto_device(const rt_model *m, uint64_t kv_total, int64_t n_ctx) {
    char why[256] = "this build has no CUDA backend (nvcc was not found at configure time)";
    const backend_kind *k = backend_kind_find("cuda");
    if (!k || !k->available(why, sizeof why)) {
        sb_log(SB_LOG_INFO, "session: device auto: the CPU (%s)", why);
        return 0;
    }
    if (gpu_room(m, kv_total, (uint64_t)256 << 20, n_ctx) != SB_OK) {
        sb_log(SB_LOG_INFO, "session: device auto: the CPU (%s)", sb_last_error());
        return 0;
    }
    return 1;
}

static sb_status create_backend(rt_session *s, const char *name) {
    const backend_kind *k = backend_kind_find(name);
    if (!k) return sb_fail(SB_ERR_UNSUPPORTED, "session: this build has no %s backend", name);
    const backend_params bp = {.n_threads = s->prm.n_threads, .max_tokens = s->prm.n_batch, .graphs = s->prm.cuda_graph,
                               .codegen = s->prm.codegen, .act_type = s->prm.act_type};
    return k->create(&bp, &s->be);
}

/* forget a cached plan (the backend's state for it, its bindings) */
static void drop_plan(rt_session *s, plan_entry *e) {
    if (e->p && s->be) s->be->ops->forget(s->be, e->p);
    plan_free(e->p);
    free(e->data);
    memset(e, 0, sizeof *e);
}

/* device auto after the CUDA context exists (before anything else uses it): the decode plan is built
 * and checked now (and kept); a model the CUDA backend cannot run (a weight type or op without a
 * kernel: SB_ERR_MODEL_TENSOR_TYPE, SB_ERR_UNSUPPORTED) moves the session to the CPU instead of
 * failing later */
static sb_status auto_check(rt_session *s) {
    plan_entry *e;
    const sb_status st = get_plan(s, 1, 1, &e);
    if (st != SB_ERR_MODEL_TENSOR_TYPE && st != SB_ERR_UNSUPPORTED) return st;
    sb_log(SB_LOG_INFO, "session: device auto: the CPU (%s)", sb_last_error());
    for (int i = 0; i < RT_MAX_PLANS; i++) drop_plan(s, &s->plans[i]); /* planned for the CUDA target */
    s->be->ops->free(s->be);
    s->be = NULL;
    s->prm.device = 0;
    return create_backend(s, "cpu");
}

sb_status rt_session_create(const rt_model *m, const rt_session_params *p, rt_session **out) {
    *out = NULL;
    SB_TRY(gguf_check_size(&m->file, m->path)); /* a mapped file that shrank would fault on use */
    rt_session_params prm = p ? *p : (rt_session_params){0};
    if (prm.n_ctx == 0) prm.n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (prm.n_batch == 0) prm.n_batch = 512;
    if (prm.n_ctx < 1 || prm.n_ctx > (int64_t)1 << 24)
        return sb_fail(SB_ERR_INVALID_ARG, "session: n_ctx %lld out of range (1..16777216)", (long long)prm.n_ctx);
    if (prm.n_ctx > m->hp.n_ctx_train && !prm.allow_ctx_extend)
        return sb_fail(SB_ERR_INVALID_ARG, "session: n_ctx %lld exceeds the model's trained context length %lld (%s.context_length); "
                       "set allow_ctx_extend to run past it (sb run --allow-long-context)", (long long)prm.n_ctx,
                       (long long)m->hp.n_ctx_train, m->hp.arch);
    if (prm.n_ctx > m->hp.n_ctx_train)
        sb_log(SB_LOG_WARN, "session: n_ctx %lld exceeds the model's trained context length %lld: positions past %lld were never "
               "trained and the output may degrade", (long long)prm.n_ctx, (long long)m->hp.n_ctx_train, (long long)m->hp.n_ctx_train);
    if (prm.n_batch < 1 || prm.n_batch > 65536)
        return sb_fail(SB_ERR_INVALID_ARG, "session: n_batch %lld out of range (1..65536)", (long long)prm.n_batch);
    if (prm.kv_type != SB_TYPE_F32 && prm.kv_type != SB_TYPE_F16)
        return sb_fail(SB_ERR_INVALID_ARG, "session: KV cache type %d must be F32 or F16", prm.kv_type);
    if (prm.n_threads < 0) return sb_fail(SB_ERR_INVALID_ARG, "session: n_threads %d is negative (0 = all cores)", prm.n_threads);
    if (prm.n_threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        prm.n_threads = nc > 0 ? (int)nc : 1;
    }
    if (prm.device < 0 || prm.device > 2) return sb_fail(SB_ERR_INVALID_ARG, "session: device %d (0 = CPU, 1 = CUDA, 2 = auto)", prm.device);
    if (prm.n_threads > 256) return sb_fail(SB_ERR_INVALID_ARG, "session: %d threads (at most 256)", prm.n_threads);
    if (prm.cuda_graph < -1 || prm.cuda_graph > 1)
        return sb_fail(SB_ERR_INVALID_ARG, "session: cuda_graphs %d (0 default, 1 on, -1 off)", prm.cuda_graph);
    if (prm.codegen < -1 || prm.codegen > 1) return sb_fail(SB_ERR_INVALID_ARG, "session: codegen %d (0 default, 1 on, -1 off)", prm.codegen);
    if (prm.swa_full < 0 || prm.swa_full > 1) return sb_fail(SB_ERR_INVALID_ARG, "session: swa_full %d (0 rings, 1 full)", prm.swa_full);
    if (prm.act_type != 0 && prm.act_type != SB_TYPE_Q8_K && prm.act_type != SB_TYPE_Q8_1)
        return sb_fail(SB_ERR_INVALID_ARG, "session: act_type %d (0 default, SB_TYPE_Q8_K or SB_TYPE_Q8_1)", prm.act_type);
    rt_session *s = (rt_session *)calloc(1, sizeof *s);
    if (!s) return sb_fail(SB_ERR_OOM, "session");
    s->m = m;
    s->prm = prm;
    const rt_hparams *hp = &m->hp;
    /* rings for a sliding-window model's windowed layers where they are shorter than the context (the
     * CPU and CUDA executors both read them): window + n_batch rows hold a step's window and its tokens */
    if (hp->n_swa > 0 && !prm.swa_full && hp->n_swa + prm.n_batch < prm.n_ctx) s->swa_ring = hp->n_swa + prm.n_batch;
    const uint64_t kv_elem = (uint64_t)prm.n_ctx * (uint64_t)qk_get(prm.kv_type)->type_size; /* bytes per cached value */
    const uint64_t ring_elem = (uint64_t)s->swa_ring * (uint64_t)qk_get(prm.kv_type)->type_size;
    uint64_t kv_total = 0; /* per layer: gemma4's layers differ in width, and its shared-KV layers own none */
    for (int64_t l = 0; l < hp->n_layer; l++) kv_total += 2 * (uint64_t)rt_hp_kv_dim(hp, l) * (s->swa_ring && hp->is_swa[l] ? ring_elem : kv_elem);
    const bool automatic = prm.device == 2;
    if (automatic) s->prm.device = prm.device = auto_device(m, kv_total, prm.n_ctx);
    sb_status st = SB_OK;
    s->kv = (void **)calloc((size_t)(2 * hp->n_layer), sizeof *s->kv);
    s->cached = (int32_t *)malloc((size_t)prm.n_ctx * sizeof *s->cached);
    s->tok_buf = (int32_t *)malloc((size_t)prm.n_batch * sizeof *s->tok_buf);
    s->pos_buf = (int32_t *)malloc((size_t)prm.n_batch * sizeof *s->pos_buf);
    s->logits = (float *)malloc((size_t)hp->n_vocab * sizeof *s->logits);
    if (!s->kv || !s->cached || !s->tok_buf || !s->pos_buf || !s->logits) st = sb_fail(SB_ERR_OOM, "session buffers");
    for (int64_t i = 0; st == SB_OK && i < 2 * hp->n_layer; i++) {
        const uint64_t kv_bytes = (uint64_t)rt_hp_kv_dim(hp, i / 2) * (s->swa_ring && hp->is_swa[i / 2] ? ring_elem : kv_elem);
        if (!kv_bytes) continue; /* a layer reading another layer's cache (gemma4 shared KV) */
        s->kv_bytes += kv_bytes;
        s->kv[i] = calloc(1, (size_t)kv_bytes);
        if (!s->kv[i])
            st = sb_fail(SB_ERR_OOM, "session: KV cache: %llu bytes for layer %lld (%llu for all %lld layers, n_ctx %lld)",
                         (unsigned long long)kv_bytes, (long long)(i / 2), (unsigned long long)kv_total, (long long)hp->n_layer,
                         (long long)prm.n_ctx);
    }
    if (st == SB_OK && prm.device == 1) {
        st = create_backend(s, "cuda");
        if (st != SB_OK && automatic) { /* a device that looked usable but gives no context: the CPU */
            sb_log(SB_LOG_INFO, "session: device auto: the CPU (%s)", sb_last_error());
            s->prm.device = 0;
            st = SB_OK;
        }
        if (st == SB_OK && s->be && !automatic && gpu_room(m, kv_total, 0, prm.n_ctx) == SB_ERR_OOM)
            st = SB_ERR_OOM; /* weights and KV cache upload on the first run: refuse now what cannot fit (a failed query: not here) */
        if (st == SB_OK && s->be && automatic) st = auto_check(s);
    }
    if (st == SB_OK && !s->be) st = create_backend(s, "cpu");
    void *pl; /* the logits copied out every step: where the backend writes fastest (else the malloc'd buffer stays) */
    if (st == SB_OK && s->be->ops->host_alloc && s->be->ops->host_alloc(s->be, (size_t)hp->n_vocab * sizeof *s->logits, &pl) == SB_OK) {
        free(s->logits);
        s->logits = (float *)pl;
        s->logits_pinned = true;
    }
    if (st != SB_OK) {
        rt_session_free(s);
        return st;
    }
    *out = s;
    return SB_OK;
}

void rt_session_free(rt_session *s) {
    if (!s) return;
    for (int i = 0; i < RT_MAX_PLANS; i++) drop_plan(s, &s->plans[i]);
    if (s->kv)
        for (int64_t i = 0; i < 2 * s->m->hp.n_layer; i++) free(s->kv[i]);
    free(s->kv);
    free(s->cached);
    free(s->tok_buf);
    free(s->pos_buf);
    if (s->logits_pinned)
        s->be->ops->host_free(s->be, s->logits);
    else
        free(s->logits);
    if (s->be) s->be->ops->free(s->be);
    free(s);
}

// ---- plans ----

static sb_status bind_plan(rt_session *s, plan_entry *e) {
    const plan *p = e->p;
    e->data = (void **)calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *e->data);
    if (!e->data) return sb_fail(SB_ERR_OOM, "plan bindings");
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        switch (in->kind) {
        case IR_OP_TOKENS: e->data[i] = s->tok_buf; break;
        case IR_OP_POS: e->data[i] = s->pos_buf; break;
        case IR_OP_OUT_ROWS: e->data[i] = NULL; break; /* the last n_out rows */
        case IR_OP_WEIGHT: {
            const gguf_tensor *t = gguf_find_tensor(&s->m->file, in->name);
            if (!t) return sb_fail(SB_ERR_INTERNAL, "plan input \"%s\" names no tensor", in->name);
            e->data[i] = (void *)t->data; /* read-only: weights are never written */
            break;
        }
        case IR_OP_KV: {
            long long l;
            char kind;
            if (sscanf(in->name, "cache_%c.%lld", &kind, &l) != 2 || l < 0 || l >= s->m->hp.n_layer || (kind != 'k' && kind != 'v'))
                return sb_fail(SB_ERR_INTERNAL, "plan input \"%s\" is no KV buffer", in->name);
            e->data[i] = s->kv[2 * l + (kind == 'v')];
            if (!e->data[i]) return sb_fail(SB_ERR_INTERNAL, "plan input \"%s\" names a layer without its own KV cache", in->name);
            break;
        }
        default: return sb_fail(SB_ERR_INTERNAL, "plan input %d has kind %d", i, in->kind);
        }
    }
    return SB_OK;
}

static sb_status get_plan(rt_session *s, int64_t T, int64_t n_out, plan_entry **out) {
    plan_entry *victim = &s->plans[0];
    for (int i = 0; i < RT_MAX_PLANS; i++) {
        plan_entry *e = &s->plans[i];
        if (e->p && e->T == T && e->n_out == n_out) {
            e->last_use = ++s->use_clock;
            *out = e;
            return SB_OK;
        }
        if (!e->p || (victim->p && e->last_use < victim->last_use)) victim = e;
    }
    drop_plan(s, victim);
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    rt_build b = {.g = g, .m = s->m, .T = T, .n_out = n_out, .n_ctx = s->prm.n_ctx, .n_swa_ring = s->swa_ring, .kv_type = s->prm.kv_type};
    sb_status st = rt_build_decoder(&b);
    if (st == SB_OK) st = backend_plan(s->be, g, NULL, 0, &victim->p);
    ir_graph_free(g);
    if (st == SB_OK) st = bind_plan(s, victim);
    if (st != SB_OK) {
        drop_plan(s, victim);
        return st;
    }
    victim->T = T;
    victim->n_out = n_out;
    victim->last_use = ++s->use_clock;
    s->st.n_plans_built++;
    *out = victim;
    return SB_OK;
}

// ---- evaluation ----

/* SB_ERR_NUMERIC naming the first non-finite logit of rows [0, n_rows) of V floats (row r belongs to
 * position pos0 + r, token tokens[r]): a NaN or Inf logit means the pass went wrong (corrupt weights,
 * extreme values), and sampling from the rest would hide it. Not called where the backend's kernels
 * checked the logits as they wrote them (backend_ops.output_finite: a CUDA LM head writing straight
 * to the host), which saves reading them again from memory. */
static sb_status check_logits(const float *l, int64_t n_rows, int64_t V, const int32_t *tokens, int64_t pos0) {
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t i = rt_nonfinite_at(l + r * V, V);
        if (i >= 0)
            return sb_fail(SB_ERR_NUMERIC, "session: the forward pass produced %s logits (position %lld, token %d, logit %lld): "
                           "the model's weights or hyperparameters hold non-finite or extreme values (try --check-tensors)",
                           isnan(l[r * V + i]) ? "NaN" : "infinite", (long long)(pos0 + r), tokens[r], (long long)i);
    }
    return SB_OK;
}

static sb_status run_chunk(rt_session *s, const int32_t *tokens, int64_t T, int64_t n_out, float *out) {
    plan_entry *e;
    SB_TRY(get_plan(s, T, n_out, &e));
    for (int64_t i = 0; i < T; i++) {
        s->tok_buf[i] = tokens[i];
        s->pos_buf[i] = (int32_t)(s->n_cached + i);
    }
    int32_t oi = plan_find_output(e->p, "logits");
    if (oi < 0 || oi >= 4) return sb_fail(SB_ERR_INTERNAL, "plan has no logits output");
    const int64_t V = s->m->hp.n_vocab;
    /* the backend writes the logits straight into out (all rows) or the session's last row */
    float *dst[4] = {0}, *tmp = NULL;
    if (out) dst[oi] = out;
    else if (n_out == 1) dst[oi] = s->logits;
    else if (!(dst[oi] = tmp = (float *)malloc((size_t)(n_out * V) * sizeof *tmp)))
        return sb_fail(SB_ERR_OOM, "session: %lld logits rows", (long long)n_out);
    sb_status st = s->be->ops->run(s->be, e->p, e->data, e->p->n_inputs, dst);
    if (st == SB_OK && backend_output_finite(s->be, oi) != 1) st = check_logits(dst[oi], n_out, V, tokens + T - n_out, s->n_cached + T - n_out);
    if (st == SB_OK && dst[oi] != s->logits) memcpy(s->logits, dst[oi] + (n_out - 1) * V, (size_t)V * sizeof *s->logits);
    free(tmp);
    SB_TRY(st);
    memcpy(s->cached + s->n_cached, tokens, (size_t)T * sizeof *tokens);
    s->n_cached += T;
    s->have_logits = true;
    return SB_OK;
}

sb_status rt_session_eval(rt_session *s, const int32_t *tokens, int64_t n, bool all_logits, float *out) {
    if (n <= 0) return sb_fail(SB_ERR_INVALID_ARG, "session: nothing to evaluate (%lld tokens)", (long long)n);
    SB_TRY(gguf_check_size(&s->m->file, s->m->path)); /* one fstat: refuse a shrunk mapping before touching it */
    if (n > s->prm.n_ctx - s->n_cached)
        return sb_fail(SB_ERR_CONTEXT_FULL, "session: %lld new tokens + %lld cached exceed the context of %lld", (long long)n,
                       (long long)s->n_cached, (long long)s->prm.n_ctx);
    const int64_t V = s->m->hp.n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return sb_fail(SB_ERR_RANGE, "session: token %lld is %d, outside the vocabulary [0, %lld)", (long long)i, tokens[i],
                           (long long)V);
    double t0 = now_s();
    for (int64_t done = 0; done < n;) {
        int64_t T = n - done < s->prm.n_batch ? n - done : s->prm.n_batch;
        sb_status st = run_chunk(s, tokens + done, T, all_logits ? T : 1, all_logits && out ? out + done * V : NULL);
        if (st != SB_OK) return st;
        done += T;
    }
    double dt = now_s() - t0;
    if (n == 1) {
        s->st.n_decode_tokens++;
        s->st.decode_seconds += dt;
    } else {
        s->st.n_prefill_tokens += n;
        s->st.prefill_seconds += dt;
    }
    return SB_OK;
}

/* Can evaluation resume at position n < n_cached? The sliding-window rings must still hold the
 * window before n: positions [n - window + 1, n) must not be among the overwritten [0, n_cached - ring). */
static bool rings_hold(const rt_session *s, int64_t n) {
    if (!s->swa_ring || n == 0 || s->n_cached <= s->swa_ring) return true;
    return n - s->m->hp.n_swa + 1 >= s->n_cached - s->swa_ring;
}

sb_status rt_session_prefill(rt_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused) {
    if (n <= 0) return sb_fail(SB_ERR_INVALID_ARG, "session: empty prompt");
    int64_t common = 0;
    while (common < s->n_cached && common < n && s->cached[common] == tokens[common]) common++;
    if (common == n) common = n - 1; /* re-evaluate the last token: its logits are needed */
    if (!rings_hold(s, common)) common = 0; /* the window before the cut was overwritten: recompute */
    if (n_reused) *n_reused = common;
    s->n_cached = common;
    sb_status st = rt_session_eval(s, tokens + common, n - common, false, NULL);
    if (st == SB_OK) s->st.n_reused_tokens += common;
    return st;
}

sb_status rt_session_truncate(rt_session *s, int64_t n) {
    if (n < 0 || n >= s->n_cached) return SB_OK;
    if (rings_hold(s, n)) {
        s->n_cached = n;
        return SB_OK;
    }
    int32_t *tokens = (int32_t *)malloc((size_t)n * sizeof *tokens);
    if (!tokens) return sb_fail(SB_ERR_OOM, "session: %lld tokens to re-evaluate", (long long)n);
    memcpy(tokens, s->cached, (size_t)n * sizeof *tokens);
    s->n_cached = 0;
    sb_status st = rt_session_eval(s, tokens, n, false, NULL);
    free(tokens);
    if (st != SB_OK) s->n_cached = 0;
    return st;
}

uint64_t rt_session_kv_bytes(const rt_session *s) { return s->kv_bytes; }

const float *rt_session_logits(const rt_session *s) { return s->have_logits ? s->logits : NULL; }
int64_t rt_session_n_cached(const rt_session *s) { return s->n_cached; }
int64_t rt_session_n_ctx(const rt_session *s) { return s->prm.n_ctx; }
const int32_t *rt_session_cached_tokens(const rt_session *s) { return s->cached; }
const rt_model *rt_session_model(const rt_session *s) { return s->m; }
rt_session_stats rt_session_get_stats(const rt_session *s) { return s->st; }
void rt_session_reset_stats(rt_session *s) { memset(&s->st, 0, sizeof s->st); }
int rt_session_threads(const rt_session *s) { return s->prm.n_threads; }
int rt_session_device(const rt_session *s) { return s->prm.device; }
backend *rt_session_backend(const rt_session *s) { return s->be; }
