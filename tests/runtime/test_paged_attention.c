/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_paged_attention.c — the paged form of kv_store + attention (graph/builder_paged.c)
 * against the contiguous op:
 *   - two sequences whose earlier positions sit in shuffled blocks of one shared cache, written
 *     through the slots input and read through per-token block tables, give what op_attention gives
 *     on each sequence's own contiguous cache: bit for bit for the reference op with a table, and to
 *     1e-12 NMSE through the CPU executor — decode (T = 2, one token each), a mixed prefill (the
 *     executor's blocked path falls back per token) and a one-sequence prefill (the blocked path
 *     gathers through the table), with F32/F16 caches, a sliding window and a softcap;
 *   - the run-time check: a slot outside the cache (SB_ERR_RANGE), a table entry outside it
 *     (SB_ERR_RANGE), a position past the table (SB_ERR_CONTEXT_FULL);
 *   - the shape check: a block size that does not divide the cache, a table of the wrong width.
 */
#include "runtime/exec_cpu.h"
#include "graph/plan.h"
#include "ops/ops_ref.h"
#include "quant/types.h"
#include "test.h"

enum { D = 32, HQ = 4, HKV = 2, DKV = D * HKV, BS = 4, NBLK = 12, C = NBLK * BS, NTBL = 6 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return num / (den > 0 ? den : 1);
}

/* the physical block of logical block j of sequence s (s = 0, 1): a shuffle over both */
static const int32_t phys[2][NTBL] = {{7, 2, 10, 0, 5, 9}, {3, 11, 1, 8, 6, 4}};

typedef struct paged_case {
    int ctype, window;
    float cap;
    int T, split; /* tokens [0, split) belong to sequence 0 at positions p0[0].., the rest to sequence 1 at p0[1].. */
    int p0[2];
} paged_case;

static sb_status build_and_run(const paged_case *pc, void *kc, void *vc, const float *q, const float *kx, const float *vx,
                               const int32_t *pos, const int32_t *slots, const int32_t *tbl, float *out, int32_t bs_param) {
    ir_graph *g;
    ir_graph_create(&g);
    const int T = pc->T;
    ir_ref P = ir_input_pos(g, T), S = ir_input_slots(g, T), TB = ir_input_block_table(g, NTBL, T);
    ir_ref Q = ir_input_weight(g, "q", SB_TYPE_F32, (int64_t[4]){D, HQ, T, 1});
    ir_ref K = ir_kv_store(g, ir_input_kv(g, "k", pc->ctype, (int64_t[4]){DKV, C, 1, 1}), ir_input_weight(g, "kx", SB_TYPE_F32, (int64_t[4]){DKV, T, 1, 1}), S);
    ir_ref V = ir_kv_store(g, ir_input_kv(g, "v", pc->ctype, (int64_t[4]){DKV, C, 1, 1}), ir_input_weight(g, "vx", SB_TYPE_F32, (int64_t[4]){DKV, T, 1, 1}), S);
    ir_attn_params ap = {.n_head_kv = HKV, .head_dim = D, .scale = 0.3f, .window = pc->window, .softcap = pc->cap};
    ir_output(g, ir_attention_paged(g, Q, K, V, P, TB, bs_param, &ap), "o");
    sb_status st = ir_graph_status(g);
    plan *p = NULL;
    if (st == SB_OK) {
        plan_target t;
        exec_cpu_target(&t);
        st = plan_build(g, &t, NULL, &p);
    }
    if (st == SB_OK) {
        const char *names[] = {"pos", "slots", "block_table", "q", "k", "v", "kx", "vx"};
        void *ptrs[] = {(void *)pos, (void *)slots, (void *)tbl, (void *)q, kc, vc, (void *)kx, (void *)vx};
        void *data[16] = {0};
        for (int i = 0; i < p->n_inputs; i++)
            for (int j = 0; j < 8; j++)
                if (!strcmp(p->inputs[i].name, names[j])) data[i] = ptrs[j];
        tp_pool *pool;
        tp_create(2, &pool);
        const uint64_t need = exec_cpu_arena_bytes(p, 2);
        void *arena = aligned_alloc(PLAN_ALIGN, (need + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN);
        const exec_bindings b = {.data = data, .n_data = p->n_inputs, .arena = arena, .arena_bytes = need};
        const float *o[1] = {0};
        st = exec_cpu_run(p, &b, pool, o);
        if (st == SB_OK) memcpy(out, o[0], sizeof(float) * D * HQ * T);
        free(arena);
        tp_free(pool);
    }
    plan_free(p);
    ir_graph_free(g);
    return st;
}

static void run_case(const paged_case *pc) {
    const int T = pc->T;
    const size_t es = pc->ctype == SB_TYPE_F16 ? 2 : 4;
    float *q = malloc(sizeof(float) * D * HQ * T), *kx = malloc(sizeof(float) * DKV * T), *vx = malloc(sizeof(float) * DKV * T);
    for (int i = 0; i < D * HQ * T; i++) q[i] = frand();
    for (int i = 0; i < DKV * T; i++) kx[i] = frand(), vx[i] = frand();
    /* each sequence's own contiguous cache, its history random; the paged cache holds the same rows */
    uint8_t *kseq[2], *vseq[2], *kc = calloc(C, DKV * es), *vc = calloc(C, DKV * es);
    for (int s = 0; s < 2; s++) {
        kseq[s] = calloc(NTBL * BS, DKV * es), vseq[s] = calloc(NTBL * BS, DKV * es);
        for (int r = 0; r < NTBL * BS * DKV; r++) {
            float a = frand(), b = frand();
            op_quantize_row(kseq[s] + r * es, pc->ctype, &a, 1);
            op_quantize_row(vseq[s] + r * es, pc->ctype, &b, 1);
        }
        for (int j = 0; j < NTBL * BS; j++) {
            const int row = phys[s][j / BS] * BS + j % BS;
            memcpy(kc + (size_t)row * DKV * es, kseq[s] + (size_t)j * DKV * es, DKV * es);
            memcpy(vc + (size_t)row * DKV * es, vseq[s] + (size_t)j * DKV * es, DKV * es);
        }
    }
    int32_t *pos = malloc(4 * T), *slots = malloc(4 * T), *tbl = malloc(4 * T * NTBL), *seq = malloc(4 * T);
    for (int t = 0; t < T; t++) {
        const int s = t < pc->split ? 0 : 1;
        seq[t] = s;
        pos[t] = pc->p0[s] + (s ? t - pc->split : t);
        slots[t] = phys[s][pos[t] / BS] * BS + pos[t] % BS;
        memcpy(tbl + t * NTBL, phys[s], sizeof phys[s]);
    }
    float *out = malloc(sizeof(float) * D * HQ * T), *ref = malloc(sizeof(float) * D * HQ * T), *pref = malloc(sizeof(float) * D * HQ * T);
    float sc[C];
    /* reference: per sequence, the contiguous op on its own cache after its tokens' writes */
    for (int s = 0; s < 2; s++) {
        for (int t = 0; t < T; t++)
            if (seq[t] == s) {
                op_kv_store(kseq[s], pc->ctype, DKV, kx + t * DKV, pos + t, 1);
                op_kv_store(vseq[s], pc->ctype, DKV, vx + t * DKV, pos + t, 1);
            }
        const op_attn_args a = {.D = D, .Hq = HQ, .Hkv = HKV, .ctype = pc->ctype, .scale = 0.3f, .softcap = pc->cap, .window = pc->window};
        for (int t = 0; t < T; t++)
            if (seq[t] == s) op_attention(ref, q, kseq[s], vseq[s], pos, &a, (int64_t)t * HQ, (int64_t)(t + 1) * HQ, sc);
    }
    CHECKF(build_and_run(pc, kc, vc, q, kx, vx, pos, slots, tbl, out, BS) == SB_OK, "%s", sb_last_error());
    const double e = nmse(out, ref, D * HQ * T);
    /* the reference op with the table, on the paged cache the executor just wrote */
    const op_attn_args pa = {.D = D, .Hq = HQ, .Hkv = HKV, .ctype = pc->ctype, .scale = 0.3f, .softcap = pc->cap, .window = pc->window,
                             .table = tbl, .n_tbl = NTBL, .bs = BS};
    op_attention(pref, q, kc, vc, pos, &pa, 0, (int64_t)T * HQ, sc);
    printf("T %2d (split %2d) %s window %d cap %g: exec vs contiguous NMSE %.3e; ref with table %s\n", T, pc->split,
           pc->ctype == SB_TYPE_F16 ? "f16" : "f32", pc->window, pc->cap, e, memcmp(pref, ref, sizeof(float) * D * HQ * T) ? "DIFFERS" : "bit-identical");
    CHECKF(e < 1e-12, "paged exec NMSE %.3e", e);
    CHECK(!memcmp(pref, ref, sizeof(float) * D * HQ * T));

    /* run-time checks: nothing is run */
    slots[0] = C;
    CHECK(build_and_run(pc, kc, vc, q, kx, vx, pos, slots, tbl, out, BS) == SB_ERR_RANGE && strstr(sb_last_error(), "outside the cache"));
    slots[0] = phys[seq[0]][pos[0] / BS] * BS;
    tbl[pos[0] / BS] = NBLK;
    CHECK(build_and_run(pc, kc, vc, q, kx, vx, pos, slots, tbl, out, BS) == SB_ERR_RANGE && strstr(sb_last_error(), "block table entry"));
    tbl[pos[0] / BS] = 0;
    pos[0] = NTBL * BS;
    CHECK(build_and_run(pc, kc, vc, q, kx, vx, pos, slots, tbl, out, BS) == SB_ERR_CONTEXT_FULL && strstr(sb_last_error(), "the block table holds 6"));
    /* shape check: a block size that does not divide the cache's rows */
    CHECK(build_and_run(pc, kc, vc, q, kx, vx, pos, slots, tbl, out, 5) != SB_OK && strstr(sb_last_error(), "block_size 5"));
    for (int s = 0; s < 2; s++) free(kseq[s]), free(vseq[s]);
    free(kc), free(vc), free(q), free(kx), free(vx), free(pos), free(slots), free(tbl), free(seq), free(out), free(ref), free(pref);
}

int main(void) {
    const paged_case cases[] = {
        {SB_TYPE_F32, 0, 0, 2, 1, {9, 13}},      /* decode: one token of each sequence */
        {SB_TYPE_F16, 0, 0, 2, 1, {3, 22}},
        {SB_TYPE_F32, 0, 0, 20, 9, {2, 5}},      /* a mixed prefill: token blocks hold both sequences */
        {SB_TYPE_F32, 0, 0, 17, 17, {4, 0}},     /* one sequence: the blocked path gathers through the table */
        {SB_TYPE_F16, 5, 0, 18, 11, {6, 1}},     /* a sliding window across block boundaries */
        {SB_TYPE_F16, 3, 4.0f, 16, 16, {7, 0}},  /* one sequence, window and softcap */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
    return test_summary();
}
