/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_bench.c — `sb bench`: llama-bench's tests (pp N, tg N, at KV depths "@ dD"), its
 * markdown/JSON field names, mean ± stddev over -r repetitions after one warm-up, plus what
 * llama-bench does not report: achieved GB/s of weights read per decode step and its fraction of
 * this machine's read bandwidth (measured in the same run), and --prefix P,N: first-token latency
 * for a session that already holds a P-token prefix and receives N new tokens (prefix reuse;
 * two warm-ups, so that the CUDA graph capture of the N-token plan is not timed).
 * Uses only the public header.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16

static void usage(FILE *f) {
    fprintf(f, "usage: sb bench [-m MODEL] [-p 512] [-n 64] [-d 0] [-r 5] [-t N] [-o md|json] [--prefix P,N] [--kv-type f32|f16]\n"
               "  -p, -n, -d take comma-separated lists; every combination runs (pp tests, then tg tests).\n"
               "  --prefix P,N   first-token latency with a cached P-token prefix and N new tokens\n"
               "  --bw GB/s      use this read bandwidth instead of measuring it (CUDA: 4270, the H200's copy rate)\n"
               "  " ARG_DEVICE_HELP);
}

static int parse_list(const char *s, int64_t *out, int *n) {
    *n = 0;
    while (*s && *n < MAX_LIST) {
        char item[32];
        size_t len = strcspn(s, ",");
        if (len >= sizeof item) return -1;
        memcpy(item, s, len);
        item[len] = 0;
        if (parse_int(item, 0, 1 << 24, &out[*n])) return -1; /* args.c's decimal parser */
        (*n)++;
        s += len;
        if (*s == ',' && *++s == 0) return -1;
    }
    return *n && !*s ? 0 : -1; /* more than MAX_LIST items is an error, not a silent cut */
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

/* Best of 5 passes of n_threads threads summing a 1 GiB buffer, in GB/s. */
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
        for (int t = 0; t < n_threads; t++) {
            args[t] = (bw_arg){buf + n / n_threads * t, n / n_threads, 0};
            pthread_create(&th[t], NULL, bw_read, &args[t]);
        }
        for (int t = 0; t < n_threads; t++) pthread_join(th[t], NULL);
        double dt = now_seconds() - t0, gbs = (double)(n / n_threads * n_threads * sizeof *buf) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    free(buf);
    return best;
}

// ---- tests ----

typedef struct result {
    char name[48];
    int64_t n_prompt, n_gen, n_depth;
    double samples[64];
    int n;
    double avg_ts, std_ts, avg_ns, std_ns;
} result;

static void finish(result *r, int64_t n_tokens) {
    double s = 0, s2 = 0, ns = 0, ns2 = 0;
    for (int i = 0; i < r->n; i++) {
        double ts = (double)n_tokens / r->samples[i];
        s += ts;
        s2 += ts * ts;
        ns += r->samples[i] * 1e9;
        ns2 += r->samples[i] * 1e9 * r->samples[i] * 1e9;
    }
    r->avg_ts = s / r->n;
    r->avg_ns = ns / r->n;
    r->std_ts = r->n > 1 ? sqrt(fmax(0, (s2 - s * s / r->n) / (r->n - 1))) : 0;
    r->std_ns = r->n > 1 ? sqrt(fmax(0, (ns2 - ns * ns / r->n) / (r->n - 1))) : 0;
}

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

static sb_status run_pp(sb_session *s, int32_t *toks, int64_t d, int64_t p, int64_t n_vocab, double *secs) {
    sb_status st = set_depth(s, toks, d, n_vocab);
    for (int64_t i = 0; i < p; i++) toks[d + i] = rand_token(n_vocab);
    double t0 = now_seconds();
    if (st == SB_OK) st = sb_session_prefill(s, toks, (size_t)(d + p), NULL);
    *secs = now_seconds() - t0;
    return st;
}

static sb_status run_tg(sb_session *s, int32_t *toks, int64_t d, int64_t n, int64_t n_vocab, double *secs) {
    sb_status st = set_depth(s, toks, d, n_vocab);
    double t0 = now_seconds();
    for (int64_t i = 0; st == SB_OK && i < n; i++) st = sb_session_decode(s, rand_token(n_vocab));
    *secs = now_seconds() - t0;
    return st;
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *fmt = "md", *kv = "f16"; /* f16 KV: llama-bench's default (-ctk/-ctv f16) */
    int device = SB_DEVICE_AUTO;
    int64_t pp[MAX_LIST] = {512}, tg[MAX_LIST] = {64}, dd[MAX_LIST] = {0}, reps = 5, threads = 0, prefix[2] = {0, 0};
    int n_pp = 1, n_tg = 1, n_d = 1, rc = 0, have_prefix = 0;
    float bw_given = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v = NULL;
        if (arg_device("bench", argc, argv, &i, &device, &rc)) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) rc = arg_str("bench", argc, argv, &i, &model);
        else if (!strcmp(a, "-p") || !strcmp(a, "-n") || !strcmp(a, "-d") || !strcmp(a, "--prefix")) {
            rc = arg_str("bench", argc, argv, &i, &v);
            int n = 0;
            int64_t *dst = !strcmp(a, "-p") ? pp : !strcmp(a, "-n") ? tg : !strcmp(a, "-d") ? dd : NULL;
            int64_t tmp[MAX_LIST];
            if (!rc && parse_list(v, dst ? dst : tmp, &n)) {
                rc = usage_error("bench", "%s '%s': expected at most %d comma-separated decimal counts in [0, %d]", a, v, MAX_LIST, 1 << 24);
            }
            if (!rc && !strcmp(a, "-p")) n_pp = n;
            if (!rc && !strcmp(a, "-n")) n_tg = n;
            if (!rc && !strcmp(a, "-d")) n_d = n;
            if (!rc && !dst) {
                if (n != 2 || tmp[1] == 0) {
                    fprintf(stderr, "sb bench: --prefix takes P,N with N > 0\n");
                    rc = 2;
                }
                prefix[0] = tmp[0];
                prefix[1] = tmp[1];
                have_prefix = 1;
            }
        } else if (!strcmp(a, "-r")) rc = arg_i64("bench", argc, argv, &i, 1, 64, &reps);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = arg_i64("bench", argc, argv, &i, 1, 256, &threads);
        else if (!strcmp(a, "-o")) rc = arg_str("bench", argc, argv, &i, &fmt);
        else if (!strcmp(a, "--kv-type")) rc = arg_str("bench", argc, argv, &i, &kv);
        else if (!strcmp(a, "--bw")) rc = arg_f32("bench", argc, argv, &i, 0.001f, 1e6f, &bw_given);
        else {
            rc = usage_error("bench", "unknown option '%s'", a);
        }
    }
    if (!rc && strcmp(fmt, "md") && strcmp(fmt, "json")) rc = 2;
    if (!rc && strcmp(kv, "f32") && strcmp(kv, "f16")) rc = 2;
    if (!model) model = default_model_path();
    if (!rc && !model) rc = usage_error("bench", "no -m MODEL given and no embedded model found (set SB_MODEL)");
    if (rc) return rc; /* the reason is already printed (usage_error) */
    sb_model *m = NULL;
    sb_session *s = NULL;
    cli_watch_file(model);
    sb_status st = sb_model_load(model, NULL, &m);
    sb_model_info mi;
    if (st == SB_OK) st = sb_model_get_info(m, &mi);
    int64_t max_ctx = 1;
    for (int a = 0; a < n_d; a++)
        for (int b = 0; b < n_pp; b++) max_ctx = dd[a] + pp[b] > max_ctx ? dd[a] + pp[b] : max_ctx;
    for (int a = 0; a < n_d; a++)
        for (int b = 0; b < n_tg; b++) max_ctx = dd[a] + tg[b] > max_ctx ? dd[a] + tg[b] : max_ctx;
    if (have_prefix && prefix[0] + prefix[1] > max_ctx) max_ctx = prefix[0] + prefix[1];
    if (threads == 0) threads = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = max_ctx;
    sp.n_threads = (int)threads;
    sp.kv_type = strcmp(kv, "f16") ? SB_TYPE_F32 : SB_TYPE_F16;
    sp.device = device;
    if (st == SB_OK) st = sb_session_create(m, &sp, &s);
    const int cuda = s && sb_session_device(s) == SB_DEVICE_CUDA; /* auto resolved */
    int32_t *toks = (int32_t *)malloc((size_t)max_ctx * sizeof *toks);
    if (st == SB_OK && !toks) st = SB_ERR_OOM;
    if (st != SB_OK) {
        rc = sb_cli_fail(st);
        goto done;
    }
    /* CUDA: the H200's measured device-to-device copy bandwidth (PERFORMANCE.md) unless --bw says */
    double bw = bw_given > 0 ? bw_given : cuda ? 4270.0 : measure_bandwidth((int)threads);
    result res[3 * MAX_LIST * MAX_LIST + 1];
    int nres = 0;
    for (int a = 0; a < n_d && st == SB_OK; a++) {
        for (int b = 0; b < n_pp + n_tg && st == SB_OK; b++) {
            int is_pp = b < n_pp;
            int64_t cnt = is_pp ? pp[b] : tg[b - n_pp];
            if (cnt == 0) continue;
            result *r = &res[nres++];
            memset(r, 0, sizeof *r);
            snprintf(r->name, sizeof r->name, dd[a] ? "%s%lld @ d%lld" : "%s%lld", is_pp ? "pp" : "tg", (long long)cnt,
                     (long long)dd[a]);
            r->n_prompt = is_pp ? cnt : 0;
            r->n_gen = is_pp ? 0 : cnt;
            r->n_depth = dd[a];
            double secs;
            /* warm-up: one for tg; two for pp, whose second run of a new shape is the CUDA executor's
             * graph capture (the steady state is what llama-bench's pp figure means) */
            for (int w = 0; w < (is_pp ? 2 : 1) && st == SB_OK; w++)
                st = is_pp ? run_pp(s, toks, dd[a], cnt, mi.n_vocab, &secs) : run_tg(s, toks, dd[a], cnt, mi.n_vocab, &secs);
            for (int k = 0; k < reps && st == SB_OK; k++) {
                st = is_pp ? run_pp(s, toks, dd[a], cnt, mi.n_vocab, &secs) : run_tg(s, toks, dd[a], cnt, mi.n_vocab, &secs);
                r->samples[r->n++] = secs;
            }
            if (st == SB_OK) finish(r, cnt);
        }
    }
    double prefix_ms[64];
    int n_prefix = 0;
    if (st == SB_OK && have_prefix) {
        /* the session holds P tokens; a request arrives with those P plus N new ones. Two untimed
         * warm-ups: the CUDA executor runs a new prefill shape eagerly the first time and captures
         * its graph on the second run (exec_cuda_run), so the second run pays the capture */
        const int warm = 2;
        for (int k = 0; k < reps + warm && st == SB_OK; k++) {
            st = set_depth(s, toks, prefix[0], mi.n_vocab);
            for (int64_t i = 0; i < prefix[1]; i++) toks[prefix[0] + i] = rand_token(mi.n_vocab);
            double t0 = now_seconds();
            int64_t reused = 0;
            if (st == SB_OK) st = sb_session_prefill(s, toks, (size_t)(prefix[0] + prefix[1]), &reused);
            double ms = (now_seconds() - t0) * 1e3;
            if (k >= warm) prefix_ms[n_prefix++] = ms;
            if (st == SB_OK && reused != prefix[0]) st = SB_ERR_INTERNAL;
        }
    }
    if (st != SB_OK) {
        rc = sb_cli_fail(st);
        goto done;
    }
    double gib = (double)mi.weight_bytes / (1024.0 * 1024 * 1024);
    if (!strcmp(fmt, "md")) {
        printf("| model | size | params | backend | threads | test | t/s | GB/s | %% of %.1f GB/s |\n", bw);
        printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |\n");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            printf("| %s %s | %.2f MiB | %.2f M | %s | %d | %s | %.2f ± %.2f |", mi.arch, mi.name, gib * 1024,
                   mi.n_params / 1e6, cuda ? "CUDA" : "CPU", (int)threads, r->name, r->avg_ts, r->std_ts);
            if (r->n_gen) {
                double gbs = r->avg_ts * (double)mi.weight_bytes / 1e9;
                printf(" %.2f | %.0f%% |\n", gbs, 100 * gbs / bw);
            } else {
                printf(" | |\n");
            }
        }
        if (have_prefix) {
            double mean = 0, var = 0;
            for (int i = 0; i < n_prefix; i++) mean += prefix_ms[i] / n_prefix;
            for (int i = 0; i < n_prefix; i++) var += (prefix_ms[i] - mean) * (prefix_ms[i] - mean) / (n_prefix > 1 ? n_prefix - 1 : 1);
            printf("\nfirst token after a cached %lld-token prefix + %lld new tokens: %.2f ± %.2f ms\n", (long long)prefix[0],
                   (long long)prefix[1], mean, sqrt(var));
        }
    } else {
        printf("[\n");
        for (int i = 0; i < nres; i++) {
            const result *r = &res[i];
            time_t now = time(NULL);
            char iso[32];
            strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
            printf("  {\"build_number\": %d, \"backends\": \"%s\", \"model_filename\": \"%s\", \"model_type\": \"%s %s\", "
                   "\"model_size\": %llu, \"model_n_params\": %llu, \"n_batch\": 512, \"n_ubatch\": 512, \"n_threads\": %d, "
                   "\"type_k\": \"%s\", \"type_v\": \"%s\", \"n_gpu_layers\": %d, \"flash_attn\": false, \"use_mmap\": true, "
                   "\"n_prompt\": %lld, \"n_gen\": %lld, \"n_depth\": %lld, \"test_time\": \"%s\", \"avg_ns\": %.0f, "
                   "\"stddev_ns\": %.0f, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"gb_s\": %.4f, \"bw_gb_s\": %.4f, \"samples_ns\": [",
                   sb_version_number(), cuda ? "CUDA" : "CPU", model, mi.arch, mi.name, (unsigned long long)mi.weight_bytes,
                   (unsigned long long)mi.n_params, (int)threads, kv, kv, cuda ? 99 : 0, (long long)r->n_prompt, (long long)r->n_gen,
                   (long long)r->n_depth, iso, r->avg_ns, r->std_ns, r->avg_ts, r->std_ts,
                   r->n_gen ? r->avg_ts * (double)mi.weight_bytes / 1e9 : 0.0, bw);
            for (int k = 0; k < r->n; k++) printf(k ? ", %.0f" : "%.0f", r->samples[k] * 1e9);
            printf("], \"samples_ts\": [");
            int64_t cnt = r->n_prompt ? r->n_prompt : r->n_gen;
            for (int k = 0; k < r->n; k++) printf(k ? ", %.4f" : "%.4f", (double)cnt / r->samples[k]);
            printf("]}%s\n", i + 1 < nres || have_prefix ? "," : "");
        }
        if (have_prefix) {
            double mean = 0;
            for (int i = 0; i < n_prefix; i++) mean += prefix_ms[i] / n_prefix;
            printf("  {\"test\": \"prefix %lld,%lld\", \"n_prefix\": %lld, \"n_new\": %lld, \"first_token_ms\": %.4f}\n",
                   (long long)prefix[0], (long long)prefix[1], (long long)prefix[0], (long long)prefix[1], mean);
        }
        printf("]\n");
    }
done:
    free(toks);
    sb_session_free(s);
    sb_model_free(m);
    return rc;
}
