/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/generate.c — the generation loop of generate.h over one session, its text through
 * runtime/textgen.h.
 */
#include "runtime/generate.h"
#include "runtime/tokenizer/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ignore_eos: a copy of the logits with every end-of-generation token at -inf (llama.cpp's
 * --ignore-eos biases them the same way), so the sampler never picks one. */
typedef struct eog_mask {
    float *logits;    /* [n_vocab] scratch, NULL when not masking */
    int32_t *ids;     /* the EOG token ids */
    int64_t n_ids, n_vocab;
} eog_mask;

static sb_status eog_mask_init(eog_mask *m, const tok_vocab *v, int64_t n_vocab, bool on) {
    memset(m, 0, sizeof *m);
    if (!on) return SB_OK;
    int64_t n_tok = tok_n_tokens(v) < n_vocab ? tok_n_tokens(v) : n_vocab;
    m->n_vocab = n_vocab;
    m->logits = (float *)malloc((size_t)n_vocab * sizeof *m->logits);
    m->ids = (int32_t *)malloc((size_t)(n_tok > 0 ? n_tok : 1) * sizeof *m->ids);
    if (!m->logits || !m->ids) return sb_fail(SB_ERR_OOM, "ignore_eos: %lld logits", (long long)n_vocab);
    for (int32_t id = 0; id < n_tok; id++)
        if (tok_is_eog(v, id)) m->ids[m->n_ids++] = id;
    return SB_OK;
}

static const float *eog_mask_apply(eog_mask *m, const float *logits) {
    if (!m->logits) return logits;
    memcpy(m->logits, logits, (size_t)m->n_vocab * sizeof *logits);
    for (int64_t i = 0; i < m->n_ids; i++) m->logits[m->ids[i]] = -INFINITY;
    return m->logits;
}

static void eog_mask_free(eog_mask *m) {
    free(m->logits);
    free(m->ids);
}

sb_status rt_generate(rt_session *s, rt_sampler *smp, const int32_t *prompt, int64_t n_prompt, const rt_generate_params *p,
                      rt_text_fn fn, void *user, rt_generate_result *res) {
    memset(res, 0, sizeof *res);
    res->n_prompt = n_prompt;
    const tok_vocab *v = rt_session_model(s)->vocab;
    double t0 = now_s();
    SB_TRY(rt_session_prefill(s, prompt, n_prompt, &res->n_reused));
    res->prefill_seconds = now_s() - t0;
    for (int64_t i = 0; i < n_prompt; i++) rt_sampler_accept(smp, prompt[i]);

    rt_textgen tg;
    rt_textgen_init(&tg, v, p->stop, p->n_stop);
    eog_mask mask;
    sb_status st = eog_mask_init(&mask, v, rt_session_model(s)->hp.n_vocab, p->ignore_eos);
    res->stop = RT_STOP_LENGTH;
    double t1 = now_s();
    for (int64_t k = 0; st == SB_OK && (p->n_predict < 0 || k < p->n_predict); k++) {
        int32_t tok;
        st = rt_sampler_sample(smp, eog_mask_apply(&mask, rt_session_logits(s)), &tok);
        if (st != SB_OK) break;
        rt_sampler_accept(smp, tok);
        res->n_generated++;
        int stop;
        st = rt_textgen_push(&tg, tok, fn, user, &stop);
        if (st != SB_OK) break;
        if (stop >= 0) {
            res->stop = (rt_stop_reason)stop;
            break;
        }
        if (rt_session_n_cached(s) >= rt_session_n_ctx(s)) {
            res->stop = RT_STOP_CONTEXT;
            break;
        }
        if (p->n_predict >= 0 && k + 1 >= p->n_predict) break; /* no decode for a token nobody samples */
        st = rt_session_eval(s, &tok, 1, false, NULL);
        if (st != SB_OK) break;
    }
    if (st == SB_OK) st = rt_textgen_flush(&tg, fn, user);
    if (st == SB_ERR_CANCELLED) sb_fail(st, "generation cancelled by the callback after %lld tokens", (long long)res->n_generated);
    res->decode_seconds = now_s() - t1;
    rt_textgen_free(&tg);
    eog_mask_free(&mask);
    return st;
}
