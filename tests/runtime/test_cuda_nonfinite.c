/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_nonfinite.c — the CUDA LM head's non-finite flag (cu_epilogue.nonfinite,
 * exec_cuda_output_finite, backend_ops.output_finite): on a copy of the llama Q8_0 test model
 * whose token 300 embeds as NaN (the scale of its row's first block; output.weight is its own
 * tensor, so other tokens stay finite), a CUDA session's decode of token 300 fails with
 * SB_ERR_NUMERIC naming its position, from the flag the LM head set (checked_runs counts a checked
 * run; the session then did not scan the logits itself), and the next decode of a clean token at the
 * same position succeeds (the flag is cleared before every run) — through each depth class's graph
 * it reaches; the failed step leaves the cache as it was. The flag is k_mmvq1's: executor fusions
 * off, since fused this model's 512-row head runs through the multi-GEMV entry (cu_matmul_q8_multi,
 * which does not check: heads of up to GF_ROWS_MAX rows), as it does with direct outputs off (the
 * logits copied after the run) — in both, nothing is checked on the device and the host scan still
 * finds the NaN. Each clean decode's logits are the same bits in all three runs. The batched
 * engine's one-row steps (paged plans) the same way: the bad token fails naming its item and changes
 * nothing, the next clean one succeeds, both checked by the LM head; and its four-row steps, whose
 * LM head is the int8 MMA GEMM, flagged there too.
 * SKIPs (exit 0, with the reason) when no CUDA device is usable — CI has none.
 */
#include "runtime/exec_cuda.h"
#include "runtime/session.h"
#include "runtime/batch.h"
#include "runtime/kv_pool.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "base/status.h"
#include "test.h"
#include "runtime/tmp_dir.h"

#include <string.h>

#define BAD_TOKEN 300

/* src with the f16 scale of token BAD_TOKEN's first Q8_0 block in token_embd set to NaN, written
 * to path; false if src is not such a file */
static bool write_poisoned(const char *src, const char *path) {
    gguf_file f;
    if (gguf_open(src, &f) != SB_OK) return false;
    gguf_writer *w;
    uint8_t *copy = NULL;
    bool ok = gguf_writer_create(&w) == SB_OK, poked = false;
    for (int64_t i = 0; ok && i < f.n_kv; i++) ok = gguf_writer_copy_kv(w, &f.kvs[i]) == SB_OK;
    for (int64_t i = 0; ok && i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        const void *data = t->data;
        if (!strcmp(t->name, "token_embd.weight")) {
            const uint64_t row = (uint64_t)t->ne[0] / 32 * 34; /* Q8_0: 32 values a block, f16 scale + 32 int8 */
            ok = t->type == SB_TYPE_Q8_0 && t->ne[1] > BAD_TOKEN && (copy = malloc(t->nbytes)) != NULL;
            if (!ok) break;
            memcpy(copy, t->data, t->nbytes);
            copy[BAD_TOKEN * row] = 0x00, copy[BAD_TOKEN * row + 1] = 0x7E; /* f16 NaN, little-endian */
            data = copy, poked = true;
        }
        ok = gguf_writer_add_tensor(w, t->name, t->type, 4, t->ne, data) == SB_OK;
    }
    ok = ok && poked && gguf_writer_write(w, path) == SB_OK;
    gguf_writer_free(w);
    free(copy);
    gguf_close(&f);
    return ok;
}

static exec_cuda *session_cx(const rt_session *s) { return backend_cuda_exec(rt_session_backend(s)); }

/* a decode of tok at the session's next position; for a clean token, its logits into out */
static sb_status decode(rt_session *s, int32_t tok, float *out, int64_t V) {
    const sb_status st = rt_session_eval(s, &tok, 1, false, NULL);
    if (st == SB_OK && out) memcpy(out, rt_session_logits(s), (size_t)V * sizeof *out);
    return st;
}

/* steps decodes after a 3-token prompt, each first trying BAD_TOKEN (must fail, cache unchanged)
 * then a clean token; direct, fuse: cu_config.direct_out, .fuse. logits [steps, V] of the clean tokens. */
static void run(const rt_model *m, bool direct, bool fuse, int steps, float *logits) {
    const int64_t V = m->hp.n_vocab;
    rt_session *s;
    const rt_session_params sp = {.n_ctx = 512, .n_threads = 2, .device = 1, .cuda_graph = 1};
    CHECK(rt_session_create(m, &sp, &s) == SB_OK);
    if (!s) return;
    exec_cuda *cx = session_cx(s);
    CHECK(cx != NULL);
    if (!cx) {
        rt_session_free(s);
        return;
    }
    cu_config c = *exec_cuda_config(cx);
    c.direct_out = direct;
    c.fuse = fuse;
    exec_cuda_set_config(cx, &c);
    const bool checked = direct && !fuse;
    const int32_t prompt[3] = {1, 2, 3};
    CHECK(rt_session_eval(s, prompt, 3, false, NULL) == SB_OK);
    for (int k = 0; k < steps; k++) {
        const int64_t pos = rt_session_n_cached(s), before = exec_cuda_get_stats(cx).checked_runs;
        sb_status st = decode(s, BAD_TOKEN, NULL, V);
        char want[64];
        snprintf(want, sizeof want, "(position %lld, token %d", (long long)pos, BAD_TOKEN);
        CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "NaN logits") && strstr(sb_last_error(), want), "step %d, direct %d fuse %d: %s: %s", k,
               direct, fuse, sb_status_str(st), sb_last_error());
        CHECK(rt_session_n_cached(s) == pos);
        const int64_t mid = exec_cuda_get_stats(cx).checked_runs;
        CHECKF(mid - before == (checked ? 1 : 0), "step %d, direct %d fuse %d: %lld checked runs for the bad token", k, direct, fuse, (long long)(mid - before));
        st = decode(s, 5 + k, logits + k * V, V);
        CHECKF(st == SB_OK, "step %d, direct %d fuse %d: the clean token after it: %s: %s", k, direct, fuse, sb_status_str(st), sb_last_error());
        CHECKF(exec_cuda_get_stats(cx).checked_runs - mid == (checked ? 1 : 0), "step %d, direct %d fuse %d: the clean token checked wrongly", k, direct, fuse);
        CHECK(exec_cuda_output_finite(cx, 0) == (checked ? 1 : -1));
        if (test_failed_ > 8) break; /* one cause; its first lines say it */
    }
    rt_session_free(s);
}

/* the engine, fusions off: a one-row step of BAD_TOKEN fails from the flag, a clean one after it succeeds */
static void run_engine(const rt_model *m) {
    const rt_engine_params ep = {.n_seq_max = 1, .n_ctx = 256, .n_threads = 2, .kv_type = SB_TYPE_F16, .device = 1};
    rt_engine *e = NULL;
    CHECK(rt_engine_create(m, &ep, &e) == SB_OK);
    exec_cuda *cx = e ? backend_cuda_exec(rt_engine_backend(e)) : NULL;
    CHECK(cx != NULL);
    int32_t a = -1;
    if (cx && kv_pool_seq_open(rt_engine_pool(e), &a) == SB_OK) {
        cu_config c = *exec_cuda_config(cx);
        c.fuse = 0;
        exec_cuda_set_config(cx, &c);
        const rt_batch_item prompt[3] = {{a, 1, false}, {a, 2, false}, {a, 3, true}};
        CHECK(rt_engine_step(e, prompt, 3, NULL) == SB_OK);
        for (int k = 0; k < 20; k++) {
            const int64_t len = kv_pool_seq_len(rt_engine_pool(e), a), before = exec_cuda_get_stats(cx).checked_runs;
            const rt_batch_item bad = {a, BAD_TOKEN, true}, good = {a, 5 + k, true};
            sb_status st = rt_engine_step(e, &bad, 1, NULL);
            CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "NaN logits (item 0"), "engine step %d: %s: %s", k, sb_status_str(st),
                   sb_last_error());
            CHECK(kv_pool_seq_len(rt_engine_pool(e), a) == len && exec_cuda_get_stats(cx).checked_runs - before == 1);
            st = rt_engine_step(e, &good, 1, NULL);
            CHECKF(st == SB_OK && kv_pool_seq_len(rt_engine_pool(e), a) == len + 1, "engine step %d, the clean token: %s: %s", k,
                   sb_status_str(st), sb_last_error());
            CHECK(exec_cuda_get_stats(cx).checked_runs - before == 2 && exec_cuda_output_finite(cx, 0) == 1);
            if (test_failed_ > 8) break;
        }
    }
    rt_engine_free(e);
}

/* the engine, default settings, four sequences a step: the LM head over 4 rows runs the int8 MMA GEMM
 * (T >= cu_config.mma_min_t), whose flag names the bad item; the clean step after it succeeds, both
 * checked on the device (the host does not scan the 4 x n_vocab logits) */
static void run_engine_rows(const rt_model *m) {
    const rt_engine_params ep = {.n_seq_max = 4, .n_ctx = 256, .n_threads = 2, .kv_type = SB_TYPE_F16, .device = 1};
    rt_engine *e = NULL;
    CHECK(rt_engine_create(m, &ep, &e) == SB_OK);
    exec_cuda *cx = e ? backend_cuda_exec(rt_engine_backend(e)) : NULL;
    int32_t sq[4] = {-1, -1, -1, -1};
    bool open = cx != NULL;
    for (int q = 0; q < 4 && open; q++) open = kv_pool_seq_open(rt_engine_pool(e), &sq[q]) == SB_OK;
    CHECK(open);
    for (int q = 0; q < 4 && open; q++) {
        const rt_batch_item prompt[2] = {{sq[q], 1 + q, false}, {sq[q], 7 + q, true}};
        CHECK(rt_engine_step(e, prompt, 2, NULL) == SB_OK);
    }
    if (open) { /* a clean step first: a step class runs eagerly the first time, unchecked; its graph, which
                 * the device check needs, is captured at its second run (exec_cuda_run.c) */
        const rt_batch_item warm[4] = {{sq[0], 11, true}, {sq[1], 12, true}, {sq[2], 13, true}, {sq[3], 14, true}};
        CHECK(rt_engine_step(e, warm, 4, NULL) == SB_OK);
    }
    for (int k = 0; k < 10 && open; k++) {
        const int64_t before = exec_cuda_get_stats(cx).checked_runs;
        rt_batch_item it[4];
        for (int q = 0; q < 4; q++) it[q] = (rt_batch_item){sq[q], q == 1 ? BAD_TOKEN : 20 + k + q, true};
        sb_status st = rt_engine_step(e, it, 4, NULL);
        CHECKF(st == SB_ERR_NUMERIC && strstr(sb_last_error(), "NaN logits (item 1"), "4-row engine step %d: %s: %s", k, sb_status_str(st),
               sb_last_error());
        CHECKF(exec_cuda_get_stats(cx).checked_runs - before == 1, "4-row engine step %d: the LM head did not check the bad step", k);
        it[1].token = 40 + k;
        st = rt_engine_step(e, it, 4, NULL);
        CHECKF(st == SB_OK, "4-row engine step %d, clean: %s: %s", k, sb_status_str(st), sb_last_error());
        CHECKF(exec_cuda_get_stats(cx).checked_runs - before == 2 && exec_cuda_output_finite(cx, 0) == 1,
               "4-row engine step %d: the LM head did not check the clean step", k);
        if (test_failed_ > 8) break;
    }
    rt_engine_free(e);
}

int main(void) {
    char why[512];
    if (!exec_cuda_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 0;
    }
    if (!tmp_dir_create("nonfinite")) return 1;
    const char *path = tmp_path("nan-embd.gguf");
    if (!write_poisoned(test_data_path("models/test-llama-q8_0.gguf"), path)) {
        printf("SKIP: no models/test-llama-q8_0.gguf with a Q8_0 token_embd under the test data\n");
        return 0;
    }
    rt_model *m = NULL;
    CHECK(rt_model_load(path, NULL, &m) == SB_OK);
    if (m) {
        const int steps = 140; /* past the first depth class (cu_config.attn_small, 128 keys) */
        const int64_t V = m->hp.n_vocab;
        const size_t bytes = (size_t)(steps * V) * sizeof(float);
        float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
        CHECK(a && b && c);
        if (a && b && c) {
            run(m, true, false, steps, a);  /* checked by the LM head */
            run(m, false, false, steps, b); /* copied: the host scans */
            run(m, true, true, steps, c);   /* fused: the multi-GEMV head, the host scans */
            CHECK(!memcmp(a, b, bytes) && !memcmp(a, c, bytes));
        }
        run_engine(m);
        run_engine_rows(m);
        free(a), free(b), free(c);
        rt_model_free(m);
    }
    unlink(path);
    tmp_dir_remove();
    return test_summary();
}
