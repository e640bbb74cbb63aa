/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/exec_cuda_attention.c — an ATTENTION node on the CUDA executor: its argument structs
 * (key splits from the context's capacity and the SMs, the grouped paged kernel's heads a block),
 * which route it takes — a paged one-token step at a depth class on the session's decode kernels
 * through the block table, the paged kernel (batches, and heads past 256 over a contiguous cache as
 * one block), flash attention for prefill, or the contiguous decode kernels — with its fused Q rope
 * and q8_1 output where the passes marked them, its launches, and a line describing each choice
 * (exec_cuda_describe_attention).
 * Layer 2 (runtime), CUDA builds only.
 */
#ifdef SB_HAVE_CUDA /* the whole file: a build without CUDA has no "cuda" backend kind */

#include "runtime/exec_cuda_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Variant 4's grid splits per kv head (k_attn_decode.cu): enough splits of kmin keys to cover the
 * capacity C, at most mul * SMs / Hkv (default 2: ~2 blocks per SM at the deepest context; fewer
 * when the capacity is short) and 256; the kernel activates max(1, ceil(depth / kps)) of them. */
static int attn_nsplit_dec(const exec_cuda *cx, int64_t Hkv, int64_t C) {
    int64_t ns = (C + cx->cfg.attn_kmin - 1) / cx->cfg.attn_kmin;
    const int64_t most = Hkv > 0 ? ((int64_t)cx->cfg.attn_splits * cx->sms + Hkv - 1) / Hkv : 1;
    if (ns > most) ns = most;
    if (ns > 256) ns = 256;
    return ns < 1 ? 1 : (int)ns;
}

static int attn_nsplit(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    const int64_t T = q->ne[2], Hq = q->ne[1], C = k->ne[1];
    if (T > 1) return 1;
    if (cx->cfg.attn_variant == 4) return attn_nsplit_dec(cx, ir_attn_of(n).n_head_kv, C);
    int64_t ns = ((int64_t)cx->cfg.attn_splits * cx->sms + Hq - 1) / Hq;
    int64_t cap = (C + 63) / 64;
    if (ns > cap) ns = cap;
    if (ns > 64) ns = 64;
    return ns < 1 ? 1 : (int)ns;
}

cu_attn_args cx_attn_args(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    return (cu_attn_args){.D = q->ne[0], .Hq = q->ne[1], .Hkv = ir_attn_of(n).n_head_kv, .T = q->ne[2], .ctype = k->dtype, .scale = ir_attn_of(n).scale,
                          .softcap = ir_attn_of(n).softcap, .window = ir_attn_of(n).window, .ring = ir_kv_ring(p->g, n->src[1]),
                          .nsplit = attn_nsplit(cx, p, n),
                          .variant = cx->cfg.attn_variant == 1 ? 1 : cx->cfg.attn_variant == 4 ? 4 : 2, .kmin = cx->cfg.attn_kmin,
                          .hpb = cx->cfg.attn_hpb, .ctx = k->ne[1], .warp = cx->cfg.attn_warp, .small = cx->cfg.attn_small};
}

cu_attn_args cx_attn_paged_dec_args(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max) {
    cu_attn_args a = cx_attn_args(cx, p, n);
    const int bs = ir_attn_block_size(n);
    const int64_t reach = bs > 0 ? p->g->nodes[n->src[4]].ne[0] * bs : 0; /* keys the table can name */
    if (reach > 0 && reach < a.ctx) a.ctx = reach;
    a.ring = 0, a.bs = bs, a.depth_max = depth_max;
    if (a.T == 1 && a.variant == 4) a.nsplit = attn_nsplit_dec(cx, a.Hkv, a.ctx);
    return a;
}

bool cx_attn_paged_on_dec(const exec_cuda *cx, const plan *p, const ir_node *n, int64_t depth_max) {
    if (ir_attn_block_size(n) <= 0 || depth_max <= 0 || cx->cfg.attn_variant != 4 || p->g->nodes[n->src[0]].ne[2] != 1) return false;
    const cu_attn_args a = cx_attn_paged_dec_args(cx, p, n, depth_max);
    return cu_attn_decode_paged_fits(&a);
}

bool cx_attn_on_flash(const exec_cuda *cx, const plan *p, const ir_node *n) {
    if (ir_attn_block_size(n) > 0 || (cx->cfg.attn_variant != 3 && cx->cfg.attn_variant != 4)) return false;
    const cu_attn_args a = cx_attn_args(cx, p, n);
    return cu_fattn_supported(&a);
}

/* Key splits S of the paged kernel (k_attn_paged.cu): its T * Hq blocks (grouped, hb > 0: T * Hq / hb,
 * at most CU_ATT_PAGED_GQA_MAX_SPLITS) each walk their keys
 * serially, so a decode of few tokens deep in the cache leaves most SMs idle (gemma4's 8 global
 * heads at depth 4096: 8 blocks on 132 SMs; unsplit, H100: 21 tok/s against 304 at depth 0). S gives
 * ~attn_splits (2) blocks per SM at the deepest context a token can see (keys: the table's reach,
 * the cache rows, the window), in splits of at least kmin keys (shallower: fewer of them active,
 * the kernel decides from pos), at most CU_ATT_PAGED_MAX_SPLITS; S = 1 (the unsplit kernel, no
 * scratch) where the T * Hq blocks already give every SM one (prefill, batches of many sequences)
 * or keys <= kmin. Past one block an SM a split only adds waves and merges: the grouped F16 split
 * instance holds one 256-thread block an SM (135 registers on sm_90), and Llama-3.1-8B's 256
 * blocks at B = 32 ran 2.4x faster unsplit than in 2 splits (bench/NOTES.md). */
static int attn_nsplit_paged(const exec_cuda *cx, int64_t T, int64_t Hq, int hb, int64_t keys) {
    const int64_t blocks = T * (hb > 0 ? Hq / hb : Hq), want = (int64_t)cx->cfg.attn_splits * cx->sms, kmin = cx->cfg.attn_kmin;
    if (blocks <= 0 || blocks >= cx->sms) return 1; /* want >= sms: attn_splits >= 1 */
    int64_t ns = (want + blocks - 1) / blocks;
    const int64_t most = (keys + kmin - 1) / kmin;
    if (ns > most) ns = most;
    if (ns > (hb > 0 ? CU_ATT_PAGED_GQA_MAX_SPLITS : CU_ATT_PAGED_MAX_SPLITS)) ns = hb > 0 ? CU_ATT_PAGED_GQA_MAX_SPLITS : CU_ATT_PAGED_MAX_SPLITS;
    return ns < 1 ? 1 : (int)ns;
}

/* the grouped kernel's heads a block (cu_attn_paged_args.hb) under cu_config.attn_gqa: the largest
 * divisor of G = Hq / Hkv <= it that the kernel takes for a's shape (all G heads of a kv head where
 * it can: each K/V row read once for them; Qwen2.5's 7), 0 where none does (attn_gqa 0, head dims
 * or cache types it has no instance of: the per-head kernel) */
static int attn_paged_hb(const exec_cuda *cx, const cu_attn_paged_args *a) {
    for (int hb = cx->cfg.attn_gqa < 8 ? cx->cfg.attn_gqa : 8; hb >= 1; hb--)
        if (cu_attention_paged_gqa_ok(a, hb)) return hb;
    return 0;
}

cu_attn_paged_args cx_attn_paged_args(const exec_cuda *cx, const plan *p, const ir_node *n) {
    const ir_node *q = &p->g->nodes[n->src[0]], *k = &p->g->nodes[n->src[1]];
    const ir_attn_params ap = ir_attn_of(n);
    const int bs = ir_attn_block_size(n); /* 0: a contiguous cache, one block of its C rows */
    const int64_t C = k->ne[1], n_tbl = bs > 0 ? p->g->nodes[n->src[4]].ne[0] : 1;
    int64_t keys = bs > 0 && n_tbl * bs < C ? n_tbl * bs : C;
    if (ap.window > 0 && ap.window < keys) keys = ap.window;
    cu_attn_paged_args a = {.D = q->ne[0], .Hq = q->ne[1], .Hkv = ap.n_head_kv, .T = q->ne[2], .ctype = k->dtype, .scale = ap.scale,
                            .softcap = ap.softcap, .window = ap.window, .bs = bs > 0 ? bs : (int)C, .n_tbl = n_tbl,
                            .ring = bs > 0 ? 0 : ir_kv_ring(p->g, n->src[1]), .kmin = cx->cfg.attn_kmin};
    a.hb = attn_paged_hb(cx, &a);
    a.nsplit = attn_nsplit_paged(cx, a.T, a.Hq, a.hb, keys);
    return a;
}

/* the splits active at n visible keys of S of at least kmin (attn_paged.cuh's pa_active) */
static int64_t paged_active(int64_t n, int S, int kmin, int64_t *kps) {
    const int64_t km = kmin > 0 ? kmin : CU_ATT_DEC_KMIN;
    *kps = S > 1 ? (n + S - 1) / S : n;
    if (S > 1 && *kps < km) *kps = km;
    return S > 1 ? (n + *kps - 1) / *kps : 1;
}

/* one line about attention node n at depth (its last position): the kernel, grid and splits */
static int describe_one(const exec_cuda *cx, const plan *p, int32_t i, int64_t depth, char *buf, size_t cap) {
    const ir_node *n = &p->g->nodes[i];
    const ir_attn_params ap = ir_attn_of(n);
    const int64_t keys = ap.window > 0 && ap.window < depth + 1 ? ap.window : depth + 1;
    const int o = snprintf(buf, cap, "%%%d head_dim %d heads %lld/%d window %d, %lld keys: ", (int)i, (int)ap.head_dim, (long long)p->g->nodes[n->src[0]].ne[1],
                           (int)ap.n_head_kv, (int)ap.window, (long long)keys);
    const size_t rest = (size_t)o < cap ? cap - (size_t)o : 0;
    const int64_t dm = p->n_tokens == 1 ? cx_class_depth(cx, cx_depth_class(cx, depth + 1)) : 0; /* the run's depth bound */
    if (cx_attn_paged_on_dec(cx, p, n, dm)) {
        const cu_attn_args a = cx_attn_paged_dec_args(cx, p, n, dm);
        const bool deep = cu_attn_deep_fits(&a);
        return o + snprintf(buf + o, rest, "%s through the block table (block size %d), depth class of %lld keys\n",
                            deep ? "k_attn_deep + k_attn_deep_merge" : "k_attn_dec small layout (SMALL_ONLY)", a.bs, (long long)dm);
    }
    if (cx_attn_on_paged_kernel(cx, p, n)) {
        const cu_attn_paged_args a = cx_attn_paged_args(cx, p, n);
        int64_t kps;
        const int64_t na = paged_active(keys, a.nsplit, a.kmin, &kps), bx = a.hb > 0 ? a.Hq / a.hb : a.Hq;
        return o + snprintf(buf + o, rest, "%s hb %d grid (%lld, %lld, %d), %d splits: %lld active of %lld keys%s\n",
                            a.hb > 0 ? "k_attn_paged_gqa" : "k_attn_paged", a.hb, (long long)bx, (long long)a.T, a.nsplit > 1 ? a.nsplit : 1,
                            a.nsplit, (long long)na, (long long)kps, cu_attention_paged_launches(&a, true) > 1 ? " + merge" : a.nsplit > 1 ? ", the last merges" : "");
    }
    const cu_attn_args a = cx_attn_args(cx, p, n);
    int64_t kps;
    const int64_t na = paged_active(keys, a.nsplit, a.kmin, &kps);
    return o + snprintf(buf + o, rest, "cu_attention variant %d (T %lld, ctype %d), %d splits of >= %d keys (%lld active), warp path to %d, "
                        "small to %d, deep %d\n", a.variant, (long long)a.T, a.ctype, a.nsplit, a.kmin, (long long)na, a.warp, a.small,
                        cx->cfg.attn_deep);
}

size_t exec_cuda_describe_attention(const plan *p, const cu_config *c, int64_t depth, char *buf, size_t cap) {
    exec_cuda *cx = (exec_cuda *)calloc(1, sizeof *cx);
    if (!cx) return 0;
    cx->cfg = c ? *c : cu_config_default;
    cx->sms = cu_sm_count();
    size_t o = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++)
        if (p->g->nodes[i].op == IR_OP_ATTENTION) {
            const int k = describe_one(cx, p, i, depth, buf + (o < cap ? o : cap), o < cap ? cap - o : 0);
            o += k > 0 ? (size_t)k : 0;
        }
    free(cx);
    return o;
}

/* the Q RoPE attention n applies as it loads q (pass fuse_attn_rope; n_rot 0: none, q is rotated
 * already), for either argument struct (cu_attn_args, cu_attn_paged_args) */
static cu_attn_rope attn_q_rope(crun *r, const ir_node *n) {
    const ir_rope_params rp = ir_attn_q_rope(n);
    if (!rp.n_rot) return (cu_attn_rope){0};
    const ir_ref ff = ir_attn_q_rope_ff(n);
    return (cu_attn_rope){.n_rot = rp.n_rot, .mode = rp.mode, .theta_scale = powf(rp.freq_base, -2.0f / (float)rp.n_rot),
                          .freq_scale = rp.freq_scale, .attn_factor = ir_attn_q_rope_attn_factor(n),
                          .ff = ff != IR_NONE ? (const float *)dptr(r, ff) : NULL};
}

sb_status cx_run_attention(crun *r, int32_t i) {
    const ir_graph *g = r->p->g;
    const ir_node *n = &g->nodes[i];
    cu_stream s = r->cx->s;
    void *dst = dptr(r, i);
#define SP(j) dptr(r, n->src[j])
    if (cx_attn_paged_on_dec(r->cx, r->p, n, r->depth_max)) { /* a paged B = 1 step at a depth class: the session's kernels through the table */
        cu_attn_args a = cx_attn_paged_dec_args(r->cx, r->p, n, r->depth_max);
        a.tbl = (const int32_t *)SP(4);
        a.q_rope = attn_q_rope(r, n);
        if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
        const bool deep = cu_attn_deep_fits(&a); /* k_attn_deep + its merge; else the small layout's own kernel */
        const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = deep ? cu_attn_deep_scratch(&a) : 0;
        if (need > cap) /* cx_plan_get sized the scratch region for it */
            return sb_fail(SB_ERR_INTERNAL, "cuda: paged decode attention needs %llu floats of scratch, %llu planned", (unsigned long long)need,
                           (unsigned long long)cap);
        r->n_kernels += deep ? 2 : 1;
        return cu_attn_decode(s, dst, SP(0), SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
    }
    if (cx_attn_on_paged_kernel(r->cx, r->p, n)) { /* k_attn_paged.cu; a contiguous cache as one block of its C rows */
        const bool paged = ir_attn_block_size(n) > 0;
        cu_attn_paged_args pa = cx_attn_paged_args(r->cx, r->p, n);
        pa.q_rope = attn_q_rope(r, n);
        if (ir_attn_quant_type(n) >= 0) pa.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
        const uint64_t cap = (r->c->arena_need - r->c->scratch_off) / 4, need = cu_attention_paged_scratch(&pa);
        if (need > cap) /* cx_plan_get sized the scratch region for it */
            return sb_fail(SB_ERR_INTERNAL, "cuda: paged attention of %d splits needs %llu floats of scratch, %llu planned", pa.nsplit,
                           (unsigned long long)need, (unsigned long long)cap);
        r->n_kernels += cu_attention_paged_launches(&pa, true); /* a split merged by its last block, or by k_attn_paged_merge */
        return cu_attention_paged(s, dst, SP(0), SP(1), SP(2), SP(3), paged ? (const int32_t *)SP(4) : r->cx->d_zero, &pa,
                                  need ? (float *)(r->arena + r->c->scratch_off) : NULL, r->cx->d_cnt);
    }
    cu_attn_args a = cx_attn_args(r->cx, r->p, n);
    a.depth_max = r->depth_max;
    const void *q = SP(0);
    a.q_rope = attn_q_rope(r, n);
    if (ir_attn_quant_type(n) >= 0) a.xq = dptr(r, ir_result_of(g, i, 1)); /* the q8_1 output too (pass fuse_attn_quant) */
    if (cx_attn_on_flash(r->cx, r->p, n)) { /* prefill: flash attention (k_fattn.cu, k_fattn_mma.cu) */
        r->n_kernels++;
        return cu_attention_prefill(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off),
                                    (r->c->arena_need - r->c->scratch_off) / 4, r->cx->d_cnt);
    }
    const bool dec4 = a.variant == 4 && a.T == 1 && (a.nsplit == 1 || a.Hkv <= CU_ATT_COUNTERS); /* k_attn_decode.cu: one kernel */
    r->n_kernels += (!dec4 && a.nsplit > 1 && a.T * a.Hq > CU_ATT_COUNTERS) || (dec4 && cu_attn_deep_fits(&a)) ? 2 : 1;
    return cu_attention(s, dst, q, SP(1), SP(2), SP(3), &a, (float *)(r->arena + r->c->scratch_off), r->cx->d_cnt);
#undef SP
}

#endif
