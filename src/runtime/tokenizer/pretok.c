/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/pretok.c — byte-level BPE pre-tokenizers as PCRE2 patterns (UTF + UCP, JIT):
 * llama3 ("llama-bpe"), qwen2, gpt-2 and the 4-pattern "default" chain (architectures.md §8.3/8.4).
 * Layer 2 (runtime).
 * \s is spelled out as llama.cpp's whitespace set (U+0009..000D, U+0020, U+0085, U+00A0, U+1680,
 * U+2000..200A, U+2028, U+2029, U+202F, U+205F, U+3000) because PCRE2's \s lacks U+0085.
 * Text between matches is kept as words (nothing is ever dropped), each pattern of a chain splits
 * the words of the previous one, and lookahead never crosses a word's end.
 * Invariants: the subject is valid UTF-8 (the caller replaced invalid bytes), so matching uses
 * PCRE2_NO_UTF_CHECK; the compiled patterns are read-only and shared by all threads, match data
 * and JIT stacks are per call.
 * Non-goals: the other ~40 llama.cpp pre-tokenizers (unknown names fail at load).
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/status.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#define WS "\\t\\n\\x0B\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define S_ "[" WS "]"
#define NS_ "[^" WS "]"
#define OTHER "[^" WS "\\p{L}\\p{N}]"
#define CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

static const char *const re_llama3[] = {
    CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?" OTHER "+[\\r\\n]*|" S_ "*[\\r\\n]+|" S_
                    "+(?!" NS_ ")|" S_ "+",
    NULL};
static const char *const re_qwen2[] = {
    CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?" OTHER "+[\\r\\n]*|" S_ "*[\\r\\n]+|" S_
                    "+(?!" NS_ ")|" S_ "+",
    NULL};
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" OTHER "+|" S_ "+(?!" NS_ ")|" S_ "+"
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};

typedef struct tok_pretok {
    int n;
    pcre2_code *re[4];
    bool jit[4];
} tok_pretok;

void tok_pretok_free(void *p) {
    tok_pretok *t = p;
    if (!t) return;
    for (int i = 0; i < t->n; i++) pcre2_code_free(t->re[i]);
    free(t);
}

sb_status tok_pretok_create(tok_pre pre, void **out) {
    const char *const *list = pre == TOK_PRE_LLAMA3 ? re_llama3
                            : pre == TOK_PRE_QWEN2  ? re_qwen2
                            : pre == TOK_PRE_GPT2   ? re_gpt2
                                                    : re_default;
    tok_pretok *t = calloc(1, sizeof *t);
    if (!t) return sb_fail(SB_ERR_OOM, "tokenizer: pre-tokenizer");
    for (; *list; list++) {
        int err;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)*list, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            int idx = t->n;
            tok_pretok_free(t);
            return sb_fail(SB_ERR_INTERNAL, "tokenizer: pre-tokenizer pattern %d fails to compile at %zu: %s", idx,
                           (size_t)off, (const char *)msg);
        }
        t->jit[t->n] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
        t->re[t->n++] = re;
    }
    *out = t;
    return SB_OK;
}

// ---- splitting ----

typedef struct split_ctx {
    const tok_pretok *t;
    const char *text;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    tok_word_fn fn;
    void *user;
} split_ctx;

static sb_status split(split_ctx *c, int level, size_t start, size_t len) {
    if (len == 0) return SB_OK;
    if (level >= c->t->n || level >= 4) return c->fn(c->user, start, len);
    const pcre2_code *re = c->t->re[level];
    PCRE2_SPTR subj = (PCRE2_SPTR)(c->text + start);
    size_t pos = 0, gap = 0;
    while (pos < len) {
        int rc = c->t->jit[level] ? pcre2_jit_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK, c->md, c->mc)
                                  : pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK, c->md, c->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !c->js) { /* retry on a private, growable stack */
            c->js = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
            if (!c->js) return sb_fail(SB_ERR_OOM, "tokenizer: pcre2 JIT stack");
            pcre2_jit_stack_assign(c->mc, NULL, c->js);
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return sb_fail(SB_ERR_INTERNAL, "tokenizer: pre-tokenizer match failed at byte %zu: %s", start + pos,
                           (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match (none of our patterns can make one): step one character */
            pos = ms + 1;
            while (pos < len && ((unsigned char)subj[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (ms > gap) SB_TRY(split(c, level + 1, start + gap, ms - gap));
        SB_TRY(split(c, level + 1, start + ms, me - ms));
        pos = gap = me;
    }
    if (gap < len) SB_TRY(split(c, level + 1, start + gap, len - gap));
    return SB_OK;
}

sb_status tok_pretok_split(const void *p, const char *text, size_t n, tok_word_fn fn, void *user) {
    const tok_pretok *t = p;
    split_ctx c = {t, text, NULL, NULL, NULL, fn, user};
    c.md = pcre2_match_data_create(4, NULL);
    c.mc = pcre2_match_context_create(NULL);
    /* short texts run on PCRE2's default 32 KiB JIT stack (a private stack's mmap/munmap costs
     * more than tokenizing a short prompt); long ones, or a match that runs out, get a growable
     * private stack */
    if (c.md && c.mc && n > 4096) {
        c.js = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, NULL);
        if (c.js) pcre2_jit_stack_assign(c.mc, NULL, c.js);
    }
    sb_status st = c.md && c.mc && (n <= 4096 || c.js) ? split(&c, 0, 0, n) : sb_fail(SB_ERR_OOM, "tokenizer: pcre2 match data");
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mc);
    pcre2_jit_stack_free(c.js);
    return st;
}
