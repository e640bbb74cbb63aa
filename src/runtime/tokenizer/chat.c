/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/chat.c — chat prompts: recognise the family of tokenizer.chat_template by
 * signature substrings and render messages with a fixed C implementation of that family's format
 * (ChatML for Qwen2/2.5/3, Llama 3, Gemma 3, Gemma 4). A model-supplied Jinja template is
 * untrusted input (robustness.md T8): it is only searched, never executed.
 * Layer 2 (runtime).
 * Conventions (docs/tokenizer.md): the rendered text never contains BOS — tokenize it with
 * add_special = true (BOS from the vocabulary) and parse_special = true. Formats follow llama.cpp's
 * built-in renderers: Llama 3 and Gemma trim message content, ChatML does not; Gemma has no system
 * role in 3 (the system text + "\n\n" opens the next user turn) and a system turn in 4.
 * Unknown templates fall back to ChatML. No default system prompt is ever invented.
 * Each format is one row of data (formats[]) used both to render text and to tokenize without
 * trusting the content (tok_chat_tokenize: markers become special tokens, content never does —
 * user text cannot forge chat structure, robustness.md T8 / issue 24).
 * Non-goals: tools, multimodal parts, thinking toggles beyond the Gemma 4 empty thought channel.
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

// ---- detection ----

static bool has(const char *t, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k > n) return false;
    for (size_t i = 0; i + k <= n; i++)
        if (t[i] == needle[0] && !memcmp(t + i, needle, k)) return true;
    return false;
}

tok_chat_kind tok_chat_detect(const char *t, size_t n) {
    if (!t || !n) return TOK_CHAT_FALLBACK;
    if (has(t, n, "<|turn>")) return has(t, n, "<|channel>thought") ? TOK_CHAT_GEMMA4_THOUGHT : TOK_CHAT_GEMMA4;
    if (has(t, n, "<start_of_turn>")) return TOK_CHAT_GEMMA3;
    if (has(t, n, "<|start_header_id|>")) return TOK_CHAT_LLAMA3;
    if (has(t, n, "<|im_start|>")) return TOK_CHAT_CHATML;
    return TOK_CHAT_FALLBACK;
}

const char *tok_chat_kind_name(tok_chat_kind k) {
    switch (k) {
    case TOK_CHAT_FALLBACK: return "fallback (chatml)";
    case TOK_CHAT_CHATML: return "chatml";
    case TOK_CHAT_LLAMA3: return "llama3";
    case TOK_CHAT_GEMMA3: return "gemma3";
    case TOK_CHAT_GEMMA4: return "gemma4";
    case TOK_CHAT_GEMMA4_THOUGHT: return "gemma4 (empty thought channel)";
    }
    return "unknown";
}

// ---- the formats, as data ----

typedef enum { R_SYSTEM, R_USER, R_ASSISTANT } role;

/* A turn is open[role] + content (trimmed when trim) + close; the generation prompt is
 * open[R_ASSISTANT] + gen_suffix. open[R_SYSTEM] == NULL (Gemma 3): system text is trimmed and
 * held, then opens the next user turn followed by fold_sep. Everything here is template text
 * (trusted: its special-token text becomes special tokens); only message content is not. */
typedef struct chat_format {
    const char *open[3];
    const char *close, *fold_sep, *gen_suffix;
    bool trim;
} chat_format;

#define CHATML {{"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"}, "<|im_end|>\n", "", "", false}
#define GEMMA4(suffix) {{"<|turn>system\n", "<|turn>user\n", "<|turn>model\n"}, "<turn|>\n", "", suffix, true}

static const chat_format formats[] = {
    [TOK_CHAT_FALLBACK] = CHATML,
    [TOK_CHAT_CHATML] = CHATML,
    [TOK_CHAT_LLAMA3] = {{"<|start_header_id|>system<|end_header_id|>\n\n", "<|start_header_id|>user<|end_header_id|>\n\n",
                          "<|start_header_id|>assistant<|end_header_id|>\n\n"},
                         "<|eot_id|>", "", "", true},
    [TOK_CHAT_GEMMA3] = {{NULL, "<start_of_turn>user\n", "<start_of_turn>model\n"}, "<end_of_turn>\n", "\n\n", "", true},
    [TOK_CHAT_GEMMA4] = GEMMA4(""),
    [TOK_CHAT_GEMMA4_THOUGHT] = GEMMA4("<|channel>thought\n<channel|>"),
};

static const chat_format *format_of(tok_chat_kind k) {
    return (unsigned)k < sizeof formats / sizeof *formats ? &formats[k] : &formats[TOK_CHAT_FALLBACK];
}

// ---- rendering ----

/* Where rendered text goes: the bytes, and when trust is not NULL one byte per text byte, 1 for
 * template text and 0 for message content. */
typedef struct chat_out {
    tok_bytes *text, *trust;
} chat_out;

static sb_status emit(chat_out *o, const char *s, size_t n, bool trusted) {
    SB_TRY(tok_bytes_append(o->text, s, n));
    if (!o->trust) return SB_OK;
    unsigned char mark[256];
    memset(mark, trusted, sizeof mark);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof mark ? n - done : sizeof mark;
        SB_TRY(tok_bytes_append(o->trust, mark, k));
        done += k;
    }
    return SB_OK;
}

static sb_status tmpl(chat_out *o, const char *s) { return emit(o, s, strlen(s), true); }

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* The content as the format shows it: trimmed or not. */
static sb_strview shown(const chat_format *f, const char *s) {
    size_t n = strlen(s), a = 0;
    if (f->trim) {
        while (a < n && is_ws(s[a])) a++;
        while (n > a && is_ws(s[n - 1])) n--;
    }
    return (sb_strview){s + a, n - a};
}

static sb_status check(const tok_chat_msg *m, size_t n, role *roles) {
    if (n && !m) return sb_fail(SB_ERR_INVALID_ARG, "chat: messages is NULL");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return sb_fail(SB_ERR_INVALID_ARG, "chat: message %zu has a NULL %s", i, m[i].role ? "content" : "role");
        if (!strcmp(m[i].role, "system")) roles[i] = R_SYSTEM;
        else if (!strcmp(m[i].role, "user")) roles[i] = R_USER;
        else if (!strcmp(m[i].role, "assistant")) roles[i] = R_ASSISTANT;
        else
            return sb_fail(SB_ERR_INVALID_ARG, "chat: message %zu has role \"%.32s\" (expected system, user or assistant)",
                           i, m[i].role);
    }
    return SB_OK;
}

static sb_status turns(const chat_format *f, const tok_chat_msg *m, const role *r, size_t n, bool gen, chat_out *o) {
    tok_bytes held = {0}; /* folded system text (Gemma 3) */
    sb_status st = SB_OK;
    for (size_t i = 0; i < n && st == SB_OK; i++) {
        sb_strview c = shown(f, m[i].content);
        if (!f->open[r[i]]) { /* no such role: hold it for the next user turn */
            st = tok_bytes_append(&held, c.ptr, c.len);
            continue;
        }
        st = tmpl(o, f->open[r[i]]);
        if (st == SB_OK && held.n && r[i] == R_USER) {
            st = emit(o, held.p, held.n, false);
            if (st == SB_OK) st = tmpl(o, f->fold_sep);
            held.n = 0;
        }
        if (st == SB_OK) st = emit(o, c.ptr, c.len, false);
        if (st == SB_OK) st = tmpl(o, f->close);
    }
    tok_bytes_free(&held);
    if (st == SB_OK && gen) st = tmpl(o, f->open[R_ASSISTANT]);
    if (st == SB_OK && gen) st = tmpl(o, f->gen_suffix);
    return st;
}

static sb_status render(tok_chat_kind k, const tok_chat_msg *msgs, size_t n, bool gen, chat_out *o) {
    role stack[64], *roles = stack;
    if (n > 64) {
        roles = malloc(n * sizeof *roles);
        if (!roles) return sb_fail(SB_ERR_OOM, "chat: %zu messages", n);
    }
    sb_status st = check(msgs, n, roles);
    if (st == SB_OK) st = turns(format_of(k), msgs, roles, n, gen, o);
    if (roles != stack) free(roles);
    return st;
}

sb_status tok_chat_render(tok_chat_kind k, const tok_chat_msg *msgs, size_t n, bool gen, tok_bytes *out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "chat: out is NULL");
    chat_out o = {out, NULL};
    return render(k, msgs, n, gen, &o);
}

// ---- tokenizing without trusting the content ----

/* The special tokens that the format's template text spells in v (turn markers, the thought
 * channel): never to be matched inside content, even where v marks them user-defined. */
static sb_status marker_ids(const tok_vocab *v, const chat_format *f, tok_ids *out) {
    const char *parts[] = {f->open[0], f->open[1], f->open[2], f->close, f->fold_sep, f->gen_suffix};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (parts[i]) SB_TRY(tok_tokenize(v, parts[i], strlen(parts[i]), false, true, out));
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++)
        if (tok_attr(v, out->ids[i]) & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            out->ids[k++] = out->ids[i];
    out->n = k;
    return SB_OK;
}

sb_status tok_chat_tokenize(const tok_vocab *v, const tok_chat_msg *msgs, size_t n, bool gen, tok_ids *out) {
    if (!v || !out) return sb_fail(SB_ERR_INVALID_ARG, "chat: %s is NULL", v ? "out" : "vocab");
    tok_chat_kind k = tok_chat_kind_of(v);
    tok_bytes text = {0}, trust = {0};
    tok_ids deny = {0};
    chat_out o = {&text, &trust};
    sb_status st = render(k, msgs, n, gen, &o);
    if (st == SB_OK) st = marker_ids(v, format_of(k), &deny);
    if (st == SB_OK)
        st = tok_tokenize_trusted(v, text.p ? text.p : "", text.n, (const unsigned char *)(trust.p ? trust.p : ""),
                                  deny.ids, deny.n, true, out);
    tok_bytes_free(&text);
    tok_bytes_free(&trust);
    tok_ids_free(&deny);
    return st;
}
