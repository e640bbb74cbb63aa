/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_tok_bpe.c — byte-level BPE from small in-memory vocabularies with
 * hand-computed expectations (architectures.md §8.2-§8.4): the pre-tokenizer splits of qwen2,
 * llama-bpe, gpt-2 and default, merge-rank priority and tie order, ignore_merges, the fallback
 * for merge results that are not tokens, invalid UTF-8 -> U+FFFD, NUL bytes, special-token
 * partition (longest first, user-defined always, control only with parse_special), BOS per pre,
 * clean_spaces in detokenize.
 */
#include "test.h"

#include "runtime/tokenizer/tok_internal.h"
#include "tok_check.h"

// ---- helpers ----

/* Byte-level form of raw bytes (what vocab and merges store). */
static char *mapped(const char *raw, size_t n) {
    char *o = malloc(n * 2 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += tok_utf8_encode(tok_byte_to_cp((unsigned char)raw[i]), (unsigned char *)o + k);
    o[k] = 0;
    return o;
}

typedef struct tv {
    sb_strview texts[1024];
    int32_t types[1024];
    int n;
    sb_strview merges[64];
    int n_merges;
    char *owned[2048];
    int n_owned;
} tv;

static char *keep(tv *t, char *s) { t->owned[t->n_owned++] = s; return s; }

/* Add a token given by its raw bytes (stored mapped). Returns its id. */
static int add_raw(tv *t, const char *raw, int type) {
    char *m = keep(t, mapped(raw, strlen(raw)));
    t->texts[t->n] = (sb_strview){m, strlen(m)};
    t->types[t->n] = type;
    return t->n++;
}
/* Add a token stored verbatim (special tokens). */
static int add_lit(tv *t, const char *s, int type) {
    t->texts[t->n] = (sb_strview){s, strlen(s)};
    t->types[t->n] = type;
    return t->n++;
}
/* Add merge "A B" of raw parts. */
static void add_merge(tv *t, const char *a, const char *b) {
    char *ma = mapped(a, strlen(a)), *mb = mapped(b, strlen(b));
    char *m = malloc(strlen(ma) + strlen(mb) + 2);
    sprintf(m, "%s %s", ma, mb);
    free(ma);
    free(mb);
    keep(t, m);
    t->merges[t->n_merges++] = (sb_strview){m, strlen(m)};
}

static void tv_init(tv *t) {
    memset(t, 0, sizeof *t);
    for (int b = 0; b < 256; b++) { /* ids 0..255 = the byte tokens */
        char raw[1] = {(char)b};
        char *m = keep(t, mapped(raw, 1));
        t->texts[t->n] = (sb_strview){m, strlen(m)};
        t->types[t->n++] = TOK_TYPE_NORMAL;
    }
}
static void tv_free(tv *t) { for (int i = 0; i < t->n_owned; i++) free(t->owned[i]); }

static tok_vocab *build(tv *t, const char *pre) {
    tok_vocab_spec s;
    tok_spec_base(&s, "gpt2", t->n, t->texts, t->types);
    s.pre = pre;
    s.n_merges = t->n_merges;
    s.merges = t->merges;
    s.bos = t->n - 1; /* last token added is BOS in these tests */
    s.eos = t->n - 1;
    return tok_build_checked(&s);
}

// ---- pre-tokenizer splits ----

typedef struct words { char buf[1024]; size_t n; } words;
static sb_status collect(void *user, size_t start, size_t len) {
    words *w = user;
    (void)start;
    w->buf[w->n++] = '[';
    w->n += (size_t)snprintf(w->buf + w->n, sizeof w->buf - w->n, "%zu", len);
    w->buf[w->n++] = ']';
    w->buf[w->n] = 0;
    return SB_OK;
}

/* Sums the word lengths into n (they must tile the text). */
static sb_status count_words(void *user, size_t start, size_t len) {
    words *w = user;
    if (start != w->n) return SB_ERR_INTERNAL;
    w->n += len;
    return SB_OK;
}

/* Words as a string of their byte lengths, e.g. "[5][6]". */
static void check_split(tok_pre pre, const char *text, size_t len, const char *want) {
    void *p = NULL;
    CHECK(tok_pretok_create(pre, &p) == SB_OK);
    words w = {.n = 0};
    w.buf[0] = 0;
    CHECK(tok_pretok_split(p, text, len, collect, &w) == SB_OK);
    CHECKF(!strcmp(w.buf, want), "pre %d split of \"%.*s\": %s, want %s", pre, (int)len, text, w.buf, want);
    tok_pretok_free(p);
}
#define SPLIT(pre, text, want) check_split(pre, text, sizeof(text) - 1, want)

static void test_splits(void) {
    /* llama3 (llama-bpe) */
    SPLIT(TOK_PRE_LLAMA3, "Hello world", "[5][6]");
    SPLIT(TOK_PRE_LLAMA3, "I'm here", "[1][2][5]");
    SPLIT(TOK_PRE_LLAMA3, "I'M HERE'S", "[1][2][5][2]");       /* contractions are case-insensitive */
    SPLIT(TOK_PRE_LLAMA3, "  hi", "[1][3]");                    /* \s+(?!\S) leaves one space for " hi" */
    SPLIT(TOK_PRE_LLAMA3, "a\n\nb", "[1][2][1]");
    SPLIT(TOK_PRE_LLAMA3, "x  \n y", "[1][3][2]");              /* \s*[\r\n]+ then " y" */
    SPLIT(TOK_PRE_LLAMA3, "1234567", "[3][3][1]");              /* \p{N}{1,3} */
    SPLIT(TOK_PRE_LLAMA3, "a ...\n\nb", "[1][6][1]");           /* " ?[^\s\p{L}\p{N}]+[\r\n]*" */
    SPLIT(TOK_PRE_LLAMA3, "x\xC2\xA0\xC2\xA0y", "[1][2][3]");   /* NBSP is whitespace, and "other" before y */
    SPLIT(TOK_PRE_LLAMA3, "a\xC2\x85\xC2\x85", "[1][4]");       /* U+0085 counts as whitespace */
    SPLIT(TOK_PRE_LLAMA3, "x   ", "[1][3]");                    /* trailing run taken whole */
    SPLIT(TOK_PRE_LLAMA3, "$hello", "[6]");                     /* one non-letter may lead letters */
    SPLIT(TOK_PRE_LLAMA3, "\xC3\xA9t\xC3\xA9 caf\xC3\xA9", "[5][6]");
    /* qwen2: single digits */
    SPLIT(TOK_PRE_QWEN2, "1234567", "[1][1][1][1][1][1][1]");
    SPLIT(TOK_PRE_QWEN2, "ab12 c", "[2][1][1][2]");
    /* gpt-2: case-sensitive contractions, " ?\p{N}+" */
    SPLIT(TOK_PRE_GPT2, "Hello  world's", "[5][1][6][2]");
    SPLIT(TOK_PRE_GPT2, "I'M", "[1][1][1]");                    /* 'M is not a gpt-2 contraction */
    SPLIT(TOK_PRE_GPT2, "a 12345", "[1][6]");
    /* default: punctuation runs first, then gpt-2, then \p{N}+, then [0-9]{3} */
    SPLIT(TOK_PRE_DEFAULT, "Hello, world!!", "[5][1][6][2]");
    SPLIT(TOK_PRE_DEFAULT, "abc12345", "[3][3][2]");
    SPLIT(TOK_PRE_DEFAULT, "", "");
    /* texts up to the size that runs on the default JIT stack, and beyond: patterns that
     * backtrack over long runs must still succeed */
    static const char *units[] = {" ", "\n ", " !", "\r\n", "\xE2\x80\x83", "a ", "1", "'s"};
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        for (size_t total = 4000; total <= 40000; total *= 10) {
            char *big = malloc(total + 2);
            size_t k = strlen(units[u]), n = 0;
            while (n + k <= total) { memcpy(big + n, units[u], k); n += k; }
            big[n++] = 'x';
            for (int pre = TOK_PRE_DEFAULT; pre <= TOK_PRE_QWEN2; pre++) {
                void *p = NULL;
                CHECK(tok_pretok_create((tok_pre)pre, &p) == SB_OK);
                words w = {.n = 0};
                sb_status st = tok_pretok_split(p, big, n, count_words, &w);
                CHECKF(st == SB_OK && w.n == n, "pre %d, %zu bytes of \"%s\": %s (%s)", pre, n, units[u],
                       sb_status_str(st), sb_last_error());
                tok_pretok_free(p);
            }
            free(big);
        }
    }
}

// ---- merges ----

static void test_merges(void) {
    tv t;
    tv_init(&t);
    add_merge(&t, "h", "e");     /* rank 0 */
    add_merge(&t, "l", "l");     /* 1 */
    add_merge(&t, "he", "ll");   /* 2 */
    add_merge(&t, "hell", "o");  /* 3 */
    add_merge(&t, " ", "w");     /* 4 */
    add_merge(&t, "o", "r");     /* 5 */
    add_merge(&t, " w", "or");   /* 6 */
    add_merge(&t, " wor", "l");  /* 7 */
    add_merge(&t, " worl", "d"); /* 8 */
    add_merge(&t, "b", "c");     /* 9 */
    add_merge(&t, "a", "b");     /* 10: lower priority than "b c" */
    add_merge(&t, "a", "a");     /* 11 */
    add_merge(&t, "p", "q");     /* 12: "pq" is not a token */
    add_raw(&t, "he", 1); add_raw(&t, "ll", 1); add_raw(&t, "hell", 1);
    int hello = add_raw(&t, "hello", 1);
    add_raw(&t, " w", 1); add_raw(&t, "or", 1); add_raw(&t, " wor", 1); add_raw(&t, " worl", 1);
    int world = add_raw(&t, " world", 1);
    int bc = add_raw(&t, "bc", 1);
    add_raw(&t, "ab", 1);
    int aa = add_raw(&t, "aa", 1);
    int xyz = add_raw(&t, "xyz", 1);          /* reachable only through ignore_merges */
    int user = add_lit(&t, "<|user|>", TOK_TYPE_USER_DEFINED);
    int ims = add_lit(&t, "<|im_start|>", TOK_TYPE_CONTROL);
    int aab = add_lit(&t, "AAB", TOK_TYPE_CONTROL);
    int xa = add_lit(&t, "xA", TOK_TYPE_CONTROL);
    int bos = add_lit(&t, "<|bos|>", TOK_TYPE_CONTROL);

    tok_vocab *q = build(&t, "qwen2"), *l = build(&t, "llama-bpe");
    if (!q || !l) { tok_vocab_free(q); tok_vocab_free(l); tv_free(&t); return; }
    TOK_EQ(q, "hello world", false, false, hello, world);
    TOK_EQ(q, "abc", false, false, 'a', bc);                 /* rank 9 beats rank 10 */
    TOK_EQ(q, "aaa", false, false, aa, 'a');                 /* equal ranks: leftmost first */
    TOK_EQ(q, "aaaa", false, false, aa, aa);
    TOK_EQ(q, "pq", false, false, 'p', 'q');                 /* merged text not a token: bytes */
    TOK_EQ(q, "xyz", false, false, 'x', 'y', 'z');
    TOK_EQ(l, "xyz", false, false, xyz);                     /* llama3: ignore_merges */
    TOK_EQ(q, "12", false, false, '1', '2');
    /* invalid UTF-8: each bad byte becomes U+FFFD (EF BF BD) */
    TOK_EQ(q, "\xff", false, false, 0xEF, 0xBF, 0xBD);
    TOK_EQ(q, "a\xC3", false, false, 'a', 0xEF, 0xBF, 0xBD);
    TOK_EQ(q, "\xED\xA0\x80", false, false, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD); /* surrogate */
    TOK_EQ(q, "a\0b", false, false, 'a', 0, 'b');            /* NUL is a byte like any other */
    /* special tokens */
    TOK_EQ(q, "<|user|>hello", false, false, user, hello);   /* user-defined: always */
    TOK_EQ(q, "<|im_start|>", true, true, ims);
    TOK_EQ(q, "<|im_start|>", false, false, '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>');
    TOK_EQ(q, "xAAB", false, true, 'x', aab);                /* longer candidate first */
    TOK_EQ(q, "xAxA", false, true, xa, xa);
    /* BOS: llama-bpe adds it, qwen2 does not */
    TOK_EQ(l, "hello", true, false, bos, hello);
    TOK_EQ(q, "hello", true, false, hello);
    TOK_EQ(q, "", true, false);

    /* detokenize: pieces undo the byte mapping; clean_spaces only for llama-bpe, not qwen2 */
    tok_bytes b = {0};
    int32_t ids[] = {hello, ' ', '.', ' ', '\'', 's'};
    CHECK(tok_detokenize(l, ids, 6, 0, &b) == SB_OK);
    CHECKF(b.n == 8 && !memcmp(b.p, "hello.'s", 8), "clean_spaces: \"%s\"", b.p);
    b.n = 0;
    CHECK(tok_detokenize(q, ids, 6, 0, &b) == SB_OK);
    CHECKF(b.n == 10 && !memcmp(b.p, "hello . 's", 10), "qwen2 keeps spaces: \"%s\"", b.p);
    b.n = 0;
    CHECK(tok_detokenize(l, ids, 6, TOK_DETOK_NO_CLEAN_SPACES, &b) == SB_OK);
    CHECKF(b.n == 10 && !memcmp(b.p, "hello . 's", 10), "no clean: \"%s\"", b.p);
    b.n = 0;
    int32_t sp[] = {ims, hello};
    CHECK(tok_detokenize(q, sp, 2, 0, &b) == SB_OK);
    CHECKF(b.n == 5, "control rendered without special: \"%s\"", b.p);
    b.n = 0;
    CHECK(tok_detokenize(q, sp, 2, TOK_DETOK_UNPARSE_SPECIAL, &b) == SB_OK);
    CHECKF(b.n == 17 && !memcmp(b.p, "<|im_start|>hello", 17), "control rendered with special: \"%s\"", b.p);
    b.n = 0;
    int32_t bad = 99999;
    CHECK(tok_detokenize(q, &bad, 1, 0, &b) == SB_ERR_RANGE);
    tok_bytes_free(&b);
    CHECK(tok_tokenize(q, "x", (size_t)INT32_MAX + 1, false, false, &(tok_ids){0}) == SB_ERR_TEXT_TOO_LONG);

    tok_vocab_free(q);
    tok_vocab_free(l);
    tv_free(&t);
}

int main(void) {
    test_splits();
    test_merges();
    return test_summary();
}
