/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_text.c — sb_text_stream: runtime/textgen.h behind the public header, with its own copy of
 * the stop strings. Layer 3 (api).
 */
#include "sonicboom.h"

#include "api/api_internal.h"
#include "base/status.h"
#include "runtime/textgen.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_STREAM_MAX_STOP 64

struct sb_text_stream {
    rt_textgen tg;
    char *stops[TEXT_STREAM_MAX_STOP];
    size_t n_stop;
};

SB_API void sb_text_stream_free(sb_text_stream *t) {
    if (!t) return;
    rt_textgen_free(&t->tg);
    for (size_t i = 0; i < t->n_stop; i++) free(t->stops[i]);
    free(t);
}

SB_API sb_status sb_text_stream_create(const sb_vocab *v, const char *const *stop, size_t n_stop, sb_text_stream **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_create: NULL out");
    *out = NULL;
    if (!v || (n_stop && !stop)) return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_create: NULL vocabulary or stop list");
    if (n_stop > TEXT_STREAM_MAX_STOP)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_create: %zu stop strings (at most %d)", n_stop, TEXT_STREAM_MAX_STOP);
    for (size_t i = 0; i < n_stop; i++)
        if (!stop[i] || !stop[i][0]) return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_create: stop string %zu is NULL or empty", i);
    sb_text_stream *t = (sb_text_stream *)calloc(1, sizeof *t);
    if (!t) return sb_fail(SB_ERR_OOM, "sb_text_stream");
    for (; t->n_stop < n_stop; t->n_stop++)
        if (!(t->stops[t->n_stop] = strdup(stop[t->n_stop]))) {
            sb_text_stream_free(t);
            return sb_fail(SB_ERR_OOM, "sb_text_stream: stop strings");
        }
    rt_textgen_init(&t->tg, v->v, (const char *const *)t->stops, t->n_stop);
    *out = t;
    return SB_OK;
}

SB_API sb_status sb_text_stream_push(sb_text_stream *t, int32_t token, sb_text_fn fn, void *user, int *stop) {
    if (!t || !stop) return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_push: NULL stream or stop");
    if (token < 0 || token >= tok_n_tokens(t->tg.v))
        return sb_fail(SB_ERR_RANGE, "sb_text_stream_push: token %d outside the vocabulary [0, %d)", token, (int)tok_n_tokens(t->tg.v));
    text_cb cb = {fn, user};
    return rt_textgen_push(&t->tg, token, api_forward_text, &cb, stop);
}

SB_API sb_status sb_text_stream_flush(sb_text_stream *t, sb_text_fn fn, void *user) {
    if (!t) return sb_fail(SB_ERR_INVALID_ARG, "sb_text_stream_flush: NULL stream");
    text_cb cb = {fn, user};
    return rt_textgen_flush(&t->tg, api_forward_text, &cb);
}
