/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/cmd_serve.c — `sb serve` (the program sb-serve): an OpenAI-compatible HTTP server
 * (docs/serve.md) with llama-server's flags. Listens first (GET /health answers 503 while the model loads), then loads
 * the model and one session per slot, then serves until SIGINT or SIGTERM: queued and running
 * requests are cancelled, the workers joined, the HTTP server stopped, exit 0. Binding an address
 * other than loopback needs --api-key. Usage errors are one line and exit 2; a model that does not
 * load or a port that cannot be bound is one "error:" line and exit 1. Uses only the public header.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: sb serve [-m MODEL] [options]\n"
            "  -m, --model FILE        GGUF model (default: the embedded model, or $SB_MODEL)\n"
            "      --host ADDR         address to listen on (default 127.0.0.1; another than loopback needs --api-key)\n"
            "      --port N            TCP port (default 8080; 0: any free port, printed on stderr)\n"
            "  -c, --ctx-size N        context tokens of each slot (default min(model, 4096))\n"
            "  -np, --parallel N       sequences decoded at the same time (default 1, at most %d): one batched step\n"
            "                          for all of them over a shared paged KV cache (continuous batching)\n"
            "  -nocb, --no-cont-batching  a session per slot instead, each decoding alone (-cb: the default)\n"
            "      --queue-size N      requests that may wait for a slot; more get HTTP 429 (default 64, 1..%d)\n"
            "      --kv-type f16|f32, -ctk, -ctv  the KV cache's type (default f16; K and V share it)\n"
            "  -t, --threads N         CPU threads (default: all cores for the batched step; without it the cores\n"
            "                          divided among the slots)\n"
            "      --api-key KEY       require 'Authorization: Bearer KEY' on every endpoint but /health\n"
            "  -a, --alias NAME        model id in /v1/models and replies (default: the file name)\n"
            "      --no-mmap           read the model into memory instead of mapping it (CPU decode reads it\n"
            "                          from huge pages where the kernel gives them: faster; the file's size in RAM)\n"
            "      " ARG_DEVICE_HELP
            "  -v, --verbose           library info lines on stderr\n",
            SERVE_MAX_PARALLEL, SERVE_MAX_QUEUE);
}

static int is_loopback(const char *host) {
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* Parse argv into c. 0 to serve, 2 after a one-line usage error, -1 after --help. */
static int parse_serve_args(int argc, char **argv, serve_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8080;
    c->parallel = 1;
    c->queue_size = 64;
    c->device = SB_DEVICE_AUTO;
    int64_t port = 8080, par = 1, queue = 64, threads = 0;
    const char *kv = NULL;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (arg_device("serve", argc, argv, &i, &c->device, &rc)) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) rc = arg_str("serve", argc, argv, &i, &c->model_path);
        else if (!strcmp(a, "--host")) rc = arg_str("serve", argc, argv, &i, &c->host);
        else if (!strcmp(a, "--port")) rc = arg_i64("serve", argc, argv, &i, 0, 65535, &port);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) rc = arg_i64("serve", argc, argv, &i, 0, 1 << 24, &c->n_ctx);
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) rc = arg_i64("serve", argc, argv, &i, 1, SERVE_MAX_PARALLEL, &par);
        else if (!strcmp(a, "--queue-size")) rc = arg_i64("serve", argc, argv, &i, 1, SERVE_MAX_QUEUE, &queue);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = arg_i64("serve", argc, argv, &i, 1, 256, &threads);
        else if (!strcmp(a, "--api-key")) rc = arg_str("serve", argc, argv, &i, &c->api_key);
        else if (!strcmp(a, "-a") || !strcmp(a, "--alias")) rc = arg_str("serve", argc, argv, &i, &c->alias);
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) c->verbose = 1;
        else if (!strcmp(a, "--kv-type") || !strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k") || !strcmp(a, "-ctv") ||
                 !strcmp(a, "--cache-type-v")) {
            const char *t = NULL;
            rc = arg_str("serve", argc, argv, &i, &t);
            if (!rc && strcmp(t, "f16") && strcmp(t, "f32")) rc = usage_error("serve", "%s '%s': the KV cache here is f16 or f32", a, t);
            if (!rc && kv && strcmp(kv, t)) rc = usage_error("serve", "%s %s and %s: K and V share one cache type here", a, t, kv);
            kv = t;
        } else if (!strcmp(a, "--no-mmap")) c->no_mmap = 1;
        else if (!strcmp(a, "-nocb") || !strcmp(a, "--no-cont-batching")) c->no_batching = 1;
        else if (!strcmp(a, "-cb") || !strcmp(a, "--cont-batching")) c->no_batching = 0;
        else rc = usage_error("serve", "unknown option '%s'", a);
    }
    if (rc) return rc;
    if (!strcmp(c->host, "localhost")) c->host = "127.0.0.1";
    if (c->api_key && !*c->api_key) return usage_error("serve", "--api-key must not be empty");
    if (!is_loopback(c->host) && !c->api_key)
        return usage_error("serve", "--host %s is not loopback: give --api-key KEY so that strangers cannot use the server", c->host);
    c->port = (int)port;
    c->parallel = (int)par;
    c->queue_size = (int)queue;
    c->threads = (int)threads; /* 0: all cores for the batched engine, the cores divided among the slots for sessions */
    c->kv_type = kv && !strcmp(kv, "f32") ? SB_TYPE_F32 : SB_TYPE_F16; /* llama-server's default: f16 */
    if (!c->model_path) c->model_path = default_model_path();
    if (!c->model_path) {
        fprintf(stderr, "sb serve: no -m MODEL given and no embedded model found (set SB_MODEL)\n");
        return 2;
    }
    return 0;
}

/* One line "error: STATUS: detail" on stderr; exit status 1. */
static int serve_fail(sb_status s) {
    fprintf(stderr, "error: %s: ", sb_status_str(s));
    sb_put_safe(stderr, sb_last_error(), strlen(sb_last_error()), 0); /* it may quote the file's strings */
    fputc('\n', stderr);
    return 1;
}

int serve_main(int argc, char **argv) {
    serve_config cfg;
    int rc = parse_serve_args(argc, argv, &cfg);
    if (rc) return rc < 0 ? 0 : rc;
    /* every thread started from here on inherits the mask: the signals are taken by sigwait below */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    sb_log_set(sb_cli_log, NULL, cfg.verbose ? SB_LOG_INFO : SB_LOG_WARN);
    static serve_engine e;
    serve_engine_init(&e, &cfg);
    int port = 0;
    struct MHD_Daemon *d = serve_http_start(&e, &port);
    if (!d) return 1;
    int v6 = strchr(cfg.host, ':') != NULL;
    fprintf(stderr, "sb serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", cfg.host, v6 ? "]" : "", port);
    cli_watch_file(cfg.model_path);
    sb_status st = serve_engine_load(&e);
    if (st == SB_OK) {
        fprintf(stderr, "sb serve: ready\n");
        int sig = 0;
        sigwait(&stop, &sig);
        fprintf(stderr, "sb serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    serve_engine_halt(&e);
    serve_http_stop(&e, d, 10);
    serve_engine_free(&e);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    return st == SB_OK ? 0 : serve_fail(st);
}
