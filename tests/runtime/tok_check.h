/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/tok_check.h — the checks the tokenizer tests share (include after test.h):
 * tok_spec_base (a spec of model, tokens and types, everything else tok_vocab_spec_init's
 * defaults), tok_build_checked (build, CHECK that it worked), TOK_EQ (tokenize, compare with the
 * ids listed) and DETOK_EQ (detokenize the ids listed, compare with the text). A mismatch prints
 * both sides.
 */
#ifndef SB_TESTS_TOK_CHECK_H
#define SB_TESTS_TOK_CHECK_H

#include "runtime/tokenizer/tokenizer.h"

#include <stdbool.h>

static inline void tok_spec_base(tok_vocab_spec *s, const char *model, int64_t n_tokens, const sb_strview *texts,
                                 const int32_t *types) {
    tok_vocab_spec_init(s);
    s->model = model;
    s->n_tokens = n_tokens;
    s->texts = texts;
    s->types = types;
}

/* The vocabulary, or NULL after a failed CHECK that names the model, the pre and the error. */
static inline tok_vocab *tok_build_checked(const tok_vocab_spec *s) {
    tok_vocab *v = NULL;
    sb_status st = tok_vocab_build(s, &v);
    CHECKF(st == SB_OK, "build(%s, %s): %s: %s", s->model, s->pre ? s->pre : "-", sb_status_str(st),
           sb_last_error());
    return v;
}

static inline bool tok_eq(tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                          const int32_t *want, size_t n_want) {
    tok_ids got = {0};
    sb_status st = tok_tokenize(v, text, len, add_special, parse_special, &got);
    bool ok = st == SB_OK && got.n == n_want && (!n_want || !memcmp(got.ids, want, n_want * 4));
    if (!ok) {
        fprintf(stderr, "  \"%.*s\": want", (int)len, text);
        for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "; got");
        for (size_t i = 0; i < got.n; i++) fprintf(stderr, " %d", got.ids[i]);
        fprintf(stderr, " (%s)\n", sb_status_str(st));
    }
    tok_ids_free(&got);
    return ok;
}
#define TOK_EQ(v, text, as, ps, ...)                                                                \
    do {                                                                                            \
        const int32_t w_[] = {__VA_ARGS__};                                                         \
        CHECKF(tok_eq(v, text, sizeof(text) - 1, as, ps, w_, sizeof w_ / sizeof *w_), "%s", #text); \
    } while (0)

static inline bool detok_eq(tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, const char *want, size_t wn) {
    tok_bytes b = {0};
    sb_status st = tok_detokenize(v, ids, n, flags, &b);
    bool ok = st == SB_OK && b.n == wn && (!wn || !memcmp(b.p, want, wn));
    if (!ok) fprintf(stderr, "  detok: got \"%.*s\" want \"%.*s\"\n", (int)b.n, b.p ? b.p : "", (int)wn, want);
    tok_bytes_free(&b);
    return ok;
}
#define DETOK_EQ(v, flags, want, ...)                                                                      \
    do {                                                                                                   \
        const int32_t i_[] = {__VA_ARGS__};                                                                \
        CHECKF(detok_eq(v, i_, sizeof i_ / sizeof *i_, flags, want, sizeof(want) - 1), "detok %s", #want); \
    } while (0)

#endif
