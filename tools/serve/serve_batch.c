/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_batch.c — continuous batching: one scheduler thread drives an sb_engine (the
 * library's batched forward over a paged KV cache shared by all requests). Each choice of a request
 * is a sequence. Every step evaluates, in one forward pass, the next token of every decoding
 * sequence and then chunks of waiting prompts up to the step budget (n_batch tokens, a prompt
 * chunk at most SERVE_PREFILL_CHUNK), so a new request joins the running batch at the next step and
 * its prefill delays the decoding ones by one bounded step at a time. Prompts reuse whatever full
 * KV blocks the engine's prefix cache holds (a request's later choices reuse its first choice's
 * prompt); sampling, logit_bias, logprobs and the text (sb_text_stream: stop strings, UTF-8) are
 * per sequence, so a request gets exactly what it would get alone. Before the server reports ready,
 * sb_engine_warmup readies every step class the scheduler can form (up to n_batch items, up to
 * --parallel logit rows: one per sequence), so the first request's steps build and capture nothing.
 * Threads: only the scheduler touches the engine and the text streams, and the samplers but for the
 * draws of a step (serve_draw.c: each sampler in one drawing thread, the scheduler waiting); jobs are
 * shared with their connections under their mutex, as in serve_engine.c.
 */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SERVE_PREFILL_CHUNK 256 /* prompt tokens of one sequence in one step */

typedef enum { CH_WAIT, CH_PREFILL, CH_DECODE } ch_state;

/* one choice of a running job: one engine sequence */
typedef struct bchoice {
    serve_job *j;
    int i;
    ch_state state;
    int32_t seq;               /* the engine's sequence, -1 before it opens */
    sb_sampler *smp;
    sb_text_stream *ts;
    serve_gen g;
    int64_t fed;               /* prompt tokens in the cache */
    int32_t next;              /* the token the next step appends (decoding) */
    sb_generate_result res;
    double t0, t1;             /* opened; first token sampled */
    struct bchoice *link;
} bchoice;

struct serve_batch {
    serve_engine *e;
    sb_engine *eng;
    int n_seq;                 /* sequences open */
    bchoice *head;             /* running choices in admission order */
    sb_batch_item *items;
    bchoice **owner;           /* the choice of each item */
    serve_draw_job *jobs;      /* [n_batch] the draws of a step */
    serve_drawers *draw;
    int32_t *eog;              /* end-of-generation tokens (ignore_eos masks them) */
    int n_eog;
    int64_t n_batch;
    pthread_t thread;
    int started;
    pthread_mutex_t stats_mu;  /* the engine's stats as of the last step, for /metrics */
    sb_engine_stats stats;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// ---- choices ----

static void choice_close(serve_batch *b, bchoice *c) {
    if (c->seq >= 0) {
        sb_seq_close(b->eng, c->seq);
        b->n_seq--;
        c->seq = -1;
    }
    sb_sampler_free(c->smp);
    sb_text_stream_free(c->ts);
    c->smp = NULL;
    c->ts = NULL;
}

/* Open choice c's sequence, attach the cached prefix of its prompt and feed the prompt to its
 * sampler's penalty history (as sb_generate does). */
static sb_status choice_open(serve_batch *b, bchoice *c) {
    const serve_request *r = &c->j->req;
    sb_status st = serve_choice_sampler(b->e, r, c->i, &c->smp);
    if (st == SB_OK) st = sb_text_stream_create(b->e->vocab, (const char *const *)r->stops, r->n_stop, &c->ts);
    if (st == SB_OK) st = sb_seq_open(b->eng, &c->seq);
    if (st != SB_OK) {
        c->seq = -1;
        return st;
    }
    b->n_seq++;
    int64_t reused = 0;
    st = sb_seq_attach_prefix(b->eng, c->seq, r->prompt, r->n_prompt, &reused);
    for (size_t k = 0; st == SB_OK && k < r->n_prompt; k++) st = sb_sampler_accept(c->smp, r->prompt[k]);
    if (st != SB_OK) return st;
    c->fed = reused;
    c->res = (sb_generate_result){.n_prompt = (int64_t)r->n_prompt, .n_reused = reused};
    c->g = (serve_gen){b->e, c->j, c->i, 0, c->smp, 0, 0};
    c->t0 = now_s();
    c->state = CH_PREFILL;
    return serve_choice_begin(b->e, c->j, c->i) ? SB_ERR_OOM : SB_OK;
}

/* the job's choices are all gone: finish it with st (detail: NULL = the library's last error) */
static void job_done(serve_batch *b, serve_job *j, sb_status st, int oom, const char *detail) {
    serve_job_end(b->e, j, st, oom, detail);
    serve_job_release(j);
}

/* Remove every choice of job j (cancelled or failed), then end it. */
static void drop_job_msg(serve_batch *b, serve_job *j, sb_status st, const char *detail) {
    int oom = 0;
    for (bchoice **pp = &b->head; *pp;) {
        bchoice *c = *pp;
        if (c->j != j) {
            pp = &c->link;
            continue;
        }
        oom |= c->g.oom;
        *pp = c->link;
        choice_close(b, c);
        free(c);
    }
    job_done(b, j, st, oom, detail);
}

static void drop_job(serve_batch *b, serve_job *j, sb_status st) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", sb_last_error()); /* before closing sequences */
    drop_job_msg(b, j, st, msg);
}

/* Choice c has ended (res.stop set): flush its text, close it, end the job after its last choice. */
static void choice_end(serve_batch *b, bchoice *c) {
    sb_status st = sb_text_stream_flush(c->ts, serve_gen_text, &c->g);
    c->res.decode_seconds = now_s() - c->t1;
    int oom = c->g.oom;
    if (st == SB_OK && serve_choice_end(b->e, c->j, c->i, &c->res)) oom = 1;
    serve_job *j = c->j;
    if (st != SB_OK || oom) {
        drop_job(b, j, st != SB_OK ? st : SB_ERR_OOM);
        return;
    }
    for (bchoice **pp = &b->head; *pp; pp = &(*pp)->link)
        if (*pp == c) {
            *pp = c->link;
            break;
        }
    choice_close(b, c);
    free(c);
    for (bchoice *o = b->head; o; o = o->link)
        if (o->j == j) return;
    job_done(b, j, SB_OK, 0, NULL);
}

// ---- admission ----

/* Take queued jobs while a sequence is free for their first choice; their other choices wait
 * (CH_WAIT) for the first one's prompt, whose KV blocks they then share. */
static void admit(serve_batch *b, int max_seq) {
    serve_engine *e = b->e;
    for (;;) {
        int waiting = 0;
        for (bchoice *c = b->head; c; c = c->link) waiting += c->state == CH_WAIT;
        if (b->n_seq + waiting >= max_seq) return;
        pthread_mutex_lock(&e->mu);
        serve_job *j = e->head;
        if (j) {
            e->head = j->next;
            if (!e->head) e->tail = NULL;
            e->queued--;
        }
        pthread_mutex_unlock(&e->mu);
        if (!j) return;
        serve_job_start(e, j);
        bchoice **tail = &b->head;
        while (*tail) tail = &(*tail)->link;
        for (int i = 0; i < j->req.n; i++) {
            bchoice *c = calloc(1, sizeof *c);
            if (!c) {
                drop_job(b, j, SB_ERR_OOM);
                break;
            }
            *c = (bchoice){.j = j, .i = i, .state = CH_WAIT, .seq = -1};
            *tail = c;
            tail = &c->link;
        }
    }
}

/* Open waiting choices while sequences are free: a first choice at once, a later one once its
 * job's first choice has its prompt in the cache (or has ended). */
static void open_waiting(serve_batch *b, int max_seq) {
    for (bchoice *c = b->head, *next; c && b->n_seq < max_seq; c = next) {
        next = c->link;
        if (c->state != CH_WAIT) continue;
        int ready = c->i == 0;
        if (!ready) {
            ready = 1;
            for (bchoice *o = b->head; o; o = o->link)
                if (o->j == c->j && o->i == 0 && o->state != CH_DECODE) ready = 0;
        }
        if (!ready) continue;
        sb_status st = choice_open(b, c);
        if (st != SB_OK) {
            drop_job(b, c->j, st);
            next = b->head; /* the list changed: start over (opened choices are skipped) */
        }
    }
}

// ---- one step ----

/* Items of the next step: every decoding sequence's token, then prompt chunks. */
static size_t plan_step(serve_batch *b) {
    size_t n = 0;
    for (bchoice *c = b->head; c; c = c->link)
        if (c->state == CH_DECODE) {
            b->owner[n] = c;
            b->items[n++] = (sb_batch_item){.seq = c->seq, .token = c->next, .logits = 1};
        }
    for (bchoice *c = b->head; c && (int64_t)n < b->n_batch; c = c->link) {
        if (c->state != CH_PREFILL) continue;
        const serve_request *r = &c->j->req;
        int64_t k = (int64_t)r->n_prompt - c->fed;
        if (k > SERVE_PREFILL_CHUNK) k = SERVE_PREFILL_CHUNK;
        if (k > b->n_batch - (int64_t)n) k = b->n_batch - (int64_t)n;
        for (int64_t t = 0; t < k; t++) {
            const int64_t at = c->fed + t;
            b->owner[n] = c;
            b->items[n++] = (sb_batch_item){.seq = c->seq, .token = r->prompt[at], .logits = at + 1 == (int64_t)r->n_prompt};
        }
    }
    return n;
}

/* Pass choice c's drawn token on (its sampler has accepted it); 1 when the choice ended. */
static int pass_token(serve_batch *b, bchoice *c, int32_t tok, sb_status *st) {
    if (c->state == CH_PREFILL) {
        c->state = CH_DECODE;
        c->t1 = now_s();
        c->res.prefill_seconds = c->t1 - c->t0;
    }
    c->res.n_generated++;
    int stop = -1;
    *st = sb_text_stream_push(c->ts, tok, serve_gen_text, &c->g, &stop);
    if (*st != SB_OK) return 1;
    int64_t len = 0;
    sb_seq_length(b->eng, c->seq, &len);
    if (stop >= 0) c->res.stop = (sb_stop_reason)stop;
    else if (c->res.n_generated >= c->j->req.max_tokens) c->res.stop = SB_STOP_LENGTH;
    else if (len >= b->e->n_ctx) c->res.stop = SB_STOP_CONTEXT; /* no room for the token just drawn */
    else {
        c->next = tok;
        return 0;
    }
    return 1;
}

/* One step: drop cancelled jobs, evaluate, sample. 0 when there was nothing to do. */
static int step(serve_batch *b) {
    for (bchoice *c = b->head; c; c = c->link)
        if (atomic_load(&c->j->cancel) || atomic_load(&b->e->stopping)) {
            drop_job(b, c->j, SB_ERR_CANCELLED);
            return 1;
        }
    size_t n = plan_step(b);
    if (!n) return 0;
    sb_status st = sb_engine_step(b->eng, b->items, n, NULL);
    if (st != SB_OK) { /* nothing applied: every job of the step fails with the library's reason */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", sb_last_error());
        while (b->head) drop_job_msg(b, b->head->j, st, msg);
        return 1;
    }
    const int64_t V = b->e->info.n_vocab;
    size_t n_rows, nj = 0;
    const float *logits = sb_engine_logits(b->eng, &n_rows);
    for (size_t k = 0; k < n; k++) {
        bchoice *c = b->owner[k];
        if (c->state == CH_PREFILL) c->fed++;
        if (b->items[k].logits) {
            const serve_request *rq = &c->j->req;
            b->jobs[nj] = (serve_draw_job){.smp = c->smp, .logits = logits + (size_t)V * nj, .mask_eog = rq->ignore_eos,
                                           .exact_unmasked = rq->sp.temp <= 0 && !rq->logprobs};
            nj++;
        }
    }
    serve_drawers_run(b->draw, b->jobs, nj);
    for (size_t k = 0, r = 0; k < n; k++) {
        if (!b->items[k].logits) continue;
        bchoice *c = b->owner[k];
        const serve_draw_job *dj = &b->jobs[r++];
        sb_status cst = dj->st;
        if (cst != SB_OK) {
            drop_job_msg(b, c->j, cst, dj->msg);
            return 1; /* owners of later rows may be gone: their jobs' rows are lost with the failure */
        }
        if (pass_token(b, c, dj->tok, &cst)) {
            if (cst != SB_OK) {
                drop_job(b, c->j, cst);
                return 1;
            }
            choice_end(b, c);
        }
    }
    return 1;
}

// ---- the scheduler thread ----

static void publish_stats(serve_batch *b) {
    pthread_mutex_lock(&b->stats_mu);
    sb_engine_get_stats(b->eng, &b->stats);
    pthread_mutex_unlock(&b->stats_mu);
}

static void *scheduler_main(void *p) {
    serve_batch *b = p;
    serve_engine *e = b->e;
    const int max_seq = e->cfg->parallel;
    for (;;) {
        if (!atomic_load(&e->stopping)) admit(b, max_seq);
        open_waiting(b, max_seq);
        int worked = step(b);
        publish_stats(b);
        if (worked) continue;
        if (b->head && !atomic_load(&e->stopping)) continue; /* choices waiting for their first choice's prompt */
        pthread_mutex_lock(&e->mu);
        while (!e->head && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        int stop = e->stopping && !b->head;
        pthread_mutex_unlock(&e->mu);
        if (stop) return NULL;
    }
}

int serve_batch_device(const serve_batch *b) { return sb_engine_device(b->eng); }

sb_status serve_batch_create(serve_engine *e, serve_batch **out) {
    *out = NULL;
    const serve_config *cfg = e->cfg;
    sb_engine_params ep;
    sb_engine_default_params(&ep);
    ep.n_seq_max = cfg->parallel;
    ep.n_ctx = cfg->n_ctx;
    ep.n_threads = cfg->threads;
    ep.device = cfg->device;
    ep.kv_type = cfg->kv_type;
    serve_batch *b = calloc(1, sizeof *b);
    if (!b) return SB_ERR_OOM;
    b->e = e;
    pthread_mutex_init(&b->stats_mu, NULL);
    sb_status st = sb_engine_create(e->model, &ep, &b->eng);
    if (st != SB_OK) {
        pthread_mutex_destroy(&b->stats_mu);
        free(b);
        return st;
    }
    b->n_batch = 512; /* sb_engine_params' default */
    const double t0 = now_s();
    st = sb_engine_warmup(b->eng, (size_t)b->n_batch, (size_t)cfg->parallel);
    if (st != SB_OK) {
        sb_engine_free(b->eng);
        pthread_mutex_destroy(&b->stats_mu);
        free(b);
        return st;
    }
    sb_engine_get_stats(b->eng, &b->stats);
    fprintf(stderr, "sb serve: %lld step classes ready in %.2f s (%lld plans built, %lld CUDA Graphs captured)\n",
            (long long)b->stats.n_plans_warm, now_s() - t0, (long long)b->stats.n_plans_built, (long long)b->stats.n_graph_captures);
    const int64_t V = e->info.n_vocab;
    const int32_t n_tok = sb_vocab_n_tokens(e->vocab);
    b->items = malloc((size_t)b->n_batch * sizeof *b->items);
    b->owner = malloc((size_t)b->n_batch * sizeof *b->owner);
    b->jobs = malloc((size_t)b->n_batch * sizeof *b->jobs);
    b->eog = malloc((size_t)(n_tok > 0 ? n_tok : 1) * sizeof *b->eog);
    if (!b->items || !b->owner || !b->jobs || !b->eog) {
        serve_batch_free(b);
        return SB_ERR_OOM;
    }
    for (int32_t t = 0; t < n_tok && t < V; t++)
        if (sb_token_is_eog(e->vocab, t)) b->eog[b->n_eog++] = t;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const long drawers = (cores < cfg->parallel ? cores : cfg->parallel) - 1; /* the scheduler draws too */
    if (serve_drawers_create(drawers > 0 ? (int)drawers : 0, V, b->eog, b->n_eog, &b->draw) != SB_OK) {
        serve_batch_free(b);
        return SB_ERR_OOM;
    }
    e->n_ctx = ep.n_ctx ? ep.n_ctx : (e->info.n_ctx_train < 4096 ? e->info.n_ctx_train : 4096);
    if (pthread_create(&b->thread, NULL, scheduler_main, b)) {
        serve_batch_free(b);
        return SB_ERR_OOM;
    }
    b->started = 1;
    *out = b;
    return SB_OK;
}

void serve_batch_join(serve_batch *b) {
    if (b && b->started) pthread_join(b->thread, NULL);
    if (b) b->started = 0;
}

void serve_batch_free(serve_batch *b) {
    if (!b) return;
    serve_batch_join(b);
    while (b->head) {
        bchoice *c = b->head;
        b->head = c->link;
        choice_close(b, c);
        free(c);
    }
    sb_engine_free(b->eng);
    free(b->items);
    free(b->owner);
    serve_drawers_free(b->draw);
    free(b->jobs);
    free(b->eog);
    pthread_mutex_destroy(&b->stats_mu);
    free(b);
}

void serve_batch_stats(serve_batch *b, sb_engine_stats *out) {
    memset(out, 0, sizeof *out);
    if (!b) return;
    pthread_mutex_lock(&b->stats_mu);
    *out = b->stats;
    pthread_mutex_unlock(&b->stats_mu);
}
