/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/vocab.c — build a tok_vocab from a tok_vocab_spec: validate every id, type,
 * byte token and merge; derive attributes, the EOG set, rendered pieces, the lookup maps, the
 * special-token trie and the model/pre-tokenizer flags (architectures.md §8.1, §8.4).
 * Layer 2 (runtime).
 * Invariants: after SB_OK every stored id (specials, merge results, byte tokens, trie
 * candidates) is in [0, n_tokens); all text is copied into one arena owned by the vocab.
 * Bad metadata is a load error naming the key and index (robustness.md T2/T3), never a crash.
 * Non-goals: per-model attribute hacks (LSTRIP/RSTRIP families), WPM/UGM/RWKV.
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/ckd.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tok_vocab_spec_init(tok_vocab_spec *s) {
    memset(s, 0, sizeof *s);
    s->bos = s->eos = s->eot = s->eom = s->unk = s->sep = s->pad = s->mask = -1;
    s->add_bos = s->add_eos = s->add_space_prefix = -1;
}

void tok_vocab_free(tok_vocab *v) {
    if (!v) return;
    free(v->text);
    free(v->piece);
    free(v->raw);
    free(v->score);
    free(v->type);
    free(v->attr);
    free(v->arena);
    free(v->special);
    free(v->trie_cand);
    tok_strmap_free(&v->text_map);
    tok_strmap_free(&v->raw_map);
    tok_strmap_free(&v->ws_prev_map);
    free(v->ws_prev);
    tok_u64map_free(&v->merges);
    tok_u64map_free(&v->trie);
    tok_pretok_free(v->pretok);
    free(v);
}

// ---- model / pre-tokenizer names ----

static bool str_in(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

static sb_status parse_model(const tok_vocab_spec *s, tok_vocab *v) {
    if (!s->model) return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.model is missing");
    if (!strcmp(s->model, "llama")) v->model = TOK_MODEL_SPM;
    else if (!strcmp(s->model, "gpt2")) v->model = TOK_MODEL_BPE;
    else if (!strcmp(s->model, "gemma4")) v->model = TOK_MODEL_GEMMA4;
    else
        return sb_fail(SB_ERR_VOCAB_UNSUPPORTED,
                       "tokenizer.ggml.model \"%s\" is not supported (supported: llama, gpt2, gemma4)", s->model);
    v->pre = TOK_PRE_NONE;
    if (v->model != TOK_MODEL_BPE) return SB_OK;
    static const char *const llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", NULL};
    static const char *const qwen2[] = {"qwen2", "deepseek-r1-qwen", NULL};
    static const char *const gpt2[] = {"gpt-2", "phi-2", NULL};
    const char *pre = s->pre;
    if (!pre) {
        sb_log(SB_LOG_WARN, "tokenizer: tokenizer.ggml.pre is missing: using the \"default\" pre-tokenizer (as llama.cpp does); "
                           "the text may split differently from the model's own tokenizer");
        pre = "default";
    }
    if (!strcmp(pre, "default")) v->pre = TOK_PRE_DEFAULT;
    else if (str_in(pre, llama3)) v->pre = TOK_PRE_LLAMA3;
    else if (str_in(pre, qwen2)) v->pre = TOK_PRE_QWEN2;
    else if (str_in(pre, gpt2)) v->pre = TOK_PRE_GPT2;
    else
        return sb_fail(SB_ERR_VOCAB_UNSUPPORTED,
                       "tokenizer.ggml.pre \"%s\" is not supported (supported: default, gpt-2, phi-2, "
                       "llama-bpe, llama3, llama-v3, falcon3, qwen2, deepseek-r1-qwen)", pre);
    return SB_OK;
}

// ---- attributes ----

static uint8_t attr_of_type(int32_t t) {
    switch (t) {
    case TOK_TYPE_NORMAL: return TOK_ATTR_NORMAL;
    case TOK_TYPE_UNKNOWN: return TOK_ATTR_UNKNOWN;
    case TOK_TYPE_CONTROL: return TOK_ATTR_CONTROL;
    case TOK_TYPE_USER_DEFINED: return TOK_ATTR_USER_DEFINED;
    case TOK_TYPE_UNUSED: return TOK_ATTR_UNUSED;
    case TOK_TYPE_BYTE: return TOK_ATTR_BYTE;
    default: return 0;
    }
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "<0xXX>" with exactly two hex digits -> the byte, else -1 (robustness.md T3: no sign, no
 * other widths). */
static int parse_byte_token(const sb_strview *t) {
    if (t->len != 6 || memcmp(t->ptr, "<0x", 3) || t->ptr[5] != '>') return -1;
    int hi = hexval((unsigned char)t->ptr[3]), lo = hexval((unsigned char)t->ptr[4]);
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
}

static bool contains(const sb_strview *t, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= t->len; i++)
        if (!memcmp(t->ptr + i, s, n)) return true;
    return false;
}

static bool text_eq(const sb_strview *t, const char *s) {
    size_t n = strlen(s);
    return t->len == n && !memcmp(t->ptr, s, n);
}

/* End-of-generation markers recognised by text (architectures.md §8.1). */
static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                        "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
                                        "<end_of_utterance>", NULL};
static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                        "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                                        "<|end_of_text|>", "<end_of_utterance>", NULL};
static const char *const fim_eog_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<|fim_repo|>",
                                            "<|repo_name|>", "<fim-repo>", "<|file_sep|>", "<file_sep>", NULL};

static bool text_in(const sb_strview *t, const char *const *list) {
    for (; *list; list++)
        if (text_eq(t, *list)) return true;
    return false;
}

static void force_control(tok_vocab *v, int32_t id) {
    if (!(v->attr[id] & TOK_ATTR_CONTROL)) {
        sb_log(SB_LOG_DEBUG, "tokenizer: end-of-generation token %d is not CONTROL; treating it as CONTROL", id);
        v->attr[id] = (uint8_t)((v->attr[id] & TOK_ATTR_EOG) | TOK_ATTR_CONTROL);
    }
}

static void derive_eog(tok_vocab *v) {
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const sb_strview *t = &v->text[i];
        if (tok_find(v, t->ptr, t->len) != i) continue; /* a duplicate text: llama.cpp sees the last id only */
        if (v->model == TOK_MODEL_GEMMA4) {
            /* Gemma 4: <turn|> and <|tool_response>, types kept (architectures.md §6.9) */
            if (text_eq(t, "<turn|>") || text_eq(t, "<|tool_response>")) v->attr[i] |= TOK_ATTR_EOG;
            if (text_eq(t, "<turn|>") && v->eot < 0) v->eot = i;
            continue;
        }
        if (v->eot < 0 && text_in(t, eot_texts)) {
            v->eot = i;
            force_control(v, i);
        }
        if (v->eom < 0 && text_eq(t, "<|eom_id|>")) {
            v->eom = i;
            force_control(v, i);
        }
        if (text_in(t, eog_texts) || text_in(t, fim_eog_texts)) {
            force_control(v, i);
            v->attr[i] |= TOK_ATTR_EOG;
        }
    }
    if (v->eos >= 0) v->attr[v->eos] |= TOK_ATTR_EOG;
    if (v->eot >= 0) v->attr[v->eot] |= TOK_ATTR_EOG;
    if (v->eom >= 0) v->attr[v->eom] |= TOK_ATTR_EOG;
    if (v->model == TOK_MODEL_GEMMA4) {
        int32_t s = tok_find(v, "</s>", 4);
        if (s >= 0 && s != v->eos) v->attr[s] &= (uint8_t)~TOK_ATTR_EOG;
    }
}

// ---- special ids ----

static sb_status set_special(int32_t *dst, int64_t id, int64_t def, int64_t n, const char *key) {
    if (id < -1 || id >= n)
        return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.%s = %lld is not a token id (n_vocab = %lld)", key,
                       (long long)id, (long long)n);
    if (id == -1) id = def < n ? def : -1;
    *dst = (int32_t)id;
    return SB_OK;
}

// ---- pieces (what a token renders to) ----

/* Renders stored text t of a token with attribute a into dst (capacity >= t->len). */
static size_t render_piece(const tok_vocab *v, const sb_strview *t, uint8_t a, int byte, char *dst) {
    const unsigned char *s = (const unsigned char *)t->ptr;
    size_t n = t->len, o = 0;
    if (a & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_USER_DEFINED)) {
        memcpy(dst, s, n);
        return n;
    }
    if (a & TOK_ATTR_UNUSED || a == 0) return 0;
    if (v->model == TOK_MODEL_BPE) {
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l = tok_utf8_decode(s + i, n - i, &cp);
            if (!l) { dst[o++] = (char)s[i++]; continue; }
            int b = tok_cp_to_byte(cp);
            if (b >= 0) dst[o++] = (char)b;
            else { memcpy(dst + o, s + i, l); o += l; }
            i += l;
        }
        return o;
    }
    if (a & TOK_ATTR_BYTE) {
        dst[0] = (char)byte;
        return 1;
    }
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) { dst[o++] = ' '; i += 3; }
        else dst[o++] = (char)s[i++];
    }
    return o;
}

/* BPE: the raw bytes a stored text stands for, if every code point is a mapped byte. */
static size_t bpe_raw(const sb_strview *t, char *dst) {
    const unsigned char *s = (const unsigned char *)t->ptr;
    size_t o = 0;
    for (size_t i = 0; i < t->len;) {
        uint32_t cp;
        size_t l = tok_utf8_decode(s + i, t->len - i, &cp);
        int b = l ? tok_cp_to_byte(cp) : -1;
        if (b < 0) return 0;
        dst[o++] = (char)b;
        i += l;
    }
    return o;
}

// ---- special-token trie ----

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static sb_status build_specials(tok_vocab *v) {
    int32_t n = 0;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN) && v->text[i].len) {
            n++;
            bytes += v->text[i].len;
        }
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    v->trie_cand = malloc((size_t)(bytes + 1) * sizeof *v->trie_cand);
    if (!v->special || !v->trie_cand) return sb_fail(SB_ERR_OOM, "tokenizer: special-token table (%d)", n);
    SB_TRY(tok_u64map_init(&v->trie, bytes + 1));
    /* order: text length descending, then id ascending (llama.cpp's order, made deterministic) */
    uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys) return sb_fail(SB_ERR_OOM, "tokenizer: special-token table (%d)", n);
    n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN) && v->text[i].len)
            keys[n++] = (uint64_t)(UINT32_MAX - (uint32_t)v->text[i].len) << 32 | (uint32_t)i;
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int32_t k = 0; k < n; k++) v->special[k] = (int32_t)(keys[k] & 0xffffffffu);
    free(keys);
    v->n_special = n;
    v->n_nodes = 1;
    v->trie_cand[0] = -1;
    for (int32_t k = 0; k < n; k++) {
        const sb_strview *t = &v->text[v->special[k]];
        int32_t node = 0;
        for (size_t j = 0; j < t->len; j++) {
            uint64_t key = (uint64_t)node << 8 | (unsigned char)t->ptr[j];
            int32_t child, unused;
            if (!tok_u64map_get(&v->trie, key, &child, &unused)) {
                child = v->n_nodes++;
                v->trie_cand[child] = -1;
                tok_u64map_put(&v->trie, key, child, 0);
            }
            node = child;
        }
        if (v->trie_cand[node] < 0) v->trie_cand[node] = k; /* equal texts: the first in order wins */
    }
    return SB_OK;
}

// ---- merges ----

static sb_status build_merges(tok_vocab *v, const tok_vocab_spec *s) {
    SB_TRY(tok_u64map_init(&v->merges, (uint64_t)s->n_merges));
    char *buf = NULL;
    size_t cap = 0;
    for (int64_t i = 0; i < s->n_merges; i++) {
        const sb_strview *m = &s->merges[i];
        size_t sp = 0;
        for (size_t j = 1; j < m->len; j++)
            if (m->ptr[j] == ' ') { sp = j; break; }
        if (!sp) {
            free(buf);
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.merges[%lld] (\"%.*s\") has no separating space",
                           (long long)i, (int)(m->len > 64 ? 64 : m->len), m->ptr);
        }
        int32_t l = tok_find(v, m->ptr, sp), r = tok_find(v, m->ptr + sp + 1, m->len - sp - 1);
        if (l < 0 || r < 0) {
            free(buf);
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.merges[%lld] (\"%.*s\") names a %s part that is not a token",
                           (long long)i, (int)(m->len > 64 ? 64 : m->len), m->ptr, l < 0 ? "left" : "right");
        }
        size_t n = m->len - 1;
        if (n > cap) {
            char *nb = realloc(buf, n);
            if (!nb) { free(buf); return sb_fail(SB_ERR_OOM, "tokenizer: merge text of %zu bytes", n); }
            buf = nb;
            cap = n;
        }
        memcpy(buf, m->ptr, sp);
        memcpy(buf + sp, m->ptr + sp + 1, m->len - sp - 1);
        int32_t res = tok_find(v, buf, n);
        if (i > INT32_MAX) { free(buf); return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.merges: too many merges"); }
        tok_u64map_put(&v->merges, (uint64_t)(uint32_t)l << 32 | (uint32_t)r, (int32_t)i, res);
    }
    free(buf);
    return SB_OK;
}

// ---- where SPM / Gemma 4 text may be cut into independent merge runs ----

static bool is_mark(const char *p, size_t n) { return n == 3 && !memcmp(p, "\xE2\x96\x81", 3); }

/* Calls add(v, unit) for every character that directly precedes a U+2581 (and is not one) in t. */
static void scan_ws_prev(tok_vocab *v, const sb_strview *t, int pass) {
    const char *prev = NULL;
    size_t prev_n = 0;
    for (size_t o = 0; o < t->len;) {
        size_t l = tok_unit_len(t->ptr + o, t->len - o);
        if (is_mark(t->ptr + o, l) && prev && !is_mark(prev, prev_n)) {
            if (pass == 0) v->n_ws_prev++;
            else {
                v->ws_prev[v->n_ws_prev] = (sb_strview){prev, prev_n};
                if (tok_strmap_get(&v->ws_prev_map, prev, prev_n) < 0) tok_strmap_put(&v->ws_prev_map, v->n_ws_prev++);
            }
        }
        prev = t->ptr + o;
        prev_n = l;
        o += l;
    }
}

/* Last character of a (as the merge loop splits it). */
static sb_strview last_unit(const sb_strview *a) {
    sb_strview u = {a->ptr, 0};
    for (size_t o = 0; o < a->len;) {
        size_t l = tok_unit_len(a->ptr + o, a->len - o);
        u = (sb_strview){a->ptr + o, l};
        o += l;
    }
    return u;
}

static sb_status build_ws_prev(tok_vocab *v) {
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        v->char_tok[c] = tok_find(v, &ch, 1);
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            int32_t n = v->n_ws_prev;
            v->n_ws_prev = 0;
            v->ws_prev = malloc((size_t)(n ? n : 1) * sizeof *v->ws_prev);
            if (!v->ws_prev) return sb_fail(SB_ERR_OOM, "tokenizer: %d space-run entries", n);
            SB_TRY(tok_strmap_init(&v->ws_prev_map, v->ws_prev, (uint64_t)n));
        }
        for (int32_t i = 0; i < v->n_tokens; i++) scan_ws_prev(v, &v->text[i], pass);
        /* merge junctions (Gemma 4): a merged symbol need not be a token */
        if (v->merges.mask) {
            for (uint64_t k = 0; k <= v->merges.mask; k++) {
                uint64_t key = v->merges.key[k];
                if (key == UINT64_MAX) continue;
                const sb_strview *l = &v->text[key >> 32], *r = &v->text[key & 0xffffffffu];
                sb_strview u = last_unit(l);
                if (!r->len || !is_mark(r->ptr, tok_unit_len(r->ptr, r->len)) || !u.len || is_mark(u.ptr, u.len)) continue;
                if (pass == 0) v->n_ws_prev++;
                else {
                    v->ws_prev[v->n_ws_prev] = u;
                    if (tok_strmap_get(&v->ws_prev_map, u.ptr, u.len) < 0) tok_strmap_put(&v->ws_prev_map, v->n_ws_prev++);
                }
            }
        }
    }
    for (int32_t k = 0; k < v->n_ws_prev; k++)
        if (v->ws_prev[k].len == 1 && (unsigned char)v->ws_prev[k].ptr[0] < 128)
            v->ws_prev_ascii[(unsigned char)v->ws_prev[k].ptr[0]] = true;
    return SB_OK;
}

// ---- build ----

enum { TOK_TEXT_MAX = 1 << 16, TOK_TEXT_TOTAL_MAX = 1 << 26 }; /* 64 KiB a token, 64 MiB in all */

static sb_status build(const tok_vocab_spec *s, tok_vocab *v) {
    SB_TRY(parse_model(s, v));
    if (s->n_tokens <= 0 || s->n_tokens > INT32_MAX - 1 || !s->texts)
        return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens has %lld entries (need 1..2^31-2)", (long long)s->n_tokens);
    if (s->n_merges < 0 || (s->n_merges && !s->merges))
        return sb_fail(SB_ERR_INVALID_ARG, "tokenizer: merges array missing");
    int32_t n = (int32_t)s->n_tokens;
    v->n_tokens = n;
    // texts (empty ones become "[EMPTY_<i>]", as llama.cpp names them) and the arena
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        /* every byte of token text becomes a trie node: real vocabularies hold tokens of at most a
         * few hundred bytes and a few MB in all, so these caps refuse a hostile file at once
         * instead of building a trie of hundreds of millions of nodes */
        if (s->texts[i].len > TOK_TEXT_MAX)
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens[%d] is %zu bytes long (limit %d bytes a token)", i,
                           s->texts[i].len, TOK_TEXT_MAX);
        size_t l = s->texts[i].len ? s->texts[i].len : 20;
        if (ckd_add(&total, total, (uint64_t)l) || total > TOK_TEXT_TOTAL_MAX)
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens: more than %d MiB of token text in all", TOK_TEXT_TOTAL_MAX >> 20);
    }
    uint64_t arena_bytes;
    if (ckd_mul(&arena_bytes, total, 3u)) return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens: too large");
    v->arena = malloc((size_t)arena_bytes + 1);
    v->text = calloc((size_t)n, sizeof *v->text);
    v->piece = calloc((size_t)n, sizeof *v->piece);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->type = calloc((size_t)n, 1);
    v->attr = calloc((size_t)n, 1);
    if (!v->arena || !v->text || !v->piece || !v->score || !v->type || !v->attr)
        return sb_fail(SB_ERR_OOM, "tokenizer: vocabulary of %d tokens (%llu text bytes)", n, (unsigned long long)total);
    char *a = v->arena;
    for (int32_t i = 0; i < n; i++) {
        const sb_strview *t = &s->texts[i];
        if (t->len) {
            if (!t->ptr) return sb_fail(SB_ERR_INVALID_ARG, "tokenizer.ggml.tokens[%d]: NULL text", i);
            memcpy(a, t->ptr, t->len);
            v->text[i] = (sb_strview){a, t->len};
            a += t->len;
        } else {
            int k = snprintf(a, 21, "[EMPTY_%d]", i);
            v->text[i] = (sb_strview){a, (size_t)k};
            a += k;
        }
        int32_t ty = s->types ? s->types[i] : TOK_TYPE_NORMAL;
        if (ty < 0 || ty > TOK_TYPE_BYTE)
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.token_type[%d] = %d is not a token type (0..6)", i, ty);
        v->type[i] = (uint8_t)ty;
        v->attr[i] = attr_of_type(ty);
        /* CONTROL placeholders such as <unused12> are UNUSED: never matched, never rendered (§8.1) */
        if (v->attr[i] == TOK_ATTR_CONTROL && contains(&v->text[i], "unused"))
            v->attr[i] = TOK_ATTR_UNUSED;
        v->score[i] = s->scores ? s->scores[i] : 0.0f;
    }
    SB_TRY(tok_strmap_init(&v->text_map, v->text, (uint64_t)n));
    for (int32_t i = 0; i < n; i++) tok_strmap_put(&v->text_map, i);

    // special ids and flags (defaults per model, then the metadata; architectures.md §8.1).
    // llama.cpp defaults byte-level BPE's bos/eos to id 11 — an ordinary token in real
    // vocabularies (',' in Qwen2), which would make it end generation; we leave them unset.
    bool spm = v->model == TOK_MODEL_SPM, bpe = v->model == TOK_MODEL_BPE;
    SB_TRY(set_special(&v->bos, s->bos, spm ? 1 : -1, n, "bos_token_id"));
    SB_TRY(set_special(&v->eos, s->eos, spm ? 2 : -1, n, "eos_token_id"));
    SB_TRY(set_special(&v->eot, s->eot, -1, n, "eot_token_id"));
    SB_TRY(set_special(&v->eom, s->eom, -1, n, "eom_token_id"));
    SB_TRY(set_special(&v->unk, s->unk, spm ? 0 : -1, n, "unknown_token_id"));
    SB_TRY(set_special(&v->sep, s->sep, -1, n, "seperator_token_id"));
    SB_TRY(set_special(&v->pad, s->pad, -1, n, "padding_token_id"));
    SB_TRY(set_special(&v->mask, s->mask, -1, n, "mask_token_id"));
    v->add_bos = spm || v->pre == TOK_PRE_LLAMA3;
    if (s->add_bos >= 0) v->add_bos = s->add_bos;
    if (v->model == TOK_MODEL_GEMMA4) v->add_bos = true;
    v->add_eos = s->add_eos > 0;
    v->add_space_prefix = spm && s->add_space_prefix != 0;
    v->ignore_merges = v->pre == TOK_PRE_LLAMA3;
    v->clean_spaces = (bpe && v->pre != TOK_PRE_QWEN2) || v->model == TOK_MODEL_GEMMA4;
    if (v->add_bos && v->bos < 0) return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.add_bos_token is set but there is no bos_token_id");
    if (v->add_eos && v->eos < 0) return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.add_eos_token is set but there is no eos_token_id");

    // byte tokens (SPM / Gemma 4: exactly "<0xXX>")
    for (int i = 0; i < 256; i++) v->byte_tok[i] = -1;
    int *tok_byte = calloc((size_t)n, sizeof *tok_byte);
    if (!tok_byte) return sb_fail(SB_ERR_OOM, "tokenizer: byte table");
    for (int32_t i = 0; i < n && !bpe; i++) {
        tok_byte[i] = -1;
        if (!(v->attr[i] & TOK_ATTR_BYTE)) continue;
        int b = parse_byte_token(&v->text[i]);
        if (b < 0) {
            free(tok_byte);
            return sb_fail(SB_ERR_VOCAB, "tokenizer.ggml.tokens[%d] = \"%.*s\" has type BYTE but is not <0xXX>", i,
                           (int)(v->text[i].len > 32 ? 32 : v->text[i].len), v->text[i].ptr);
        }
        tok_byte[i] = b;
    }
    if (!bpe) {
        for (int b = 0; b < 256; b++) {
            char buf[8];
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            int32_t id = tok_find(v, buf, 6);
            if (id < 0) {
                buf[0] = (char)b;
                id = tok_find(v, buf, 1);
            }
            v->byte_tok[b] = id;
        }
    }

    // EOG set and attributes, then pieces
    derive_eog(v);
    for (int32_t i = 0; i < n; i++) {
        size_t l = render_piece(v, &v->text[i], v->attr[i], bpe ? 0 : tok_byte[i], a);
        v->piece[i] = (sb_strview){a, l};
        a += l;
    }
    free(tok_byte);

    if (bpe) {
        v->raw = calloc((size_t)n, sizeof *v->raw);
        if (!v->raw) return sb_fail(SB_ERR_OOM, "tokenizer: raw texts");
        SB_TRY(tok_strmap_init(&v->raw_map, v->raw, (uint64_t)n));
        for (int32_t i = 0; i < n; i++) {
            size_t l = bpe_raw(&v->text[i], a);
            v->raw[i] = (sb_strview){a, l};
            a += l;
            if (l) tok_strmap_put(&v->raw_map, i);
        }
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            v->byte_tok[b] = tok_strmap_get(&v->raw_map, &c, 1);
        }
        SB_TRY(tok_pretok_create(v->pre, &v->pretok));
    }
    SB_ASSERT((uint64_t)(a - v->arena) <= arena_bytes);
    if (!spm) SB_TRY(build_merges(v, s));
    SB_TRY(build_specials(v));
    if (!bpe) SB_TRY(build_ws_prev(v));
    v->chat = tok_chat_detect(s->chat_template, s->chat_template ? s->chat_template_len : 0);
    return SB_OK;
}

sb_status tok_vocab_build(const tok_vocab_spec *spec, tok_vocab **out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "tok_vocab_build: out is NULL");
    *out = NULL;
    if (!spec) return sb_fail(SB_ERR_INVALID_ARG, "tok_vocab_build: spec is NULL");
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return sb_fail(SB_ERR_OOM, "tokenizer: vocab struct");
    sb_status st = build(spec, v);
    if (st != SB_OK) {
        tok_vocab_free(v);
        return st;
    }
    *out = v;
    return SB_OK;
}

// ---- queries ----

int32_t tok_n_tokens(const tok_vocab *v) { return v->n_tokens; }
tok_model tok_get_model(const tok_vocab *v) { return v->model; }
uint32_t tok_attr(const tok_vocab *v, int32_t id) { return id >= 0 && id < v->n_tokens ? v->attr[id] : 0; }
const sb_strview *tok_text(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? &v->text[id] : NULL;
}
int32_t tok_find(const tok_vocab *v, const char *text, size_t len) { return tok_strmap_get(&v->text_map, text, len); }
bool tok_is_eog(const tok_vocab *v, int32_t id) { return (tok_attr(v, id) & TOK_ATTR_EOG) != 0; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos; }
bool tok_add_eos(const tok_vocab *v) { return v->add_eos; }
tok_chat_kind tok_chat_kind_of(const tok_vocab *v) { return v->chat; }

int32_t tok_special_id(const tok_vocab *v, tok_special which) {
    switch (which) {
    case TOK_SPECIAL_BOS: return v->bos;
    case TOK_SPECIAL_EOS: return v->eos;
    case TOK_SPECIAL_EOT: return v->eot;
    case TOK_SPECIAL_EOM: return v->eom;
    case TOK_SPECIAL_UNK: return v->unk;
    case TOK_SPECIAL_SEP: return v->sep;
    case TOK_SPECIAL_PAD: return v->pad;
    case TOK_SPECIAL_MASK: return v->mask;
    }
    return -1;
}
