/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/cuda_fusion.h — the CUDA executor's fusion tables (cuda_fusion.c): given a plan, which
 * nodes the executor (exec_cuda.c) runs inside another node's launch — indexes of the marks the
 * planner's passes (src/graph/passes) left in the IR — and the shape-only predicates the CUDA plan
 * target gives those passes (docs/cuda.md lists every fusion; cu_config.h has the switch of each);
 * each one gives the same bits as the unfused kernels (tested on every model).
 * Layer 2 (runtime), CUDA builds only (SB_HAVE_CUDA). Host code only: no device calls, so the
 * fusion tables of a plan can be computed and counted without a GPU (exec_cuda_count_fusions,
 * tests/runtime test_cuda_plan, with cu_assume_device standing in for the device's limits).
 * Tables are per IR node, -1 (or 0) where nothing applies.
 */
#ifndef SB_RUNTIME_CUDA_FUSION_H
#define SB_RUNTIME_CUDA_FUSION_H

#include "backend/cuda/cu_config.h"
#include "graph/plan.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct cuda_fusions {
    /* skip[j] = node j is done by another node's launch (a matmul's bias or residual, a residual add
     * + norm, a rope + cache store, Q's rope and the output quantize in the attention are the
     * planner's nodes) */
    uint8_t *skip;
    /* vstore[v] = the V kv_store that the T = 1 launch computing value v (a lone matmul, a matmul
     * group or one of its results) also performs (-1 none); krope[v] likewise the rope_store: an
     * index of the planner's by_launch stores (pass fuse_launch_store) */
    int32_t *vstore;
    int32_t *krope;
    int32_t *nsum;        /* per matmul: the RMS_NORM_QUANT right after it that sums its split-K partials, so the split leaves
                           * them unreduced (pass fuse_norm_sums; -1 none) */
} cuda_fusions;

/* Index the planner's marks in p into f (zeroed by the caller; freed with cuda_fusions_free, also
 * after a failure). Which fusions a plan has is its target's choice (exec_cuda_target: cfg's
 * switches, cu_config.h); cfg is unused here. SB_ERR_OOM only. */
sb_status cuda_fusions_plan(const plan *p, cuda_fusions *f, const cu_config *cfg);
void cuda_fusions_free(cuda_fusions *f);
/* f as text after p's IR dump: one line per node taking part in an executor fusion (SB_DUMP_IR
 * "launches"; cuda_fusion_print.c) */
void cuda_fusions_print(const plan *p, const cuda_fusions *f, FILE *out);

#define GF_ROWS_MAX 65536 /* output rows of a fused-GEMV launch (cu_matmul_q8_multi) at most */

/* the kernel-choice predicates the planner and the executor share */
bool cf_multi_ok(const ir_graph *g, const ir_node *m);   /* a T = 1 matmul a multi-GEMV launch takes */
bool cf_reg_single(const ir_graph *g, const ir_node *m); /* a lone T = 1 GEMV the registers-before-the-wait kernel takes */
/* a gate/up group one launch gates (pass fuse_group_glu): T = 1 (k_gemv_reg's row pairs) or T >= mma_min_t (the
 * int8 MMA launch's, cu_config.mma_glu_pair); _decode: T = 1 only */
bool cf_glu_pair_ok(const ir_graph *g, const ir_node *grp);
bool cf_glu_pair_ok_decode(const ir_graph *g, const ir_node *grp);
/* pass fuse_matmul_group's member (a T = 1 GEMV the multi-GEMV launch takes, or a T >= mma_min_t GEMM the int8
 * MMA launch takes) and group (plan_target.group_fits: at T >= mma_min_t one weight type or a cu_mma_pair;
 * _one_type: cu_config.mma_pair 0; _adjacent: members side by side only, cu_config.mma_group 2) */
bool cf_group_member_ok(const ir_graph *g, const ir_node *m);
bool cf_group_fits(const ir_graph *g, const ir_ref *mem, int n);
bool cf_group_fits_one_type(const ir_graph *g, const ir_ref *mem, int n);
bool cf_group_fits_adjacent(const ir_graph *g, const ir_ref *mem, int n);
bool cf_group_fits_adjacent_one_type(const ir_graph *g, const ir_ref *mem, int n);
/* a T = 1 launch that also performs V's kv_store (cf_launch_vstore_ok) or K's too (pass fuse_launch_store) */
bool cf_launch_vstore_ok(const ir_graph *g, const ir_node *launch, const ir_node *store);
bool cf_launch_store_ok(const ir_graph *g, const ir_node *launch, const ir_node *store);
/* pass fuse_rope_jobs' job k of a cu_rope_jobs launch (plan_target.rope_job_fits): a ROPE after the
 * first job always (cu_config.rope_inplace 1), only where its group splits K (_split: 2), never (_no_rope: 0) */
bool cf_rope_job_ok(const ir_graph *g, const ir_node *job, int k);
bool cf_rope_job_ok_split(const ir_graph *g, const ir_node *job, int k);
bool cf_rope_job_ok_no_rope(const ir_graph *g, const ir_node *job, int k);
bool cf_group_jobs_ok(const ir_graph *g, const ir_node *grp); /* pass fuse_group_jobs' group (plan_target.group_jobs_fits) */
/* pass fuse_norm_sums' matmul m and norm n (plan_target.norm_sum_fits) */
bool cf_norm_sum_ok(const ir_graph *g, const ir_node *m, const ir_node *n);
bool cf_mma_ok(const ir_graph *g, const ir_node *m);     /* a T >= mma_min_t matmul the int8 MMA GEMM takes */
bool cf_blas_ok(const ir_graph *g, const ir_node *m);    /* a matmul of f32 activations cuBLASLt takes (cu_blas_on) */
bool cf_mma_takes(const ir_node *w, const ir_node *x);   /* ... as weight w and activation x (a group's member too) */
bool cf_blas_takes(const ir_node *w, const ir_node *x);

static inline uint64_t cf_align(uint64_t x) { return (x + PLAN_ALIGN - 1) & ~(uint64_t)(PLAN_ALIGN - 1); }


#endif
