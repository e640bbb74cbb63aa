/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_fattn_mma_emu.c — the tensor-core flash-attention prefill (backend/cuda/
 * device/fattn_mma.cuh: k_fattn_mma, k_fattn_ws) without a GPU: its device code runs under the host
 * emulation (tests/runtime/cuda_fattn_mma_emu.cc, tests/codegen/emu: fibers for threads, the
 * m16n8k16 MMA's and ldmatrix's fragment exchange, warps held back at random, NaN-filled shared
 * memory) against ops_ref.c's op_attention over the same F16 cache, on fresh random inputs into
 * NaN-poisoned outputs, split scratch and q8_1 blocks: head_dim 256 and 512 (32-key tiles; Q's
 * fragments by ldmatrix per k-step; at 512 two warps a row group, each with half of O) and 64 / 128
 * (64-key tiles, Q in registers; k_fattn_ws at T <= 16), GQA groups 1 / 2 / 4 / 8, query tiles cut
 * short, cached prefixes 0 / 300 / 700 / 4096, windows (512 at depth 4096), softcaps, key splits
 * S 2..16 over few queries on a deep prefix (splits with no keys, the last block's merge, its
 * counters back at zero), the q8_1 output (every block written, each value within half a step).
 * Sliding-window ring caches (graph/ir.h: position p at row p mod C; tests/runtime/ring_kv.h: stale
 * rows where older positions were) of C = window + T - 1 rows and more, past 3x the window, the wrap
 * inside a key tile: against the linear reference, and bit for bit the same launch over the linear
 * cache.
 * Limit NMSE 2e-6 (test_cuda_ops.c flash_limit: f16 Q and P, f32 accumulation; typical ~1e-7).
 * Runs from the repository root (ctest does). SKIPs (exit 77) without a host C++ compiler.
 */
#include "ops/ops_ref.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"
#include "codegen/emu/emu_build.h"
#include "attn_emu_data.h"
#include "ring_kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fattn_fn)(float *, const float *, const uint16_t *, const uint16_t *, const int32_t *, const float *, const int *, blk_q8_1 *,
                        float *, unsigned *);
static fattn_fn emu_fattn;
static int (*emu_bq)(int, int);
static int (*emu_ps)(int);
static uint64_t seed = 0xFA77ull;

typedef struct fcase {
    int D, Hq, Hkv, T, p0, window, S, ws, xq;
    float softcap;
    int ring; /* > 0: the caches are a ring of this many rows (>= window + T - 1) */
} fcase;

static void run_case(const fcase *c) {
    const int64_t D = c->D, Hq = c->Hq, Hkv = c->Hkv, T = c->T, Dkv = D * Hkv, C = c->p0 + T + 5, n = D * Hq * T;
    float *q = attn_rnd(&seed, n), *kf = attn_rnd(&seed, Dkv * C), *vf = attn_rnd(&seed, Dkv * C), *ref = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
    float *scores = malloc((size_t)C * 4);
    uint16_t *kc = malloc((size_t)(Dkv * C) * 2), *vc = malloc((size_t)(Dkv * C) * 2);
    for (int64_t i = 0; i < Dkv * C; i++) kc[i] = qk_fp32_to_fp16(kf[i]), vc[i] = qk_fp32_to_fp16(vf[i]);
    int32_t *pos = malloc((size_t)T * 4);
    for (int64_t t = 0; t < T; t++) pos[t] = c->p0 + (int32_t)t;
    const float scale = 1.0f / sqrtf((float)D);
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = SB_TYPE_F16, .scale = scale, .softcap = c->softcap, .window = c->window};
    op_attention(ref, q, kc, vc, pos, &oa, 0, T * Hq, scores);
    /* the launch, into NaN-poisoned outputs, scratch and q8_1 blocks */
    const int S = c->S > 1 ? c->S : 1, bq = emu_bq(c->D, c->ws);
    const int64_t tiles = (T + bq - 1) / bq, np = S > 1 ? tiles * Hq * S * bq * emu_ps(c->D) : 0, nb = n / 32;
    float *part = np ? malloc((size_t)np * 4) : NULL;
    unsigned *cnt = calloc((size_t)(tiles * Hq), sizeof *cnt);
    blk_q8_1 *xq = c->xq ? malloc((size_t)nb * sizeof *xq) : NULL;
    for (int64_t i = 0; i < n; i++) got[i] = NAN;
    for (int64_t i = 0; i < np; i++) part[i] = NAN;
    if (xq) memset(xq, 0xFF, (size_t)nb * sizeof *xq);
    const float f[2] = {scale, c->softcap};
    const int iv[8] = {c->D, c->T, c->Hq, c->Hkv, c->window, S, c->ws, c->ring};
    uint16_t *kr = NULL, *vr = NULL; /* the ring: stale rows (f16 of fresh values) where older positions were */
    if (c->ring) {
        uint16_t *stale = malloc((size_t)(Dkv * c->ring) * 2);
        for (int64_t i = 0; i < Dkv * c->ring; i++) stale[i] = qk_fp32_to_fp16(test_rand_normal(&seed));
        kr = ring_from_linear(kc, stale, Dkv * 2, c->ring, c->p0 + T - 1), vr = ring_from_linear(vc, stale, Dkv * 2, c->ring, c->p0 + T - 1);
        free(stale);
    }
    const int rc = emu_fattn(got, q, c->ring ? kr : kc, c->ring ? vr : vc, pos, f, iv, xq, part, cnt);
    char label[160];
    snprintf(label, sizeof label, "%s D=%d %d/%d T=%d p0=%d w=%d cap=%g S=%d%s ring=%d", c->ws ? "k_fattn_ws" : "k_fattn_mma", c->D, c->Hq, c->Hkv,
             c->T, c->p0, c->window, c->softcap, S, c->xq ? " +q8_1" : "", c->ring);
    CHECKF(rc == 0, "%s: emulation rc %d", label, rc);
    if (rc == 0) {
        int64_t nan;
        const double e = attn_nmse(got, ref, n, &nan);
        printf("%s: NMSE %.3e%s\n", label, e, nan ? " (unwritten outputs)" : "");
        CHECKF(e <= 2e-6, "%s: NMSE %.3e (%lld NaN)", label, e, (long long)nan);
        int64_t left = 0, bad = 0;
        for (int64_t i = 0; i < tiles * Hq; i++) left += cnt[i] != 0;
        CHECKF(left == 0, "%s: %lld split counters not reset", label, (long long)left);
        for (int64_t b = 0; xq && b < nb; b++) { /* every value within half a step (plus f16 rounding of d) of dst */
            const float d = qk_fp16_to_fp32(xq[b].d);
            for (int e2 = 0; e2 < 32; e2++)
                bad += !(fabsf((float)xq[b].qs[e2] * d - got[b * 32 + e2]) <= 0.5f * d + 1e-3f * fabsf(got[b * 32 + e2]) + 1e-6f);
        }
        CHECKF(bad == 0, "%s: %lld q8_1 values off", label, (long long)bad);
    }
    if (rc == 0 && c->ring) { /* the same launch over the linear cache: the same bits (only the rows read move) */
        float *lin = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) lin[i] = NAN;
        for (int64_t i = 0; i < np; i++) part[i] = NAN;
        int iv0[8];
        memcpy(iv0, iv, sizeof iv0);
        iv0[7] = 0;
        const int rc0 = emu_fattn(lin, q, kc, vc, pos, f, iv0, xq, part, cnt);
        CHECKF(rc0 == 0 && !memcmp(lin, got, (size_t)n * 4), "%s: the ring's outputs differ from the linear cache's (rc %d)", label, rc0);
        free(lin);
    }
    free(q), free(kf), free(vf), free(ref), free(got), free(scores), free(kc), free(vc), free(pos), free(part), free(cnt), free(xq), free(kr), free(vr);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_fattn_mma_emu.cc");
    if (!h) return test_summary();
    *(void **)&emu_fattn = dlsym(h, "sb_emu_fattn_mma");
    *(void **)&emu_bq = dlsym(h, "sb_emu_fattn_bq");
    *(void **)&emu_ps = dlsym(h, "sb_emu_fattn_ps");
    CHECKF(emu_fattn && emu_bq && emu_ps, "dlsym: %s", dlerror());
    if (!emu_fattn || !emu_bq || !emu_ps) return test_summary();
    const fcase cs[] = {
        /* head_dim 256 (gemma3, gemma4's sliding layers): GQA 4 / 8 / 2, tiles cut short, depth 0 / 700 /
         * 4096 with window 512, softcap, key splits over few queries, q8_1 */
        {.D = 256, .Hq = 4, .Hkv = 1, .T = 64},
        {.D = 256, .Hq = 8, .Hkv = 1, .T = 70, .p0 = 700, .window = 512, .softcap = 30.0f, .xq = 1},
        {.D = 256, .Hq = 4, .Hkv = 1, .T = 70, .p0 = 4096, .window = 512},
        {.D = 256, .Hq = 4, .Hkv = 2, .T = 9, .p0 = 700, .S = 5, .xq = 1},
        {.D = 256, .Hq = 8, .Hkv = 1, .T = 3, .p0 = 4096, .window = 512, .S = 16, .softcap = 50.0f},
        {.D = 256, .Hq = 4, .Hkv = 1, .T = 2, .p0 = 20, .S = 8},
        /* head_dim 512 (gemma4's global layers): 32-query blocks, two warps a row group */
        {.D = 512, .Hq = 4, .Hkv = 2, .T = 40},
        {.D = 512, .Hq = 8, .Hkv = 1, .T = 33, .p0 = 300, .window = 100, .softcap = 20.0f, .xq = 1},
        {.D = 512, .Hq = 4, .Hkv = 1, .T = 5, .p0 = 4096, .S = 6},
        {.D = 512, .Hq = 2, .Hkv = 1, .T = 70, .p0 = 700, .S = 3, .xq = 1},
        /* head_dim 64 / 128 (the unchanged geometry through the shared tile code), and k_fattn_ws */
        {.D = 64, .Hq = 4, .Hkv = 2, .T = 130, .p0 = 5, .window = 48},
        {.D = 128, .Hq = 4, .Hkv = 2, .T = 40, .p0 = 200, .softcap = 30.0f, .S = 3, .xq = 1},
        {.D = 64, .Hq = 4, .Hkv = 1, .T = 16, .p0 = 512, .S = 2, .ws = 1},
        {.D = 128, .Hq = 4, .Hkv = 2, .T = 5, .p0 = 70, .softcap = 25.0f, .ws = 1},
        /* sliding-window rings: gemma's head_dim 256 (window + T - 1 rows exactly, and window + n_batch),
         * the wrap inside a 32- / 64-key tile and between splits; k_fattn_ws's early loads of old keys */
        {.D = 256, .Hq = 4, .Hkv = 1, .T = 24, .p0 = 3 * 123 + 50, .window = 100, .ring = 123},
        {.D = 256, .Hq = 8, .Hkv = 2, .T = 9, .p0 = 1000, .window = 96, .S = 4, .softcap = 30.0f, .xq = 1, .ring = 96 + 64},
        {.D = 512, .Hq = 2, .Hkv = 1, .T = 17, .p0 = 400, .window = 64, .ring = 80},
        {.D = 64, .Hq = 4, .Hkv = 2, .T = 40, .p0 = 3 * 90 + 7, .window = 51, .ring = 90},
        {.D = 128, .Hq = 4, .Hkv = 1, .T = 16, .p0 = 777, .window = 150, .S = 2, .ws = 1, .ring = 165},
        {.D = 64, .Hq = 4, .Hkv = 2, .T = 5, .p0 = 333, .window = 80, .ws = 1, .ring = 84},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) run_case(&cs[k]);
    emu_build_done(h);
    return test_summary();
}
