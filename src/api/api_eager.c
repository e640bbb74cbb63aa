/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_eager.c — eager ops (sb_tensor_op): the op recorded into a one-node graph whose inputs
 * are the source tensors, planned for the CPU target and run at once by the same executor and
 * kernels as a compiled program, so eager and compiled results agree by construction.
 * Layer 3 (api). One CPU backend (all cores) serves every eager op, created on first use; a mutex
 * serialises eager runs. reshape/view needs no kernel: its result shares its source's memory (the
 * shape function still checks it); kv_store's result is its cache, written in place.
 */
#include "api/api_tensor.h"
#include "backend/backend.h"
#include "base/status.h"
#include "graph/plan.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t eager_lock = PTHREAD_MUTEX_INITIALIZER;
static backend *eager_be; /* lives until the process ends */

/* source i as an input node of the kind op wants there */
static sb_status add_src(ir_graph *g, const char *op, int i, const sb_tensor *t, ir_ref *out) {
    const int kind = api_op_src_kind(op, i);
    char name[16], sh[96];
    snprintf(name, sizeof name, "src.%d", i);
    const bool vec = t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
    if ((kind == SB_INPUT_TOKENS || kind == SB_INPUT_POS) && (t->type != SB_TYPE_I32 || !vec))
        return sb_fail(SB_ERR_INVALID_ARG, "%s: source %d must be an i32 vector of %s, not %s", op, i,
                       kind == SB_INPUT_POS ? "positions" : "token ids", api_shape_str(sh, sizeof sh, t->type, t->ne));
    if (kind == SB_INPUT_CACHE && !t->buf->owned) return sb_fail(SB_ERR_INVALID_ARG, "%s: source %d: a model's weight cannot be a cache", op, i);
    ir_ref r = kind == SB_INPUT_TOKENS ? ir_input_tokens(g, t->ne[0])
               : kind == SB_INPUT_POS  ? ir_input_pos(g, t->ne[0])
               : kind == SB_INPUT_CACHE && (t->type == SB_TYPE_F32 || t->type == SB_TYPE_F16) && t->ne[2] == 1 && t->ne[3] == 1
                   ? ir_input_kv(g, name, t->type, t->ne)
                   : ir_input_weight(g, name, t->type, t->ne);
    if (r == IR_NONE) return sb_fail(SB_ERR_INVALID_ARG, "%s: source %d (%s): %s", op, i, api_shape_str(sh, sizeof sh, t->type, t->ne), sb_last_error());
    *out = r;
    return SB_OK;
}

/* plan g on the eager backend, run it with the sources bound, result into dst (may be NULL) */
static sb_status run_eager(const ir_graph *g, sb_tensor *const *src, int n_src, float *dst) {
    sb_status st = SB_OK;
    pthread_mutex_lock(&eager_lock);
    if (!eager_be) st = api_cpu_backend(0, &eager_be);
    plan *p = NULL;
    if (st == SB_OK) st = api_plan_prepare(eager_be, g, &p);
    void *data[IR_MAX_SRC] = {0};
    for (int i = 0; st == SB_OK && i < n_src; i++) {
        const ir_node *n = &g->nodes[i]; /* sources are nodes 0..n_src-1 */
        const int32_t slot = plan_find_input(p, n->name);
        if (slot >= 0) data[slot] = src[i]->buf->data;
    }
    float *out[1] = {dst};
    if (st == SB_OK) st = eager_be->ops->run(eager_be, p, data, p->n_inputs, out);
    if (p) eager_be->ops->forget(eager_be, p);
    plan_free(p);
    pthread_mutex_unlock(&eager_lock);
    return st;
}

static sb_status eager(const char *op, sb_tensor *const *src, int n_src, const double *args, int n_args, ir_graph *g, sb_tensor **out) {
    ir_ref in[IR_MAX_SRC];
    for (int i = 0; i < n_src; i++) SB_TRY(add_src(g, op, i, src[i], &in[i]));
    ir_ref v;
    SB_TRY(api_graph_apply(g, op, in, n_src, args, n_args, &v));
    const ir_node *n = &g->nodes[v];
    int nd = 4;
    while (nd > 1 && n->ne[nd - 1] == 1) nd--;
    if (n->op == IR_OP_RESHAPE) return api_tensor_wrap(src[0]->buf, n->dtype, nd, n->ne, true, NULL, out);
    if (n->op == IR_OP_KV_STORE) {
        if (src[0]->type != SB_TYPE_F32)
            return sb_fail(SB_ERR_UNSUPPORTED, "kv_store: eagerly the cache must be f32 (an f16 cache is written inside a graph)");
        if (ir_output(g, v, "out") == IR_NONE) return ir_graph_status(g);
        SB_TRY(run_eager(g, src, n_src, NULL)); /* the cache is written in place */
        return api_tensor_wrap(src[0]->buf, src[0]->type, src[0]->n_dims, src[0]->ne, true, NULL, out);
    }
    if (ir_output(g, v, "out") == IR_NONE) return ir_graph_status(g);
    sb_tensor *t;
    SB_TRY(sb_tensor_create(SB_DEVICE_CPU, SB_TYPE_F32, nd, n->ne, NULL, 0, &t));
    const sb_status st = run_eager(g, src, n_src, (float *)t->buf->data);
    if (st != SB_OK) {
        sb_tensor_free(t);
        return st;
    }
    *out = t;
    return SB_OK;
}

SB_API sb_status sb_tensor_op(const char *op, sb_tensor *const *src, int n_src, const double *args, int n_args, sb_tensor **out) {
    if (!op || !out || (n_src && !src) || n_src < 0 || n_args < 0)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_op: NULL or negative argument");
    *out = NULL;
    if (api_op_src_kind(op, 0) < 0) return sb_fail(SB_ERR_NOT_FOUND, "sb_tensor_op: op \"%s\" is not in the op table (sb_op_name lists them)", op);
    if (n_src > IR_MAX_SRC) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_op: %s: %d sources (at most %d)", op, n_src, IR_MAX_SRC);
    for (int i = 0; i < n_src; i++)
        if (!src[i]) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_op: %s: source %d is NULL", op, i);
    ir_graph *g;
    SB_TRY(ir_graph_create(&g));
    const sb_status st = eager(op, src, n_src, args, n_args, g, out);
    ir_graph_free(g);
    return st;
}
