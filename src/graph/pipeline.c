/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/pipeline.c — the pass pipeline as a static table, the verifier between passes, and the
 * SB_DUMP_IR hook (MLIR-style): "after-all" prints the IR after every pass, "after:<p>[,<q>...]"
 * after the named ones, "before" also prints the input graph. Output goes to the FILE* of the
 * plan_dump (stderr by default) — the library prints only when a developer asked for it.
 * Layer 2 (graph). Order matters: dce first (fewer rows for everything after), quantize_once
 * before the two quantize fusions, fuse_norm_rope after them and the elementwise fusion after it
 * (they claim the norms that feed matmuls, then the per-head norms that feed ropes, first; a chain
 * would otherwise take both), then the two add fusions: fuse_matmul_add before fuse_add_norm (a residual
 * the matmul adds as it writes costs no launch, and the norm then reads one input), fuse_add_norm
 * after fuse_norm_quant (it extends the node that pass makes). An add a chain took stays there.
 * fuse_chain_quant after both (the chains and norm quantizers are final, and an add fuse_add_norm
 * took is no chain's).
 * fuse_rope_store after fuse_norm_rope (it carries the rope's head norm into the store).
 * fuse_attn_quant after quantize_once (it takes the quantize nodes that pass made);
 * fuse_matmul_group after them (its members carry the addends fuse_matmul_add gave them), and
 * fuse_group_glu after it (it gates the groups that pass made).
 * fuse_rope_jobs last (it links jobs by node distance, and takes the by_launch stores and views as
 * launching nothing); fuse_group_jobs after it (it reads the launches), fuse_norm_sums last (links
 * by node distance too).
 * Non-goals: pass options per run, pass timing.
 */
#include "graph/plan.h"

#include <stdlib.h>
#include <string.h>

static const pass_info pipeline[] = {
    {"dce", pass_dce},
    {"quantize_once", pass_quantize_once},
    {"fuse_norm_quant", pass_fuse_norm_quant},
    {"fuse_act_quant", pass_fuse_act_quant},
    {"fuse_norm_rope", pass_fuse_norm_rope},
    {"fuse_elementwise", pass_fuse_elementwise},
    {"fuse_matmul_add", pass_fuse_matmul_add},
    {"fuse_add_norm", pass_fuse_add_norm},
    {"fuse_chain_quant", pass_fuse_chain_quant},
    {"fuse_rope_store", pass_fuse_rope_store},
    {"fuse_attn_rope", pass_fuse_attn_rope},
    {"fuse_attn_quant", pass_fuse_attn_quant},
    {"fuse_matmul_group", pass_fuse_matmul_group},
    {"fuse_group_glu", pass_fuse_group_glu},
    {"fuse_launch_store", pass_fuse_launch_store},
    {"slice_view", pass_slice_view},
    {"fuse_rope_jobs", pass_fuse_rope_jobs},
    {"fuse_group_jobs", pass_fuse_group_jobs},
    {"fuse_norm_sums", pass_fuse_norm_sums},
};

const pass_info *pass_pipeline(int *n_out) {
    *n_out = (int)(sizeof pipeline / sizeof pipeline[0]);
    return pipeline;
}

// ---- dump ----

/* Does spec ask for a dump after pass `name`? ("after-all", or "after:a,b" naming it; a bare
 * "a,b" names sections too: "memplan", "launches") */
static bool wants_dump(const char *spec, const char *name) {
    if (!spec || !*spec) return false;
    if (!strcmp(spec, "after-all")) return true;
    const char *p = strncmp(spec, "after:", 6) ? spec : spec + 6;
    size_t nl = strlen(name);
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == nl && !strncmp(p, name, l)) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

bool plan_dump_wants(const plan_dump *d, const char *name) {
    return wants_dump(d && d->spec ? d->spec : getenv("SB_DUMP_IR"), name);
}

static void dump(const plan_dump *d, const char *when, const ir_graph *g) {
    FILE *f = d && d->f ? d->f : stderr;
    fprintf(f, "// ---- IR %s (%d nodes) ----\n", when, (int)g->n_nodes);
    ir_print(g, f);
}

// ---- run ----

sb_status pass_run_pipeline(ir_graph *g, const plan_target *t, const plan_dump *d) {
    pass_ctx cx = {.target = t};
    SB_TRY(ir_verify(g));
    if (plan_dump_wants(d, "before")) dump(d, "before passes", g); /* "after-all" too */
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        sb_status s = pipeline[i].fn(g, &cx);
        if (s != SB_OK) return sb_fail_context(s, "pass %s", pipeline[i].name);
        s = ir_verify(g);
        if (s != SB_OK) return sb_fail_context(s, "after pass %s", pipeline[i].name);
        if (plan_dump_wants(d, pipeline[i].name)) {
            char when[64];
            snprintf(when, sizeof when, "after %s", pipeline[i].name);
            dump(d, when, g);
        }
    }
    return SB_OK;
}
