/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/test.h — the tiny test harness every test uses: CHECK macros that count, a closing line
 * "N passed, N failed" that CI's runner reads, and helpers to find the shared test data.
 * A test's main() ends with `return test_summary();` (exit 1 on any failure).
 * SKIP is for absent shared data only, and says so.
 */
#ifndef SB_TESTS_TEST_H
#define SB_TESTS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>

static int test_passed_, test_failed_;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) test_passed_++;                                                       \
        else { test_failed_++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
    } while (0)

#define CHECKF(cond, ...)                                                               \
    do {                                                                                \
        if (cond) test_passed_++;                                                       \
        else { test_failed_++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
               fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); }                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        CHECKF(a_ == b_, "%s = %lld, expected %lld", #a, a_, b_);                       \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

/* Path of a file under the shared test data ($SB_TESTDATA or ../shared/testdata). */
static inline const char *test_data_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("SB_TESTDATA");
    if (!root || !*root) root = "../shared/testdata";
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

/* The host C++ compiler ($CXX, else c++) the emulated-device tests build with (tests/codegen/emu),
 * or NULL when it does not run (those tests then SKIP, exit 77). */
static inline const char *test_host_cxx(void) {
    const char *cxx = getenv("CXX");
    if (!cxx || !*cxx) cxx = "c++";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --version > /dev/null 2>&1", cxx);
    return system(cmd) == 0 ? cxx : NULL;
}

/* Read a whole file into malloc'd memory; NULL if absent. */
static inline unsigned char *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = (unsigned char *)malloc(n > 0 ? (size_t)n : 1);
    if (p && n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    fclose(f);
    if (p) *size = (size_t)n;
    return p;
}

/* xorshift64* — deterministic test randomness; seed printed by tests that use it. */
static inline uint64_t test_rand_u64(uint64_t *s) {
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}
static inline float test_rand_uniform(uint64_t *s) { return (float)((test_rand_u64(s) >> 40) * (1.0 / 16777216.0)); }
static inline float test_rand_normal(uint64_t *s) {
    float u1 = test_rand_uniform(s) + 1e-7f, u2 = test_rand_uniform(s);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}
/* n normal values times scale in a new malloc'ed array (the caller frees it) */
static inline float *test_rand_normals(uint64_t *s, int64_t n, float scale) {
    float *x = (float *)malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; x && i < n; i++) x[i] = test_rand_normal(s) * scale;
    return x;
}

#endif
