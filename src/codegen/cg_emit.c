/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * codegen/cg_emit.c — a planned node → cg_group (its shape signature) → CUDA C source for one
 * launch variant. The source is small: constants (E, rows, eps, scales, broadcast flags, op chain,
 * quant type, threads, rows per block) plus calls into backend/cuda/device/act_quant.cuh — the same
 * helpers k_quantize.cu uses (quant_row, act_build, block_rms_scale, src_norm/src_glu/src_plain,
 * common.cuh's cu_silu/cu_gelu), so quantization is bit-identical to the hand-written kernels
 * (q8_K = the CPU reference quantize_row_q8_K_ref). Elementwise chains follow k_rows.cu's k_ew_rows
 * step by step (same formulas: v*(1/c) inside tanhf for softcap, sum of squares in double for
 * rms_norm; every add and multiply rounded alone with __fadd_rn/__fmul_rn, as k_ew_rows's per-step
 * stores round them: no FMA contraction across steps). Every variant gives the hand-written
 * kernel's bits: groups that reduce (a norm) keep its thread count and layout (cg_variants), so
 * the autotuner's pick never changes a result. Quantizers hold the row in registers (act_build) when it fits, else quant_row's loop.
 * Layer 3 (codegen). Pure: no I/O, no globals.
 * Geometry: grid = ceil(rows / rpb) blocks of `threads`; block b does rows b*rpb .. b*rpb+rpb-1 one
 * after another (a barrier between rows when the kernel reduces). Chains without a norm also take a
 * flat grid (cg_variant.flat): a thread a value over all rows x E, striding past 65,536 blocks. Thread i of a row owns elements
 * i, i + threads, ... for the elementwise parts; in quantization warp w owns quant blocks w,
 * w + threads/32, ...
 * Rows: a compile-time 1 for decode (T = 1); any other count is cg_params.rows at run time, so
 * prefill chunks of every length share one compiled kernel per (E, chain, variant) — a new prompt
 * length costs no compile, only a re-tune (timing launches of cached kernels).
 * Kernel name: "sbk_" + 16 hex digits of the FNV-1a hash of the signature line (also the first
 * comment of the source), so a name is stable across runs and processes.
 * Non-goals: vectorized loads, multi-row warps (the variants cover the geometry that matters).
 */
#include "codegen/cg.h"

#include "base/hash.h"
#include "quant/types.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- groups ----

static int ew_op(ir_op op) {
    switch (op) {
    case IR_OP_ADD: return CG_EW_ADD;
    case IR_OP_MUL: return CG_EW_MUL;
    case IR_OP_SCALE: return CG_EW_SCALE;
    case IR_OP_SOFTCAP: return CG_EW_SOFTCAP;
    case IR_OP_SILU: return CG_EW_SILU;
    case IR_OP_GELU_TANH: return CG_EW_GELU;
    case IR_OP_RMS_NORM: return CG_EW_RMS_NORM;
    default: return 0;
    }
}

static bool bcast_of(const ir_node *o, const ir_node *n) { return ir_nelem(o) == n->ne[0] && ir_nrows(n) != 1; }

static sb_status quant_ok(const ir_node *n, int xq, int64_t E) {
    if (xq != SB_TYPE_Q8_1 && xq != SB_TYPE_Q8_K)
        return sb_fail(SB_ERR_UNSUPPORTED, "codegen: %s to %s (Q8_1 or Q8_K only)", ir_ops[n->op].name, ir_dtype_name(xq));
    const int64_t blk = xq == SB_TYPE_Q8_1 ? 32 : 256;
    if (E % blk)
        return sb_fail(SB_ERR_UNSUPPORTED, "codegen: %s rows of %lld values (not a multiple of %lld)", ir_ops[n->op].name, (long long)E,
                       (long long)blk);
    return SB_OK;
}

sb_status cg_group_from_node(const ir_graph *g, ir_ref i, ir_ref add_src, cg_group *out) {
    memset(out, 0, sizeof *out);
    for (int k = 0; k < CG_MAX_PARAMS; k++) out->ref[k] = IR_NONE;
    if (!g || i < 0 || i >= g->n_nodes) return sb_fail(SB_ERR_INVALID_ARG, "codegen: node %d out of range", (int)i);
    const ir_node *n = &g->nodes[i];
    out->E = n->ne[0];
    out->rows = ir_nrows(n);
    if (out->E < 1 || out->rows < 1) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: empty node %%%d", (int)i);
    if (out->rows > (int64_t)1 << 30) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: node %%%d has %lld rows", (int)i, (long long)out->rows);
    out->ref[0] = i;
    if (add_src != IR_NONE && n->op != IR_OP_RMS_NORM_QUANT && n->op != IR_OP_ADD_RMS_NORM_QUANT)
        return sb_fail(SB_ERR_INVALID_ARG, "codegen: add fusion on %s (RMS_NORM_QUANT only)", ir_ops[n->op].name);
    switch (n->op) {
    case IR_OP_FUSED: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU: case IR_OP_GELU_TANH:
    case IR_OP_RMS_NORM: {
        if (n->dtype != SB_TYPE_F32) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: %s of %s", ir_ops[n->op].name, ir_dtype_name(n->dtype));
        if (ir_fused_tail_of(n).op) /* its second result would go unwritten */
            return sb_fail(SB_ERR_UNSUPPORTED, "codegen: fused chain %%%d with a %s tail", (int)i, ir_ops[ir_fused_tail_of(n).op].name);
        out->kind = CG_EW;
        out->ref[1] = n->src[0];
        out->n_params = 2;
        int steps = n->op == IR_OP_FUSED ? ir_fused_steps(n) : 1, norms = 0;
        if (steps < 1 || steps > CG_MAX_STEPS)
            return sb_fail(SB_ERR_UNSUPPORTED, "codegen: fused chain %%%d of %d steps (1..%d)", (int)i, steps, CG_MAX_STEPS);
        for (int k = 0; k < steps; k++) {
            const bool fused = n->op == IR_OP_FUSED;
            const ir_fused_step fs = fused ? ir_fused_step_of(n, k) : (ir_fused_step){n->op, n->op == IR_OP_ADD || n->op == IR_OP_MUL ? 1 : 0, ir_f0(n)};
            const int op = (int)fs.op, opd = fs.operand;
            cg_step *s = &out->st[k];
            s->op = ew_op(fs.op);
            s->f = fs.f;
            if (!s->op) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: chain step %d of %%%d is op %d", k, (int)i, op);
            norms += s->op == CG_EW_RMS_NORM;
            const bool binary = s->op == CG_EW_ADD || s->op == CG_EW_MUL;
            if (binary != (opd != 0) || opd < 0 || opd >= IR_MAX_SRC || (opd && n->src[opd] == IR_NONE))
                return sb_fail(SB_ERR_INVALID_ARG, "codegen: chain step %d of %%%d: operand %d", k, (int)i, opd);
            if (binary) {
                const ir_node *o = &g->nodes[n->src[opd]];
                if (ir_nelem(o) != ir_nelem(n) && ir_nelem(o) != n->ne[0])
                    return sb_fail(SB_ERR_INVALID_ARG, "codegen: operand %%%d of %%%d has %lld values (%lld or %lld)", (int)n->src[opd],
                                   (int)i, (long long)ir_nelem(o), (long long)ir_nelem(n), (long long)n->ne[0]);
                s->slot = out->n_params++;
                s->bcast = bcast_of(o, n);
                out->ref[s->slot] = n->src[opd];
            }
        }
        if (norms > 1) return sb_fail(SB_ERR_UNSUPPORTED, "codegen: chain %%%d has %d rms_norm steps (at most 1)", (int)i, norms);
        out->n_steps = steps;
        return SB_OK;
    }
    case IR_OP_QUANTIZE:
        out->kind = CG_QUANTIZE;
        out->xq = n->dtype;
        out->ref[1] = n->src[0];
        out->n_params = 2;
        return quant_ok(n, n->dtype, out->E);
    case IR_OP_GLU_QUANT:
        out->kind = CG_GLU_QUANT;
        out->xq = n->dtype;
        out->gelu = ir_glu_act(n) == IR_OP_GEGLU;
        out->ref[1] = n->src[0];
        out->ref[2] = n->src[1];
        out->n_params = 3;
        return quant_ok(n, n->dtype, out->E);
    case IR_OP_ADD_RMS_NORM_QUANT: { /* (a, b, w?), the sum its result 1 */
        const ir_ref sum = ir_result_of(g, i, 1);
        if (add_src != IR_NONE || sum == IR_NONE)
            return sb_fail(SB_ERR_UNSUPPORTED, "codegen: add_rms_norm_quant %%%d without its sum's result", (int)i);
        out->xq = n->dtype;
        out->eps = ir_f0(n);
        out->has_w = n->src[2] != IR_NONE;
        out->kind = CG_ADD_RMS_NORM_QUANT;
        out->ref[1] = n->src[0], out->ref[2] = n->src[2], out->ref[3] = n->src[1], out->ref[4] = sum;
        out->n_params = 5;
        return quant_ok(n, n->dtype, out->E);
    }
    case IR_OP_RMS_NORM_QUANT:
        out->xq = n->dtype;
        out->eps = ir_f0(n);
        out->has_w = n->src[1] != IR_NONE;
        out->ref[2] = n->src[1];
        if (add_src != IR_NONE) {
            const ir_node *a = &g->nodes[add_src];
            if (a->op != IR_OP_ADD || n->src[0] != add_src || ir_nelem(&g->nodes[a->src[0]]) != ir_nelem(a) ||
                ir_nelem(&g->nodes[a->src[1]]) != ir_nelem(a))
                return sb_fail(SB_ERR_INVALID_ARG, "codegen: %%%d is not a full-shape ADD feeding %%%d", (int)add_src, (int)i);
            out->kind = CG_ADD_RMS_NORM_QUANT;
            out->ref[1] = a->src[0];
            out->ref[3] = a->src[1];
            out->ref[4] = add_src;
            out->n_params = 5;
        } else {
            out->kind = CG_RMS_NORM_QUANT;
            out->ref[1] = n->src[0];
            out->n_params = 3;
        }
        return quant_ok(n, n->dtype, out->E);
    default: return sb_fail(SB_ERR_UNSUPPORTED, "codegen: no generated kernel for %s", ir_ops[n->op].name);
    }
}

// ---- variants ----

static bool reduces(const cg_group *g) {
    if (g->kind == CG_RMS_NORM_QUANT || g->kind == CG_ADD_RMS_NORM_QUANT) return true;
    for (int k = 0; g->kind == CG_EW && k < g->n_steps; k++)
        if (g->st[k].op == CG_EW_RMS_NORM) return true;
    return false;
}

/* values a thread holds for act_build with nt threads (a multiple of the block's 32-value slices),
 * or 0 when the row does not fit in AQ_MAXV (32) */
static int reg_values(const cg_group *g, int nt) {
    const int64_t bs = g->xq == SB_TYPE_Q8_K ? 256 : 32, nb = g->E / bs, nw = nt / 32;
    const int64_t v = (nb + nw - 1) / nw * (bs / 32);
    return v >= 1 && v <= 32 ? (int)v : 0;
}

/* the one layout a reducing group may take (cg.h): the hand-written kernel's */
static cg_variant reduce_layout(const cg_group *grp) {
    if (grp->kind == CG_EW) return (cg_variant){256, 1, 0, 0};                              /* k_ew_rows */
    if (grp->hand_reg && reg_values(grp, 256)) return (cg_variant){256, 1, 1, 0};           /* k_act_rows: act_build<256> */
    return (cg_variant){1024, 1, 0, 0};                                                     /* k_rms_norm_quant<1024> */
}

int cg_variants(const cg_group *grp, cg_variant *out) {
    /* the first is the hand-written kernels' geometry: 256 threads for chains (k_ew_rows); for the
     * quantizers the row in registers with 256 threads when it fits (k_quantize.cu's act_build),
     * else the 1024-thread loop; others only where they can help (no more warps than the row has
     * work for: quant blocks, or 32 elements each) and where they give the same bits: a group that
     * reduces keeps the hand-written kernel's layout, whose order of the double sum it must
     * reproduce (a sum of squares in another order can round differently) */
    static const int th[] = {256, 128, 512, 1024};
    int n = 0;
    if (reduces(grp)) {
        out[n++] = reduce_layout(grp);
    } else if (grp->kind == CG_EW) { /* first the flat grid (k_ew_flat), then a block a row */
        out[n++] = (cg_variant){256, 1, 0, 1};
        out[n++] = (cg_variant){128, 1, 0, 1};
        int64_t work = (grp->E + 31) / 32;
        if (work < 4) work = 4;
        for (int t = 0; t < 4; t++)
            if (t == 0 || th[t] / 32 <= work) out[n++] = (cg_variant){th[t], 1, 0, 0};
    } else { /* plain and GLU quantization: per-element values, per-warp quant blocks: any layout, the same bits */
        int64_t work = grp->E / (grp->xq == SB_TYPE_Q8_K ? 256 : 32);
        if (work < 4) work = 4;
        for (int t = 0; t < 4; t++) /* registers first */
            if ((t == 0 || th[t] / 32 <= work) && reg_values(grp, th[t])) out[n++] = (cg_variant){th[t], 1, 1, 0};
        /* quant_row's loop: only for rows too long for registers (where the row fits, the register
         * form is the faster one on the H200 — k_quantize.cu — so the loop is not worth compiling) */
        if (!n) {
            out[n++] = (cg_variant){1024, 1, 0, 0};
            for (int t = 0; t < 3; t++)
                if (th[t] / 32 <= work) out[n++] = (cg_variant){th[t], 1, 0, 0};
        }
    }
    const int n1 = n;
    if (grp->rows >= 8) /* several rows per block: fewer, longer blocks for many short rows (each row reduced alone: same bits) */
        for (int k = 0; k < n1 && n < CG_MAX_VARIANTS; k++)
            if (out[k].threads <= 256 && !out[k].flat) out[n++] = (cg_variant){out[k].threads, 4, out[k].reg, 0};
    return n;
}

void cg_geometry(const cg_group *grp, cg_variant v, unsigned *grid, unsigned *block) {
    *block = (unsigned)v.threads;
    if (v.flat) { /* a thread a value, at most 65,536 blocks (the kernel strides over the rest) */
        const int64_t blocks = (grp->rows * grp->E + v.threads - 1) / v.threads;
        *grid = (unsigned)(blocks < 65536 ? blocks : 65536);
        return;
    }
    *grid = (unsigned)((grp->rows + v.rpb - 1) / v.rpb);
}

// ---- source text ----

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *q = (char *)realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
}

/* an exact float literal: hex float (C++17) for finite values, bits otherwise */
static void flit(char *out, size_t cap, float f) {
    if (isfinite(f)) snprintf(out, cap, "%af", (double)f);
    else {
        uint32_t u;
        memcpy(&u, &f, 4);
        snprintf(out, cap, "__uint_as_float(0x%08xu)", u);
    }
}

const char *cg_kind_name(cg_kind k) {
    switch (k) {
    case CG_EW: return "ew";
    case CG_RMS_NORM_QUANT: return "rms_norm_quant";
    case CG_ADD_RMS_NORM_QUANT: return "add_rms_norm_quant";
    case CG_GLU_QUANT: return "glu_quant";
    case CG_QUANTIZE: return "quantize";
    }
    return "?";
}
static const char *step_name(int op) {
    static const char *nm[] = {"?", "add", "mul", "scale", "softcap", "silu", "gelu", "rms_norm"};
    return op >= 1 && op <= 7 ? nm[op] : "?";
}

/* the signature line: every input of the source, in words */
static void signature(sbuf *b, const cg_group *g, cg_variant v) {
    if (g->rows == 1) put(b, "%s E=%lld rows=1", cg_kind_name(g->kind), (long long)g->E);
    else put(b, "%s E=%lld rows=n", cg_kind_name(g->kind), (long long)g->E); /* any row count > 1: cg_params.rows */
    if (g->kind != CG_EW) put(b, " xq=%s", ir_dtype_name(g->xq));
    if (g->kind == CG_RMS_NORM_QUANT || g->kind == CG_ADD_RMS_NORM_QUANT) put(b, " eps=%a w=%d", (double)g->eps, g->has_w);
    if (g->kind == CG_GLU_QUANT) put(b, " act=%s", g->gelu ? "gelu" : "silu");
    if (g->kind == CG_EW) {
        put(b, " [");
        for (int k = 0; k < g->n_steps; k++) {
            const cg_step *s = &g->st[k];
            put(b, "%s%s", k ? "; " : "", step_name(s->op));
            if (s->slot) put(b, " @%d%s", s->slot, s->bcast ? " bcast" : "");
            if (s->op == CG_EW_SCALE || s->op == CG_EW_SOFTCAP || s->op == CG_EW_RMS_NORM) put(b, " f=%a", (double)s->f);
        }
        put(b, "]");
    }
    put(b, " threads=%d rpb=%d%s%s", v.threads, v.rpb, v.reg ? " reg" : "", v.flat ? " flat" : "");
}

static sb_status check_group(const cg_group *g, cg_variant v) {
    if (v.threads != 128 && v.threads != 256 && v.threads != 512 && v.threads != 1024)
        return sb_fail(SB_ERR_INVALID_ARG, "codegen: %d threads per block (128, 256, 512 or 1024)", v.threads);
    if (v.rpb < 1 || v.rpb > 64) return sb_fail(SB_ERR_INVALID_ARG, "codegen: %d rows per block (1..64)", v.rpb);
    if (g->E < 1 || g->rows < 1) return sb_fail(SB_ERR_INVALID_ARG, "codegen: empty group (E %lld, rows %lld)", (long long)g->E, (long long)g->rows);
    if (g->kind != CG_EW) {
        if (g->xq != SB_TYPE_Q8_1 && g->xq != SB_TYPE_Q8_K) return sb_fail(SB_ERR_INVALID_ARG, "codegen: quant type %d", g->xq);
        if (g->E % (g->xq == SB_TYPE_Q8_1 ? 32 : 256)) return sb_fail(SB_ERR_INVALID_ARG, "codegen: E %lld for %s", (long long)g->E, ir_dtype_name(g->xq));
        if (v.reg && !reg_values(g, v.threads))
            return sb_fail(SB_ERR_INVALID_ARG, "codegen: a row of %lld values does not fit %d threads' registers", (long long)g->E, v.threads);
        return SB_OK;
    }
    if (v.reg) return sb_fail(SB_ERR_INVALID_ARG, "codegen: register variant of an elementwise chain");
    if (v.flat && (v.rpb != 1 || reduces(g))) return sb_fail(SB_ERR_INVALID_ARG, "codegen: a flat grid for a chain with a norm or %d rows a block", v.rpb);
    if (g->n_steps < 1 || g->n_steps > CG_MAX_STEPS) return sb_fail(SB_ERR_INVALID_ARG, "codegen: %d chain steps", g->n_steps);
    int norms = 0;
    for (int k = 0; k < g->n_steps; k++) {
        const cg_step *s = &g->st[k];
        if (s->op < CG_EW_ADD || s->op > CG_EW_RMS_NORM) return sb_fail(SB_ERR_INVALID_ARG, "codegen: step %d op %d", k, s->op);
        const bool binary = s->op == CG_EW_ADD || s->op == CG_EW_MUL;
        if (binary != (s->slot >= 2) || s->slot >= CG_MAX_PARAMS) return sb_fail(SB_ERR_INVALID_ARG, "codegen: step %d slot %d", k, s->slot);
        norms += s->op == CG_EW_RMS_NORM;
    }
    if (norms > 1) return sb_fail(SB_ERR_INVALID_ARG, "codegen: %d rms_norm steps", norms);
    return SB_OK;
}

/* elementwise steps [k0, k1) applied to float v at element i of row r (in a loop over i). Every add
 * and multiply rounds on its own (__fadd_rn/__fmul_rn are never contracted into an FMA): k_ew_rows
 * stores each step's result, so a multiply followed by an add (rms_norm * w + residual, gemma's
 * post-norms) must not become one fma here, or the bits differ from the hand-written kernel's */
static void emit_steps(sbuf *b, const cg_group *g, int k0, int k1) {
    for (int k = k0; k < k1; k++) {
        const cg_step *s = &g->st[k];
        char f[64];
        flit(f, sizeof f, s->f);
        switch (s->op) {
        case CG_EW_ADD: case CG_EW_MUL:
            put(b, "            v = %s(v, ((const float *)a.p[%d])[%s]);\n", s->op == CG_EW_ADD ? "__fadd_rn" : "__fmul_rn", s->slot,
                s->bcast ? "i" : "r * E_ + i");
            break;
        case CG_EW_SCALE: put(b, "            v = __fmul_rn(v, %s);\n", f); break;
        case CG_EW_SOFTCAP: put(b, "            v = __fmul_rn(tanhf(__fmul_rn(v, 1.0f / %s)), %s);\n", f, f); break;
        case CG_EW_SILU: put(b, "            v = cu_silu(v);\n"); break;
        case CG_EW_GELU: put(b, "            v = cu_gelu(v);\n"); break;
        default: break;
        }
    }
}

/* one kernel's text appended to *bp (with the #include line first when `include`) */
static sb_status emit_one(sbuf *bp, const cg_group *g, cg_variant v, char name[40], bool include) {
    name[0] = 0;
    SB_TRY(check_group(g, v));
    sbuf sig = {0};
    signature(&sig, g, v);
    if (sig.oom) {
        free(sig.p);
        return sb_fail(SB_ERR_OOM, "codegen: source text");
    }
    snprintf(name, 40, "sbk_%016llx", (unsigned long long)sb_hash_bytes(sig.p, sig.n));
    put(bp, "// SonicBoom generated kernel: %s\n", sig.p);
    free(sig.p);
    if (include) put(bp, "#include \"backend/cuda/device/act_quant.cuh\"\n\n");
    put(bp, "struct cg_params { void *p[%d]; long long rows; };\n", CG_MAX_PARAMS);
    put(bp, "#define NT %d\n#define RPB %d\n#define E_ ((int64_t)%lld)\n", v.threads, v.rpb, (long long)g->E);
    if (g->rows == 1) put(bp, "#define ROWS ((int64_t)1)\n\n");
    else put(bp, "#define ROWS ((int64_t)a.rows) /* prefill: one kernel for every row count */\n\n");
    const bool red = reduces(g) || v.reg; /* act_build takes the partials array in every kind */
    put(bp, "extern \"C\" __global__ void __launch_bounds__(NT) %s(const cg_params a) {\n", name);
    put(bp, "    CU_PDL_ENTRY();\n");
    if (v.flat) { /* value e of row r = e / E: every step in registers (ew_chain_flat) */
        put(bp, "    for (int64_t e = (int64_t)blockIdx.x * NT + threadIdx.x; e < ROWS * E_; e += (int64_t)gridDim.x * NT) {\n");
        put(bp, "        const int64_t r = e / E_, i = e - r * E_;\n");
        put(bp, "        float v = ((const float *)a.p[1])[e];\n");
        emit_steps(bp, g, 0, g->n_steps);
        put(bp, "        ((float *)a.p[0])[e] = v;\n    }\n}\n");
        return bp->oom ? sb_fail(SB_ERR_OOM, "codegen: source text") : SB_OK;
    }
    if (red) put(bp, "    __shared__ double part[NT / 32];\n");
    put(bp, "    for (int k = 0; k < RPB; k++) {\n");
    put(bp, "        const int64_t r = (int64_t)blockIdx.x * RPB + k;\n");
    put(bp, "        if (r >= ROWS) return; /* block-uniform */\n");
    if (g->kind == CG_EW) {
        int kn = -1;
        for (int k = 0; k < g->n_steps; k++)
            if (g->st[k].op == CG_EW_RMS_NORM) kn = k;
        put(bp, "        float *y = (float *)a.p[0] + r * E_;\n");
        put(bp, "        const float *x = (const float *)a.p[1] + r * E_;\n");
        if (kn < 0) {
            put(bp, "        for (int64_t i = threadIdx.x; i < E_; i += NT) {\n            float v = x[i];\n");
            emit_steps(bp, g, 0, g->n_steps);
            put(bp, "            y[i] = v;\n        }\n");
        } else {
            char eps[64];
            flit(eps, sizeof eps, g->st[kn].f);
            const char *in = "x";
            if (kn > 0) { /* steps before the norm: y = pre(x), then the norm reads y (k_ew_rows's order) */
                put(bp, "        for (int64_t i = threadIdx.x; i < E_; i += NT) {\n            float v = x[i];\n");
                emit_steps(bp, g, 0, kn);
                put(bp, "            y[i] = v;\n        }\n");
                in = "y";
            }
            /* the barrier inside block_rms_scale orders every thread's y writes before the second pass only
             * for its own elements, which is all the second pass reads */
            put(bp, "        const float sc = block_rms_scale<NT>(%s, (const float *)0, (float *)0, E_, %s, part);\n", in, eps);
            put(bp, "        for (int64_t i = threadIdx.x; i < E_; i += NT) {\n            float v = __fmul_rn(%s[i], sc);\n", in);
            emit_steps(bp, g, kn + 1, g->n_steps);
            put(bp, "            y[i] = v;\n        }\n");
        }
    } else {
        const int xq = g->xq; /* SB_TYPE_* ids are the CU_T_* ids (ggml numbering) */
        const int64_t rowb = g->E / (xq == SB_TYPE_Q8_1 ? 32 : 256) * (xq == SB_TYPE_Q8_1 ? 36 : 292);
        put(bp, "        uint8_t *dst = (uint8_t *)a.p[0] + (uint64_t)%lld * (uint64_t)r;\n", (long long)rowb);
        char eps[64];
        flit(eps, sizeof eps, g->eps);
        const char *w = g->has_w ? "(const float *)a.p[2]" : "(const float *)0"; /* one weight row for every row */
        if (v.reg) { /* act_build<XQ, NT, KIND, VMAX>(dst, E, x, w, eps, b, sum_out, g, u, gelu, part) */
            const int vm = reg_values(g, v.threads);
            const char *z = "(const float *)0";
            switch (g->kind) {
            case CG_QUANTIZE:
                put(bp, "        act_build<%d, NT, AQ_PLAIN, %d>(dst, E_, (const float *)a.p[1] + r * E_, %s, 0.0f, %s, (float *)0, %s, %s, 0, part);\n", xq, vm,
                    z, z, z, z);
                break;
            case CG_GLU_QUANT:
                put(bp, "        act_build<%d, NT, AQ_GLU, %d>(dst, E_, %s, %s, 0.0f, %s, (float *)0, (const float *)a.p[1] + r * E_, (const float *)a.p[2] + r * E_, %d, part);\n",
                    xq, vm, z, z, z, g->gelu ? 1 : 0);
                break;
            case CG_RMS_NORM_QUANT:
                put(bp, "        act_build<%d, NT, AQ_NORM, %d>(dst, E_, (const float *)a.p[1] + r * E_, %s, %s, %s, (float *)0, %s, %s, 0, part);\n", xq, vm, w, eps,
                    z, z, z);
                break;
            case CG_ADD_RMS_NORM_QUANT:
                put(bp, "        act_build<%d, NT, AQ_NORM, %d>(dst, E_, (const float *)a.p[1] + r * E_, %s, %s, (const float *)a.p[3] + r * E_, (float *)a.p[4] + r * E_, %s, %s, 0, part);\n",
                    xq, vm, w, eps, z, z);
                break;
            default: break;
            }
        } else switch (g->kind) {
        case CG_QUANTIZE:
            put(bp, "        quant_row<%d, NT>(dst, E_, src_plain{(const float *)a.p[1] + r * E_});\n", xq);
            break;
        case CG_GLU_QUANT:
            put(bp, "        quant_row<%d, NT>(dst, E_, src_glu{(const float *)a.p[1] + r * E_, (const float *)a.p[2] + r * E_, %d});\n", xq,
                g->gelu ? 1 : 0);
            break;
        case CG_RMS_NORM_QUANT:
            put(bp, "        const float *xr = (const float *)a.p[1] + r * E_;\n");
            put(bp, "        const float sc = block_rms_scale<NT>(xr, (const float *)0, (float *)0, E_, %s, part);\n", eps);
            put(bp, "        quant_row<%d, NT>(dst, E_, src_norm{xr, %s, sc});\n", xq, w);
            break;
        case CG_ADD_RMS_NORM_QUANT:
            put(bp, "        float *sr = (float *)a.p[4] + r * E_;\n");
            put(bp, "        const float sc = block_rms_scale<NT>((const float *)a.p[1] + r * E_, (const float *)a.p[3] + r * E_, sr, E_, %s, part);\n",
                eps);
            put(bp, "        quant_row<%d, NT>(dst, E_, src_norm{sr, %s, sc});\n", xq, w);
            break;
        default: break;
        }
    }
    if (red) put(bp, "        if (RPB > 1) __syncthreads(); /* part is reused by the next row */\n");
    put(bp, "    }\n}\n");
    return bp->oom ? sb_fail(SB_ERR_OOM, "codegen: source text") : SB_OK;
}

sb_status cg_emit(const cg_group *g, cg_variant v, char **src, char name[40]) {
    *src = NULL;
    sbuf b = {0};
    sb_status st = emit_one(&b, g, v, name, true);
    if (st != SB_OK) {
        free(b.p);
        return st;
    }
    *src = b.p;
    return SB_OK;
}

sb_status cg_emit_bundle(const cg_group *g, const cg_variant *v, int n, char **src, char bundle[40], char (*names)[40]) {
    *src = NULL;
    bundle[0] = 0;
    if (n < 1 || n > CG_MAX_VARIANTS) return sb_fail(SB_ERR_INVALID_ARG, "codegen: bundle of %d variants (1..%d)", n, CG_MAX_VARIANTS);
    sbuf b = {0};
    put(&b, "// SonicBoom generated kernels: %d launch variants of one group, each in its namespace\n", n);
    put(&b, "#include \"backend/cuda/device/act_quant.cuh\"\n\n");
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++) {
        put(&b, "namespace cgv%d {\n", k);
        sb_status st = emit_one(&b, g, v[k], names[k], false);
        if (st != SB_OK) {
            free(b.p);
            return st;
        }
        put(&b, "} // namespace cgv%d\n#undef NT\n#undef RPB\n#undef E_\n#undef ROWS\n\n", k);
        h = (h ^ sb_hash_bytes(names[k], strlen(names[k]))) * 1099511628211ull;
    }
    if (b.oom) {
        free(b.p);
        return sb_fail(SB_ERR_OOM, "codegen: source text");
    }
    snprintf(bundle, 40, "sbb_%016llx", (unsigned long long)h);
    *src = b.p;
    return SB_OK;
}
