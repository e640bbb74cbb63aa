/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_attn_decode_emu.c — cu_attention over a contiguous cache (k_attention.cu,
 * k_attn_decode.cu, k_attn_deep.cu, launchers included) without a GPU: the whole .cu files run under
 * the host emulation (tests/runtime/cuda_attn_decode_emu.cc, tests/codegen/emu: fibers for threads,
 * real shuffles and barriers, warps held back at random, NaN-filled dynamic shared memory) against
 * ops_ref.c's op_attention over a linear cache, on fresh random inputs into NaN-poisoned outputs
 * and split scratch. Every case runs over a sliding-window ring cache (graph/ir.h: position p at
 * row p mod C, tests/runtime/ring_kv.h: stale rows where older positions were) of C = window + T - 1
 * rows or more, at positions past 3x the window so that the window wraps inside a key tile, a warp's
 * 32 keys or a split: variant 4's decode in each of its layouts (the small layout from global rows,
 * from its speculative rows before the ring wraps, and the SMALL_ONLY kernel with its copies before
 * the wait; the warp path in one block and in 256-key splits merged by the last; the tiles in lo
 * and hi mode, F16 and F32, head_dim 64 / 128 / 256), k_attn_deep's depth classes, and k_attn
 * (variants 1 and 2: decode with splits, and prefills of T tokens). The same launch over the linear
 * cache (ring 0) must give the ring's outputs bit for bit (only the rows read move), and
 * op_attention with the ring (op_attn_row) the linear reference's. Limit NMSE 1e-10 (f32 sums in
 * another order). Small shapes: a few seconds, under ASan too.
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"
#include "attn_emu_data.h"
#include "ring_kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int (*attn_fn)(float *, const float *, const void *, const void *, const int32_t *, const long long *, const float *, const int *, int,
                       int *);
static attn_fn emu_attn;
static uint64_t seed = 0xDEC0DEull;

#define SMS 8 /* the emulated device's multiprocessors (the launchers size grids by them) */

/* one launch: T tokens at positions p0.. over a ring of C rows (0: the linear cache only); the
 * launcher's knobs as cu_attn_args / cu_config have them; path the kernel it must pick (1 deep, 2
 * k_attn_dec, 3 k_attn) */
typedef struct dcase {
    const char *what;
    int64_t D, Hq, Hkv, T, C;
    int ctype, window;
    int32_t p0;
    float softcap;
    int nsplit, variant, kmin, hpb, warp, small, pre;
    int64_t depth_max;
    int path;
} dcase;

/* the emulated cu_attention of c over caches k / v of ctx rows (ring: a ring of them) into a fresh
 * NaN-poisoned output; NULL after a failure (checked) */
static float *launch(const dcase *c, const float *q, const void *k, const void *v, const int32_t *pos, int64_t ctx, int64_t ring) {
    const int64_t n = c->D * c->Hq * c->T;
    float *got = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) got[i] = NAN;
    const long long dims[7] = {c->D, c->Hq, c->Hkv, c->T, ctx, ring, c->depth_max};
    const float f[2] = {1.0f / sqrtf((float)c->D), c->softcap};
    const int iv[9] = {c->ctype, c->window, c->nsplit, c->variant, c->kmin, c->hpb, c->warp, c->small, c->pre};
    int path = 0;
    const int rc = emu_attn(got, q, k, v, pos, dims, f, iv, SMS, &path);
    CHECKF(rc == 0, "%s: emulation rc %d (-1 a deadlock, -3 counters left set)", c->what, rc);
    CHECKF(path == c->path, "%s: took path %d, not %d (1 deep, 2 k_attn_dec, 3 k_attn)", c->what, path, c->path);
    if (rc) free(got);
    return rc ? NULL : got;
}

static void run_case(const dcase *c) {
    const int64_t D = c->D, Hq = c->Hq, T = c->T, Dkv = D * c->Hkv, last = c->p0 + T - 1, L = last + 4, C = c->C, n = D * Hq * T;
    const int64_t rb = Dkv * (c->ctype == SB_TYPE_F16 ? 2 : 4);
    CHECKF(T <= 16 && (!C || C >= c->window + T - 1), "%s: T %lld, ring %lld (window + T - 1 rows at least)", c->what, (long long)T, (long long)C);
    int32_t pos[16];
    for (int64_t t = 0; t < T; t++) pos[t] = c->p0 + (int32_t)t;
    float *kf = attn_rnd(&seed, Dkv * L), *vf = attn_rnd(&seed, Dkv * L), *q = attn_rnd(&seed, n), *ref = malloc((size_t)n * 4), *scores = malloc((size_t)L * 4);
    void *kl = attn_as_cache(c->ctype, kf, Dkv * L), *vl = attn_as_cache(c->ctype, vf, Dkv * L); /* linear: position p at row p */
    op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = c->Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)D), .softcap = c->softcap,
                       .window = c->window};
    op_attention(ref, q, kl, vl, pos, &oa, 0, T * Hq, scores);
    void *kr = NULL, *vr = NULL;
    if (C) {
        float *sk = attn_rnd(&seed, Dkv * C), *sv = attn_rnd(&seed, Dkv * C);
        void *skc = attn_as_cache(c->ctype, sk, Dkv * C), *svc = attn_as_cache(c->ctype, sv, Dkv * C);
        kr = ring_from_linear(kl, skc, rb, C, last), vr = ring_from_linear(vl, svc, rb, C, last);
        free(sk), free(sv), free(skc), free(svc);
        float *rref = malloc((size_t)n * 4); /* op_attention reading the ring (op_attn_row): the linear reference's bits */
        oa.ring = C;
        op_attention(rref, q, kr, vr, pos, &oa, 0, T * Hq, scores);
        CHECKF(!memcmp(rref, ref, (size_t)n * 4), "%s: op_attention over the ring differs from the linear cache", c->what);
        free(rref);
    }
    float *got = launch(c, q, C ? kr : kl, C ? vr : vl, pos, C ? C : L, C);
    if (got) {
        int64_t nan;
        const double e = attn_nmse(got, ref, n, &nan);
        printf("%s: D=%lld %lld/%lld %s T=%lld p0=%d w=%d ring=%lld: NMSE %.3e%s\n", c->what, (long long)D, (long long)Hq, (long long)c->Hkv,
               c->ctype == SB_TYPE_F16 ? "f16" : "f32", (long long)T, (int)c->p0, c->window, (long long)C, e, nan ? " (unwritten outputs)" : "");
        CHECKF(e <= 1e-10, "%s: NMSE %.3e (%lld NaN)", c->what, e, (long long)nan);
        float *lin = C ? launch(c, q, kl, vl, pos, L, 0) : NULL; /* the same launch over the linear cache: the same bits */
        if (lin) CHECKF(!memcmp(lin, got, (size_t)n * 4), "%s: the ring's outputs differ from the linear cache's", c->what);
        free(lin);
    }
    free(got), free(kf), free(vf), free(q), free(ref), free(scores), free(kl), free(vl), free(kr), free(vr);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_attn_decode_emu.cc");
    if (!h) return test_summary();
    *(void **)&emu_attn = dlsym(h, "sb_emu_attention");
    CHECKF(emu_attn != NULL, "dlsym: %s", dlerror());
    if (!emu_attn) return test_summary();
    const int F16 = SB_TYPE_F16, F32 = SB_TYPE_F32;
    const dcase cs[] = {
        /* variant 4's small layout (n <= small): keys from global rows past the wrap; the SMALL_ONLY
         * kernel (depth_max <= small) with its copies before the wait; before the ring wraps (p < spec):
         * the speculative rows as the keys, row p re-read after the wait */
        {"small", 64, 4, 2, 1, 55, F16, 48, 185, 0.0f, 4, 4, 0, 0, 0, 128, 0, 0, 2},
        {"small only", 64, 4, 2, 1, 55, F16, 48, 3 * 55 + 31, 30.0f, 4, 4, 0, 0, 0, 128, 1, 128, 2},
        {"small, unwrapped", 64, 4, 2, 1, 55, F16, 48, 20, 0.0f, 4, 4, 0, 0, 0, 128, 1, 128, 2},
        {"small f32 d256", 256, 2, 1, 1, 70, F32, 64, 700, 0.0f, 8, 4, 0, 0, 0, 128, 0, 0, 2},
        /* the warp path: one block a head (n <= 256), and 256-key splits merged by the last */
        {"warp", 128, 8, 2, 1, 203, F32, 200, 700, 0.0f, 8, 4, 0, 0, 1 << 30, 0, 0, 0, 2},
        {"warp splits", 64, 4, 2, 1, 307, F16, 300, 1000, 25.0f, 8, 4, 0, 0, 1 << 30, 0, 0, 0, 2},
        /* the tiles (warp and small off): hi mode (G heads a block), lo mode (hpb 1), head_dim 256 */
        {"tiles hi", 256, 4, 1, 1, 167, F16, 160, 3 * 167 + 50, 0.0f, 4, 4, 16, 0, 0, 0, 0, 0, 2},
        {"tiles lo", 128, 4, 2, 1, 137, F32, 130, 3 * 137 + 101, 20.0f, 4, 4, 16, 1, 0, 0, 0, 0, 2},
        {"tiles, one split", 64, 8, 2, 1, 100, F16, 90, 450, 0.0f, 1, 4, 0, 0, 0, 0, 0, 0, 2},
        /* k_attn_deep: a depth class past the small layout, its rows < p loaded before the wait */
        {"deep", 128, 4, 2, 1, 310, F16, 300, 2000, 0.0f, 8, 4, 0, 0, 1 << 30, 128, 1, 512, 1},
        {"deep f32 d256", 256, 4, 1, 1, 263, F32, 256, 1234, 30.0f, 8, 4, 0, 0, 1 << 30, 128, 1, 256, 1},
        /* k_attn: variant 2 decode with splits over counters, prefills of T tokens (the ring of exactly
         * window + T - 1 rows; variant 4's prefill is variant 2), variant 1 */
        {"k_attn v2 decode", 64, 4, 2, 1, 80, F32, 64, 500, 0.0f, 3, 2, 0, 0, 0, 0, 0, 0, 3},
        {"k_attn v2 prefill", 128, 4, 2, 5, 100, F16, 96, 400, 0.0f, 1, 2, 0, 0, 0, 0, 0, 0, 3},
        {"k_attn v4 prefill", 256, 2, 1, 7, 70, F32, 64, 3 * 70 + 9, 30.0f, 1, 4, 0, 0, 0, 0, 0, 0, 3},
        {"k_attn v2 prefill splits", 64, 4, 1, 3, 40, F16, 38, 1001, 0.0f, 2, 2, 0, 0, 0, 0, 0, 0, 3},
        {"k_attn v1", 64, 4, 2, 3, 50, F32, 40, 333, 0.0f, 1, 1, 0, 0, 0, 0, 0, 0, 3},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) run_case(&cs[k]);
    emu_build_done(h);
    return test_summary();
}
