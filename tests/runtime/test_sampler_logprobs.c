/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_sampler_logprobs.c — the sampler's two per-request extras (sampler.h):
 * the logit bias moves, bans and is validated atomically (a refused set keeps the old one), and
 * the logprob log matches log-softmax(logits + bias) computed here in double (the drawn token and
 * the top-k in order, ties by lower id, -inf tokens never listed), does not depend on temperature or
 * truncation, logs nothing for a failed draw (NaN logit), and is cleared by reset / set_logprobs.
 */
#include "runtime/sampler.h"
#include "test.h"

#define V 64

static void make_logits(float *l, uint64_t *seed) {
    for (int i = 0; i < V; i++) l[i] = 3.0f * test_rand_normal(seed);
}

static rt_sampler *make(float temp, int32_t top_k, float top_p, uint64_t seed) {
    rt_sampler_params p;
    rt_sampler_defaults(&p);
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.seed = seed;
    rt_sampler *s = NULL;
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    return s;
}

/* Reference: ln softmax of x (float sums, as the sampler forms them) in double. */
static void ref_logprobs(const float *l, const float *bias, double *lp) {
    float x[V];
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) {
        x[i] = bias ? l[i] + bias[i] : l[i];
        if (x[i] > mx) mx = x[i];
    }
    for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
    for (int i = 0; i < V; i++) lp[i] = (double)x[i] - mx - log(sum);
}

/* Check entry i of s against the reference: the drawn token tok, then the k best (ties: lower id). */
static void check_entry(const rt_sampler *s, size_t i, int32_t tok, const double *lp, int32_t k) {
    size_t n_top = 99;
    const rt_token_logprob *e = rt_sampler_logprob(s, i, &n_top);
    CHECK(e != NULL);
    if (!e) return;
    CHECK_EQ_INT(e[0].token, tok);
    CHECKF(fabs(e[0].logprob - lp[tok]) < 1e-6, "chosen %d: %.9g vs %.9g", tok, e[0].logprob, lp[tok]);
    int used[V] = {0}, finite = 0;
    for (int t = 0; t < V; t++) finite += lp[t] > -INFINITY;
    CHECK_EQ_INT(n_top, k < finite ? k : finite);
    for (size_t j = 0; j < n_top; j++) {
        int best = -1;
        for (int t = 0; t < V; t++)
            if (!used[t] && lp[t] > -INFINITY && (best < 0 || lp[t] > lp[best])) best = t;
        used[best] = 1;
        CHECKF(e[1 + j].token == best, "top %zu: token %d, expected %d", j, e[1 + j].token, best);
        CHECKF(fabs(e[1 + j].logprob - lp[best]) < 1e-6, "top %zu: %.9g vs %.9g", j, e[1 + j].logprob, lp[best]);
        CHECK(e[1 + j].logprob <= 0);
    }
}

static void test_bias(void) {
    float l[V], bias[3] = {5, -INFINITY, 0.5f};
    int32_t toks[3] = {3, 9, 9}, t = -1;
    for (int i = 0; i < V; i++) l[i] = 0;
    l[9] = 2, l[3] = 1;
    rt_sampler *s = make(0, 40, 0.95f, 1);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 9);
    /* the bias moves the greedy choice; -inf bans */
    CHECK(rt_sampler_set_logit_bias(s, toks, bias, 1) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 3);
    CHECK(rt_sampler_set_logit_bias(s, toks + 1, bias + 1, 1) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 3); /* 9 banned, 3 next best (no bias left on it) */
    /* refused sets change nothing (9 stays banned) and name the entry */
    CHECK(rt_sampler_set_logit_bias(s, toks + 1, bias + 1, 2) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "twice"));
    int32_t bad_tok[2] = {V, -1};
    CHECK(rt_sampler_set_logit_bias(s, bad_tok, bias, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "outside"));
    CHECK(rt_sampler_set_logit_bias(s, bad_tok + 1, bias, 1) == SB_ERR_INVALID_ARG);
    float nan_b = NAN, inf_b = INFINITY;
    CHECK(rt_sampler_set_logit_bias(s, toks, &nan_b, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "NaN"));
    CHECK(rt_sampler_set_logit_bias(s, toks, &inf_b, 1) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "+Inf"));
    CHECK(rt_sampler_set_logit_bias(s, toks, bias, V + 1) == SB_ERR_INVALID_ARG);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 3);
    /* a duplicate after a valid entry must not leave the first one marked (seen[] scratch restored) */
    CHECK(rt_sampler_set_logit_bias(s, NULL, NULL, 0) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 9);
    int32_t one = 9;
    float big = 1.0f;
    CHECK(rt_sampler_set_logit_bias(s, &one, &big, 1) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 9);
    /* banning everything: SB_ERR_RANGE; a bias pushing a logit to +Inf: SB_ERR_NUMERIC */
    int32_t all[V];
    float ban[V];
    for (int i = 0; i < V; i++) all[i] = i, ban[i] = -INFINITY;
    CHECK(rt_sampler_set_logit_bias(s, all, ban, V) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_ERR_RANGE);
    l[4] = 3e38f;
    float huge = 3e38f;
    int32_t four = 4;
    CHECK(rt_sampler_set_logit_bias(s, &four, &huge, 1) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_ERR_NUMERIC && strstr(sb_last_error(), "overflows"));
    rt_sampler_free(s);

    /* with temperature, a -inf bias is never drawn */
    s = make(1.0f, 0, 1.0f, 5);
    for (int i = 0; i < V; i++) l[i] = 0;
    for (int i = 0; i < V; i++) ban[i] = i % 2 ? -INFINITY : 0.0f;
    CHECK(rt_sampler_set_logit_bias(s, all, ban, V) == SB_OK);
    int odd = 0;
    for (int k = 0; k < 500; k++) {
        CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
        odd += t % 2;
    }
    CHECK_EQ_INT(odd, 0);
    rt_sampler_free(s);
}

static void test_logprobs(void) {
    uint64_t seed = 7;
    float l[V], bias[V];
    double lp[V];
    int32_t all[V], t;
    for (int i = 0; i < V; i++) all[i] = i, bias[i] = i % 5 == 0 ? 2.5f : i % 7 == 0 ? -INFINITY : 0.0f;
    /* two samplers with different chains log the same distribution */
    rt_sampler *a = make(0.7f, 5, 0.9f, 3), *b = make(0, 0, 1, 4);
    CHECK(rt_sampler_n_logprobs(a) == 0 && rt_sampler_logprob(a, 0, NULL) == NULL);
    CHECK(rt_sampler_set_logprobs(a, 5) == SB_OK && rt_sampler_set_logprobs(b, 5) == SB_OK);
    CHECK(rt_sampler_set_logit_bias(a, all, bias, V) == SB_OK && rt_sampler_set_logit_bias(b, all, bias, V) == SB_OK);
    for (int k = 0; k < 30; k++) {
        make_logits(l, &seed);
        if (k % 3 == 0) l[k % V] = -INFINITY;
        ref_logprobs(l, bias, lp);
        CHECK(rt_sampler_sample(a, l, &t) == SB_OK);
        check_entry(a, (size_t)k, t, lp, 5);
        CHECK(rt_sampler_sample(b, l, &t) == SB_OK);
        check_entry(b, (size_t)k, t, lp, 5);
        size_t na = 0, nb = 0;
        const rt_token_logprob *ea = rt_sampler_logprob(a, (size_t)k, &na), *eb = rt_sampler_logprob(b, (size_t)k, &nb);
        CHECK(ea && eb && na == nb && !memcmp(ea + 1, eb + 1, na * sizeof *ea));
    }
    CHECK_EQ_INT(rt_sampler_n_logprobs(a), 30);
    /* a failed draw logs nothing */
    l[3] = NAN;
    CHECK(rt_sampler_sample(a, l, &t) == SB_ERR_NUMERIC);
    CHECK_EQ_INT(rt_sampler_n_logprobs(a), 30);
    CHECK(rt_sampler_logprob(a, 30, NULL) == NULL);
    /* reset clears the log, keeps logging */
    rt_sampler_reset(a);
    CHECK_EQ_INT(rt_sampler_n_logprobs(a), 0);
    l[3] = 0;
    CHECK(rt_sampler_sample(a, l, &t) == SB_OK);
    CHECK_EQ_INT(rt_sampler_n_logprobs(a), 1);
    /* -1 stops logging; bad top_k refused */
    CHECK(rt_sampler_set_logprobs(a, -1) == SB_OK);
    CHECK(rt_sampler_sample(a, l, &t) == SB_OK && rt_sampler_n_logprobs(a) == 0);
    CHECK(rt_sampler_set_logprobs(a, RT_MAX_TOP_LOGPROBS + 1) == SB_ERR_INVALID_ARG);
    CHECK(rt_sampler_set_logprobs(a, -2) == SB_ERR_INVALID_ARG);
    rt_sampler_free(a);
    rt_sampler_free(b);

    /* ties: lower id first; fewer finite tokens than top_k: only those; top_k 0: the chosen only */
    rt_sampler *s = make(0, 0, 1, 1);
    CHECK(rt_sampler_set_logprobs(s, RT_MAX_TOP_LOGPROBS) == SB_OK);
    for (int i = 0; i < V; i++) l[i] = -INFINITY;
    l[40] = 1, l[12] = 1, l[7] = 0.5f;
    ref_logprobs(l, NULL, lp);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 12);
    check_entry(s, 0, 12, lp, RT_MAX_TOP_LOGPROBS);
    size_t n_top = 0;
    const rt_token_logprob *e = rt_sampler_logprob(s, 0, &n_top);
    CHECK(e && n_top == 3 && e[1].token == 12 && e[2].token == 40 && e[3].token == 7);
    CHECK(e && fabs(e[0].logprob - log(exp(1.0) / (2 * exp(1.0) + exp(0.5)))) < 1e-6);
    CHECK(rt_sampler_set_logprobs(s, 0) == SB_OK);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
    e = rt_sampler_logprob(s, 0, &n_top);
    CHECK(e && n_top == 0 && e[0].token == 12);
    /* one finite token: probability 1 */
    for (int i = 0; i < V; i++) l[i] = -INFINITY;
    l[63] = -50;
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 63);
    e = rt_sampler_logprob(s, 1, &n_top);
    CHECK(e && e[0].token == 63 && e[0].logprob == 0);
    /* the log grows past its first capacity (64 entries) */
    CHECK(rt_sampler_set_logprobs(s, 2) == SB_OK);
    for (int k = 0; k < 200; k++) {
        make_logits(l, &seed);
        CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
        if (k == 150) {
            ref_logprobs(l, NULL, lp);
            check_entry(s, 150, t, lp, 2);
        }
    }
    CHECK_EQ_INT(rt_sampler_n_logprobs(s), 200);
    rt_sampler_free(s);
}

/* a vocabulary of n (not a multiple of the 4- and 16-lane steps): the log against log-softmax in
 * double over every token, with bias (-inf bans among them), ties in the top list, and a drawn
 * token that is not always in it */
static const double *order_lp; /* by_lp_desc's values */
static int by_lp_desc(const void *a, const void *b) {
    const double x = order_lp[*(const int32_t *)a], y = order_lp[*(const int32_t *)b];
    return x > y ? -1 : x < y ? 1 : *(const int32_t *)a - *(const int32_t *)b;
}
static void test_wide_vocab(void) {
    const int n = 10007, top = 20;
    uint64_t seed = 11;
    float *l = malloc(n * sizeof *l), *bias = malloc(n * sizeof *bias);
    double *lp = malloc(n * sizeof *lp);
    int32_t *all = malloc(n * sizeof *all), *ord = malloc(n * sizeof *ord), t;
    for (int i = 0; i < n; i++) all[i] = i, bias[i] = i % 3 ? 0.0f : i % 9 == 0 ? -INFINITY : 1.25f;
    for (int temp = 0; temp < 2; temp++) {
        rt_sampler_params p;
        rt_sampler_defaults(&p);
        p.temp = temp ? 0.8f : 0.0f, p.top_k = 0, p.seed = 9;
        rt_sampler *s = NULL;
        CHECK(rt_sampler_create(&p, n, &s) == SB_OK && s);
        if (!s) break;
        CHECK(rt_sampler_set_logprobs(s, top) == SB_OK && rt_sampler_set_logit_bias(s, all, bias, n) == SB_OK);
        for (int k = 0; k < 6; k++) {
            for (int i = 0; i < n; i++) l[i] = 4.0f * test_rand_normal(&seed);
            for (int i = 0; i < 8; i++) l[n - 1 - 3 * i] = l[1 + 3 * i] = 14.0f; /* ties across the top, in the tail too */
            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < n; i++) mx = fmax(mx, (double)(l[i] + bias[i]));
            for (int i = 0; i < n; i++) sum += exp((double)(l[i] + bias[i]) - mx);
            int finite = 0;
            for (int i = 0; i < n; i++) lp[i] = (double)(l[i] + bias[i]) - mx - log(sum), ord[finite] = i, finite += lp[i] > -INFINITY;
            order_lp = lp;
            qsort(ord, (size_t)finite, sizeof *ord, by_lp_desc);
            CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
            size_t nt = 0;
            const rt_token_logprob *e = rt_sampler_logprob(s, (size_t)k, &nt);
            CHECK(e && nt == (size_t)top);
            if (!e) break;
            CHECKF(e[0].token == t && fabs(e[0].logprob - lp[t]) < 1e-6, "draw %d: chosen %d %.9g vs %.9g", k, t, e[0].logprob, lp[t]);
            for (int j = 0; j < top; j++)
                CHECKF(e[1 + j].token == ord[j] && fabs(e[1 + j].logprob - lp[ord[j]]) < 1e-6, "draw %d top %d: %d %.9g, expected %d %.9g", k, j,
                       e[1 + j].token, e[1 + j].logprob, ord[j], lp[ord[j]]);
        }
        rt_sampler_free(s);
    }
    free(l), free(bias), free(lp), free(all), free(ord);
}

int main(void) {
    test_bias();
    test_logprobs();
    test_wide_vocab();
    return test_summary();
}
