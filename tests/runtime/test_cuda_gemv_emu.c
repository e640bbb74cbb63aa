/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_gemv_emu.c — the CUDA decode GEMVs without a GPU: k_gemv_reg (registers
 * before the PDL wait, the T = 1 default) and k_gemv_fused (segments of mixed weight types) run under
 * the host emulation (tests/runtime/cuda_gemv_emu.cc, tests/codegen/emu) for every dp4a weight type on
 * its activation (q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL; q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_XS): one row a group and two (N 37, a ragged last group and block), K 512 / 1536 (a warp a row,
 * one and two sub-blocks a lane) and 4096 / 4864 (four warps a row, one and two), each with a bias; the gate/up pairs writing SiLU(gate) * up (K 512 and 2560); and one
 * fused launch of three segments of different types (Q/K/V-like) — into NaN-poisoned outputs, against
 * the f64 dot of the reference dequantizers' weights and activations (within 1e-5 of the sum of
 * |terms|; the GLU within 1e-4 of its operands' magnitudes).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler ($CXX or c++).
 * KV-cache columns: a Q/K/V-like launch whose K segment is rotated into its cache and V written into
 * its own, at a cache row given apart from the rotation position (a paged cache's slot): the row
 * written there is the one a launch with row = position writes at that position, bit for bit, V's
 * cache row equals its result, and every other row stays poisoned (F32 and F16 caches).
 * Non-goals: RoPE math against a reference (test_cuda_ops on a GPU); speed.
 */
#include "dev_layout.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

typedef int (*gemv_fn)(int, int, int, const int *, const long long *, float **, const uint8_t **, const float **, long long, const uint8_t *,
                       int, int);
static gemv_fn emu_gemv;
typedef int (*store_fn)(int, int, long long, long long, const uint8_t *, const uint8_t *, const uint8_t *, void *, void *, int, float *,
                        const int32_t *, const int32_t *, int, int, float, long long);
static store_fn emu_store;
static uint64_t seed = 0x6E3E3Aull;

typedef struct mat {
    int type;
    int64_t N, K;
    uint8_t *w; /* 256-byte aligned, in the device's layout (dev_layout.h) */
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
    m.w = test_to_dev_layout(type, m.w, (uint64_t)N * rb); /* the kernels read the device's layout */
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

/* gate/up pairs: dst = SiLU(gate W x + bg) * (up W x + bu) into the gate's rows (K 512: a warp a
 * row; 2560: four, one sub-block a lane) */
static void check_pairs(int type, int q8k, int64_t K) {
    const int64_t N = 37;
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
            fprintf(stderr, "%s pairs K=%lld: row %lld: %.9g, reference %.9g\n", qk_get(type)->name, (long long)K, (long long)r, g[r], ref);
    }
    CHECKF(rc == 0 && bad == 0, "%s gate/up pairs K=%lld: rc %d, %d rows off", qk_get(type)->name, (long long)K, rc, bad);
    free_mat(&ms[0]), free_mat(&ms[1]);
    free(xq), free(xd), free(g), free(u);
}

/* the store launch (mode, one) with cache row crow (mod ring > 0: a ring of C rows) at position 3 into
 * NaN-poisoned caches of C rows */
static int store_run(int mode, int one, int f16, const mat *mk, const mat *mv, const uint8_t *xq, int32_t crow, uint8_t *kc, uint8_t *vc, float *vd,
                     int64_t C, int64_t ring) {
    const size_t eb = f16 ? 2 : 4, bytes = (size_t)(mk->N * C) * eb;
    memset(kc, 0xFF, bytes), memset(vc, 0xFF, bytes); /* NaN in either type */
    for (int64_t i = 0; i < mv->N; i++) vd[i] = NAN;
    const int32_t pos = 3;
    return emu_store(mode, one, mk->N, mk->K, mk->w, mv->w, xq, kc, vc, f16, vd, &crow, &pos, 32, 64, powf(10000.0f, -2.0f / 32), ring);
}

static bool row_poisoned(const uint8_t *c, int64_t r, int64_t N, size_t eb) {
    for (size_t b = 0; b < (size_t)N * eb; b++)
        if (c[(size_t)r * N * eb + b] != 0xFF) return false;
    return true;
}

static void check_store_rows(void) {
    const int64_t N = 128, K = 512, C = 16, slot = 11;
    mat mk = make_mat(SB_TYPE_Q8_0, N, K), mv = make_mat(SB_TYPE_Q8_0, N, K);
    uint8_t *xq = aligned_alloc(64, (size_t)((K / 32 * sizeof(blk_q8_1) + 63) & ~(size_t)63));
    float *xd = malloc(sizeof(float) * (size_t)K), *vd0 = malloc(sizeof(float) * (size_t)N), *vd1 = malloc(sizeof(float) * (size_t)N);
    make_act(0, K, xq, xd);
    uint8_t *kc0 = malloc((size_t)(N * C) * 4), *vc0 = malloc((size_t)(N * C) * 4), *kc1 = malloc((size_t)(N * C) * 4), *vc1 = malloc((size_t)(N * C) * 4);
    uint8_t *kc2 = malloc((size_t)(N * C) * 4), *vc2 = malloc((size_t)(N * C) * 4);
    for (int f16 = 0; f16 < 2; f16++)
        for (int how = 0; how < 3; how++) { /* k_gemv_reg two rows a group, V one a group; k_gemv_fused */
            const int mode = how == 2, one = how == 1;
            const size_t eb = f16 ? 2 : 4, rbytes = (size_t)N * eb;
            const int rc0 = store_run(mode, one, f16, &mk, &mv, xq, 3, kc0, vc0, vd0, C, 0); /* row = position 3 */
            const int rc1 = store_run(mode, one, f16, &mk, &mv, xq, (int32_t)slot, kc1, vc1, vd1, C, 0); /* row 11, position 3 */
            CHECKF(rc0 == 0 && rc1 == 0, "store launch mode %d one %d f16 %d: emulation returned %d, %d", mode, one, f16, rc0, rc1);
            /* a sliding-window ring of C rows: position 5 C + 3 at row 3 (rotated at 3 here: the same values) */
            const int rc2 = store_run(mode, one, f16, &mk, &mv, xq, (int32_t)(5 * C + 3), kc2, vc2, vd1, C, C);
            int ring_other = 0;
            for (int64_t r = 0; r < C; r++)
                if (r != 3) ring_other += !row_poisoned(kc2, r, N, eb) + !row_poisoned(vc2, r, N, eb);
            CHECKF(rc2 == 0 && ring_other == 0 && !memcmp(kc2 + 3 * rbytes, kc0 + 3 * rbytes, rbytes) && !memcmp(vc2 + 3 * rbytes, vc0 + 3 * rbytes, rbytes),
                   "mode %d one %d f16 %d: ring store (rc %d): %d other rows written, or row 3 differs", mode, one, f16, rc2, ring_other);
            int other = 0;
            for (int64_t r = 0; r < C; r++)
                if (r != slot) other += !row_poisoned(kc1, r, N, eb) + !row_poisoned(vc1, r, N, eb);
            CHECKF(!row_poisoned(kc0, 3, N, eb) && !row_poisoned(vc0, 3, N, eb), "mode %d one %d f16 %d: row 3 unwritten", mode, one, f16);
            CHECKF(other == 0, "mode %d one %d f16 %d: %d rows besides the slot written", mode, one, f16, other);
            CHECKF(!memcmp(kc1 + slot * rbytes, kc0 + 3 * rbytes, rbytes), "mode %d one %d f16 %d: K's row at the slot differs from row 3's", mode,
                   one, f16);
            CHECKF(!memcmp(vc1 + slot * rbytes, vc0 + 3 * rbytes, rbytes) && !memcmp(vd0, vd1, (size_t)N * 4),
                   "mode %d one %d f16 %d: V's row or result differs", mode, one, f16);
            if (!f16) CHECKF(!memcmp(vc1 + slot * rbytes, vd1, (size_t)N * 4), "mode %d one %d: V's cache row is not its result", mode, one);
        }
    free_mat(&mk), free_mat(&mv);
    free(xq), free(xd), free(vd0), free(vd1), free(kc0), free(vc0), free(kc1), free(vc1), free(kc2), free(vc2);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_gemv_emu.cc");
    if (h) {
        *(void **)&emu_gemv = dlsym(h, "sb_emu_gemv");
        *(void **)&emu_store = dlsym(h, "sb_emu_gemv_store");
        CHECK(emu_gemv != NULL && emu_store != NULL && test_dev_layout_load(h));
    }
    if (emu_gemv && emu_to_dev_layout) {
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
            check_pairs(t, q8k, 512);
            check_pairs(t, q8k, 2560);
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
        check_store_rows();
    }
    emu_build_done(h);
    return test_summary();
}
