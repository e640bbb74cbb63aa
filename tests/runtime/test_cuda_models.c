/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_cuda_models.c — every model in shared/testdata/models run on CUDA:
 *  1. against llama.cpp's logits (.ref), prompt as one batch then teacher-forced decode, with
 *     test_model_refs' thresholds: F32/F16/BF16 NMSE <= 1e-5 (gemma 2e-5), quantized <= 1e-3 (gemma4
 *     Q4_K_M: llama.cpp's own spread on that file, 2.4e-2) and the same argmax wherever the
 *     reference's top-two margin exceeds 0.05;
 *  2. CUDA vs the CPU executor on the same file and tokens (same bounds);
 *  3. CUDA-graph replay vs eager execution: bit-identical logits (decode steps, and the prompt
 *     evaluated twice: its plan runs eagerly first, then from the graph captured on second use);
 *  3c. the executor-level GEMV-epilogue fusion: bit-identical logits, fewer kernels;
 *  3e. the decode logits written by the LM head straight into the session's page-locked buffer
 *     (the default) or copied after the step: bit-identical logits;
 *  4. prefix reuse on CUDA vs the fresh batch (1e-6 F32 — the split-K decode attention sums in
 *     another order than the prefill kernel —, 1e-3 quantized).
 *  5. the prompt on an F16 KV cache, CUDA (the tensor-core flash prefill, then k_fattn.cu) vs the
 *     CPU executor on an F16 cache: NMSE <= 1e-3.
 *  6. sliding-window models (gemma3, gemma4): CUDA sessions keeping those layers in rings of
 *     window + 4 rows (chunks of 4) vs full caches, F32 and F16 KV, past 3x the window: prefill,
 *     every decode step, a shallow cut, a deep cut (recomputed); fewer KV bytes; the last step
 *     against the CPU's ring session.
 * Prints the kernels per decode step. Usage: test_cuda_models [name-substring].
 * test_cuda_models --perf MODEL [DEPTH]: the same executor as a profiler on any model — device
 * time per op family for one 512-token prefill and for decode steps at KV depth DEPTH (default
 * 0), from CUDA events between the nodes (eager), then decode tok/s with and without the graph.
 * SKIPs (exit 0, with the reason) when no CUDA device is usable — CI has none.
 */
#include "runtime/exec_cuda.h"
#include "runtime/session.h"
#include "base/status.h"
#include "ref_file.h"
#include "test.h"

#include <time.h>

static int is_float_model(const char *name) { return strstr(name, "-f32.") || strstr(name, "-f16.") || strstr(name, "-bf16."); }

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (a[i] != a[i]) return 1e30;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* one setting of a CUDA context (cu_config.h) */
#define CX_SET(cx, field, value)                       \
    do {                                               \
        cu_config c_ = *exec_cuda_config(cx);          \
        c_.field = (value);                            \
        exec_cuda_set_config(cx, &c_);                 \
    } while (0)

static exec_cuda *session_cx(const rt_session *s) { return backend_cuda_exec(rt_session_backend(s)); }

/* prompt as one batch (all logits) then each decode token alone; rows into out [n, V] */
static bool ropek_on; /* cu_config.fuse_ropek in eval_all's fused runs */
static bool direct_out = true; /* cu_config.direct_out of eval_all's sessions */
static int64_t direct_replays; /* of eval_all's last CUDA session */

static sb_status eval_all(const rt_model *m, const ref_file *r, int device, int graph, bool fuse, float *out, int32_t *kernels) {
    const int64_t V = r->n_vocab, n = (int64_t)r->n_prompt + r->n_decode;
    rt_session *s;
    rt_session_params sp = {.n_ctx = n + 8, .n_threads = 2, .device = device, .cuda_graph = graph};
    SB_TRY(rt_session_create(m, &sp, &s));
    exec_cuda *cx = session_cx(s);
    if (cx) {
        cu_config c = *exec_cuda_config(cx);
        c.fuse = fuse;
        c.fuse_ropek = fuse && ropek_on;
        c.direct_out = direct_out;
        exec_cuda_set_config(cx, &c);
    }
    sb_status st = rt_session_eval(s, r->tokens, r->n_prompt, true, out);
    for (uint32_t i = 0; st == SB_OK && i < r->n_decode; i++) {
        st = rt_session_eval(s, &r->tokens[r->n_prompt + i], 1, false, NULL);
        if (st == SB_OK) memcpy(out + (r->n_prompt + i) * V, rt_session_logits(s), (size_t)V * sizeof *out);
    }
    if (kernels && cx) *kernels = exec_cuda_get_stats(cx).kernels_last_run;
    if (cx) direct_replays = exec_cuda_get_stats(cx).direct_replays;
    rt_session_free(s);
    return st;
}

/* the prompt repeated to f16_tokens(r) tokens (more than the 64 queries below which the prefill
 * keeps k_fattn.cu: k_fattn_mma.cu's FM_TMIN), as one batch on an F16 KV cache; logits into out [n, V] */
static int64_t f16_tokens(const ref_file *r) { return (int64_t)r->n_prompt * (64 / (int64_t)r->n_prompt + 2); }
static sb_status eval_prompt_f16(const rt_model *m, const ref_file *r, int device, bool fattn_mma, float *out) {
    const int64_t n = f16_tokens(r);
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    if (!tok) return sb_fail(SB_ERR_OOM, "test: %lld tokens", (long long)n);
    for (int64_t i = 0; i < n; i++) tok[i] = r->tokens[i % r->n_prompt];
    rt_session *s;
    rt_session_params sp = {.n_ctx = n + 8, .n_threads = 2, .device = device, .kv_type = SB_TYPE_F16};
    sb_status st = rt_session_create(m, &sp, &s);
    if (st == SB_OK) {
        if (session_cx(s)) CX_SET(session_cx(s), fattn_mma, fattn_mma);
        st = rt_session_eval(s, tok, n, true, out);
        rt_session_free(s);
    }
    free(tok);
    return st;
}

/* the F16-KV bound of check_f16_kv: the quantized-model bound (as test_model_refs' F16 KV check: f16
 * Q and P inside the attention are ~1e-3 relative), except on gemma4's quantized files: their
 * scale-1 attention over unit-norm q/k is nearly one-hot and one flipped 8-bit activation code
 * moves every later layer (test_model_refs.c's table) — llama.cpp's own flash attention lands 8.9e-3
 * (Q8_0) and 2.4e-2 (Q4_K_M) from the references there, and on the CPU alone an F16 cache instead of
 * F32 moves the logits 9.8e-3 / 2.5e-2 and flips the argmax on 7/106 / 23/107 rows whose top-two
 * margin exceeds 0.05 (3/91 and 12/86 above 0.1; 0/10 and 0/3 above 1.0). So on those files the
 * README's argmax rule measures the knife edge, not the kernels: it is reported there, and gates
 * every other file. Measured (H200 and H100, 2026-12-05): tensor cores 1.03e-2 / 2.31e-2, k_fattn.cu 8.8e-4 /
 * 6.7e-4 from the CPU. */
static bool f16_kv_knife_edge(const char *gguf) { return strstr(gguf, "gemma4") && !is_float_model(gguf); }
static double f16_kv_limit(const char *gguf) { return f16_kv_knife_edge(gguf) ? 3e-2 : 1e-3; }

/* 5. an F16 KV cache: CUDA's prompt (its flash prefill on f16 tensor cores, k_fattn_mma.cu, for
 * head_dim 64/128: qwen2, gemma3 with its window, gemma4; then with that kernel off, k_fattn.cu)
 * against the CPU executor on an F16 cache: the README's comparison (NMSE within f16_kv_limit; the
 * argmax where the CPU's top-two margin exceeds 0.05, except on f16_kv_knife_edge files) */
static void check_f16_kv(const rt_model *m, const ref_file *r, const char *gguf) {
    const int64_t nv = f16_tokens(r) * r->n_vocab;
    float *hc = malloc((size_t)nv * sizeof *hc), *hm = malloc((size_t)nv * sizeof *hm), *hs = malloc((size_t)nv * sizeof *hs);
    const sb_status a0 = eval_prompt_f16(m, r, 0, true, hc), a1 = eval_prompt_f16(m, r, 1, true, hm);
    const sb_status a2 = eval_prompt_f16(m, r, 1, false, hs);
    CHECKF(a0 == SB_OK && a1 == SB_OK && a2 == SB_OK, "%s: F16 KV: CPU %s, CUDA %s, CUDA without the tensor-core prefill %s: %s", gguf,
           sb_status_str(a0), sb_status_str(a1), sb_status_str(a2), sb_last_error());
    if (a0 == SB_OK && a1 == SB_OK && a2 == SB_OK) {
        const int64_t rows = f16_tokens(r);
        const ref_cmp cm = ref_compare(hm, hc, rows, r->n_vocab), cs = ref_compare(hs, hc, rows, r->n_vocab);
        const double em = cm.nmse, es = cs.nmse, lim = f16_kv_limit(gguf);
        const bool argmax_ok = f16_kv_knife_edge(gguf) || (!cm.argmax_bad && !cs.argmax_bad);
        const bool ok = em <= lim && es <= lim && argmax_ok;
        printf("%-28s F16 KV cache, CUDA vs CPU: NMSE %.3e (tensor-core flash prefill), %.3e (k_fattn.cu), limit %.0e, argmax %d+%d/%d bad%s%s\n",
               gguf, em, es, lim, cm.argmax_bad, cs.argmax_bad, cm.argmax_checked, f16_kv_knife_edge(gguf) ? " (reported)" : "", ok ? "" : "  FAIL");
        CHECKF(ok, "%s: F16 KV cache, CUDA vs CPU NMSE %.3e (tensor cores) / %.3e (k_fattn.cu), limit %.0e; argmax bad %d / %d", gguf, em, es,
               lim, cm.argmax_bad, cs.argmax_bad);
    }
    free(hc);
    free(hm);
    free(hs);
}

/* 6. rings (swa_full 0) vs full caches (1) on CUDA, sessions of N_BATCH-token chunks, kv_type F32
 * and F16 (the tensor-core prefill): the logits of every step within lim (the decode attention's
 * splits follow the cache rows, so the sums' order may differ: 1e-6 for float models on F32, else
 * the F16 / quantized bounds), then the last step against the CPU's ring session (the model's CUDA vs
 * CPU limit on F32, f16_kv_limit on F16) */
#define RING_BATCH 4
static rt_session *ring_session(const rt_model *m, int64_t n_ctx, int device, int swa_full, int kv_type) {
    rt_session *s = NULL;
    rt_session_params p = {.n_ctx = n_ctx, .n_batch = RING_BATCH, .n_threads = 2, .device = device, .swa_full = swa_full, .kv_type = kv_type};
    const sb_status st = rt_session_create(m, &p, &s);
    CHECKF(st == SB_OK, "ring session (device %d, swa_full %d): %s", device, swa_full, sb_last_error());
    return st == SB_OK ? s : NULL;
}
static void check_swa_rings(const rt_model *m, const char *gguf, double f32_cpu_lim) {
    const int64_t W = m->hp.n_swa, V = m->hp.n_vocab, N = 3 * W + 20;
    if (W <= 0) return;
    int32_t *tok = malloc((size_t)N * sizeof *tok);
    uint64_t seed = 0x5eed0000u + (uint64_t)W;
    for (int64_t i = 0; i < N; i++) tok[i] = (int32_t)(test_rand_u64(&seed) % (uint64_t)V);
    for (int kv = 0; kv < 2; kv++) {
        const int kv_type = kv ? SB_TYPE_F16 : SB_TYPE_F32;
        const double lim = !kv && is_float_model(gguf) ? 1e-6 : f16_kv_limit(gguf), cpu_lim = kv ? f16_kv_limit(gguf) : f32_cpu_lim;
        rt_session *ring = ring_session(m, N + 8, 1, 0, kv_type), *full = ring_session(m, N + 8, 1, 1, kv_type);
        rt_session *cpu = ring_session(m, N + 8, 0, 0, kv_type);
        if (!ring || !full || !cpu) goto next;
        CHECKF(rt_session_kv_bytes(ring) < rt_session_kv_bytes(full), "%s: CUDA ring %llu KV bytes, full %llu", gguf,
               (unsigned long long)rt_session_kv_bytes(ring), (unsigned long long)rt_session_kv_bytes(full));
        double worst = 0;
        int bad = 0, steps = 0;
        sb_status st = rt_session_eval(ring, tok, 10, false, NULL);
        if (st == SB_OK) st = rt_session_eval(full, tok, 10, false, NULL);
        for (int64_t i = 10; st == SB_OK && i <= N; i++) { /* i == N: the shallow cut re-decoded, then the deep cut */
            const double e = nmse(rt_session_logits(ring), rt_session_logits(full), V);
            worst = e > worst ? e : worst, bad += !(e <= lim), steps++;
            if (i == N) break;
            st = rt_session_eval(ring, &tok[i], 1, false, NULL);
            if (st == SB_OK) st = rt_session_eval(full, &tok[i], 1, false, NULL);
        }
        /* a shallow cut the rings hold (the last 2 again), a deep one they do not (from 12: recomputed) */
        if (st == SB_OK) st = rt_session_truncate(ring, N - 2) == SB_OK && rt_session_truncate(full, N - 2) == SB_OK ? SB_OK : SB_ERR_INTERNAL;
        if (st == SB_OK) st = rt_session_eval(ring, &tok[N - 2], 2, false, NULL);
        if (st == SB_OK) st = rt_session_eval(full, &tok[N - 2], 2, false, NULL);
        double shallow = st == SB_OK ? nmse(rt_session_logits(ring), rt_session_logits(full), V) : 1e30;
        if (st == SB_OK) st = rt_session_truncate(ring, 12) == SB_OK && rt_session_truncate(full, 12) == SB_OK ? SB_OK : SB_ERR_INTERNAL;
        for (int64_t i = 12; st == SB_OK && i < N; i++) {
            st = rt_session_eval(ring, &tok[i], 1, false, NULL);
            if (st == SB_OK) st = rt_session_eval(full, &tok[i], 1, false, NULL);
        }
        const double deep = st == SB_OK ? nmse(rt_session_logits(ring), rt_session_logits(full), V) : 1e30;
        if (st == SB_OK) st = rt_session_eval(cpu, tok, N, false, NULL);
        const double vs_cpu = st == SB_OK ? nmse(rt_session_logits(ring), rt_session_logits(cpu), V) : 1e30;
        CHECKF(st == SB_OK, "%s: rings on CUDA (%s KV): %s %s", gguf, kv ? "f16" : "f32", sb_status_str(st), sb_last_error());
        const bool ok = st == SB_OK && !bad && shallow <= lim && deep <= lim && vs_cpu <= cpu_lim;
        printf("%-28s rings (window %lld, %lld rows) vs full caches on CUDA, %s KV: worst step NMSE %.3e (%d of %d over %.0e), cuts %.3e / %.3e, "
               "vs the CPU's rings %.3e (limit %.0e)%s\n",
               gguf, (long long)W, (long long)(W + RING_BATCH), kv ? "f16" : "f32", worst, bad, steps, lim, shallow, deep, vs_cpu, cpu_lim,
               ok ? "" : "  FAIL");
        CHECKF(ok, "%s: rings on CUDA (%s KV): %d of %d steps over %.0e (worst %.3e), cuts %.3e / %.3e, vs CPU %.3e", gguf, kv ? "f16" : "f32",
               bad, steps, lim, worst, shallow, deep, vs_cpu);
    next:
        rt_session_free(ring);
        rt_session_free(full);
        rt_session_free(cpu);
    }
    free(tok);
}

static void run_model(const char *dir, const char *gguf) {
    char path[2048];
    ref_file r;
    int got = ref_load_for_model(dir, gguf, path, sizeof path, &r);
    CHECKF(got >= 0, "%s: bad .ref", gguf);
    if (got <= 0) return;
    rt_model *m;
    sb_status s = rt_model_load(path, NULL, &m);
    if (s == SB_ERR_MODEL_ARCH) { /* architectures the runtime does not build yet (test_model_refs checks the refusal) */
        printf("%-28s skipped: %s\n", gguf, sb_last_error());
        ref_free(&r);
        return;
    }
    CHECKF(s == SB_OK, "%s: %s %s", gguf, sb_status_str(s), sb_last_error());
    if (s != SB_OK) {
        ref_free(&r);
        return;
    }
    const int64_t V = r.n_vocab, n = (int64_t)r.n_prompt + r.n_decode;
    float *cu = malloc((size_t)(n * V) * sizeof *cu), *eager = malloc((size_t)(n * V) * sizeof *eager);
    float *cpu = malloc((size_t)(n * V) * sizeof *cpu);
    int32_t kernels = 0;
    s = eval_all(m, &r, 1, 1, false, cu, &kernels);
    CHECKF(s == SB_OK, "%s: CUDA: %s %s", gguf, sb_status_str(s), sb_last_error());
    /* the decode steps' logits written by the LM head into the session's page-locked buffer */
    CHECKF(s != SB_OK || direct_replays >= (int64_t)r.n_decode, "%s: %lld of %u decode replays wrote their logits directly", gguf,
           (long long)direct_replays, r.n_decode);
    if (s == SB_OK) {
        ref_cmp c = ref_compare(cu, r.logits, n, V);
        /* gemma4 Q4_K_M: its near one-hot attention turns one 8-bit rounding into every later layer's
         * (test_model_refs.c's table): llama.cpp's own builds land 2.5e-5 (repacked), 1.73e-3
         * (--no-repack) and 2.4e-2 (-fa on) from its reference, any other float order anywhere in
         * that range — CUDA's GEMV order gave 1.735e-3 (H200, 2026-12-05, argmax 44/44) */
        double limit = is_float_model(gguf) ? (strstr(gguf, "gemma") ? 2e-5 : 1e-5) : strstr(gguf, "gemma4-q4_k_m") ? 2.4e-2 : 1e-3;
        int argmax_ok = is_float_model(gguf) || c.argmax_bad == 0;
        /* 2. CPU executor on the same tokens; 3. eager decode (graphs off) */
        sb_status s2 = eval_all(m, &r, 0, 0, false, cpu, NULL);
        sb_status s3 = eval_all(m, &r, 1, -1, false, eager, NULL);
        CHECKF(s2 == SB_OK && s3 == SB_OK, "%s: CPU %s / eager %s: %s", gguf, sb_status_str(s2), sb_status_str(s3), sb_last_error());
        double vs_cpu = s2 == SB_OK ? nmse(cu, cpu, n * V) : 1e30;
        int64_t graph_diff = 0;
        for (int64_t i = 0; s3 == SB_OK && i < n * V; i++) graph_diff += memcmp(&cu[i], &eager[i], sizeof(float)) != 0;
        printf("%-28s NMSE %.3e (limit %.1e)  argmax %d/%d  vs CPU %.3e  graph!=eager %lld  kernels/step %d%s\n", gguf, c.nmse, limit,
               c.argmax_checked - c.argmax_bad, c.argmax_checked, vs_cpu, (long long)graph_diff, kernels,
               c.nmse <= limit && argmax_ok && vs_cpu <= limit && graph_diff == 0 ? "" : "  FAIL");
        CHECKF(c.nmse <= limit, "%s: NMSE %.3e > %.1e", gguf, c.nmse, limit);
        CHECKF(argmax_ok, "%s: argmax differs on %d rows (first %d)", gguf, c.argmax_bad, c.first_bad_row);
        CHECKF(vs_cpu <= limit, "%s: CUDA vs CPU NMSE %.3e > %.1e", gguf, vs_cpu, limit);
        CHECKF(graph_diff == 0, "%s: %lld decode logits differ between graph replay and eager", gguf, (long long)graph_diff);
        /* 3c. executor-level fusion (GEMV epilogues) gives the very same logits, with fewer kernels */
        {
            int32_t kf = 0;
            sb_status s4 = eval_all(m, &r, 1, 1, true, cpu, &kf);
            CHECKF(s4 == SB_OK, "%s: fused: %s", gguf, sb_last_error());
            int64_t fd = 0;
            for (int64_t i = 0; s4 == SB_OK && i < n * V; i++) fd += memcmp(&cu[i], &cpu[i], sizeof(float)) != 0;
            printf("%-28s fused epilogues: %lld logits differ, kernels/step %d -> %d\n", gguf, (long long)fd, kernels, kf);
            CHECKF(fd == 0 && kf < kernels, "%s: fused run: %lld logits differ, %d kernels (unfused %d)", gguf, (long long)fd, kf, kernels);
            /* 3d. cu_config.fuse_ropek (K's RoPE + kv_store in the Q/K/V launch): the same bits, fewer kernels */
            int32_t kr = 0;
            ropek_on = true;
            sb_status s5 = eval_all(m, &r, 1, 1, true, cpu, &kr);
            ropek_on = false;
            CHECKF(s5 == SB_OK, "%s: fused + rope(K): %s", gguf, sb_last_error());
            int64_t rd = 0;
            for (int64_t i = 0; s5 == SB_OK && i < n * V; i++) rd += memcmp(&cu[i], &cpu[i], sizeof(float)) != 0;
            printf("%-28s fused + rope(K) experiment: %lld logits differ, kernels/step %d -> %d\n", gguf, (long long)rd, kf, kr);
            CHECKF(rd == 0 && kr <= kf, "%s: rope(K) run: %lld logits differ, %d kernels (fused %d)", gguf, (long long)rd, kr, kf);
        }
        /* 3e. the logits copied after each step instead: the same bits as the default, whose LM head
         * writes them straight into the session's page-locked buffer */
        {
            direct_out = false;
            sb_status s6 = eval_all(m, &r, 1, 1, false, cpu, NULL);
            direct_out = true;
            int64_t id = 0;
            for (int64_t i = 0; s6 == SB_OK && i < n * V; i++) id += memcmp(&cu[i], &cpu[i], sizeof(float)) != 0;
            CHECKF(s6 == SB_OK && id == 0 && direct_replays == 0, "%s: logits copied: %s, %lld logits differ, %lld direct replays", gguf,
                   sb_status_str(s6), (long long)id, (long long)direct_replays);
        }
        /* 3b. the prompt again in the same session: its plan now replays a captured graph */
        {
            rt_session *sg;
            rt_session_params sp = {.n_ctx = n + 8, .n_threads = 2, .device = 1};
            float *a = malloc((size_t)(r.n_prompt * V) * sizeof *a), *b2 = malloc((size_t)(r.n_prompt * V) * sizeof *b2);
            CHECK(rt_session_create(m, &sp, &sg) == SB_OK);
            CHECK(rt_session_eval(sg, r.tokens, r.n_prompt, true, a) == SB_OK);
            rt_session_truncate(sg, 0);
            CHECK(rt_session_eval(sg, r.tokens, r.n_prompt, true, b2) == SB_OK);
            exec_cuda_stats cs = exec_cuda_get_stats(session_cx(sg));
            CHECKF(cs.graph_captures == 1 && cs.eager_runs == 1, "%s: prompt twice: %lld captures, %lld eager runs", gguf,
                   (long long)cs.graph_captures, (long long)cs.eager_runs);
            CHECKF(!memcmp(a, b2, (size_t)(r.n_prompt * V) * sizeof *a), "%s: prompt logits differ between eager and graph replay", gguf);
            rt_session_free(sg);
            free(a);
            free(b2);
        }
        /* 4. prefix reuse on CUDA */
        if (strstr(gguf, "-f32.") || strstr(gguf, "q4_k_m")) {
            rt_session *ss;
            rt_session_params sp = {.n_ctx = n + 8, .n_threads = 2, .device = 1};
            CHECK(rt_session_create(m, &sp, &ss) == SB_OK);
            int64_t reused = -1;
            CHECK(rt_session_prefill(ss, r.tokens, r.n_prompt - 2, &reused) == SB_OK);
            CHECK(rt_session_prefill(ss, r.tokens, r.n_prompt, &reused) == SB_OK);
            CHECK_EQ_INT(reused, r.n_prompt - 2);
            double e = nmse(rt_session_logits(ss), cu + (r.n_prompt - 1) * V, V);
            double lim = strstr(gguf, "-f32.") ? 1e-6 : 1e-3;
            CHECKF(e <= lim, "%s: CUDA prefix reuse vs fresh NMSE %.3e > %.0e", gguf, e, lim);
            printf("%-28s prefix reuse vs fresh: NMSE %.3e\n", gguf, e);
            rt_session_free(ss);
        }
        check_f16_kv(m, &r, gguf);
        check_swa_rings(m, gguf, limit);
    }
    free(cu);
    free(cpu);
    free(eager);
    ref_free(&r);
    rt_model_free(m);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int perf(const char *path, int64_t depth) {
    rt_model *m;
    if (rt_model_load(path, NULL, &m) != SB_OK) {
        fprintf(stderr, "%s: %s\n", path, sb_last_error());
        return 1;
    }
    const int64_t V = m->hp.n_vocab, steps = 32;
    rt_session *s;
    rt_session_params sp = {.n_ctx = depth + 512 + 2 * steps + 8, .n_threads = 1, .device = 1};
    if (rt_session_create(m, &sp, &s) != SB_OK) {
        fprintf(stderr, "session: %s\n", sb_last_error());
        return 1;
    }
    exec_cuda *cx = session_cx(s);
    int32_t *tok = malloc((size_t)(depth + 512 + 2 * steps) * sizeof *tok);
    uint64_t rs = 42;
    for (int64_t i = 0; i < depth + 512 + 2 * steps; i++) tok[i] = (int32_t)(test_rand_u64(&rs) % (uint64_t)V);
    static char rep[16384];
    sb_status st = rt_session_eval(s, tok, 512, false, NULL); /* warm-up: plans, uploads */
    CX_SET(cx, profile, true);
    rt_session_truncate(s, 0);
    if (st == SB_OK) st = rt_session_eval(s, tok, 512, false, NULL);
    exec_cuda_profile_report(cx, rep, sizeof rep);
    printf("== prefill T=512 (eager, profiled)\n%s", rep);
    CX_SET(cx, profile, false);
    rt_session_truncate(s, 0);
    for (int64_t d = 0; st == SB_OK && d < depth; d += 512) st = rt_session_eval(s, tok + d, depth - d < 512 ? depth - d : 512, false, NULL);
    CX_SET(cx, profile, true);
    for (int64_t i = 0; st == SB_OK && i < steps; i++) st = rt_session_eval(s, tok + depth + i, 1, false, NULL);
    exec_cuda_profile_report(cx, rep, sizeof rep);
    printf("== decode at depth %lld (eager, profiled)\n%s", (long long)depth, rep);
    CX_SET(cx, profile, false);
    for (int g = 1; g >= 0 && st == SB_OK; g--) {
        CX_SET(cx, graphs, g == 1);
        rt_session_truncate(s, depth);
        st = rt_session_eval(s, tok + depth, 1, false, NULL); /* capture / warm */
        double t0 = now_s();
        for (int64_t i = 1; st == SB_OK && i < steps; i++) st = rt_session_eval(s, tok + depth + i, 1, false, NULL);
        double dt = now_s() - t0;
        printf("decode at depth %lld, %s: %.1f tok/s (%.1f us per step, %d kernels)\n", (long long)depth, g ? "CUDA graph" : "eager",
               (double)(steps - 1) / dt, 1e6 * dt / (double)(steps - 1), exec_cuda_get_stats(cx).kernels_last_run);
    }
    /* the first token after a cached prefix: 64 new tokens on 512 cached (sb bench --prefix 512,64),
     * profiled on its second run (the first builds the plan) */
    if (st == SB_OK && depth == 0) {
        rt_session_truncate(s, 0);
        st = rt_session_eval(s, tok, 512, false, NULL);
        for (int k = 0; k < 2 && st == SB_OK; k++) {
            rt_session_truncate(s, 512);
            CX_SET(cx, profile, k == 1);
            st = rt_session_eval(s, tok + 512, 64, false, NULL);
        }
        exec_cuda_profile_report(cx, rep, sizeof rep);
        CX_SET(cx, profile, false);
        printf("== 64 tokens after a cached 512 (eager, profiled)\n%s", rep);
    }
    if (st != SB_OK) fprintf(stderr, "perf: %s\n", sb_last_error());
    free(tok);
    rt_session_free(s);
    rt_model_free(m);
    return st == SB_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    char why[512];
    if (!exec_cuda_available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "--perf")) return perf(argv[2], argc >= 4 ? atoll(argv[3]) : 0);
    char dirpath[4096];
    snprintf(dirpath, sizeof dirpath, "%s", test_data_path("models"));
    if (ref_for_each_model(dirpath, argc >= 2 ? argv[1] : NULL, run_model) < 0) return 0;
    return test_summary();
}
