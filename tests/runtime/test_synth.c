/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_synth.c — `sb synth`: the tiny-* presets have exactly the tensor names and
 * shapes of testdata/models/test-<arch>-f32.gguf (llama.cpp-made files); weights are N(0, 0.02^2),
 * norms ~1, rope_freqs follow the llama3 formula; the file is a pure function of (preset, seed)
 * whatever the thread count; `--type` equals synth F32 + quantize byte for byte; --vocab copies
 * every tokenizer.* key unchanged and sizes token_embd from it; the synthetic vocabulary is a valid
 * byte-fallback SPM one; bad presets, types and vocab files fail with distinct statuses.
 * Exits 77 (skip) only when the shared data is absent, after the self-contained checks passed.
 */
#include "test.h"
#include "tmp_dir.h"
#include "runtime/quantize.h"
#include "runtime/synth.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "quant/types.h"

#include <sys/stat.h>
#include <unistd.h>

static sb_status synth(const char *preset, const char *out, const char *type, const char *vocab, uint64_t seed, int threads) {
    rt_synth_opts o = {.type_name = type, .vocab_path = vocab, .seed = seed, .q = {.n_threads = threads}};
    sb_status s = rt_synth_model(preset, out, &o);
    if (s != SB_OK) fprintf(stderr, "synth %s: %s: %s\n", preset, sb_status_str(s), sb_last_error());
    return s;
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

// ---- shapes against llama.cpp's test models ----

static int shape_tests(void) {
    static const char *const pairs[][2] = {
        {"tiny-qwen2", "qwen2"}, {"tiny-qwen3", "qwen3"}, {"tiny-llama", "llama"}, {"tiny-gemma3", "gemma3"},
        {"tiny-gemma4", "gemma4"}};
    char ref[8192];
    if (!shared_file("models/test-qwen2-f32.gguf", ref, "shape comparison")) return 0;
    const char *out = tmp_path("shape.gguf");
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        snprintf(ref, sizeof ref, "%s", test_data_path("models/"));
        snprintf(ref + strlen(ref), sizeof ref - strlen(ref), "test-%s-f32.gguf", pairs[i][1]);
        CHECK(synth(pairs[i][0], out, NULL, NULL, 1, 2) == SB_OK);
        gguf_file a, b;
        if (gguf_open(out, &a) != SB_OK) { CHECK(0); continue; }
        if (gguf_open(ref, &b) != SB_OK) { CHECK(0); gguf_close(&a); continue; }
        CHECKF(a.n_tensors == b.n_tensors, "%s: %lld tensors, %s has %lld", pairs[i][0], (long long)a.n_tensors, ref,
               (long long)b.n_tensors);
        for (int64_t t = 0; t < b.n_tensors; t++) {
            const gguf_tensor *y = &b.tensors[t], *x = gguf_find_tensor(&a, y->name);
            CHECKF(x != NULL, "%s lacks %s", pairs[i][0], y->name);
            if (x) CHECKF(x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne) && x->type == SB_TYPE_F32,
                          "%s: %s shape [%lld,%lld] vs [%lld,%lld]", pairs[i][0], y->name, (long long)x->ne[0],
                          (long long)x->ne[1], (long long)y->ne[0], (long long)y->ne[1]);
        }
        // the hyperparameter keys llama.cpp reads have the reference's values
        static const char *const keys[] = {"block_count", "embedding_length", "feed_forward_length",
                                           "attention.head_count", "attention.head_count_kv"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", pairs[i][1], keys[k]);
            uint32_t va = 0, vb = 1;
            CHECKF(gguf_get_u32(&a, key, &va) == SB_OK && gguf_get_u32(&b, key, &vb) == SB_OK && va == vb, "%s: %s",
                   pairs[i][0], key);
        }
        gguf_close(&a);
        gguf_close(&b);
    }
    unlink(out);
    return 1;
}

// ---- values, determinism, quantized output ----

static void stats(const float *x, int64_t n, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *sd = sqrt(s2 / (double)n);
}

static void value_tests(void) {
    const char *a = tmp_path("a.gguf"), *b = tmp_path("b.gguf"), *c = tmp_path("c.gguf");
    CHECK(synth("tiny-llama", a, "F32", NULL, 7, 1) == SB_OK);
    CHECK(synth("tiny-llama", b, "F32", NULL, 7, 2) == SB_OK);
    CHECK(same_file(a, b));
    CHECK(synth("tiny-llama", c, "F32", NULL, 8, 2) == SB_OK);
    CHECK(!same_file(a, c));
    gguf_file f;
    if (gguf_open(a, &f) == SB_OK) {
        double m, sd;
        const gguf_tensor *e = gguf_find_tensor(&f, "token_embd.weight");
        CHECK(e && e->type == SB_TYPE_F32);
        if (e) {
            stats((const float *)e->data, e->ne[0] * e->ne[1], &m, &sd);
            CHECKF(fabs(m) < 3e-4 && fabs(sd - 0.02) < 4e-4, "token_embd mean %g sd %g", m, sd);
        }
        const gguf_tensor *o = gguf_find_tensor(&f, "output.weight");
        CHECK(o && e && memcmp(o->data, e->data, e->nbytes) != 0); /* distinct streams per tensor */
        const gguf_tensor *n = gguf_find_tensor(&f, "blk.1.ffn_norm.weight");
        if (n) {
            stats((const float *)n->data, n->ne[0], &m, &sd);
            CHECKF(fabs(m - 1.0) < 0.005 && sd > 0.01 && sd < 0.03, "norm mean %g sd %g", m, sd);
        }
        const gguf_tensor *r = gguf_find_tensor(&f, "rope_freqs.weight");
        CHECK(r && r->ne[0] == 16);
        if (r) {
            const float *v = (const float *)r->data;
            CHECKF(v[0] == 1.0f && v[15] == 32.0f, "rope_freqs %g .. %g", v[0], v[15]);
            for (int i = 1; i < 16; i++) CHECK(v[i] >= v[i - 1]);
            // one smoothed entry, recomputed: i with 2048 <= wavelen <= 8192
            for (int i = 0; i < 16; i++) {
                double wl = 2.0 * M_PI * pow(5e5, 2.0 * i / 32.0);
                if (wl >= 2048.0 && wl <= 8192.0) {
                    double sm = (8192.0 / wl - 1.0) / 3.0, want = 1.0 / ((1.0 - sm) / 32.0 + sm);
                    CHECKF(fabs(v[i] - want) < 1e-5 * want, "rope_freqs[%d] %g, want %g", i, v[i], want);
                }
            }
        }
        gguf_close(&f);
    }
    // --type equals synth F32 followed by quantize, byte for byte
    static const char *const cases[][2] = {{"tiny-qwen2", "Q4_K_M"}, {"tiny-gemma3", "Q3_K_M"}, {"tiny-qwen3", "IQ4_XS"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(synth(cases[i][0], a, "F32", NULL, 3, 2) == SB_OK);
        CHECK(rt_quantize_file(a, b, cases[i][1], &(rt_qopts){.n_threads = 1}) == SB_OK);
        CHECK(synth(cases[i][0], c, cases[i][1], NULL, 3, 2) == SB_OK);
        CHECKF(same_file(b, c), "%s %s: synth --type differs from synth + quantize", cases[i][0], cases[i][1]);
    }
    // synthetic vocabulary: 512 distinct tokens, SPM byte fallback layout
    if (gguf_open(c, &f) == SB_OK) {
        const gguf_kv *tk = gguf_find(&f, "tokenizer.ggml.tokens"), *ty = gguf_find(&f, "tokenizer.ggml.token_type");
        sb_strview model;
        CHECK(gguf_get_str(&f, "tokenizer.ggml.model", &model) == SB_OK && model.len == 5 && !memcmp(model.ptr, "llama", 5));
        CHECK(tk && tk->count == 512 && ty && ty->count == 512);
        if (tk && ty && tk->count == 512) {
            int dup = 0;
            for (int i = 0; i < 512; i++)
                for (int j = i + 1; j < 512; j++)
                    dup += tk->strs[i].len == tk->strs[j].len && !memcmp(tk->strs[i].ptr, tk->strs[j].ptr, tk->strs[i].len);
            CHECK(dup == 0);
            int32_t types[512]; /* metadata values are not aligned in the file */
            memcpy(types, ty->data, sizeof types);
            CHECK(types[0] == 2 && types[1] == 3 && types[2] == 3 && types[3] == 6 && types[258] == 6 && types[259] == 1);
            CHECK(tk->strs[3 + 0x41].len == 6 && !memcmp(tk->strs[3 + 0x41].ptr, "<0x41>", 6));
        }
        gguf_close(&f);
    }
    unlink(a);
    unlink(b);
    unlink(c);
}

static int vocab_tests(void) {
    char voc[8192];
    if (!shared_file("vocab/ggml-vocab-qwen2.gguf", voc, "--vocab test")) return 0;
    const char *out = tmp_path("voc.gguf");
    CHECK(synth("tiny-qwen2", out, "Q8_0", voc, 0, 2) == SB_OK);
    gguf_file a, v;
    if (gguf_open(out, &a) == SB_OK) {
        if (gguf_open(voc, &v) == SB_OK) {
            const gguf_tensor *e = gguf_find_tensor(&a, "token_embd.weight");
            CHECK(e && e->ne[1] == 151936 && e->type == SB_TYPE_Q8_0);
            int n_tok = 0;
            for (int64_t i = 0; i < v.n_kv; i++) {
                const gguf_kv *y = &v.kvs[i];
                if (strncmp(y->key, "tokenizer.", 10)) continue;
                n_tok++;
                const gguf_kv *x = gguf_find(&a, y->key);
                CHECKF(x && x->type == y->type && x->elem_type == y->elem_type && x->count == y->count, "%s", y->key);
                if (!x || x->count != y->count) continue;
                int same = 1;
                if (y->elem_type == SB_GGUF_STRING) {
                    for (uint64_t j = 0; j < y->count && same; j++)
                        same = x->strs[j].len == y->strs[j].len && !memcmp(x->strs[j].ptr, y->strs[j].ptr, y->strs[j].len);
                } else {
                    same = !memcmp(x->data, y->data, (size_t)(y->count * gguf_type_size(y->elem_type)));
                }
                CHECKF(same, "%s differs from the vocab file", y->key);
            }
            CHECK(n_tok >= 6);
            gguf_close(&v);
        }
        gguf_close(&a);
    }
    // a file without tokenizer.ggml.tokens is not a vocabulary
    CHECK(rt_synth_model("tiny-qwen2", out, &(rt_synth_opts){.type_name = "F32",
                                                              .vocab_path = test_data_path("models/test-qwen2-f32.gguf")}) == SB_OK);
    const char *bad = tmp_path("novocab.gguf");
    gguf_writer *w;
    CHECK(gguf_writer_create(&w) == SB_OK && gguf_writer_set_u32(w, "x.y", 1) == SB_OK && gguf_writer_write(w, bad) == SB_OK);
    gguf_writer_free(w);
    sb_status s = rt_synth_model("tiny-qwen2", out, &(rt_synth_opts){.vocab_path = bad});
    CHECK(s == SB_ERR_VOCAB && strstr(sb_last_error(), "tokenizer.ggml.tokens"));
    unlink(bad);
    unlink(out);
    return 1;
}

static void error_tests(void) {
    const char *out = tmp_path("err.gguf");
    sb_status s = rt_synth_model("qwen9-7b", out, &(rt_synth_opts){0});
    CHECK(s == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "qwen2.5-0.5b") && strstr(sb_last_error(), "tiny-llama"));
    s = rt_synth_model("tiny-qwen2", out, &(rt_synth_opts){.type_name = "Q7_K"});
    CHECK(s == SB_ERR_INVALID_ARG);
    s = rt_synth_model("tiny-qwen2", out, &(rt_synth_opts){.vocab_path = tmp_path("absent.gguf")});
    CHECK(s == SB_ERR_IO);
    CHECK(!file_exists(out));
    // every preset named in the brief exists; real presets have the documented shapes
    static const char *const need[] = {"qwen2.5-0.5b", "qwen2.5-1.5b", "qwen3-0.6b", "llama-3.2-1b", "gemma3-1b",
                                       "tiny-llama", "tiny-qwen2"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) CHECKF(rt_synth_preset_find(need[i]) != NULL, "%s", need[i]);
    const rt_synth_preset *p = rt_synth_preset_find("qwen2.5-0.5b");
    CHECK(p && p->n_layer == 24 && p->n_embd == 896 && p->n_head == 14 && p->n_head_kv == 2 && p->n_ff == 4864 &&
          p->n_vocab == 151936 && p->tied && p->qkv_bias);
    p = rt_synth_preset_find("gemma3-1b");
    CHECK(p && p->n_layer == 26 && p->n_embd == 1152 && p->head_dim == 256 && p->n_ff == 6912 && p->n_vocab == 262144);
}

// ---- --fast: the first rows as the full synth makes them, the rest repeating them ----

static void fast_tests(void) {
    const char *full = tmp_path("full.gguf"), *fast = tmp_path("fast.gguf");
    rt_synth_opts o = {.type_name = "Q4_K_M", .seed = 3, .q = {.n_threads = 2}};
    CHECK(rt_synth_model("tiny-llama", full, &o) == SB_OK);
    o.q.pool_rows = 256;
    CHECK(rt_synth_model("tiny-llama", fast, &o) == SB_OK);
    gguf_file a, b;
    if (gguf_open(full, &a) != SB_OK) { CHECK(0); return; }
    if (gguf_open(fast, &b) != SB_OK) { CHECK(0); gguf_close(&a); return; }
    CHECK(a.n_tensors == b.n_tensors);
    int repeated = 0;
    for (int64_t t = 0; t < a.n_tensors && t < b.n_tensors; t++) {
        const gguf_tensor *x = &a.tensors[t], *y = &b.tensors[t];
        CHECKF(!strcmp(x->name, y->name) && x->type == y->type && !memcmp(x->ne, y->ne, sizeof x->ne) &&
                   x->nbytes == y->nbytes, "--fast changed tensor %s", x->name);
        const int64_t rows = x->ne[1] * x->ne[2] * x->ne[3];
        const uint64_t rb = rows ? x->nbytes / (uint64_t)rows : 0;
        const int64_t made = rows < 256 ? rows : 256;
        CHECKF(!memcmp(x->data, y->data, (size_t)((uint64_t)made * rb)), "%s: the first %lld rows differ", x->name, (long long)made);
        for (int64_t r = 256; r < rows; r++) {
            if (memcmp((const uint8_t *)y->data + (uint64_t)r * rb, (const uint8_t *)y->data + (uint64_t)(r % 256) * rb, (size_t)rb)) {
                CHECKF(0, "%s: row %lld is not a copy of row %lld", x->name, (long long)r, (long long)(r % 256));
                break;
            }
            repeated++;
        }
    }
    CHECK(repeated > 1000); /* token_embd (512 rows), the FFN matrices (768 rows) */
    gguf_close(&a);
    gguf_close(&b);
    unlink(full);
    unlink(fast);
    // the benchmark-matrix presets exist in their documented shapes
    const rt_synth_preset *p = rt_synth_preset_find("llama-3.1-8b");
    CHECK(p && p->n_layer == 32 && p->n_embd == 4096 && p->n_head_kv == 8 && p->n_ff == 14336 && !p->tied &&
          p->llama3_rope && p->rope_factor == 8.0f);
    p = rt_synth_preset_find("qwen3-8b");
    CHECK(p && p->n_layer == 36 && p->head_dim == 128 && p->n_ff == 12288 && p->qk_norm && !p->tied);
    p = rt_synth_preset_find("qwen2.5-32b");
    CHECK(p && p->n_layer == 64 && p->n_embd == 5120 && p->n_head == 40 && p->n_ff == 27648 && p->qkv_bias && !p->tied);
}

int main(void) {
    if (!tmp_dir_create("synth")) return 1;
    error_tests();
    fast_tests();
    value_tests();
    int ran = shape_tests();
    ran &= vocab_tests();
    tmp_dir_remove();
    return test_summary_or_skip(ran);
}
