/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_attention.c — an ATTENTION node to its launches: a paged one-token step at a
 * depth class on the session's decode kernels through the block table, the paged kernel (batches,
 * and heads past 256 over a contiguous cache as one block), flash attention for prefill, or the
 * contiguous decode kernels; each with its fused Q rope and q8_1 output where the passes marked them.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>

/* the Q RoPE attention n applies as it loads q (pass fuse_attn_rope; n_rot 0: none, q is rotated
 * already), for either argument struct (cu_attn_args, cu_attn_paged_args) */
static cu_attn_rope attn_q_rope(crun *r, const ir_node *n) {
    const ir_rope_params rp = ir_attn_q_rope(n);
    if (!rp.n_rot) return (cu_attn_rope){0};
    const ir_ref ff = ir_attn_q_rope_ff(n);
    return (cu_attn_rope){.n_rot = rp.n_rot, .mode = rp.mode, .theta_scale = powf(rp.freq_base, -2.0f / (float)rp.n_rot),
                          .freq_scale = rp.freq_scale, .attn_factor = ir_attn_q_rope_attn_factor(n),
                          .ff = ff != IR_NONE ? (const float *)dptr(r, ff) : NULL};
}

sb_status cx_run_attention(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
#define SP(j) dptr(r, n->src[j])
    if (cx_attn_paged_on_dec(r->cx, r->p, n, r->depth_max)) { /* a paged B = 1 step at a depth class: the session's kernels through the table */
        cu_attn_args a = cx_attn_paged_dec_args(r->cx, r->p, n, r->depth_max);
        a.tbl = (const int32_t *)SP(4);
        a.q_rope = attn_q_rope(r, n);
        if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
        const bool deep = cu_attn_deep_fits(&a); /* k_attn_deep + its merge; else the small layout's own kernel */
        const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = deep ? cu_attn_deep_scratch(&a) : 0;
        if (need > cap) /* cx_plan_get sized the scratch region for it */
            return sb_fail(SB_ERR_INTERNAL, "cuda: paged decode attention needs %llu floats of scratch, %llu planned", (unsigned long long)need,
                           (unsigned long long)cap);
        r->n_kernels += deep ? 2 : 1;
        return cu_attn_decode(s, dst, SP(0), SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
    }
    if (cx_attn_on_paged_kernel(r->cx, r->p, n)) { /* k_attn_paged.cu; a contiguous cache as one block of its C rows */
        const bool paged = ir_attn_block_size(n) > 0;
        cu_attn_paged_args pa = cx_attn_paged_args(r->cx, r->p, n);
        pa.q_rope = attn_q_rope(r, n);
        if (ir_attn_quant_type(n) >= 0) pa.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
        const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = cu_attention_paged_scratch(&pa);
        if (need > cap) /* cx_plan_get sized the scratch region for it */
            return sb_fail(SB_ERR_INTERNAL, "cuda: paged attention of %d splits needs %llu floats of scratch, %llu planned", pa.nsplit,
                           (unsigned long long)need, (unsigned long long)cap);
        r->n_kernels += cu_attention_paged_launches(&pa, true); /* a split merged by its last block, or by k_attn_paged_merge */
        return cu_attention_paged(s, dst, SP(0), SP(1), SP(2), SP(3), paged ? (const int32_t *)SP(4) : r->cx->d_zero, &pa,
                                  need ? (float *)(r->arena + r->c->scratch_off) : NULL, r->cx->d_cnt);
    }
    cu_attn_args a = cx_attn_args(r->cx, r->p, n);
    a.depth_max = r->depth_max;
    const void *q = SP(0);
    a.q_rope = attn_q_rope(r, n);
    if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
    if (cx_attn_on_flash(r->cx, r->p, n)) { /* prefill: flash attention (k_fattn.cu, k_fattn_mma.cu) */
        r->n_kernels++;
        return cu_attention_prefill(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off),
                                    (r->c->arena_need - r->c->scratch_off) / 4, r->cx->d_cnt);
    }
    const bool dec4 = a.variant == 4 && a.T == 1 && (a.nsplit == 1 || a.Hkv <= CU_ATT_COUNTERS); /* k_attn_decode.cu: one kernel */
    r->n_kernels += (!dec4 && a.nsplit > 1 && a.T * a.Hq > CU_ATT_COUNTERS) || (dec4 && cu_attn_deep_fits(&a)) ? 2 : 1;
    return cu_attention(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
#undef SP
}

#endif
