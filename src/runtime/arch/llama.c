/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/arch/llama.c — Llama 2/3.x (architectures.md §4): NORMAL (adjacent-pair) RoPE because the
 * converter permuted Q/K rows; Llama 3 frequency divisors from rope_freqs.weight when present;
 * optional biases; untied or tied output. rope.dimension_count must equal the head dim.
 */
#include "runtime/arch/arch.h"
#include "base/status.h"

sb_status rt_arch_llama_hparams(const gguf_file *f, rt_hparams *hp) {
    return rt_hp_full_rope_silu(f, hp, IR_ROPE_NORMAL);
}
