/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_internal.h — handle structs the API files share (a model hands out its vocabulary as a
 * borrowed sb_vocab; engines read a model's runtime object) and the text callback adapter two of
 * them use. Layer 3 (api); never included outside src/api.
 */
#ifndef SB_API_INTERNAL_H
#define SB_API_INTERNAL_H

#include "sonicboom.h"

#include "runtime/model.h"
#include "runtime/tokenizer/tokenizer.h"

struct sb_vocab {
    tok_vocab *v;
    int borrowed; /* 1 when owned by an sb_model: sb_vocab_free must not free it */
};

/* A loaded model (api_model.c); api_batch.c runs it, api_tensor.c reads its weights by name. */
struct sb_model {
    rt_model *m;
    struct sb_vocab vocab; /* borrowed view of m->vocab */
};

/* The public sb_text_fn behind the runtime's rt_text_fn: rt_generate and rt_textgen call
 * api_forward_text with a text_cb as user data (sb_generate_tokens, sb_text_stream). */
typedef struct text_cb {
    sb_text_fn fn;
    void *user;
} text_cb;
static inline int api_forward_text(void *user, const char *text, size_t len, int32_t token) {
    const text_cb *c = (const text_cb *)user;
    return c->fn ? c->fn(c->user, text, len, token) : 0;
}

#endif
