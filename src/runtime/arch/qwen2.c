/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/qwen2.c — Qwen2 / Qwen2.5 (architectures.md §2): q/k/v biases (bound when present),
 * NEOX RoPE over the whole head, SwiGLU, tied output when output.weight is absent, no SWA.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

sb_status rt_arch_qwen2_hparams(const gguf_file *f, rt_hparams *hp) {
    SB_TRY(rt_hp_common(f, hp));
    if (hp->n_rot != hp->head_dim)
        return sb_fail(SB_ERR_MODEL_HPARAM, "model: qwen2: rope.dimension_count %d must equal the head dim %lld", hp->n_rot,
                       (long long)hp->head_dim);
    hp->rope_mode = IR_ROPE_NEOX;
    hp->act = RT_ACT_SILU;
    return SB_OK;
}
