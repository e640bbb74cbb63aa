/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve.h — what the parts of `sb serve` share: the limits every request field is
 * checked against, a parsed request, a job (one request on its way through the queue and the
 * engine), the engine (model, a bounded queue, and either the batch scheduler — serve_batch.c — or
 * N slots each with its own sb_session and worker thread), the metrics counters and the JSON
 * builders. Uses only the public header, libmicrohttpd (serve_http.c) and cJSON.
 *
 * Threads: libmicrohttpd runs one thread per connection; it parses and tokenizes the request (the
 * vocabulary is immutable, so that is safe on any thread), enqueues a job and waits on it. The
 * batch scheduler is the only thread that touches its sb_engine; each slot's worker owns its
 * session; the model is shared read-only. A job is shared by one connection thread and at most one
 * scheduler or worker, under its mutex.
 */
#ifndef SB_TOOLS_SERVE_H
#define SB_TOOLS_SERVE_H

#include "sonicboom.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Limits: a request over any of them is HTTP 400 (413 for the body) before any work. */
#define SERVE_MAX_BODY (4u << 20)       /* request body bytes */
#define SERVE_MAX_MESSAGES 1024         /* chat messages */
#define SERVE_MAX_N 8                   /* choices per request */
#define SERVE_MAX_STOP 16               /* stop strings */
#define SERVE_MAX_STOP_LEN 256          /* bytes of one stop string */
#define SERVE_MAX_LOGIT_BIAS 1024       /* logit_bias entries */
#define SERVE_MAX_PARALLEL 64           /* --parallel */
#define SERVE_MAX_QUEUE 4096            /* --queue-size */

/* A growable byte buffer (malloc'd; data NUL-terminated). */
typedef struct serve_buf {
    char *data;
    size_t len, cap;
} serve_buf;
int serve_buf_add(serve_buf *b, const char *s, size_t n); /* 0, or -1 when out of memory */

typedef enum serve_kind { SERVE_CHAT = 0, SERVE_COMPLETION = 1 } serve_kind;

/* A validated generation request. Owns prompt and stops. */
typedef struct serve_request {
    serve_kind kind;
    int stream, include_usage, n;
    int ignore_eos;              /* llama-server's extension: run to max_tokens */
    int64_t max_tokens;          /* new tokens per choice, >= 1 */
    int32_t *prompt;             /* token ids, n_prompt of them */
    size_t n_prompt;
    char *stops[SERVE_MAX_STOP];
    size_t n_stop;
    sb_sampler_params sp;        /* sp.seed: the seed of choice 0; choice i uses seed + i */
    int32_t *bias_tok;           /* logit_bias: n_bias (token, bias) pairs, distinct tokens */
    float *bias_val;
    size_t n_bias;
    int logprobs;                /* log-probabilities asked for (chat: logprobs true; completions: logprobs N) */
    int top_logprobs;            /* alternatives per token, 0..SB_MAX_TOP_LOGPROBS */
} serve_request;
void serve_request_free(serve_request *r);

typedef enum serve_job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE } serve_job_state;

/* One request in flight. Created by the connection thread with two references (its own and the
 * engine's); whoever drops the last frees it. */
typedef struct serve_job {
    serve_request req;
    char id[48];                  /* "chatcmpl-…" / "cmpl-…" */
    int64_t created;              /* unix seconds */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job_state state;        /* under mu */
    atomic_int cancel;            /* set by the connection on disconnect: stop at the next token */
    int refs;                     /* under mu */
    struct serve_job *next;       /* queue link, under the engine's lock */
    /* results, under mu; complete once state == JOB_DONE */
    serve_buf sse;                /* stream: SSE bytes not yet sent */
    serve_buf *text;              /* non-stream: text of each choice (req.n of them) */
    const char **finish;          /* finish_reason of each choice */
    struct cJSON **logprobs;      /* non-stream with req.logprobs: each choice's "logprobs" object */
    int64_t n_generated, n_cached;
    sb_status status;             /* SB_OK, or why it failed (error holds the detail) */
    char error[256];
} serve_job;

serve_job *serve_job_new(void);    /* refs = 1; NULL when out of memory */
void serve_job_release(serve_job *j);

typedef struct serve_metrics {
    atomic_llong requests_ok, requests_failed, requests_cancelled, rejected_queue_full, http_errors;
    atomic_llong prompt_tokens, cached_tokens, predicted_tokens;
    atomic_llong prompt_us, predicted_us;   /* microseconds spent in prefill / decode */
    atomic_int processing;
} serve_metrics;

typedef struct serve_config {
    const char *model_path, *host, *api_key, *alias;
    int port, parallel, queue_size, threads, device, verbose;
    int kv_type;                  /* SB_TYPE_F16 (default) or SB_TYPE_F32 */
    int no_batching;              /* --no-cont-batching: a session per slot even where the batched engine runs */
    int no_mmap;                  /* --no-mmap: read the model into memory (huge pages where the kernel gives them) */
    int64_t n_ctx;
} serve_config;

typedef struct serve_batch serve_batch;

typedef struct serve_engine {
    const serve_config *cfg;
    sb_model *model;
    const sb_vocab *vocab;
    sb_model_info info;
    int64_t n_ctx;                /* per slot */
    atomic_int ready;             /* 1 once the model is loaded and every slot has its session */
    serve_batch *batch;           /* continuous batching (serve_batch.c); NULL: sessions, one worker per slot */
    sb_session **sessions;
    pthread_t *workers;
    int n_workers;
    pthread_mutex_t mu;           /* the queue */
    pthread_cond_t cv;
    serve_job *head, *tail;
    serve_job *running[SERVE_MAX_PARALLEL]; /* each slot's job, under mu */
    int queued;
    atomic_int stopping;          /* set once by serve_engine_halt */
    atomic_int inflight;          /* generation requests whose reply is not finished sending */
    serve_metrics metrics;
} serve_engine;

/* Engine lifetime (serve_engine.c). serve_engine_init: locks and counters only (the HTTP server
 * answers /health 503 meanwhile); serve_engine_load: model, sessions, workers; ready afterwards. */
void serve_engine_init(serve_engine *e, const serve_config *cfg);
sb_status serve_engine_load(serve_engine *e);
/* serve_engine_halt: not ready any more, refuse new jobs, cancel queued and running ones, join the
 * workers (the HTTP server may still be answering); serve_engine_free: sessions and model, once
 * the HTTP server has stopped. */
void serve_engine_halt(serve_engine *e);
void serve_engine_free(serve_engine *e);

/* Enqueue j (the engine takes a reference). 0, or -1 when the queue is full (429). */
int serve_engine_submit(serve_engine *e, serve_job *j);
/* Ask j to stop: dropped from the queue if still waiting, else stopped at its next token. */
void serve_engine_cancel(serve_engine *e, serve_job *j);
int serve_engine_queued(serve_engine *e);
#define SERVE_SHUTDOWN_MSG "the server is shutting down"

/* One choice's text on its way into the reply (serve_engine.c), for both ways of running jobs:
 * serve_gen_text is the sb_text_fn given to the library; it stops (nonzero) once the job is
 * cancelled, and sets oom when the reply cannot grow. */
typedef struct serve_gen {
    serve_engine *e;
    serve_job *j;
    int choice;
    int oom;
    const sb_sampler *smp;
    size_t lp_done;               /* sampler log entries already in the reply */
    int64_t lp_offset;
} serve_gen;
int serve_gen_text(void *user, const char *text, size_t len, int32_t token);
/* Choice i's sampler (seed + i, logit_bias, the logprob log). */
sb_status serve_choice_sampler(serve_engine *e, const serve_request *r, int i, sb_sampler **out);
/* Before choice i's first token (its logprobs object, a chat stream's role chunk) and after its
 * last (metrics, finish_reason, the stream's finish chunk); each returns 1 when out of memory. */
int serve_choice_begin(serve_engine *e, serve_job *j, int i);
int serve_choice_end(serve_engine *e, serve_job *j, int i, const sb_generate_result *res);
/* A job taken from the queue, and its end with status st (oom: the reply could not grow; detail:
 * the message, NULL for sb_last_error()): the outcome counted, a stream's usage / error / [DONE]
 * events, the connection woken. */
void serve_job_start(serve_engine *e, serve_job *j);
void serve_job_end(serve_engine *e, serve_job *j, sb_status st, int oom, const char *detail);

/* Continuous batching (serve_batch.c): the batched engine (--parallel sequences over one paged KV
 * cache) and its scheduler thread, which takes jobs from e's queue. SB_ERR_UNSUPPORTED where the
 * library has no batched engine for the model or device (the caller then runs sessions).
 * serve_batch_join waits for the scheduler after serve_engine_halt set e->stopping; stats are the
 * engine's as of the last step (for /metrics, from any thread). */
sb_status serve_batch_create(serve_engine *e, serve_batch **out);
void serve_batch_join(serve_batch *b);
void serve_batch_free(serve_batch *b);
void serve_batch_stats(serve_batch *b, sb_engine_stats *out);
int serve_batch_device(const serve_batch *b); /* sb_engine_device of its engine */

/* The draws of one step in parallel (serve_draw.c): each job samples its row with its own sampler
 * and accepts the token (tok, or st with msg). n_threads pool threads (0..15) besides the caller;
 * eog (kept by the caller) are masked in jobs with mask_eog. create: SB_ERR_OOM only. */
typedef struct serve_draw_job {
    sb_sampler *smp;
    const float *logits;
    int mask_eog;
    int exact_unmasked; /* a deterministic draw without logprobs: its result on the unmasked row is the
                           masked row's unless an end-of-generation token wins (then it redraws) */
    int32_t tok;
    sb_status st;
    char msg[200];
} serve_draw_job;
typedef struct serve_drawers serve_drawers;
sb_status serve_drawers_create(int n_threads, int64_t n_vocab, const int32_t *eog, int n_eog, serve_drawers **out);
void serve_drawers_run(serve_drawers *d, serve_draw_job *jobs, size_t n);
void serve_drawers_free(serve_drawers *d);

/* Request parsing (serve_parse.c). Fill r from a parsed body; 0, else an HTTP status (400) with
 * *err_type / err (a message naming the field) filled. */
typedef struct serve_error {
    int status;
    const char *type;             /* "invalid_request_error", "exceed_context_size_error", ... */
    const char *param;            /* the offending field, or NULL */
    char message[512];
} serve_error;
int serve_error_set(serve_error *e, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
struct cJSON;
int serve_parse_request(const serve_engine *e, const struct cJSON *body, serve_kind kind, serve_request *r, serve_error *err);
/* Body bytes -> cJSON tree, refusing NUL bytes, \u0000 escapes, trailing bytes and a non-object. */
struct cJSON *serve_parse_body(const char *data, size_t len, serve_error *err);

/* JSON output (serve_output.c): each returns a malloc'd NUL-terminated string or NULL (OOM). */
char *serve_json_error(const serve_error *e);
char *serve_json_result(const serve_engine *e, const serve_job *j);
/* SSE events of a stream, appended to j->sse (under j->mu): a piece of choice i's text, the end of
 * choice i, the usage chunk, the terminator, an error event. 0, or -1 when out of memory. */
int serve_sse_piece(const serve_engine *e, serve_job *j, int choice, const char *text, size_t len, int first,
                    struct cJSON *logprobs /* the chunk's "logprobs" (taken over), or NULL for null */);
int serve_sse_finish(const serve_engine *e, serve_job *j, int choice, const char *reason);
int serve_sse_usage(const serve_engine *e, serve_job *j);
int serve_sse_done(serve_job *j);
int serve_sse_error(serve_job *j, const char *message);
char *serve_json_models(const serve_engine *e);
const char *serve_model_id(const serve_engine *e);

/* Log-probabilities in OpenAI's shapes (serve_logprobs.c). A chat's "logprobs" is {"content":
 * [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal": null}; a
 * completion's is the legacy {tokens, token_logprobs, top_logprobs: [{piece: logprob}],
 * text_offset}. serve_logprobs_new: an empty one (NULL when out of memory). serve_logprobs_take:
 * append entries [*done, sb_sampler_n_logprobs) of smp's log to lp, skipping end-of-generation
 * tokens; *done and *offset (bytes of the pieces so far, for text_offset) advance. 0, or -1 (OOM). */
struct cJSON *serve_logprobs_new(serve_kind kind);
int serve_logprobs_take(const serve_engine *e, serve_kind kind, const sb_sampler *smp, size_t *done, int64_t *offset,
                        struct cJSON *lp);

/* /tokenize and /detokenize (serve_tokens.c): response JSON or NULL with err set. */
char *serve_tokenize(const serve_engine *e, const struct cJSON *body, serve_error *err);
char *serve_detokenize(const serve_engine *e, const struct cJSON *body, serve_error *err);

/* Prometheus text (serve_metrics.c), malloc'd. */
char *serve_metrics_text(serve_engine *e);

/* `sb serve ARGS` (cmd_serve.c): argv[0] is the program, options from argv[1]; the exit status. */
int serve_main(int argc, char **argv);

/* The HTTP server (serve_http.c). Start listening (cfg->port 0: any free port, *port_out the one
 * bound); NULL with a message on stderr on failure. */
struct MHD_Daemon;
struct MHD_Daemon *serve_http_start(serve_engine *e, int *port_out);
/* Stop: first wait (up to max_s seconds) for the replies of finished jobs to be sent, so that a
 * stream cut by the shutdown still ends with its error event and [DONE]. */
void serve_http_stop(serve_engine *e, struct MHD_Daemon *d, double max_s);

#endif
