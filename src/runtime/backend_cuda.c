/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/backend_cuda.c — the CUDA executor (exec_cuda.h) behind the backend interface
 * (backend_kind_cuda). Only in builds with CUDA.
 * Layer 2 (runtime).
 */
#ifdef SB_HAVE_CUDA

#include "runtime/backends.h"
#include "runtime/exec_cuda.h"
#include "backend/cuda/cu_layout.h"

#include <stdlib.h>

typedef struct cuda_backend {
    backend base;
    exec_cuda *cx;
} cuda_backend;

static exec_cuda *cx_of(const backend *be) { return ((const cuda_backend *)be)->cx; }

static void cuda_target(const backend *be, plan_target *t) { exec_cuda_target(exec_cuda_config(cx_of(be)), t); }
static sb_status cuda_prepare(backend *be, const plan *p) { return exec_cuda_check(p); }
static const void *cuda_bind(backend *be) { return exec_cuda_bind(cx_of(be)); }
static void cuda_unbind(backend *be, const void *prev) { exec_cuda_unbind(prev); }

static sb_status cuda_run(backend *be, const plan *p, void *const *data, int32_t n_data, float *const *out) {
    const exec_bindings eb = {.data = data, .n_data = n_data};
    return exec_cuda_run(cx_of(be), p, &eb, out);
}

static sb_status cuda_warm(backend *be, const plan *p, void *const *data, int32_t n_data, float *const *out) {
    const exec_bindings eb = {.data = data, .n_data = n_data};
    return exec_cuda_warm(cx_of(be), p, &eb, out);
}

static void cuda_forget(backend *be, const plan *p) { exec_cuda_forget(cx_of(be), p); }

static backend_stats cuda_stats(const backend *be) {
    const exec_cuda_stats s = exec_cuda_get_stats(cx_of(be));
    return (backend_stats){.runs = s.eager_runs + s.graph_replays, .graph_captures = s.graph_captures, .graph_replays = s.graph_replays,
                           .kernels_last_run = s.kernels_last_run, .device_bytes = s.device_bytes};
}

static int cuda_output_finite(const backend *be, int32_t k) { return exec_cuda_output_finite(cx_of(be), k); }
static sb_status cuda_host_alloc(backend *be, size_t bytes, void **out) { return exec_cuda_host_alloc(cx_of(be), bytes, out); }
static void cuda_host_free(backend *be, void *p) { exec_cuda_host_free(cx_of(be), p); }
static sb_status cuda_kv_copy(backend *be, void *buf, uint64_t dst, uint64_t src, uint64_t bytes) {
    return exec_cuda_kv_copy(cx_of(be), buf, dst, src, bytes);
}

static sb_status cuda_download(backend *be, void *host, uint64_t bytes) { return exec_cuda_buf_download(cx_of(be), host, bytes); }
static sb_status cuda_refresh(backend *be, const void *host, uint64_t bytes) { return exec_cuda_buf_refresh(cx_of(be), host, bytes); }
static void cuda_drop(backend *be, const void *host) { exec_cuda_buf_drop(cx_of(be), host); }

static void cuda_free(backend *be) {
    if (!be) return;
    exec_cuda_free(cx_of(be));
    free(be);
}

static const backend_ops cuda_ops = {
    .name = "cuda", .target = cuda_target, .prepare = cuda_prepare, .bind = cuda_bind, .unbind = cuda_unbind, .run = cuda_run, .warm = cuda_warm, .forget = cuda_forget, .stats = cuda_stats,
    .output_finite = cuda_output_finite, .host_alloc = cuda_host_alloc, .host_free = cuda_host_free, .kv_copy = cuda_kv_copy, .download = cuda_download,
    .refresh = cuda_refresh, .drop = cuda_drop, .free = cuda_free,
};

exec_cuda *backend_cuda_exec(backend *be) { return be && be->ops == &cuda_ops ? cx_of(be) : NULL; }

static int cuda_available(char *why, size_t cap) { return exec_cuda_available(why, cap); }

static sb_status cuda_create(const backend_params *bp, backend **out) {
    *out = NULL;
    cuda_backend *c = (cuda_backend *)calloc(1, sizeof *c);
    if (!c) return sb_fail(SB_ERR_OOM, "cuda backend");
    c->base.ops = &cuda_ops;
    const sb_status st = exec_cuda_create(bp->max_tokens, NULL, &c->cx);
    if (st != SB_OK) {
        free(c);
        return st;
    }
    cu_config cfg = *exec_cuda_config(c->cx);
    if (bp->graphs) cfg.graphs = bp->graphs > 0;
    if (bp->codegen) cfg.codegen = bp->codegen > 0;
    if (bp->act_type) cfg.act_q8_1 = bp->act_type == SB_TYPE_Q8_1;
    exec_cuda_set_config(c->cx, &cfg);
    *out = &c->base;
    return SB_OK;
}

static uint64_t cuda_stored_bytes(int type, uint64_t bytes) { return cu_dev_bytes(type, bytes); } /* cu_layout.h */

const backend_kind backend_kind_cuda = {
    .name = "cuda", .available = cuda_available, .memory = exec_cuda_device_memory, .stored_bytes = cuda_stored_bytes, .create = cuda_create,
};

#endif
