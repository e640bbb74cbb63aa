/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_chat.c — chat templates: recognition from tokenizer.chat_template by
 * signature (including the templates stored in the shared vocab files) and exact rendered prompts
 * for ChatML, Llama 3, Gemma 3, Gemma 4 (with and without the empty thought channel) and the
 * fallback, with and without the generation prompt; bad roles are errors.
 */
#include "test.h"

#include "format/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

static void expect(tok_chat_kind k, const tok_chat_msg *m, size_t n, bool gen, const char *want) {
    tok_bytes b = {0};
    sb_status st = tok_chat_render(k, m, n, gen, &b);
    bool ok = st == SB_OK && b.n == strlen(want) && !memcmp(b.p ? b.p : "", want, b.n);
    CHECKF(ok, "%s gen=%d:\n--- got (%s)\n%.*s\n--- want\n%s", tok_chat_kind_name(k), gen, sb_status_str(st), (int)b.n,
           b.p ? b.p : "", want);
    tok_bytes_free(&b);
}

static void test_render(void) {
    const tok_chat_msg conv[] = {
        {"system", "You are terse."},
        {"user", " Hi there!\n"},
        {"assistant", "Hello."},
        {"user", "2+2?"},
    };
    expect(TOK_CHAT_CHATML, conv, 4, true,
           "<|im_start|>system\nYou are terse.<|im_end|>\n"
           "<|im_start|>user\n Hi there!\n<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n"
           "<|im_start|>user\n2+2?<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect(TOK_CHAT_FALLBACK, conv + 1, 1, false, "<|im_start|>user\n Hi there!\n<|im_end|>\n");
    expect(TOK_CHAT_LLAMA3, conv, 4, true,
           "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(TOK_CHAT_GEMMA3, conv, 4, true,
           "<start_of_turn>user\nYou are terse.\n\nHi there!<end_of_turn>\n"
           "<start_of_turn>model\nHello.<end_of_turn>\n"
           "<start_of_turn>user\n2+2?<end_of_turn>\n"
           "<start_of_turn>model\n");
    expect(TOK_CHAT_GEMMA3, conv + 1, 1, false, "<start_of_turn>user\nHi there!<end_of_turn>\n");
    expect(TOK_CHAT_GEMMA4, conv, 4, true,
           "<|turn>system\nYou are terse.<turn|>\n"
           "<|turn>user\nHi there!<turn|>\n"
           "<|turn>model\nHello.<turn|>\n"
           "<|turn>user\n2+2?<turn|>\n"
           "<|turn>model\n");
    expect(TOK_CHAT_GEMMA4_THOUGHT, conv + 3, 1, true,
           "<|turn>user\n2+2?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
    expect(TOK_CHAT_GEMMA4_THOUGHT, conv + 3, 1, false, "<|turn>user\n2+2?<turn|>\n");
    expect(TOK_CHAT_CHATML, NULL, 0, true, "<|im_start|>assistant\n");
    /* errors */
    const tok_chat_msg bad[] = {{"user", "a"}, {"tool", "b"}};
    tok_bytes b = {0};
    CHECK(tok_chat_render(TOK_CHAT_CHATML, bad, 2, true, &b) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "message 1"));
    const tok_chat_msg nul[] = {{"user", NULL}};
    CHECK(tok_chat_render(TOK_CHAT_LLAMA3, nul, 1, true, &b) == SB_ERR_INVALID_ARG);
    tok_bytes_free(&b);
}

static void test_detect(void) {
    const struct { const char *t; tok_chat_kind k; } cases[] = {
        {"{% for m in messages %}<|im_start|>{{ m.role }}", TOK_CHAT_CHATML},
        {"{{ bos_token }}<|start_header_id|>{{ role }}<|end_header_id|>", TOK_CHAT_LLAMA3},
        {"{{ bos_token }}{% if ... %}<start_of_turn>user", TOK_CHAT_GEMMA3},
        {"{{ bos_token }}<|turn>system\\n ... <|turn>model\\n", TOK_CHAT_GEMMA4},
        {"<|turn>model\\n{{- '<|channel>thought\\n<channel|>' -}}", TOK_CHAT_GEMMA4_THOUGHT},
        {"[INST] {{ content }} [/INST]", TOK_CHAT_FALLBACK},
        {"", TOK_CHAT_FALLBACK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECKF(tok_chat_detect(cases[i].t, strlen(cases[i].t)) == cases[i].k, "detect \"%s\"", cases[i].t);
    CHECK(tok_chat_detect(NULL, 0) == TOK_CHAT_FALLBACK);
    /* templates in the shared vocab files */
    const struct { const char *name; tok_chat_kind k; } files[] = {
        {"qwen2", TOK_CHAT_CHATML}, {"gemma-4", TOK_CHAT_GEMMA4_THOUGHT}, {"gpt-2", TOK_CHAT_FALLBACK}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", files[i].name);
        gguf_file f = {0};
        if (gguf_open(test_data_path(rel), &f) != SB_OK) {
            printf("SKIP %s: shared test data absent\n", files[i].name);
            continue;
        }
        tok_vocab *v = NULL;
        CHECKF(tok_vocab_load_gguf(&f, &v) == SB_OK, "%s: %s", files[i].name, sb_last_error());
        gguf_close(&f);
        if (v) CHECKF(tok_chat_kind_of(v) == files[i].k, "%s: detected %s", files[i].name, tok_chat_kind_name(tok_chat_kind_of(v)));
        if (v && !strcmp(files[i].name, "qwen2")) { /* rendered prompt -> ids, special tokens parsed */
            const tok_chat_msg m[] = {{"user", "Hi"}};
            tok_bytes b = {0};
            tok_ids ids = {0};
            CHECK(tok_chat_render(tok_chat_kind_of(v), m, 1, true, &b) == SB_OK);
            CHECK(tok_tokenize(v, b.p, b.n, true, true, &ids) == SB_OK);
            const int32_t want[] = {151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198};
            CHECKF(ids.n == 9 && !memcmp(ids.ids, want, sizeof want), "qwen2 chat prompt ids (%zu)", ids.n);
            tok_ids_free(&ids);
            tok_bytes_free(&b);
        }
        tok_vocab_free(v);
    }
}

int main(void) {
    test_render();
    test_detect();
    return test_summary();
}
