/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/generate.h — the generation loop: prefill the prompt (with prefix reuse), then sample,
 * stream and decode one token at a time until n_predict tokens, an end-of-generation token, a stop
 * string, a full context, or the callback asks to stop.
 * Layer 2 (runtime). Text goes through runtime/textgen.h (UTF-8-safe, stop strings held back until
 * decided and never emitted); the callback returning nonzero makes rt_generate return
 * SB_ERR_CANCELLED.
 */
#ifndef SB_RUNTIME_GENERATE_H
#define SB_RUNTIME_GENERATE_H

#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/textgen.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct rt_generate_params {
    int64_t n_predict;          /* max new tokens; < 0 = until the context is full */
    const char *const *stop;    /* stop strings (may be NULL) */
    size_t n_stop;
    bool ignore_eos;            /* end-of-generation tokens get -inf logits: never sampled, never a stop */
} rt_generate_params;

typedef struct rt_generate_result {
    int64_t n_prompt, n_reused, n_generated;
    double prefill_seconds, decode_seconds;
    rt_stop_reason stop;
} rt_generate_result;

sb_status rt_generate(rt_session *s, rt_sampler *smp, const int32_t *prompt, int64_t n_prompt, const rt_generate_params *p,
                      rt_text_fn fn, void *user, rt_generate_result *res);

#endif
