/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/sampler.h — token sampling from logits, llama.cpp's default chain and defaults:
 * penalties (repeat/presence/frequency over the last penalty_last_n tokens) → top-k → top-p →
 * min-p → temperature → draw with a seeded RNG. temp <= 0 is greedy (argmax after penalties).
 * Layer 2 (runtime). Deterministic: the same seed, logits and history give the same tokens.
 * A NaN or +Inf logit is SB_ERR_NUMERIC; all -inf logits return SB_ERR_RANGE.
 * Two per-request extras (OpenAI's logit_bias and logprobs): a bias added to chosen logits before
 * the chain (-inf bans a token), and a log of each draw's log-probability with the top-k
 * alternatives, taken from log-softmax(logits + bias) in double — the model's distribution with
 * the caller's bias, before penalties, truncation and temperature (vLLM's default "raw" logprobs
 * plus the bias; OpenAI's own docs do not say more).
 * Non-goals: grammars, mirostat, DRY, XTC (later samplers append to the chain).
 */
#ifndef SB_RUNTIME_SAMPLER_H
#define SB_RUNTIME_SAMPLER_H

#include "base/status.h"

#include <stdint.h>

typedef struct rt_sampler_params {
    float temp;             /* 0.8; <= 0 greedy */
    int32_t top_k;          /* 40; <= 0 off */
    float top_p;            /* 0.95; >= 1 off */
    float min_p;            /* 0.05; <= 0 off */
    float repeat_penalty;   /* 1.0 = off */
    float presence_penalty; /* 0 */
    float frequency_penalty;/* 0 */
    int32_t penalty_last_n; /* 64 */
    uint64_t seed;          /* RNG seed */
} rt_sampler_params;

void rt_sampler_defaults(rt_sampler_params *p);

typedef struct rt_sampler rt_sampler;

sb_status rt_sampler_create(const rt_sampler_params *p, int64_t n_vocab, rt_sampler **out);
void rt_sampler_free(rt_sampler *s);
/* Pick a token from logits [n_vocab] (not modified). */
sb_status rt_sampler_sample(rt_sampler *s, const float *logits, int32_t *token);
/* Record a token in the penalty history (prompt tokens and sampled ones). */
void rt_sampler_accept(rt_sampler *s, int32_t token);
/* Clear the history, the logprob log, and re-seed (the bias and the logprob setting stay). */
void rt_sampler_reset(rt_sampler *s);

/* Replace the bias set: logit[tokens[i]] += bias[i] before every later draw; n = 0 clears it.
 * SB_ERR_INVALID_ARG (nothing changed) for a token outside [0, n_vocab), a repeated token, or a
 * bias that is NaN or +Inf (-Inf bans the token). */
sb_status rt_sampler_set_logit_bias(rt_sampler *s, const int32_t *tokens, const float *bias, size_t n);

#define RT_MAX_TOP_LOGPROBS 20
typedef struct rt_token_logprob {
    int32_t token;
    float logprob; /* ln p, <= 0 */
} rt_token_logprob;

/* Log every later draw: its token's log-probability and the top_k most likely tokens (most likely
 * first, ties by lower id; tokens at -inf are never listed). top_k in [0, RT_MAX_TOP_LOGPROBS];
 * -1 stops logging. Clears the log. */
sb_status rt_sampler_set_logprobs(rt_sampler *s, int32_t top_k);
/* Entries in the log (one per successful draw since it was cleared). */
size_t rt_sampler_n_logprobs(const rt_sampler *s);
/* Entry i: [0] the drawn token, [1 .. 1 + *n_top) its alternatives; NULL when i is out of range. */
const rt_token_logprob *rt_sampler_logprob(const rt_sampler *s, size_t i, size_t *n_top);

#endif
