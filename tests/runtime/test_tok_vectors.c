/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_tok_vectors.c — tokenizer conformance against llama.cpp's vectors
 * (../shared/testdata/vocab/ggml-vocab-<name>.gguf + .inp/.out; architectures.md §8.7):
 * every vector of every vocab must match exactly with add_special = false, parse_special = false,
 * and detokenize(tokenize(text)) must give the text back (clean-up of spaces off).
 * The GGUF is closed before tokenizing, so the vocab must own its text.
 */
#include "test.h"

#include "format/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

#include <time.h>

static const char *const sep = "\n__ggml_vocab_test__\n";

static void run_vocab(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    char path[4096];
    snprintf(path, sizeof path, "%s", test_data_path(rel));
    gguf_file f = {0};
    if (gguf_open(path, &f) != SB_OK) {
        printf("SKIP %s: shared test data absent or unreadable (%s)\n", name, sb_last_error());
        return;
    }
    tok_vocab *v = NULL;
    clock_t t0 = clock();
    sb_status st = tok_vocab_load_gguf(&f, &v);
    double load_ms = 1e3 * (double)(clock() - t0) / CLOCKS_PER_SEC;
    gguf_close(&f);
    CHECKF(st == SB_OK, "%s: load: %s: %s", name, sb_status_str(st), sb_last_error());
    if (st != SB_OK) return;

    char ipath[4200], opath[4200];
    snprintf(ipath, sizeof ipath, "%s.inp", path);
    snprintf(opath, sizeof opath, "%s.out", path);
    size_t ni = 0, no = 0;
    char *inp = (char *)test_read_file(ipath, &ni), *outp = (char *)test_read_file(opath, &no);
    CHECKF(inp && outp, "%s: .inp/.out missing", name);
    if (!inp || !outp) { free(inp); free(outp); tok_vocab_free(v); return; }
    char *inp_z = malloc(ni + 1), *out_z = malloc(no + 1);
    memcpy(inp_z, inp, ni); inp_z[ni] = 0;
    memcpy(out_z, outp, no); out_z[no] = 0;

    int total = 0, pass = 0, rt_pass = 0;
    char *ip = inp_z, *op = out_z;
    size_t seplen = strlen(sep);
    for (;;) {
        /* the texts are separated by sep; a non-empty remainder after the last one is a text too */
        char *e = strstr(ip, sep);
        if (!e && !*ip) break;
        if (!e) e = ip + strlen(ip);
        size_t tlen = (size_t)(e - ip);
        char *nl = strchr(op, '\n');
        if (nl) *nl = 0;
        /* expected ids */
        int32_t exp[4096];
        size_t ne = 0;
        for (char *q = op; *q;) {
            while (*q == ' ' || *q == '\r') q++;
            if (!*q) break;
            exp[ne++] = (int32_t)strtol(q, &q, 10);
        }
        tok_ids got = {0};
        st = tok_tokenize(v, ip, tlen, false, false, &got);
        bool ok = st == SB_OK && got.n == ne && (ne == 0 || !memcmp(got.ids, exp, ne * sizeof *exp));
        total++;
        pass += ok;
        if (!ok) {
            fprintf(stderr, "%s vector %d \"%.*s\":\n  want", name, total, (int)(tlen > 60 ? 60 : tlen), ip);
            for (size_t k = 0; k < ne; k++) fprintf(stderr, " %d", exp[k]);
            fprintf(stderr, "\n  got ");
            for (size_t k = 0; k < got.n; k++) fprintf(stderr, " %d", got.ids[k]);
            fprintf(stderr, "\n");
        }
        CHECKF(ok, "%s vector %d", name, total);
        tok_bytes text = {0};
        st = tok_detokenize(v, got.ids, got.n, TOK_DETOK_NO_CLEAN_SPACES, &text);
        bool rt = st == SB_OK && text.n == tlen && (tlen == 0 || !memcmp(text.p, ip, tlen));
        rt_pass += rt;
        CHECKF(rt, "%s vector %d round trip: \"%.*s\" -> \"%.*s\"", name, total, (int)tlen, ip, (int)text.n,
               text.p ? text.p : "");
        tok_bytes_free(&text);
        tok_ids_free(&got);
        if (!*e) break;
        ip = e + seplen;
        if (!nl) break;
        op = nl + 1;
    }
    printf("vocab %-10s: %d/%d vectors match, %d/%d round trips exact (load %.0f ms, %d tokens)\n", name, pass,
           total, rt_pass, total, load_ms, tok_n_tokens(v));
    CHECKF(total >= 46, "%s: only %d vectors read", name, total);
    free(inp); free(outp); free(inp_z); free(out_z);
    tok_vocab_free(v);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) run_vocab(argv[i]);
    } else {
        const char *names[] = {"gemma-4", "gpt-2", "llama-bpe", "llama-spm", "qwen2"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) run_vocab(names[i]);
    }
    return test_summary();
}
