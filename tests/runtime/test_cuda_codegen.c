/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_codegen.c — NVRTC-generated kernels on the GPU (codegen/, docs/codegen.md).
 * Part 1, every group kind in every autotune variant, launched directly (cu_gen_load/cu_gen_launch,
 * PDL as the executor) on fresh random inputs into NaN-poisoned outputs:
 *  - elementwise chains (add/mul full and broadcast, scale, softcap, silu, gelu, rms_norm first,
 *    middle or last, single ops): vs the plain-C reference ops (ops_ref.c) at NMSE 1e-10, and vs the
 *    hand-written cu_ew_rows;
 *  - rms_norm(x)[*w] / (x+b) / glu(silu|gelu) / plain -> q8_1 | q8_K: dequantized vs the f32
 *    reference (5e-4, the 8-bit-activation limit of test_cuda_ops), q8_K vs the CPU reference
 *    quantizer (op_*_quant_row, quantize_row_q8_K_ref semantics) at 1e-10 (1e-6 after a GLU, as
 *    test_cuda_ops: device expf/tanhf), and vs the hand-written
 *    kernel (cu_rms_norm_quant & co.) at 1e-10 (bytes identical counted); the fused add writes the
 *    sum bit-exactly, also in place (sum over x).
 * Part 2, through the executor: test models' prefill (all logits) + decode steps (CUDA Graph) with
 * cu_config.codegen 2 (generated kernels, any refusal an error) vs 0 (hand-written), NMSE 1e-8;
 * then a fresh memory cache must load every kernel and winner from the disk cache (0 compiles);
 * then the default mode (hand-written kernels as autotune candidates), whose stats line says how
 * many groups kept the hand-written kernel.
 * Part 3, bit-exactness of the autotuner's choice: every group of every test model's decode (T = 1)
 * and prefill (T = 9: rows >= 8, so the rows-per-block variants too) plan, as the executor forms
 * them (FUSED chains, single ops, quantizers, the ADD + RMS_NORM_QUANT pair; the norm quantizers
 * with both hand-written layouts, cu_config.act_fast off and on), runs the hand-written kernel and then
 * EVERY variant on the same random inputs; each output (and the add's sum) must be byte-identical
 * (memcmp) — a failure names the model, the node, the group, the variant and the first differing
 * index. (A variant with other bits made the first run of a process, which tunes, differ from the
 * later ones, which read the cached winner: test-gemma3-q4_k_m's post-norm chains, an fma.)
 * SKIPs (exit 0, with the reason) without a CUDA device or without NVRTC.
 */
#include "runtime/exec_cuda.h"
#include "runtime/model.h"
#include "runtime/arch/arch.h"
#include "graph/plan.h"
#include "runtime/session.h"
#include "codegen/cg.h"
#include "ops/ops_ref.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "base/status.h"
#include "test.h"
#include "ref_file.h"

#include <stdlib.h>
#include <unistd.h>

#if __has_include("backend/cuda/kernels.h")
#include "backend/cuda/cu_device.h"
#include "backend/cuda/kernels.h"
#define HAVE_KERNELS 1
#endif

static uint64_t seed = 0xC0DE6E4;

__attribute__((unused)) static float *rnd(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_normal(&seed);
    return x;
}

__attribute__((unused)) static double nmse(const float *a, const float *ref, int64_t n, int64_t *nan) {
    double num = 0, den = 0;
    *nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] != a[i]) {
            (*nan)++;
            continue;
        }
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return *nan ? 1e30 : den > 0 ? num / den : num;
}

__attribute__((unused)) static void expect(double v, double limit, const char *label) {
    printf("%-70s NMSE %.3e (limit %.0e)%s\n", label, v, limit, v <= limit ? "" : "  FAIL");
    CHECKF(v <= limit, "%s: NMSE %.3e > %.0e", label, v, limit);
}

#ifdef HAVE_KERNELS

static cu_stream S;
static int arch;

static void *up(const void *h, size_t n) {
    void *d = NULL;
    if (cu_malloc(&d, n ? n : 4, "test") != SB_OK) return NULL;
    if (h && cu_memcpy_h2d(d, h, n, S) != SB_OK) return NULL;
    return d;
}
static void down(void *h, const void *d, size_t n) { CHECK(cu_memcpy_d2h(h, d, n, S) == SB_OK); }

/* dequantize rows of q8_1 / q8_K blocks */
static void deq(float *y, const void *q, int xq, int64_t n) {
    if (xq == SB_TYPE_Q8_1) {
        const blk_q8_1 *b = q;
        for (int64_t i = 0; i < n; i++) y[i] = (float)b[i / 32].qs[i % 32] * qk_fp16_to_fp32(b[i / 32].d);
    } else {
        const blk_q8_K *b = q;
        for (int64_t i = 0; i < n; i++) y[i] = (float)b[i / 256].qs[i % 256] * b[i / 256].d;
    }
}

/* launch every variant of grp (slots: device pointers, slot 0 = dst of dst_bytes); each result
 * (host copy) goes to check(); the dst is poisoned with NaN bytes before every launch */
typedef void (*check_fn)(const cg_group *g, const void *out, const char *label, void *ctx);
static void each_variant(const cg_group *g, void **slots, size_t dst_bytes, check_fn check, void *ctx, const char *what) {
    cg_variant v[CG_MAX_VARIANTS];
    const int nv = cg_variants(g, v);
    void *host = malloc(dst_bytes);
    for (int k = 0; k < nv; k++) {
        char *src = NULL, name[40], label[200];
        snprintf(label, sizeof label, "%s [%d thr, %d rows/blk%s]", what, v[k].threads, v[k].rpb, v[k].reg ? ", regs" : "");
        cg_binary bin;
        void *fn = NULL;
        sb_status s = cg_emit(g, v[k], &src, name);
        if (s == SB_OK) s = cg_get_binary(src, name, arch, &bin);
        if (s == SB_OK) s = cu_gen_load(bin.data, name, &fn);
        unsigned grid, block;
        cg_geometry(g, v[k], &grid, &block);
        cg_params prm = {.rows = g->rows};
        memcpy(prm.p, slots, sizeof prm.p);
        if (s == SB_OK) s = cu_memset(slots[0], 0xFF, dst_bytes, S);
        if (s == SB_OK) s = cu_gen_launch(S, fn, grid, block, &prm);
        if (s == SB_OK) s = cu_stream_sync(S);
        CHECKF(s == SB_OK, "%s: %s", label, sb_last_error());
        free(src);
        if (s != SB_OK) continue;
        down(host, slots[0], dst_bytes);
        check(g, host, label, ctx);
    }
    free(host);
}

// ---- elementwise chains ----

typedef struct ew_case {
    const char *name;
    int64_t E, rows;
    int n;
    cg_step st[CG_MAX_STEPS];
} ew_case;

typedef struct ew_ctx {
    const float *ref, *hand;
} ew_ctx;

static void ew_check(const cg_group *g, const void *out, const char *label, void *vctx) {
    ew_ctx *c = vctx;
    int64_t nan, n = g->E * g->rows;
    double e = nmse(out, c->ref, n, &nan);
    if (nan) fprintf(stderr, "%s: %lld NaN (unwritten) of %lld\n", label, (long long)nan, (long long)n);
    expect(e, 1e-10, label);
    double h = nmse(out, c->hand, n, &nan);
    CHECKF(h <= 1e-12, "%s: vs hand-written cu_ew_rows NMSE %.3e", label, h);
}

static void test_ew(const ew_case *tc) {
    const int64_t E = tc->E, R = tc->rows, n = E * R;
    cg_group g = {.kind = CG_EW, .E = E, .rows = R, .n_steps = tc->n, .n_params = 2};
    float *x = rnd(n, 1.5f), *ops[CG_MAX_PARAMS] = {0};
    void *slots[CG_MAX_PARAMS] = {0};
    cu_ew_chain hc = {.n = tc->n};
    float *ref = malloc((size_t)n * 4), *tmp = malloc((size_t)n * 4);
    memcpy(ref, x, (size_t)n * 4);
    slots[1] = up(x, (size_t)n * 4);
    for (int k = 0; k < tc->n; k++) {
        g.st[k] = tc->st[k];
        hc.st[k] = (cu_ew_step){.op = tc->st[k].op, .f = tc->st[k].f, .bcast = tc->st[k].bcast};
        const cg_step *s = &tc->st[k];
        if (s->op == CG_EW_ADD || s->op == CG_EW_MUL) {
            const int64_t on = s->bcast ? E : n;
            const int slot = g.n_params++;
            g.st[k].slot = slot;
            ops[slot] = rnd(on, s->op == CG_EW_MUL ? 1.0f : 0.7f);
            slots[slot] = up(ops[slot], (size_t)on * 4);
            hc.st[k].opd = slots[slot];
            /* reference: op_add/op_mul take the operand length (broadcast when it is one row) */
            if (s->op == CG_EW_ADD) op_add(tmp, ref, ops[slot], n, on);
            else op_mul(tmp, ref, ops[slot], n, on);
        } else if (s->op == CG_EW_SCALE) op_scale(tmp, ref, n, s->f);
        else if (s->op == CG_EW_SOFTCAP) op_softcap(tmp, ref, n, s->f);
        else if (s->op == CG_EW_SILU) op_silu(tmp, ref, n);
        else if (s->op == CG_EW_GELU) op_gelu_tanh(tmp, ref, n);
        else op_rms_norm(tmp, ref, E, 0, R, s->f);
        memcpy(ref, tmp, (size_t)n * 4);
    }
    slots[0] = up(NULL, (size_t)n * 4);
    float *hand = malloc((size_t)n * 4);
    CHECK(cu_memset(slots[0], 0xFF, (size_t)n * 4, S) == SB_OK);
    CHECK(cu_ew_rows(S, slots[0], slots[1], E, R, &hc) == SB_OK);
    down(hand, slots[0], (size_t)n * 4);
    char what[160];
    snprintf(what, sizeof what, "ew %s E=%lld rows=%lld", tc->name, (long long)E, (long long)R);
    ew_ctx c = {ref, hand};
    each_variant(&g, slots, (size_t)n * 4, ew_check, &c, what);
    for (int k = 0; k < CG_MAX_PARAMS; k++) {
        cu_free(slots[k]);
        free(ops[k]);
    }
    free(x), free(ref), free(tmp), free(hand);
}

// ---- quantizers ----

typedef struct q_ctx {
    const float *f32;      /* the unquantized reference values */
    const void *cpu_q;     /* the CPU reference quantization (q8_K: must match) */
    const void *hand;      /* the hand-written kernel's blocks */
    size_t bytes;
    void *sum_dev;         /* add+norm: the sum's device buffer, and its expected value */
    const float *sum_ref;
} q_ctx;

static void q_check(const cg_group *g, const void *out, const char *label, void *vctx) {
    q_ctx *c = vctx;
    const int64_t n = g->E * g->rows;
    float *y = malloc((size_t)n * 4), *r = malloc((size_t)n * 4);
    int64_t nan;
    deq(y, out, g->xq, n);
    expect(nmse(y, c->f32, n, &nan), 5e-4, label);
    if (g->xq == SB_TYPE_Q8_K) { /* after a GLU the device's expf/tanhf may differ from the host's by an ulp: a rare q off by one */
        deq(r, c->cpu_q, g->xq, n);
        const double e = nmse(y, r, n, &nan), lim = g->kind == CG_GLU_QUANT ? 1e-6 : 1e-10;
        CHECKF(e <= lim, "%s: vs the CPU q8_K reference NMSE %.3e (limit %.0e)", label, e, lim);
    }
    deq(r, c->hand, g->xq, n);
    double h = nmse(y, r, n, &nan);
    size_t same = 0;
    for (size_t i = 0; i < c->bytes; i++) same += ((const uint8_t *)out)[i] == ((const uint8_t *)c->hand)[i];
    CHECKF(h <= 1e-10, "%s: vs hand-written NMSE %.3e", label, h);
    if (same != c->bytes) printf("  (%zu of %zu bytes differ from the hand-written kernel's)\n", c->bytes - same, c->bytes);
    if (c->sum_dev) {
        float *sum = malloc((size_t)n * 4);
        down(sum, c->sum_dev, (size_t)n * 4);
        CHECKF(!memcmp(sum, c->sum_ref, (size_t)n * 4), "%s: the written sum differs from x + b", label);
        free(sum);
    }
    free(y), free(r);
}

/* kind: CG_QUANTIZE, CG_RMS_NORM_QUANT (w?), CG_ADD_RMS_NORM_QUANT (inplace: sum over x), CG_GLU_QUANT (gelu?) */
static void test_quant(cg_kind kind, int xq, int64_t E, int64_t R, bool flag, bool inplace) {
    const int64_t n = E * R;
    const float eps = 1e-6f;
    const uint64_t rb = op_row_bytes(xq, E);
    const size_t bytes = (size_t)(rb * (uint64_t)R);
    float *x = rnd(n, 2.0f), *b = rnd(n, 1.0f), *w = rnd(E, 1.0f);
    float *f32 = malloc((size_t)n * 4), *sum = malloc((size_t)n * 4), *tmp = malloc((size_t)E * 4);
    uint8_t *cpu_q = malloc(bytes), *hand = malloc(bytes);
    cg_group g = {.kind = kind, .E = E, .rows = R, .xq = xq, .eps = eps};
    g.hand_reg = (kind == CG_RMS_NORM_QUANT || kind == CG_ADD_RMS_NORM_QUANT) && cu_act_fast(); /* the layout of the hand-written kernel below */
    void *slots[CG_MAX_PARAMS] = {0};
    slots[0] = up(NULL, bytes);
    void *dx = up(x, (size_t)n * 4), *db = up(b, (size_t)n * 4), *dw = up(w, (size_t)E * 4), *dsum = NULL;
    for (int64_t i = 0; i < n; i++) sum[i] = x[i] + b[i];
    sb_status hs = SB_OK;
    char what[160];
    CHECK(cu_memset(slots[0], 0xFF, bytes, S) == SB_OK);
    switch (kind) {
    case CG_QUANTIZE:
        g.n_params = 2, slots[1] = dx;
        memcpy(f32, x, (size_t)n * 4);
        for (int64_t r = 0; r < R; r++) op_quantize_row(cpu_q + rb * (uint64_t)r, xq, x + r * E, E);
        hs = cu_quantize_act(S, xq, slots[0], dx, E, R);
        snprintf(what, sizeof what, "quantize %s E=%lld rows=%lld", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    case CG_RMS_NORM_QUANT:
        g.n_params = 3, g.has_w = flag, slots[1] = dx, slots[2] = flag ? dw : NULL;
        for (int64_t r = 0; r < R; r++) {
            op_rms_norm_row(f32 + r * E, x + r * E, E, eps);
            if (flag) op_mul(f32 + r * E, f32 + r * E, w, E, E);
            op_rms_norm_quant_row(cpu_q + rb * (uint64_t)r, xq, x + r * E, flag ? w : NULL, E, eps, tmp);
        }
        hs = cu_rms_norm_quant(S, xq, slots[0], dx, flag ? dw : NULL, E, R, eps);
        snprintf(what, sizeof what, "rms_norm%s_quant %s E=%lld rows=%lld", flag ? "*w" : "", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    case CG_ADD_RMS_NORM_QUANT:
        g.n_params = 5, g.has_w = true, slots[1] = dx, slots[2] = dw, slots[3] = db;
        dsum = inplace ? dx : up(NULL, (size_t)n * 4);
        slots[4] = dsum;
        for (int64_t r = 0; r < R; r++) {
            op_rms_norm_row(f32 + r * E, sum + r * E, E, eps);
            op_mul(f32 + r * E, f32 + r * E, w, E, E);
            op_rms_norm_quant_row(cpu_q + rb * (uint64_t)r, xq, sum + r * E, w, E, eps, tmp);
        }
        /* the hand-written kernel on its own copy of x (in place it overwrites x) */
        {
            void *hx = up(x, (size_t)n * 4), *hsum = inplace ? hx : up(NULL, (size_t)n * 4);
            hs = cu_add_rms_norm_quant(S, xq, slots[0], hsum, hx, db, dw, E, R, eps);
            CHECK(cu_stream_sync(S) == SB_OK);
            cu_free(hx);
            if (!inplace) cu_free(hsum);
        }
        snprintf(what, sizeof what, "add+rms_norm*w_quant %s E=%lld rows=%lld%s", ir_dtype_name(xq), (long long)E, (long long)R,
                 inplace ? " (sum over x)" : "");
        break;
    case CG_GLU_QUANT:
        g.n_params = 3, g.gelu = flag, slots[1] = dx, slots[2] = db;
        if (flag) op_geglu(f32, x, b, n);
        else op_swiglu(f32, x, b, n);
        for (int64_t r = 0; r < R; r++) op_glu_quant_row(cpu_q + rb * (uint64_t)r, xq, x + r * E, b + r * E, E, flag, tmp);
        hs = cu_glu_quant(S, xq, slots[0], dx, db, E, R, flag);
        snprintf(what, sizeof what, "%s_quant %s E=%lld rows=%lld", flag ? "geglu" : "swiglu", ir_dtype_name(xq), (long long)E, (long long)R);
        break;
    default: break;
    }
    CHECKF(hs == SB_OK, "hand-written %s: %s", what, sb_last_error());
    down(hand, slots[0], bytes);
    /* in place: every variant's launch must start from the original x (the kernel overwrites it) */
    q_ctx c = {.f32 = f32, .cpu_q = cpu_q, .hand = hand, .bytes = bytes, .sum_dev = kind == CG_ADD_RMS_NORM_QUANT && !inplace ? dsum : NULL,
               .sum_ref = sum};
    if (inplace) {
        cg_variant v[CG_MAX_VARIANTS];
        const int nv = cg_variants(&g, v);
        for (int k = 0; k < nv; k++) { /* one variant at a time, x re-uploaded before each */
            CHECK(cu_memcpy_h2d(dx, x, (size_t)n * 4, S) == SB_OK);
            cg_group one = g;
            char *src = NULL, name[40], label[200];
            cg_binary bin;
            void *fn = NULL;
            snprintf(label, sizeof label, "%s [%d thr, %d rows/blk%s]", what, v[k].threads, v[k].rpb, v[k].reg ? ", regs" : "");
            sb_status s = cg_emit(&one, v[k], &src, name);
            if (s == SB_OK) s = cg_get_binary(src, name, arch, &bin);
            if (s == SB_OK) s = cu_gen_load(bin.data, name, &fn);
            unsigned grid, block;
            cg_geometry(&one, v[k], &grid, &block);
            cg_params prm = {.rows = one.rows};
            memcpy(prm.p, slots, sizeof prm.p);
            if (s == SB_OK) s = cu_memset(slots[0], 0xFF, bytes, S);
            if (s == SB_OK) s = cu_gen_launch(S, fn, grid, block, &prm);
            if (s == SB_OK) s = cu_stream_sync(S);
            CHECKF(s == SB_OK, "%s: %s", label, sb_last_error());
            free(src);
            if (s != SB_OK) continue;
            uint8_t *out = malloc(bytes);
            down(out, slots[0], bytes);
            c.sum_dev = dx;
            q_check(&one, out, label, &c);
            free(out);
        }
    } else {
        each_variant(&g, slots, bytes, q_check, &c, what);
    }
    cu_free(slots[0]), cu_free(dx), cu_free(db), cu_free(dw);
    if (dsum && !inplace) cu_free(dsum);
    free(x), free(b), free(w), free(f32), free(sum), free(tmp), free(cpu_q), free(hand);
}

// ---- part 3: every variant gives the hand-written kernel's bits ----

/* the group in words: kind, shape, quant type, steps (op codes) */
static void group_words(const cg_group *g, char *out, size_t cap) {
    int k = snprintf(out, cap, "%s E=%lld rows=%lld", cg_kind_name(g->kind), (long long)g->E, (long long)g->rows);
    if (g->kind != CG_EW) k += snprintf(out + k, cap - (size_t)k, " %s%s%s%s", ir_dtype_name(g->xq), g->has_w ? " w" : "",
                                         g->gelu ? " gelu" : "", g->hand_reg ? " hand=regs" : g->kind == CG_RMS_NORM_QUANT || g->kind == CG_ADD_RMS_NORM_QUANT ? " hand=loop" : "");
    for (int j = 0; g->kind == CG_EW && j < g->n_steps && k < (int)cap - 32; j++)
        k += snprintf(out + k, cap - (size_t)k, "%sop%d%s%s", j ? "," : " [", g->st[j].op, g->st[j].slot ? (g->st[j].bcast ? "(b)" : "(full)") : "",
                      j == g->n_steps - 1 ? "]" : "");
}

/* the hand-written launch the executor makes for g (run_node), on slots p */
static sb_status hand_launch(const cg_group *g, void *const *p) {
    switch (g->kind) {
    case CG_EW: {
        cu_ew_chain c = {.n = g->n_steps};
        for (int k = 0; k < g->n_steps; k++)
            c.st[k] = (cu_ew_step){.op = g->st[k].op, .f = g->st[k].f, .bcast = g->st[k].bcast, .opd = g->st[k].slot ? p[g->st[k].slot] : NULL};
        return cu_ew_rows(S, p[0], p[1], g->E, g->rows, &c);
    }
    case CG_QUANTIZE: return cu_quantize_act(S, g->xq, p[0], p[1], g->E, g->rows);
    case CG_RMS_NORM_QUANT: return cu_rms_norm_quant(S, g->xq, p[0], p[1], g->has_w ? p[2] : NULL, g->E, g->rows, g->eps);
    case CG_ADD_RMS_NORM_QUANT:
        return cu_add_rms_norm_quant(S, g->xq, p[0], p[4], p[1], p[3], g->has_w ? p[2] : NULL, g->E, g->rows, g->eps);
    case CG_GLU_QUANT: return cu_glu_quant(S, g->xq, p[0], p[1], p[2], g->E, g->rows, g->gelu);
    }
    return sb_fail(SB_ERR_INTERNAL, "test: group kind %d", (int)g->kind);
}

/* first index where a and b differ (elements of `unit` bytes), -1 when identical */
static int64_t first_diff(const void *a, const void *b, size_t bytes, size_t unit) {
    if (!memcmp(a, b, bytes)) return -1;
    for (size_t i = 0; i < bytes; i++)
        if (((const uint8_t *)a)[i] != ((const uint8_t *)b)[i]) return (int64_t)(i / unit);
    return -1;
}

static int bits_groups, bits_variants;

/* the distinct groups of every model, collected first so their bundles compile in parallel */
typedef struct bits_item {
    cg_group g;
    char where[256], key[48], bundle[40], kn[CG_MAX_VARIANTS][40];
    cg_variant v[CG_MAX_VARIANTS];
    int nv;
    char *src;
} bits_item;
static bits_item *bits;
static int n_bits, cap_bits;

static void bits_add(const char *where, const cg_group *g) {
    if (n_bits == cap_bits) {
        bits_item *nb = realloc(bits, (size_t)(cap_bits = cap_bits ? 2 * cap_bits : 256) * sizeof *bits);
        CHECKF(nb != NULL, "part 3: out of memory at %d groups", n_bits);
        if (!nb) return;
        bits = nb;
    }
    bits_item *it = &bits[n_bits];
    memset(it, 0, sizeof *it);
    it->g = *g;
    it->nv = cg_variants(g, it->v);
    sb_status s = cg_emit_bundle(g, it->v, it->nv, &it->src, it->bundle, it->kn);
    CHECKF(s == SB_OK, "%s: emit: %s", where, sb_last_error());
    if (s != SB_OK) return;
    snprintf(it->key, sizeof it->key, "%s/%lld", it->bundle, (long long)g->rows);
    for (int i = 0; i < n_bits; i++)
        if (!strcmp(bits[i].key, it->key)) {
            free(it->src);
            return;
        }
    snprintf(it->where, sizeof it->where, "%s", where);
    n_bits++;
}

/* g's hand-written kernel, then every variant, on the same inputs: byte-identical outputs */
static void bits_group(const bits_item *it, const cg_binary *bin) {
    const cg_group *g = &it->g;
    const char *where = it->where;
    const cg_variant *v = it->v;
    const int nv = it->nv;
    char gw[256];
    group_words(g, gw, sizeof gw);
    bits_groups++;
    cu_config cfg = *cu_cfg();
    if (g->kind == CG_RMS_NORM_QUANT || g->kind == CG_ADD_RMS_NORM_QUANT) cfg.act_fast = g->hand_reg; /* the layout the variants follow */
    const cu_config *was = cu_cfg_bind(&cfg);
    const int64_t E = g->E, R = g->rows, n = E * R;
    const bool quant = g->kind != CG_EW, add = g->kind == CG_ADD_RMS_NORM_QUANT;
    const size_t out_bytes = quant ? (size_t)(op_row_bytes(g->xq, E) * (uint64_t)R) : (size_t)n * 4;
    void *p[CG_MAX_PARAMS] = {0};
    float *h[CG_MAX_PARAMS] = {0};
    p[0] = up(NULL, out_bytes);
    h[1] = rnd(n, 1.5f), p[1] = up(h[1], (size_t)n * 4);
    for (int k = 0; g->kind == CG_EW && k < g->n_steps; k++)
        if (g->st[k].slot) {
            const int64_t on = g->st[k].bcast ? E : n, sl = g->st[k].slot;
            h[sl] = rnd(on, g->st[k].op == CG_EW_MUL ? 1.0f : 0.7f), p[sl] = up(h[sl], (size_t)on * 4);
        }
    if ((g->kind == CG_RMS_NORM_QUANT || add) && g->has_w) h[2] = rnd(E, 1.0f), p[2] = up(h[2], (size_t)E * 4);
    if (g->kind == CG_GLU_QUANT) h[2] = rnd(n, 1.0f), p[2] = up(h[2], (size_t)n * 4);
    if (add) h[3] = rnd(n, 1.0f), p[3] = up(h[3], (size_t)n * 4), p[4] = up(NULL, (size_t)n * 4); /* the sum: its own buffer, inputs stay */
    uint8_t *hand = malloc(out_bytes), *got = malloc(out_bytes);
    float *hsum = malloc((size_t)n * 4), *gsum = malloc((size_t)n * 4);
    sb_status s = cu_memset(p[0], 0xFF, out_bytes, S);
    if (s == SB_OK && add) s = cu_memset(p[4], 0xFF, (size_t)n * 4, S);
    if (s == SB_OK) s = hand_launch(g, p);
    if (s == SB_OK) s = cu_stream_sync(S);
    CHECKF(s == SB_OK, "%s %s: hand-written kernel: %s", where, gw, sb_last_error());
    if (s == SB_OK) {
        down(hand, p[0], out_bytes);
        if (add) down(hsum, p[4], (size_t)n * 4);
    }
    for (int k = 0; s == SB_OK && k < nv; k++) {
        void *fn = NULL;
        unsigned grid, block;
        cg_geometry(g, v[k], &grid, &block);
        cg_params prm = {.rows = R};
        memcpy(prm.p, p, sizeof prm.p);
        sb_status ks = cu_gen_load(bin->data, it->kn[k], &fn);
        if (ks == SB_OK) ks = cu_memset(p[0], 0xFF, out_bytes, S);
        if (ks == SB_OK && add) ks = cu_memset(p[4], 0xFF, (size_t)n * 4, S);
        if (ks == SB_OK) ks = cu_gen_launch(S, fn, grid, block, &prm);
        if (ks == SB_OK) ks = cu_stream_sync(S);
        CHECKF(ks == SB_OK, "%s %s variant %d [%d thr, %d rows/blk%s]: %s", where, gw, k, v[k].threads, v[k].rpb, v[k].reg ? ", regs" : "", sb_last_error());
        if (ks != SB_OK) continue;
        bits_variants++;
        down(got, p[0], out_bytes);
        const int64_t d = first_diff(got, hand, out_bytes, quant ? 1 : 4);
        if (d >= 0 && !quant)
            fprintf(stderr, "  %s: element %lld (row %lld, col %lld): variant %.9g (%#x), hand-written %.9g (%#x)\n", where, (long long)d,
                    (long long)(d / E), (long long)(d % E), ((float *)got)[d], ((uint32_t *)got)[d], ((float *)hand)[d], ((uint32_t *)hand)[d]);
        CHECKF(d < 0, "%s %s variant %d [%d thr, %d rows/blk%s] differs from the hand-written kernel: first at %s %lld", where, gw, k, v[k].threads, v[k].rpb,
               v[k].reg ? ", regs" : "", quant ? "byte" : "element", (long long)d);
        if (add) {
            down(gsum, p[4], (size_t)n * 4);
            const int64_t ds = first_diff(gsum, hsum, (size_t)n * 4, 4);
            CHECKF(ds < 0, "%s %s variant %d [%d thr, %d rows/blk%s]: the written sum differs from the hand-written kernel's: first at element %lld", where, gw, k,
                   v[k].threads, v[k].rpb, v[k].reg ? ", regs" : "", (long long)ds);
        }
    }
    cu_cfg_bind(was);
    for (int k = 0; k < CG_MAX_PARAMS; k++) {
        cu_free(p[k]);
        free(h[k]);
    }
    free(hand), free(got), free(hsum), free(gsum);
}

/* compile every collected bundle (in parallel), then check each group */
static void bits_run(void) {
    const char **srcs = calloc((size_t)n_bits + 1, sizeof *srcs), **names = calloc((size_t)n_bits + 1, sizeof *names);
    cg_binary *bin = calloc((size_t)n_bits + 1, sizeof *bin);
    sb_status *st = calloc((size_t)n_bits + 1, sizeof *st);
    CHECK(srcs && names && bin && st);
    if (srcs && names && bin && st) {
        for (int i = 0; i < n_bits; i++) srcs[i] = bits[i].src, names[i] = bits[i].bundle;
        if (n_bits) cg_get_binaries(srcs, names, n_bits, arch, 0, bin, st);
        for (int i = 0; i < n_bits; i++) {
            CHECKF(st[i] == SB_OK, "%s: compile of %s failed", bits[i].where, bits[i].bundle);
            if (st[i] == SB_OK) bits_group(&bits[i], &bin[i]);
        }
    }
    for (int i = 0; i < n_bits; i++) free(bits[i].src);
    free(srcs), free(names), free(bin), free(st), free(bits);
    bits = NULL, n_bits = cap_bits = 0;
}

static bool coverable(const ir_node *n) {
    switch (n->op) {
    case IR_OP_FUSED: case IR_OP_ADD: case IR_OP_MUL: case IR_OP_SCALE: case IR_OP_SOFTCAP: case IR_OP_SILU: case IR_OP_GELU_TANH:
    case IR_OP_RMS_NORM: case IR_OP_QUANTIZE: case IR_OP_RMS_NORM_QUANT: case IR_OP_ADD_RMS_NORM_QUANT: case IR_OP_GLU_QUANT: return true;
    default: return false;
    }
}

/* node i of the plan as a group (and the add pair), in each hand-written layout it can meet */
static void bits_node(const char *model, int T, const ir_graph *g, int32_t i, ir_ref add) {
    cg_group grp;
    if (cg_group_from_node(g, i, add, &grp) != SB_OK) return; /* refusals: codegen_models' and part 2's business */
    char where[256];
    snprintf(where, sizeof where, "%s T=%d node %%%d %s \"%s\"%s", model, T, (int)i, ir_ops[g->nodes[i].op].name, g->nodes[i].name, add != IR_NONE ? " + its ADD" : "");
    if (grp.kind != CG_RMS_NORM_QUANT && grp.kind != CG_ADD_RMS_NORM_QUANT) {
        bits_add(where, &grp);
        return;
    }
    for (int aq = 0; aq < 2; aq++) { /* act_fast off (the executor's default) and on: bits_group sets it for the hand-written kernel */
        grp.hand_reg = aq;
        bits_add(where, &grp);
    }
}

static void bits_model(const char *dir, const char *name) {
    char path[8200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rt_model *m = NULL;
    sb_status s = rt_model_load(path, NULL, &m);
    if (s == SB_ERR_MODEL_ARCH) return; /* not built by this runtime (test_model_refs checks the refusal) */
    CHECKF(s == SB_OK, "%s: %s", name, sb_last_error());
    if (s != SB_OK) return;
    const int Ts[2] = {1, 9};
    for (int k = 0; k < 2; k++) {
        ir_graph *g = NULL;
        plan *p = NULL;
        plan_target t;
        exec_cuda_target(NULL, &t);
        s = ir_graph_create(&g);
        rt_build bld = {.g = g, .m = m, .T = Ts[k], .n_out = Ts[k], .n_ctx = 64, .kv_type = SB_TYPE_F32};
        if (s == SB_OK) s = rt_build_decoder(&bld);
        if (s == SB_OK) s = plan_build(g, &t, NULL, &p);
        CHECKF(s == SB_OK, "%s T=%d: %s", name, Ts[k], sb_last_error());
        const ir_graph *pg = s == SB_OK ? p->g : NULL; /* the planned graph: fused chains and quantizers, as the executor sees it */
        for (int32_t i = 0; pg && i < pg->n_nodes; i++) {
            const ir_node *n = &pg->nodes[i];
            if (!coverable(n)) continue;
            bits_node(name, Ts[k], pg, i, IR_NONE);
            if (n->op == IR_OP_RMS_NORM_QUANT && pg->nodes[n->src[0]].op == IR_OP_ADD) {
                const ir_node *a = &pg->nodes[n->src[0]];
                if (ir_nelem(&pg->nodes[a->src[0]]) == ir_nelem(a) && ir_nelem(&pg->nodes[a->src[1]]) == ir_nelem(a)) bits_node(name, Ts[k], pg, i, n->src[0]);
            }
        }
        plan_free(p);
        ir_graph_free(g);
    }
    rt_model_free(m);
}

// ---- through the executor ----

/* codegen: cu_config.codegen (0 hand-written only, 1 autotuned, 2 generated only); fuse: cu_config.fuse */
static sb_status eval(const rt_model *m, const int32_t *tok, int64_t np, int64_t nd, int64_t V, float *out, int codegen, int fuse) {
    rt_session *s;
    rt_session_params sp = {.n_ctx = np + nd + 8, .n_threads = 2, .device = 1};
    SB_TRY(rt_session_create(m, &sp, &s));
    exec_cuda *cx = backend_cuda_exec(rt_session_backend(s));
    if (!cx) {
        rt_session_free(s);
        return sb_fail(SB_ERR_INTERNAL, "test: the session has no CUDA backend");
    }
    cu_config c = *exec_cuda_config(cx);
    c.codegen = codegen, c.fuse = fuse;
    exec_cuda_set_config(cx, &c);
    sb_status st = rt_session_eval(s, tok, np, true, out);
    for (int64_t i = 0; st == SB_OK && i < nd; i++) {
        st = rt_session_eval(s, &tok[np + i], 1, false, NULL);
        if (st == SB_OK) memcpy(out + (np + i) * V, rt_session_logits(s), (size_t)V * 4);
    }
    rt_session_free(s);
    return st;
}

static void test_model(const char *file) {
    const char *path = test_data_path(file);
    if (access(path, R_OK) != 0) {
        printf("skip %s: not found\n", path);
        return;
    }
    rt_model *m = NULL;
    CHECKF(rt_model_load(path, NULL, &m) == SB_OK, "%s: %s", path, sb_last_error());
    if (!m) return;
    const int64_t V = 512, np = 9, nd = 4, n = np + nd;
    int32_t tok[16];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(3 + (i * 37) % 500);
    float *a = malloc((size_t)(n * V) * 4), *b = malloc((size_t)(n * V) * 4), *c = malloc((size_t)(n * V) * 4);
    sb_status s0 = eval(m, tok, np, nd, V, a, 0, 1);
    CHECKF(s0 == SB_OK, "%s hand-written: %s", file, sb_last_error());
    cg_reset_stats();
    sb_status s1 = eval(m, tok, np, nd, V, b, 2, 1);
    CHECKF(s1 == SB_OK, "%s generated: %s", file, sb_last_error());
    cg_stats st = cg_get_stats();
    /* generated kernels in use: loaded now, or already in memory from an earlier model with the same groups */
    CHECKF(st.kernels + st.memory > 0 && st.tuned + st.tune_hits > 0, "%s: no generated kernels (%lld loaded, %lld memory hits) or groups (%lld tuned)",
           file, (long long)st.kernels, (long long)st.memory, (long long)st.tuned);
    char line[320], label[200];
    cg_stats_line(line, sizeof line);
    printf("%s first run: %s\n", file, line);
    int64_t nan;
    snprintf(label, sizeof label, "%s: generated vs hand-written logits (prefill + graph decode)", file);
    if (s0 == SB_OK && s1 == SB_OK) expect(nmse(b, a, n * V, &nan), 1e-8, label);
    /* a second process (memory caches dropped): everything from the disk cache */
    cg_cache_forget_memory();
    cg_reset_stats();
    sb_status s2 = eval(m, tok, np, nd, V, c, 2, 1);
    st = cg_get_stats();
    cg_stats_line(line, sizeof line);
    printf("%s second run: %s\n", file, line);
    CHECKF(s2 == SB_OK && st.compiled == 0 && st.disk > 0 && st.tuned == 0 && st.tune_hits > 0, "%s second run: %s", file, line);
    if (s2 == SB_OK && s1 == SB_OK) {
        snprintf(label, sizeof label, "%s: disk-cached kernels vs the first run", file);
        expect(nmse(c, b, n * V, &nan), 1e-8, label);
    }
    /* without the executor's fusions (cu_config.fuse 0): single ops and
     * unfused norm/GLU quantizations run as generated kernels too */
    sb_status u0 = eval(m, tok, np, nd, V, a, 0, 0);
    sb_status u1 = eval(m, tok, np, nd, V, b, 2, 0);
    CHECKF(u0 == SB_OK && u1 == SB_OK, "%s unfused: %s", file, sb_last_error());
    if (u0 == SB_OK && u1 == SB_OK) {
        snprintf(label, sizeof label, "%s: unfused executor, generated vs hand-written", file);
        expect(nmse(b, a, n * V, &nan), 1e-8, label);
    }
    /* the autotuned mode (cu_config.codegen 1): the hand-written kernel is one more candidate (fresh caches) */
    char xdg[512], *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    snprintf(xdg, sizeof xdg, "%s/default-mode", old ? old : "/tmp");
    setenv("XDG_CACHE_HOME", xdg, 1);
    cg_cache_forget_memory();
    cg_reset_stats();
    sb_status s3 = eval(m, tok, np, nd, V, c, 1, 1);
    st = cg_get_stats();
    cg_stats_line(line, sizeof line);
    printf("%s default mode: %s\n", file, line);
    CHECKF(s3 == SB_OK && st.tuned + st.tune_hits > 0, "%s default mode: %s", file, s3 ? sb_last_error() : line);
    if (s3 == SB_OK && s0 == SB_OK) {
        snprintf(label, sizeof label, "%s: default mode (generated or hand-written per group) vs generated only", file);
            sb_status s4 = eval(m, tok, np, nd, V, b, 2, 1);
        if (s4 == SB_OK) expect(nmse(c, b, n * V, &nan), 1e-8, label);
    }
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    free(old);
    free(a), free(b), free(c);
    rt_model_free(m);
}

#endif

int main(void) {
#ifndef HAVE_KERNELS
    printf("SKIP: this build has no CUDA backend\n");
    return 0;
#else
    char why[512];
    if (!exec_cuda_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 0;
    }
    if (cg_nvrtc_load() != SB_OK) {
        printf("SKIP: %s\n", sb_last_error());
        return 0;
    }
    char tmp[] = "/tmp/sb_cuda_codegen.XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    setenv("XDG_CACHE_HOME", tmp, 1);
    char dev[128];
    int ma = 0, mi = 0;
    if (cu_set_device(0) != SB_OK || cu_device_name(0, dev, sizeof dev, &ma, &mi) != SB_OK || cu_stream_create(&S) != SB_OK) {
        printf("FAIL: device setup: %s\n", sb_last_error());
        return 1;
    }
    arch = ma * 10 + mi;
    printf("%s (sm_%d), NVRTC %d.%d, seed %#llx\n", dev, arch, cg_nvrtc_version() / 1000, cg_nvrtc_version() % 1000 / 10, (unsigned long long)seed);

    const ew_case ew[] = {
        {"add,rms,mul(b),softcap,gelu", 896, 1, 5, {{CG_EW_ADD, 0, 0, 0}, {CG_EW_RMS_NORM, 0, 0, 1e-6f}, {CG_EW_MUL, 0, 1, 0}, {CG_EW_SOFTCAP, 0, 0, 30.f}, {CG_EW_GELU, 0, 0, 0}}},
        {"add,rms,mul(b),softcap,gelu", 896, 7, 5, {{CG_EW_ADD, 0, 0, 0}, {CG_EW_RMS_NORM, 0, 0, 1e-6f}, {CG_EW_MUL, 0, 1, 0}, {CG_EW_SOFTCAP, 0, 0, 30.f}, {CG_EW_GELU, 0, 0, 0}}},
        {"scale,silu,add(b)", 100, 9, 3, {{CG_EW_SCALE, 0, 0, 0.125f}, {CG_EW_SILU, 0, 0, 0}, {CG_EW_ADD, 0, 1, 0}}},
        {"rms,mul(b)", 2048, 3, 2, {{CG_EW_RMS_NORM, 0, 0, 1e-5f}, {CG_EW_MUL, 0, 1, 0}}},
        {"silu,mul,scale,rms", 512, 16, 4, {{CG_EW_SILU, 0, 0, 0}, {CG_EW_MUL, 0, 0, 0}, {CG_EW_SCALE, 0, 0, 0.5f}, {CG_EW_RMS_NORM, 0, 0, 1e-6f}}},
        {"add", 4864, 2, 1, {{CG_EW_ADD, 0, 0, 0}}},
        {"softcap", 512, 5, 1, {{CG_EW_SOFTCAP, 0, 0, 50.f}}},
        {"gelu,mul,add(b),scale,silu,softcap,mul(b)", 1152, 8, 7,
         {{CG_EW_GELU, 0, 0, 0}, {CG_EW_MUL, 0, 0, 0}, {CG_EW_ADD, 0, 1, 0}, {CG_EW_SCALE, 0, 0, 3.f}, {CG_EW_SILU, 0, 0, 0}, {CG_EW_SOFTCAP, 0, 0, 5.f}, {CG_EW_MUL, 0, 1, 0}}},
    };
    for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++) test_ew(&ew[i]);
    const int xqs[2] = {SB_TYPE_Q8_1, SB_TYPE_Q8_K};
    for (int q = 0; q < 2; q++) {
        const int xq = xqs[q];
        test_quant(CG_QUANTIZE, xq, 1024, 1, false, false);
        test_quant(CG_QUANTIZE, xq, 4864, 9, false, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 1024, 1, true, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 4096, 7, true, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 512, 9, false, false);
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 1024, 1, true, false);
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 2048, 8, true, false);
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 1024, 3, true, true);
        test_quant(CG_GLU_QUANT, xq, 4864, 1, false, false);
        test_quant(CG_GLU_QUANT, xq, 1024, 7, true, false);
        test_quant(CG_GLU_QUANT, xq, 512, 16, false, false);
        test_quant(CG_RMS_NORM_QUANT, xq, 33024, 2, true, false); /* too long for registers: quant_row's loop */
        test_quant(CG_ADD_RMS_NORM_QUANT, xq, 33024, 2, true, false);
        if (xq == SB_TYPE_Q8_1) {
            test_quant(CG_RMS_NORM_QUANT, xq, 896, 1, true, false); /* 28 blocks: not a multiple of a warp count */
            test_quant(CG_GLU_QUANT, xq, 4864, 3, true, false);
        }
    }
    cg_stats st = cg_get_stats();
    printf("part 1: %lld kernels compiled in %.0f ms\n", (long long)st.compiled, st.compile_ms);

    const int nm = ref_for_each_model(test_data_path("models"), getenv("SB_CODEGEN_MODEL"), bits_model);
    bits_run();
    printf("part 3: %d models, %d distinct groups, %d variant launches: every one bit-identical to the hand-written kernel%s\n", nm, bits_groups,
           bits_variants, test_failed_ ? " (unless FAILs above)" : "");
    CHECKF(nm <= 0 || bits_groups > 0, "part 3: no groups in %d models", nm);

    static const char *models[] = {"models/test-qwen2-q4_0.gguf", "models/test-qwen2-q4_k_m.gguf", "models/test-gemma3-q4_k_m.gguf",
                                   "models/test-llama-q4_k_m.gguf", "models/test-qwen2-f32.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) test_model(models[i]);
    cu_stream_destroy(S);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return test_summary();
#endif
}
