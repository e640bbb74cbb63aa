/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_impl.h — private to the CUDA executor's files: the context (exec_cuda.c), the
 * capability check (exec_cuda_check.c), per-plan state (exec_cuda_plan.c), generated kernels
 * (exec_cuda_codegen.c), node dispatch (exec_cuda_dispatch.c; matmuls exec_cuda_matmul.c, attention
 * exec_cuda_attention.c) and runs with graph capture (exec_cuda_run.c); the state they share and the
 * functions one lends another.
 * Layer 2 (runtime), CUDA builds only.
 */
#ifndef SB_RUNTIME_EXEC_CUDA_IMPL_H
#define SB_RUNTIME_EXEC_CUDA_IMPL_H

#include "runtime/exec_cuda.h"
#include "runtime/cuda_fusion.h"
#include "backend/cuda/cu_blaslt.h"
#include "backend/cuda/cu_config.h"
#include "backend/cuda/cu_device.h"
#include "backend/cuda/cu_layout.h"
#include "backend/cuda/kernels.h"
#include "codegen/cg.h"
#include "base/status.h"
#include "quant/types.h"

#define CX_MAX_PLANS 256 /* live plans per context: a session's few, or every program compiled for CUDA through the API */
#define PROF_FAMILIES (IR_OP_COUNT + SB_TYPE_COUNT) /* ops, then matmul per weight type */
#define PROF_LABEL 72     /* a profiled node's label: index, op, name, shape */
#define PROF_TOP_NODES 30 /* nodes the profile report lists */

typedef struct devbuf {
    const void *host;
    void *dev;
    uint64_t bytes; /* the host's (GGUF layout) */
    int layout;     /* a type the device stores padded (cu_layout.h), its blocks converted on every copy; -1: bytes as on the host */
} devbuf;

/* a get_rows whose table stays in host memory (cx_plan_get: every reader of the weight is a get_rows
 * by the tokens input; an embedding table such as gemma4's per-layer one is never uploaded whole):
 * each run copies its T rows, in the table's format as the device stores it (cu_layout.h), into the
 * plan's stage, in token order */
typedef struct cgather {
    int32_t node;         /* the GET_ROWS node */
    int32_t w_in, tok_in; /* the input slots of its table and of its tokens */
    uint64_t off;         /* its rows' bytes into the stage */
    uint64_t row_bytes;   /* a row's bytes in the host's table (GGUF) */
    uint64_t dev_row_bytes; /* ... in the stage */
    int type;             /* the table's type */
    int64_t T;            /* rows: the node's ne[1] */
} cgather;

/* a weight input bound afresh each run (plan_input.per_run: a program's run-time data): each run
 * copies its bytes from the bound host memory into the plan's stage, where its kernels read it */
typedef struct cruntime {
    int32_t in;           /* its input slot */
    uint64_t off, bytes;  /* into the stage; bytes: the host's (GGUF layout) */
    int type;             /* its type (Q3_K / Q6_K blocks are padded in the stage: cu_layout.h) */
} cruntime;

#define CX_MAX_OUT 4 /* outputs a graph run may have written directly (direct_root; a plan with more copies them) */
#define CX_DEPTH_CLASSES 12 /* 0: any depth; c >= 1: every attention sees at most attn_small << (c - 1) keys (depth_class) */

typedef struct cplan {
    const plan *p;
    void **dptr;          /* device pointer per input slot */
    uint64_t scratch_off; /* attention / small-T GEMM split partials, after the plan region */
    uint64_t arena_need;
    /* captured graphs, one per depth class (depth_class: a decode step whose attention sees few
     * keys gets kernels specialised for that, e.g. the small-depth attention's own kernel) */
    cu_graph graph[CX_DEPTH_CLASSES];
    void *graph_arena[CX_DEPTH_CLASSES]; /* the arena each was captured with */
    int32_t n_kernels[CX_DEPTH_CLASSES];
    bool graph_direct[CX_DEPTH_CLASSES];           /* its kernels write outputs straight to their destinations (graph_out) */
    unsigned graph_checked[CX_DEPTH_CLASSES];      /* the direct slots whose kernel flags non-finite values (crun.checked) */
    float *graph_out[CX_DEPTH_CLASSES][CX_MAX_OUT];
    int64_t runs;         /* runs of this plan so far */
    cuda_fusions fu;      /* executor-level fusion (cx->cfg.fuse; cuda_fusion.h): all NULL when off */
    struct cg_node *cg;   /* per node: its generated kernel (cx_cg_prepare; NULL table or fn: hand-written) */
    /* the per-run host data of a plan: a paged plan's slots and block-table inputs (paged_words int32
     * from the start, in input order), then each per-run weight input (runtime[k].off), then each
     * host-gathered get_rows' rows (gathers[k].off); a device buffer of the plan's own (its shapes
     * are fixed, so captured graphs keep reading it) and page-locked staging of the same layout,
     * copied as one span a run before the launch */
    uint8_t *d_stage, *h_stage;
    uint64_t stage_bytes, paged_words;
    cruntime *runtime;
    int32_t n_runtime;
    cgather *gathers;
    int32_t n_gathers;
} cplan;

struct exec_cuda {
    cu_stream s;
    devbuf *bufs;
    int32_t n_bufs, cap_bufs;
    cplan plans[CX_MAX_PLANS];
    void *arena;
    uint64_t arena_bytes;
    int32_t *d_in;        /* device inputs [3 * max_tokens], h_in's layout: one copy a run */
    int32_t *d_tok, *d_pos, *d_rows; /* into d_in */
    unsigned *d_cnt;      /* CU_ATT_COUNTERS zeroed split counters (attention's in-kernel merge) */
    int32_t *d_zero;      /* [max_tokens] zeros: the block table of a contiguous cache read by the paged kernel */
    int32_t *h_in;        /* page-locked staging [3 * max_tokens]: tokens, positions, out_rows */
    unsigned *h_nonfinite; /* page-locked [CX_MAX_OUT]: per direct slot, set by its kernel on a NaN or Inf (cu_epilogue) */
    int8_t out_finite[CX_MAX_OUT]; /* the last run's outputs: 1 all finite, 0 not, -1 not checked (exec_cuda_output_finite) */
    void *d_blas_ws;      /* cuBLASLt's workspace (CU_BLASLT_WORKSPACE bytes), allocated by the first plan with a cf_blas_ok matmul */
    int64_t max_tokens;
    cu_config cfg;        /* every setting (cu_config.h); bound to the thread for each call into the backend */
    int sms;
    exec_cuda_stats st;
    /* profile: device ms and kernel launches per family, runs profiled */
    double prof_ms[PROF_FAMILIES];
    int64_t prof_k[PROF_FAMILIES];
    int64_t prof_runs;
    /* ... and per node of the last graph profiled (a new graph starts them again): device ms, label */
    const ir_graph *prof_g;
    int32_t prof_nodes;
    double *prof_node_ms;
    char (*prof_node_label)[PROF_LABEL];
    void **ev;
    int32_t n_ev;
};

// ---- one run's state (exec_cuda_run.c builds it, exec_cuda_dispatch.c reads it) ----

typedef struct crun {
    exec_cuda *cx;
    const plan *p;
    cplan *c;
    uint8_t *arena;
    int32_t n_kernels;
    int64_t depth_max; /* a bound on the keys any attention of this run sees (0: none known; depth_class) */
    /* outputs written by their kernels straight into page-locked host memory (exec_cuda.direct_out):
     * the roots of their memory (direct_root), and every view of them, live at direct_dst */
    int n_direct;
    ir_ref direct_node[CX_MAX_OUT];
    float *direct_dst[CX_MAX_OUT];
    int32_t direct_out[CX_MAX_OUT]; /* the plan output each slot is */
    unsigned checked;               /* slots whose kernel sets h_nonfinite[slot] (bit per slot) */
    /* an MMA group's unreduced split partials for the rope jobs launched right after it (pass fuse_group_jobs):
     * the alias roots of its results and their partials; n 0: none pending */
    int gsrc_n;
    ir_ref gsrc_root[CU_MULTI_MAX];
    cu_split_src gsrc[CU_MULTI_MAX];
    /* a lone GEMM's unreduced split partials for the RMS_NORM_QUANT nsum_for right after it (pass fuse_norm_sums; 0: none) */
    int32_t nsum_for, nsum_mm;
    cu_split_src nsum_src;
} crun;

/* where value i is written directly: it is the root of such an output or a view of it (same
 * memory); NULL if not */
static inline float *direct_at(const crun *r, ir_ref i) {
    for (int k = 0; k < r->n_direct; k++)
        if (r->direct_node[k] == i || r->direct_node[k] == r->p->vals[i].alias) return r->direct_dst[k];
    return NULL;
}

/* is operand o of node n's shape a row broadcast over n's rows (a bias), not n's own shape? */
static inline bool cx_bcast(const ir_node *o, const ir_node *n) { return ir_nelem(o) == n->ne[0] && ir_nrows(n) != 1; }

/* the direct slot whose root is value i itself, or -1 */
static inline int direct_slot(const crun *r, ir_ref i) {
    for (int k = 0; k < r->n_direct; k++)
        if (r->direct_node[k] == i) return k;
    return -1;
}

static inline void *dptr(const crun *r, ir_ref i) {
    const plan_value *v = &r->p->vals[i];
    float *d = direct_at(r, i);
    if (d) return d;
    if (v->input >= 0) return r->c->dptr[v->input];
    return r->arena + v->offset;
}

// ---- functions the files lend each other ----

void cx_drop_graphs(cplan *c);                  /* exec_cuda_plan.c: c's captured graphs */
void cx_plan_clear(cplan *c);                   /* ... and everything else of c */
sb_status cx_plan_get(exec_cuda *cx, const plan *p, const exec_bindings *b, cplan **out); /* found or built */
const cgather *cx_gather_of(const cplan *c, int32_t node); /* node's host gather, or NULL: its table is on the GPU */
/* exec_cuda_attention.c: the contiguous attention kernels' args of ATTENTION n */
cu_attn_args cx_attn_args(const exec_cuda *cx, const plan *p, const ir_node *n);
/* exec_cuda_attention.c: the paged kernel's args of an attention it runs (cx_attn_on_paged_kernel) */
cu_attn_paged_args cx_attn_paged_args(const exec_cuda *cx, const plan *p, const ir_node *n);
/* exec_cuda_attention.c: does ATTENTION n run the flash prefill (cu_attention_prefill): a contiguous
 * cache, attention variant 3 or 4, args cu_fattn_supported takes (T > 1; head_dim up to 128, or what
 * the tensor-core kernel takes: also 256 / 512)? */
bool cx_attn_on_flash(const exec_cuda *cx, const plan *p, const ir_node *n);
/* exec_cuda_run.c: the keys bound of depth class c (0: none), and the class of a decode step that
 * sees `keys` keys: the smallest c >= 1 with keys <= attn_small << (c - 1), 0 past the deepest class
 * or where classes are off (attn_variant != 4, attn_small 0, attn_class 0; attn_deep 0: class 1 only) */
int64_t cx_class_depth(const exec_cuda *cx, int c);
int cx_depth_class(const exec_cuda *cx, int64_t keys);
/* exec_cuda_attention.c: the session's decode kernels' args for paged ATTENTION n (its block size, the
 * table's reach as the cache depth ctx, no ring; tbl set at the launch) at depth bound depth_max */
cu_attn_args cx_attn_paged_dec_args(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max);
/* exec_cuda_attention.c: does paged ATTENTION n run on the session's decode kernels through its block
 * table (cu_attn_decode: the small layout's own kernel or k_attn_deep) in a run of depth bound
 * depth_max: one token (the batched engine's B = 1 step), attention variant 4, a depth class
 * (depth_max > 0) and a shape those kernels take (cu_attn_decode_paged_fits)? Else the paged kernel. */
bool cx_attn_paged_on_dec(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max);
/* does ATTENTION n run the paged kernel (unless cx_attn_paged_on_dec, asked first): a paged cache, or
 * heads past cu_attention's (CU_ATT_MAX_D) that the flash prefill does not take — decodes, and
 * prefills where the tensor-core kernel is off or absent (a contiguous cache as one block of its rows) */
static inline bool cx_attn_on_paged_kernel(const exec_cuda *cx, const plan *p, const ir_node *n) {
    return ir_attn_block_size(n) > 0 || (ir_attn_of(n).head_dim > CU_ATT_MAX_D && !cx_attn_on_flash(cx, p, n));
}
/* exec_cuda.c: host's device copy, made on first use (dtype: the input's type, whose blocks may be
 * stored padded: cu_layout.h; -1 for bytes as they are) */
sb_status cx_devbuf_get(exec_cuda *cx, const void *host, uint64_t bytes, int dtype, const char *name, void **dev);
sb_status cx_cg_prepare(exec_cuda *cx, const plan *p, cplan *c); /* exec_cuda_codegen.c: before any capture */
bool cx_cg_try(crun *r, int32_t i, sb_status *st);
sb_status cx_run_node(crun *r, int32_t i);      /* exec_cuda_dispatch.c */
sb_status cx_run_matmul(crun *r, int32_t i);    /* exec_cuda_matmul.c: a MATMUL or MATMUL_GROUP node */
sb_status cx_run_attention(crun *r, int32_t i); /* exec_cuda_attention.c */
sb_status cx_enqueue_all(crun *r);

/* run_node's hook: node i ran as its generated kernel (return its launch status) */
#define CG_TRY(r, i)                                 \
    do {                                             \
        sb_status cg_st_;                            \
        if (cx_cg_try(r, i, &cg_st_)) return cg_st_;    \
    } while (0)

#endif
