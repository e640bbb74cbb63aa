/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cpu.h — runs a plan on the CPU: walks the planned nodes in order, calling the
 * reference ops (ops/ops_ref.h) and, for quantize/matmul, the CPU kernels; parallel over a pool.
 * Layer 2 (runtime). The caller owns every buffer: the arena (exec_cpu_arena_bytes) and the data
 * of every input slot. Nothing is allocated while running (no malloc on the decode path).
 * Inputs are validated per run (token ids < vocab, 0 <= pos < cache length, out_rows < T) and bad
 * values return SB_ERR_RANGE / SB_ERR_CONTEXT_FULL before anything is written.
 * Thread safety: one run per arena at a time; a plan may be shared by concurrent runs.
 * Non-goals: other devices, asynchronous execution.
 */
#ifndef SB_RUNTIME_EXEC_CPU_H
#define SB_RUNTIME_EXEC_CPU_H

#include "base/threadpool.h"
#include "graph/plan.h"

typedef struct exec_bindings {
    /* data[i] = the buffer of input slot i (p->inputs[i]): tokens/pos/out_rows i32, weights in
     * their type's layout (read-only), kv caches (written by kv_store). A NULL out_rows slot means
     * "the last n rows" (T-n .. T-1). */
    void *const *data;
    int32_t n_data;          /* must equal p->n_inputs */
    void *arena;             /* exec_cpu_arena_bytes(p, threads) bytes, PLAN_ALIGN-aligned */
    uint64_t arena_bytes;
} exec_bindings;

/* The plan target of this CPU: act_type[w] = the activation format cpu_matmul pairs with weight
 * type w (backend/cpu/cpu_kernels.h: cpu_act_type), F32 where the kernels take f32 activations or
 * do not support w (the reference matmul runs then); all fusions on. */
void exec_cpu_target(plan_target *t);

/* Can this CPU build run every node of p? Checks each weight's type against its use (get_rows
 * needs a dequantizer; matmul a CPU kernel or a dequantizer for the reference path; quantize
 * nodes a quantizer). SB_ERR_MODEL_TENSOR_TYPE naming the tensor, its type and the op otherwise.
 * exec_cpu_run assumes a plan that passed this check. */
sb_status exec_cpu_check(const plan *p);

/* Arena bytes a run with n_threads threads needs (plan arena + per-thread scratch). */
uint64_t exec_cpu_arena_bytes(const plan *p, int n_threads);

/* Run the plan. On success out[i] (i < p->n_outputs, may be NULL) points at output i's f32 data
 * inside the arena (valid until the next run on that arena). pool may be NULL (one thread). */
sb_status exec_cpu_run(const plan *p, const exec_bindings *b, tp_pool *pool, const float **out);

#endif
