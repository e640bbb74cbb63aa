/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/test_model_api.c — the model/session/sampler/generation C ABI: load errors name their
 * cause with distinct statuses (missing file, unknown architecture, missing tensor, wrong shape, bad
 * hyperparameter, vocab-only file), sessions refuse overflow and bad token ids without evaluating,
 * generation is reproducible per seed, honours n_predict, stop strings (never emitted) and
 * cancellation, and prefix reuse is reported.
 */
#include "sonicboom.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "test.h"

#include <unistd.h>

/* Rewrite a model file with one change: drop tensor `drop`, reshape tensor `reshape` to `ne`, or set
 * u32 key `key` to `val`. */
static const char *mutate(const char *src, const char *drop, const char *reshape, const int64_t *ne, const char *key, uint32_t val) {
    static char out[256];
    snprintf(out, sizeof out, "/tmp/sb_api_mut_%d.gguf", (int)getpid());
    gguf_file f;
    if (gguf_open(src, &f) != SB_OK) return NULL;
    gguf_writer *w;
    gguf_writer_create(&w);
    for (int64_t i = 0; i < f.n_kv; i++) {
        if (key && !strcmp(f.kvs[i].key, key)) gguf_writer_set_u32(w, key, val);
        else gguf_writer_copy_kv(w, &f.kvs[i]);
    }
    for (int64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        const int64_t *shape = reshape && !strcmp(t->name, reshape) ? ne : t->ne;
        gguf_writer_add_tensor(w, t->name, t->type, 4, shape, t->data);
    }
    sb_status s = gguf_writer_write(w, out);
    gguf_writer_free(w);
    gguf_close(&f);
    return s == SB_OK ? out : NULL;
}

typedef struct collect {
    char text[4096];
    size_t n;
    int calls, cancel_after;
} collect;

static int on_text(void *user, const char *text, size_t len, int32_t token) {
    (void)token;
    collect *c = (collect *)user;
    if (c->n + len < sizeof c->text) {
        memcpy(c->text + c->n, text, len);
        c->n += len;
        c->text[c->n] = 0;
    }
    return ++c->calls == c->cancel_after;
}

static void generate(sb_model *m, uint64_t seed, int64_t n_predict, const char *stop, int cancel_after, collect *c,
                     sb_status *st, sb_generate_result *res) {
    memset(c, 0, sizeof *c);
    c->cancel_after = cancel_after;
    sb_session *s;
    sb_sampler *smp;
    sb_sampler_params sp;
    sb_sampler_default_params(&sp);
    sp.seed = seed;
    sb_model_info mi;
    sb_model_get_info(m, &mi);
    CHECK(sb_session_create(m, NULL, &s) == SB_OK);
    CHECK(sb_sampler_create(&sp, mi.n_vocab, &smp) == SB_OK);
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = n_predict;
    const char *stops[1] = {stop};
    gp.stop = stops;
    gp.n_stop = stop ? 1 : 0;
    *st = sb_generate(s, smp, "And it came to pass", 19, &gp, on_text, c, res);
    sb_sampler_free(smp);
    sb_session_free(s);
}

int main(void) {
    const char *llama = test_data_path("models/test-llama-q8_0.gguf");
    char llama_path[4096];
    snprintf(llama_path, sizeof llama_path, "%s", llama);
    sb_model *m = NULL;
    CHECK(sb_model_load("/nonexistent.gguf", NULL, &m) == SB_ERR_IO && m == NULL);
    CHECK(sb_model_load(NULL, NULL, &m) == SB_ERR_INVALID_ARG);
    if (access(llama_path, R_OK) == 0) {
        const char *p;
        CHECK((p = mutate(llama_path, "blk.1.ffn_up.weight", NULL, NULL, NULL, 0)) != NULL);
        CHECK(sb_model_load(p, NULL, &m) == SB_ERR_MODEL_TENSOR_MISSING && strstr(sb_last_error(), "blk.1.ffn_up.weight"));
        int64_t ne[4] = {512, 256, 1, 1};
        CHECK((p = mutate(llama_path, NULL, "blk.0.attn_norm.weight", (int64_t[4]){128, 2, 1, 1}, NULL, 0)) != NULL);
        CHECK(sb_model_load(p, NULL, &m) == SB_ERR_MODEL_TENSOR_SHAPE && strstr(sb_last_error(), "attn_norm"));
        (void)ne;
        CHECK((p = mutate(llama_path, NULL, NULL, NULL, "llama.attention.head_count_kv", 3)) != NULL);
        CHECK(sb_model_load(p, NULL, &m) == SB_ERR_MODEL_HPARAM && strstr(sb_last_error(), "head_count_kv"));
        CHECK((p = mutate(llama_path, NULL, NULL, NULL, "llama.block_count", 0)) != NULL);
        CHECK(sb_model_load(p, NULL, &m) == SB_ERR_MODEL_HPARAM);
        unlink(p);
        char g4[4096];
        snprintf(g4, sizeof g4, "%s", test_data_path("models/test-gemma4-f32.gguf"));
        /* gemma4 loads; its KV cache per token counts only the 4 layers that own one (3 x 2x2x64 + 2x2x128 values) */
        CHECK(sb_model_load(g4, NULL, &m) == SB_OK);
        CHECK(sb_model_kv_bytes_per_token(m, SB_TYPE_F32) == 5120 && sb_model_kv_bytes_per_token(m, SB_TYPE_F16) == 2560);
        CHECK(sb_model_kv_bytes_per_token(m, SB_TYPE_Q8_0) == 0 && sb_model_kv_bytes_per_token(NULL, SB_TYPE_F32) == 0);
        sb_model_free(m);
        m = NULL;
        { /* an architecture the runtime does not build: SB_ERR_MODEL_ARCH naming it */
            char arch_path[256];
            snprintf(arch_path, sizeof arch_path, "/tmp/sb_api_arch_%d.gguf", (int)getpid());
            gguf_file f;
            gguf_writer *w = NULL;
            int ok = gguf_open(llama_path, &f) == SB_OK;
            if (ok) {
                ok = gguf_writer_create(&w) == SB_OK;
                for (int64_t i = 0; ok && i < f.n_kv; i++) ok = gguf_writer_copy_kv(w, &f.kvs[i]) == SB_OK;
                ok = ok && gguf_writer_set_str(w, "general.architecture", "mamba", 5) == SB_OK;
                for (int64_t i = 0; ok && i < f.n_tensors; i++)
                    ok = gguf_writer_add_tensor(w, f.tensors[i].name, f.tensors[i].type, 4, f.tensors[i].ne, f.tensors[i].data) == SB_OK;
                ok = ok && gguf_writer_write(w, arch_path) == SB_OK;
                gguf_writer_free(w);
                gguf_close(&f);
            }
            CHECK(ok);
            CHECK(sb_model_load(arch_path, NULL, &m) == SB_ERR_MODEL_ARCH && strstr(sb_last_error(), "\"mamba\" is not supported"));
            unlink(arch_path);
        }
        char voc[4096];
        snprintf(voc, sizeof voc, "%s", test_data_path("vocab/ggml-vocab-qwen2.gguf"));
        sb_status vs = sb_model_load(voc, NULL, &m);
        CHECKF(sb_status_family(vs) == SB_ERR_UNSUPPORTED, "vocab-only file: %s", sb_status_str(vs));

        /* sessions: overflow and bad ids are refused before evaluating */
        CHECK(sb_model_load(llama_path, NULL, &m) == SB_OK);
        sb_session *s;
        sb_session_params sp;
        sb_session_default_params(&sp);
        sp.n_ctx = 8;
        CHECK(sb_session_create(m, &sp, &s) == SB_OK);
        int32_t toks[10] = {1, 5, 6, 7, 8, 9, 10, 11, 12, 13};
        CHECK(sb_session_prefill(s, toks, 10, NULL) == SB_ERR_CONTEXT_FULL && strstr(sb_last_error(), "context of 8"));
        int64_t n_cached = -1;
        CHECK(sb_session_get_state(s, &n_cached, NULL) == SB_OK && n_cached == 0);
        int32_t bad[2] = {1, 100000};
        CHECK(sb_session_prefill(s, bad, 2, NULL) == SB_ERR_RANGE);
        const float *lg;
        CHECK(sb_session_get_logits(s, &lg, NULL) == SB_ERR_INVALID_ARG);
        int64_t reused = -1;
        CHECK(sb_session_prefill(s, toks, 6, &reused) == SB_OK && reused == 0);
        CHECK(sb_session_prefill(s, toks, 7, &reused) == SB_OK && reused == 6);
        CHECK(sb_session_decode(s, 3) == SB_OK);
        CHECK(sb_session_decode(s, 3) == SB_ERR_CONTEXT_FULL);
        sb_session_stats st;
        CHECK(sb_session_get_stats(s, &st) == SB_OK && st.n_reused_tokens == 6 && st.n_decode_tokens >= 1);
        sb_session_free(s);
        sp.kv_type = SB_TYPE_Q4_0;
        CHECK(sb_session_create(m, &sp, &s) == SB_ERR_INVALID_ARG);
        /* device auto: where no GPU takes the model (CI) the session runs on the CPU, bit for bit as an
         * explicit CPU session; devices out of range are refused */
        sp.kv_type = SB_TYPE_F32;
        sp.n_ctx = 64;
        sb_backend_info bi;
        CHECK(sb_backend_get_info(&bi) == SB_OK);
        float ref[2][512];
        int64_t nv[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            sp.device = k ? SB_DEVICE_AUTO : SB_DEVICE_CPU;
            CHECK(sb_session_create(m, &sp, &s) == SB_OK);
            const int dev = sb_session_device(s);
            CHECKF(dev == SB_DEVICE_CPU || (k && bi.cuda_devices > 0 && dev == SB_DEVICE_CUDA), "device %d for %s", dev, k ? "auto" : "cpu");
            CHECK(sb_session_prefill(s, toks, 6, NULL) == SB_OK && sb_session_get_logits(s, &lg, &nv[k]) == SB_OK);
            if (nv[k] > 0 && nv[k] <= 512) memcpy(ref[k], lg, (size_t)nv[k] * sizeof *lg);
            if (k && dev == SB_DEVICE_CPU) CHECK(nv[0] == nv[1] && nv[0] > 0 && nv[0] <= 512 && !memcmp(ref[0], ref[1], (size_t)nv[0] * sizeof *lg));
            sb_session_free(s);
        }
        sp.device = 3;
        CHECK(sb_session_create(m, &sp, &s) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "auto"));
        sp.device = -1;
        CHECK(sb_session_create(m, &sp, &s) == SB_ERR_INVALID_ARG);
        CHECK(sb_session_device(NULL) == -1);
        /* the CUDA settings: every listed value is accepted (a CPU session ignores them), others refused by name */
        sp.device = SB_DEVICE_CPU;
        const int good[][3] = {{1, 1, SB_TYPE_Q8_K}, {-1, -1, SB_TYPE_Q8_1}}, refused[][3] = {{2, 0, 0}, {0, -2, 0}, {0, 0, SB_TYPE_Q8_0}};
        for (int k = 0; k < 2; k++) {
            sp.cuda_graphs = good[k][0], sp.codegen = good[k][1], sp.act_type = good[k][2];
            CHECK(sb_session_create(m, &sp, &s) == SB_OK);
            sb_session_free(s);
        }
        static const char *const what[3] = {"cuda_graphs", "codegen", "act_type"};
        for (int k = 0; k < 3; k++) {
            sp.cuda_graphs = refused[k][0], sp.codegen = refused[k][1], sp.act_type = refused[k][2];
            CHECKF(sb_session_create(m, &sp, &s) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), what[k]), "%s: %s", what[k], sb_last_error());
        }
        sp.cuda_graphs = sp.codegen = sp.act_type = 0;
        /* ignore_eos: a seed whose text ends at an end-of-generation token runs to n_predict with it */
        sb_sampler_params hot;
        sb_sampler_default_params(&hot);
        hot.temp = 1.5f, hot.top_k = 0, hot.top_p = 1, hot.min_p = 0, hot.seed = 4;
        sb_generate_params gp;
        sb_generate_default_params(&gp);
        CHECK(gp.ignore_eos == 0);
        gp.n_predict = 100;
        sb_generate_result gr[2];
        sb_model_info tmi;
        CHECK(sb_model_get_info(m, &tmi) == SB_OK);
        for (int k = 0; k < 2; k++) {
            sb_sampler *smp = NULL;
            gp.ignore_eos = k;
            CHECK(sb_session_create(m, NULL, &s) == SB_OK && sb_sampler_create(&hot, tmi.n_vocab, &smp) == SB_OK);
            CHECK(sb_generate(s, smp, "a", 1, &gp, NULL, NULL, &gr[k]) == SB_OK);
            sb_sampler_free(smp);
            sb_session_free(s);
        }
        CHECKF(gr[0].stop == SB_STOP_EOG && gr[0].n_generated < 100, "seed 4 without ignore_eos: stop %d after %lld",
               (int)gr[0].stop, (long long)gr[0].n_generated);
        CHECK(gr[1].stop == SB_STOP_LENGTH && gr[1].n_generated == 100);
        sb_model_free(m);
    } else {
        printf("SKIP: shared models absent; model-error cases not run\n");
    }

    /* generation on the embedded model */
    const char *emb = getenv("SB_MODEL");
    char emb_path[4096] = "models/sonicboom-kjv-13m-q8_0.gguf";
    if (emb && *emb) snprintf(emb_path, sizeof emb_path, "%s", emb);
    if (sb_model_load(emb_path, NULL, &m) != SB_OK) {
        printf("FAIL: embedded model %s: %s\n", emb_path, sb_last_error());
        CHECK(0);
        return test_summary();
    }
    collect a, b, c;
    sb_status sa, sbb, sc;
    sb_generate_result ra, rb, rc;
    generate(m, 11, 24, NULL, 0, &a, &sa, &ra);
    generate(m, 11, 24, NULL, 0, &b, &sbb, &rb);
    generate(m, 12, 24, NULL, 0, &c, &sc, &rc);
    CHECK(sa == SB_OK && sbb == SB_OK && sc == SB_OK);
    CHECKF(!strcmp(a.text, b.text), "same seed, different text:\n%s\n%s", a.text, b.text);
    CHECK(strcmp(a.text, c.text) != 0);
    CHECK(ra.n_generated == 24 && ra.stop == SB_STOP_LENGTH);
    printf("seed 11: \"%s\"\n", a.text);
    /* a stop string taken from the seed-11 text ends generation there and is not emitted */
    char stop[8] = {0};
    size_t at = a.n / 2;
    memcpy(stop, a.text + at, 4);
    collect d;
    sb_status sd;
    sb_generate_result rd;
    generate(m, 11, 24, stop, 0, &d, &sd, &rd);
    CHECK(sd == SB_OK && rd.stop == SB_STOP_STRING);
    CHECKF(strstr(d.text, stop) == NULL && !strncmp(d.text, a.text, d.n) && d.n <= at, "stop \"%s\": \"%s\"", stop, d.text);
    /* cancellation from the callback */
    collect e;
    sb_status se;
    sb_generate_result re;
    generate(m, 11, 24, NULL, 3, &e, &se, &re);
    CHECK(se == SB_ERR_CANCELLED && e.calls == 3);
    sb_model_free(m);
    return test_summary();
}
