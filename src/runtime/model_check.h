/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/model_check.h — the load-time checks of a model file that go beyond "every tensor the
 * graph needs exists with its shape and type" (which the builder checks while binding): structure
 * this runtime does not implement (MoE, multi-token prediction, non-causal attention), layer indices
 * against block_count, tensors the graph would silently ignore, and NaN/Inf in weights.
 * Layer 2 (runtime). Every failure names the file, the key or tensor and the values; statuses:
 * SB_ERR_UNSUPPORTED (a feature), SB_ERR_MODEL_HPARAM (a key that disagrees with the tensors),
 * SB_ERR_MODEL_TENSOR_EXTRA (a tensor nothing reads), SB_ERR_MODEL_NAN (a non-finite weight).
 */
#ifndef SB_RUNTIME_MODEL_CHECK_H
#define SB_RUNTIME_MODEL_CHECK_H

#include "runtime/model.h"

/* Before the hyperparameters are read: MoE keys (<arch>.expert_count / expert_used_count > 0) and
 * tensors (*_exps, *_shexp, ffn_gate_inp), nextn_predict_layers > 0, attention.causal = false. */
sb_status rt_check_unsupported(const gguf_file *f, const char *arch, const char *path);

/* After the hyperparameters: every blk.N.* tensor has N < block_count and every layer has tensors;
 * <arch>.vocab_size, when present, equals the token_embd rows. */
sb_status rt_check_layers(const gguf_file *f, const rt_hparams *hp, const char *path);

/* After binding: every tensor of the file is read by the graph (bound[i] != 0 for tensor i). */
sb_status rt_check_unused(const gguf_file *f, const uint8_t *bound, const char *arch, const char *path);

/* NaN/Inf anywhere in tensor t (dequantized row by row, so quantized blocks' scales are covered);
 * rope_freqs.weight values must also be > 0 (they divide the rotation angle). */
sb_status rt_check_values(const gguf_tensor *t);

/* 1 for a tensor whose every dimension but the first is 1 (norm weights, biases, rope factors). */
int rt_tensor_is_1d(const gguf_tensor *t);

#endif
