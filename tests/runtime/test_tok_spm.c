/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_tok_spm.c — SentencePiece-style ("llama") and Gemma 4 tokenization from small
 * in-memory vocabularies with hand-computed expectations (architectures.md §8.5, §8.6): score
 * priority and ties, add_space_prefix (also after a special token), byte fallback for unknown
 * characters and invalid UTF-8 (lossless), BOS/EOS, Gemma 4's newline runs and rank merges,
 * detokenization (leading space, byte tokens joined), the streaming decoder holding back partial
 * UTF-8, and load errors for bad metadata (robustness.md T2/T3).
 */
#include "test.h"

#include "runtime/tokenizer/tokenizer.h"
#include "tok_check.h"

// ---- an SPM vocabulary ----

enum { UNK = 0, BOS = 1, EOS = 2, BYTE0 = 3, SP = 259, H, E, L, O, SP_H, EL, LL, A, AA, N_SPM };

static sb_strview spm_texts[N_SPM];
static float spm_scores[N_SPM];
static int32_t spm_types[N_SPM];
static char byte_names[256][8];

static void spm_setup(void) {
    spm_texts[UNK] = (sb_strview){"<unk>", 5};
    spm_texts[BOS] = (sb_strview){"<s>", 3};
    spm_texts[EOS] = (sb_strview){"</s>", 4};
    spm_types[UNK] = TOK_TYPE_UNKNOWN;
    spm_types[BOS] = spm_types[EOS] = TOK_TYPE_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(byte_names[b], 8, "<0x%02X>", b);
        spm_texts[BYTE0 + b] = (sb_strview){byte_names[b], 6};
        spm_types[BYTE0 + b] = TOK_TYPE_BYTE;
    }
    const char *t[] = {"\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "el", "ll", "a", "aa"};
    const float sc[] = {-10, -5, -5, -5, -5, -3, -4, -1, -5, -2};
    for (int i = SP; i < N_SPM; i++) {
        spm_texts[i] = (sb_strview){t[i - SP], strlen(t[i - SP])};
        spm_scores[i] = sc[i - SP];
        spm_types[i] = TOK_TYPE_NORMAL;
    }
}

static tok_vocab *spm_build(int add_eos) {
    tok_vocab_spec s;
    tok_spec_base(&s, "llama", N_SPM, spm_texts, spm_types);
    s.scores = spm_scores;
    s.add_eos = add_eos;
    return tok_build_checked(&s);
}

static void test_spm(void) {
    spm_setup();
    tok_vocab *v = spm_build(-1);
    if (!v) return;
    /* "▁hello": ll (-1) first, then ▁h (-3); "el" is stale by then */
    TOK_EQ(v, "hello", false, false, SP_H, E, LL, O);
    TOK_EQ(v, "hello", true, false, BOS, SP_H, E, LL, O);
    /* equal scores: leftmost pair first */
    TOK_EQ(v, "aaa", false, false, SP, AA, A);
    /* unknown character -> byte tokens */
    TOK_EQ(v, "h\xC3\xA9", false, false, SP_H, BYTE0 + 0xC3, BYTE0 + 0xA9);
    /* invalid UTF-8 keeps its bytes */
    TOK_EQ(v, "\xff", false, false, SP, BYTE0 + 0xFF);
    TOK_EQ(v, "h\xE2\x96", false, false, SP_H, BYTE0 + 0xE2, BYTE0 + 0x96);
    TOK_EQ(v, "\0", false, false, SP, BYTE0);
    /* a special token resets the prefix space; control text is plain text without parse_special */
    TOK_EQ(v, "<s>h", false, true, BOS, SP_H);
    TOK_EQ(v, "<s>", false, false, SP, BYTE0 + '<', BYTE0 + 's', BYTE0 + '>');
    TOK_EQ(v, "", true, false, BOS);
    /* detokenize */
    DETOK_EQ(v, 0, "hello", SP_H, E, LL, O);
    DETOK_EQ(v, 0, "h\xC3\xA9", SP_H, BYTE0 + 0xC3, BYTE0 + 0xA9);
    DETOK_EQ(v, 0, " hello", BOS, SP_H, E, LL, O);        /* after BOS the space stays (llama.cpp) */
    DETOK_EQ(v, TOK_DETOK_REMOVE_SPECIAL, " hello", BOS, SP_H, E, LL, O);
    DETOK_EQ(v, TOK_DETOK_UNPARSE_SPECIAL, "<s> hello", BOS, SP_H, E, LL, O);
    DETOK_EQ(v, 0, " h", SP, SP_H);                        /* only one leading space goes */
    /* round trips, including a leading space and invalid bytes */
    const char *rt[] = {" hello", "a  b\xff\xfe", "\xE2\x82", "", "  "};
    for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) {
        tok_ids ids = {0};
        tok_bytes b = {0};
        size_t n = strlen(rt[i]);
        CHECK(tok_tokenize(v, rt[i], n, false, false, &ids) == SB_OK);
        CHECK(tok_detokenize(v, ids.ids, ids.n, 0, &b) == SB_OK);
        CHECKF(b.n == n && !memcmp(b.p ? b.p : "", rt[i], n), "round trip \"%s\" -> \"%.*s\"", rt[i], (int)b.n, b.p);
        tok_ids_free(&ids);
        tok_bytes_free(&b);
    }
    /* streaming: € = E2 82 AC arrives as three byte tokens */
    tok_stream s;
    tok_stream_init(&s, v, false);
    tok_bytes out = {0};
    CHECK(tok_stream_push(&s, SP_H, &out) == SB_OK);
    CHECKF(out.n == 1 && out.p[0] == 'h', "stream first token strips the prefix space");
    CHECK(tok_stream_push(&s, BYTE0 + 0xE2, &out) == SB_OK);
    CHECK(tok_stream_push(&s, BYTE0 + 0x82, &out) == SB_OK);
    CHECK_EQ_INT(out.n, 1);
    CHECK(tok_stream_push(&s, BYTE0 + 0xAC, &out) == SB_OK);
    CHECKF(out.n == 4 && !memcmp(out.p, "h\xE2\x82\xAC", 4), "stream joined the euro sign");
    CHECK(tok_stream_push(&s, BYTE0 + 0xF0, &out) == SB_OK);
    CHECK(tok_stream_push(&s, SP, &out) == SB_OK);        /* an interrupted sequence is released */
    CHECKF(out.n == 6 && !memcmp(out.p + 4, "\xF0 ", 2), "stream releases a broken sequence");
    CHECK(tok_stream_push(&s, BYTE0 + 0xC3, &out) == SB_OK);
    CHECK_EQ_INT(out.n, 6);
    CHECK(tok_stream_flush(&s, &out) == SB_OK);
    CHECK_EQ_INT(out.n, 7);
    CHECK(tok_stream_push(&s, 1 << 30, &out) == SB_ERR_RANGE);
    tok_bytes_free(&out);
    tok_vocab_free(v);
    v = spm_build(1);
    TOK_EQ(v, "h", true, false, BOS, SP_H, EOS);
    DETOK_EQ(v, TOK_DETOK_REMOVE_SPECIAL, " h", BOS, SP_H, EOS);
    tok_vocab_free(v);
}

// ---- Gemma 4 ----

static void test_gemma4(void) {
    static char names[256][8];
    sb_strview texts[300];
    int32_t types[300];
    int n = 0;
    const char *base[] = {"<pad>", "<eos>", "<bos>", "\n", "\n\n", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81\x61",
                          "<|tool_call>", "<|turn>", "<turn|>", "<unused3>"};
    for (size_t i = 0; i < sizeof base / sizeof *base; i++) {
        texts[n] = (sb_strview){base[i], strlen(base[i])};
        types[n++] = i < 3 ? TOK_TYPE_CONTROL : TOK_TYPE_NORMAL;
    }
    types[10] = TOK_TYPE_USER_DEFINED;
    types[11] = types[12] = types[13] = TOK_TYPE_CONTROL;
    int byte0 = n;
    for (int b = 0; b < 256; b++) {
        snprintf(names[b], 8, "<0x%02X>", b);
        texts[n] = (sb_strview){names[b], 6};
        types[n++] = TOK_TYPE_BYTE;
    }
    sb_strview merges[] = {{"a b", 3}, {"\xE2\x96\x81 a", 5}, {"\n \n", 3}};
    tok_vocab_spec s;
    tok_spec_base(&s, "gemma4", n, texts, types);
    s.merges = merges;
    s.n_merges = 3;
    s.bos = 2;
    s.eos = 1;
    s.add_bos = 0; /* ignored: Gemma 4 always adds BOS */
    tok_vocab *v = tok_build_checked(&s);
    if (!v) return;
    TOK_EQ(v, "a b\n\n\nab", false, false, 6, 5, 7, 4, 3, 8);    /* no prefix space; "\n\n\n" -> "\n\n","\n" */
    TOK_EQ(v, "\n\n", false, false, 4);                          /* a whole newline-run token */
    TOK_EQ(v, " a", true, false, 2, 9);                          /* BOS forced; "▁a" merged */
    TOK_EQ(v, "c", false, false, byte0 + 'c');                   /* byte fallback */
    TOK_EQ(v, "a<|tool_call>b", false, false, 6, 10, 7);         /* user-defined always matched */
    TOK_EQ(v, "<|turn>", false, true, 11);
    CHECK(tok_attr(v, 13) == TOK_ATTR_UNUSED);                  /* a CONTROL "<unused..>" is UNUSED */
    TOK_EQ(v, "<unused3>", false, true, byte0 + '<', byte0 + 'u', byte0 + 'n', byte0 + 'u', byte0 + 's', byte0 + 'e',
           byte0 + 'd', byte0 + '3', byte0 + '>');
    DETOK_EQ(v, TOK_DETOK_NO_CLEAN_SPACES, "a b\n\n\nab", 6, 5, 7, 4, 3, 8);
    DETOK_EQ(v, 0, "a.", 6, 5, byte0 + '.');                     /* clean_spaces is on for Gemma 4 */
    CHECK(tok_is_eog(v, 12) && tok_is_eog(v, 1) && !tok_is_eog(v, 11));
    CHECK(tok_add_bos(v));
    tok_vocab_free(v);
}

// ---- load errors ----

static void expect_error(tok_vocab_spec *s, sb_status want, const char *needle) {
    tok_vocab *v = NULL;
    sb_status st = tok_vocab_build(s, &v);
    CHECKF(st == want && v == NULL && strstr(sb_last_error(), needle), "want %s naming \"%s\", got %s: %s",
           sb_status_str(want), needle, sb_status_str(st), sb_last_error());
    tok_vocab_free(v);
}

static void test_errors(void) {
    spm_setup();
    tok_vocab_spec s;
    tok_spec_base(&s, "llama", N_SPM, spm_texts, spm_types);
    s.bos = N_SPM;
    expect_error(&s, SB_ERR_VOCAB, "bos_token_id");
    s.bos = -1;
    s.eos = 1ll << 40;
    expect_error(&s, SB_ERR_VOCAB, "eos_token_id");
    s.eos = -1;
    s.pad = -7;
    expect_error(&s, SB_ERR_VOCAB, "padding_token_id");
    s.pad = -1;
    sb_strview saved = spm_texts[BYTE0 + 5];
    spm_texts[BYTE0 + 5] = (sb_strview){"<0x-1>", 6};
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.tokens[8]");
    spm_texts[BYTE0 + 5] = (sb_strview){"<0x5>", 5};
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.tokens[8]");
    spm_texts[BYTE0 + 5] = saved;
    spm_types[H] = 9;
    expect_error(&s, SB_ERR_VOCAB, "token_type[260]");
    spm_types[H] = TOK_TYPE_NORMAL;
    s.model = "t5";
    expect_error(&s, SB_ERR_VOCAB_UNSUPPORTED, "\"t5\"");
    s.model = "gpt2";
    s.pre = "made-up-pre";
    expect_error(&s, SB_ERR_VOCAB_UNSUPPORTED, "made-up-pre");
    s.pre = "qwen2";
    sb_strview bad_merges[] = {{"h e", 3}, {"h zz", 4}};
    s.merges = bad_merges;
    s.n_merges = 2;
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.merges[1]");
    sb_strview nospace[] = {{" he", 3}};
    s.merges = nospace;
    s.n_merges = 1;
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.merges[0]");
    s.n_merges = 0;
    s.n_tokens = 0;
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.tokens");
    s.n_tokens = N_SPM;
    s.model = NULL;
    expect_error(&s, SB_ERR_VOCAB, "tokenizer.ggml.model");
    s.model = "llama";
    s.bos = -1;
    s.add_bos = 1;
    s.n_tokens = 1; /* the SPM default BOS id 1 does not exist in a 1-token vocab */
    expect_error(&s, SB_ERR_VOCAB, "add_bos_token");
}

int main(void) {
    test_spm();
    test_gemma4();
    test_errors();
    return test_summary();
}
