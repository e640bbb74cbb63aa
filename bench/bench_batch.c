/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/bench_batch.c — aggregate decode throughput of B sequences decoded together in one engine
 * (sb_engine_step: one forward pass of B tokens a step) against the same B sequences decoded one
 * after another in sessions (B passes of one token a step), through the public header only.
 * Each sequence: a prompt of -p tokens (evaluated first, not timed), then -n greedy decode steps
 * (timed). Every measurement is repeated -r times; the table gives the best and the median.
 * Each decode step reads the logit rows where the engine keeps them (sb_engine_logits) and takes
 * each row's argmax on the host, as a server's greedy draws would.
 * Usage: bench_batch [-m MODEL] [-B 1,4,8,16] [-p 32] [-n 32] [-t THREADS] [-r 3] [-d cpu|cuda|auto]
 *        [-ctk f32|f16] [-s 1|0]
 * -s 0 leaves the sessions out: they run one after another, so at B 64 they take most of a run's
 * time, and an A/B of the engine needs none of them.
 */
#include "sonicboom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int argmax(const float *l, int64_t V) {
    int b = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[b]) b = (int)i;
    return b;
}

static void die(const char *what, sb_status st) {
    fprintf(stderr, "error: %s: %s: %s\n", sb_status_str(st), what, sb_last_error());
    exit(1);
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void prompt_of(int i, int p, int64_t V, int32_t *out) {
    for (int k = 0; k < p; k++) out[k] = (int32_t)(1 + ((int64_t)(i + 1) * 7919 + (int64_t)k * 104729) % (V - 1));
}

/* seconds for B sequences decoding n steps together in one engine */
static int device = SB_DEVICE_CPU, kv_type = SB_TYPE_F32; /* -d, -ctk: of engines and sessions alike */

static double run_engine(sb_model *m, int B, int p, int n, int threads, int64_t V) {
    sb_engine_params ep;
    sb_engine_default_params(&ep);
    ep.n_seq_max = B;
    ep.n_ctx = p + n + 1;
    ep.n_threads = threads;
    ep.device = device;
    ep.kv_type = kv_type;
    sb_engine *e;
    sb_status st = sb_engine_create(m, &ep, &e);
    if (st != SB_OK) die("sb_engine_create", st);
    sb_batch_item *items = malloc((size_t)(B * p) * sizeof *items);
    float *logits = malloc((size_t)(B * V) * sizeof *logits);
    int32_t *prompt = malloc((size_t)p * sizeof *prompt), *seq = malloc((size_t)B * sizeof *seq);
    for (int i = 0; i < B; i++) {
        if ((st = sb_seq_open(e, &seq[i])) != SB_OK) die("sb_seq_open", st);
        prompt_of(i, p, V, prompt);
        for (int k = 0; k < p; k++) items[k] = (sb_batch_item){seq[i], prompt[k], k == p - 1, 0};
        if ((st = sb_engine_step(e, items, (size_t)p, logits + (int64_t)i * V)) != SB_OK) die("prompt step", st);
    }
    for (int i = 0; i < B; i++) items[i] = (sb_batch_item){seq[i], argmax(logits + (int64_t)i * V, V), 1, 0};
    if ((st = sb_engine_step(e, items, (size_t)B, logits)) != SB_OK) die("warm-up step", st); /* builds the T = B plan */
    const double t0 = now_s();
    const float *rows = logits;
    for (int s = 0; s < n; s++) {
        for (int i = 0; i < B; i++) items[i].token = argmax(rows + (int64_t)i * V, V);
        if ((st = sb_engine_step(e, items, (size_t)B, NULL)) != SB_OK) die("decode step", st);
        size_t nr;
        rows = sb_engine_logits(e, &nr);
    }
    const double dt = now_s() - t0;
    sb_engine_free(e);
    free(items), free(logits), free(prompt), free(seq);
    return dt;
}

/* seconds for the same B sequences decoded one after another, each in its own session */
static double run_sessions(sb_model *m, int B, int p, int n, int threads, int64_t V) {
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = p + n + 2;
    sp.n_threads = threads;
    sp.device = device;
    sp.kv_type = kv_type;
    int32_t *prompt = malloc((size_t)p * sizeof *prompt);
    double dt = 0;
    for (int i = 0; i < B; i++) {
        sb_session *s;
        sb_status st = sb_session_create(m, &sp, &s);
        if (st != SB_OK) die("sb_session_create", st);
        prompt_of(i, p, V, prompt);
        if ((st = sb_session_prefill(s, prompt, (size_t)p, NULL)) != SB_OK) die("prefill", st);
        const float *l;
        sb_session_get_logits(s, &l, NULL);
        if ((st = sb_session_decode(s, argmax(l, V))) != SB_OK) die("decode", st); /* warm-up */
        const double t0 = now_s();
        for (int k = 0; k < n; k++) {
            sb_session_get_logits(s, &l, NULL);
            if ((st = sb_session_decode(s, argmax(l, V))) != SB_OK) die("decode", st);
        }
        dt += now_s() - t0;
        sb_session_free(s);
    }
    free(prompt);
    return dt;
}

int main(int argc, char **argv) {
    const char *model = "models/sonicboom-kjv-13m-q8_0.gguf", *blist = "1,4,8,16";
    int p = 32, n = 32, threads = 0, reps = 3, sessions = 1;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_batch: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "-B")) blist = v;
        else if (!strcmp(a, "-p")) p = atoi(v);
        else if (!strcmp(a, "-n")) n = atoi(v);
        else if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-s") && (!strcmp(v, "0") || !strcmp(v, "1"))) sessions = v[0] == '1';
        else if (!strcmp(a, "-d") && (!strcmp(v, "cpu") || !strcmp(v, "cuda") || !strcmp(v, "auto")))
            device = !strcmp(v, "cpu") ? SB_DEVICE_CPU : !strcmp(v, "cuda") ? SB_DEVICE_CUDA : SB_DEVICE_AUTO;
        else if (!strcmp(a, "-ctk") && (!strcmp(v, "f32") || !strcmp(v, "f16"))) kv_type = !strcmp(v, "f16") ? SB_TYPE_F16 : SB_TYPE_F32;
        else {
            fprintf(stderr, "bench_batch: unknown option %s %s\n", a, v);
            return 2;
        }
    }
    if (p < 1 || n < 1 || reps < 1 || reps > 100) {
        fprintf(stderr, "bench_batch: -p, -n >= 1, -r 1..100\n");
        return 2;
    }
    sb_model *m;
    sb_status st = sb_model_load(model, NULL, &m);
    if (st != SB_OK) die(model, st);
    sb_model_info mi;
    sb_model_get_info(m, &mi);
    printf("%s: prompt %d, %d decode steps a sequence, %d threads, device %s, %s KV, best / median of %d\n\n", model, p, n, threads,
           device == SB_DEVICE_CUDA ? "cuda" : device == SB_DEVICE_AUTO ? "auto" : "cpu", kv_type == SB_TYPE_F16 ? "f16" : "f32", reps);
    printf("| B | engine tok/s (best / median) | sessions one after another tok/s | engine / sessions (median) |\n|---:|---:|---:|---:|\n");
    for (const char *c = blist; *c;) {
        const int B = atoi(c);
        if (B < 1 || B > 1024) {
            fprintf(stderr, "bench_batch: B %d out of range\n", B);
            return 2;
        }
        double te[100], ts[100];
        for (int r = 0; r < reps; r++) {
            te[r] = run_engine(m, B, p, n, threads, mi.n_vocab);
            if (sessions) ts[r] = run_sessions(m, B, p, n, threads, mi.n_vocab);
        }
        qsort(te, (size_t)reps, sizeof *te, cmp_d);
        const double tok = (double)B * n, me = te[reps / 2];
        if (sessions) {
            qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
            const double ms = ts[reps / 2];
            printf("| %d | %.1f / %.1f | %.1f / %.1f | %.2fx |\n", B, tok / te[0], tok / me, tok / ts[0], tok / ms, ms / me);
        } else {
            printf("| %d | %.1f / %.1f | - | - |\n", B, tok / te[0], tok / me);
        }
        fflush(stdout);
        while (*c && *c != ',') c++;
        if (*c == ',') c++;
    }
    sb_model_free(m);
    return 0;
}
