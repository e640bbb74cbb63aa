/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_vocab.c — the public vocabulary / tokenizer / chat API (sb_vocab_*, sb_tokenize,
 * sb_detokenize, sb_token_*, sb_detok_stream_*, sb_chat_*) over runtime/tokenizer/tokenizer.h.
 * Layer 3 (api): argument checks, the caller-buffer convention (copy what fits, report the size
 * needed with SB_ERR_BUFFER_TOO_SMALL) and nothing else; all tokenizer logic lives in runtime.
 * Invariants: never writes past cap; sizes are size_t end to end (no narrowing, robustness.md T1/T5).
 */
#include "sonicboom.h"
#include "base/status.h"
#include "format/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>


struct sb_detok_stream {
    tok_stream s;
};

// ---- buffers ----

/* Copy n bytes to buf (cap bytes); NUL-terminate when there is room. */
static sb_status give_bytes(const char *p, size_t n, char *buf, size_t cap, size_t *n_out) {
    *n_out = n;
    if (n > cap) {
        if (buf && cap) memcpy(buf, p, cap);
        return sb_fail(SB_ERR_BUFFER_TOO_SMALL, "output needs %zu bytes, buffer has %zu", n, cap);
    }
    if (n) memcpy(buf, p, n);
    if (n < cap) buf[n] = 0;
    return SB_OK;
}

static sb_status check_buf(const void *buf, size_t cap, const size_t *n_out, const char *fn) {
    if (!n_out) return sb_fail(SB_ERR_INVALID_ARG, "%s: n_out is NULL", fn);
    if (!buf && cap) return sb_fail(SB_ERR_INVALID_ARG, "%s: buffer is NULL but cap is %zu", fn, cap);
    return SB_OK;
}

// ---- load / free / queries ----

SB_API sb_status sb_vocab_load(const char *path, sb_vocab **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "sb_vocab_load: out is NULL");
    *out = NULL;
    if (!path) return sb_fail(SB_ERR_INVALID_ARG, "sb_vocab_load: path is NULL");
    gguf_file f;
    memset(&f, 0, sizeof f);
    SB_TRY(gguf_open(path, &f));
    sb_vocab *h = calloc(1, sizeof *h);
    if (!h) {
        gguf_close(&f);
        return sb_fail(SB_ERR_OOM, "sb_vocab handle");
    }
    sb_status st = tok_vocab_load_gguf(&f, &h->v);
    gguf_close(&f);
    if (st != SB_OK) {
        free(h);
        return sb_fail_context(st, "%s", path);
    }
    *out = h;
    return SB_OK;
}

SB_API void sb_vocab_free(sb_vocab *v) {
    if (!v || v->borrowed) return; /* a model's vocabulary lives and dies with the model */
    tok_vocab_free(v->v);
    free(v);
}

SB_API int32_t sb_vocab_n_tokens(const sb_vocab *v) { return v ? tok_n_tokens(v->v) : 0; }

SB_API int32_t sb_vocab_get_special(const sb_vocab *v, sb_special_token which) {
    if (!v || which < SB_SPECIAL_BOS || which > SB_SPECIAL_MASK) return -1;
    return tok_special_id(v->v, (tok_special)which);
}

SB_API int sb_vocab_adds_bos(const sb_vocab *v) { return v && tok_add_bos(v->v); }
SB_API int sb_vocab_adds_eos(const sb_vocab *v) { return v && tok_add_eos(v->v); }

// ---- tokenize / detokenize ----

/* The tokenizer's result st / ids into the caller's buffer (sb_tokenize's convention: *n_out the
 * full count, the first cap ids written, SB_ERR_BUFFER_TOO_SMALL when they do not all fit); frees ids. */
static sb_status hand_out_ids(sb_status st, tok_ids *ids, int32_t *tokens, size_t cap, size_t *n_out, const char *fn) {
    if (st == SB_OK) {
        *n_out = ids->n;
        size_t k = ids->n < cap ? ids->n : cap;
        if (k) memcpy(tokens, ids->ids, k * sizeof *tokens);
        if (ids->n > cap) st = sb_fail(SB_ERR_BUFFER_TOO_SMALL, "%s: %zu tokens, buffer holds %zu", fn, ids->n, cap);
    }
    tok_ids_free(ids);
    return st;
}

SB_API sb_status sb_tokenize(const sb_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                             int32_t *tokens, size_t cap, size_t *n_out) {
    if (!v || (!text && len)) return sb_fail(SB_ERR_INVALID_ARG, "sb_tokenize: %s is NULL", v ? "text" : "vocab");
    SB_TRY(check_buf(tokens, cap, n_out, "sb_tokenize"));
    *n_out = 0;
    tok_ids ids = {0};
    sb_status st = tok_tokenize(v->v, text, len, add_special != 0, parse_special != 0, &ids);
    return hand_out_ids(st, &ids, tokens, cap, n_out, "sb_tokenize");
}

SB_API sb_status sb_detokenize(const sb_vocab *v, const int32_t *tokens, size_t n, unsigned flags, char *buf,
                               size_t cap, size_t *n_out) {
    if (!v || (!tokens && n)) return sb_fail(SB_ERR_INVALID_ARG, "sb_detokenize: %s is NULL", v ? "tokens" : "vocab");
    SB_TRY(check_buf(buf, cap, n_out, "sb_detokenize"));
    *n_out = 0;
    tok_bytes b = {0};
    unsigned f = (flags & SB_DETOK_REMOVE_SPECIAL ? TOK_DETOK_REMOVE_SPECIAL : 0) |
                 (flags & SB_DETOK_UNPARSE_SPECIAL ? TOK_DETOK_UNPARSE_SPECIAL : 0) |
                 (flags & SB_DETOK_NO_CLEAN_SPACES ? TOK_DETOK_NO_CLEAN_SPACES : 0);
    sb_status st = tok_detokenize(v->v, tokens, n, f, &b);
    if (st == SB_OK) st = give_bytes(b.p, b.n, buf, cap, n_out);
    tok_bytes_free(&b);
    return st;
}

SB_API sb_status sb_token_to_piece(const sb_vocab *v, int32_t token, int special, char *buf, size_t cap,
                                   size_t *n_out) {
    if (!v) return sb_fail(SB_ERR_INVALID_ARG, "sb_token_to_piece: vocab is NULL");
    SB_TRY(check_buf(buf, cap, n_out, "sb_token_to_piece"));
    *n_out = 0;
    sb_strview p = {0};
    SB_TRY(tok_piece(v->v, token, special != 0, &p));
    return give_bytes(p.ptr, p.len, buf, cap, n_out);
}

SB_API sb_status sb_token_get_text(const sb_vocab *v, int32_t token, const char **text, size_t *len) {
    if (!v || !text || !len) return sb_fail(SB_ERR_INVALID_ARG, "sb_token_get_text: NULL argument");
    const sb_strview *t = tok_text(v->v, token);
    if (!t) return sb_fail(SB_ERR_RANGE, "token id %d is out of range (n_vocab = %d)", token, tok_n_tokens(v->v));
    *text = t->ptr;
    *len = t->len;
    return SB_OK;
}

SB_API sb_status sb_token_get_attr(const sb_vocab *v, int32_t token, uint32_t *attr) {
    if (!v || !attr) return sb_fail(SB_ERR_INVALID_ARG, "sb_token_get_attr: NULL argument");
    if (token < 0 || token >= tok_n_tokens(v->v))
        return sb_fail(SB_ERR_RANGE, "token id %d is out of range (n_vocab = %d)", token, tok_n_tokens(v->v));
    *attr = tok_attr(v->v, token);
    return SB_OK;
}

SB_API int sb_token_is_eog(const sb_vocab *v, int32_t token) { return v && tok_is_eog(v->v, token); }

// ---- streaming ----

SB_API sb_status sb_detok_stream_create(const sb_vocab *v, int special, sb_detok_stream **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "sb_detok_stream_create: out is NULL");
    *out = NULL;
    if (!v) return sb_fail(SB_ERR_INVALID_ARG, "sb_detok_stream_create: vocab is NULL");
    sb_detok_stream *s = malloc(sizeof *s);
    if (!s) return sb_fail(SB_ERR_OOM, "sb_detok_stream");
    tok_stream_init(&s->s, v->v, special != 0);
    *out = s;
    return SB_OK;
}

SB_API void sb_detok_stream_free(sb_detok_stream *s) { free(s); }

SB_API sb_status sb_detok_stream_push(sb_detok_stream *s, int32_t token, char *buf, size_t cap, size_t *n_out) {
    if (!s) return sb_fail(SB_ERR_INVALID_ARG, "sb_detok_stream_push: stream is NULL");
    SB_TRY(check_buf(buf, cap, n_out, "sb_detok_stream_push"));
    *n_out = 0;
    tok_stream saved = s->s;
    tok_bytes b = {0};
    sb_status st = tok_stream_push(&s->s, token, &b);
    if (st == SB_OK) {
        *n_out = b.n;
        if (b.n > cap) st = sb_fail(SB_ERR_BUFFER_TOO_SMALL, "stream output needs %zu bytes, buffer has %zu", b.n, cap);
        else st = give_bytes(b.p, b.n, buf, cap, n_out);
    }
    if (st != SB_OK) s->s = saved; /* transactional: retry with a larger buffer */
    tok_bytes_free(&b);
    return st;
}

SB_API sb_status sb_detok_stream_flush(sb_detok_stream *s, char *buf, size_t cap, size_t *n_out) {
    if (!s) return sb_fail(SB_ERR_INVALID_ARG, "sb_detok_stream_flush: stream is NULL");
    SB_TRY(check_buf(buf, cap, n_out, "sb_detok_stream_flush"));
    *n_out = s->s.n_held;
    if (s->s.n_held > cap) return sb_fail(SB_ERR_BUFFER_TOO_SMALL, "stream flush needs %zu bytes", s->s.n_held);
    tok_bytes b = {0};
    sb_status st = tok_stream_flush(&s->s, &b);
    if (st == SB_OK) st = give_bytes(b.p ? b.p : "", b.n, buf, cap, n_out);
    tok_bytes_free(&b);
    s->s.first = true;
    return st;
}

// ---- chat ----

SB_API sb_status sb_chat_render(const sb_vocab *v, const sb_chat_message *msgs, size_t n, int add_generation_prompt,
                                char *buf, size_t cap, size_t *n_out) {
    if (!v || (!msgs && n)) return sb_fail(SB_ERR_INVALID_ARG, "sb_chat_render: %s is NULL", v ? "msgs" : "vocab");
    SB_TRY(check_buf(buf, cap, n_out, "sb_chat_render"));
    *n_out = 0;
    _Static_assert(sizeof(sb_chat_message) == sizeof(tok_chat_msg), "sb_chat_message layout");
    tok_bytes b = {0};
    sb_status st = tok_chat_render(tok_chat_kind_of(v->v), (const tok_chat_msg *)msgs, n, add_generation_prompt != 0, &b);
    if (st == SB_OK) st = give_bytes(b.p ? b.p : "", b.n, buf, cap, n_out);
    tok_bytes_free(&b);
    return st;
}

SB_API sb_status sb_chat_tokenize(const sb_vocab *v, const sb_chat_message *msgs, size_t n, int add_generation_prompt,
                                  int32_t *tokens, size_t cap, size_t *n_out) {
    if (!v || (!msgs && n)) return sb_fail(SB_ERR_INVALID_ARG, "sb_chat_tokenize: %s is NULL", v ? "msgs" : "vocab");
    SB_TRY(check_buf(tokens, cap, n_out, "sb_chat_tokenize"));
    *n_out = 0;
    tok_ids ids = {0};
    sb_status st = tok_chat_tokenize(v->v, (const tok_chat_msg *)msgs, n, add_generation_prompt != 0, &ids);
    return hand_out_ids(st, &ids, tokens, cap, n_out, "sb_chat_tokenize");
}

SB_API const char *sb_vocab_chat_format(const sb_vocab *v) {
    return tok_chat_kind_name(v ? tok_chat_kind_of(v->v) : TOK_CHAT_FALLBACK);
}
