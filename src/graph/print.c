/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/print.c — the stable text form of the IR (what SB_DUMP_IR prints and golden tests read):
 *   %<i> = <op>(<%src>, ...) <params> : <dtype>[ne0,ne1,..] "<name>"
 * e.g. `%7 = rope(%6, %1) n_rot=64 mode=neox base=1000000 fscale=1 : f32[64,8,4] "blk.0.q_rope"`.
 * Layer 2 (graph). Stable: params in a fixed order per op, floats as %.9g (round-trip exact),
 * shape with trailing 1s dropped, name quoted (omitted when empty). FUSED steps print as
 * [op args; ...] with operands as @<src index>, a quantize tail after a bar: [...; add @2 | rms_norm_quant @3 eps=1e-06 Q8_K].
 * Non-goals: a parser (golden tests build their input graphs with the builder API).
 */
#include "graph/ir.h"

#include <stdlib.h>
#include <string.h>

// ---- params ----

static void print_params(const ir_node *n, FILE *f) {
    switch (n->op) {
    case IR_OP_RMS_NORM: fprintf(f, " eps=%.9g", n->fp[0]); break;
    case IR_OP_KV:
        if (ir_kv_is_ring(n)) fprintf(f, " ring");
        break;
    case IR_OP_SCALE: fprintf(f, " s=%.9g", n->fp[0]); break;
    case IR_OP_SOFTCAP: fprintf(f, " cap=%.9g", n->fp[0]); break;
    case IR_OP_ROPE:
    case IR_OP_ROPE_STORE:
        fprintf(f, " n_rot=%d mode=%s base=%.9g fscale=%.9g", n->ip[0], n->ip[1] == IR_ROPE_NEOX ? "neox" : "normal",
                n->fp[0], n->fp[1]);
        if (n->fp[2] != 1.0f) fprintf(f, " attn_factor=%.9g", n->fp[2]);
        if (ir_rope_norm_of(n).kind) fprintf(f, " norm%s eps=%.9g", ir_rope_norm_of(n).weight != IR_NONE ? "*w" : "", ir_rope_norm_of(n).eps);
        break;
    case IR_OP_KV_STORE:
        if (ir_rope_norm_of(n).kind)
            fprintf(f, " norm%s head_dim=%d eps=%.9g", ir_rope_norm_of(n).weight != IR_NONE ? "*w" : "", ir_rope_norm_of(n).head_dim,
                    ir_rope_norm_of(n).eps);
        break;
    case IR_OP_ATTENTION:
        fprintf(f, " n_head_kv=%d head_dim=%d scale=%.9g", n->ip[0], n->ip[1], n->fp[0]);
        if (n->ip[2]) fprintf(f, " window=%d", n->ip[2]);
        if (n->fp[1] != 0.0f) fprintf(f, " softcap=%.9g", n->fp[1]);
        if (ir_attn_block_size(n)) fprintf(f, " block_size=%d", ir_attn_block_size(n));
        if (ir_attn_q_rope(n).n_rot) {
            const ir_rope_params rp = ir_attn_q_rope(n);
            fprintf(f, " q_rope=%d mode=%s base=%.9g fscale=%.9g", rp.n_rot, rp.mode == IR_ROPE_NEOX ? "neox" : "normal", rp.freq_base, rp.freq_scale);
            if (ir_attn_q_rope_attn_factor(n) != 1.0f) fprintf(f, " attn_factor=%.9g", ir_attn_q_rope_attn_factor(n));
        }
        if (ir_attn_quant_type(n) >= 0) fprintf(f, " out=%s", ir_dtype_name(ir_attn_quant_type(n)));
        break;
    case IR_OP_SLICE: fprintf(f, " start=%d n=%d", n->ip[0], n->ip[1]); break;
    case IR_OP_VIEW: fprintf(f, " offset=%d", n->ip[0]); break;
    case IR_OP_LAYER_NORM: fprintf(f, " eps=%.9g", n->fp[0]); break;
    case IR_OP_CONCAT: fprintf(f, " dim=%d", n->ip[0]); break;
    case IR_OP_PERMUTE: fprintf(f, " perm=%d,%d,%d,%d", n->ip[0], n->ip[1], n->ip[2], n->ip[3]); break;
    case IR_OP_RMS_NORM_QUANT:
    case IR_OP_ADD_RMS_NORM_QUANT: fprintf(f, " eps=%.9g", n->fp[0]); break;
    case IR_OP_RESULT: fprintf(f, " k=%d", n->ip[0]); break;
    case IR_OP_MATMUL_GROUP:
        fprintf(f, " n=%d addends=%#x", n->ip[0], (unsigned)n->ip[1]);
        if (n->ip[2]) fprintf(f, " glu=%s", ir_ops[n->ip[2]].name);
        if (ir_group_jobs_sum(n)) fputs(" jobs_sum_partials", f);
        break;
    case IR_OP_GLU_QUANT: fprintf(f, " act=%s", (unsigned)n->ip[0] < IR_OP_COUNT ? ir_ops[n->ip[0]].name : "?"); break;
    case IR_OP_FUSED:
        fputs(" [", f);
        for (int i = 0; i < n->ip[0] && i < IR_MAX_FUSE; i++) {
            int op = n->ip[1 + i] & 0xff, opd = n->ip[1 + i] >> 8;
            fprintf(f, "%s%s", i ? "; " : "", op < IR_OP_COUNT ? ir_ops[op].name : "?");
            if (opd) fprintf(f, " @%d", opd);
            if (op == IR_OP_RMS_NORM) fprintf(f, " eps=%.9g", n->fp[i]);
            if (op == IR_OP_SCALE) fprintf(f, " s=%.9g", n->fp[i]);
            if (op == IR_OP_SOFTCAP) fprintf(f, " cap=%.9g", n->fp[i]);
        }
        if (ir_fused_tail_of(n).op) { /* its quantize tail: result 1 */
            const ir_fused_tail t = ir_fused_tail_of(n);
            fprintf(f, " | %s", (unsigned)t.op < IR_OP_COUNT ? ir_ops[t.op].name : "?");
            if (t.weight) fprintf(f, " @%d", t.weight);
            if (t.op == IR_OP_RMS_NORM_QUANT) fprintf(f, " eps=%.9g", t.eps);
            fprintf(f, " %s", ir_dtype_name(t.type));
        }
        fputc(']', f);
        break;
    default: break;
    }
    if (ir_store_by_launch(n)) fputs(" by_launch", f);
}

/* a job of a rope-jobs launch (pass fuse_rope_jobs): the launch's next job; a norm summing a matmul's partials */
static void print_links(const ir_graph *g, ir_ref i, FILE *f) {
    const ir_ref nx = ir_job_next(&g->nodes[i], i), mm = ir_norm_sums_of(&g->nodes[i], i);
    if (nx != IR_NONE) fprintf(f, " jobs_next=%%%d", (int)nx);
    if (mm != IR_NONE) fprintf(f, " sums_partials_of=%%%d", (int)mm); /* pass fuse_norm_sums */
}

// ---- graph ----

void ir_print(const ir_graph *g, FILE *f) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        fprintf(f, "%%%d = %s(", (int)i, (unsigned)n->op < IR_OP_COUNT ? ir_ops[n->op].name : "?");
        for (int j = 0; j < IR_MAX_SRC && n->src[j] != IR_NONE; j++) fprintf(f, "%s%%%d", j ? ", " : "", (int)n->src[j]);
        fputc(')', f);
        print_params(n, f);
        print_links(g, i, f);
        int nd = 4;
        while (nd > 1 && n->ne[nd - 1] == 1) nd--;
        fprintf(f, " : %s[", ir_dtype_name(n->dtype));
        for (int d = 0; d < nd; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)n->ne[d]);
        fputc(']', f);
        if (n->name[0]) fprintf(f, " \"%s\"", n->name);
        fputc('\n', f);
    }
}

char *ir_print_str(const ir_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    ir_print(g, f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
