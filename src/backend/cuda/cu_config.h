/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * backend/cuda/cu_config.h — every setting of the CUDA backend in one struct: which kernel variant
 * and which executor fusion runs. A context owns one (runtime/exec_cuda.h); its launchers read the
 * config bound to the calling thread (cu_cfg), which the executor binds for the length of each
 * call into the backend, so two contexts with different settings can run on two threads at once.
 * Defaults (cu_config_default) are what the H200 measurements chose (bench/NOTES.md); the other
 * values exist for tests that prove each variant bit-equal (or within its stated tolerance) to the
 * default, and for experiments through one environment variable, SB_TUNE="key=value,...",
 * parsed here only (cu_config_tune; the keys are the field names below).
 * Layer 0 (backend/cuda). Plain C: included by the .cu files and by runtime code.
 */
#ifndef SB_BACKEND_CUDA_CU_CONFIG_H
#define SB_BACKEND_CUDA_CU_CONFIG_H

#include "base/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* All int, so the struct has no padding and two configs compare with memcmp (exec_cuda_set_config). */
typedef struct cu_config {
    /* executor */
    int graphs;          /* capture plans as CUDA Graphs (T = 1 on the first run, others on the second) */
    int direct_out;      /* graph runs write page-locked outputs straight from their kernels */
    int pdl;             /* programmatic dependent launch where the device and the kernels allow it */
    int poison;          /* fill the arena with 0xFF (f32 NaN) before each run (tests) */
    int profile;         /* run eagerly with events between nodes (exec_cuda_profile_report) */
    int act_q8_1;        /* K-quant weights take q8_1 activations (llama.cpp's CUDA) instead of q8_K */
    int codegen;         /* 0 hand-written kernels only; 1 generated or hand-written as autotuned; 2 generated only */
    int codegen_hand1;   /* the hand-written kernel is an autotune candidate at one row too */
    /* executor-level fusions (runtime/cuda_fusion.c) */
    int fuse;            /* all of them (0: none of the below) */
    int fuse_ropek;      /* K's RoPE + kv_store inside the Q/K/V launch */
    int fuse_glu_pair;   /* an FFN's GLU computed by its gate/up launch */
    int rope_inplace;    /* Q's RoPE a rope job after the stores (pass fuse_rope_jobs): 1 always, 2 where its group splits K */
    int mma_group;       /* prefill GEMMs of one activation in one launch (the plan target's): 0 off, 1 any members, 2 adjacent only */
    int mma_pair;        /* ... pairs of two weight types in one group */
    int mma_glu_pair;    /* the prefill GLU written by its gate/up group */
    int rope_jobs;       /* RoPE and kv_store nodes as jobs of one launch */
    int group_jobs;      /* rope jobs summing an MMA group's split partials (no reduce kernel) */
    int norm_sums;       /* RMSNorm summing the split partials of the GEMM before it */
    int chain_quant;     /* the planner's chain quantize tails (pass fuse_chain_quant, cu_ew_quant_rows): chains of
                          * up to this many rows (0: off; with fuse) */
    /* attention */
    int attn_variant;    /* 1, 2 (k_attention.cu), 3 (2 + flash prefill), 4 (k_attn_decode.cu + flash prefill) */
    int attn_splits;     /* decode: at most attn_splits * SMs / heads splits per head (the paged kernel: blocks per
                          * SM, where its unsplit grid has fewer blocks than SMs) */
    int attn_kmin;       /* variant 4 and the paged kernel's splits: fewest keys a split */
    int attn_hpb;        /* variant 4: query heads a block (0: auto) */
    int attn_warp;       /* variant 4: the warp path up to this depth (0: off) */
    int attn_small;      /* variant 4: the small-depth layout up to this depth (0: off, 64 or 128) */
    int attn_class;      /* decode graphs per depth class */
    int attn_deep;       /* depth classes past the small one with k_attn_deep.cu */
    int attn_deep_kmin;  /* k_attn_deep.cu: fewest keys a split (a multiple of 32, 32..) */
    int attn_pre;        /* the small-depth kernel's K/V copies before its PDL wait */
    int attn_gqa;        /* the paged kernel's grouped variant (k_attn_paged_gqa: F16 caches of head_dim 64/128/256/512,
                          * F32 of 64/128; any T): at most this many query heads of a kv head a block — the largest
                          * divisor of Hq/Hkv <= it that the kernel takes (<= 4 at 512); 0: a block a head
                          * (k_attn_paged), as for every other shape */
    int fattn_groups;    /* flash prefill at head_dim <= 64: 1 or 2 query groups a block */
    int fattn_split;     /* flash prefill: keys split over blocks when query tiles leave SMs idle */
    int fattn_mma;       /* flash prefill on f16 tensor cores (F16 caches, head_dim 64 / 128 / 256 / 512, sm_80+) */
    int fattn_mma_tmin;  /* ... for more than this many queries */
    int fattn_ws;        /* its warp-split blocks for at most 64 queries */
    int fattn_ws_warps;  /* ... warps a block at head_dim 64 (8 or 4) */
    /* matmuls */
    int mmq;             /* T > 8 quantized GEMM: 4 int8 tensor cores (sm_80+, else 3), 3 tiled dp4a, 2, 1 */
    int mma_tile;        /* int8 MMA tile: 0 auto, 1 128x64, 2 64x64, 3 64x32 */
    int mma_min_t;       /* the fewest tokens the int8 MMA GEMMs take (fewer: the dp4a GEMVs); >= 2 */
    int mma_small;       /* small-T GEMM with K split: 0 off, 1 last block reduces, 2 separate reduce kernel */
    int mma_small_tmax;  /* ... for T up to this */
    int mma_split_waves; /* ... split of fewest waves (0: one wave) */
    int mma_group_split; /* GEMM groups that split K as one launch + one reduce */
    int mmh;             /* F16 / BF16 weights: vectorized GEMV and f16 tensor-core tiles (0: k_mmf) */
    int mmh_big;         /* ... their T > 8 tiles: 128 x 128 (device/mmh_big.cuh) for T >= this, else 64 x 64 (0: never) */
    int blas_min_t;      /* T >= this: F16 / BF16 weights through cuBLASLt (cu_blaslt.h, k_blas.cu) where it loads (0: never) */
    int blas_quant;      /* T >= this: quantized weights too, dequantized to F16 in row chunks (their activations stay f32
                          * there; 0: never). H100: 256 (below it the int8 MMA tiles win on the 0.5B shape) */
    int mmf_tile;        /* F32 weights: the tiled f32 GEMM (k_mmft, device/mmf_tile.cuh) for T > 8 and >= this (0: k_mmf) */
    int gemv_reg;        /* T = 1 GEMV fetching weights into registers before the PDL wait */
    int gemv_reg_mix;    /* ... for Q/K/V launches of two weight types */
    int gemv_reg_one;    /* ... one row a group beside a RoPE segment's pairs */
    int gemv_single;     /* lone T = 1 GEMVs through the fused-GEMV kernel too (0: k_mmvq) */
    int gf_rows, gf_prefetch, gf_warps; /* k_gemv_fused's launch shape */
    int head_rows;       /* rows a warp of a T = 1 GEMV over >= 65536 rows: 1, 2 or 4 */
    /* quantizers */
    int act_fast;        /* one-row-in-registers activation quantizers (0: the 1024-thread kernels) */
    int norm_rows;       /* RMSNorm -> q8_1 rows past one wave by the 256-thread kernel */
} cu_config;

extern const cu_config cu_config_default;

/* The config bound to the calling thread (cu_config_default when none is). */
const cu_config *cu_cfg(void);
/* Bind c (NULL: the default) to the calling thread; returns the previous binding for restoring. */
const cu_config *cu_cfg_bind(const cu_config *c);

/* Apply "key=value,key=value" (keys: the field names) to c. NULL or "" changes nothing.
 * SB_ERR_INVALID_ARG naming the key for an unknown key, a missing '=', or a value that is not an
 * integer in the field's range; c is unchanged then. */
sb_status cu_config_tune(cu_config *c, const char *spec);

#ifdef __cplusplus
}
#endif

#endif
