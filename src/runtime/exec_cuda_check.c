/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_check.c — what the CUDA backend can run: the plan target it asks the planner
 * for (activation formats per weight type, fusions) and the per-node check of a built plan.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- target and capability check ----

void exec_cuda_target(const cu_config *c, plan_target *t) {
    const cu_config *cc = c ? c : &cu_config_default;
    plan_target_reference(t);
    t->name = "cuda";
    t->wants_quantized_act = true;
    for (int w = 0; w < SB_TYPE_COUNT; w++) t->act_type[w] = cu_has_mmvq(w) ? SB_TYPE_Q8_1 : SB_TYPE_F32;
    /* K-quant weights: q8_K activations, rounded exactly as llama.cpp's CPU (and so the reference
     * logits) round them — q8_1's per-32 scales round differently and land 1.4-2e-3 NMSE away
     * from the references on the test models (docs/cuda.md). cu_config.act_q8_1 restores llama.cpp's
     * CUDA semantics. */
    if (!cc->act_q8_1)
        for (int w = 0; w < SB_TYPE_COUNT; w++)
            if (cu_has_mmvq_q8k(w)) t->act_type[w] = SB_TYPE_Q8_K; /* Q2_K..Q6_K, IQ4_XS */
    /* large-T prefill: quantized weights dequantized to F16 for cuBLASLt read the f32 activation
     * (every weight type that has a quantized activation here is one cu_blas_takes) */
    if (cc->blas_quant > 0 && cu_blaslt_available(NULL, 0)) t->act_f32_min_rows = cc->blas_quant;
    t->fuse_norm_quant = t->fuse_act_quant = t->fuse_elementwise = true;
    if (!cc->fuse) return; /* cu_config.fuse 0: the planner's fusions off too */
    /* pass fuse_rope_jobs: cu_rope_jobs' launches (a Q rope after the stores: cu_config.rope_inplace) */
    t->rope_jobs_max = CU_ROPE_JOBS_MAX;
    if (cc->rope_jobs)
        t->rope_job_fits = cc->rope_inplace == 2 ? cf_rope_job_ok_split : cc->rope_inplace ? cf_rope_job_ok : cf_rope_job_ok_no_rope;
    if (cc->group_jobs) t->group_jobs_fits = cf_group_jobs_ok; /* the jobs sum a split group's partials */
    if (cc->norm_sums) t->norm_sum_fits = cf_norm_sum_ok;      /* the norm sums a split GEMM's partials */
    t->fuse_matmul_add = t->fuse_add_norm = t->fuse_rope_store = t->fuse_norm_rope = true;
    t->slice_view = true;             /* VIEW: a pointer at an offset (dptr) */
    /* cu_ew_quant_rows (1024 threads a row) in place of the chain's and the quantizer's kernels: decode
     * and small batches, where launches dominate (default 8 rows; not measured past one row yet) */
    t->chain_quant_max_t = cc->chain_quant;
    t->add_norm_writes_sum = true;     /* cu_add_rms_norm_quant reads the sum back */
    t->attn_rope_max_t = 1;            /* decode: prefill plans keep Q's rope in their rope-jobs launch (docs/cuda.md) */
    t->attn_rope_paged_max_t = 8;      /* the paged kernels rotate q a block at any T; up to 8 tokens (the engine's steps:
                                        * under mma_min_t Q's rope would be a launch of its own, from it the rope-jobs
                                        * launch of K and V runs either way) */
    t->attn_quant_type = SB_TYPE_Q8_1; /* cu_attn_args.xq: the O projection's q8_1 blocks beside the f32 output */
    /* cu_attention's; wider heads go to the paged kernel, which does neither (their prefill maybe to
     * the tensor-core kernel: unfused too) */
    t->attn_fuse_max_head_dim = CU_ATT_MAX_D;
    /* decode: one multi-GEMV launch; prefill (T >= mma_min_t, cu_config.mma_group, on the int8 MMA GEMMs: mmq 4): one int8 MMA launch */
    const bool mma = cc->mma_group && cc->mmq == 4;
    t->matmul_group_max_t = mma ? INT64_MAX : 1;
    t->matmul_group_max = CU_MULTI_MAX;
    t->group_member_fits = mma ? cf_group_member_ok : cf_multi_ok;
    t->group_fits = cc->mma_group == 2 ? (cc->mma_pair ? cf_group_fits_adjacent : cf_group_fits_adjacent_one_type)
                                       : (cc->mma_pair ? cf_group_fits : cf_group_fits_one_type);
    /* the gate/up launch's row pairs: k_gemv_reg's, the int8 MMA launch's (cu_config.mma_glu_pair) */
    if (cc->fuse_glu_pair) t->group_glu_fits = mma && cc->mma_glu_pair ? cf_glu_pair_ok : cf_glu_pair_ok_decode;
    t->launch_store_fits = cc->fuse_ropek ? cf_launch_store_ok : cf_launch_vstore_ok; /* the GEMVs' cache segment */
}

sb_status exec_cuda_check(const plan *p) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const ir_node *s0 = n->src[0] != IR_NONE ? &g->nodes[n->src[0]] : NULL;
        const ir_node *s1 = n->src[1] != IR_NONE ? &g->nodes[n->src[1]] : NULL;
        switch (n->op) {
        case IR_OP_TOKENS: case IR_OP_POS: case IR_OP_OUT_ROWS: case IR_OP_WEIGHT: case IR_OP_RESHAPE: case IR_OP_VIEW: case IR_OP_OUTPUT:
        case IR_OP_RMS_NORM: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU:
        case IR_OP_GELU_TANH: case IR_OP_SWIGLU: case IR_OP_GEGLU: case IR_OP_FUSED: case IR_OP_ROPE: case IR_OP_ROPE_STORE: case IR_OP_SELECT_ROWS:
        case IR_OP_SLICE: case IR_OP_SOFTMAX: case IR_OP_LAYER_NORM: case IR_OP_GELU: case IR_OP_CONCAT: case IR_OP_PERMUTE:
            if (n->op == IR_OP_FUSED && ir_fused_steps(n) > 7)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: fused chain %%%d of %d steps (at most 7)", (int)i, ir_fused_steps(n));
            if (n->op == IR_OP_FUSED && ir_fused_tail_of(n).op && ir_fused_tail_of(n).type != SB_TYPE_Q8_1 && ir_fused_tail_of(n).type != SB_TYPE_Q8_K)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: fused chain %%%d quantizes to %s (Q8_1 or Q8_K only)", (int)i,
                               ir_dtype_name(ir_fused_tail_of(n).type));
            if ((n->op == IR_OP_ROPE || n->op == IR_OP_ROPE_STORE) && ir_rope_of(n).n_rot / 2 > 512)
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: rope %%%d rotates %d dims (at most 1024)", (int)i, ir_rope_of(n).n_rot);
            break;
        case IR_OP_KV:
            if (n->dtype != SB_TYPE_F32 && n->dtype != SB_TYPE_F16)
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: KV cache \"%s\" of type %s (F32 or F16 only)", n->name, ir_dtype_name(n->dtype));
            if (ir_kv_is_ring(n) && n->ne[1] > INT32_MAX) /* kv_row's 32-bit arithmetic */
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: ring KV cache \"%s\" of %lld rows", n->name, (long long)n->ne[1]);
            break;
        case IR_OP_KV_STORE: break;
        case IR_OP_SLOTS: case IR_OP_BLOCK_TABLE: break; /* the paged KV inputs (graph/builder_paged.c) */
        case IR_OP_GET_ROWS:
            if (!cu_can_dequantize(s0->dtype))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: tensor \"%s\" of type %s cannot be read by get_rows (no CUDA dequantizer)",
                               s0->name, ir_dtype_name(s0->dtype));
            break;
        case IR_OP_MATMUL: {
            bool ok = (s1->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(s0->dtype)) || (s1->dtype == SB_TYPE_Q8_K && cu_can_dequantize(s0->dtype)) ||
                      (s1->dtype == SB_TYPE_F32 && cu_can_dequantize(s0->dtype));
            if (!ok)
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: tensor \"%s\" of type %s x activation %s: no CUDA matmul", s0->name,
                               ir_dtype_name(s0->dtype), ir_dtype_name(s1->dtype));
            break;
        }
        case IR_OP_RESULT: break; /* written by its producer */
        case IR_OP_MATMUL_GROUP: { /* the planner's groups: T = 1 multi-GEMV (cu_matmul_q8_multi), T >= cu_mma_min_t() int8 MMA (cu_matmul_mma_multi) */
            if (ir_group_n(n) > CU_MULTI_MAX || (s0->ne[1] != 1 && s0->ne[1] < cu_mma_min_t()))
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: matmul group %%%d of %d members at T = %lld (at most %d, T = 1 or T >= %lld)", (int)i,
                               ir_group_n(n), (long long)s0->ne[1], CU_MULTI_MAX, (long long)cu_mma_min_t());
            for (int j = 0; j < ir_group_n(n); j++) {
                const int wt = g->nodes[ir_group_weight(n, j)].dtype;
                const bool mmvq = (s0->dtype == SB_TYPE_Q8_1 && cu_has_mmvq(wt)) || (s0->dtype == SB_TYPE_Q8_K && cu_has_mmvq_q8k(wt));
                /* T >= cu_mma_min_t(): what a lone matmul of the member runs on where the launch does not take them all */
                const bool ok = mmvq || (s0->ne[1] >= cu_mma_min_t() && s0->dtype == SB_TYPE_Q8_K && cu_can_dequantize(wt));
                if (!ok)
                    return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: matmul group %%%d: weight %s x activation %s at T = %lld", (int)i,
                                   ir_dtype_name(wt), ir_dtype_name(s0->dtype), (long long)s0->ne[1]);
            }
            if (ir_group_glu(n) && !cf_glu_pair_ok(g, n))
                return sb_fail(SB_ERR_INTERNAL, "cuda: gated group %%%d that no gate/up launch takes (plan_target.group_glu_fits)", (int)i);
            break;
        }
        case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_GLU_QUANT: case IR_OP_ADD_RMS_NORM_QUANT:
            if (n->op == IR_OP_ADD_RMS_NORM_QUANT && ir_result_of(g, i, 1) == IR_NONE) /* the kernel writes the sum */
                return sb_fail(SB_ERR_INTERNAL, "cuda: add_rms_norm_quant %%%d has no sum result (plan_target.add_norm_writes_sum)", (int)i);
            if ((n->dtype != SB_TYPE_Q8_1 || n->ne[0] % 32) && (n->dtype != SB_TYPE_Q8_K || n->ne[0] % 256))
                return sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "cuda: no quantizer for activation type %s of %lld values (node %%%d)",
                               ir_dtype_name(n->dtype), (long long)n->ne[0], (int)i);
            break;
        case IR_OP_ATTENTION:
            if (ir_attn_quant_type(n) >= 0 && ir_result_of(g, i, 1) == IR_NONE)
                return sb_fail(SB_ERR_INTERNAL, "cuda: attention %%%d writes a quantized output that has no result node", (int)i);
            if (ir_attn_quant_type(n) >= 0 && (ir_attn_quant_type(n) != SB_TYPE_Q8_1 || ir_attn_of(n).head_dim % 32))
                return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention %%%d writing %s (q8_1 only, head_dim a multiple of 32)", (int)i,
                               ir_dtype_name(ir_attn_quant_type(n)));
            if (ir_attn_block_size(n)) { /* paged: k_attn_paged.cu (Q's RoPE on load and the q8_1 output too) */
                if (ir_attn_of(n).head_dim % 2 || ir_attn_of(n).head_dim > 512 || ir_attn_of(n).head_dim < 2)
                    return sb_fail(SB_ERR_UNSUPPORTED, "cuda: paged attention %%%d with head_dim %d (even, 2..512)", (int)i,
                                   ir_attn_of(n).head_dim);
                break;
            }
            { /* contiguous: cu_attention up to CU_ATT_MAX_D; wider heads k_attn_paged.cu over the cache as one
               * block, or (prefills) k_fattn_mma.cu */
                const int hd = ir_attn_of(n).head_dim;
                if (hd < 1 || hd > CU_ATT_PAGED_MAX_D || (hd > CU_ATT_MAX_D && hd % 2))
                    return sb_fail(SB_ERR_UNSUPPORTED, "cuda: attention %%%d with head_dim %d (1..%d, or even up to %d)", (int)i, hd, CU_ATT_MAX_D,
                                   CU_ATT_PAGED_MAX_D);
                if (hd > CU_ATT_MAX_D && (ir_attn_q_rope(n).n_rot || ir_attn_quant_type(n) >= 0))
                    return sb_fail(SB_ERR_INTERNAL, "cuda: attention %%%d of head_dim %d rotates q or writes a quantized output "
                                   "(past plan_target.attn_fuse_max_head_dim %d)", (int)i, hd, CU_ATT_MAX_D);
            }
            break;
        default:
            return sb_fail(SB_ERR_UNSUPPORTED, "cuda: op %s (node %%%d) has no CUDA kernel",
                           (unsigned)n->op < IR_OP_COUNT ? ir_ops[n->op].name : "?", (int)i);
        }
    }
    return SB_OK;
}

#endif
