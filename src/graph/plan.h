/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/plan.h — the planner: target capabilities (data, not code), the pass pipeline, and the
 * plan object an executor walks (the rewritten graph + arena offsets of every value).
 * Layer 2 (graph). The graph layer never sees backend internals: a backend describes itself with
 * a plan_target (which activation type each weight type's matmul wants, which fusions it runs).
 * A plan is immutable after plan_build and may be executed many times, concurrently from
 * different threads with different bindings/arenas. Plans are per exact shape (T tokens): the
 * session caches them keyed by T (decode T=1, prefill per batch size).
 * Memory plan: every computed non-view value gets [offset, offset+bytes) in one arena
 * (alignment PLAN_ALIGN); views (reshape, kv_store, output) alias their source; inputs are bound;
 * a multi-result node's RESULTs get their memory at the producer's step (it writes them there).
 * Non-goals: multi-device placement, dynamic shapes inside one plan.
 */
#ifndef SB_GRAPH_PLAN_H
#define SB_GRAPH_PLAN_H

#include "graph/ir.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PLAN_ALIGN 64

typedef struct plan_target {
    const char *name;                /* "cpu" */
    /* act_type[w]: the activation type a matmul with weight type w multiplies in; SB_TYPE_F32 (or
     * -1) = no quantize node (f32 activations). Used only when wants_quantized_act. */
    bool wants_quantized_act;
    int32_t act_type[SB_TYPE_COUNT];
    /* matmuls whose activation has at least this many rows keep f32 activations, whatever act_type
     * says (a backend whose large-T GEMMs dequantize the weight instead: CUDA's cuBLASLt path); 0:
     * never */
    int64_t act_f32_min_rows;
    bool fuse_norm_quant;            /* run pass fuse_norm_quant */
    bool fuse_act_quant;             /* run pass fuse_act_quant */
    bool fuse_elementwise;           /* run pass fuse_elementwise */
    bool fuse_rope_store;            /* run pass fuse_rope_store (the executor runs ROPE_STORE) */
    bool fuse_norm_rope;             /* run pass fuse_norm_rope (the executor's ROPE / ROPE_STORE normalise heads: ir_rope_norm_of) */
    bool fuse_add_norm;              /* run pass fuse_add_norm (the executor runs ADD_RMS_NORM_QUANT and RESULT) */
    bool add_norm_writes_sum;        /* its ADD_RMS_NORM_QUANT always writes the sum: fuse only adds whose sum is read
                                      * elsewhere too (then result 1 has memory); false: the sum may go unwritten */
    bool fuse_matmul_add;            /* run pass fuse_matmul_add (matmuls with a third source: the executor adds it) */
    int64_t chain_quant_max_t;       /* pass fuse_chain_quant: a FUSED chain of at most this many rows also writes the
                                      * quantized row a QUANTIZE / RMS_NORM_QUANT of its result wants (0: never) */
    /* pass fuse_matmul_group: matmuls of one activation of at most this many tokens (0: never) run as
     * one launch of at most matmul_group_max members, each one group_member_fits accepts (shape and
     * types only; NULL: all) */
    int64_t matmul_group_max_t;
    int matmul_group_max;
    bool (*group_member_fits)(const ir_graph *g, const ir_node *matmul);
    /* ... and may the matmuls mem[0..n) (of one activation, in the graph's order, each one
     * group_member_fits accepts) run as one launch? (shape and types only, e.g. which weight types
     * one kernel mixes; NULL: any) */
    bool (*group_fits)(const ir_graph *g, const ir_ref *mem, int n);
    /* pass fuse_group_glu: may this gate/up group write act(gate) * up itself (NULL: never) */
    bool (*group_glu_fits)(const ir_graph *g, const ir_node *group);
    int64_t attn_rope_max_t;         /* pass fuse_attn_rope: the attention rotates q itself at most this many tokens (0: never) */
    int64_t attn_rope_paged_max_t;   /* the same for a paged attention (a block table) where larger (0: attn_rope_max_t) */
    int32_t attn_quant_type;         /* pass fuse_attn_quant: the activation type an attention also writes its output in
                                      * (its result 1; head_dim a multiple of the block), -1 or 0 (F32): none */
    int32_t attn_fuse_max_head_dim;  /* passes fuse_attn_rope and fuse_attn_quant: only attentions of head_dim up to
                                      * this (the kernels that do those fusions; 0: any) */
    bool slice_view;                 /* run pass slice_view (the executor takes VIEW as a view at an offset) */
    /* pass fuse_launch_store: may the T = 1 launch of node launch (a matmul, or a matmul group) also
     * perform store (the kv_store of one of its results, or the rope_store of one through views)?
     * Shape and types only (NULL: never) */
    bool (*launch_store_fits)(const ir_graph *g, const ir_node *launch, const ir_node *store);
    /* pass fuse_rope_jobs: may ROPE / ROPE_STORE / KV_STORE node job be job k (0: the first) of a
     * launch of at most rope_jobs_max jobs that run side by side? Shape and types only (NULL: never) */
    int rope_jobs_max;
    bool (*rope_job_fits)(const ir_graph *g, const ir_node *job, int k);
    /* pass fuse_group_jobs: may this matmul group leave a split's partials to the launch of jobs
     * right after it, which sum them? Shape and types only (NULL: never) */
    bool (*group_jobs_fits)(const ir_graph *g, const ir_node *group);
    /* pass fuse_norm_sums: may the norm right after this lone matmul sum its split-K partials?
     * Shape and types only (NULL: never) */
    bool (*norm_sum_fits)(const ir_graph *g, const ir_node *matmul, const ir_node *norm);
} plan_target;

/* The CPU target llama.cpp's CPU backend corresponds to: act_type[w] = qk_get(w)->vec_dot_type
 * (K-quants -> Q8_K, 32-blocks -> Q8_0/Q8_1, F16 -> F16, BF16 -> BF16, F32 -> F32), all fusions. */
void plan_target_cpu(plan_target *t);
/* A target with no quantize-once and no fusions (reference execution; f32 activations). */
void plan_target_reference(plan_target *t);

// ---- passes ----

typedef struct pass_ctx {
    const plan_target *target;
} pass_ctx;

typedef sb_status (*pass_fn)(ir_graph *g, const pass_ctx *cx);

/* One node's rewrite in a pass (graph/passes/rewrite_nodes.c): look at node i, rewrite it in place
 * or append nodes, and set *changed when the graph then needs compacting (nodes appended or left
 * unread; never cleared). uses[] are the use counts on entry to the pass (the rewrite may update
 * them). A status other than SB_OK stops the walk. */
typedef sb_status (*pass_node_rewrite)(ir_graph *g, int32_t *uses, ir_ref i, const pass_ctx *cx, bool *changed);
/* The frame of the node-rewriting passes: count uses, call rewrite on every node of g as it was on
 * entry (in order), then compact once when a rewrite set changed. Returns SB_ERR_OOM for the use
 * counts, the first failing rewrite's status or a sticky graph status (nothing compacted then),
 * else ir_compact's. */
sb_status pass_rewrite_nodes(ir_graph *g, pass_node_rewrite rewrite, const pass_ctx *cx);

typedef struct pass_info {
    const char *name;   /* "dce", as in SB_DUMP_IR=after:dce */
    pass_fn fn;
} pass_info;

sb_status pass_dce(ir_graph *g, const pass_ctx *cx);
sb_status pass_quantize_once(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_norm_quant(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_act_quant(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_elementwise(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_rope_store(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_norm_rope(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_add_norm(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_chain_quant(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_matmul_add(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_attn_rope(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_matmul_group(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_group_glu(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_attn_quant(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_launch_store(ir_graph *g, const pass_ctx *cx);
sb_status pass_slice_view(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_rope_jobs(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_group_jobs(ir_graph *g, const pass_ctx *cx);
sb_status pass_fuse_norm_sums(ir_graph *g, const pass_ctx *cx);

/* The pipeline table (graph/pipeline.c), in order; n_out receives the count. */
const pass_info *pass_pipeline(int *n_out);

/* Where SB_DUMP_IR output goes (default: stderr when the variable is set; tests pass a FILE*).
 * spec: NULL = read getenv("SB_DUMP_IR"); "after-all"; "after:<pass>" (several comma-separated; also
 * "memplan" and "launches"). */
typedef struct plan_dump {
    const char *spec;
    FILE *f;
} plan_dump;

/* Does the dump spec (d's, or SB_DUMP_IR when d or its spec is NULL) ask for the section `name`: a
 * pass, "memplan", or "launches" (a backend's own fusions over a plan)? "after-all" asks for all. */
bool plan_dump_wants(const plan_dump *d, const char *name);

/* Run the pipeline on g in place (verifier after every pass). dump may be NULL. */
sb_status pass_run_pipeline(ir_graph *g, const plan_target *t, const plan_dump *dump);

// ---- plan ----

typedef struct plan_value {
    uint64_t offset;     /* arena offset (computed values); UINT64_MAX for inputs */
    uint64_t bytes;
    ir_ref alias;        /* root node whose memory this value uses (itself if not a view) */
    int32_t input;       /* input slot for inputs/aliases of inputs, else -1 */
} plan_value;

typedef struct plan_input {
    ir_ref node;
    ir_op kind;          /* IR_OP_TOKENS/POS/OUT_ROWS/WEIGHT/KV */
    const char *name;    /* node name ("tokens", "pos", "out_rows", the weight/kv name) */
    bool per_run;        /* a WEIGHT whose memory and contents may change every run (a program's run-time data):
                          * an executor that keeps copies of weights re-reads it each run. plan_build leaves it
                          * false; the caller sets it before the backend's prepare */
} plan_input;

typedef struct plan_output {
    ir_ref node;
    const char *name;
} plan_output;

typedef struct plan {
    ir_graph *g;             /* the planned graph (owned) */
    plan_target target;
    plan_value *vals;        /* [g->n_nodes] */
    plan_input *inputs;      /* input slots, in node order */
    int32_t n_inputs;
    plan_output *outputs;
    int32_t n_outputs;
    uint64_t arena_bytes;    /* peak of the memory plan */
    uint64_t naive_bytes;    /* sum of all computed values (what no reuse would need) */
    int64_t n_tokens;        /* T of the tokens/pos inputs (0 if none) */
    int64_t max_ctx;         /* largest KV cache length C (attention scratch) */
    /* executor scratch, in f32 elements: per thread (attention scores, a weight row, a fused row)
     * and shared (a non-f32 matmul activation converted to f32, K*T) */
    uint64_t scratch_thread_f32;
    uint64_t scratch_shared_f32;
} plan;

/* Clone g, run the pipeline, plan memory. The caller keeps g. */
sb_status plan_build(const ir_graph *g, const plan_target *target, const plan_dump *dump, plan **out);
void plan_free(plan *p);
/* Slot of the input named name, or -1. */
int32_t plan_find_input(const plan *p, const char *name);
/* Index into p->outputs of the output named name, or -1. */
int32_t plan_find_output(const plan *p, const char *name);
/* Check the data bound to a plan's inputs before a run, for any executor: n_data equals the input
 * count, every slot but out_rows is bound, token ids lie inside their embedding's rows, positions
 * >= 0 and inside every KV cache that is not a ring (SB_ERR_CONTEXT_FULL past the end), out_rows
 * inside [0, T). On success
 * *out_rows is the bound out_rows data or left NULL (the last rows). Nothing is written. */
sb_status plan_check_bindings(const plan *p, void *const *data, int32_t n_data, const int32_t **out_rows);
/* The paged part of that check (graph/plan_paged.c): slots inside their cache, block tables inside
 * the cache for every block up to each token's position. plan_check_bindings calls it. */
sb_status plan_check_paged(const plan *p, void *const *data);

/* Peak bytes, reuse and the offset table, for humans. */
void plan_print(const plan *p, FILE *f);

/* The memory plan alone (plan.c): fill p->vals, arena_bytes, naive_bytes for p->g. Exposed for
 * the golden test; plan_build calls it. */
sb_status plan_memory(plan *p);

#endif
