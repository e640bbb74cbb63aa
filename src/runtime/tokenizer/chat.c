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

// ---- rendering ----

static sb_status put(tok_bytes *o, const char *s) { return tok_bytes_append(o, s, strlen(s)); }

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static sb_status put_trim(tok_bytes *o, const char *s) {
    size_t n = strlen(s), a = 0;
    while (a < n && is_ws(s[a])) a++;
    while (n > a && is_ws(s[n - 1])) n--;
    return tok_bytes_append(o, s + a, n - a);
}

typedef enum { R_SYSTEM, R_USER, R_ASSISTANT } role;

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

/* A format whose every turn is open + role + after_role + content (trimmed or not) + close, and
 * that asks for the reply with gen_prompt: ChatML and Llama 3. */
typedef struct role_turn_format {
    const char *open, *after_role, *close, *gen_prompt;
    bool trim;
} role_turn_format;

static const role_turn_format chatml = {"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false};
static const role_turn_format llama3 = {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
                                        "<|start_header_id|>assistant<|end_header_id|>\n\n", true};

static sb_status role_turns(const role_turn_format *f, const tok_chat_msg *m, size_t n, bool gen, tok_bytes *o) {
    for (size_t i = 0; i < n; i++) {
        SB_TRY(put(o, f->open));
        SB_TRY(put(o, m[i].role));
        SB_TRY(put(o, f->after_role));
        SB_TRY(f->trim ? put_trim(o, m[i].content) : put(o, m[i].content));
        SB_TRY(put(o, f->close));
    }
    return gen ? put(o, f->gen_prompt) : SB_OK;
}

static sb_status gemma3(const tok_chat_msg *m, const role *r, size_t n, bool gen, tok_bytes *o) {
    tok_bytes sys = {0};
    sb_status st = SB_OK;
    for (size_t i = 0; i < n && st == SB_OK; i++) {
        if (r[i] == R_SYSTEM) { /* no system role: prepend to the next user turn */
            st = put_trim(&sys, m[i].content);
            continue;
        }
        bool model = r[i] == R_ASSISTANT;
        st = put(o, model ? "<start_of_turn>model\n" : "<start_of_turn>user\n");
        if (st == SB_OK && sys.n && !model) {
            st = tok_bytes_append(o, sys.p, sys.n);
            if (st == SB_OK) st = put(o, "\n\n");
            sys.n = 0;
        }
        if (st == SB_OK) st = put_trim(o, m[i].content);
        if (st == SB_OK) st = put(o, "<end_of_turn>\n");
    }
    tok_bytes_free(&sys);
    if (st == SB_OK && gen) st = put(o, "<start_of_turn>model\n");
    return st;
}

static sb_status gemma4(const tok_chat_msg *m, const role *r, size_t n, bool gen, bool thought, tok_bytes *o) {
    for (size_t i = 0; i < n; i++) {
        SB_TRY(put(o, r[i] == R_ASSISTANT ? "<|turn>model\n" : r[i] == R_SYSTEM ? "<|turn>system\n" : "<|turn>user\n"));
        SB_TRY(put_trim(o, m[i].content));
        SB_TRY(put(o, "<turn|>\n"));
    }
    if (!gen) return SB_OK;
    SB_TRY(put(o, "<|turn>model\n"));
    return thought ? put(o, "<|channel>thought\n<channel|>") : SB_OK;
}

sb_status tok_chat_render(tok_chat_kind k, const tok_chat_msg *msgs, size_t n, bool gen, tok_bytes *out) {
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "chat: out is NULL");
    role stack[64], *roles = stack;
    if (n > 64) {
        roles = malloc(n * sizeof *roles);
        if (!roles) return sb_fail(SB_ERR_OOM, "chat: %zu messages", n);
    }
    sb_status st = check(msgs, n, roles);
    if (st == SB_OK) {
        switch (k) {
        case TOK_CHAT_LLAMA3: st = role_turns(&llama3, msgs, n, gen, out); break;
        case TOK_CHAT_GEMMA3: st = gemma3(msgs, roles, n, gen, out); break;
        case TOK_CHAT_GEMMA4: st = gemma4(msgs, roles, n, gen, false, out); break;
        case TOK_CHAT_GEMMA4_THOUGHT: st = gemma4(msgs, roles, n, gen, true, out); break;
        default: st = role_turns(&chatml, msgs, n, gen, out); break;
        }
    }
    if (roles != stack) free(roles);
    return st;
}
