/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_chat.c — `sb chat [-m MODEL]`: an interactive multi-turn conversation in the
 * terminal, like `llama-cli -cnv` or `ollama run`. Layer 3 (tools): public header only.
 * Each turn tokenizes the whole conversation with sb_chat_tokenize (the model's chat format; what
 * the user types never becomes control tokens) and generates with sb_generate_tokens, whose prefix
 * reuse keeps the KV cache of everything said before: only the new turn (and the answer, where its
 * re-tokenization differs from the sampled ids) is prefilled. Answers stream to stdout as whole
 * UTF-8 characters (the library's streaming detokenizer, via the text callback).
 * Signals: Ctrl-C (SIGINT) stops the current answer, which stays in the conversation as far as it
 * got; at the prompt it clears the line, and a second Ctrl-C in a row, Ctrl-D (EOF) or /exit ends
 * the program with status 0. The handler is installed with SA_RESTART, so a Ctrl-C that lands in a
 * write to the terminal never fails it; the prompt waits in poll(), which a signal always
 * interrupts. The flag is cleared where it is consumed (a prompt read, the start of an answer), so
 * a Ctrl-C is never lost between them.
 * stdin need not be a terminal: then no prompt is printed and each line is one turn (scripting).
 * A conversation that no longer fits the context is reported in one line and left as it was.
 * Non-goals: line editing and history (no readline dependency), multi-line input, tools.
 */
#include "args.h"
#include "cli_io.h"
#include "progress.h"
#include "sb.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: sb chat [-m MODEL] [options]\n"
               "  -m, --model FILE        GGUF model (default: the embedded model, or $SB_MODEL)\n"
               "  -c, --ctx-size N        context length (default min(model, 4096))\n"
               "  -n, --n-predict N       max tokens per answer (default 512; -1 = until the context is full)\n"
               "  -t, --threads N         CPU threads (default: all cores)\n"
               "      --temp T            temperature (0.8; 0 = greedy)\n"
               "      --top-k K (40)  --top-p P (0.95)  --min-p M (0.05)\n"
               "      --seed S            RNG seed (same seed, same answers)\n"
               "      --system TEXT       system message (also -sys; /system changes it)\n"
               "      " ARG_DEVICE_HELP
               "  -v, --verbose           model details and per-turn token counts on stderr\n"
               "In the conversation: /reset starts over, /system TEXT sets the system message and starts\n"
               "over, /exit (or Ctrl-D) quits, /help lists these. Ctrl-C stops an answer; twice at the\n"
               "prompt quits. With stdin not a terminal, each input line is one turn.\n");
}

// ---- the conversation ----

typedef struct conversation {
    sb_chat_message *m; /* role: static strings; content: owned */
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, const char *role, const char *text, size_t len) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        sb_chat_message *p = (sb_chat_message *)realloc(c->m, nc * sizeof *p);
        if (!p) return -1;
        c->m = p;
        c->cap = nc;
    }
    char *copy = (char *)malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, text, len);
    copy[len] = 0;
    c->m[c->n++] = (sb_chat_message){role, copy};
    return 0;
}

static void conv_drop_last(conversation *c) {
    if (c->n) free((char *)c->m[--c->n].content);
}

/* Forget every message but a leading system message. */
static void conv_reset(conversation *c) {
    size_t keep = c->n && !strcmp(c->m[0].role, "system");
    while (c->n > keep) conv_drop_last(c);
}

static void conv_free(conversation *c) {
    while (c->n) conv_drop_last(c);
    free(c->m);
}

// ---- input lines ----

typedef struct line_reader {
    char buf[4096];
    size_t n, at;
    int eof;
} line_reader;

/* Read one line (without its '\n') into *line. 1: a line; 0: end of input; -1: Ctrl-C came first
 * (the partial line is dropped, as the terminal drops it); -2: a read error (errno). */
static int read_line(line_reader *in, char **line, size_t *cap) {
    size_t len = 0;
    for (;;) {
        if (in->at == in->n) {
            if (in->eof) return len ? 1 : 0;
            struct pollfd pfd = {.fd = 0, .events = POLLIN};
            const int pr = poll(&pfd, 1, -1);
            if (interrupted) {
                interrupted = 0;
                return -1;
            }
            if (pr < 0) {
                if (errno == EINTR) continue; /* another signal: wait again */
                return -2;
            }
            ssize_t k = read(0, in->buf, sizeof in->buf); /* input or end of it is there: no wait */
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) return -2;
            if (k == 0) {
                in->eof = 1;
                if (!len) return 0;
                break;
            }
            in->n = (size_t)k;
            in->at = 0;
        }
        char ch = in->buf[in->at++];
        if (ch == '\n') break;
        if (len + 2 > *cap) {
            size_t nc = *cap ? 2 * *cap : 256;
            char *p = (char *)realloc(*line, nc);
            if (!p) {
                errno = ENOMEM;
                return -2;
            }
            *line = p;
            *cap = nc;
        }
        (*line)[len++] = ch;
    }
    if (!*line) {
        *line = (char *)malloc(1);
        if (!*line) return -2;
        *cap = 1;
    }
    if (len && (*line)[len - 1] == '\r') len--;
    (*line)[len] = 0;
    return 1;
}

// ---- one answer ----

typedef struct answer {
    char *p;
    size_t n, cap;
    int oom;
} answer;

static int on_text(void *user, const char *text, size_t len, int32_t token) {
    (void)token;
    answer *a = (answer *)user;
    if (interrupted) return 1;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (a->n + len + 1 > a->cap) {
        size_t nc = a->cap ? a->cap : 1024;
        while (nc < a->n + len + 1) nc *= 2;
        char *p = (char *)realloc(a->p, nc);
        if (!p) {
            a->oom = 1;
            return 1;
        }
        a->p = p;
        a->cap = nc;
    }
    memcpy(a->p + a->n, text, len);
    a->n += len;
    a->p[a->n] = 0;
    return 0;
}

typedef struct chat_state {
    sb_model *m;
    sb_session *s;
    sb_sampler *smp;
    const sb_vocab *v;
    conversation conv;
    int64_t n_predict;
    int verbose;
} chat_state;

/* Answer the conversation's last user message. SB_OK also when the answer was stopped by Ctrl-C or
 * a full context, or when the conversation no longer fits (the user message is then dropped and a
 * line says so); another status is a failure to report. */
static sb_status reply(chat_state *c) {
    size_t n = 0;
    sb_status st = sb_chat_tokenize(c->v, c->conv.m, c->conv.n, 1, NULL, 0, &n);
    int32_t *ids = NULL;
    if (st == SB_OK || st == SB_ERR_BUFFER_TOO_SMALL) {
        ids = (int32_t *)malloc((n + 1) * sizeof *ids);
        st = ids ? sb_chat_tokenize(c->v, c->conv.m, c->conv.n, 1, ids, n, &n) : SB_ERR_OOM;
    }
    int64_t n_cached = 0, n_ctx = 0;
    if (st == SB_OK) st = sb_session_get_state(c->s, &n_cached, &n_ctx);
    if (st == SB_OK && (int64_t)n >= n_ctx) {
        fprintf(stderr, "sb chat: context full: the conversation is %zu tokens, the context holds %lld; "
                        "/reset starts a new conversation\n", n, (long long)n_ctx);
        conv_drop_last(&c->conv);
        free(ids);
        return SB_OK;
    }
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = c->n_predict;
    sb_generate_result res;
    answer a = {0};
    if (st == SB_OK) st = sb_generate_tokens(c->s, c->smp, ids, n, &gp, on_text, &a, &res);
    free(ids);
    if (a.oom) st = SB_ERR_OOM;
    int stopped = st == SB_ERR_CANCELLED;
    if (st == SB_OK || stopped) {
        fputc('\n', stdout);
        fflush(stdout);
        if (conv_add(&c->conv, "assistant", a.p ? a.p : "", a.n)) st = SB_ERR_OOM;
        else st = SB_OK;
    }
    if (st == SB_OK && !stopped && res.stop == SB_STOP_CONTEXT)
        fprintf(stderr, "sb chat: context full (%lld tokens): the answer was cut; /reset starts a new conversation\n",
                (long long)n_ctx);
    if (st == SB_OK && c->verbose)
        fprintf(stderr, "[prompt %lld tokens, %lld reused, %lld prefilled in %.1f ms | answer %lld tokens in %.1f ms%s]\n",
                (long long)res.n_prompt, (long long)res.n_reused, (long long)(res.n_prompt - res.n_reused),
                res.prefill_seconds * 1e3, (long long)res.n_generated, res.decode_seconds * 1e3,
                stopped ? ", stopped" : "");
    free(a.p);
    return st;
}

// ---- the loop ----

/* A /command. 1: handled, keep going; 0: exit; -1: out of memory. */
static int command(chat_state *c, const char *line) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit") || !strcmp(line, "/bye")) return 0;
    if (!strcmp(line, "/reset")) {
        conv_reset(&c->conv);
        fprintf(stderr, "(new conversation)\n");
    } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || line[7] == 0)) {
        const char *text = line[7] ? line + 8 : "";
        while (c->conv.n) conv_drop_last(&c->conv);
        if (*text && conv_add(&c->conv, "system", text, strlen(text))) return -1;
        fprintf(stderr, *text ? "(system message set; new conversation)\n" : "(system message cleared; new conversation)\n");
    } else if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
        fprintf(stderr, "/reset          start a new conversation (the system message stays)\n"
                        "/system TEXT    set the system message and start a new conversation\n"
                        "/exit           quit (also Ctrl-D, or Ctrl-C twice at the prompt)\n"
                        "Ctrl-C          stop the current answer\n");
    } else {
        fprintf(stderr, "unknown command '%s' (/help lists them)\n", line);
    }
    return 1;
}

static int converse(chat_state *c) {
    int tty = isatty(0);
    line_reader in = {{0}, 0, 0, 0};
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, ctrl_c = 0;
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        int r = read_line(&in, &line, &cap);
        if (r == -1) {
            if (ctrl_c++) {
                fputc('\n', stdout);
                break;
            }
            fprintf(stdout, "\n(Ctrl-C again, Ctrl-D or /exit to quit)\n");
            continue;
        }
        ctrl_c = 0;
        if (r == 0) {
            if (tty) fputc('\n', stdout);
            break;
        }
        if (r == -2) {
            fprintf(stderr, "error: SB_ERR_IO: reading stdin: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (!line[0]) continue;
        if (line[0] == '/') {
            int k = command(c, line);
            if (k < 0) rc = sb_cli_fail(SB_ERR_OOM);
            if (k <= 0) break;
            continue;
        }
        if (conv_add(&c->conv, "user", line, strlen(line))) {
            rc = sb_cli_fail(SB_ERR_OOM);
            break;
        }
        interrupted = 0; /* a Ctrl-C before the answer began was meant for the prompt */
        sb_status st = reply(c);
        interrupted = 0; /* one that stopped the answer is used up */
        if (st != SB_OK) {
            rc = sb_cli_fail(st);
            break;
        }
    }
    free(line);
    return rc;
}

// ---- options and set-up ----

typedef struct chat_opts {
    const char *model, *system;
    int64_t n_ctx, n_predict, threads, seed, top_k;
    int device, verbose;
    sb_sampler_params sp;
} chat_opts;

static int parse(int argc, char **argv, chat_opts *o) {
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (arg_device("chat", argc, argv, &i, &o->device, &rc)) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) rc = arg_str("chat", argc, argv, &i, &o->model);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) rc = arg_i64("chat", argc, argv, &i, 0, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) rc = arg_i64("chat", argc, argv, &i, -1, INT32_MAX, &o->n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = arg_i64("chat", argc, argv, &i, 1, 256, &o->threads);
        else if (!strcmp(a, "--temp")) rc = arg_f32("chat", argc, argv, &i, 0, 100, &o->sp.temp);
        else if (!strcmp(a, "--top-k")) rc = arg_i64("chat", argc, argv, &i, 0, INT32_MAX, &o->top_k);
        else if (!strcmp(a, "--top-p")) rc = arg_f32("chat", argc, argv, &i, 0, 1, &o->sp.top_p);
        else if (!strcmp(a, "--min-p")) rc = arg_f32("chat", argc, argv, &i, 0, 1, &o->sp.min_p);
        else if (!strcmp(a, "--seed")) rc = arg_i64("chat", argc, argv, &i, 0, INT64_MAX, &o->seed);
        else if (!strcmp(a, "--system") || !strcmp(a, "-sys")) rc = arg_str("chat", argc, argv, &i, &o->system);
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
        else {
            fprintf(stderr, "sb chat: unknown option '%s'\n", a);
            rc = 2;
        }
    }
    if (rc) usage(stderr);
    return rc;
}

#define TRY(expr)                      \
    do {                               \
        sb_status try_st_ = (expr);    \
        if (try_st_ != SB_OK) return try_st_; \
    } while (0)

static sb_status open_model(const chat_opts *o, chat_state *c) {
    sb_model_params mp;
    sb_model_default_params(&mp);
    cli_watch_file(o->model); /* a SIGBUS on the mapped model: one line naming it */
    TRY(cli_load_model(o->model, &mp, &c->m));
    sb_model_info mi;
    TRY(sb_model_get_info(c->m, &mi));
    sb_session_params ssp;
    sb_session_default_params(&ssp);
    ssp.n_ctx = o->n_ctx;
    ssp.n_threads = (int)o->threads;
    ssp.device = o->device;
    TRY(sb_session_create(c->m, &ssp, &c->s));
    TRY(sb_sampler_create(&o->sp, mi.n_vocab, &c->smp));
    c->v = sb_model_get_vocab(c->m);
    if (o->verbose) {
        int64_t n_cached = 0, n_ctx = 0;
        sb_session_get_state(c->s, &n_cached, &n_ctx);
        fprintf(stderr, "model: %s (%s), %.1f M params; chat format %s; context %lld; device %s\n", o->model, mi.arch,
                mi.n_params / 1e6, sb_vocab_chat_format(c->v), (long long)n_ctx,
                sb_session_device(c->s) == SB_DEVICE_CUDA ? "cuda (GPU 0)" : "cpu");
    }
    return SB_OK;
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {.n_predict = 512, .seed = -1, .top_k = -1, .device = SB_DEVICE_AUTO};
    sb_sampler_default_params(&o.sp);
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.seed >= 0) o.sp.seed = (uint64_t)o.seed;
    if (o.top_k >= 0) o.sp.top_k = (int32_t)o.top_k;
    if (!o.model) o.model = default_model_path();
    if (!o.model) {
        fprintf(stderr, "sb chat: no -m MODEL given and no embedded model found (set SB_MODEL)\n");
        return 2;
    }
    chat_state c = {.n_predict = o.n_predict, .verbose = o.verbose};
    if (o.verbose) sb_log_set(sb_cli_log, NULL, SB_LOG_INFO);
    sb_status st = open_model(&o, &c);
    if (st == SB_OK && o.system && conv_add(&c.conv, "system", o.system, strlen(o.system))) st = SB_ERR_OOM;
    if (st != SB_OK) {
        rc = sb_cli_fail(st);
    } else {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART; /* writes to the terminal resume; the prompt's poll() still returns EINTR */
        sigaction(SIGINT, &sa, &old);
        if (isatty(0))
            fprintf(stderr, "sb chat: %s — /help for commands, Ctrl-C stops an answer, Ctrl-D quits\n", o.model);
        rc = converse(&c);
        sigaction(SIGINT, &old, NULL);
    }
    conv_free(&c.conv);
    sb_sampler_free(c.smp);
    sb_session_free(c.s);
    sb_model_free(c.m);
    if (o.verbose) sb_log_set(NULL, NULL, SB_LOG_WARN);
    if (fflush(stdout) != 0 && rc == 0) {
        fprintf(stderr, "error: SB_ERR_IO: writing stdout: %s\n", strerror(errno));
        rc = 1;
    }
    return rc;
}
