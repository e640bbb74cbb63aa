/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/qwen2.c — Qwen2 / Qwen2.5 (architectures.md §2): q/k/v biases (bound when present),
 * NEOX RoPE over the whole head, SwiGLU, tied output when output.weight is absent, no SWA.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

sb_status rt_arch_qwen2_hparams(const gguf_file *f, rt_hparams *hp) {
    return rt_hp_full_rope_silu(f, hp, IR_ROPE_NEOX);
}
