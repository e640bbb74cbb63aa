/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/qwen3.c — dense Qwen3 (architectures.md §3): like qwen2 plus per-head q/k RMSNorm
 * before RoPE (norm first, then RoPE; V is not normed); head dim from key_length.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

sb_status rt_arch_qwen3_hparams(const gguf_file *f, rt_hparams *hp) {
    SB_TRY(rt_hp_full_rope_silu(f, hp, IR_ROPE_NEOX));
    hp->qk_norm = true;
    return SB_OK;
}
