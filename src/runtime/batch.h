/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/batch.h — the batched engine: many sequences of one model over one paged KV pool
 * (runtime/kv_pool.h), evaluated together. A step takes tokens of any open sequences (each at its
 * sequence's next position) and runs them as one forward pass of T tokens, so B decoding
 * sequences read the weights once (one T = B matmul), not B times.
 * Layer 2 (runtime). Plans: the dense decoder graph (rt_build_decoder) in its paged form, built
 * per (T, n_out) class where T is the step's token count rounded up to a power of two (at most
 * n_batch) and n_out its logit rows likewise; padding tokens write to the pool's scratch block and
 * their logits are dropped. Classes readied by rt_engine_warmup keep their plans for the engine's
 * life; RT_ENGINE_PLANS more are kept for other classes (least recently used replaced).
 * Every step is all-or-nothing: a failure (bad sequence or token, context or pool exhausted,
 * NaN logits) leaves every sequence and the cache as they were (evicted cache blocks aside).
 * Thread safety: an engine is used by one thread at a time; several engines may share a model.
 * On CUDA the pool's buffers have device copies (uploaded when first bound); copy-on-write copies
 * blocks there (kv_pool_set_copy), and each plan's slots and block table are staged per run.
 * Non-goals (now): sliding-window rings (a windowed layer keeps every position's K/V in the pool),
 * sampling (the caller samples each row).
 */
#ifndef SB_RUNTIME_BATCH_H
#define SB_RUNTIME_BATCH_H

#include "runtime/kv_pool.h"
#include "runtime/model.h"

#include <stdbool.h>
#include <stdint.h>

#define RT_ENGINE_PLANS 16

typedef struct rt_engine_params {
    int64_t n_blocks;   /* 0 = room for every sequence at n_ctx: n_seq_max * ceil(n_ctx / block_size) */
    int32_t block_size; /* 0 = 16 */
    int32_t n_seq_max;  /* 0 = 4 */
    int64_t n_ctx;      /* longest sequence; 0 = min(the model's context, 4096); above it: SB_ERR_INVALID_ARG */
    int64_t n_batch;    /* most tokens a step; 0 = 512 */
    int kv_type;        /* SB_TYPE_F32 or SB_TYPE_F16 */
    int n_threads;      /* 0 = all cores */
    int device;         /* 0 = CPU, 1 = CUDA, 2 = auto (CUDA where a device is usable and runs the model, else the CPU) */
} rt_engine_params;

typedef struct rt_batch_item {
    int32_t seq;
    int32_t token;
    bool logits;        /* this token's logits are wanted */
} rt_batch_item;

typedef struct rt_engine_stats {
    kv_pool_stats pool;
    int64_t n_steps, n_tokens, n_plans_built;
    int64_t n_plans_warm;     /* classes rt_engine_warmup readied (their plans stay) */
    int64_t n_graph_captures; /* the backend's (CUDA Graphs captured; 0 on the CPU) */
    double seconds;     /* inside rt_engine_step */
} rt_engine_stats;

typedef struct rt_engine rt_engine;

/* Errors: SB_ERR_INVALID_ARG (params named), SB_ERR_OOM (bytes), SB_ERR_UNSUPPORTED (an
 * architecture or device the paged graph cannot run; the decode plan is built here to find out). */
sb_status rt_engine_create(const rt_model *m, const rt_engine_params *p, rt_engine **out);
void rt_engine_free(rt_engine *e);

/* Evaluate items[0, n) in one pass (n <= n_batch): each token goes to its sequence's next position,
 * in item order. logits (NULL: not copied; rt_engine_logits has them) receives one n_vocab row per
 * item with logits set, in item order. Errors (nothing applied): SB_ERR_INVALID_ARG (n, a sequence not
 * open), SB_ERR_RANGE (a token outside the vocabulary), SB_ERR_CONTEXT_FULL (a sequence past n_ctx,
 * or the pool without enough free or evictable blocks: the numbers named), SB_ERR_NUMERIC (a NaN or
 * infinite logit: item and sequence named). */
sb_status rt_engine_step(rt_engine *e, const rt_batch_item *items, int64_t n, float *logits);

/* Ready every class a step of at most max_tokens items (1..n_batch) with at most max_rows logit
 * rows (1..max_tokens) runs on: T each value bucket(n, n_batch) takes for n in [1, max_tokens],
 * n_out each value bucket(r, T) takes for r in [1, min(max_rows, T)] (a step wanting no logits
 * runs on n_out 1). Each class's plan is built (unless it is) and kept for the engine's life; where
 * the backend has a warm op (CUDA) each is run on padding only (writing the pool's scratch block,
 * no sequence), twice over all classes, so that graphs dropped when a later class grew the device
 * arena are captured again. Afterwards a step of such a class builds no plan and captures no graph.
 * Sequences and the cache are untouched. Errors: SB_ERR_INVALID_ARG (a limit named), SB_ERR_OOM,
 * the backend's (the classes readied so far stay). */
sb_status rt_engine_warmup(rt_engine *e, int64_t max_tokens, int64_t max_rows);

kv_pool *rt_engine_pool(rt_engine *e);
const rt_model *rt_engine_model(const rt_engine *e);
rt_engine_stats rt_engine_get_stats(const rt_engine *e);
int rt_engine_device(const rt_engine *e); /* 0 = CPU, 1 = CUDA (after auto's choice) */
struct backend *rt_engine_backend(const rt_engine *e); /* the executor it runs on (tests) */
/* The last successful step's logit rows (n_rows of n_vocab, item order), valid until the next
 * step; NULL (*n_rows 0) when it wanted none or failed. */
const float *rt_engine_logits(const rt_engine *e, int64_t *n_rows);
int64_t rt_engine_n_batch(const rt_engine *e);

#endif
