/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/bench_tokenize.c — tokenizer throughput through the public API: MB/s of English-like
 * text on one core, per vocabulary, at two sizes (the second 4x the first, so the ratio shows
 * whether time grows linearly). Target (issue 4): >= 10 MB/s for qwen2 and llama-bpe.
 * usage: bench_tokenize [-n MB] [vocab.gguf ...]   (default: the shared vocab files, 8 MB;
 *        -n 100 is the 100 MB linear-time check)
 * The text is generated from a fixed list of English words, punctuation, digits and newlines
 * with a fixed seed, so runs are comparable; it is not a substitute for a real corpus.
 */
#include "sonicboom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *make_text(size_t n) {
    static const char *w[] = {"the ", "of ", "and ", "to ", "in ", "a ", "is ", "that ", "for ", "it ", "was ",
                              "on ", "with ", "he ", "as ", "you ", "do ", "at ", "this ", "but ", "his ", "by ",
                              "from ", "they ", "we ", "say ", "her ", "she ", "or ", "an ", "will ", "my ",
                              "one ", "all ", "would ", "there ", "their ", "what ", "so ", "up ", "out ", "if ",
                              "about ", "who ", "get ", "which ", "go ", "me ", "when ", "make ", "can ", "like ",
                              "time ", "no ", "just ", "him ", "know ", "take ", "people ", "into ", "year ",
                              "your ", "good ", "some ", "could ", "them ", "see ", "other ", "than ", "then ",
                              "now ", "look ", "only ", "come ", "its ", "over ", "think ", "also ", "back ",
                              "after ", "use ", "two ", "how ", "our ", "work ", "first ", "well ", "way ",
                              "even ", "new ", "want ", "because ", "any ", "these ", "give ", "day ", "most ",
                              "us ", "tokenization, ", "isn't ", "we're ", "1984 ", "3.14 ", "(e.g. ", "said: ",
                              "\"quoted\" ", "end.\n", "done!\n\n", "Really? "};
    const size_t nw = sizeof w / sizeof *w;
    char *t = malloc(n);
    if (!t) return NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t o = 0; o < n;) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        const char *x = w[(s * 2685821657736338717ull >> 33) % nw];
        size_t l = strlen(x);
        if (l > n - o) l = n - o;
        memcpy(t + o, x, l);
        o += l;
    }
    return t;
}

static int run(const char *path, const char *text, size_t n) {
    sb_vocab *v = NULL;
    double t0 = now();
    sb_status st = sb_vocab_load(path, &v);
    double t_load = now() - t0;
    if (st != SB_OK) {
        fprintf(stderr, "%s: %s: %s\n", path, sb_status_str(st), sb_last_error());
        return 1;
    }
    size_t cap = n + 16, got = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return 1;
    double rate[2], secs[2];
    size_t sizes[2] = {n / 4, n};
    for (int k = 0; k < 2; k++) {
        double a = now();
        st = sb_tokenize(v, text, sizes[k], 0, 0, ids, cap, &got);
        secs[k] = now() - a;
        rate[k] = (double)sizes[k] / 1e6 / secs[k];
        if (st != SB_OK) fprintf(stderr, "%s: tokenize: %s\n", path, sb_last_error());
    }
    const char *name = strrchr(path, '/');
    printf("%-28s load %6.0f ms | %5.1f MB: %6.1f MB/s | %5.1f MB: %6.1f MB/s (%.2f chars/token) | time ratio %.2f (4.0 = linear)\n",
           name ? name + 1 : path, 1e3 * t_load, (double)sizes[0] / 1e6, rate[0], (double)sizes[1] / 1e6, rate[1],
           (double)n / (double)(got ? got : 1), secs[1] / secs[0]);
    free(ids);
    sb_vocab_free(v);
    return 0;
}

int main(int argc, char **argv) {
    double mb = 8;
    int first = 1;
    if (argc > 2 && !strcmp(argv[1], "-n")) {
        mb = atof(argv[2]);
        first = 3;
    }
    if (mb <= 0 || mb > 1900) {
        fprintf(stderr, "usage: bench_tokenize [-n MB (0 < MB <= 1900)] [vocab.gguf ...]\n");
        return 2;
    }
    size_t n = (size_t)(mb * 1e6);
    char *text = make_text(n);
    if (!text) return 1;
    int rc = 0;
    if (first < argc) {
        for (int i = first; i < argc; i++) rc |= run(argv[i], text, n);
    } else {
        const char *root = getenv("SB_TESTDATA");
        if (!root || !*root) root = "../shared/testdata";
        const char *names[] = {"qwen2", "llama-bpe", "gpt-2", "llama-spm", "gemma-4"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/vocab/ggml-vocab-%s.gguf", root, names[i]);
            rc |= run(p, text, n);
        }
    }
    free(text);
    return rc;
}
