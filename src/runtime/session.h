/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/session.h — one inference stream over a shared, read-only model: the KV cache, the plans
 * (one per shape: decode T=1, prefill per batch size), the arena, prefix reuse, logits.
 * Layer 2 (runtime).
 * Invariants: positions 0..n_cached-1 of the KV cache hold the K/V of tokens cached[0..n_cached)
 * — except that a session of a sliding-window model keeps those layers in rings of window +
 * n_batch rows (the last positions only; swa_full keeps them whole), so a prefix cut deeper than
 * the ring still holds is recomputed from the tokens; evaluation appends at n_cached; nothing is
 * allocated on the decode path once its plan exists.
 * Thread safety: a session is used by one thread at a time; any number of sessions may share a
 * model concurrently.
 * Non-goals: several sequences per session, paged KV (runtime/batch), context shifting (overflow is
 * an error).
 */
#ifndef SB_RUNTIME_SESSION_H
#define SB_RUNTIME_SESSION_H

#include "runtime/model.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct rt_session_params {
    int64_t n_ctx;      /* KV length; 0 = min(the model's context, 4096) */
    int kv_type;        /* SB_TYPE_F32 or SB_TYPE_F16 */
    int n_threads;      /* 0 = all cores */
    int64_t n_batch;    /* largest prefill chunk; 0 = 512 */
    int device;         /* 0 = CPU, 1 = CUDA (the "cuda" backend kind: plans for the CUDA target), 2 = auto: CUDA when a
                         * device is usable, holds the weights and KV cache, and runs every op and weight type of
                         * the model (the decode plan is built and checked at creation), else the CPU — the reason
                         * logged at SB_LOG_INFO; rt_session_device says which. CUDA (1): SB_ERR_OOM at creation
                         * when the weights and KV cache exceed the device's free memory (bytes named) */
    int cuda_graph;     /* CUDA only: 0 = default (on unless SB_TUNE=graphs=0), 1 = on, -1 = off */
    int codegen;        /* CUDA only: 0 = default (on unless SB_TUNE=codegen=0), 1 = on, -1 = off (hand-written kernels) */
    int act_type;       /* CUDA only: K-quant activations, 0 = default (q8_K), SB_TYPE_Q8_K or SB_TYPE_Q8_1 */
    int allow_ctx_extend; /* 1: n_ctx may exceed the model's trained context (a SB_LOG_WARN says so); 0: such an
                           * n_ctx is SB_ERR_INVALID_ARG naming both lengths */
    int swa_full;       /* 1: sliding-window layers keep all n_ctx positions; 0: the session (CPU or CUDA) keeps them
                         * in rings of window + n_batch rows */
} rt_session_params;

typedef struct rt_session_stats {
    int64_t n_prefill_tokens, n_decode_tokens, n_reused_tokens;
    double prefill_seconds, decode_seconds;
    int64_t n_plans_built;
} rt_session_stats;

typedef struct rt_session rt_session;

sb_status rt_session_create(const rt_model *m, const rt_session_params *p, rt_session **out);
void rt_session_free(rt_session *s);

/* Evaluate n tokens at positions n_cached..n_cached+n-1 (in chunks of n_batch). With all_logits,
 * out (n × n_vocab floats, may be NULL) receives every position's logits; otherwise the session
 * keeps the last position's logits (rt_session_logits). SB_ERR_CONTEXT_FULL (numbers in the text)
 * when the cache would overflow, SB_ERR_RANGE for a token id outside the vocabulary; in both cases
 * nothing is evaluated. SB_ERR_NUMERIC when a logit the pass computed is NaN or infinite (the
 * position and token are named; that chunk is not added to the cache). */
sb_status rt_session_eval(rt_session *s, const int32_t *tokens, int64_t n, bool all_logits, float *out);

/* Prefill with prefix reuse: keep the longest common prefix of the cached tokens and `tokens`,
 * drop the rest of the cache, evaluate only the new suffix (at least the last token, so the
 * logits are fresh). *n_reused (may be NULL) receives the tokens taken from the cache. */
sb_status rt_session_prefill(rt_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused);

/* Drop cached positions >= n (n <= n_cached; larger n changes nothing). When a sliding-window ring
 * no longer holds the window before n, positions [0, n) are evaluated again from the cached tokens
 * (errors as rt_session_eval; the cache is then empty). */
sb_status rt_session_truncate(rt_session *s, int64_t n);
/* Bytes of KV cache the session holds (host or device). */
uint64_t rt_session_kv_bytes(const rt_session *s);

/* The last evaluated position's logits (n_vocab floats), or NULL before any evaluation. */
const float *rt_session_logits(const rt_session *s);
int64_t rt_session_n_cached(const rt_session *s);
int64_t rt_session_n_ctx(const rt_session *s);
const int32_t *rt_session_cached_tokens(const rt_session *s);
const rt_model *rt_session_model(const rt_session *s);
rt_session_stats rt_session_get_stats(const rt_session *s);
void rt_session_reset_stats(rt_session *s);
int rt_session_threads(const rt_session *s);
/* Where the session runs: 0 = CPU, 1 = CUDA (device auto resolved at creation). */
int rt_session_device(const rt_session *s);
/* The session's backend object (backend/backend.h; runtime/exec_cuda.h backend_cuda_exec gives a
 * CUDA one's executor context). */
struct backend *rt_session_backend(const rt_session *s);

#endif
