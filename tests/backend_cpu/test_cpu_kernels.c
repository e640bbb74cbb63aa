/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/backend_cpu/test_cpu_kernels.c — every CPU kernel on every ISA this machine runs, against
 * the reference: weights quantized by the quant layer and dequantized by its to_float, activations
 * quantized by cpu_quantize_act (checked byte-identical to the quant layer's x86-semantics
 * reference first) and dequantized by the reference; ref = exact (double) dot of the dequantized
 * rows.
 * Tolerance (stated): |got - ref| <= 2^-24 * 2 * (K/blck + 16) * M, M = sum_k |a_k| * max|w| of
 * k's block (float combination of exact int block sums: ~one rounding per block, plus the fp32
 * rounding inside dequantize, whose terms can exceed |w|); Q4_1/Q5_1 add 2^-10 * sum_b |m_b| *
 * (|s_b| + |d_b * sum q_b|), because their Q8_1 sum field s is fp16 (formats.md §3.3).
 * Weights also come as random bytes (fp16 scales made finite), covering bit patterns the quantizer
 * never emits. Outputs are NaN-poisoned and checked fully written; shapes include K = one block, N not a
 * multiple of the thread split, of the 4-row GEMV group or of the 8-row tile, T = 1..17 (4-token groups plus tails; T >= 8
 * takes the decoded-tile GEMM on avx512). Seed printed; set
 * SB_TEST_SEED to replay.
 */
#include "backend/cpu/cpu_kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"

#include <time.h>

static const int wtypes[] = {SB_TYPE_F32, SB_TYPE_F16, SB_TYPE_BF16, SB_TYPE_Q4_0, SB_TYPE_Q4_1,
                             SB_TYPE_Q5_0, SB_TYPE_Q5_1, SB_TYPE_Q8_0, SB_TYPE_Q2_K, SB_TYPE_Q3_K,
                             SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_IQ4_NL, SB_TYPE_IQ4_XS};

static uint64_t rng;
static double worst_ratio; /* largest err/tol seen in the current (type, isa) */

/* Random row data with per-32 magnitude changes (exp of a normal), occasional zero blocks and
 * exact ties, so block scales differ and edge paths run. */
static void fill_random(float *x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        float scale = expf(test_rand_normal(&rng));
        int kind = (int)(test_rand_u64(&rng) % 16);
        for (int64_t j = b; j < b + 32 && j < n; j++) {
            x[j] = kind == 0 ? 0.0f : test_rand_normal(&rng) * scale;
            if (kind == 1) x[j] = (float)((int)(test_rand_u64(&rng) % 9) - 4) * 0.5f; /* ties */
        }
    }
}

/* The reference activation quantizer (quant layer) for an activation type. */
static qk_from_float_fn ref_act_quant(int at) {
    switch (at) {
    case SB_TYPE_Q8_0: return qk_quantize_row_q8_0_x86;
    case SB_TYPE_Q8_1: return qk_quantize_row_q8_1_x86;
    case SB_TYPE_Q8_K: return qk_quantize_row_q8_K_ref;
    default: return NULL;
    }
}

static void dequant_act(int at, const void *q, float *y, int64_t n) {
    if (at == SB_TYPE_F32) memcpy(y, q, (size_t)n * sizeof(float));
    else if (at == SB_TYPE_Q8_0) qk_dequantize_row_q8_0(q, y, n);
    else if (at == SB_TYPE_Q8_1) qk_dequantize_row_q8_1(q, y, n);
    else qk_dequantize_row_q8_K(q, y, n);
}

/* Extra tolerance for Q4_1/Q5_1: the fp16 s field versus d*Σq of the dequantized activation. */
static double q8_1_s_slack(int wt, const void *wrow, const void *arow, int64_t K) {
    if (wt != SB_TYPE_Q4_1 && wt != SB_TYPE_Q5_1) return 0.0;
    const blk_q8_1 *y = arow;
    double slack = 0.0;
    for (int64_t b = 0; b < K / 32; b++) {
        uint16_t mh = wt == SB_TYPE_Q4_1 ? ((const blk_q4_1 *)wrow)[b].m : ((const blk_q5_1 *)wrow)[b].m;
        int sq = 0;
        for (int j = 0; j < 32; j++) sq += y[b].qs[j];
        slack += fabs(qk_fp16_to_fp32(mh)) *
                 (fabs(qk_fp16_to_fp32(y[b].s)) + fabs((double)qk_fp16_to_fp32(y[b].d) * sq));
    }
    return slack * (1.0 / 1024);
}

/* Random-byte weights: every bit pattern of the packed fields (6-bit scales with high bits set,
 * int8 scales of -128, all qh/hmask combinations) rather than only what the quantizer emits. The
 * fp16 scale fields are then overwritten with finite values in [2^-8, 1) of random sign. */
static void random_blocks(int wt, unsigned char *dst, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) dst[i] = (unsigned char)test_rand_u64(&rng);
    int offs[2] = {-1, -1};
    switch (wt) {
    case SB_TYPE_Q4_0: case SB_TYPE_Q5_0: case SB_TYPE_Q8_0: case SB_TYPE_IQ4_NL:
    case SB_TYPE_IQ4_XS: offs[0] = 0; break;
    case SB_TYPE_Q4_1: case SB_TYPE_Q5_1: case SB_TYPE_Q4_K: case SB_TYPE_Q5_K: offs[0] = 0, offs[1] = 2; break;
    case SB_TYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
    case SB_TYPE_Q3_K: offs[0] = 108; break;
    case SB_TYPE_Q6_K: offs[0] = 208; break;
    default: return;
    }
    const size_t bs = (size_t)qk_get(wt)->type_size;
    for (size_t b = 0; b + bs <= bytes; b += bs)
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) {
                uint16_t h = (uint16_t)((test_rand_u64(&rng) & 0x83FF) | (uint16_t)((7 + test_rand_u64(&rng) % 8) << 10));
                memcpy(dst + b + (size_t)offs[k], &h, 2);
            }
}

/* One (type, K, N, T) case on the active ISA; returns failures. */
static int run_case_w(int wt, int64_t K, int64_t N, int64_t T, tp_pool *pool, int raw_bytes) {
    const qk_traits *tr = qk_get(wt);
    const int at = cpu_act_type(wt);
    const qk_traits *ta = qk_get(at);
    uint64_t wrb64 = 0, arb64 = 0;
    CHECK(qk_row_bytes(wt, K, &wrb64) == 0 && qk_row_bytes(at, K, &arb64) == 0);
    size_t wrb = (size_t)wrb64, arb = (size_t)arb64, arb2 = 0;
    CHECK(cpu_act_row_bytes(wt, K, &arb2) == SB_OK && arb2 == arb);
    float *wf = malloc(sizeof(float) * (size_t)(N * K)), *wd = malloc(sizeof(float) * (size_t)(N * K));
    float *af = malloc(sizeof(float) * (size_t)(T * K)), *ad = malloc(sizeof(float) * (size_t)(T * K));
    unsigned char *wq = malloc(wrb * (size_t)N), *aq = malloc(arb * (size_t)T), *aref = malloc(arb * (size_t)T);
    float *out = malloc(sizeof(float) * (size_t)(N * T));
    int fails = 0;
    fill_random(wf, N * K);
    fill_random(af, T * K);
    if (raw_bytes && tr->is_quantized) {
        random_blocks(wt, wq, wrb * (size_t)N);
    } else if (qk_quantize_chunk(wt, wf, wq, N, K) != SB_OK) {
        fprintf(stderr, "quantize %s failed: %s\n", tr->name, sb_last_error());
        fails++;
        goto done;
    }
    for (int64_t r = 0; r < N; r++) tr->to_float(wq + r * wrb, wd + r * K, K);
    /* activations: SIMD/scalar quantizer vs reference, byte for byte (different pre-fill) */
    memset(aq, 0xAA, arb * (size_t)T);
    memset(aref, 0x55, arb * (size_t)T);
    CHECK(cpu_quantize_act(at, af, aq, T * K) == SB_OK);
    if (at == SB_TYPE_F32) memcpy(aref, af, arb * (size_t)T);
    else ref_act_quant(at)(af, aref, T * K);
    if (memcmp(aq, aref, arb * (size_t)T) != 0) {
        fprintf(stderr, "cpu_quantize_act(%s) differs from the reference (isa %s, K %lld)\n", ta->name,
                cpu_isa_name(cpu_isa_active()), (long long)K);
        fails++;
    }
    for (int64_t t = 0; t < T; t++) dequant_act(at, aq + t * arb, ad + t * K, K);

    for (size_t i = 0; i < (size_t)(N * T); i++) out[i] = NAN;
    CHECK(cpu_matmul(pool, wt, wq, K, N, aq, T, out) == SB_OK);
    double worst = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            const float *w = wd + n * K, *a = ad + t * K;
            double ref = 0.0, M = 0.0;
            for (int64_t b = 0; b < K; b += tr->blck > 32 ? tr->blck : 32) {
                int64_t e = b + (tr->blck > 32 ? tr->blck : 32);
                if (e > K) e = K;
                double bm = 0.0;
                for (int64_t k = b; k < e; k++) bm = fmax(bm, fabs(w[k]));
                for (int64_t k = b; k < e; k++) {
                    ref += (double)w[k] * a[k];
                    M += fabs(a[k]) * bm;
                }
            }
            int64_t nblk = K / (tr->blck > 8 ? tr->blck : 8);
            double tol = 2.0 * (double)(nblk + 16) * M / 16777216.0 +
                         q8_1_s_slack(wt, wq + n * wrb, aq + t * arb, K) + 1e-30;
            float got = out[t * N + n];
            double err = fabs((double)got - ref);
            if (!(err <= tol)) {
                if (fails < 5)
                    fprintf(stderr, "%s isa %s K %lld N %lld T %lld: out[%lld][%lld] = %.9g, ref %.9g, tol %.3g\n",
                            tr->name, cpu_isa_name(cpu_isa_active()), (long long)K, (long long)N, (long long)T,
                            (long long)t, (long long)n, got, ref, tol);
                fails++;
            }
            if (tol > 0 && err / tol > worst) worst = err / tol;
            /* the single-dot entry point agrees exactly with the T = 1 kernel path: the last row
             * of an odd N (the 1-row kernel after the 2-row pairs), and every row of Q4_K / Q6_K
             * on avx512, whose GEMV kernels compute each row the same way wherever it falls */
            const int every_row = (wt == SB_TYPE_Q4_K || wt == SB_TYPE_Q6_K) && cpu_isa_active() == CPU_ISA_AVX512;
            if (t == 0 && T == 1 && ((n == N - 1 && N % 2 == 1) || every_row)) {
                float v = NAN;
                CHECK(cpu_vec_dot(wt, K, &v, wq + n * wrb, aq) == SB_OK);
                CHECKF(v == got, "%s: cpu_vec_dot %.9g vs cpu_matmul %.9g", tr->name, v, got);
            }
        }
    if (worst > worst_ratio) worst_ratio = worst;
done:
    free(wf), free(wd), free(af), free(ad), free(wq), free(aq), free(aref), free(out);
    return fails;
}

static int run_case(int wt, int64_t K, int64_t N, int64_t T, tp_pool *pool) { return run_case_w(wt, K, N, T, pool, 0); }

int main(void) {
    const char *env = getenv("SB_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + 1;
    printf("seed %llu (SB_TEST_SEED to replay)\n", (unsigned long long)seed);
    rng = seed | 1;

    /* argument checks */
    float v;
    unsigned char buf[512] = {0};
    CHECK(cpu_vec_dot(SB_TYPE_IQ2_XXS, 256, &v, buf, buf) == SB_ERR_UNSUPPORTED);
    CHECK(cpu_vec_dot(SB_TYPE_Q4_K, 128, &v, buf, buf) == SB_ERR_INVALID_ARG);
    CHECK(cpu_vec_dot(SB_TYPE_Q4_0, 32, NULL, buf, buf) == SB_ERR_INVALID_ARG);
    CHECK(cpu_vec_dot(-1, 32, &v, buf, buf) == SB_ERR_UNSUPPORTED);
    CHECK(cpu_matmul(NULL, SB_TYPE_Q8_0, buf, 32, 0, buf, 1, &v) == SB_ERR_INVALID_ARG);
    CHECK(cpu_matmul(NULL, SB_TYPE_Q8_0, buf, 32, 1, buf, 0, &v) == SB_ERR_INVALID_ARG);
    CHECK(cpu_matmul(NULL, SB_TYPE_Q8_0, buf, 0, 1, buf, 1, &v) == SB_ERR_INVALID_ARG);
    CHECK(cpu_quantize_act(SB_TYPE_Q4_0, (const float *)buf, buf, 32) == SB_ERR_UNSUPPORTED);
    CHECK(cpu_quantize_act(SB_TYPE_Q8_K, (const float *)buf, buf, 32) == SB_ERR_INVALID_ARG);
    CHECK(cpu_act_type(SB_TYPE_Q4_K) == SB_TYPE_Q8_K && cpu_act_type(SB_TYPE_Q4_1) == SB_TYPE_Q8_1);
    CHECK(cpu_act_type(SB_TYPE_Q5_0) == SB_TYPE_Q8_0 && cpu_act_type(SB_TYPE_F16) == SB_TYPE_F32);
    CHECK(cpu_isa_set((cpu_isa)7) == SB_ERR_INVALID_ARG);
    CHECK(cpu_isa_available(CPU_ISA_SCALAR));

    tp_pool *pool2 = NULL, *pool3 = NULL;
    CHECK(tp_create(2, &pool2) == SB_OK);
    CHECK(tp_create(3, &pool3) == SB_OK);
    int n_isa = 0;
    for (int isa = CPU_ISA_SCALAR; isa <= CPU_ISA_AVX512; isa++) {
        if (!cpu_isa_available((cpu_isa)isa)) {
            printf("isa %s: not available on this machine, skipped\n", cpu_isa_name((cpu_isa)isa));
            continue;
        }
        CHECK(cpu_isa_set((cpu_isa)isa) == SB_OK);
        CHECK(cpu_isa_active() == (cpu_isa)isa);
        n_isa++;
        for (size_t ti = 0; ti < sizeof wtypes / sizeof *wtypes; ti++) {
            int wt = wtypes[ti];
            int64_t bl = qk_get(wt)->blck, act_bl = qk_get(cpu_act_type(wt))->blck;
            int64_t unit = bl > act_bl ? bl : act_bl; /* K granularity */
            struct { int64_t K, N, T; tp_pool *pool; } cases[] = {
                {unit, 7, 1, NULL},                 /* K = one block */
                {unit, 5, 3, pool2},
                {unit * 3, 37, 1, pool2},           /* N not a multiple of the split */
                {unit * 3, 37, 6, pool3},
                {unit == 1 ? 77 : unit * 2, 9, 9, pool2}, /* odd K for float types; T = 4+4+1 */
                {unit >= 256 ? 4864 : 896, 19, 4, pool2}, /* Qwen2.5-0.5B row lengths */
                {unit >= 256 ? 768 : 896, 19, 17, pool3}, /* prefill tile path: 8-row tiles + tail */
                {unit, 8, 8, NULL},                 /* tile path, exact 8 x 8 */
                {unit * 2, 11, 14, pool2},          /* tile path, token tail of 6 */
                /* GEMV of 4-row groups (Q4_K avx512): the last row in each lane 0..3 and in a
                 * second group, checked against cpu_vec_dot; K = 1536 (Gemma 4 E2B) */
                {unit * 6, 1, 1, NULL}, {unit * 6, 2, 1, NULL}, {unit * 6, 3, 1, NULL},
                {unit * 6, 4, 1, pool2}, {unit * 6, 6, 1, NULL}, {unit * 6, 42, 1, pool3},
            };
            int fails = 0;
            worst_ratio = 0.0;
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
                fails += run_case(wt, cases[c].K, cases[c].N, cases[c].T, cases[c].pool);
            /* random-byte blocks: GEMV and the tile GEMM */
            fails += run_case_w(wt, unit * 3, 13, 1, pool2, 1);
            fails += run_case_w(wt, unit * 3, 13, 9, pool2, 1);
            CHECKF(fails == 0, "%s on %s: %d mismatches", qk_get(wt)->name, cpu_isa_name((cpu_isa)isa), fails);
            printf("%-7s %-6s max err/tol %.4f\n", cpu_isa_name((cpu_isa)isa), qk_get(wt)->name, worst_ratio);
        }
    }
    printf("tested %d ISAs x %zu weight types\n", n_isa, sizeof wtypes / sizeof *wtypes);
    tp_free(pool2);
    tp_free(pool3);
    return test_summary();
}
