/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * graph/plan_paged.c — the run-time check of a paged plan's bound data (graph/builder_paged.c),
 * called by plan_check_bindings for every executor: each kv_store's rows (the slots input) lie in
 * its cache, and each paged attention's block table names, for every logical block up to the
 * token's position, a block inside the cache. Nothing is written.
 * Layer 2 (graph).
 */
#include "graph/plan.h"

/* the data bound to node i (an input), or NULL */
static const int32_t *bound(const plan *p, void *const *data, ir_ref i) {
    const int32_t slot = p->vals[i].input;
    return slot >= 0 ? (const int32_t *)data[slot] : NULL;
}

static sb_status check_store(const plan *p, void *const *data, const ir_node *n) {
    const ir_graph *g = p->g;
    const ir_ref pr = ir_store_rows(n); /* kv_store and rope_store: the rows written */
    if (g->nodes[pr].op != IR_OP_SLOTS) return SB_OK;
    const int32_t *slots = bound(p, data, pr);
    const int64_t C = n->ne[1], T = g->nodes[pr].ne[0];
    for (int64_t t = 0; slots && t < T; t++)
        if (slots[t] < 0 || slots[t] >= C)
            return sb_fail(SB_ERR_RANGE, "plan: slot %d of token %lld outside the cache of %lld rows", slots[t], (long long)t, (long long)C);
    return SB_OK;
}

static sb_status check_table(const plan *p, void *const *data, const ir_node *n) {
    const ir_graph *g = p->g;
    const int64_t bs = ir_attn_block_size(n), n_blocks = g->nodes[n->src[1]].ne[1] / bs;
    const ir_node *tn = &g->nodes[n->src[4]];
    const int32_t *pos = bound(p, data, n->src[3]), *tbl = bound(p, data, n->src[4]);
    if (!pos || !tbl) return SB_OK; /* computed positions do not occur; an unbound input is named by the caller */
    for (int64_t t = 0; t < tn->ne[1]; t++) {
        if (pos[t] < 0 || pos[t] / bs >= tn->ne[0])
            return sb_fail(SB_ERR_CONTEXT_FULL, "plan: position %d of token %lld needs block %lld; the block table holds %lld", pos[t],
                           (long long)t, (long long)(pos[t] / bs), (long long)tn->ne[0]);
        for (int64_t b = 0; b <= pos[t] / bs; b++)
            if (tbl[t * tn->ne[0] + b] < 0 || tbl[t * tn->ne[0] + b] >= n_blocks)
                return sb_fail(SB_ERR_RANGE, "plan: block table entry %lld of token %lld is %d, outside [0, %lld)", (long long)b, (long long)t,
                               tbl[t * tn->ne[0] + b], (long long)n_blocks);
    }
    return SB_OK;
}

sb_status plan_check_paged(const plan *p, void *const *data) {
    ir_ref done_tbl = IR_NONE, done_pos = IR_NONE, done_slots = IR_NONE;
    int64_t done_rows = 0, done_bs = 0, done_tbl_rows = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++) {
        const ir_node *n = &p->g->nodes[i];
        if ((n->op == IR_OP_KV_STORE || n->op == IR_OP_ROPE_STORE) && !(ir_store_rows(n) == done_slots && n->ne[1] == done_rows)) {
            SB_TRY(check_store(p, data, n)); /* every layer's store reads one slots input over caches of one length: once */
            done_slots = ir_store_rows(n), done_rows = n->ne[1];
        }
        if (n->op == IR_OP_ATTENTION && ir_attn_block_size(n) &&
            !(n->src[4] == done_tbl && n->src[3] == done_pos && ir_attn_block_size(n) == done_bs && p->g->nodes[n->src[1]].ne[1] == done_tbl_rows)) {
            SB_TRY(check_table(p, data, n)); /* likewise one table, positions and cache length for every layer */
            done_tbl = n->src[4], done_pos = n->src[3], done_bs = ir_attn_block_size(n), done_tbl_rows = p->g->nodes[n->src[1]].ne[1];
        }
    }
    return SB_OK;
}
