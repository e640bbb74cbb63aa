/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_engine_warmup.c — sb_engine_warmup (sonicboom.h "batched sequences") on the
 * embedded model:
 *   - the classes readied equal a brute-force count over every step shape within the limits
 *     (items 1..max_tokens, logit rows 0..max_rows, each shape's (T, rows) class as the header
 *     defines it), and n_plans_built says each was built once;
 *   - then a step of every such shape builds no plan (and on CUDA captures no graph), while a
 *     step outside the limits does build one (the counter can move);
 *   - warmed plans are kept: after more other classes than the replaceable cache holds, the
 *     warmed class still builds nothing;
 *   - the warm-up changes no result: a prompt's logits on a warmed engine equal a cold engine's
 *     (the CPU bit for bit; CUDA within 1e-6 NMSE), so its padding runs wrote no sequence's cache;
 *   - argument errors.
 * On the CPU always; on CUDA too where a device is usable (SKIP otherwise).
 */
#include "sonicboom.h"
#include "test.h"

#include <stdbool.h>
#include <stdlib.h>

#define NB 16   /* n_batch of the main engine */
#define NSEQ 4  /* n_seq_max: max_rows 0 means this */

static int device = SB_DEVICE_CPU;

static sb_engine *make(sb_model *m, int64_t n_batch, int32_t n_seq) {
    sb_engine_params ep;
    sb_engine_default_params(&ep);
    ep.n_seq_max = n_seq;
    ep.n_ctx = 128;
    ep.n_batch = n_batch;
    ep.n_threads = 2;
    ep.device = device;
    sb_engine *e = NULL;
    const sb_status st = sb_engine_create(m, &ep, &e);
    CHECKF(st == SB_OK, "engine: %s %s", sb_status_str(st), sb_last_error());
    return e;
}

static sb_engine_stats stats(const sb_engine *e) {
    sb_engine_stats s;
    sb_engine_get_stats(e, &s);
    return s;
}

/* the header's rounding: the smallest power of two >= n, at most cap */
static int64_t pow2_at_most(int64_t n, int64_t cap) {
    int64_t b = 1;
    while (b < n) b *= 2;
    return b < cap ? b : cap;
}

/* distinct (T, rows) classes of every step of n in [1, max_tokens] items and r in [0, min(n,
 * max_rows)] logit rows, counted by brute force */
static int count_classes(int64_t n_batch, int64_t max_tokens, int64_t max_rows) {
    bool seen[65][65] = {{false}}; /* n_batch <= 64 */
    int k = 0;
    for (int64_t n = 1; n <= max_tokens; n++)
        for (int64_t r = 0; r <= n && r <= max_rows; r++) {
            const int64_t T = pow2_at_most(n, n_batch), rows = r ? pow2_at_most(r, T) : 1;
            if (!seen[T][rows]) seen[T][rows] = true, k++;
        }
    return k;
}

/* one step of n items of sequence 0 (a prompt chunk) wanting the last r rows; the sequence is
 * emptied again afterwards */
static sb_status shape_step(sb_engine *e, int32_t seq, int64_t n, int64_t r, int64_t V) {
    sb_batch_item it[64];
    for (int64_t i = 0; i < n; i++) it[i] = (sb_batch_item){.seq = seq, .token = (int32_t)(1 + (i * 7919) % (V - 1)), .logits = i >= n - r};
    const sb_status st = sb_engine_step(e, it, (size_t)n, NULL);
    sb_seq_truncate(e, seq, 0);
    return st;
}

/* classes readied = the brute-force count; every shape within the limits then builds and captures
 * nothing; one outside builds one plan */
static void test_classes(sb_model *m, int64_t V) {
    sb_engine *e = make(m, NB, NSEQ);
    if (!e) return;
    const sb_engine_stats s0 = stats(e);
    CHECK_EQ_INT(s0.n_plans_built, 1); /* the decode plan, at creation */
    CHECK_EQ_INT(s0.n_plans_warm, 0);
    CHECK(sb_engine_warmup(e, 0, 0) == SB_OK); /* n_batch items, n_seq_max rows */
    const sb_engine_stats s1 = stats(e);
    const int want = count_classes(NB, NB, NSEQ);
    printf("warm-up (n_batch %d, rows %d): %lld classes (brute force %d), %lld plans built, %lld graphs captured\n", NB, NSEQ,
           (long long)s1.n_plans_warm, want, (long long)s1.n_plans_built, (long long)s1.n_graph_captures);
    CHECK_EQ_INT(want, 12); /* T 1, 2, 4, 8, 16 with rows 1 | 1, 2 | 1, 2, 4 (three times) */
    CHECK_EQ_INT(s1.n_plans_warm, want);
    CHECK_EQ_INT(s1.n_plans_built, want); /* the decode plan reused, the others built once */
    CHECK(device == SB_DEVICE_CPU ? s1.n_graph_captures == 0 : s1.n_graph_captures >= want);
    int32_t seq;
    CHECK(sb_seq_open(e, &seq) == SB_OK);
    int steps = 0;
    bool ok = true;
    for (int64_t n = 1; n <= NB; n++)
        for (int64_t r = 0; r <= n && r <= NSEQ; r++, steps++) ok = ok && shape_step(e, seq, n, r, V) == SB_OK;
    CHECKF(ok, "a step failed: %s", sb_last_error());
    const sb_engine_stats s2 = stats(e);
    CHECKF(s2.n_plans_built == s1.n_plans_built && s2.n_graph_captures == s1.n_graph_captures,
           "%d steps within the limits built %lld plans, captured %lld graphs (want 0, 0)", steps,
           (long long)(s2.n_plans_built - s1.n_plans_built), (long long)(s2.n_graph_captures - s1.n_graph_captures));
    CHECK(shape_step(e, seq, NB, 8, V) == SB_OK); /* 8 rows: class (16, 8), outside the limits */
    CHECK_EQ_INT(stats(e).n_plans_built, s1.n_plans_built + 1);
    sb_engine_free(e);
}

/* a warmed class outlives more other classes than the replaceable cache holds */
static void test_kept(sb_model *m, int64_t V) {
    sb_engine *e = make(m, 64, 1);
    if (!e) return;
    CHECK(sb_engine_warmup(e, 1, 1) == SB_OK); /* the decode class only */
    CHECK_EQ_INT(stats(e).n_plans_warm, 1);
    int32_t seq;
    CHECK(sb_seq_open(e, &seq) == SB_OK);
    bool ok = true;
    for (int64_t T = 2; T <= 64; T *= 2) /* (T, rows) for every rows <= T: 27 classes */
        for (int64_t r = 1; r <= T; r *= 2) ok = ok && shape_step(e, seq, T, r, V) == SB_OK;
    CHECKF(ok, "a step failed: %s", sb_last_error());
    const int64_t built = stats(e).n_plans_built;
    CHECKF(built == 28, "plans built %lld (want 1 + 27)", (long long)built);
    CHECK(shape_step(e, seq, 1, 1, V) == SB_OK);
    CHECKF(stats(e).n_plans_built == built, "the warmed decode class was rebuilt after 27 other classes");
    sb_engine_free(e);
}

static double nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]), den += (double)ref[i] * ref[i];
    return den > 0 ? num / den : num;
}

/* a prompt of 11 tokens, then 3 decode steps, on engine e: the 4 logit rows into out[4][V] */
static bool run_prompt(sb_engine *e, int64_t V, float *out) {
    int32_t seq;
    if (sb_seq_open(e, &seq) != SB_OK) return false;
    sb_batch_item it[11];
    for (int i = 0; i < 11; i++) it[i] = (sb_batch_item){.seq = seq, .token = (int32_t)(3 + i * 13 % (V - 3)), .logits = i == 10};
    bool ok = sb_engine_step(e, it, 11, out) == SB_OK;
    for (int k = 1; ok && k < 4; k++) {
        const sb_batch_item d = {.seq = seq, .token = (int32_t)(5 + k), .logits = 1};
        ok = sb_engine_step(e, &d, 1, out + k * V) == SB_OK;
    }
    return ok;
}

static void test_same_logits(sb_model *m, int64_t V) {
    sb_engine *cold = make(m, NB, NSEQ), *warm = make(m, NB, NSEQ);
    float *a = malloc((size_t)(4 * V) * sizeof *a), *b = malloc((size_t)(4 * V) * sizeof *b);
    if (cold && warm && a && b) {
        for (int64_t i = 0; i < 4 * V; i++) a[i] = b[i] = NAN; /* poisoned */
        CHECK(sb_engine_warmup(warm, 0, 0) == SB_OK);
        CHECK(run_prompt(cold, V, a) && run_prompt(warm, V, b));
        const double d = nmse(b, a, 4 * V);
        const double lim = device == SB_DEVICE_CPU ? 0 : 1e-6;
        printf("warmed vs cold engine, a prompt and 3 decode steps: logits NMSE %.3e (limit %g)\n", d, lim);
        CHECKF(d <= lim, "warmed engine's logits differ from a cold one's: NMSE %.3e", d);
    }
    free(a);
    free(b);
    sb_engine_free(cold);
    sb_engine_free(warm);
}

static void test_errors(sb_model *m) {
    CHECK(sb_engine_warmup(NULL, 0, 0) == SB_ERR_INVALID_ARG);
    sb_engine *e = make(m, NB, NSEQ);
    if (!e) return;
    CHECK(sb_engine_warmup(e, NB + 1, 0) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "n_batch 16"));
    CHECK(sb_engine_warmup(e, 4, 5) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "max_tokens 4"));
    CHECK(sb_engine_warmup(e, 2, 0) == SB_OK); /* rows 0: min(n_seq_max, max_tokens) = 2 */
    CHECK_EQ_INT(stats(e).n_plans_warm, count_classes(NB, 2, 2));
    CHECK(sb_engine_warmup(e, 0, 1) == SB_OK); /* a second call adds its classes: T up to 16, 1 row */
    CHECK_EQ_INT(stats(e).n_plans_warm, count_classes(NB, 2, 2) + 3); /* (4, 1), (8, 1), (16, 1) */
    sb_engine_free(e);
}

static void run_all(sb_model *m, int64_t V) {
    test_classes(m, V);
    test_kept(m, V);
    test_same_logits(m, V);
    test_errors(m);
}

int main(void) {
    sb_model *m;
    if (sb_model_load("models/sonicboom-kjv-13m-q8_0.gguf", NULL, &m) != SB_OK) {
        CHECKF(0, "embedded model: %s", sb_last_error());
        return test_summary();
    }
    sb_model_info mi;
    sb_model_get_info(m, &mi);
    run_all(m, mi.n_vocab);
    sb_engine_params ep;
    sb_engine_default_params(&ep);
    ep.device = SB_DEVICE_CUDA;
    ep.n_ctx = 64;
    sb_engine *probe = NULL;
    if (sb_engine_create(m, &ep, &probe) == SB_OK) {
        sb_engine_free(probe);
        device = SB_DEVICE_CUDA;
        printf("-- on CUDA --\n");
        run_all(m, mi.n_vocab);
    } else {
        printf("SKIP CUDA engine warm-up: no usable CUDA device in this build or machine\n");
    }
    sb_model_free(m);
    return test_summary();
}
