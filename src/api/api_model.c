/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_model.c — the public model, session, sampler and generation API over runtime/.
 * Layer 3 (api): argument checks, parameter defaults, handle lifetimes, status translation.
 */
#include "sonicboom.h"
#include "api/api_internal.h"
#include "base/status.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

#include <stdlib.h>
#include <string.h>

struct sb_session {
    rt_session *s;
    const sb_model *model;
};

struct sb_sampler {
    rt_sampler *s;
};

#define NEED(cond, fn)                                                                  \
    do {                                                                                \
        if (!(cond)) return sb_fail(SB_ERR_INVALID_ARG, "%s: %s", fn, "invalid argument: " #cond); \
    } while (0)

// ---- models ----

SB_API void sb_model_default_params(sb_model_params *p) {
    if (p) memset(p, 0, sizeof *p);
}

/* The progress fields took the place of reserved ints: the struct keeps its 64 bytes on LP64. */
_Static_assert(sizeof(void *) != 8 || sizeof(sb_model_params) == 64, "sb_model_params changed size");

SB_API sb_status sb_model_load(const char *path, const sb_model_params *p, sb_model **out) {
    NEED(path && out, "sb_model_load");
    *out = NULL;
    rt_model_params rp = {.check_tensors = p && p->check_tensors, .no_mmap = p && p->no_mmap};
    if (p) rp.progress = p->progress, rp.progress_user = p->progress_user;
    sb_model *h = (sb_model *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_model handle");
    sb_status s = rt_model_load(path, &rp, &h->m);
    if (s != SB_OK) {
        free(h);
        return s;
    }
    h->vocab.v = h->m->vocab;
    h->vocab.borrowed = 1;
    *out = h;
    return SB_OK;
}

SB_API void sb_model_free(sb_model *m) {
    if (!m) return;
    rt_model_free(m->m);
    free(m);
}

SB_API sb_status sb_model_get_info(const sb_model *m, sb_model_info *out) {
    NEED(m && out, "sb_model_get_info");
    memset(out, 0, sizeof *out);
    const rt_hparams *hp = &m->m->hp;
    memcpy(out->arch, hp->arch, sizeof out->arch);
    sb_strview name;
    if (gguf_get_str(&m->m->file, "general.name", &name) == SB_OK)
        memcpy(out->name, name.ptr, name.len < sizeof out->name - 1 ? name.len : sizeof out->name - 1);
    sb_error_clear();
    out->n_vocab = hp->n_vocab;
    out->n_embd = hp->n_embd;
    out->n_layer = hp->n_layer;
    out->n_head = hp->n_head;
    out->n_head_kv = hp->n_head_kv;
    out->head_dim = hp->head_dim;
    out->n_ff = hp->n_ff;
    out->n_ctx_train = hp->n_ctx_train;
    out->n_params = m->m->n_params;
    out->weight_bytes = rt_model_step_bytes(m->m);
    return SB_OK;
}

SB_API uint64_t sb_model_kv_bytes_per_token(const sb_model *m, int kv_type) {
    if (!m || (kv_type != SB_TYPE_F32 && kv_type != SB_TYPE_F16)) return 0;
    const rt_hparams *hp = &m->m->hp;
    uint64_t n = 0;
    for (int64_t l = 0; l < hp->n_layer; l++) n += 2 * (uint64_t)rt_hp_kv_dim(hp, l);
    return n * (kv_type == SB_TYPE_F32 ? 4 : 2);
}

SB_API const sb_vocab *sb_model_get_vocab(const sb_model *m) { return m ? &m->vocab : NULL; }

// ---- sessions ----

SB_API void sb_session_default_params(sb_session_params *p) {
    if (p) memset(p, 0, sizeof *p);
}

SB_API sb_status sb_session_create(sb_model *m, const sb_session_params *p, sb_session **out) {
    NEED(m && out, "sb_session_create");
    *out = NULL;
    rt_session_params rp = {0};
    if (p) rp = (rt_session_params){.n_ctx = p->n_ctx, .kv_type = p->kv_type, .n_threads = p->n_threads, .n_batch = p->n_batch,
                                 .device = p->device, .allow_ctx_extend = p->allow_ctx_extend, .cuda_graph = p->cuda_graphs,
                                 .codegen = p->codegen, .act_type = p->act_type, .swa_full = p->swa_full};
    sb_session *h = (sb_session *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_session handle");
    sb_status s = rt_session_create(m->m, &rp, &h->s);
    if (s != SB_OK) {
        free(h);
        return s;
    }
    h->model = m;
    *out = h;
    return SB_OK;
}

SB_API int sb_session_device(const sb_session *s) { return s ? (rt_session_device(s->s) ? SB_DEVICE_CUDA : SB_DEVICE_CPU) : -1; }

SB_API void sb_session_free(sb_session *s) {
    if (!s) return;
    rt_session_free(s->s);
    free(s);
}

SB_API sb_status sb_session_prefill(sb_session *s, const int32_t *tokens, size_t n, int64_t *n_reused) {
    NEED(s && tokens && n > 0 && n <= INT32_MAX, "sb_session_prefill");
    return rt_session_prefill(s->s, tokens, (int64_t)n, n_reused);
}

SB_API sb_status sb_session_decode(sb_session *s, int32_t token) {
    NEED(s, "sb_session_decode");
    return rt_session_eval(s->s, &token, 1, false, NULL);
}

SB_API sb_status sb_session_eval_all(sb_session *s, const int32_t *tokens, size_t n, float *logits) {
    NEED(s && tokens && logits && n > 0 && n <= INT32_MAX, "sb_session_eval_all");
    return rt_session_eval(s->s, tokens, (int64_t)n, true, logits);
}

SB_API sb_status sb_session_get_logits(const sb_session *s, const float **logits, int64_t *n_vocab) {
    NEED(s && logits, "sb_session_get_logits");
    *logits = rt_session_logits(s->s);
    if (n_vocab) *n_vocab = rt_session_model(s->s)->hp.n_vocab;
    if (!*logits) return sb_fail(SB_ERR_INVALID_ARG, "sb_session_get_logits: nothing evaluated yet");
    return SB_OK;
}

SB_API sb_status sb_session_get_state(const sb_session *s, int64_t *n_cached, int64_t *n_ctx) {
    NEED(s, "sb_session_get_state");
    if (n_cached) *n_cached = rt_session_n_cached(s->s);
    if (n_ctx) *n_ctx = rt_session_n_ctx(s->s);
    return SB_OK;
}

SB_API uint64_t sb_session_kv_bytes(const sb_session *s) { return s ? rt_session_kv_bytes(s->s) : 0; }

SB_API sb_status sb_session_truncate(sb_session *s, int64_t n) {
    NEED(s && n >= 0, "sb_session_truncate");
    return rt_session_truncate(s->s, n);
}

SB_API sb_status sb_session_get_stats(const sb_session *s, sb_session_stats *out) {
    NEED(s && out, "sb_session_get_stats");
    rt_session_stats st = rt_session_get_stats(s->s);
    memset(out, 0, sizeof *out);
    out->n_prefill_tokens = st.n_prefill_tokens;
    out->n_decode_tokens = st.n_decode_tokens;
    out->n_reused_tokens = st.n_reused_tokens;
    out->prefill_seconds = st.prefill_seconds;
    out->decode_seconds = st.decode_seconds;
    out->n_plans_built = st.n_plans_built;
    if (st.prefill_seconds > 0) out->prefill_tok_s = (double)st.n_prefill_tokens / st.prefill_seconds;
    if (st.decode_seconds > 0) {
        out->decode_tok_s = (double)st.n_decode_tokens / st.decode_seconds;
        out->decode_gb_s = out->decode_tok_s * (double)rt_model_step_bytes(rt_session_model(s->s)) / 1e9;
    }
    return SB_OK;
}

SB_API sb_status sb_session_reset_stats(sb_session *s) {
    NEED(s, "sb_session_reset_stats");
    rt_session_reset_stats(s->s);
    return SB_OK;
}

// ---- samplers ----

static rt_sampler_params to_rt(const sb_sampler_params *p) {
    return (rt_sampler_params){.temp = p->temp, .top_k = p->top_k, .top_p = p->top_p, .min_p = p->min_p,
                               .repeat_penalty = p->repeat_penalty, .presence_penalty = p->presence_penalty,
                               .frequency_penalty = p->frequency_penalty, .penalty_last_n = p->penalty_last_n, .seed = p->seed};
}

SB_API void sb_sampler_default_params(sb_sampler_params *p) {
    if (!p) return;
    rt_sampler_params r;
    rt_sampler_defaults(&r);
    memset(p, 0, sizeof *p);
    *p = (sb_sampler_params){.temp = r.temp, .top_k = r.top_k, .top_p = r.top_p, .min_p = r.min_p,
                             .repeat_penalty = r.repeat_penalty, .presence_penalty = r.presence_penalty,
                             .frequency_penalty = r.frequency_penalty, .penalty_last_n = r.penalty_last_n, .seed = r.seed};
}

SB_API sb_status sb_sampler_create(const sb_sampler_params *p, int64_t n_vocab, sb_sampler **out) {
    NEED(out, "sb_sampler_create");
    *out = NULL;
    sb_sampler_params d;
    sb_sampler_default_params(&d);
    rt_sampler_params rp = to_rt(p ? p : &d);
    sb_sampler *h = (sb_sampler *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_sampler handle");
    sb_status s = rt_sampler_create(&rp, n_vocab, &h->s);
    if (s != SB_OK) {
        free(h);
        return s;
    }
    *out = h;
    return SB_OK;
}

SB_API void sb_sampler_free(sb_sampler *smp) {
    if (!smp) return;
    rt_sampler_free(smp->s);
    free(smp);
}

SB_API sb_status sb_sampler_sample(sb_sampler *smp, const float *logits, int32_t *token) {
    NEED(smp && logits && token, "sb_sampler_sample");
    return rt_sampler_sample(smp->s, logits, token);
}

SB_API sb_status sb_sampler_accept(sb_sampler *smp, int32_t token) {
    NEED(smp, "sb_sampler_accept");
    rt_sampler_accept(smp->s, token);
    return SB_OK;
}

SB_API sb_status sb_sampler_reset(sb_sampler *smp) {
    NEED(smp, "sb_sampler_reset");
    rt_sampler_reset(smp->s);
    return SB_OK;
}

SB_API sb_status sb_sampler_set_logit_bias(sb_sampler *smp, const int32_t *tokens, const float *bias, size_t n) {
    NEED(smp && (n == 0 || (tokens && bias)), "sb_sampler_set_logit_bias");
    return rt_sampler_set_logit_bias(smp->s, tokens, bias, n);
}

_Static_assert(SB_MAX_TOP_LOGPROBS == RT_MAX_TOP_LOGPROBS, "the two logprob bounds");

SB_API sb_status sb_sampler_set_logprobs(sb_sampler *smp, int32_t top_k) {
    NEED(smp, "sb_sampler_set_logprobs");
    return rt_sampler_set_logprobs(smp->s, top_k);
}

SB_API size_t sb_sampler_n_logprobs(const sb_sampler *smp) {
    return smp ? rt_sampler_n_logprobs(smp->s) : 0;
}

SB_API sb_status sb_sampler_get_logprob(const sb_sampler *smp, size_t i, sb_token_logprob *chosen, sb_token_logprob *top,
                                        size_t cap, size_t *n_top) {
    NEED(smp && chosen && n_top && (cap == 0 || top), "sb_sampler_get_logprob");
    size_t k = 0;
    const rt_token_logprob *e = rt_sampler_logprob(smp->s, i, &k);
    if (!e)
        return sb_fail(SB_ERR_RANGE, "sb_sampler_get_logprob: entry %zu of %zu", i, rt_sampler_n_logprobs(smp->s));
    *chosen = (sb_token_logprob){e[0].token, e[0].logprob};
    if (k > cap) k = cap;
    for (size_t j = 0; j < k; j++) top[j] = (sb_token_logprob){e[1 + j].token, e[1 + j].logprob};
    *n_top = k;
    return SB_OK;
}

// ---- generation ----

SB_API void sb_generate_default_params(sb_generate_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->n_predict = 128;
    p->add_special = 1;
}

SB_API sb_status sb_generate_tokens(sb_session *s, sb_sampler *smp, const int32_t *prompt, size_t n,
                                    const sb_generate_params *p, sb_text_fn fn, void *user, sb_generate_result *res) {
    NEED(s && smp && prompt && n > 0 && n <= INT32_MAX, "sb_generate_tokens");
    sb_generate_params d;
    sb_generate_default_params(&d);
    if (!p) p = &d;
    NEED(p->n_stop == 0 || p->stop, "sb_generate_tokens");
    for (size_t i = 0; i < p->n_stop; i++) NEED(p->stop[i], "sb_generate_tokens");
    rt_generate_params gp = {.n_predict = p->n_predict, .stop = p->stop, .n_stop = p->n_stop, .ignore_eos = p->ignore_eos != 0};
    text_cb cb = {fn, user};
    rt_generate_result r;
    sb_status st = rt_generate(s->s, smp->s, prompt, (int64_t)n, &gp, api_forward_text, &cb, &r);
    if (res)
        *res = (sb_generate_result){.n_prompt = r.n_prompt, .n_reused = r.n_reused, .n_generated = r.n_generated,
                                    .prefill_seconds = r.prefill_seconds, .decode_seconds = r.decode_seconds,
                                    .stop = (sb_stop_reason)r.stop};
    return st;
}

SB_API sb_status sb_generate(sb_session *s, sb_sampler *smp, const char *prompt, size_t len, const sb_generate_params *p,
                             sb_text_fn fn, void *user, sb_generate_result *res) {
    NEED(s && smp && (prompt || !len), "sb_generate");
    sb_generate_params d;
    sb_generate_default_params(&d);
    if (!p) p = &d;
    const sb_vocab *v = &s->model->vocab;
    size_t need = 0;
    sb_status st = sb_tokenize(v, prompt ? prompt : "", len, p->add_special, p->parse_special, NULL, 0, &need);
    if (st != SB_OK && st != SB_ERR_BUFFER_TOO_SMALL) return st;
    if (need == 0) return sb_fail(SB_ERR_INVALID_ARG, "sb_generate: the prompt gives no tokens");
    int32_t *toks = (int32_t *)malloc(need * sizeof *toks);
    if (!toks) return sb_fail(SB_ERR_OOM, "sb_generate: %zu prompt tokens", need);
    size_t n = 0;
    st = sb_tokenize(v, prompt ? prompt : "", len, p->add_special, p->parse_special, toks, need, &n);
    if (st == SB_OK) st = sb_generate_tokens(s, smp, toks, n, p, fn, user, res);
    free(toks);
    return st;
}
