/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_chain_quant.c — pass fuse_chain_quant on the CPU executor: gemma-shaped
 * sandwich-norm layers (post-norm + residual chains whose result the next pre-norm's quantizer or a
 * matmul's plain quantizer reads) planned with and without the chains' quantize tails give the same
 * bits in every output (the residual stream and the matmul products that read the quantized rows),
 * at 1 and 3 tokens, 1 and 2 threads, for Q4_K (q8_K activations) and Q8_0 (q8_0) weights, in arenas
 * poisoned with NaN (a tail that wrote nothing shows); the plan with tails has them (3), the one
 * without has none; and both stay within NMSE 1e-3 of the f32-activation reference target.
 */
#include "runtime/exec_cpu.h"

#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"

enum { E = 512, NOUT = 4, TMAX = 3 };

static uint64_t rng = 0x5eed0c4a1ull;

static float *rnd(int64_t n, float s) { return test_rand_normals(&rng, n, s); }

typedef struct weights {
    int type;
    float *x, *norm[5];  /* an, pan, fn, pfn, pn */
    void *w[3];          /* wa, wf, wg: [E,E] of type */
} weights;

static const char *norm_names[5] = {"an", "pan", "fn", "pfn", "pn"};
static const char *w_names[3] = {"wa", "wf", "wg"};

static void weights_init(weights *w, int type) {
    w->type = type;
    w->x = rnd(E * TMAX, 1.0f);
    for (int k = 0; k < 5; k++) w->norm[k] = rnd(E, 0.5f);
    for (int k = 0; k < 3; k++) {
        float *f = rnd(E * E, 0.05f);
        const uint64_t rb = op_row_bytes(type, E);
        w->w[k] = malloc(rb * E);
        for (int r = 0; r < E; r++) op_quantize_row((uint8_t *)w->w[k] + rb * (uint64_t)r, type, f + (int64_t)r * E, E);
        free(f);
    }
}

static void weights_free(weights *w) {
    free(w->x);
    for (int k = 0; k < 5; k++) free(w->norm[k]);
    for (int k = 0; k < 3; k++) free(w->w[k]);
}

/* x -> norm-quant -> wa -> c1 = post-norm + x (read by the FFN pre-norm) -> wf -> c2 = post-norm + c1
 * (read by wg as it is) -> c3 = post-norm(wg c2) + c2 (read by a last norm-quant -> wa); outputs
 * c3, wg c2, wf's product and the last product */
static ir_graph *sandwich(int type, int64_t T) {
    ir_graph *g;
    CHECK(ir_graph_create(&g) == SB_OK);
    ir_ref x = ir_input_weight(g, "x", SB_TYPE_F32, (int64_t[4]){E, T, 1, 1}), nw[5], w[3];
    for (int k = 0; k < 5; k++) nw[k] = ir_input_weight(g, norm_names[k], SB_TYPE_F32, (int64_t[4]){E, 1, 1, 1});
    for (int k = 0; k < 3; k++) w[k] = ir_input_weight(g, w_names[k], type, (int64_t[4]){E, E, 1, 1});
    ir_ref h = ir_mul(g, ir_rms_norm(g, x, 1e-6f), nw[0]);
    ir_ref a = ir_matmul(g, w[0], h);
    ir_ref c1 = ir_add(g, ir_mul(g, ir_rms_norm(g, a, 1e-6f), nw[1]), x);
    h = ir_mul(g, ir_rms_norm(g, c1, 1e-6f), nw[2]);
    ir_ref f = ir_matmul(g, w[1], h);
    ir_ref c2 = ir_add(g, ir_mul(g, ir_rms_norm(g, f, 1e-6f), nw[3]), c1);
    ir_ref p = ir_matmul(g, w[2], c2);
    ir_ref c3 = ir_add(g, ir_mul(g, ir_rms_norm(g, p, 1e-6f), nw[4]), c2);
    ir_ref y = ir_matmul(g, w[0], ir_mul(g, ir_rms_norm(g, c3, 1e-6f), nw[0]));
    ir_output(g, c3, "c3");
    ir_output(g, p, "p");
    ir_output(g, f, "f");
    ir_output(g, y, "y");
    CHECK(ir_graph_status(g) == SB_OK);
    return g;
}

static int count_tails(const plan *p) {
    int n = 0;
    for (int32_t i = 0; i < p->g->n_nodes; i++) n += ir_fused_tail_of(&p->g->nodes[i]).op != 0;
    return n;
}

/* plan g for t, run it on w with threads (NULL pool: 1) in a NaN-poisoned arena; out [NOUT][E*T] */
static sb_status eval(const weights *w, const plan_target *t, int64_t T, tp_pool *pool, float *out, int *tails) {
    ir_graph *g = sandwich(w->type, T);
    plan *p = NULL;
    sb_status s = plan_build(g, t, NULL, &p);
    ir_graph_free(g);
    if (s != SB_OK) return s;
    *tails = count_tails(p);
    void *data[16] = {0};
    for (int32_t i = 0; i < p->n_inputs; i++) {
        const char *nm = p->inputs[i].name;
        if (!strcmp(nm, "x")) data[i] = w->x;
        for (int k = 0; k < 5; k++)
            if (!strcmp(nm, norm_names[k])) data[i] = w->norm[k];
        for (int k = 0; k < 3; k++)
            if (!strcmp(nm, w_names[k])) data[i] = w->w[k];
    }
    const uint64_t need = exec_cpu_arena_bytes(p, tp_threads(pool));
    void *arena = aligned_alloc(PLAN_ALIGN, (need + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
    memset(arena, 0xff, need); /* NaN everywhere a node does not write */
    exec_bindings b = {.data = data, .n_data = p->n_inputs, .arena = arena, .arena_bytes = need};
    const float *o[NOUT] = {0};
    s = exec_cpu_run(p, &b, pool, o);
    for (int k = 0; s == SB_OK && k < NOUT; k++) memcpy(out + (int64_t)k * E * T, o[k], sizeof(float) * E * (size_t)T);
    free(arena);
    plan_free(p);
    return s;
}

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return num / (den > 0 ? den : 1);
}

static void test_type(int type, tp_pool *pool) {
    weights w;
    weights_init(&w, type);
    plan_target on, off, ref;
    exec_cpu_target(&on);
    off = on;
    off.chain_quant_max_t = 0;
    plan_target_reference(&ref);
    static float a[NOUT * E * TMAX], b[NOUT * E * TMAX], c[NOUT * E * TMAX];
    for (int64_t T = 1; T <= TMAX; T += TMAX - 1) {
        const int64_t n = NOUT * E * T;
        int ta = -1, tb = -1, tc = -1;
        CHECKF(eval(&w, &off, T, pool, a, &ta) == SB_OK, "%s", sb_last_error());
        for (int threads = 1; threads <= 2; threads++) {
            memset(b, 0, sizeof b);
            CHECKF(eval(&w, &on, T, threads == 2 ? pool : NULL, b, &tb) == SB_OK, "%s", sb_last_error());
            CHECKF(!memcmp(a, b, sizeof(float) * (size_t)n), "%s T=%lld %d thread(s): the chains' quantize tails change the outputs (NMSE %g)",
                   ir_dtype_name(type), (long long)T, threads, nmse(b, a, n));
        }
        CHECKF(ta == 0 && tb == 3, "%s T=%lld: %d tails without, %d with (0, 3)", ir_dtype_name(type), (long long)T, ta, tb);
        CHECKF(eval(&w, &ref, T, pool, c, &tc) == SB_OK, "%s", sb_last_error());
        const double e = nmse(b, c, n);
        CHECKF(e < 1e-3, "%s T=%lld: vs the f32 reference NMSE %g", ir_dtype_name(type), (long long)T, e);
        printf("chain quantize tails, %s T=%lld: bit-identical to the separate quantizers; NMSE vs f32 reference %.3g\n", ir_dtype_name(type),
               (long long)T, e);
    }
    weights_free(&w);
}

int main(void) {
    tp_pool *pool = NULL;
    CHECK(tp_create(2, &pool) == SB_OK);
    test_type(SB_TYPE_Q4_K, pool);
    test_type(SB_TYPE_Q8_0, pool);
    tp_free(pool);
    return test_summary();
}
