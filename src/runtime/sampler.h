/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/sampler.h — token sampling from logits, llama.cpp's default chain and defaults:
 * penalties (repeat/presence/frequency over the last penalty_last_n tokens) → top-k → top-p →
 * min-p → temperature → draw with a seeded RNG. temp <= 0 is greedy (argmax after penalties).
 * Layer 2 (runtime). Deterministic: the same seed, logits and history give the same tokens.
 * NaN logits are treated as -inf (never sampled); all-NaN/-inf logits return SB_ERR_RANGE.
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
void rt_sampler_reset(rt_sampler *s);

#endif
