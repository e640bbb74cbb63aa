/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_tok_api.c — the public tokenizer ABI: the caller-buffer convention of
 * sb_tokenize / sb_detokenize / sb_token_to_piece / sb_chat_render (cap 0, 1, exact-1, exact; the
 * needed size comes back; nothing is written past cap — robustness.md K4), the transactional
 * streaming decoder, attributes and EOG, and sb_vocab_load's errors on GGUF files written with
 * bad tokenizer metadata (special id >= n_vocab, mistyped or short arrays, missing model/tokens).
 */
#include "test.h"

#include "format/gguf_write.h"

#include <unistd.h>

static sb_vocab *load(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    sb_vocab *v = NULL;
    sb_status st = sb_vocab_load(test_data_path(rel), &v);
    if (st == SB_ERR_IO) printf("SKIP %s: shared test data absent\n", name);
    else CHECKF(st == SB_OK, "load %s: %s", name, sb_last_error());
    return v;
}

static void test_buffers(void) {
    sb_vocab *v = load("qwen2");
    if (!v) return;
    CHECK_EQ_INT(sb_vocab_n_tokens(v), 151936);
    CHECK_EQ_INT(sb_vocab_get_special(v, SB_SPECIAL_EOS), 151643);
    CHECK_EQ_INT(sb_vocab_get_special(v, SB_SPECIAL_EOM), -1);
    CHECK(!sb_vocab_adds_bos(v));
    const char *text = "Hello world, this is a test.";
    size_t n = 0;
    CHECK(sb_tokenize(v, text, strlen(text), 0, 0, NULL, 0, &n) == SB_ERR_BUFFER_TOO_SMALL);
    size_t need = n;
    CHECK(need == 8); /* Hello| world|,| this| is| a| test|. */
    int32_t ids[16];
    for (size_t cap = 0; cap <= need + 1; cap++) {
        for (int i = 0; i < 16; i++) ids[i] = -7;
        sb_status st = sb_tokenize(v, text, strlen(text), 0, 0, ids, cap, &n);
        CHECKF(st == (cap >= need ? SB_OK : SB_ERR_BUFFER_TOO_SMALL) && n == need, "cap %zu", cap);
        CHECKF(ids[cap] == -7, "cap %zu: wrote past the end", cap);
    }
    CHECK(sb_tokenize(v, text, (size_t)INT32_MAX + 1, 0, 0, ids, 16, &n) == SB_ERR_TEXT_TOO_LONG);
    CHECK(sb_tokenize(v, NULL, 3, 0, 0, ids, 16, &n) == SB_ERR_INVALID_ARG);
    CHECK(sb_tokenize(v, text, 3, 0, 0, NULL, 16, &n) == SB_ERR_INVALID_ARG);
    CHECK(sb_tokenize(v, "", 0, 0, 0, NULL, 0, &n) == SB_OK && n == 0);
    /* detokenize */
    CHECK(sb_tokenize(v, text, strlen(text), 0, 0, ids, 16, &n) == SB_OK);
    char buf[64];
    size_t tn = 0;
    CHECK(sb_detokenize(v, ids, n, 0, NULL, 0, &tn) == SB_ERR_BUFFER_TOO_SMALL && tn == strlen(text));
    memset(buf, 'Z', sizeof buf);
    CHECK(sb_detokenize(v, ids, n, 0, buf, tn - 1, &tn) == SB_ERR_BUFFER_TOO_SMALL && buf[tn - 1] == 'Z');
    CHECK(sb_detokenize(v, ids, n, 0, buf, tn, &tn) == SB_OK && !memcmp(buf, text, tn) && buf[tn] == 'Z');
    CHECK(sb_detokenize(v, ids, n, 0, buf, sizeof buf, &tn) == SB_OK && !strcmp(buf, text));
    int32_t bad = 151936;
    CHECK(sb_detokenize(v, &bad, 1, 0, buf, sizeof buf, &tn) == SB_ERR_RANGE);
    /* pieces, texts, attributes */
    CHECK(sb_token_to_piece(v, 151645, 0, buf, sizeof buf, &tn) == SB_OK && tn == 0);
    CHECK(sb_token_to_piece(v, 151645, 1, buf, sizeof buf, &tn) == SB_OK && !strcmp(buf, "<|im_end|>"));
    CHECK(sb_token_to_piece(v, 151645, 1, buf, 3, &tn) == SB_ERR_BUFFER_TOO_SMALL && tn == 10);
    const char *t;
    size_t tl;
    CHECK(sb_token_get_text(v, 220, &t, &tl) == SB_OK && tl == 2 && !memcmp(t, "\xC4\xA0", 2)); /* "Ġ" */
    CHECK(sb_token_to_piece(v, 220, 0, buf, sizeof buf, &tn) == SB_OK && tn == 1 && buf[0] == ' ');
    uint32_t a = 0;
    CHECK(sb_token_get_attr(v, 151645, &a) == SB_OK && (a & SB_TOKEN_ATTR_CONTROL) && (a & SB_TOKEN_ATTR_EOG));
    CHECK(sb_token_get_attr(v, 220, &a) == SB_OK && a == SB_TOKEN_ATTR_NORMAL);
    CHECK(sb_token_get_attr(v, -1, &a) == SB_ERR_RANGE);
    CHECK(sb_token_is_eog(v, 151645) && sb_token_is_eog(v, 151643) && !sb_token_is_eog(v, 151644) && !sb_token_is_eog(v, 1 << 30));
    /* chat */
    sb_chat_message m[] = {{"user", "Hi"}};
    CHECK(!strcmp(sb_vocab_chat_format(v), "chatml"));
    CHECK(sb_chat_render(v, m, 1, 1, NULL, 0, &tn) == SB_ERR_BUFFER_TOO_SMALL);
    CHECK(tn == strlen("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(sb_chat_render(v, m, 1, 1, buf, sizeof buf, &tn) == SB_OK &&
          !strcmp(buf, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    sb_chat_message bad_role[] = {{"robot", "x"}};
    CHECK(sb_chat_render(v, bad_role, 1, 1, buf, sizeof buf, &tn) == SB_ERR_INVALID_ARG);
    sb_vocab_free(v);
}

static void test_stream(void) {
    sb_vocab *v = load("llama-spm");
    if (!v) return;
    CHECK(sb_vocab_adds_bos(v) && sb_vocab_get_special(v, SB_SPECIAL_BOS) == 1);
    const char *text = "caf\xC3\xA9 \xE2\x82\xAC 5 \xF0\x9F\x98\x80!";
    int32_t ids[64];
    size_t n = 0;
    CHECK(sb_tokenize(v, text, strlen(text), 1, 0, ids, 64, &n) == SB_OK && ids[0] == 1);
    sb_detok_stream *s = NULL;
    CHECK(sb_detok_stream_create(v, 0, &s) == SB_OK);
    char out[256], buf[64];
    size_t on = 0, bn = 0;
    bool partial_seen = true;
    for (size_t i = 1; i < n; i++) { /* the prompt without BOS, as generated text would come */
        sb_status st = sb_detok_stream_push(s, ids[i], buf, 0, &bn);
        if (st == SB_ERR_BUFFER_TOO_SMALL) st = sb_detok_stream_push(s, ids[i], buf, bn, &bn);
        CHECK(st == SB_OK);
        /* what comes out is always whole UTF-8 */
        for (size_t k = 0; k < bn;) {
            unsigned char c = (unsigned char)buf[k];
            size_t l = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            partial_seen &= k + l <= bn;
            k += l;
        }
        memcpy(out + on, buf, bn);
        on += bn;
    }
    CHECK(partial_seen);
    CHECK(sb_detok_stream_flush(s, buf, sizeof buf, &bn) == SB_OK && bn == 0);
    CHECKF(on == strlen(text) && !memcmp(out, text, on), "stream: \"%.*s\"", (int)on, out);
    CHECK(sb_detok_stream_push(s, -5, buf, sizeof buf, &bn) == SB_ERR_RANGE);
    sb_detok_stream_free(s);
    sb_detok_stream_free(NULL);
    sb_vocab_free(v);
}

// ---- load errors from written GGUF files ----

static sb_status load_written(gguf_writer *w, sb_vocab **v) {
    char path[] = "/tmp/sb_tok_api_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return SB_ERR_IO;
    close(fd);
    sb_status st = gguf_writer_write(w, path);
    if (st == SB_OK) st = sb_vocab_load(path, v);
    unlink(path);
    return st;
}

static gguf_writer *base_writer(void) {
    static const sb_strview toks[] = {{"<unk>", 5}, {"<s>", 3}, {"</s>", 4}, {"a", 1}, {"b", 1}};
    static const float scores[] = {0, 0, 0, -1, -2};
    static const int32_t types[] = {2, 3, 3, 1, 1};
    gguf_writer *w = NULL;
    CHECK(gguf_writer_create(&w) == SB_OK);
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5);
    gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", toks, 5);
    gguf_writer_set_raw(w, "tokenizer.ggml.scores", SB_GGUF_ARRAY, SB_GGUF_FLOAT32, 5, scores);
    gguf_writer_set_raw(w, "tokenizer.ggml.token_type", SB_GGUF_ARRAY, SB_GGUF_INT32, 5, types);
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    return w;
}

static void expect_load(gguf_writer *w, sb_status want, const char *needle) {
    sb_vocab *v = NULL;
    sb_status st = load_written(w, &v);
    CHECKF(st == want && (want != SB_OK) == (v == NULL) && (!needle || strstr(sb_last_error(), needle)),
           "want %s naming \"%s\", got %s: %s", sb_status_str(want), needle ? needle : "", sb_status_str(st),
           sb_last_error());
    sb_vocab_free(v);
    gguf_writer_free(w);
}

static void test_load_errors(void) {
    expect_load(base_writer(), SB_OK, NULL);
    gguf_writer *w = base_writer();
    gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 5);
    expect_load(w, SB_ERR_VOCAB, "bos_token_id");
    w = base_writer();
    gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    expect_load(w, SB_ERR_VOCAB, "padding_token_id");
    w = base_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.eos_token_id", "2", 1);
    expect_load(w, SB_ERR_VOCAB, "eos_token_id");
    w = base_writer();
    static const float short_scores[] = {0, 0};
    gguf_writer_set_raw(w, "tokenizer.ggml.scores", SB_GGUF_ARRAY, SB_GGUF_FLOAT32, 2, short_scores);
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.scores");
    w = base_writer();
    gguf_writer_set_u32(w, "tokenizer.ggml.tokens", 3);
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.tokens");
    w = base_writer();
    gguf_writer_remove(w, "tokenizer.ggml.model");
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.model");
    w = base_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", 4);
    expect_load(w, SB_ERR_VOCAB_UNSUPPORTED, "bert");
    w = base_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "chameleon", 9);
    static const sb_strview merge_ab[] = {{"a b", 3}};
    gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merge_ab, 1);
    expect_load(w, SB_ERR_VOCAB_UNSUPPORTED, "chameleon");
    w = base_writer(); /* a BPE vocabulary without merges would tokenize byte by byte */
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2", 5);
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.merges is missing");
    w = base_writer();
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4);
    gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2", 5);
    gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merge_ab, 0);
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.merges is empty");
    w = base_writer();
    static const int32_t bad_types[] = {2, 3, 3, 6, 1}; /* "a" typed BYTE */
    gguf_writer_set_raw(w, "tokenizer.ggml.token_type", SB_GGUF_ARRAY, SB_GGUF_INT32, 5, bad_types);
    expect_load(w, SB_ERR_VOCAB, "tokenizer.ggml.tokens[3]");
    w = base_writer();
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    sb_vocab *v = NULL;
    CHECK(load_written(w, &v) == SB_OK && !sb_vocab_adds_bos(v));
    sb_vocab_free(v);
    gguf_writer_free(w);
    v = (sb_vocab *)1;
    CHECK(sb_vocab_load("/nonexistent/x.gguf", &v) == SB_ERR_IO && v == NULL);
    CHECK(sb_vocab_load(NULL, &v) == SB_ERR_INVALID_ARG);
    sb_vocab_free(NULL);
}

int main(void) {
    test_buffers();
    test_stream();
    test_load_errors();
    return test_summary();
}
