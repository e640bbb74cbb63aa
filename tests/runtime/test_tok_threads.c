/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_tok_threads.c — one tok_vocab shared by 4 threads: each tokenizes and
 * detokenizes the same texts (short ones and a 64 KiB one that uses the word cache and a private
 * PCRE2 stack) many times; every result must equal the single-threaded one. Catches any shared
 * mutable state in the tokenizer (tokenizer.h promises concurrent use is safe).
 */
#include "test.h"

#include "format/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

#include <pthread.h>

enum { N_TEXTS = 5, N_THREADS = 4, ROUNDS = 20 };

static const char *short_texts[N_TEXTS - 1] = {
    "Hello world! It's 2024 and we're testing <|im_start|> tokens \xF0\x9F\x98\x80.",
    "\n\n\t  spaces   and\r\nnewlines\xC2\xA0here",
    "caf\xC3\xA9 na\xC3\xAFve \xE4\xBD\xA0\xE5\xA5\xBD 12345678 \xff\xfe broken",
    "",
};

typedef struct job {
    const tok_vocab *v;
    const char *texts[N_TEXTS];
    size_t lens[N_TEXTS];
    tok_ids ref[N_TEXTS];
    tok_bytes ref_text[N_TEXTS];
    int bad;
} job;

static int run_once(const job *j, int k, bool compare) {
    tok_ids ids = {0};
    tok_bytes b = {0};
    int bad = 0;
    bad += tok_tokenize(j->v, j->texts[k], j->lens[k], true, k & 1, &ids) != SB_OK;
    bad += tok_detokenize(j->v, ids.ids, ids.n, 0, &b) != SB_OK;
    if (compare) {
        bad += ids.n != j->ref[k].n || (ids.n && memcmp(ids.ids, j->ref[k].ids, ids.n * 4));
        bad += b.n != j->ref_text[k].n || (b.n && memcmp(b.p, j->ref_text[k].p, b.n));
    }
    tok_ids_free(&ids);
    tok_bytes_free(&b);
    return bad;
}

static void *worker(void *arg) {
    job *j = arg;
    int bad = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < N_TEXTS; k++) bad += run_once(j, k, true);
    __atomic_add_fetch(&j->bad, bad, __ATOMIC_RELAXED);
    return NULL;
}

static void run(const char *name, const char *big, size_t big_n) {
    char rel[128];
    snprintf(rel, sizeof rel, "vocab/ggml-vocab-%s.gguf", name);
    gguf_file f = {0};
    if (gguf_open(test_data_path(rel), &f) != SB_OK) {
        printf("SKIP %s: shared test data absent\n", name);
        return;
    }
    job j = {0};
    tok_vocab *v = NULL;
    CHECK(tok_vocab_load_gguf(&f, &v) == SB_OK);
    gguf_close(&f);
    if (!v) return;
    j.v = v;
    for (int k = 0; k < N_TEXTS - 1; k++) {
        j.texts[k] = short_texts[k];
        j.lens[k] = strlen(short_texts[k]);
    }
    j.texts[N_TEXTS - 1] = big;
    j.lens[N_TEXTS - 1] = big_n;
    for (int k = 0; k < N_TEXTS; k++) {
        CHECK(tok_tokenize(v, j.texts[k], j.lens[k], true, k & 1, &j.ref[k]) == SB_OK);
        CHECK(tok_detokenize(v, j.ref[k].ids, j.ref[k].n, 0, &j.ref_text[k]) == SB_OK);
    }
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, &j) == 0);
    for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
    CHECKF(j.bad == 0, "%s: %d results differ from the single-threaded ones", name, j.bad);
    printf("%s: %d threads x %d rounds x %d texts agree\n", name, N_THREADS, ROUNDS, N_TEXTS);
    for (int k = 0; k < N_TEXTS; k++) {
        tok_ids_free(&j.ref[k]);
        tok_bytes_free(&j.ref_text[k]);
    }
    tok_vocab_free(v);
}

int main(void) {
    size_t n = 64 << 10;
    char *big = malloc(n);
    uint64_t seed = 7;
    static const char *w[] = {"the ", "tokenizer ", "runs, ", "in ", "parallel. ", "\n", "\xC3\xA9t\xC3\xA9 ", "42 "};
    for (size_t o = 0; o < n;) {
        const char *x = w[test_rand_u64(&seed) % 8];
        size_t l = strlen(x) < n - o ? strlen(x) : n - o;
        memcpy(big + o, x, l);
        o += l;
    }
    run("qwen2", big, n);
    run("llama-spm", big, n);
    run("gemma-4", big, n);
    free(big);
    return test_summary();
}
