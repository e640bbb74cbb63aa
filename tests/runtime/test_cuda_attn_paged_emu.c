/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_attn_paged_emu.c — the CUDA paged attention kernels (backend/cuda/device/
 * attn_paged.cuh) without a GPU: their device code runs under the host emulation
 * (tests/runtime/cuda_attn_paged_emu.cc, tests/codegen/emu: fibers for threads, real warp shuffles
 * and barriers, warps held back at random) against ops_ref.c's op_attention with the same block
 * table, on fresh random inputs into NaN-poisoned outputs: tokens of three sequences with shuffled
 * block tables in one step (decodes, prefill chunks, a block edge), F16 and F32 caches, head_dim
 * 64 / 80 / 128 / 256 / 512, GQA, a window, a softcap, block sizes 5 / 8 / 16. Unrelated rows fill
 * every other block, so a wrong row mapping shows. Then a contiguous cache read as the executor
 * reads one of heads past cu_attention's 256 (one block of all C rows, a table of zeros) against
 * op_attention without a table. Both unsplit (S = 1) and with key splits S 2 / 5 / 32 (the split
 * kernel into NaN-poisoned scratch, then the merge kernel; and merged by the last split block over
 * counters, which must give the same bits and leave the counters zeroed): depths where fewer than
 * S splits are active, exactly S, one (below kmin), kmin 1 (splits of one key: warps without keys), windows, softcaps;
 * where one split is active the output must equal the unsplit kernel's bit for bit. Then the grouped
 * kernel (device/attn_paged_gqa.cuh: hb query heads of a kv head a block) the same ways: F16 at
 * head_dim 256 / 512 with G 1 / 2 / 4 / 8 in one or two blocks, splits up to 128 (its float4 merge),
 * gemma4's global layer at depth 2048, a window of 512 at depth 5000, 8 tokens at depths 1..8; F16
 * and F32 at head_dim 64 / 128 with G 1 / 2 / 3 / 5 / 6 / 7 / 8 (hb = G, or hb | G in several
 * blocks), depths 1..600, splits 1..32, up to 5 sequences a step, where the last split block's merge
 * over counters must equal k_attn_paged_gqa_merge_warps bit for bit. Limit NMSE 1e-10 (f32 sums in
 * another order: the kernel's softmax is online, the splits merge). At head_dim % 32 == 0 every
 * main launch also writes the q8_1 output (pass fuse_attn_quant, into 0xA5-poisoned bytes), which
 * must be the plain quantizer's bytes over the launch's f32 output (and the in-kernel merge's the
 * merge kernel's).
 * Then sliding-window ring caches read as one block (cu_attn_paged_args.ring: position j at row j
 * mod C, no table; tests/runtime/ring_kv.h) past 3x the window, against the linear reference and bit
 * for bit the same launch over the linear cache.
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

typedef int (*paged_fn)(float *, const float *, const void *, const void *, const int32_t *, const int32_t *, const long long *, const float *,
                        const int *, const float *, float *, void *);
typedef int (*quant_fn)(uint8_t *, const float *, long long, long long);
static paged_fn emu_paged;
static quant_fn emu_quant;
static uint64_t seed = 0xA77E2ull;

#define KMIN_DEFAULT 64 /* kernels.h's CU_ATT_DEC_KMIN: the kernel's fewest keys a split for kmin 0 */

#define NSEQ 8 /* sequences of a step at most */

/* one launch's shapes: sequence s's len[s] tokens at positions start[s].. (len 0: none); S key
 * splits (0 / 1: none) of at least kmin keys (0: the default) */
typedef struct pcase {
    int64_t D, Hq, Hkv;
    int ctype, window, bs;
    float softcap;
    int64_t start[NSEQ], len[NSEQ];
    int S, kmin;
    int hb; /* 0: the per-head kernel; > 0: the grouped kernel, hb query heads a block */
} pcase;

/* Q's RoPE on load: n_rot (0: none), mode (0 normal, 2 neox), with freq factors (ff 1) */
typedef struct qrope {
    int n_rot, mode, ff;
} qrope;
static const qrope no_rope = {0, 0, 0};

/* the inputs and the reference of one launch; with Q's RoPE (rope.n_rot > 0) q is unrotated, qr =
 * op_rope(q) (what the reference read) */
typedef struct pdata {
    int64_t D, Hq, T, n_tbl;
    float *q, *qr, *ref;
    void *kc, *vc;
    const int32_t *pos, *tbl;
    op_rope_args rope;
    int ring; /* > 0: no table, a contiguous sliding-window ring cache of this many rows (run_ring) */
} pdata;

/* the splits active for a token at position p (attn_paged.cuh's pa_active) */
static int active(int64_t p, int window, int S, int kmin) {
    const int64_t lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0, n = p - lo + 1, km = kmin > 0 ? kmin : KMIN_DEFAULT;
    if (S <= 1) return 1;
    int64_t kps = (n + S - 1) / S;
    if (kps < km) kps = km;
    return (int)((n + kps - 1) / kps);
}

/* the emulated launch of c over d into a fresh NaN-poisoned output (split scratch NaN-poisoned too:
 * a partial read but never written shows); NULL after a deadlock. on_load: the kernel rotates d->q
 * (d->rope); else it reads d->qr (rotated beforehand; d->q where there is no rope). xq: the q8_1
 * output too (NULL: none) */
static float *launch_x(const pcase *c, const pdata *d, int S, bool on_load, bool in_kernel, uint8_t *xq) {
    const int64_t n = d->D * d->Hq * d->T, ns = S > 1 ? d->T * d->Hq * S * (d->D + (c->hb > 0 ? 4 : 2)) : 0;
    float *got = malloc((size_t)n * 4), *scratch = ns ? malloc((size_t)ns * 4) : NULL;
    for (int64_t i = 0; i < n; i++) got[i] = NAN;
    for (int64_t i = 0; i < ns; i++) scratch[i] = NAN;
    const long long dims[5] = {d->D, d->Hq, c->Hkv, d->T, d->n_tbl};
    const op_rope_args *ra = &d->rope;
    const bool rot = on_load && ra->n_rot > 0;
    const float f[5] = {1.0f / sqrtf((float)d->D), c->softcap, rot ? powf(ra->freq_base, -2.0f / (float)ra->n_rot) : 0.0f,
                        rot ? ra->freq_scale : 0.0f, rot ? ra->attn_factor : 0.0f};
    const int iv[10] = {c->ctype, c->window, c->bs, S, c->kmin, c->hb, rot ? ra->n_rot : 0, rot ? ra->mode : 0, in_kernel, d->ring};
    const float *q = rot || !d->qr ? d->q : d->qr;
    const int rc = emu_paged(got, q, d->kc, d->vc, d->pos, d->tbl, dims, f, iv, rot ? ra->ff : NULL, scratch, xq);
    CHECKF(rc == 0, "emulation rc %d (-1 a deadlock, -3 counters left set)", rc);
    free(scratch);
    if (rc) free(got);
    return rc ? NULL : got;
}
static float *launch_m(const pcase *c, const pdata *d, int S, bool on_load, bool in_kernel) { return launch_x(c, d, S, on_load, in_kernel, NULL); }
static float *launch_q(const pcase *c, const pdata *d, int S, bool on_load) { return launch_m(c, d, S, on_load, false); }
static float *launch(const pcase *c, const pdata *d, int S) { return launch_q(c, d, S, true); }

/* Q's RoPE on load against the same launch over q rotated by op_rope beforehand: bit for bit (the
 * kernel's rope_rot is k_rope's math, and op_rope's) */
static void check_rope_bits(const char *label, const pcase *c, const pdata *d, const float *got) {
    float *pre = launch_q(c, d, c->S, false);
    if (!pre) return;
    const int64_t n = d->D * d->Hq * d->T;
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += memcmp(&got[i], &pre[i], 4) != 0;
    printf("%s q_rope=%d %s%s: %lld of %lld outputs differ from the pre-rotated launch\n", label, d->rope.n_rot,
           d->rope.mode == 2 ? "neox" : "normal", d->rope.ff ? " ff" : "", (long long)diff, (long long)n);
    CHECKF(diff == 0, "%s S=%d: rope on load differs from op_rope then the kernel in %lld outputs", label, c->S, (long long)diff);
    free(pre);
}

/* q8_1 bytes of n values (a fresh buffer poisoned with 0xA5: a block never written shows) */
static uint8_t *poisoned_q8(int64_t n) {
    uint8_t *x = malloc((size_t)(n / 32 * 36));
    memset(x, 0xA5, (size_t)(n / 32 * 36));
    return x;
}

/* the kernel's q8_1 output xq against the plain quantizer (k_quant_rows' code under the same
 * emulation) over its f32 output got: byte for byte (pass fuse_attn_quant's promise) */
static void check_xq(const char *label, const pcase *c, const pdata *d, const float *got, const uint8_t *xq) {
    const int64_t row = d->D * d->Hq, bytes = row * d->T / 32 * 36;
    uint8_t *want = poisoned_q8(row * d->T);
    const int rc = emu_quant(want, got, row, d->T);
    CHECKF(rc == 0, "quantizer emulation rc %d", rc);
    int64_t diff = 0;
    for (int64_t i = 0; i < bytes; i++) diff += want[i] != xq[i];
    printf("%s S=%d: q8_1 output, %lld of %lld bytes differ from the quantizer's\n", label, c->S, (long long)diff, (long long)bytes);
    CHECKF(rc == 0 && diff == 0, "%s S=%d: the q8_1 output differs from quantizing the f32 output in %lld bytes", label, c->S, (long long)diff);
    free(want);
}

/* c's launch against the reference; with S > 1 also unsplit, and every token with one active split
 * bit-identical to it; at head_dim % 32 == 0 the launches also write the q8_1 output (check_xq) */
static void check(const char *label, const pcase *c, const pdata *d) {
    const int64_t n = d->D * d->Hq * d->T, row = d->D * d->Hq;
    uint8_t *xq = d->D % 32 == 0 ? poisoned_q8(n) : NULL;
    float *got = launch_x(c, d, c->S, true, false, xq);
    if (!got) {
        free(xq);
        return;
    }
    if (xq) check_xq(label, c, d, got, xq);
    int64_t nan = 0;
    const double e = attn_nmse(got, d->ref, n, &nan);
    char na[64] = "";
    for (int64_t t = 0, o = 0; t < d->T && o < (int64_t)sizeof na - 8; t++)
        o += snprintf(na + o, sizeof na - (size_t)o, "%s%d", t ? "," : "", active(d->pos[t], c->window, c->S, c->kmin));
    printf("%s%s S=%d kmin=%d (active %s): NMSE %.3e%s\n", label, c->hb ? " grouped" : "", c->S, c->kmin, na, e, nan ? " (unwritten outputs)" : "");
    CHECKF(e <= 1e-10, "%s S=%d: NMSE %.3e (%lld NaN)", label, c->S, e, (long long)nan);
    if (d->rope.n_rot) check_rope_bits(label, c, d, got);
    float *one = c->S > 1 ? launch(c, d, 1) : NULL;
    for (int64_t t = 0; one && t < d->T; t++)
        if (active(d->pos[t], c->window, c->S, c->kmin) == 1)
            CHECKF(!memcmp(got + t * row, one + t * row, (size_t)row * 4), "%s S=%d: token %lld (one split active) differs from S=1", label,
                   c->S, (long long)t);
    free(one);
    /* the split merged by its last block (one launch, counters) is the merge kernel's, bit for bit
     * (the per-head kernel; the grouped one at head_dim <= 128) */
    uint8_t *xq_ink = xq ? poisoned_q8(n) : NULL;
    float *ink = c->S > 1 && (c->hb == 0 || c->D <= 128) ? launch_x(c, d, c->S, true, true, xq_ink) : NULL;
    if (ink) CHECKF(!memcmp(got, ink, (size_t)n * 4), "%s S=%d: the in-kernel merge differs from k_attn_paged_merge", label, c->S);
    if (ink && xq)
        CHECKF(!memcmp(xq, xq_ink, (size_t)(n / 32 * 36)), "%s S=%d: the in-kernel merge's q8_1 output differs from the merge kernel's", label, c->S);
    free(ink);
    free(got);
    free(xq), free(xq_ink);
}

/* c's Q rope (if any) into d: normal mode base 1e4 and freq scale 0.5, neox base 1e6; with freq
 * factors (random in [1, 4)) an attention factor 1.25; d->qr = op_rope(d->q) for the reference */
static void rope_setup(const qrope *c, pdata *d) {
    if (!c->n_rot) return;
    float *ff = NULL;
    if (c->ff) {
        ff = malloc((size_t)(c->n_rot / 2) * 4);
        for (int i = 0; i < c->n_rot / 2; i++) ff[i] = 1.0f + 3.0f * (float)(test_rand_u64(&seed) % 1000) / 1000.0f;
    }
    d->rope = (op_rope_args){.D = d->D, .H = d->Hq, .n_rot = c->n_rot, .mode = c->mode, .freq_base = c->mode == 2 ? 1e6f : 1e4f,
                             .freq_scale = c->mode == 2 ? 1.0f : 0.5f, .attn_factor = c->ff ? 1.25f : 1.0f, .ff = ff};
    d->qr = malloc((size_t)(d->D * d->Hq * d->T) * 4);
    op_rope(d->qr, d->q, d->pos, &d->rope, 0, d->T);
}

static void rope_free(pdata *d) {
    free(d->qr);
    free((void *)d->rope.ff);
}

static void run_case(const pcase *c, const qrope *qr) {
    const int64_t D = c->D, Hq = c->Hq, Hkv = c->Hkv, Dkv = D * Hkv, bs = c->bs;
    int64_t T = 0, last = 159, nseq = 0; /* n_tbl: enough entries for position 159, or the deepest token */
    for (int s = 0; s < NSEQ; s++) {
        T += c->len[s];
        nseq += c->len[s] > 0;
        if (c->len[s] && c->start[s] + c->len[s] - 1 > last) last = c->start[s] + c->len[s] - 1;
    }
    const int64_t n_tbl = last / bs + 1, n_blk = NSEQ * n_tbl > 128 ? NSEQ * n_tbl : 128, C = n_blk * bs; /* blocks of no sequence too */
    CHECKF(T <= 16, "case of %lld tokens of %lld sequences: too many", (long long)T, (long long)nseq);
    if (T > 16) return;
    int32_t *blocks = malloc((size_t)n_blk * 4), pos[16];
    int32_t *tbl = malloc((size_t)(n_tbl * T) * 4);
    for (int i = 0; i < n_blk; i++) blocks[i] = i;
    for (int i = n_blk - 1; i > 0; i--) {
        const int j = (int)(test_rand_u64(&seed) % (uint64_t)(i + 1)), x = blocks[i];
        blocks[i] = blocks[j], blocks[j] = x;
    }
    for (int s = 0, t = 0; s < NSEQ; s++) /* sequence s owns the shuffled blocks[s n_tbl ..] */
        for (int64_t i = 0; i < c->len[s]; i++, t++) {
            pos[t] = (int32_t)(c->start[s] + i);
            for (int64_t e = 0; e < n_tbl; e++) tbl[t * n_tbl + e] = blocks[s * n_tbl + e];
        }
    float *kf = attn_rnd(&seed, Dkv * C), *vf = attn_rnd(&seed, Dkv * C), *scores = malloc(4096 * 4);
    pdata d = {.D = D, .Hq = Hq, .T = T, .n_tbl = n_tbl, .q = attn_rnd(&seed, D * Hq * T), .ref = malloc((size_t)(D * Hq * T) * 4),
               .kc = attn_as_cache(c->ctype, kf, Dkv * C), .vc = attn_as_cache(c->ctype, vf, Dkv * C), .pos = pos, .tbl = tbl};
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)D), .softcap = c->softcap,
                             .window = c->window, .table = tbl, .n_tbl = n_tbl, .bs = (int32_t)bs};
    rope_setup(qr, &d);
    op_attention(d.ref, d.qr ? d.qr : d.q, d.kc, d.vc, pos, &oa, 0, T * Hq, scores);
    char label[128];
    snprintf(label, sizeof label, "paged attention %s D=%lld Hq/Hkv=%lld/%lld T=%lld bs=%lld w=%d cap=%g", c->ctype == SB_TYPE_F16 ? "f16" : "f32",
             (long long)D, (long long)Hq, (long long)Hkv, (long long)T, (long long)bs, c->window, c->softcap);
    check(label, c, &d);
    rope_free(&d);
    free(d.q), free(kf), free(vf), free(d.kc), free(d.vc), free(d.ref), free(scores), free(tbl), free(blocks);
}

/* a contiguous cache of C rows as one block (bs C, one zero entry per token: exec_cuda_dispatch.c's
 * attention of head_dim > CU_ATT_MAX_D): T tokens at positions p0.. against op_attention without a
 * table (position j at row j); the rows past the last position hold unrelated keys. c: D, Hq, Hkv,
 * ctype, window, softcap, S, kmin; bs = C */
static void run_contig(const pcase *c, int64_t C, int64_t T, int32_t p0, const qrope *qr) {
    const int64_t D = c->D, Hq = c->Hq, Dkv = D * c->Hkv;
    int32_t pos[16], zeros[16] = {0};
    CHECKF(T <= 16, "%lld tokens: too many", (long long)T);
    if (T > 16) return;
    for (int64_t t = 0; t < T; t++) pos[t] = p0 + (int32_t)t;
    float *kf = attn_rnd(&seed, Dkv * C), *vf = attn_rnd(&seed, Dkv * C), *scores = malloc((size_t)C * 4);
    pdata d = {.D = D, .Hq = Hq, .T = T, .n_tbl = 1, .q = attn_rnd(&seed, D * Hq * T), .ref = malloc((size_t)(D * Hq * T) * 4),
               .kc = attn_as_cache(c->ctype, kf, Dkv * C), .vc = attn_as_cache(c->ctype, vf, Dkv * C), .pos = pos, .tbl = zeros};
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = c->Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)D), .softcap = c->softcap,
                             .window = c->window};
    rope_setup(qr, &d);
    op_attention(d.ref, d.qr ? d.qr : d.q, d.kc, d.vc, pos, &oa, 0, T * Hq, scores);
    pcase cc = *c;
    cc.bs = (int)C;
    char label[128];
    snprintf(label, sizeof label, "contiguous as one block %s D=%lld Hq/Hkv=%lld/%lld T=%lld C=%lld p0=%d w=%d cap=%g",
             c->ctype == SB_TYPE_F16 ? "f16" : "f32", (long long)D, (long long)Hq, (long long)c->Hkv, (long long)T, (long long)C, (int)p0,
             c->window, c->softcap);
    check(label, &cc, &d);
    rope_free(&d);
    free(d.q), free(kf), free(vf), free(d.kc), free(d.vc), free(d.ref), free(scores);
}

/* a sliding-window ring cache of C rows (exec_cuda_dispatch.c's attention of head_dim > CU_ATT_MAX_D
 * over a session's ring: bs C, ring C, the table unread): T tokens at positions p0.. with the ring
 * holding positions up to the last (ring_kv.h: stale rows where older positions were) against
 * op_attention over the linear cache; the same launch over the linear cache (one block of its rows)
 * must give the same bits. c: D, Hq, Hkv, ctype, window, softcap, S, kmin, hb */
static void run_ring(const pcase *c, int64_t C, int64_t T, int32_t p0) {
    const int64_t D = c->D, Hq = c->Hq, Dkv = D * c->Hkv, L = p0 + T + 3, rb = Dkv * (c->ctype == SB_TYPE_F16 ? 2 : 4);
    int32_t pos[16], zeros[16] = {0};
    CHECKF(T <= 16 && C >= c->window + T - 1, "%lld tokens, ring %lld: bad case", (long long)T, (long long)C);
    if (T > 16) return;
    for (int64_t t = 0; t < T; t++) pos[t] = p0 + (int32_t)t;
    float *kf = attn_rnd(&seed, Dkv * L), *vf = attn_rnd(&seed, Dkv * L), *sf = attn_rnd(&seed, Dkv * C), *scores = malloc((size_t)L * 4);
    void *kl = attn_as_cache(c->ctype, kf, Dkv * L), *vl = attn_as_cache(c->ctype, vf, Dkv * L), *st = attn_as_cache(c->ctype, sf, Dkv * C);
    pdata d = {.D = D, .Hq = Hq, .T = T, .n_tbl = 1, .q = attn_rnd(&seed, D * Hq * T), .ref = malloc((size_t)(D * Hq * T) * 4),
               .kc = ring_from_linear(kl, st, rb, C, p0 + T - 1), .vc = ring_from_linear(vl, st, rb, C, p0 + T - 1), .pos = pos, .tbl = zeros,
               .ring = (int)C};
    const op_attn_args oa = {.D = D, .Hq = Hq, .Hkv = c->Hkv, .ctype = c->ctype, .scale = 1.0f / sqrtf((float)D), .softcap = c->softcap,
                             .window = c->window};
    op_attention(d.ref, d.q, kl, vl, pos, &oa, 0, T * Hq, scores);
    pcase cc = *c;
    cc.bs = (int)C;
    char label[128];
    snprintf(label, sizeof label, "ring %s D=%lld Hq/Hkv=%lld/%lld T=%lld C=%lld p0=%d w=%d cap=%g", c->ctype == SB_TYPE_F16 ? "f16" : "f32",
             (long long)D, (long long)Hq, (long long)c->Hkv, (long long)T, (long long)C, (int)p0, c->window, c->softcap);
    check(label, &cc, &d);
    float *got = launch(&cc, &d, c->S);
    pcase cl = *c;
    cl.bs = (int)L;
    pdata dl = d;
    dl.kc = kl, dl.vc = vl, dl.ring = 0;
    float *lin = launch(&cl, &dl, c->S);
    if (got && lin) CHECKF(!memcmp(got, lin, (size_t)(D * Hq * T) * 4), "%s S=%d: the ring's outputs differ from the linear cache's", label, c->S);
    free(got), free(lin);
    free(d.q), free(kf), free(vf), free(sf), free(kl), free(vl), free(st), free(d.kc), free(d.vc), free(d.ref), free(scores);
}

int main(void) {
    void *h = emu_build("tests/runtime/cuda_attn_paged_emu.cc");
    if (!h) return test_summary();
    *(void **)&emu_paged = dlsym(h, "sb_emu_attn_paged");
    *(void **)&emu_quant = dlsym(h, "sb_emu_quant_q8_1");
    CHECKF(emu_paged != NULL && emu_quant != NULL, "dlsym: %s", dlerror());
    if (emu_paged && emu_quant) {
        const pcase cs[] = {
            /* unsplit */
            {64, 4, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}, 1, 0, 0},     /* decode + a prefill chunk */
            {128, 8, 2, SB_TYPE_F32, 0, 16, 0, {100, 15, 3}, {1, 1, 1}, 1, 0, 0},   /* three decodes, one at a block edge */
            {256, 2, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 0}, {2, 3, 9}, 1, 0, 0}, /* window, softcap, bs 8 */
            {80, 6, 3, SB_TYPE_F32, 0, 5, 0, {41, 12, 1}, {1, 1, 4}, 1, 0, 0},      /* head_dim 80, blocks of 5 */
            {512, 2, 1, SB_TYPE_F16, 0, 16, 0, {3, 130, 0}, {1, 1, 2}, 1, 0, 0},    /* gemma4's global head_dim */
            /* key splits */
            {64, 4, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 60}, {1, 3, 1}, 2, 0, 0},     /* every depth below kmin: one split active */
            {128, 8, 2, SB_TYPE_F32, 0, 16, 0, {300, 15, 130}, {1, 1, 1}, 5, 0, 0}, /* 5 of 5 active, 1, 3 of 5 */
            {512, 2, 1, SB_TYPE_F16, 0, 16, 0, {200, 0, 127}, {1, 3, 1}, 32, 4, 0}, /* 29 of 32, 1, 32 of 32 (kps 4) */
            {256, 2, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 100}, {2, 3, 1}, 5, 4, 0}, /* window: 5 of 5 at any depth past it */
            {80, 6, 3, SB_TYPE_F32, 0, 5, 0, {41, 12, 1}, {1, 1, 4}, 32, 1, 0},     /* splits of 1-2 keys: warps without keys */
            {64, 4, 4, SB_TYPE_F32, 200, 16, 50.0f, {500, 33, 256}, {1, 3, 1}, 2, 0, 0}, /* window 200 of depth 500, softcap */
        };
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) run_case(&cs[k], &no_rope);
        const struct { pcase c; int64_t C, T; int32_t p0; } ct[] = {
            {{512, 4, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 1, 0, 0}, 300, 1, 250},      /* a decode step deep in the cache */
            {{512, 2, 2, SB_TYPE_F32, 24, 0, 30.0f, {0}, {0}, 1, 0, 0}, 64, 3, 0},    /* prefill from 0, window, softcap */
            {{320, 2, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 1, 0, 0}, 40, 2, 38},        /* 320 dims, the last rows */
            {{512, 4, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 5, 0, 0}, 300, 1, 250},      /* 4 of 5 active */
            {{512, 2, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 32, 0, 0}, 2100, 1, 2047},   /* gemma4's global layer: 32 of 32 of 64 keys */
            {{512, 2, 2, SB_TYPE_F32, 24, 0, 30.0f, {0}, {0}, 2, 4, 0}, 64, 3, 40},   /* window, softcap: 2 of 2 */
            {{320, 2, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 5, 8, 0}, 40, 2, 38},        /* 5 of 5 in the last rows */
        };
        for (size_t k = 0; k < sizeof ct / sizeof ct[0]; k++) run_contig(&ct[k].c, ct[k].C, ct[k].T, ct[k].p0, &no_rope);
        /* the grouped kernel (hb heads of a kv head a block, F16, D 256 / 512): G 1 / 2 / 4 / 8, one
         * or two blocks a kv head, unsplit and split (the float4 merge), windows, softcaps */
        const pcase gs[] = {
            {256, 8, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}, 1, 0, 4},          /* G 4, decode + a prefill chunk */
            {512, 8, 2, SB_TYPE_F16, 0, 16, 0, {200, 0, 127}, {1, 3, 1}, 32, 4, 4},       /* gemma4 global's heads: 29 of 32, 1, 32 */
            {256, 8, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 100}, {2, 3, 1}, 5, 4, 8},     /* G 8 a block, window, softcap */
            {512, 8, 1, SB_TYPE_F16, 0, 5, 0, {41, 12, 1}, {1, 1, 4}, 32, 1, 4},         /* G 8 as 2 blocks, splits of 1-2 keys */
            {256, 2, 2, SB_TYPE_F16, 0, 16, 50.0f, {300, 15, 130}, {1, 1, 1}, 5, 0, 1},  /* G 1, softcap */
            {512, 4, 2, SB_TYPE_F16, 0, 64, 0, {2500, 1000, 0}, {1, 2, 3}, 128, 0, 2},   /* 40 of 128 (kmin 64), 16, 1 */
            {512, 4, 1, SB_TYPE_F16, 0, 16, 0, {3, 130, 0}, {1, 1, 2}, 1, 0, 4},         /* unsplit, shallow */
        };
        for (size_t k = 0; k < sizeof gs / sizeof gs[0]; k++) run_case(&gs[k], &no_rope);
        /* the grouped kernel at head_dim 64 / 128, F16 and F32 (key groups of 8 / 16 / 32 lanes, 4 / 2 / 1
         * keys a warp): G 1 / 2 / 3 / 5 / 6 / 7 / 8 in one block (hb = G) or several (hb | G), depths
         * 1..600, splits 1..32 (kmin default, 16, 4, 1: splits of one key, groups and warps without
         * keys), windows, softcaps, block sizes 5 / 8 / 16, up to 8 sequences with shuffled blocks */
        const pcase ns[] = {
            {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}, 1, 0, 7},                  /* qwen2.5-0.5b's heads, unsplit */
            {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {127, 0, 600}, {1, 2, 1}, 4, 0, 7},                /* 2 of 4, 1, 4 of 4 */
            {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {0, 64, 128, 300}, {1, 1, 1, 1}, 4, 0, 7},         /* 4 decodes: 1, 2, 3, 4 active */
            {64, 14, 2, SB_TYPE_F16, 0, 16, 0, {0, 190, 100}, {1, 3, 2}, 8, 16, 7},               /* prefill chunks, kmin 16 */
            {128, 16, 2, SB_TYPE_F32, 0, 16, 0, {300, 15, 130}, {1, 1, 1}, 5, 0, 8},              /* F32 D 128, G 8: 5 of 5, 1, 3 */
            {128, 10, 2, SB_TYPE_F16, 0, 16, 30.0f, {599, 1, 200}, {1, 2, 1}, 12, 4, 5},         /* G 5, softcap, 12 splits */
            {64, 6, 2, SB_TYPE_F32, 24, 5, 0, {41, 12, 1}, {1, 1, 2}, 32, 1, 3},                  /* G 3, window, bs 5, 1-key splits */
            {64, 4, 4, SB_TYPE_F16, 200, 16, 50.0f, {500, 33, 256}, {1, 3, 1}, 2, 0, 1},         /* G 1, window 200 deep, softcap */
            {128, 4, 2, SB_TYPE_F16, 0, 16, 0, {599, 64, 0}, {1, 1, 1}, 10, 0, 2},              /* G 2: 10 of 10, 2, 1 */
            {64, 8, 1, SB_TYPE_F32, 0, 16, 0, {300, 0, 63}, {1, 2, 1}, 3, 0, 8},                 /* F32 D 64, G 8 */
            {64, 8, 1, SB_TYPE_F16, 0, 8, 0, {70, 5, 100, 33}, {1, 1, 1, 1}, 5, 4, 4},          /* G 8 as 2 blocks of 4, bs 8 */
            {128, 12, 2, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 100}, {1, 1, 1}, 5, 4, 3},          /* G 6 as 2 blocks of 3 */
            {128, 12, 2, SB_TYPE_F32, 0, 16, 0, {450, 8, 129, 300, 2}, {1, 1, 1, 1, 1}, 7, 0, 6}, /* G 6 in one, F32 */
            {128, 16, 2, SB_TYPE_F16, 100, 16, 0, {599, 150, 20}, {1, 1, 1}, 3, 0, 8},           /* window 100 past 600 */
        };
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) run_case(&ns[k], &no_rope);
        const struct { pcase c; int64_t C, T; int32_t p0; } gt[] = {
            {{512, 8, 2, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 65, 0, 4}, 2100, 1, 2047},       /* gemma4-e4b's global layer: 32 of 65 of 64 keys */
            {{256, 8, 2, SB_TYPE_F16, 512, 0, 0, {0}, {0}, 64, 0, 4}, 5100, 1, 4999},     /* its sliding layer past the window: 8 of 64 */
            {{256, 4, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 128, 0, 4}, 1700, 1, 1599},      /* gemma3-1b's heads, 128 splits: 25 active */
            {{512, 8, 1, SB_TYPE_F16, 0, 0, 30.0f, {0}, {0}, 3, 1, 4}, 10, 8, 0},         /* 8 tokens at depth 1..8, softcap */
            {{256, 8, 8, SB_TYPE_F16, 100, 0, 0, {0}, {0}, 7, 16, 1}, 400, 3, 300},      /* G 1, window 100: 7 of 7 */
        };
        for (size_t k = 0; k < sizeof gt / sizeof gt[0]; k++) run_contig(&gt[k].c, gt[k].C, gt[k].T, gt[k].p0, &no_rope);
        /* Q's RoPE on load (pass fuse_attn_rope): normal / neox, all or part of the dims, freq factors,
         * deep positions; unsplit and split, the per-head and the grouped kernel */
        const struct { pcase c; qrope r; } rs[] = {
            {{64, 14, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}, 1, 0, 0}, {64, 2, 0}},      /* qwen2's heads, neox, a prefill chunk */
            {{128, 8, 2, SB_TYPE_F32, 0, 16, 0, {300, 15, 600}, {1, 1, 1}, 5, 0, 0}, {128, 0, 1}},  /* normal, freq factors, split */
            {{80, 6, 3, SB_TYPE_F16, 0, 5, 0, {41, 12, 1}, {1, 1, 4}, 32, 1, 0}, {32, 2, 0}},       /* part of the dims, splits of 1-2 keys */
            {{256, 2, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 100}, {2, 3, 1}, 5, 4, 0}, {256, 2, 1}}, /* window, softcap, ff */
            {{256, 8, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 90}, {1, 5, 1}, 1, 0, 4}, {256, 2, 0}},     /* grouped, G 4 */
            {{256, 8, 1, SB_TYPE_F16, 24, 8, 30.0f, {70, 5, 100}, {2, 3, 1}, 5, 4, 8}, {128, 0, 1}}, /* grouped G 8, split, part, ff */
            {{512, 8, 2, SB_TYPE_F16, 0, 16, 0, {200, 0, 127}, {1, 3, 1}, 32, 4, 4}, {512, 2, 1}},  /* grouped D 512, 29 of 32 */
            {{64, 14, 2, SB_TYPE_F16, 0, 16, 0, {37, 0, 190}, {1, 2, 1}, 4, 0, 7}, {64, 2, 0}},     /* grouped qwen2's heads, G 7 */
            {{128, 16, 2, SB_TYPE_F32, 0, 16, 0, {300, 15, 600}, {1, 1, 1}, 5, 0, 8}, {128, 0, 1}}, /* grouped F32 D 128, ff */
            {{64, 6, 2, SB_TYPE_F32, 24, 5, 0, {41, 12, 1}, {1, 1, 2}, 8, 1, 3}, {32, 2, 0}},       /* grouped G 3, part of the dims */
        };
        for (size_t k = 0; k < sizeof rs / sizeof rs[0]; k++) run_case(&rs[k].c, &rs[k].r);
        const struct { pcase c; int64_t C, T; int32_t p0; qrope r; } rt[] = {
            {{512, 4, 1, SB_TYPE_F16, 0, 0, 0, {0}, {0}, 5, 0, 0}, 300, 1, 250, {512, 2, 0}}, /* a contiguous cache as one block */
            {{320, 2, 1, SB_TYPE_F32, 0, 0, 0, {0}, {0}, 1, 0, 0}, 40, 2, 38, {64, 0, 1}},
        };
        for (size_t k = 0; k < sizeof rt / sizeof rt[0]; k++) run_contig(&rt[k].c, rt[k].C, rt[k].T, rt[k].p0, &rt[k].r);
        /* sliding-window rings read as one contiguous block: past 3x the window, rows of window + T - 1
         * and more, unsplit and split, the per-head and the grouped kernel */
        const struct { pcase c; int64_t C, T; int32_t p0; } rg[] = {
            {{512, 4, 1, SB_TYPE_F16, 96, 0, 0, {0}, {0}, 1, 0, 0}, 96, 1, 3 * 96 + 40},       /* window + T - 1 rows exactly */
            {{320, 2, 1, SB_TYPE_F32, 40, 0, 30.0f, {0}, {0}, 3, 8, 0}, 45, 6, 200},          /* a prefill chunk of 6, splits */
            {{256, 8, 2, SB_TYPE_F16, 128, 0, 0, {0}, {0}, 8, 16, 4}, 135, 1, 1000},          /* grouped, G 4, 8 of 8 splits */
            {{512, 8, 1, SB_TYPE_F16, 64, 0, 20.0f, {0}, {0}, 1, 0, 4}, 71, 8, 500},          /* grouped, 2 blocks of G 8, 8 tokens */
        };
        for (size_t k = 0; k < sizeof rg / sizeof rg[0]; k++) run_ring(&rg[k].c, rg[k].C, rg[k].T, rg[k].p0);
    }
    emu_build_done(h);
    return test_summary();
}
