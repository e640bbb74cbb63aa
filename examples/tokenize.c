/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * examples/tokenize.c — tokenize text with a model's vocabulary (only the vocabulary is read, no
 * weights) and print each token id with its piece, then check that the ids decode back to the text.
 *
 *   tokenize MODEL.gguf "TEXT"
 *
 * Build against an installed SonicBoom:  cc tokenize.c $(pkg-config --cflags --libs sonicboom)
 */
#include <sonicboom.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, sb_status s) {
    fprintf(stderr, "tokenize: %s: %s: %s\n", what, sb_status_str(s), sb_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tokenize MODEL.gguf TEXT\n");
        return 2;
    }
    sb_vocab *vocab = NULL;
    sb_status s = sb_vocab_load(argv[1], &vocab);
    if (s != SB_OK) return fail("loading the vocabulary", s);

    /* ask for the count first (cap 0), then tokenize into a buffer of that size */
    const char *text = argv[2];
    size_t n = 0;
    s = sb_tokenize(vocab, text, strlen(text), 0, 0, NULL, 0, &n);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (s == SB_ERR_BUFFER_TOO_SMALL || s == SB_OK) s = ids ? sb_tokenize(vocab, text, strlen(text), 0, 0, ids, n, &n) : SB_ERR_OOM;
    if (s != SB_OK) {
        free(ids);
        sb_vocab_free(vocab);
        return fail("tokenizing", s);
    }
    for (size_t i = 0; i < n; i++) {
        char piece[256];
        size_t len = 0;
        s = sb_token_to_piece(vocab, ids[i], 0, piece, sizeof piece, &len);
        printf("%d\t%.*s\n", (int)ids[i], s == SB_OK ? (int)len : 0, piece);
    }

    /* round trip: the ids decode back to the text */
    size_t cap = strlen(text) * 4 + 16, out_len = 0;
    char *back = malloc(cap);
    s = back ? sb_detokenize(vocab, ids, n, SB_DETOK_NO_CLEAN_SPACES, back, cap, &out_len) : SB_ERR_OOM;
    int rc = 0;
    if (s != SB_OK)
        rc = fail("detokenizing", s);
    else if (out_len != strlen(text) || memcmp(back, text, out_len)) {
        fprintf(stderr, "tokenize: the %zu ids decode to \"%.*s\", not the text\n", n, (int)out_len, back);
        rc = 1;
    } else
        fprintf(stderr, "tokenize: %zu tokens; they decode back to the text\n", n);
    free(back);
    free(ids);
    sb_vocab_free(vocab);
    return rc;
}
