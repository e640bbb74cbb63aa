/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_tensor.h — what the tensor, graph and eager files of the public API share: the tensor
 * handle over a reference-counted buffer, and the op table of the public names (sb_tensor_op,
 * sb_graph_op) mapped onto the IR builders.
 * Layer 3 (api); never included outside src/api.
 * Invariants: a tensor's data holds exactly ir_nbytes of its type and shape; a buffer is freed when
 * its last tensor (or graph/program binding) drops it; a weight buffer points into a model's
 * mapping and is never written.
 */
#ifndef SB_API_TENSOR_H
#define SB_API_TENSOR_H

#include "sonicboom.h"
#include "graph/ir.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct api_buf {
    atomic_int refs;        /* tensors, graphs and programs holding it (atomic: a binding may free from a finalizer thread) */
    void *data;
    uint64_t bytes;
    bool owned;             /* malloc'd here (else a model's weight: read-only) */
} api_buf;

struct sb_tensor {
    api_buf *buf;
    int type;
    int n_dims;
    int64_t ne[4];
    bool is_view;
    char name[IR_NAME_MAX]; /* the GGUF name of a weight view, else "" */
};

api_buf *api_buf_ref(api_buf *b);
void api_buf_unref(api_buf *b);

/* A new handle on buf (a reference taken) with this type and shape. */
sb_status api_tensor_wrap(api_buf *buf, int type, int n_dims, const int64_t ne[4], bool is_view, const char *name,
                          sb_tensor **out);
/* Do 4 dims (each >= 1) hold at most 2^48 elements (no overflow anywhere downstream)? */
bool api_dims_ok(const int64_t ne[4]);
/* "f32[64,4,3]" into buf (for messages). */
const char *api_shape_str(char *buf, size_t cap, int type, const int64_t ne[4]);

/* The IR input kind a source of op must be (for eager graphs): SB_INPUT_TOKENS, SB_INPUT_POS,
 * SB_INPUT_CACHE or SB_INPUT_DATA; -1 when op is unknown. */
int api_op_src_kind(const char *op, int i);

/* Apply op to values of an IR graph (the public table of sonicboom.h); checks everything first and
 * appends nothing on failure (SB_ERR_INVALID_ARG naming the op and shapes, SB_ERR_NOT_FOUND). */
sb_status api_graph_apply(ir_graph *g, const char *op, const ir_ref *src, int n_src, const double *args, int n_args,
                          ir_ref *out);

struct backend;
struct plan;
/* A CPU backend of n_threads threads (0 = all cores). */
sb_status api_cpu_backend(int n_threads, struct backend **out);
/* Plan g for be's target (the built-in models' passes and memory plan) and prepare be for it. */
sb_status api_plan_prepare(struct backend *be, const ir_graph *g, struct plan **out);

#endif
