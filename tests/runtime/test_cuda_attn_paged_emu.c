/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_attn_paged_emu.c — the CUDA paged attention kernel (backend/cuda/device/
 * attn_paged.cuh) without a GPU: its device code runs under the host emulation
 * (tests/runtime/cuda_attn_paged_emu.cc, tests/codegen/emu: fibers for threads, real warp shuffles
 * and barriers, warps held back at random) against ops_ref.c's op_attention with the same block
 * table, on fresh random inputs into NaN-poisoned outputs: tokens of three sequences with shuffled
 * block tables in one step (decodes, prefill chunks, a block edge), F16 and F32 caches, head_dim
 * 64 / 80 / 128 / 256 / 512, GQA, a window, a softcap, block sizes 5 / 8 / 16. Unrelated rows fill
 * every other block, so a wrong row mapping shows. Then a contiguous cache read as the executor
 * reads one of heads past cu_attention's 256 (one block of all C rows, a table of zeros) against
 * op_attention without a table. Limit NMSE 1e-10 (f32 sums in another order: the kernel's softmax
 * is online).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int (*paged_fn)(float *, const float *, const void *, const void *, const int32_t *, const int32_t *, const long long *, const float *,
                        const int *);
static paged_fn emu_paged;
static uint64_t seed = 0xA77E2ull;

typedef struct pcase {
    int64_t D, Hq, Hkv;
    int ctype, window, bs;
    float softcap;
    int64_t start[3], len[3];
} pcase;

static float *rnd(int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = test_rand_normal(&seed);
    return x;
}

/* n f32 values as the cache type (a fresh buffer) */
static void *as_cache(int ctype, const float *x, int64_t n) {
    if (ctype == SB_TYPE_F32) {
        void *d = malloc((size_t)n * 4);
        memcpy(d, x, (size_t)n * 4);
        return d;
    }
    uint16_t *h = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) h[i] = qk_fp32_to_fp16(x[i]);
    return h;
}

/* NMSE of got against ref over n values; 1e30 when got has NaN (unwritten outputs: *nan of them) */
static double nmse(const float *got, const float *ref, int64_t n, int64_t *nan) {
    double num = 0, den = 0;
    *nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != got[i]) ++*nan;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return *nan ? 1e30 : num / den;
}

static void run_case(const pcase *c) {
    const int64_t D = c->D, Hq = c->Hq, Hkv = c->Hkv, Dkv = D * Hkv, bs = c->bs, n_blk = 128, C = n_blk * bs;
    const int64_t n_tbl = 160 / bs + 1; /* enough entries for position 159 */
    int64_t T = 0;
    for (int s = 0; s < 3; s++) T += c->len[s];
    int32_t blocks[128], pos[16];
    int32_t *tbl = malloc((size_t)(n_tbl * T) * 4);
    for (int i = 0; i < n_blk; i++) blocks[i] = i;
    for (int i = n_blk - 1; i > 0; i--) {
        const int j = (int)(test_rand_u64(&seed) % (uint64_t)(i + 1)), x = blocks[i];
        blocks[i] = blocks[j], blocks[j] = x;
    }
    for (int s = 0, t = 0; s < 3; s++)
        for (int64_t i = 0; i < c->len[s]; i++, t++) {
            pos[t] = (int32_t)(c->start[s] + i);
            for (int64_t e = 0; e < n_tbl; e++) tbl[t * n_tbl + e] = blocks[s * n_tbl + e];
        }
    float *q = rnd(D * Hq * T), *kf = rnd(Dkv * C), *vf = rnd(Dkv * C);
    void *kc = as_cache(c->ctype, kf, Dkv * C), *vc = as_cache(c->ctype, vf, Dkv * C);
    float *ref = malloc((size_t)(D * Hq * T) * 4), *got = malloc((size_t)(D * Hq * T) * 4), *scores = malloc(4096 * 4);
    for (int64_t i = 0; i < D * Hq * T; i++) got[i] = NAN;
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)D), .softcap = c->softcap,
                             .window = c->window, .table = tbl, .n_tbl = n_tbl, .bs = (int32_t)bs};
    op_attention(ref, q, kc, vc, pos, &oa, 0, T * Hq, scores);
    const long long dims[5] = {D, Hq, Hkv, T, n_tbl};
    const float f[2] = {oa.scale, c->softcap};
    const int iv[3] = {c->ctype, c->window, (int)bs};
    const int rc = emu_paged(got, q, kc, vc, pos, tbl, dims, f, iv);
    int64_t nan = 0;
    const double e = nmse(got, ref, D * Hq * T, &nan);
    printf("paged attention %s D=%lld Hq/Hkv=%lld/%lld T=%lld bs=%lld w=%d cap=%g: NMSE %.3e%s\n", c->ctype == SB_TYPE_F16 ? "f16" : "f32",
           (long long)D, (long long)Hq, (long long)Hkv, (long long)T, (long long)bs, c->window, c->softcap, e, nan ? " (unwritten outputs)" : "");
    CHECKF(rc == 0, "emulation rc %d (a deadlock)", rc);
    CHECKF(e <= 1e-10, "D=%lld bs=%lld: NMSE %.3e (%lld NaN)", (long long)D, (long long)bs, e, (long long)nan);
    free(q), free(kf), free(vf), free(kc), free(vc), free(ref), free(got), free(scores), free(tbl);
}

/* a contiguous cache of C rows as one block (bs C, one zero entry per token: exec_cuda_dispatch.c's
 * attention of head_dim > CU_ATT_MAX_D): T tokens at positions p0.. against op_attention without a
 * table (position j at row j); the rows past the last position hold unrelated keys */
static void run_contig(int64_t D, int64_t Hq, int64_t Hkv, int ctype, int window, float softcap, int64_t C, int64_t T, int32_t p0) {
    const int64_t Dkv = D * Hkv;
    int32_t pos[16], zeros[16] = {0};
    for (int64_t t = 0; t < T; t++) pos[t] = p0 + (int32_t)t;
    float *q = rnd(D * Hq * T), *kf = rnd(Dkv * C), *vf = rnd(Dkv * C);
    void *kc = as_cache(ctype, kf, Dkv * C), *vc = as_cache(ctype, vf, Dkv * C);
    float *ref = malloc((size_t)(D * Hq * T) * 4), *got = malloc((size_t)(D * Hq * T) * 4), *scores = malloc(4096 * 4);
    for (int64_t i = 0; i < D * Hq * T; i++) got[i] = NAN;
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = ctype, .scale = 1.0f / sqrtf((float)D), .softcap = softcap, .window = window};
    op_attention(ref, q, kc, vc, pos, &oa, 0, T * Hq, scores);
    const long long dims[5] = {D, Hq, Hkv, T, 1};
    const float f[2] = {oa.scale, softcap};
    const int iv[3] = {ctype, window, (int)C};
    const int rc = emu_paged(got, q, kc, vc, pos, zeros, dims, f, iv);
    int64_t nan = 0;
    const double e = nmse(got, ref, D * Hq * T, &nan);
    printf("contiguous as one block %s D=%lld Hq/Hkv=%lld/%lld T=%lld C=%lld p0=%d w=%d cap=%g: NMSE %.3e%s\n", ctype == SB_TYPE_F16 ? "f16" : "f32",
           (long long)D, (long long)Hq, (long long)Hkv, (long long)T, (long long)C, (int)p0, window, softcap, e, nan ? " (unwritten outputs)" : "");
    CHECKF(rc == 0, "emulation rc %d (a deadlock)", rc);
    CHECKF(e <= 1e-10, "contiguous D=%lld C=%lld: NMSE %.3e (%lld NaN)", (long long)D, (long long)C, e, (long long)nan);
    free(q), free(kf), free(vf), free(kc), free(vc), free(ref), free(got), free(scores);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_attn_paged_emu.cc");
    if (!h) return test_summary();
    *(void **)&emu_paged = dlsym(h, "sb_emu_attn_paged");
    CHECKF(emu_paged != NULL, "dlsym: %s", dlerror());
    if (emu_paged) {
        const pcase cs[] = {
            {64, 4, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}},     /* decode + a prefill chunk */
            {128, 8, 2, SB_TYPE_F32, 0, 16, 0, {100, 15, 3}, {1, 1, 1}},   /* three decodes, one at a block edge */
            {256, 2, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 0}, {2, 3, 9}}, /* window, softcap, bs 8 */
            {80, 6, 3, SB_TYPE_F32, 0, 5, 0, {41, 12, 1}, {1, 1, 4}},      /* head_dim 80, blocks of 5 */
            {512, 2, 1, SB_TYPE_F16, 0, 16, 0, {3, 130, 0}, {1, 1, 2}},    /* gemma4's global head_dim */
        };
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) run_case(&cs[k]);
        run_contig(512, 4, 1, SB_TYPE_F16, 0, 0, 300, 1, 250);   /* a decode step deep in the cache */
        run_contig(512, 2, 2, SB_TYPE_F32, 24, 30.0f, 64, 3, 0); /* prefill from 0, window, softcap */
        run_contig(320, 2, 1, SB_TYPE_F16, 0, 0, 40, 2, 38);    /* 320 dims, the last rows */
    }
    emu_build_done(h);
    return test_summary();
}
