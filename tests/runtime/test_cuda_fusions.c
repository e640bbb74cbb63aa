/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_fusions.c — a golden test of what the CUDA executor launches for a plan:
 * for each case (the test models at T = 1, 7 and 64, their paged decoders, three Qwen2.5-0.5B
 * layers at T = 1, 64 and 512; all planned as on an H200, no GPU needed) one line per compute node
 * in execution order with every executor-level fusion it takes part in (cuda_fusion.h's tables).
 * The config: cu_config_default, planned as if cuBLASLt did not load (exec_cuda_assume_blaslt(0)),
 * so the T = 512 case shows the int8 MMA groups (cu_config.blas_quant 0 plans the same); then that
 * case once more with cuBLASLt present, the default on the GPUs: its quantized matmuls keep f32
 * activations for cuBLASLt (T >= blas_quant 256), no MMA group.
 * The golden file is tests/runtime/cuda_fusions.golden (SB_UPDATE_GOLDEN=1 rewrites it).
 *
 * Nodes are named by what they compute, not by their index, so that moving a fusion from the
 * executor into a graph pass leaves the text unchanged when the launches stay the same: a weight
 * or cache by its name, a matmul as mm[weight] ("+" when it adds a residual or bias in its
 * epilogue), a reshape as its source, any other node as op(sources) down to two levels. A node
 * that another node's launch performs is not listed on its own.
 * Built with the CUDA backend only. A case whose model file is absent is printed as absent (so
 * the golden file records which data it saw).
 */
#include "runtime/cuda_fusion.h"
#include "runtime/exec_cuda.h"
#include "runtime/model.h"
#include "runtime/arch/arch.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "base/status.h"
#include "test.h"
#include "qwen_layers.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        const int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) abort();
    }
}

static void name_of(sbuf *b, const ir_graph *g, const cuda_fusions *f, int32_t i, int depth);

static void name_list(sbuf *b, const ir_graph *g, const cuda_fusions *f, const char *op, const ir_ref *src, int n, int depth) {
    put(b, "%s", op);
    if (depth <= 0) return;
    put(b, "(");
    for (int k = 0; k < n; k++) {
        if (k) put(b, ", ");
        name_of(b, g, f, src[k], depth - 1);
    }
    put(b, ")");
}

/* a residual add normalized in one launch, as rms_norm_quant(add(a, b), w?); its sum as add(a, b) */
static void name_add_norm(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref a, ir_ref c, ir_ref w, int depth) {
    put(b, "rms_norm_quant");
    if (depth <= 0) return;
    put(b, "(");
    const ir_ref s[2] = {a, c};
    name_list(b, g, f, "add", s, 2, depth - 1);
    if (w != IR_NONE) put(b, ", "), name_of(b, g, f, w, depth - 1);
    put(b, ")");
}

/* the rope an attention applies to q as it loads it, as the node it replaced: rope(x, pos, ff?) */
static void name_q_rope(sbuf *b, const ir_graph *g, const cuda_fusions *f, const ir_node *a, int depth) {
    const ir_ref src[3] = {a->src[0], a->src[3], ir_attn_q_rope_ff(a)};
    name_list(b, g, f, "rope", src, src[2] != IR_NONE ? 3 : 2, depth);
}

/* an attention that rotates q: attention(rope(x, pos), k, v, pos), and a paged one's block table */
static void name_attention(sbuf *b, const ir_graph *g, const cuda_fusions *f, const ir_node *a, int depth) {
    put(b, "attention");
    if (depth <= 0) return;
    put(b, "(");
    name_q_rope(b, g, f, a, depth - 1);
    for (int k = 1; k < (ir_attn_block_size(a) > 0 ? 5 : 4); k++) put(b, ", "), name_of(b, g, f, a->src[k], depth - 1);
    put(b, ")");
}

/* a matmul by its weight: mm[weight], "+" when it adds an addend */
static void name_mm(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref w, bool addend, int depth) {
    put(b, "mm[");
    name_of(b, g, f, w, depth);
    put(b, "]%s", addend ? "+" : "");
}

/* member j of a matmul group, as the matmul it was */
static void name_member(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref grp, int j, int depth) {
    const ir_node *n = &g->nodes[grp];
    name_mm(b, g, f, ir_group_weight(n, j), ir_group_addend(n, j) != IR_NONE, depth);
}

/* a gated group's quantize, as the GLU_QUANT of gate and up it was */
static void name_gated(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref grp, int depth) {
    put(b, "glu_quant");
    if (depth <= 0) return;
    put(b, "(");
    name_member(b, g, f, grp, 0, depth - 1);
    put(b, ", ");
    name_member(b, g, f, grp, 1, depth - 1);
    put(b, ")");
}

/* the quantize reading gated group grp (pass fuse_group_glu), or -1 */
static int32_t gated_quantize(const ir_graph *g, ir_ref grp) {
    if (!ir_group_glu(&g->nodes[grp])) return -1;
    for (int32_t q = grp + 1; q < g->n_nodes; q++)
        if (g->nodes[q].op == IR_OP_QUANTIZE && g->nodes[q].src[0] == grp) return q;
    return -1;
}

/* a chain with a quantize tail (pass fuse_chain_quant) as the chain it was: its sources but a norm
 * weight only the tail reads */
static void name_chain(sbuf *b, const ir_graph *g, const cuda_fusions *f, const ir_node *n, int depth) {
    const int tw = ir_fused_tail_of(n).weight;
    bool step_reads = false;
    for (int k = 0; k < ir_fused_steps(n); k++) step_reads |= ir_fused_step_of(n, k).operand == tw;
    ir_ref src[IR_MAX_SRC];
    int ns = 0;
    for (int k = 0; k < IR_MAX_SRC && n->src[k] != IR_NONE; k++)
        if (!tw || k != tw || step_reads) src[ns++] = n->src[k];
    name_list(b, g, f, "fused", src, ns, depth);
}

/* a chain's quantized row (its tail's result) as the quantizer it was */
static void name_chain_tail(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref chain, int depth) {
    const ir_node *n = &g->nodes[chain];
    const ir_fused_tail t = ir_fused_tail_of(n);
    const ir_ref src[2] = {chain, t.weight ? n->src[t.weight] : IR_NONE};
    name_list(b, g, f, ir_ops[t.op].name, src, t.weight ? 2 : 1, depth);
}

/* the planner's fused nodes keep the names of the nodes they replaced (so the golden text shows
 * what changed when a fusion moved from the executor into a pass): a residual add + norm, its sum,
 * an attention rotating q, its quantized output, a gated group's quantize, a chain with a quantize
 * tail and that tail's result */
static bool canonical_name(sbuf *b, const ir_graph *g, const cuda_fusions *f, int32_t i, int depth) {
    const ir_node *n = &g->nodes[i];
    if (ir_fused_tail_of(n).op) name_chain(b, g, f, n, depth);
    else if (n->op == IR_OP_RESULT && ir_fused_tail_of(&g->nodes[n->src[0]]).op) name_chain_tail(b, g, f, n->src[0], depth);
    else if (n->op == IR_OP_ADD_RMS_NORM_QUANT) name_add_norm(b, g, f, n->src[0], n->src[1], n->src[2], depth);
    else if (n->op == IR_OP_QUANTIZE && ir_group_glu(&g->nodes[n->src[0]])) name_gated(b, g, f, n->src[0], depth);
    else if (n->op == IR_OP_ATTENTION && ir_attn_q_rope(n).n_rot) name_attention(b, g, f, n, depth);
    else if (n->op == IR_OP_RESULT && g->nodes[n->src[0]].op == IR_OP_ATTENTION) {
        const ir_ref a = n->src[0];
        name_list(b, g, f, "quantize", &a, 1, depth);
    } else if (n->op == IR_OP_RESULT && g->nodes[n->src[0]].op == IR_OP_MATMUL_GROUP) {
        name_member(b, g, f, n->src[0], ir_result_index(n), depth);
    } else if (n->op == IR_OP_RESULT) name_list(b, g, f, "add", g->nodes[n->src[0]].src, 2, depth);
    else if (n->op == IR_OP_MATMUL_GROUP) name_member(b, g, f, i, 0, depth);
    else return false;
    return true;
}

static void name_of(sbuf *b, const ir_graph *g, const cuda_fusions *f, int32_t i, int depth) {
    const ir_node *n = &g->nodes[i];
    if (canonical_name(b, g, f, i, depth)) return;
    if (ir_ops[n->op].flags & OPF_INPUT) {
        put(b, "%s", n->name[0] ? n->name : ir_ops[n->op].name);
        return;
    }
    if (n->op == IR_OP_RESHAPE) {
        name_of(b, g, f, n->src[0], depth);
        return;
    }
    if (n->op == IR_OP_MATMUL) {
        name_mm(b, g, f, n->src[0], ir_matmul_addend(n) != IR_NONE, depth);
        return;
    }
    put(b, "%s", ir_ops[n->op].name);
    if (depth <= 0) return;
    put(b, "(");
    for (int k = 0; k < IR_MAX_SRC && n->src[k] != IR_NONE; k++) {
        if (k) put(b, ", ");
        name_of(b, g, f, n->src[k], depth - 1);
    }
    put(b, ")");
}

static void ref(sbuf *b, const char *what, const ir_graph *g, const cuda_fusions *f, int32_t j) {
    if (j < 0) return;
    put(b, " %s ", what);
    name_of(b, g, f, j, 1);
}

/* a matmul group's member j (its value v): the addend and, as the executor's multi-GEMV chain was
 * printed, the next member of the launch */
static void member_notes(sbuf *b, const ir_graph *g, const cuda_fusions *f, ir_ref grp, int j) {
    const ir_node *n = &g->nodes[grp];
    ref(b, "epilogue +", g, f, ir_group_addend(n, j));
    if (j + 1 < ir_group_n(n) && ir_group_glu(n)) { /* a gated group's up: no result of its own */
        put(b, " next in launch ");
        name_member(b, g, f, grp, j + 1, 1);
    } else if (j + 1 < ir_group_n(n)) ref(b, "next in launch", g, f, ir_result_of(g, grp, j + 1));
    ref(b, "writes GLU of", g, f, gated_quantize(g, grp));
}

static void describe(sbuf *b, const plan *p, const cuda_fusions *f) {
    const ir_graph *g = p->g;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        const bool attn_out = n->op == IR_OP_RESULT && (g->nodes[n->src[0]].op == IR_OP_ATTENTION || g->nodes[n->src[0]].op == IR_OP_FUSED);
        const bool member = n->op == IR_OP_MATMUL_GROUP || (n->op == IR_OP_RESULT && g->nodes[n->src[0]].op == IR_OP_MATMUL_GROUP);
        if ((ir_ops[n->op].flags & OPF_INPUT) || n->op == IR_OP_RESHAPE || n->op == IR_OP_OUTPUT || (n->op == IR_OP_RESULT && !attn_out && !member))
            continue;
        if (n->op == IR_OP_ATTENTION && ir_attn_q_rope(n).n_rot) { /* the rope it performs */
            put(b, "  ");
            name_q_rope(b, g, f, n, 2);
            put(b, " : by another launch\n");
        }
        put(b, "  ");
        name_of(b, g, f, i, 2);
        if (f->skip[i] || attn_out || (member && n->op == IR_OP_RESULT)) put(b, " : by another launch");
        ref(b, "epilogue +", g, f, ir_matmul_addend(n));
        if (member) member_notes(b, g, f, n->op == IR_OP_RESULT ? n->src[0] : i, n->op == IR_OP_RESULT ? ir_result_index(n) : 0);
        ref(b, "quantizes into", g, f, n->op == IR_OP_ATTENTION ? ir_result_of(g, i, 1) : -1);
        ref(b, "stores V", g, f, f->vstore[i]);
        ref(b, "next rope job", g, f, ir_job_next(n, i));
        if (ir_group_jobs_sum(n)) put(b, " partials to its rope jobs");
        if (n->op == IR_OP_ATTENTION && ir_attn_q_rope(n).n_rot) put(b, " rotates q of "), name_q_rope(b, g, f, n, 1);
        ref(b, "rotates k of", g, f, f->krope[i]);
        ref(b, "partials summed by", g, f, f->nsum[i]);
        put(b, "\n");
        if (n->op == IR_OP_MATMUL_GROUP && ir_group_glu(n)) { /* its up, multiplied in */
            put(b, "  ");
            name_member(b, g, f, i, 1, 2);
            put(b, " : by another launch\n");
        }
    }
}

/* title's case: g planned as on an H200 and described; with counts, a closing line of its compute
 * nodes, launches and the executor's fusion counts (the tool's) */
static void add_case(sbuf *b, const char *title, ir_graph *g, bool counts) {
    put(b, "# %s\n", title);
    plan_target t;
    exec_cuda_target(NULL, &t);
    plan *p = NULL;
    sb_status st = plan_build(g, &t, NULL, &p);
    CHECKF(st == SB_OK, "%s: plan_build: %s", title, sb_last_error());
    cuda_fusions f = {0};
    const cu_config *prev = cu_cfg_bind(&cu_config_default);
    if (p && cuda_fusions_plan(p, &f, &cu_config_default) == SB_OK) {
        describe(b, p, &f);
        int32_t nodes = 0, fused = 0, launches = 0;
        for (int32_t i = 0; counts && i < p->g->n_nodes; i++) {
            const ir_node *n = &p->g->nodes[i];
            const bool compute = !(ir_ops[n->op].flags & OPF_INPUT) && n->op != IR_OP_RESHAPE && n->op != IR_OP_OUTPUT && n->op != IR_OP_RESULT;
            nodes += compute, fused += f.skip[i], launches += compute && !f.skip[i];
        }
        if (counts) {
            put(b, "# %d compute nodes, %d launches; the executor's: %d nodes in other launches, %d GLU pairs, %d norms summing split partials\n",
                (int)nodes, (int)launches, (int)fused, (int)exec_cuda_count_glu_pairs(p, NULL), (int)exec_cuda_count_norm_sums(p, NULL));
            const sb_status ck = exec_cuda_check(p);
            put(b, "# exec_cuda_check: %s\n", ck == SB_OK ? "runs" : sb_last_error());
            ir_ref gw[8];
            const int32_t ng = exec_cuda_host_gathers(p, gw, 8);
            put(b, "# tables kept in host memory (rows staged per run): %d", (int)ng);
            for (int32_t k = 0; k < ng && k < 8; k++) put(b, "%s %s", k ? "," : "", p->g->nodes[gw[k]].name);
            put(b, "\n");
        }
    } else if (p) {
        CHECKF(0, "%s: cuda_fusions_plan: %s", title, sb_last_error());
    }
    cu_cfg_bind(prev);
    cuda_fusions_free(&f);
    plan_free(p);
    ir_graph_free(g);
}

static void model_cases(sbuf *b, const char *file) {
    char path[256];
    snprintf(path, sizeof path, "models/%s", file);
    rt_model *m;
    if (rt_model_load(test_data_path(path), NULL, &m) != SB_OK) {
        put(b, "# %s: absent\n", file);
        return;
    }
    static const struct {
        int64_t T;
        int32_t block_size;
    } shapes[] = {{1, 0}, {7, 0}, {64, 0}, {1, 16}, {8, 16}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        ir_graph *g;
        ir_graph_create(&g);
        rt_build bld = {.g = g, .m = m, .T = shapes[k].T, .n_out = 1, .n_ctx = 1024, .kv_type = SB_TYPE_F16};
        if (shapes[k].block_size) bld.block_size = shapes[k].block_size, bld.n_blk_max = 16, bld.n_out = shapes[k].T;
        char title[160];
        snprintf(title, sizeof title, "%s, T=%lld%s", file, (long long)shapes[k].T, shapes[k].block_size ? ", paged" : "");
        if (rt_build_decoder(&bld) != SB_OK) {
            put(b, "# %s: not built (%s)\n", title, sb_last_error());
            ir_graph_free(g);
            continue;
        }
        add_case(b, title, g, false);
    }
    rt_model_free(m);
}

/* test_cuda_fusions MODEL T [paged]: MODEL's plan of T tokens (paged: the batched engine's decoder,
 * blocks of 16) as on an H200, described and counted, whether the executor's check
 * (exec_cuda_check) takes it and which tables stay in host memory (a tool, for any model file;
 * SB_DUMP_IR=after:memplan prints the planned graph beside it) */
static int describe_model(const char *path, int64_t T, bool paged) {
    rt_model *m;
    if (rt_model_load(path, NULL, &m) != SB_OK) {
        fprintf(stderr, "%s\n", sb_last_error());
        return 1;
    }
    ir_graph *g;
    ir_graph_create(&g);
    rt_build bld = {.g = g, .m = m, .T = T, .n_out = 1, .n_ctx = 4096, .kv_type = SB_TYPE_F16};
    if (paged) bld.block_size = 16, bld.n_blk_max = 256, bld.n_out = T; /* the batched engine's decoder */
    sbuf b = {0};
    put(&b, "%s", "");
    if (rt_build_decoder(&bld) == SB_OK) add_case(&b, path, g, true);
    else ir_graph_free(g);
    fputs(b.s, stdout);
    free(b.s);
    rt_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    exec_cuda_assume_device(9, 132);
    if (argc == 3 || (argc == 4 && !strcmp(argv[3], "paged"))) return describe_model(argv[1], atoll(argv[2]), argc == 4);
    exec_cuda_assume_blaslt(0); /* the int8 MMA side of cu_config.blas_quant; one case below with cuBLASLt */
    sbuf b = {0};
    put(&b, "# the CUDA executor's launches per plan, as on an H200 (tests/runtime/test_cuda_fusions.c)\n");
    static const char *models[] = {"test-qwen2-q4_k_m.gguf", "test-qwen2-f16.gguf", "test-llama-q4_k_m.gguf",
                                   "test-qwen3-q8_0.gguf", "test-gemma3-q4_k_m.gguf"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) model_cases(&b, models[k]);
    static const int64_t qT[] = {1, 64, 512};
    for (size_t k = 0; k < sizeof qT / sizeof qT[0]; k++) {
        char title[96];
        snprintf(title, sizeof title, "three Qwen2.5-0.5B layers, T=%lld", (long long)qT[k]);
        add_case(&b, title, qwen_layers(3, qT[k], 1024), false);
    }
    exec_cuda_assume_blaslt(1);
    add_case(&b, "three Qwen2.5-0.5B layers, T=512, cuBLASLt present (quantized GEMMs from T 256 on it)", qwen_layers(3, 512, 1024), false);
    exec_cuda_assume_blaslt(-1);
    exec_cuda_assume_device(0, 0);
    const char *path = "tests/runtime/cuda_fusions.golden";
    if (getenv("SB_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "w");
        if (f) fputs(b.s, f), fclose(f);
    }
    size_t n = 0;
    char *want = (char *)test_read_file(path, &n);
    CHECKF(want != NULL, "%s missing", path);
    if (want) {
        const bool same = n == b.n && !memcmp(want, b.s, n);
        if (!same) {
            char out[512];
            snprintf(out, sizeof out, "%s/cuda_fusions.got", getenv("SB_BUILD_DIR") ? getenv("SB_BUILD_DIR") : ".");
            FILE *f = fopen(out, "w");
            if (f) fputs(b.s, f), fclose(f);
            CHECKF(same, "%s differs: what this build plans is in %s (diff the two)", path, out);
        } else {
            CHECK(same);
        }
    }
    free(want);
    free(b.s);
    return test_summary();
}
