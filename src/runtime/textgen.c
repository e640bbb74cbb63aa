/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/textgen.c — textgen.h: pending text is kept while its tail could still grow into a stop
 * string; the first complete stop string cuts the text there.
 */
#include "runtime/textgen.h"

#include "base/status.h"

#include <string.h>

/* Length of the longest suffix of text that is a proper prefix of some stop string. */
static size_t held_suffix(const char *text, size_t n, const char *const *stop, size_t n_stop) {
    size_t best = 0;
    for (size_t k = 0; k < n_stop; k++) {
        size_t sl = strlen(stop[k]);
        for (size_t l = sl > 1 ? sl - 1 : 0; l > best; l--)
            if (l <= n && !memcmp(text + n - l, stop[k], l)) {
                best = l;
                break;
            }
    }
    return best;
}

/* Position of the first complete stop string in text, or -1. */
static long find_stop(const char *text, size_t n, const char *const *stop, size_t n_stop) {
    long first = -1;
    for (size_t k = 0; k < n_stop; k++) {
        size_t sl = strlen(stop[k]);
        if (!sl || sl > n) continue;
        for (size_t i = 0; i + sl <= n; i++)
            if (!memcmp(text + i, stop[k], sl)) {
                if (first < 0 || (long)i < first) first = (long)i;
                break;
            }
    }
    return first;
}

void rt_textgen_init(rt_textgen *t, const tok_vocab *v, const char *const *stop, size_t n_stop) {
    memset(t, 0, sizeof *t);
    t->v = v;
    t->stop = stop;
    t->n_stop = n_stop;
    tok_stream_init(&t->ts, v, false);
    t->ts.first = false; /* the text continues the prompt: keep the first piece's leading space */
}

void rt_textgen_free(rt_textgen *t) { tok_bytes_free(&t->pending); }

sb_status rt_textgen_push(rt_textgen *t, int32_t tok, rt_text_fn fn, void *user, int *stop) {
    *stop = -1;
    if (t->ended) return sb_fail(SB_ERR_INVALID_ARG, "text stream: a token after the end of the text");
    if (tok_is_eog(t->v, tok)) {
        t->ended = true;
        *stop = RT_STOP_EOG;
        return SB_OK;
    }
    SB_TRY(tok_stream_push(&t->ts, tok, &t->pending));
    tok_bytes *p = &t->pending;
    long at = find_stop(p->p, p->n, t->stop, t->n_stop);
    size_t emit = at >= 0 ? (size_t)at : p->n - held_suffix(p->p, p->n, t->stop, t->n_stop);
    if (emit && fn && fn(user, p->p, emit, tok)) return sb_fail(SB_ERR_CANCELLED, "text stream: cancelled by the callback");
    memmove(p->p, p->p + emit, p->n - emit);
    p->n -= emit;
    if (at >= 0) {
        p->n = 0;
        t->ended = t->cut = true;
        *stop = RT_STOP_STRING;
    }
    return SB_OK;
}

sb_status rt_textgen_flush(rt_textgen *t, rt_text_fn fn, void *user) {
    if (t->cut) return SB_OK; /* a stop string dropped the rest */
    SB_TRY(tok_stream_flush(&t->ts, &t->pending));
    t->ended = t->cut = true;
    if (t->pending.n && fn && fn(user, t->pending.p, t->pending.n, -1))
        return sb_fail(SB_ERR_CANCELLED, "text stream: cancelled by the callback");
    t->pending.n = 0;
    return SB_OK;
}
