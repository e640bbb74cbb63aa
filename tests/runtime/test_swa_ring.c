/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_swa_ring.c — sliding-window layers kept in ring caches give the logits of
 * full caches, bit for bit, past 3x the window: on the gemma3 and gemma4 test models (windows 8
 * and 6), with prefill chunks of 4 tokens (rings of window + 4 rows, so they wrap many times),
 * decode steps, eval_all, a shallow cut the rings still hold, a deep cut they do not (recomputed
 * from the tokens), and a prefill whose prefix diverges deep. The ring sessions hold fewer KV
 * bytes. Verifier: a ring read without a window, or by more tokens than it holds, is refused.
 */
#include "graph/ir.h"
#include "runtime/session.h"
#include "test.h"

#define N_TOK 48
#define N_BATCH 4

static int32_t toks[N_TOK];

static rt_session *open_session(const rt_model *m, int swa_full) {
    rt_session *s = NULL;
    rt_session_params p = {.n_ctx = 64, .n_batch = N_BATCH, .n_threads = 2, .swa_full = swa_full};
    sb_status st = rt_session_create(m, &p, &s);
    CHECKF(st == SB_OK, "%s", sb_last_error());
    return s;
}

/* the two sessions' last logits are equal, bit for bit */
static bool same_logits(const rt_session *a, const rt_session *b, int64_t V) {
    const float *la = rt_session_logits(a), *lb = rt_session_logits(b);
    return la && lb && !memcmp(la, lb, (size_t)V * sizeof *la);
}

static void run_model(const char *rel) {
    rt_model *m = NULL;
    sb_status st = rt_model_load(test_data_path(rel), NULL, &m);
    if (st != SB_OK) {
        printf("SKIP %s: %s\n", rel, sb_last_error());
        return;
    }
    const int64_t V = m->hp.n_vocab, W = m->hp.n_swa;
    CHECK(W > 0 && 3 * W + 8 < N_TOK);
    uint64_t seed = 0x5eed0000u + (uint64_t)W;
    for (int i = 0; i < N_TOK; i++) toks[i] = (int32_t)(test_rand_u64(&seed) % (uint64_t)V);
    rt_session *ring = open_session(m, 0), *full = open_session(m, 1);
    if (!ring || !full) goto done;
    CHECKF(rt_session_kv_bytes(ring) < rt_session_kv_bytes(full), "%s: ring %llu bytes, full %llu", rel,
           (unsigned long long)rt_session_kv_bytes(ring), (unsigned long long)rt_session_kv_bytes(full));
    /* prefill 10 (chunks of 4), then decode to N_TOK, comparing every step */
    CHECK(rt_session_eval(ring, toks, 10, false, NULL) == SB_OK && rt_session_eval(full, toks, 10, false, NULL) == SB_OK);
    CHECK(same_logits(ring, full, V));
    int diff = 0;
    for (int i = 10; i < N_TOK; i++) {
        CHECK(rt_session_eval(ring, &toks[i], 1, false, NULL) == SB_OK && rt_session_eval(full, &toks[i], 1, false, NULL) == SB_OK);
        diff += !same_logits(ring, full, V);
    }
    CHECKF(diff == 0, "%s: %d of %d decode steps differ", rel, diff, N_TOK - 10);
    /* a shallow cut the rings hold: re-decode the last 2 tokens */
    CHECK(rt_session_truncate(ring, N_TOK - 2) == SB_OK && rt_session_truncate(full, N_TOK - 2) == SB_OK);
    CHECK_EQ_INT(rt_session_n_cached(ring), N_TOK - 2);
    CHECK(rt_session_eval(ring, &toks[N_TOK - 2], 2, false, NULL) == SB_OK && rt_session_eval(full, &toks[N_TOK - 2], 2, false, NULL) == SB_OK);
    CHECK(same_logits(ring, full, V));
    /* a deep cut: position 12's window was overwritten long ago, so [0, 12) is evaluated again (in
     * one call: chunks of 4, which the full session repeats, since a chunk's shape can change the
     * last bits of a matmul) */
    CHECK(rt_session_truncate(ring, 12) == SB_OK && rt_session_truncate(full, 0) == SB_OK);
    CHECK(rt_session_eval(full, toks, 12, false, NULL) == SB_OK);
    CHECK_EQ_INT(rt_session_n_cached(ring), 12);
    for (int i = 12; i < 3 * (int)W + 12; i++) {
        CHECK(rt_session_eval(ring, &toks[i], 1, false, NULL) == SB_OK && rt_session_eval(full, &toks[i], 1, false, NULL) == SB_OK);
        diff += !same_logits(ring, full, V);
    }
    CHECKF(diff == 0, "%s: %d steps after the deep cut differ", rel, diff);
    /* a prompt that diverges at 5: nothing reusable in the rings, all recomputed */
    int32_t other[N_TOK];
    memcpy(other, toks, sizeof other);
    other[5] = (other[5] + 1) % (int32_t)V;
    int64_t reused_ring = -1, reused_full = -1;
    CHECK(rt_session_prefill(ring, other, N_TOK, &reused_ring) == SB_OK && rt_session_prefill(full, other, N_TOK, &reused_full) == SB_OK);
    CHECK_EQ_INT(reused_full, 5);
    CHECK_EQ_INT(reused_ring, 0);
    CHECK(same_logits(ring, full, V));
    /* every position's logits at once, from empty caches */
    float *la = malloc((size_t)(N_TOK * V) * sizeof *la), *lb = malloc((size_t)(N_TOK * V) * sizeof *lb);
    CHECK(rt_session_truncate(ring, 0) == SB_OK && rt_session_truncate(full, 0) == SB_OK);
    CHECK(rt_session_eval(ring, toks, N_TOK, true, la) == SB_OK && rt_session_eval(full, toks, N_TOK, true, lb) == SB_OK);
    CHECKF(!memcmp(la, lb, (size_t)(N_TOK * V) * sizeof *la), "%s: eval_all logits differ", rel);
    free(la), free(lb);
done:
    rt_session_free(ring);
    rt_session_free(full);
    rt_model_free(m);
}

/* the verifier's rule for rings */
static void test_verify(void) {
    ir_graph *g = NULL;
    CHECK(ir_graph_create(&g) == SB_OK);
    const int64_t D = 8, T = 4;
    ir_ref pos = ir_input_pos(g, T);
    ir_ref q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, 2, T, 1});
    ir_ref kc = ir_input_kv_ring(g, "cache_k.0", SB_TYPE_F32, (int64_t[4]){D, 10, 1, 1});
    ir_ref vc = ir_input_kv_ring(g, "cache_v.0", SB_TYPE_F32, (int64_t[4]){D, 10, 1, 1});
    ir_attn_params ap = {.n_head_kv = 1, .head_dim = (int32_t)D, .scale = 0.3f, .window = 7};
    ir_ref a = ir_attention(g, q, kc, vc, pos, &ap);
    ir_output(g, a, "y");
    CHECK(ir_verify(g) == SB_OK); /* 10 >= 7 + 4 - 1 */
    g->nodes[a].ip[2] = 8;        /* window 8: needs 11 rows */
    CHECK(ir_verify(g) != SB_OK && strstr(sb_last_error(), "ring"));
    g->nodes[a].ip[2] = 0;        /* no window at all */
    CHECK(ir_verify(g) != SB_OK);
    ir_graph_free(g);
}

int main(void) {
    test_verify();
    run_model("models/test-gemma3-f32.gguf");
    run_model("models/test-gemma4-f32.gguf");
    run_model("models/test-gemma3-q4_k_m.gguf");
    return test_summary();
}
