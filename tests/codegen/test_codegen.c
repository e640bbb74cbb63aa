/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/codegen/test_codegen.c — the codegen layer without a GPU: groups from planned nodes (and
 * their refusals), emitted source (deterministic, names stable, every kind and variant compiles
 * with NVRTC to an sm_90 cubin and an sm_80 one), compile errors reported as SB_ERR_DEVICE with
 * the log, cache keys that change with each input, the disk cache (round trip, corrupt / short /
 * foreign files recompiled and rewritten, an unwritable folder tolerated), autotune winners on
 * disk, SB_CODEGEN_DUMP, and the stats line.
 * `test_codegen --no-nvrtc` (registered with SB_NVRTC_LIB=/nonexistent) checks that a missing
 * NVRTC is SB_ERR_UNSUPPORTED naming what was tried, which the executor turns into "hand-written
 * kernels". Without NVRTC the compile parts SKIP (exit 77) after the rest passed; CI has NVRTC
 * (/usr/local/cuda/lib64), so there they run.
 */
#define _GNU_SOURCE 1 /* memmem */
#include "codegen/cg.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "base/status.h"
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_root[256];

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

static cg_group ew_group(int64_t E, int64_t rows) {
    cg_group g = {.kind = CG_EW, .E = E, .rows = rows, .n_steps = 5, .n_params = 4};
    g.st[0] = (cg_step){.op = CG_EW_ADD, .slot = 2, .bcast = 0};
    g.st[1] = (cg_step){.op = CG_EW_RMS_NORM, .f = 1e-6f};
    g.st[2] = (cg_step){.op = CG_EW_MUL, .slot = 3, .bcast = 1};
    g.st[3] = (cg_step){.op = CG_EW_SOFTCAP, .f = 30.0f};
    g.st[4] = (cg_step){.op = CG_EW_GELU};
    return g;
}

/* one group of every kind (and both quant types) */
static int all_groups(cg_group *out) {
    int n = 0;
    out[n++] = ew_group(896, 1);
    out[n++] = ew_group(896, 7);
    cg_group s = {.kind = CG_EW, .E = 100, .rows = 9, .n_steps = 3, .n_params = 3};
    s.st[0] = (cg_step){.op = CG_EW_SCALE, .f = 0.125f};
    s.st[1] = (cg_step){.op = CG_EW_SILU};
    s.st[2] = (cg_step){.op = CG_EW_ADD, .slot = 2, .bcast = 1};
    out[n++] = s;
    for (int q = 0; q < 2; q++) {
        const int xq = q ? SB_TYPE_Q8_K : SB_TYPE_Q8_1;
        out[n++] = (cg_group){.kind = CG_RMS_NORM_QUANT, .E = 1024, .rows = 1, .xq = xq, .eps = 1e-6f, .has_w = true, .hand_reg = true, .n_params = 3};
        out[n++] = (cg_group){.kind = CG_RMS_NORM_QUANT, .E = 512, .rows = 9, .xq = xq, .eps = 1e-5f, .has_w = false, .n_params = 3};
        out[n++] = (cg_group){.kind = CG_ADD_RMS_NORM_QUANT, .E = 768, .rows = 7, .xq = xq, .eps = 1e-6f, .has_w = true, .hand_reg = true, .n_params = 5};
        out[n++] = (cg_group){.kind = CG_GLU_QUANT, .E = 4864, .rows = 1, .xq = xq, .gelu = false, .n_params = 3};
        out[n++] = (cg_group){.kind = CG_GLU_QUANT, .E = 512, .rows = 8, .xq = xq, .gelu = true, .n_params = 3};
        out[n++] = (cg_group){.kind = CG_QUANTIZE, .E = 256, .rows = 3, .xq = xq, .n_params = 2};
    }
    return n;
}

static bool is_elf(const cg_binary *b) { return !b->is_ptx && b->size > 64 && !memcmp(b->data, "\x7f" "ELF", 4); }

// ---- groups from planned nodes ----

static void test_from_nodes(void) {
    ir_graph *g;
    ir_graph_create(&g);
    const int64_t E = 512, T = 3;
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_ref r = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_ref w = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    ir_ref h = ir_add(g, x, r);
    ir_ref n = ir_mul(g, ir_rms_norm(g, h, 1e-6f), w);
    ir_ref c = ir_softcap(g, ir_scale(g, n, 0.5f), 20.0f);
    ir_output(g, c, "y");
    ir_ref a = ir_add(g, c, x);
    ir_ref glu = ir_swiglu(g, a, r);
    ir_output(g, glu, "z");
    CHECK(ir_graph_status(g) == SB_OK);
    /* the single ops, straight from the builder's graph */
    cg_group grp;
    CHECK(cg_group_from_node(g, h, IR_NONE, &grp) == SB_OK);
    CHECK(grp.kind == CG_EW && grp.n_steps == 1 && grp.st[0].op == CG_EW_ADD && grp.st[0].slot == 2 && !grp.st[0].bcast);
    CHECK(grp.ref[0] == h && grp.ref[1] == x && grp.ref[2] == r && grp.E == E && grp.rows == T);
    CHECK(cg_group_from_node(g, n, IR_NONE, &grp) == SB_OK);
    CHECK(grp.st[0].op == CG_EW_MUL && grp.st[0].bcast == 1 && grp.ref[2] == w);
    CHECK_EQ_INT(cg_group_from_node(g, glu, IR_NONE, &grp), SB_ERR_UNSUPPORTED); /* a plain swiglu: hand-written */
    CHECK(strstr(sb_last_error(), "swiglu") != NULL);
    CHECK_EQ_INT(cg_group_from_node(g, x, IR_NONE, &grp), SB_ERR_UNSUPPORTED);
    CHECK_EQ_INT(cg_group_from_node(g, h, a, &grp), SB_ERR_INVALID_ARG);

    /* planned: the passes fuse the chain and the norm+quantize; groups follow the fused nodes */
    plan_target t;
    plan_target_reference(&t);
    t.fuse_elementwise = t.fuse_norm_quant = t.fuse_act_quant = true;
    t.wants_quantized_act = true;
    for (int k = 0; k < SB_TYPE_COUNT; k++) t.act_type[k] = SB_TYPE_Q8_1;
    ir_graph *g2;
    ir_graph_create(&g2);
    ir_ref x2 = ir_input_weight(g2, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_ref w2 = ir_input_weight(g2, "w", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    ir_ref wm = ir_input_weight(g2, "wm", SB_TYPE_Q8_0, (int64_t[4]){E, 64, 1, 1});
    ir_ref y2 = ir_matmul(g2, wm, ir_mul(g2, ir_rms_norm(g2, x2, 1e-5f), w2));
    ir_ref ch = ir_softcap(g2, ir_scale(g2, ir_add(g2, ir_silu(g2, y2), y2), 0.25f), 10.0f);
    ir_output(g2, ch, "y");
    plan *p = NULL;
    CHECKF(plan_build(g2, &t, NULL, &p) == SB_OK, "%s", sb_last_error());
    int seen_fused = 0, seen_rnq = 0;
    for (int32_t i = 0; p && i < p->g->n_nodes; i++) {
        const ir_node *nd = &p->g->nodes[i];
        if (nd->op == IR_OP_FUSED) {
            seen_fused++;
            CHECKF(cg_group_from_node(p->g, i, IR_NONE, &grp) == SB_OK, "%s", sb_last_error());
            CHECK_EQ_INT(grp.n_steps, nd->ip[0]);
            CHECK(grp.kind == CG_EW && grp.E == 64 && grp.rows == T);
        }
        if (nd->op == IR_OP_RMS_NORM_QUANT) {
            seen_rnq++;
            CHECKF(cg_group_from_node(p->g, i, IR_NONE, &grp) == SB_OK, "%s", sb_last_error());
            CHECK(grp.kind == CG_RMS_NORM_QUANT && grp.has_w && grp.xq == SB_TYPE_Q8_1 && grp.eps == 1e-5f && grp.ref[2] == nd->src[1]);
        }
    }
    CHECK(seen_fused == 1 && seen_rnq == 1);
    plan_free(p);
    ir_graph_free(g2);
    ir_graph_free(g);

    /* refusals: E not a multiple of the quant block */
    cg_group bad = {.kind = CG_QUANTIZE, .E = 96, .rows = 1, .xq = SB_TYPE_Q8_K, .n_params = 2};
    char *src = NULL, name[40];
    CHECK_EQ_INT(cg_emit(&bad, (cg_variant){1024, 1, 0, 0}, &src, name), SB_ERR_INVALID_ARG);
    CHECK(src == NULL);
    cg_group ok = ew_group(64, 2);
    CHECK_EQ_INT(cg_emit(&ok, (cg_variant){100, 1, 0, 0}, &src, name), SB_ERR_INVALID_ARG);
    CHECK_EQ_INT(cg_emit(&ok, (cg_variant){256, 1, 1, 0}, &src, name), SB_ERR_INVALID_ARG); /* registers: quantizers only */
    cg_group big = {.kind = CG_GLU_QUANT, .E = 32768, .rows = 1, .xq = SB_TYPE_Q8_1, .n_params = 3};
    CHECK_EQ_INT(cg_emit(&big, (cg_variant){128, 1, 1, 0}, &src, name), SB_ERR_INVALID_ARG); /* 256 values a thread */
    CHECK(cg_emit(&big, (cg_variant){1024, 1, 1, 0}, &src, name) == SB_OK); /* 1024 blocks over 32 warps: 32 values a thread */
    CHECKF(src && strstr(src, "act_build<9, NT, AQ_GLU, 32>"), "%s", src ? src : "");
    free(src);
    src = NULL;
    ok.st[2].slot = 0; /* a MUL without operand */
    CHECK_EQ_INT(cg_emit(&ok, (cg_variant){256, 1, 0, 0}, &src, name), SB_ERR_INVALID_ARG);
}

// ---- emitted source ----

static void test_emit(void) {
    cg_group gs[16];
    int n = all_groups(gs);
    char names[16][40];
    for (int i = 0; i < n; i++) {
        cg_variant v[CG_MAX_VARIANTS];
        int nv = cg_variants(&gs[i], v);
        CHECK(nv >= 1 && nv <= CG_MAX_VARIANTS);
        /* the first is the hand-written geometry: 256 threads for chains, the row in registers with
         * 256 threads for quantizers when it fits (act_build), else the 1024-thread loop; the norm
         * quantizers follow the hand-written kernel they replace (hand_reg) */
        const bool norm = gs[i].kind == CG_RMS_NORM_QUANT || gs[i].kind == CG_ADD_RMS_NORM_QUANT;
        const bool fits = gs[i].kind != CG_EW && gs[i].E / (gs[i].xq == SB_TYPE_Q8_K ? 256 : 32) <= (gs[i].xq == SB_TYPE_Q8_K ? 4 : 32) * 8 &&
                          (!norm || gs[i].hand_reg);
        CHECKF(v[0].threads == (gs[i].kind == CG_EW || fits ? 256 : 1024) && v[0].rpb == 1 && v[0].reg == fits, "group %d: %d threads reg %d", i,
               v[0].threads, v[0].reg);
        for (int k = 0; k < nv; k++) CHECK(v[k].reg == v[0].reg); /* registers when the row fits, else the loop */
        /* a group that reduces (a norm) keeps that one layout: other thread counts sum in another order */
        bool red = norm;
        for (int k = 0; gs[i].kind == CG_EW && k < gs[i].n_steps; k++) red |= gs[i].st[k].op == CG_EW_RMS_NORM;
        for (int k = 0; red && k < nv; k++)
            CHECKF(v[k].threads == v[0].threads && v[k].reg == v[0].reg && (v[k].rpb == 1 || v[k].rpb == 4), "group %d variant %d: %d threads reg %d (reduces: %d only)", i, k,
                   v[k].threads, v[k].reg, v[0].threads);
        char *a = NULL, *b = NULL, na[40], nb[40];
        CHECK(cg_emit(&gs[i], v[0], &a, na) == SB_OK);
        CHECK(cg_emit(&gs[i], v[0], &b, nb) == SB_OK);
        CHECK(a && b && !strcmp(a, b) && !strcmp(na, nb)); /* deterministic */
        CHECK(a && strstr(a, na) && strstr(a, "CU_PDL_ENTRY();") && strstr(a, "act_quant.cuh"));
        CHECK(strlen(na) == 20 && !strncmp(na, "sbk_", 4));
        memcpy(names[i], na, 40);
        for (int j = 0; j < i; j++) CHECKF(strcmp(names[j], na), "groups %d and %d share the name %s", j, i, na);
        for (int k = 1; k < nv; k++) { /* every variant is a distinct kernel */
            char *c = NULL, nc[40];
            CHECK(cg_emit(&gs[i], v[k], &c, nc) == SB_OK);
            CHECK(strcmp(nc, na) != 0);
            unsigned grid, block;
            cg_geometry(&gs[i], v[k], &grid, &block);
            if (v[k].flat) /* a thread a value, or the cap the kernel strides past */
                CHECK(block == (unsigned)v[k].threads && gs[i].kind == CG_EW &&
                      ((int64_t)grid * block >= gs[i].rows * gs[i].E ? (int64_t)(grid - 1) * block < gs[i].rows * gs[i].E : grid == 65536));
            else CHECK(block == (unsigned)v[k].threads && (int64_t)grid * v[k].rpb >= gs[i].rows && (int64_t)(grid - 1) * v[k].rpb < gs[i].rows);
            free(c);
        }
        free(a);
        free(b);
    }
    /* prefill row counts share a kernel (rows at run time); decode (1 row) has its own */
    {
        cg_group a7 = ew_group(896, 7), a9 = ew_group(896, 9), a1 = ew_group(896, 1);
        char *s7 = NULL, *s9 = NULL, *s1 = NULL, n7[40], n9[40], n1[40];
        CHECK(cg_emit(&a7, (cg_variant){256, 1, 0, 0}, &s7, n7) == SB_OK && cg_emit(&a9, (cg_variant){256, 1, 0, 0}, &s9, n9) == SB_OK &&
              cg_emit(&a1, (cg_variant){256, 1, 0, 0}, &s1, n1) == SB_OK);
        CHECK(s7 && s9 && s1 && !strcmp(s7, s9) && !strcmp(n7, n9) && strcmp(n7, n1) && strstr(s7, "a.rows") && !strstr(s1, "a.rows"));
        free(s7), free(s9), free(s1);
    }
    /* the norm weight is one row for every row (a per-row offset read past it: prefill only) */
    cg_group nq = {.kind = CG_RMS_NORM_QUANT, .E = 512, .rows = 9, .xq = SB_TYPE_Q8_1, .eps = 1e-5f, .has_w = true, .n_params = 3};
    char *ns = NULL, nn[40];
    CHECK(cg_emit(&nq, (cg_variant){1024, 1, 0, 0}, &ns, nn) == SB_OK);
    CHECKF(ns && strstr(ns, "src_norm{xr, (const float *)a.p[2], sc}"), "%s", ns ? ns : "");
    free(ns);
    nq.kind = CG_ADD_RMS_NORM_QUANT, nq.n_params = 5;
    CHECK(cg_emit(&nq, (cg_variant){1024, 1, 0, 0}, &ns, nn) == SB_OK);
    CHECKF(ns && strstr(ns, "src_norm{sr, (const float *)a.p[2], sc}") && strstr(ns, "(const float *)a.p[3] + r * E_, sr"), "%s", ns ? ns : "");
    free(ns);
    /* gemma3's post-norm chain x + rms_norm(o) * w: every step rounded alone (__fmul_rn/__fadd_rn,
     * which NVRTC never contracts), as k_ew_rows's per-step stores; a bare `v * w` then `v + x`
     * became one fma and other bits than the hand-written kernel (the SB_CODEGEN=1 gemma3 failure) */
    {
        cg_group pn = {.kind = CG_EW, .E = 256, .rows = 9, .n_steps = 3, .n_params = 4};
        pn.st[0] = (cg_step){.op = CG_EW_RMS_NORM, .f = 1e-6f};
        pn.st[1] = (cg_step){.op = CG_EW_MUL, .slot = 2, .bcast = 1};
        pn.st[2] = (cg_step){.op = CG_EW_ADD, .slot = 3};
        cg_variant pv[CG_MAX_VARIANTS];
        const int pnv = cg_variants(&pn, pv);
        for (int k = 0; k < pnv; k++) {
            char *ps = NULL, pnm[40];
            CHECK(cg_emit(&pn, pv[k], &ps, pnm) == SB_OK);
            CHECKF(ps && strstr(ps, "float v = __fmul_rn(x[i], sc);") && strstr(ps, "v = __fmul_rn(v, ((const float *)a.p[2])[i]);") &&
                       strstr(ps, "v = __fadd_rn(v, ((const float *)a.p[3])[r * E_ + i]);") && !strstr(ps, "v = v *") && !strstr(ps, "v = v +"),
                   "post-norm chain variant %d:\n%s", k, ps ? ps : "");
            free(ps);
        }
    }
    /* constants are exact: a scale of 0.1f appears as its hex float */
    cg_group s = {.kind = CG_EW, .E = 32, .rows = 1, .n_steps = 1, .n_params = 2};
    s.st[0] = (cg_step){.op = CG_EW_SCALE, .f = 0.1f};
    char *src = NULL, nm[40], lit[64];
    CHECK(cg_emit(&s, (cg_variant){256, 1, 0, 0}, &src, nm) == SB_OK);
    snprintf(lit, sizeof lit, "%af", (double)0.1f);
    CHECKF(src && strstr(src, lit), "literal %s in\n%s", lit, src ? src : "");
    free(src);
}

// ---- keys ----

static void test_keys(void) {
    cg_key base = cg_key_make("src", "opts", 90, 13000, "0.1.0");
    cg_key same = cg_key_make("src", "opts", 90, 13000, "0.1.0");
    CHECK(base.h[0] == same.h[0] && base.h[1] == same.h[1]);
    cg_key v[] = {cg_key_make("src ", "opts", 90, 13000, "0.1.0"), cg_key_make("src", "opts2", 90, 13000, "0.1.0"),
                  cg_key_make("src", "opts", 80, 13000, "0.1.0"), cg_key_make("src", "opts", 90, 12080, "0.1.0"),
                  cg_key_make("src", "opts", 90, 13000, "0.1.1"), cg_key_make("sr", "copts", 90, 13000, "0.1.0")};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        CHECKF(v[i].h[0] != base.h[0] && v[i].h[1] != base.h[1], "key %zu equals the base key", i);
        for (size_t j = 0; j < i; j++) CHECK(v[i].h[0] != v[j].h[0]);
    }
    char hex[33];
    cg_key_hex(base, hex);
    CHECK(strlen(hex) == 32);
    CHECK(cg_n_headers >= 6);
    bool has_aq = false;
    for (int i = 0; i < cg_n_headers; i++) has_aq |= !strcmp(cg_headers[i].name, "backend/cuda/device/act_quant.cuh") && strstr(cg_headers[i].text, "q8_K_store");
    CHECK(has_aq); /* the embedded copy is the device header itself */
}

// ---- compiling (NVRTC) ----

static void test_compile_all(void) {
    cg_group gs[16];
    int n = all_groups(gs), total = 0;
    for (int i = 0; i < n; i++) {
        cg_variant v[CG_MAX_VARIANTS];
        int nv = cg_variants(&gs[i], v);
        for (int k = 0; k < nv; k++) {
            char *src = NULL, nm[40];
            if (k > 0 && i % 4) continue; /* alone: the default variants, and every variant of a quarter of the groups (bundles below compile all) */
            if (cg_emit(&gs[i], v[k], &src, nm) != SB_OK) {
                CHECK(0);
                continue;
            }
            cg_binary b;
            sb_status s = cg_get_binary(src, nm, 90, &b);
            CHECKF(s == SB_OK && is_elf(&b), "group %d variant %d (%d threads, %d rows/block): %s\n%s", i, k, v[k].threads, v[k].rpb,
                   s ? sb_last_error() : "not an ELF cubin", src);
            if (k == 0) {
                s = cg_get_binary(src, nm, 80, &b);
                CHECKF(s == SB_OK && is_elf(&b), "group %d for sm_80: %s", i, s ? sb_last_error() : "not an ELF cubin");
            }
            total++;
            free(src);
        }
    }
    printf("compiled %d kernel variants alone (sm_90, + sm_80 for the defaults)\n", total);
    /* several at once, in parallel: per-source results, the first failure returned */
    {
        cg_group pg[3] = {ew_group(320, 2), ew_group(384, 2), ew_group(448, 2)};
        char *ps[4] = {0}, pn[4][40];
        const char *srcs[4], *names[4];
        for (int k = 0; k < 3; k++) {
            CHECK(cg_emit(&pg[k], (cg_variant){512, 1, 0, 0}, &ps[k], pn[k]) == SB_OK);
            srcs[k] = ps[k], names[k] = pn[k];
        }
        srcs[3] = "extern \"C\" __global__ void sbk_par_broken() { nope; }\n", names[3] = "sbk_par_broken";
        cg_binary pb[4];
        sb_status pst[4];
        cg_reset_stats();
        sb_status s4 = cg_get_binaries(srcs, names, 4, 90, 3, pb, pst);
        CHECK_EQ_INT(s4, SB_ERR_DEVICE);
        CHECKF(strstr(sb_last_error(), "sbk_par_broken") != NULL, "%s", sb_last_error());
        for (int k = 0; k < 3; k++) CHECK(pst[k] == SB_OK && is_elf(&pb[k]));
        CHECK(pst[3] == SB_ERR_DEVICE);
        CHECK(cg_get_stats().compiled == 3);
        CHECK(cg_get_binaries(srcs, names, 3, 90, 0, pb, pst) == SB_OK && cg_get_stats().memory == 3);
        for (int k = 0; k < 3; k++) free(ps[k]);
    }
    /* bundles: every variant of a group in one source and one cubin holding every kernel name */
    for (int i = 0; i < n; i++) {
        cg_variant v[CG_MAX_VARIANTS];
        char kn[CG_MAX_VARIANTS][40], bn[40], *src = NULL;
        const int nv = cg_variants(&gs[i], v);
        if (cg_emit_bundle(&gs[i], v, nv, &src, bn, kn) != SB_OK) {
            CHECKF(0, "bundle %d: %s", i, sb_last_error());
            continue;
        }
        for (int k = 0; k < nv; k++) {
            char *one = NULL, nm[40];
            CHECK(cg_emit(&gs[i], v[k], &one, nm) == SB_OK && !strcmp(nm, kn[k])); /* the same kernel names as alone */
            free(one);
        }
        cg_binary b;
        sb_status s = cg_get_binary(src, bn, 90, &b);
        CHECKF(s == SB_OK && is_elf(&b), "bundle %d: %s", i, s ? sb_last_error() : "not an ELF cubin");
        for (int k = 0; s == SB_OK && k < nv; k++) CHECKF(memmem(b.data, b.size, kn[k], strlen(kn[k])) != NULL, "bundle %d lacks %s", i, kn[k]);
        free(src);
    }
    /* a compile error: SB_ERR_DEVICE with the kernel name and the log */
    cg_binary b;
    sb_status s = cg_get_binary("extern \"C\" __global__ void sbk_broken(int *p) { p[0] = undefined_name; }\n", "sbk_broken", 90, &b);
    CHECK_EQ_INT(s, SB_ERR_DEVICE);
    CHECKF(strstr(sb_last_error(), "sbk_broken") && strstr(sb_last_error(), "undefined_name"), "%s", sb_last_error());
}

// ---- disk cache, dump, tune ----

static char *read_all(const char *path, size_t *n) {
    size_t k = 0;
    unsigned char *p = test_read_file(path, &k);
    if (n) *n = k;
    if (!p) return NULL;
    char *z = realloc(p, k + 1); /* NUL-terminated copy */
    if (z) z[k] = 0;
    else free(p);
    return z;
}

static void cache_file(const char *dir, const char *src, int arch, char *out, size_t cap) {
    char opts[256], hex[33];
    cg_nvrtc_options(arch, opts, sizeof opts);
    cg_key_hex(cg_key_make(src, opts, arch, cg_nvrtc_version(), SB_VERSION_STRING), hex);
    snprintf(out, cap, "%s/sonicboom/%s.cubin", dir, hex);
}

static void test_disk(void) {
    char xdg[300], dump[300], path[700];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp_root);
    snprintf(dump, sizeof dump, "%s/dump", tmp_root);
    setenv("XDG_CACHE_HOME", xdg, 1); /* not yet existing: created on the first store */
    setenv("SB_CODEGEN_DUMP", dump, 1);
    char dir[4096];
    CHECK(!strcmp(cg_cache_dir(dir, sizeof dir), strcat(strcpy(path, xdg), "/sonicboom")));

    cg_group g = ew_group(640, 5);
    char *src = NULL, nm[40];
    CHECK(cg_emit(&g, (cg_variant){128, 1, 0, 0}, &src, nm) == SB_OK);
    if (!src) return;
    cg_reset_stats();
    cg_binary b1, b2, b3;
    CHECK(cg_get_binary(src, nm, 90, &b1) == SB_OK);
    cg_stats st = cg_get_stats();
    CHECK(st.compiled == 1 && st.disk == 0 && st.memory == 0 && st.kernels == 1 && st.compile_ms > 0);
    CHECK(cg_get_binary(src, nm, 90, &b2) == SB_OK);
    CHECK(cg_get_stats().memory == 1 && b2.data == b1.data);
    char file[700];
    cache_file(xdg, src, 90, file, sizeof file);
    struct stat sst;
    CHECKF(stat(file, &sst) == 0 && (size_t)sst.st_size > b1.size, "cache file %s", file);
    /* round trip: a fresh process (memory cache dropped) loads the same bytes from disk */
    uint8_t *copy = malloc(b1.size);
    memcpy(copy, b1.data, b1.size);
    const size_t n1 = b1.size;
    cg_cache_forget_memory();
    CHECK(cg_get_binary(src, nm, 90, &b3) == SB_OK);
    st = cg_get_stats();
    CHECK(st.disk == 1 && st.compiled == 1);
    CHECK(b3.size == n1 && !memcmp(b3.data, copy, n1));
    CHECK(!memcmp(b1.data, copy, n1)); /* the old pointer stayed valid */

    /* the dump: exact source and the key */
    char dp[800];
    snprintf(dp, sizeof dp, "%s/%s.cu", dump, nm);
    char *ds = read_all(dp, NULL);
    CHECKF(ds && !strcmp(ds, src), "dump %s", dp);
    free(ds);
    snprintf(dp, sizeof dp, "%s/%s.key", dump, nm);
    ds = read_all(dp, NULL);
    char hex[33];
    cg_key_hex(b1.key, hex);
    CHECKF(ds && strstr(ds, hex) && strstr(ds, "sm_90"), "key file %s: %s", dp, ds ? ds : "(none)");
    free(ds);

    /* corrupt files: garbage, truncated, a flipped payload byte, another key's file — each is
     * recompiled (never loaded), counted, and rewritten valid */
    for (int mode = 0; mode < 4; mode++) {
        size_t fn = 0;
        char *data = read_all(file, &fn);
        CHECK(data != NULL);
        if (!data) break;
        FILE *f = fopen(file, "wb");
        if (mode == 0) fputs("garbage", f);
        else if (mode == 1) fwrite(data, 1, fn / 2, f);
        else if (mode == 2) {
            data[fn - 7] ^= 0x40;
            fwrite(data, 1, fn, f);
        } else {
            data[8] ^= 1; /* the key inside the header */
            fwrite(data, 1, fn, f);
        }
        fclose(f);
        free(data);
        cg_cache_forget_memory();
        cg_reset_stats();
        cg_binary b;
        CHECK(cg_get_binary(src, nm, 90, &b) == SB_OK);
        st = cg_get_stats();
        CHECKF(st.compiled == 1 && st.disk == 0 && st.disk_errors == 1, "mode %d: compiled %lld disk %lld errors %lld", mode,
               (long long)st.compiled, (long long)st.disk, (long long)st.disk_errors);
        CHECK(b.size == n1 && !memcmp(b.data, copy, n1));
        cg_cache_forget_memory();
        CHECK(cg_get_binary(src, nm, 90, &b) == SB_OK && cg_get_stats().disk == 1); /* rewritten valid */
    }

    /* autotune winners: memory, then disk, corrupt → unknown */
    cg_group q = {.kind = CG_GLU_QUANT, .E = 512, .rows = 16, .xq = SB_TYPE_Q8_1, .n_params = 3};
    CHECK(cg_tune_get(&q, "H200 sm_90") == -1);
    cg_tune_put(&q, "H200 sm_90", 3);
    CHECK(cg_tune_get(&q, "H200 sm_90") == 3);
    CHECK(cg_tune_get(&q, "A100 sm_80") == -1); /* per device */
    cg_group q2 = q;
    q2.rows = 17;
    CHECK(cg_tune_get(&q2, "H200 sm_90") == -1); /* per shape */
    cg_cache_forget_memory();
    CHECK(cg_tune_get(&q, "H200 sm_90") == 3);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "for f in '%s'/sonicboom/*.tune; do printf 'SBCGTUN1xxxxxxxxxxxxxxxx\\003\\0\\0\\0\\0\\0\\0\\0' > \"$f\"; done", xdg);
    CHECK(system(cmd) == 0);
    cg_cache_forget_memory();
    CHECK(cg_tune_get(&q, "H200 sm_90") == -1);

    /* an unwritable cache folder (a regular file where the folder should be): still compiles */
    snprintf(path, sizeof path, "%s/notadir", tmp_root);
    FILE *f = fopen(path, "wb");
    fputs("x", f);
    fclose(f);
    setenv("XDG_CACHE_HOME", path, 1);
    cg_cache_forget_memory();
    cg_reset_stats();
    cg_binary b;
    CHECK(cg_get_binary(src, nm, 90, &b) == SB_OK && b.size == n1);
    st = cg_get_stats();
    CHECK(st.compiled == 1 && st.disk_errors == 1);
    cg_tune_put(&q, "H200 sm_90", 1); /* no crash, counted */
    CHECK(cg_get_stats().disk_errors == 2);
    char line[512];
    cg_stats_line(line, sizeof line);
    CHECKF(!strncmp(line, "codegen: 1 kernels, 1 compiled (", 32) && strstr(line, "0 from disk cache"), "%s", line);
    unsetenv("SB_CODEGEN_DUMP");
    free(copy);
    free(src);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--no-nvrtc")) {
        sb_status s = cg_nvrtc_load();
        CHECK_EQ_INT(s, SB_ERR_UNSUPPORTED);
        CHECKF(strstr(sb_last_error(), "NVRTC not available") && strstr(sb_last_error(), "nonexistent"), "%s", sb_last_error());
        cg_binary b;
        CHECK_EQ_INT(cg_get_binary("__global__ void k() {}", "k", 90, &b), SB_ERR_UNSUPPORTED);
        CHECK(cg_nvrtc_version() == 0);
        return test_summary();
    }
    snprintf(tmp_root, sizeof tmp_root, "/tmp/sb_codegen_test.XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    char xdg[300];
    snprintf(xdg, sizeof xdg, "%s/xdg-compile", tmp_root); /* never the user's cache: every compile is real */
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("SB_CODEGEN_DUMP");
    test_from_nodes();
    test_emit();
    test_keys();
    int rc = 0;
    if (cg_nvrtc_load() != SB_OK) {
        printf("SKIP: the NVRTC parts (compile, disk cache, dump): %s — CI has NVRTC in /usr/local/cuda/lib64\n", sb_last_error());
        rc = 77;
    } else {
        printf("NVRTC %d.%d\n", cg_nvrtc_version() / 1000, cg_nvrtc_version() % 1000 / 10);
        test_compile_all();
        test_disk();
    }
    rm_rf(tmp_root);
    int r = test_summary();
    return r ? r : rc;
}
