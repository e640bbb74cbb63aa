/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_run.c — a run: inputs validated on the host and staged (with the rows of the
 * tables gathered on the host), the depth class of a decode step, outputs written straight to
 * page-locked destinations, CUDA Graph capture and replay, the settings bound to the thread for the
 * run; and the profile report.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- run ----

int64_t cx_class_depth(const exec_cuda *cx, int c) { return c >= 1 ? (int64_t)cx->cfg.attn_small << (c - 1) : 0; }

int cx_depth_class(const exec_cuda *cx, int64_t keys) {
    if (cx->cfg.attn_variant != 4 || cx->cfg.attn_small <= 0 || !cx->cfg.attn_class) return 0;
    for (int c = 1; c < (cx->cfg.attn_deep ? CX_DEPTH_CLASSES : 2); c++)
        if (keys <= cx_class_depth(cx, c)) return c;
    return 0;
}

/* the depth class of a run: for one token (a decode step, a session's or the batched engine's B = 1
 * step over its paged cache) at position pos, cx_depth_class(pos + 1) (no attention of the step sees
 * more keys: a window only lowers it) — class 1 takes the small-depth layout's compact kernel,
 * deeper classes k_attn_deep.cu sized for their bound (through the block table for a paged cache);
 * 0 otherwise (any depth: the all-modes kernel, or the paged kernel). Each class has its own
 * captured graph: the graph of a step is chosen by the host, which knows pos. */
static int depth_class(const exec_cuda *cx, const plan *p, const exec_bindings *b) {
    if (p->n_tokens != 1) return 0;
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (p->inputs[i].kind == IR_OP_POS) return cx_depth_class(cx, (int64_t)((const int32_t *)b->data[i])[0] + 1);
    return 0;
}

/* the memory output o may be written straight into its destination through (its root value), or
 * IR_NONE: only where the root is a computed value exactly the output's size whose memory nothing
 * but views of it (the OUTPUT node, reshapes) shares and nothing but those reads — so its producing
 * kernel is the only one that touches the destination (a VIEW at an offset shares it too, but
 * direct_at would hand its readers the destination's start: such a root stays in the arena) */
static ir_ref direct_root(const plan *p, ir_ref o) {
    const ir_ref root = p->vals[o].alias >= 0 ? p->vals[o].alias : o;
    const plan_value *rv = &p->vals[root];
    if (rv->input >= 0 || p->vals[o].offset != rv->offset || p->vals[o].bytes != rv->bytes) return IR_NONE;
    for (int32_t i = 0; i < p->g->n_nodes; i++) {
        const ir_node *n = &p->g->nodes[i];
        const bool view = n->op == IR_OP_OUTPUT || n->op == IR_OP_RESHAPE;
        if (i != root && p->vals[i].alias == root && !view) return IR_NONE;
        for (int k = 0; k < IR_MAX_SRC && !view; k++)
            if (n->src[k] == root) return IR_NONE;
    }
    return root;
}

/* c's page-locked stage filled for this run (cx_plan_get's layout): the slots and block tables in
 * input order, then each per-run weight input's bytes, then each host gather's rows tok[t] of its
 * table, in the device's layout (cu_layout_to_dev; the tokens were range-checked against the table by plan_check_bindings);
 * the previous run has finished with it */
static const uint8_t *stage(cplan *c, const plan *p, const exec_bindings *b) {
    int32_t *words = (int32_t *)c->h_stage;
    for (int32_t i = 0; i < p->n_inputs; i++) {
        if (p->inputs[i].kind != IR_OP_SLOTS && p->inputs[i].kind != IR_OP_BLOCK_TABLE) continue;
        const uint64_t nw = (uint64_t)ir_nelem(&p->g->nodes[p->inputs[i].node]);
        memcpy(words, b->data[i], (size_t)nw * 4);
        words += nw;
    }
    for (int32_t k = 0; k < c->n_runtime; k++) {
        const cruntime *rt = &c->runtime[k];
        cu_layout_to_dev(c->h_stage + rt->off, (const uint8_t *)b->data[rt->in], rt->type, rt->bytes);
    }
    for (int32_t k = 0; k < c->n_gathers; k++) {
        const cgather *gt = &c->gathers[k];
        const int32_t *tok = (const int32_t *)b->data[gt->tok_in];
        const uint8_t *tab = (const uint8_t *)b->data[gt->w_in];
        uint8_t *dst = c->h_stage + gt->off;
        for (int64_t t = 0; t < gt->T; t++, dst += gt->dev_row_bytes) cu_layout_to_dev(dst, tab + (uint64_t)tok[t] * gt->row_bytes, gt->type, gt->row_bytes);
    }
    return c->h_stage;
}

/* warm: capture the graph in this run, whatever the plan's run count (exec_cuda_warm) */
static sb_status run_bound(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out, bool warm) {
    const int32_t *rows = NULL;
    memset(cx->out_finite, -1, sizeof cx->out_finite);
    SB_TRY(plan_check_bindings(p, b->data, b->n_data, &rows));
    int64_t n_rows = 0;
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const ir_node *n = &p->g->nodes[p->inputs[i].node];
        int64_t cnt = n->op == IR_OP_TOKENS || n->op == IR_OP_POS || n->op == IR_OP_OUT_ROWS ? n->ne[0] : 0;
        if (cnt > cx->max_tokens)
            return sb_fail(SB_ERR_INVALID_ARG, "exec_cuda: input \"%s\" has %lld entries, the context takes %lld", p->inputs[i].name,
                           (long long)cnt, (long long)cx->max_tokens);
        if (n->op == IR_OP_OUT_ROWS) n_rows = n->ne[0];
    }
    cplan *c = NULL;
    SB_TRY(cx_plan_get(cx, p, b, &c));
    /* per-step inputs into the fixed device buffer (graph replays read them there), through
     * page-locked staging of the same layout, copied as one span (the previous run has finished
     * with it: every run ends synchronized) */
    int32_t *h_tok = cx->h_in, *h_pos = cx->h_in + cx->max_tokens, *h_rows = cx->h_in + 2 * cx->max_tokens;
    size_t in_bytes = 0; /* the span of h_in this run's inputs reach */
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        const size_t nb = (size_t)p->g->nodes[in->node].ne[0] * 4;
        if (in->kind == IR_OP_TOKENS) {
            memcpy(h_tok, b->data[i], nb);
            in_bytes = nb > in_bytes ? nb : in_bytes;
        }
        if (in->kind == IR_OP_POS) {
            memcpy(h_pos, b->data[i], nb);
            in_bytes = (size_t)cx->max_tokens * 4 + nb > in_bytes ? (size_t)cx->max_tokens * 4 + nb : in_bytes;
        }
    }
    if (n_rows > 0) {
        if (rows)
            memcpy(h_rows, rows, (size_t)n_rows * 4);
        else
            for (int64_t k = 0; k < n_rows; k++) h_rows[k] = (int32_t)(p->n_tokens - n_rows + k);
        in_bytes = (size_t)(2 * cx->max_tokens + n_rows) * 4;
    }
    if (c->stage_bytes) SB_TRY(cu_memcpy_h2d(c->d_stage, stage(c, p, b), (size_t)c->stage_bytes, cx->s));
    if (cx->cfg.poison) SB_TRY(cu_memset(cx->arena, 0xFF, (size_t)cx->arena_bytes, cx->s));
    const int dc = depth_class(cx, p, b);
    crun r = {.cx = cx, .p = p, .c = c, .arena = (uint8_t *)cx->arena, .depth_max = cx_class_depth(cx, dc)};
    /* decode plans are captured on their first run; other shapes (prefill chunks, whose sizes vary
     * per request) on their second, so a one-off shape does not pay the capture; a warm run
     * captures any shape (its caller will run it again) */
    const bool use_graph = cx->cfg.graphs && !cx->cfg.profile && (p->n_tokens == 1 || c->runs >= 1 || warm);
    c->runs++;
    /* outputs written straight into page-locked destinations by the kernels that compute them
     * (direct_root; graph runs only: a destination is checked once, when its graph is captured) */
    bool direct = use_graph && cx->cfg.direct_out && p->n_outputs <= CX_MAX_OUT && out;
    bool outs_same = true; /* the destinations the step's graph was captured with */
    for (int32_t k = 0; k < p->n_outputs && k < CX_MAX_OUT; k++) outs_same = outs_same && c->graph_out[dc][k] == (out ? out[k] : NULL);
    if (direct) {
        const bool checked = c->graph[dc] && c->graph_direct[dc] && outs_same;
        for (int32_t k = 0; k < p->n_outputs; k++) {
            const ir_ref root = out[k] ? direct_root(p, p->outputs[k].node) : IR_NONE;
            if (root == IR_NONE || !(checked || cu_is_pinned(out[k]))) continue;
            r.direct_out[r.n_direct] = k;
            r.direct_node[r.n_direct] = root;
            r.direct_dst[r.n_direct++] = out[k];
        }
        direct = r.n_direct > 0;
    }
    if (in_bytes) SB_TRY(cu_memcpy_h2d(cx->d_in, cx->h_in, in_bytes, cx->s));
    for (int j = 0; j < r.n_direct; j++) ((volatile unsigned *)cx->h_nonfinite)[j] = 0; /* the previous run has ended */
    if (use_graph) {
        if (!c->graph[dc] || c->graph_arena[dc] != cx->arena || c->graph_direct[dc] != direct || (direct && !outs_same)) {
            cu_graph_destroy(c->graph[dc]);
            c->graph[dc] = NULL;
            SB_TRY(cu_graph_begin(cx->s));
            sb_status st = cx_enqueue_all(&r);
            cu_graph gr = NULL;
            sb_status st2 = cu_graph_end(cx->s, &gr); /* always end the capture, even after a failed launch */
            if (st != SB_OK) {
                cu_graph_destroy(gr);
                return st;
            }
            SB_TRY(st2);
            c->graph[dc] = gr;
            c->graph_arena[dc] = cx->arena;
            c->graph_direct[dc] = direct;
            c->graph_checked[dc] = r.checked;
            for (int32_t k = 0; k < CX_MAX_OUT; k++) c->graph_out[dc][k] = direct && k < p->n_outputs ? out[k] : NULL;
            c->n_kernels[dc] = r.n_kernels;
            cx->st.graph_captures++;
        }
        r.checked = c->graph_checked[dc];
        SB_TRY(cu_graph_launch(c->graph[dc], cx->s));
        cx->st.graph_replays++;
        cx->st.direct_replays += direct;
        cx->st.kernels_last_run = c->n_kernels[dc];
    } else {
        SB_TRY(cx_enqueue_all(&r));
        cx->st.eager_runs++;
        cx->st.kernels_last_run = r.n_kernels;
    }
    for (int32_t k = 0; out && k < p->n_outputs; k++) {
        if (!out[k] || direct_at(&r, p->outputs[k].node)) continue;
        const ir_node *n = &p->g->nodes[p->outputs[k].node];
        SB_TRY(cu_memcpy_d2h_async(out[k], dptr(&r, p->outputs[k].node), (size_t)ir_nelem(n) * sizeof(float), cx->s));
    }
    SB_TRY(cu_stream_sync(cx->s));
    for (int j = 0; j < r.n_direct; j++)
        if (r.checked >> j & 1u) cx->out_finite[r.direct_out[j]] = ((volatile const unsigned *)cx->h_nonfinite)[j] ? 0 : 1;
    cx->st.checked_runs += r.checked != 0;
    return SB_OK;
}

int exec_cuda_output_finite(const exec_cuda *cx, int32_t k) { return cx && k >= 0 && k < CX_MAX_OUT ? cx->out_finite[k] : -1; }

sb_status exec_cuda_run(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out) {
    if (!cx || !p || !b) return sb_fail(SB_ERR_INVALID_ARG, "exec_cuda: NULL context, plan or bindings");
    const cu_config *prev = cu_cfg_bind(&cx->cfg);
    const sb_status st = run_bound(cx, p, b, out, false);
    cu_cfg_bind(prev);
    return st;
}

sb_status exec_cuda_warm(exec_cuda *cx, const plan *p, const exec_bindings *b, float *const *out) {
    if (!cx || !p || !b) return sb_fail(SB_ERR_INVALID_ARG, "exec_cuda: NULL context, plan or bindings");
    const cu_config *prev = cu_cfg_bind(&cx->cfg);
    const sb_status st = run_bound(cx, p, b, out, true);
    cu_cfg_bind(prev);
    return st;
}



typedef struct prof_row {
    int id; /* a family, or a node (prof_report_nodes) */
    double ms;
} prof_row;

static int prof_cmp(const void *a, const void *b) {
    const double x = ((const prof_row *)a)->ms, y = ((const prof_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* the PROF_TOP_NODES slowest nodes of the last graph profiled, appended at buf + w */
static size_t prof_report_nodes(const exec_cuda *cx, char *buf, size_t cap, size_t w, double runs) {
    if (!cx->prof_g || !cx->prof_node_ms) return w;
    prof_row top[PROF_TOP_NODES];
    int n = 0;
    for (int32_t i = 0; i < cx->prof_nodes; i++) { /* insertion into the top list, slowest first */
        const double ms = cx->prof_node_ms[i];
        if (ms <= 0 || (n == PROF_TOP_NODES && ms <= top[n - 1].ms)) continue;
        int k = n < PROF_TOP_NODES ? n++ : n - 1;
        for (; k > 0 && top[k - 1].ms < ms; k--) top[k] = top[k - 1];
        top[k] = (prof_row){i, ms};
    }
    if (w < cap) w += (size_t)snprintf(buf + w, cap - w, "slowest nodes of the last graph (us/run):\n");
    for (int k = 0; k < n && w < cap; k++)
        w += (size_t)snprintf(buf + w, cap - w, "  %9.1f  %s\n", 1e3 * top[k].ms / runs, cx->prof_node_label[top[k].id]);
    return w;
}

size_t exec_cuda_profile_report(exec_cuda *cx, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!cx || cx->prof_runs == 0 || cap == 0) return 0;
    prof_row rows[PROF_FAMILIES];
    int n = 0;
    double total = 0;
    int64_t kt = 0;
    for (int f = 0; f < PROF_FAMILIES; f++)
        if (cx->prof_k[f]) rows[n++] = (prof_row){f, cx->prof_ms[f]}, total += cx->prof_ms[f], kt += cx->prof_k[f];
    qsort(rows, (size_t)n, sizeof *rows, prof_cmp);
    const double runs = (double)cx->prof_runs;
    size_t w = (size_t)snprintf(buf, cap, "%-22s %10s %8s %6s  (%lld runs; %.1f us and %.1f kernels per run)\n", "family", "us/run", "kernels",
                                "share", (long long)cx->prof_runs, 1e3 * total / runs, (double)kt / runs);
    for (int i = 0; i < n && w < cap; i++) {
        char name[40];
        const int f = rows[i].id;
        if (f < IR_OP_COUNT)
            snprintf(name, sizeof name, "%s", ir_ops[f].name);
        else
            snprintf(name, sizeof name, "matmul %s", ir_dtype_name(f - IR_OP_COUNT));
        w += (size_t)snprintf(buf + w, cap - w, "%-22s %10.1f %8.1f %5.1f%%\n", name, 1e3 * rows[i].ms / runs, (double)cx->prof_k[f] / runs,
                              total > 0 ? 100 * rows[i].ms / total : 0.0);
    }
    w = prof_report_nodes(cx, buf, cap, w < cap ? w : cap - 1, runs);
    memset(cx->prof_ms, 0, sizeof cx->prof_ms);
    memset(cx->prof_k, 0, sizeof cx->prof_k);
    cx->prof_runs = 0;
    cx->prof_g = NULL; /* the per-node sums start again with the next profiled run */
    return w < cap ? w : cap - 1;
}

#endif
