/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/ref_file.h — reader for llama.cpp reference-logit files (SBREF1, format in
 * shared/testdata/README.md) and the comparison the README defines (NMSE over all rows, argmax
 * agreement where the reference's top-two margin exceeds 0.05).
 */
#ifndef SB_TESTS_REF_FILE_H
#define SB_TESTS_REF_FILE_H

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_file {
    uint32_t n_vocab, n_prompt, n_decode;
    int32_t *tokens;   /* [n_prompt + n_decode] */
    float *logits;     /* [(n_prompt + n_decode) * n_vocab] */
    void *blob;
} ref_file;

static inline int ref_load(const unsigned char *p, size_t size, ref_file *r) {
    if (size < 24 || memcmp(p, "SBREF1\0\0", 8)) return -1;
    memcpy(&r->n_vocab, p + 8, 4);
    memcpy(&r->n_prompt, p + 12, 4);
    memcpy(&r->n_decode, p + 16, 4);
    uint64_t n = (uint64_t)r->n_prompt + r->n_decode;
    if (r->n_vocab == 0 || n == 0 || 24 + n * 4 + n * r->n_vocab * 4 != size) return -1;
    r->tokens = (int32_t *)malloc(n * 4);
    r->logits = (float *)malloc(n * r->n_vocab * 4);
    memcpy(r->tokens, p + 24, n * 4);
    memcpy(r->logits, p + 24 + n * 4, n * r->n_vocab * 4);
    return 0;
}

static inline void ref_free(ref_file *r) {
    free(r->tokens);
    free(r->logits);
}

typedef struct ref_cmp {
    double nmse;
    int argmax_checked, argmax_bad, first_bad_row;
} ref_cmp;

static inline ref_cmp ref_compare(const float *ours, const float *ref, int64_t rows, int64_t V) {
    ref_cmp c = {0, 0, 0, -1};
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *a = ours + r * V, *b = ref + r * V;
        int64_t ia = 0, ib = 0, ib2 = -1;
        for (int64_t i = 0; i < V; i++) {
            double d = (double)a[i] - b[i];
            num += d * d;
            den += (double)b[i] * b[i];
            if (a[i] > a[ia]) ia = i;
            if (b[i] > b[ib]) { ib2 = ib; ib = i; }
            else if (i != ib && (ib2 < 0 || b[i] > b[ib2])) ib2 = i;
        }
        if (ib2 >= 0 && b[ib] - b[ib2] > 0.05f) {
            c.argmax_checked++;
            if (ia != ib) {
                c.argmax_bad++;
                if (c.first_bad_row < 0) c.first_bad_row = (int)r;
            }
        }
    }
    c.nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
    return c;
}

/* The model dir/gguf and its reference dir/<gguf without .gguf>.ref: path (cap bytes) receives the
 * model's path; returns 1 with *r loaded, 0 when the model has no .ref, -1 when the .ref is bad. */
static inline int ref_load_for_model(const char *dir, const char *gguf, char *path, size_t cap, ref_file *r) {
    char refpath[2100];
    snprintf(path, cap, "%.1000s/%.1000s", dir, gguf);
    snprintf(refpath, sizeof refpath, "%.*s.ref", (int)(strlen(path) - 5), path);
    FILE *f = fopen(refpath, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *blob = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    int ok = blob && n > 0 && fread(blob, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    memset(r, 0, sizeof *r);
    int bad = !ok || ref_load(blob, (size_t)n, r) != 0;
    free(blob);
    return bad ? -1 : 1;
}

/* Call fn(dir, name) for every .gguf file of the shared models folder (dir = test_data_path
 * ("models")) whose name contains filter (NULL: all), in directory order. Returns the count, or -1
 * (after printing SKIP) when the folder is absent. */
static inline int ref_for_each_model(const char *dir, const char *filter, void (*fn)(const char *dir, const char *name)) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("SKIP: %s not found\n", dir);
        return -1;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf") && (!filter || strstr(e->d_name, filter))) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        fn(dir, names[i]);
        free(names[i]);
    }
    return n;
}

#endif
