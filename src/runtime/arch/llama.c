/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/llama.c — Llama 2/3.x (architectures.md §4): NORMAL (adjacent-pair) RoPE because the
 * converter permuted Q/K rows; Llama 3 frequency divisors from rope_freqs.weight when present;
 * optional biases; untied or tied output. rope.dimension_count must equal the head dim.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

sb_status rt_arch_llama_hparams(const gguf_file *f, rt_hparams *hp) {
    SB_TRY(rt_hp_common(f, hp));
    if (hp->n_rot != hp->head_dim)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: llama: rope.dimension_count %d must equal the head dim %lld", hp->n_rot,
                       (long long)hp->head_dim);
    hp->rope_mode = IR_ROPE_NORMAL;
    hp->act = RT_ACT_SILU;
    return SB_OK;
}
