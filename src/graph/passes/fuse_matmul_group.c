/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/passes/fuse_matmul_group.c — matmuls that read one activation (a layer's Q, K, V; its gate
 * and up) become one node with a result per member, run as one launch: the activation is read
 * once and one kernel replaces several. The node takes the first member's place; a later member
 * joins only where everything it reads exists there (its weight, the activation, an addend
 * computed before the first member). The memory plan gives every member's result its memory at the
 * group's step, apart from all it reads, so no launch moves a result anywhere. Numerics are each
 * member's own kernel's (a group launch computes every row as the lone GEMV does).
 * Targets ask for it up to matmul_group_max_t tokens and matmul_group_max members, each member one
 * their group_member_fits accepts and the members together ones their group_fits accepts (CUDA:
 * decode GEMVs on the dp4a kernels; prefill GEMMs (T > 8) on the int8 MMA kernel, of one weight
 * type or two it mixes — a layer's K, V and Q though the builder orders K's rope and cache write
 * before V and Q, and gate/up).
 * Layer 2 (graph). Pre: verified; after fuse_matmul_add (addends are part of the members). Post:
 * verified; the members after the first are dropped, their readers read the group's results.
 *
 * before (T = 1):
 *   %15 = matmul(%4, %14) : f32[128]
 *   ...
 *   %20 = matmul(%5, %14) : f32[128]
 *   ...
 *   %22 = matmul(%3, %14, %6) : f32[256]
 * after:
 *   %15 = matmul_group(%14, %4, %5, %3, %6) n=3 addends=0x4 : f32[128]
 *   %16 = result(%15) k=1 : f32[128]
 *   %17 = result(%15) k=2 : f32[256]
 * before (T = 16, a target of one weight type a group: K and Q are Q4_K, V Q6_K):
 *   %15 = matmul(%4, %14) : f32[128,16]
 *   ...
 *   %20 = matmul(%5, %14) : f32[128,16]
 *   ...
 *   %22 = matmul(%3, %14, %6) : f32[256,16]
 * after:
 *   %15 = matmul_group(%14, %4, %3, %6) n=2 addends=0x2 : f32[128,16]
 *   %16 = result(%15) k=1 : f32[256,16]
 *   ...
 *   %21 = matmul(%5, %14) : f32[128,16]
 */
#include "graph/plan.h"

#include <stdlib.h>
#include <string.h>

static bool member_ok(const ir_graph *g, const pass_ctx *cx, const ir_node *m) {
    if (m->op != IR_OP_MATMUL || g->nodes[m->src[1]].ne[1] > cx->target->matmul_group_max_t) return false;
    return !cx->target->group_member_fits || cx->target->group_member_fits(g, m);
}

/* does matmul j's addend exist at position i (an input, or computed before i)? */
static bool addend_ready(const ir_graph *g, ir_ref j, ir_ref i) {
    const ir_ref o = ir_matmul_addend(&g->nodes[j]);
    return o == IR_NONE || (ir_ops[g->nodes[o].op].flags & OPF_INPUT) || o < i;
}

/* the group node of members mem[0..n) over activation x, in place of mem[0] */
static sb_status make_group(ir_graph *g, const ir_ref *mem, int n) {
    ir_node grp = ir_proto(IR_OP_MATMUL_GROUP);
    const ir_node *lead = &g->nodes[mem[0]];
    grp.src[0] = lead->src[1];
    int s = 1;
    for (int j = 0; j < n; j++) grp.src[s++] = g->nodes[mem[j]].src[0];
    for (int j = 0; j < n; j++) {
        const ir_ref o = ir_matmul_addend(&g->nodes[mem[j]]);
        if (o == IR_NONE) continue;
        grp.src[s++] = o;
        grp.ip[1] |= 1 << j;
    }
    grp.ip[0] = n;
    memcpy(grp.name, lead->name, sizeof grp.name);
    SB_TRY(ir_infer_shape(g, &grp));
    g->nodes[mem[0]] = grp; /* before the results: their shapes are read from it */
    for (int j = 1; j < n; j++) { /* member j's readers read result j */
        ir_node r = ir_proto(IR_OP_RESULT);
        r.src[0] = mem[0];
        r.ip[0] = j;
        const ir_ref res = ir_append(g, &r);
        if (res == IR_NONE) return ir_graph_status(g);
        ir_replace_uses(g, mem[j], res);
    }
    return SB_OK;
}

sb_status pass_fuse_matmul_group(ir_graph *g, const pass_ctx *cx) {
    if (!cx->target || cx->target->matmul_group_max_t <= 0 || cx->target->matmul_group_max < 2) return SB_OK;
    const int most = cx->target->matmul_group_max < IR_MAX_SRC / 2 ? cx->target->matmul_group_max : IR_MAX_SRC / 2 - 1;
    const int32_t n = g->n_nodes;
    uint8_t *taken = calloc((size_t)(n ? n : 1), 1);
    if (!taken) return sb_fail(SB_ERR_OOM, "fuse_matmul_group: %d nodes", (int)n);
    sb_status st = SB_OK;
    bool changed = false;
    for (int32_t i = 0; st == SB_OK && i < n; i++) {
        if (taken[i] || !member_ok(g, cx, &g->nodes[i])) continue;
        ir_ref mem[IR_MAX_SRC] = {i};
        int k = 1;
        for (int32_t j = i + 1; j < n && k < most; j++) {
            const ir_node *m = &g->nodes[j];
            if (taken[j] || !member_ok(g, cx, m) || m->src[1] != g->nodes[i].src[1] || !addend_ready(g, j, i)) continue;
            mem[k] = j;
            if (cx->target->group_fits && !cx->target->group_fits(g, mem, k + 1)) continue;
            k++;
        }
        if (k < 2) continue;
        for (int q = 0; q < k; q++) taken[mem[q]] = 1;
        st = make_group(g, mem, k);
        changed = true;
    }
    free(taken);
    SB_TRY(st);
    return changed ? ir_compact(g) : SB_OK;
}
