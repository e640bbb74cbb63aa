/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/ir.h — the graph IR: a flat array of nodes in topological order, the builder API that
 * model builders (runtime/arch/ files) use to record a forward pass, the verifier and the text dump.
 * Layer 2 (graph; sees base, quant, ops). Ops come from ops/ops.def (one line per op).
 * Invariants: node i's sources are all < i (topological); a node's ne/dtype always equal what its
 * op's shape function (graph/shape.c) derives from its sources and params — builders call that
 * function, the verifier re-checks it after every pass.
 * Builders only record: they compute nothing. Shape misuse (inconsistent shapes, perhaps from a
 * model file's hparams) and allocation failure are sticky (g->status = SB_ERR_INVALID_ARG with
 * the op and the dims, or SB_ERR_OOM) and make later builders return IR_NONE, so a builder checks
 * ir_graph_status(g) once at the end; plan_build refuses such a graph. Nothing aborts.
 * KV writes are explicit data flow: ir_kv_store returns "the cache after the write" (a view of the
 * cache), and attention reads that value, so no hidden ordering exists.
 * Non-goals: general tensors with strides (all values are contiguous), autodiff, control flow.
 */
#ifndef SB_GRAPH_IR_H
#define SB_GRAPH_IR_H

#include "base/status.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// ---- ops ----

enum {
    OPF_INPUT = 1u << 0,   /* bound at run time, no sources */
    OPF_VIEW = 1u << 1,    /* result aliases src0's memory */
    OPF_ROWWISE = 1u << 2, /* row t of the result depends only on row t of row-shaped sources */
    OPF_EW = 1u << 3,      /* may be a step of a FUSED chain */
    OPF_REDUCE = 1u << 4,  /* a row reduction (at most one per FUSED chain) */
    OPF_PLANNER = 1u << 5, /* created by passes only */
};

typedef enum ir_op {
#define OP(NAME, name, min_src, max_src, flags) IR_OP_##NAME,
#include "ops/ops.def"
#undef OP
    IR_OP_COUNT
} ir_op;

typedef struct ir_op_info {
    const char *name;   /* text-IR name, "rms_norm" */
    int min_src, max_src;
    uint32_t flags;     /* OPF_* */
} ir_op_info;

extern const ir_op_info ir_ops[IR_OP_COUNT];

// ---- nodes and graphs ----

typedef int32_t ir_ref;   /* node index; IR_NONE = absent */
#define IR_NONE ((ir_ref)-1)
#define IR_MAX_SRC 8
#define IR_MAX_IP 12
#define IR_MAX_FP 8
#define IR_NAME_MAX 64

/* RoPE modes (architectures.md §0.3). Values are llama.cpp's rope type numbers. */
enum { IR_ROPE_NORMAL = 0, IR_ROPE_NEOX = 2 };

/* FUSED chain step: ip[0] = step count n (<= IR_MAX_FUSE); step i (0-based) is
 * ip[1+i] = op | (operand << 8), where operand is the src index of the step's second input (ADD,
 * MUL) or 0 for none; fp[i] = the step's float param (eps, scale, cap). src[0] is the chain input. */
#define IR_MAX_FUSE 7

typedef struct ir_node {
    ir_op op;
    int32_t dtype;            /* sb_type of the result */
    ir_ref src[IR_MAX_SRC];   /* IR_NONE-padded */
    int64_t ne[4];            /* ne[0] innermost; unused dims are 1 */
    int32_t ip[IR_MAX_IP];    /* integer params (per op, see the builder comments) */
    float fp[IR_MAX_FP];      /* float params */
    char name[IR_NAME_MAX];   /* weight/kv/output name, or a debug name ("blk.3.attn_q"); may be "" */
} ir_node;

typedef struct ir_graph {
    ir_node *nodes;
    int32_t n_nodes, cap;
    sb_status status;         /* sticky: first allocation failure */
} ir_graph;

sb_status ir_graph_create(ir_graph **out);
void ir_graph_free(ir_graph *g);
/* SB_OK, or the first failure recorded while building (SB_ERR_OOM). */
sb_status ir_graph_status(const ir_graph *g);
/* A deep copy (plans keep their own graph). */
sb_status ir_graph_clone(const ir_graph *g, ir_graph **out);

static inline int64_t ir_nelem(const ir_node *n) { return n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3]; }
/* Rows of a value = ne1*ne2*ne3. */
static inline int64_t ir_nrows(const ir_node *n) { return n->ne[1] * n->ne[2] * n->ne[3]; }
/* Bytes of a value (row bytes from quant/types.h times rows); 0 for an invalid dtype/ne[0]. */
uint64_t ir_nbytes(const ir_node *n);
/* Give a node a debug name (printf format, truncated to IR_NAME_MAX-1). Returns r. */
ir_ref ir_set_name(ir_graph *g, ir_ref r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- builder: inputs ----

/* i32 [T]: token ids of the batch. */
ir_ref ir_input_tokens(ir_graph *g, int64_t T);
/* i32 [T]: absolute position of each token (query t sees cache positions <= pos[t]). */
ir_ref ir_input_pos(ir_graph *g, int64_t T);
/* i32 [n]: which token rows get logits (bound at run time; default = the last n rows). */
ir_ref ir_input_out_rows(ir_graph *g, int64_t n);
/* A read-only weight of any sb_type, bound by name at run time. ne: 1..4 dims, unused = 1. */
ir_ref ir_input_weight(ir_graph *g, const char *name, int dtype, const int64_t ne[4]);
/* A K or V cache buffer [Dkv, C] (dtype F32 or F16), persistent session state bound by name.
 * Position p lives at row p. */
ir_ref ir_input_kv(ir_graph *g, const char *name, int dtype, const int64_t ne[4]);
/* The same as a ring: position p lives at row p mod C, so C rows hold the last C positions. Only
 * sliding-window attention may read a ring, and only one of at least window + T - 1 rows (the T
 * tokens of a step are stored before any of them attends); the verifier checks both. Positions
 * are not bounded by C (the caller bounds them by its context). */
ir_ref ir_input_kv_ring(ir_graph *g, const char *name, int dtype, const int64_t ne[4]);
/* KV: is it a ring; and the KV input a cache value (kv, kv_store, rope_store chain) writes into */
static inline bool ir_kv_is_ring(const ir_node *kv) { return kv->ip[0] == 1; }
ir_ref ir_kv_root(const ir_graph *g, ir_ref cache);
/* the rows C of the ring the cache value c is or writes into (position p at row p mod C); 0: no ring */
static inline int64_t ir_kv_ring(const ir_graph *g, ir_ref c) {
    const ir_ref kv = ir_kv_root(g, c);
    return kv != IR_NONE && ir_kv_is_ring(&g->nodes[kv]) ? g->nodes[kv].ne[1] : 0;
}

// ---- builder: ops (all results f32 unless said) ----

/* (w [E,V] any type, tokens i32 [T]) -> [E,T]: rows of w, dequantized. */
ir_ref ir_get_rows(ir_graph *g, ir_ref w, ir_ref tokens);
/* x / sqrt(mean(x^2 over ne[0]) + eps), per row. fp[0] = eps. */
ir_ref ir_rms_norm(ir_graph *g, ir_ref x, float eps);
/* a + b, a * b. b has shape [ne0] (broadcast over rows) or a's shape. */
ir_ref ir_add(ir_graph *g, ir_ref a, ir_ref b);
ir_ref ir_mul(ir_graph *g, ir_ref a, ir_ref b);
/* x * s. fp[0] = s. */
ir_ref ir_scale(ir_graph *g, ir_ref x, float s);
/* c * tanh(x / c). fp[0] = c (> 0). */
ir_ref ir_softcap(ir_graph *g, ir_ref x, float c);
ir_ref ir_silu(ir_graph *g, ir_ref x);
ir_ref ir_softmax(ir_graph *g, ir_ref x); /* over each row (ne[0]) */
ir_ref ir_gelu_tanh(ir_graph *g, ir_ref x);
/* (x - mean) / sqrt(var + eps) over ne[0], per row, no weight (fp[0] = eps); exact GELU
 * 0.5x(1 + erf(x / sqrt 2)) (not gelu_tanh's table). */
ir_ref ir_layer_norm(ir_graph *g, ir_ref x, float eps);
ir_ref ir_gelu(ir_graph *g, ir_ref x);
/* silu(gate) * up; gelu_tanh(gate) * up. Same shapes. */
ir_ref ir_swiglu(ir_graph *g, ir_ref gate, ir_ref up);
ir_ref ir_geglu(ir_graph *g, ir_ref gate, ir_ref up);
/* (w [K,N] any type, x [K,T] f32) -> [N,T], y[n,t] = sum_k w[k,n] x[k,t]. */
ir_ref ir_matmul(ir_graph *g, ir_ref w, ir_ref x);
/* A view with the same element count, e.g. [D*H,T] <-> [D,H,T]. */
ir_ref ir_reshape(ir_graph *g, ir_ref x, const int64_t ne[4]);

typedef struct ir_rope_params {
    int32_t n_rot;       /* rotated dims (even, <= D) */
    int32_t mode;        /* IR_ROPE_NORMAL | IR_ROPE_NEOX */
    float freq_base;     /* b */
    float freq_scale;    /* s (1/F for linear scaling F) */
} ir_rope_params;
/* RoPE (architectures.md §0.3) of x [D,H,T] at pos [T]; freq_factors f32 [n_rot/2] or IR_NONE.
 * ip[0]=n_rot ip[1]=mode fp[0]=freq_base fp[1]=freq_scale fp[2]=attn_factor (1). */
ir_ref ir_rope(ir_graph *g, ir_ref x, ir_ref pos, ir_ref freq_factors, const ir_rope_params *p);
/* Write column pos[t] of cache [Dkv,C] with x[:,t] (rounded to the cache dtype); returns the cache
 * after the write (same shape/dtype, aliasing the cache). Read it through this value. */
ir_ref ir_kv_store(ir_graph *g, ir_ref cache, ir_ref x, ir_ref pos);

typedef struct ir_attn_params {
    int32_t n_head_kv;   /* Hkv; Hq % Hkv == 0, query head h uses kv head h / (Hq/Hkv) */
    int32_t head_dim;    /* D (== q ne[0]) */
    float scale;         /* kq scale (e.g. 1/sqrt(D)) */
    int32_t window;      /* 0 = none; else query at p sees [max(0, p-window+1), p] */
    float softcap;       /* 0 = none; else score = c*tanh(score/c) before the mask */
} ir_attn_params;
/* (q [D,Hq,T], k [Dkv,C], v [Dkv,C], pos [T]) -> [D*Hq,T]. Query t attends to cache positions
 * [lo, pos[t]] (causal; lo from the window), softmax in f32 with max subtraction.
 * ip[0]=n_head_kv ip[1]=head_dim ip[2]=window fp[0]=scale fp[1]=softcap. */
ir_ref ir_attention(ir_graph *g, ir_ref q, ir_ref k, ir_ref v, ir_ref pos, const ir_attn_params *p);
/* Paged KV (graph/builder_paged.c; runtime/kv_pool.h). i32 [T]: the cache row each token's K/V
 * is written to (kv_store's pos source in place of the positions). */
ir_ref ir_input_slots(ir_graph *g, int64_t T);
/* i32 [n_blk, T]: column t holds the physical block of each logical block of token t's sequence. */
ir_ref ir_input_block_table(ir_graph *g, int64_t n_blk, int64_t T);
/* ir_attention over paged caches k/v [Dkv, n_blocks*bs]: position j of query t is cache row
 * table[t][j / bs] * bs + j % bs; the causal mask and window stay on the logical positions pos.
 * ip[3] = bs; src[4] = table (src[5]: a fused Q rope's freq factors, ir_attn_q_rope_ff). */
ir_ref ir_attention_paged(ir_graph *g, ir_ref q, ir_ref k, ir_ref v, ir_ref pos, ir_ref table, int32_t block_size,
                          const ir_attn_params *p);
/* Shape check of attention's block table (n has 5 sources, 6 with a fused Q rope's freq factors),
 * for graph/shape.c. */
sb_status ir_shape_paged_attention(const ir_graph *g, const ir_node *n, int ns);
/* Shape checks of concat (ns sources joined along ne[ip[0]]) and permute (ne[k] = x.ne[ip[k]]),
 * for graph/shape.c: the result's ne into ne (graph/shape_copy.c). Built by api/api_ops.c. */
sb_status ir_shape_concat(const ir_graph *g, const ir_node *n, int ns, int64_t ne[4]);
sb_status ir_shape_permute(const ir_graph *g, const ir_node *n, int64_t ne[4]);
/* (x [E,T], rows i32 [n]) -> [E,n]: rows rows[i] of x. */
ir_ref ir_select_rows(ir_graph *g, ir_ref x, ir_ref rows);
/* (x f32 [a,b,c,d]) -> [a,n,c,d]: x[:, start .. start+n, :, :] copied (e.g. one layer's slice of a
 * per-layer table [P,L,T]). ip[0]=start ip[1]=n; start >= 0, n >= 1, start+n <= b. */
ir_ref ir_slice(ir_graph *g, ir_ref x, int32_t start, int32_t n);
/* n (2..8) f32 values of one shape but ne[dim], joined along ne[dim] (a copy). */
ir_ref ir_concat(ir_graph *g, const ir_ref *xs, int n, int32_t dim);
/* f32 x copied to ne[k] = x.ne[perm[k]] (perm a permutation of 0..3). */
ir_ref ir_permute(ir_graph *g, ir_ref x, const int32_t perm[4]);
/* Mark x as a graph result called name ("logits"). */
ir_ref ir_output(ir_graph *g, ir_ref x, const char *name);

// ---- typed reads of op parameters (executors, passes, codegen: never ip[k] / fp[k] directly) ----

/* ROPE: the ir_rope_params it was built with; its attention factor (fp[2], 1 unless scaled) */
static inline ir_rope_params ir_rope_of(const ir_node *n) {
    return (ir_rope_params){.n_rot = n->ip[0], .mode = n->ip[1], .freq_base = n->fp[0], .freq_scale = n->fp[1]};
}
static inline float ir_rope_attn_factor(const ir_node *n) { return n->fp[2]; }
/* ATTENTION: the ir_attn_params it was built with */
static inline ir_attn_params ir_attn_of(const ir_node *n) {
    return (ir_attn_params){.n_head_kv = n->ip[0], .head_dim = n->ip[1], .scale = n->fp[0], .window = n->ip[2], .softcap = n->fp[1]};
}
/* ATTENTION: the block size of a paged one (src[4] = its block table), 0 for a contiguous cache */
static inline int32_t ir_attn_block_size(const ir_node *n) { return n->ip[3]; }
/* ATTENTION with Q's RoPE (pass fuse_attn_rope): q (src[0]) is unrotated and the attention rotates
 * it as it loads it, with these parameters (n_rot 0: none); ip[5]=n_rot ip[6]=mode fp[2]=freq_base
 * fp[3]=freq_scale fp[4]=attn_factor; the freq factors (or IR_NONE) are the source after the others:
 * src[4] of a contiguous attention, src[5] of a paged one (src[4] is its block table) */
static inline ir_rope_params ir_attn_q_rope(const ir_node *n) {
    return (ir_rope_params){.n_rot = n->ip[5], .mode = n->ip[6], .freq_base = n->fp[2], .freq_scale = n->fp[3]};
}
static inline float ir_attn_q_rope_attn_factor(const ir_node *n) { return n->fp[4]; }
static inline int ir_attn_q_rope_ff_slot(const ir_node *n) { return n->ip[3] ? 5 : 4; }
static inline ir_ref ir_attn_q_rope_ff(const ir_node *n) { return n->ip[5] ? n->src[ir_attn_q_rope_ff_slot(n)] : IR_NONE; }
/* ATTENTION writing its output quantized too (pass fuse_attn_quant): that activation type as its
 * result 1 (a RESULT node; ip[4] = type + 1), or -1 */
static inline int32_t ir_attn_quant_type(const ir_node *n) { return n->ip[4] ? n->ip[4] - 1 : -1; }
/* RMS_NORM, RMS_NORM_QUANT, LAYER_NORM: epsilon; SCALE: the factor; SOFTCAP: the cap (the single float param) */
static inline float ir_f0(const ir_node *n) { return n->fp[0]; }
/* SLICE: the first index and the count taken along ne[1] */
static inline int ir_slice_start(const ir_node *n) { return n->ip[0]; }
static inline int ir_slice_len(const ir_node *n) { return n->ip[1]; }
/* CONCAT: the dimension joined along; PERMUTE: the permutation (result ne[k] = source ne[perm[k]]) */
static inline int ir_concat_dim(const ir_node *n) { return n->ip[0]; }
static inline const int32_t *ir_permute_perm(const ir_node *n) { return n->ip; }
/* MATMUL: the value added to the product (a [N] bias or an [N,T] residual; pass fuse_matmul_add), or IR_NONE */
static inline ir_ref ir_matmul_addend(const ir_node *n) { return n->op == IR_OP_MATMUL ? n->src[2] : IR_NONE; }
/* MATMUL_GROUP (pass fuse_matmul_group): n = ip[0] members over the activation src[0]; member j's
 * weight is src[1 + j], its addend (ip[1] bit j set) the next of the sources after the weights in
 * member order, else IR_NONE; member j's result is the node itself (j = 0) or its RESULT j.
 * A gated group (pass fuse_group_glu; ip[2] = IR_OP_SWIGLU or IR_OP_GEGLU, 0: none) has two
 * members, gate and up, no addends, and one result: act(gate) * up, the gate's shape. */
static inline int ir_group_n(const ir_node *n) { return n->ip[0]; }
static inline ir_op ir_group_glu(const ir_node *n) { return n->op == IR_OP_MATMUL_GROUP ? (ir_op)n->ip[2] : (ir_op)0; }
static inline ir_ref ir_group_weight(const ir_node *n, int j) { return n->src[1 + j]; }
static inline bool ir_group_has_addends(const ir_node *n) { return n->op == IR_OP_MATMUL_GROUP && n->ip[1] != 0; }
static inline ir_ref ir_group_addend(const ir_node *n, int j) {
    if (!((n->ip[1] >> j) & 1)) return IR_NONE;
    return n->src[1 + n->ip[0] + __builtin_popcount((unsigned)n->ip[1] & ((1u << j) - 1))];
}
/* MATMUL_GROUP whose results only the launch of jobs right after it reads (pass fuse_group_jobs):
 * ip[IR_GROUP_JOBS_SUM] = 1; where its launch splits K, it leaves the partials and those jobs sum them */
#define IR_GROUP_JOBS_SUM 3
static inline bool ir_group_jobs_sum(const ir_node *n) { return n->op == IR_OP_MATMUL_GROUP && n->ip[IR_GROUP_JOBS_SUM]; }
/* RMS_NORM_QUANT / ADD_RMS_NORM_QUANT that sums the split-K partials of the lone MATMUL before it
 * (pass fuse_norm_sums): ip[IR_NORM_SUMS] = how many nodes back that matmul is (0: none); the norm
 * then reads the matmul's addend too (the memory plan keeps it live until the norm) */
#define IR_NORM_SUMS 7
static inline ir_ref ir_norm_sums_of(const ir_node *n, ir_ref i) {
    return (n->op == IR_OP_RMS_NORM_QUANT || n->op == IR_OP_ADD_RMS_NORM_QUANT) && n->ip[IR_NORM_SUMS] > 0 ? i - n->ip[IR_NORM_SUMS] : IR_NONE;
}
/* KV_STORE / ROPE_STORE that the T = 1 launch computing its x also performs (pass
 * fuse_launch_store): ip[IR_STORE_BY_LAUNCH] = 1; nothing runs at the store's own place */
#define IR_STORE_BY_LAUNCH 11
static inline bool ir_store_by_launch(const ir_node *n) {
    return (n->op == IR_OP_KV_STORE || n->op == IR_OP_ROPE_STORE) && n->ip[IR_STORE_BY_LAUNCH];
}
/* does n launch nothing at its own place? (a view, a result, an input, a store another launch
 * performs) — what the passes that link a launch to the next one's work may step over */
static inline bool ir_launches_nothing(const ir_node *n) {
    return n->op == IR_OP_RESHAPE || n->op == IR_OP_VIEW || n->op == IR_OP_RESULT || (ir_ops[n->op].flags & OPF_INPUT) ||
           ir_store_by_launch(n);
}
/* ROPE / ROPE_STORE / KV_STORE jobs of one launch (pass fuse_rope_jobs): ip[IR_JOB_NEXT] = how many
 * nodes on the launch's next job is (0: the last, or no launch of jobs). The launch runs at its first
 * job's place, every job side by side: the memory plan keeps what any job reads until the last one. */
#define IR_JOB_NEXT 9
static inline bool ir_is_job_op(ir_op op) { return op == IR_OP_ROPE || op == IR_OP_ROPE_STORE || op == IR_OP_KV_STORE; }
/* a job's sources: ROPE (x, pos, ...), ROPE_STORE / KV_STORE (cache, x, pos, ...) — the index of x, of pos */
static inline int ir_job_x_src(const ir_node *n) { return n->op == IR_OP_ROPE ? 0 : 1; }
static inline int ir_job_pos_src(const ir_node *n) { return n->op == IR_OP_ROPE ? 1 : 2; }
static inline ir_ref ir_job_next(const ir_node *n, ir_ref i) {
    return ir_is_job_op(n->op) && n->ip[IR_JOB_NEXT] > 0 ? i + n->ip[IR_JOB_NEXT] : IR_NONE;
}
/* KV_STORE / ROPE_STORE: the cache rows written, one a token. A KV_STORE's src[2]; a ROPE_STORE's
 * src[2] (its rotation positions) unless it writes elsewhere (pass fuse_rope_store over a paged
 * store: ip[IR_STORE_ROWS] = 1, src[3] = the rows — the slots input —, its freq factors then src[4]) */
#define IR_STORE_ROWS 10
static inline bool ir_store_has_rows(const ir_node *n) { return n->op == IR_OP_ROPE_STORE && n->ip[IR_STORE_ROWS]; }
static inline ir_ref ir_store_rows(const ir_node *n) { return ir_store_has_rows(n) ? n->src[3] : n->src[2]; }
/* The number of sources of n (they are IR_NONE-padded) */
static inline int ir_nsrc(const ir_node *n) {
    int k = 0;
    while (k < IR_MAX_SRC && n->src[k] != IR_NONE) k++;
    return k;
}
/* ROPE / ROPE_STORE / KV_STORE that RMS-normalise each head of x first (pass fuse_norm_rope): the
 * head norm. ip[IR_ROPE_NORM] = 0 none, 1 x / sqrt(mean(x^2 over the head's D dims) + eps), 2 that
 * times a weight f32 [D] (rounded after the scale, as rms_norm then mul); fp[IR_ROPE_NORM_EPS] =
 * eps. A rope's head is x's ne[0]; a KV_STORE's x is [Dkv, T] and its head dim D is ip[0] (D divides
 * Dkv). The weight is the node's last source, after the freq factors: ROPE (x, pos, ff?, w?),
 * ROPE_STORE (cache, x, pos, rows?, ff?, w?), KV_STORE (cache, x, pos, w?) — read them through
 * ir_rope_ff / ir_rope_norm_of. */
#define IR_ROPE_NORM 2
#define IR_ROPE_NORM_EPS 3
enum { IR_ROPE_NORM_NONE = 0, IR_ROPE_NORM_PLAIN = 1, IR_ROPE_NORM_WEIGHT = 2 };
typedef struct ir_rope_norm {
    int kind;         /* IR_ROPE_NORM_* */
    float eps;
    ir_ref weight;    /* IR_NONE unless kind is IR_ROPE_NORM_WEIGHT */
    int32_t head_dim; /* a KV_STORE's D; 0 for a rope (its x's ne[0]) */
} ir_rope_norm;
static inline ir_rope_norm ir_rope_norm_of(const ir_node *n) {
    if (n->op != IR_OP_ROPE && n->op != IR_OP_ROPE_STORE && n->op != IR_OP_KV_STORE) return (ir_rope_norm){IR_ROPE_NORM_NONE, 0.0f, IR_NONE, 0};
    const int kind = n->ip[IR_ROPE_NORM], ns = ir_nsrc(n);
    return (ir_rope_norm){kind, n->fp[IR_ROPE_NORM_EPS], kind == IR_ROPE_NORM_WEIGHT && ns > 0 ? n->src[ns - 1] : IR_NONE,
                          n->op == IR_OP_KV_STORE && kind ? n->ip[0] : 0};
}
/* ROPE / ROPE_STORE: its freq factors, or IR_NONE (the source after x, pos and a store's cache and
 * rows, unless that is the norm's weight) */
static inline ir_ref ir_rope_ff(const ir_node *n) {
    const int fixed = n->op == IR_OP_ROPE ? 2 : 3 + (n->ip[IR_STORE_ROWS] != 0);
    const int last = ir_nsrc(n) - (n->ip[IR_ROPE_NORM] == IR_ROPE_NORM_WEIGHT);
    return fixed < last ? n->src[fixed] : IR_NONE;
}
static inline ir_ref ir_rope_store_ff(const ir_node *n) { return ir_rope_ff(n); }
/* GLU_QUANT: the gated activation, IR_OP_SWIGLU or IR_OP_GEGLU */
static inline ir_op ir_glu_act(const ir_node *n) { return (ir_op)n->ip[0]; }
/* FUSED: the number of chain steps, and step k: its op, the src index of its second input (0: none)
 * and its float param */
static inline int ir_fused_steps(const ir_node *n) { return n->ip[0]; }
typedef struct ir_fused_step {
    ir_op op;
    int operand;
    float f;
} ir_fused_step;
static inline ir_fused_step ir_fused_step_of(const ir_node *n, int k) {
    return (ir_fused_step){.op = (ir_op)(n->ip[1 + k] & 0xff), .operand = n->ip[1 + k] >> 8, .f = n->fp[k]};
}
/* FUSED with a quantize tail (pass fuse_chain_quant): the chain's f32 result (result 0) is also
 * written quantized, as it is (IR_OP_QUANTIZE) or RMS-normalised first [* a weight]
 * (IR_OP_RMS_NORM_QUANT), as its result 1 (a RESULT node of that type). ip[8] = the tail's op (0:
 * none), ip[9] = its type, ip[10] = the src index of the norm's weight (0: none), fp[7] = the
 * norm's eps */
#define IR_FUSED_TAIL 8
typedef struct ir_fused_tail {
    ir_op op;       /* 0: no tail */
    int32_t type;   /* result 1's activation type */
    int weight;     /* src index of the norm's weight, 0: none */
    float eps;
} ir_fused_tail;
static inline ir_fused_tail ir_fused_tail_of(const ir_node *n) {
    if (n->op != IR_OP_FUSED) return (ir_fused_tail){(ir_op)0, 0, 0, 0.0f};
    return (ir_fused_tail){.op = (ir_op)n->ip[IR_FUSED_TAIL], .type = n->ip[IR_FUSED_TAIL + 1], .weight = n->ip[IR_FUSED_TAIL + 2],
                           .eps = n->fp[IR_MAX_FUSE]};
}

// ---- multi-result nodes ----

/* A node may produce more than one value. Its own value is result 0; result k >= 1 is a RESULT
 * node (src[0] = the producer, ip[0] = k, shape from the producer's op) that sits right after its
 * producer: the nodes after a producer are its RESULTs in increasing k, nothing in between
 * (ir_compact keeps this, the verifier checks it). The producer writes every result in its own
 * step; a RESULT node runs nothing. The memory plan gives each result its own memory, live from
 * the producer's step (graph/plan.c). A result nobody reads is dropped like any dead value, and
 * the producer then does not write it. Passes create them; builders never do.
 *   ADD_RMS_NORM_QUANT: result 1 = a + b (f32, a's shape).
 *   FUSED with a tail: result 1 = the chain's result quantized (ir_fused_tail_of). */
static inline int ir_result_count(const ir_node *n) {
    if (n->op == IR_OP_MATMUL_GROUP) return n->ip[2] ? 1 : n->ip[0]; /* a gated group: act(gate) * up alone */
    if (n->op == IR_OP_FUSED) return n->ip[IR_FUSED_TAIL] ? 2 : 1; /* its quantize tail */
    return n->op == IR_OP_ADD_RMS_NORM_QUANT || n->op == IR_OP_ATTENTION ? 2 : 1;
}
/* The RESULT node holding result k (>= 1) of producer p, or IR_NONE when the graph has none. */
ir_ref ir_result_of(const ir_graph *g, ir_ref p, int k);
/* RESULT: which result of its producer it is */
static inline int ir_result_index(const ir_node *n) { return n->ip[0]; }

// ---- planner-side constructors (passes use these; builders do not) ----

/* Append a node with the given op, sources (IR_NONE-terminated up to IR_MAX_SRC), params
 * copied from `proto` (ip/fp/name/dtype where the op takes them from there), and shape from the
 * op's shape function. Nodes appended by passes may break the order; ir_compact() restores it. */
ir_ref ir_append(ir_graph *g, const ir_node *proto);
/* ir_append, unless a node with the same op, dtype, sources and params exists (CSE); the name
 * is not compared. Returns the existing or new node. */
ir_ref ir_find_or_append(ir_graph *g, const ir_node *proto);
/* A fresh prototype: op set, sources IR_NONE, params 0, dtype F32, ne 1, name "". */
ir_node ir_proto(ir_op op);

/* Use counts: uses[i] = number of source slots referring to node i (OUTPUT counts once). */
sb_status ir_use_counts(const ir_graph *g, int32_t *uses /* [n_nodes] */);
/* The use counts in a new array (the caller frees it), or NULL (SB_ERR_OOM recorded). */
int32_t *ir_use_counts_new(const ir_graph *g);
/* Replace every source reference to `from` by `to`. */
void ir_replace_uses(ir_graph *g, ir_ref from, ir_ref to);
/* Drop nodes that no OUTPUT reaches and re-sort topologically (stable: inputs first in their
 * original order, then compute nodes depth-first from the outputs in order). */
sb_status ir_compact(ir_graph *g);

// ---- shape functions, verifier, text form ----

/* Derive ne/dtype of `n` from its op, sources and params. On failure returns SB_ERR_INTERNAL with
 * the reason (which source, which dims). Writes n->ne/n->dtype only on success. */
sb_status ir_infer_shape(const ir_graph *g, ir_node *n);
/* Check every node: op range, arity, sources earlier in the order, shape/dtype = inferred,
 * input names present, OUTPUT names unique. SB_ERR_INTERNAL naming the node on failure. */
sb_status ir_verify(const ir_graph *g);
/* The stable text form, one node a line:
 *   %5 = rms_norm(%4) eps=1e-06 : f32[64,4] "blk.0.attn_norm"
 * Floats print with %.9g, so the text round-trips. */
void ir_print(const ir_graph *g, FILE *f);
/* Same, into a malloc'd NUL-terminated string (NULL on OOM). */
char *ir_print_str(const ir_graph *g);

/* Short dtype name for the text form ("f32", "f16", "i32", "q4_K"). */
const char *ir_dtype_name(int dtype);

#endif
