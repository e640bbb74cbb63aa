/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_draw.c — the draws of one batched step, in parallel: each logits row goes to
 * its own sequence's sampler (sample, then accept), so rows are independent; a pool of threads and
 * the calling scheduler take rows from a shared counter. At 64 sequences of a 150k-token
 * vocabulary the draws are 64 passes over 600 KB each, which one thread does in ~7 ms — longer
 * than a GPU's whole decode step for a small model.
 * Threads: serve_drawers_run is called by one thread (the scheduler) at a time; the pool's threads
 * only touch the jobs of the run in progress. A job's error text is copied into it, since
 * sb_last_error is per thread.
 */
#include "serve.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAW_THREADS_MAX 15
#define DRAW_SERIAL_BELOW 4 /* fewer rows than this: the scheduler draws them alone */

struct serve_drawers {
    int n_threads;
    pthread_t th[DRAW_THREADS_MAX];
    int64_t n_vocab;
    const int32_t *eog; /* end-of-generation tokens masked for ignore_eos jobs */
    int n_eog;
    float *rows;        /* [n_threads + 1][n_vocab]: a masked copy per drawing thread */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;       /* bumped per parallel run */
    int busy;           /* pool threads still in the run */
    int quit;
    serve_draw_job *jobs;
    size_t n_jobs;
    atomic_size_t next;
};

static int is_eog(const serve_drawers *d, int32_t tok) {
    for (int k = 0; k < d->n_eog; k++)
        if (d->eog[k] == tok) return 1;
    return 0;
}

/* A job's draw; end-of-generation tokens masked (-inf) for ignore_eos jobs, as sb_generate does. The
 * mask costs a copy of the row (600 KB at a 150k vocabulary), so a deterministic draw without
 * logprobs (greedy: no random number, no log entry) first draws from the row as it is: if no
 * end-of-generation token wins there, the masked row gives the same token (the first index of the
 * same maximum). */
static void draw_one(serve_drawers *d, serve_draw_job *j, float *row) {
    const int mask = j->mask_eog && d->n_eog;
    if (mask && j->exact_unmasked && sb_sampler_sample(j->smp, j->logits, &j->tok) == SB_OK && !is_eog(d, j->tok)) {
        j->st = SB_OK;
    } else {
        const float *l = j->logits;
        if (mask) {
            memcpy(row, j->logits, (size_t)d->n_vocab * sizeof *row);
            for (int k = 0; k < d->n_eog; k++) row[d->eog[k]] = -INFINITY;
            l = row;
        }
        j->st = sb_sampler_sample(j->smp, l, &j->tok);
    }
    if (j->st == SB_OK) j->st = sb_sampler_accept(j->smp, j->tok);
    if (j->st != SB_OK) snprintf(j->msg, sizeof j->msg, "%s", sb_last_error());
}

static void drain(serve_drawers *d, float *row) {
    for (size_t i; (i = atomic_fetch_add(&d->next, 1)) < d->n_jobs;) draw_one(d, &d->jobs[i], row);
}

typedef struct drawer_arg {
    serve_drawers *d;
    int k;
} drawer_arg;

static void *drawer_main(void *p) {
    drawer_arg a = *(drawer_arg *)p;
    free(p);
    serve_drawers *d = a.d;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (d->gen == seen && !d->quit) pthread_cond_wait(&d->go, &d->mu);
        if (d->quit) {
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
        seen = d->gen;
        pthread_mutex_unlock(&d->mu);
        drain(d, d->rows + (size_t)(a.k + 1) * (size_t)d->n_vocab);
        pthread_mutex_lock(&d->mu);
        if (--d->busy == 0) pthread_cond_signal(&d->done);
        pthread_mutex_unlock(&d->mu);
    }
}

sb_status serve_drawers_create(int n_threads, int64_t n_vocab, const int32_t *eog, int n_eog, serve_drawers **out) {
    *out = NULL;
    serve_drawers *d = calloc(1, sizeof *d);
    if (!d) return SB_ERR_OOM;
    d->n_threads = n_threads < 0 ? 0 : n_threads > DRAW_THREADS_MAX ? DRAW_THREADS_MAX : n_threads;
    d->n_vocab = n_vocab;
    d->eog = eog;
    d->n_eog = n_eog;
    d->rows = malloc((size_t)(d->n_threads + 1) * (size_t)n_vocab * sizeof *d->rows);
    if (!d->rows) {
        free(d);
        return SB_ERR_OOM;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->go, NULL);
    pthread_cond_init(&d->done, NULL);
    int started = 0;
    for (; started < d->n_threads; started++) {
        drawer_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (drawer_arg){d, started};
        if (pthread_create(&d->th[started], NULL, drawer_main, a)) {
            free(a);
            break;
        }
    }
    d->n_threads = started; /* fewer threads only draw slower */
    *out = d;
    return SB_OK;
}

void serve_drawers_run(serve_drawers *d, serve_draw_job *jobs, size_t n) {
    d->jobs = jobs;
    d->n_jobs = n;
    atomic_store(&d->next, 0);
    if (n < DRAW_SERIAL_BELOW || !d->n_threads) {
        drain(d, d->rows);
        return;
    }
    pthread_mutex_lock(&d->mu);
    d->busy = d->n_threads;
    d->gen++;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->mu);
    drain(d, d->rows);
    pthread_mutex_lock(&d->mu);
    while (d->busy > 0) pthread_cond_wait(&d->done, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

void serve_drawers_free(serve_drawers *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->quit = 1;
    pthread_cond_broadcast(&d->go);
    pthread_mutex_unlock(&d->mu);
    for (int k = 0; k < d->n_threads; k++) pthread_join(d->th[k], NULL);
    pthread_cond_destroy(&d->go);
    pthread_cond_destroy(&d->done);
    pthread_mutex_destroy(&d->mu);
    free(d->rows);
    free(d);
}
