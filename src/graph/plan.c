/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/plan.c — plan_build (clone + pipeline + memory plan) and the memory plan itself:
 * liveness intervals -> offsets in one arena (ggml-alloc made static).
 * Layer 2 (graph). Memory plan: walk nodes in execution order; a computed value that is not a view
 * gets the best-fitting free block (or grows the arena) when it is defined, and its block returns
 * to the free list after its last reader ran (reads through views count: reshape, kv_store,
 * output alias their source). Outputs stay live to the end (the caller reads them after the run).
 * A value is never placed over a value its own node reads (inputs are freed after allocation), nor
 * over one that a job of its launch of jobs reads (pass fuse_rope_jobs: those live until its last job),
 * nor a norm's over the addend of the matmul whose partials it sums (pass fuse_norm_sums).
 * Offsets are PLAN_ALIGN-aligned. The arena is the caller's; running a plan allocates nothing.
 * Non-goals: in-place reuse of an input's block by its consumer, multiple arenas/devices.
 *
 * Example (T=4, E=64): %2 get_rows [64,4] -> off 0; %3 rms_norm -> off 1024; %2 dies at %4 so
 * %4 mul reuses off 0 ... peak = the largest set of simultaneously live values, printed by
 * plan_print as "arena 2048 bytes (naive 4096, reuse 2.0x)".
 */
#include "graph/plan.h"

#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

// ---- targets ----

void plan_target_cpu(plan_target *t) {
    memset(t, 0, sizeof *t);
    t->name = "cpu";
    t->wants_quantized_act = true;
    for (int i = 0; i < SB_TYPE_COUNT; i++) {
        const qk_traits *q = qk_get(i);
        t->act_type[i] = (q && !q->removed && i != SB_TYPE_F32) ? q->vec_dot_type : SB_TYPE_F32;
    }
    t->fuse_norm_quant = t->fuse_act_quant = t->fuse_elementwise = t->fuse_rope_store = t->fuse_norm_rope = t->fuse_add_norm = true;
    t->slice_view = true;
    t->chain_quant_max_t = INT64_MAX;
}

void plan_target_reference(plan_target *t) {
    memset(t, 0, sizeof *t);
    t->name = "reference";
    for (int i = 0; i < SB_TYPE_COUNT; i++) t->act_type[i] = SB_TYPE_F32;
}

// ---- free list ----

typedef struct blk {
    uint64_t off, size;
} blk;

typedef struct freelist {
    blk *b;
    int32_t n, cap;
    uint64_t top; /* arena high-water mark */
} freelist;

static uint64_t fl_alloc(freelist *fl, uint64_t size) {
    int32_t best = -1;
    for (int32_t i = 0; i < fl->n; i++)
        if (fl->b[i].size >= size && (best < 0 || fl->b[i].size < fl->b[best].size)) best = i;
    if (best >= 0) {
        uint64_t off = fl->b[best].off;
        fl->b[best].off += size;
        fl->b[best].size -= size;
        if (!fl->b[best].size) memmove(&fl->b[best], &fl->b[best + 1], (size_t)(fl->n - best - 1) * sizeof *fl->b), fl->n--;
        return off;
    }
    /* grow: extend a free block that ends at the top, else take fresh space */
    if (fl->n && fl->b[fl->n - 1].off + fl->b[fl->n - 1].size == fl->top) {
        uint64_t off = fl->b[fl->n - 1].off;
        fl->top = off + size;
        fl->n--;
        return off;
    }
    uint64_t off = fl->top;
    fl->top += size;
    return off;
}

/* blocks sorted by offset; merge with neighbours */
static bool fl_free(freelist *fl, uint64_t off, uint64_t size) {
    int32_t i = 0;
    while (i < fl->n && fl->b[i].off < off) i++;
    if (i > 0 && fl->b[i - 1].off + fl->b[i - 1].size == off) {
        fl->b[i - 1].size += size;
        if (i < fl->n && fl->b[i - 1].off + fl->b[i - 1].size == fl->b[i].off) {
            fl->b[i - 1].size += fl->b[i].size;
            memmove(&fl->b[i], &fl->b[i + 1], (size_t)(fl->n - i - 1) * sizeof *fl->b);
            fl->n--;
        }
        return true;
    }
    if (i < fl->n && off + size == fl->b[i].off) {
        fl->b[i].off = off;
        fl->b[i].size += size;
        return true;
    }
    if (fl->n == fl->cap) {
        int32_t cap = fl->cap ? fl->cap * 2 : 64;
        blk *nb = realloc(fl->b, (size_t)cap * sizeof *nb);
        if (!nb) return false;
        fl->b = nb;
        fl->cap = cap;
    }
    memmove(&fl->b[i + 1], &fl->b[i], (size_t)(fl->n - i) * sizeof *fl->b);
    fl->b[i] = (blk){off, size};
    fl->n++;
    return true;
}

// ---- memory plan ----

static bool is_view(ir_op op) { return ir_ops[op].flags & OPF_VIEW; }

static void alloc_value(plan *p, freelist *fl, int32_t i) {
    uint64_t sz = (p->vals[i].bytes + PLAN_ALIGN - 1) & ~(uint64_t)(PLAN_ALIGN - 1);
    p->vals[i].offset = fl_alloc(fl, sz);
    p->naive_bytes += sz;
}

/* free the roots node k reads whose last reader is node i (at i); false: the free list failed */
static bool free_reads(const plan *p, freelist *fl, int32_t *last, int32_t i, int32_t k) {
    const ir_node *nd = &p->g->nodes[k];
    for (int j = 0; j < IR_MAX_SRC && nd->src[j] != IR_NONE; j++) {
        ir_ref r = p->vals[nd->src[j]].alias;
        if (last[r] == i && p->vals[r].input < 0 && r != i) {
            last[r] = -1; /* freed once */
            uint64_t sz = (p->vals[r].bytes + PLAN_ALIGN - 1) & ~(uint64_t)(PLAN_ALIGN - 1);
            if (!fl_free(fl, p->vals[r].offset, sz)) return false;
        }
    }
    return true;
}

/* A launch of jobs (pass fuse_rope_jobs: ir_job_next links) runs its jobs side by side: what any
 * job reads stays live until its last job. job_end[k] = the last job of the launch job k is in
 * (-1: none); the launch's reads last at least until there. */
static void keep_job_reads(const plan *p, int32_t *last, int32_t *job_end) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) job_end[i] = -1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (job_end[i] >= 0 || ir_job_next(&g->nodes[i], i) == IR_NONE) continue; /* not a launch's first job */
        int32_t end = i;
        while (ir_job_next(&g->nodes[end], end) != IR_NONE) end = ir_job_next(&g->nodes[end], end);
        for (int32_t k = i; k != IR_NONE; k = ir_job_next(&g->nodes[k], k)) {
            job_end[k] = end;
            for (int j = 0; j < IR_MAX_SRC && g->nodes[k].src[j] != IR_NONE; j++) {
                const ir_ref r = p->vals[g->nodes[k].src[j]].alias;
                if (last[r] != INT32_MAX && last[r] < end) last[r] = end;
            }
        }
    }
}

/* A norm summing a matmul's split-K partials (pass fuse_norm_sums) adds the matmul's addend as it
 * sums: that addend lives until the norm. */
static void keep_norm_sum_reads(const plan *p, int32_t *last) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_ref mm = ir_norm_sums_of(&g->nodes[i], i);
        const ir_ref o = mm != IR_NONE ? ir_matmul_addend(&g->nodes[mm]) : IR_NONE;
        if (o == IR_NONE) continue;
        const ir_ref r = p->vals[o].alias;
        if (last[r] != INT32_MAX && last[r] < i) last[r] = i;
    }
}

/* at node i, the last job of a launch: free what its other jobs read (free_reads) */
static bool free_job_reads(const plan *p, freelist *fl, int32_t *last, const int32_t *job_end, int32_t i) {
    if (job_end[i] != i) return true;
    for (int32_t q = 0; q < i; q++) /* a few launches a layer: a scan each */
        if (job_end[q] == i && !free_reads(p, fl, last, i, q)) return false;
    return true;
}

sb_status plan_memory(plan *p) {
    const ir_graph *g = p->g;
    int32_t n = g->n_nodes;
    free(p->vals);
    p->vals = calloc((size_t)(n ? n : 1), sizeof *p->vals);
    int32_t *last = malloc((size_t)(n ? n : 1) * sizeof *last);
    int32_t *job_end = malloc((size_t)(n ? n : 1) * sizeof *job_end);
    freelist fl = {0};
    sb_status st = SB_OK;
    if (!p->vals || !last || !job_end) {
        st = sb_fail(SB_ERR_OOM, "plan: memory plan of %d nodes", (int)n);
        goto cleanup;
    }
    int32_t slot = 0;
    for (int32_t i = 0; i < n; i++) {
        const ir_node *nd = &g->nodes[i];
        plan_value *v = &p->vals[i];
        v->bytes = ir_nbytes(nd);
        v->input = -1;
        v->offset = UINT64_MAX;
        v->alias = i;
        last[i] = i;
        if (ir_ops[nd->op].flags & OPF_INPUT) {
            v->input = slot++;
        } else if (is_view(nd->op)) {
            v->alias = p->vals[nd->src[0]].alias;
            v->input = p->vals[nd->src[0]].input;
        }
        if (!v->bytes && !(ir_ops[nd->op].flags & OPF_INPUT)) {
            st = sb_fail(SB_ERR_INTERNAL, "plan: node %%%d has no byte size", (int)i);
            goto cleanup;
        }
        for (int j = 0; j < IR_MAX_SRC && nd->src[j] != IR_NONE; j++) {
            ir_ref r = p->vals[nd->src[j]].alias;
            if (last[r] < i) last[r] = i;
        }
        if (nd->op == IR_OP_OUTPUT) last[v->alias] = INT32_MAX;
    }
    /* a view's readers extend its root: propagate in order (roots precede views) */
    for (int32_t i = 0; i < n; i++)
        if (p->vals[i].alias != i && last[i] > last[p->vals[i].alias]) last[p->vals[i].alias] = last[i];
    keep_job_reads(p, last, job_end);
    keep_norm_sum_reads(p, last);
    p->naive_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        plan_value *v = &p->vals[i];
        if (v->input < 0 && v->alias == i) {
            /* a producer's RESULTs (right after it) get their memory with it, before its inputs
             * are freed: the producer writes them in its own step */
            if (g->nodes[i].op != IR_OP_RESULT) {
                alloc_value(p, &fl, i);
                for (int32_t r = i + 1; r < n && g->nodes[r].op == IR_OP_RESULT && g->nodes[r].src[0] == i; r++) alloc_value(p, &fl, r);
            }
        } else if (v->input < 0) { /* a view: where its source is (a VIEW: that many elements on) */
            v->offset = p->vals[g->nodes[i].src[0]].offset + (g->nodes[i].op == IR_OP_VIEW ? 4 * (uint64_t)g->nodes[i].ip[0] : 0);
        } else if (g->nodes[i].op == IR_OP_VIEW) { /* of an input: pass slice_view never makes one */
            st = sb_fail(SB_ERR_INTERNAL, "plan: view %%%d of an input", (int)i);
            goto cleanup;
        }
        /* free every root whose last reader is node i (or the launch of jobs that ends at i) */
        const ir_ref mm = ir_norm_sums_of(&g->nodes[i], i); /* a norm summing mm's partials reads mm's addend */
        if (!free_reads(p, &fl, last, i, i) || !free_job_reads(p, &fl, last, job_end, i) || (mm != IR_NONE && !free_reads(p, &fl, last, i, mm))) {
            st = sb_fail(SB_ERR_OOM, "plan: free list");
            goto cleanup;
        }
        if (v->input < 0 && v->alias == i && last[i] == i) { /* never read: free at once */
            uint64_t sz = (v->bytes + PLAN_ALIGN - 1) & ~(uint64_t)(PLAN_ALIGN - 1);
            last[i] = -1;
            if (!fl_free(&fl, v->offset, sz)) {
                st = sb_fail(SB_ERR_OOM, "plan: free list");
                goto cleanup;
            }
        }
    }
    p->arena_bytes = fl.top;
cleanup:
    free(last);
    free(job_end);
    free(fl.b);
    return st;
}

// ---- plan ----

void plan_free(plan *p) {
    if (!p) return;
    ir_graph_free(p->g);
    free(p->vals);
    free(p->inputs);
    free(p->outputs);
    free(p);
}

static sb_status plan_index(plan *p) {
    const ir_graph *g = p->g;
    int32_t ni = 0, no = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (ir_ops[g->nodes[i].op].flags & OPF_INPUT) ni++;
        if (g->nodes[i].op == IR_OP_OUTPUT) no++;
    }
    p->inputs = calloc((size_t)(ni ? ni : 1), sizeof *p->inputs);
    p->outputs = calloc((size_t)(no ? no : 1), sizeof *p->outputs);
    if (!p->inputs || !p->outputs) return sb_fail(SB_ERR_OOM, "plan: %d inputs, %d outputs", (int)ni, (int)no);
    uint64_t thr = 1, shared = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (ir_ops[n->op].flags & OPF_INPUT) {
            p->inputs[p->n_inputs++] = (plan_input){.node = i, .kind = n->op, .name = n->name};
            if (n->op == IR_OP_TOKENS || n->op == IR_OP_POS || n->op == IR_OP_SLOTS) p->n_tokens = n->ne[0];
            if (n->op == IR_OP_KV && n->ne[1] > p->max_ctx) p->max_ctx = n->ne[1];
        }
        if (n->op == IR_OP_OUTPUT) p->outputs[p->n_outputs++] = (plan_output){i, n->name};
        if ((uint64_t)n->ne[0] > thr) thr = (uint64_t)n->ne[0];
        if (n->op == IR_OP_MATMUL) {
            const ir_node *w = &g->nodes[n->src[0]], *x = &g->nodes[n->src[1]];
            if ((uint64_t)w->ne[0] > thr) thr = (uint64_t)w->ne[0];
            if (x->dtype != SB_TYPE_F32 && (uint64_t)ir_nelem(x) > shared) shared = (uint64_t)ir_nelem(x);
        }
    }
    if ((uint64_t)p->max_ctx > thr) thr = (uint64_t)p->max_ctx;
    p->scratch_thread_f32 = thr;
    p->scratch_shared_f32 = shared;
    return SB_OK;
}

sb_status plan_build(const ir_graph *g, const plan_target *target, const plan_dump *dump, plan **out) {
    if (!g || !target || !out) return sb_fail(SB_ERR_INVALID_ARG, "plan_build: NULL argument");
    SB_TRY(ir_graph_status(g));
    plan *p = calloc(1, sizeof *p);
    if (!p) return sb_fail(SB_ERR_OOM, "plan: %zu bytes", sizeof *p);
    p->target = *target;
    sb_status st = ir_graph_clone(g, &p->g);
    if (st == SB_OK) st = pass_run_pipeline(p->g, target, dump);
    if (st == SB_OK) st = plan_index(p);
    if (st == SB_OK) st = plan_memory(p);
    if (st != SB_OK) {
        plan_free(p);
        return st;
    }
    if (plan_dump_wants(dump, "memplan")) plan_print(p, dump && dump->f ? dump->f : stderr);
    *out = p;
    return SB_OK;
}

int32_t plan_find_input(const plan *p, const char *name) {
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (!strcmp(p->inputs[i].name, name)) return i;
    return -1;
}

int32_t plan_find_output(const plan *p, const char *name) {
    for (int32_t i = 0; i < p->n_outputs; i++)
        if (!strcmp(p->outputs[i].name, name)) return i;
    return -1;
}

void plan_print(const plan *p, FILE *f) {
    fprintf(f, "// ---- memory plan (%s): %d nodes, %d inputs, %d outputs ----\n", p->target.name ? p->target.name : "?",
            (int)p->g->n_nodes, (int)p->n_inputs, (int)p->n_outputs);
    for (int32_t i = 0; i < p->g->n_nodes; i++) {
        const plan_value *v = &p->vals[i];
        if (v->input >= 0 && v->alias == i)
            fprintf(f, "%%%d input slot %d\n", (int)i, (int)v->input);
        else if (v->alias != i)
            fprintf(f, "%%%d view of %%%d\n", (int)i, (int)v->alias);
        else
            fprintf(f, "%%%d [%llu, %llu)\n", (int)i, (unsigned long long)v->offset,
                    (unsigned long long)(v->offset + v->bytes));
    }
    fprintf(f, "arena %llu bytes (naive %llu, reuse %.2fx)\n", (unsigned long long)p->arena_bytes,
            (unsigned long long)p->naive_bytes, p->arena_bytes ? (double)p->naive_bytes / (double)p->arena_bytes : 1.0);
}

// ---- binding check (shared by the executors) ----

sb_status plan_check_bindings(const plan *p, void *const *data, int32_t n_data, const int32_t **out_rows) {
    const ir_graph *g = p->g;
    if (n_data != p->n_inputs) return sb_fail(SB_ERR_INVALID_ARG, "plan: %d bound inputs, plan has %d", (int)n_data, (int)p->n_inputs);
    for (int32_t i = 0; i < p->n_inputs; i++)
        if (!data[i] && p->inputs[i].kind != IR_OP_OUT_ROWS)
            return sb_fail(SB_ERR_INVALID_ARG, "plan: input \"%s\" (slot %d) not bound", p->inputs[i].name, (int)i);
    const int32_t *pos = NULL;
    int64_t T = 0;
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const ir_node *n = &g->nodes[p->inputs[i].node];
        if (n->op == IR_OP_POS) pos = data[i], T = n->ne[0];
        if (n->op == IR_OP_OUT_ROWS && data[i]) *out_rows = data[i];
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->op == IR_OP_GET_ROWS) {
            const ir_node *w = &g->nodes[n->src[0]];
            const int32_t *tok = data[p->vals[n->src[1]].input];
            for (int64_t t = 0; t < n->ne[1]; t++)
                if (tok[t] < 0 || tok[t] >= w->ne[1])
                    return sb_fail(SB_ERR_RANGE, "plan: token %d at row %lld outside [0, %lld) of \"%s\"", tok[t], (long long)t,
                                   (long long)w->ne[1], w->name);
        }
        if (n->op == IR_OP_KV && pos)
            for (int64_t t = 0; t < T; t++)
                if (pos[t] < 0 || (pos[t] >= n->ne[1] && !ir_kv_is_ring(n)))
                    return sb_fail(pos[t] < 0 ? SB_ERR_RANGE : SB_ERR_CONTEXT_FULL,
                                   "plan: position %d at row %lld outside the cache \"%s\" of %lld positions", pos[t],
                                   (long long)t, n->name, (long long)n->ne[1]);
        if (n->op == IR_OP_OUT_ROWS && *out_rows) {
            int64_t Tr = p->n_tokens;
            for (int64_t k = 0; k < n->ne[0]; k++)
                if ((*out_rows)[k] < 0 || (*out_rows)[k] >= Tr)
                    return sb_fail(SB_ERR_RANGE, "plan: out_rows[%lld] = %d outside [0, %lld)", (long long)k, (*out_rows)[k], (long long)Tr);
        }
    }
    return plan_check_paged(p, data);
}
