/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/detok.c — token ids -> text: one token's piece, a whole sequence (leading-space
 * removal for SPM, BOS/EOS removal, BPE clean_spaces) and a streaming decoder that holds back an
 * incomplete UTF-8 sequence (architectures.md §8.3-§8.6; llama.cpp's detokenize).
 * Layer 2 (runtime).
 * Invariants: pieces were rendered at build time, so this file only copies bytes; every id is
 * range-checked; outputs are growable buffers, so no length is ever narrowed (robustness.md T1).
 * Non-goals: undoing SPM's leading space after a BOS (llama.cpp keeps it there too).
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/ckd.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

// ---- byte buffer ----

void tok_bytes_free(tok_bytes *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

sb_status tok_bytes_append(tok_bytes *b, const void *p, size_t n) {
    size_t need;
    if (ckd_add(&need, b->n, n) || ckd_add(&need, need, 1)) return sb_fail(SB_ERR_OOM, "tokenizer: output too large");
    if (need > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < need) {
            if (ckd_mul(&nc, nc, 2)) return sb_fail(SB_ERR_OOM, "tokenizer: output too large");
        }
        char *q = realloc(b->p, nc);
        if (!q) return sb_fail(SB_ERR_OOM, "tokenizer: %zu-byte output", nc);
        b->p = q;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0; /* always NUL-terminated for convenience; n excludes it */
    return SB_OK;
}

// ---- one token ----

sb_status tok_piece(const tok_vocab *v, int32_t id, bool special, sb_strview *out) {
    if (id < 0 || id >= v->n_tokens)
        return sb_fail(SB_ERR_RANGE, "tokenizer: token id %d is out of range (n_vocab = %d)", id, v->n_tokens);
    if (!special && (v->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) {
        *out = (sb_strview){v->piece[id].ptr, 0};
        return SB_OK;
    }
    *out = v->piece[id];
    return SB_OK;
}

// ---- a sequence ----

/* llama.cpp's three clean-up passes over t[0..n); returns the new length. */
static size_t clean_spaces(char *t, size_t n) {
    size_t total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " ?", " !", " .", " ," */
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        t[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " ' " -> "'" */
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            total--;
            t[++i] = 0;
        }
        t[total++] = x;
    }
    n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " 's", " 'm", " 're", " 've" */
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') total--;
            else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e'))) total--;
        }
        t[total++] = x;
    }
    return total;
}

sb_status tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, unsigned flags, tok_bytes *out) {
    if (!v || !out || (!ids && n)) return sb_fail(SB_ERR_INVALID_ARG, "tok_detokenize: NULL argument");
    bool remove_space = v->add_space_prefix;
    if (flags & TOK_DETOK_REMOVE_SPECIAL) {
        if (v->add_bos && n > 0 && ids[0] == v->bos) {
            remove_space = false;
            ids++;
            n--;
        }
        if (v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;
    }
    size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        sb_strview p = {0};
        SB_TRY(tok_piece(v, ids[i], (flags & TOK_DETOK_UNPARSE_SPECIAL) != 0, &p));
        if (remove_space && p.len && p.ptr[0] == ' ') { p.ptr++; p.len--; }
        remove_space = false;
        SB_TRY(tok_bytes_append(out, p.ptr, p.len));
    }
    if (v->clean_spaces && !(flags & TOK_DETOK_NO_CLEAN_SPACES) && out->n > start) {
        out->n = start + clean_spaces(out->p + start, out->n - start);
        out->p[out->n] = 0;
    }
    return SB_OK;
}

// ---- streaming ----

void tok_stream_init(tok_stream *s, const tok_vocab *v, bool special) {
    memset(s, 0, sizeof *s);
    s->v = v;
    s->special = special;
    s->first = true;
}

sb_status tok_stream_push(tok_stream *s, int32_t id, tok_bytes *out) {
    sb_strview p = {0};
    SB_TRY(tok_piece(s->v, id, s->special, &p));
    if (s->first && s->v->add_space_prefix && p.len && p.ptr[0] == ' ') { p.ptr++; p.len--; }
    s->first = false;
    size_t start = out->n;
    SB_TRY(tok_bytes_append(out, s->held, s->n_held));
    SB_TRY(tok_bytes_append(out, p.ptr, p.len));
    s->n_held = 0;
    /* hold back a trailing lead byte whose sequence is not complete yet (at most 3 bytes) */
    size_t m = out->n - start;
    const unsigned char *b = (const unsigned char *)out->p + start;
    for (size_t k = 1; k <= 3 && k <= m; k++) {
        unsigned char c = b[m - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        if (c >= 0xC0 && tok_utf8_len(c) > k) {
            memcpy(s->held, b + m - k, k);
            s->n_held = k;
            out->n -= k;
            out->p[out->n] = 0;
        }
        break;
    }
    return SB_OK;
}

sb_status tok_stream_flush(tok_stream *s, tok_bytes *out) {
    sb_status st = tok_bytes_append(out, s->held, s->n_held);
    s->n_held = 0;
    return st;
}
