/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_gemv_emu.c — the CUDA decode GEMVs without a GPU: k_gemv_reg (registers
 * before the PDL wait, the T = 1 default) and k_gemv_fused (segments of mixed weight types) run under
 * the host emulation (tests/runtime/cuda_gemv_emu.cc, tests/codegen/emu) for every dp4a weight type on
 * its activation (q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL; q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_XS): one row a group and two (N 37, a ragged last group and block), K 512 / 1536 (a warp a row,
 * one and two sub-blocks a lane) and 4096 / 4864 (four warps a row, one and two), each with a bias; the gate/up pairs writing SiLU(gate) * up; and one
 * fused launch of three segments of different types (Q/K/V-like) — into NaN-poisoned outputs, against
 * the f64 dot of the reference dequantizers' weights and activations (within 1e-5 of the sum of
 * |terms|; the GLU within 1e-4 of its operands' magnitudes).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * Non-goals: RoPE segments and KV-cache columns (test_cuda_ops on a GPU); speed.
 */
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

typedef int (*gemv_fn)(int, int, int, const int *, const long long *, float **, const uint8_t **, const float **, long long, const uint8_t *,
                       int, int);
static gemv_fn emu_gemv;
static uint64_t seed = 0x6E3E3Aull;

typedef struct mat {
    int type;
    int64_t N, K;
    uint8_t *w; /* 256-byte aligned, rows of rb bytes */
    float *deq; /* [N][K] the reference dequantizer's values */
    float *bias;
} mat;

static mat make_mat(int type, int64_t N, int64_t K) {
    const qk_traits *tr = qk_get(type);
    const uint64_t rb = (uint64_t)(K / tr->blck) * (uint64_t)tr->type_size;
    mat m = {type, N, K, aligned_alloc(256, (size_t)((N * rb + 255) & ~(uint64_t)255) + 256), malloc(sizeof(float) * (size_t)(N * K)),
             malloc(sizeof(float) * (size_t)N)};
    float *row = malloc(sizeof(float) * (size_t)K);
    for (int64_t n = 0; n < N; n++) {
        const float sc = n % 4 == 0 ? 1.5f : 0.04f;
        for (int64_t k = 0; k < K; k++) row[k] = sc * test_rand_normal(&seed) + (n % 3 == 0 ? 0.5f * sc : 0.0f);
        tr->from_float_ref(row, m.w + (uint64_t)n * rb, K);
        tr->to_float(m.w + (uint64_t)n * rb, m.deq + n * K, K);
        m.bias[n] = test_rand_normal(&seed);
    }
    free(row);
    return m;
}
static void free_mat(mat *m) { free(m->w), free(m->deq), free(m->bias); }

/* x (K floats) quantized to q8_1 / q8_K into xq, its dequantized values into xd */
static void make_act(int q8k, int64_t K, uint8_t *xq, float *xd) {
    float *x = malloc(sizeof(float) * (size_t)K);
    for (int64_t k = 0; k < K; k++) x[k] = test_rand_normal(&seed) * (k % 17 == 0 ? 5.0f : 1.0f);
    if (q8k) qk_quantize_row_q8_K_ref(x, xq, K), qk_dequantize_row_q8_K(xq, xd, K);
    else qk_quantize_row_q8_1_ref(x, xq, K), qk_dequantize_row_q8_1(xq, xd, K);
    free(x);
}

static double dot(const mat *m, int64_t n, const float *xd, double *mag) {
    double s = m->bias[n];
    *mag = fabs(m->bias[n]);
    for (int64_t k = 0; k < m->K; k++) s += (double)m->deq[n * m->K + k] * xd[k], *mag += fabs((double)m->deq[n * m->K + k] * xd[k]);
    return s;
}

/* n segments through k_gemv_reg (mode 0, how) or k_gemv_fused (mode 1, R = how) */
static void check_launch(const char *label, int mode, int how, int q8k, mat *ms, int n) {
    const int64_t K = ms[0].K;
    uint8_t *xq = aligned_alloc(64, (size_t)((K / 32 * sizeof(blk_q8_1) + K / 256 * sizeof(blk_q8_K) + 63) & ~(size_t)63));
    float *xd = malloc(sizeof(float) * (size_t)K);
    make_act(q8k, K, xq, xd);
    int types[4];
    long long Ns[4];
    float *dst[4];
    const uint8_t *w[4];
    const float *add[4];
    for (int k = 0; k < n; k++) {
        types[k] = ms[k].type, Ns[k] = ms[k].N, w[k] = ms[k].w, add[k] = ms[k].bias;
        dst[k] = malloc(sizeof(float) * (size_t)ms[k].N);
        for (int64_t i = 0; i < ms[k].N; i++) dst[k][i] = NAN;
    }
    const int rc = emu_gemv(mode, q8k, n, types, Ns, dst, w, add, K, xq, how, 0);
    CHECKF(rc == 0, "%s: emulation returned %d", label, rc);
    int bad = 0, unwritten = 0;
    for (int k = 0; k < n; k++)
        for (int64_t r = 0; r < ms[k].N; r++) {
            double mag;
            const double ref = dot(&ms[k], r, xd, &mag);
            const float got = dst[k][r];
            if (got != got) unwritten++;
            else if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30) && bad++ < 3)
                fprintf(stderr, "%s: segment %d row %lld: %.9g, reference %.9g\n", label, k, (long long)r, got, ref);
        }
    CHECKF(rc == 0 && unwritten == 0 && bad == 0, "%s: %d outputs unwritten, %d off the reference", label, unwritten, bad);
    for (int k = 0; k < n; k++) free(dst[k]);
    free(xq), free(xd);
}

/* gate/up pairs: dst = SiLU(gate W x + bg) * (up W x + bu) into the gate's rows */
static void check_pairs(int type, int q8k) {
    const int64_t K = 512, N = 37;
    mat ms[2] = {make_mat(type, N, K), make_mat(type, N, K)};
    uint8_t *xq = aligned_alloc(64, (size_t)((K / 32 * sizeof(blk_q8_1) + K / 256 * sizeof(blk_q8_K) + 63) & ~(size_t)63)); /* either */
    float *xd = malloc(sizeof(float) * K), *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N);
    make_act(q8k, K, xq, xd);
    for (int64_t i = 0; i < N; i++) g[i] = u[i] = NAN;
    int types[2] = {type, type};
    long long Ns[2] = {N, N};
    float *dst[2] = {g, u};
    const uint8_t *w[2] = {ms[0].w, ms[1].w};
    const float *add[2] = {ms[0].bias, ms[1].bias};
    const int rc = emu_gemv(0, q8k, 2, types, Ns, dst, w, add, K, xq, 2, 1);
    int bad = 0;
    for (int64_t r = 0; r < N; r++) {
        double mg, mu;
        const double gv = dot(&ms[0], r, xd, &mg), uv = dot(&ms[1], r, xd, &mu);
        const double sg = gv / (1 + exp(-gv)), ref = sg * uv;
        if (!(fabs(g[r] - ref) <= 1e-4 * (mg * fabs(uv) + fabs(sg) * mu) + 1e-6) && bad++ < 3)
            fprintf(stderr, "%s pairs: row %lld: %.9g, reference %.9g\n", qk_get(type)->name, (long long)r, g[r], ref);
    }
    CHECKF(rc == 0 && bad == 0, "%s gate/up pairs: rc %d, %d rows off", qk_get(type)->name, rc, bad);
    free_mat(&ms[0]), free_mat(&ms[1]);
    free(xq), free(xd), free(g), free(u);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_gemv_emu.cc");
    if (h) {
        *(void **)&emu_gemv = dlsym(h, "sb_emu_gemv");
        CHECK(emu_gemv != NULL);
    }
    if (emu_gemv) {
        static const int types[] = {SB_TYPE_Q4_0, SB_TYPE_Q4_1, SB_TYPE_Q5_0, SB_TYPE_Q5_1, SB_TYPE_Q8_0, SB_TYPE_IQ4_NL,
                                    SB_TYPE_Q2_K, SB_TYPE_Q3_K, SB_TYPE_Q4_K, SB_TYPE_Q5_K, SB_TYPE_Q6_K, SB_TYPE_IQ4_XS};
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            const int t = types[i], q8k = i >= 6;
            char label[96];
            static const int Ks[] = {512, 1536, 4096, 4864}; /* a warp a row (1, 2 sub-blocks a lane), four (1, 2) */
            for (int ki = 0; ki < 4; ki++) {
                const int K = Ks[ki];
                mat m = make_mat(t, 37, K);
                for (int how = 0; how < 2; how++) {
                    snprintf(label, sizeof label, "k_gemv_reg %s K=%d, %d row(s) a group", qk_get(t)->name, K, how + 1);
                    check_launch(label, 0, how, q8k, &m, 1);
                }
                free_mat(&m);
            }
            check_pairs(t, q8k);
        }
        /* k_gemv_fused: three segments of mixed types over one activation, one and two rows a group */
        static const int mix[2][3] = {{SB_TYPE_Q4_1, SB_TYPE_IQ4_NL, SB_TYPE_Q8_0}, {SB_TYPE_Q3_K, SB_TYPE_Q2_K, SB_TYPE_IQ4_XS}};
        for (int q8k = 0; q8k < 2; q8k++)
            for (int R = 1; R <= 2; R++) {
                mat ms[3] = {make_mat(mix[q8k][0], 40, 512), make_mat(mix[q8k][1], 8, 512), make_mat(mix[q8k][2], 9, 512)};
                char label[96];
                snprintf(label, sizeof label, "k_gemv_fused %s + %s + %s, %d row(s) a group", qk_get(mix[q8k][0])->name,
                         qk_get(mix[q8k][1])->name, qk_get(mix[q8k][2])->name, R);
                check_launch(label, 1, R, q8k, ms, 3);
                for (int k = 0; k < 3; k++) free_mat(&ms[k]);
            }
    }
    emu_build_done(h);
    return test_summary();
}
