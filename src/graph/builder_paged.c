/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/builder_paged.c — the IR of a paged KV cache (one physical cache of n_blocks * bs rows per
 * layer, shared by many sequences; runtime/kv_pool.h): the slots and block-table inputs, the paged
 * form of attention, and its shape check.
 * Layer 2 (graph). One mechanism: kv_store already writes row pos[t] of the cache, so a paged graph
 * feeds it the slots input (each token's physical row); attention takes the block table as an
 * optional 5th source and reads logical position j of token t at row tbl[t][j/bs]*bs + j%bs. With
 * no table, attention is exactly the contiguous op. The table's values are checked per run
 * (plan_check_bindings → plan_check_paged), its shape here.
 */
#include "graph/ir.h"

#include <string.h>

static ir_ref input(ir_graph *g, ir_op op, const char *name, int64_t ne0, int64_t ne1) {
    ir_node n = ir_proto(op);
    n.dtype = SB_TYPE_I32;
    n.ne[0] = ne0, n.ne[1] = ne1, n.ne[2] = n.ne[3] = 1;
    strcpy(n.name, name);
    return ir_append(g, &n);
}

ir_ref ir_input_slots(ir_graph *g, int64_t T) { return input(g, IR_OP_SLOTS, "slots", T, 1); }
ir_ref ir_input_block_table(ir_graph *g, int64_t n_blk, int64_t T) { return input(g, IR_OP_BLOCK_TABLE, "block_table", n_blk, T); }

ir_ref ir_attention_paged(ir_graph *g, ir_ref q, ir_ref k, ir_ref v, ir_ref pos, ir_ref table, int32_t block_size,
                          const ir_attn_params *p) {
    if (q == IR_NONE || k == IR_NONE || v == IR_NONE || pos == IR_NONE || table == IR_NONE) return IR_NONE;
    ir_node n = ir_proto(IR_OP_ATTENTION);
    n.src[0] = q, n.src[1] = k, n.src[2] = v, n.src[3] = pos, n.src[4] = table;
    n.ip[0] = p->n_head_kv;
    n.ip[1] = p->head_dim;
    n.ip[2] = p->window;
    n.ip[3] = block_size;
    n.fp[0] = p->scale;
    n.fp[1] = p->softcap;
    return ir_append(g, &n);
}

sb_status ir_shape_paged_attention(const ir_graph *g, const ir_node *n, int ns) {
    const ir_node *q = &g->nodes[n->src[0]], *k = &g->nodes[n->src[1]], *tbl = &g->nodes[n->src[4]];
    const int32_t bs = n->ip[3];
    if (ns != 5 + (n->ip[5] && n->src[5] != IR_NONE)) return sb_fail(SB_ERR_INTERNAL, "attention: %d sources", ns);
    if (tbl->op != IR_OP_BLOCK_TABLE || tbl->dtype != SB_TYPE_I32 || tbl->ne[1] != q->ne[2] || tbl->ne[2] != 1 || tbl->ne[3] != 1)
        return sb_fail(SB_ERR_INTERNAL, "attention: the block table must be a block_table input i32 [n_blk, T=%lld]", (long long)q->ne[2]);
    if (bs < 1 || k->ne[1] % bs)
        return sb_fail(SB_ERR_INTERNAL, "attention: block_size %d must be >= 1 and divide the cache's %lld rows", bs, (long long)k->ne[1]);
    return SB_OK;
}
