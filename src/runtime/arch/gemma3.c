/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/gemma3.c — Gemma 3 text decoder (architectures.md §5): embeddings × sqrt(n_embd),
 * per-head q/k norms, post-attention and post-FFW norms, GELU-tanh gate, NEOX RoPE; sliding-window
 * layers (pattern: bool array, or every N-th layer global) use rope.freq_base_swa without scaling,
 * global layers use rope.freq_base with linear scaling; final logit softcap when the key is set.
 * Norm weights already hold the "+1" (folded at conversion).
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

#include <math.h>
#include <stdint.h>

sb_status rt_arch_gemma3_hparams(const gguf_file *f, rt_hparams *hp) {
    SB_TRY(rt_hp_common(f, hp));
    hp->rope_mode = IR_ROPE_NEOX;
    hp->act = RT_ACT_GELU;
    hp->qk_norm = true;
    hp->post_norms = true;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    if (hp->n_layer == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)); /* 27B */
    int64_t n_swa;
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.sliding_window", false, 0, &n_swa));
    if (n_swa > INT32_MAX) return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma3.attention.sliding_window = %lld (at most 2^31-1)", (long long)n_swa);
    hp->n_swa = (int32_t)n_swa;
    SB_TRY(rt_hp_f32(f, hp->arch, "rope.freq_base_swa", false, 10000.0f, &hp->rope_base_swa));
    if (!(hp->rope_base_swa > 0))
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma3.rope.freq_base_swa = %g (must be > 0)", hp->rope_base_swa);
    hp->rope_freq_scale_swa = 1.0f;
    SB_TRY(rt_hp_f32(f, hp->arch, "final_logit_softcapping", false, 0.0f, &hp->final_softcap));
    if (hp->final_softcap < 0) return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma3.final_logit_softcapping = %g", hp->final_softcap);
    if (n_swa == 0) return SB_OK; /* no window: every layer global */
    const gguf_kv *pat = gguf_find(f, "gemma3.attention.sliding_window_pattern");
    if (pat && pat->type == SB_GGUF_ARRAY) {
        if (pat->elem_type != SB_GGUF_BOOL || (int64_t)pat->count != hp->n_layer)
            return sb_fail(SB_ERR_MODEL_HPARAM, "model: gemma3.attention.sliding_window_pattern must be %lld bools",
                           (long long)hp->n_layer);
        for (int64_t l = 0; l < hp->n_layer; l++) hp->is_swa[l] = pat->data[l] != 0;
        return SB_OK;
    }
    int64_t n = 6;
    SB_TRY(rt_hp_u32(f, hp->arch, "attention.sliding_window_pattern", false, 6, &n));
    for (int64_t l = 0; l < hp->n_layer; l++) hp->is_swa[l] = n == 0 ? 1 : (n == 1 ? 0 : (l % n < n - 1));
    return SB_OK;
}
