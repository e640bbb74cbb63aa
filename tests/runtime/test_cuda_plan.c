/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_plan.c — the host side of the CUDA backend, which needs no GPU and so
 * runs in CI: the CUDA plan target's activation formats (q8_1 for Q4_0/Q5_0/Q8_0, q8_K for the
 * K-quants and IQ4_XS, f32 otherwise; quantize nodes of those types in the planned graph),
 * exec_cuda_check's refusals (a weight type without a CUDA kernel: SB_ERR_MODEL_TENSOR_TYPE naming
 * the tensor; head_dim > 256: SB_ERR_UNSUPPORTED), and a CUDA session on a machine without a
 * usable GPU failing with SB_ERR_DEVICE (never a crash) while a CPU session still works; the
 * paged decoder (the batched engine's) passes the check, no executor fusion of it treats the slots
 * as positions or takes the paged attention's output, and its decode (T = 1) attentions rotate q;
 * the qwen3 and gemma4 test models' decode plans with their q/k (gemma4: and v) head norms folded into
 * the ropes and stores (pass fuse_norm_rope) and the launches that saves.
 * The config every plan here assumes: cu_config_default (or the fields a case names) on a GPU where
 * cuBLASLt loads (gpu_target), so CI without one plans as the H100 / H200 do; every launch and fusion
 * count is at T <= 64, below the default blas_quant (256: test_blas_rule, which also plans the
 * threshold itself), so quantized matmuls keep their q8 activations, MMA groups and GEMV launches.
 * SKIPs (exit 0) in a build without the CUDA backend.
 */
#include "runtime/exec_cuda.h"
#include "backend/cuda/kernels.h"
#include "runtime/cuda_fusion.h"
#include "runtime/session.h"
#include "runtime/arch/arch.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "base/status.h"
#include "test.h"
#include "qwen_layers.h"

#include <stdlib.h>
#include <string.h>

/* The CUDA plan target for config c (NULL: cu_config_default) as on the GPUs the counts below were
 * measured on: cuBLASLt present (exec_cuda_assume_blaslt(1); main restores the real answer before
 * its session part). */
static void gpu_target(const cu_config *c, plan_target *t) {
    exec_cuda_assume_blaslt(1);
    exec_cuda_target(c, t);
}

/* y = W x with W of type wt [K,N]; returns the plan for the CUDA target (or NULL) */
static plan *matmul_plan(int wt, int64_t K, int64_t N, const char *wname) {
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref w = ir_input_weight(g, wname, wt, (int64_t[4]){K, N, 1, 1});
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, 3, 1, 1});
    ir_output(g, ir_matmul(g, w, x), "y");
    plan_target t;
    gpu_target(NULL, &t);
    plan *p = NULL;
    sb_status s = plan_build(g, &t, NULL, &p);
    CHECKF(s == SB_OK, "plan_build for %s: %s", ir_dtype_name(wt), sb_last_error());
    ir_graph_free(g);
    return p;
}

/* nodes the planner fused away at node x: an add a matmul adds, an add a norm sums, a kv_store a
 * rope writes, Q's rope and the output quantize an attention performs, a group's matmuls after the
 * first and their addends */
static int32_t planner_fused(const ir_node *x) {
    const bool attn = x->op == IR_OP_ATTENTION;
    const int32_t group = x->op == IR_OP_MATMUL_GROUP ? ir_group_n(x) - 1 + __builtin_popcount((unsigned)x->ip[1]) : 0;
    return (ir_matmul_addend(x) != IR_NONE) + (x->op == IR_OP_ADD_RMS_NORM_QUANT) + (x->op == IR_OP_ROPE_STORE) +
           (attn && ir_attn_q_rope(x).n_rot) + (attn && ir_attn_quant_type(x) >= 0) + group;
}

/* nodes fused away: the executor's (exec_cuda_count_fusions) and the planner's */
static int32_t fused_away(const plan *p, const cu_config *c) {
    int32_t n = exec_cuda_count_fusions(p, c);
    for (int32_t i = 0; n >= 0 && i < p->g->n_nodes; i++) n += planner_fused(&p->g->nodes[i]);
    return n;
}

static int quant_dtype(const plan *p) {
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_QUANTIZE) return p->g->nodes[i].dtype;
    return SB_TYPE_F32;
}

/* The cuBLASLt prefill rule for quantized weights (cu_config.blas_quant; blas_min_t is the float
 * weights' own): with cuBLASLt (assumed present: no GPU needed) matmuls of at least blas_quant tokens
 * keep f32 activations (no quantize node), fewer tokens quantize as before; cuBLASLt absent or
 * blas_quant 0: always quantized, whatever blas_min_t. The
 * plans pass the check. Two Qwen layers at T = 64 as on an H100: with the rule no quantizing node is
 * left and the executor plans no int8 MMA group (fewer fusions than without it). */
static void test_blas_rule(void) {
    const struct { int have, min_t, quant; int64_t T; bool f32; } cs[] = {
        {1, 64, 16, 16, true}, {1, 64, 16, 512, true}, {1, 64, 16, 15, false}, {0, 16, 16, 64, false}, {1, 16, 0, 64, false}, {1, 0, 256, 64, false},
        {1, 0, 256, 256, true},
    };
    const int wts[] = {SB_TYPE_Q4_K, SB_TYPE_Q8_0, SB_TYPE_Q6_K};
    cu_config tuned = cu_config_default; /* sb bench's A/B: SB_TUNE=blas_min_t=N */
    CHECK(cu_config_tune(&tuned, "blas_min_t=128,blas_quant=0") == SB_OK && tuned.blas_min_t == 128 && tuned.blas_quant == 0);
    CHECK(cu_config_default.blas_min_t == 64 && cu_config_default.blas_quant == 256); /* measured on an H100: bench/NOTES.md */
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        for (size_t j = 0; j < sizeof wts / sizeof wts[0]; j++) {
            exec_cuda_assume_blaslt(cs[k].have);
            cu_config cfg = cu_config_default;
            cfg.blas_min_t = cs[k].min_t;
            cfg.blas_quant = cs[k].quant;
            plan_target t;
            exec_cuda_target(&cfg, &t);
            CHECK(t.act_f32_min_rows == (cs[k].have ? cs[k].quant : 0));
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref w = ir_input_weight(g, "w", wts[j], (int64_t[4]){512, 64, 1, 1});
            ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){512, cs[k].T, 1, 1});
            ir_output(g, ir_matmul(g, w, x), "y");
            plan *p = NULL;
            CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
            if (p) {
                CHECKF((quant_dtype(p) == SB_TYPE_F32) == cs[k].f32, "%s at T %lld (cuBLASLt %d, blas_min_t %d, blas_quant %d): activation %s",
                       ir_dtype_name(wts[j]), (long long)cs[k].T, cs[k].have, cs[k].min_t, cs[k].quant, ir_dtype_name(quant_dtype(p)));
                CHECK(exec_cuda_check(p) == SB_OK);
                plan_free(p);
            }
            ir_graph_free(g);
        }
    exec_cuda_assume_device(9, 132);
    int32_t nf[2] = {-1, -1};
    for (int on = 0; on < 2; on++) {
        exec_cuda_assume_blaslt(on);
        cu_config cfg = cu_config_default;
        cfg.blas_quant = 32;
        plan_target t;
        exec_cuda_target(&cfg, &t);
        ir_graph *g = qwen_layers(2, 64, 128);
        plan *p = NULL;
        CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
        if (p) {
            int nq = 0;
            for (int32_t i = 0; i < p->g->n_nodes; i++) {
                const ir_op op = p->g->nodes[i].op;
                nq += op == IR_OP_QUANTIZE || op == IR_OP_RMS_NORM_QUANT || op == IR_OP_GLU_QUANT || op == IR_OP_ADD_RMS_NORM_QUANT;
            }
            CHECKF((nq == 0) == (on == 1), "two Qwen layers at T = 64, cuBLASLt %d: %d quantizing nodes", on, nq);
            CHECK(exec_cuda_check(p) == SB_OK);
            nf[on] = fused_away(p, &cfg); /* the planner's MMA groups, the executor's rope jobs, ... */
            plan_free(p);
        }
        ir_graph_free(g);
    }
    printf("two Qwen layers at T = 64: %d nodes fused away, %d with the cuBLASLt rule\n", (int)nf[0], (int)nf[1]);
    CHECKF(nf[1] >= 0 && nf[1] < nf[0], "nodes fused away: %d with cuBLASLt, %d without", (int)nf[1], (int)nf[0]);
    /* the default threshold itself (what test_cuda_ops' int8 MMA tests pin off, blas_quant 0): a Qwen
     * layer at T = 255 quantizes and keeps its MMA groups, at T = 256 it quantizes nothing and has fewer fusions */
    int32_t nd[2] = {-1, -1}, nq[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        plan_target t;
        gpu_target(NULL, &t);
        ir_graph *g = qwen_layers(1, 255 + k, 512);
        plan *p = NULL;
        CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
        if (p) {
            nq[k] = 0;
            for (int32_t i = 0; i < p->g->n_nodes; i++) {
                const ir_op op = p->g->nodes[i].op;
                nq[k] += op == IR_OP_QUANTIZE || op == IR_OP_RMS_NORM_QUANT || op == IR_OP_GLU_QUANT || op == IR_OP_ADD_RMS_NORM_QUANT;
            }
            nd[k] = fused_away(p, NULL);
            plan_free(p);
        }
        ir_graph_free(g);
    }
    printf("a Qwen layer at the default blas_quant: T = 255 %d quantizing nodes, %d nodes fused away; T = 256 %d, %d\n", (int)nq[0],
           (int)nd[0], (int)nq[1], (int)nd[1]);
    CHECKF(nq[0] > 0 && nq[1] == 0 && nd[1] >= 0 && nd[1] < nd[0], "T 255 / 256: %d / %d quantizing nodes, %d / %d fusions", (int)nq[0],
           (int)nq[1], (int)nd[0], (int)nd[1]);
    exec_cuda_assume_blaslt(-1);
    exec_cuda_assume_device(0, 0);
}

/* SB_TUNE's one parser (cu_config_tune): every key sets its field, a bad string names the key and
 * leaves the config unchanged */
static void test_tune(void) {
    cu_config c = cu_config_default;
    CHECK(cu_config_tune(&c, NULL) == SB_OK && cu_config_tune(&c, "") == SB_OK && !memcmp(&c, &cu_config_default, sizeof c));
    CHECK(cu_config_tune(&c, "attn_variant=2,mma_small_tmax=300,,fuse=0") == SB_OK);
    CHECK(c.attn_variant == 2 && c.mma_small_tmax == 300 && c.fuse == 0 && c.graphs == 1);
    const cu_config before = c;
    static const struct {
        const char *spec, *needle;
    } bad[] = {{"nonsense=1", "unknown key \"nonsense\""}, {"fuse", "not key=value"}, {"fuse=", "fuse needs an integer"},
               {"fuse=2", "fuse=2 is not an integer in 0..1"}, {"attn_variant=x", "attn_variant=x"}, {"fuse=0,graphs=7", "graphs=7"},
               {"mmq=99999999999999999999", "mmq"}, {"fuse=1x", "fuse=1x"}, {"pdl=2", "pdl=2 is not an integer in 0..1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const sb_status st = cu_config_tune(&c, bad[i].spec);
        CHECKF(st == SB_ERR_INVALID_ARG && strstr(sb_last_error(), bad[i].needle), "SB_TUNE \"%s\": %s (%s)", bad[i].spec, sb_status_str(st),
               sb_last_error());
        CHECKF(!memcmp(&c, &before, sizeof c), "SB_TUNE \"%s\" changed the config", bad[i].spec);
    }
}

/* The qwen2 test model's paged decoder (as runtime/batch.c builds it) for the CUDA target, at T
 * tokens, planned as on an H200: it passes exec_cuda_check, and of the executor's fusions none
 * writes a cache through a RoPE or a GEMV at the rope's positions when the store's rows are the
 * slots; each paged attention takes Q's rope (at its logical positions, no ROPE node left before
 * it) exactly where the target asks (T <= attn_rope_paged_max_t), and no q8_1 quantize of an
 * attention of head_dim % 32 == 0 is left (pass fuse_attn_quant; this model's O projection reads
 * q8_K: test_paged_launches has the q8_1 case). */
static void test_paged_plan(int64_t T) {
    rt_model *m;
    if (rt_model_load(test_data_path("models/test-qwen2-q4_k_m.gguf"), NULL, &m) != SB_OK) {
        printf("SKIP paged plan: %s\n", sb_last_error());
        return;
    }
    exec_cuda_assume_device(9, 132);
    ir_graph *g;
    ir_graph_create(&g);
    rt_build bld = {.g = g, .m = m, .T = T, .n_out = T, .n_ctx = 64 * 16, .kv_type = SB_TYPE_F16, .block_size = 16, .n_blk_max = 16};
    CHECK(rt_build_decoder(&bld) == SB_OK);
    plan_target t;
    gpu_target(NULL, &t);
    plan *p = NULL;
    CHECK(plan_build(g, &t, NULL, &p) == SB_OK);
    cuda_fusions f = {0};
    if (p) CHECKF(exec_cuda_check(p) == SB_OK, "paged plan T=%lld: %s", (long long)T, sb_last_error());
    if (p && cuda_fusions_plan(p, &f, &cu_config_default) == SB_OK) {
        const ir_graph *pg = p->g;
        int32_t n_attn = 0, n_fused = 0, n_rope = 0, n_quant = 0;
        for (int32_t i = 0; i < pg->n_nodes; i++) {
            const ir_node *n = &pg->nodes[i];
            n_fused += f.skip[i] + planner_fused(n);
            if (n->op == IR_OP_ATTENTION) {
                const bool want_rope = T <= (t.attn_rope_paged_max_t > t.attn_rope_max_t ? t.attn_rope_paged_max_t : t.attn_rope_max_t);
                n_attn++;
                n_rope += ir_attn_q_rope(n).n_rot > 0;
                n_quant += ir_attn_quant_type(n) == SB_TYPE_Q8_1 && ir_result_of(pg, i, 1) != IR_NONE;
                CHECKF(ir_attn_block_size(n) > 0 && (ir_attn_q_rope(n).n_rot > 0) == want_rope,
                       "T=%lld: attention %%%d: paged %d, q rope %d (wanted %d)", (long long)T, (int)i,
                       (int)ir_attn_block_size(n), (int)ir_attn_q_rope(n).n_rot, (int)want_rope);
                CHECKF(pg->nodes[n->src[3]].op == IR_OP_POS && pg->nodes[n->src[4]].op == IR_OP_BLOCK_TABLE &&
                       (pg->nodes[n->src[0]].op == IR_OP_ROPE) == !want_rope,
                       "T=%lld: attention %%%d reads q from %s, positions from %s, its table from %s", (long long)T, (int)i,
                       ir_ops[pg->nodes[n->src[0]].op].name, ir_ops[pg->nodes[n->src[3]].op].name, ir_ops[pg->nodes[n->src[4]].op].name);
            }
            CHECKF(!(n->op == IR_OP_QUANTIZE && n->dtype == SB_TYPE_Q8_1 && pg->nodes[n->src[0]].op == IR_OP_ATTENTION &&
                     ir_attn_of(&pg->nodes[n->src[0]]).head_dim % 32 == 0),
                   "T=%lld: q8_1 quantize %%%d of a paged attention's output in a launch of its own (pass fuse_attn_quant)", (long long)T, (int)i);
            const int32_t store = n->op == IR_OP_ROPE_STORE ? i : n->op == IR_OP_MATMUL ? f.vstore[i] : -1;
            if (store >= 0)
                CHECKF(pg->nodes[pg->nodes[store].src[2]].op == IR_OP_POS, "T=%lld: node %%%d writes kv_store %%%d at its positions, "
                       "but the store's rows are %s", (long long)T, (int)i, (int)store, ir_ops[pg->nodes[pg->nodes[store].src[2]].op].name);
        }
        CHECK_EQ_INT(n_attn, m->hp.n_layer);
        printf("qwen2 test model, paged, T=%lld: %d nodes fused away (%d paged attentions rotate q, %d write q8_1 too)\n", (long long)T,
               (int)n_fused, (int)n_rope, (int)n_quant);
        CHECK(n_fused > 0); /* the other fusions still apply (GEMV epilogues, groups) */
    }
    cuda_fusions_free(&f);
    plan_free(p);
    ir_graph_free(g);
    exec_cuda_assume_device(0, 0);
    rt_model_free(m);
}

/* the kernels one run of p launches, counted on the host as the executor walks it: every node that
 * runs at its own place (no input, view, result or output; not done inside another node's launch,
 * cuda_fusions.skip), one launch each (an attention's split merge and a GEMM's split reduce, which
 * add one where they happen, are not counted) */
static int32_t launches(const plan *p) {
    cuda_fusions f = {0};
    const cu_config *prev = cu_cfg_bind(&cu_config_default);
    int32_t n = -1;
    if (cuda_fusions_plan(p, &f, &cu_config_default) == SB_OK) {
        n = 0;
        for (int32_t i = 0; i < p->g->n_nodes; i++) {
            const ir_op op = p->g->nodes[i].op;
            n += !f.skip[i] && op != IR_OP_RESHAPE && op != IR_OP_VIEW && op != IR_OP_RESULT && op != IR_OP_OUTPUT &&
                 !(ir_ops[op].flags & OPF_INPUT);
        }
    }
    cu_cfg_bind(prev);
    cuda_fusions_free(&f);
    return n;
}

/* the gemma4 test model's decode step planned as on an H100 (132 SMs; no GPU needed), with and
 * without the chains' quantize tails (pass fuse_chain_quant): 3 launches a layer fewer — the
 * post-attention and post-FFN norm + residual chains and the post-norm chain take the next
 * quantizer */
static void test_gemma4_launches(void) {
    rt_model *m;
    if (rt_model_load(test_data_path("models/test-gemma4-q4_k_m.gguf"), NULL, &m) != SB_OK) {
        printf("SKIP gemma4 launches: no test model (%s)\n", sb_last_error());
        return;
    }
    exec_cuda_assume_device(9, 132);
    ir_graph *g;
    ir_graph_create(&g);
    rt_build bld = {.g = g, .m = m, .T = 1, .n_out = 1, .n_ctx = 256, .kv_type = SB_TYPE_F16};
    CHECK(rt_build_decoder(&bld) == SB_OK);
    int32_t n[2] = {-1, -1}, tails = 0;
    for (int on = 0; on < 2; on++) {
        cu_config c = cu_config_default;
        c.chain_quant = on ? c.chain_quant : 0; /* SB_TUNE=chain_quant=0 */
        plan_target t;
        gpu_target(&c, &t);
        plan *p = NULL;
        CHECKF(plan_build(g, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
        if (!p) continue;
        CHECKF(exec_cuda_check(p) == SB_OK, "%s", sb_last_error());
        n[on] = launches(p);
        for (int32_t i = 0; on && i < p->g->n_nodes; i++) tails += ir_fused_tail_of(&p->g->nodes[i]).op != 0;
        plan_free(p);
    }
    const int64_t L = m->hp.n_layer;
    printf("gemma4 test model decode (%lld layers), H100 plan: %d launches without the chain tails, %d with (%d tails)\n", (long long)L,
           (int)n[0], (int)n[1], (int)tails);
    CHECKF(tails == 3 * L && n[1] == n[0] - 3 * L, "%d tails, %d -> %d launches for %lld layers", (int)tails, (int)n[0], (int)n[1], (long long)L);
    ir_graph_free(g);
    exec_cuda_assume_device(0, 0);
    rt_model_free(m);
}

/* pass fuse_norm_rope on the qwen3 and gemma4 test models' decode steps, planned as on an H100: the
 * q and k norms go into their ropes (K's into its rope_store), gemma4's V norm into its kv_store
 * (every own-KV layer), no rms_norm is left before a rope or store, and each fold saves a launch
 * except Q's (its rope moves out of the attention, which cannot norm: one launch for two either way) */
static void test_norm_rope_launches(void) {
    static const char *files[] = {"models/test-qwen3-q8_0.gguf", "models/test-gemma4-q4_k_m.gguf"};
    exec_cuda_assume_device(9, 132);
    for (int k = 0; k < 2; k++) {
        rt_model *m;
        if (rt_model_load(test_data_path(files[k]), NULL, &m) != SB_OK) {
            printf("SKIP %s: %s\n", files[k], sb_last_error());
            continue;
        }
        ir_graph *g;
        ir_graph_create(&g);
        rt_build bld = {.g = g, .m = m, .T = 1, .n_out = 1, .n_ctx = 256, .kv_type = SB_TYPE_F16};
        CHECK(rt_build_decoder(&bld) == SB_OK);
        int32_t n[2] = {-1, -1}, normed[2] = {0, 0}, stores = 0;
        for (int on = 0; on < 2; on++) {
            plan_target t;
            gpu_target(NULL, &t);
            t.fuse_norm_rope = on;
            plan *p = NULL;
            CHECKF(plan_build(g, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
            if (!p) continue;
            CHECKF(exec_cuda_check(p) == SB_OK, "%s", sb_last_error());
            n[on] = launches(p);
            for (int32_t i = 0; i < p->g->n_nodes; i++) {
                const ir_node *x = &p->g->nodes[i];
                normed[on] += ir_rope_norm_of(x).kind != IR_ROPE_NORM_NONE;
                stores += on && x->op == IR_OP_KV_STORE && ir_rope_norm_of(x).kind != IR_ROPE_NORM_NONE;
            }
            plan_free(p);
        }
        const int64_t L = m->hp.n_layer, Lkv = m->hp.n_layer_kv;
        printf("%s decode (%lld layers, %lld with K/V), H100 plan: %d launches without fuse_norm_rope, %d with (%d normed ropes and stores)\n",
               files[k], (long long)L, (long long)Lkv, (int)n[0], (int)n[1], (int)normed[1]);
        const bool gemma = k == 1;
        CHECK_EQ_INT(normed[0], 0);
        CHECK_EQ_INT(normed[1], (int)(L + Lkv * (gemma ? 2 : 1))); /* Q every layer; K (and gemma's V) where the layer has its cache */
        CHECK_EQ_INT(stores, gemma ? (int)Lkv : 0);
        CHECKF(n[1] == n[0] - (int)(Lkv * (gemma ? 2 : 1)), "%s: %d -> %d launches (%lld fewer expected)", files[k], (int)n[0], (int)n[1],
               (long long)(Lkv * (gemma ? 2 : 1)));
        ir_graph_free(g);
        rt_model_free(m);
    }
    exec_cuda_assume_device(0, 0);
}

/* launches of NL Qwen2.5-0.5B layers at T tokens (bs > 0: the paged form) as on an H200: compute
 * nodes no other launch performs; -1 where planning fails. *quant: attentions writing q8_1 */
static int32_t qwen_launches(int NL, int64_t T, int32_t bs, int32_t *quant) {
    exec_cuda_assume_device(9, 132);
    ir_graph *g = qwen_layers_bs(NL, T, 1024, bs);
    plan_target t;
    gpu_target(NULL, &t);
    plan *p = NULL;
    int32_t n = -1;
    *quant = 0;
    cuda_fusions f = {0};
    if (plan_build(g, &t, NULL, &p) == SB_OK && exec_cuda_check(p) == SB_OK && cuda_fusions_plan(p, &f, &cu_config_default) == SB_OK) {
        n = 0;
        for (int32_t i = 0; i < p->g->n_nodes; i++) {
            const ir_node *x = &p->g->nodes[i];
            const bool compute = !(ir_ops[x->op].flags & OPF_INPUT) && x->op != IR_OP_RESHAPE && x->op != IR_OP_OUTPUT && x->op != IR_OP_RESULT;
            n += compute && !f.skip[i];
            *quant += x->op == IR_OP_ATTENTION && ir_attn_quant_type(x) == SB_TYPE_Q8_1;
        }
    }
    cuda_fusions_free(&f);
    plan_free(p);
    ir_graph_free(g);
    exec_cuda_assume_device(0, 0);
    return n;
}

/* the batched engine's B = 1 step launches what a session's decode step launches (Qwen2.5-0.5B's
 * layers, F16 caches): its paged attention writes the O projection's q8_1 (fuse_attn_quant) and
 * rotates q as the session's does; at T = 2 (B = 2: dp4a GEMVs a matrix) the paged attention
 * rotates q too, one launch a layer fewer than the contiguous plan of 2 tokens; at T = 8 (from
 * cu_config.mma_min_t: the Q/K/V int8 MMA group and the rope-jobs launch of K and V) both plans
 * launch the same: the contiguous one's jobs launch rotates Q too, the paged attention rotates q
 * itself */
static void test_paged_launches(void) {
    int32_t qs, qp, q2, qc2, q8, qc8;
    const int32_t s1 = qwen_launches(3, 1, 0, &qs), p1 = qwen_launches(3, 1, 16, &qp);
    const int32_t c2 = qwen_launches(3, 2, 0, &qc2), p2 = qwen_launches(3, 2, 16, &q2);
    const int32_t c8 = qwen_launches(3, 8, 0, &qc8), p8 = qwen_launches(3, 8, 16, &q8);
    printf("three Qwen2.5-0.5B layers: T=1 %d launches, paged %d (q8_1 out %d / %d); T=2 %d, paged %d (%d / %d); T=8 %d, paged %d (%d / %d)\n",
           (int)s1, (int)p1, (int)qs, (int)qp, (int)c2, (int)p2, (int)qc2, (int)q2, (int)c8, (int)p8, (int)qc8, (int)q8);
    CHECK(s1 > 0 && c2 > 0 && c8 > 0);
    CHECK_EQ_INT(p1, s1);
    CHECK_EQ_INT(qp, 3);
    CHECK_EQ_INT(q2, 3);
    CHECK_EQ_INT(q8, 3);
    CHECK_EQ_INT(p2, c2 - 3);
    CHECK_EQ_INT(p8, c8);
}

/* the CUDA target's callbacks read the config bound to the thread (sessions and engines bind their
 * backend's around planning: backend_bind): three Qwen2.5-0.5B layers at T = 8 plan int8 MMA groups
 * under mma_min_t 3 (the default) and none under 9 */
static int32_t groups_at(int64_t T, int mma_min_t) {
    exec_cuda_assume_device(9, 132);
    cu_config c = cu_config_default;
    c.mma_min_t = mma_min_t;
    const cu_config *prev = cu_cfg_bind(&c);
    ir_graph *g = qwen_layers_bs(3, T, 1024, 16);
    plan_target t;
    gpu_target(&c, &t);
    plan *p = NULL;
    int32_t n = -1;
    if (plan_build(g, &t, NULL, &p) == SB_OK && exec_cuda_check(p) == SB_OK) {
        n = 0;
        for (int32_t i = 0; i < p->g->n_nodes; i++) n += p->g->nodes[i].op == IR_OP_MATMUL_GROUP;
    }
    plan_free(p);
    ir_graph_free(g);
    cu_cfg_bind(prev);
    exec_cuda_assume_device(0, 0);
    return n;
}

static void test_bound_config(void) {
    const int32_t g3 = groups_at(8, 3), g9 = groups_at(8, 9);
    printf("three Qwen2.5-0.5B layers, paged, T=8: %d matmul groups under mma_min_t 3, %d under 9\n", (int)g3, (int)g9);
    CHECK(g3 >= 3);
    CHECK_EQ_INT(g9, 0);
}

int main(void) {
    test_tune();
    /* a build without the backend: the check refuses everything, nothing else to test */
    plan *probe = matmul_plan(SB_TYPE_F32, 64, 4, "probe");
    if (!probe) return test_summary();
    if (exec_cuda_check(probe) == SB_ERR_UNSUPPORTED) {
        printf("SKIP: %s\n", sb_last_error());
        plan_free(probe);
        return 0;
    }
    plan_free(probe);
    test_paged_plan(1);
    test_paged_plan(8);
    test_paged_launches();
    test_bound_config();
    test_gemma4_launches();
    test_norm_rope_launches();
    test_blas_rule();

    /* k_attn_deep's scratch serves every depth class it takes: past ~131k keys it refuses the
     * caches' whole depth (more than its 1,024 splits a kv head) while the 131,072-key class still
     * runs it (Qwen2.5's 2 kv heads of 64, G 7, 132 SMs), and gemma's 256-wide heads get theirs */
    exec_cuda_assume_device(9, 132);
    const cu_attn_args deep[] = {
        {.D = 64, .Hq = 14, .Hkv = 2, .T = 1, .ctype = SB_TYPE_F16, .nsplit = 64, .variant = 4, .ctx = 140000, .small = 128},
        {.D = 256, .Hq = 4, .Hkv = 1, .T = 1, .ctype = SB_TYPE_F16, .nsplit = 64, .variant = 4, .ctx = 4160, .small = 128},
    };
    for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++)
        CHECKF(cu_attn_deep_scratch(&deep[i]) > 0, "deep attention scratch for head_dim %lld at %lld keys: 0", (long long)deep[i].D,
               (long long)deep[i].ctx);
    exec_cuda_assume_device(0, 0);

    /* activation formats per weight type */
    const struct { int w; int act; } want[] = {
        {SB_TYPE_Q4_0, SB_TYPE_Q8_1}, {SB_TYPE_Q5_0, SB_TYPE_Q8_1}, {SB_TYPE_Q8_0, SB_TYPE_Q8_1}, {SB_TYPE_Q4_K, SB_TYPE_Q8_K},
        {SB_TYPE_Q5_K, SB_TYPE_Q8_K}, {SB_TYPE_Q6_K, SB_TYPE_Q8_K}, {SB_TYPE_Q2_K, SB_TYPE_Q8_K}, {SB_TYPE_Q3_K, SB_TYPE_Q8_K},
        {SB_TYPE_IQ4_XS, SB_TYPE_Q8_K}, {SB_TYPE_Q4_1, SB_TYPE_Q8_1}, {SB_TYPE_Q5_1, SB_TYPE_Q8_1}, {SB_TYPE_IQ4_NL, SB_TYPE_Q8_1},
        {SB_TYPE_F16, SB_TYPE_F32}, {SB_TYPE_BF16, SB_TYPE_F32}, {SB_TYPE_F32, SB_TYPE_F32},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        plan *p = matmul_plan(want[i].w, 512, 8, "w");
        if (!p) continue;
        CHECKF(quant_dtype(p) == want[i].act, "%s: activation %s, expected %s", ir_dtype_name(want[i].w), ir_dtype_name(quant_dtype(p)),
               ir_dtype_name(want[i].act));
        sb_status s = exec_cuda_check(p);
        CHECKF(s == SB_OK, "%s: check: %s", ir_dtype_name(want[i].w), sb_last_error());
        plan_free(p);
    }

    /* a weight type with no CUDA kernel: refused at plan time, naming the tensor */
    plan *p = matmul_plan(SB_TYPE_TQ1_0, 512, 8, "blk.7.ffn_down.weight");
    if (p) {
        sb_status s = exec_cuda_check(p);
        CHECK_EQ_INT(s, SB_ERR_MODEL_TENSOR_TYPE);
        CHECKF(strstr(sb_last_error(), "blk.7.ffn_down.weight") && strstr(sb_last_error(), "TQ1_0"), "message: %s", sb_last_error());
        plan_free(p);
    }

    /* gemma4-e4b's decode attentions at depth 4096 as on an H100 (132 SMs; no GPU needed), described
     * by exec_cuda_describe_attention: the global layer (head_dim 512, 8 / 2 heads, F16 cache of 4160
     * rows) on the paged kernel, a block per query head, 32 splits (CU_ATT_PAGED_MAX_SPLITS) of 128 keys;
     * with cu_config.attn_gqa 8 the grouped kernel, 4 heads of a kv head a block: grid (2, 1, 65), 64
     * of its 65 splits active (64 keys each); a sliding layer (head_dim 256, window 512) stays on cu_attention and sees
     * 512 keys */
    {
        exec_cuda_assume_device(9, 132);
        ir_graph *g;
        ir_graph_create(&g);
        const int64_t C = 4160;
        ir_ref pos = ir_input_pos(g, 1), out = IR_NONE;
        for (int l = 0; l < 2; l++) {
            const int64_t D = l ? 256 : 512;
            char kn[32], vn[32];
            snprintf(kn, sizeof kn, "cache_k.%d", l), snprintf(vn, sizeof vn, "cache_v.%d", l);
            ir_ref q = ir_input_weight(g, l ? "q1" : "q0", SB_TYPE_F32, (int64_t[4]){D, 8, 1, 1});
            ir_ref k2 = ir_input_kv(g, kn, SB_TYPE_F16, (int64_t[4]){2 * D, C, 1, 1});
            ir_ref v = ir_input_kv(g, vn, SB_TYPE_F16, (int64_t[4]){2 * D, C, 1, 1});
            ir_attn_params ap = {.n_head_kv = 2, .head_dim = (int32_t)D, .scale = 0.05f, .window = l ? 512 : 0};
            ir_ref a = ir_attention(g, q, k2, v, pos, &ap);
            ir_ref y = ir_matmul(g, ir_input_weight(g, l ? "wo1" : "wo0", SB_TYPE_Q8_0, (int64_t[4]){8 * D, 64, 1, 1}), a);
            out = out == IR_NONE ? y : ir_add(g, out, y);
        }
        ir_output(g, out, "y");
        plan_target t;
        gpu_target(NULL, &t);
        plan *pa = NULL;
        CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
        if (pa) {
            char d0[512] = "", d1[512] = "";
            cu_config cg = cu_config_default;
            cg.attn_gqa = 0;
            exec_cuda_describe_attention(pa, &cg, 4095, d0, sizeof d0);
            cg.attn_gqa = 8;
            exec_cuda_describe_attention(pa, &cg, 4095, d1, sizeof d1);
            printf("gemma4-e4b's attentions at depth 4096, H100:\n%sgrouped:\n%s", d0, d1);
            CHECKF(strstr(d0, "k_attn_paged hb 0 grid (8, 1, 32), 32 splits: 32 active of 128 keys, the last merges") != NULL, "per head:\n%s", d0);
            CHECKF(strstr(d1, "k_attn_paged_gqa hb 4 grid (2, 1, 65), 65 splits: 64 active of 64 keys + merge") != NULL, "grouped:\n%s", d1);
            CHECKF(strstr(d0, "head_dim 256 heads 8/2 window 512, 512 keys: cu_attention") != NULL && strstr(d1, "512 keys: cu_attention") != NULL,
                   "sliding layer:\n%s%s", d0, d1);
            plan_free(pa);
        }
        ir_graph_free(g);
        exec_cuda_assume_device(0, 0);
    }

    /* Qwen2.5-0.5B's paged decode attention at B = 1 as on an H100 (head_dim 64, 14 / 2 heads, F16
     * pool, a table of 13 blocks of 16: 208 keys), described at depth 192. By default (depth classes
     * on) the session's kernels through the block table: depth 64 the small layout's own kernel
     * (class 128), 192 k_attn_deep (class 256); past the deepest class the paged kernel. Without
     * depth classes (attn_class 0) the paged kernel: the grouped one, all 7 query heads of a kv head
     * a block, 4 splits (208 keys / kmin 64), 3 active, merged by the last split block; with
     * attn_gqa 0 a block per query head; with attn_gqa 4 the largest divisor of 7 <= 4: one head a
     * block, grouped. A step of 8 tokens (B = 8) keeps the grouped paged kernel at every depth. */
    for (int64_t T = 1; T <= 8; T += 7) {
        exec_cuda_assume_device(9, 132);
        ir_graph *g;
        ir_graph_create(&g);
        const int64_t D = 64, C = 256 * 16, n_tbl = 13;
        ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, 14, T, 1});
        ir_ref k2 = ir_input_kv(g, "cache_k.0", SB_TYPE_F16, (int64_t[4]){2 * D, C, 1, 1});
        ir_ref v = ir_input_kv(g, "cache_v.0", SB_TYPE_F16, (int64_t[4]){2 * D, C, 1, 1});
        ir_attn_params ap = {.n_head_kv = 2, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_ref a = ir_attention_paged(g, q, k2, v, ir_input_pos(g, T), ir_input_block_table(g, n_tbl, T), 16, &ap);
        ir_output(g, ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_Q8_0, (int64_t[4]){14 * D, 64, 1, 1}), a), "y");
        plan_target t;
        gpu_target(NULL, &t);
        plan *pa = NULL;
        CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
        if (pa && T > 1) {
            char d[512] = "", dd[512] = "";
            exec_cuda_describe_attention(pa, &cu_config_default, 63, d, sizeof d);
            exec_cuda_describe_attention(pa, &cu_config_default, 191, dd, sizeof dd);
            printf("qwen2.5-0.5b's paged attention, 8 tokens, at depth 64 and 192, H100:\n%s%s", d, dd);
            CHECKF(strstr(d, "k_attn_paged_gqa hb 7 grid (2, 8, ") != NULL && strstr(dd, "k_attn_paged_gqa hb 7 grid (2, 8, ") != NULL,
                   "T = 8:\n%s%s", d, dd);
        }
        if (pa && T == 1) {
            char ds[512] = "", dd[512] = "", df[512] = "";
            exec_cuda_describe_attention(pa, &cu_config_default, 63, ds, sizeof ds);
            exec_cuda_describe_attention(pa, &cu_config_default, 191, dd, sizeof dd);
            exec_cuda_describe_attention(pa, &cu_config_default, 200000, df, sizeof df);
            printf("qwen2.5-0.5b's paged attention at depth 64, 192 and past the classes, H100:\n%s%s%s", ds, dd, df);
            CHECKF(strstr(ds, "64 keys: k_attn_dec small layout (SMALL_ONLY) through the block table (block size 16), depth class of 128 keys") != NULL,
                   "depth 64:\n%s", ds);
            CHECKF(strstr(dd, "192 keys: k_attn_deep + k_attn_deep_merge through the block table (block size 16), depth class of 256 keys") != NULL,
                   "depth 192:\n%s", dd);
            CHECKF(strstr(df, "k_attn_paged_gqa hb 7") != NULL, "past the deepest class:\n%s", df);
            char d8[512] = "", d0[512] = "", d4[512] = "";
            cu_config cg = cu_config_default;
            cg.attn_class = 0;
            exec_cuda_describe_attention(pa, &cg, 191, d8, sizeof d8);
            cg.attn_gqa = 0;
            exec_cuda_describe_attention(pa, &cg, 191, d0, sizeof d0);
            cg.attn_gqa = 4;
            exec_cuda_describe_attention(pa, &cg, 191, d4, sizeof d4);
            printf("qwen2.5-0.5b's paged attention at depth 192, H100:\n%s%s%s", d8, d0, d4);
            CHECKF(strstr(d8, "k_attn_paged_gqa hb 7 grid (2, 1, 4), 4 splits: 3 active of 64 keys, the last merges") != NULL, "default:\n%s", d8);
            CHECKF(strstr(d0, "k_attn_paged hb 0 grid (14, 1, 4), 4 splits: 3 active of 64 keys, the last merges") != NULL, "attn_gqa 0:\n%s", d0);
            CHECKF(strstr(d4, "k_attn_paged_gqa hb 1 grid (14, 1, 4), 4 splits: 3 active of 64 keys, the last merges") != NULL, "attn_gqa 4:\n%s", d4);
            plan_free(pa);
        }
        ir_graph_free(g);
        exec_cuda_assume_device(0, 0);
    }

    /* attention heads past cu_attention's 256: even ones up to 512 run (the paged kernel over the
     * contiguous cache), Q's rope and the output's q8_1 then stay apart (plan_target
     * .attn_fuse_max_head_dim); odd ones past 256 and any past 512 are refused as unsupported */
    {
        const int64_t Ds[] = {512, 320, 301, 640};
        for (size_t k = 0; k < sizeof Ds / sizeof Ds[0]; k++) {
            ir_graph *g;
            ir_graph_create(&g);
            const int64_t D = Ds[k], C = 16;
            ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, 2, 1, 1});
            ir_ref k2 = ir_input_kv(g, "cache_k.0", SB_TYPE_F32, (int64_t[4]){D, C, 1, 1});
            ir_ref v = ir_input_kv(g, "cache_v.0", SB_TYPE_F32, (int64_t[4]){D, C, 1, 1});
            ir_ref pos = ir_input_pos(g, 1);
            ir_rope_params rp = {.n_rot = (int32_t)(D % 2 ? D - 1 : D), .mode = IR_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
            ir_attn_params ap = {.n_head_kv = 1, .head_dim = (int32_t)D, .scale = 0.05f};
            ir_ref a = ir_attention(g, ir_rope(g, q, pos, IR_NONE, &rp), k2, v, pos, &ap);
            const int wt = D % 16 ? SB_TYPE_F32 : SB_TYPE_Q8_0; /* rows of 2D: whole q8_0 blocks */
            ir_output(g, ir_matmul(g, ir_input_weight(g, "wo", wt, (int64_t[4]){2 * D, 64, 1, 1}), a), "y");
            plan_target t;
            gpu_target(NULL, &t);
            plan *pa = NULL;
            CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
            if (pa) {
                const bool runs = D <= 512 && D % 2 == 0;
                int fused = 0;
                for (int32_t i = 0; i < pa->g->n_nodes; i++) {
                    const ir_node *n = &pa->g->nodes[i];
                    fused += n->op == IR_OP_ATTENTION && (ir_attn_q_rope(n).n_rot || ir_attn_quant_type(n) >= 0);
                }
                CHECKF(fused == 0, "head_dim %lld: %d attentions with Q's rope or the q8_1 output fused", (long long)D, fused);
                const sb_status st = exec_cuda_check(pa);
                CHECKF(runs ? st == SB_OK : st == SB_ERR_UNSUPPORTED, "head_dim %lld: exec_cuda_check %s: %s", (long long)D, sb_status_str(st),
                       sb_last_error());
                char want[32];
                snprintf(want, sizeof want, "head_dim %lld", (long long)D);
                CHECKF(runs || strstr(sb_last_error(), want) != NULL, "message: %s", sb_last_error());
                plan_free(pa);
            }
            ir_graph_free(g);
        }
    }

    /* executor-level fusion decisions on the decode and prefill plans of the qwen2 test model:
     * q/k/v biases and the residual adds of each layer become matmul addends (5 a layer: the
     * planner's), and the K kv_store into its RoPE (1 a layer) */
    {
        rt_model *m;
        if (rt_model_load(test_data_path("models/test-qwen2-q4_k_m.gguf"), NULL, &m) == SB_OK) {
            exec_cuda_assume_device(9, 132); /* the split-K decisions (and so the fusions) as on an H200 */
            for (int64_t T = 1; T <= 7; T += 6) {
                ir_graph *g;
                ir_graph_create(&g);
                rt_build bld = {.g = g, .m = m, .T = T, .n_out = 1, .n_ctx = 64, .kv_type = SB_TYPE_F32};
                CHECK(rt_build_decoder(&bld) == SB_OK);
                plan_target t;
                gpu_target(NULL, &t);
                plan *pd = NULL;
                CHECK(plan_build(g, &t, NULL, &pd) == SB_OK);
                if (pd) {
                    int32_t nf = fused_away(pd, NULL);
                    printf("qwen2 test model, T=%lld: %d nodes fused away (%lld layers)\n", (long long)T, nf,
                           (long long)m->hp.n_layer);
                    /* also: K/V (or Q) and up into one launch with Q (or K) and gate, V's kv_store into
                     * that launch (T = 1) or K, V and Q's rope jobs summing its split partials (T = 7: the
                     * int8 MMA from cu_config.mma_min_t 3), an unabsorbed residual add into the next norm.
                     * Planned as on an H200 (here and on any GPU alike): 12 a layer at T = 1 (K's rope and
                     * the GLU pair included), 10 at T = 7 */
                    const int32_t lo = 8, hi = T == 1 ? 16 : 12;
                    CHECKF(nf >= lo * m->hp.n_layer && nf <= hi * m->hp.n_layer + 1, "T=%lld: %d fusions for %lld layers", (long long)T, nf,
                           (long long)m->hp.n_layer);
                    plan_free(pd);
                }
                ir_graph_free(g);
            }
            exec_cuda_assume_device(0, 0);
            rt_model_free(m);
        }
    }

    /* the executor's fusions as text (SB_DUMP_IR "launches"): one decode layer of the bench model — its
     * summary line counts exactly the nodes exec_cuda_count_fusions counts, and the cache writes the
     * Q/K/V group's launch performs read as such */
    {
        exec_cuda_assume_device(9, 132);
        ir_graph *g = qwen_layers(1, 1, 64);
        plan_target t;
        gpu_target(NULL, &t);
        plan *pa = NULL;
        CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
        cuda_fusions f = {0};
        const cu_config *prev = cu_cfg_bind(&cu_config_default);
        if (pa && cuda_fusions_plan(pa, &f, &cu_config_default) == SB_OK) {
            char *buf = NULL;
            size_t len = 0;
            FILE *mf = open_memstream(&buf, &len);
            cuda_fusions_print(pa, &f, mf);
            fclose(mf);
            char want[64];
            snprintf(want, sizeof want, "// %d nodes run inside other launches", (int)exec_cuda_count_fusions(pa, NULL));
            CHECKF(buf && strstr(buf, want) && strstr(buf, "also stores V into") && strstr(buf, "also rotates K into") && strstr(buf, "'s launch;"),
                   "launches text:\n%s", buf ? buf : "(none)");
            free(buf);
        }
        cu_cfg_bind(prev);
        cuda_fusions_free(&f);
        plan_free(pa);
        ir_graph_free(g);
        CHECK(plan_dump_wants(&(plan_dump){.spec = "after-all"}, "launches") && plan_dump_wants(&(plan_dump){.spec = "memplan,launches"}, "launches"));
        CHECK(!plan_dump_wants(&(plan_dump){.spec = "after:dce"}, "launches"));
        exec_cuda_assume_device(0, 0);
    }

    /* Three Qwen2.5-0.5B layers (E 896, 14 / 2 heads of 64, FFN 4864; Q5_0 with a Q8_0 V, Q6_K down)
     * at 64 new tokens, planned as on an H200 (sm_90, 132 SMs; no GPU needed): the K, V, Q GEMMs are
     * one MMA group that splits K, so Q's rope joins K's and V's jobs (pass fuse_rope_jobs; the memory
     * plan keeps K and V live until it) — a fusion more a layer than with cu_config.rope_inplace 0
     * (then the jobs sum the group's partials: no reduce kernel either). Every attention writes its q8_1 output (the
     * planner's fuse_attn_quant, whatever the memory plan). The O and down GEMMs split K, and the
     * norm after each (but the last down's: the graph ends there) sums the partials
     * (cu_config.norm_sums: 5, no node fewer: a reduce kernel each). */
    {
        const int NL = 3;
        exec_cuda_assume_device(9, 132);
        int32_t nf[3] = {-1, -1, -1}, ns[3] = {-1, -1, -1};
        for (int on = 0; on < 3; on++) {
            ir_graph *g = qwen_layers(NL, 64, 640);
            cu_config cfg = cu_config_default;
            cfg.rope_inplace = on != 0;
            cfg.norm_sums = on == 2;
            plan_target t;
            gpu_target(&cfg, &t); /* the rope jobs are the planner's (pass fuse_rope_jobs) */
            plan *pa = NULL;
            CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
            if (pa) nf[on] = fused_away(pa, &cfg), ns[on] = exec_cuda_count_norm_sums(pa, &cfg);
            plan_free(pa);
            ir_graph_free(g);
        }
        exec_cuda_assume_device(0, 0);
        printf("three Qwen2.5-0.5B layers, T=64, as on an H200: %d fusions, %d with the in-place rope, %d with the norm sums "
               "(%d norms summing split partials)\n",
               (int)nf[0], (int)nf[1], (int)nf[2], (int)ns[2]);
        CHECKF(nf[0] >= 0 && nf[1] >= nf[0] + 1 && nf[1] <= nf[0] + NL, "in-place rope: %d fusions vs %d without (1 to %d more expected)", (int)nf[1],
               (int)nf[0], (int)NL);
        CHECKF(nf[2] == nf[1], "norm sums: %d fusions vs %d (the same expected: they drop reduce kernels, not nodes)", (int)nf[2], (int)nf[1]);
        CHECKF(ns[0] == 0 && ns[1] == 0 && ns[2] == 2 * NL - 1, "norm sums: %d, %d, %d (0, 0, %d expected)", (int)ns[0], (int)ns[1], (int)ns[2],
               2 * NL - 1);
    }

    /* RoPE(q) right before the attention: the attention rotates q itself (1 node fused away); the
     * K and V cache writes before it run as one cu_rope_jobs launch (1 more) */
    for (int T = 1; T <= 5; T += 4)
    for (int gemv = 0; gemv < 2; gemv++) { /* with a Q8_0 GEMV after it, the q8_1 quantize folds into the attention too */
        ir_graph *g;
        ir_graph_create(&g);
        const int64_t D = 64, Hq = 4, Hkv = 2, C = 64;
        ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, T, 1});
        ir_ref kn = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){D * Hkv, T, 1, 1});
        ir_ref vn = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){D * Hkv, T, 1, 1});
        ir_ref kc = ir_input_kv(g, "cache_k.0", SB_TYPE_F32, (int64_t[4]){D * Hkv, C, 1, 1});
        ir_ref vc = ir_input_kv(g, "cache_v.0", SB_TYPE_F32, (int64_t[4]){D * Hkv, C, 1, 1});
        ir_ref pos = ir_input_pos(g, T);
        ir_rope_params rp = {.n_rot = 64, .mode = IR_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
        ir_ref qr = ir_rope(g, q, pos, IR_NONE, &rp);
        ir_ref k2 = ir_kv_store(g, kc, kn, pos), v2 = ir_kv_store(g, vc, vn, pos);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_ref att = ir_attention(g, qr, k2, v2, pos, &ap);
        if (gemv) att = ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_Q8_0, (int64_t[4]){D * Hq, 32, 1, 1}), att);
        ir_output(g, att, "y");
        plan_target t;
        gpu_target(NULL, &t);
        plan *pa = NULL;
        CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
        if (pa) {
            /* + the two kv_stores side by side in one launch (pass fuse_rope_jobs) */
            CHECKF(fused_away(pa, NULL) == 2 + gemv, "rope(q)+attention%s T=%d: %d fusions (%d expected)", gemv ? "+gemv" : "", T,
                   (int)fused_away(pa, NULL), 2 + gemv);
            plan_free(pa);
        }
        ir_graph_free(g);
    }

    /* a decode attention block (norm, Q/K/V + biases, ropes, kv_stores, attention; test_cuda_ops'
     * test_qkv_rope_block): 3 biases, 2 GEMVs, V's kv_store, K's kv_store, Q's rope fuse away (8);
     * K's rope into the Q/K/V launch (cu_config.fuse_ropek, default on: the target's
     * launch_store_fits then takes rope_stores, pass fuse_launch_store) +1 */
    for (int ropek = 0; ropek < 2; ropek++) {
        const int64_t E = 256, D = 64, Hq = 4, Hkv = 2, C = 96;
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref wnr = ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref h = ir_mul(g, ir_rms_norm(g, xr, 1e-6f), wnr);
        ir_ref pr = ir_input_pos(g, 1);
        ir_ref q = ir_add(g, ir_matmul(g, ir_input_weight(g, "wq", SB_TYPE_Q5_0, (int64_t[4]){E, D * Hq, 1, 1}), h),
                          ir_input_weight(g, "bq", SB_TYPE_F32, (int64_t[4]){D * Hq, 1, 1, 1}));
        ir_ref kk = ir_add(g, ir_matmul(g, ir_input_weight(g, "wk", SB_TYPE_Q5_0, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                           ir_input_weight(g, "bk", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        ir_ref v = ir_add(g, ir_matmul(g, ir_input_weight(g, "wv", SB_TYPE_Q5_0, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                          ir_input_weight(g, "bv", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        ir_rope_params rp = {.n_rot = 64, .mode = IR_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
        q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, Hq, 1, 1}), pr, IR_NONE, &rp);
        kk = ir_rope(g, ir_reshape(g, kk, (int64_t[4]){D, Hkv, 1, 1}), pr, IR_NONE, &rp);
        ir_ref kcr = ir_kv_store(g, ir_input_kv(g, "cache_k.0", SB_TYPE_F16, (int64_t[4]){D * Hkv, C, 1, 1}),
                                 ir_reshape(g, kk, (int64_t[4]){D * Hkv, 1, 1, 1}), pr);
        ir_ref vcr = ir_kv_store(g, ir_input_kv(g, "cache_v.0", SB_TYPE_F16, (int64_t[4]){D * Hkv, C, 1, 1}), v, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_output(g, ir_attention(g, q, kcr, vcr, pr, &ap), "y");
        cu_config cfg = cu_config_default;
        cfg.fuse_ropek = ropek;
        plan_target t;
        gpu_target(&cfg, &t);
        plan *pa = NULL;
        CHECK(plan_build(g, &t, NULL, &pa) == SB_OK);
        if (pa) {
            const int32_t nf = fused_away(pa, &cfg);
            printf("decode attention block (rope(K) %d): %d nodes fused away\n", ropek, (int)nf);
            CHECKF(nf == 8 + ropek, "attention block (rope(K) %d): %d fusions (%d expected)", ropek, (int)nf, 8 + ropek);
            plan_free(pa);
        }
        ir_graph_free(g);
    }

    exec_cuda_assume_blaslt(-1); /* the sessions below: the real answer */
    /* sessions: without a usable GPU a CUDA session fails cleanly with SB_ERR_DEVICE */
    char why[512];
    if (!exec_cuda_available(why, sizeof why)) {
        printf("no GPU here (%s): checking the clean refusal\n", why);
        rt_model *m;
        if (rt_model_load(test_data_path("models/test-qwen2-q4_0.gguf"), NULL, &m) == SB_OK) {
            rt_session *s = NULL;
            rt_session_params sp = {.n_ctx = 64, .n_threads = 1, .device = 1};
            sb_status st = rt_session_create(m, &sp, &s);
            CHECK_EQ_INT(st, SB_ERR_DEVICE);
            CHECK(s == NULL);
            sp.device = 0;
            CHECK(rt_session_create(m, &sp, &s) == SB_OK);
            int32_t tok = 5;
            CHECK(rt_session_eval(s, &tok, 1, false, NULL) == SB_OK);
            rt_session_free(s);
            sp.device = 7;
            CHECK_EQ_INT(rt_session_create(m, &sp, &s), SB_ERR_INVALID_ARG);
            rt_model_free(m);
        } else {
            printf("(test model absent: session part skipped)\n");
        }
    }
    return test_summary();
}
