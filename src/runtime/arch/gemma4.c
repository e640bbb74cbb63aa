/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/gemma4.c — Gemma 4 dense text decoder (E2B, E4B, 31B; architectures.md §6): its
 * hyperparameters and its graph.
 * Layer 2 (runtime). What differs from gemma3's data-driven decoder, and why it has a builder:
 *  - per-layer embeddings (PLE, §6.5): for every token one row of per_layer_token_embd (a gather:
 *    the table stays in the mapping, only the batch's rows are read) plus a projection of the
 *    scaled embedding, normed per layer slice, mixed once into [P, L, T]; layer l takes its slice
 *    (ir_slice) into gelu(inp_gate x) * PLE -> proj -> post_norm, added after the FFN residual;
 *  - two head sizes: sliding-window layers (head_dim key_length_swa, full NEOX RoPE on
 *    freq_base_swa) and global layers (head_dim key_length, RoPE on freq_base with rope_freqs
 *    factors: the 1e30 entries of partial RoPE turn their pairs into the identity);
 *  - shared KV (§6.3): layers >= n_layer_kv compute no K/V and attend over the cache of layer
 *    n_layer_kv-2 (sliding) or n_layer_kv-1 (global): the same kv_store value, so no cache of their
 *    own exists in the graph (and the session, or the batched engine's pool, allocates none);
 *  - paged (the batched engine, b->block_size > 0): K/V written at the slots input, attention read
 *    through the block table, as the generic decoder does;
 *  - q/k norms with weights, a weightless v norm, attention scale 1.0, V := K when attn_v is absent,
 *    per-layer head counts and FFN widths, an optional scalar layer_output_scale (read once when the
 *    graph is recorded: weights are immutable), final logit softcap (default 30).
 * Norm weights are used as stored (no "+1" folding in Gemma 4). MoE (26B-A4B) is refused before
 * this file runs (model_check.c: expert_count / *_exps tensors, SB_ERR_UNSUPPORTED).
 * Non-goals: the fused attn_qkv variant (refused as an unused tensor), multimodal inputs.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define G4_MAX_DIM (1 << 16) /* head dims, head counts, PLE width: far above any real model, keeps products in range */

// ---- hyperparameters (§6.1, §6.3, §6.4) ----

static sb_status pattern(const gguf_file *f, rt_hparams *hp) {
    const gguf_kv *pat = gguf_find(f, "gemma4.attention.sliding_window_pattern");
    if (!pat) return sb_fail(SB_ERR_MODEL_HPARAM, "model: required key \"gemma4.attention.sliding_window_pattern\" is missing");
    if (pat->type != SB_GGUF_ARRAY || pat->elem_type != SB_GGUF_BOOL || (int64_t)pat->count != hp->n_layer)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.attention.sliding_window_pattern must be %lld bools (one per layer)",
                       (long long)hp->n_layer);
    for (int64_t l = 0; l < hp->n_layer; l++) hp->is_swa[l] = pat->data[l] != 0;
    return SB_OK;
}

static sb_status head_dims(const gguf_file *f, rt_hparams *hp) {
    int64_t v_swa, n_rot_swa;
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.key_length_swa", true, 0, &hp->head_dim_swa));
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.value_length_swa", true, 0, &v_swa));
    if (v_swa != hp->head_dim_swa || hp->head_dim_swa <= 0 || hp->head_dim_swa > G4_MAX_DIM)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4: key_length_swa %lld and value_length_swa %lld must be equal and in 1..%d",
                       (long long)hp->head_dim_swa, (long long)v_swa, G4_MAX_DIM);
    if (hp->head_dim > G4_MAX_DIM)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.attention.key_length = %lld (at most %d)", (long long)hp->head_dim, G4_MAX_DIM);
    SB_TRY(rt_hp_u32(f, hp->arch, "rope.dimension_count_swa", false, (uint32_t)hp->n_rot, &n_rot_swa));
    if (n_rot_swa < 2 || n_rot_swa > hp->head_dim_swa || n_rot_swa % 2)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.rope.dimension_count_swa = %lld (sliding-window head dim %lld)",
                       (long long)n_rot_swa, (long long)hp->head_dim_swa);
    hp->n_rot_swa = (int32_t)n_rot_swa;
    for (int64_t l = 0; l < hp->n_layer; l++)
        if (hp->layer_n_head[l] > G4_MAX_DIM)
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4: layer %lld has %lld heads (at most %d)", (long long)l,
                           (long long)hp->layer_n_head[l], G4_MAX_DIM);
    return SB_OK;
}

/* Shared KV (§6.3): the trailing shared_kv_layers layers read layer K-2's cache (sliding) or
 * K-1's (global), K = n_layer - shared_kv_layers; those layers must exist and have that type. */
static sb_status shared_kv(const gguf_file *f, rt_hparams *hp) {
    int64_t shared;
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.shared_kv_layers", false, 0, &shared));
    if (shared >= hp->n_layer)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.attention.shared_kv_layers = %lld leaves no layer of the %lld with its own KV",
                       (long long)shared, (long long)hp->n_layer);
    hp->n_layer_kv = hp->n_layer - shared;
    const int64_t K = hp->n_layer_kv;
    for (int64_t l = K; l < hp->n_layer; l++) {
        const int64_t src = rt_hp_kv_layer(hp, l);
        if (src < 0 || hp->is_swa[src] != hp->is_swa[l])
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4: layer %lld (%s) shares the KV of layer %lld (= %lld - %d), which %s; "
                           "shared_kv_layers %lld does not fit sliding_window_pattern", (long long)l, hp->is_swa[l] ? "sliding" : "global",
                           (long long)src, (long long)K, hp->is_swa[l] ? 2 : 1,
                           src < 0 ? "does not exist" : hp->is_swa[l] ? "is global" : "is sliding", (long long)shared);
        if (hp->layer_n_head[l] % hp->layer_n_head_kv[src])
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4: layer %lld has %lld query heads, not a multiple of the %lld KV heads of "
                           "layer %lld whose cache it shares", (long long)l, (long long)hp->layer_n_head[l],
                           (long long)hp->layer_n_head_kv[src], (long long)src);
    }
    return SB_OK;
}

sb_status rt_arch_gemma4_hparams(const gguf_file *f, rt_hparams *hp) {
    SB_TRY(rt_hp_common_per_layer(f, hp));
    hp->rope_mode = IR_ROPE_NEOX;
    hp->act = RT_ACT_GELU;
    hp->qk_norm = true;
    hp->post_norms = true;
    hp->attn_scale = 1.0f; /* the q/k norms replace 1/sqrt(d) */
    hp->embd_scale = sqrtf((float)hp->n_embd);
    SB_TRY(pattern(f, hp));
    SB_TRY(head_dims(f, hp));
    int64_t n_swa;
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.sliding_window", true, 0, &n_swa));
    if (n_swa < 1 || n_swa > INT32_MAX)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.attention.sliding_window = %lld (1..2^31-1)", (long long)n_swa);
    hp->n_swa = (int32_t)n_swa;
    SB_TRY(rt_hp_f32(f, hp->arch, "rope.freq_base_swa", false, 10000.0f, &hp->rope_base_swa));
    if (!(hp->rope_base_swa > 0))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.rope.freq_base_swa = %g (must be > 0)", hp->rope_base_swa);
    hp->rope_freq_scale_swa = 1.0f;
    SB_TRY(rt_hp_u32(f, hp->arch, "embedding_length_per_layer_input", true, 0, &hp->n_embd_per_layer));
    if (hp->n_embd_per_layer > G4_MAX_DIM)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.embedding_length_per_layer_input = %lld (at most %d)",
                       (long long)hp->n_embd_per_layer, G4_MAX_DIM);
    SB_TRY(rt_hp_f32(f, hp->arch, "final_logit_softcapping", false, 30.0f, &hp->final_softcap));
    if (hp->final_softcap < 0) return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma4.final_logit_softcapping = %g", hp->final_softcap);
    return shared_kv(f, hp);
}

// ---- the graph (§6.5) ----

typedef struct g4 {
    rt_build *b;
    ir_graph *g;
    const rt_hparams *hp;
    ir_ref tok, freqs;
    rt_kv_io io;              /* positions, and where K/V are written and read (paged or not) */
    ir_ref ple;               /* [P, L, T] per-layer inputs, or IR_NONE when P = 0 */
    ir_ref kc[RT_MAX_LAYERS], vc[RT_MAX_LAYERS]; /* each own-KV layer's cache after its write */
} g4;

static ir_ref norm(g4 *c, ir_ref x, ir_ref w) { return ir_mul(c->g, ir_rms_norm(c->g, x, c->hp->eps), w); }

/* PLI[:, l, t] = (RMSNorm(proj(x_t)[l] / sqrt(E); proj_norm) + ple_table[tok_t][l] * sqrt(P)) / sqrt(2). */
static ir_ref per_layer_inputs(g4 *c, ir_ref x) {
    const rt_hparams *hp = c->hp;
    const int64_t P = hp->n_embd_per_layer, L = hp->n_layer, E = hp->n_embd, T = c->b->T;
    ir_ref tab = rt_weight(c->b, true, P * L, hp->n_vocab, "per_layer_token_embd.weight");
    ir_ref proj = rt_weight(c->b, true, E, P * L, "per_layer_model_proj.weight");
    ir_ref pnorm = rt_weight(c->b, true, P, 0, "per_layer_proj_norm.weight");
    ir_ref pt = ir_scale(c->g, ir_get_rows(c->g, tab, c->tok), sqrtf((float)P));
    ir_ref pp = ir_scale(c->g, ir_matmul(c->g, proj, x), 1.0f / sqrtf((float)E));
    pp = norm(c, ir_reshape(c->g, pp, (int64_t[4]){P, L * T, 1, 1}), pnorm);
    ir_ref mix = ir_scale(c->g, ir_add(c->g, pp, ir_reshape(c->g, pt, (int64_t[4]){P, L * T, 1, 1})), 1.0f / sqrtf(2.0f));
    return ir_reshape(c->g, mix, (int64_t[4]){P, L, T, 1});
}

/* The value of layer_output_scale (a [1] weight) when the layer has one, else 1. */
static float layer_scale(g4 *c, int64_t l) {
    char name[64];
    snprintf(name, sizeof name, "blk.%lld.layer_output_scale.weight", (long long)l);
    if (rt_weight(c->b, false, 1, 0, "%s", name) == IR_NONE) return 1.0f; /* absent, or a failure recorded in b->status */
    const gguf_tensor *t = gguf_find_tensor(&c->b->m->file, name);
    float v = 1.0f;
    qk_get(t->type)->to_float(t->data, &v, 1);
    return v;
}

/* Attention of layer l: q from h; K/V computed and stored when the layer owns a cache, else read
 * from the layer it shares. Returns [nh*hd, T]. */
static ir_ref attention(g4 *c, int64_t l, ir_ref h) {
    const rt_hparams *hp = c->hp;
    ir_graph *g = c->g;
    const bool swa = hp->is_swa[l];
    const int64_t E = hp->n_embd, T = c->b->T, hd = rt_hp_head_dim(hp, l), nh = hp->layer_n_head[l];
    const int64_t src = rt_hp_kv_layer(hp, l), nkv = hp->layer_n_head_kv[src], Dkv = nkv * hd;
    const long long L = (long long)l;
    ir_rope_params rp = {.n_rot = swa ? hp->n_rot_swa : hp->n_rot, .mode = IR_ROPE_NEOX,
                         .freq_base = swa ? hp->rope_base_swa : hp->rope_base,
                         .freq_scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale};
    ir_ref ff = swa ? IR_NONE : c->freqs;
    ir_ref q = ir_matmul(g, rt_weight(c->b, true, E, nh * hd, "blk.%lld.attn_q.weight", L), h);
    q = norm(c, ir_reshape(g, q, (int64_t[4]){hd, nh, T, 1}), rt_weight(c->b, true, hd, 0, "blk.%lld.attn_q_norm.weight", L));
    q = ir_rope(g, q, c->io.pos, ff, &rp);
    if (src == l) {
        ir_ref kr = ir_matmul(g, rt_weight(c->b, true, E, Dkv, "blk.%lld.attn_k.weight", L), h);
        ir_ref vw = rt_weight(c->b, false, E, Dkv, "blk.%lld.attn_v.weight", L);
        ir_ref vr = vw != IR_NONE ? ir_matmul(g, vw, h) : kr; /* no attn_v: V := K's projection */
        ir_ref k = norm(c, ir_reshape(g, kr, (int64_t[4]){hd, nkv, T, 1}), rt_weight(c->b, true, hd, 0, "blk.%lld.attn_k_norm.weight", L));
        k = ir_rope(g, k, c->io.pos, ff, &rp);
        ir_ref v = ir_rms_norm(g, ir_reshape(g, vr, (int64_t[4]){hd, nkv, T, 1}), hp->eps);
        ir_ref kc = rt_kv_cache(c->b, l, 'k', Dkv), vc = rt_kv_cache(c->b, l, 'v', Dkv);
        c->kc[l] = ir_kv_store(g, kc, ir_reshape(g, k, (int64_t[4]){Dkv, T, 1, 1}), c->io.slots);
        c->vc[l] = ir_kv_store(g, vc, ir_reshape(g, v, (int64_t[4]){Dkv, T, 1, 1}), c->io.slots);
    }
    ir_attn_params ap = {.n_head_kv = (int32_t)nkv, .head_dim = (int32_t)hd, .scale = hp->attn_scale,
                         .window = swa ? hp->n_swa : 0, .softcap = 0};
    return rt_attention(c->b, &c->io, q, c->kc[src], c->vc[src], &ap);
}

static ir_ref layer(g4 *c, int64_t l, ir_ref x) {
    const rt_hparams *hp = c->hp;
    ir_graph *g = c->g;
    const int64_t E = hp->n_embd, F = hp->layer_n_ff[l], nh = hp->layer_n_head[l], hd = rt_hp_head_dim(hp, l), T = c->b->T;
    const long long L = (long long)l;
    ir_ref a = attention(c, l, norm(c, x, rt_weight(c->b, true, E, 0, "blk.%lld.attn_norm.weight", L)));
    ir_ref o = ir_matmul(g, rt_weight(c->b, true, nh * hd, E, "blk.%lld.attn_output.weight", L), a);
    x = ir_add(g, x, norm(c, o, rt_weight(c->b, true, E, 0, "blk.%lld.post_attention_norm.weight", L)));
    ir_ref h = norm(c, x, rt_weight(c->b, true, E, 0, "blk.%lld.ffn_norm.weight", L));
    ir_ref gate = ir_matmul(g, rt_weight(c->b, true, E, F, "blk.%lld.ffn_gate.weight", L), h);
    ir_ref up = ir_matmul(g, rt_weight(c->b, true, E, F, "blk.%lld.ffn_up.weight", L), h);
    ir_ref f = ir_matmul(g, rt_weight(c->b, true, F, E, "blk.%lld.ffn_down.weight", L), ir_geglu(g, gate, up));
    x = ir_add(g, x, norm(c, f, rt_weight(c->b, true, E, 0, "blk.%lld.post_ffw_norm.weight", L)));
    if (c->ple != IR_NONE) {
        const int64_t P = hp->n_embd_per_layer;
        ir_ref pli = ir_reshape(g, ir_slice(g, c->ple, (int32_t)l, 1), (int64_t[4]){P, T, 1, 1});
        ir_ref pg = ir_matmul(g, rt_weight(c->b, true, E, P, "blk.%lld.inp_gate.weight", L), x);
        ir_ref pe = ir_matmul(g, rt_weight(c->b, true, P, E, "blk.%lld.proj.weight", L), ir_geglu(g, pg, pli));
        x = ir_add(g, x, norm(c, pe, rt_weight(c->b, true, E, 0, "blk.%lld.post_norm.weight", L)));
    }
    const float s = layer_scale(c, l);
    return s != 1.0f ? ir_scale(g, x, s) : x;
}

sb_status rt_build_gemma4(rt_build *b) {
    const rt_hparams *hp = &b->m->hp;
    ir_graph *g = b->g;
    const int64_t E = hp->n_embd, V = hp->n_vocab, T = b->T;
    g4 c = {.b = b, .g = g, .hp = hp, .ple = IR_NONE};
    c.tok = ir_input_tokens(g, T);
    ir_ref pos = ir_input_pos(g, T);
    ir_ref rows = b->n_out < T ? ir_input_out_rows(g, b->n_out) : IR_NONE;
    c.io = rt_kv_inputs(b, pos);
    ir_ref emb = rt_weight(b, true, E, V, "token_embd.weight");
    ir_ref x = ir_scale(g, ir_get_rows(g, emb, c.tok), hp->embd_scale);
    bool any_global = false;
    for (int64_t l = 0; l < hp->n_layer; l++) any_global |= !hp->is_swa[l];
    c.freqs = rt_weight(b, any_global, hp->n_rot / 2, 0, "rope_freqs.weight");
    if (hp->n_embd_per_layer > 0) c.ple = per_layer_inputs(&c, x);
    for (int64_t l = 0; l < hp->n_layer && b->status == SB_OK; l++) x = layer(&c, l, x);
    x = norm(&c, x, rt_weight(b, true, E, 0, "output_norm.weight"));
    ir_ref out_w = rt_weight(b, false, E, V, "output.weight");
    if (out_w == IR_NONE) out_w = emb; /* tied embeddings (every Gemma 4) */
    ir_ref logits = ir_matmul(g, out_w, x);
    if (hp->final_softcap > 0) logits = ir_softcap(g, logits, hp->final_softcap);
    ir_output(g, rows != IR_NONE ? ir_select_rows(g, logits, rows) : logits, "logits");
    if (b->status != SB_OK) return b->status;
    sb_status s = ir_graph_status(g);
    if (s != SB_OK) return sb_fail_context(s, "model: building the gemma4 graph");
    return SB_OK;
}
