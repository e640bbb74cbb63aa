/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/format/test_gguf_truncate.c — every shared GGUF file cut short (robustness.md P2): at every
 * byte of the header/metadata/tensor-info region (for regions over 64 KiB: every byte of the first
 * 32 KiB, the last 256 bytes and 100 random cuts, since each parse is linear in the cut and the whole region
 * would be quadratic), and at 1000 random offsets in the data region. Every cut must give an error
 * (or SB_OK only when the cut falls after the end of the last tensor's data); never a crash. Prefixes
 * up to 256 KiB are copied into an exact-size buffer so ASan catches any over-read; longer ones are
 * parsed in place (copying megabytes per cut would dominate the run time).
 */
#include "format/gguf.h"
#include "base/status.h"
#include "test.h"

#include <dirent.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static void cut_at(const uint8_t *p, size_t n, uint64_t data_end, const char *file) {
    int own = n <= (256u << 10);
    uint8_t *copy = own ? (uint8_t *)malloc(n ? n : 1) : (uint8_t *)p;
    if (own) memcpy(copy, p, n);
    gguf_file f;
    sb_status s = gguf_parse(copy, n, &f);
    if (s == SB_OK) {
        gguf_close(&f);
        CHECKF(n >= data_end, "%s cut at %zu (data ends at %llu) parsed OK", file, n, (unsigned long long)data_end);
    } else {
        CHECKF(sb_status_family(s) == SB_ERR_FORMAT && sb_last_error()[0], "%s cut at %zu: %s", file, n, sb_status_str(s));
    }
    if (own) free(copy);
}

static int run_file(const char *path, const char *name) {
    size_t size;
    uint8_t *p = test_read_file(path, &size);
    if (!p) return 0;
    gguf_file f;
    sb_status s = gguf_parse(p, size, &f);
    CHECKF(s == SB_OK, "%s: %s", name, sb_last_error());
    if (s != SB_OK) {
        free(p);
        return 1;
    }
    uint64_t head = f.data_offset, data_end = 0;
    for (int64_t i = 0; i < f.n_tensors; i++)
        if (f.data_offset + f.tensors[i].offset + f.tensors[i].nbytes > data_end)
            data_end = f.data_offset + f.tensors[i].offset + f.tensors[i].nbytes;
    if (f.n_tensors == 0) data_end = head;
    gguf_close(&f);
    int before = test_failed_;
    if (head <= 65536) {
        for (size_t n = 0; n < head; n++) cut_at(p, n, data_end, name);
    } else {
        for (size_t n = 0; n < 32768; n++) cut_at(p, n, data_end, name);
        for (size_t n = head - 256; n < head; n++) cut_at(p, n, data_end, name);
        for (int k = 0; k < 100; k++) cut_at(p, (size_t)(test_rand_u64(&rng) % head), data_end, name);
    }
    if (size > head)
        for (int k = 0; k < 1000; k++) cut_at(p, (size_t)(head + test_rand_u64(&rng) % (size - head)), data_end, name);
    printf("%-40s header %8llu bytes, data %9llu bytes: %s\n", name, (unsigned long long)head,
           (unsigned long long)(size - head), test_failed_ == before ? "ok" : "FAILED");
    free(p);
    return 1;
}

static int run_dir(const char *rel) {
    char dirpath[4096];
    snprintf(dirpath, sizeof dirpath, "%s", test_data_path(rel));
    DIR *d = opendir(dirpath);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
        n += run_file(path, e->d_name);
    }
    closedir(d);
    return n;
}

int main(void) {
    int n = run_dir("models") + run_dir("vocab");
    if (n == 0) {
        printf("SKIP: shared test data not found at %s\n", test_data_path(""));
        return 0;
    }
    printf("%d files truncated\n", n);
    return test_summary();
}
