/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_attn_paged_dec_emu.c — the batched engine's B = 1 decode attention on the
 * session's kernels through a block table (cu_attn_decode with cu_attn_args.tbl: k_attn_decode.cu's
 * SMALL_ONLY kernel, k_attn_deep.cu's split and merge) without a GPU: the whole .cu files run under
 * the host emulation (tests/runtime/cuda_attn_paged_dec_emu.cc, tests/codegen/emu) against ops_ref.c's
 * op_attention with the same table (paged form), on fresh random inputs into NaN-poisoned outputs and
 * scratch. The pool holds twice the sequence's blocks, the table names them shuffled (out of order),
 * block sizes 5 / 7 / 16; table entries past the token's last block, and those of blocks wholly
 * before a window, name a block far outside the pool, so reading one faults (plan_check_paged vouches
 * for entries up to the position only). Depths 1, 31, 64, 65, 128 (window), 500, 4001, 4101 (window
 * 1000): the small layout's kernel (depth class 128; its copies before the wait, attn_pre 1 and 0,
 * the keys from its speculative rows and from global rows) and k_attn_deep (classes 512, 4096,
 * 8192); G 1 / 4 / 7 / 8, head_dim 64 / 128 / 256, F16 and F32, softcaps, Q's RoPE on load (normal,
 * neox, freq factors) and without, the q8_1 output (pass fuse_attn_quant; into 0xA5-poisoned bytes,
 * which must be the plain quantizer's over the f32 output) and without. Every launch is repeated over
 * a contiguous cache holding the same key rows at their positions (the session's kernels): the f32
 * and q8_1 outputs must be the same bits (only the row addresses differ). Limit NMSE 1e-10. A shape the
 * route does not take (G 16) must be refused on the host (path 0: the paged kernel keeps it).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"
#include "attn_emu_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int (*dec_fn)(float *, const float *, const void *, const void *, const int32_t *, const int32_t *, const long long *, const float *,
                      const int *, const float *, void *, int, int *);
typedef int (*quant_fn)(uint8_t *, const float *, long long, long long);
static dec_fn emu_dec;
static quant_fn emu_quant;
static uint64_t seed = 0xB10C7ABull;

#define SMS 8           /* the emulated device's multiprocessors (the launchers size grids by them) */
#define FAR (1 << 28)   /* a table entry no read may follow: a block far outside the pool */

/* one step: the token at position p; rope n_rot (0 none), mode (0 normal, 2 neox), ff (freq
 * factors); xq: the q8_1 output too; path: 1 k_attn_deep, 2 the SMALL_ONLY kernel, 0 refused */
typedef struct pdcase {
    const char *what;
    int64_t D, Hq, Hkv;
    int ctype, window, bs;
    float softcap;
    int32_t p;
    int64_t depth_max;
    int pre, n_rot, mode, ff, xq, path;
} pdcase;

/* the inputs of one case: the pool (paged) and the same keys at their positions (contiguous) */
typedef struct pdata {
    int64_t n, ctx;
    float *q, *qr, *ref, *ff;
    void *kp, *vp, *kl, *vl;
    int32_t *tbl;
} pdata;

/* dst (NaN-poisoned) and xq (0xA5, when xq) of one emulated launch; tbl NULL: the contiguous cache */
static int launch(const pdcase *c, const pdata *d, bool paged, float *dst, uint8_t *xq, int *path) {
    for (int64_t i = 0; i < d->n; i++) dst[i] = NAN;
    if (xq) memset(xq, 0xA5, (size_t)(d->n / 32 * 36));
    const long long dims[6] = {c->D, c->Hq, c->Hkv, d->ctx, c->depth_max, c->bs};
    const float base = c->mode == 2 ? 1e6f : 1e4f;
    const float f[5] = {1.0f / sqrtf((float)c->D), c->softcap, c->n_rot ? powf(base, -2.0f / (float)c->n_rot) : 0.0f, c->mode == 2 ? 1.0f : 0.5f,
                        c->ff ? 1.25f : 1.0f};
    const int iv[7] = {c->ctype, c->window, 8, 128, c->pre, c->n_rot, c->mode};
    return emu_dec(dst, d->q, paged ? d->kp : d->kl, paged ? d->vp : d->vl, &c->p, paged ? d->tbl : NULL, dims, f, iv, d->ff, xq, SMS, path);
}

/* the pool of 2 n_tbl blocks (random rows) and its shuffled table; the contiguous cache of the table's
 * reach (ctx rows) with row j = the pool's row of position j up to p, random rows past it */
static void setup(const pdcase *c, pdata *d) {
    const int64_t bs = c->bs, n_tbl = c->p / bs + 3, nblk = 2 * n_tbl, Dkv = c->D * c->Hkv, C = nblk * bs;
    const int64_t rb = Dkv * (c->ctype == SB_TYPE_F16 ? 2 : 4), lo = c->window > 0 && c->p - c->window + 1 > 0 ? c->p - c->window + 1 : 0;
    d->n = c->D * c->Hq, d->ctx = n_tbl * bs;
    int32_t *perm = malloc((size_t)nblk * 4);
    for (int i = 0; i < nblk; i++) perm[i] = i;
    for (int i = (int)nblk - 1; i > 0; i--) {
        const int j = (int)(test_rand_u64(&seed) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    d->tbl = malloc((size_t)n_tbl * 4);
    for (int64_t e = 0; e < n_tbl; e++) d->tbl[e] = e > c->p / bs || (e + 1) * bs <= lo ? FAR : perm[e];
    float *kf = attn_rnd(&seed, Dkv * C), *vf = attn_rnd(&seed, Dkv * C), *lk = attn_rnd(&seed, Dkv * d->ctx), *lv = attn_rnd(&seed, Dkv * d->ctx);
    d->kp = attn_as_cache(c->ctype, kf, Dkv * C), d->vp = attn_as_cache(c->ctype, vf, Dkv * C);
    d->kl = attn_as_cache(c->ctype, lk, Dkv * d->ctx), d->vl = attn_as_cache(c->ctype, lv, Dkv * d->ctx);
    for (int64_t j = 0; j <= c->p; j++) {
        const int64_t row = (int64_t)perm[j / bs] * bs + j % bs;
        memcpy((uint8_t *)d->kl + j * rb, (uint8_t *)d->kp + row * rb, (size_t)rb);
        memcpy((uint8_t *)d->vl + j * rb, (uint8_t *)d->vp + row * rb, (size_t)rb);
    }
    d->q = attn_rnd(&seed, d->n), d->qr = NULL, d->ff = NULL;
    op_rope_args ra = {.D = c->D, .H = c->Hq, .n_rot = c->n_rot, .mode = c->mode, .freq_base = c->mode == 2 ? 1e6f : 1e4f,
                       .freq_scale = c->mode == 2 ? 1.0f : 0.5f, .attn_factor = c->ff ? 1.25f : 1.0f};
    if (c->n_rot && c->ff) {
        d->ff = malloc((size_t)(c->n_rot / 2) * 4);
        for (int i = 0; i < c->n_rot / 2; i++) d->ff[i] = 1.0f + 3.0f * (float)(test_rand_u64(&seed) % 1000) / 1000.0f;
        ra.ff = d->ff;
    }
    if (c->n_rot) {
        d->qr = malloc((size_t)d->n * 4);
        op_rope(d->qr, d->q, &c->p, &ra, 0, 1);
    }
    float *scores = malloc((size_t)(c->p + 1) * 4);
    const op_attn_args oa = {.D = c->D, .Hq = c->Hq, .Hkv = c->Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)c->D), .softcap = c->softcap,
                             .window = c->window, .table = d->tbl, .n_tbl = n_tbl, .bs = (int32_t)bs};
    d->ref = malloc((size_t)d->n * 4);
    op_attention(d->ref, d->qr ? d->qr : d->q, d->kp, d->vp, &c->p, &oa, 0, c->Hq, scores);
    free(perm), free(kf), free(vf), free(lk), free(lv), free(scores);
}

/* c through the table against the reference (and its q8_1 output against the quantizer), then the
 * same launch over the contiguous cache: the same bits */
static void run_case(const pdcase *c) {
    pdata d;
    setup(c, &d);
    float *got = malloc((size_t)d.n * 4), *lin = malloc((size_t)d.n * 4);
    uint8_t *xq = c->xq ? malloc((size_t)(d.n / 32 * 36)) : NULL, *xl = c->xq ? malloc((size_t)(d.n / 32 * 36)) : NULL;
    int path = -1, lpath = -1;
    const int rc = launch(c, &d, true, got, xq, &path);
    CHECKF(rc == 0 && path == c->path, "%s: rc %d, path %d, not %d (1 deep, 2 small, 0 refused)", c->what, rc, path, c->path);
    if (rc == 0 && path == c->path && path) {
        int64_t nan;
        const double e = attn_nmse(got, d.ref, d.n, &nan);
        printf("%s: D=%lld %lld/%lld %s bs=%d p=%d w=%d cap=%g class %lld rope %d q8_1 %d: NMSE %.3e%s\n", c->what, (long long)c->D, (long long)c->Hq,
               (long long)c->Hkv, c->ctype == SB_TYPE_F16 ? "f16" : "f32", c->bs, (int)c->p, c->window, c->softcap, (long long)c->depth_max, c->n_rot,
               c->xq, e, nan ? " (unwritten outputs)" : "");
        CHECKF(e <= 1e-10, "%s: NMSE %.3e (%lld NaN)", c->what, e, (long long)nan);
        if (xq) {
            uint8_t *want = malloc((size_t)(d.n / 32 * 36));
            memset(want, 0xA5, (size_t)(d.n / 32 * 36));
            CHECK(emu_quant(want, got, d.n, 1) == 0);
            CHECKF(!memcmp(want, xq, (size_t)(d.n / 32 * 36)), "%s: the q8_1 output differs from quantizing the f32 output", c->what);
            free(want);
        }
        const int lrc = launch(c, &d, false, lin, xl, &lpath);
        CHECKF(lrc == 0 && lpath == path, "%s: the contiguous launch: rc %d, path %d", c->what, lrc, lpath);
        CHECKF(lrc || !memcmp(got, lin, (size_t)d.n * 4), "%s: the paged outputs differ from the contiguous cache's", c->what);
        CHECKF(lrc || !xq || !memcmp(xq, xl, (size_t)(d.n / 32 * 36)), "%s: the paged q8_1 output differs from the contiguous cache's", c->what);
    } else if (rc == 0 && path == 0) {
        printf("%s: refused on the host (the paged kernel keeps it)\n", c->what);
    }
    free(got), free(lin), free(xq), free(xl);
    free(d.q), free(d.qr), free(d.ref), free(d.ff), free(d.kp), free(d.vp), free(d.kl), free(d.vl), free(d.tbl);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_attn_paged_dec_emu.cc");
    if (!h) return test_summary();
    *(void **)&emu_dec = dlsym(h, "sb_emu_attn_dec_paged");
    *(void **)&emu_quant = dlsym(h, "sb_emu_quant_q8_1");
    CHECKF(emu_dec != NULL && emu_quant != NULL, "dlsym: %s", dlerror());
    const int F16 = SB_TYPE_F16, F32 = SB_TYPE_F32;
    const pdcase cs[] = {
        /* the small layout's kernel (depth class 128): the speculative rows as keys (p < 64), from
         * global rows past them or past a window's start; copies before the wait and after */
        {"depth 1", 64, 14, 2, F16, 0, 16, 0, 0, 128, 1, 64, 2, 0, 1, 2},
        {"depth 31", 128, 8, 2, F16, 0, 5, 30.0f, 30, 128, 1, 128, 0, 1, 1, 2},
        {"depth 64, after the wait", 64, 8, 8, F32, 0, 7, 0, 63, 128, 0, 0, 0, 0, 0, 2},
        {"depth 65", 256, 8, 1, F16, 0, 16, 0, 64, 128, 1, 256, 2, 0, 1, 2},
        {"depth 128, window 48", 64, 14, 2, F16, 48, 5, 0, 127, 128, 1, 64, 2, 0, 1, 2},
        {"depth 40, window 48", 128, 16, 2, F32, 48, 7, 20.0f, 39, 128, 1, 32, 2, 0, 1, 2},
        /* k_attn_deep (classes 512, 4096, 8192): rows < p copied before the wait, row p after */
        {"depth 500", 128, 16, 2, F16, 0, 16, 0, 499, 512, 1, 128, 2, 0, 1, 1},
        {"depth 500 f32", 64, 14, 2, F32, 0, 5, 20.0f, 499, 512, 1, 0, 0, 0, 0, 1},
        {"depth 4001", 64, 14, 2, F16, 0, 16, 0, 4000, 4096, 1, 64, 2, 0, 1, 1},
        {"depth 4101, window 1000", 256, 4, 1, F16, 1000, 7, 0, 4100, 8192, 1, 128, 0, 1, 1, 1},
        /* G 16: more query heads a kv head than the decode kernels take — refused on the host */
        {"G 16", 64, 16, 1, F16, 0, 16, 0, 100, 128, 1, 0, 0, 0, 0, 0},
    };
    for (size_t k = 0; emu_dec && emu_quant && k < sizeof cs / sizeof cs[0]; k++) run_case(&cs[k]);
    emu_build_done(h);
    return test_summary();
}
