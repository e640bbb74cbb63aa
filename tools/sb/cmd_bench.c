/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_bench.c — `sb bench`, a drop-in for llama-bench: its flags (lists, ranges, several
 * -m), its tests (pp N, tg N, pp N+tg M, each at KV depths "@ dD"), its outputs (-o / -oe md, csv,
 * json, jsonl, sql: bench_output.c) with its field set, in its order of runs (model, ngl, n_batch,
 * n_ubatch, threads, depth, then pp, tg, pg tests). Mean ± stddev over -r repetitions after untimed
 * warm-ups. Beyond llama-bench: in md, GB/s of weights read by a tg test and its fraction of this
 * machine's read bandwidth (measured in the same run), and --prefix P,N: first-token latency for a
 * session that already holds a P-token prefix and receives N new tokens (prefix reuse; in every
 * format the row "pp N @ d P", which measures exactly that, and in md a note in ms under the table).
 * Uses only the public header.
 */
#include "args.h"
#include "bench.h"
#include "cli_io.h"
#include "sb.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPS 10000

static void usage(FILE *f) {
    fprintf(f,
            "usage: sb bench [options]   (llama-bench's flags; LIST: 1,2 or first-last[+step|*mult])\n"
            "  -m, --model FILE        a model to bench (repeat, or comma-separate, for several; default: the embedded one)\n"
            "  -p, --n-prompt LIST     prompt tests pp N (default 512)\n"
            "  -n, --n-gen LIST        generation tests tg N (default 64)\n"
            "  -pg PP,TG               prompt then generation in one test, pp PP+tg TG (repeatable)\n"
            "  -d, --n-depth LIST      tokens already in the KV cache (default 0)\n"
            "  -t, --threads LIST      CPU threads (default: all cores)\n"
            "  -ngl, --n-gpu-layers LIST  0: the CPU; any other value: CUDA GPU 0 (the whole model)\n"
            "  -b, --batch-size LIST   logical batch (default 2048); -ub, --ubatch-size LIST physical (default 512)\n"
            "  -ctk, -ctv, --kv-type f16|f32   KV cache type (default f16, as llama-bench)\n"
            "  -fa, --flash-attn LIST  0|1|on|off|auto: accepted; attention is always flash attention here\n"
            "  -lm, --load-mode MODE   mmap (default; auto too): map the file; none: read it into memory\n"
            "  -r, --repetitions N     timed runs of each test (default 5)\n"
            "  -o, --output FMT        md|csv|json|jsonl|sql to stdout (default md); -oe, --output-err FMT: to stderr\n"
            "  --no-warmup             skip the untimed warm-up runs;  --progress: progress lines on stderr\n"
            "  --swa-full              sliding-window layers keep every position (default: rings of window + batch)\n"
            "  --prefix P,N            first-token latency with a cached P-token prefix and N new tokens\n"
            "  --bw GB/s               use this read bandwidth instead of measuring it (CUDA: 4270, the H200's copy rate)\n"
            "  " ARG_DEVICE_HELP);
}

// ---- options ----

typedef struct list {
    int64_t v[BENCH_MAX_LIST];
    int n, given;
} list;

typedef struct bench_opts {
    const char *models[BENCH_MAX_LIST];
    int n_models;
    char *owned[BENCH_MAX_LIST]; /* copies of comma lists of -m, which models[] point into */
    int n_owned;
    list pp, tg, pg_p, pg_g, dd, threads, ngl, nb, nub;
    int64_t reps, prefix[2];
    int have_prefix, no_warmup, progress, device, fa_given, fa_off, swa_full, no_mmap;
    const char *kv, *kv_v; /* -ctk, -ctv: one KV type here, so they must agree */
    float bw_given;
    bench_format out, out_err;
} bench_opts;

static int bench_arg_error(const char *opt, const char *v, const char *want) {
    fprintf(stderr, "sb bench: %s '%s': %s\n", opt, v, want);
    return 2;
}

/* A list flag: the first use replaces the default, later ones append (llama-bench). */
static int list_arg(list *l, const char *opt, const char *v, int64_t lo, int64_t hi) {
    if (!l->given) l->n = 0;
    l->given = 1;
    if (bench_parse_list(v, lo, hi, l->v, &l->n))
        return bench_arg_error(opt, v, "expected a list of counts: N,M or first-last[+step|*mult] (at most 64 values)");
    return 0;
}

static int model_arg(bench_opts *o, const char *v) {
    struct stat sb;
    /* llama-bench splits -m on commas; a path that exists as given is taken whole */
    if (stat(v, &sb) == 0 || !strchr(v, ',')) {
        if (o->n_models == BENCH_MAX_LIST) return bench_arg_error("-m", v, "at most 64 models");
        o->models[o->n_models++] = v;
        return 0;
    }
    if (o->n_owned == BENCH_MAX_LIST) return bench_arg_error("-m", v, "at most 64 models");
    char *copy = strdup(v);
    if (!copy) return bench_arg_error("-m", v, "out of memory");
    o->owned[o->n_owned++] = copy;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->n_models == BENCH_MAX_LIST) return bench_arg_error("-m", v, "at most 64 models");
        o->models[o->n_models++] = t;
    }
    return 0;
}

/* llama.cpp's truthy / falsey / auto words (common_arg_utils) */
static int fa_word(const char *t) {
    static const char *const on[] = {"on", "enabled", "1", "true"}, *const off[] = {"off", "disabled", "0", "false"};
    for (int i = 0; i < 4; i++) {
        if (!strcmp(t, on[i])) return 1;
        if (!strcmp(t, off[i])) return 0;
    }
    return !strcmp(t, "auto") || !strcmp(t, "-1") ? -1 : -2;
}

static int fa_arg(bench_opts *o, const char *v) {
    char buf[256];
    int n = 0, bad = strlen(v) >= sizeof buf || !*v || v[strlen(v) - 1] == ',' || strstr(v, ",,") || v[0] == ',';
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && !bad; t = strtok_r(NULL, ",", &save), n++) {
        int w = fa_word(t);
        if (w == 0) o->fa_off = 1;
        bad = w == -2;
    }
    if (bad || n == 0) return bench_arg_error("-fa", v, "expected a list of on, off, auto (or 1, 0, -1)");
    o->fa_given = 1;
    return 0;
}

static int pair_arg(const char *opt, const char *v, int64_t *out, int lo_second) {
    int64_t tmp[BENCH_MAX_LIST];
    int n = 0;
    if (bench_parse_list(v, 0, 1 << 24, tmp, &n) || n != 2 || tmp[1] < lo_second || strchr(v, '-'))
        return bench_arg_error(opt, v, lo_second ? "expected P,N with N > 0" : "expected PP,TG");
    out[0] = tmp[0];
    out[1] = tmp[1];
    return 0;
}

static const char *const value_flags[] = {
    "-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-d", "--n-depth", "-t", "--threads", "-ngl",
    "--n-gpu-layers", "-b", "--batch-size", "-ub", "--ubatch-size", "-fa", "--flash-attn", "-pg", "--prefix",
    "-o", "--output", "-oe", "--output-err", "--kv-type", "-ctk", "-ctv", "--cache-type-k", "--cache-type-v", "-lm", "--load-mode",
};

/* The value flags (v: the next argument, NULL at the end); 0 ok, 2 usage error, -1 not one of them. */
static int value_flag(bench_opts *o, const char *a, const char *v) {
    const int64_t big = 1 << 24;
    size_t k = 0, n_flags = sizeof value_flags / sizeof value_flags[0];
    while (k < n_flags && strcmp(a, value_flags[k])) k++;
    if (k == n_flags) return -1;
    if (!v) {
        fprintf(stderr, "sb bench: option %s needs a value\n", a);
        return 2;
    }
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) return model_arg(o, v);
    if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) return list_arg(&o->pp, a, v, 0, big);
    if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) return list_arg(&o->tg, a, v, 0, big);
    if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) return list_arg(&o->dd, a, v, 0, big);
    if (!strcmp(a, "-t") || !strcmp(a, "--threads")) return list_arg(&o->threads, a, v, 1, 256);
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) return list_arg(&o->ngl, a, v, -1, 1 << 30);
    if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) return list_arg(&o->nb, a, v, 1, big);
    if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) return list_arg(&o->nub, a, v, 1, big);
    if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) return fa_arg(o, v);
    if (!strcmp(a, "-pg")) {
        int64_t pg[2];
        if (pair_arg(a, v, pg, 0)) return 2;
        if (!o->pg_p.given) o->pg_p.n = o->pg_g.n = 0;
        o->pg_p.given = o->pg_g.given = 1;
        if (o->pg_p.n == BENCH_MAX_LIST) return bench_arg_error(a, v, "at most 64 -pg tests");
        o->pg_p.v[o->pg_p.n++] = pg[0];
        o->pg_g.v[o->pg_g.n++] = pg[1];
        return 0;
    }
    if (!strcmp(a, "-lm") || !strcmp(a, "--load-mode")) {
        if (!strcmp(v, "none")) o->no_mmap = 1;
        else if (!strcmp(v, "mmap") || !strcmp(v, "auto")) o->no_mmap = 0;
        else return bench_arg_error(a, v, "expected mmap, auto or none (one mode; mlock and direct I/O are not supported)");
        return 0;
    }
    if (!strcmp(a, "--prefix")) {
        o->have_prefix = 1;
        return pair_arg(a, v, o->prefix, 1);
    }
    if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "-oe") || !strcmp(a, "--output-err")) {
        bench_format *dst = a[2] == 'e' || !strcmp(a, "--output-err") ? &o->out_err : &o->out;
        return bench_format_parse(v, dst) ? bench_arg_error(a, v, "expected md, csv, json, jsonl, sql or none") : 0;
    }
    if (!strcmp(a, "--kv-type") || !strcmp(a, "-ctk") || !strcmp(a, "-ctv") || !strcmp(a, "--cache-type-k") ||
        !strcmp(a, "--cache-type-v")) {
        if (strcmp(v, "f16") && strcmp(v, "f32")) return bench_arg_error(a, v, "expected f16 or f32");
        if (strcmp(a, "-ctv") && strcmp(a, "--cache-type-v")) o->kv = v;
        if (strcmp(a, "-ctk") && strcmp(a, "--cache-type-k")) o->kv_v = v;
        return 0;
    }
    return -1;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->pp = (list){{512}, 1, 0};
    o->tg = (list){{64}, 1, 0};
    o->dd = (list){{0}, 1, 0};
    o->nb = (list){{2048}, 1, 0};
    o->nub = (list){{512}, 1, 0};
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = (list){{nproc > 0 ? (nproc > 256 ? 256 : nproc) : 1}, 1, 0};
    o->reps = 5;
    o->device = SB_DEVICE_AUTO;
    o->kv = o->kv_v = "f16"; /* llama-bench's default -ctk/-ctv f16 */
    o->out = BENCH_OUT_MD;
    o->out_err = BENCH_OUT_NONE;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--device")) {
            arg_device("bench", argc, argv, &i, &o->device, &rc);
            continue;
        }
        if (!strcmp(a, "--no-warmup")) o->no_warmup = 1;
        else if (!strcmp(a, "--progress")) o->progress = 1;
        else if (!strcmp(a, "--swa-full")) o->swa_full = 1;
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) rc = arg_i64("bench", argc, argv, &i, 1, MAX_REPS, &o->reps);
        else if (!strcmp(a, "--bw")) rc = arg_f32("bench", argc, argv, &i, 0.001f, 1e6f, &o->bw_given);
        else if ((rc = value_flag(o, a, i + 1 < argc ? argv[i + 1] : NULL)) == -1) {
            fprintf(stderr, "sb bench: unknown option '%s'\n", a);
            rc = 2;
        } else {
            i++;
        }
    }
    if (!rc && strcmp(o->kv, o->kv_v)) {
        fprintf(stderr, "sb bench: -ctk %s -ctv %s: the KV cache has one type here; give both the same\n", o->kv, o->kv_v);
        rc = 2;
    }
    return rc;
}

// ---- read bandwidth ----

typedef struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;

/* Integer sums in 8 independent lanes (vectorised, never compute-bound) with software prefetch
 * 4 KiB ahead, as the decode kernels prefetch: the read rate the memory system sustains. */
static void *bw_read(void *a_) {
    bw_arg *a = (bw_arg *)a_;
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= a->n; i += 8) {
        __builtin_prefetch(a->p + i + 512);
        for (int k = 0; k < 8; k++) s[k] += a->p[i + k];
    }
    a->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

/* Best of 5 passes of n_threads threads summing a 1 GiB buffer, in GB/s; 0 if it cannot run. */
static double measure_bandwidth(int n_threads) {
    size_t n = (1024u << 20) / sizeof(uint64_t);
    uint64_t *buf = (uint64_t *)malloc(n * sizeof *buf);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i & 7;
    double best = 0;
    pthread_t th[256];
    bw_arg args[256];
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_seconds();
        int started = 0;
        for (int t = 0; t < n_threads; t++) {
            args[t] = (bw_arg){buf + n / (size_t)n_threads * (size_t)t, n / (size_t)n_threads, 0};
            if (pthread_create(&th[t], NULL, bw_read, &args[t])) break;
            started++;
        }
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
        double dt = now_seconds() - t0, gbs = (double)(n / (size_t)n_threads * (size_t)started * sizeof *buf) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

// ---- tests ----

static uint64_t rng_state = 0x5EED;
static int32_t rand_token(int64_t n_vocab) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rng_state >> 33) % (uint64_t)n_vocab);
}

/* Cache d random tokens (untimed). */
static sb_status set_depth(sb_session *s, int32_t *toks, int64_t d, int64_t n_vocab) {
    sb_status st = sb_session_truncate(s, 0);
    if (st != SB_OK || d == 0) return st;
    for (int64_t i = 0; i < d; i++) toks[i] = rand_token(n_vocab);
    return sb_session_prefill(s, toks, (size_t)d, NULL);
}

/* One run of a test at depth d: p prompt tokens (one prefill reusing the d cached ones), then g
 * decode steps; *secs is the timed part. *reused: the tokens the prefill found cached. */
static sb_status run_test(sb_session *s, int32_t *toks, int64_t d, int64_t p, int64_t g, int64_t n_vocab, double *secs,
                          int64_t *reused) {
    sb_status st = set_depth(s, toks, d, n_vocab);
    for (int64_t i = 0; i < p; i++) toks[d + i] = rand_token(n_vocab);
    *reused = d;
    double t0 = now_seconds();
    if (st == SB_OK && p > 0) st = sb_session_prefill(s, toks, (size_t)(d + p), reused);
    for (int64_t i = 0; st == SB_OK && i < g; i++) st = sb_session_decode(s, rand_token(n_vocab));
    *secs = now_seconds() - t0;
    return st;
}

// ---- the runs ----

typedef struct bench_ctx {
    const bench_opts *o;
    bench_machine machine;
    bench_printer out, err;
    double *samples;        /* o->reps seconds */
    int idx, total;         /* --progress */
    struct {
        int64_t threads;
        double gbs;
    } bw[BENCH_MAX_LIST];   /* CPU read bandwidth measured per thread count */
    int n_bw, named_fixed_bw, warned_no_gpu;
    FILE *notes;            /* md lines under the table: bandwidths, first-token latencies */
} bench_ctx;

static int wants_md(const bench_opts *o) { return o->out == BENCH_OUT_MD || o->out_err == BENCH_OUT_MD; }

static void progress(bench_ctx *c, const char *what, int k, int n) {
    if (!c->o->progress) return;
    if (n) fprintf(stderr, "sb bench: benchmark %d/%d: %s %d/%d\n", c->idx, c->total, what, k, n);
    else fprintf(stderr, "sb bench: benchmark %d/%d: %s\n", c->idx, c->total, what);
}

/* Warm-ups, then o->reps timed runs of r's test on s; r gets its samples and test_time. With
 * check_reuse (--prefix), a prefill that did not reuse all d cached tokens is an error. */
static sb_status bench_test(bench_ctx *c, sb_session *s, int32_t *toks, int64_t n_vocab, bench_row *r, int check_reuse) {
    const bench_opts *o = c->o;
    c->idx++;
    progress(c, "starting", 0, 0);
    time_t now = time(NULL);
    strftime(r->test_time, sizeof r->test_time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    /* one warm-up for tg; two where there is a prefill: the CUDA executor runs a new prefill shape
     * eagerly the first time and captures its graph on the second, and llama-bench's figure means
     * the steady state */
    int warm = o->no_warmup ? 0 : r->n_prompt > 0 ? 2 : 1;
    sb_status st = SB_OK;
    double secs;
    int64_t reused;
    for (int w = 0; w < warm && st == SB_OK; w++) {
        progress(c, "warmup run", w + 1, warm);
        st = run_test(s, toks, r->n_depth, r->n_prompt, r->n_gen, n_vocab, &secs, &reused);
    }
    for (int k = 0; k < o->reps && st == SB_OK; k++) {
        progress(c, "timed run", k + 1, (int)o->reps);
        st = run_test(s, toks, r->n_depth, r->n_prompt, r->n_gen, n_vocab, &secs, &reused);
        c->samples[k] = secs > 1e-9 ? secs : 1e-9;
        if (st == SB_OK && check_reuse && reused != r->n_depth) {
            fprintf(stderr, "error: %s: --prefix: the session reused %lld of %lld cached tokens\n", sb_status_str(SB_ERR_INTERNAL),
                    (long long)reused, (long long)r->n_depth);
            return SB_ERR_INTERNAL;
        }
    }
    if (st != SB_OK) {
        sb_cli_fail(st);
        return st;
    }
    r->samples_s = c->samples;
    r->n_samples = (int)o->reps;
    st = bench_print_row(&c->out, r);
    if (st == SB_OK) st = bench_print_row(&c->err, r);
    if (st != SB_OK) fprintf(stderr, "error: %s: writing a result\n", sb_status_str(st));
    return st;
}

/* The largest context any test of this session needs. */
static int64_t session_ctx(const bench_opts *o) {
    int64_t need = 1;
    for (int a = 0; a < o->dd.n; a++) {
        const int64_t d = o->dd.v[a];
        for (int b = 0; b < o->pp.n; b++) need = d + o->pp.v[b] > need ? d + o->pp.v[b] : need;
        for (int b = 0; b < o->tg.n; b++) need = d + o->tg.v[b] > need ? d + o->tg.v[b] : need;
        for (int b = 0; b < o->pg_p.n; b++) need = d + o->pg_p.v[b] + o->pg_g.v[b] > need ? d + o->pg_p.v[b] + o->pg_g.v[b] : need;
    }
    if (o->have_prefix && o->prefix[0] + o->prefix[1] > need) need = o->prefix[0] + o->prefix[1];
    return need;
}

/* The read bandwidth the md "% of bw" column compares a session's tg tests with; 0 when no md
 * output is asked for (no 1 GiB pass then). A note under the table names it once. */
static double session_bw(bench_ctx *c, int cuda, int64_t threads) {
    const bench_opts *o = c->o;
    if (!wants_md(o)) return 0;
    if (o->bw_given > 0 || cuda) {
        double bw = o->bw_given > 0 ? o->bw_given : 4270.0;
        if (!c->named_fixed_bw)
            fprintf(c->notes, "%% of bw: of %.1f GB/s%s\n", bw, o->bw_given > 0 ? " (--bw)" : " (CUDA: the H200's device copy rate)");
        c->named_fixed_bw = 1;
        return bw;
    }
    for (int i = 0; i < c->n_bw; i++)
        if (c->bw[i].threads == threads) return c->bw[i].gbs;
    double bw = measure_bandwidth((int)threads);
    if (c->n_bw < BENCH_MAX_LIST) {
        c->bw[c->n_bw].threads = threads;
        c->bw[c->n_bw++].gbs = bw;
    }
    fprintf(c->notes, "%% of bw: of %.1f GB/s, this machine's read bandwidth with %lld threads (measured in this run)\n", bw,
            (long long)threads);
    return bw;
}

/* Where a session with this -ngl value runs: 0 the CPU; any other value CUDA GPU 0 (all layers),
 * or, without a usable GPU, the CPU after a warning (as llama.cpp). No -ngl: --device. */
static int session_device(bench_ctx *c, int64_t ngl) {
    if (!c->o->ngl.given) return c->o->device;
    if (ngl == 0) return SB_DEVICE_CPU;
    if (c->machine.have_gpu) return SB_DEVICE_CUDA;
    if (!c->warned_no_gpu) fprintf(stderr, "sb bench: warning: -ngl %lld: no usable CUDA device; running on the CPU\n", (long long)ngl);
    c->warned_no_gpu = 1;
    return SB_DEVICE_CPU;
}

/* Every test of one session: depths, then pp, tg, pg tests at each; then --prefix. */
static sb_status bench_session(bench_ctx *c, sb_model *m, const sb_model_info *mi, const bench_model_desc *md, int64_t ngl,
                               int64_t nb, int64_t nub, int64_t nt) {
    const bench_opts *o = c->o;
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = session_ctx(o);
    sp.n_threads = (int)nt;
    sp.n_batch = nb < nub ? nb : nub; /* the largest prefill chunk: llama.cpp's physical batch */
    sp.kv_type = strcmp(o->kv, "f16") ? SB_TYPE_F32 : SB_TYPE_F16;
    sp.device = session_device(c, ngl);
    sp.swa_full = o->swa_full;
    sb_session *s = NULL;
    sb_status st = sb_session_create(m, &sp, &s);
    int32_t *toks = st == SB_OK ? (int32_t *)malloc((size_t)sp.n_ctx * sizeof *toks) : NULL;
    if (st == SB_OK && !toks) st = SB_ERR_OOM;
    if (st != SB_OK) {
        sb_cli_fail(st);
        sb_session_free(s);
        return st;
    }
    const int cuda = sb_session_device(s) == SB_DEVICE_CUDA;
    bench_row r = {.model = md, .backend = cuda ? "CUDA" : "CPU", .n_batch = nb, .n_ubatch = nub, .n_threads = nt,
                   .n_gpu_layers = o->ngl.given ? ngl : cuda ? -1 : 0, .type_k = o->kv, .type_v = o->kv,
                   .load_mode = o->no_mmap ? "none" : "mmap"};
    r.bw_gbs = session_bw(c, cuda, nt);
    for (int a = 0; a < o->dd.n && st == SB_OK; a++) {
        r.n_depth = o->dd.v[a];
        for (int b = 0; b < o->pp.n + o->tg.n + o->pg_p.n && st == SB_OK; b++) {
            const int is_pp = b < o->pp.n, is_tg = !is_pp && b < o->pp.n + o->tg.n, k = b - o->pp.n - o->tg.n;
            r.n_prompt = is_pp ? o->pp.v[b] : is_tg ? 0 : o->pg_p.v[k];
            r.n_gen = is_pp ? 0 : is_tg ? o->tg.v[b - o->pp.n] : o->pg_g.v[k];
            if (r.n_prompt + r.n_gen > 0) st = bench_test(c, s, toks, mi->n_vocab, &r, 0);
        }
    }
    if (st == SB_OK && o->have_prefix) {
        /* the session holds P tokens; a request arrives with those P plus N new ones: "pp N @ d P" */
        r.n_depth = o->prefix[0];
        r.n_prompt = o->prefix[1];
        r.n_gen = 0;
        st = bench_test(c, s, toks, mi->n_vocab, &r, 1);
        if (st == SB_OK) {
            double mean = 0, var = 0;
            for (int i = 0; i < r.n_samples; i++) mean += r.samples_s[i] * 1e3 / r.n_samples;
            for (int i = 0; i < r.n_samples; i++) var += pow(r.samples_s[i] * 1e3 - mean, 2) / (r.n_samples > 1 ? r.n_samples - 1 : 1);
            char *model = bench_clean_text(md->type, 1);
            fprintf(c->notes, "first token after a cached %lld-token prefix + %lld new tokens: %.2f ± %.2f ms (%s, %s, %lld threads)\n",
                    (long long)o->prefix[0], (long long)o->prefix[1], mean, sqrt(var), model ? model : "?", r.backend, (long long)nt);
            free(model);
        }
    }
    free(toks);
    sb_session_free(s);
    return st;
}

/* One model: loaded once, then each session in llama-bench's order of parameters. */
static sb_status bench_model(bench_ctx *c, const char *path) {
    const bench_opts *o = c->o;
    sb_model *m = NULL;
    sb_model_info mi;
    bench_model_desc md;
    cli_watch_file(path); /* a SIGBUS on this mapped file: one line naming it */
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.no_mmap = o->no_mmap;
    sb_status st = sb_model_load(path, &mp, &m);
    if (st == SB_OK) st = sb_model_get_info(m, &mi);
    if (st == SB_OK) st = bench_describe_model(path, &mi, &md);
    if (st != SB_OK) sb_cli_fail(st);
    for (int a = 0; a < o->ngl.n && st == SB_OK; a++)
        for (int b = 0; b < o->nb.n && st == SB_OK; b++)
            for (int u = 0; u < o->nub.n && st == SB_OK; u++)
                for (int t = 0; t < o->threads.n && st == SB_OK; t++)
                    st = bench_session(c, m, &mi, &md, o->ngl.v[a], o->nb.v[b], o->nub.v[u], o->threads.v[t]);
    sb_model_free(m);
    return st;
}

static int count_tests(const bench_opts *o) {
    int per_depth = 0;
    for (int b = 0; b < o->pp.n; b++) per_depth += o->pp.v[b] > 0;
    for (int b = 0; b < o->tg.n; b++) per_depth += o->tg.v[b] > 0;
    for (int b = 0; b < o->pg_p.n; b++) per_depth += o->pg_p.v[b] + o->pg_g.v[b] > 0;
    return o->n_models * o->ngl.n * o->nb.n * o->nub.n * o->threads.n * (o->dd.n * per_depth + o->have_prefix);
}

/* The md lines under the table (bandwidths, first-token latencies). */
static void finish_md(const bench_printer *p, const char *notes) {
    if (p->format != BENCH_OUT_MD || !notes || !*notes) return;
    fprintf(p->f, "%s", notes);
}

static int bench_run(const bench_opts *opts);

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (!rc) rc = bench_run(&o);
    for (int i = 0; i < o.n_owned; i++) free(o.owned[i]);
    return rc < 0 ? 0 : rc;
}

/* Every test of every model; 0, 1 (a failure, reported) or 2 (no model). */
static int bench_run(const bench_opts *opts) {
    bench_opts o = *opts; /* a working copy: the default model and -ngl are filled in below */
    if (o.n_models == 0) {
        const char *def = default_model_path();
        if (!def) {
            fprintf(stderr, "sb bench: no model: give -m MODEL (the embedded model was not found)\n");
            return 2;
        }
        o.models[o.n_models++] = def;
    }
    if (!o.ngl.given) o.ngl = (list){{0}, 1, 0}; /* one pass; the device comes from --device */
    if (o.fa_off) fprintf(stderr, "sb bench: note: -fa 0: attention here is always flash attention; the tests run, and are recorded, with it on\n");
    bench_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    bench_machine_info(&c.machine);
    char *notes = NULL;
    size_t notes_len = 0;
    c.notes = open_memstream(&notes, &notes_len);
    c.samples = (double *)calloc((size_t)o.reps, sizeof *c.samples);
    if (!c.notes || !c.samples) {
        fprintf(stderr, "error: %s: sb bench: out of memory\n", sb_status_str(SB_ERR_OOM));
        if (c.notes) fclose(c.notes);
        free(notes);
        free(c.samples);
        return 1;
    }
    c.total = count_tests(&o);
    const bench_md_columns cols = {
        .ngl = c.machine.have_gpu || o.ngl.given,
        .threads = !c.machine.have_gpu || o.threads.given || o.device == SB_DEVICE_CPU,
        .n_batch = o.nb.given,
        .n_ubatch = o.nub.given,
        .type_kv = strcmp(o.kv, "f16") != 0,
        .flash_attn = o.fa_given,
    };
    c.out = (bench_printer){o.out, stdout, &c.machine, cols, 0};
    c.err = (bench_printer){o.out_err, stderr, &c.machine, cols, 0};
    bench_print_header(&c.out);
    bench_print_header(&c.err);
    sb_status st = SB_OK;
    for (int i = 0; i < o.n_models && st == SB_OK; i++) st = bench_model(&c, o.models[i]);
    /* the footers even after a failure: the rows so far stay a valid document */
    bench_print_footer(&c.out);
    bench_print_footer(&c.err);
    fclose(c.notes);
    finish_md(&c.out, notes);
    finish_md(&c.err, notes);
    free(notes);
    free(c.samples);
    return st == SB_OK ? 0 : 1; /* a stdout write error: main's cli_io_finish says it */
}
