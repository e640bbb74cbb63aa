/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/cg.h — generated fused kernels: a planned node (or the executor's ADD + RMS_NORM_QUANT
 * pair) → a cg_group signature → CUDA C source specialised on it (cg_emit.c) → a cubin compiled by
 * NVRTC (cg_nvrtc.c, dlopen'ed) → cached in memory and on disk (cg_cache.c), with per-shape
 * autotuning of the launch variant (threads per block, rows per block) remembered the same way.
 * Layer 3 (codegen; sees base, quant, ops, graph — never backend or runtime: it produces bytes,
 * the runtime loads and launches them through backend/cuda/kernels.h).
 * Invariants: the generated math is the hand-written kernels' math (k_rows.cu k_ew_rows,
 * k_quantize.cu): the device helpers come from backend/cuda/device/ headers, embedded at build time
 * and given to NVRTC as in-memory headers, so there is one copy of them. Every generated kernel
 * starts with CU_PDL_ENTRY and takes one parameter, a cg_params by value (slot order per kind,
 * below). Rows are a compile-time 1 for decode and a run-time count (cg_params.rows) otherwise, so
 * prefill lengths share kernels; autotuning is per exact row count. A cache entry's key hashes the source, the embedded headers, the NVRTC options, the GPU
 * arch, the NVRTC version and SB_VERSION_STRING; bad cache files are recompiled, never trusted.
 * Thread-safe (one process-wide mutex around the caches and stats).
 * Env: SB_CODEGEN_DUMP=DIR (every generated
 * source and its key written there), XDG_CACHE_HOME / HOME (disk cache location).
 * Non-goals: RoPE/KV-write and GEMV epilogue groups (still executor fusions), multi-GPU, cache
 * eviction (entries are a few KB; delete the folder to reclaim).
 * References: docs/codegen.md, docs/cuda.md, issue 6 ("Generated").
 */
#ifndef SB_CODEGEN_CG_H
#define SB_CODEGEN_CG_H

#include "base/status.h"
#include "graph/ir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- groups ----

typedef enum cg_kind {
    CG_EW = 1,             /* FUSED chain or one elementwise op: dst[E,rows] f32 */
    CG_RMS_NORM_QUANT,     /* quantize(rms_norm(x) [* w]) */
    CG_ADD_RMS_NORM_QUANT, /* sum = x + b (written), quantize(rms_norm(sum) [* w]) */
    CG_GLU_QUANT,          /* quantize(act(g) * u) */
    CG_QUANTIZE,           /* quantize(x) */
} cg_kind;

/* elementwise step ops (the values of kernels.h's CU_EW_*) */
enum { CG_EW_ADD = 1, CG_EW_MUL, CG_EW_SCALE, CG_EW_SOFTCAP, CG_EW_SILU, CG_EW_GELU, CG_EW_RMS_NORM };

#define CG_MAX_STEPS 7
#define CG_MAX_PARAMS 12

typedef struct cg_step {
    int op;      /* CG_EW_* */
    int slot;    /* ADD/MUL: the cg_params slot of the operand; else 0 */
    int bcast;   /* operand is one row [E] broadcast over the rows */
    float f;     /* eps / scale / cap */
} cg_step;

/* The shape signature of one generated kernel. Params slots (cg_params.p[i]) per kind:
 *   CG_EW:                 0 dst f32, 1 x, 2.. the operands in step order (step.slot)
 *   CG_RMS_NORM_QUANT:     0 dst blocks, 1 x, 2 w (NULL when !has_w)
 *   CG_ADD_RMS_NORM_QUANT: 0 dst blocks, 1 x, 2 w, 3 b, 4 sum_out (may be x or b)
 *   CG_GLU_QUANT:          0 dst blocks, 1 g, 2 u
 *   CG_QUANTIZE:           0 dst blocks, 1 x
 * ref[i] is the IR value bound to slot i (cg_group_from_node), IR_NONE for an empty slot. */
typedef struct cg_group {
    cg_kind kind;
    int64_t E, rows;
    int xq;            /* quant kinds: SB_TYPE_Q8_1 or SB_TYPE_Q8_K */
    float eps;         /* norm kinds */
    bool has_w;        /* norm kinds: multiply by a weight row */
    bool gelu;         /* GLU: GELU (ggml's fp16 table emulation), else SiLU */
    bool hand_reg;     /* norm quant kinds: the hand-written kernel this group replaces holds the row in
                        * registers (act_build, 256 threads: k_quantize.cu with SB_TUNE=act_fast=1 where the
                        * row fits); false: its 1024-thread quant_row loop. Set by the executor after
                        * cg_group_from_node (which leaves it false); it picks the one reduction order
                        * every variant must reproduce (cg_variants) */
    int n_steps;       /* CG_EW */
    cg_step st[CG_MAX_STEPS];
    int n_params;      /* slots used */
    ir_ref ref[CG_MAX_PARAMS];
} cg_group;

/* Group of node i of g, or SB_ERR_UNSUPPORTED (with the reason) when codegen does not cover it:
 * ops other than FUSED/ADD/MUL/SCALE/SOFTCAP/SILU/GELU_TANH/RMS_NORM/QUANTIZE/RMS_NORM_QUANT/
 * ADD_RMS_NORM_QUANT (with its sum's RESULT: the planner's add+norm, CG_ADD_RMS_NORM_QUANT)/GLU_QUANT, a FUSED with a
 * quantize tail (pass fuse_chain_quant; the executor runs it hand-written), more than one rms_norm step, a quant type other than Q8_1/Q8_K, E not a multiple of
 * the quant block, more than 65535*rows-per-block rows. add_src != IR_NONE: node i is an
 * RMS_NORM_QUANT whose input is the ADD add_src, fused (CG_ADD_RMS_NORM_QUANT; the ADD's memory
 * receives the sum). */
sb_status cg_group_from_node(const ir_graph *g, ir_ref i, ir_ref add_src, cg_group *out);

/* The one by-value parameter of every generated kernel (the emitted source declares the same
 * struct): the slot pointers and the row count (read by kernels for rows > 1). */
typedef struct cg_params {
    void *p[CG_MAX_PARAMS];
    long long rows;
} cg_params;

/* a launch variant (autotuned per group) */
typedef struct cg_variant {
    int threads;   /* per block: 128, 256, 512 or 1024 */
    int rpb;       /* rows per block: 1 or 4 */
    int reg;       /* quant kinds: 1 = the row in registers (act_build, exactly as many values a thread
                    * as E needs), 0 = quant_row's loop */
    int flat;      /* chains without an rms_norm: 1 = the grid covers all rows x E values, any thread any
                    * value (rpb 1), as k_rows.cu's k_ew_flat; 0 = a block a row */
} cg_variant;

#define CG_MAX_VARIANTS 12
/* The variants worth trying for grp (at least one; the first is the default). Every variant gives
 * the hand-written kernel's bits (so the autotuner's choice never changes a result): elementwise
 * steps round after every add and multiply (no FMA contraction across steps, as k_ew_rows's
 * per-step stores), and a group that reduces (an RMSNorm's sum of squares in double, whose
 * rounding depends on the threads and the element-to-thread layout) only gets variants with the
 * hand-written kernel's layout: 256 threads for chains (k_ew_rows), for the norm quantizers
 * act_build with 256 threads (grp->hand_reg) or block_rms_scale + quant_row with 1024 threads;
 * rows per block are free (each row is reduced alone). */
int cg_variants(const cg_group *grp, cg_variant *out /* [CG_MAX_VARIANTS] */);
/* grid (blocks) and block (threads) of a variant */
void cg_geometry(const cg_group *grp, cg_variant v, unsigned *grid, unsigned *block);

// ---- emitting ----

/* the kind in words ("rms_norm_quant", ...), as the emitted sources' comments and the tests spell it */
const char *cg_kind_name(cg_kind k);
/* malloc'd CUDA C source of grp in variant v, and its kernel name ("sbk_" + 16 hex digits of the
 * hash of the signature and variant). SB_ERR_INVALID_ARG for an inconsistent group, SB_ERR_OOM. */
sb_status cg_emit(const cg_group *grp, cg_variant v, char **src, char name[40]);

/* All of grp's variants v[0..n) in one source (each kernel in its own namespace, the headers parsed
 * once): one NVRTC compile and one cache entry per group instead of one per variant. names[k]
 * receives variant k's kernel name (the same as cg_emit gives), bundle the source's name
 * ("sbb_" + 16 hex digits). */
sb_status cg_emit_bundle(const cg_group *grp, const cg_variant *v, int n, char **src, char bundle[40], char (*names)[40]);

/* The headers the generated source includes (backend/cuda/device/ headers, quant/blocks.h and the
 * small NVRTC shims for stdint.h/stddef.h/cuda_fp16.h), embedded at build time. */
typedef struct cg_header {
    const char *name;
    const char *text;
} cg_header;
extern const cg_header cg_headers[];
extern const int cg_n_headers;
/* hash of every embedded header (part of every cache key) */
uint64_t cg_headers_hash(void);

// ---- NVRTC (cg_nvrtc.c) ----

/* Loads libnvrtc once (libnvrtc.so, .so.13, .so.12, .so.11.2 ...). SB_OK, or SB_ERR_UNSUPPORTED
 * "codegen: NVRTC not available: <dlopen errors>" — the caller then uses the hand-written kernels. */
sb_status cg_nvrtc_load(void);
/* NVRTC's version (major*1000 + minor*10), 0 when not loaded. */
int cg_nvrtc_version(void);
/* Compile src (kernel `name`) for arch (90 = sm_90) into a malloc'd cubin (or PTX when NVRTC
 * produced no cubin: *is_ptx). SB_ERR_DEVICE with the first lines of the NVRTC log on a compile
 * error; SB_ERR_UNSUPPORTED when NVRTC is not available. */
sb_status cg_nvrtc_compile(const char *src, const char *name, int arch, uint8_t **bin, size_t *n, bool *is_ptx);
/* the option string that goes into the cache key */
const char *cg_nvrtc_options(int arch, char *buf, size_t cap);

// ---- cache (cg_cache.c) ----

typedef struct cg_key {
    uint64_t h[2];
} cg_key;
/* key of a kernel: source, embedded headers, NVRTC options, arch, NVRTC version, SonicBoom version */
cg_key cg_key_make(const char *src, const char *opts, int arch, int nvrtc_version, const char *sb_version);
/* "0123...": 32 hex digits + NUL */
void cg_key_hex(cg_key k, char out[33]);

typedef struct cg_binary {
    const uint8_t *data;   /* owned by the memory cache: valid for the process lifetime */
    size_t size;
    bool is_ptx;
    cg_key key;
} cg_binary;

/* The binary of (src, name) for arch: memory cache, else disk cache, else NVRTC (then stored in
 * both). Counts into the stats. Writes SB_CODEGEN_DUMP files for every source it sees first.
 * SB_ERR_UNSUPPORTED without NVRTC (and no cached binary), SB_ERR_DEVICE on compile errors. */
sb_status cg_get_binary(const char *src, const char *name, int arch, cg_binary *out);

/* cg_get_binary for n sources at once, compiled by up to `threads` threads (0: one per core, at
 * most 16): out[i] and st[i] per source (st[i] != SB_OK: out[i] empty). Returns the first failure
 * (its text in sb_last_error) or SB_OK. Duplicate sources are fine (the memory cache dedupes them
 * after the first compile; callers should pass each source once for speed). */
sb_status cg_get_binaries(const char *const *src, const char *const *name, int n, int arch, int threads, cg_binary *out, sb_status *st);

/* Autotune winners: variant index of a group signature (rows rounded up to a power of two) on a
 * device (tag: the device name and arch), in memory and on disk, or CG_TUNE_HAND when the hand-written kernel was faster than every
 * variant. cg_tune_get returns -1 when unknown. */
#define CG_TUNE_HAND CG_MAX_VARIANTS
int cg_tune_get(const cg_group *grp, const char *device_tag);
void cg_tune_put(const cg_group *grp, const char *device_tag, int variant);

/* The disk cache folder ($XDG_CACHE_HOME/sonicboom, else $HOME/.cache/sonicboom), or "" when
 * neither is set. Evaluated on every call (tests move it). */
const char *cg_cache_dir(char *buf, size_t cap);
/* Drop the memory caches (tests: force disk loads). Binaries handed out earlier stay valid. */
void cg_cache_forget_memory(void);

typedef struct cg_stats {
    int64_t kernels;          /* distinct binaries handed out */
    int64_t compiled, disk, memory;
    double compile_ms, disk_ms;
    int64_t tuned;            /* groups autotuned (timed on the device) */
    int64_t tune_hits;        /* groups whose winner came from the caches */
    int64_t hand_kept;        /* groups where the hand-written kernel won (tuned or cached) */
    int64_t disk_errors;      /* unreadable/corrupt/unwritable cache files (recovered) */
} cg_stats;
cg_stats cg_get_stats(void);
void cg_reset_stats(void);
/* "codegen: 14 kernels, 9 compiled (812 ms), 5 from disk cache (3 ms), 30 memory hits, 6 groups autotuned" */
size_t cg_stats_line(char *buf, size_t cap);
/* counted by the runtime */
void cg_count_tune(bool tuned, bool hand);

#endif
