/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_ops.c — every CUDA kernel family against the plain-C reference ops, on
 * fresh random inputs, through small graphs: the same graph is planned for the CUDA target (run by
 * exec_cuda with the device arena poisoned with NaN before each run) and for the reference target
 * (run by exec_cpu: unfused ops_ref.c, f32 activations, f64 matmul sums), and the outputs are
 * compared by NMSE. Families: get_rows (every readable type; the table kept in host memory, also
 * across graph replays, or uploaded), slice, softmax, the tensor ABI's layer_norm / exact gelu /
 * concat / permute (also value by value: within 1e-6, the copies the same bytes), matmul (q8_1 dp4a GEMV per type and
 * T = 1..13 including 8-token tiles; f32-activation GEMV for float and other types; the tiled F32
 * GEMM at T > 8 with ragged tiles and K % 4 != 0; F16/BF16 through the 128 x 128 tile), fused RMSNorm
 * chains, fused chains with a quantize tail (bit-identical to the kernels apart), RMSNorm+quantize, GLU(+quantize), elementwise (scale/softcap/silu/gelu), RoPE
 * NORMAL/NEOX with freq factors (also 512-dim heads), ropes and stores with their head norms (Qwen3 /
 * Gemma 4 q, k and v norms: bit for bit against the norm and rope apart), kv_store + attention (F32/F16 cache, GQA,
 * window, softcap, heads of 320 and 512 on the paged kernel (with key splits),
 * prefill and split-K decode; both k_attention.cu variants; variant 4's decode kernel k_attn_decode.cu
 * at depths 0..4100 with several steps on one executor; paged attention (k_attn_paged.cu: tokens of
 * three sequences with shuffled block tables in one step; at decode with Q's RoPE on load); the flash-attention prefill of k_fattn.cu
 * and, for F16 caches with head_dim 64 / 128, of k_fattn_mma.cu on tensor cores — then without it),
 * the int8 tensor-core prefill GEMM (k_mma.cu) on model shapes with ragged tiles, and its small-T
 * split-K path (cu_config.mma_small) over every type x T 9..64 x N 16..9000; large-T GEMMs through
 * cuBLASLt (k_blas.cu) for F16 / BF16 and dequantized Q4_K / Q6_K / Q8_0 / Q4_0 / Q5_K weights, and
 * the default route there (quantized from T 256: cu_config.blas_quant). Each kernel's test pins the
 * settings that route its shapes to it (the int8 MMA tests: blas_quant 0, mma_config_pin; the half
 * types' tiles: blas_min_t 0).
 * Limits: exact paths 1e-10 (attention 1e-9; 2e-6 on f16 tensor cores: flash_limit); 8-bit-activation paths 5e-4 against the f32 reference (~5e-5
 * expected), and 1e-10 (1e-6 after a GLU) against the CPU executor where both round activations
 * to q8_K (K-quant weights), which checks the q8_K quantizer bit for bit.
 * SKIPs (exit 0, with the reason) when no CUDA device is usable — CI has none.
 */
#include "runtime/exec_cuda.h"
#include "runtime/exec_cpu.h"
#include "backend/cuda/kernels.h"
#include "graph/ir.h"
#include "graph/plan.h"
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "base/status.h"
#include "test.h"
#include "qwen_layers.h"

#define MAXB 48

typedef struct binds {
    const char *name[MAXB];
    void *data[MAXB];
    int n;
    int32_t *tok, *pos;
} binds;

static uint64_t seed = 0x5B0C0DA;
static int attn_variant = 1; /* k_attention.cu variant the CUDA runs use */
static int attn_hpb = 0;     /* variant 4's query heads per block (cu_config.attn_hpb; 0 = auto) */
static int attn_warp = 0;    /* variant 4's warp path up to this depth (cu_config.attn_warp; 0 = off) */
static int attn_small = 0;   /* variant 4's small-depth layout up to this depth (cu_config.attn_small; 0 = off) */
#define AD_TEST_GMAX 8       /* forced heads per block of 8 = G for every G variant 4 takes (min(n, G)) */
static bool fuse_on = false;  /* executor-level fusions (the default is on; tests opt in) */
static int32_t last_kernels;  /* kernels the last CUDA run launched */
static uint64_t last_device_bytes; /* device memory the last CUDA run's context held (exec_cuda_stats) */
static float *last_y;         /* a copy of the last CUDA run's first output (last_n values) */
static int64_t last_n;
static bool ropek_on = false; /* cu_config.fuse_ropek (with fuse_on) */
static bool glu_pair_on = true; /* the GLU in the gate/up launch (with fuse_on; cu_config.fuse_glu_pair, default on) */
static bool fattn_mma = true;  /* the tensor-core flash prefill (cu_config.fattn_mma; default on) */
static bool chain_quant_on = true; /* the planner's chain quantize tails (cu_config.chain_quant at its default; with fuse_on) */
/* the settings every CUDA context of these tests starts from (main: the defaults); run_config adds
 * the per-run ones above */
static cu_config tc_cfg;
static cu_config run_config(void) {
    cu_config c = tc_cfg;
    c.poison = 1;
    c.attn_variant = attn_variant;
    c.attn_hpb = attn_hpb;
    c.attn_warp = attn_warp;
    c.attn_small = attn_small;
    c.fuse = fuse_on;
    c.fuse_ropek = fuse_on && ropek_on;
    c.fuse_glu_pair = glu_pair_on;
    c.fattn_mma = fattn_mma;
    if (!chain_quant_on) c.chain_quant = 0;
    return c;
}
/* The NMSE limit of an attention with T > 1 on the flash path (variants 3 and 4): F16 caches with
 * head_dim 64, 128, 256 or 512 take k_fattn_mma.cu while fattn_mma is on — f16 Q and P (f32 accumulation)
 * give NMSE ~1e-8..1e-7 against op_attention (a CPU emulation of its warp math over these shapes:
 * at most 8e-8; tests/runtime/test_cuda_fattn_mma_emu, head_dim 64..512: 3e-8..7e-8), while a mask off by one key, a wrong fragment layout or a dropped split measured
 * 1e-4 .. 2 there — 2e-6 lies between; every other case is f32 math: 1e-9. */
/* the tensor-core path takes every T > 1 (k_fattn_mma.cu fm_tmin); T = 1 and other caches stay on the exact kernels */
static double flash_limit(int64_t T, int ctype, int64_t D) {
    return T > 1 && fattn_mma && ctype == SB_TYPE_F16 && (D == 64 || D == 128 || D == 256 || D == 512) ? 2e-6 : 1e-9;
}

static float *rnd(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_normal(&seed);
    return x;
}

/* rows of n f32 values quantized to type (a fresh buffer) */
static void *quant_rows(int type, const float *x, int64_t n, int64_t rows) {
    if (type == SB_TYPE_F32) {
        void *d = malloc((size_t)(n * rows) * 4);
        memcpy(d, x, (size_t)(n * rows) * 4);
        return d;
    }
    uint64_t rb = op_row_bytes(type, n);
    uint8_t *d = malloc((size_t)(rb * (uint64_t)rows));
    for (int64_t r = 0; r < rows; r++) op_quantize_row(d + rb * (uint64_t)r, type, x + r * n, n);
    return d;
}

static sb_status bind(const plan *p, const binds *b, void **data) {
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const plan_input *in = &p->inputs[i];
        data[i] = NULL;
        if (in->kind == IR_OP_TOKENS) data[i] = b->tok;
        else if (in->kind == IR_OP_POS) data[i] = b->pos;
        else if (in->kind == IR_OP_OUT_ROWS) data[i] = NULL;
        else
            for (int k = 0; k < b->n; k++)
                if (!strcmp(b->name[k], in->name)) data[i] = b->data[k];
        if (!data[i] && in->kind != IR_OP_OUT_ROWS) return sb_fail(SB_ERR_INTERNAL, "test: input %s unbound", in->name);
    }
    return SB_OK;
}

/* Run g (output 0) on CUDA and on the CPU — the reference target (unfused, f32 activations) or,
 * with cpu_target, the CPU executor's target (same activation rounding as CUDA for K-quants:
 * q8_K) — and return the NMSE (1e30 on error or unwritten output). */
static double run_cmp(ir_graph *g, const binds *b, const char *label, bool cpu_target) {
    plan *pr = NULL, *pc = NULL;
    plan_target tr, tc;
    if (cpu_target)
        exec_cpu_target(&tr);
    else
        plan_target_reference(&tr);
    const cu_config tcfg = run_config(); /* its fuse flag: the planner's fusions too */
    exec_cuda_target(&tcfg, &tc);
    double res = 1e30;
    void *dr[64], *dc[64];
    float *yr = NULL, *yc = NULL;
    exec_cuda *cx = NULL;
    void *arena = NULL;
    sb_status s = plan_build(g, &tr, NULL, &pr);
    if (s == SB_OK) s = plan_build(g, &tc, NULL, &pc);
    if (s == SB_OK) s = exec_cuda_check(pc);
    if (s == SB_OK) s = bind(pr, b, dr);
    if (s == SB_OK) s = bind(pc, b, dc);
    if (s != SB_OK) goto out;
    const ir_node *on = &pc->g->nodes[pc->outputs[0].node];
    int64_t n = ir_nelem(on);
    yc = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) yc[i] = NAN;
    const cu_config cfg = run_config();
    s = exec_cuda_create(1024, &cfg, &cx);
    if (s != SB_OK) goto out;
    exec_bindings ebc = {.data = dc, .n_data = pc->n_inputs};
    float *outs[4] = {yc, NULL, NULL, NULL}; /* outputs after the first (compared) one: read back, not compared */
    if (pc->n_outputs > 4) {
        s = sb_fail(SB_ERR_INVALID_ARG, "run_cmp: %d outputs (at most 4)", (int)pc->n_outputs);
        goto out;
    }
    for (int32_t k = 1; k < pc->n_outputs; k++) outs[k] = malloc((size_t)ir_nelem(&pc->g->nodes[pc->outputs[k].node]) * 4);
    s = exec_cuda_run(cx, pc, &ebc, outs);
    for (int32_t k = 1; k < 4; k++) free(outs[k]);
    if (s != SB_OK) goto out;
    last_kernels = exec_cuda_get_stats(cx).kernels_last_run;
    last_device_bytes = exec_cuda_get_stats(cx).device_bytes;
    free(last_y);
    last_y = malloc((size_t)n * 4), last_n = last_y ? n : 0; /* no copy: a comparison that needs it fails */
    if (last_y) memcpy(last_y, yc, (size_t)n * 4);
    uint64_t ab = exec_cpu_arena_bytes(pr, 1);
    arena = aligned_alloc(PLAN_ALIGN, (ab + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    exec_bindings ebr = {.data = dr, .n_data = pr->n_inputs, .arena = arena, .arena_bytes = ab};
    const float *ro[4] = {0};
    s = exec_cpu_run(pr, &ebr, NULL, ro);
    if (s != SB_OK) goto out;
    yr = malloc((size_t)n * 4);
    memcpy(yr, ro[0], (size_t)n * 4);
    double num = 0, den = 0;
    int64_t nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (yc[i] != yc[i]) nan++;
        num += ((double)yc[i] - yr[i]) * ((double)yc[i] - yr[i]);
        den += (double)yr[i] * yr[i];
    }
    res = nan ? 1e30 : den > 0 ? num / den : num;
    if (nan) fprintf(stderr, "%s: %lld of %lld outputs NaN (unwritten)\n", label, (long long)nan, (long long)n);
out:
    if (s != SB_OK) fprintf(stderr, "%s: %s: %s\n", label, sb_status_str(s), sb_last_error());
    exec_cuda_free(cx);
    plan_free(pr);
    plan_free(pc);
    free(arena);
    free(yr);
    free(yc);
    return res;
}

static double run_both(ir_graph *g, const binds *b, const char *label) { return run_cmp(g, b, label, false); }
static void expect_fused(ir_graph *g, const binds *b, const char *label, double limit, int fewer);
static void expect_steps(ir_graph *g, binds *b, int32_t *slot, const int32_t *vals, int nsteps, double limit, const char *label);

static void expect(double nmse, double limit, const char *label) {
    printf("%-44s NMSE %.3e (limit %.0e)%s\n", label, nmse, limit, nmse <= limit ? "" : "  FAIL");
    CHECKF(nmse <= limit, "%s: NMSE %.3e > %.0e", label, nmse, limit);
}

// ---- families ----

static const int all_types[] = {SB_TYPE_F32, SB_TYPE_F16, SB_TYPE_BF16, SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0, SB_TYPE_Q5_1,
                                SB_TYPE_Q8_0, SB_TYPE_Q2_K, SB_TYPE_Q3_K, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K,
                                SB_TYPE_IQ4_NL, SB_TYPE_IQ4_XS};
#define N_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

/* weight types with a dp4a GEMV (k_mmvq.cu, k_gemv.cu: every quantized type here) and with an int8
 * tensor-core GEMM (k_mma.cu) */
static bool mmvq_type(int t) {
    return t == SB_TYPE_Q4_0 || t == SB_TYPE_Q4_1 || t == SB_TYPE_Q5_0 || t == SB_TYPE_Q5_1 || t == SB_TYPE_Q8_0 || t == SB_TYPE_IQ4_NL ||
           t == SB_TYPE_Q2_K || t == SB_TYPE_Q3_K || t == SB_TYPE_Q4_K || t == SB_TYPE_Q5_K || t == SB_TYPE_Q6_K || t == SB_TYPE_IQ4_XS;
}
static bool mma_type(int t) { return mmvq_type(t) && t != SB_TYPE_Q2_K; }
/* weight types whose CUDA activations are q8_K (exec_cuda_target; as the CPU's) */
static bool q8k_type(int t) {
    return t == SB_TYPE_Q2_K || t == SB_TYPE_Q3_K || t == SB_TYPE_Q4_K || t == SB_TYPE_Q5_K || t == SB_TYPE_Q6_K || t == SB_TYPE_IQ4_XS;
}
static bool half_type(int t) { return t == SB_TYPE_F16 || t == SB_TYPE_BF16; }
static const char *path_name(int t) {
    if (half_type(t)) return "f32-path, x rounded to the weight type";
    if (q8k_type(t)) return mmvq_type(t) ? "q8_K dp4a" : "q8_K f32-path";
    return mmvq_type(t) ? "q8_1 dp4a" : "f32";
}

/* get_rows of every readable type, twice: the table read by nothing else (it stays in host memory:
 * the executor stages the rows a run needs, so the context holds less than the table), then also
 * multiplied (so uploaded whole: the device gather, and the context holds at least the table) */
static void test_get_rows(void) {
    const int64_t E = 512, V = 1000, T = 7;
    for (int k = 0; k < N_TYPES; k++)
        for (int on_gpu = 0; on_gpu < 2; on_gpu++) {
            int t = all_types[k];
            float *wf = rnd(E * V, 0.5f), *x = rnd(E, 1.0f);
            void *w = quant_rows(t, wf, E, V);
            const uint64_t wb = op_row_bytes(t, E) * (uint64_t)V;
            int32_t tok[7] = {0, 999, 5, 5, 17, 1, 998};
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){E, V, 1, 1});
            ir_output(g, ir_get_rows(g, wr, ir_input_tokens(g, T)), "y");
            if (on_gpu) ir_output(g, ir_matmul(g, wr, ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1})), "z");
            binds b = {.name = {"w", "x"}, .data = {w, x}, .n = 2, .tok = tok};
            char label[96];
            snprintf(label, sizeof label, "get_rows %s, table %s", ir_dtype_name(t), on_gpu ? "on the GPU" : "gathered on the host");
            expect(run_both(g, &b, label), 1e-12, label);
            CHECKF(on_gpu ? last_device_bytes >= wb : last_device_bytes < wb, "%s: the context holds %llu bytes, the table is %llu", label,
                   (unsigned long long)last_device_bytes, (unsigned long long)wb);
            ir_graph_free(g);
            free(wf), free(x), free(w);
        }
}

/* tables gathered on the host across runs of one executor (the captured graph replayed: each run's
 * rows staged before the launch): two tables (two gathers in the stage) summed, a token a step */
static void test_gathered_steps(void) {
    const int64_t E = 256, V = 50;
    float *af = rnd(E * V, 0.5f), *bf = rnd(E * V, 0.5f);
    void *a = quant_rows(SB_TYPE_Q8_0, af, E, V), *bq = quant_rows(SB_TYPE_Q4_K, bf, E, V);
    int32_t tok[1] = {0};
    const int32_t toks[5] = {3, 49, 0, 3, 17};
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref tr = ir_input_tokens(g, 1);
    ir_ref ar = ir_input_weight(g, "a", SB_TYPE_Q8_0, (int64_t[4]){E, V, 1, 1}), br = ir_input_weight(g, "b", SB_TYPE_Q4_K, (int64_t[4]){E, V, 1, 1});
    ir_output(g, ir_add(g, ir_scale(g, ir_get_rows(g, ar, tr), 2.0f), ir_get_rows(g, br, tr)), "y");
    binds b = {.name = {"a", "b"}, .data = {a, bq}, .n = 2, .tok = tok};
    expect_steps(g, &b, tok, toks, 5, 1e-12, "get_rows q8_0 + q4_K gathered on the host, token");
    ir_graph_free(g);
    free(af), free(bf), free(a), free(bq);
}

/* slice (k_slice_rows): a layer's rows of a [P, L, T] value (gemma4's per-layer inputs), a span of
 * a 4-D value, and more rows than one grid's y (65535) */
static void test_slice(void) {
    struct { int64_t ne[4]; int32_t start, n; } cs[] = {
        {{256, 8, 7, 1}, 5, 1}, {{96, 6, 5, 3}, 2, 3}, {{64, 4, 1, 1}, 0, 4}, {{4, 3, 70000, 1}, 2, 1},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        float *x = rnd(cs[k].ne[0] * cs[k].ne[1] * cs[k].ne[2] * cs[k].ne[3], 1.0f);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, cs[k].ne);
        ir_output(g, ir_slice(g, xr, cs[k].start, cs[k].n), "y");
        binds b = {.name = {"x"}, .data = {x}, .n = 1};
        char label[96];
        snprintf(label, sizeof label, "slice [%lld,%lld,%lld,%lld] rows %d..%d", (long long)cs[k].ne[0], (long long)cs[k].ne[1],
                 (long long)cs[k].ne[2], (long long)cs[k].ne[3], cs[k].start, cs[k].start + cs[k].n - 1);
        expect(run_both(g, &b, label), 0, label);
        ir_graph_free(g);
        free(x);
    }
}

/* softmax over rows (k_softmax): short and long rows, one row past a block's 256 threads many
 * times, rows with a large offset (the max subtracted) */
static void test_softmax(void) {
    const int64_t cs[][2] = {{10, 3}, {1000, 7}, {50000, 2}, {257, 70}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t E = cs[k][0], R = cs[k][1];
        float *x = rnd(E * R, 8.0f);
        for (int64_t i = 0; i < E * R; i += 5) x[i] += 80.0f;
        ir_graph *g;
        ir_graph_create(&g);
        ir_output(g, ir_softmax(g, ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, R, 1, 1})), "y");
        binds b = {.name = {"x"}, .data = {x}, .n = 1};
        char label[96];
        snprintf(label, sizeof label, "softmax %lld x %lld rows", (long long)E, (long long)R);
        expect(run_both(g, &b, label), 1e-12, label);
        ir_graph_free(g);
        free(x);
    }
}

/* the CUDA output of the last run (last_y) against ref: every value within tol * max(|ref|, lo)
 * (tol 0: the same bytes), the worst error printed */
static void expect_values(const float *ref, int64_t n, double tol, double lo, const char *label) {
    CHECKF(last_y && last_n == n, "%s: no CUDA output to compare (%lld values, want %lld)", label, (long long)last_n, (long long)n);
    if (!last_y || last_n != n) return;
    double worst = 0;
    int64_t exact = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)last_y[i] - ref[i]) / fmax(fabs(ref[i]), lo);
        worst = d == d && worst == worst ? fmax(worst, d) : NAN;
        exact += !memcmp(&last_y[i], &ref[i], sizeof *ref);
    }
    const bool ok = tol == 0 ? exact == n : worst <= tol;
    printf("%-44s max error %.2e, %lld/%lld bit-identical%s\n", label, worst, (long long)exact, (long long)n, ok ? "" : "  FAIL");
    CHECKF(ok, "%s: max error %.3e of max(|ref|, %g) (limit %.0e), %lld of %lld values bit-identical", label, worst, lo, tol, (long long)exact,
           (long long)n);
}

static int64_t nelem4(const int64_t ne[4]) { return ne[0] * ne[1] * ne[2] * ne[3]; }

/* layer_norm (k_layer_norm) and the exact GELU (k_gelu_erf) on rows of 1, short, odd, one past the
 * 256-thread block, long (50,000) and 3-/4-D values; layer_norm's odd rows offset by 50 (the mean
 * subtracted), within 1e-6 of max(|y|, 1) of op_layer_norm (its double sums in another order);
 * gelu through +-30 against op_gelu within 1e-6 of max(|y|, 1e-3) (CUDA's double erf, not glibc's) */
static void test_layer_norm_gelu(void) {
    const int64_t cs[][4] = {{1, 5, 1, 1}, {7, 3, 1, 1}, {256, 4, 1, 1}, {257, 70, 1, 1}, {1000, 7, 1, 1},
                             {50000, 2, 1, 1}, {4096, 1, 1, 1}, {33, 4, 3, 1}, {65, 3, 2, 2}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t E = cs[k][0], n = nelem4(cs[k]), rows = n / E;
        for (int op = 0; op < 2; op++) {
            float *x = rnd(n, op ? 4.0f : 3.0f), *ref = malloc((size_t)n * sizeof *ref);
            if (op == 0)
                for (int64_t t = 1; t < rows; t += 2)
                    for (int64_t i = 0; i < E; i++) x[t * E + i] += 50.0f;
            else
                for (int64_t i = 0; i < n; i += 97) x[i] = i % 2 ? 30.0f : -30.0f;
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, cs[k]);
            ir_output(g, op ? ir_gelu(g, xr) : ir_layer_norm(g, xr, 1e-5f), "y");
            binds b = {.name = {"x"}, .data = {x}, .n = 1};
            char label[96];
            snprintf(label, sizeof label, "%s [%lld,%lld,%lld,%lld]", op ? "gelu (erf)" : "layer_norm", (long long)cs[k][0], (long long)cs[k][1],
                     (long long)cs[k][2], (long long)cs[k][3]);
            expect(run_both(g, &b, label), 1e-12, label);
            if (op) op_gelu(ref, x, n);
            else op_layer_norm(ref, x, E, 0, rows, 1e-5f);
            expect_values(ref, n, 1e-6, op ? 1e-3 : 1.0, label);
            ir_graph_free(g);
            free(x), free(ref);
        }
    }
}

/* concat (k_concat) of ns sources of shape ne but ne[dim] = len[i] (twice: source 1 is source 0),
 * byte for byte against op_concat */
static void check_concat(const int64_t ne[4], int dim, int ns, const int64_t *len, bool twice) {
    float *xs[8];
    int64_t chunk[8], total = 0, outer = 1;
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref refs[8];
    binds b = {.n = 0};
    static const char *names[8] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
    for (int k = dim + 1; k < 4; k++) outer *= ne[k];
    for (int i = 0; i < ns; i++) {
        int64_t sne[4] = {ne[0], ne[1], ne[2], ne[3]};
        sne[dim] = len[i];
        chunk[i] = len[i];
        for (int k = 0; k < dim; k++) chunk[i] *= ne[k];
        total += chunk[i];
        if (twice && i == 1) {
            xs[i] = xs[0], refs[i] = refs[0];
            continue;
        }
        xs[i] = rnd(nelem4(sne), 1.0f);
        refs[i] = ir_input_weight(g, names[i], SB_TYPE_F32, sne);
        b.name[b.n] = names[i], b.data[b.n++] = xs[i];
    }
    ir_output(g, ir_concat(g, refs, ns, dim), "y");
    float *ref = malloc((size_t)(total * outer) * sizeof *ref);
    op_concat(ref, (const float *const *)xs, chunk, ns, outer);
    char label[96];
    snprintf(label, sizeof label, "concat %d%s along %d of [%lld,%lld,%lld,%lld]", ns, twice ? " (x, x)" : "", dim, (long long)ne[0], (long long)ne[1],
             (long long)ne[2], (long long)ne[3]);
    expect(run_both(g, &b, label), 0, label);
    expect_values(ref, total * outer, 0, 1.0, label);
    ir_graph_free(g);
    for (int i = 0; i < ns; i++)
        if (!(twice && i == 1)) free(xs[i]);
    free(ref);
}

/* permute (k_permute) of x [ne] by perm, byte for byte against op_permute */
static void check_permute(const int64_t ne[4], const int32_t perm[4]) {
    const int64_t n = nelem4(ne), rows = n / ne[perm[0]];
    float *x = rnd(n, 1.0f), *ref = malloc((size_t)n * sizeof *ref);
    ir_graph *g;
    ir_graph_create(&g);
    ir_output(g, ir_permute(g, ir_input_weight(g, "x", SB_TYPE_F32, ne), perm), "y");
    binds b = {.name = {"x"}, .data = {x}, .n = 1};
    op_permute(ref, x, ne, perm, 0, rows);
    char label[96];
    snprintf(label, sizeof label, "permute [%lld,%lld,%lld,%lld] by %d,%d,%d,%d", (long long)ne[0], (long long)ne[1], (long long)ne[2],
             (long long)ne[3], perm[0], perm[1], perm[2], perm[3]);
    expect(run_both(g, &b, label), 0, label);
    expect_values(ref, n, 0, 1.0, label);
    ir_graph_free(g);
    free(x), free(ref);
}

/* concat along every dim of 4-D and 3-D values (2, 3 and 8 sources, a source twice), rows longer
 * than a block, more outer rows than a grid's y (65535); permute by all 24 permutations of a 4-D
 * value and the 6 of a 3-D one, long rows, more rows than a grid's y */
static void test_concat_permute(void) {
    const int64_t ne[4] = {5, 3, 4, 2}, ne3[4] = {33, 7, 5, 1};
    for (int dim = 0; dim < 4; dim++) {
        check_concat(ne, dim, 2, (const int64_t[]){ne[dim], 1}, false);
        check_concat(ne, dim, 3, (const int64_t[]){ne[dim], ne[dim] + 2, 1}, false);
        check_concat(ne, dim, 2, (const int64_t[]){ne[dim], ne[dim]}, true);
        if (dim < 3) check_concat(ne3, dim, 2, (const int64_t[]){ne3[dim], 2}, false);
    }
    check_concat(ne, 1, 8, (const int64_t[]){1, 2, 3, 4, 5, 6, 7, 8}, false);
    check_concat((const int64_t[4]){1000, 3, 1, 1}, 0, 2, (const int64_t[]){1000, 301}, false);
    check_concat((const int64_t[4]){300, 3, 2, 1}, 1, 3, (const int64_t[]){3, 1, 2}, false);
    check_concat((const int64_t[4]){2, 1, 70000, 1}, 1, 2, (const int64_t[]){1, 3}, false);
    for (int code = 0; code < 256; code++) { /* every permutation of 0..3 */
        const int32_t p[4] = {code & 3, code >> 2 & 3, code >> 4 & 3, code >> 6 & 3};
        if ((1 << p[0] | 1 << p[1] | 1 << p[2] | 1 << p[3]) != 15) continue;
        check_permute(ne, p);
        if (p[3] == 3) check_permute(ne3, p);
    }
    check_permute((const int64_t[4]){300, 3, 2, 1}, (const int32_t[4]){1, 0, 2, 3});
    check_permute((const int64_t[4]){3, 70000, 1, 1}, (const int32_t[4]){1, 0, 2, 3});
    check_permute((const int64_t[4]){70000, 3, 1, 1}, (const int32_t[4]){1, 0, 2, 3});
    check_permute((const int64_t[4]){257, 9, 5, 3}, (const int32_t[4]){2, 3, 0, 1});
}

static void test_matmul(void) {
    const int64_t K = 512, N = 67;
    const int64_t Ts[] = {1, 2, 5, 8, 13, 40, 77};
    const int blas_saved = tc_cfg.blas_min_t;
    tc_cfg.blas_min_t = 0; /* F16 / BF16 at T 77 on k_mmh's tiles, not cuBLASLt (test_blas_gemm) */
    for (int k = 0; k < N_TYPES; k++) {
        int t = all_types[k];
        for (int j = 0; j < 7; j++) {
            int64_t T = Ts[j];
            if (!mmvq_type(t) && !q8k_type(t) && !half_type(t) && T != 1 && T != 13) continue;
            /* several 32- or 64-token tiles with a tail: the GEMM variants, the half weights' tensor-core tiles */
            if (T == 77 && !mmvq_type(t) && !half_type(t)) continue;
            float *wf = rnd(K * N, 0.1f), *x = rnd(K * T, 1.0f);
            void *w = quant_rows(t, wf, K, N);
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){K, N, 1, 1});
            ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
            ir_output(g, ir_matmul(g, wr, xr), "y");
            binds b = {.name = {"w", "x"}, .data = {w, x}, .n = 2};
            char label[96];
            snprintf(label, sizeof label, "matmul %s T=%lld (%s)", ir_dtype_name(t), (long long)T, path_name(t));
            const bool q8 = mmvq_type(t) || q8k_type(t);
            expect(run_both(g, &b, label), q8 ? 5e-4 : half_type(t) ? 1e-4 : 1e-10, label);
            if (half_type(t)) { /* the CPU executor rounds x to the half type too: only summation order differs */
                snprintf(label, sizeof label, "matmul %s T=%lld vs CPU (x rounded)", ir_dtype_name(t), (long long)T);
                expect(run_cmp(g, &b, label, true), 1e-10, label);
            }
            if (mma_type(t) && T > 8 && T <= 64) { /* the small path's 128 x 32 / 128 x 64 tiles */
                const int mmq_saved = tc_cfg.mmq;
                tc_cfg.mmq = 4;
                snprintf(label, sizeof label, "matmul %s T=%lld (int8 MMA, 128 x %d tile)", ir_dtype_name(t), (long long)T, T <= 32 ? 32 : 64);
                expect(run_both(g, &b, label), 5e-4, label);
                tc_cfg.mmq = mmq_saved;
            }
            if (mma_type(t) && T > 1 && T <= 8) { /* the int8 MMA GEMM from T 2 (cu_config.mma_min_t, default 3) */
                const int mmq_saved = tc_cfg.mmq, min_saved = tc_cfg.mma_min_t;
                tc_cfg.mmq = 4, tc_cfg.mma_min_t = 2;
                snprintf(label, sizeof label, "matmul %s T=%lld (int8 MMA from T 2)", ir_dtype_name(t), (long long)T);
                expect(run_both(g, &b, label), 5e-4, label);
                tc_cfg.mmq = mmq_saved, tc_cfg.mma_min_t = min_saved;
            }
            if (mmvq_type(t) && T > 8) { /* the token-tile variants: 4 rows per warp; tiled GEMM; int8 MMA */
                for (int v = 2; v <= (mma_type(t) ? 4 : 3); v++) {
                    tc_cfg.mmq = v;
                    snprintf(label, sizeof label, "matmul %s T=%lld (%s, %s)", ir_dtype_name(t), (long long)T, path_name(t),
                             v == 2 ? "4 rows/warp" : v == 3 ? "tiled GEMM" : "int8 MMA");
                    expect(run_both(g, &b, label), 5e-4, label);
                    if (v == 4 && q8k_type(t)) {
                        snprintf(label, sizeof label, "matmul %s T=%lld int8 MMA vs CPU q8_K", ir_dtype_name(t), (long long)T);
                        expect(run_cmp(g, &b, label, true), 1e-10, label);
                    }
                }
                tc_cfg.mmq = 1;
            }
            if (q8k_type(t)) { /* the same q8_K rounding as the CPU executor: only summation order differs */
                snprintf(label, sizeof label, "matmul %s T=%lld vs CPU q8_K", ir_dtype_name(t), (long long)T);
                expect(run_cmp(g, &b, label, true), 1e-10, label);
            }
            ir_graph_free(g);
            free(wf);
            free(x);
            free(w);
        }
    }
    /* T = 1 with K over CU_MMVQ_LONG_K: four warps per row (k_mmvq_long), unfused and with the fusions on */
    for (int k = 0; k < N_TYPES; k++) {
        const int t = all_types[k];
        if (!mmvq_type(t)) continue;
        const int64_t KL = 2560, NL = 37;
        float *wf = rnd(KL * NL, 0.1f), *x = rnd(KL, 1.0f), *bias = rnd(NL, 1.0f);
        void *w = quant_rows(t, wf, KL, NL);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){KL, NL, 1, 1});
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){KL, 1, 1, 1});
        ir_ref br = ir_input_weight(g, "b", SB_TYPE_F32, (int64_t[4]){NL, 1, 1, 1});
        ir_output(g, ir_add(g, ir_matmul(g, wr, xr), br), "y");
        binds b = {.name = {"w", "x", "b"}, .data = {w, x, bias}, .n = 3};
        char label[96];
        snprintf(label, sizeof label, "matmul %s K=%lld T=1 + bias (4 warps/row)", ir_dtype_name(t), (long long)KL);
        expect_fused(g, &b, label, 5e-4, 1); /* the bias as the matmul's addend (pass fuse_matmul_add) */
        if (q8k_type(t)) {
            snprintf(label, sizeof label, "matmul %s K=%lld T=1 vs CPU q8_K", ir_dtype_name(t), (long long)KL);
            expect(run_cmp(g, &b, label, true), 1e-10, label);
        }
        ir_graph_free(g);
        free(wf), free(x), free(bias), free(w);
    }
    tc_cfg.blas_min_t = blas_saved;
}

static void test_norm_glu_ew(void) {
    const int64_t E = 896, T = 5, F = 256, N = 40;
    float *x = rnd(E * T, 2.0f), *w = rnd(E, 1.0f), *r = rnd(E * T, 1.0f);
    float *gt = rnd(F * T, 2.0f), *ut = rnd(F * T, 1.0f), *wq = rnd(E * N, 0.1f), *wd = rnd(F * N, 0.1f);
    void *wq8 = quant_rows(SB_TYPE_Q8_0, wq, E, N), *wd4 = quant_rows(SB_TYPE_Q4_K, wd, F, N);
    binds b = {.name = {"x", "w", "r", "g", "u", "wq", "wd"}, .data = {x, w, r, gt, ut, wq8, wd4}, .n = 7};
    ir_graph *g;
    /* FUSED: x + rms_norm(x) * w + r */
    ir_graph_create(&g);
    ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_ref wr = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    ir_ref rr = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    ir_output(g, ir_add(g, ir_mul(g, ir_rms_norm(g, xr, 1e-6f), wr), rr), "y");
    expect(run_both(g, &b, "fused rms_norm*w+r"), 1e-10, "fused rms_norm*w+r");
    ir_graph_free(g);
    /* RMS_NORM_QUANT feeding a Q8_0 matmul */
    ir_graph_create(&g);
    xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
    wr = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    ir_ref m = ir_input_weight(g, "wq", SB_TYPE_Q8_0, (int64_t[4]){E, N, 1, 1});
    ir_output(g, ir_matmul(g, m, ir_mul(g, ir_rms_norm(g, xr, 1e-5f), wr)), "y");
    expect(run_both(g, &b, "rms_norm_quant -> matmul q8_0"), 5e-4, "rms_norm_quant -> matmul q8_0");
    ir_graph_free(g);
    /* RMS_NORM_QUANT -> q8_K feeding a Q4_K matmul: bit-equal activations to the CPU's */
    {
        const int64_t E2 = 512;
        float *wk = rnd(E2 * N, 0.1f);
        void *wk4 = quant_rows(SB_TYPE_Q4_K, wk, E2, N);
        binds b2 = {.name = {"x", "w", "wk"}, .data = {x, w, wk4}, .n = 3};
        ir_graph_create(&g);
        xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E2, T, 1, 1});
        wr = ir_input_weight(g, "w", SB_TYPE_F32, (int64_t[4]){E2, 1, 1, 1});
        ir_ref mk = ir_input_weight(g, "wk", SB_TYPE_Q4_K, (int64_t[4]){E2, N, 1, 1});
        ir_output(g, ir_matmul(g, mk, ir_mul(g, ir_rms_norm(g, xr, 1e-6f), wr)), "y");
        expect(run_both(g, &b2, "rms_norm_quant q8_K -> matmul q4_K"), 5e-4, "rms_norm_quant q8_K -> matmul q4_K");
        expect(run_cmp(g, &b2, "... vs CPU q8_K", true), 1e-8, "rms_norm_quant q8_K -> matmul q4_K vs CPU");
        ir_graph_free(g);
        free(wk);
        free(wk4);
    }
    /* GLU_QUANT (swiglu, geglu) feeding a Q4_K matmul, and plain GLU */
    for (int ge = 0; ge < 2; ge++) {
        ir_graph_create(&g);
        ir_ref gr = ir_input_weight(g, "g", SB_TYPE_F32, (int64_t[4]){F, T, 1, 1});
        ir_ref ur = ir_input_weight(g, "u", SB_TYPE_F32, (int64_t[4]){F, T, 1, 1});
        ir_ref d = ir_input_weight(g, "wd", SB_TYPE_Q4_K, (int64_t[4]){F, N, 1, 1});
        ir_ref a = ge ? ir_geglu(g, gr, ur) : ir_swiglu(g, gr, ur);
        ir_output(g, ir_matmul(g, d, a), "y");
        const char *l = ge ? "glu_quant geglu -> matmul q4_K" : "glu_quant swiglu -> matmul q4_K";
        expect(run_both(g, &b, l), 5e-4, l);
        /* the CPU's swiglu uses a vector exp within ~2 ulp of expf: a rare activation rounds apart */
        expect(run_cmp(g, &b, l, true), 1e-6, ge ? "glu_quant geglu q8_K vs CPU" : "glu_quant swiglu q8_K vs CPU");
        ir_graph_free(g);
        ir_graph_create(&g);
        gr = ir_input_weight(g, "g", SB_TYPE_F32, (int64_t[4]){F, T, 1, 1});
        ur = ir_input_weight(g, "u", SB_TYPE_F32, (int64_t[4]){F, T, 1, 1});
        ir_output(g, ge ? ir_geglu(g, gr, ur) : ir_swiglu(g, gr, ur), "y");
        l = ge ? "geglu" : "swiglu";
        expect(run_both(g, &b, l), 1e-10, l);
        ir_graph_free(g);
    }
    /* elementwise singles and a chain */
    for (int k = 0; k < 5; k++) {
        ir_graph_create(&g);
        xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref y;
        const char *l;
        switch (k) {
        case 0: y = ir_silu(g, xr), l = "silu"; break;
        case 1: y = ir_gelu_tanh(g, xr), l = "gelu_tanh (fp16 table)"; break;
        case 2: y = ir_scale(g, xr, 0.37f), l = "scale"; break;
        case 3: y = ir_softcap(g, xr, 1.5f), l = "softcap"; break;
        default: y = ir_softcap(g, ir_scale(g, ir_gelu_tanh(g, xr), 3.0f), 2.0f), l = "fused gelu,scale,softcap"; break;
        }
        ir_output(g, y, "y");
        expect(run_both(g, &b, l), 1e-10, l);
        ir_graph_free(g);
    }
    free(x), free(w), free(r), free(gt), free(ut), free(wq), free(wd), free(wq8), free(wd4);
}

/* matmul + bias and matmul + residual, run with the GEMV-epilogue fusion on */
static void test_fused_epilogue(void) {
    const int64_t K = 512, N = 67;
    const int types[] = {SB_TYPE_F16, SB_TYPE_Q4_K, SB_TYPE_Q5_0};
    fuse_on = true;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (int64_t T = 1; T <= 13; T += 12)
            for (int resid = 0; resid < 2; resid++) {
                const int t = types[k];
                float *wf = rnd(K * N, 0.1f), *x = rnd(K * T, 1.0f), *o = rnd(resid ? N * T : N, 1.0f);
                void *w = quant_rows(t, wf, K, N);
                ir_graph *g;
                ir_graph_create(&g);
                ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){K, N, 1, 1});
                ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
                ir_ref orr = ir_input_weight(g, "o", SB_TYPE_F32, (int64_t[4]){N, resid ? T : 1, 1, 1});
                ir_ref mm = ir_matmul(g, wr, xr);
                ir_output(g, resid ? ir_add(g, orr, mm) : ir_add(g, mm, orr), "y");
                binds b = {.name = {"w", "x", "o"}, .data = {w, x, o}, .n = 3};
                char label[96];
                snprintf(label, sizeof label, "fused matmul %s + %s T=%lld", ir_dtype_name(t), resid ? "residual" : "bias", (long long)T);
                expect(run_both(g, &b, label), t == SB_TYPE_F16 ? 1e-4 : 5e-4, label);
                if (t == SB_TYPE_F16) expect(run_cmp(g, &b, label, true), 1e-10, "... same vs CPU (x rounded to f16)");
                ir_graph_free(g);
                free(wf), free(x), free(o), free(w);
            }
    fuse_on = false;
}

/* y = W x (ep 0), + a bias o [N] (ep 1) or o + W x with a residual o [N, T] (ep 2), for weights w of
 * type wt; inputs "w", "x", "o" */
static ir_graph *matmul_ep_graph(int wt, int64_t K, int64_t N, int64_t T, int ep) {
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref wr = ir_input_weight(g, "w", wt, (int64_t[4]){K, N, 1, 1});
    ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
    ir_ref orr = ir_input_weight(g, "o", SB_TYPE_F32, (int64_t[4]){N, ep == 2 ? T : 1, 1, 1});
    ir_ref mm = ir_matmul(g, wr, xr);
    ir_output(g, ep == 0 ? mm : ep == 1 ? ir_add(g, mm, orr) : ir_add(g, orr, mm), "y");
    return g;
}

/* one matmul_ep_graph case: weights of type t from normal values times 0.1, x, the epilogue's
 * addend o (a bias [N] for ep 1, a residual [N, T] for ep 2), their bindings, and a label naming
 * the kernel under test */
typedef struct ep_case {
    float *wf, *x, *o;
    void *w; /* wf as type t */
    ir_graph *g;
    binds b;
    char label[96];
} ep_case;

static void ep_case_make(ep_case *c, int t, int64_t K, int64_t N, int64_t T, int ep, const char *kernel) {
    c->wf = rnd(K * N, 0.1f);
    c->x = rnd(K * T, 1.0f);
    c->o = rnd(ep == 2 ? N * T : N, 1.0f);
    c->w = quant_rows(t, c->wf, K, N);
    c->g = matmul_ep_graph(t, K, N, T, ep);
    c->b = (binds){.name = {"w", "x", "o"}, .data = {c->w, c->x, c->o}, .n = 3};
    snprintf(c->label, sizeof c->label, "matmul %s K=%lld N=%lld T=%lld%s (%s)", ir_dtype_name(t), (long long)K, (long long)N, (long long)T,
             ep == 1 ? " + bias" : ep == 2 ? " + residual" : "", kernel);
}

static void ep_case_free(ep_case *c) {
    ir_graph_free(c->g);
    free(c->wf), free(c->x), free(c->o), free(c->w);
}

/* half weights at T <= 8 where k_mmh1 spreads a row over 64 and 128 lanes (device/mmh.cuh's
 * mmh_gemv_tpr), K ragged over the lanes' load steps, every token tile: against the CPU, which
 * rounds x to the half type too (only summation order differs) */
static void test_half_gemv_lanes(void) {
    for (int bf = 0; bf < 2; bf++)
        for (int64_t K = 2056; K <= 4104; K += 2048)
            for (int64_t T = 1; T <= 8; T += 3) {
                ep_case c;
                ep_case_make(&c, bf ? SB_TYPE_BF16 : SB_TYPE_F16, K, 37, T, 0, "k_mmh1 vs CPU, x rounded");
                expect(run_cmp(c.g, &c.b, c.label, true), 1e-10, c.label);
                ep_case_free(&c);
            }
}

/* F32 weights at T > 8: the tiled f32 GEMM (k_mmft, cu_config.mmf_tile) on ragged 128-row x 64-token
 * tiles, K % 4 == 0 (float4 loads, a partial last K step) and K % 4 != 0 (scalar loads), with the
 * bias / residual fused as its epilogue (cu_config.mmf_tile 1: every T > 8); then the same through
 * k_mmf (mmf_tile 0). Exact f32
 * products, f32 sums: 1e-10 against the f64 reference. */
static void test_f32_gemm(void) {
    const struct { int64_t K, N, T; int ep; } cs[] = {
        {512, 67, 77, 0}, {520, 200, 130, 1}, {517, 131, 9, 2}, {2560, 300, 70, 1}, {78, 129, 64, 0},
    };
    const int saved = tc_cfg.mmf_tile;
    fuse_on = true;
    for (int tile = 1; tile >= 0; tile--)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            const int64_t K = cs[k].K, N = cs[k].N, T = cs[k].T;
            tc_cfg.mmf_tile = tile;
            ep_case c;
            ep_case_make(&c, SB_TYPE_F32, K, N, T, cs[k].ep, tile ? "k_mmft" : "k_mmf");
            expect(run_both(c.g, &c.b, c.label), 1e-10, c.label);
            ep_case_free(&c);
        }
    fuse_on = false;
    tc_cfg.mmf_tile = saved;
}

/* F16 / BF16 weights at T > 8 through the 128 x 128 tile (k_mmh_big, cu_config.mmh_big 1: every T > 8;
 * blas_min_t 0, else T >= 64 would take cuBLASLt): ragged row and token tiles, a bias and a residual as its epilogue; against the f32 reference
 * (1e-4, the half types' limit in test_matmul) and the CPU executor, which rounds x to the weight
 * type too (1e-10: only summation order differs). */
static void test_mmh_big(void) {
    const struct { int64_t K, N, T; int ep; } cs[] = {{512, 67, 77, 0}, {1024, 300, 200, 1}, {96, 129, 13, 2}};
    const cu_config saved = tc_cfg;
    tc_cfg.mmh_big = 1;
    tc_cfg.blas_min_t = 0;
    fuse_on = true;
    for (int bf = 0; bf < 2; bf++)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            const int64_t K = cs[k].K, N = cs[k].N, T = cs[k].T;
            ep_case c;
            ep_case_make(&c, bf ? SB_TYPE_BF16 : SB_TYPE_F16, K, N, T, cs[k].ep, "k_mmh_big");
            expect(run_both(c.g, &c.b, c.label), 1e-4, c.label);
            expect(run_cmp(c.g, &c.b, c.label, true), 1e-10, "... same vs CPU (x rounded)");
            ep_case_free(&c);
        }
    fuse_on = false;
    tc_cfg = saved;
}

/* one cuBLASLt GEMM case (weight type t, epilogue ep as ep_case_make's): within 1e-5 of the f64
 * reference, in cuBLASLt's launch count (the path was taken); half weights also within 1e-9 of
 * the CPU executor (x rounded the same way) */
static void blas_case(int t, int64_t K, int64_t N, int64_t T, int epk, const char *tag) {
    ep_case c;
    ep_case_make(&c, t, K, N, T, epk, tag);
    expect(run_both(c.g, &c.b, c.label), 1e-5, c.label);
    const cu_epilogue ep = {.add = epk ? c.o : NULL, .bcast = epk == 1};
    CHECKF(last_kernels == cu_blas_launches(t, K, N, &ep), "%s: %d launches, cuBLASLt's path makes %d", c.label, (int)last_kernels,
           cu_blas_launches(t, K, N, &ep));
    if (half_type(t)) expect(run_cmp(c.g, &c.b, c.label, true), 1e-9, "... same vs CPU (x rounded)");
    ep_case_free(&c);
}

/* Large-T GEMMs through cuBLASLt (k_blas.cu; cu_config.blas_min_t 1: every T, blas_quant 1): F16 /
 * BF16 weights as stored, Q4_K / Q6_K / Q8_0 (and Q4_0, Q5_K) dequantized to F16 in row chunks (K =
 * 8192 x N = 4224 rows is two chunks of CU_BLAS_CHUNK_BYTES), x rounded to F16 / BF16; no
 * epilogue, a bias, a residual. Against the f64 reference: NMSE <= 1e-5 (the rounding of x and of
 * the dequantized weights to halves: ~1e-7 for F16, ~5e-6 for BF16's 8-bit mantissa; a wrong scale,
 * sub-block or chunk offset measures >= 1e-3); half weights also against the CPU executor, which
 * rounds x to the weight type the same way: 1e-9 (summation order only). The launch count proves
 * the path was taken (cu_blas_launches; the half-weight tiles are one launch). SKIP without cuBLASLt. */
static void test_blas_gemm(void) {
    char why[300];
    if (!exec_cuda_blaslt_available(why, sizeof why)) {
        printf("SKIP cuBLASLt GEMMs: %s\n", why);
        return;
    }
    const struct { int wt; int64_t K, N, T; int ep; } cs[] = {
        {SB_TYPE_F16, 1024, 1000, 64, 0}, {SB_TYPE_F16, 4096, 4224, 200, 1}, {SB_TYPE_F16, 512, 1000, 512, 2},
        {SB_TYPE_BF16, 1024, 1000, 64, 2}, {SB_TYPE_BF16, 2048, 4224, 512, 0}, {SB_TYPE_BF16, 512, 1000, 200, 1},
        {SB_TYPE_Q4_K, 1024, 1000, 64, 0}, {SB_TYPE_Q4_K, 8192, 4224, 200, 2}, {SB_TYPE_Q4_K, 4096, 1000, 512, 1},
        {SB_TYPE_Q6_K, 1024, 1000, 200, 1}, {SB_TYPE_Q6_K, 8192, 4224, 64, 0}, {SB_TYPE_Q6_K, 2048, 1000, 512, 2},
        {SB_TYPE_Q8_0, 1024, 1000, 512, 2}, {SB_TYPE_Q8_0, 8192, 4224, 64, 1}, {SB_TYPE_Q8_0, 512, 1000, 200, 0},
        {SB_TYPE_Q4_0, 1024, 1000, 200, 2}, {SB_TYPE_Q5_K, 2048, 1000, 64, 1},
    };
    const cu_config saved = tc_cfg;
    tc_cfg.blas_min_t = 1;
    tc_cfg.blas_quant = 1;
    fuse_on = true;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) blas_case(cs[k].wt, cs[k].K, cs[k].N, cs[k].T, cs[k].ep, "cuBLASLt");
    fuse_on = false;
    tc_cfg = saved;
}

/* The default route of quantized prefill GEMMs (cu_config_default: blas_quant 256): at T >= 256 they
 * take cuBLASLt where it loads — the int8 MMA tests' large-T shapes (test_mma_prefill's K 256 x N
 * 4900 / 4160, test_mma_small's down projection, the gate projection of test_mma_groups, Q8_0 with a
 * bias), two at T = 256 itself: the launch count is cuBLASLt's (cu_blas_launches), the NMSE within
 * test_blas_gemm's 1e-5 of the f64 reference (x and the dequantized weights rounded to F16). And a
 * gate/up -> down FFN at T 512 plans no gate/up pair (exec_cuda_count_glu_pairs 0: f32 activations,
 * no int8 MMA group; test_mma_glu_pair pairs it with blas_quant 0). SKIP without cuBLASLt. */
static void test_blas_default(void) {
    char why[300];
    if (!exec_cuda_blaslt_available(why, sizeof why)) {
        printf("SKIP quantized GEMMs on the default cuBLASLt route: %s\n", why);
        return;
    }
    const struct { int wt; int64_t K, N, T; int ep; } cs[] = {
        {SB_TYPE_Q6_K, 256, 4900, 520, 0}, {SB_TYPE_Q4_K, 256, 4160, 512, 2}, {SB_TYPE_Q6_K, 4864, 896, 512, 1},
        {SB_TYPE_Q4_K, 4864, 896, 256, 2}, {SB_TYPE_Q5_0, 896, 4864, 512, 0}, {SB_TYPE_Q8_0, 896, 896, 256, 1},
    };
    const cu_config saved = tc_cfg;
    /* its own draws: the tests after it keep the inputs they had before it existed (test_multi_gemv's
     * Q4_K+Q4_K+Q6_K product lands at 5.7e-4 of its 5e-4 on the draws this test would leave) */
    const uint64_t seed_in = seed;
    tc_cfg.blas_quant = cu_config_default.blas_quant;
    CHECKF(tc_cfg.blas_quant == 256, "cu_config_default.blas_quant %d: these shapes assume 256", tc_cfg.blas_quant);
    fuse_on = true;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) blas_case(cs[k].wt, cs[k].K, cs[k].N, cs[k].T, cs[k].ep, "default: cuBLASLt");
    fuse_on = false;
    /* the FFN of test_mma_glu_pair at T 512: planned with the default threshold, nothing to pair */
    const int64_t K = 896, N = 3232, ND = 64, T = 512;
    ir_graph *g;
    ir_graph_create(&g);
    ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
    ir_ref mg = ir_matmul(g, ir_input_weight(g, "wg", SB_TYPE_Q4_0, (int64_t[4]){K, N, 1, 1}), xr);
    ir_ref mu = ir_matmul(g, ir_input_weight(g, "wu", SB_TYPE_Q4_0, (int64_t[4]){K, N, 1, 1}), xr);
    ir_output(g, ir_matmul(g, ir_input_weight(g, "wd", SB_TYPE_Q5_0, (int64_t[4]){N, ND, 1, 1}), ir_swiglu(g, mg, mu)), "y");
    plan_target tc;
    exec_cuda_target(&tc_cfg, &tc);
    plan *pc = NULL;
    CHECK(plan_build(g, &tc, NULL, &pc) == SB_OK);
    if (pc)
        CHECKF(exec_cuda_count_glu_pairs(pc, &tc_cfg) == 0, "gate/up Q4_0 T=512 at the default blas_quant: %d GLU pairs (0 expected: cuBLASLt)",
               (int)exec_cuda_count_glu_pairs(pc, &tc_cfg));
    plan_free(pc);
    ir_graph_free(g);
    tc_cfg = saved;
    seed = seed_in;
}

/* Run g with the setting *flag off, then on (label " (what)"), against the reference (limit each);
 * the second run must launch `fewer` kernels less and, with bits, give the first run's first output
 * bit for bit. Leaves *flag off. */
static void expect_flip(ir_graph *g, const binds *b, const char *label, const char *what, bool *flag, double limit, int fewer, bool bits) {
    *flag = false;
    const double e0 = run_both(g, b, label);
    const int32_t k0 = last_kernels;
    float *y0 = last_y;
    const int64_t n0 = last_n;
    last_y = NULL;
    *flag = true;
    char l2[160];
    snprintf(l2, sizeof l2, "%s (%s)", label, what);
    const double e1 = run_both(g, b, l2);
    const int32_t k1 = last_kernels;
    *flag = false;
    expect(e0, limit, label);
    expect(e1, limit, l2);
    printf("%-44s kernels %d -> %d\n", label, (int)k0, (int)k1);
    CHECKF(k1 <= k0 - fewer, "%s: %d kernels with it vs %d without (expected %d fewer)", l2, (int)k1, (int)k0, fewer);
    if (bits) CHECKF(y0 && last_y && n0 == last_n && !memcmp(y0, last_y, (size_t)n0 * 4), "%s: output not bit-identical to the run without", l2);
    free(y0);
}

/* Run g unfused and fused (expect_flip of fuse_on); with fused_bits the same bits */
static bool fused_bits;
static void expect_fused(ir_graph *g, const binds *b, const char *label, double limit, int fewer) {
    expect_flip(g, b, label, "fused", &fuse_on, limit, fewer, fused_bits);
}

/* one activation, three GEMVs of mixed weight types (Q/K/V-like: two with a bias, different row
 * counts) summed: the multi-GEMV launch (k_mmvq_multi) at T = 1 */
static void test_multi_gemv(void) {
    const int64_t K = 512, N = 96;
    /* three types (k_gemv_fused), and the two-type Q/K/V mixes k_gemv_reg takes in one launch */
    const int sets[][3] = {{SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_Q4_0}, {SB_TYPE_Q4_K, SB_TYPE_Q6_K, SB_TYPE_Q5_K},
                           {SB_TYPE_Q5_0, SB_TYPE_Q5_0, SB_TYPE_Q8_0}, {SB_TYPE_Q4_K, SB_TYPE_Q4_K, SB_TYPE_Q6_K},
                           {SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_Q5_K}, {SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_Q8_0}};
    for (int k = 0; k < (int)(sizeof sets / sizeof sets[0]); k++) {
        float *x = rnd(K, 2.0f), *wn = rnd(K, 1.0f), *b0 = rnd(N, 1.0f), *b1 = rnd(N, 1.0f);
        float *wf[3];
        void *wq[3];
        for (int j = 0; j < 3; j++) wf[j] = rnd(K * N, 0.1f), wq[j] = quant_rows(sets[k][j], wf[j], K, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, 1, 1, 1});
        ir_ref wnr = ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){K, 1, 1, 1});
        ir_ref h = ir_mul(g, ir_rms_norm(g, xr, 1e-6f), wnr);
        ir_ref w0 = ir_input_weight(g, "w0", sets[k][0], (int64_t[4]){K, N, 1, 1});
        ir_ref w1 = ir_input_weight(g, "w1", sets[k][1], (int64_t[4]){K, N, 1, 1});
        ir_ref w2 = ir_input_weight(g, "w2", sets[k][2], (int64_t[4]){K, N, 1, 1});
        ir_ref q = ir_add(g, ir_matmul(g, w0, h), ir_input_weight(g, "b0", SB_TYPE_F32, (int64_t[4]){N, 1, 1, 1}));
        ir_ref kk = ir_add(g, ir_matmul(g, w1, h), ir_input_weight(g, "b1", SB_TYPE_F32, (int64_t[4]){N, 1, 1, 1}));
        ir_ref v = ir_matmul(g, w2, h);
        ir_output(g, ir_add(g, ir_mul(g, q, kk), v), "y");
        binds b = {.name = {"x", "wn", "w0", "w1", "w2", "b0", "b1"}, .data = {x, wn, wq[0], wq[1], wq[2], b0, b1}, .n = 7};
        char label[96];
        snprintf(label, sizeof label, "multi-GEMV %s+%s+%s T=1", ir_dtype_name(sets[k][0]), ir_dtype_name(sets[k][1]),
                 ir_dtype_name(sets[k][2]));
        expect_fused(g, &b, label, 5e-4, 3); /* two biases, two GEMVs */
        ir_graph_free(g);
        free(x), free(wn), free(b0), free(b1);
        for (int j = 0; j < 3; j++) free(wf[j]), free(wq[j]);
    }
}

/* the T = 1 GEMV kernels at decode shapes — registers before the wait (k_gemv_reg, the default)
 * and k_mmvq: rows spread over many blocks (several rows a group,
 * odd counts, a short last block, two rows a group when one wave would not hold one), rows whose
 * bytes are not multiples of 16 (Q5_0 / Q4_0 / Q8_0 at K = 896, Q6_K at 4864), four warps a row
 * (K > 2048), one and two sub-blocks a lane (K 896 / 1600 / 2304 / 4864 / 7936), the residual
 * epilogue; against the CPU reference */
static void test_reg_gemv(void) {
    const struct {
        int t;
        int64_t K, N;
    } cs[] = {{SB_TYPE_Q5_0, 896, 896},  {SB_TYPE_Q8_0, 896, 4864}, {SB_TYPE_Q4_0, 896, 1001},  {SB_TYPE_Q5_0, 1600, 300},
              {SB_TYPE_Q4_K, 4864, 896}, {SB_TYPE_Q6_K, 4864, 901}, {SB_TYPE_Q5_K, 2304, 333},  {SB_TYPE_Q6_K, 7936, 77},
              {SB_TYPE_Q5_0, 896, 40000}};
    for (int k = 0; k < (int)(sizeof cs / sizeof cs[0]); k++) {
        const int64_t K = cs[k].K, N = cs[k].N;
        float *wf = rnd(K * N, 0.1f), *x = rnd(K, 1.0f), *rs = rnd(N, 1.0f);
        void *w = quant_rows(cs[k].t, wf, K, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref wr = ir_input_weight(g, "w", cs[k].t, (int64_t[4]){K, N, 1, 1});
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, 1, 1, 1});
        ir_ref rr = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){N, 1, 1, 1});
        ir_output(g, ir_add(g, ir_matmul(g, wr, xr), rr), "y");
        binds b = {.name = {"w", "x", "r"}, .data = {w, x, rs}, .n = 3};
        for (int mode = 0; mode < 2; mode++) {
            char label[96];
            snprintf(label, sizeof label, "GEMV+residual %s K=%lld N=%lld (%s)", ir_dtype_name(cs[k].t), (long long)K, (long long)N,
                     mode == 0 ? "registers" : "k_mmvq");
            tc_cfg.gemv_reg = mode == 0;
            fuse_on = true;
            expect(run_both(g, &b, label), 5e-4, label);
            fuse_on = false;
        }
        tc_cfg.gemv_reg = true;
        ir_graph_free(g);
        free(wf), free(x), free(rs), free(w);
    }
}

/* a T = 1 GEMV over more than 65536 rows (an LM head: k_mmvq1) with 1, 2 and 4 rows a warp: each
 * against the f64 reference, and the three byte-identical (each row's sums are mmvq_part's); the
 * row counts leave a partial last warp and block */
static void test_wide_gemv(void) {
    const struct { int t; int64_t K, N; } cs[] = {{SB_TYPE_Q8_0, 256, 65536 + 37}, {SB_TYPE_Q6_K, 256, 65536 + 5}, {SB_TYPE_Q4_0, 128, 70001}};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t K = cs[k].K, N = cs[k].N;
        float *wf = rnd(K * N, 0.1f), *x = rnd(K, 1.0f), *y1 = malloc((size_t)N * sizeof *y1);
        void *w = quant_rows(cs[k].t, wf, K, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref wr = ir_input_weight(g, "w", cs[k].t, (int64_t[4]){K, N, 1, 1});
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, 1, 1, 1});
        ir_output(g, ir_matmul(g, wr, xr), "y");
        binds b = {.name = {"w", "x"}, .data = {w, x}, .n = 2};
        const int rows[3] = {1, 2, 4};
        for (int m = 0; m < 3; m++) {
            char label[96];
            snprintf(label, sizeof label, "wide GEMV %s K=%lld N=%lld, %d rows a warp", ir_dtype_name(cs[k].t), (long long)K, (long long)N,
                     rows[m]);
            tc_cfg.head_rows = rows[m];
            expect(run_both(g, &b, label), 5e-4, label);
            if (m == 0 && y1 && last_y && last_n == N) memcpy(y1, last_y, (size_t)N * sizeof *y1);
            else CHECKF(y1 && last_y && last_n == N && !memcmp(y1, last_y, (size_t)N * sizeof *y1), "%s: not the bits of one row a warp", label);
        }
        tc_cfg.head_rows = 2;
        ir_graph_free(g);
        free(wf), free(x), free(w), free(y1);
    }
}

/* An FFN block at T = 1, x + down(act(gate(h)) * up(h)), h = rms_norm(x) * w, fused: the gate/up
 * launch computing the GLU (rows as gate/up pairs; two rows a group, or four past one wave) and the
 * GLU node only quantizing — against the f64 reference, and byte-identical to the same plan with
 * the GLU kernel (cu_config.fuse_glu_pair off) and to the unfused plan. Shapes: Qwen2.5-0.5B's
 * (E 896: 28 of a warp's lanes; F 4864), four rows a group (F 6400: more pairs than one wave of
 * two-row groups holds on the H200), GELU, K-quant and legacy types (q8_K and q8_1 activations),
 * two sub-blocks a lane (E 1536). */
static void test_glu_pairs(void) {
    const struct { int64_t E, F; int wgu, wd, gelu; } cs[] = {
        {896, 4864, SB_TYPE_Q5_0, SB_TYPE_Q6_K, 0}, {256, 1280, SB_TYPE_Q8_0, SB_TYPE_Q4_K, 1}, {512, 1024, SB_TYPE_Q4_K, SB_TYPE_Q5_0, 0},
        {1536, 640, SB_TYPE_Q4_0, SB_TYPE_Q8_0, 1}, {256, 6400, SB_TYPE_Q5_0, SB_TYPE_Q8_0, 0},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t E = cs[k].E, F = cs[k].F;
        float *x = rnd(E, 1.0f), *wn = rnd(E, 1.0f), *wg = rnd(E * F, 0.1f), *wu = rnd(E * F, 0.1f), *wd = rnd(F * E, 0.05f);
        float *y[3] = {malloc((size_t)E * 4), malloc((size_t)E * 4), malloc((size_t)E * 4)};
        void *qg = quant_rows(cs[k].wgu, wg, E, F), *qu = quant_rows(cs[k].wgu, wu, E, F), *qd = quant_rows(cs[k].wd, wd, F, E);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref h = ir_mul(g, ir_rms_norm(g, xr, 1e-6f), ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1}));
        ir_ref gt = ir_matmul(g, ir_input_weight(g, "wg", cs[k].wgu, (int64_t[4]){E, F, 1, 1}), h);
        ir_ref up = ir_matmul(g, ir_input_weight(g, "wu", cs[k].wgu, (int64_t[4]){E, F, 1, 1}), h);
        ir_ref a = cs[k].gelu ? ir_geglu(g, gt, up) : ir_swiglu(g, gt, up);
        ir_output(g, ir_add(g, xr, ir_matmul(g, ir_input_weight(g, "wd", cs[k].wd, (int64_t[4]){F, E, 1, 1}), a)), "y");
        binds b = {.name = {"x", "wn", "wg", "wu", "wd"}, .data = {x, wn, qg, qu, qd}, .n = 5};
        char label[3][128];
        int32_t kn[3];
        for (int v = 0; v < 3; v++) { /* fused with the pairs, fused without, unfused */
            snprintf(label[v], sizeof label[v], "ffn E=%lld F=%lld %s/%s %s (%s)", (long long)E, (long long)F, ir_dtype_name(cs[k].wgu),
                     ir_dtype_name(cs[k].wd), cs[k].gelu ? "geglu" : "swiglu", v == 0 ? "GLU in gate/up" : v == 1 ? "GLU kernel" : "unfused");
            fuse_on = v < 2, glu_pair_on = v == 0;
            /* 1e-3: two chained 8-bit activations (the norm's, the GLU's) against the f64 reference drew
             * 1.4e-4 .. 5.5e-4 on the H200 (Q4_K gate/up the most); a wrong pair or row gives O(1) */
            expect(run_both(g, &b, label[v]), 1e-3, label[v]);
            kn[v] = last_kernels;
            if (y[v] && last_y && last_n == E) memcpy(y[v], last_y, (size_t)E * 4);
            fuse_on = false, glu_pair_on = true;
        }
        CHECKF(y[0] && y[1] && y[2] && !memcmp(y[0], y[1], (size_t)E * 4) && !memcmp(y[0], y[2], (size_t)E * 4),
               "%s: not the bits of the GLU kernel / of the unfused plan", label[0]);
        CHECKF(kn[0] == kn[1] && kn[1] < kn[2], "%s: %d kernels (GLU kernel %d, unfused %d)", label[0], (int)kn[0], (int)kn[1], (int)kn[2]);
        ir_graph_free(g);
        free(x), free(wn), free(wg), free(wu), free(wd), free(qg), free(qu), free(qd);
        for (int v = 0; v < 3; v++) free(y[v]);
    }
}

/* residual add, then RMSNorm -> quantize -> GEMV, plus the sum again (add + rms_norm_quant in one
 * kernel, which also writes the sum) */
static void test_add_norm(void) {
    const int64_t E = 512;
    const int types[] = {SB_TYPE_Q8_0, SB_TYPE_Q4_K};
    for (int k = 0; k < 2; k++)
        for (int64_t T = 1; T <= 5; T += 4) {
            float *x = rnd(E * T, 2.0f), *r = rnd(E * T, 1.0f), *wn = rnd(E, 1.0f), *wf = rnd(E * E, 0.05f);
            void *wq = quant_rows(types[k], wf, E, E);
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
            ir_ref rr = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
            ir_ref wnr = ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
            ir_ref wr = ir_input_weight(g, "w", types[k], (int64_t[4]){E, E, 1, 1});
            ir_ref sum = ir_add(g, xr, rr);
            ir_output(g, ir_add(g, sum, ir_matmul(g, wr, ir_mul(g, ir_rms_norm(g, sum, 1e-6f), wnr))), "y");
            binds b = {.name = {"x", "r", "wn", "w"}, .data = {x, r, wn, wq}, .n = 4};
            char label[96];
            snprintf(label, sizeof label, "add+rms_norm_quant -> %s + sum T=%lld", ir_dtype_name(types[k]), (long long)T);
            expect_fused(g, &b, label, 5e-4, 2); /* the add before the norm (fuse_add_norm), the residual after the GEMV (an addend) */
            ir_graph_free(g);
            free(x), free(r), free(wn), free(wf), free(wq);
        }
}

/* gemma's sandwich norms: post-norm + residual chains whose result the next pre-norm quantizes (an
 * rms_norm_quant tail) or a GEMV reads as it is (a quantize tail), Q8_0 (q8_1) and Q4_K (q8_K)
 * weights, 1 and 5 rows, the norm sums in the 1024-thread and (act_fast) the register layouts: vs the
 * reference, two kernels fewer with the tails (cu_ew_quant_rows) and byte-identical to the chain
 * and quantizer kernels apart */
static void test_chain_quant(void) {
    const int64_t E = 512;
    const int types[] = {SB_TYPE_Q8_0, SB_TYPE_Q4_K};
    fuse_on = true;
    for (int k = 0; k < 8; k++) {
        const int type = types[k & 1];
        const int64_t T = k & 2 ? 5 : 1;
        tc_cfg.act_fast = k >= 4;
        float *x = rnd(E * T, 2.0f), *r = rnd(E * T, 1.0f), *wn[3] = {rnd(E, 1.0f), rnd(E, 1.0f), rnd(E, 1.0f)};
        float *wf[2] = {rnd(E * E, 0.05f), rnd(E * E, 0.05f)};
        void *wq[2] = {quant_rows(type, wf[0], E, E), quant_rows(type, wf[1], E, E)};
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref rr = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref n0 = ir_input_weight(g, "n0", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref n1 = ir_input_weight(g, "n1", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref n2 = ir_input_weight(g, "n2", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref w0 = ir_input_weight(g, "w0", type, (int64_t[4]){E, E, 1, 1});
        ir_ref w1 = ir_input_weight(g, "w1", type, (int64_t[4]){E, E, 1, 1});
        ir_ref c1 = ir_add(g, ir_mul(g, ir_rms_norm(g, xr, 1e-6f), n0), rr);
        ir_ref y1 = ir_matmul(g, w0, ir_mul(g, ir_rms_norm(g, c1, 1e-6f), n1));
        ir_ref c2 = ir_add(g, ir_mul(g, ir_rms_norm(g, y1, 1e-6f), n2), c1);
        ir_output(g, ir_add(g, ir_matmul(g, w1, c2), c2), "y");
        binds b = {.name = {"x", "r", "n0", "n1", "n2", "w0", "w1"}, .data = {x, r, wn[0], wn[1], wn[2], wq[0], wq[1]}, .n = 7};
        char label[112];
        snprintf(label, sizeof label, "chain + quantize tails -> %s T=%lld%s", ir_dtype_name(type), (long long)T, k >= 4 ? " act_fast" : "");
        expect_flip(g, &b, label, "tails", &chain_quant_on, 5e-4, 2, true);
        chain_quant_on = true;
        ir_graph_free(g);
        free(x), free(r), free(wn[0]), free(wn[1]), free(wn[2]), free(wf[0]), free(wf[1]), free(wq[0]), free(wq[1]);
    }
    tc_cfg.act_fast = cu_config_default.act_fast;
    fuse_on = false;
}

/* RMSNorm -> q8_1 rows past one wave (k_rms_norm_q8_1_rows: 600 rows, more than 2 an SM on any GPU
 * below 300 SMs) with and without the residual add, rows of 1024 / 896 / 96 values (4, 3.5 and 0.4
 * of its 4 values a thread): vs the reference, and byte-identical to the 1024-thread kernel (its
 * summation order, reproduced) through the Q8_0 GEMM that consumes the activations */
static void test_norm_rows(void) {
    const int64_t T = 600, N = 32, Es[3] = {1024, 896, 96};
    for (int k = 0; k < 6; k++) {
        const int64_t E = Es[k % 3];
        const bool add = k >= 3;
        float *x = rnd(E * T, 2.0f), *r = rnd(E * T, 1.0f), *wn = rnd(E, 1.0f), *wf = rnd(E * N, 0.1f);
        void *wq = quant_rows(SB_TYPE_Q8_0, wf, E, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref rr = ir_input_weight(g, "r", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref wnr = ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref wr = ir_input_weight(g, "w", SB_TYPE_Q8_0, (int64_t[4]){E, N, 1, 1});
        ir_ref h = add ? ir_add(g, xr, rr) : xr;
        ir_output(g, ir_matmul(g, wr, ir_mul(g, ir_rms_norm(g, h, 1e-6f), wnr)), "y");
        binds b = {.name = {"x", "r", "wn", "w"}, .data = {x, r, wn, wq}, .n = 4};
        char label[96];
        snprintf(label, sizeof label, "%srms_norm_quant rows kernel E=%lld T=%lld -> q8_0", add ? "add+" : "", (long long)E, (long long)T);
        expect(run_both(g, &b, label), 5e-4, label);
        float *y1 = last_y;
        const int64_t n1 = last_n;
        last_y = NULL;
        tc_cfg.norm_rows = false;
        expect(run_both(g, &b, label), 5e-4, label);
        tc_cfg.norm_rows = true;
        CHECKF(y1 && last_y && n1 == last_n && !memcmp(y1, last_y, (size_t)n1 * 4), "%s: not byte-identical to the 1024-thread kernel", label);
        free(y1);
        ir_graph_free(g);
        free(x), free(r), free(wn), free(wf), free(wq);
    }
}

static void test_rope(void) {
    const int64_t D = 64, H = 3, T = 4;
    int32_t pos[4] = {0, 7, 1000, 4095};
    for (int k = 0; k < 4; k++) {
        float *x = rnd(D * H * T, 1.0f), *ff = malloc(32 * sizeof *ff);
        for (int i = 0; i < 32; i++) ff[i] = 1.0f + 0.25f * (float)(i % 5);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){D, H, T, 1});
        const int n_rot = k == 3 ? 32 : 64;
        ir_ref fr = k >= 2 ? ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){n_rot / 2, 1, 1, 1}) : IR_NONE;
        ir_rope_params rp = {.n_rot = n_rot, .mode = k % 2 ? IR_ROPE_NEOX : IR_ROPE_NORMAL, .freq_base = 10000.0f,
                             .freq_scale = k == 2 ? 0.125f : 1.0f};
        ir_output(g, ir_rope(g, xr, ir_input_pos(g, T), fr, &rp), "y");
        binds b = {.name = {"x", "ff"}, .data = {x, ff}, .n = 2, .pos = pos};
        char label[96];
        snprintf(label, sizeof label, "rope %s n_rot %d%s", k % 2 ? "neox" : "normal", n_rot, k >= 2 ? " freq factors" : "");
        expect(run_both(g, &b, label), 1e-10, label);
        ir_graph_free(g);
        free(x);
        free(ff);
    }
}

/* RoPE of gemma4's global heads (D 512): every dim rotated with 256 freq factors, and a partial rope
 * (128 of 512 dims; the rest copied), NEOX, at positions up to 8191 */
static void test_rope_wide(void) {
    const int64_t D = 512, H = 2, T = 3;
    int32_t pos[3] = {0, 77, 8191};
    const int rots[2] = {512, 128};
    for (int k = 0; k < 2; k++) {
        const int n_rot = rots[k];
        float *x = rnd(D * H * T, 1.0f), *ff = malloc((size_t)(n_rot / 2) * sizeof *ff);
        for (int i = 0; i < n_rot / 2; i++) ff[i] = i < n_rot / 8 ? 1.0f : 1e10f; /* proportional rope: most pairs barely turn */
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){D, H, T, 1});
        ir_ref fr = ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){n_rot / 2, 1, 1, 1});
        ir_rope_params rp = {.n_rot = n_rot, .mode = IR_ROPE_NEOX, .freq_base = 1000000.0f, .freq_scale = 1.0f};
        ir_output(g, ir_rope(g, xr, ir_input_pos(g, T), fr, &rp), "y");
        binds b = {.name = {"x", "ff"}, .data = {x, ff}, .n = 2, .pos = pos};
        char label[96];
        snprintf(label, sizeof label, "rope neox D=%lld n_rot %d freq factors", (long long)D, n_rot);
        expect(run_both(g, &b, label), 1e-10, label);
        ir_graph_free(g);
        free(x);
        free(ff);
    }
}

/* an attention test's random data: q [D,Hq,T], new k/v [Dkv,T], caches [Dkv,C] of ctype; and the
 * graph inputs over it (names "q", "kn", "vn", "cache_k.0", "cache_v.0": attn_binds) */
typedef struct attn_data {
    float *q, *kn, *vn, *kf, *vf;
    void *kc, *vc;
} attn_data;
typedef struct attn_refs {
    ir_ref q, kn, vn, kc, vc;
} attn_refs;

static attn_data attn_data_new(int ctype, int64_t D, int64_t Hq, int64_t Dkv, int64_t T, int64_t C) {
    attn_data a = {.q = rnd(D * Hq * T, 1.0f), .kn = rnd(Dkv * T, 1.0f), .vn = rnd(Dkv * T, 1.0f), .kf = rnd(Dkv * C, 1.0f),
                   .vf = rnd(Dkv * C, 1.0f)};
    a.kc = quant_rows(ctype, a.kf, Dkv, C), a.vc = quant_rows(ctype, a.vf, Dkv, C);
    return a;
}

static void attn_data_free(attn_data *a) { free(a->q), free(a->kn), free(a->vn), free(a->kf), free(a->vf), free(a->kc), free(a->vc); }

static attn_refs attn_inputs(ir_graph *g, int ctype, int64_t D, int64_t Hq, int64_t Dkv, int64_t T, int64_t C) {
    return (attn_refs){.q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, T, 1}),
                       .kn = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1}),
                       .vn = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1}),
                       .kc = ir_input_kv(g, "cache_k.0", ctype, (int64_t[4]){Dkv, C, 1, 1}),
                       .vc = ir_input_kv(g, "cache_v.0", ctype, (int64_t[4]){Dkv, C, 1, 1})};
}

/* the bindings of attn_inputs' five */
static binds attn_binds(const attn_data *a, int32_t *pos) {
    return (binds){.name = {"q", "kn", "vn", "cache_k.0", "cache_v.0"}, .data = {a->q, a->kn, a->vn, a->kc, a->vc}, .n = 5, .pos = pos};
}

/* ropes and stores with their head norms (pass fuse_norm_rope, cu_rope_norm, device/rope_norm.cuh):
 * Qwen3-like q / k (D 128, weighted norms, NEOX; K through its rope_store into the f16 cache) and
 * Gemma 4-like global heads (D 512, freq factors with 1e30 entries, V's weightless norm into its
 * kv_store), T = 1 and 3..4 at the end of a 64-row f16 cache, up to the attention over them. Against
 * the reference; the planner's fusions on (fuse_on) against off: 3 (Gemma: 4) launches fewer — the
 * norms and K's separate store — and the same bits (the rope kernel sums a head's squares in another
 * order than the chain kernel, both in double: equal unless a head's squares span ~2^29). */
static void test_norm_rope(void) {
    const int64_t C = 64;
    struct { int64_t D, Hq, Hkv, T; bool gemma; } cs[] = {{128, 8, 2, 1, false}, {128, 8, 2, 4, false}, {512, 4, 1, 1, true}, {512, 4, 1, 3, true}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const int64_t D = cs[c].D, Hq = cs[c].Hq, Hkv = cs[c].Hkv, T = cs[c].T, Dkv = D * Hkv;
        attn_data a = attn_data_new(SB_TYPE_F16, D, Hq, Dkv, T, C);
        float *qw = rnd(D, 1.0f), *kw = rnd(D, 1.0f), *ff = malloc((size_t)(D / 2) * sizeof *ff);
        for (int64_t i = 0; i < D / 2; i++) ff[i] = i < D / 8 ? 1.0f + 0.1f * (float)(i % 3) : 1e30f;
        int32_t pos[4];
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(C - T + t);
        ir_graph *g;
        ir_graph_create(&g);
        const attn_refs r = attn_inputs(g, SB_TYPE_F16, D, Hq, Dkv, T, C);
        ir_ref p = ir_input_pos(g, T);
        ir_ref qn = ir_input_weight(g, "qw", SB_TYPE_F32, (int64_t[4]){D, 1, 1, 1}), kn = ir_input_weight(g, "kw", SB_TYPE_F32, (int64_t[4]){D, 1, 1, 1});
        ir_ref fr = cs[c].gemma ? ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){D / 2, 1, 1, 1}) : IR_NONE;
        ir_rope_params rp = {.n_rot = (int32_t)D, .mode = IR_ROPE_NEOX, .freq_base = 1000000.0f, .freq_scale = 1.0f};
        ir_ref q = ir_rope(g, ir_mul(g, ir_rms_norm(g, r.q, 1e-6f), qn), p, fr, &rp);
        ir_ref k = ir_mul(g, ir_rms_norm(g, ir_reshape(g, r.kn, (int64_t[4]){D, Hkv, T, 1}), 1e-6f), kn);
        ir_ref ks = ir_kv_store(g, r.kc, ir_reshape(g, ir_rope(g, k, p, fr, &rp), (int64_t[4]){Dkv, T, 1, 1}), p);
        ir_ref v = r.vn;
        if (cs[c].gemma) v = ir_reshape(g, ir_rms_norm(g, ir_reshape(g, v, (int64_t[4]){D, Hkv, T, 1}), 1e-6f), (int64_t[4]){Dkv, T, 1, 1});
        ir_ref vs = ir_kv_store(g, r.vc, v, p);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = cs[c].gemma ? 1.0f : 1.0f / sqrtf((float)D)};
        ir_output(g, ir_attention(g, q, ks, vs, p, &ap), "y");
        binds b = attn_binds(&a, pos);
        b.name[5] = "qw", b.data[5] = qw;
        b.name[6] = "kw", b.data[6] = kw;
        b.name[7] = "ff", b.data[7] = ff;
        b.n = 8;
        char label[96];
        snprintf(label, sizeof label, "norm+rope %s D=%lld T=%lld", cs[c].gemma ? "gemma4 (+V norm)" : "qwen3", (long long)D, (long long)T);
        fused_bits = true;
        expect_fused(g, &b, label, 1e-9, cs[c].gemma ? 4 : 3);
        fused_bits = false;
        ir_graph_free(g);
        attn_data_free(&a);
        free(qw), free(kw), free(ff);
    }
}

static void test_attention(void) {
    const int64_t Hq = 4, Hkv = 2, C = 300;
    struct { int64_t T, p0; int ctype, window; float softcap; int64_t D; } cs[] = {
        {1, 0, SB_TYPE_F32, 0, 0, 64}, {1, 250, SB_TYPE_F32, 0, 0, 64}, {1, 250, SB_TYPE_F16, 0, 0, 64}, {5, 100, SB_TYPE_F32, 0, 0, 64},
        {5, 100, SB_TYPE_F16, 8, 0, 64}, {1, 299, SB_TYPE_F32, 8, 30.0f, 64}, {13, 0, SB_TYPE_F32, 0, 50.0f, 64},
        {1, 120, SB_TYPE_F16, 0, 20.0f, 64}, {7, 60, SB_TYPE_F32, 0, 0, 37}, {1, 200, SB_TYPE_F16, 0, 0, 37},
        {3, 140, SB_TYPE_F16, 0, 0, 256}, {1, 290, SB_TYPE_F32, 0, 0, 256},
        /* gemma's 256 past the small layout: k_attn_deep.cu (depth class 512; a window of 200) */
        {1, 260, SB_TYPE_F16, 0, 20.0f, 256}, {1, 299, SB_TYPE_F16, 200, 0, 256}, {1, 135, SB_TYPE_F32, 0, 0, 256},
        /* heads past cu_attention's 256: the paged kernel over the contiguous cache (gemma4's 512); its key
         * splits at 132 SMs: S 5 at T <= 2 (4 of 5 active at 250, 5 at 280, 1 at 0), 1 under the window */
        {1, 250, SB_TYPE_F16, 0, 0, 512}, {5, 100, SB_TYPE_F32, 8, 30.0f, 512}, {2, 280, SB_TYPE_F16, 0, 0, 320}, {1, 0, SB_TYPE_F32, 0, 0, 512},
    };
    const int variants[3] = {1, 2, 4}; /* 4: k_attn_decode.cu for T == 1, flash attention (or 2) for T > 1 */
    for (size_t kk = 0; kk < 3 * sizeof cs / sizeof cs[0]; kk++) {
        const size_t k = kk % (sizeof cs / sizeof cs[0]);
        attn_variant = variants[kk / (sizeof cs / sizeof cs[0])];
        const int64_t T = cs[k].T, D = cs[k].D, Dkv = D * Hkv;
        attn_data ad = attn_data_new(cs[k].ctype, D, Hq, Dkv, T, C);
        int32_t pos[16];
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(cs[k].p0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        const attn_refs in = attn_inputs(g, cs[k].ctype, D, Hq, Dkv, T, C);
        ir_ref pr = ir_input_pos(g, T);
        ir_ref k2 = ir_kv_store(g, in.kc, in.kn, pr), v2 = ir_kv_store(g, in.vc, in.vn, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f, .window = cs[k].window,
                             .softcap = cs[k].softcap};
        ir_output(g, ir_attention(g, in.q, k2, v2, pr, &ap), "y");
        binds b = attn_binds(&ad, pos);
        char label[96];
        snprintf(label, sizeof label, "kv_store+attention v%d %s D=%lld T=%lld p0=%lld w=%d cap=%g", attn_variant,
                 ir_dtype_name(cs[k].ctype), (long long)D, (long long)T, (long long)cs[k].p0, cs[k].window, cs[k].softcap);
        expect(run_both(g, &b, label), attn_variant == 4 ? flash_limit(T, cs[k].ctype, D) : 1e-9, label);
        ir_graph_free(g);
        attn_data_free(&ad);
    }
    attn_variant = 1;
}

/* Paged attention (k_attn_paged.cu): one step of T tokens from three sequences over a pool of
 * n_blk blocks of bs rows — sequence s's table a shuffled set of blocks, its tokens at consecutive
 * positions from start[s] — each token's K/V stored at its slot first, then attention through the
 * tables. Rows of other sequences' blocks hold unrelated keys, so a wrong row mapping shows. The
 * executor splits the keys (exec_cuda_plan.c attn_nsplit_paged: S from the table's reach and the
 * SM count; 132 SMs: S 3 in the shallow cases (1 under the window of 24), 11 and 4 in the deep
 * ones, where every split, some or one is active by depth). Each case runs a block per query head
 * (cu_config.attn_gqa 0) and grouped (attn_gqa 8: F16 caches of head_dim 64 / 128 / 256 / 512 and
 * F32 of 64 / 128 take k_attn_paged_gqa, hb query heads of a kv head a block, up to 128 splits,
 * merged by the last split block at head_dim <= 128): the gemma shapes below are for it (G 4 / 8,
 * deep tokens of 2,000-5,000 keys with 64-key splits, a window of 512), and the last rows (G 7 / 5
 * / 3 / 8 / 1 at head_dim 64 / 128, F16 and F32, Qwen2.5-0.5B's heads at depth 4,000). */
static void test_paged_attention(void) {
    struct { int64_t D, Hq, Hkv; int ctype, window, bs; float softcap; int64_t start[3], len[3]; } cs[] = {
        {64, 4, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}},      /* decode + a prefill chunk */
        {128, 8, 2, SB_TYPE_F32, 0, 16, 0, {100, 15, 3}, {1, 1, 1}},    /* three decodes, one at a block edge */
        {256, 2, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 0}, {2, 3, 9}},  /* window, softcap, bs 8 */
        {80, 6, 3, SB_TYPE_F32, 0, 5, 0, {41, 12, 1}, {1, 1, 4}},       /* head_dim 80, blocks of 5 */
        {128, 8, 2, SB_TYPE_F16, 0, 16, 0, {1000, 300, 3}, {1, 1, 1}},  /* deep decodes: all, 5, 1 splits active */
        {64, 4, 1, SB_TYPE_F32, 256, 16, 30.0f, {700, 2, 129}, {1, 2, 1}}, /* window 256 deep, softcap */
        {512, 8, 2, SB_TYPE_F16, 0, 16, 0, {4095, 2000, 7}, {1, 1, 1}},    /* gemma4-e4b's global layer: 3 decodes */
        {256, 8, 2, SB_TYPE_F16, 512, 16, 0, {4999, 600, 3}, {1, 2, 5}},   /* its sliding layers: window 512 */
        {256, 4, 1, SB_TYPE_F16, 0, 32, 30.0f, {4500, 64, 0}, {1, 1, 4}},  /* gemma3-1b's heads (G 4), softcap */
        {512, 8, 1, SB_TYPE_F16, 0, 16, 0, {1500, 33, 1}, {1, 1, 6}},      /* G 8 at head_dim 512: two blocks a kv head */
        {256, 8, 1, SB_TYPE_F16, 0, 16, 0, {2047, 0, 100}, {1, 3, 1}},     /* G 8 in one block */
        {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {127, 0, 600}, {1, 5, 1}},      /* qwen2.5-0.5b's heads: G 7 in one block */
        {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {4000, 150, 1}, {1, 1, 1}},     /* ... deep decodes: up to 63 splits active */
        {128, 10, 2, SB_TYPE_F16, 0, 16, 30.0f, {599, 1, 200}, {1, 2, 1}}, /* G 5, softcap */
        {64, 6, 2, SB_TYPE_F32, 24, 5, 0, {41, 12, 1}, {1, 1, 4}},         /* G 3, F32, window, bs 5 */
        {128, 16, 2, SB_TYPE_F32, 0, 16, 0, {3000, 15, 130}, {1, 1, 1}},   /* G 8, F32, deep */
        {64, 8, 8, SB_TYPE_F16, 100, 16, 0, {700, 33, 2}, {1, 3, 1}},      /* G 1, window 100 */
    };
    for (size_t kk = 0; kk < 2 * sizeof cs / sizeof cs[0]; kk++) {
        const size_t k = kk % (sizeof cs / sizeof cs[0]);
        const int gqa = kk < sizeof cs / sizeof cs[0] ? 0 : 8;
        int64_t T = 0, last = 159; /* table entries a token carries: enough for position 159, or the deepest */
        for (int s = 0; s < 3; s++) {
            T += cs[k].len[s];
            if (cs[k].len[s] && cs[k].start[s] + cs[k].len[s] - 1 > last) last = cs[k].start[s] + cs[k].len[s] - 1;
        }
        const int64_t D = cs[k].D, Hq = cs[k].Hq, Hkv = cs[k].Hkv, Dkv = D * Hkv, bs = cs[k].bs, n_tbl = last / bs + 1;
        const int64_t n_blk = 3 * n_tbl > 128 ? 3 * n_tbl : 128, C = n_blk * bs;
        int32_t *blocks = malloc((size_t)n_blk * 4), pos[16], slots[16], *tbl = malloc((size_t)(n_tbl * T) * 4);
        for (int i = 0; i < n_blk; i++) blocks[i] = i;
        for (int i = n_blk - 1; i > 0; i--) { /* shuffled: sequence s owns blocks[s * n_tbl ..] */
            const int j = (int)(test_rand_u64(&seed) % (uint64_t)(i + 1)), x = blocks[i];
            blocks[i] = blocks[j], blocks[j] = x;
        }
        for (int s = 0, t = 0; s < 3; s++)
            for (int64_t i = 0; i < cs[k].len[s]; i++, t++) {
                pos[t] = (int32_t)(cs[k].start[s] + i);
                for (int64_t e = 0; e < n_tbl; e++) tbl[t * n_tbl + e] = blocks[s * n_tbl + e];
                slots[t] = (int32_t)(tbl[t * n_tbl + pos[t] / bs] * bs + pos[t] % bs);
            }
        attn_data ad = attn_data_new(cs[k].ctype, D, Hq, Dkv, T, C);
        ir_graph *g;
        ir_graph_create(&g);
        const attn_refs in = attn_inputs(g, cs[k].ctype, D, Hq, Dkv, T, C);
        ir_ref pr = ir_input_pos(g, T), sr = ir_input_slots(g, T), tr = ir_input_block_table(g, n_tbl, T);
        ir_ref k2 = ir_kv_store(g, in.kc, in.kn, sr), v2 = ir_kv_store(g, in.vc, in.vn, sr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f, .window = cs[k].window,
                             .softcap = cs[k].softcap};
        ir_output(g, ir_attention_paged(g, in.q, k2, v2, pr, tr, (int32_t)bs, &ap), "y");
        binds b = attn_binds(&ad, pos);
        b.name[5] = "slots", b.data[5] = slots;
        b.name[6] = "block_table", b.data[6] = tbl;
        b.n = 7;
        char label[128];
        snprintf(label, sizeof label, "paged attention%s %s D=%lld Hq/Hkv=%lld/%lld T=%lld bs=%lld w=%d cap=%g", gqa ? " (attn_gqa 8)" : "",
                 ir_dtype_name(cs[k].ctype), (long long)D, (long long)Hq, (long long)Hkv, (long long)T, (long long)bs, cs[k].window,
                 cs[k].softcap);
        const int gqa_was = tc_cfg.attn_gqa;
        tc_cfg.attn_gqa = gqa;
        expect(run_both(g, &b, label), 1e-9, label);
        tc_cfg.attn_gqa = gqa_was;
        ir_graph_free(g);
        attn_data_free(&ad);
        free(tbl), free(blocks);
    }
}

/* RoPE(q) then paged attention, a decode (T = 1) of one sequence through a shuffled block table (its
 * K/V stored at its slot first; the other blocks hold unrelated keys): with the fusions on, the paged
 * kernel rotates q as it loads it (pass fuse_attn_rope; device/attn_paged.cuh pa_q_rope) and the ROPE
 * launch goes — one kernel fewer, the output bit for bit the unfused run's (rope_rot is k_rope's math).
 * Normal / neox, part of the dims, freq factors, a window and softcap, the key split (deep tokens),
 * and the grouped kernel (attn_gqa 8: F16 at head_dim 256, G 4; head_dim 64 / 128 at G 7 / 2 / 5, F16
 * and F32). */
static void test_paged_rope_attention(void) {
    struct { int64_t D, Hq, Hkv; int ctype, window, bs; float softcap; int32_t p; int mode, n_rot, gqa, ff; } cs[] = {
        {64, 14, 2, SB_TYPE_F16, 0, 16, 0, 37, IR_ROPE_NEOX, 64, 0, 0},       /* qwen2.5-0.5b's heads */
        {128, 8, 2, SB_TYPE_F32, 0, 16, 0, 1000, IR_ROPE_NORMAL, 128, 0, 1},  /* deep: key splits; freq factors */
        {80, 6, 3, SB_TYPE_F16, 24, 5, 30.0f, 300, IR_ROPE_NEOX, 32, 0, 0},   /* part of the dims, window, softcap, bs 5 */
        {128, 16, 8, SB_TYPE_F16, 0, 32, 0, 4000, IR_ROPE_NEOX, 128, 0, 1},   /* llama-like, deep */
        {256, 8, 2, SB_TYPE_F16, 0, 16, 0, 2047, IR_ROPE_NEOX, 256, 8, 0},    /* grouped kernel, split */
        {256, 4, 1, SB_TYPE_F16, 0, 16, 30.0f, 5, IR_ROPE_NORMAL, 128, 8, 1}, /* grouped, shallow, softcap, ff */
        {64, 14, 2, SB_TYPE_F16, 0, 16, 0, 37, IR_ROPE_NEOX, 64, 8, 0},       /* grouped qwen2.5-0.5b: G 7 a block */
        {64, 14, 2, SB_TYPE_F16, 0, 16, 0, 1000, IR_ROPE_NEOX, 64, 8, 0},     /* ... split, the last block merges */
        {128, 16, 8, SB_TYPE_F32, 0, 32, 0, 4000, IR_ROPE_NEOX, 128, 8, 1},   /* grouped llama-like, F32, deep, ff */
        {128, 10, 2, SB_TYPE_F16, 24, 5, 30.0f, 300, IR_ROPE_NORMAL, 64, 8, 0}, /* grouped G 5, part of the dims, window */
    };
    const bool bits_was = fused_bits;
    fused_bits = true;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t D = cs[k].D, Hq = cs[k].Hq, Hkv = cs[k].Hkv, Dkv = D * Hkv, bs = cs[k].bs, n_tbl = cs[k].p / bs + 1;
        const int64_t n_blk = 2 * n_tbl > 64 ? 2 * n_tbl : 64, C = n_blk * bs;
        int32_t *blocks = malloc((size_t)n_blk * 4), *tbl = malloc((size_t)n_tbl * 4), pos[1] = {cs[k].p}, slots[1];
        for (int i = 0; i < n_blk; i++) blocks[i] = i;
        for (int i = n_blk - 1; i > 0; i--) {
            const int j = (int)(test_rand_u64(&seed) % (uint64_t)(i + 1)), x = blocks[i];
            blocks[i] = blocks[j], blocks[j] = x;
        }
        for (int64_t e = 0; e < n_tbl; e++) tbl[e] = blocks[e];
        slots[0] = (int32_t)(tbl[pos[0] / bs] * bs + pos[0] % bs);
        float *ff = malloc((size_t)(cs[k].n_rot / 2) * 4);
        for (int i = 0; i < cs[k].n_rot / 2; i++) ff[i] = 1.0f + 3.0f * (float)(test_rand_u64(&seed) % 1000) / 1000.0f;
        attn_data ad = attn_data_new(cs[k].ctype, D, Hq, Dkv, 1, C);
        ir_graph *g;
        ir_graph_create(&g);
        const attn_refs in = attn_inputs(g, cs[k].ctype, D, Hq, Dkv, 1, C);
        ir_ref pr = ir_input_pos(g, 1), sr = ir_input_slots(g, 1), tr = ir_input_block_table(g, n_tbl, 1);
        ir_ref ffr = cs[k].ff ? ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){cs[k].n_rot / 2, 1, 1, 1}) : IR_NONE;
        ir_rope_params rp = {.n_rot = cs[k].n_rot, .mode = cs[k].mode, .freq_base = cs[k].mode == IR_ROPE_NEOX ? 1e6f : 1e4f,
                             .freq_scale = cs[k].ff ? 1.0f : 0.5f};
        ir_ref qrot = ir_rope(g, in.q, pr, ffr, &rp);
        ir_ref k2 = ir_kv_store(g, in.kc, in.kn, sr), v2 = ir_kv_store(g, in.vc, in.vn, sr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 1.0f / sqrtf((float)D), .window = cs[k].window,
                             .softcap = cs[k].softcap};
        ir_output(g, ir_attention_paged(g, qrot, k2, v2, pr, tr, (int32_t)bs, &ap), "y");
        binds b = attn_binds(&ad, pos);
        b.name[5] = "slots", b.data[5] = slots;
        b.name[6] = "block_table", b.data[6] = tbl;
        b.name[7] = "ff", b.data[7] = ff;
        b.n = 8;
        char label[128];
        snprintf(label, sizeof label, "rope(q)+paged attention%s %s D=%lld Hq/Hkv=%lld/%lld p=%d %s n_rot %d%s w=%d cap=%g",
                 cs[k].gqa ? " (attn_gqa 8)" : "", ir_dtype_name(cs[k].ctype), (long long)D, (long long)Hq, (long long)Hkv, (int)cs[k].p,
                 cs[k].mode == IR_ROPE_NEOX ? "neox" : "normal", cs[k].n_rot, cs[k].ff ? " ff" : "", cs[k].window, cs[k].softcap);
        const int gqa_was = tc_cfg.attn_gqa;
        tc_cfg.attn_gqa = cs[k].gqa;
        expect_fused(g, &b, label, 1e-9, 1);
        tc_cfg.attn_gqa = gqa_was;
        ir_graph_free(g);
        attn_data_free(&ad);
        free(tbl), free(blocks), free(ff);
    }
    fused_bits = bits_was;
}

/* RoPE(q) then attention (kv_store of fresh k/v first): with the fusion on, the attention rotates q
 * as it loads it (k_attn's rope_pair) and the ROPE kernel is skipped */
static void test_rope_attention(void) {
    const int64_t Hq = 4, Hkv = 2, C = 200, D = 64, Dkv = D * Hkv;
    /* hpb: variant 4's heads per block (0 auto: 1 at these depths); warp: its warp path up to that depth
     * (attn_warp; 0 off): one warp (depth <= 32), the keys loaded before pos is read (depth
     * <= 64), several warps from global rows, and too deep for it (the tiled path); small: the
     * small-depth layout up to that depth (attn_small; 0 off): 1, 32, 64 keys (the keys
     * loaded before pos is read), 65 (past it: the tiled path), 101 and 128 (global rows), odd cases
     * with the q8_1 output */
    struct { int64_t T, p0; int mode, n_rot, variant, hpb, warp, small; } cs[] = {
        {1, 150, IR_ROPE_NEOX, 64, 2, 0, 0, 0},    {1, 3, IR_ROPE_NORMAL, 64, 1, 0, 0, 0},   {5, 40, IR_ROPE_NEOX, 32, 2, 0, 0, 0},    {1, 199, IR_ROPE_NEOX, 64, 1, 0, 0, 0},
        {1, 120, IR_ROPE_NEOX, 64, 2, 0, 0, 0},    {6, 30, IR_ROPE_NEOX, 64, 2, 0, 0, 0},    {1, 130, IR_ROPE_NEOX, 64, 4, 0, 0, 0},   {1, 3, IR_ROPE_NORMAL, 32, 4, 0, 0, 0},
        {1, 0, IR_ROPE_NORMAL, 64, 4, 0, 0, 0},    {1, 199, IR_ROPE_NEOX, 64, 4, 0, 0, 0},   {1, 199, IR_ROPE_NORMAL, 48, 4, 0, 0, 0}, {1, 60, IR_ROPE_NEOX, 64, 4, 0, 0, 0},
        {1, 130, IR_ROPE_NEOX, 64, 4, 2, 0, 0}, {1, 3, IR_ROPE_NORMAL, 32, 4, 2, 0, 0}, {1, 0, IR_ROPE_NEOX, 64, 4, 2, 0, 0}, {1, 199, IR_ROPE_NORMAL, 48, 4, 2, 0, 0},
        {1, 60, IR_ROPE_NEOX, 64, 4, 0, 64, 0}, {1, 3, IR_ROPE_NORMAL, 32, 4, 0, 256, 0}, {1, 0, IR_ROPE_NEOX, 64, 4, 0, 32, 0},
        {1, 130, IR_ROPE_NEOX, 64, 4, 0, 256, 0}, {1, 199, IR_ROPE_NORMAL, 48, 4, 0, 1024, 0}, {1, 199, IR_ROPE_NEOX, 64, 4, 0, 64, 0},
        {1, 31, IR_ROPE_NORMAL, 64, 4, 0, 1024, 0}, {1, 40, IR_ROPE_NEOX, 64, 4, 0, 1024, 0},
        {1, 0, IR_ROPE_NEOX, 64, 4, 0, 0, 64},       {1, 31, IR_ROPE_NORMAL, 64, 4, 0, 0, 64},   {1, 63, IR_ROPE_NEOX, 32, 4, 0, 1 << 20, 64},
        {1, 127, IR_ROPE_NEOX, 64, 4, 0, 1 << 20, 128}, {1, 64, IR_ROPE_NORMAL, 48, 4, 0, 0, 64}, {1, 63, IR_ROPE_NEOX, 64, 4, 0, 1024, 128},
        {1, 100, IR_ROPE_NORMAL, 64, 4, 0, 0, 128},  {1, 32, IR_ROPE_NEOX, 64, 4, 0, 0, 128},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t T = cs[k].T;
        float *q = rnd(D * Hq * T, 1.0f), *kn = rnd(Dkv * T, 1.0f), *vn = rnd(Dkv * T, 1.0f);
        float *kc = rnd(Dkv * C, 1.0f), *vc = rnd(Dkv * C, 1.0f);
        int32_t pos[8];
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(cs[k].p0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref qr = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, T, 1});
        ir_ref knr = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref vnr = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref kcr = ir_input_kv(g, "cache_k.0", SB_TYPE_F32, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref vcr = ir_input_kv(g, "cache_v.0", SB_TYPE_F32, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref pr = ir_input_pos(g, T);
        ir_rope_params rp = {.n_rot = cs[k].n_rot, .mode = cs[k].mode, .freq_base = 10000.0f, .freq_scale = 1.0f};
        ir_ref qrot = ir_rope(g, qr, pr, IR_NONE, &rp);
        ir_ref k2 = ir_kv_store(g, kcr, knr, pr), v2 = ir_kv_store(g, vcr, vnr, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_ref att = ir_attention(g, qrot, k2, v2, pr, &ap);
        /* odd cases: the attention output feeds a Q8_0 GEMV (q8_1 activation: the quantize folds into the attention) */
        const bool gemv = k % 2 == 1;
        const int64_t NO = 48;
        float *wo = rnd(D * Hq * NO, 0.1f);
        void *woq = quant_rows(SB_TYPE_Q8_0, wo, D * Hq, NO);
        if (gemv) att = ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_Q8_0, (int64_t[4]){D * Hq, NO, 1, 1}), att);
        ir_output(g, att, "y");
        binds b = {.name = {"q", "kn", "vn", "cache_k.0", "cache_v.0", "wo"}, .data = {q, kn, vn, kc, vc, woq}, .n = 6, .pos = pos};
        char label[128], wl[40] = "";
        if (cs[k].warp || cs[k].small) snprintf(wl, sizeof wl, " warp %d small %d", cs[k].warp, cs[k].small);
        snprintf(label, sizeof label, "rope(q)+attention v%d%s%s %s n_rot %d T=%lld p0=%lld%s", cs[k].variant, cs[k].hpb ? " hpb 2" : "", wl,
                 cs[k].mode == IR_ROPE_NEOX ? "neox" : "normal", cs[k].n_rot, (long long)T, (long long)cs[k].p0, gemv ? " -> q8_0" : "");
        attn_variant = cs[k].variant;
        attn_hpb = cs[k].hpb;
        attn_warp = cs[k].warp;
        attn_small = cs[k].small;
        expect_fused(g, &b, label, gemv ? 5e-4 : 1e-9, gemv ? 2 : 1);
        free(wo), free(woq);
        attn_variant = 1;
        attn_hpb = 0;
        attn_warp = 0;
        attn_small = 0;
        ir_graph_free(g);
        free(q), free(kn), free(vn), free(kc), free(vc);
    }
}

/* RoPE(q) -> attention -> a Q8_0 GEMV at head_dim 512 with the fusions on (decode, as gemma4's global
 * layers): the planner keeps Q's rope and the quantize apart (plan_target.attn_fuse_max_head_dim),
 * the paged kernel reads the contiguous cache (T 4 over F16 with variant 4: k_fattn_mma.cu's 512 path,
 * unfused); each variant, T 1 and 4, F16 and F32 caches */
static void test_wide_attention(void) {
    const int64_t D = 512, Hq = 4, Hkv = 1, Dkv = D * Hkv, C = 160, NO = 48;
    struct { int64_t T, p0; int ctype, variant, window; } cs[] = {
        {1, 150, SB_TYPE_F16, 4, 0}, {1, 0, SB_TYPE_F32, 2, 0}, {4, 60, SB_TYPE_F16, 4, 0}, {1, 159, SB_TYPE_F32, 1, 32},
    };
    fuse_on = true;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t T = cs[k].T;
        attn_data ad = attn_data_new(cs[k].ctype, D, Hq, Dkv, T, C);
        float *ff = malloc(256 * sizeof *ff), *wo = rnd(D * Hq * NO, 0.1f);
        for (int i = 0; i < 256; i++) ff[i] = i < 64 ? 1.0f : 1e10f;
        void *woq = quant_rows(SB_TYPE_Q8_0, wo, D * Hq, NO);
        int32_t pos[4];
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(cs[k].p0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        const attn_refs in = attn_inputs(g, cs[k].ctype, D, Hq, Dkv, T, C);
        ir_ref pr = ir_input_pos(g, T), fr = ir_input_weight(g, "ff", SB_TYPE_F32, (int64_t[4]){256, 1, 1, 1});
        ir_rope_params rp = {.n_rot = 512, .mode = IR_ROPE_NEOX, .freq_base = 1000000.0f, .freq_scale = 1.0f};
        ir_ref k2 = ir_kv_store(g, in.kc, in.kn, pr), v2 = ir_kv_store(g, in.vc, in.vn, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 1.0f / sqrtf((float)D), .window = cs[k].window};
        ir_ref att = ir_attention(g, ir_rope(g, in.q, pr, fr, &rp), k2, v2, pr, &ap);
        ir_output(g, ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_Q8_0, (int64_t[4]){D * Hq, NO, 1, 1}), att), "y");
        binds b = attn_binds(&ad, pos);
        b.name[5] = "ff", b.data[5] = ff;
        b.name[6] = "wo", b.data[6] = woq;
        b.n = 7;
        attn_variant = cs[k].variant;
        char label[128];
        snprintf(label, sizeof label, "rope(q)+attention+q8_0 fused v%d %s D=512 T=%lld p0=%lld w=%d", attn_variant, ir_dtype_name(cs[k].ctype),
                 (long long)T, (long long)cs[k].p0, cs[k].window);
        expect(run_both(g, &b, label), 5e-4, label);
        attn_variant = 1;
        ir_graph_free(g);
        attn_data_free(&ad);
        free(ff), free(wo), free(woq);
    }
    fuse_on = false;
}

/* a decode attention block: norm -> Q/K/V with biases -> RoPE(Q), RoPE(K) -> kv_store -> attention;
 * with the fusions, then with the rope(K) experiment on top (K rotated and stored by the
 * multi-GEMV launch) */
static void test_qkv_rope_block(void) {
    const int64_t E = 256, D = 64, Hq = 4, Hkv = 2, C = 96;
    const int ctypes[2] = {SB_TYPE_F32, SB_TYPE_F16};
    /* vt: V's own type (Q4_K_M files: Q6_K beside Q4_K, Q8_0 beside Q5_0 — one registers-before-the-wait launch) */
    struct { int wt, vt, mode, n_rot; int32_t p; } cs[] = {{SB_TYPE_Q5_0, SB_TYPE_Q5_0, IR_ROPE_NEOX, 64, 40},
                                                        {SB_TYPE_Q4_K, SB_TYPE_Q4_K, IR_ROPE_NORMAL, 32, 95},
                                                        {SB_TYPE_Q8_0, SB_TYPE_Q8_0, IR_ROPE_NEOX, 48, 0},
                                                        {SB_TYPE_Q5_0, SB_TYPE_Q8_0, IR_ROPE_NEOX, 64, 17},
                                                        {SB_TYPE_Q4_K, SB_TYPE_Q6_K, IR_ROPE_NEOX, 64, 63}};
    const size_t ncs = sizeof cs / sizeof cs[0];
    for (size_t kk = 0; kk < 2 * ncs; kk++) { /* attention variant 1, then 4 (k_attn_decode.cu) */
        const size_t k = kk % ncs;
        attn_variant = kk < ncs ? 1 : 4;
        const int ct = ctypes[kk % 2];
        float *x = rnd(E, 2.0f), *wn = rnd(E, 1.0f), *wq = rnd(E * D * Hq, 0.1f), *wk = rnd(E * D * Hkv, 0.1f), *wv = rnd(E * D * Hkv, 0.1f);
        float *bq = rnd(D * Hq, 0.5f), *bk = rnd(D * Hkv, 0.5f), *bv = rnd(D * Hkv, 0.5f);
        float *kf = rnd(D * Hkv * C, 1.0f), *vf = rnd(D * Hkv * C, 1.0f);
        void *wqq = quant_rows(cs[k].wt, wq, E, D * Hq), *wkq = quant_rows(cs[k].wt, wk, E, D * Hkv), *wvq = quant_rows(cs[k].vt, wv, E, D * Hkv);
        void *kc = quant_rows(ct, kf, D * Hkv, C), *vc = quant_rows(ct, vf, D * Hkv, C);
        int32_t pos[1] = {cs[k].p};
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref wnr = ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
        ir_ref h = ir_mul(g, ir_rms_norm(g, xr, 1e-6f), wnr);
        ir_ref pr = ir_input_pos(g, 1);
        ir_ref q = ir_add(g, ir_matmul(g, ir_input_weight(g, "wq", cs[k].wt, (int64_t[4]){E, D * Hq, 1, 1}), h),
                          ir_input_weight(g, "bq", SB_TYPE_F32, (int64_t[4]){D * Hq, 1, 1, 1}));
        ir_ref kk = ir_add(g, ir_matmul(g, ir_input_weight(g, "wk", cs[k].wt, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                           ir_input_weight(g, "bk", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        ir_ref v = ir_add(g, ir_matmul(g, ir_input_weight(g, "wv", cs[k].vt, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                          ir_input_weight(g, "bv", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        ir_rope_params rp = {.n_rot = cs[k].n_rot, .mode = cs[k].mode, .freq_base = 10000.0f, .freq_scale = 1.0f};
        q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, Hq, 1, 1}), pr, IR_NONE, &rp);
        kk = ir_rope(g, ir_reshape(g, kk, (int64_t[4]){D, Hkv, 1, 1}), pr, IR_NONE, &rp);
        ir_ref kcr = ir_kv_store(g, ir_input_kv(g, "cache_k.0", ct, (int64_t[4]){D * Hkv, C, 1, 1}), ir_reshape(g, kk, (int64_t[4]){D * Hkv, 1, 1, 1}), pr);
        ir_ref vcr = ir_kv_store(g, ir_input_kv(g, "cache_v.0", ct, (int64_t[4]){D * Hkv, C, 1, 1}), v, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_output(g, ir_attention(g, q, kcr, vcr, pr, &ap), "y");
        binds b = {.name = {"x", "wn", "wq", "wk", "wv", "bq", "bk", "bv", "cache_k.0", "cache_v.0"},
                   .data = {x, wn, wqq, wkq, wvq, bq, bk, bv, kc, vc}, .n = 10, .pos = pos};
        char label[128];
        snprintf(label, sizeof label, "Q/K/V+rope+attention v%d %s/%s %s n_rot %d p=%d %s cache", attn_variant, ir_dtype_name(cs[k].wt),
                 ir_dtype_name(cs[k].vt),
                 cs[k].mode == IR_ROPE_NEOX ? "neox" : "normal", cs[k].n_rot, (int)cs[k].p, ir_dtype_name(ct));
        /* 3e-3: the q8 activations of three GEMVs go through softmax against an f32 reference (fresh
         * inputs each run drew 1.5e-4 .. 1.0e-3 on the H200 with exact attention; a wrong kernel gives O(1)) */
        expect_fused(g, &b, label, 3e-3, 6); /* 3 biases, K's kv_store, V's kv_store, 2 GEMVs, Q's rope (at least 6) */
        const int32_t kfused = last_kernels;
        fuse_on = ropek_on = true;
        char l2[160];
        snprintf(l2, sizeof l2, "%s (+rope(K) exp.)", label);
        const double e = run_both(g, &b, l2);
        fuse_on = ropek_on = false;
        expect(e, 3e-3, l2);
        printf("%-44s kernels %d -> %d\n", l2, (int)kfused, (int)last_kernels);
        CHECKF(last_kernels == kfused - 1, "%s: %d kernels (fused %d; expected one fewer)", l2, (int)last_kernels, (int)kfused);
        ir_graph_free(g);
        free(x), free(wn), free(wq), free(wk), free(wv), free(bq), free(bk), free(bv), free(kf), free(vf);
        free(wqq), free(wkq), free(wvq), free(kc), free(vc);
    }
    attn_variant = 1;
}

/* Three Qwen2.5-0.5B layers at 64 new tokens after 512 (qwen_layers.h), fused: the K, V, Q group
 * splits K, so Q's rope joins the K/V jobs (pass fuse_rope_jobs, cu_config.rope_inplace), which sum
 * the group's partials (pass fuse_group_jobs);
 * the norms after the O and down GEMMs sum their split-K partials (pass fuse_norm_sums: 5 reduces).
 * Vs the f64 reference, and bit for bit the plan without these (cu_config rope_inplace and
 * norm_sums 0), with as many kernels fewer at each step as the host-side plan counts
 * (exec_cuda_count_fusions, exec_cuda_count_norm_sums). */
static void test_qwen_layers(void) {
    const int NL = 3;
    const int64_t E = QL_E, D = QL_D, Hkv = QL_HKV, F = QL_F, T = 64, C = 640, P0 = 512;
    ir_graph *g = qwen_layers(NL, T, C);
    static const char *wn[12] = {"attn_norm", "wk", "bk", "wv", "bv", "wq", "bq", "wo", "ffn_norm", "gate", "up", "down"};
    const int wt[12] = {SB_TYPE_F32, SB_TYPE_Q5_0, SB_TYPE_F32, SB_TYPE_Q8_0, SB_TYPE_F32, SB_TYPE_Q5_0, SB_TYPE_F32, SB_TYPE_Q5_0,
                        SB_TYPE_F32, SB_TYPE_Q5_0, SB_TYPE_Q5_0, SB_TYPE_Q6_K};
    const int64_t wk[12] = {E, E, 1, E, 1, E, 1, E, E, E, E, F}, wr[12] = {1, D * Hkv, D * Hkv, D * Hkv, D * Hkv, E, E, E, 1, F, F, E};
    const float ws[12] = {1.0f, 0.1f, 0.5f, 0.1f, 0.5f, 0.1f, 0.5f, 0.05f, 1.0f, 0.05f, 0.05f, 0.02f};
    static char names[MAXB][32];
    binds b = {.n = 0};
    int32_t pos[64];
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(P0 + t);
    b.pos = pos;
    float *x = rnd(E * T, 1.0f);
    b.name[b.n] = "x", b.data[b.n++] = x;
    for (int l = 0; l < NL && b.n + 14 <= MAXB; l++) {
        for (int k = 0; k < 12; k++) {
            snprintf(names[b.n], sizeof names[0], "blk.%d.%s", l, wn[k]);
            float *f = rnd(wk[k] * wr[k], ws[k]);
            b.name[b.n] = names[b.n], b.data[b.n++] = quant_rows(wt[k], f, wk[k], wr[k]);
            free(f);
        }
        for (int k = 0; k < 2; k++) {
            snprintf(names[b.n], sizeof names[0], "cache_%c.%d", k ? 'v' : 'k', l);
            float *f = rnd(D * Hkv * C, 1.0f);
            b.name[b.n] = names[b.n], b.data[b.n++] = quant_rows(SB_TYPE_F16, f, D * Hkv, C);
            free(f);
        }
    }
    tc_cfg.mmq = 4; /* the int8 MMA GEMMs (the default outside these tests) */
    fuse_on = true;
    /* each plan: fewer kernels than the one before, the same bytes as the first */
    /* (T 64: every group and O / down GEMM splits) Q's rope a job in every layer, a reduce of every
     * O and down GEMM but the last down */
    static const char *what[3] = {"(fused)", "(in-place rope)", "(+ norm sums)"};
    int fewer[3] = {0, 0, 0}, was = 0;
    for (int k = 0; k < 3; k++) { /* each step's kernels fewer: its nodes fused away and reduces left to norms */
        cu_config c = run_config();
        c.rope_inplace = k != 0, c.norm_sums = k == 2;
        plan_target t;
        exec_cuda_target(&c, &t);
        plan *pq = NULL;
        CHECK(plan_build(g, &t, NULL, &pq) == SB_OK);
        const int now = pq ? exec_cuda_count_fusions(pq, &c) + exec_cuda_count_norm_sums(pq, &c) : 0;
        if (k) fewer[k] = now - was;
        was = now;
        plan_free(pq);
    }
    CHECKF(fewer[1] >= 1 && fewer[2] >= 2 * NL - 1, "qwen layers: %d and %d kernels fewer planned (>= 1 and %d expected)", fewer[1], fewer[2], 2 * NL - 1);
    float *y0 = NULL;
    int64_t n0 = 0;
    int32_t kp = 0;
    for (int k = 0; k < 3; k++) {
        char label[64];
        snprintf(label, sizeof label, "%d Qwen2.5-0.5B layers T=%d %s", NL, (int)T, what[k]);
        tc_cfg.rope_inplace = k != 0;
        tc_cfg.norm_sums = k == 2;
        const double e = run_both(g, &b, label);
        /* 8-bit activations through 7 GEMMs a layer, and attention over random keys (peaked softmax):
         * the error grows with depth — H200, every plan the same bits: 2 layers 6.2e-3, 3 layers
         * 1.8-2.3e-2 */
        expect(e, 5e-2, label);
        if (k == 0) {
            y0 = last_y, n0 = last_n, last_y = NULL;
        } else {
            printf("%-44s kernels %d -> %d\n", label, (int)kp, (int)last_kernels);
            CHECKF(last_kernels <= kp - fewer[k], "%s: %d kernels vs %d before (%d fewer expected)", label, (int)last_kernels, (int)kp, fewer[k]);
            CHECKF(y0 && last_y && n0 == last_n && !memcmp(y0, last_y, (size_t)n0 * 4), "%s: output not bit-identical to the first plan", label);
        }
        kp = last_kernels;
    }
    tc_cfg.rope_inplace = tc_cfg.norm_sums = 1;
    fuse_on = false;
    tc_cfg.mmq = 1;
    free(y0);
    for (int k = 0; k < b.n; k++) free(b.data[k]);
    ir_graph_free(g);
}

/* The int8 MMA kernels' tests (k_mma.cu; test_mma_prefill, test_mma_small, test_mma_groups,
 * test_mma_glu_pair) take them at every T: the tensor-core GEMM on (cu_config.mmq 4) and quantized
 * weights kept off cuBLASLt (blas_quant 0 — by default T >= 256 goes there, its activations f32,
 * no MMA group: test_blas_default). Returns the config to restore (tc_cfg = it). */
static cu_config mma_config_pin(void) {
    const cu_config saved = tc_cfg;
    tc_cfg.mmq = 4;
    tc_cfg.blas_quant = 0;
    return saved;
}

/* The int8 tensor-core prefill GEMM (k_mma.cu, cu_config.mmq 4) on model shapes with ragged edges:
 * K 896 (Q4_0/Q5_0/Q8_0) and 4864 (K-quants, q8_K activations: also vs the CPU executor, bit
 * for bit up to summation order), rows and tokens not multiples of the 64/128 x 64 tiles, T 9 / 64
 * / 512 / 520, every tile of launch_mma's choice (on a 132-SM H200: 128 x 64 for N 4100-4900 at
 * T >= 512, 64 x 64 for N 600 at T 512, 64 x 32 for the rest; cu_config.mma_tile forces one), and
 * the bias / residual epilogue through the executor fusion. */
static void test_mma_prefill(void) {
    struct { int t; int64_t K, N, T; int ep; } cs[] = {
        {SB_TYPE_Q5_0, 896, 200, 9, 0},    {SB_TYPE_Q5_0, 896, 200, 64, 1},  {SB_TYPE_Q8_0, 896, 131, 512, 0},
        {SB_TYPE_Q4_0, 896, 67, 77, 2},    {SB_TYPE_Q4_K, 4864, 96, 64, 0},  {SB_TYPE_Q6_K, 4864, 70, 9, 0},
        {SB_TYPE_Q5_K, 4864, 45, 130, 2},  {SB_TYPE_Q6_K, 256, 4900, 520, 0}, {SB_TYPE_Q5_0, 256, 4100, 512, 1},
        {SB_TYPE_Q4_K, 256, 4160, 512, 2}, {SB_TYPE_Q5_0, 896, 600, 512, 0},
    };
    const cu_config saved = mma_config_pin();
    tc_cfg.mma_small = 0; /* the 128/64 x 64 tiles themselves (T <= 512 takes the small-T path by default) */
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int t = cs[k].t;
        const int64_t K = cs[k].K, N = cs[k].N, T = cs[k].T;
        float *wf = rnd(K * N, 0.1f), *x = rnd(K * T, 1.0f), *o = rnd(cs[k].ep == 2 ? N * T : N, 1.0f);
        void *w = quant_rows(t, wf, K, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){K, N, 1, 1});
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
        ir_ref mm = ir_matmul(g, wr, xr);
        if (cs[k].ep) mm = ir_add(g, mm, ir_input_weight(g, "o", SB_TYPE_F32, (int64_t[4]){N, cs[k].ep == 2 ? T : 1, 1, 1}));
        ir_output(g, mm, "y");
        binds b = {.name = {"w", "x", "o"}, .data = {w, x, o}, .n = 3};
        char label[96];
        snprintf(label, sizeof label, "int8 MMA %s K=%lld N=%lld T=%lld%s", ir_dtype_name(t), (long long)K, (long long)N, (long long)T,
                 cs[k].ep == 1 ? " + bias" : cs[k].ep == 2 ? " + residual" : "");
        if (cs[k].ep) {
            fuse_on = true; /* the add as the GEMM's epilogue */
            expect(run_both(g, &b, label), 5e-4, label);
            fuse_on = false;
        } else {
            expect(run_both(g, &b, label), 5e-4, label);
        }
        if (q8k_type(t)) {
            snprintf(label, sizeof label, "int8 MMA %s K=%lld N=%lld T=%lld vs CPU q8_K", ir_dtype_name(t), (long long)K, (long long)N,
                     (long long)T);
            expect(run_cmp(g, &b, label, true), 1e-10, label);
        }
        ir_graph_free(g);
        free(wf), free(x), free(o), free(w);
    }
    tc_cfg = saved;
}

/* Run g (output 0) on ONE CUDA executor with each value of vals in turn in *slot (an input of b:
 * the position b->pos[0], or a token) — so later runs replay the captured graph with the position
 * read from device memory (and find the split counters the previous run left), or the rows a run
 * staged — and on the reference target after each run (both kv_store into their own cache, so the
 * caches agree); expect NMSE <= limit at every step. */
static void expect_steps(ir_graph *g, binds *b, int32_t *slot, const int32_t *vals, int nsteps, double limit, const char *label) {
    plan *pr = NULL, *pc = NULL;
    plan_target tr, tc;
    plan_target_reference(&tr);
    const cu_config tcfg = run_config(); /* its fuse flag: the planner's fusions too */
    exec_cuda_target(&tcfg, &tc);
    void *dr[64], *dc[64];
    exec_cuda *cx = NULL;
    void *arena = NULL;
    float *yc = NULL;
    uint64_t ab = 0;
    int64_t n = 0;
    sb_status s = plan_build(g, &tr, NULL, &pr);
    if (s == SB_OK) s = plan_build(g, &tc, NULL, &pc);
    if (s == SB_OK) s = exec_cuda_check(pc);
    if (s == SB_OK) s = bind(pr, b, dr);
    if (s == SB_OK) s = bind(pc, b, dc);
    const cu_config cfg = run_config();
    if (s == SB_OK) s = exec_cuda_create(1024, &cfg, &cx);
    if (s == SB_OK) {
        n = ir_nelem(&pc->g->nodes[pc->outputs[0].node]);
        yc = malloc((size_t)n * 4);
        ab = exec_cpu_arena_bytes(pr, 1);
        arena = aligned_alloc(PLAN_ALIGN, (ab + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    }
    for (int k = 0; k < nsteps && s == SB_OK; k++) {
        *slot = vals[k];
        for (int64_t i = 0; i < n; i++) yc[i] = NAN;
        exec_bindings ebc = {.data = dc, .n_data = pc->n_inputs};
        float *outs[1] = {yc};
        s = exec_cuda_run(cx, pc, &ebc, outs);
        if (s != SB_OK) break;
        exec_bindings ebr = {.data = dr, .n_data = pr->n_inputs, .arena = arena, .arena_bytes = ab};
        const float *ro[4] = {0};
        s = exec_cpu_run(pr, &ebr, NULL, ro);
        if (s != SB_OK) break;
        double num = 0, den = 0;
        int64_t nan = 0;
        for (int64_t i = 0; i < n; i++) {
            if (yc[i] != yc[i]) nan++;
            num += ((double)yc[i] - ro[0][i]) * ((double)yc[i] - ro[0][i]);
            den += (double)ro[0][i] * ro[0][i];
        }
        char l2[192];
        snprintf(l2, sizeof l2, "%s, step %d: %d", label, k + 1, (int)vals[k]);
        if (nan) fprintf(stderr, "%s: %lld of %lld outputs NaN (unwritten)\n", l2, (long long)nan, (long long)n);
        expect(nan ? 1e30 : den > 0 ? num / den : num, limit, l2);
    }
    if (s != SB_OK) fprintf(stderr, "%s: %s: %s\n", label, sb_status_str(s), sb_last_error());
    CHECKF(s == SB_OK, "%s: %s", label, sb_last_error());
    exec_cuda_free(cx);
    plan_free(pr);
    plan_free(pc);
    free(arena);
    free(yc);
}

/* Decode attention variant 4 (k_attn_decode.cu) at the edges of its geometry: depth 0 (one key),
 * 1, 63/64/65 (one split of the default 64 keys per split, then two), 127/128/129, 300, 4100
 * (65 splits merged by the last block of each head block); GQA 14/2 (Qwen2.5-0.5B), 8/8 (G 1),
 * 16/4, 8/2; head_dim 64, 128, 256, 40 and 37 (rows not a multiple of 16 bytes: element copies); a
 * window shorter than the depth (split 0's keys loaded before pos is read are not its keys then);
 * softcap; F16 and F32 caches; capacities that give 1, 2, 5, 7, 10, 11, 33 and 66 splits. Every case runs
 * with the query heads per block on auto (1 while those blocks fit one per SM — on 132 SMs 14/2
 * up to 9 splits: depth 576 — then G), forced 1 (depth 4100: 14 x 66 blocks), forced 3 (7 = 3 +
 * 3 + 1: a short head block) and forced G. Each case runs two or three steps on one executor (the
 * counters the merge resets, fewer active splits after more, a mode change, graph replay). */
static void test_decode_attention_v4(void) {
    struct { int64_t Hq, Hkv, D, C; int ctype, window; float softcap; int32_t ps[3]; int nps; } cs[] = {
        {14, 2, 64, 4200, SB_TYPE_F16, 0, 0, {0, 4100, 1}, 3},   {14, 2, 64, 4200, SB_TYPE_F32, 0, 0, {1, 300, 63}, 3},
        {8, 8, 128, 4200, SB_TYPE_F16, 0, 0, {63, 64, 65}, 3},   {16, 4, 128, 4200, SB_TYPE_F32, 0, 30.0f, {65, 4100, 0}, 3},
        {14, 2, 64, 4200, SB_TYPE_F16, 300, 0, {300, 4100}, 2},  {16, 4, 64, 600, SB_TYPE_F16, 50, 20.0f, {64, 599, 65}, 3},
        {8, 2, 256, 700, SB_TYPE_F32, 0, 0, {300, 650, 0}, 3},   {14, 2, 64, 300, SB_TYPE_F32, 0, 0, {299, 0, 129}, 3},
        {14, 2, 64, 4200, SB_TYPE_F16, 0, 0, {127, 128, 129}, 3}, {4, 2, 64, 100, SB_TYPE_F32, 0, 0, {99, 5}, 2},
        {6, 2, 37, 400, SB_TYPE_F16, 0, 0, {200, 399, 1}, 3},    {8, 2, 40, 400, SB_TYPE_F32, 0, 10.0f, {130, 7}, 2},
        {14, 2, 64, 4200, SB_TYPE_F32, 64, 0, {4100, 63, 64}, 3}, {16, 4, 256, 300, SB_TYPE_F16, 0, 0, {260, 12}, 2},
        {8, 2, 128, 50, SB_TYPE_F16, 0, 5.0f, {49, 0, 20}, 3},   {14, 2, 64, 64, SB_TYPE_F32, 0, 0, {63, 0}, 2},
        {14, 2, 64, 4200, SB_TYPE_F16, 0, 0, {31, 32, 33}, 3},   {14, 2, 64, 200, SB_TYPE_F32, 0, 0, {127, 64, 128}, 3},
        {14, 2, 64, 4200, SB_TYPE_F16, 100, 0, {4100, 127, 99}, 3}, {16, 4, 256, 300, SB_TYPE_F32, 0, 0, {63, 0, 127}, 3},
    };
    attn_variant = 4;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t Hq = cs[k].Hq, Hkv = cs[k].Hkv, D = cs[k].D, C = cs[k].C, Dkv = D * Hkv;
        float *q = rnd(D * Hq, 1.0f), *kn = rnd(Dkv, 1.0f), *vn = rnd(Dkv, 1.0f);
        float *kf = rnd(Dkv * C, 1.0f), *vf = rnd(Dkv * C, 1.0f);
        void *kc = quant_rows(cs[k].ctype, kf, Dkv, C), *vc = quant_rows(cs[k].ctype, vf, Dkv, C);
        int32_t pos[1] = {0};
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref qr = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, 1, 1});
        ir_ref knr = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, 1, 1, 1});
        ir_ref vnr = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){Dkv, 1, 1, 1});
        ir_ref kcr = ir_input_kv(g, "cache_k.0", cs[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref vcr = ir_input_kv(g, "cache_v.0", cs[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref pr = ir_input_pos(g, 1);
        ir_ref k2 = ir_kv_store(g, kcr, knr, pr), v2 = ir_kv_store(g, vcr, vnr, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 1.0f / sqrtf((float)D), .window = cs[k].window,
                             .softcap = cs[k].softcap};
        ir_output(g, ir_attention(g, qr, k2, v2, pr, &ap), "y");
        binds b = {.name = {"q", "kn", "vn", "cache_k.0", "cache_v.0"}, .data = {q, kn, vn, kc, vc}, .n = 5, .pos = pos};
        /* heads per block: auto, 1, 3 and G (8 = min(8, G)); a forced value equal to an earlier one
         * is skipped. The same data each time: the reference's kv_store rewrites the same rows. */
        /* then the warp path (attn_warp): up to depth 1024 (every depth here but 4100 and window
         * 300 at 4100: one warp, warps over chunks, the keys loaded before pos is read, a window's
         * global rows; past 256 keys splits of 256 merged by the last block, 2..3 of them), up to 32
         * (one warp; deeper steps tiled: mode changes on one executor), with 3 heads a block (warp
         * path off: tiled), and at every depth (clamped to 256 x the splits: depth 4100 in 17
         * splits; a last split of <= 32 keys: one warp's partial); then the small-depth layout
         * (attn_small) up to 64 keys with the tiled path deeper, up to 128 keys with the warp
         * path deeper, and with 3 heads a block (small layout off: tiled) */
        const int hpbs[] = {0, 1, 3, AD_TEST_GMAX, 0, 0, 3, 0, 0, 0, 3};
        const int warps[] = {0, 0, 0, 0, 1024, 32, 1024, 1 << 20, 0, 1 << 20, 1 << 20};
        const int smalls[] = {0, 0, 0, 0, 0, 0, 0, 0, 64, 128, 128};
        for (int hi = 0; hi < 11; hi++) {
            const int G = (int)(Hq / Hkv), h = hpbs[hi] < G ? hpbs[hi] : G;
            if ((hi == 2 && (h == 1 || h == G)) || (hi == 3 && G == 1) || ((hi == 6 || hi == 10) && (h == 1 || h == G))) continue;
            attn_hpb = hpbs[hi];
            attn_warp = warps[hi];
            attn_small = smalls[hi];
            char label[160];
            snprintf(label, sizeof label, "decode attention v4 hpb %d warp %d small %d %s D=%lld %lld/%lld C=%lld w=%d cap=%g, p", attn_hpb,
                     attn_warp, attn_small, ir_dtype_name(cs[k].ctype), (long long)D, (long long)Hq, (long long)Hkv, (long long)C, cs[k].window,
                     cs[k].softcap);
            expect_steps(g, &b, b.pos, cs[k].ps, cs[k].nps, 1e-9, label);
        }
        attn_warp = 0;
        attn_small = 0;
        ir_graph_free(g);
        free(q), free(kn), free(vn), free(kf), free(vf), free(kc), free(vc);
    }
    attn_hpb = 0;
    { /* 16 query heads per kv head (> 8): computed by variant 2 (cu_attention's fallback) */
        const int64_t Hq = 32, Hkv = 2, D = 64, C = 64, Dkv = D * Hkv;
        float *q = rnd(D * Hq, 1.0f), *kv = rnd(Dkv * C, 1.0f), *kn = rnd(Dkv, 1.0f);
        int32_t pos[1] = {10};
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref qr = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, 1, 1});
        ir_ref knr = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, 1, 1, 1});
        ir_ref kcr = ir_input_kv(g, "cache_k.0", SB_TYPE_F32, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref vcr = ir_input_kv(g, "cache_v.0", SB_TYPE_F32, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref pr = ir_input_pos(g, 1);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_output(g, ir_attention(g, qr, ir_kv_store(g, kcr, knr, pr), vcr, pr, &ap), "y");
        float *vcopy = malloc((size_t)(Dkv * C) * 4);
        memcpy(vcopy, kv, (size_t)(Dkv * C) * 4);
        binds b = {.name = {"q", "kn", "cache_k.0", "cache_v.0"}, .data = {q, kn, kv, vcopy}, .n = 4, .pos = pos};
        /* 16 query heads a kv head: past k_attn_decode's 8, so cu_attention takes variant 2 (variant 4 is the
         * default and must not refuse a model) */
        expect(run_both(g, &b, "decode attention v4 32/2 heads (variant 2 fallback)"), 1e-9, "decode attention v4 32/2 heads (variant 2 fallback)");
        ir_graph_free(g);
        free(q), free(kv), free(kn), free(vcopy);
    }
    attn_variant = 1;
}

/* a prefill attention block (T 24 new tokens after 16 cached; a Qwen2.5-0.5B layer's shape at T 64
 * after 512): norm -> Q/K/V with biases -> RoPE(Q),
 * RoPE(K) -> kv_store -> attention, built in the decoder's order (K's chain, then V's, then Q's).
 * Fused: the K, V, Q GEMMs in one int8 MMA launch (Q and V hoisted; V of another type stays apart),
 * then K's rope + cache write, V's cache write and Q's rope in one cu_rope_jobs launch — the same
 * bits as unfused (every job's math unchanged), and at least 4 kernels fewer (2 GEMMs, 2 rope/store
 * launches; more with the biases' epilogues). */
static void test_prefill_block(void) {
    /* the last case: Qwen2.5-0.5B's layer shape, 64 new tokens after 512 */
    struct { int wt, vt, ct; int64_t E, Hq, C, T, P0; } cs[] = {{SB_TYPE_Q5_0, SB_TYPE_Q5_0, SB_TYPE_F16, 256, 4, 96, 24, 16},
                                                                {SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_F32, 256, 4, 96, 24, 16},
                                                                {SB_TYPE_Q4_0, SB_TYPE_Q4_0, SB_TYPE_F32, 256, 4, 96, 24, 16},
                                                                {SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_F16, 896, 14, 640, 64, 512}};
    const int64_t D = 64, Hkv = 2;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t E = cs[k].E, Hq = cs[k].Hq, C = cs[k].C, T = cs[k].T, P0 = cs[k].P0;
        float *x = rnd(E * T, 2.0f), *wn = rnd(E, 1.0f), *wq = rnd(E * D * Hq, 0.1f), *wk = rnd(E * D * Hkv, 0.1f), *wv = rnd(E * D * Hkv, 0.1f);
        float *bq = rnd(D * Hq, 0.5f), *bk = rnd(D * Hkv, 0.5f), *bv = rnd(D * Hkv, 0.5f);
        float *kf = rnd(D * Hkv * C, 1.0f), *vf = rnd(D * Hkv * C, 1.0f);
        void *wqq = quant_rows(cs[k].wt, wq, E, D * Hq), *wkq = quant_rows(cs[k].wt, wk, E, D * Hkv), *wvq = quant_rows(cs[k].vt, wv, E, D * Hkv);
        void *kc = quant_rows(cs[k].ct, kf, D * Hkv, C), *vc = quant_rows(cs[k].ct, vf, D * Hkv, C);
        int32_t pos[64];
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(P0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1});
        ir_ref h = ir_mul(g, ir_rms_norm(g, xr, 1e-6f), ir_input_weight(g, "wn", SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1}));
        ir_ref pr = ir_input_pos(g, T);
        ir_rope_params rp = {.n_rot = (int32_t)D, .mode = IR_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
        ir_ref kk = ir_add(g, ir_matmul(g, ir_input_weight(g, "wk", cs[k].wt, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                           ir_input_weight(g, "bk", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        kk = ir_rope(g, ir_reshape(g, kk, (int64_t[4]){D, Hkv, T, 1}), pr, IR_NONE, &rp);
        ir_ref kcr = ir_kv_store(g, ir_input_kv(g, "cache_k.0", cs[k].ct, (int64_t[4]){D * Hkv, C, 1, 1}), ir_reshape(g, kk, (int64_t[4]){D * Hkv, T, 1, 1}), pr);
        ir_ref v = ir_add(g, ir_matmul(g, ir_input_weight(g, "wv", cs[k].vt, (int64_t[4]){E, D * Hkv, 1, 1}), h),
                          ir_input_weight(g, "bv", SB_TYPE_F32, (int64_t[4]){D * Hkv, 1, 1, 1}));
        ir_ref vcr = ir_kv_store(g, ir_input_kv(g, "cache_v.0", cs[k].ct, (int64_t[4]){D * Hkv, C, 1, 1}), v, pr);
        ir_ref q = ir_add(g, ir_matmul(g, ir_input_weight(g, "wq", cs[k].wt, (int64_t[4]){E, D * Hq, 1, 1}), h),
                          ir_input_weight(g, "bq", SB_TYPE_F32, (int64_t[4]){D * Hq, 1, 1, 1}));
        q = ir_rope(g, ir_reshape(g, q, (int64_t[4]){D, Hq, T, 1}), pr, IR_NONE, &rp);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_output(g, ir_attention(g, q, kcr, vcr, pr, &ap), "y");
        binds b = {.name = {"x", "wn", "wq", "wk", "wv", "bq", "bk", "bv", "cache_k.0", "cache_v.0"},
                   .data = {x, wn, wqq, wkq, wvq, bq, bk, bv, kc, vc}, .n = 10, .pos = pos};
        char label[128];
        snprintf(label, sizeof label, "prefill block T=%lld %s/%s %s cache", (long long)T, ir_dtype_name(cs[k].wt), ir_dtype_name(cs[k].vt),
                 ir_dtype_name(cs[k].ct));
        fused_bits = true;
        expect_fused(g, &b, label, 3e-3, 4);
        fused_bits = false;
        ir_graph_free(g);
        free(x), free(wn), free(wq), free(wk), free(wv), free(bq), free(bk), free(bv), free(kf), free(vf);
        free(wqq), free(wkq), free(wvq), free(kc), free(vc);
    }
}

/* Prefill GEMMs of one activation as one int8 MMA launch (the planner's fuse_matmul_group, k_mma.cu
 * cu_matmul_mma_multi): gate/up (Q5_0, N 4864 each, SwiGLU of the two as the output) and Q/K with
 * bias epilogues (N 896 + 128, both outputs, each compared in turn), T 64 / 100 / 512; vs the f64
 * reference, and the fused plan launches fewer kernels. Q/K split K at T 64 / 100 on the H200 (7
 * ways each, as alone): one split launch and one reduce, bit-identical to the GEMMs one by one (so is
 * Q at T 512, unsplit either way; K alone would split there); gate/up's group does not split where
 * each alone would (other bits, same bound).
 * Then K, an op on K, Q (a plan's order): Q's GEMM in K's group, its result in memory of
 * its own, bit-identical too; and the same with a Q8_0 V beside the Q5_0 K (two weight types in one
 * launch, each block decoding its own). */
static void test_mma_groups(void) {
    /* 5: the decode tile, every member split alike; 24: the 128 x 32 tile */
    static const int64_t Ts[] = {5, 24, 64, 100, 512};
    const cu_config saved = mma_config_pin();
    for (int c = 0; c < 5; c++)
        for (int ti = 0; ti < 5; ti++) {
            const int64_t K = 896, T = Ts[ti], N1 = c == 0 ? 4864 : c >= 3 ? 128 : 896, N2 = c == 0 ? 4864 : c >= 3 ? 896 : 128;
            float *w1f = rnd(K * N1, 0.1f), *w2f = rnd(K * N2, 0.1f), *x = rnd(K * T, 1.0f), *b1 = rnd(N1, 1.0f), *b2 = rnd(N2, 1.0f);
            /* c 4: K, op, V as c 3 with V Q8_0 beside K's Q5_0 — one launch of two weight types */
            const int t2 = c == 4 ? SB_TYPE_Q8_0 : SB_TYPE_Q5_0;
            void *w1 = quant_rows(SB_TYPE_Q5_0, w1f, K, N1), *w2 = quant_rows(t2, w2f, K, N2);
            ir_graph *g;
            ir_graph_create(&g);
            ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
            ir_ref m1 = ir_matmul(g, ir_input_weight(g, "w1", SB_TYPE_Q5_0, (int64_t[4]){K, N1, 1, 1}), xr);
            if (c) m1 = ir_add(g, m1, ir_input_weight(g, "b1", SB_TYPE_F32, (int64_t[4]){N1, 1, 1, 1}));
            /* c 3: K then Q as a plan orders them, an op on K between: Q's GEMM is hoisted into K's launch */
            const ir_ref ks = c >= 3 ? ir_scale(g, m1, 0.5f) : IR_NONE;
            ir_ref m2 = ir_matmul(g, ir_input_weight(g, "w2", t2, (int64_t[4]){K, N2, 1, 1}), xr);
            if (c) m2 = ir_add(g, m2, ir_input_weight(g, "b2", SB_TYPE_F32, (int64_t[4]){N2, 1, 1, 1}));
            if (c == 0) ir_output(g, ir_swiglu(g, m1, m2), "y");
            else if (c >= 3) ir_output(g, m2, "y"), ir_output(g, ks, "z"); /* the hoisted one compared */
            else ir_output(g, c == 1 ? m1 : m2, "y"), ir_output(g, c == 1 ? m2 : m1, "z"); /* both live; output 0 compared */
            binds b = {.name = {"x", "w1", "w2", "b1", "b2"}, .data = {x, w1, w2, b1, b2}, .n = 5};
            char label[96];
            snprintf(label, sizeof label, "MMA group %s T=%lld (%s)", c == 0 ? "gate/up" : c == 3 ? "K, op, Q" : c == 4 ? "K, op, V Q8_0" : "Q/K",
                     (long long)T, c == 0 ? "SwiGLU" : c == 1 || c == 3 ? "Q + bias" : c == 4 ? "V + bias" : "K + bias");
            fused_bits = c != 0 && !(c == 2 && T == 512); /* K alone splits at T 512, the unsplit group not */
            expect_fused(g, &b, label, 5e-4, 1);
            fused_bits = false;
            ir_graph_free(g);
            free(w1f), free(w2f), free(x), free(b1), free(b2), free(w1), free(w2);
        }
    tc_cfg = saved;
}

/* A prefill FFN (T > 8): the gate/up MMA group whose launch writes the GLU itself (cuda_fusion.c
 * pass fuse_group_glu; k_mma.cu's paired rows: a warp's two m16 tiles the gate and the up of the same
 * 16 rows), then a Q5_0 down projection over its q8_1 quantization. Q5_0 SwiGLU at T 100 (N 2912, a
 * multiple of 32 as the down projection's K; the small path's 32 x 64 tiles on 132 SMs), Q8_0 GeGLU
 * at T 77 and Q4_0 SwiGLU at T 512 (launch_mma's 128-row tiles, the last one half full: N 3232 =
 * 50.5 x 64 pairs); N large enough that the group does not split K (on >= 100 SMs). At T 9 to 64 the
 * small path's 128-row tiles split K, so the plan leaves the GLU to a launch of its own there. The
 * plan pairs it (exec_cuda_count_glu_pairs), the result is within the 8-bit limit of the f64
 * reference, and bit for bit the unpaired group's (the GLU kernel computed the same f32 values from
 * the same sums). */
static void test_mma_glu_pair(void) {
    typedef struct { int t; int64_t T, N; bool gelu; } pair_case;
    static const pair_case cs[] = {{SB_TYPE_Q5_0, 100, 2912, false}, {SB_TYPE_Q8_0, 77, 3232, true}, {SB_TYPE_Q4_0, 512, 3232, false}};
    const int64_t K = 896, ND = 64;
    const cu_config saved = mma_config_pin();
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int t = cs[k].t;
        const int64_t T = cs[k].T, N = cs[k].N;
        float *wgf = rnd(K * N, 0.1f), *wuf = rnd(K * N, 0.1f), *wdf = rnd(N * ND, 0.05f), *x = rnd(K * T, 1.0f);
        void *wg = quant_rows(t, wgf, K, N), *wu = quant_rows(t, wuf, K, N), *wd = quant_rows(SB_TYPE_Q5_0, wdf, N, ND);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
        ir_ref mg = ir_matmul(g, ir_input_weight(g, "wg", t, (int64_t[4]){K, N, 1, 1}), xr);
        ir_ref mu = ir_matmul(g, ir_input_weight(g, "wu", t, (int64_t[4]){K, N, 1, 1}), xr);
        ir_ref h = cs[k].gelu ? ir_geglu(g, mg, mu) : ir_swiglu(g, mg, mu);
        ir_output(g, ir_matmul(g, ir_input_weight(g, "wd", SB_TYPE_Q5_0, (int64_t[4]){N, ND, 1, 1}), h), "y");
        binds b = {.name = {"x", "wg", "wu", "wd"}, .data = {x, wg, wu, wd}, .n = 4};
        char label[96];
        snprintf(label, sizeof label, "MMA gate/up %s %s T=%lld -> down", ir_dtype_name(t), cs[k].gelu ? "GeGLU" : "SwiGLU", (long long)T);
        plan_target tc;
        exec_cuda_target(&tc_cfg, &tc);
        plan *pc = NULL;
        CHECK(plan_build(g, &tc, NULL, &pc) == SB_OK);
        if (pc) CHECKF(exec_cuda_count_glu_pairs(pc, &tc_cfg) == 1, "%s: %d gate/up launches write the GLU (1 expected)", label, (int)exec_cuda_count_glu_pairs(pc, &tc_cfg));
        plan_free(pc);
        fuse_on = true;
        expect_flip(g, &b, label, "GLU in the GEMM", &glu_pair_on, 5e-4, 0, true); /* the same kernels, the same bits */
        fuse_on = false, glu_pair_on = true;
        ir_graph_free(g);
        free(wgf), free(wuf), free(wdf), free(x), free(wg), free(wu), free(wd);
    }
    tc_cfg = saved;
}

/* The small-T path of the int8 tensor-core GEMM (k_mma.cu cu_matmul_mma_small, cu_config.mma_small):
 * 32 x 64 tiles (T 3..8: 256 x 8) with K split across blocks, every weight type k_mma takes (Q4_0 / Q5_0 / Q8_0 on
 * q8_1, K 896 or 4864; Q4_K / Q5_K / Q6_K on q8_K, and on q8_1 through cu_config.act_q8_1, K 4864;
 * Q4_1 / Q5_1 / IQ4_NL / Q3_K / IQ4_XS in 4 cases each; the decode tile at T 3..8 for Q4_K, Q6_K,
 * Q5_0, Q8_0, Q3_K in 4 cases each)
 * x T 9 / 16 / 17 / 33 / 64 x N 16 / 128 / 136 / 896 (ragged 32-row and 64-token tiles, 1..28
 * tiles; on a 132-SM H200 K 896 splits 7 ways, K 4864 13 ways, with a short last split), the bias
 * and residual epilogues (the reducing block applies them), then N 3000 (94 tiles, 4 splits),
 * 9000 (282 tiles: the 32 x 64 kernel unsplit) and 13000 (407 tiles fill the GPU: launch_mma's
 * tiles); with the T limit raised, T 100 and 130 (2 and 3 token tiles, split), and T 64 over a
 * limit of 16 (cu_matmul_mma). Each case runs with the last-block reduction (mode 1); N <= 136,
 * 3000 and the raised-limit cases also with k_mma_reduce (mode 2), whose extra launch for
 * N <= 136 shows that the split path ran (needs >= 16 SMs); K-quants on q8_K also against the CPU
 * executor (same rounding, 1e-10). */
static void test_mma_small(void) {
    static const int types[] = {SB_TYPE_Q4_0, SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K};
    static const int64_t Ts[] = {9, 16, 17, 33, 64}, Ns[] = {16, 128, 136, 896};
    typedef struct { int t; int64_t K, N, T; int ep; bool q81; int64_t tmax; } small_case;
    small_case cs[200];
    int n = 0;
    for (int ti = 0; ti < 6; ti++)
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 4; b++) {
                const int t = types[ti], i = ti * 20 + a * 4 + b;
                const bool kq = q8k_type(t);
                /* legacy types alternate K 896 / 4864; K-quants take q8_1 activations in every third case */
                cs[n++] = (small_case){t, kq || i % 2 ? 4864 : 896, Ns[b], Ts[a], i % 3, kq && i % 3 == 1, 0};
            }
    /* the types k_mma took later (Q4_1 / Q5_1 with a min term, IQ4_NL on q8_1; Q3_K with a scale per
     * 16 values, IQ4_XS on q8_K): ragged and whole tiles, every epilogue */
    static const int later[] = {SB_TYPE_Q4_1, SB_TYPE_Q5_1, SB_TYPE_IQ4_NL, SB_TYPE_Q3_K, SB_TYPE_IQ4_XS};
    for (int li = 0; li < 5; li++)
        for (int c = 0; c < 4; c++)
            cs[n++] = (small_case){later[li], q8k_type(later[li]) || c % 2 ? 4864 : 896, c < 2 ? 136 : 896, c % 2 ? 64 : 17, (li + c) % 3, false, 0};
    /* the 256 x 8 decode tile (T 3..8): one ragged tile (N 136), 4 tiles (896), split or not (3000,
     * 9000), legacy and K-quant types, every epilogue */
    static const int dec_types[] = {SB_TYPE_Q4_K, SB_TYPE_Q6_K, SB_TYPE_Q5_0, SB_TYPE_Q8_0, SB_TYPE_Q3_K};
    for (int di = 0; di < 5; di++)
        for (int c = 0; c < 4; c++)
            cs[n++] = (small_case){dec_types[di], q8k_type(dec_types[di]) || c % 2 ? 4864 : 896, c == 0 ? 136 : c == 1 ? 896 : c == 2 ? 3000 : 9000,
                                   3 + (di + c) % 6, (di + c) % 3, false, 0};
    cs[n++] = (small_case){SB_TYPE_Q5_0, 896, 3000, 64, 2, false, 0};
    cs[n++] = (small_case){SB_TYPE_Q6_K, 4864, 3000, 33, 1, false, 0};
    cs[n++] = (small_case){SB_TYPE_Q4_K, 4864, 3000, 17, 0, true, 0};
    cs[n++] = (small_case){SB_TYPE_Q8_0, 896, 9000, 64, 0, false, 0};
    cs[n++] = (small_case){SB_TYPE_Q5_0, 896, 13000, 40, 1, false, 0};
    /* the T limit raised: several 64-token tiles (blockIdx.y > 0) in the split path and its counters */
    cs[n++] = (small_case){SB_TYPE_Q5_0, 896, 896, 100, 2, false, 128};
    cs[n++] = (small_case){SB_TYPE_Q6_K, 4864, 136, 130, 1, false, 256};
    cs[n++] = (small_case){SB_TYPE_Q4_0, 896, 128, 64, 0, false, 16}; /* T above the limit: cu_matmul_mma */
    /* the down projection's shape at T 512: split 5 ways by the waves rule (mma_small_split), 8 token tiles */
    cs[n++] = (small_case){SB_TYPE_Q6_K, 4864, 896, 512, 1, false, 0};
    cs[n++] = (small_case){SB_TYPE_Q4_K, 4864, 896, 512, 2, false, 0};
    const cu_config saved = mma_config_pin();
    for (int k = 0; k < n; k++) {
        const int t = cs[k].t, ep = cs[k].ep;
        const int64_t K = cs[k].K, N = cs[k].N, T = cs[k].T;
        float *wf = rnd(K * N, 0.1f), *x = rnd(K * T, 1.0f), *o = rnd(ep == 2 ? N * T : N, 1.0f);
        void *w = quant_rows(t, wf, K, N);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref wr = ir_input_weight(g, "w", t, (int64_t[4]){K, N, 1, 1});
        ir_ref xr = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){K, T, 1, 1});
        ir_ref mm = ir_matmul(g, wr, xr);
        if (ep) mm = ir_add(g, mm, ir_input_weight(g, "o", SB_TYPE_F32, (int64_t[4]){N, ep == 2 ? T : 1, 1, 1}));
        ir_output(g, mm, "y");
        binds b = {.name = {"w", "x", "o"}, .data = {w, x, o}, .n = 3};
        tc_cfg.act_q8_1 = cs[k].q81; /* K-quants on q8_1 activations (read by exec_cuda_target) */
        fuse_on = ep != 0;                               /* the add as the GEMM's epilogue */
        int32_t kern[3] = {0, 0, 0};
        tc_cfg.mma_small_tmax = cs[k].tmax > 8 ? (int)cs[k].tmax : 512; /* 0: the default 512 */
        for (int mode = 1; mode <= (N <= 136 || N == 3000 || cs[k].tmax ? 2 : 1); mode++) { /* k_mma_reduce on the cheaper cases */
            char label[112];
            snprintf(label, sizeof label, "MMA small/%d %s%s K=%lld N=%lld T=%lld%s", mode, ir_dtype_name(t), cs[k].q81 ? " q8_1" : "",
                     (long long)K, (long long)N, (long long)T, ep == 1 ? " + bias" : ep == 2 ? " + residual" : "");
            tc_cfg.mma_small = mode;
            expect(run_both(g, &b, label), 5e-4, label);
            kern[mode] = last_kernels;
            if (q8k_type(t) && !cs[k].q81 && mode == 1) {
                snprintf(label, sizeof label, "MMA small/%d %s K=%lld N=%lld T=%lld vs CPU q8_K", mode, ir_dtype_name(t), (long long)K,
                         (long long)N, (long long)T);
                expect(run_cmp(g, &b, label, true), 1e-10, label);
            }
        }
        tc_cfg.mma_small = saved.mma_small; /* the default */
        tc_cfg.mma_small_tmax = saved.mma_small_tmax;
        fuse_on = false;
        tc_cfg.act_q8_1 = saved.act_q8_1;
        /* N <= 136: 1..15 tiles of 32 rows, K split on any GPU of >= 16 SMs, so mode 2 adds k_mma_reduce
         * (T above the limit: the same kernels) */
        const int split_reduce = T <= (cs[k].tmax ? cs[k].tmax : 512);
        if (N <= 136)
            CHECKF(kern[2] == kern[1] + split_reduce, "MMA small %s K=%lld N=%lld T=%lld: %d kernels with k_mma_reduce, %d without (expected %d more)",
                   ir_dtype_name(t), (long long)K, (long long)N, (long long)T, (int)kern[2], (int)kern[1], split_reduce);
        ir_graph_free(g);
        free(wf), free(x), free(o), free(w);
    }
    tc_cfg = saved;
}

/* Flash-attention prefill (k_fattn.cu, attention variant 3 for T > 1) vs op_attention: T 9 / 64 /
 * 512 with query tiles cut short, GQA 14/2 and 4/4, head_dim 64, 128 and 37 (padded rows), F32
 * and F16 caches, a cached prefix (p0 > 0), sliding window, softcap; then RoPE(q) fused into the
 * load and the q8_1 output feeding a Q8_0 GEMV (the executor fusions), fused and unfused. F16
 * caches with head_dim 64 / 128 run k_fattn_mma.cu (tensor cores) unless fattn_mma is off:
 * flash_limit says why their limit is 2e-6. */
static void test_flash_attention(void) {
    struct { int64_t T, p0, Hq, Hkv, D; int ctype, window; float softcap; } cs[] = {
        {9, 0, 14, 2, 64, SB_TYPE_F32, 0, 0},      {64, 0, 14, 2, 64, SB_TYPE_F16, 0, 0},   {512, 0, 14, 2, 64, SB_TYPE_F32, 0, 0},
        {64, 100, 14, 2, 64, SB_TYPE_F32, 0, 0},   {77, 30, 4, 4, 128, SB_TYPE_F16, 0, 0},  {40, 200, 4, 2, 128, SB_TYPE_F32, 0, 30.0f},
        {130, 5, 4, 2, 64, SB_TYPE_F32, 48, 0},    {33, 60, 4, 1, 37, SB_TYPE_F32, 0, 0},   {512, 64, 8, 2, 64, SB_TYPE_F16, 100, 50.0f},
        /* F16 caches with head_dim 64 / 128: the tensor-core kernel (k_fattn_mma.cu) while it is on — 64-query
         * tiles cut short, cached prefixes, windows shorter and longer than a key tile, softcap, GQA
         * groups 7 / 4 / 2 / 1, and few query tiles over deep prefixes (its key split: 2..16 splits,
         * splits with no keys, a last split of one key) */
        {9, 0, 14, 2, 64, SB_TYPE_F16, 0, 0},      {130, 5, 4, 2, 64, SB_TYPE_F16, 48, 0},  {40, 200, 4, 2, 128, SB_TYPE_F16, 0, 30.0f},
        {65, 700, 14, 2, 64, SB_TYPE_F16, 0, 0},   {2, 1000, 14, 2, 128, SB_TYPE_F16, 0, 0}, {200, 300, 8, 2, 128, SB_TYPE_F16, 70, 0},
        {127, 1, 6, 3, 64, SB_TYPE_F16, 0, 0},     {64, 4096, 14, 2, 64, SB_TYPE_F16, 0, 0}, {300, 33, 4, 4, 128, SB_TYPE_F16, 200, 20.0f},
        /* T <= 64: 16-query blocks whose warps split the keys (k_fattn_ws) — rows cut short, windows,
         * softcap, warps with no tiles, a range split over blocks at head_dim 128 */
        {16, 512, 14, 2, 64, SB_TYPE_F16, 0, 0},   {17, 130, 4, 1, 64, SB_TYPE_F16, 0, 0},  {48, 600, 14, 2, 64, SB_TYPE_F16, 100, 0},
        {64, 2000, 8, 8, 128, SB_TYPE_F16, 0, 0},  {5, 70, 4, 2, 128, SB_TYPE_F16, 0, 25.0f}, {64, 512, 14, 2, 64, SB_TYPE_F16, 0, 0},
        /* head_dim 256 (gemma3; gemma4's sliding layers) and 512 (gemma4's global layers) on the tensor-core
         * kernel (32-key tiles; at 512 32-query blocks) — GQA 4 and 8, depth 0 / 700 / 4096 with window
         * 512, softcap, tiles cut short, few queries over a deep prefix (the key split); fattn_mma off:
         * cu_attention (256) and the paged kernel (512) */
        {512, 0, 8, 1, 256, SB_TYPE_F16, 512, 0},  {100, 700, 8, 2, 256, SB_TYPE_F16, 512, 30.0f}, {130, 4096, 4, 1, 256, SB_TYPE_F16, 512, 0},
        {9, 700, 4, 1, 256, SB_TYPE_F16, 0, 0},    {3, 4096, 8, 1, 256, SB_TYPE_F16, 512, 50.0f}, {64, 300, 8, 2, 256, SB_TYPE_F16, 0, 0},
        {512, 0, 8, 2, 512, SB_TYPE_F16, 0, 0},    {70, 700, 8, 1, 512, SB_TYPE_F16, 0, 30.0f}, {5, 4096, 4, 1, 512, SB_TYPE_F16, 0, 0},
        {33, 300, 8, 2, 512, SB_TYPE_F16, 100, 0}, {64, 4096, 8, 2, 512, SB_TYPE_F16, 512, 0},
    };
    attn_variant = 3;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t T = cs[k].T, D = cs[k].D, Hq = cs[k].Hq, Hkv = cs[k].Hkv, Dkv = D * Hkv, C = cs[k].p0 + T + 3;
        float *q = rnd(D * Hq * T, 1.0f), *kn = rnd(Dkv * T, 1.0f), *vn = rnd(Dkv * T, 1.0f);
        float *kf = rnd(Dkv * C, 1.0f), *vf = rnd(Dkv * C, 1.0f);
        void *kc = quant_rows(cs[k].ctype, kf, Dkv, C), *vc = quant_rows(cs[k].ctype, vf, Dkv, C);
        int32_t *pos = malloc((size_t)T * sizeof *pos);
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(cs[k].p0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref qr = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, T, 1});
        ir_ref knr = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref vnr = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref kcr = ir_input_kv(g, "cache_k.0", cs[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref vcr = ir_input_kv(g, "cache_v.0", cs[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref pr = ir_input_pos(g, T);
        ir_ref k2 = ir_kv_store(g, kcr, knr, pr), v2 = ir_kv_store(g, vcr, vnr, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 1.0f / sqrtf((float)D), .window = cs[k].window,
                             .softcap = cs[k].softcap};
        ir_output(g, ir_attention(g, qr, k2, v2, pr, &ap), "y");
        binds b = {.name = {"q", "kn", "vn", "cache_k.0", "cache_v.0"}, .data = {q, kn, vn, kc, vc}, .n = 5, .pos = pos};
        char label[128];
        snprintf(label, sizeof label, "flash attention %s D=%lld %lld/%lld T=%lld p0=%lld w=%d cap=%g", ir_dtype_name(cs[k].ctype),
                 (long long)D, (long long)Hq, (long long)Hkv, (long long)T, (long long)cs[k].p0, cs[k].window, cs[k].softcap);
        expect(run_both(g, &b, label), flash_limit(T, cs[k].ctype, D), label);
        ir_graph_free(g);
        free(q), free(kn), free(vn), free(kf), free(vf), free(kc), free(vc), free(pos);
    }
    /* RoPE(q) on load, and the q8_1 output for a Q8_0 GEMV (odd cases) */
    struct { int64_t T, p0; int mode, n_rot, ctype; int64_t D; } rc[] = {
        {9, 40, IR_ROPE_NEOX, 32, SB_TYPE_F32, 64},    {64, 0, IR_ROPE_NEOX, 64, SB_TYPE_F32, 64},    {100, 7, IR_ROPE_NORMAL, 64, SB_TYPE_F32, 64},
        {512, 0, IR_ROPE_NEOX, 64, SB_TYPE_F32, 64},   {9, 40, IR_ROPE_NEOX, 32, SB_TYPE_F16, 64},    {64, 0, IR_ROPE_NEOX, 64, SB_TYPE_F16, 64},
        {100, 7, IR_ROPE_NORMAL, 48, SB_TYPE_F16, 64}, {512, 0, IR_ROPE_NEOX, 64, SB_TYPE_F16, 64},   {70, 600, IR_ROPE_NORMAL, 64, SB_TYPE_F16, 64},
        {3, 900, IR_ROPE_NEOX, 64, SB_TYPE_F16, 64},
        /* head_dim 256 on the tensor-core kernel: RoPE of all 256 dims fused, then the q8_1 output too */
        {100, 700, IR_ROPE_NEOX, 256, SB_TYPE_F16, 256}, {70, 0, IR_ROPE_NEOX, 256, SB_TYPE_F16, 256}};
    const int64_t Hq = 14, Hkv = 2, NO = 48;
    for (size_t k = 0; k < sizeof rc / sizeof rc[0]; k++) {
        const int64_t T = rc[k].T, C = rc[k].p0 + T, D = rc[k].D, Dkv = D * Hkv;
        float *q = rnd(D * Hq * T, 1.0f), *kn = rnd(Dkv * T, 1.0f), *vn = rnd(Dkv * T, 1.0f);
        float *kf = rnd(Dkv * C, 1.0f), *vf = rnd(Dkv * C, 1.0f), *wo = rnd(D * Hq * NO, 0.1f);
        void *kc = quant_rows(rc[k].ctype, kf, Dkv, C), *vc = quant_rows(rc[k].ctype, vf, Dkv, C);
        void *woq = quant_rows(SB_TYPE_Q8_0, wo, D * Hq, NO);
        int32_t *pos = malloc((size_t)T * sizeof *pos);
        for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(rc[k].p0 + t);
        ir_graph *g;
        ir_graph_create(&g);
        ir_ref qr = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, Hq, T, 1});
        ir_ref knr = ir_input_weight(g, "kn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref vnr = ir_input_weight(g, "vn", SB_TYPE_F32, (int64_t[4]){Dkv, T, 1, 1});
        ir_ref kcr = ir_input_kv(g, "cache_k.0", rc[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref vcr = ir_input_kv(g, "cache_v.0", rc[k].ctype, (int64_t[4]){Dkv, C, 1, 1});
        ir_ref pr = ir_input_pos(g, T);
        ir_rope_params rp = {.n_rot = rc[k].n_rot, .mode = rc[k].mode, .freq_base = 10000.0f, .freq_scale = 1.0f};
        ir_ref qrot = ir_rope(g, qr, pr, IR_NONE, &rp);
        ir_ref k2 = ir_kv_store(g, kcr, knr, pr), v2 = ir_kv_store(g, vcr, vnr, pr);
        ir_attn_params ap = {.n_head_kv = (int32_t)Hkv, .head_dim = (int32_t)D, .scale = 0.125f};
        ir_ref att = ir_attention(g, qrot, k2, v2, pr, &ap);
        const bool gemv = k % 2 == 1;
        if (gemv) att = ir_matmul(g, ir_input_weight(g, "wo", SB_TYPE_Q8_0, (int64_t[4]){D * Hq, NO, 1, 1}), att);
        ir_output(g, att, "y");
        binds b = {.name = {"q", "kn", "vn", "cache_k.0", "cache_v.0", "wo"}, .data = {q, kn, vn, kc, vc, woq}, .n = 6, .pos = pos};
        char label[128];
        snprintf(label, sizeof label, "rope(q)+flash attention %s D=%lld %s n_rot %d T=%lld p0=%lld%s", ir_dtype_name(rc[k].ctype), (long long)D,
                 rc[k].mode == IR_ROPE_NEOX ? "neox" : "normal", rc[k].n_rot, (long long)T, (long long)rc[k].p0, gemv ? " -> q8_0" : "");
        expect_fused(g, &b, label, gemv ? 5e-4 : flash_limit(T, rc[k].ctype, D), gemv ? 2 : 1);
        ir_graph_free(g);
        free(q), free(kn), free(vn), free(kf), free(vf), free(kc), free(vc), free(wo), free(woq), free(pos);
    }
    attn_variant = 1;
}

int main(void) {
    tc_cfg = cu_config_default;
    if (cu_config_tune(&tc_cfg, getenv("SB_TUNE")) != SB_OK) { /* bench/gpu.sh's runs with other settings */
        printf("FAIL: %s\n", sb_last_error());
        return 1;
    }
    char why[512];
    if (!exec_cuda_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 0;
    }
    printf("seed %#llx\n", (unsigned long long)seed);
    test_get_rows();
    test_gathered_steps();
    test_slice();
    test_softmax();
    test_layer_norm_gelu();
    test_concat_permute();
    test_matmul();
    test_half_gemv_lanes();
    test_norm_glu_ew();
    printf("-- the same with the one-row-in-registers quantizers (cu_config.act_fast)\n");
    tc_cfg.act_fast = true;
    test_norm_glu_ew();
    tc_cfg.act_fast = false;
    test_fused_epilogue();
    test_f32_gemm();
    test_mmh_big();
    test_blas_gemm();
    test_blas_default();
    test_multi_gemv();
    test_reg_gemv();
    test_wide_gemv();
    printf("-- T = 1 GEMVs through k_gemv_fused (cu_config.gemv_reg 0)\n");
    tc_cfg.gemv_reg = false;
    test_fused_epilogue();
    test_multi_gemv();
    tc_cfg.gemv_reg = true;
    test_glu_pairs();
    test_add_norm();
    test_chain_quant();
    test_norm_rows();
    test_rope();
    test_rope_wide();
    test_norm_rope();
    test_attention();
    test_paged_attention();
    test_paged_rope_attention();
    test_rope_attention();
    test_wide_attention();
    test_decode_attention_v4();
    test_qkv_rope_block();
    test_mma_prefill();
    test_mma_small();
    test_mma_groups();
    test_mma_glu_pair();
    test_prefill_block();
    test_qwen_layers();
    test_flash_attention(); /* with the key split (the default) */
    printf("-- flash-attention prefill without its key split (fattn_split 0)\n");
    tc_cfg.fattn_split = false;
    test_flash_attention();
    tc_cfg.fattn_split = true;
    printf("-- flash-attention prefill without the 16-query key-split-over-warps blocks (fattn_ws 0)\n");
    tc_cfg.fattn_ws = false;
    test_flash_attention();
    tc_cfg.fattn_ws = true;
    printf("-- flash-attention prefill without the tensor-core kernel (fattn_mma 0: k_fattn.cu for every cache)\n");
    fattn_mma = false;
    test_flash_attention();
    fattn_mma = true;
    const int rc = test_summary();
    free(last_y);
    return rc;
}
