/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_tensor_ops_emu.c — the tensor ABI's CUDA kernels (k_layer_norm,
 * k_gelu_erf, k_concat, k_permute; device/tensor_ops.cuh) without a GPU: their device code runs
 * under the host emulation (tests/runtime/cuda_tensor_ops_emu.cc, tests/codegen/emu) into
 * NaN-poisoned (0xFF) outputs and is compared with ops_ref.c on fresh random inputs —
 * op_layer_norm within 1e-6 of max(|y|, 1) (its sums in double in another order; also run in
 * place, which must give the same bytes), op_gelu, op_concat and op_permute byte for byte (the
 * emulation's erf is the host's: the GPU's double erf is test_cuda_ops's business).
 * Shapes: layer_norm rows of 1..3001 values (1, 255, 256, 257: around the block), odd rows offset
 * by 50 (the mean's subtraction); gelu through +-30 and tiny values; concat along every dim of a
 * 4-D value with 2, 3 and 8 sources (one source twice), rows longer than a block; permute by all
 * 24 permutations of a 4-D value, the 6 of a 3-D one, long rows — the copies also with their grid
 * capped at 1 x 2 blocks, so every stride loop runs.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <math.h>

typedef int (*ln_fn)(float *, const float *, long long, long long, float);
typedef int (*gelu_fn)(float *, const float *, long long, unsigned);
typedef int (*concat_fn)(float *, const float *const *, const long long *, int, long long, unsigned, unsigned);
typedef int (*permute_fn)(float *, const float *, const long long *, const int *, unsigned, unsigned);
static ln_fn emu_layer_norm;
static gelu_fn emu_gelu;
static concat_fn emu_concat;
static permute_fn emu_permute;
static uint64_t seed = 0x7E4502ull;

#define CAP_X 65536u /* device/tensor_ops.cuh's COPY_MAX_X / COPY_MAX_Y: the launchers' caps */
#define CAP_Y 65535u

static float *poisoned(int64_t n) {
    float *y = malloc((size_t)n * sizeof *y);
    memset(y, 0xff, (size_t)n * sizeof *y);
    return y;
}

static float *normals(int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rand_normal(&seed);
    return x;
}

static void check_layer_norm(int64_t E, int64_t rows) {
    const int64_t n = E * rows;
    const float eps = 1e-5f;
    float *x = normals(n, 3.0f), *y = poisoned(n), *r = poisoned(n), *z = malloc((size_t)n * sizeof *z);
    for (int64_t t = 1; t < rows; t += 2)
        for (int64_t i = 0; i < E; i++) x[t * E + i] += 50.0f;
    memcpy(z, x, (size_t)n * sizeof *z);
    CHECKF(emu_layer_norm(y, x, E, rows, eps) == 0 && emu_layer_norm(z, z, E, rows, eps) == 0, "layer_norm %lld x %lld: emulation deadlocked",
           (long long)E, (long long)rows);
    op_layer_norm(r, x, E, 0, rows, eps);
    double worst = 0;
    int64_t exact = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)y[i] - r[i]) / fmax(fabs(r[i]), 1.0);
        worst = d == d && worst == worst ? fmax(worst, d) : NAN;
        exact += !memcmp(&y[i], &r[i], sizeof *y);
    }
    CHECKF(worst <= 1e-6, "layer_norm %lld x %lld: max error %g of max(|y|, 1) vs op_layer_norm", (long long)E, (long long)rows, worst);
    CHECKF(!memcmp(y, z, (size_t)n * sizeof *y), "layer_norm %lld x %lld: in place differs", (long long)E, (long long)rows);
    printf("layer_norm %5lld x %lld: max error %.2e, %lld of %lld values bit-identical\n", (long long)E, (long long)rows, worst, (long long)exact,
           (long long)n);
    free(x), free(y), free(r), free(z);
}

static void check_gelu(int64_t n, unsigned cap) {
    static const float special[] = {0.0f, -0.0f, 10.0f, -10.0f, 30.0f, -30.0f, 1e-20f, -1e-20f, -6.0f, -9.0f, 3.0f};
    float *x = normals(n, 4.0f), *y = poisoned(n), *r = poisoned(n);
    for (int64_t i = 0; i < n && i < (int64_t)(sizeof special / sizeof *special); i++) x[i] = special[i];
    CHECKF(emu_gelu(y, x, n, cap) == 0, "gelu %lld: emulation deadlocked", (long long)n);
    op_gelu(r, x, n);
    CHECKF(!memcmp(y, r, (size_t)n * sizeof *y), "gelu %lld (grid cap %u): differs from op_gelu", (long long)n, cap);
    free(x), free(y), free(r);
}

/* ns sources of shape ne but ne[dim] = len[i], joined along dim; twice: source 1 is source 0 */
static void check_concat(const int64_t ne[4], int dim, int ns, const int64_t *len, bool twice, unsigned cx, unsigned cy) {
    float *src[8];
    long long chunk[8];
    int64_t ch[8], total = 0, outer = 1;
    for (int k = dim + 1; k < 4; k++) outer *= ne[k];
    for (int i = 0; i < ns; i++) {
        ch[i] = len[i];
        for (int k = 0; k < dim; k++) ch[i] *= ne[k];
        chunk[i] = ch[i], total += ch[i];
        src[i] = twice && i == 1 ? src[0] : normals(ch[i] * outer, 1.0f);
    }
    float *y = poisoned(total * outer), *r = poisoned(total * outer);
    CHECKF(emu_concat(y, (const float *const *)src, chunk, ns, outer, cx, cy) == 0, "concat: emulation deadlocked");
    op_concat(r, (const float *const *)src, ch, ns, outer);
    CHECKF(!memcmp(y, r, (size_t)(total * outer) * sizeof *y), "concat of %d along dim %d of [%lld,%lld,%lld,%lld]%s (grid cap %u x %u): differs", ns,
           dim, (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3], twice ? " (a source twice)" : "", cx, cy);
    for (int i = 0; i < ns; i++)
        if (!(twice && i == 1)) free(src[i]);
    free(y), free(r);
}

static void check_permute(const int64_t ne[4], const int32_t perm[4], unsigned cx, unsigned cy) {
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3], on[4] = {ne[perm[0]], ne[perm[1]], ne[perm[2]], ne[perm[3]]};
    const long long nel[4] = {ne[0], ne[1], ne[2], ne[3]};
    const int p[4] = {perm[0], perm[1], perm[2], perm[3]};
    float *x = normals(n, 1.0f), *y = poisoned(n), *r = poisoned(n);
    CHECKF(emu_permute(y, x, nel, p, cx, cy) == 0, "permute: emulation deadlocked");
    op_permute(r, x, ne, perm, 0, on[1] * on[2] * on[3]);
    CHECKF(!memcmp(y, r, (size_t)n * sizeof *y), "permute [%lld,%lld,%lld,%lld] by %d,%d,%d,%d (grid cap %u x %u): differs", (long long)ne[0],
           (long long)ne[1], (long long)ne[2], (long long)ne[3], p[0], p[1], p[2], p[3], cx, cy);
    free(x), free(y), free(r);
}

static void run_all(void) {
    const int64_t Es[] = {1, 7, 255, 256, 257, 1000, 3001};
    for (size_t e = 0; e < sizeof Es / sizeof *Es; e++) check_layer_norm(Es[e], e % 2 ? 3 : 2);
    check_layer_norm(64, 1);
    const int64_t gn[] = {1, 11, 300, 1000};
    for (int k = 0; k < 4; k++) check_gelu(gn[k], k % 2 ? CAP_X : 1);
    check_gelu(700, 2);
    int cases = 0;
    const int64_t ne[4] = {5, 3, 4, 2};
    for (int dim = 0; dim < 4; dim++)
        for (int caps = 0; caps < 2; caps++) {
            const unsigned cx = caps ? 1 : CAP_X, cy = caps ? 2 : CAP_Y;
            check_concat(ne, dim, 2, (const int64_t[]){ne[dim], 1}, false, cx, cy);
            check_concat(ne, dim, 3, (const int64_t[]){ne[dim], ne[dim] + 2, 1}, false, cx, cy);
            check_concat(ne, dim, 2, (const int64_t[]){ne[dim], ne[dim]}, true, cx, cy);
            cases += 3;
        }
    check_concat(ne, 1, 8, (const int64_t[]){1, 2, 3, 4, 5, 6, 7, 8}, false, CAP_X, CAP_Y);
    check_concat(ne, 3, 8, (const int64_t[]){2, 1, 2, 1, 2, 1, 2, 1}, false, 1, 3);
    check_concat((const int64_t[4]){300, 2, 1, 1}, 0, 2, (const int64_t[]){300, 7}, false, CAP_X, CAP_Y);
    check_concat((const int64_t[4]){260, 3, 2, 1}, 1, 3, (const int64_t[]){3, 1, 2}, false, 1, 2);
    check_concat((const int64_t[4]){33, 7, 5, 1}, 2, 2, (const int64_t[]){5, 4}, false, CAP_X, CAP_Y);
    cases += 5;
    printf("%d concat cases byte for byte\n", cases);
    cases = 0;
    for (int code = 0; code < 256; code++) { /* every permutation of 0..3 */
        const int32_t p[4] = {code & 3, code >> 2 & 3, code >> 4 & 3, code >> 6 & 3};
        if ((1 << p[0] | 1 << p[1] | 1 << p[2] | 1 << p[3]) != 15) continue;
        check_permute(ne, p, cases % 2 ? 1 : CAP_X, cases % 2 ? 2 : CAP_Y);
        cases++;
        if (p[3] == 3) check_permute((const int64_t[4]){33, 7, 5, 1}, p, CAP_X, CAP_Y), cases++; /* 3-D */
    }
    const int32_t longp[3][4] = {{1, 0, 2, 3}, {0, 2, 1, 3}, {2, 1, 0, 3}};
    for (int k = 0; k < 3; k++) check_permute((const int64_t[4]){300, 3, 2, 1}, longp[k], k ? 1 : CAP_X, k ? 2 : CAP_Y), cases++;
    printf("%d permute cases byte for byte\n", cases);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_tensor_ops_emu.cc");
    if (h) {
        *(void **)&emu_layer_norm = dlsym(h, "sb_emu_layer_norm");
        *(void **)&emu_gelu = dlsym(h, "sb_emu_gelu");
        *(void **)&emu_concat = dlsym(h, "sb_emu_concat");
        *(void **)&emu_permute = dlsym(h, "sb_emu_permute");
        CHECK(emu_layer_norm && emu_gelu && emu_concat && emu_permute);
    }
    if (emu_layer_norm && emu_gelu && emu_concat && emu_permute) run_all();
    emu_build_done(h);
    return test_summary();
}
