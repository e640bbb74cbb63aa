/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_batch.c — the public engine API (sonicboom.h, "batched sequences") over runtime/batch.h
 * and runtime/kv_pool.h: argument checks, parameter translation, item conversion (into a buffer of
 * n_batch items made at creation, so a step allocates nothing).
 * Layer 3 (api).
 */
#include "sonicboom.h"
#include "api/api_internal.h"
#include "base/status.h"
#include "runtime/batch.h"

#include <stdlib.h>
#include <string.h>

struct sb_engine {
    rt_engine *e;
    rt_batch_item *items; /* [n_batch] */
};

#define NEED(cond, fn)                                                                                 \
    do {                                                                                               \
        if (!(cond)) return sb_fail(SB_ERR_INVALID_ARG, "%s: %s", fn, "invalid argument: " #cond); \
    } while (0)

SB_API void sb_engine_default_params(sb_engine_params *p) {
    if (p) memset(p, 0, sizeof *p);
}

SB_API sb_status sb_engine_create(sb_model *m, const sb_engine_params *p, sb_engine **out) {
    NEED(m && out, "sb_engine_create");
    *out = NULL;
    rt_engine_params rp = {0};
    if (p) {
        for (int i = 0; i < (int)(sizeof p->reserved / sizeof p->reserved[0]); i++)
            if (p->reserved[i]) return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_create: reserved[%d] = %d (must be 0)", i, p->reserved[i]);
        if (p->block_size < 0 || p->n_seq_max < 0 || p->n_blocks < 0 || p->n_ctx < 0 || p->n_batch < 0)
            return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_create: negative n_blocks %lld, block_size %d, n_seq_max %d, n_ctx %lld or n_batch %lld",
                           (long long)p->n_blocks, p->block_size, p->n_seq_max, (long long)p->n_ctx, (long long)p->n_batch);
        rp = (rt_engine_params){.n_blocks = p->n_blocks, .block_size = p->block_size, .n_seq_max = p->n_seq_max, .n_ctx = p->n_ctx,
                                .n_batch = p->n_batch, .kv_type = p->kv_type, .n_threads = p->n_threads, .device = p->device};
    }
    sb_engine *h = (sb_engine *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_engine handle");
    sb_status s = rt_engine_create(m->m, &rp, &h->e);
    if (s == SB_OK && !(h->items = (rt_batch_item *)malloc((size_t)rt_engine_n_batch(h->e) * sizeof *h->items)))
        s = sb_fail(SB_ERR_OOM, "sb_engine: %lld batch items", (long long)rt_engine_n_batch(h->e));
    if (s != SB_OK) {
        sb_engine_free(h);
        return s;
    }
    *out = h;
    return SB_OK;
}

SB_API void sb_engine_free(sb_engine *e) {
    if (!e) return;
    rt_engine_free(e->e);
    free(e->items);
    free(e);
}

SB_API sb_status sb_seq_open(sb_engine *e, int32_t *seq) {
    NEED(e && seq, "sb_seq_open");
    return kv_pool_seq_open(rt_engine_pool(e->e), seq);
}

SB_API sb_status sb_seq_close(sb_engine *e, int32_t seq) {
    NEED(e, "sb_seq_close");
    kv_pool *kp = rt_engine_pool(e->e);
    SB_TRY(kv_pool_seq_valid(kp, seq, "sb_seq_close"));
    kv_pool_seq_close(kp, seq);
    return SB_OK;
}

SB_API sb_status sb_seq_attach_prefix(sb_engine *e, int32_t seq, const int32_t *tokens, size_t n, int64_t *n_reused) {
    NEED(e && tokens && n > 0 && n <= INT32_MAX, "sb_seq_attach_prefix");
    kv_pool *kp = rt_engine_pool(e->e);
    SB_TRY(kv_pool_seq_valid(kp, seq, "sb_seq_attach_prefix"));
    if (kv_pool_seq_len(kp, seq) != 0)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_seq_attach_prefix: sequence %d holds %lld positions (it must be empty)", seq,
                       (long long)kv_pool_seq_len(kp, seq));
    const int64_t V = rt_engine_model(e->e)->hp.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return sb_fail(SB_ERR_RANGE, "sb_seq_attach_prefix: token %zu is %d, outside the vocabulary [0, %lld)", i, tokens[i], (long long)V);
    int64_t r;
    kv_pool_attach_prefix(kp, seq, tokens, (int64_t)n - 1, &r);
    if (n_reused) *n_reused = r;
    return SB_OK;
}

SB_API sb_status sb_engine_step(sb_engine *e, const sb_batch_item *items, size_t n, float *logits) {
    NEED(e && items, "sb_engine_step");
    if (n < 1 || n > (size_t)rt_engine_n_batch(e->e))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_step: %zu items (1..n_batch %lld)", n, (long long)rt_engine_n_batch(e->e));
    for (size_t i = 0; i < n; i++) {
        if ((items[i].logits != 0 && items[i].logits != 1) || items[i].reserved)
            return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_step: item %zu: logits %d (0 or 1), reserved %d (0)", i, items[i].logits, items[i].reserved);
        e->items[i] = (rt_batch_item){.seq = items[i].seq, .token = items[i].token, .logits = items[i].logits == 1};
    }
    return rt_engine_step(e->e, e->items, (int64_t)n, logits);
}

SB_API sb_status sb_engine_warmup(sb_engine *e, size_t max_tokens, size_t max_rows) {
    NEED(e, "sb_engine_warmup");
    const int64_t nb = rt_engine_n_batch(e->e);
    if (max_tokens > (size_t)nb)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_warmup: max_tokens %zu above n_batch %lld", max_tokens, (long long)nb);
    const int64_t mt = max_tokens ? (int64_t)max_tokens : nb;
    const int64_t ns = kv_pool_n_seq_max(rt_engine_pool(e->e));
    if (max_rows > (size_t)mt) return sb_fail(SB_ERR_INVALID_ARG, "sb_engine_warmup: max_rows %zu above max_tokens %lld", max_rows, (long long)mt);
    return rt_engine_warmup(e->e, mt, max_rows ? (int64_t)max_rows : ns < mt ? ns : mt);
}

SB_API const float *sb_engine_logits(const sb_engine *e, size_t *n_rows) {
    int64_t n = 0;
    const float *l = e ? rt_engine_logits(e->e, &n) : NULL;
    if (n_rows) *n_rows = (size_t)n;
    return l;
}

SB_API sb_status sb_seq_length(const sb_engine *e, int32_t seq, int64_t *n) {
    NEED(e && n, "sb_seq_length");
    kv_pool *kp = rt_engine_pool(e->e);
    SB_TRY(kv_pool_seq_valid(kp, seq, "sb_seq_length"));
    *n = kv_pool_seq_len(kp, seq);
    return SB_OK;
}

SB_API sb_status sb_seq_truncate(sb_engine *e, int32_t seq, int64_t n) {
    NEED(e, "sb_seq_truncate");
    kv_pool *kp = rt_engine_pool(e->e);
    SB_TRY(kv_pool_seq_valid(kp, seq, "sb_seq_truncate"));
    if (n < 0 || n > kv_pool_seq_len(kp, seq))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_seq_truncate: n %lld outside [0, %lld] (sequence %d's length)", (long long)n,
                       (long long)kv_pool_seq_len(kp, seq), seq);
    kv_pool_seq_truncate(kp, seq, n);
    return SB_OK;
}

SB_API int sb_engine_device(const sb_engine *e) { return e ? (rt_engine_device(e->e) == 1 ? SB_DEVICE_CUDA : SB_DEVICE_CPU) : -1; }

SB_API sb_status sb_engine_get_stats(const sb_engine *e, sb_engine_stats *out) {
    NEED(e && out, "sb_engine_get_stats");
    const rt_engine_stats s = rt_engine_get_stats(e->e);
    memset(out, 0, sizeof *out);
    out->n_blocks = s.pool.n_blocks;
    out->n_blocks_used = s.pool.n_used;
    out->n_blocks_cached = s.pool.n_cached;
    out->n_blocks_free = s.pool.n_free;
    out->n_prefix_hit_tokens = s.pool.n_hit_tokens;
    out->n_evictions = s.pool.n_evictions;
    out->n_cow_copies = s.pool.n_cow;
    out->n_steps = s.n_steps;
    out->n_tokens = s.n_tokens;
    out->step_seconds = s.seconds;
    out->n_plans_built = s.n_plans_built;
    out->n_plans_warm = s.n_plans_warm;
    out->n_graph_captures = s.n_graph_captures;
    return SB_OK;
}
