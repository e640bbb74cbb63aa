/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/textgen.h — the text side of generation, one sampled token at a time: a UTF-8-safe
 * detokenizer (the callback never sees half a character), stop strings (text that may be the start
 * of one is held back until it is decided; a matched one is not emitted, nor anything after it) and
 * end-of-generation tokens (they end the text and emit nothing). rt_generate keeps one for its one
 * sequence; a caller running many sequences in one step (the batched engine) keeps one each.
 * Layer 2 (runtime). Borrows the vocabulary and the stop strings; allocates as text grows.
 */
#ifndef SB_RUNTIME_TEXTGEN_H
#define SB_RUNTIME_TEXTGEN_H

#include "runtime/tokenizer/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>

/* Called with a piece of text and the token that completed it (-1 for the final flush). Return
 * nonzero to stop (the pushing call then returns SB_ERR_CANCELLED). */
typedef int (*rt_text_fn)(void *user, const char *text, size_t len, int32_t token);

typedef enum rt_stop_reason { RT_STOP_LENGTH = 0, RT_STOP_EOG = 1, RT_STOP_STRING = 2, RT_STOP_CONTEXT = 3 } rt_stop_reason;

typedef struct rt_textgen {
    const tok_vocab *v;
    const char *const *stop;    /* borrowed */
    size_t n_stop;
    tok_stream ts;
    tok_bytes pending;          /* detokenized, not yet emitted (may start a stop string) */
    bool ended;                 /* an end-of-generation token or a stop string was seen: no more tokens */
    bool cut;                   /* a stop string was seen: nothing more is emitted */
} rt_textgen;

/* The text continues a prompt (the first piece keeps its leading space). */
void rt_textgen_init(rt_textgen *t, const tok_vocab *v, const char *const *stop, size_t n_stop);
void rt_textgen_free(rt_textgen *t);
/* One sampled token. *stop receives RT_STOP_EOG or RT_STOP_STRING when the text ends here, else -1.
 * SB_ERR_INVALID_ARG after the text ended, SB_ERR_RANGE for a bad id, SB_ERR_CANCELLED when fn
 * asked to stop, SB_ERR_OOM. */
sb_status rt_textgen_push(rt_textgen *t, int32_t tok, rt_text_fn fn, void *user, int *stop);
/* Generation ended for another reason (length, context, the caller): emit what is held. Nothing
 * after a stop string. SB_ERR_CANCELLED when fn asked to stop. */
sb_status rt_textgen_flush(rt_textgen *t, rt_text_fn fn, void *user);

#endif
