/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_kv_pool.c — the paged KV pool's bookkeeping under 20,000 random operations
 * (open, close, attach a prefix, append with commit, append then undo, truncate) over prompts
 * drawn from a few shared stems, so prefixes hit, blocks are shared, copied on write and evicted.
 * The "K/V" a position's row holds is a hash of its sequence's tokens up to and including it (what
 * a real K/V depends on), written only where kv_pool_row says and only into reserved rows; after
 * every operation:
 *   - every open sequence reads, through its block table, the hash of its own token prefix at every
 *     position (no sequence ever sees another's write; shared rows are equal by construction);
 *   - each block's reference count equals the number of tables naming it; used + cached + free =
 *     n_blocks; stats of hits, copies and evictions only grow;
 *   - a step that needs more blocks than free + cached is refused with SB_ERR_CONTEXT_FULL and
 *     changes nothing.
 */
#include "runtime/kv_pool.h"
#include "base/status.h"
#include "quant/types.h"
#include "test.h"

enum { BS = 4, NBLOCKS = 24, NSEQ = 5, NCTX = 40 };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* the stand-in K row of position p: a hash of tokens[0..p] as two floats of 16 bits each */
static void row_of(const int32_t *tokens, int64_t p, float out[2]) {
    uint32_t h = 2166136261u;
    for (int64_t i = 0; i <= p; i++) h = (h ^ (uint32_t)tokens[i]) * 16777619u;
    out[0] = (float)(h & 0xffff), out[1] = (float)(h >> 16);
}

static int check_all(kv_pool *kp, const bool *open) {
    int bad = 0;
    int32_t refs[NBLOCKS] = {0};
    const float *k = kv_pool_layer(kp, 0, 0);
    for (int32_t s = 0; s < NSEQ; s++) {
        if (!open[s]) continue;
        const int64_t n = kv_pool_seq_len(kp, s);
        const int32_t *tok = kv_pool_seq_tokens(kp, s), *blk = kv_pool_seq_blocks(kp, s);
        for (int64_t b = 0; b < (n + BS - 1) / BS; b++) refs[blk[b]]++;
        for (int64_t p = 0; p < n; p++) {
            float want[2];
            row_of(tok, p, want);
            const float *got = k + 2 * kv_pool_row(kp, s, p);
            if (got[0] != want[0] || got[1] != want[1]) bad++;
        }
    }
    const kv_pool_stats st = kv_pool_get_stats(kp);
    int64_t used = 0;
    for (int b = 0; b < NBLOCKS; b++) used += refs[b] > 0;
    if (used != st.n_used || st.n_used + st.n_cached + st.n_free != NBLOCKS) bad++;
    return bad;
}

int main(void) {
    rt_model *m = calloc(1, sizeof *m);
    snprintf(m->hp.arch, sizeof m->hp.arch, "test");
    m->hp.n_layer = m->hp.n_layer_kv = 1;
    m->hp.layer_n_head_kv[0] = 1;
    m->hp.head_dim = m->hp.head_dim_swa = 2;
    kv_pool *kp;
    const kv_pool_params pp = {.n_blocks = NBLOCKS, .block_size = BS, .n_seq_max = NSEQ, .n_ctx = NCTX, .kv_type = SB_TYPE_F32};
    CHECK(kv_pool_create(m, &pp, &kp) == SB_OK);
    int32_t stems[3][NCTX];
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < NCTX; i++) stems[s][i] = (int32_t)(s * 100 + i);
    bool open[NSEQ] = {0};
    int32_t want_tok[NSEQ][NCTX]; /* what each sequence's tokens are meant to be */
    int bad = 0, refused = 0, ops[6] = {0};
    kv_pool_stats prev = kv_pool_get_stats(kp);
    for (int it = 0; it < 20000; it++) {
        const int32_t s = (int32_t)rnd(NSEQ);
        const int op = (int)rnd(6);
        if (!open[s]) { /* open, attach a prefix of a stem (with a random tail) */
            int32_t got;
            CHECK(kv_pool_seq_open(kp, &got) == SB_OK);
            open[got] = true;
            const int stem = (int)rnd(3), n = 1 + (int)rnd(NCTX - 1), keep = (int)rnd((uint32_t)n + 1);
            for (int i = 0; i < n; i++) want_tok[got][i] = i < keep ? stems[stem][i] : (int32_t)(1000 + rnd(3));
            int64_t r;
            kv_pool_attach_prefix(kp, got, want_tok[got], n, &r);
            if (r < 0 || r > n || memcmp(kv_pool_seq_tokens(kp, got), want_tok[got], (size_t)r * 4)) bad++;
            ops[0]++;
        } else if (op == 0) {
            kv_pool_seq_close(kp, s);
            open[s] = false;
            ops[1]++;
        } else if (op == 1) {
            const int64_t n = kv_pool_seq_len(kp, s);
            kv_pool_seq_truncate(kp, s, n ? (int64_t)rnd((uint32_t)n) : 0);
            ops[2]++;
        } else { /* append k tokens continuing a stem (or random), commit or undo */
            const int64_t n = kv_pool_seq_len(kp, s), k = 1 + (int64_t)rnd(9);
            if (n + k > NCTX) continue;
            int32_t *tok = want_tok[s];
            memcpy(tok, kv_pool_seq_tokens(kp, s), (size_t)n * 4);
            for (int64_t i = n; i < n + k; i++) tok[i] = rnd(4) ? stems[rnd(2)][i] : (int32_t)(1000 + rnd(3));
            const int64_t need = kv_pool_blocks_needed(kp, s, k), avail = kv_pool_blocks_available(kp);
            kv_pool_undo u;
            const sb_status st = kv_pool_reserve(kp, s, k, &u);
            if (need > avail) {
                refused++;
                if (st != SB_ERR_CONTEXT_FULL) bad++;
                continue;
            }
            if (st != SB_OK) {
                bad++;
                continue;
            }
            float *kbuf = kv_pool_layer(kp, 0, 0);
            for (int64_t p = n; p < n + k; p++) row_of(tok, p, kbuf + 2 * kv_pool_row(kp, s, p));
            if (op == 2) { /* a failed run: the rows written are garbage for nobody */
                kv_pool_unreserve(kp, &u);
                ops[3]++;
            } else {
                kv_pool_commit(kp, &u, tok + n, k);
                ops[4]++;
            }
        }
        bad += check_all(kp, open);
        const kv_pool_stats st = kv_pool_get_stats(kp);
        if (st.n_hit_tokens < prev.n_hit_tokens || st.n_evictions < prev.n_evictions) bad++;
        prev = st;
    }
    const kv_pool_stats st = kv_pool_get_stats(kp);
    printf("20000 operations (open+attach %d, close %d, truncate %d, undo %d, commit %d, refused %d): hits %lld tokens, "
           "%lld copies on write, %lld evictions; %d inconsistencies\n", ops[0], ops[1], ops[2], ops[3], ops[4], refused,
           (long long)st.n_hit_tokens, (long long)st.n_cow, (long long)st.n_evictions, bad);
    CHECK_EQ_INT(bad, 0);
    CHECK(st.n_hit_tokens > 1000 && st.n_cow > 100 && st.n_evictions > 100 && refused > 0); /* every path was taken */
    /* all closed: nothing in use, full blocks cached */
    for (int32_t s = 0; s < NSEQ; s++)
        if (open[s]) kv_pool_seq_close(kp, s);
    const kv_pool_stats end = kv_pool_get_stats(kp);
    CHECK_EQ_INT(end.n_used, 0);
    CHECK(end.n_cached > 0 && end.n_cached + end.n_free == NBLOCKS);
    /* parameters */
    kv_pool *x;
    kv_pool_params bad_p = pp;
    bad_p.block_size = 0;
    CHECK(kv_pool_create(m, &bad_p, &x) == SB_ERR_INVALID_ARG);
    /* a shared-KV model (gemma4: the trailing layers read earlier ones' caches): buffers for the
     * layers that own a cache only, at their own widths */
    m->hp.n_layer = 3;
    m->hp.n_layer_kv = 2;
    m->hp.layer_n_head_kv[1] = 3;
    CHECK(kv_pool_create(m, &pp, &x) == SB_OK);
    if (x) {
        CHECK(kv_pool_layer(x, 0, 0) && kv_pool_layer(x, 1, 1) && kv_pool_layer(x, 1, 0) != kv_pool_layer(x, 0, 0));
        memset(kv_pool_layer(x, 1, 1), 0x5A, (size_t)(3 * 2 * 4 * kv_pool_rows(x))); /* layer 1 is 3 heads of 2 wide (f32) */
        kv_pool_free(x);
    }
    kv_pool_free(kp);
    free(m);
    return test_summary();
}
