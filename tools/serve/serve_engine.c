/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_engine.c — the engine of `sb serve`: one shared sb_model, a bounded FIFO queue
 * of jobs between the connection threads and whatever runs them, and what both ways of running
 * share (a choice's sampler, its begin and end, the text callback, a job's end). Jobs run either
 * batched (serve_batch.c: one scheduler over the library's sb_engine, where it runs) or on N slots,
 * each with its own sb_session and worker thread: a worker runs one job at a time, its choices one
 * after the other (the session reuses the prompt's cached prefix for choices after the first),
 * streaming text through sb_generate_tokens' callback, which also stops at the next token once the
 * job is cancelled. Each choice has its own sampler: the request's parameters with seed + choice,
 * its logit_bias, and (logprobs asked) the sampler's log, whose entries go out with the text they
 * made.
 */
#include "serve.h"

#include "progress.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int serve_buf_add(serve_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return -1;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

void serve_request_free(serve_request *r) {
    free(r->prompt);
    free(r->bias_tok);
    free(r->bias_val);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stops[i]);
    memset(r, 0, sizeof *r);
}

serve_job *serve_job_new(void) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->state = JOB_QUEUED;
    return j;
}

void serve_job_release(serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    if (j->text)
        for (int i = 0; i < j->req.n; i++) free(j->text[i].data);
    free(j->text);
    if (j->logprobs)
        for (int i = 0; i < j->req.n; i++) cJSON_Delete(j->logprobs[i]);
    free(j->logprobs);
    free(j->finish);
    free(j->sse.data);
    serve_request_free(&j->req);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Mark j finished with status st (detail msg) and wake its connection. Called with j->mu held. A
 * stream cancelled because the server stops still ends properly: an error event, then [DONE]. */
static void job_finish_locked(serve_job *j, sb_status st, const char *msg) {
    if (j->req.stream && st == SB_ERR_CANCELLED && msg && !strcmp(msg, SERVE_SHUTDOWN_MSG)) {
        serve_sse_error(j, SERVE_SHUTDOWN_MSG);
        serve_sse_done(j);
    }
    j->status = st;
    if (st != SB_OK) snprintf(j->error, sizeof j->error, "%s", msg ? msg : "");
    j->state = JOB_DONE;
    pthread_cond_broadcast(&j->cv);
}

void serve_engine_init(serve_engine *e, const serve_config *cfg) {
    memset(e, 0, sizeof *e);
    e->cfg = cfg;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
}

int serve_engine_queued(serve_engine *e) {
    pthread_mutex_lock(&e->mu);
    int n = e->queued;
    pthread_mutex_unlock(&e->mu);
    return n;
}

int serve_engine_submit(serve_engine *e, serve_job *j) {
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->queued >= e->cfg->queue_size) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (e->tail) e->tail->next = j;
    else e->head = j;
    e->tail = j;
    e->queued++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* Unlink j from the queue if it is there (e->mu held). 1 if it was. */
static int unqueue_locked(serve_engine *e, serve_job *j) {
    serve_job **pp = &e->head, *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp) return 0;
    *pp = j->next;
    if (e->tail == j) e->tail = prev;
    e->queued--;
    return 1;
}

void serve_engine_cancel(serve_engine *e, serve_job *j) {
    atomic_store(&j->cancel, 1);
    pthread_mutex_lock(&e->mu);
    int was_queued = unqueue_locked(e, j);
    pthread_mutex_unlock(&e->mu);
    if (!was_queued) return; /* running (stops at its next token) or done */
    pthread_mutex_lock(&j->mu);
    job_finish_locked(j, SB_ERR_CANCELLED, "cancelled while queued");
    pthread_mutex_unlock(&j->mu);
    atomic_fetch_add(&e->metrics.requests_cancelled, 1);
    serve_job_release(j); /* the engine's reference */
}

/* The log entries since the last piece: the tokens of this piece of text (entries of tokens held
 * back inside a matched stop string, or of the end-of-generation token, never reach a piece). A
 * stream gets them in a new object for its chunk; a plain reply appends them to the choice's. */
static int take_logprobs(serve_gen *g, cJSON **chunk_lp) {
    const serve_request *r = &g->j->req;
    *chunk_lp = NULL;
    if (!r->logprobs) return 0;
    cJSON *lp = r->stream ? (*chunk_lp = serve_logprobs_new(r->kind)) : g->j->logprobs[g->choice];
    return lp ? serve_logprobs_take(g->e, r->kind, g->smp, &g->lp_done, &g->lp_offset, lp) : -1;
}

int serve_gen_text(void *user, const char *text, size_t len, int32_t token) {
    (void)token;
    serve_gen *g = user;
    if (atomic_load(&g->j->cancel)) return 1;
    if (!len) return 0;
    pthread_mutex_lock(&g->j->mu);
    cJSON *lp = NULL;
    int rc = take_logprobs(g, &lp);
    if (!rc) rc = g->j->req.stream ? serve_sse_piece(g->e, g->j, g->choice, text, len, 0, lp)
                                   : serve_buf_add(&g->j->text[g->choice], text, len);
    else cJSON_Delete(lp);
    pthread_cond_broadcast(&g->j->cv);
    pthread_mutex_unlock(&g->j->mu);
    if (rc) g->oom = 1;
    return rc ? 1 : 0;
}

static const char *finish_reason(sb_stop_reason r) {
    return r == SB_STOP_EOG || r == SB_STOP_STRING ? "stop" : "length";
}

sb_status serve_choice_sampler(serve_engine *e, const serve_request *r, int i, sb_sampler **out) {
    sb_sampler_params sp = r->sp;
    sp.seed = r->sp.seed + (uint64_t)i;
    *out = NULL;
    sb_sampler *smp = NULL;
    sb_status st = sb_sampler_create(&sp, e->info.n_vocab, &smp);
    if (st == SB_OK && r->n_bias) st = sb_sampler_set_logit_bias(smp, r->bias_tok, r->bias_val, r->n_bias);
    if (st == SB_OK && r->logprobs) st = sb_sampler_set_logprobs(smp, r->top_logprobs);
    if (st != SB_OK) {
        sb_sampler_free(smp);
        return st;
    }
    *out = smp;
    return SB_OK;
}

int serve_choice_begin(serve_engine *e, serve_job *j, int i) {
    const serve_request *r = &j->req;
    int oom = 0;
    pthread_mutex_lock(&j->mu);
    if (r->logprobs && !r->stream && !(j->logprobs[i] = serve_logprobs_new(r->kind))) oom = 1;
    if (r->stream && r->kind == SERVE_CHAT && serve_sse_piece(e, j, i, "", 0, 1, NULL)) oom = 1;
    pthread_mutex_unlock(&j->mu);
    return oom;
}

int serve_choice_end(serve_engine *e, serve_job *j, int i, const sb_generate_result *res) {
    serve_metrics *m = &e->metrics;
    if (i == 0) {
        atomic_fetch_add(&m->prompt_tokens, res->n_prompt);
        atomic_fetch_add(&m->cached_tokens, res->n_reused);
    }
    atomic_fetch_add(&m->predicted_tokens, res->n_generated);
    atomic_fetch_add(&m->prompt_us, (long long)(res->prefill_seconds * 1e6));
    atomic_fetch_add(&m->predicted_us, (long long)(res->decode_seconds * 1e6));
    int oom = 0;
    pthread_mutex_lock(&j->mu);
    j->finish[i] = finish_reason(res->stop);
    j->n_generated += res->n_generated;
    if (i == 0) j->n_cached = res->n_reused;
    if (j->req.stream && serve_sse_finish(e, j, i, j->finish[i])) oom = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return oom;
}

/* Generate choice i of j on session s. */
static sb_status run_choice(serve_engine *e, sb_session *s, serve_job *j, int i, int *oom) {
    const serve_request *r = &j->req;
    sb_sampler *smp = NULL;
    sb_status st = serve_choice_sampler(e, r, i, &smp);
    if (st != SB_OK) return st;
    if (serve_choice_begin(e, j, i)) *oom = 1;
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = r->max_tokens;
    gp.stop = (const char *const *)r->stops;
    gp.n_stop = r->n_stop;
    gp.ignore_eos = r->ignore_eos;
    serve_gen g = {e, j, i, 0, smp, 0, 0};
    sb_generate_result res;
    st = *oom ? SB_ERR_OOM : sb_generate_tokens(s, smp, r->prompt, r->n_prompt, &gp, serve_gen_text, &g, &res);
    sb_sampler_free(smp);
    if (g.oom) *oom = 1;
    if (st != SB_OK) return st;
    if (serve_choice_end(e, j, i, &res)) *oom = 1;
    return *oom ? SB_ERR_OOM : SB_OK;
}

void serve_job_start(serve_engine *e, serve_job *j) {
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    pthread_mutex_unlock(&j->mu);
    atomic_fetch_add(&e->metrics.processing, 1);
}

void serve_job_end(serve_engine *e, serve_job *j, sb_status st, int oom, const char *detail) {
    if (oom) st = SB_ERR_OOM;
    const char *msg = st == SB_ERR_OOM && oom ? "out of memory building the response" : detail ? detail : sb_last_error();
    if (st == SB_ERR_CANCELLED) msg = atomic_load(&e->stopping) ? SERVE_SHUTDOWN_MSG : "cancelled: the client went away";
    /* counted before the client can see the end of its reply: a /metrics read after it adds up */
    if (st == SB_OK) atomic_fetch_add(&e->metrics.requests_ok, 1);
    else if (st == SB_ERR_CANCELLED) atomic_fetch_add(&e->metrics.requests_cancelled, 1);
    else atomic_fetch_add(&e->metrics.requests_failed, 1);
    atomic_fetch_sub(&e->metrics.processing, 1); /* after the outcome: idle implies counted */
    pthread_mutex_lock(&j->mu);
    if (j->req.stream && st == SB_OK && j->req.include_usage) serve_sse_usage(e, j);
    if (j->req.stream && st != SB_OK && st != SB_ERR_CANCELLED) {
        char line[320];
        snprintf(line, sizeof line, "%s: %s", sb_status_str(st), msg);
        serve_sse_error(j, line);
    }
    if (j->req.stream && st != SB_ERR_CANCELLED) serve_sse_done(j);
    job_finish_locked(j, st, msg);
    pthread_mutex_unlock(&j->mu);
}

static void run_job(serve_engine *e, sb_session *s, serve_job *j) {
    serve_job_start(e, j);
    sb_status st = SB_OK;
    int oom = 0;
    for (int i = 0; i < j->req.n && st == SB_OK; i++) st = run_choice(e, s, j, i, &oom);
    serve_job_end(e, j, st, oom, NULL);
}

typedef struct worker_arg {
    serve_engine *e;
    int slot;
} worker_arg;

static void *worker_main(void *p) {
    worker_arg a = *(worker_arg *)p;
    free(p);
    serve_engine *e = a.e;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->head && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            return NULL;
        }
        serve_job *j = e->head;
        e->head = j->next;
        if (!e->head) e->tail = NULL;
        e->queued--;
        e->running[a.slot] = j;
        pthread_mutex_unlock(&e->mu);
        run_job(e, e->sessions[a.slot], j);
        pthread_mutex_lock(&e->mu);
        e->running[a.slot] = NULL;
        pthread_mutex_unlock(&e->mu);
        serve_job_release(j);
    }
}

static sb_status create_sessions(serve_engine *e) {
    const serve_config *c = e->cfg;
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = c->n_ctx;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    sp.n_threads = c->threads ? c->threads : (int)(cores / c->parallel > 0 ? cores / c->parallel : 1);
    sp.device = c->device;
    sp.kv_type = c->kv_type;
    e->sessions = calloc((size_t)c->parallel, sizeof *e->sessions);
    if (!e->sessions) return SB_ERR_OOM;
    for (int i = 0; i < c->parallel; i++) {
        sb_status st = sb_session_create(e->model, &sp, &e->sessions[i]);
        if (st != SB_OK) return st;
    }
    int64_t cached = 0;
    sb_session_get_state(e->sessions[0], &cached, &e->n_ctx);
    return SB_OK;
}

sb_status serve_engine_load(serve_engine *e) {
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.no_mmap = e->cfg->no_mmap;
    sb_status st = cli_load_model(e->cfg->model_path, &mp, &e->model);
    if (st == SB_OK) st = sb_model_get_info(e->model, &e->info);
    if (st != SB_OK) return st;
    e->vocab = sb_model_get_vocab(e->model);
    if (!e->cfg->no_batching) {
        st = serve_batch_create(e, &e->batch);
        if (st == SB_OK) {
            fprintf(stderr, "sb serve: %s (%s), continuous batching of up to %d sequences of %lld tokens on the %s\n",
                    e->cfg->model_path, e->info.arch, e->cfg->parallel, (long long)e->n_ctx,
                    serve_batch_device(e->batch) == SB_DEVICE_CUDA ? "GPU (CUDA)" : "CPU");
            atomic_store(&e->ready, 1);
            return SB_OK;
        }
        if (st != SB_ERR_UNSUPPORTED) return st;
        fprintf(stderr, "sb serve: no batched engine here (%s): one session per slot\n", sb_last_error());
    }
    st = create_sessions(e);
    if (st != SB_OK) return st;
    e->workers = calloc((size_t)e->cfg->parallel, sizeof *e->workers);
    if (!e->workers) return SB_ERR_OOM;
    for (int i = 0; i < e->cfg->parallel; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) return SB_ERR_OOM;
        *a = (worker_arg){e, i};
        if (pthread_create(&e->workers[i], NULL, worker_main, a)) {
            free(a);
            return SB_ERR_OOM;
        }
        e->n_workers++;
    }
    fprintf(stderr, "sb serve: %s (%s), %d slot(s) of %lld tokens of context on the %s\n", e->cfg->model_path,
            e->info.arch, e->cfg->parallel, (long long)e->n_ctx,
            sb_session_device(e->sessions[0]) == SB_DEVICE_CUDA ? "GPU (CUDA)" : "CPU");
    atomic_store(&e->ready, 1);
    return SB_OK;
}

void serve_engine_halt(serve_engine *e) {
    atomic_store(&e->ready, 0);
    pthread_mutex_lock(&e->mu);
    atomic_store(&e->stopping, 1);
    while (e->head) {
        serve_job *j = e->head;
        e->head = j->next;
        e->queued--;
        atomic_store(&j->cancel, 1);
        pthread_mutex_lock(&j->mu);
        job_finish_locked(j, SB_ERR_CANCELLED, SERVE_SHUTDOWN_MSG);
        pthread_mutex_unlock(&j->mu);
        atomic_fetch_add(&e->metrics.requests_cancelled, 1);
        serve_job_release(j);
    }
    e->tail = NULL;
    for (int i = 0; i < SERVE_MAX_PARALLEL; i++)
        if (e->running[i]) atomic_store(&e->running[i]->cancel, 1);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_workers; i++) pthread_join(e->workers[i], NULL);
    e->n_workers = 0;
    serve_batch_join(e->batch);
}

void serve_engine_free(serve_engine *e) {
    serve_batch_free(e->batch);
    e->batch = NULL;
    free(e->workers);
    if (e->sessions)
        for (int i = 0; i < e->cfg->parallel; i++) sb_session_free(e->sessions[i]);
    free(e->sessions);
    sb_model_free(e->model);
    e->model = NULL;
}
