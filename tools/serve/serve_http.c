/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_http.c — the HTTP side of `sb serve`, on libmicrohttpd with one thread per
 * connection: routing (404 unknown path, 405 wrong method with Allow), the API key (401), the body
 * cap (413), 503 while the model loads, and the endpoints. A generation request is parsed,
 * tokenized and checked on the connection thread (every 4xx comes before any work), queued (429
 * when the queue is full), then waited on: a non-stream reply is sent whole at the end, a stream
 * is sent as SSE events as the worker produces them. While waiting the connection thread polls
 * its socket: a client that hung up cancels its job (dropped from the queue, or stopped by the
 * generate callback at the next token). The chat page's files (serve_web.h) are answered to GET
 * without the API key (they hold no data; the page asks for the key) and with a
 * Content-Security-Policy that lets the page load nothing from elsewhere.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "serve.h"
#include "serve_web.h"

#include "llama_flags.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef enum route {
    R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_WEB
} route;

static const struct {
    const char *path, *method;
    route r;
} routes[] = {
    {"/health", "GET", R_HEALTH},           {"/v1/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},         {"/v1/models", "GET", R_MODELS},
    {"/models", "GET", R_MODELS},           {"/v1/chat/completions", "POST", R_CHAT},
    {"/chat/completions", "POST", R_CHAT},  {"/v1/completions", "POST", R_COMPLETIONS},
    {"/completions", "POST", R_COMPLETIONS}, {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
};

/* What one request of a connection carries between the handler's calls. */
typedef struct conn_state {
    route r;
    serve_buf body;
    int too_large;
    int answered;   /* a response is queued already (an error found before the body) */
    int counted;    /* counted in e->inflight until the reply is sent (on_completed) */
    const serve_web_file *web; /* R_WEB: the file */
} conn_state;

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, char *text, const char *type) {
    if (!text) {
        static char oom[] = "{\"error\":{\"code\":500,\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof oom - 1, oom, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        enum MHD_Result rc = MHD_queue_response(c, 500, r);
        MHD_destroy_response(r);
        return rc;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_error(serve_engine *e, struct MHD_Connection *c, const serve_error *err) {
    atomic_fetch_add(&e->metrics.http_errors, 1);
    return send_text(c, (unsigned)err->status, serve_json_error(err), "application/json");
}

static enum MHD_Result fail(serve_engine *e, struct MHD_Connection *c, int status, const char *type, const char *fmt, const char *arg) {
    serve_error err = {0};
    /* fmt is one of this file's literals with one %s */
    serve_error_set(&err, status, type, NULL, fmt, arg);
    return send_error(e, c, &err);
}

/* 1 when the peer has closed its side (or the socket failed). */
static int client_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* The client of j hung up: cancel j, say so on stderr. */
static void hang_up(serve_engine *e, serve_job *j) {
    serve_engine_cancel(e, j);
    fprintf(stderr, "sb serve: %s: the client hung up; cancelled\n", j->id);
}

/* Wait 50 ms at most for j's condition variable (j->mu held). */
static void wait_a_bit(serve_job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

typedef struct stream_ctx {
    serve_engine *e;
    serve_job *j;
    size_t sent;
    int fd;
} stream_ctx;

/* libmicrohttpd's content reader for a stream: the SSE bytes the worker has produced, blocking
 * (this connection's own thread) until there are some, the job is done, or the client is gone. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *s = cls;
    serve_job *j = s->j;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (s->sent < j->sse.len) {
            size_t n = j->sse.len - s->sent < max ? j->sse.len - s->sent : max;
            memcpy(buf, j->sse.data + s->sent, n);
            s->sent += n;
            if (s->sent == j->sse.len) s->sent = j->sse.len = 0; /* all sent: reuse the buffer */
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        if (j->state == JOB_DONE) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        wait_a_bit(j);
        if (j->state != JOB_DONE && client_gone(s->fd)) {
            pthread_mutex_unlock(&j->mu);
            hang_up(s->e, j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *s = cls;
    serve_engine_cancel(s->e, s->j); /* a no-op once the job is done */
    serve_job_release(s->j);
    free(s);
}

static enum MHD_Result start_stream(serve_engine *e, struct MHD_Connection *c, serve_job *j) {
    stream_ctx *s = calloc(1, sizeof *s);
    if (!s) {
        serve_engine_cancel(e, j);
        serve_job_release(j);
        return send_text(c, 500, NULL, NULL);
    }
    *s = (stream_ctx){e, j, 0, conn_fd(c)};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

/* A non-stream reply: wait for the job (cancelling it if the client leaves), then send it whole. */
static enum MHD_Result finish_plain(serve_engine *e, struct MHD_Connection *c, serve_job *j) {
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (j->state != JOB_DONE) {
        wait_a_bit(j);
        if (j->state != JOB_DONE && client_gone(fd)) {
            pthread_mutex_unlock(&j->mu);
            hang_up(e, j);
            serve_job_release(j);
            return MHD_NO; /* nobody to answer: close the connection */
        }
    }
    pthread_mutex_unlock(&j->mu);
    enum MHD_Result rc;
    if (j->status == SB_OK) rc = send_text(c, 200, serve_json_result(e, j), "application/json");
    else if (j->status == SB_ERR_CANCELLED) rc = fail(e, c, 503, "unavailable_error", "%s", j->error);
    else {
        serve_error err = {0};
        serve_error_set(&err, 500, "server_error", NULL, "%s: %s", sb_status_str(j->status), j->error);
        rc = send_error(e, c, &err);
    }
    serve_job_release(j);
    return rc;
}

/* A reply id: the kind, this process's random tag (ids stay unique across the servers behind one
 * load balancer, which may start in the same second), the time and a counter. */
static serve_job *make_job(serve_request *req) {
    static atomic_ullong counter;
    static atomic_uint tag; /* 0 until the first job draws it */
    unsigned t = atomic_load(&tag);
    if (!t) {
        unsigned fresh = (unsigned)random_seed() | 1u;
        t = atomic_compare_exchange_strong(&tag, &t, fresh) ? fresh : t;
    }
    serve_job *j = serve_job_new();
    if (!j) return NULL;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->created = (int64_t)time(NULL);
    snprintf(j->id, sizeof j->id, "%s-%08x%llx%llx", j->req.kind == SERVE_CHAT ? "chatcmpl" : "cmpl", t,
             (unsigned long long)j->created, (unsigned long long)atomic_fetch_add(&counter, 1));
    j->text = calloc((size_t)j->req.n, sizeof *j->text);
    j->finish = calloc((size_t)j->req.n, sizeof *j->finish);
    j->logprobs = calloc((size_t)j->req.n, sizeof *j->logprobs);
    for (int i = 0; j->text && i < j->req.n; i++)
        if (serve_buf_add(&j->text[i], "", 0)) {
            serve_job_release(j);
            return NULL;
        }
    if (!j->text || !j->finish || !j->logprobs) {
        serve_job_release(j);
        return NULL;
    }
    return j;
}

static enum MHD_Result handle_generate(serve_engine *e, struct MHD_Connection *c, conn_state *cs, const cJSON *body,
                                       serve_kind kind) {
    serve_error err = {0};
    serve_request req;
    if (serve_parse_request(e, body, kind, &req, &err)) return send_error(e, c, &err);
    serve_job *j = make_job(&req);
    if (!j) {
        serve_request_free(&req);
        return send_text(c, 500, NULL, NULL);
    }
    if (serve_engine_submit(e, j)) {
        serve_job_release(j);
        atomic_fetch_add(&e->metrics.rejected_queue_full, 1);
        serve_error_set(&err, 429, "rate_limit_error", NULL,
                        "the server is busy: all %d slots are taken and %d requests are queued (--queue-size); retry later",
                        e->cfg->parallel, e->cfg->queue_size);
        return send_error(e, c, &err);
    }
    cs->counted = 1;
    atomic_fetch_add(&e->inflight, 1);
    return j->req.stream ? start_stream(e, c, j) : finish_plain(e, c, j);
}

static enum MHD_Result send_web(struct MHD_Connection *c, const serve_web_file *f) {
    struct MHD_Response *r = MHD_create_response_from_buffer(f->size, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", f->type);
    MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

/* A request whose body is complete. */
static enum MHD_Result dispatch(serve_engine *e, struct MHD_Connection *c, conn_state *cs) {
    if (cs->r == R_WEB) return send_web(c, cs->web);
    if (!atomic_load(&e->ready))
        return fail(e, c, 503, "unavailable_error", "%s", atomic_load(&e->stopping) ? SERVE_SHUTDOWN_MSG : "Loading model");
    if (cs->r == R_HEALTH) return send_text(c, 200, strdup("{\"status\":\"ok\"}"), "application/json");
    if (cs->r == R_METRICS) return send_text(c, 200, serve_metrics_text(e), "text/plain; version=0.0.4");
    if (cs->r == R_MODELS) return send_text(c, 200, serve_json_models(e), "application/json");
    serve_error err = {0};
    cJSON *body = serve_parse_body(cs->body.data, cs->body.len, &err);
    if (!body) return send_error(e, c, &err);
    enum MHD_Result rc;
    char *out = NULL;
    switch (cs->r) {
    case R_CHAT: rc = handle_generate(e, c, cs, body, SERVE_CHAT); break;
    case R_COMPLETIONS: rc = handle_generate(e, c, cs, body, SERVE_COMPLETION); break;
    default:
        out = cs->r == R_TOKENIZE ? serve_tokenize(e, body, &err) : serve_detokenize(e, body, &err);
        rc = out ? send_text(c, 200, out, "application/json") : send_error(e, c, &err);
    }
    cJSON_Delete(body);
    return rc;
}

/* Constant-time comparison of the Authorization header with "Bearer KEY". */
static int authorized(const serve_engine *e, struct MHD_Connection *c) {
    const char *key = e->cfg->api_key;
    if (!key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t n = strlen(key), m = strlen(h);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

/* First call of a request: route, method, key and declared size, before any body is read. */
static enum MHD_Result admit(serve_engine *e, struct MHD_Connection *c, const char *url, const char *method, conn_state *cs) {
    const char *allow = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(url, routes[i].path)) continue;
        if (!strcmp(method, routes[i].method)) cs->r = routes[i].r;
        else allow = routes[i].method;
    }
    for (size_t i = 0; i < serve_web_n_files; i++) {
        if (strcmp(url, serve_web_files[i].path)) continue;
        if (!strcmp(method, "GET")) cs->r = R_WEB, cs->web = &serve_web_files[i];
        else allow = "GET";
    }
    if (cs->r == R_NONE && allow) {
        serve_error err = {0};
        serve_error_set(&err, 405, "invalid_request_error", NULL, "%s %s: method not allowed (use %s)", method, url, allow);
        atomic_fetch_add(&e->metrics.http_errors, 1);
        char *text = serve_json_error(&err);
        struct MHD_Response *r = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(text);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Allow", allow);
        MHD_add_response_header(r, "Content-Type", "application/json");
        enum MHD_Result rc = MHD_queue_response(c, 405, r);
        MHD_destroy_response(r);
        cs->answered = 1;
        return rc;
    }
    cs->answered = cs->r == R_NONE || (cs->r != R_HEALTH && cs->r != R_WEB && !authorized(e, c));
    if (cs->r == R_NONE) return fail(e, c, 404, "not_found_error", "no such endpoint: %s", url);
    if (cs->answered)
        return fail(e, c, 401, "authentication_error", "%s", "invalid or missing API key (Authorization: Bearer KEY)");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > SERVE_MAX_BODY) cs->too_large = 1;
    return MHD_YES;
}

static enum MHD_Result too_large(serve_engine *e, struct MHD_Connection *c, conn_state *cs) {
    serve_error err = {0};
    serve_error_set(&err, 413, "invalid_request_error", NULL, "the request body is larger than %u bytes", SERVE_MAX_BODY);
    cs->answered = 1;
    return send_error(e, c, &err);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_engine *e = cls;
    conn_state *cs = *con_cls;
    if (!cs) { /* the headers are in: decide before reading any body */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        enum MHD_Result rc = admit(e, c, url, method, cs);
        if (rc != MHD_YES || cs->answered) return rc;
        return cs->too_large ? too_large(e, c, cs) : MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cs->answered) return MHD_YES; /* answered already: the rest is discarded */
        /* libmicrohttpd takes no response in the middle of a body: past the cap the rest is
         * read and dropped (memory stays bounded), and the 413 goes out at its end */
        if (cs->too_large || cs->body.len + n > SERVE_MAX_BODY) {
            cs->too_large = 1;
            return MHD_YES;
        }
        return serve_buf_add(&cs->body, upload, n) ? MHD_NO : MHD_YES;
    }
    if (cs->answered) return MHD_YES;
    return cs->too_large ? too_large(e, c, cs) : dispatch(e, c, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)c;
    (void)why;
    serve_engine *e = cls;
    conn_state *cs = *con_cls;
    if (cs && cs->counted) atomic_fetch_sub(&e->inflight, 1);
    if (cs) free(cs->body.data);
    free(cs);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    /* the two lines libmicrohttpd writes when we close the connection of a client that hung up:
     * hang_up() has said so already */
    if (strstr(line, "Application reported internal error") || strstr(line, "application error generating response")) return;
    fprintf(stderr, "sb serve: http: %s%s", line, strchr(line, '\n') ? "" : "\n");
}

struct MHD_Daemon *serve_http_start(serve_engine *e, int *port_out) {
    const serve_config *cfg = e->cfg;
    struct sockaddr_in v4 = {0};
    struct sockaddr_in6 v6 = {0};
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
    const struct sockaddr *addr;
    if (inet_pton(AF_INET, cfg->host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)cfg->port);
        addr = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, cfg->host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)cfg->port);
        addr = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        fprintf(stderr, "error: SB_ERR_INVALID_ARG: --host '%s' is not an IPv4 or IPv6 address\n", cfg->host);
        return NULL;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, e, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, e, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(cfg->parallel + cfg->queue_size + 64), MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "error: SB_ERR_IO: cannot listen on %s port %d (in use, or not an address of this machine)\n",
                cfg->host, cfg->port);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : cfg->port;
    return d;
}

void serve_http_stop(serve_engine *e, struct MHD_Daemon *d, double max_s) {
    if (!d) return;
    for (int i = 0; i < (int)(max_s * 100) && atomic_load(&e->inflight) > 0; i++) nanosleep(&(struct timespec){0, 10000000L}, NULL);
    MHD_stop_daemon(d);
}
