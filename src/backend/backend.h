/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/backend.h — the one interface a session drives an executor through: what the planner may
 * ask of it (target), readying a plan (prepare: can every node run here, and the per-plan state),
 * running it, forgetting it, statistics. The CPU and CUDA executors implement it
 * (runtime/exec_cpu.h, runtime/exec_cuda.h); runtime/backends.h lists the kinds this build has, so a
 * build without CUDA simply has no "cuda" kind. Backends know nothing of models: a plan is a graph
 * with a memory plan and named inputs.
 * Layer 0 (backend): base only; plans and targets are the graph layer's (graph/plan.h), seen here
 * as incomplete types.
 * Contract: prepare before the first run of a plan (the session does it when it builds one); run
 * validates its inputs on the host before anything is written (SB_ERR_RANGE, SB_ERR_CONTEXT_FULL),
 * and copies output k's f32 values into out[k] (out or out[k] may be NULL: not wanted); forget
 * before the plan is freed. One call at a time per backend object.
 */
#ifndef SB_BACKEND_BACKEND_H
#define SB_BACKEND_BACKEND_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

struct plan;
struct plan_target;

typedef struct backend backend;

typedef struct backend_stats {
    int64_t runs, graph_captures, graph_replays;
    int32_t kernels_last_run; /* launches (CUDA) of the last run; 0 on the CPU */
    uint64_t device_bytes;    /* memory the backend holds beyond the session's (weights, KV copies, arena) */
} backend_stats;

typedef struct backend_ops {
    const char *name; /* "cpu", "cuda" */
    void (*target)(const backend *be, struct plan_target *t);
    sb_status (*prepare)(backend *be, const struct plan *p);
    /* make the backend's settings the calling thread's while a plan is built and prepared for it (the
     * target's callbacks and prepare read them: CUDA's cu_config); bind returns what unbind restores.
     * NULL ops: nothing to bind (backend_bind / backend_unbind below) */
    const void *(*bind)(backend *be);
    void (*unbind)(backend *be, const void *prev);
    sb_status (*run)(backend *be, const struct plan *p, void *const *data, int32_t n_data, float *const *out);
    void (*forget)(backend *be, const struct plan *p);
    /* ready a prepared plan by one run on data (as run: inputs a run accepts, outputs into out) so
     * that its next run costs what every later one does — CUDA: its device state, generated kernels
     * and CUDA Graph, which run would make on its first or second run; NULL op: prepare readied it
     * all (CPU), nothing is run */
    sb_status (*warm)(backend *be, const struct plan *p, void *const *data, int32_t n_data, float *const *out);
    backend_stats (*stats)(const backend *be);
    /* whether output k of the last successful run is finite as the backend checked it while writing
     * it: 1 all finite, 0 not, -1 not checked (the caller scans it if it must know); NULL op: -1 */
    int (*output_finite)(const backend *be, int32_t k);
    /* memory the backend's outputs land in fastest (page-locked on CUDA); NULL ops: plain malloc */
    sb_status (*host_alloc)(backend *be, size_t bytes, void **out);
    void (*host_free)(backend *be, void *p);
    /* copy bytes within a buffer plans bind as a KV input (its host pointer; byte offsets, ranges
     * apart), ordered before the next run: in the backend's own copy where it keeps one (CUDA);
     * NULL ops: the host memory is the cache (the caller copies it) */
    sb_status (*kv_copy)(backend *be, void *buf, uint64_t dst, uint64_t src, uint64_t bytes);
    /* the backend's own copy of a buffer plans bind as a weight or KV input (by its host pointer;
     * bytes: its size), for callers whose host buffers outlive plans (the public tensor API):
     * download copies it into host (a run wrote it there); refresh replaces it with host's bytes
     * (the host was written; ordered before the next run); drop forgets it (host is about to be
     * freed, and a later buffer at that address must not find it). Each is a no-op where the
     * backend holds no copy of host; NULL ops: plans run on the host memory itself (CPU) */
    sb_status (*download)(backend *be, void *host, uint64_t bytes);
    sb_status (*refresh)(backend *be, const void *host, uint64_t bytes);
    void (*drop)(backend *be, const void *host);
    void (*free)(backend *be);
} backend_ops;

/* Every backend object starts with this header. */
struct backend {
    const backend_ops *ops;
};

/* backend_ops.bind / unbind where the backend has them: around target, plan_build and prepare */
static inline const void *backend_bind(backend *be) { return be->ops->bind ? be->ops->bind(be) : NULL; }
static inline void backend_unbind(backend *be, const void *prev) {
    if (be->ops->unbind) be->ops->unbind(be, prev);
}

/* backend_ops.output_finite where the backend has it, else -1 (not checked) */
static inline int backend_output_finite(const backend *be, int32_t k) { return be->ops->output_finite ? be->ops->output_finite(be, k) : -1; }

/* What a session asks of a backend kind when it creates one. */
typedef struct backend_params {
    int n_threads;      /* CPU: the thread pool's size */
    int64_t max_tokens; /* tokens a plan run may hold at most (the largest prefill chunk) */
    int graphs;         /* CUDA: 0 = the backend's default, 1 on, -1 off (CUDA Graph capture) */
    int codegen;        /* CUDA: 0 = the default, 1 on, -1 off (generated kernels) */
    int act_type;       /* CUDA: 0 = the default, else the sb_type of K-quant weights' activations (Q8_K, Q8_1) */
} backend_params;

typedef struct backend_kind {
    const char *name;
    /* usable on this machine? else why (cap bytes) */
    int (*available)(char *why, size_t cap);
    /* free and total device memory (SB_ERR_UNSUPPORTED where it has none of its own) */
    sb_status (*memory)(uint64_t *free_b, uint64_t *total_b);
    /* bytes a weight of `type` taking `bytes` in the file takes in its memory (NULL: the same) */
    uint64_t (*stored_bytes)(int type, uint64_t bytes);
    sb_status (*create)(const backend_params *p, backend **out);
} backend_kind;

#endif
