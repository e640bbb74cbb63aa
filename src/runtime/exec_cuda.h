/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda.h — runs a plan on a CUDA device: walks the planned nodes in order and
 * enqueues one hand-written kernel (backend/cuda/kernels.h) per node on one stream; a decode plan
 * (T = 1) is captured once as a CUDA Graph on its first run and replayed for every step; other
 * plans (prefill chunks) are captured on their second run.
 * Layer 2 (runtime). Device state lives in an exec_cuda context (one per session): the stream,
 * a cache of device copies of the bound weights and KV caches keyed by their host pointer
 * (weights uploaded once; a KV cache's host buffer is uploaded on first sight and from then on the
 * device copy is the cache), one device arena (the largest plan's memory plan + attention split
 * scratch), fixed device buffers for tokens / positions / out_rows (copied in before each run, so
 * a captured graph reads each step's position from device memory).
 * Inputs are validated on the host per run exactly as exec_cpu_run does. The first run of a plan
 * may allocate; later runs allocate nothing. CUDA errors: SB_ERR_DEVICE with the CUDA text;
 * device OOM: SB_ERR_OOM with bytes asked and free. Never aborts.
 * Without CUDA in the build every entry point returns SB_ERR_UNSUPPORTED / false.
 * Non-goals: NVRTC-generated kernels, several streams, multi-GPU, sharing weights across sessions.
 */
#ifndef SB_RUNTIME_EXEC_CUDA_H
#define SB_RUNTIME_EXEC_CUDA_H

#include "graph/plan.h"
#include "runtime/exec_cpu.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct exec_cuda exec_cuda;

typedef struct exec_cuda_stats {
    int64_t eager_runs, graph_captures, graph_replays;
    int64_t direct_replays;       /* graph replays whose kernels wrote outputs straight to the caller (exec_cuda_set_direct_out) */
    int32_t kernels_last_run;     /* launches enqueued by the last run (eager or captured) */
    uint64_t device_bytes;        /* weights + KV + arena + staging on the device */
} exec_cuda_stats;

/* True when a CUDA device can be used; otherwise why (a CUDA error text, or "built without CUDA"). */
bool exec_cuda_available(char *why, size_t cap);

/* Device 0's free and total memory in bytes (SB_ERR_UNSUPPORTED without CUDA in the build, SB_ERR_DEVICE
 * without a usable device). */
sb_status exec_cuda_device_memory(uint64_t *free_b, uint64_t *total_b);

/* A context on device 0 for plans of at most max_tokens tokens (and out_rows entries). */
sb_status exec_cuda_create(int64_t max_tokens, exec_cuda **out);
void exec_cuda_free(exec_cuda *cx);

/* Capture plans as CUDA Graphs (default on; env SB_CUDA_GRAPH=0 turns it off): T = 1 plans on
 * their first run, others on their second. */
void exec_cuda_set_graphs(exec_cuda *cx, bool on);

/* Graph runs write outputs whose destination is page-locked (exec_cuda_host_alloc: the session's
 * logits) straight there from the kernels that compute them — no device-to-host copy after the LM
 * head (default on; env SB_CUDA_DIRECT_OUT=0 off). The same bits either way. */
void exec_cuda_set_direct_out(exec_cuda *cx, bool on);

/* Fill the device arena with 0xFF bytes (f32 NaN) before every run, so a value some kernel
 * fails to write shows up as NaN (tests). */
void exec_cuda_set_poison(exec_cuda *cx, bool on);

/* The CUDA plan target: q8_1 activations for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL, q8_K for the
 * K-quants and IQ4_XS (as llama.cpp's CPU rounds them: the references), every one a dp4a GEMV; f32
 * for F32/F16/BF16; all fusions on. SB_CUDA_ACT=q8_1: q8_1 for the K-quants too (llama.cpp's CUDA). */
void exec_cuda_target(plan_target *t);

/* Can this build run every node of p on CUDA? SB_ERR_MODEL_TENSOR_TYPE naming the tensor, its
 * type and the op otherwise (SB_ERR_UNSUPPORTED for shapes, e.g. head_dim > 256). */
sb_status exec_cuda_check(const plan *p);

/* Run p (which passed exec_cuda_check). b->data as for exec_cpu_run (host pointers; b->arena is
 * not used). out[k] (may be NULL, or out itself NULL) receives output k's f32 values (its
 * element count) on the host. Returns after the results are on the host. */
sb_status exec_cuda_run(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out);

/* Drop the per-plan device state of p (its captured graph); call before plan_free(p). */
void exec_cuda_forget(exec_cuda *cx, const plan *p);

/* Copy a KV cache's device contents back to its host buffer (tests; bytes = the cache's size). */
sb_status exec_cuda_kv_download(exec_cuda *cx, void *host_kv, uint64_t bytes);

exec_cuda_stats exec_cuda_get_stats(const exec_cuda *cx);

/* Page-locked host memory for buffers the device writes every step (the session's logits: a
 * direct DMA instead of a staged pageable copy). Free with exec_cuda_host_free before the context. */
sb_status exec_cuda_host_alloc(exec_cuda *cx, size_t bytes, void **out);
void exec_cuda_host_free(exec_cuda *cx, void *p);

/* Attention kernel variant (backend/cuda/k_attention.cu): 2 (32 keys per warp step) or 1 (a key
 * per warp step); 3 (default): variant 2 for decode and flash attention (k_fattn.cu) for T > 1
 * prefill with head_dim <= 128; 4: decode by k_attn_decode.cu (one block per kv head and split,
 * splits active by depth), prefill as 3; env SB_CUDA_ATTN=1|2|3|4. Drops captured graphs. */
void exec_cuda_set_attn_variant(exec_cuda *cx, int v);
/* Variant 4's query heads per decode-attention block (k_attn_decode.cu): 0 (default) auto — 1
 * while those blocks fit one per SM (small depth), all G = Hq/Hkv of a kv head deeper; n > 0
 * forces min(n, G) at every depth; env SB_CUDA_ATTN_HPB=n. Rebuilds plans, drops captured graphs. */
void exec_cuda_set_attn_hpb(exec_cuda *cx, int hpb);
/* Variant 4's warp path (k_attn_decode.cu): at depths (keys in the window) <= depth one block a
 * query head, warps over 32-key chunks with lanes over keys and shuffles, K/V rows read straight
 * into registers (or from the keys loaded before pos is read) — no tiles, 2-3 barriers; 0 (default)
 * off; needs one query head a block (heads per block auto or 1, else off). Env SB_CUDA_ATTN_WARP=n.
 * Rebuilds plans, drops captured graphs. */
void exec_cuda_set_attn_warp(exec_cuda *cx, int depth);
/* Variant 4's small-depth layout (k_attn_decode.cu): at depths (keys in the window) <= depth (at most
 * 128) one block a query head with the work of its keys spread over the block's 8 warps (4 lanes a
 * key for the scores, warps over keys for P.V, 3 barriers, no online softmax); taken before the warp
 * path; 0 (default) off; needs one query head a block (heads per block auto or 1, else off). Env
 * SB_CUDA_ATTN_SMALL=1 (64 keys) or 2 (128 keys). Rebuilds plans, drops captured graphs. */
void exec_cuda_set_attn_small(exec_cuda *cx, int depth);

/* Token-tile GEMV variant for T > 8 (process-wide; backend/cuda/k_mmvq.cu): 4 (default: the int8
 * tensor-core GEMM, k_mma.cu, on sm_80+ devices, else 3), 3 (shared-memory tiled dp4a GEMM), 1
 * (8-token tiles) or 2 (four rows per warp); env SB_CUDA_MMQ=1|2|3|4. */
void exec_cuda_set_mmvq_variant(int v);
/* The small-T path of the int8 tensor-core GEMM for 8 < T <= 512 (process-wide; k_mma.cu
 * cu_matmul_mma_small: 32 x 64 tiles, K split across blocks so every SM has work, results equal
 * up to f32 summation order): 0 off, 1 on (the last split block of a tile reduces), 2 (default) on
 * with a separate reduce kernel; env SB_CUDA_MMA_SMALL=0|1|2. Plans created while it was off have
 * no split scratch: their GEMMs run it unsplit. */
void exec_cuda_set_mma_small(int mode);
/* The largest T that path takes (default 512; env SB_CUDA_MMA_SMALL_T; <= 8: 512), for measuring
 * where it pays. Process-wide. */
void exec_cuda_set_mma_small_tmax(int64_t t);

/* Executor-level fusions (default on; env SB_CUDA_FUSE=0 turns them off; docs/cuda.md): GEMV
 * epilogues (bias / residual adds), K's RoPE writing the KV cache, residual add + rms_norm_quant,
 * T = 1 matmuls of one activation as one multi-GEMV launch (with V's kv_store and K's RoPE
 * + kv_store; an FFN's gate/up computing the GLU), Q's RoPE and the q8_1 quantize of the output inside
 * the attention. Results match the unfused path (the same arithmetic per value). Changing it drops
 * per-plan state. */
void exec_cuda_set_fuse(exec_cuda *cx, bool on);
/* K's RoPE + kv_store inside the Q/K/V launch (default on, env SB_CUDA_ROPEK=0 off: with the
 * registers-before-the-wait GEMV, H200 tg64 1,219 vs 1,182; bit-identical by construction).
 * Changing it drops per-plan state. */
void exec_cuda_set_fuse_ropek(exec_cuda *cx, bool on);
/* An FFN's GLU computed by its gate/up launch (act(gate) * up in the GEMV's epilogue, rows taken as
 * gate/up pairs), the GLU_QUANT node then only quantizing it: default on (env SB_CUDA_GLU_PAIR=0
 * off); the same bits either way. Changing it drops per-plan state. */
void exec_cuda_set_fuse_glu_pair(exec_cuda *cx, bool on);
/* The one-row-in-registers standalone quantizers (act_build; env SB_CUDA_AQ=1; default: the
 * 1024-thread kernels, measured ~1% faster). Process-wide. */
void exec_cuda_set_act_fast(bool on);
/* the flash-attention prefill's key split over blocks when its query tiles leave SMs idle (default
 * on, env SB_CUDA_FATTN_SPLIT=0 turns it off: k_fattn.cu says why). Process-wide; takes effect for plans built
 * afterwards. */
void exec_cuda_set_fattn_split(bool on);
/* the flash-attention prefill on f16 tensor cores (k_fattn_mma.cu) for F16 caches with head_dim 64
 * or 128 on sm_80+ (default on, env SB_CUDA_FATTN_MMA=0 turns it off: k_fattn.cu's f32 kernel;
 * f16 Q and P give ~1e-3 relative error). Process-wide; takes effect for plans built afterwards. */
void exec_cuda_set_fattn_mma(bool on);
/* its 16-query blocks whose warps split the keys (k_fattn_ws) for at most 64 queries — the first
 * token after a cached prefix (default on, env SB_CUDA_FATTN_WS=0 off). Process-wide. */
void exec_cuda_set_fattn_ws(bool on);
/* RMSNorm -> q8_1 rows past one wave of the 1024-thread kernel by the 256-thread kernel of the same
 * bits (default on, env SB_CUDA_NORM_ROWS=0 off; k_quantize.cu). Process-wide. */
void exec_cuda_set_norm_rows(bool on);
/* the registers-before-the-wait T = 1 GEMV (k_gemv_reg; default on, env SB_CUDA_REG=0: k_gemv_fused /
 * k_mmvq). Process-wide. */
void exec_cuda_set_reg(bool on);
/* Rows a warp of a T = 1 GEMV over at least 65536 rows (the LM head; env SB_CUDA_HEAD_ROWS): 1, 2
 * (default) or 4 — the same bits. Process-wide. */
void exec_cuda_set_wide_rows(int r);
/* How many nodes of p those fusions fold away (host only; -1 on error). */
int32_t exec_cuda_count_fusions(const plan *p);
/* Plan as on a device of compute capability cc_major with sms multiprocessors (no GPU needed; a
 * test of planning decisions: cu_assume_device); 0, 0 restores the real device. */
void exec_cuda_assume_device(int cc_major, int sms);
/* Gate/up launches of p that write their GLU (the GLU_QUANT then only quantizes: T = 1 GEMVs and
 * T > 8 int8 MMA groups of Q4_0 / Q5_0 / Q8_0), as a new context would plan them; -1 without the backend. */
int32_t exec_cuda_count_glu_pairs(const plan *p);
/* Small-T GEMMs of p whose split-K partials the RMSNorm after them sums (no reduce kernel), as a new
 * context would plan them (whether one splits is decided at run time); -1 without the backend. */
int32_t exec_cuda_count_norm_sums(const plan *p);

/* Profiling (SB_CUDA_PROFILE=1 in the environment, or this call): runs eagerly with a CUDA event
 * between nodes and accumulates device time per op family (matmuls per weight type). */
void exec_cuda_set_profile(exec_cuda *cx, bool on);
/* The accumulated profile as text, one family a line (µs per run, kernels per run, share), sorted
 * by time; then clears it. Returns the bytes written (0 when nothing was profiled). */
size_t exec_cuda_profile_report(exec_cuda *cx, char *buf, size_t cap);

#endif
