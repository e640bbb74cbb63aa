/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/qwen_layers.h — NL layers of the Qwen2.5-0.5B decoder as an IR graph, in the
 * decoder's node order (K's chain, V's, then Q's; attention, O + residual, FFN + residual), over T
 * new tokens: the shape whose plan the CUDA executor's prefill fusions were measured on. Weights
 * are graph inputs named blk.<l>.<name>, the caches cache_k.<l> / cache_v.<l> (F16, C rows); x
 * [896, T] f32 and pos are the inputs. Q5_0 weights with a Q8_0 V and a Q6_K down projection (a
 * Q4_K_M file's mix at these shapes); qwen_layers_bs with bs > 0 the batched engine's paged form.
 * Used by test_cuda_plan (the plan, as on an H200) and test_cuda_ops (the numbers, on the GPU).
 */
#ifndef SB_TESTS_QWEN_LAYERS_H
#define SB_TESTS_QWEN_LAYERS_H

#include "graph/ir.h"

#include <stdio.h>

enum { QL_E = 896, QL_D = 64, QL_HQ = 14, QL_HKV = 2, QL_F = 4864 };

/* bs > 0: the batched engine's paged form (builder_paged.c): the caches written at the slots input,
 * read through a block table of C / bs entries a token */
static ir_graph *qwen_layers_bs(int NL, int64_t T, int64_t C, int32_t bs) {
    const int64_t E = QL_E, D = QL_D, Hq = QL_HQ, Hkv = QL_HKV, F = QL_F;
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1}), pos = ir_input_pos(g, T);
    const ir_ref rows = bs > 0 ? ir_input_slots(g, T) : pos, tbl = bs > 0 ? ir_input_block_table(g, C / bs, T) : IR_NONE;
    ir_rope_params rp = {.n_rot = 64, .mode = IR_ROPE_NEOX, .freq_base = 1000000.0f, .freq_scale = 1.0f};
    ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
    char nm[64];
    for (int l = 0; l < NL; l++) {
#define QL_W(name, t, k, n) (snprintf(nm, sizeof nm, "blk.%d." name, l), ir_input_weight(g, nm, t, (int64_t[4]){k, n, 1, 1}))
        ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), QL_W("attn_norm", SB_TYPE_F32, E, 1));
        ir_ref k = ir_add(g, ir_matmul(g, QL_W("wk", SB_TYPE_Q5_0, E, D * Hkv), h), QL_W("bk", SB_TYPE_F32, D * Hkv, 1));
        k = ir_rope(g, ir_reshape(g, k, (int64_t[4]){D, Hkv, T, 1}), pos, IR_NONE, &rp);
        snprintf(nm, sizeof nm, "cache_k.%d", l);
        ir_ref kc = ir_kv_store(g, ir_input_kv(g, nm, SB_TYPE_F16, (int64_t[4]){D * Hkv, C, 1, 1}), ir_reshape(g, k, (int64_t[4]){D * Hkv, T, 1, 1}),
                                rows);
        ir_ref v = ir_add(g, ir_matmul(g, QL_W("wv", SB_TYPE_Q8_0, E, D * Hkv), h), QL_W("bv", SB_TYPE_F32, D * Hkv, 1));
        snprintf(nm, sizeof nm, "cache_v.%d", l);
        ir_ref vc = ir_kv_store(g, ir_input_kv(g, nm, SB_TYPE_F16, (int64_t[4]){D * Hkv, C, 1, 1}), v, rows);
        ir_ref q = ir_add(g, ir_matmul(g, QL_W("wq", SB_TYPE_Q5_0, E, D * Hq), h), QL_W("bq", SB_TYPE_F32, D * Hq, 1));
        q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, Hq, T, 1}), pos, IR_NONE, &rp);
        const ir_ref att = bs > 0 ? ir_attention_paged(g, q, kc, vc, pos, tbl, bs, &ap) : ir_attention(g, q, kc, vc, pos, &ap);
        x = ir_add(g, x, ir_matmul(g, QL_W("wo", SB_TYPE_Q5_0, E, E), att));
        ir_ref f = ir_mul(g, ir_rms_norm(g, x, 1e-6f), QL_W("ffn_norm", SB_TYPE_F32, E, 1));
        ir_ref gu = ir_swiglu(g, ir_matmul(g, QL_W("gate", SB_TYPE_Q5_0, E, F), f), ir_matmul(g, QL_W("up", SB_TYPE_Q5_0, E, F), f));
        x = ir_add(g, x, ir_matmul(g, QL_W("down", SB_TYPE_Q6_K, F, E), gu));
#undef QL_W
    }
    ir_output(g, x, "y");
    return g;
}
static ir_graph *qwen_layers(int NL, int64_t T, int64_t C) { return qwen_layers_bs(NL, T, C, 0); }

#endif
