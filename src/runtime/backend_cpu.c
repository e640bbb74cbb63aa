/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/backend_cpu.c — the CPU executor (exec_cpu.h) behind the backend interface: it owns the
 * thread pool and the arena, which grows to the largest prepared plan's need (prepare allocates, a
 * run never does).
 * Layer 2 (runtime).
 */
#include "runtime/backends.h"
#include "runtime/exec_cpu.h"
#include "graph/plan.h"

#include <stdlib.h>
#include <string.h>

#define CPU_MAX_OUT 16 /* plan outputs a run returns at most (decoder plans have one or two) */

typedef struct cpu_backend {
    backend base;
    tp_pool *pool;
    void *arena;
    uint64_t arena_bytes;
    int64_t runs;
} cpu_backend;

static void cpu_target(const backend *be, plan_target *t) {
    (void)be;
    exec_cpu_target(t);
}

static sb_status cpu_prepare(backend *be, const plan *p) {
    cpu_backend *c = (cpu_backend *)be;
    SB_TRY(exec_cpu_check(p));
    const uint64_t need = exec_cpu_arena_bytes(p, tp_threads(c->pool));
    if (need <= c->arena_bytes) return SB_OK;
    void *a = aligned_alloc(PLAN_ALIGN, (need + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    if (!a) return sb_fail(SB_ERR_OOM, "cpu: arena of %llu bytes", (unsigned long long)need);
    free(c->arena);
    c->arena = a;
    c->arena_bytes = need;
    return SB_OK;
}

static sb_status cpu_run(backend *be, const plan *p, void *const *data, int32_t n_data, float *const *out) {
    cpu_backend *c = (cpu_backend *)be;
    const exec_bindings eb = {.data = data, .n_data = n_data, .arena = c->arena, .arena_bytes = c->arena_bytes};
    const float *res[CPU_MAX_OUT] = {0};
    if (p->n_outputs > CPU_MAX_OUT) return sb_fail(SB_ERR_INTERNAL, "cpu: plan with %d outputs", (int)p->n_outputs);
    SB_TRY(exec_cpu_run(p, &eb, c->pool, res));
    for (int32_t k = 0; out && k < p->n_outputs; k++)
        if (out[k] && res[k]) memcpy(out[k], res[k], (size_t)ir_nelem(&p->g->nodes[p->outputs[k].node]) * sizeof(float));
    c->runs++;
    return SB_OK;
}

static void cpu_forget(backend *be, const plan *p) { (void)be, (void)p; }

static backend_stats cpu_stats(const backend *be) { return (backend_stats){.runs = ((const cpu_backend *)be)->runs}; }

static void cpu_free(backend *be) {
    cpu_backend *c = (cpu_backend *)be;
    if (!c) return;
    tp_free(c->pool);
    free(c->arena);
    free(c);
}

static const backend_ops cpu_ops = {
    .name = "cpu", .target = cpu_target, .prepare = cpu_prepare, .run = cpu_run, .forget = cpu_forget, .stats = cpu_stats,
    .free = cpu_free,
};

static int cpu_available(char *why, size_t cap) {
    if (cap) why[0] = 0;
    return 1;
}

static sb_status cpu_memory(uint64_t *free_b, uint64_t *total_b) {
    *free_b = *total_b = 0;
    return sb_fail(SB_ERR_UNSUPPORTED, "cpu: no device memory of its own");
}

static sb_status cpu_create(const backend_params *bp, backend **out) {
    *out = NULL;
    cpu_backend *c = (cpu_backend *)calloc(1, sizeof *c);
    if (!c) return sb_fail(SB_ERR_OOM, "cpu backend");
    c->base.ops = &cpu_ops;
    const sb_status st = tp_create(bp->n_threads, &c->pool);
    if (st != SB_OK) {
        free(c);
        return st;
    }
    *out = &c->base;
    return SB_OK;
}

const backend_kind backend_kind_cpu = {.name = "cpu", .available = cpu_available, .memory = cpu_memory, .create = cpu_create};
