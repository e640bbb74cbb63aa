/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_eager.c — eager ops (sb_tensor_op): the op recorded into a one-node graph whose inputs
 * are the source tensors, planned for the sources' device and run at once by the same executor and
 * kernels as a compiled program, so eager and compiled results agree by construction.
 * Layer 3 (api). One CPU backend (all cores) serves every eager op on CPU tensors, created on first
 * use, its runs serialised by a mutex; ops on CUDA tensors run on the shared CUDA backend
 * (api_device.c) under its lock, and their results come back to the host (a CUDA tensor's host
 * mirror is current) — caches they write stay newer on the device until read. A model's weight
 * view joins ops on either device; other sources must agree (PyTorch's rule). reshape/view needs
 * no kernel: its result shares its source's memory (the shape function still checks it);
 * kv_store's result is its cache, written in place.
 */
#include "api/api_tensor.h"
#include "backend/backend.h"
#include "base/status.h"
#include "graph/plan.h"
#include "runtime/backends.h"

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

/* plan g on be, run it with the sources bound (sources are nodes 0..n_src-1), result into dst (may
 * be NULL); be's lock held */
static sb_status run_on(backend *be, const ir_graph *g, sb_tensor *const *src, int n_src, float *dst) {
    plan *p = NULL;
    sb_status st = backend_plan(be, g, NULL, 0, &p);
    void *data[IR_MAX_SRC] = {0};
    for (int i = 0; st == SB_OK && i < n_src; i++) {
        const int32_t slot = plan_find_input(p, g->nodes[i].name);
        if (slot >= 0) data[slot] = src[i]->buf->data;
    }
    float *out[1] = {dst};
    if (st == SB_OK) st = be->ops->run(be, p, data, p->n_inputs, out);
    if (p) be->ops->forget(be, p);
    plan_free(p);
    return st;
}

/* on the CPU: the sources' host memory made current first; a cache written (kv_store's) is sent on
 * to its device copy, if any, after */
static sb_status run_cpu(const ir_graph *g, sb_tensor *const *src, int n_src, float *dst) {
    sb_status st = SB_OK;
    pthread_mutex_lock(&eager_lock);
    for (int i = 0; st == SB_OK && i < n_src; i++) st = api_buf_host_read(src[i]->buf);
    if (st == SB_OK && !eager_be) st = api_cpu_backend(0, &eager_be);
    if (st == SB_OK) st = run_on(eager_be, g, src, n_src, dst);
    for (int i = 0; st == SB_OK && i < n_src; i++)
        if (g->nodes[i].op == IR_OP_KV) st = api_buf_host_wrote(src[i]->buf);
    pthread_mutex_unlock(&eager_lock);
    return st;
}

/* on the shared CUDA backend: sources it reads from the host (tokens, positions) made current first;
 * after, every source may have a device copy, and a cache's is newer (kv_store writes it there) */
static sb_status run_cuda(const ir_graph *g, sb_tensor *const *src, int n_src, float *dst) {
    sb_status st = SB_OK;
    api_dev_lock();
    for (int i = 0; st == SB_OK && i < n_src; i++)
        if (g->nodes[i].op != IR_OP_KV) st = api_buf_host_read(src[i]->buf);
    if (st == SB_OK) st = run_on(api_dev_backend(), g, src, n_src, dst);
    for (int i = 0; i < n_src; i++) api_buf_dev_bound(src[i]->buf, g->nodes[i].op == IR_OP_KV);
    api_dev_unlock();
    return st;
}

static sb_status run_eager(int device, const ir_graph *g, sb_tensor *const *src, int n_src, float *dst) {
    return device == SB_DEVICE_CUDA ? run_cuda(g, src, n_src, dst) : run_cpu(g, src, n_src, dst);
}

static const char *dev_name(int d) { return d == SB_DEVICE_CUDA ? "cuda" : "cpu"; }

/* the device an op on src runs on: the sources' (a model's weight view, on the CPU, joins either);
 * SB_ERR_INVALID_ARG naming the op and the devices when two disagree */
static sb_status op_device(const char *op, sb_tensor *const *src, int n_src, int *out) {
    int first = -1;
    *out = SB_DEVICE_CPU;
    for (int i = 0; i < n_src; i++) {
        if (!src[i]->buf->owned) continue;
        if (first < 0) first = i, *out = src[i]->device;
        else if (src[i]->device != *out)
            return sb_fail(SB_ERR_INVALID_ARG, "%s: source %d is on %s, source %d on %s: an eager op's tensors must be on one device "
                           "(copy one across with sb_tensor_read_f32 and sb_tensor_create)", op, first, dev_name(*out), i, dev_name(src[i]->device));
    }
    return SB_OK;
}

/* a view of src's buffer with src's device */
static sb_status view_of(const sb_tensor *src, int type, int nd, const int64_t ne[4], sb_tensor **out) {
    SB_TRY(api_tensor_wrap(src->buf, type, nd, ne, true, NULL, out));
    (*out)->device = src->device;
    return SB_OK;
}

static sb_status eager(const char *op, sb_tensor *const *src, int n_src, const double *args, int n_args, ir_graph *g, sb_tensor **out) {
    int dev;
    SB_TRY(op_device(op, src, n_src, &dev));
    ir_ref in[IR_MAX_SRC];
    for (int i = 0; i < n_src; i++) SB_TRY(add_src(g, op, i, src[i], &in[i]));
    ir_ref v;
    SB_TRY(api_graph_apply(g, op, in, n_src, args, n_args, &v));
    const ir_node *n = &g->nodes[v];
    int nd = 4;
    while (nd > 1 && n->ne[nd - 1] == 1) nd--;
    if (n->op == IR_OP_RESHAPE) return view_of(src[0], n->dtype, nd, n->ne, out);
    if (n->op == IR_OP_KV_STORE) {
        if (src[0]->type != SB_TYPE_F32)
            return sb_fail(SB_ERR_UNSUPPORTED, "kv_store: eagerly the cache must be f32 (an f16 cache is written inside a graph)");
        if (ir_output(g, v, "out") == IR_NONE) return ir_graph_status(g);
        SB_TRY(run_eager(dev, g, src, n_src, NULL)); /* the cache is written in place */
        return view_of(src[0], src[0]->type, src[0]->n_dims, src[0]->ne, out);
    }
    if (ir_output(g, v, "out") == IR_NONE) return ir_graph_status(g);
    sb_tensor *t;
    SB_TRY(api_tensor_new(dev, SB_TYPE_F32, nd, n->ne, NULL, &t));
    const sb_status st = run_eager(dev, g, src, n_src, (float *)t->buf->data);
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
