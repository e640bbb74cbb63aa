/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_sampler_extras.c — the C ABI of the logit bias and the logprob log
 * (sb_sampler_set_logit_bias, sb_sampler_set_logprobs, sb_sampler_n_logprobs,
 * sb_sampler_get_logprob): NULL and out-of-range arguments are SB_ERR_INVALID_ARG / SB_ERR_RANGE
 * with outputs untouched; results land only in the slots they claim (the rest of a poisoned output
 * array stays poisoned); values equal log-softmax(logits + bias) computed here in double.
 */
#include "sonicboom.h"
#include "test.h"

#define V 32

int main(void) {
    sb_sampler_params p;
    sb_sampler_default_params(&p);
    p.temp = 0;
    sb_sampler *s = NULL;
    CHECK(sb_sampler_create(&p, V, &s) == SB_OK);
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)(i % 7) - 3.0f;
    int32_t tok = -1, bias_tok[2] = {2, 6};
    float bias[2] = {4.0f, -INFINITY};

    /* argument checks */
    CHECK(sb_sampler_set_logit_bias(NULL, bias_tok, bias, 1) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_set_logit_bias(s, NULL, bias, 1) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_set_logit_bias(s, NULL, NULL, 0) == SB_OK);
    CHECK(sb_sampler_set_logprobs(NULL, 1) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_set_logprobs(s, SB_MAX_TOP_LOGPROBS + 1) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_n_logprobs(NULL) == 0 && sb_sampler_n_logprobs(s) == 0);

    CHECK(sb_sampler_set_logit_bias(s, bias_tok, bias, 2) == SB_OK);
    CHECK(sb_sampler_set_logprobs(s, 4) == SB_OK);
    CHECK(sb_sampler_sample(s, l, &tok) == SB_OK && tok == 2); /* 2: -1 + 4 = 3 ties 13, 20, 27 (6 is banned): lowest id */
    CHECK_EQ_INT(sb_sampler_n_logprobs(s), 1);

    /* reference */
    double x[V], mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) {
        x[i] = i == 2 ? (double)(l[i] + 4.0f) : i == 6 ? -INFINITY : l[i];
        if (x[i] > mx) mx = x[i];
    }
    for (int i = 0; i < V; i++) sum += exp(x[i] - mx);
    double lse = mx + log(sum);

    sb_token_logprob chosen = {-7, 7.0f}, top[8];
    size_t n_top = 99;
    for (int i = 0; i < 8; i++) top[i] = (sb_token_logprob){-7, 7.0f}; /* poison */
    CHECK(sb_sampler_get_logprob(s, 1, &chosen, top, 8, &n_top) == SB_ERR_RANGE);
    CHECK(chosen.token == -7 && n_top == 99 && top[0].token == -7);
    CHECK(sb_sampler_get_logprob(s, 0, NULL, top, 8, &n_top) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_get_logprob(s, 0, &chosen, NULL, 8, &n_top) == SB_ERR_INVALID_ARG);
    CHECK(sb_sampler_get_logprob(s, 0, &chosen, top, 2, &n_top) == SB_OK);
    CHECK(chosen.token == 2 && fabs(chosen.logprob - (x[2] - lse)) < 1e-6);
    CHECK_EQ_INT(n_top, 2); /* capped by cap */
    CHECK(top[0].token == 2 && top[1].token == 13); /* logit 3: 2, 13, 20, 27 (lower id first) */
    CHECK(fabs(top[1].logprob - (x[13] - lse)) < 1e-6);
    CHECK(top[2].token == -7 && top[2].logprob == 7.0f); /* past n_top: untouched */
    CHECK(sb_sampler_get_logprob(s, 0, &chosen, top, 8, &n_top) == SB_OK);
    CHECK_EQ_INT(n_top, 4);
    CHECK(top[2].token == 20 && top[3].token == 27 && top[4].token == -7);
    CHECK(sb_sampler_get_logprob(s, 0, &chosen, NULL, 0, &n_top) == SB_OK && n_top == 0);

    /* a NaN logit: SB_ERR_NUMERIC, nothing logged, token untouched */
    l[9] = NAN;
    tok = -5;
    CHECK(sb_sampler_sample(s, l, &tok) == SB_ERR_NUMERIC && tok == -5);
    CHECK_EQ_INT(sb_sampler_n_logprobs(s), 1);
    /* reset clears the log */
    CHECK(sb_sampler_reset(s) == SB_OK && sb_sampler_n_logprobs(s) == 0);
    sb_sampler_free(s);
    return test_summary();
}
