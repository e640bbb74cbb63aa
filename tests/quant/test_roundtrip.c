/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/quant/test_roundtrip.c — properties of every quantizer on random and adversarial data:
 *  - quantize -> dequantize error on gaussian rows stays under a per-type NMSE bound (bounds are
 *    ~1.5x the values measured for these exact inputs, so a real regression trips them);
 *  - every output byte is written: outputs poisoned with two different patterns must agree
 *    (quantize and dequantize);
 *  - all-zero rows dequantize to exactly zero; NaN/Inf/huge inputs do not crash and still write
 *    every byte; random bytes dequantize without UB (run under UBSan);
 *  - qk_quantize_chunk equals row-by-row quantization and rejects bad arguments with the right
 *    status; the traits table carries the converters and formats.md §3.1 pairings.
 * Deterministic: fixed xorshift seed (printed).
 */
#include "quant/quant.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "test.h"

typedef struct rt_case {
    const char *name;
    int type;                     /* for block size / row bytes */
    qk_from_float_fn quantize;
    qk_to_float_fn dequantize;
    double nmse_max;              /* bound on Σ(x-y)²/Σx² over the gaussian rows */
} rt_case;

static const rt_case cases[] = {
    {"f16", SB_TYPE_F16, qk_fp32_to_fp16_row, qk_fp16_to_fp32_row, 1.0e-7},
    {"bf16", SB_TYPE_BF16, qk_fp32_to_bf16_row, qk_bf16_to_fp32_row, 1.0e-5},
    {"q4_0", SB_TYPE_Q4_0, qk_quantize_row_q4_0_ref, qk_dequantize_row_q4_0, 1.1e-2},
    {"q4_1", SB_TYPE_Q4_1, qk_quantize_row_q4_1_ref, qk_dequantize_row_q4_1, 9.0e-3},
    {"q5_0", SB_TYPE_Q5_0, qk_quantize_row_q5_0_ref, qk_dequantize_row_q5_0, 2.7e-3},
    {"q5_1", SB_TYPE_Q5_1, qk_quantize_row_q5_1_ref, qk_dequantize_row_q5_1, 2.1e-3},
    {"q8_0", SB_TYPE_Q8_0, qk_quantize_row_q8_0_ref, qk_dequantize_row_q8_0, 4.4e-5},
    {"q8_0_x86", SB_TYPE_Q8_0, qk_quantize_row_q8_0_x86, qk_dequantize_row_q8_0, 4.4e-5},
    {"q8_1", SB_TYPE_Q8_1, qk_quantize_row_q8_1_ref, qk_dequantize_row_q8_1, 4.4e-5},
    {"q8_1_x86", SB_TYPE_Q8_1, qk_quantize_row_q8_1_x86, qk_dequantize_row_q8_1, 4.4e-5},
    {"q8_K", SB_TYPE_Q8_K, qk_quantize_row_q8_K_ref, qk_dequantize_row_q8_K, 7.3e-5},
    {"q2_K", SB_TYPE_Q2_K, qk_quantize_row_q2_K_ref, qk_dequantize_row_q2_K, 1.3e-1},
    {"q3_K", SB_TYPE_Q3_K, qk_quantize_row_q3_K_ref, qk_dequantize_row_q3_K, 3.4e-2},
    {"q4_K", SB_TYPE_Q4_K, qk_quantize_row_q4_K_ref, qk_dequantize_row_q4_K, 7.7e-3},
    {"q5_K", SB_TYPE_Q5_K, qk_quantize_row_q5_K_ref, qk_dequantize_row_q5_K, 1.9e-3},
    {"q6_K", SB_TYPE_Q6_K, qk_quantize_row_q6_K_ref, qk_dequantize_row_q6_K, 4.7e-4},
    {"iq4_nl", SB_TYPE_IQ4_NL, qk_quantize_row_iq4_nl, qk_dequantize_row_iq4_nl, 8.7e-3},
    {"iq4_nl_ref", SB_TYPE_IQ4_NL, qk_quantize_row_iq4_nl_ref, qk_dequantize_row_iq4_nl, 9.3e-3},
    {"iq4_xs", SB_TYPE_IQ4_XS, qk_quantize_row_iq4_xs_ref, qk_dequantize_row_iq4_xs, 8.8e-3},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

#define ROWS 16
#define NPR 1024
static float gauss[ROWS * NPR];

static size_t row_bytes(int type, int64_t n) {
    uint64_t b = 0;
    if (qk_row_bytes(type, n, &b) != 0) { fprintf(stderr, "bad row size\n"); exit(1); }
    return (size_t)b;
}

/* Quantize n values twice into buffers poisoned differently; both runs must agree (every byte
 * written, deterministic). Returns the first buffer (malloc'd). */
static uint8_t *quantize_checked(const rt_case *c, const float *x, int64_t n, const char *what) {
    const size_t rb = row_bytes(c->type, n);
    uint8_t *a = (uint8_t *)malloc(rb), *b = (uint8_t *)malloc(rb);
    memset(a, 0xCD, rb);
    memset(b, 0x32, rb);
    c->quantize(x, a, n);
    c->quantize(x, b, n);
    size_t diff = 0;
    for (size_t i = 0; i < rb; i++) diff += a[i] != b[i];
    CHECKF(diff == 0, "%s/%s: %zu of %zu output bytes not written (or nondeterministic)", c->name, what, diff, rb);
    free(b);
    return a;
}

static void dequantize_checked(const rt_case *c, const uint8_t *q, float *y, int64_t n, const char *what) {
    float *y2 = (float *)malloc((size_t)n * sizeof(float));
    memset(y, 0xCD, (size_t)n * sizeof(float));
    memset(y2, 0x32, (size_t)n * sizeof(float));
    c->dequantize(q, y, n);
    c->dequantize(q, y2, n);
    CHECKF(memcmp(y, y2, (size_t)n * sizeof(float)) == 0, "%s/%s: dequantize leaves outputs unwritten", c->name, what);
    free(y2);
}

static void test_nmse(const rt_case *c) {
    float *y = (float *)malloc(sizeof gauss);
    uint8_t *q = quantize_checked(c, gauss, ROWS * NPR, "gauss");
    dequantize_checked(c, q, y, ROWS * NPR, "gauss");
    double num = 0, den = 0;
    for (int i = 0; i < ROWS * NPR; i++) {
        num += ((double)gauss[i] - y[i]) * ((double)gauss[i] - y[i]);
        den += (double)gauss[i] * gauss[i];
    }
    const double nmse = num / den;
    printf("%-10s NMSE %.3e (bound %.1e)\n", c->name, nmse, c->nmse_max);
    CHECKF(nmse <= c->nmse_max, "%s: NMSE %.3e above %.1e", c->name, nmse, c->nmse_max);
    free(q);
    free(y);
}

static void test_special(const rt_case *c, uint64_t *seed) {
    const int64_t n = 512;
    float x[512], y[512];
    /* all zero -> exactly zero (sign may be negative: compare values, not bits) */
    memset(x, 0, sizeof x);
    uint8_t *q = quantize_checked(c, x, n, "zeros");
    dequantize_checked(c, q, y, n, "zeros");
    int nz = 0;
    for (int i = 0; i < n; i++) nz += y[i] != 0.0f;
    CHECKF(nz == 0, "%s: %d nonzero values from an all-zero row", c->name, nz);
    free(q);
    /* one outlier per block among small values, constant rows, tiny values: finite output */
    const float fills[4] = {0.25f, -3.0f, 1e-7f, 1000.0f}  /* x40 stays within fp16 */;
    for (int f = 0; f < 4; f++) {
        for (int i = 0; i < n; i++) x[i] = fills[f] * (1.0f + 0.01f * test_rand_normal(seed));
        for (int i = 0; i < n; i += 64) x[i] = fills[f] * 40.0f;
        q = quantize_checked(c, x, n, "outliers");
        dequantize_checked(c, q, y, n, "outliers");
        int bad = 0;
        for (int i = 0; i < n; i++) bad += !isfinite(y[i]);
        CHECKF(bad == 0, "%s: %d non-finite values for fill %g", c->name, bad, (double)fills[f]);
        free(q);
    }
    /* garbage in (NaN, Inf, 1e38): no crash, no UB, every byte still written */
    for (int i = 0; i < n; i++) x[i] = test_rand_normal(seed);
    x[3] = NAN; x[40] = INFINITY; x[300] = -INFINITY; x[301] = 1e38f; x[450] = -1e38f;
    q = quantize_checked(c, x, n, "nan-inf");
    dequantize_checked(c, q, y, n, "nan-inf");
    free(q);
}

/* Arbitrary bytes (as in a corrupt or hostile file) dequantize without UB and write every value;
 * values are finite unless an fp16/fp32 scale field itself is inf/NaN. */
static void test_random_blocks(const rt_case *c, uint64_t *seed) {
    const int64_t n = 64 * qk_get(c->type)->blck;
    const size_t rb = row_bytes(c->type, n);
    uint8_t *q = (uint8_t *)malloc(rb);
    float *y = (float *)malloc((size_t)n * sizeof(float));
    for (size_t i = 0; i < rb; i++) q[i] = (uint8_t)test_rand_u64(seed);
    dequantize_checked(c, q, y, n, "random-bytes");
    free(q);
    free(y);
}

static void test_q8_semantics(void) {
    /* amax = 127 so that x*id = x: the x86 path rounds half to even, the ref away from zero */
    float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
    blk_q8_0 r, v;
    qk_quantize_row_q8_0_ref(x, &r, 32);
    qk_quantize_row_q8_0_x86(x, &v, 32);
    const int ref_q[8] = {127, 1, 2, 3, -1, -2, -3, 127}, x86_q[8] = {127, 0, 2, 2, 0, -2, -2, 126};
    int bad = 0;
    for (int j = 0; j < 8; j++) bad += r.qs[j] != ref_q[j] || v.qs[j] != x86_q[j];
    CHECKF(bad == 0, "Q8_0 tie rounding: ref %d %d %d, x86 %d %d %d", r.qs[1], r.qs[2], r.qs[3], v.qs[1], v.qs[2], v.qs[3]);
    CHECK_EQ_INT(r.d, qk_fp32_to_fp16(1.0f));
    CHECK_EQ_INT(v.d, qk_fp32_to_fp16(1.0f));
    /* Q8_1: s = F16(d * Σq) with the unrounded d */
    blk_q8_1 s1, s2;
    float z[32];
    uint64_t seed = 7;
    for (int j = 0; j < 32; j++) z[j] = 0.3f + test_rand_normal(&seed);
    qk_quantize_row_q8_1_ref(z, &s1, 32);
    qk_quantize_row_q8_1_x86(z, &s2, 32);
    float amax = 0;
    int sum1 = 0, sum2 = 0;
    for (int j = 0; j < 32; j++) { amax = fmaxf(amax, fabsf(z[j])); sum1 += s1.qs[j]; sum2 += s2.qs[j]; }
    CHECK_EQ_INT(s1.s, qk_fp32_to_fp16((float)sum1 * (amax / 127)));
    CHECK_EQ_INT(s2.s, qk_fp32_to_fp16((amax / 127) * (float)sum2));
    /* Q8_K: bsums are the group sums, d = max/-127 inverse, and x = 0 gives d = 0 with bsums = 0 */
    float k[256];
    for (int j = 0; j < 256; j++) k[j] = test_rand_normal(&seed);
    blk_q8_K b;
    qk_quantize_row_q8_K_ref(k, &b, 256);
    bad = 0;
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += b.qs[16 * g + l];
        bad += s != b.bsums[g];
    }
    CHECK_EQ_INT(bad, 0);
    memset(k, 0, sizeof k);
    memset(&b, 0x55, sizeof b);
    qk_quantize_row_q8_K_ref(k, &b, 256);
    bad = b.d != 0.0f;
    for (int j = 0; j < 256; j++) bad += b.qs[j] != 0;
    for (int g = 0; g < 16; g++) bad += b.bsums[g] != 0;
    CHECK_EQ_INT(bad, 0);
}

static void test_chunk(void) {
    const int chunk_types[] = {SB_TYPE_F32, SB_TYPE_F16, SB_TYPE_BF16, SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0,
                               SB_TYPE_Q5_1, SB_TYPE_Q8_0, SB_TYPE_Q2_K, SB_TYPE_Q3_K, SB_TYPE_Q4_K, SB_TYPE_Q5_K,
                               SB_TYPE_Q6_K, SB_TYPE_IQ4_NL, SB_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof chunk_types / sizeof chunk_types[0]; i++) {
        const int t = chunk_types[i];
        const int64_t rows = 3, npr = 512;
        const size_t rb = row_bytes(t, npr);
        uint8_t *a = (uint8_t *)malloc(rb * rows), *b = (uint8_t *)malloc(rb * rows);
        memset(a, 0xCD, rb * rows);
        CHECK_EQ_INT(qk_quantize_chunk(t, gauss, a, rows, npr), SB_OK);
        qk_from_float_fn q = qk_chunk_quantizer(t);
        CHECKF(q != NULL, "type %d has no chunk quantizer", t);
        if (q) for (int64_t r = 0; r < rows; r++) q(gauss + r * npr, b + r * rb, npr);
        CHECKF(q && memcmp(a, b, rb * rows) == 0, "type %s: chunk differs from row-by-row", qk_get(t)->name);
        free(a);
        free(b);
    }
    /* llama-quantize's IQ4_NL path is quantize_iq4_nl (ntry 7), not the ntry -1 ref */
    CHECK(qk_chunk_quantizer(SB_TYPE_IQ4_NL) == qk_quantize_row_iq4_nl);
    CHECK(qk_chunk_quantizer(SB_TYPE_Q4_K) == qk_quantize_row_q4_K_ref);
    uint8_t buf[1024];
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_Q4_K, gauss, buf, 1, 100), SB_ERR_INVALID_ARG);   /* not multiple of 256 */
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_Q4_0, gauss, buf, -1, 32), SB_ERR_INVALID_ARG);
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_Q4_0, NULL, buf, 1, 32), SB_ERR_INVALID_ARG);
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_Q4_0, gauss, buf, 0, 32), SB_OK);
    CHECK_EQ_INT(qk_quantize_chunk(4, gauss, buf, 1, 32), SB_ERR_UNSUPPORTED);            /* removed Q4_2 */
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_COUNT, gauss, buf, 1, 32), SB_ERR_UNSUPPORTED);
    CHECK_EQ_INT(qk_quantize_chunk(-1, gauss, buf, 1, 32), SB_ERR_UNSUPPORTED);
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_IQ2_XXS, gauss, buf, 1, 256), SB_ERR_UNSUPPORTED);
    CHECK_EQ_INT(qk_quantize_chunk(SB_TYPE_Q8_K, gauss, buf, 1, 256), SB_ERR_UNSUPPORTED);  /* activation only */
    CHECK(strstr(sb_last_error(), "Q8_K") != NULL);
}

static void test_traits(void) {
    static const struct { int type, vdt; } pairs[] = {
        {SB_TYPE_F32, SB_TYPE_F32},    {SB_TYPE_F16, SB_TYPE_F16},    {SB_TYPE_BF16, SB_TYPE_BF16},
        {SB_TYPE_Q4_0, SB_TYPE_Q8_0},  {SB_TYPE_Q5_0, SB_TYPE_Q8_0},  {SB_TYPE_Q8_0, SB_TYPE_Q8_0},
        {SB_TYPE_IQ4_NL, SB_TYPE_Q8_0}, {SB_TYPE_Q4_1, SB_TYPE_Q8_1}, {SB_TYPE_Q5_1, SB_TYPE_Q8_1},
        {SB_TYPE_Q2_K, SB_TYPE_Q8_K},  {SB_TYPE_Q3_K, SB_TYPE_Q8_K},  {SB_TYPE_Q4_K, SB_TYPE_Q8_K},
        {SB_TYPE_Q5_K, SB_TYPE_Q8_K},  {SB_TYPE_Q6_K, SB_TYPE_Q8_K},  {SB_TYPE_IQ4_XS, SB_TYPE_Q8_K},
        {SB_TYPE_MXFP4, SB_TYPE_Q8_0}, {SB_TYPE_IQ2_XXS, SB_TYPE_Q8_K}, {SB_TYPE_TQ2_0, SB_TYPE_Q8_K},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const qk_traits *t = qk_get(pairs[i].type);
        CHECKF(t->vec_dot_type == pairs[i].vdt, "%s: vec_dot_type %d, want %d", t->name, t->vec_dot_type, pairs[i].vdt);
        if (pairs[i].type != SB_TYPE_MXFP4 && pairs[i].type != SB_TYPE_IQ2_XXS && pairs[i].type != SB_TYPE_TQ2_0)
            CHECKF(t->to_float && t->from_float_ref, "%s: converters missing", t->name);
    }
    CHECK(qk_get(SB_TYPE_IQ2_XXS)->to_float == NULL);
    CHECK(qk_get(SB_TYPE_Q4_K)->to_float == qk_dequantize_row_q4_K);
    CHECK(qk_get(SB_TYPE_IQ4_NL)->from_float_ref == qk_quantize_row_iq4_nl_ref);
    /* block structs agree with the traits table */
    CHECK_EQ_INT(qk_get(SB_TYPE_Q2_K)->type_size, sizeof(blk_q2_K));
    CHECK_EQ_INT(qk_get(SB_TYPE_Q3_K)->type_size, sizeof(blk_q3_K));
    CHECK_EQ_INT(qk_get(SB_TYPE_Q8_K)->type_size, sizeof(blk_q8_K));
    CHECK_EQ_INT(qk_get(SB_TYPE_IQ4_XS)->type_size, sizeof(blk_iq4_xs));
    CHECK_EQ_INT(qk_get(SB_TYPE_Q5_1)->type_size, sizeof(blk_q5_1));
}

int main(void) {
    uint64_t seed = 0x5B0A7C0FFEEull;
    printf("seed 0x%llx\n", (unsigned long long)seed);
    for (int i = 0; i < ROWS * NPR; i++) gauss[i] = test_rand_normal(&seed);
    test_traits();
    for (int i = 0; i < N_CASES; i++) {
        test_nmse(&cases[i]);
        test_special(&cases[i], &seed);
        test_random_blocks(&cases[i], &seed);
    }
    test_q8_semantics();
    test_chunk();
    return test_summary();
}
