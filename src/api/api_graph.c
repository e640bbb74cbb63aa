/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_graph.c — public graphs and programs (sonicboom.h, "tensors, graphs and programs"): an
 * IR graph recorded through the public op table (api_ops.c), compiled exactly as a session compiles
 * a built-in model (plan_build with the backend's target: the pass pipeline and memory plan, then
 * the backend's prepare), and run with tensors bound to its inputs.
 * Layer 3 (api). A graph owns references on the buffers bound into it; a program takes its own, so
 * either may be freed first. Values are IR node indices of the recorded graph. A program compiled
 * for CUDA is planned on the shared CUDA backend (api_device.c) and runs under its lock; its
 * run-time inputs are sent with every run (plan_input.per_run), its bound weights and caches live
 * as the backend's device copies, kept coherent with their host memory around every run; its new
 * outputs may be page-locked (sb_compile_params.page_locked_outputs), so that a caller reusing them
 * in place has the GPU write them directly (the executor's direct outputs) instead of copying.
 */
#include "api/api_tensor.h"
#include "base/status.h"
#include "graph/plan.h"
#include "quant/types.h"
#include "runtime/backends.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OUT 16 /* the CPU backend returns at most 16 outputs a run */

typedef struct bound {
    ir_ref node;
    api_buf *buf;
} bound;

struct sb_graph {
    ir_graph *g;
    bound *bnd;          /* tensors bound for good */
    int n_bnd, cap_bnd;
    ir_ref *decl;        /* run-time inputs, in declaration order */
    int n_decl, cap_decl;
    char (*out_names)[IR_NAME_MAX];
    int n_out;
};

struct sb_program {
    plan *p;
    backend *be;         /* its own CPU backend, or the shared CUDA one (not owned) */
    int device;          /* SB_DEVICE_CPU or SB_DEVICE_CUDA */
    bool page_locked_out; /* CUDA: new output tensors get page-locked host memory (sb_compile_params) */
    void **data;         /* [p->n_inputs] */
    api_buf **bufs;      /* references on bound buffers */
    bool *buf_kv;        /* bufs[i] is bound as a KV cache (runs write it) */
    int n_bufs;
    int n_decl;
    int32_t *decl_slot;  /* plan input slot of declared input i, -1 when the planner dropped it */
    ir_node *decl_node;  /* its type and shape */
    int n_out;
    int32_t out_idx[MAX_OUT]; /* plan output index of output k */
};

#define NEED(cond, fn)                                                                                  \
    do {                                                                                                \
        if (!(cond)) return sb_fail(SB_ERR_INVALID_ARG, "%s: invalid argument: %s", fn, #cond);         \
    } while (0)

static sb_status grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return SB_OK;
    const int nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return sb_fail(SB_ERR_OOM, "graph tables");
    *arr = p;
    *cap = nc;
    return SB_OK;
}

SB_API sb_status sb_graph_create(sb_graph **out) {
    NEED(out, "sb_graph_create");
    *out = NULL;
    sb_graph *h = (sb_graph *)calloc(1, sizeof *h);
    if (!h) return sb_fail(SB_ERR_OOM, "sb_graph handle");
    const sb_status st = ir_graph_create(&h->g);
    if (st != SB_OK) {
        free(h);
        return st;
    }
    *out = h;
    return SB_OK;
}

SB_API void sb_graph_free(sb_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_bnd; i++) api_buf_unref(g->bnd[i].buf);
    free(g->bnd);
    free(g->decl);
    free(g->out_names);
    ir_graph_free(g->g);
    free(g);
}

/* is name free among the graph's inputs and outputs? */
static bool name_free(const sb_graph *g, const char *name) {
    for (int32_t i = 0; i < g->g->n_nodes; i++) {
        const ir_node *n = &g->g->nodes[i];
        if (((ir_ops[n->op].flags & OPF_INPUT) || n->op == IR_OP_OUTPUT) && !strcmp(n->name, name)) return false;
    }
    return true;
}

static sb_status check_name(const sb_graph *g, const char *fn, const char *name) {
    if (!name || !name[0] || strlen(name) >= IR_NAME_MAX) return sb_fail(SB_ERR_INVALID_ARG, "%s: a name of 1..%d bytes is needed", fn, IR_NAME_MAX - 1);
    if (!name_free(g, name)) return sb_fail(SB_ERR_INVALID_ARG, "%s: the name \"%s\" is taken in this graph", fn, name);
    return SB_OK;
}

/* append an input node of kind; SB_ERR_INVALID_ARG naming what the kind wants */
static sb_status add_input(sb_graph *g, const char *fn, int kind, const char *name, int type, const int64_t ne[4], ir_ref *out) {
    char sh[96];
    api_shape_str(sh, sizeof sh, type, ne);
    ir_ref r = IR_NONE;
    switch (kind) {
    case SB_INPUT_TOKENS:
    case SB_INPUT_POS:
        if (type != SB_TYPE_I32 || ne[1] != 1 || ne[2] != 1 || ne[3] != 1)
            return sb_fail(SB_ERR_INVALID_ARG, "%s: a %s input is i32 [T], not %s", fn, kind == SB_INPUT_POS ? "pos" : "tokens", sh);
        if (!name_free(g, kind == SB_INPUT_POS ? "pos" : "tokens"))
            return sb_fail(SB_ERR_INVALID_ARG, "%s: the graph has a %s input already (one per graph)", fn, kind == SB_INPUT_POS ? "pos" : "tokens");
        r = kind == SB_INPUT_POS ? ir_input_pos(g->g, ne[0]) : ir_input_tokens(g->g, ne[0]);
        break;
    case SB_INPUT_DATA:
    case SB_INPUT_CACHE: {
        SB_TRY(check_name(g, fn, name));
        if (!qk_valid(type) || type == SB_TYPE_I32)
            return sb_fail(SB_ERR_INVALID_ARG, "%s: \"%s\": type %d cannot be a %s input", fn, name, type, kind == SB_INPUT_CACHE ? "cache" : "data");
        if (kind == SB_INPUT_CACHE && ((type != SB_TYPE_F32 && type != SB_TYPE_F16) || ne[2] != 1 || ne[3] != 1))
            return sb_fail(SB_ERR_INVALID_ARG, "%s: \"%s\": a cache is f32 or f16 [Dkv, C], not %s", fn, name, sh);
        ir_node n = ir_proto(kind == SB_INPUT_CACHE ? IR_OP_KV : IR_OP_WEIGHT);
        n.dtype = type;
        memcpy(n.ne, ne, sizeof n.ne);
        snprintf(n.name, sizeof n.name, "%s", name);
        if (ir_infer_shape(g->g, &n) != SB_OK) return sb_fail(SB_ERR_INVALID_ARG, "%s: \"%s\" %s: %s", fn, name, sh, sb_last_error());
        r = kind == SB_INPUT_CACHE ? ir_input_kv(g->g, name, type, ne) : ir_input_weight(g->g, name, type, ne);
        break;
    }
    default: return sb_fail(SB_ERR_INVALID_ARG, "%s: input kind %d (SB_INPUT_DATA, _TOKENS, _POS, _CACHE)", fn, kind);
    }
    if (r == IR_NONE) return ir_graph_status(g->g) != SB_OK ? ir_graph_status(g->g) : sb_fail(SB_ERR_INTERNAL, "%s: input refused", fn);
    *out = r;
    return SB_OK;
}

SB_API sb_status sb_graph_input(sb_graph *g, int kind, const char *name, int type, int n_dims, const int64_t *ne, sb_value *out) {
    NEED(g && ne && out, "sb_graph_input");
    if (kind == SB_INPUT_CACHE) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_input: a cache is bound with sb_graph_tensor (it keeps its state)");
    if (n_dims < 1 || n_dims > 4) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_input: n_dims %d (1..4)", n_dims);
    int64_t d[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_input: ne[%d] = %lld", i, (long long)ne[i]);
        d[i] = ne[i];
    }
    if (!api_dims_ok(d)) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_input: more than 2^48 elements");
    SB_TRY(grow((void **)&g->decl, &g->cap_decl, g->n_decl, sizeof *g->decl));
    ir_ref r;
    SB_TRY(add_input(g, "sb_graph_input", kind, name, type, d, &r));
    g->decl[g->n_decl++] = r;
    *out = r;
    return SB_OK;
}

SB_API sb_status sb_graph_tensor(sb_graph *g, int kind, sb_tensor *t, sb_value *out) {
    NEED(g && t && out, "sb_graph_tensor");
    if (kind != SB_INPUT_DATA && kind != SB_INPUT_CACHE)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_tensor: kind %d (SB_INPUT_DATA or SB_INPUT_CACHE; tokens and pos are run-time inputs)", kind);
    if (kind == SB_INPUT_CACHE && !t->buf->owned) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_tensor: a model's weight cannot be a cache (it is read-only)");
    const ir_op op = kind == SB_INPUT_CACHE ? IR_OP_KV : IR_OP_WEIGHT;
    for (int i = 0; i < g->n_bnd; i++) { /* the same memory bound the same way: the same value */
        const ir_node *n = &g->g->nodes[g->bnd[i].node];
        if (g->bnd[i].buf->data == t->buf->data && n->op == op && n->dtype == t->type && !memcmp(n->ne, t->ne, sizeof n->ne)) {
            *out = g->bnd[i].node;
            return SB_OK;
        }
    }
    SB_TRY(grow((void **)&g->bnd, &g->cap_bnd, g->n_bnd, sizeof *g->bnd));
    char name[IR_NAME_MAX];
    if (t->name[0] && name_free(g, t->name)) snprintf(name, sizeof name, "%s", t->name);
    else snprintf(name, sizeof name, "t.%d", g->g->n_nodes);
    ir_ref r;
    SB_TRY(add_input(g, "sb_graph_tensor", kind, name, t->type, t->ne, &r));
    g->bnd[g->n_bnd++] = (bound){.node = r, .buf = api_buf_ref(t->buf)};
    *out = r;
    return SB_OK;
}

SB_API sb_status sb_graph_op(sb_graph *g, const char *op, const sb_value *src, int n_src, const double *args, int n_args, sb_value *out) {
    NEED(g && op && out && (src || n_src == 0) && n_src >= 0 && n_args >= 0, "sb_graph_op");
    return api_graph_apply(g->g, op, src, n_src, args, n_args, out);
}

SB_API sb_status sb_graph_value_info(const sb_graph *g, sb_value v, sb_tensor_info *out) {
    NEED(g && out, "sb_graph_value_info");
    if (v < 0 || v >= g->g->n_nodes) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_value_info: %d is not a value of this graph", (int)v);
    const ir_node *n = &g->g->nodes[v];
    memset(out, 0, sizeof *out);
    out->type = n->dtype;
    out->device = SB_DEVICE_CPU;
    out->n_dims = 4;
    while (out->n_dims > 1 && n->ne[out->n_dims - 1] == 1) out->n_dims--;
    memcpy(out->ne, n->ne, sizeof out->ne);
    out->nbytes = ir_nbytes(n);
    out->is_view = (ir_ops[n->op].flags & OPF_VIEW) != 0;
    return SB_OK;
}

SB_API sb_status sb_graph_output(sb_graph *g, sb_value v, const char *name) {
    NEED(g, "sb_graph_output");
    if (v < 0 || v >= g->g->n_nodes) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_output: %d is not a value of this graph", (int)v);
    SB_TRY(check_name(g, "sb_graph_output", name));
    const ir_node *n = &g->g->nodes[v];
    char sh[96];
    if (n->dtype != SB_TYPE_F32)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_output: \"%s\" is %s; outputs are f32", name, api_shape_str(sh, sizeof sh, n->dtype, n->ne));
    if (g->n_out >= MAX_OUT) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_output: at most %d outputs", MAX_OUT);
    if (!g->out_names && !(g->out_names = calloc(MAX_OUT, sizeof *g->out_names))) return sb_fail(SB_ERR_OOM, "sb_graph_output");
    if (ir_output(g->g, v, name) == IR_NONE) return ir_graph_status(g->g);
    snprintf(g->out_names[g->n_out++], IR_NAME_MAX, "%s", name);
    return SB_OK;
}

/* the buffer convention of sb_detokenize over a malloc'd string */
static sb_status give_text(char *s, char *buf, size_t cap, size_t *n_out) {
    if (!s) return sb_fail(SB_ERR_OOM, "IR text");
    const size_t n = strlen(s);
    *n_out = n;
    if (cap) {
        const size_t k = n < cap ? n : cap - 1;
        memcpy(buf, s, k);
        buf[k] = 0;
    }
    free(s);
    if (n >= cap && cap > 0) return sb_fail(SB_ERR_BUFFER_TOO_SMALL, "IR text: %zu bytes needed", n + 1);
    if (!cap) return sb_fail(SB_ERR_BUFFER_TOO_SMALL, "IR text: %zu bytes needed", n + 1);
    return SB_OK;
}

SB_API sb_status sb_graph_print(const sb_graph *g, char *buf, size_t cap, size_t *n_out) {
    NEED(g && n_out && (buf || !cap), "sb_graph_print");
    return give_text(ir_print_str(g->g), buf, cap, n_out);
}

SB_API sb_status sb_program_print(const sb_program *prog, char *buf, size_t cap, size_t *n_out) {
    NEED(prog && n_out && (buf || !cap), "sb_program_print");
    return give_text(ir_print_str(prog->p->g), buf, cap, n_out);
}

// ---- compile and run ----

SB_API void sb_program_free(sb_program *prog) {
    if (!prog) return;
    if (prog->device == SB_DEVICE_CUDA) {
        api_dev_lock();
        if (prog->p) prog->be->ops->forget(prog->be, prog->p);
        api_dev_unlock();
    } else if (prog->be) {
        if (prog->p) prog->be->ops->forget(prog->be, prog->p);
        prog->be->ops->free(prog->be);
    }
    plan_free(prog->p);
    for (int i = 0; i < prog->n_bufs; i++) api_buf_unref(prog->bufs[i]);
    free(prog->bufs);
    free(prog->buf_kv);
    free(prog->data);
    free(prog->decl_slot);
    free(prog->decl_node);
    free(prog);
}

/* the program's bindings: bound buffers into their slots, declared inputs' slots and shapes */
static sb_status bind(sb_program *pr, const sb_graph *g) {
    const plan *p = pr->p;
    pr->data = (void **)calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *pr->data);
    pr->bufs = (api_buf **)calloc((size_t)(g->n_bnd ? g->n_bnd : 1), sizeof *pr->bufs);
    pr->buf_kv = (bool *)calloc((size_t)(g->n_bnd ? g->n_bnd : 1), sizeof *pr->buf_kv);
    pr->decl_slot = (int32_t *)calloc((size_t)(g->n_decl ? g->n_decl : 1), sizeof *pr->decl_slot);
    pr->decl_node = (ir_node *)calloc((size_t)(g->n_decl ? g->n_decl : 1), sizeof *pr->decl_node);
    if (!pr->data || !pr->bufs || !pr->buf_kv || !pr->decl_slot || !pr->decl_node) return sb_fail(SB_ERR_OOM, "sb_graph_compile: bindings");
    for (int i = 0; i < g->n_bnd; i++) {
        pr->buf_kv[pr->n_bufs] = g->g->nodes[g->bnd[i].node].op == IR_OP_KV;
        pr->bufs[pr->n_bufs++] = api_buf_ref(g->bnd[i].buf);
        const int32_t slot = plan_find_input(p, g->g->nodes[g->bnd[i].node].name);
        if (slot >= 0) pr->data[slot] = g->bnd[i].buf->data;
    }
    pr->n_decl = g->n_decl;
    for (int i = 0; i < g->n_decl; i++) {
        pr->decl_node[i] = g->g->nodes[g->decl[i]];
        pr->decl_slot[i] = plan_find_input(p, pr->decl_node[i].name);
    }
    pr->n_out = g->n_out;
    for (int k = 0; k < g->n_out; k++)
        if ((pr->out_idx[k] = plan_find_output(p, g->out_names[k])) < 0)
            return sb_fail(SB_ERR_INTERNAL, "sb_graph_compile: output \"%s\" missing from the plan", g->out_names[k]);
    return SB_OK;
}

sb_status api_cpu_backend(int n_threads, backend **out) {
    if (n_threads <= 0) {
        const long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)(nc < 256 ? nc : 256) : 1;
    }
    const backend_params bp = {.n_threads = n_threads, .max_tokens = 0};
    return backend_kind_cpu.create(&bp, out);
}

SB_API sb_status sb_graph_compile(const sb_graph *g, const sb_compile_params *p, sb_program **out) {
    NEED(g && out, "sb_graph_compile");
    *out = NULL;
    const sb_compile_params d = {0};
    if (!p) p = &d;
    if (p->n_threads < 0 || p->n_threads > 256) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_compile: n_threads %d (0 = all cores, at most 256)", p->n_threads);
    if (p->page_locked_outputs != 0 && p->page_locked_outputs != 1)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_compile: page_locked_outputs %d (0 or 1)", p->page_locked_outputs);
    if (g->n_out == 0) return sb_fail(SB_ERR_INVALID_ARG, "sb_graph_compile: the graph has no outputs (sb_graph_output)");
    SB_TRY(ir_graph_status(g->g));
    int dev;
    SB_TRY(api_dev_resolve("sb_graph_compile", p->device, &dev));
    sb_program *pr = (sb_program *)calloc(1, sizeof *pr);
    if (!pr) return sb_fail(SB_ERR_OOM, "sb_program handle");
    sb_status st = SB_OK;
    if (dev == SB_DEVICE_CUDA) {
        api_dev_lock();
        pr->be = api_dev_backend();
        pr->device = SB_DEVICE_CUDA;
        st = backend_plan(pr->be, g->g, g->decl, g->n_decl, &pr->p);
        api_dev_unlock();
        if (p->device == SB_DEVICE_AUTO && (st == SB_ERR_MODEL_TENSOR_TYPE || st == SB_ERR_UNSUPPORTED)) { /* a node CUDA cannot run */
            sb_log(SB_LOG_INFO, "sb_graph_compile: device auto: the CPU (%s)", sb_last_error());
            sb_error_clear();
            pr->be = NULL, pr->device = SB_DEVICE_CPU, dev = SB_DEVICE_CPU, st = SB_OK;
        }
    }
    if (dev == SB_DEVICE_CPU) {
        st = api_cpu_backend(p->n_threads, &pr->be);
        if (st == SB_OK) st = backend_plan(pr->be, g->g, g->decl, g->n_decl, &pr->p);
    }
    if (st == SB_OK) st = bind(pr, g);
    pr->page_locked_out = dev == SB_DEVICE_CUDA && p->page_locked_outputs;
    if (st != SB_OK) {
        sb_program_free(pr);
        return st;
    }
    *out = pr;
    return SB_OK;
}

/* in[i] matches declared input i */
static sb_status check_in(const sb_program *pr, int i, const sb_tensor *t) {
    const ir_node *n = &pr->decl_node[i];
    char a[96], b[96];
    if (!t) return sb_fail(SB_ERR_INVALID_ARG, "sb_program_run: input %d (\"%s\") is NULL", i, n->name);
    if (t->type != n->dtype || memcmp(t->ne, n->ne, sizeof t->ne))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_program_run: input %d (\"%s\") is %s, the graph declared %s", i, n->name,
                       api_shape_str(a, sizeof a, t->type, t->ne), api_shape_str(b, sizeof b, n->dtype, n->ne));
    return SB_OK;
}

/* first error of a and b */
static sb_status first(sb_status a, sb_status b) { return a != SB_OK ? a : b; }

/* on the CPU: the host memory it reads (bound buffers, inputs) made current first; what it wrote
 * (bound caches, outputs written in place: inplace[k]) sent on to device copies after */
static sb_status run_cpu(sb_program *pr, sb_tensor *const *in, sb_tensor *const *inplace, float *const *dst) {
    sb_status st = SB_OK;
    for (int i = 0; st == SB_OK && i < pr->n_bufs; i++) st = api_buf_host_read(pr->bufs[i]);
    for (int i = 0; st == SB_OK && i < pr->n_decl; i++) st = api_buf_host_read(in[i]->buf);
    if (st != SB_OK) return st;
    st = pr->be->ops->run(pr->be, pr->p, pr->data, pr->p->n_inputs, dst);
    for (int i = 0; i < pr->n_bufs; i++)
        if (pr->buf_kv[i]) st = first(st, api_buf_host_wrote(pr->bufs[i]));
    for (int k = 0; k < pr->n_out; k++)
        if (inplace[k]) st = first(st, api_buf_host_wrote(inplace[k]->buf));
    return st;
}

/* on the shared CUDA backend, under its lock: what it reads from the host (run-time inputs; a bound
 * weight it only gathers rows of) made current first; after, the bound buffers have device copies,
 * the caches' newer (the run wrote them there), and outputs written in place on the host are sent
 * on to device copies of theirs */
static sb_status run_cuda(sb_program *pr, sb_tensor *const *in, sb_tensor *const *inplace, float *const *dst) {
    sb_status st = SB_OK;
    api_dev_lock();
    for (int i = 0; st == SB_OK && i < pr->n_decl; i++) st = api_buf_host_read(in[i]->buf);
    for (int i = 0; st == SB_OK && i < pr->n_bufs; i++)
        if (!pr->buf_kv[i]) st = api_buf_host_read(pr->bufs[i]);
    if (st == SB_OK) {
        st = pr->be->ops->run(pr->be, pr->p, pr->data, pr->p->n_inputs, dst);
        for (int i = 0; i < pr->n_bufs; i++) api_buf_dev_bound(pr->bufs[i], pr->buf_kv[i]);
        for (int k = 0; k < pr->n_out; k++)
            if (inplace[k]) st = first(st, api_buf_host_wrote(inplace[k]->buf));
    }
    api_dev_unlock();
    return st;
}

SB_API sb_status sb_program_run(sb_program *pr, sb_tensor *const *in, size_t n_in, sb_tensor **out, size_t n_out) {
    NEED(pr && (in || !n_in) && out, "sb_program_run");
    if (n_in != (size_t)pr->n_decl) return sb_fail(SB_ERR_INVALID_ARG, "sb_program_run: %zu inputs given, the graph declared %d", n_in, pr->n_decl);
    if (n_out != (size_t)pr->n_out) return sb_fail(SB_ERR_INVALID_ARG, "sb_program_run: room for %zu outputs, the graph has %d", n_out, pr->n_out);
    for (int i = 0; i < pr->n_decl; i++) {
        SB_TRY(check_in(pr, i, in[i]));
        if (pr->decl_slot[i] >= 0) pr->data[pr->decl_slot[i]] = in[i]->buf->data;
    }
    const plan *p = pr->p;
    float *dst[MAX_OUT] = {0};
    sb_tensor *fresh[MAX_OUT] = {0}, *inplace[MAX_OUT] = {0};
    sb_status st = SB_OK;
    for (int k = 0; k < pr->n_out && st == SB_OK; k++) {
        const ir_node *n = &p->g->nodes[p->outputs[pr->out_idx[k]].node];
        char a[96], b[96];
        if (out[k]) {
            if (out[k]->type != SB_TYPE_F32 || memcmp(out[k]->ne, n->ne, sizeof n->ne) || !out[k]->buf->owned)
                st = sb_fail(SB_ERR_INVALID_ARG, "sb_program_run: out[%d] is %s%s; output \"%s\" is %s", k,
                             api_shape_str(a, sizeof a, out[k]->type, out[k]->ne), out[k]->buf->owned ? "" : " (a weight)",
                             p->outputs[pr->out_idx[k]].name, api_shape_str(b, sizeof b, n->dtype, n->ne));
            else dst[pr->out_idx[k]] = (float *)(inplace[k] = out[k])->buf->data;
            continue;
        }
        st = pr->page_locked_out ? api_tensor_new_page_locked(SB_TYPE_F32, 4, n->ne, &fresh[k])
                                 : api_tensor_new(pr->device, SB_TYPE_F32, 4, n->ne, NULL, &fresh[k]);
        if (st == SB_OK) dst[pr->out_idx[k]] = (float *)fresh[k]->buf->data;
    }
    if (st == SB_OK) st = pr->device == SB_DEVICE_CUDA ? run_cuda(pr, in, inplace, dst) : run_cpu(pr, in, inplace, dst);
    for (int k = 0; k < pr->n_out; k++) {
        if (st != SB_OK) sb_tensor_free(fresh[k]);
        else if (fresh[k]) {
            const ir_node *n = &p->g->nodes[p->outputs[pr->out_idx[k]].node];
            int nd = 4;
            while (nd > 1 && n->ne[nd - 1] == 1) nd--;
            fresh[k]->n_dims = nd;
            out[k] = fresh[k];
        }
    }
    return st;
}
