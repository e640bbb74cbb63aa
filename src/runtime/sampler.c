/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/sampler.c — the sampler chain of sampler.h. Candidates are (id, logit) pairs; each stage
 * narrows or reweights them in llama.cpp's order. The RNG is xoshiro256** seeded by splitmix64,
 * and a draw is a uniform double in [0, 1) compared against the cumulative probabilities.
 * The history ring holds the last penalty_last_n accepted tokens. The logit bias is a dense
 * [n_vocab] array (allocated by the first non-empty set); the logprob log is one growing array of
 * entries of 1 + top_k (token, logprob) pairs, unused alternatives marked with token -1.
 */
#include "runtime/sampler.h"

#include "backend/cpu/cpu_kernels.h"
#include "runtime/vexp_avx2.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdbool.h>
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
    cand *c;            /* [n_vocab] candidates, then [n_vocab] of the radix sort's scratch */
    int32_t *hist;      /* ring of the last penalty_last_n tokens */
    int32_t hist_n, hist_pos;
    uint16_t *counts;   /* [n_vocab] occurrences in the history (scratch) */
    uint64_t rng[4];
    float *bias;        /* [n_vocab] added to the logits; NULL: no bias */
    int32_t lp_top;     /* alternatives per logged draw; -1: no log */
    rt_token_logprob *lp; /* lp_n entries of 1 + lp_top pairs */
    size_t lp_n, lp_cap;
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
    s->lp_n = 0;
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
    s->lp_top = -1;
    s->c = (cand *)malloc(2 * (size_t)n_vocab * sizeof *s->c);
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
    free(s->bias);
    free(s->lp);
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

/* c[0..n) in by_logit_desc's order, for candidates that arrive in ascending id order (the whole
 * vocabulary: top-k off): a stable LSD radix sort, 3 passes of 11 bits, on a key that orders the
 * logits descending (+0 and -0 one key, as they compare equal); ties keep their id order. ~1 ms
 * for 152k candidates where qsort took ~20 ms. tmp: n candidates of scratch. */
static uint32_t desc_key(float x) {
    uint32_t u;
    if (x == 0) x = 0; /* -0 -> +0 */
    memcpy(&u, &x, sizeof u);
    u = u & 0x80000000u ? ~u : u | 0x80000000u; /* ascending order of the floats */
    return ~u;
}
static void sort_desc_radix(cand *c, cand *tmp, int64_t n) {
    cand *src = c, *dst = tmp;
    for (int shift = 0; shift < 33; shift += 11) {
        int64_t at[2048] = {0};
        for (int64_t i = 0; i < n; i++) at[desc_key(src[i].logit) >> shift & 2047]++;
        for (int64_t d = 0, sum = 0; d < 2048; d++) {
            const int64_t k = at[d];
            at[d] = sum, sum += k;
        }
        for (int64_t i = 0; i < n; i++) dst[at[desc_key(src[i].logit) >> shift & 2047]++] = src[i];
        cand *t = src;
        src = dst, dst = t;
    }
    memcpy(c, src, (size_t)n * sizeof *c); /* three passes: the result is in tmp */
}

/* Softmax over c[0..n) (sorted descending) into p. */
static void softmax(cand *c, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (c[i].p = expf(c[i].logit - c[0].logit));
    for (int64_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

/* logit i with its bias (the one float sum both the draw and the logprob log use). */
static float biased(const rt_sampler *s, const float *logits, int64_t i) {
    return s->bias ? logits[i] + s->bias[i] : logits[i];
}

/* is candidate a ahead of b in by_logit_desc's order? */
static bool ahead(cand a, cand b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

/* c[0, k) as a heap whose root is the candidate furthest behind: x replaces it when ahead of it */
static void heap_offer(cand *c, int64_t k, cand x) {
    if (!ahead(x, c[0])) return;
    int64_t i = 0;
    for (;;) { /* sift x down from the root past every child it is ahead of */
        const int64_t l = 2 * i + 1, r = l + 1;
        if (l >= k) break;
        const int64_t m = r < k && ahead(c[l], c[r]) ? r : l; /* the child furthest behind */
        if (!ahead(x, c[m])) break;
        c[i] = c[m];
        i = m;
    }
    c[i] = x;
}

static void heap_push(cand *c, int64_t n, cand x) { /* n: the heap's size before */
    int64_t i = n;
    while (i > 0 && ahead(c[(i - 1) / 2], x)) {
        c[i] = c[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c[i] = x;
}

/* logit i with its bias and the history penalties (llama.cpp: repeat divides positive logits,
 * multiplies negative ones), for a candidate */
static float penalized(const rt_sampler *s, float x, int64_t i, bool pen) {
    const uint16_t k = pen ? s->counts[i] : 0;
    if (!k) return x;
    const rt_sampler_params *p = &s->prm;
    x = x <= 0 ? x * p->repeat_penalty : x / p->repeat_penalty;
    return x - (float)k * p->frequency_penalty - p->presence_penalty;
}

/* a NaN or +Inf logit i: a broken pass, never sampled around */
static sb_status broken_logit(const rt_sampler *s, int64_t i, float x) {
    return sb_fail(SB_ERR_NUMERIC, "sampler: logit %lld of %lld is %s: the model produced non-finite values", (long long)i,
                   (long long)s->n_vocab, x != x ? "NaN" : "+Inf");
}

#if defined(__SSE2__)
/* the lanes of x that are NaN or +Inf (broken_logit's cases), all bits set */
static inline __m128 broken4(__m128 x) { return _mm_or_ps(_mm_cmpunord_ps(x, x), _mm_cmpeq_ps(x, _mm_set1_ps(INFINITY))); }
#endif

/* The candidates in by_logit_desc's order, at most keep of them (0: all) into s->c; their count.
 * Greedy keeps 1 and top-k k: one pass over the vocabulary (a heap of k), no sort of it all;
 * without bias or penalties the pass skips four values at a time (SSE2) that cannot enter the
 * full heap — most of a large vocabulary, so a draw costs about one vector pass over the row. */
static sb_status candidates(rt_sampler *s, const float *logits, int64_t keep, int64_t *n_out) {
    const rt_sampler_params *p = &s->prm;
    const bool pen = s->hist_n && (p->repeat_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0);
    if (pen)
        for (int32_t i = 0; i < s->hist_n; i++)
            if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab && s->counts[s->hist[i]] < UINT16_MAX) s->counts[s->hist[i]]++;
    int64_t n = 0;
    sb_status st = SB_OK;
#if defined(__SSE2__)
    const bool plain = !s->bias && !pen && keep > 0; /* a candidate's logit is the row's value */
#endif
    for (int64_t i = 0; i < s->n_vocab; i++) {
#if defined(__SSE2__)
        /* once the heap is full, only a value above its root (an equal one has a larger id) or a
         * NaN / +Inf (an error) needs the loop below: skip four at a time where none is */
        if (plain && n == keep && (i & 3) == 0 && i + 4 <= s->n_vocab) {
            const __m128 x = _mm_loadu_ps(logits + i);
            const __m128 hit = _mm_or_ps(_mm_cmpgt_ps(x, _mm_set1_ps(s->c[0].logit)), broken4(x));
            if (!_mm_movemask_ps(hit)) {
                i += 3;
                continue;
            }
        }
#endif
        if (logits[i] != logits[i] || logits[i] == INFINITY) {
            st = broken_logit(s, i, logits[i]);
            break;
        }
        const float x = biased(s, logits, i);
        if (x == INFINITY) {
            st = sb_fail(SB_ERR_NUMERIC, "sampler: logit %lld (%g) plus its bias (%g) overflows to +Inf", (long long)i, logits[i], s->bias[i]);
            break;
        }
        if (x == -INFINITY) continue;
        const cand c = {(int32_t)i, penalized(s, x, i, pen), 0};
        if (!keep) s->c[n++] = c;
        else if (n < keep) heap_push(s->c, n++, c);
        else heap_offer(s->c, keep, c);
    }
    if (pen)
        for (int32_t i = 0; i < s->hist_n; i++)
            if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab) s->counts[s->hist[i]] = 0;
    if (st != SB_OK) return st;
    if (n == 0) return sb_fail(SB_ERR_RANGE, "sampler: every logit is -inf: no token can be drawn");
    if (!keep && n > 512) sort_desc_radix(s->c, s->c + s->n_vocab, n); /* in id order: stable sort */
    else qsort(s->c, (size_t)n, sizeof *s->c, by_logit_desc);
    *n_out = n;
    return SB_OK;
}

/* Greedy without bias or penalties: the first index of the largest logit, or the first NaN / +inf
 * as an error. Maxima and a "bad" mask over the row first, four lanes at a time where SSE2 is there
 * (x86-64 always: a draw is one vector pass, where a compare-and-branch a value was a serve step's
 * largest host cost), then the first index holding the maximum. MAXPS(x, m) is x > m ? x : m
 * exactly, and +0 / -0 compare equal in both passes, as in a one-pass loop. */
static sb_status argmax_plain(const rt_sampler *s, const float *logits, int32_t *token) {
    const int64_t n = s->n_vocab;
    float mx = -INFINITY;
    int any_bad = 0;
    int64_t i = 0;
#if defined(__SSE2__)
    __m128 m4 = _mm_set1_ps(-INFINITY), bad4 = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) {
        const __m128 x = _mm_loadu_ps(logits + i);
        m4 = _mm_max_ps(x, m4);
        bad4 = _mm_or_ps(bad4, broken4(x));
    }
    float l[4];
    _mm_storeu_ps(l, m4);
    for (int k = 0; k < 4; k++) mx = l[k] > mx ? l[k] : mx;
    any_bad = _mm_movemask_ps(bad4);
#endif
    for (; i < n; i++) {
        const float x = logits[i];
        mx = x > mx ? x : mx;
        any_bad |= (x != x) | (x == INFINITY);
    }
    if (any_bad)
        for (i = 0; i < n; i++)
            if (logits[i] != logits[i] || logits[i] == INFINITY) return broken_logit(s, i, logits[i]);
    if (mx == -INFINITY) return sb_fail(SB_ERR_RANGE, "sampler: every logit is -inf: no token can be drawn");
    for (i = 0; logits[i] != mx; i++) {
    }
    *token = (int32_t)i;
    return SB_OK;
}

/* The chain: candidates (bias, penalties, top-k), filters, the draw. */
static sb_status draw(rt_sampler *s, const float *logits, int32_t *token) {
    const rt_sampler_params *p = &s->prm;
    int64_t n = 0;
    const bool pen = s->hist_n && (p->repeat_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0);
    if (p->temp <= 0 && !s->bias && !pen) return argmax_plain(s, logits, token);
    SB_TRY(candidates(s, logits, p->temp <= 0 ? 1 : p->top_k > 0 ? p->top_k : 0, &n));
    if (p->temp <= 0) { /* greedy */
        *token = s->c[0].id;
        return SB_OK;
    }
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

/* four biased logits from i */
static inline __m128 biased4(const rt_sampler *s, const float *logits, int64_t i) {
    const __m128 x = _mm_loadu_ps(logits + i);
    return s->bias ? _mm_add_ps(x, _mm_loadu_ps(s->bias + i)) : x;
}

/* the largest biased logit (draw has refused NaN, so maxps's NaN rule never applies), 16 lanes at a
 * time: a scalar max is one 4-cycle dependency chain over the whole vocabulary */
static float max_biased(const rt_sampler *s, const float *logits) {
    __m128 m0 = _mm_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 16 <= s->n_vocab; i += 16) {
        m0 = _mm_max_ps(m0, biased4(s, logits, i)), m1 = _mm_max_ps(m1, biased4(s, logits, i + 4));
        m2 = _mm_max_ps(m2, biased4(s, logits, i + 8)), m3 = _mm_max_ps(m3, biased4(s, logits, i + 12));
    }
    float m[4], mx = -INFINITY;
    _mm_storeu_ps(m, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
    for (int j = 0; j < 4; j++) mx = m[j] > mx ? m[j] : mx;
    for (; i < s->n_vocab; i++) {
        const float x = biased(s, logits, i);
        mx = x > mx ? x : mx;
    }
    return mx;
}

/* ln sum_i e^(logit i with its bias), in double: the largest value mx out first, each term
 * e^(x - mx) a float (8 at a time on AVX2 machines: runtime/vexp_avx2.h), their sum in double.
 * (Every term in double costs ~1 ms over a 152k vocabulary; float terms move lse by ~1e-7.) */
static double log_sum_exp(const rt_sampler *s, const float *logits) {
    const float mx = max_biased(s, logits);
    if (!isfinite(mx)) return mx; /* (draw refuses such logits before any log entry) */
    double sum = 0;
    if (cpu_isa_active() >= CPU_ISA_AVX2) sum = exp_sum_avx2(NULL, logits, s->bias, s->n_vocab, mx);
    else
        for (int64_t i = 0; i < s->n_vocab; i++) sum += (double)expf(biased(s, logits, i) - mx);
    return (double)mx + log(sum);
}

/* Append the log entry of a draw of tok: ln p(tok) and the top lp_top tokens of
 * log-softmax(logits + bias), computed in double. Capacity was reserved by the caller. */
static void log_draw(rt_sampler *s, const float *logits, int32_t tok) {
    size_t stride = (size_t)s->lp_top + 1;
    rt_token_logprob *e = s->lp + s->lp_n * stride;
    const double lse = log_sum_exp(s, logits);
    e[0] = (rt_token_logprob){tok, (float)((double)biased(s, logits, tok) - lse)};
    int32_t k = 0;           /* e[1 .. 1 + k) sorted: logit descending, then id ascending */
    float last = -INFINITY;  /* e[k]'s value once the list is full: what a newcomer must beat */
    for (int64_t i = 0; i < s->n_vocab && s->lp_top > 0; i++) {
        if (k == s->lp_top && (i & 3) == 0 && i + 4 <= s->n_vocab && !_mm_movemask_ps(_mm_cmpgt_ps(biased4(s, logits, i), _mm_set1_ps(last)))) {
            i += 3; /* none of the four beats the list's last: the common case once it is full */
            continue;
        }
        float x = biased(s, logits, i);
        if (x == -INFINITY || (k == s->lp_top && !(x > last))) continue;
        int32_t at = k < s->lp_top ? ++k : k; /* the slot that falls off is the last one */
        while (at > 1 && x > biased(s, logits, e[at - 1].token)) {
            e[at] = e[at - 1];
            at--;
        }
        e[at] = (rt_token_logprob){(int32_t)i, 0};
        last = biased(s, logits, e[k].token);
    }
    for (int32_t j = 1; j <= k; j++) e[j].logprob = (float)((double)biased(s, logits, e[j].token) - lse);
    for (int32_t j = k + 1; j <= s->lp_top; j++) e[j] = (rt_token_logprob){-1, 0};
    s->lp_n++;
}

sb_status rt_sampler_sample(rt_sampler *s, const float *logits, int32_t *token) {
    size_t stride = (size_t)s->lp_top + 1;
    if (s->lp_top >= 0 && s->lp_n == s->lp_cap) { /* reserve before drawing: an OOM draws nothing */
        size_t cap = s->lp_cap ? 2 * s->lp_cap : 64;
        rt_token_logprob *lp = (rt_token_logprob *)realloc(s->lp, cap * stride * sizeof *lp);
        if (!lp) return sb_fail(SB_ERR_OOM, "sampler: logprob log of %zu draws", cap);
        s->lp = lp;
        s->lp_cap = cap;
    }
    int32_t tok = -1;
    SB_TRY(draw(s, logits, &tok));
    if (s->lp_top >= 0) log_draw(s, logits, tok);
    *token = tok;
    return SB_OK;
}

sb_status rt_sampler_set_logit_bias(rt_sampler *s, const int32_t *tokens, const float *bias, size_t n) {
    if (n && (!tokens || !bias)) return sb_fail(SB_ERR_INVALID_ARG, "logit bias: %zu entries but no arrays", n);
    if (n > (size_t)s->n_vocab)
        return sb_fail(SB_ERR_INVALID_ARG, "logit bias: %zu entries for a vocabulary of %lld tokens", n, (long long)s->n_vocab);
    float *b = NULL;
    if (n && !(b = (float *)calloc((size_t)s->n_vocab, sizeof *b))) return sb_fail(SB_ERR_OOM, "logit bias of %lld tokens", (long long)s->n_vocab);
    uint16_t *seen = s->counts; /* all zero between draws */
    sb_status st = SB_OK;
    size_t i = 0;
    for (; i < n && st == SB_OK; i++) {
        int32_t t = tokens[i];
        if (t < 0 || t >= s->n_vocab)
            st = sb_fail(SB_ERR_INVALID_ARG, "logit bias %zu: token %d is outside the vocabulary [0, %lld)", i, t, (long long)s->n_vocab);
        else if (bias[i] != bias[i] || bias[i] == INFINITY)
            st = sb_fail(SB_ERR_INVALID_ARG, "logit bias %zu (token %d): %s is not allowed (finite, or -inf to ban the token)", i, t,
                         bias[i] != bias[i] ? "NaN" : "+Inf");
        else if (seen[t])
            st = sb_fail(SB_ERR_INVALID_ARG, "logit bias %zu: token %d is given twice", i, t);
        else {
            seen[t] = 1;
            b[t] = bias[i];
        }
    }
    for (size_t j = 0; j < i; j++)
        if (tokens[j] >= 0 && tokens[j] < s->n_vocab) seen[tokens[j]] = 0;
    if (st != SB_OK) {
        free(b);
        return st;
    }
    free(s->bias);
    s->bias = b;
    return SB_OK;
}

sb_status rt_sampler_set_logprobs(rt_sampler *s, int32_t top_k) {
    if (top_k < -1 || top_k > RT_MAX_TOP_LOGPROBS)
        return sb_fail(SB_ERR_INVALID_ARG, "logprobs: top_k %d is outside [-1, %d]", top_k, RT_MAX_TOP_LOGPROBS);
    free(s->lp);
    s->lp = NULL;
    s->lp_n = s->lp_cap = 0;
    s->lp_top = top_k;
    return SB_OK;
}

size_t rt_sampler_n_logprobs(const rt_sampler *s) { return s->lp_n; }

const rt_token_logprob *rt_sampler_logprob(const rt_sampler *s, size_t i, size_t *n_top) {
    if (i >= s->lp_n) return NULL;
    const rt_token_logprob *e = s->lp + i * ((size_t)s->lp_top + 1);
    size_t k = 0;
    while (k < (size_t)s->lp_top && e[1 + k].token >= 0) k++;
    if (n_top) *n_top = k;
    return e;
}
