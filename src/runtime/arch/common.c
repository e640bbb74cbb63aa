/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/common.c — the shared pieces of every dense decoder: generic hyperparameters
 * (architectures.md §1), the checked weight binder, and the decoder graph (§2.3, §3.3, §4.4, §5.3),
 * whose per-architecture differences are all data in rt_hparams.
 * Layer 2 (runtime). The graph asks for logits of every position it is given; dead-compute
 * elimination (graph/passes/dce.c) moves the out_rows selection up so prefill runs the output
 * norm and the vocabulary matmul only on the rows asked for.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"
#include "quant/types.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// ---- hyperparameters ----

static void key_of(char *buf, size_t cap, const char *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
}

/* Find "<arch>.<suffix>" into key/kv. *kv = NULL when it is absent and optional; SB_ERR_MODEL_HPARAM
 * when it is absent and required. */
static sb_status find_hp(const gguf_file *f, const char *arch, const char *suffix, bool required, char key[160],
                         const gguf_kv **kv) {
    key_of(key, 160, arch, suffix);
    *kv = gguf_find(f, key);
    if (!*kv && required) return sb_fail(SB_ERR_MODEL_HPARAM, "model: required key \"%s\" is missing", key);
    return SB_OK;
}

sb_status rt_hp_u32(const gguf_file *f, const char *arch, const char *suffix, bool required, uint32_t def, int64_t *out) {
    char key[160];
    const gguf_kv *kv;
    SB_TRY(find_hp(f, arch, suffix, required, key, &kv));
    if (!kv) {
        *out = def;
        return SB_OK;
    }
    if (kv->type == SB_GGUF_ARRAY)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" is a per-layer array, which this runtime does not support yet", key);
    int64_t v;
    sb_status s = gguf_kv_i64(kv, 0, &v);
    if (s != SB_OK) return sb_fail_context(SB_ERR_MODEL_HPARAM, "model: key \"%s\"", key);
    if (v < 0 || v > UINT32_MAX) return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" = %lld out of range", key, (long long)v);
    *out = v;
    return SB_OK;
}

sb_status rt_hp_f32(const gguf_file *f, const char *arch, const char *suffix, bool required, float def, float *out) {
    char key[160];
    const gguf_kv *kv;
    SB_TRY(find_hp(f, arch, suffix, required, key, &kv));
    if (!kv) {
        *out = def;
        return SB_OK;
    }
    double v;
    if (kv->type == SB_GGUF_ARRAY || gguf_kv_f64(kv, 0, &v) != SB_OK)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" must be a number", key);
    if (!isfinite(v)) return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" is not finite", key);
    *out = (float)v;
    return SB_OK;
}

/* "<arch>.<suffix>" for every layer: a scalar, or when arrays is true an array of exactly n_layer
 * integers (gemma4's per-layer head counts and FFN widths). out[l] per layer, *max the largest. */
static sb_status hp_layers(const gguf_file *f, rt_hparams *hp, const char *suffix, bool required, int64_t def, bool arrays,
                           int64_t *out, int64_t *max) {
    char key[160];
    const gguf_kv *kv;
    SB_TRY(find_hp(f, hp->arch, suffix, required, key, &kv));
    if (!kv || kv->type != SB_GGUF_ARRAY || !arrays) {
        SB_TRY(rt_hp_u32(f, hp->arch, suffix, required, (uint32_t)def, max));
        for (int64_t l = 0; l < hp->n_layer && l < RT_MAX_LAYERS; l++) out[l] = *max;
        return SB_OK;
    }
    if (hp->n_layer <= 0 || hp->n_layer > RT_MAX_LAYERS)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.block_count = %lld (supported 1..%d)", hp->arch, (long long)hp->n_layer,
                       RT_MAX_LAYERS);
    if ((int64_t)kv->count != hp->n_layer)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" has %llu values for %lld layers", key, (unsigned long long)kv->count,
                       (long long)hp->n_layer);
    *max = 0;
    for (int64_t l = 0; l < hp->n_layer; l++) {
        int64_t v;
        if (gguf_kv_i64(kv, (uint64_t)l, &v) != SB_OK) return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" must hold integers", key);
        if (v < 0 || v > UINT32_MAX)
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\"[%lld] = %lld out of range", key, (long long)l, (long long)v);
        out[l] = v;
        if (v > *max) *max = v;
    }
    return SB_OK;
}

/* Every layer's head counts divide and its FFN width is positive. */
static sb_status check_layer_shapes(const rt_hparams *hp) {
    for (int64_t l = 0; l < hp->n_layer; l++) {
        const int64_t nh = hp->layer_n_head[l], nkv = hp->layer_n_head_kv[l];
        if (nh <= 0 || nkv <= 0 || nh % nkv)
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: layer %lld: head_count %lld, head_count_kv %lld are inconsistent", hp->arch,
                           (long long)l, (long long)nh, (long long)nkv);
        if (hp->layer_n_ff[l] <= 0)
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: layer %lld: feed_forward_length %lld must be positive", hp->arch,
                           (long long)l, (long long)hp->layer_n_ff[l]);
    }
    return SB_OK;
}

static sb_status hp_common(const gguf_file *f, rt_hparams *hp, bool arrays) {
    const char *a = hp->arch;
    SB_TRY(rt_hp_u32(f, a, "context_length", true, 0, &hp->n_ctx_train));
    SB_TRY(rt_hp_u32(f, a, "embedding_length", true, 0, &hp->n_embd));
    SB_TRY(rt_hp_u32(f, a, "block_count", true, 0, &hp->n_layer));
    SB_TRY(hp_layers(f, hp, "feed_forward_length", true, 0, arrays, hp->layer_n_ff, &hp->n_ff));
    SB_TRY(hp_layers(f, hp, "attention.head_count", true, 0, arrays, hp->layer_n_head, &hp->n_head));
    char key[160];
    key_of(key, sizeof key, a, "attention.head_count_kv");
    const gguf_kv *kvh = gguf_find(f, key);
    if (kvh && kvh->type == SB_GGUF_ARRAY && arrays) {
        SB_TRY(hp_layers(f, hp, "attention.head_count_kv", true, 0, arrays, hp->layer_n_head_kv, &hp->n_head_kv));
    } else {
        SB_TRY(rt_hp_u32(f, a, "attention.head_count_kv", false, (uint32_t)hp->n_head, &hp->n_head_kv));
        for (int64_t l = 0; l < hp->n_layer && l < RT_MAX_LAYERS; l++) hp->layer_n_head_kv[l] = kvh ? hp->n_head_kv : hp->layer_n_head[l];
    }
    if (hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || (!arrays && hp->n_head % hp->n_head_kv))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: embedding_length %lld, head_count %lld, head_count_kv %lld are inconsistent",
                       a, (long long)hp->n_embd, (long long)hp->n_head, (long long)hp->n_head_kv);
    if (hp->n_layer <= 0 || hp->n_layer > RT_MAX_LAYERS)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.block_count = %lld (supported 1..%d)", a, (long long)hp->n_layer, RT_MAX_LAYERS);
    if (hp->n_ctx_train <= 0 || hp->n_ff <= 0)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: context_length %lld and feed_forward_length %lld must be positive", a,
                       (long long)hp->n_ctx_train, (long long)hp->n_ff);
    SB_TRY(check_layer_shapes(hp));
    int64_t vlen;
    key_of(key, sizeof key, a, "attention.key_length");
    if (!gguf_find(f, key) && hp->n_embd % hp->n_head)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.embedding_length %lld is not a multiple of %s.attention.head_count %lld "
                       "(and there is no %s to give the head dim)", a, (long long)hp->n_embd, a, (long long)hp->n_head, key);
    SB_TRY(rt_hp_u32(f, a, "attention.key_length", false, (uint32_t)(hp->n_embd / hp->n_head), &hp->head_dim));
    SB_TRY(rt_hp_u32(f, a, "attention.value_length", false, (uint32_t)hp->head_dim, &vlen));
    if (vlen != hp->head_dim || hp->head_dim <= 0)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: key_length %lld != value_length %lld is not supported", a,
                       (long long)hp->head_dim, (long long)vlen);
    int64_t n_rot;
    SB_TRY(rt_hp_u32(f, a, "rope.dimension_count", false, (uint32_t)hp->head_dim, &n_rot));
    if (n_rot <= 0 || n_rot > hp->head_dim || n_rot % 2)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.rope.dimension_count = %lld (head dim %lld)", a, (long long)n_rot,
                       (long long)hp->head_dim);
    hp->n_rot = (int32_t)n_rot;
    SB_TRY(rt_hp_f32(f, a, "attention.layer_norm_rms_epsilon", true, 0, &hp->eps));
    if (!(hp->eps > 0 && hp->eps < 1)) /* 0 divides by zero on an all-zero row; < 0 takes the root of a negative */
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.attention.layer_norm_rms_epsilon = %g (must be > 0 and < 1)", a, hp->eps);
    SB_TRY(rt_hp_f32(f, a, "rope.freq_base", false, 10000.0f, &hp->rope_base));
    if (!(hp->rope_base > 0)) /* base^(-2i/n_rot): 0 or less gives Inf/NaN angles */
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.rope.freq_base = %g (must be > 0)", a, hp->rope_base);
    /* rope scaling: none | linear (default) ; yarn/longrope are not supported yet */
    key_of(key, sizeof key, a, "rope.scaling.type");
    sb_strview type = {"linear", 6};
    if (gguf_find(f, key) && gguf_get_str(f, key, &type) != SB_OK)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: key \"%s\" must be a string", key);
    float factor = 0;
    key_of(key, sizeof key, a, "rope.scaling.factor");
    if (gguf_find(f, key)) SB_TRY(rt_hp_f32(f, a, "rope.scaling.factor", false, 0, &factor));
    else SB_TRY(rt_hp_f32(f, a, "rope.scale_linear", false, 0, &factor));
    if (type.len == 4 && !memcmp(type.ptr, "none", 4)) factor = 0;
    else if (!(type.len == 6 && !memcmp(type.ptr, "linear", 6)))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.rope.scaling.type \"%.*s\" is not supported (none, linear)", a,
                       (int)type.len, type.ptr);
    if (factor < 0 || (factor > 0 && !isfinite(1.0f / factor)))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s.rope.scaling.factor = %g (must be 0 = none, or > 0 with a finite inverse)", a,
                       factor);
    hp->rope_freq_scale = factor > 0 ? 1.0f / factor : 1.0f;
    hp->rope_base_swa = hp->rope_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    hp->head_dim_swa = hp->head_dim;
    hp->n_rot_swa = hp->n_rot;
    hp->n_layer_kv = hp->n_layer;
    hp->n_embd_per_layer = 0;
    return SB_OK;
}

sb_status rt_hp_common(const gguf_file *f, rt_hparams *hp) { return hp_common(f, hp, false); }
sb_status rt_hp_common_per_layer(const gguf_file *f, rt_hparams *hp) { return hp_common(f, hp, true); }

sb_status rt_hp_full_rope_silu(const gguf_file *f, rt_hparams *hp, int32_t rope_mode) {
    SB_TRY(rt_hp_common(f, hp));
    if (hp->n_rot != hp->head_dim)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: %s: rope.dimension_count %d must equal the head dim %lld", hp->arch,
                       hp->n_rot, (long long)hp->head_dim);
    hp->rope_mode = rope_mode;
    hp->act = RT_ACT_SILU;
    return SB_OK;
}

// ---- weights ----

ir_ref rt_weight(rt_build *b, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    if (b->status != SB_OK) return IR_NONE;
    char name[GGUF_MAX_NAME + 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const gguf_tensor *t = gguf_find_tensor(&b->m->file, name);
    if (!t) {
        if (required) b->status = sb_fail(SB_ERR_MODEL_TENSOR_MISSING, "model: %s: tensor \"%s\" is missing", b->m->hp.arch, name);
        return IR_NONE;
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
        b->status = sb_fail(SB_ERR_MODEL_TENSOR_SHAPE, "model: tensor \"%s\" has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)ne0, (long long)want1);
        return IR_NONE;
    }
    const qk_traits *tr = qk_get(t->type);
    if (!tr->to_float) {
        b->status = sb_fail(SB_ERR_MODEL_TENSOR_TYPE, "model: tensor \"%s\" has type %s, which the CPU backend cannot run", name,
                            tr->name ? tr->name : "?");
        return IR_NONE;
    }
    return ir_input_weight(b->g, name, t->type, t->ne);
}

// ---- the decoder graph ----

static ir_ref norm(rt_build *b, ir_ref x, ir_ref w) {
    return ir_mul(b->g, ir_rms_norm(b->g, x, b->m->hp.eps), w);
}

static ir_ref bias(rt_build *b, ir_ref x, ir_ref bias_w) {
    return bias_w == IR_NONE ? x : ir_add(b->g, x, bias_w);
}

ir_ref rt_kv_cache(rt_build *b, int64_t l, char kind, int64_t Dkv) {
    char name[32];
    snprintf(name, sizeof name, "cache_%c.%lld", kind, (long long)l);
    if (b->n_swa_ring > 0 && b->m->hp.is_swa[l])
        return ir_input_kv_ring(b->g, name, b->kv_type, (int64_t[4]){Dkv, b->n_swa_ring, 1, 1});
    return ir_input_kv(b->g, name, b->kv_type, (int64_t[4]){Dkv, b->n_ctx, 1, 1});
}

rt_kv_io rt_kv_inputs(rt_build *b, ir_ref pos) {
    if (b->block_size <= 0) return (rt_kv_io){.pos = pos, .slots = pos, .table = IR_NONE};
    return (rt_kv_io){.pos = pos, .slots = ir_input_slots(b->g, b->T), .table = ir_input_block_table(b->g, b->n_blk_max, b->T)};
}

ir_ref rt_attention(rt_build *b, const rt_kv_io *io, ir_ref q, ir_ref k, ir_ref v, const ir_attn_params *ap) {
    if (io->table == IR_NONE) return ir_attention(b->g, q, k, v, io->pos, ap);
    return ir_attention_paged(b->g, q, k, v, io->pos, io->table, b->block_size, ap);
}

sb_status rt_build_decoder(rt_build *b) {
    if (b->m->arch && b->m->arch->build) return b->m->arch->build(b); /* each builds its paged form too */
    const rt_hparams *hp = &b->m->hp;
    ir_graph *g = b->g;
    const int64_t E = hp->n_embd, V = hp->n_vocab, H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim, F = hp->n_ff, T = b->T;
    const int64_t Dq = H * D, Dkv = Hkv * D;
    /* every row's logits (a decode step, eval_all): no out_rows selection — it would be the identity,
     * and after dce's move up two copies a step (the residual and the attention output) */
    ir_ref tok = ir_input_tokens(g, T), pos = ir_input_pos(g, T), rows = b->n_out < T ? ir_input_out_rows(g, b->n_out) : IR_NONE;
    const rt_kv_io io = rt_kv_inputs(b, pos);
    ir_ref emb = rt_weight(b, true, E, V, "token_embd.weight");
    ir_ref x = ir_get_rows(g, emb, tok);
    if (hp->embd_scale != 1.0f) x = ir_scale(g, x, hp->embd_scale);
    ir_ref freqs = rt_weight(b, false, hp->n_rot / 2, 0, "rope_freqs.weight");
    for (int64_t l = 0; l < hp->n_layer && b->status == SB_OK; l++) {
        const bool swa = hp->is_swa[l];
        ir_ref h = norm(b, x, rt_weight(b, true, E, 0, "blk.%lld.attn_norm.weight", (long long)l));
        ir_ref q = bias(b, ir_matmul(g, rt_weight(b, true, E, Dq, "blk.%lld.attn_q.weight", (long long)l), h),
                        rt_weight(b, false, Dq, 0, "blk.%lld.attn_q.bias", (long long)l));
        ir_ref k = bias(b, ir_matmul(g, rt_weight(b, true, E, Dkv, "blk.%lld.attn_k.weight", (long long)l), h),
                        rt_weight(b, false, Dkv, 0, "blk.%lld.attn_k.bias", (long long)l));
        ir_ref v = bias(b, ir_matmul(g, rt_weight(b, true, E, Dkv, "blk.%lld.attn_v.weight", (long long)l), h),
                        rt_weight(b, false, Dkv, 0, "blk.%lld.attn_v.bias", (long long)l));
        if (b->status != SB_OK) break;
        q = ir_reshape(g, q, (int64_t[4]){D, H, T, 1});
        k = ir_reshape(g, k, (int64_t[4]){D, Hkv, T, 1});
        if (hp->qk_norm) {
            q = norm(b, q, rt_weight(b, true, D, 0, "blk.%lld.attn_q_norm.weight", (long long)l));
            k = norm(b, k, rt_weight(b, true, D, 0, "blk.%lld.attn_k_norm.weight", (long long)l));
        }
        ir_rope_params rp = {.n_rot = hp->n_rot, .mode = hp->rope_mode,
                             .freq_base = swa ? hp->rope_base_swa : hp->rope_base,
                             .freq_scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale};
        q = ir_rope(g, q, pos, freqs, &rp);
        k = ir_rope(g, k, pos, freqs, &rp);
        ir_ref kc = ir_kv_store(g, rt_kv_cache(b, l, 'k', Dkv), ir_reshape(g, k, (int64_t[4]){Dkv, T, 1, 1}), io.slots);
        ir_ref vc = ir_kv_store(g, rt_kv_cache(b, l, 'v', Dkv), v, io.slots);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = hp->attn_scale,
                             .window = swa ? hp->n_swa : 0, .softcap = 0};
        ir_ref a = rt_attention(b, &io, q, kc, vc, &ap);
        ir_ref o = bias(b, ir_matmul(g, rt_weight(b, true, Dq, E, "blk.%lld.attn_output.weight", (long long)l), a),
                        rt_weight(b, false, E, 0, "blk.%lld.attn_output.bias", (long long)l));
        if (hp->post_norms) o = norm(b, o, rt_weight(b, true, E, 0, "blk.%lld.post_attention_norm.weight", (long long)l));
        x = ir_add(g, x, o);
        h = norm(b, x, rt_weight(b, true, E, 0, "blk.%lld.ffn_norm.weight", (long long)l));
        ir_ref gate = ir_matmul(g, rt_weight(b, true, E, F, "blk.%lld.ffn_gate.weight", (long long)l), h);
        ir_ref up = ir_matmul(g, rt_weight(b, true, E, F, "blk.%lld.ffn_up.weight", (long long)l), h);
        ir_ref f = hp->act == RT_ACT_GELU ? ir_geglu(g, gate, up) : ir_swiglu(g, gate, up);
        f = ir_matmul(g, rt_weight(b, true, F, E, "blk.%lld.ffn_down.weight", (long long)l), f);
        if (hp->post_norms) f = norm(b, f, rt_weight(b, true, E, 0, "blk.%lld.post_ffw_norm.weight", (long long)l));
        x = ir_add(g, x, f);
    }
    if (b->status != SB_OK) return b->status;
    x = norm(b, x, rt_weight(b, true, E, 0, "output_norm.weight"));
    ir_ref out_w = rt_weight(b, false, E, V, "output.weight");
    if (out_w == IR_NONE) out_w = emb; /* tied embeddings */
    ir_ref logits = bias(b, ir_matmul(g, out_w, x), rt_weight(b, false, V, 0, "output.bias"));
    if (hp->final_softcap > 0) logits = ir_softcap(g, logits, hp->final_softcap);
    ir_output(g, rows != IR_NONE ? ir_select_rows(g, logits, rows) : logits, "logits");
    if (b->status != SB_OK) return b->status;
    sb_status s = ir_graph_status(g);
    if (s != SB_OK) return sb_fail_context(s, "model: building the %s graph", hp->arch);
    return SB_OK;
}
