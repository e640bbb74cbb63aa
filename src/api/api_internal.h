/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_internal.h — handle structs the API files share (a model hands out its vocabulary as a
 * borrowed sb_vocab; engines read a model's runtime object). Layer 3 (api); never included outside src/api.
 */
#ifndef SB_API_INTERNAL_H
#define SB_API_INTERNAL_H

#include "runtime/model.h"
#include "runtime/tokenizer/tokenizer.h"

struct sb_vocab {
    tok_vocab *v;
    int borrowed; /* 1 when owned by an sb_model: sb_vocab_free must not free it */
};

/* A loaded model (api_model.c); api_batch.c runs it, api_tensor.c reads its weights by name. */
struct sb_model {
    rt_model *m;
    struct sb_vocab vocab; /* borrowed view of m->vocab */
};

#endif
