/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * fuzz/fuzz_tokenize.c — libFuzzer target for the tokenizer (robustness.md K1). Byte 0 of the
 * input picks the vocabulary and the flags, the rest is text:
 *   vocab 0..2: the GGUF files named by $SB_FUZZ_VOCABS (colon-separated; e.g. the shared qwen2,
 *   llama-spm and gemma-4 vocabs), else small built-in SPM / BPE / Gemma 4 vocabularies;
 *   vocab 3: the input itself describes a vocabulary (texts split at NUL, then merges) and is fed
 *   to tok_vocab_build, which must fail cleanly or build something that tokenizes.
 * Checks: no crash, every id in [0, n_vocab), detokenize and the streaming decoder succeed and
 * agree, SPM/Gemma 4 round trips are exact for vocabs 0..2 (U+2581 -> space aside).
 */
#include "runtime/tokenizer/tok_internal.h"

#include "format/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tok_vocab *vocabs[3];

static tok_vocab *builtin(int kind) {
    static char names[256][8];
    static sb_strview texts[300];
    static int32_t types[300];
    int n = 0;
    const char *base[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81\x61", "\n", "\n\n",
                          "<|im_start|>", "<|u|>"};
    for (size_t i = 0; i < sizeof base / sizeof *base; i++) {
        texts[n] = (sb_strview){base[i], strlen(base[i])};
        types[n++] = i < 3 || i == 10 ? TOK_TYPE_CONTROL : i == 11 ? TOK_TYPE_USER_DEFINED : TOK_TYPE_NORMAL;
    }
    for (int b = 0; b < 256; b++) {
        if (kind == 1) { /* byte-level: the mapped byte */
            size_t l = tok_utf8_encode(tok_byte_to_cp((unsigned char)b), (unsigned char *)names[b]);
            texts[n] = (sb_strview){names[b], l};
            types[n++] = TOK_TYPE_NORMAL;
        } else {
            snprintf(names[b], 8, "<0x%02X>", b);
            texts[n] = (sb_strview){names[b], 6};
            types[n++] = TOK_TYPE_BYTE;
        }
    }
    static const sb_strview merges[] = {{"a b", 3}, {"\xE2\x96\x81 a", 5}, {"\n \n", 3}};
    tok_vocab_spec s;
    tok_vocab_spec_init(&s);
    s.model = kind == 0 ? "llama" : kind == 1 ? "gpt2" : "gemma4";
    s.pre = "llama-bpe";
    s.n_tokens = n;
    s.texts = texts;
    s.types = types;
    s.merges = kind == 1 ? NULL : merges;
    s.n_merges = kind == 0 ? 0 : kind == 1 ? 0 : 3;
    s.bos = 1;
    s.eos = 2;
    tok_vocab *v = NULL;
    if (tok_vocab_build(&s, &v) != SB_OK) abort();
    return v;
}

static void init(void) {
    const char *env = getenv("SB_FUZZ_VOCABS");
    char *list = env ? strdup(env) : NULL, *save = NULL;
    char *p = list ? strtok_r(list, ":", &save) : NULL;
    for (int k = 0; k < 3; k++) {
        if (p) {
            gguf_file f;
            if (gguf_open(p, &f) != SB_OK || tok_vocab_load_gguf(&f, &vocabs[k]) != SB_OK) abort();
            gguf_close(&f);
            p = strtok_r(NULL, ":", &save);
        } else {
            vocabs[k] = builtin(k);
        }
    }
    free(list);
}

static void exercise(const tok_vocab *v, const char *t, size_t n, unsigned flags, bool check_rt) {
    tok_ids ids = {0};
    if (tok_tokenize(v, t, n, flags & 1, flags & 2, &ids) != SB_OK) abort();
    for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] < 0 || ids.ids[i] >= tok_n_tokens(v)) abort();
    tok_bytes a = {0}, b = {0};
    if (tok_detokenize(v, ids.ids, ids.n, TOK_DETOK_NO_CLEAN_SPACES | (flags & 4 ? TOK_DETOK_UNPARSE_SPECIAL : 0), &a) != SB_OK)
        abort();
    tok_stream s;
    tok_stream_init(&s, v, (flags & 4) != 0);
    for (size_t i = 0; i < ids.n; i++)
        if (tok_stream_push(&s, ids.ids[i], &b) != SB_OK) abort();
    if (tok_stream_flush(&s, &b) != SB_OK) abort();
    /* without BOS and specials the stream equals the sequence decoder */
    if (!(flags & 3) && (a.n != b.n || (a.n && memcmp(a.p, b.p, a.n)))) abort();
    for (size_t i = 0; i < ids.n; i++) /* SPM prefixes a space after a special token: no round trip */
        if (tok_attr(v, ids.ids[i]) & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) check_rt = false;
    if (check_rt && !(flags & 3) && tok_get_model(v) != TOK_MODEL_BPE) { /* exact round trip */
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(t + i, "\xE2\x96\x81", 3)) { if (a.p[o++] != ' ') abort(); i += 3; }
            else if (o >= a.n || a.p[o++] != t[i++]) abort();
        }
        if (o != a.n) abort();
    }
    tok_ids_free(&ids);
    tok_bytes_free(&a);
    tok_bytes_free(&b);
}

static void from_spec(const uint8_t *d, size_t n) {
    sb_strview texts[64], merges[16];
    int32_t types[64];
    int nt = 0, nm = 0;
    size_t o = 0;
    while (o < n && nt < 64) { /* texts until an empty one, then merges */
        size_t e = o;
        while (e < n && d[e]) e++;
        if (e == o) { o++; break; }
        texts[nt] = (sb_strview){(const char *)d + o, e - o};
        types[nt] = d[o] % 7;
        nt++;
        o = e + 1;
    }
    while (o < n && nm < 16) {
        size_t e = o;
        while (e < n && d[e]) e++;
        merges[nm++] = (sb_strview){(const char *)d + o, e - o};
        o = e + 1;
    }
    tok_vocab_spec s;
    tok_vocab_spec_init(&s);
    s.model = n && d[0] & 1 ? "gemma4" : n && d[0] & 2 ? "gpt2" : "llama";
    s.pre = "qwen2";
    s.n_tokens = nt;
    s.texts = texts;
    s.types = types;
    s.merges = merges;
    s.n_merges = nm;
    s.bos = nt > 1 ? 1 : -1;
    s.eos = nt > 2 ? 2 : -1;
    tok_vocab *v = NULL;
    if (tok_vocab_build(&s, &v) != SB_OK) return;
    /* arbitrary vocabularies need not round-trip (missing byte tokens, merges into control tokens) */
    exercise(v, (const char *)d, n, 0, false);
    exercise(v, (const char *)d, n, 3, false);
    tok_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!vocabs[0]) init();
    if (size == 0) return 0;
    unsigned sel = data[0];
    if ((sel & 3) == 3) {
        from_spec(data + 1, size - 1);
        return 0;
    }
    exercise(vocabs[sel & 3], (const char *)data + 1, size - 1, sel >> 2, true);
    return 0;
}
