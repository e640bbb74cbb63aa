/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_rope_emu.c — the normed rope (cu_rope_norm, device/rope_norm.cuh; pass
 * fuse_norm_rope) without a GPU: its device code runs under the host emulation
 * (tests/runtime/cuda_rope_emu.cc, tests/codegen/emu) and must give the bytes of op_rope with its
 * head norm (op_rms_norm_row, op_mul, the rotation: the CPU's ops apart), into NaN-poisoned
 * outputs, and through op_kv_store's rounding for the cache forms. Shapes: Qwen3's heads (D 128,
 * 2 warps a head), Gemma 4's sliding (256, 4 warps, f16 cache at paged rows) and global heads
 * (512, 8 warps, freq factors with gemma4's 1e30 entries: partial rope), a 64-dim head rotated
 * on 32 dims in normal mode (one warp a head, 8 heads a block, 3 heads: a block's rows past the
 * heads), with and without the weight, and a store that rotates nothing (n_rot 0: Gemma 4's V
 * norm folded into its kv_store), and cache stores into sliding-window rings (row = position mod C). What this catches: a wrong row/lane layout, a missing
 * barrier between the sum and the writes, a tail dim left unnormed; not the summation order alone
 * (a double sum of a head rounds the same in any order almost always).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <math.h>

typedef int (*rope_norm_fn)(float *, void *, int, const float *, const int32_t *, const int32_t *, long long, long long, long long, int, int,
                            float, float, const float *, float, const float *, long long);
static rope_norm_fn emu_rope_norm;
static uint64_t seed = 0x20BE27ull;

typedef struct rcase {
    int64_t D, H, T;
    int n_rot, mode;
    bool weight, ff, cache, f16, rows;
} rcase;

/* ring > 0: the cache is a sliding-window ring of that many rows (row = position or slot mod ring) */
static void check_case(const rcase *c, int64_t ring) {
    char label[160];
    snprintf(label, sizeof label, "D=%lld H=%lld T=%lld n_rot=%d %s%s%s%s%s ring %lld", (long long)c->D, (long long)c->H, (long long)c->T, c->n_rot,
             c->mode == 2 ? "neox" : "normal", c->weight ? " *w" : "", c->ff ? " ff" : "", c->cache ? (c->f16 ? " f16 cache" : " f32 cache") : "",
             c->rows ? " at rows" : "", (long long)ring);
    const int64_t n = c->D * c->H * c->T, C = ring ? ring : 1024, DH = c->D * c->H; /* C past the largest pos, or a ring it wraps */
    float *x = malloc((size_t)n * 4), *w = malloc((size_t)c->D * 4), *ff = malloc((size_t)c->n_rot / 2 * 4);
    float *y = malloc((size_t)n * 4), *want = malloc((size_t)n * 4);
    const size_t cb = (size_t)(DH * C) * (c->f16 ? 2 : 4);
    uint8_t *cache = malloc(cb), *cwant = malloc(cb);
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(&seed) * (i % 11 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < c->D; i++) w[i] = 1.0f + 0.3f * test_rand_normal(&seed);
    for (int i = 0; i < c->n_rot / 2; i++) ff[i] = i >= c->n_rot / 4 ? 1e30f : 1.0f + fabsf(test_rand_normal(&seed));
    int32_t pos[8], rows[8];
    for (int64_t t = 0; t < c->T; t++) pos[t] = (int32_t)(3 * t + 1) * 97, rows[t] = (int32_t)((5 * t + 2) % C);
    memset(y, 0xff, (size_t)n * 4), memset(cache, 0xff, cb), memset(cwant, 0xff, cb);
    const float base = 10000.0f, fscale = 0.5f, eps = 1e-6f;
    op_rope_args ra = {.D = c->D, .H = c->H, .n_rot = c->n_rot, .mode = c->mode, .freq_base = base, .freq_scale = fscale, .attn_factor = 1.0f,
                       .ff = c->ff ? ff : NULL, .norm = true, .norm_eps = eps, .norm_w = c->weight ? w : NULL};
    op_rope(want, x, pos, &ra, 0, c->T);
    const int rc = emu_rope_norm(y, c->cache ? cache : NULL, c->f16, x, pos, c->rows ? rows : NULL, c->D, c->H, c->T, c->n_rot, c->mode,
                                 powf(base, -2.0f / (float)c->n_rot), fscale, c->ff ? ff : NULL, eps, c->weight ? w : NULL, ring);
    CHECKF(rc == 0, "%s: emulation deadlocked", label);
    if (c->cache) {
        for (int64_t t = 0; t < c->T; t++) {
            const int32_t at = (c->rows ? rows : pos)[t] % (int32_t)C;
            op_kv_store(cwant, c->f16 ? SB_TYPE_F16 : SB_TYPE_F32, DH, want + t * DH, &at, 1);
        }
        CHECKF(!memcmp(cache, cwant, cb), "%s: the cache differs from op_rope's rows through op_kv_store", label);
    } else {
        CHECKF(!memcmp(y, want, (size_t)n * 4), "%s: differs from op_rope with its norm", label);
    }
    free(x), free(w), free(ff), free(y), free(want), free(cache), free(cwant);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_rope_emu.cc");
    if (h) {
        *(void **)&emu_rope_norm = dlsym(h, "sb_emu_rope_norm");
        CHECK(emu_rope_norm != NULL);
    }
    if (emu_rope_norm) {
        const rcase cases[] = {
            {128, 8, 2, 128, 2, true, false, false, false, false},  /* qwen3 q */
            {128, 4, 1, 128, 2, true, false, true, true, false},    /* qwen3 k into an f16 cache, decode */
            {256, 4, 3, 256, 2, true, false, true, true, true},     /* gemma4 sliding k, paged rows */
            {512, 2, 2, 512, 2, true, true, false, false, false},   /* gemma4 global q, partial rope */
            {512, 1, 1, 512, 2, false, true, true, false, false},   /* a weightless norm, f32 cache */
            {64, 3, 3, 32, 0, true, true, false, false, false},     /* normal mode, tail dims, rows past the heads */
            {64, 3, 2, 32, 0, false, false, true, true, true},
            {256, 2, 2, 0, 0, false, false, true, true, false},     /* gemma4's V norm: a normed kv_store rotates nothing */
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_case(&cases[k], 0);
        /* sliding-window rings (positions 97..679 in 37 / 50 rows): gemma4's sliding k and its V store, qwen3's k */
        const rcase sliding_k = {256, 4, 3, 256, 2, true, false, true, true, false};
        check_case(&sliding_k, 37), check_case(&cases[1], 50), check_case(&cases[7], 37);
        printf("%d normed rope cases compared byte for byte with op_rope's norm\n", (int)(sizeof cases / sizeof cases[0]) + 3);
    }
    emu_build_done(h);
    return test_summary();
}
