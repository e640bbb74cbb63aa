/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/generate.c — the generation loop of generate.h. Pending text (emitted by the detokenizer
 * but not yet given to the callback) is kept while its tail could still grow into a stop string.
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

/* Length of the longest suffix of text that is a proper prefix of some stop string. */
static size_t held_suffix(const char *text, size_t n, const rt_generate_params *p) {
    size_t best = 0;
    for (size_t k = 0; k < p->n_stop; k++) {
        size_t sl = strlen(p->stop[k]);
        for (size_t l = sl > 1 ? sl - 1 : 0; l > best; l--)
            if (l <= n && !memcmp(text + n - l, p->stop[k], l)) {
                best = l;
                break;
            }
    }
    return best;
}

/* Position of the first complete stop string in text, or -1. */
static long find_stop(const char *text, size_t n, const rt_generate_params *p) {
    long first = -1;
    for (size_t k = 0; k < p->n_stop; k++) {
        size_t sl = strlen(p->stop[k]);
        if (!sl || sl > n) continue;
        for (size_t i = 0; i + sl <= n; i++)
            if (!memcmp(text + i, p->stop[k], sl)) {
                if (first < 0 || (long)i < first) first = (long)i;
                break;
            }
    }
    return first;
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

    tok_stream ts;
    tok_stream_init(&ts, v, false);
    ts.first = false; /* the text continues the prompt: keep the first piece's leading space */
    tok_bytes pending = {0};
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
        if (tok_is_eog(v, tok)) {
            res->stop = RT_STOP_EOG;
            break;
        }
        st = tok_stream_push(&ts, tok, &pending);
        if (st != SB_OK) break;
        long at = find_stop(pending.p, pending.n, p);
        size_t emit = at >= 0 ? (size_t)at : pending.n - held_suffix(pending.p, pending.n, p);
        if (emit && fn && fn(user, pending.p, emit, tok)) {
            st = SB_ERR_CANCELLED;
            break;
        }
        memmove(pending.p, pending.p + emit, pending.n - emit);
        pending.n -= emit;
        if (at >= 0) {
            pending.n = 0;
            res->stop = RT_STOP_STRING;
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
    if (st == SB_OK) st = tok_stream_flush(&ts, &pending);
    if (st == SB_OK && pending.n && fn && res->stop != RT_STOP_STRING && fn(user, pending.p, pending.n, -1)) st = SB_ERR_CANCELLED;
    if (st == SB_ERR_CANCELLED) sb_fail(st, "generation cancelled by the callback after %lld tokens", (long long)res->n_generated);
    res->decode_seconds = now_s() - t1;
    tok_bytes_free(&pending);
    eog_mask_free(&mask);
    return st;
}
