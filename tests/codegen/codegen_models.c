/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/codegen_models.c — CI's codegen check without a GPU: for every test model
 * ($SB_TESTDATA/models), the decode plan (T = 1) and a prefill plan (T = 7, all rows out, as
 * sb_session_eval_all) are built exactly as a CUDA session builds them (rt_build_decoder +
 * exec_cuda_target), every node the executor would launch a generated kernel for becomes a
 * cg_group (FUSED chains without a quantize tail — codegen must refuse those —, single elementwise ops, QUANTIZE, RMS_NORM_QUANT, GLU_QUANT, and the
 * executor's ADD + RMS_NORM_QUANT pair for every RMS_NORM_QUANT fed by a full-shape ADD), and
 * the bundle of all its autotune variants (one source, as the executor compiles it) is compiled by
 * NVRTC to an sm_90 cubin and an sm_80 one. Any compile error, and any such node codegen refuses, fails the test.
 * Distinct sources are compiled once (the memory cache); the disk cache is a fresh temp folder.
 * SKIPs (exit 77, with the reason) without NVRTC, without the CUDA backend (no CUDA plan target)
 * or without the shared models. CI has all three.
 */
#include "codegen/cg.h"
#include "runtime/exec_cuda.h"
#include "runtime/model.h"
#include "runtime/arch/arch.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "base/status.h"
#include "test.h"
#include "runtime/ref_file.h"

#include <stdlib.h>
#include <unistd.h>

static int n_groups, n_kernels, n_models;

static bool coverable(const ir_node *n) {
    switch (n->op) {
    case IR_OP_FUSED: return !ir_fused_tail_of(n).op; /* a chain with a quantize tail: hand-written (cu_ew_quant_rows) */
    case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU: case IR_OP_GELU_TANH:
    case IR_OP_RMS_NORM: case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_ADD_RMS_NORM_QUANT: case IR_OP_GLU_QUANT: return true;
    default: return false;
    }
}

/* the sources of one plan: every variant for sm_90, the defaults again for sm_80; compiled together */
typedef struct job_list {
    char *src[4096];
    char name[4096][40];
    int arch[4096], n;
} job_list;
static job_list jobs;

static void add_group(const char *model, int T, const cg_group *g) {
    cg_variant v[CG_MAX_VARIANTS];
    char kn[CG_MAX_VARIANTS][40];
    const int nv = cg_variants(g, v);
    n_groups++;
    char *src = NULL, nm[40];
    sb_status s = cg_emit_bundle(g, v, nv, &src, nm, kn); /* what the executor compiles: every variant in one source */
    CHECKF(s == SB_OK, "%s T=%d: emit: %s", model, T, sb_last_error());
    if (s != SB_OK) return;
    n_kernels += nv;
    for (int a = 0; a < 2; a++) {
        int j = 0;
        while (j < jobs.n && (strcmp(jobs.name[j], nm) || jobs.arch[j] != (a ? 80 : 90))) j++;
        if (j < jobs.n || jobs.n == 4096) continue;
        jobs.src[j] = strdup(src);
        memcpy(jobs.name[j], nm, 40);
        jobs.arch[j] = a ? 80 : 90;
        jobs.n++;
    }
    free(src);
}

static void compile_jobs(const char *model) {
    for (int arch = 90; arch >= 80; arch -= 10) {
        const char *srcs[4096], *names[4096];
        int n = 0;
        for (int j = 0; j < jobs.n; j++)
            if (jobs.arch[j] == arch) srcs[n] = jobs.src[j], names[n++] = jobs.name[j];
        static cg_binary bin[4096];
        static sb_status st[4096];
        cg_get_binaries(srcs, names, n, arch, 0, bin, st);
        for (int k = 0; k < n; k++) {
            CHECKF(st[k] == SB_OK && bin[k].size > 0, "%s sm_%d %s failed:\n%s", model, arch, names[k], srcs[k]);
        }
    }
    for (int j = 0; j < jobs.n; j++) free(jobs.src[j]);
    jobs.n = 0;
}

static void check_plan(const char *model, const plan *p, int T) {
    const ir_graph *g = p->g;
    int groups = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        cg_group grp;
        if (ir_fused_tail_of(n).op) { /* refused, never generated without its tail */
            CHECKF(cg_group_from_node(g, i, IR_NONE, &grp) == SB_ERR_UNSUPPORTED, "%s T=%d: chain %%%d with a tail given a group", model, T, (int)i);
            continue;
        }
        if (!coverable(n)) continue;
        sb_status s = cg_group_from_node(g, i, IR_NONE, &grp);
        CHECKF(s == SB_OK, "%s T=%d node %%%d %s: %s", model, T, (int)i, ir_ops[n->op].name, sb_last_error());
        if (s != SB_OK) continue;
        add_group(model, T, &grp);
        groups++;
        if (n->op == IR_OP_RMS_NORM_QUANT && g->nodes[n->src[0]].op == IR_OP_ADD) {
            const ir_node *a = &g->nodes[n->src[0]];
            if (ir_nelem(&g->nodes[a->src[0]]) == ir_nelem(a) && ir_nelem(&g->nodes[a->src[1]]) == ir_nelem(a)) {
                s = cg_group_from_node(g, i, n->src[0], &grp);
                CHECKF(s == SB_OK, "%s T=%d add+norm %%%d: %s", model, T, (int)i, sb_last_error());
                if (s == SB_OK) add_group(model, T, &grp), groups++;
            }
        }
    }
    CHECKF(groups > 0, "%s T=%d: no generated groups", model, T);
}

static void one_model(const char *dir, const char *name) {
    char path[8200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rt_model *m = NULL;
    sb_status s = rt_model_load(path, NULL, &m);
    if (s == SB_ERR_MODEL_ARCH) { /* an architecture this runtime does not build (test_model_refs checks the refusal) */
        printf("skip %s: %s\n", name, sb_last_error());
        return;
    }
    CHECKF(s == SB_OK, "%s: %s", name, sb_last_error());
    if (s != SB_OK) return;
    n_models++;
    const int Ts[2] = {1, 7};
    for (int k = 0; k < 2; k++) {
        const int T = Ts[k];
        ir_graph *g = NULL;
        ir_graph_create(&g);
        rt_build bld = {.g = g, .m = m, .T = T, .n_out = T, .n_ctx = 64, .kv_type = SB_TYPE_F32};
        plan_target t;
        exec_cuda_target(NULL, &t);
        plan *p = NULL;
        s = rt_build_decoder(&bld);
        if (s == SB_OK) s = plan_build(g, &t, NULL, &p);
        CHECKF(s == SB_OK, "%s T=%d: %s", name, T, sb_last_error());
        if (s == SB_OK) check_plan(name, p, T);
        compile_jobs(name);
        plan_free(p);
        ir_graph_free(g);
    }
    rt_model_free(m);
}

int main(void) {
    plan_target t;
    exec_cuda_target(NULL, &t);
    if (!t.fuse_norm_quant) {
        printf("SKIP: this build has no CUDA backend, so no CUDA plan target to generate kernels for\n");
        return 77;
    }
    if (cg_nvrtc_load() != SB_OK) {
        printf("SKIP: %s (CI has NVRTC in /usr/local/cuda/lib64)\n", sb_last_error());
        return 77;
    }
    char tmp[] = "/tmp/sb_codegen_models.XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    setenv("XDG_CACHE_HOME", tmp, 1); /* every compile is real, nothing left in the user's cache */
    unsetenv("SB_CODEGEN_DUMP");
    cg_reset_stats();
    int n = ref_for_each_model(test_data_path("models"), getenv("SB_CODEGEN_MODEL"), one_model);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    if (n < 0) return 77;
    cg_stats st = cg_get_stats();
    printf("%d models, %d groups (decode + prefill), %d kernel variants: %lld distinct bundles compiled (sm_90 + sm_80) by NVRTC %d.%d in %.0f ms\n", n_models,
           n_groups, n_kernels, (long long)st.compiled, cg_nvrtc_version() / 1000, cg_nvrtc_version() % 1000 / 10, st.compile_ms);
    CHECK(n_models > 0 && st.compiled > 0);
    return test_summary();
}
