/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_sampler.c — the sampler chain: greedy is argmax, a seed reproduces its
 * tokens and another seed does not, top-k/top-p/min-p only ever return tokens they keep, penalties
 * move the choice, a NaN/+Inf logit fails with SB_ERR_NUMERIC, all -inf with SB_ERR_RANGE, and the draw
 * frequencies follow softmax(logits / temp) (chi-square-style bound); top-k's one-pass selection
 * draws exactly what the full sort draws over the k best (ties by id), greedy with and without
 * bias or penalties is the first largest; the greedy draw's four-lane scan equals a plain loop
 * (first largest, first NaN / +Inf, all -inf) at every vocabulary size 1..70 and 151,936, on rows
 * with ties, signed zeros, -inf runs and bad values at random places; the top-k selection's
 * four-value skip draws what a plain top-k (the row with all but its k best set to -inf, drawn with
 * top-k off) draws, at vocabularies of 1,001 and 151,936, and names the same first NaN / +Inf.
 */
#include "runtime/sampler.h"
#include "test.h"

#define V 64

static void make_logits(float *l, uint64_t *seed) {
    for (int i = 0; i < V; i++) l[i] = 3.0f * test_rand_normal(seed);
}

static int argmax(const float *l) {
    int b = 0;
    for (int i = 1; i < V; i++) b = l[i] > l[b] ? i : b;
    return b;
}

/* the plain loop the greedy scan must equal: the token, or -1 - (first bad index), or -(n + 1) when
 * every logit is -inf */
static int64_t plain_greedy(const float *l, int64_t n) {
    int64_t best = -1;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (l[i] != l[i] || l[i] == INFINITY) return -1 - i;
        if (l[i] > mx) mx = l[i], best = i;
    }
    return best < 0 ? -(n + 1) : best;
}

/* rows of size n with few distinct values (ties), +0 / -0, -inf, and sometimes a NaN / +Inf */
static void test_greedy_scan(void) {
    uint64_t seed = 7;
    const int64_t big = 151936;
    float *l = malloc((size_t)big * sizeof *l);
    CHECK(l != NULL);
    for (int64_t n = 1; l && n <= 71; n++) {
        const int64_t len = n == 71 ? big : n;
        rt_sampler_params p;
        rt_sampler_defaults(&p);
        p.temp = 0;
        rt_sampler *s = NULL;
        CHECK(rt_sampler_create(&p, len, &s) == SB_OK);
        for (int trial = 0; s && trial < 40; trial++) {
            for (int64_t i = 0; i < len; i++) {
                const uint64_t r = test_rand_u64(&seed) % 16;
                l[i] = r < 3 ? -INFINITY : r == 3 ? 0.0f : r == 4 ? -0.0f : (float)(r % 5) - 2.0f;
            }
            if (trial % 4 == 1) l[test_rand_u64(&seed) % len] = NAN;
            if (trial % 4 == 2) l[test_rand_u64(&seed) % len] = INFINITY;
            if (trial % 8 == 3)
                for (int64_t i = 0; i < len; i++) l[i] = -INFINITY;
            const int64_t want = plain_greedy(l, len);
            int32_t t = -7;
            const sb_status st = rt_sampler_sample(s, l, &t);
            if (want >= 0) CHECK(st == SB_OK && t == want);
            else if (want == -(len + 1)) CHECK(st == SB_ERR_RANGE && t == -7);
            else {
                char at[40];
                snprintf(at, sizeof at, "logit %lld ", (long long)(-1 - want));
                CHECK(st == SB_ERR_NUMERIC && t == -7 && strstr(sb_last_error(), at));
            }
        }
        rt_sampler_free(s);
    }
    free(l);
}

/* The defaults with the given temperature and top-k / top-p / min-p filters. */
static rt_sampler_params filters(float temp, int32_t top_k, float top_p, float min_p) {
    rt_sampler_params p;
    rt_sampler_defaults(&p);
    p.temp = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

/* the k best of l (logit descending, then id ascending) kept, the rest -inf: what top-k keeps */
static void keep_best(float *dst, const float *l, int k) {
    int idx[V];
    for (int i = 0; i < V; i++) idx[i] = i;
    for (int i = 0; i < V; i++) /* selection sort by (logit desc, id asc) */
        for (int j = i + 1; j < V; j++)
            if (l[idx[j]] > l[idx[i]] || (l[idx[j]] == l[idx[i]] && idx[j] < idx[i])) { int x = idx[i]; idx[i] = idx[j]; idx[j] = x; }
    for (int i = 0; i < V; i++) dst[i] = -INFINITY;
    for (int i = 0; i < k && i < V; i++) dst[idx[i]] = l[idx[i]];
}

/* top-k through the sampler's selection against the full sort (top_k 0) of logits where only the
 * k best are left: the same seed must draw the same tokens, including at ties on the boundary */
static void test_topk_selection(void) {
    const int ks[] = {1, 2, 5, 40, V - 1, V, V + 10};
    uint64_t seed = 9;
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
        rt_sampler_params p = filters(1.5f, ks[c], 0.9f, 0.01f), q = p;
        q.top_k = 0;
        rt_sampler *s, *r;
        CHECK(rt_sampler_create(&p, V, &s) == SB_OK && rt_sampler_create(&q, V, &r) == SB_OK);
        int same = 0;
        for (int k = 0; k < 200; k++) {
            float l[V], m[V];
            make_logits(l, &seed);
            for (int i = 0; i < V; i += 3) l[i] = roundf(l[i]); /* many equal logits */
            if (k % 7 == 0) l[k % V] = -INFINITY;
            keep_best(m, l, ks[c]);
            int32_t a = -1, b = -2;
            CHECK(rt_sampler_sample(s, l, &a) == SB_OK && rt_sampler_sample(r, m, &b) == SB_OK);
            same += a == b;
        }
        CHECKF(same == 200, "top_k %d: %d of 200 draws equal the full sort's", ks[c], same);
        rt_sampler_free(s);
        rt_sampler_free(r);
    }
}

/* the row with everything but its k best (logit desc, id asc) set to -inf, for any n: a threshold
 * value and how many of it to keep, by counting */
static void keep_best_n(float *dst, const float *l, int64_t n, int k) {
    float *v = malloc((size_t)n * sizeof *v);
    CHECK(v != NULL);
    if (!v) return;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (l[i] != -INFINITY) v[m++] = l[i];
    for (int64_t i = 0; i < n; i++) dst[i] = -INFINITY;
    float thr = -INFINITY;
    for (int r = 0; r < k && r < m; r++) { /* the k-th largest by repeated maxima (k small) */
        float best = -INFINITY;
        int64_t at = -1;
        for (int64_t j = 0; j < m; j++)
            if (v[j] > best || at < 0) best = v[j], at = j;
        thr = best;
        v[at] = -INFINITY;
    }
    int64_t above = 0;
    for (int64_t i = 0; i < n; i++) above += l[i] > thr;
    int64_t ties = k - above; /* of the values equal to thr, the lowest ids */
    for (int64_t i = 0; i < n; i++)
        if (l[i] > thr || (l[i] == thr && l[i] != -INFINITY && ties-- > 0)) dst[i] = l[i];
    free(v);
}

static void test_topk_large(void) {
    const int64_t ns[] = {1001, 151936};
    const int ks[] = {1, 40, 100};
    uint64_t seed = 11;
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 3; b++) {
            const int64_t n = ns[a];
            float *l = malloc((size_t)n * sizeof *l), *m = malloc((size_t)n * sizeof *m);
            rt_sampler_params p = filters(0.8f, ks[b], 0.95f, 0.05f), q = p;
            q.top_k = 0;
            rt_sampler *s = NULL, *r = NULL;
            CHECK(l && m && rt_sampler_create(&p, n, &s) == SB_OK && rt_sampler_create(&q, n, &r) == SB_OK);
            for (int t = 0; l && m && s && r && t < 12; t++) {
                for (int64_t i = 0; i < n; i++) l[i] = roundf(8.0f * test_rand_normal(&seed)) / 4.0f; /* many ties */
                if (t % 4 == 1) l[test_rand_u64(&seed) % n] = t % 8 == 1 ? NAN : INFINITY;
                int32_t x = -1, y = -2;
                const sb_status st = rt_sampler_sample(s, l, &x);
                int64_t bad = -1;
                for (int64_t i = 0; i < n && bad < 0; i++)
                    if (l[i] != l[i] || l[i] == INFINITY) bad = i;
                if (bad >= 0) {
                    char at[40];
                    snprintf(at, sizeof at, "logit %lld ", (long long)bad);
                    CHECK(st == SB_ERR_NUMERIC && x == -1 && strstr(sb_last_error(), at));
                    continue;
                }
                keep_best_n(m, l, n, ks[b]);
                CHECK(st == SB_OK && rt_sampler_sample(r, m, &y) == SB_OK);
                CHECKF(x == y, "n %lld top_k %d: %d vs the plain top-k's %d", (long long)n, ks[b], x, y);
            }
            rt_sampler_free(s);
            rt_sampler_free(r);
            free(l);
            free(m);
        }
}

/* top-k off sorts the whole vocabulary (a radix sort: candidates arrive in id order) and must give
 * by_logit_desc's order — logit descending, ties by id, +0 and -0 equal — exactly as top-k = n
 * does through its heap and qsort: the same draws from the same seed */
static void test_topk_off_order(void) {
    const int64_t n = 5003;
    uint64_t seed = 5;
    float *l = malloc((size_t)n * sizeof *l);
    rt_sampler_params p = filters(1.5f, 0, 1.0f, 0.0f), q = p;
    q.top_k = (int32_t)n;
    rt_sampler *s = NULL, *r = NULL;
    CHECK(l && rt_sampler_create(&p, n, &s) == SB_OK && rt_sampler_create(&q, n, &r) == SB_OK);
    int differ = 0;
    for (int t = 0; l && s && r && t < 300; t++) {
        if (t % 50 == 0)
            for (int64_t i = 0; i < n; i++) { /* a few values, many of each; signed zeros; bans */
                const int64_t v = (int64_t)(test_rand_u64(&seed) % 9) - 4;
                l[i] = v == 0 ? (i & 1 ? -0.0f : 0.0f) : v == 4 ? -INFINITY : (float)v * 0.25f;
            }
        int32_t x = -1, y = -2;
        CHECK(rt_sampler_sample(s, l, &x) == SB_OK && rt_sampler_sample(r, l, &y) == SB_OK);
        differ += x != y;
    }
    CHECKF(differ == 0, "top-k off and top-k n drew differently %d times of 300", differ);
    rt_sampler_free(s);
    rt_sampler_free(r);
    free(l);
}

int main(void) {
    test_topk_selection();
    test_topk_off_order();
    test_greedy_scan();
    test_topk_large();
    uint64_t seed = 42;
    float l[V];
    rt_sampler *s;
    rt_sampler_params p;

    /* greedy */
    rt_sampler_defaults(&p);
    p.temp = 0;
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    for (int k = 0; k < 50; k++) {
        make_logits(l, &seed);
        int32_t t;
        CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == argmax(l));
    }
    /* a NaN or +Inf anywhere is a broken forward pass: SB_ERR_NUMERIC naming it, nothing drawn; -inf
     * logits are excluded, and all -inf is SB_ERR_RANGE */
    for (int i = 0; i < V; i++) l[i] = NAN;
    l[5] = -1;
    int32_t t = -1;
    CHECK(rt_sampler_sample(s, l, &t) == SB_ERR_NUMERIC && t == -1 && strstr(sb_last_error(), "logit 0 ") &&
          strstr(sb_last_error(), "NaN"));
    for (int i = 0; i < V; i++) l[i] = -INFINITY;
    l[7] = INFINITY;
    CHECK(rt_sampler_sample(s, l, &t) == SB_ERR_NUMERIC && t == -1 && strstr(sb_last_error(), "logit 7 ") &&
          strstr(sb_last_error(), "+Inf"));
    l[7] = -INFINITY;
    l[5] = -1;
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 5);
    l[5] = -INFINITY;
    CHECK(rt_sampler_sample(s, l, &t) == SB_ERR_RANGE);
    for (int i = 0; i < V; i++) l[i] = (float)(i % 5); /* ties: the first largest */
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 4);
    const int32_t bt[1] = {4};
    const float bv[1] = {-0.5f};
    CHECK(rt_sampler_set_logit_bias(s, bt, bv, 1) == SB_OK); /* the biased path: 4 now trails 9 */
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 9);
    rt_sampler_free(s);

    /* same seed, same sequence; different seed, different sequence */
    int32_t a[40], b[40], c[40];
    p = filters(1.0f, 0, 1.0f, 0);
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 999 : 7;
        CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
        uint64_t ls = 1;
        for (int k = 0; k < 40; k++) {
            make_logits(l, &ls);
            for (int i = 0; i < V; i++) l[i] *= 0.2f; /* flat: many candidates */
            int32_t *dst = run == 0 ? a : run == 1 ? b : c;
            CHECK(rt_sampler_sample(s, l, &dst[k]) == SB_OK);
        }
        rt_sampler_free(s);
    }
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(memcmp(a, c, sizeof a) != 0);

    /* top-k = 3: only the 3 best */
    p = filters(5.0f, 3, 1.0f, 0);
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    make_logits(l, &seed);
    float sorted[V];
    memcpy(sorted, l, sizeof l);
    for (int i = 0; i < V; i++)
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) { float x = sorted[i]; sorted[i] = sorted[j]; sorted[j] = x; }
    for (int k = 0; k < 300; k++) {
        CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
        CHECK(l[t] >= sorted[2]);
    }
    rt_sampler_free(s);

    /* min-p = 0.5: only tokens with p >= 0.5 * p_max (at temp 1) */
    p = filters(1.0f, 0, 1.0f, 0.5f);
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    for (int k = 0; k < 300; k++) {
        CHECK(rt_sampler_sample(s, l, &t) == SB_OK);
        CHECK(expf(l[t] - sorted[0]) >= 0.5f - 1e-6f);
    }
    rt_sampler_free(s);

    /* frequencies follow softmax at temp 1 (no truncation): 4 tokens, 40000 draws */
    float l4[V];
    for (int i = 0; i < V; i++) l4[i] = -INFINITY;
    l4[0] = 0, l4[1] = 1, l4[2] = 2, l4[3] = -1;
    p = filters(1.0f, 0, 1.0f, 0);
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    int cnt[4] = {0};
    for (int k = 0; k < 40000; k++) {
        CHECK(rt_sampler_sample(s, l4, &t) == SB_OK && t >= 0 && t < 4);
        if (t >= 0 && t < 4) cnt[t]++;
    }
    double z = 1 + expf(1) + expf(2) + expf(-1);
    double want[4] = {1 / z, expf(1) / z, expf(2) / z, expf(-1) / z};
    for (int i = 0; i < 4; i++) CHECKF(fabs(cnt[i] / 40000.0 - want[i]) < 0.01, "token %d: %.4f vs %.4f", i, cnt[i] / 40000.0, want[i]);
    rt_sampler_free(s);

    /* repeat penalty: the repeated best token loses to the runner-up */
    rt_sampler_defaults(&p);
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    CHECK(rt_sampler_create(&p, V, &s) == SB_OK);
    for (int i = 0; i < V; i++) l[i] = 0;
    l[10] = 3.0f, l[11] = 2.0f;
    rt_sampler_accept(s, 10);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 11);
    rt_sampler_reset(s);
    CHECK(rt_sampler_sample(s, l, &t) == SB_OK && t == 10);
    rt_sampler_free(s);

    /* bad parameters are refused */
    rt_sampler_defaults(&p);
    p.temp = NAN;
    CHECK(rt_sampler_create(&p, V, &s) == SB_ERR_INVALID_ARG);
    rt_sampler_defaults(&p);
    p.repeat_penalty = 0;
    CHECK(rt_sampler_create(&p, V, &s) == SB_ERR_INVALID_ARG);
    CHECK(rt_sampler_create(NULL, 0, &s) == SB_ERR_INVALID_ARG);
    return test_summary();
}
