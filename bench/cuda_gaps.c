/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * bench/cuda_gaps.c — where a CUDA decode step's time goes between kernels: CUPTI's kernel activity
 * records (start, end, name; graph kernels too) for N decode steps of a model at a depth, through the
 * public API. Prints, per kernel of the step in launch order, its mean duration and the mean gap from
 * the end of the kernel before it to its start (negative: it started before that one ended — PDL's
 * overlap), then per kernel name the sums a step; the gap before each step's first kernel is the
 * host's time between graph launches (the session's work: the logits' check, the next token). Two
 * builds' outputs side by side show which launch boundaries grew (the question bench/NOTES.md's
 * thirteenth session left: ~30 us a Qwen2.5-0.5B step between kernels, with equal bodies).
 * With -e the steps are a batched engine's (sb_engine_step, one sequence: the paged graph) instead of
 * a session's, so the two step kinds' kernels can be set side by side too (issue 28's B = 1 step);
 * -B N (with -e) decodes N sequences a step, each DEPTH tokens deep with its own tokens (no shared
 * prefix blocks): the batched step sb serve runs at N streams.
 * With -t T > 1 a step is a prompt chunk instead: T tokens after DEPTH cached ones, the cache cut
 * back to DEPTH before each (the first-token-after-a-cached-prefix case).
 * Usage: bench_cuda_gaps -m MODEL [-d DEPTH (64)] [-n STEPS (32)] [-t T (1)] [-k KERNELS_SHOWN (all)] [-ctk f32|f16 (f32)]
 *        [-e [-B N (1..64)]]
 * Built with the CUDA backend only (`make bench`); links libsonicboom and CUPTI. Not a test.
 */
#include "sonicboom.h"

#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct krec {
    uint64_t start, end;
    const char *name;
    int blocks, threads, regs, smem; /* the launch's blocks, threads a block, registers a thread, shared bytes a block */
} krec;

static krec *recs;
static size_t n_recs, cap_recs;
static int dropped;

#define ACT_BUF (8u << 20)

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = (uint8_t *)aligned_alloc(8, ACT_BUF);
    *size = *buf ? ACT_BUF : 0;
    *max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        if (n_recs == cap_recs) {
            size_t c = cap_recs ? 2 * cap_recs : 4096;
            krec *p = (krec *)realloc(recs, c * sizeof *p);
            if (!p) {
                dropped = 1;
                break;
            }
            recs = p, cap_recs = c;
        }
        recs[n_recs++] = (krec){k->start, k->end, strdup(k->name ? k->name : "?"), k->gridX * k->gridY * k->gridZ,
                                k->blockX * k->blockY * k->blockZ, k->registersPerThread, k->staticSharedMemory + k->dynamicSharedMemory};
    }
    free(buf);
}

static int by_start(const void *a, const void *b) {
    const krec *x = (const krec *)a, *y = (const krec *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

#define CK(x)                                                                                \
    do {                                                                                     \
        sb_status s_ = (x);                                                                  \
        if (s_ != SB_OK) {                                                                   \
            fprintf(stderr, "bench_cuda_gaps: %s: %s\n", #x, sb_last_error());               \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)
#define CU(x)                                                                                \
    do {                                                                                     \
        CUptiResult r_ = (x);                                                                \
        if (r_ != CUPTI_SUCCESS) {                                                           \
            const char *e_ = NULL;                                                           \
            cuptiGetResultString(r_, &e_);                                                   \
            fprintf(stderr, "bench_cuda_gaps: %s: %s\n", #x, e_ ? e_ : "?");                 \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

/* the steps' records: one step = the kernels between two host gaps; per position, the mean duration
 * and the mean gap before it, over the steps that have the same kernel count as the first */
static void report(int steps, int shown) {
    qsort(recs, n_recs, sizeof *recs, by_start);
    const int K = steps > 0 ? (int)(n_recs / (size_t)steps) : 0;
    if (K <= 0 || (size_t)K * (size_t)steps != n_recs) {
        printf("%zu kernel records for %d steps: not a whole number of kernels a step\n", n_recs, steps);
        return;
    }
    double span = 0, body = 0, host = 0;
    printf("| # | kernel | us | gap before, us | blocks x threads, regs, smem |\n|---:|---|---:|---:|---|\n");
    for (int i = 0; i < K; i++) {
        double d = 0, g = 0;
        for (int s = 0; s < steps; s++) {
            const krec *r = &recs[(size_t)s * K + i];
            d += (double)(r->end - r->start) / 1e3;
            if (i > 0) g += ((double)r->start - (double)recs[(size_t)s * K + i - 1].end) / 1e3;
            else if (s > 0) host += ((double)r->start - (double)recs[(size_t)(s - 1) * K + K - 1].end) / 1e3;
        }
        d /= steps, g /= steps;
        body += d;
        const krec *f = &recs[i];
        if (i < shown) printf("| %d | %.60s | %.2f | %.2f | %d x %d, %d, %d |\n", i, f->name, d, i ? g : 0.0, f->blocks, f->threads, f->regs, f->smem);
    }
    for (int s = 0; s < steps; s++) span += (double)(recs[(size_t)s * K + K - 1].end - recs[(size_t)s * K].start) / 1e3;
    span /= steps;
    printf("\n%d kernels a step: first start to last end %.1f us, bodies %.1f us, between kernels %.1f us; "
           "host between steps %.1f us\n",
           K, span, body, span - body, steps > 1 ? host / (steps - 1) : 0.0);
}

/* The engine's calls are compiled only against a header that has them (ABI level 2), so the tool
 * also builds against an older tree's library to compare its sessions. */
#if defined(SB_ABI_LEVEL) && SB_ABI_LEVEL >= 2
#define GAPS_ENGINE 1
#else
#define GAPS_ENGINE 0
typedef struct sb_engine sb_engine;
#endif

#define GAPS_MAX_B 64

/* one decode step of the session or, with an engine, of its nseq sequences */
typedef struct stepper {
    sb_session *s;
    sb_engine *e;
    int32_t seq[GAPS_MAX_B];
    int nseq;
} stepper;

/* sequence q's token where sequence 0 has t: every sequence its own tokens, so no prefix is shared */
static int32_t seq_token(int32_t t, int q) { return (int32_t)(1 + (t + 37 * q) % 1000); }

static sb_status step(stepper *st, int32_t token) {
    if (st->s || !GAPS_ENGINE) return sb_session_decode(st->s, token);
#if GAPS_ENGINE
    sb_batch_item it[GAPS_MAX_B];
    for (int q = 0; q < st->nseq; q++) it[q] = (sb_batch_item){.seq = st->seq[q], .token = seq_token(token, q), .logits = 1};
    return sb_engine_step(st->e, it, (size_t)st->nseq, NULL);
#endif
}

/* the first n tokens of tok into the cache (each engine sequence's in chunks of the batch) */
static sb_status fill(stepper *st, const int32_t *tok, int64_t n) {
    if (st->s || !GAPS_ENGINE) return sb_session_prefill(st->s, tok, (size_t)n, NULL);
#if GAPS_ENGINE
    sb_batch_item items[256];
    for (int q = 0; q < st->nseq; q++)
        for (int64_t i = 0; i < n;) {
            size_t k = 0;
            for (; k < 256 && i < n; k++, i++) items[k] = (sb_batch_item){.seq = st->seq[q], .token = seq_token(tok[i], q), .logits = i == n - 1};
            sb_status r = sb_engine_step(st->e, items, k, NULL);
            if (r != SB_OK) return r;
        }
#endif
    return SB_OK;
}

static sb_status truncate_to(stepper *st, int64_t n) {
#if GAPS_ENGINE
    if (!st->s) {
        for (int q = 0; q < st->nseq; q++) {
            sb_status r = sb_seq_truncate(st->e, st->seq[q], n);
            if (r != SB_OK) return r;
        }
        return SB_OK;
    }
#endif
    return sb_session_truncate(st->s, n);
}

/* a prompt chunk: tok[depth, depth + T) after tok[0, depth) cached (the cache cut back first) */
static sb_status chunk(stepper *st, const int32_t *tok, int64_t depth, int64_t T) {
    const sb_status r = truncate_to(st, depth);
    if (r != SB_OK) return r;
    /* a session takes the whole prompt and reuses the cached prefix; an engine's sequence appends */
    return st->s ? sb_session_prefill(st->s, tok, (size_t)(depth + T), NULL) : fill(st, tok + depth, T);
}

static sb_status open_stepper(sb_model *m, int engine, int nseq, int64_t n_ctx, int kv_type, stepper *st) {
    if (!engine) {
        sb_session_params sp;
        sb_session_default_params(&sp);
        sp.device = SB_DEVICE_CUDA;
        sp.n_ctx = n_ctx;
        sp.kv_type = kv_type;
        return sb_session_create(m, &sp, &st->s);
    }
#if GAPS_ENGINE
    sb_engine_params ep;
    sb_engine_default_params(&ep);
    ep.device = SB_DEVICE_CUDA;
    ep.n_seq_max = nseq;
    ep.n_ctx = n_ctx;
    ep.kv_type = kv_type;
    sb_status r = sb_engine_create(m, &ep, &st->e);
    for (st->nseq = 0; r == SB_OK && st->nseq < nseq; st->nseq++) r = sb_seq_open(st->e, &st->seq[st->nseq]);
    return r;
#else
    fprintf(stderr, "bench_cuda_gaps: -e: this library's header has no engine\n");
    return SB_ERR_UNSUPPORTED;
#endif
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int64_t depth = 64;
    int64_t T = 1;
    int steps = 32, shown = 1 << 30, engine = 0, nseq = 1, kv_type = SB_TYPE_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-e")) engine = 1;
        else if (i + 1 >= argc) break;
        else if (!strcmp(argv[i], "-m")) path = argv[++i];
        else if (!strcmp(argv[i], "-d")) depth = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-n")) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-k")) shown = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t")) T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-B")) nseq = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-ctk")) {
            const char *v = argv[++i];
            kv_type = !strcmp(v, "f16") ? SB_TYPE_F16 : !strcmp(v, "f32") ? SB_TYPE_F32 : -1;
        }
    }
    if (!path || kv_type < 0 || depth < 1 || steps < 1 || T < 1 || T > 4096 || nseq < 1 || nseq > GAPS_MAX_B || (nseq > 1 && (!engine || T > 1))) {
        fprintf(stderr, "usage: bench_cuda_gaps -m MODEL [-d DEPTH (64, >= 1)] [-n STEPS (32)] [-t T (1..4096)] [-k KERNELS_SHOWN] [-ctk f32|f16] [-e [-B N (1..%d)]]\n"
                        "  (-B N > 1: an engine's decode step of N sequences; not with -t)\n", GAPS_MAX_B);
        return 2;
    }
    sb_model *m = NULL;
    stepper st = {0};
    CK(sb_model_load(path, NULL, &m));
    CK(open_stepper(m, engine, nseq, depth + (T > 1 ? T : steps) + 16, kv_type, &st));
    int32_t *tok = (int32_t *)malloc((size_t)(depth + T) * sizeof *tok);
    if (!tok) return 1;
    for (int64_t i = 0; i < depth + T; i++) tok[i] = (int32_t)(1 + (i * 7919) % 1000);
    if (T > 1) {
        CK(fill(&st, tok, depth));
        for (int i = 0; i < 3; i++) CK(chunk(&st, tok, depth, T)); /* plan, capture, warm */
    } else {
        if (depth > 1) CK(fill(&st, tok, depth - 1));
        for (int i = 0; i < 3; i++) CK(step(&st, tok[depth - 1])); /* capture, warm */
        CK(truncate_to(&st, depth - 1));
    }
    CU(cuptiActivityRegisterCallbacks(buf_request, buf_complete));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    for (int i = 0; i < steps; i++) CK(T > 1 ? chunk(&st, tok, depth, T) : step(&st, tok[(depth - 1 + i) % depth]));
    CU(cuptiActivityFlushAll(1));
    CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (dropped) fprintf(stderr, "bench_cuda_gaps: out of memory: some records dropped\n");
    char kind[48];
    snprintf(kind, sizeof kind, "engine (%d sequence%s)", nseq, nseq > 1 ? "s" : "");
    printf("%s, %s, depth %lld, %lld token(s) a step, %d steps, %s KV\n\n", path, engine ? kind : "session", (long long)depth,
           (long long)(engine ? T * nseq : T), steps, kv_type == SB_TYPE_F16 ? "f16" : "f32");
    report(steps, shown);
    if (st.s) sb_session_free(st.s);
#if GAPS_ENGINE
    if (st.e) sb_engine_free(st.e);
#endif
    sb_model_free(m);
    free(tok);
    return 0;
}
