/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda.c — the CUDA executor's context (exec_cuda.h): device, stream, settings, the
 * device copies of weights and KV caches keyed by host pointer, statistics. The executor as a whole
 * (exec_cuda_*.c, exec_cuda_impl.h) maps every plan input to device memory,
 * then walks the planned nodes in order, one launcher call (backend/cuda/kernels.h) per node, on
 * one stream; plans are captured once as a CUDA Graph and replayed (T = 1 plans on their first
 * run, other shapes — prefill chunks — on their second).
 * Layer 2 (runtime). Memory: computed values live at their plan offset in one device arena
 * (grown to the largest plan seen; growing drops every captured graph, since graphs bake in
 * pointers); split partials (attention's, the small-T GEMM's: one region, the larger of the two
 * needs, used by one kernel at a time) follow the plan region; tokens/pos/out_rows sit in fixed
 * device buffers refreshed before each run (outside the graph). Weights and KV caches are device
 * copies keyed by the host pointer the session binds (uploaded on first sight, never again), but
 * for a table read only by get_rows of the tokens: it stays in host memory and each run stages the
 * rows it needs (exec_cuda_plan.c), beside a paged plan's slots and block tables.
 * Invariants: a graph is replayed only with the arena it was captured with; validation happens on
 * the host before anything is enqueued, so a bad token/position changes no device state.
 * Executor-level fusions (default on, cu_config.fuse 0 off): planned per plan by cuda_fusion.c (the
 * tables in cplan.fu), carried out here by the launch each fused node's work moved into.
 * Generated kernels (default; cu_config.codegen 0 off): exec_cuda_codegen.c (docs/codegen.md).
 * Non-goals: overlap of independent nodes, multiple streams (docs/cuda.md).
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- availability / context ----

bool exec_cuda_available(char *why, size_t cap) {
    int n = 0;
    sb_status s = cu_device_count(&n);
    if (s != SB_OK || n < 1) {
        if (cap) snprintf(why, cap, "no usable CUDA device: %s", s != SB_OK ? sb_last_error() : "device count is 0");
        return false;
    }
    return true;
}

sb_status exec_cuda_device_memory(uint64_t *free_b, uint64_t *total_b) {
    *free_b = *total_b = 0;
    int n = 0;
    SB_TRY(cu_device_count(&n));
    if (n < 1) return sb_fail(SB_ERR_DEVICE, "cuda: no CUDA device");
    SB_TRY(cu_set_device(0));
    size_t f = 0, t = 0;
    SB_TRY(cu_mem_info(&f, &t));
    *free_b = f, *total_b = t;
    return SB_OK;
}

sb_status exec_cuda_create(int64_t max_tokens, const cu_config *cfg, exec_cuda **out) {
    *out = NULL;
    /* token counts become grid.y of several launches, which CUDA caps at 65535 */
    if (max_tokens < 1 || max_tokens > 65535)
        return sb_fail(SB_ERR_UNSUPPORTED, "cuda: batch of %lld tokens (the CUDA executor takes 1..65535 per chunk)", (long long)max_tokens);
    int n = 0;
    SB_TRY(cu_device_count(&n));
    if (n < 1) return sb_fail(SB_ERR_DEVICE, "cuda: no CUDA device");
    SB_TRY(cu_set_device(0));
    cu_config c = cfg ? *cfg : cu_config_default;
    if (!cfg) SB_TRY(cu_config_tune(&c, getenv("SB_TUNE"))); /* experiments only: cu_config.h */
    exec_cuda *cx = (exec_cuda *)calloc(1, sizeof *cx);
    if (!cx) return sb_fail(SB_ERR_OOM, "cuda context");
    cx->max_tokens = max_tokens;
    cx->cfg = c;
    sb_status st = cu_stream_create(&cx->s);
    size_t ib = (size_t)max_tokens * sizeof(int32_t);
    if (st == SB_OK) st = cu_malloc((void **)&cx->d_in, 3 * ib, "input buffer");
    if (st == SB_OK) cx->d_tok = cx->d_in, cx->d_pos = cx->d_in + max_tokens, cx->d_rows = cx->d_in + 2 * max_tokens;
    if (st == SB_OK) st = cu_host_alloc((void **)&cx->h_in, 3 * ib, "input staging");
    if (st == SB_OK) st = cu_host_alloc((void **)&cx->h_nonfinite, CX_MAX_OUT * sizeof(unsigned), "non-finite flags");
    if (st == SB_OK) st = cu_malloc((void **)&cx->d_cnt, CU_ATT_COUNTERS * sizeof(unsigned), "attention split counters");
    if (st == SB_OK) st = cu_memset(cx->d_cnt, 0, CU_ATT_COUNTERS * sizeof(unsigned), cx->s);
    if (st == SB_OK) st = cu_malloc((void **)&cx->d_zero, ib, "a block table of zeros");
    if (st == SB_OK) st = cu_memset(cx->d_zero, 0, ib, cx->s);
    if (st == SB_OK) st = cu_stream_sync(cx->s);
    if (st != SB_OK) {
        exec_cuda_free(cx);
        return st;
    }
    cx->st.device_bytes = 4 * ib;
    cx->sms = cu_sm_count();
    *out = cx;
    return SB_OK;
}

void exec_cuda_free(exec_cuda *cx) {
    if (!cx) return;
    if (cg_get_stats().kernels + cg_get_stats().memory > 0 && sb_log_enabled(SB_LOG_INFO)) { /* `sb run -v`: the codegen line */
        char line[320];
        cg_stats_line(line, sizeof line);
        sb_log(SB_LOG_INFO, "%s", line);
    }
    if (cx->s) cu_stream_sync(cx->s);
    for (int i = 0; i < CX_MAX_PLANS; i++) cx_plan_clear(&cx->plans[i]);
    for (int32_t i = 0; i < cx->n_bufs; i++) cu_free(cx->bufs[i].dev);
    free(cx->bufs);
    if (cx->ev) cu_events_destroy(cx->ev, cx->n_ev);
    free(cx->ev);
    free(cx->prof_node_ms);
    free(cx->prof_node_label);
    cu_free(cx->arena);
    cu_free(cx->d_in);
    cu_free(cx->d_cnt);
    cu_free(cx->d_zero);
    cu_free(cx->d_blas_ws);
    cu_host_free(cx->h_in);
    cu_host_free(cx->h_nonfinite);
    cu_stream_destroy(cx->s);
    free(cx);
}

/* a setting plans are built with changed: every plan (and its captured graph, which bakes in kernel
 * arguments) is dropped, and rebuilt (without re-uploads) on its next run */
static void drop_plans(exec_cuda *cx) {
    cu_stream_sync(cx->s);
    for (int i = 0; i < CX_MAX_PLANS; i++) cx_plan_clear(&cx->plans[i]);
}

sb_status exec_cuda_host_alloc(exec_cuda *cx, size_t bytes, void **out) { return cu_host_alloc(out, bytes, "host buffer"); }
void exec_cuda_host_free(exec_cuda *cx, void *p) { cu_host_free(p); }
const cu_config *exec_cuda_config(const exec_cuda *cx) { return &cx->cfg; }
const void *exec_cuda_bind(const exec_cuda *cx) { return cu_cfg_bind(&cx->cfg); }
void exec_cuda_unbind(const void *prev) { cu_cfg_bind((const cu_config *)prev); }

/* A change of a setting that shapes plans or captured kernels drops every plan (and graph); the
 * run-level ones (capture, direct outputs, poison, profiling) are read at each run. */
void exec_cuda_set_config(exec_cuda *cx, const cu_config *c) {
    cu_config was = cx->cfg, now = *c;
    was.graphs = now.graphs, was.direct_out = now.direct_out, was.poison = now.poison, was.profile = now.profile;
    if (memcmp(&was, &now, sizeof now)) drop_plans(cx);
    cx->cfg = *c;
}

exec_cuda_stats exec_cuda_get_stats(const exec_cuda *cx) { return cx->st; }

void exec_cuda_forget(exec_cuda *cx, const plan *p) {
    if (!cx) return;
    for (int i = 0; i < CX_MAX_PLANS; i++)
        if (cx->plans[i].p == p) {
            cu_stream_sync(cx->s);
            cx_plan_clear(&cx->plans[i]);
        }
}

// ---- device buffers keyed by host pointer ----

#define LAYOUT_CHUNK (16u << 20) /* bytes a padded copy converts at a time */

/* bytes of host to or from the device copy dev whose blocks are stored padded (type: cu_layout.h),
 * through a host buffer a chunk at a time */
static sb_status copy_padded(exec_cuda *cx, void *dev, void *host, uint64_t bytes, int type, bool to_dev) {
    const uint64_t g = cu_pad_gguf_block(type), d = cu_pad_dev_block(type), step = LAYOUT_CHUNK / d;
    if (bytes % g) return sb_fail(SB_ERR_INTERNAL, "cuda: %llu bytes of %s are no whole blocks", (unsigned long long)bytes, ir_dtype_name(type));
    uint8_t *tmp = (uint8_t *)malloc((size_t)(step * d));
    if (!tmp) return sb_fail(SB_ERR_OOM, "cuda: %u bytes to convert a weight's blocks", (unsigned)(step * d));
    sb_status st = SB_OK;
    for (uint64_t b = 0; st == SB_OK && b < bytes / g; b += step) {
        const uint64_t n = bytes / g - b < step ? bytes / g - b : step;
        if (to_dev) {
            cu_layout_copy(tmp, (const uint8_t *)host + b * g, type, n, 0);
            st = cu_memcpy_h2d((uint8_t *)dev + b * d, tmp, (size_t)(n * d), cx->s);
            if (st == SB_OK) st = cu_stream_sync(cx->s); /* before tmp is written again */
        } else {
            st = cu_memcpy_d2h(tmp, (const uint8_t *)dev + b * d, (size_t)(n * d), cx->s);
            if (st == SB_OK) cu_layout_copy((uint8_t *)host + b * g, tmp, type, n, 1);
        }
    }
    free(tmp);
    return st;
}

/* bytes (at most the buffer's) of host into entry i's device copy, converted to its layout */
static sb_status devbuf_upload(exec_cuda *cx, int32_t i, const void *host, uint64_t bytes) {
    const devbuf *b = &cx->bufs[i];
    if (bytes > b->bytes) bytes = b->bytes;
    if (b->layout >= 0) return copy_padded(cx, b->dev, (void *)host, bytes, b->layout, true);
    SB_TRY(cu_memcpy_h2d(b->dev, host, (size_t)bytes, cx->s));
    return cu_stream_sync(cx->s); /* the host buffer may be pageable/mmap'd, or change again as soon as this returns */
}

sb_status cx_devbuf_get(exec_cuda *cx, const void *host, uint64_t bytes, int dtype, const char *name, void **dev) {
    const int layout = dtype >= 0 && cu_pad_gguf_block(dtype) ? dtype : -1;
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host) {
            if (cx->bufs[i].bytes < bytes)
                return sb_fail(SB_ERR_INTERNAL, "cuda: buffer \"%s\" bound with %llu bytes, cached with %llu", name,
                               (unsigned long long)bytes, (unsigned long long)cx->bufs[i].bytes);
            if (cx->bufs[i].layout != layout)
                return sb_fail(SB_ERR_INVALID_ARG, "cuda: buffer \"%s\" bound as %s, on the device already as %s", name,
                               layout >= 0 ? ir_dtype_name(layout) : "unpadded bytes", cx->bufs[i].layout >= 0 ? ir_dtype_name(cx->bufs[i].layout) : "unpadded bytes");
            *dev = cx->bufs[i].dev;
            return SB_OK;
        }
    if (cx->n_bufs == cx->cap_bufs) {
        int32_t cap = cx->cap_bufs ? 2 * cx->cap_bufs : 256;
        devbuf *nb = (devbuf *)realloc(cx->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return sb_fail(SB_ERR_OOM, "cuda: buffer table of %d entries", (int)cap);
        cx->bufs = nb;
        cx->cap_bufs = cap;
    }
    const uint64_t dev_bytes = cu_dev_bytes(layout, bytes);
    void *d;
    char what[128];
    snprintf(what, sizeof what, "\"%.100s\"", name);
    /* whole 256-byte units: the GEMVs' aligned word loads (cu_ld_words_a2) read up to 2 bytes past a matrix's last block */
    SB_TRY(cu_malloc(&d, (size_t)((dev_bytes + 255) & ~(uint64_t)255), what));
    cx->bufs[cx->n_bufs] = (devbuf){host, d, bytes, layout};
    sb_status st = devbuf_upload(cx, cx->n_bufs, host, bytes);
    if (st != SB_OK) {
        cu_free(d);
        return st;
    }
    cx->n_bufs++;
    cx->st.device_bytes += dev_bytes;
    *dev = d;
    return SB_OK;
}

sb_status exec_cuda_kv_copy(exec_cuda *cx, void *host_kv, uint64_t dst, uint64_t src, uint64_t bytes) {
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host_kv) {
            if (dst + bytes > cx->bufs[i].bytes || src + bytes > cx->bufs[i].bytes)
                return sb_fail(SB_ERR_INTERNAL, "cuda: KV copy of %llu bytes past a buffer of %llu", (unsigned long long)bytes,
                               (unsigned long long)cx->bufs[i].bytes);
            return cu_memcpy_d2d((uint8_t *)cx->bufs[i].dev + dst, (const uint8_t *)cx->bufs[i].dev + src, (size_t)bytes, cx->s);
        }
    memcpy((uint8_t *)host_kv + dst, (const uint8_t *)host_kv + src, (size_t)bytes);
    return SB_OK;
}

/* the entry of host's device copy, or -1 */
static int32_t buf_find(const exec_cuda *cx, const void *host) {
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host) return i;
    return -1;
}

sb_status exec_cuda_buf_download(exec_cuda *cx, void *host, uint64_t bytes) {
    const int32_t i = buf_find(cx, host);
    if (i < 0) return SB_OK;
    const devbuf *b = &cx->bufs[i];
    if (bytes > b->bytes) bytes = b->bytes;
    if (b->layout >= 0) return copy_padded(cx, b->dev, host, bytes, b->layout, false);
    return cu_memcpy_d2h(host, b->dev, (size_t)bytes, cx->s);
}

sb_status exec_cuda_buf_refresh(exec_cuda *cx, const void *host, uint64_t bytes) {
    const int32_t i = buf_find(cx, host);
    return i < 0 ? SB_OK : devbuf_upload(cx, i, host, bytes);
}

void exec_cuda_buf_drop(exec_cuda *cx, const void *host) {
    const int32_t i = buf_find(cx, host);
    if (i < 0) return;
    cu_stream_sync(cx->s);
    void *dev = cx->bufs[i].dev;
    for (int k = 0; k < CX_MAX_PLANS; k++) { /* a plan still bound to it (another buffer at the same host address): rebuilt on its next run */
        cplan *c = &cx->plans[k];
        for (int32_t j = 0; c->p && j < c->p->n_inputs; j++)
            if (c->dptr[j] == dev) {
                cx_plan_clear(c);
                break;
            }
    }
    cu_free(dev);
    cx->st.device_bytes -= cu_dev_bytes(cx->bufs[i].layout, cx->bufs[i].bytes);
    cx->bufs[i] = cx->bufs[--cx->n_bufs];
}

sb_status exec_cuda_kv_download(exec_cuda *cx, void *host_kv, uint64_t bytes) {
    for (int32_t i = 0; i < cx->n_bufs; i++)
        if (cx->bufs[i].host == host_kv) return cu_memcpy_d2h(host_kv, cx->bufs[i].dev, (size_t)(bytes < cx->bufs[i].bytes ? bytes : cx->bufs[i].bytes), cx->s);
    return sb_fail(SB_ERR_INVALID_ARG, "cuda: %p is no device-mapped KV cache", host_kv);
}

#endif
