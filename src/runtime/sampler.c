/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/sampler.c — the sampler chain of sampler.h. Candidates are (id, logit) pairs; each stage
 * narrows or reweights them in llama.cpp's order. The RNG is xoshiro256** seeded by splitmix64,
 * and a draw is a uniform double in [0, 1) compared against the cumulative probabilities.
 * The history ring holds the last penalty_last_n accepted tokens.
 */
#include "runtime/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    int32_t id;
    float logit;
    float p;
} cand;

struct rt_sampler {
    rt_sampler_params prm;
    int64_t n_vocab;
    cand *c;            /* [n_vocab] */
    int32_t *hist;      /* ring of the last penalty_last_n tokens */
    int32_t hist_n, hist_pos;
    uint16_t *counts;   /* [n_vocab] occurrences in the history (scratch) */
    uint64_t rng[4];
};

void rt_sampler_defaults(rt_sampler_params *p) {
    *p = (rt_sampler_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                             .presence_penalty = 0, .frequency_penalty = 0, .penalty_last_n = 64, .seed = 0xC0FFEE};
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void rt_sampler_reset(rt_sampler *s) {
    uint64_t x = s->prm.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&x);
    s->hist_n = s->hist_pos = 0;
}

sb_status rt_sampler_create(const rt_sampler_params *p, int64_t n_vocab, rt_sampler **out) {
    *out = NULL;
    rt_sampler_params d;
    rt_sampler_defaults(&d);
    if (!p) p = &d;
    if (n_vocab <= 0 || n_vocab > INT32_MAX) return sb_fail(SB_ERR_INVALID_ARG, "sampler: n_vocab %lld", (long long)n_vocab);
    if (!isfinite(p->temp) || !isfinite(p->top_p) || !isfinite(p->min_p) || !(p->repeat_penalty > 0) ||
        p->penalty_last_n < 0 || p->penalty_last_n > 1 << 20 || !isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return sb_fail(SB_ERR_INVALID_ARG,
                       "sampler: bad parameters (temp %g, top_p %g, min_p %g, repeat_penalty %g, last_n %d)", p->temp, p->top_p,
                       p->min_p, p->repeat_penalty, p->penalty_last_n);
    rt_sampler *s = (rt_sampler *)calloc(1, sizeof *s);
    if (!s) return sb_fail(SB_ERR_OOM, "sampler");
    s->prm = *p;
    s->n_vocab = n_vocab;
    s->c = (cand *)malloc((size_t)n_vocab * sizeof *s->c);
    s->counts = (uint16_t *)calloc((size_t)n_vocab, sizeof *s->counts);
    s->hist = (int32_t *)malloc((size_t)(p->penalty_last_n ? p->penalty_last_n : 1) * sizeof *s->hist);
    if (!s->c || !s->counts || !s->hist) {
        rt_sampler_free(s);
        return sb_fail(SB_ERR_OOM, "sampler buffers for %lld tokens", (long long)n_vocab);
    }
    rt_sampler_reset(s);
    *out = s;
    return SB_OK;
}

void rt_sampler_free(rt_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->counts);
    free(s->hist);
    free(s);
}

void rt_sampler_accept(rt_sampler *s, int32_t token) {
    if (s->prm.penalty_last_n <= 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->prm.penalty_last_n;
    if (s->hist_n < s->prm.penalty_last_n) s->hist_n++;
}

static int by_logit_desc(const void *a, const void *b) {
    float x = ((const cand *)a)->logit, y = ((const cand *)b)->logit;
    if (x != y) return x > y ? -1 : 1;
    return ((const cand *)a)->id - ((const cand *)b)->id; /* stable order for equal logits */
}

/* Softmax over c[0..n) (sorted descending) into p. */
static void softmax(cand *c, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (c[i].p = expf(c[i].logit - c[0].logit));
    for (int64_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

sb_status rt_sampler_sample(rt_sampler *s, const float *logits, int32_t *token) {
    const rt_sampler_params *p = &s->prm;
    int64_t n = 0;
    for (int64_t i = 0; i < s->n_vocab; i++) {
        if (logits[i] != logits[i] || logits[i] == INFINITY) /* a broken pass: never sample around it */
            return sb_fail(SB_ERR_NUMERIC, "sampler: logit %lld of %lld is %s: the model produced non-finite values", (long long)i,
                           (long long)s->n_vocab, logits[i] != logits[i] ? "NaN" : "+Inf");
        if (logits[i] > -INFINITY) s->c[n++] = (cand){(int32_t)i, logits[i], 0};
    }
    if (n == 0) return sb_fail(SB_ERR_RANGE, "sampler: every logit is -inf: no token can be drawn");
    /* penalties (llama.cpp: repeat divides positive logits, multiplies negative ones) */
    if (s->hist_n && (p->repeat_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0)) {
        for (int32_t i = 0; i < s->hist_n; i++)
            if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab && s->counts[s->hist[i]] < UINT16_MAX) s->counts[s->hist[i]]++;
        for (int64_t i = 0; i < n; i++) {
            uint16_t k = s->counts[s->c[i].id];
            if (!k) continue;
            float l = s->c[i].logit;
            l = l <= 0 ? l * p->repeat_penalty : l / p->repeat_penalty;
            s->c[i].logit = l - (float)k * p->frequency_penalty - p->presence_penalty;
        }
        for (int32_t i = 0; i < s->hist_n; i++)
            if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab) s->counts[s->hist[i]] = 0;
    }
    if (p->temp <= 0) { /* greedy */
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (s->c[i].logit > s->c[best].logit) best = i;
        *token = s->c[best].id;
        return SB_OK;
    }
    /* top-k: partial order is enough, but n log n over the vocabulary is a few ms at most; keep
     * it simple and exact */
    qsort(s->c, (size_t)n, sizeof *s->c, by_logit_desc);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    softmax(s->c, n);
    if (p->top_p < 1.0f) {
        double cum = 0;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            cum += s->c[i].p;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0) {
        float lim = s->c[0].p * p->min_p;
        int64_t keep = 1;
        while (keep < n && s->c[keep].p >= lim) keep++;
        n = keep;
    }
    for (int64_t i = 0; i < n; i++) s->c[i].logit /= p->temp;
    softmax(s->c, n);
    double u = (double)(next_u64(s->rng) >> 11) * (1.0 / 9007199254740992.0), cum = 0;
    for (int64_t i = 0; i < n; i++) {
        cum += s->c[i].p;
        if (u < cum) {
            *token = s->c[i].id;
            return SB_OK;
        }
    }
    *token = s->c[n - 1].id;
    return SB_OK;
}
