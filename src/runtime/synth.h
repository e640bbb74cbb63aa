/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/synth.h — random-weight models with the exact tensor names, shapes and metadata of real
 * ones (architectures.md §2-§6, §9), for offline benchmarks and tests (`sb synth`).
 * Layer 2 (runtime; uses base, quant, format, runtime/quantize).
 * Invariants: the weights are a pure function of (preset, seed, tensor name, row): each row has its
 * own RNG stream, so thread count and block size never change the bytes. Tensors are produced one
 * block of rows at a time and fed through rt_quantize_tensors (same mixes as `sb quantize`), so
 * memory stays bounded whatever the model size.
 * Weights ~ N(0, 0.02^2); 1-D norm weights ~ 1 + N(0, 0.02^2); biases ~ N(0, 0.02^2); llama-3
 * rope_freqs computed like convert_hf_to_gguf.py (the preset's factor, low 1, high 4, original context 8192).
 * Non-goals: MoE or multimodal presets; trained-like weight statistics.
 */
#ifndef SB_RUNTIME_SYNTH_H
#define SB_RUNTIME_SYNTH_H

#include "sonicboom.h"
#include "runtime/quantize.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct rt_synth_preset {
    const char *name;       /* "qwen2.5-0.5b" */
    const char *desc;
    const char *arch;       /* general.architecture: qwen2, qwen3, llama, gemma3, gemma4 */
    const char *model_name; /* general.name */
    int n_layer, n_embd, n_head, n_head_kv;
    int head_dim;           /* 0: n_embd / n_head and no key_length key; gemma4: the global layers' */
    int n_ff, n_vocab, n_ctx;
    float rope_base, rope_base_swa, eps;
    int sliding_window;     /* gemma3; 0 = none */
    bool qkv_bias, qk_norm, tied, llama3_rope;
    float rope_factor;      /* llama3 rope scaling factor; 0 = 32 (Llama 3.2); Llama 3.1: 8 */
} rt_synth_preset;

typedef struct rt_synth_opts {
    const char *type_name;  /* mix name, "F32" when NULL */
    const char *vocab_path; /* NULL: synthetic SPM byte-fallback vocabulary of preset->n_vocab tokens */
    uint64_t seed;
    rt_qopts q;
} rt_synth_opts;

const rt_synth_preset *rt_synth_preset_at(int i);
const rt_synth_preset *rt_synth_preset_find(const char *name);

sb_status rt_synth_model(const char *preset, const char *out, const rt_synth_opts *o);

/* The mix a preset is written in when the caller names none: "F32", or the preset's own
 * (gemma4-e4b: "Q3_K_M", the type issue 27 measures E4B in). */
const char *rt_synth_default_type(const rt_synth_preset *p);

/* What rt_synth_model writes, without the weights: the preset's architecture metadata into w (no
 * tokenizer keys) and its tensor list (names, shapes; type F32 before the mix) for an n_vocab-token
 * vocabulary. Free the list with rt_synth_tensors_free. */
typedef struct rt_synth_tensors {
    rt_qtensor *t;
    int64_t n;
    void *names; /* storage of t[i].name */
} rt_synth_tensors;
sb_status rt_synth_layout(const char *preset, int64_t n_vocab, struct gguf_writer *w, rt_synth_tensors *out);
void rt_synth_tensors_free(rt_synth_tensors *t);

/* Fill n floats with N(mean, std^2) from the stream of (seed, key, row) (exposed for tests). */
void rt_synth_normal_row(uint64_t seed, uint64_t key, int64_t row, float mean, float std, float *dst, int64_t n);

#endif
