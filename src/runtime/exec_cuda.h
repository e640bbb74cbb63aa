/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda.h — runs a plan on a CUDA device: walks the planned nodes in order and
 * enqueues one hand-written kernel (backend/cuda/kernels.h) per node on one stream; a decode plan
 * (T = 1) is captured once as a CUDA Graph on its first run and replayed for every step; other
 * plans (prefill chunks) are captured on their second run.
 * Layer 2 (runtime). Device state lives in an exec_cuda context (one per session, and one the
 * public tensor API shares among its programs): the stream, a cache of device copies of the bound
 * weights and KV caches keyed by their host pointer (weights uploaded once; a KV cache's host
 * buffer is uploaded on first sight and from then on the device copy is the cache, unless the
 * caller refreshes, downloads or drops it: exec_cuda_buf_*), per-run weights (a program's run-time
 * data) staged with each run, one device arena (the largest plan's memory plan + attention split
 * scratch), fixed device buffers for tokens / positions / out_rows (copied in before each run, so
 * a captured graph reads each step's position from device memory).
 * Inputs are validated on the host per run exactly as exec_cpu_run does. The first run of a plan
 * may allocate; later runs allocate nothing. CUDA errors: SB_ERR_DEVICE with the CUDA text;
 * device OOM: SB_ERR_OOM with bytes asked and free. Never aborts.
 * Only in builds with CUDA (SB_HAVE_CUDA); sessions reach it through the backend interface
 * (runtime/backend_cuda.c: backend_kind_cuda).
 * Non-goals: NVRTC-generated kernels, several streams, multi-GPU, sharing weights across sessions.
 */
#ifndef SB_RUNTIME_EXEC_CUDA_H
#define SB_RUNTIME_EXEC_CUDA_H

#include "graph/plan.h"
#include "runtime/exec_cpu.h"
#include "backend/backend.h"
#include "backend/cuda/cu_config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct exec_cuda exec_cuda;

typedef struct exec_cuda_stats {
    int64_t eager_runs, graph_captures, graph_replays;
    int64_t direct_replays;       /* graph replays whose kernels wrote outputs straight to the caller (cu_config.direct_out) */
    int64_t checked_runs;         /* runs whose kernels checked an output for NaN / Inf as they wrote it (exec_cuda_output_finite) */
    int32_t kernels_last_run;     /* launches enqueued by the last run (eager or captured) */
    uint64_t device_bytes;        /* weights + KV + arena + staging on the device */
} exec_cuda_stats;

/* True when a CUDA device can be used; otherwise why (a CUDA error text, or "built without CUDA"). */
bool exec_cuda_available(char *why, size_t cap);

/* Device 0's free and total memory in bytes (SB_ERR_UNSUPPORTED without CUDA in the build, SB_ERR_DEVICE
 * without a usable device). */
sb_status exec_cuda_device_memory(uint64_t *free_b, uint64_t *total_b);

/* A context on device 0 for plans of at most max_tokens tokens (and out_rows entries), with the
 * settings cfg (NULL: cu_config_default with the environment's SB_TUNE applied — an SB_TUNE that
 * does not parse is SB_ERR_INVALID_ARG naming the key). */
sb_status exec_cuda_create(int64_t max_tokens, const cu_config *cfg, exec_cuda **out);
void exec_cuda_free(exec_cuda *cx);

/* The context's settings (backend/cuda/cu_config.h; exec_cuda_create's cfg, or the defaults with
 * SB_TUNE applied). exec_cuda_set_config replaces them; a change drops every per-plan state
 * (captured graphs bake in kernel choices), rebuilt without re-uploads on each plan's next run. */
const cu_config *exec_cuda_config(const exec_cuda *cx);
/* cx's settings as the calling thread's (cu_cfg) until exec_cuda_unbind(the returned value): the
 * planner's CUDA target callbacks and exec_cuda_check read them (exec_cuda_run binds them itself) */
const void *exec_cuda_bind(const exec_cuda *cx);
void exec_cuda_unbind(const void *prev);
void exec_cuda_set_config(exec_cuda *cx, const cu_config *c);

/* The CUDA plan target: q8_1 activations for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL, q8_K for the
 * K-quants and IQ4_XS (as llama.cpp's CPU rounds them: the references), every one a dp4a GEMV; f32
 * for F32/F16/BF16; all fusions on. c->act_q8_1: q8_1 for the K-quants too (llama.cpp's CUDA); c NULL:
 * the defaults. With c->blas_quant on and cuBLASLt available, matmuls of at least blas_quant rows
 * keep f32 activations (plan_target.act_f32_min_rows): their weights are dequantized to F16 for
 * cuBLASLt instead (cu_matmul_blas). */
void exec_cuda_target(const cu_config *c, plan_target *t);

/* Can this build run every node of p on CUDA? SB_ERR_MODEL_TENSOR_TYPE naming the tensor, its
 * type and the op otherwise (SB_ERR_UNSUPPORTED for shapes, e.g. head_dim > 512). */
sb_status exec_cuda_check(const plan *p);

/* Run p (which passed exec_cuda_check). b->data as for exec_cpu_run (host pointers; b->arena is
 * not used): weights and KV caches are read from their device copies (uploaded on a plan's first
 * run), per-run weights (plan_input.per_run) from the host memory bound this run. out[k] (may be NULL, or out itself NULL) receives output k's f32 values (its
 * element count) on the host. Returns after the results are on the host. */
sb_status exec_cuda_run(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out);

/* exec_cuda_run, capturing p's CUDA Graph in this run where it has none that a later run with the
 * same outputs would replay (exec_cuda_run captures a plan of T > 1 only on its second run), so
 * that p's next run builds and captures nothing. An engine readies its step classes with it. */
sb_status exec_cuda_warm(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out);

/* Whether output k of the last successful run is finite, as the kernel that wrote it checked: 1 every
 * value finite, 0 one is NaN or infinite, -1 not checked there (the caller scans it if it must know).
 * A graph run whose output k went straight to the caller from a T = 1 dp4a GEMV (an LM head) is
 * checked; other outputs are not. */
int exec_cuda_output_finite(const exec_cuda *cx, int32_t k);

/* Drop the per-plan device state of p (its captured graph); call before plan_free(p). */
void exec_cuda_forget(exec_cuda *cx, const plan *p);

/* Copy a KV cache's device contents back to its host buffer (tests; bytes = the cache's size). */
sb_status exec_cuda_kv_download(exec_cuda *cx, void *host_kv, uint64_t bytes);

/* The device copy of a weight or KV cache bound by host pointer host (bytes: its size), for a
 * caller that shares host buffers with the context (the public tensor API): download copies it into
 * host; refresh replaces it with host's bytes (the host copy was written; done when it returns);
 * drop frees it — call before host's memory is freed, so a later buffer at that address is
 * uploaded afresh (a plan still bound to it, through another buffer at the same address, is
 * rebuilt on its next run). Each does nothing where the context keeps no copy of host. */
sb_status exec_cuda_buf_download(exec_cuda *cx, void *host, uint64_t bytes);
sb_status exec_cuda_buf_refresh(exec_cuda *cx, const void *host, uint64_t bytes);
void exec_cuda_buf_drop(exec_cuda *cx, const void *host);

/* Copy bytes within a KV cache bound by host pointer host_kv, from byte offset src to dst (ranges
 * apart): in its device copy, ordered before the next run, where the context keeps one; else in
 * host memory (it is uploaded when first bound). */
sb_status exec_cuda_kv_copy(exec_cuda *cx, void *host_kv, uint64_t dst, uint64_t src, uint64_t bytes);

exec_cuda_stats exec_cuda_get_stats(const exec_cuda *cx);

/* Page-locked host memory for buffers the device writes every step (the session's logits: a
 * direct DMA instead of a staged pageable copy). Free with exec_cuda_host_free before the context. */
sb_status exec_cuda_host_alloc(exec_cuda *cx, size_t bytes, void **out);
void exec_cuda_host_free(exec_cuda *cx, void *p);

/* How many nodes of p the executor-level fusions (cuda_fusion.h) fold away as a context with
 * settings c (NULL: the defaults) would plan them (host only; -1 on error). */
int32_t exec_cuda_count_fusions(const plan *p, const cu_config *c);
/* The weights of p a context keeps in host memory — each read only as the table of get_rows by
 * the tokens input, whose rows a run stages — how many, and the first cap of their nodes into out
 * (host only; -1 on error). */
int32_t exec_cuda_host_gathers(const plan *p, ir_ref *out, int32_t cap);
/* Plan as on a device of compute capability cc_major with sms multiprocessors (no GPU needed; a
 * test of planning decisions: cu_assume_device); 0, 0 restores the real device. */
void exec_cuda_assume_device(int cc_major, int sms);
/* Is cuBLASLt loaded (the large-T GEMM path, cu_config.blas_min_t; backend/cuda/cu_blaslt.h)?
 * Otherwise why. exec_cuda_assume_blaslt: plan as if it were (1) or were not (0) there, -1 the
 * library again (planning tests without a GPU; nothing may run then). */
bool exec_cuda_blaslt_available(char *why, size_t cap);
void exec_cuda_assume_blaslt(int on);
/* The attentions of p as a context with settings c (NULL: the defaults) on this (or the assumed)
 * device plans them, a line each: which kernel, its grid and key splits, and how many of those are
 * active at depth (the last position a token sees). Writes up to cap bytes of text into buf (NUL-
 * terminated where it fits); returns the length of the whole text (0 without the backend). */
size_t exec_cuda_describe_attention(const plan *p, const cu_config *c, int64_t depth, char *buf, size_t cap);
/* Gate/up launches of p that write their GLU (the GLU_QUANT then only quantizes: T = 1 GEMVs and
 * T >= mma_min_t int8 MMA groups of Q4_0 / Q5_0 / Q8_0), as a new context would plan them; -1 without the backend. */
int32_t exec_cuda_count_glu_pairs(const plan *p, const cu_config *c);
/* Small-T GEMMs of p whose split-K partials the RMSNorm after them sums (no reduce kernel), as a new
 * context would plan them (whether one splits is decided at run time); -1 without the backend. */
int32_t exec_cuda_count_norm_sums(const plan *p, const cu_config *c);

/* Profiling (cu_config.profile): runs eagerly with a CUDA event between nodes and accumulates
 * device time per op family (matmuls per weight type) and per node of the last graph profiled. The
 * accumulated profile as text: one family a line (µs per run, kernels per run, share), sorted by
 * time, then the slowest nodes (µs per run, index, op, name, shape); then clears it. Returns the
 * bytes written (0 when nothing was profiled). */
size_t exec_cuda_profile_report(exec_cuda *cx, char *buf, size_t cap);

/* The exec_cuda context of a "cuda" backend object (tests reach the settings through it); NULL for
 * any other backend. */
exec_cuda *backend_cuda_exec(backend *be);

#endif
