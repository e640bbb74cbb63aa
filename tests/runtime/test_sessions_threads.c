/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_sessions_threads.c — one read-only model shared by four sessions on four
 * threads at once: each thread prefills a different prompt and decodes 8 tokens greedily; every
 * thread's logits must equal, bit for bit, those of the same work done alone beforehand. (Sessions
 * share nothing mutable; the model is immutable after loading.)
 */
#include "runtime/session.h"
#include "test.h"

#include <pthread.h>

#define N_THREADS 4
#define N_PROMPT 12
#define N_DECODE 8

typedef struct job {
    const rt_model *m;
    int32_t prompt[N_PROMPT];
    float *logits; /* [(N_DECODE + 1) * V] */
    sb_status st;
} job;

static void *work(void *arg) {
    job *j = (job *)arg;
    const int64_t V = j->m->hp.n_vocab;
    rt_session *s;
    rt_session_params sp = {.n_ctx = 64, .n_threads = 1};
    j->st = rt_session_create(j->m, &sp, &s);
    if (j->st != SB_OK) return NULL;
    j->st = rt_session_prefill(s, j->prompt, N_PROMPT, NULL);
    for (int k = 0; j->st == SB_OK && k <= N_DECODE; k++) {
        const float *l = rt_session_logits(s);
        memcpy(j->logits + k * V, l, (size_t)V * sizeof *l);
        int32_t best = 0;
        for (int64_t i = 1; i < V; i++) best = l[i] > l[best] ? (int32_t)i : best;
        if (k < N_DECODE) j->st = rt_session_eval(s, &best, 1, false, NULL);
    }
    rt_session_free(s);
    return NULL;
}

int main(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s", test_data_path("models/test-qwen2-q4_k_m.gguf"));
    rt_model *m;
    if (rt_model_load(path, NULL, &m) != SB_OK) {
        snprintf(path, sizeof path, "models/sonicboom-kjv-13m-q8_0.gguf");
        CHECKF(rt_model_load(path, NULL, &m) == SB_OK, "%s", sb_last_error());
    }
    const int64_t V = m->hp.n_vocab;
    job solo[N_THREADS], par[N_THREADS];
    uint64_t seed = 3;
    for (int t = 0; t < N_THREADS; t++) {
        solo[t].m = par[t].m = m;
        for (int i = 0; i < N_PROMPT; i++) solo[t].prompt[i] = par[t].prompt[i] = (int32_t)(test_rand_u64(&seed) % (uint64_t)V);
        solo[t].logits = malloc((size_t)((N_DECODE + 1) * V) * sizeof(float));
        par[t].logits = malloc((size_t)((N_DECODE + 1) * V) * sizeof(float));
        work(&solo[t]);
        CHECK(solo[t].st == SB_OK);
    }
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) pthread_create(&th[t], NULL, work, &par[t]);
    for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < N_THREADS; t++) {
        CHECK(par[t].st == SB_OK);
        CHECKF(!memcmp(solo[t].logits, par[t].logits, (size_t)((N_DECODE + 1) * V) * sizeof(float)),
               "thread %d: logits differ from the solo run", t);
        free(solo[t].logits);
        free(par[t].logits);
    }
    printf("%d sessions on %d threads over one model (%s): identical to solo runs\n", N_THREADS, N_THREADS, path);
    rt_model_free(m);
    return test_summary();
}
