/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_quantize.c — `sb quantize` against llama-quantize: for every reference file in
 * testdata/models (test-qwen2-<14 types>, test-{qwen3,llama,gemma3,gemma4}-{q8_0,q4_k_m}) quantize the
 * F32 master and compare tensor by tensor (name, type, shape, bytes: the first differing byte is
 * reported) and then the whole file, with 1, 2 and 3 threads. Then the rules on synthetic names
 * (use_more_bits layers, fallback table, tied/untied output, expert and 70B bumps, attn_qkv =
 * attn_v, order), re-quantizing (warning + rule types), same-type copy (identical file), and the
 * error paths (unknown type, unconvertible type, NaN, shape without fallback, cancel: no output).
 * The reference part exits 77 (skip) only when the shared data is absent; the rest always runs.
 */
#include "test.h"
#include "tmp_dir.h"
#include "runtime/quantize.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "quant/types.h"

#include <stdarg.h>
#include <unistd.h>
#include <sys/stat.h>

/* No "<out>.tmp.*" or "<out>.scratch.*" left in tmpdir. */
static int dir_has_leftovers(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q -e '\\.tmp\\.' -e '\\.scratch\\.'", tmpdir);
    return system(cmd) == 0;
}

// ---- tensor-by-tensor comparison ----

/* Returns 1 when equal; otherwise prints the first mismatch precisely. */
static int compare_files(const char *got_path, const char *ref_path, const char *label) {
    gguf_file a, b;
    if (gguf_open(got_path, &a) != SB_OK) {
        fprintf(stderr, "%s: cannot open output %s: %s\n", label, got_path, sb_last_error());
        return 0;
    }
    if (gguf_open(ref_path, &b) != SB_OK) {
        fprintf(stderr, "%s: cannot open reference %s: %s\n", label, ref_path, sb_last_error());
        gguf_close(&a);
        return 0;
    }
    int ok = 1;
    if (a.n_tensors != b.n_tensors) {
        fprintf(stderr, "%s: %lld tensors, reference has %lld\n", label, (long long)a.n_tensors, (long long)b.n_tensors);
        ok = 0;
    }
    for (int64_t i = 0; ok && i < a.n_tensors; i++) {
        const gguf_tensor *x = &a.tensors[i], *y = &b.tensors[i];
        if (strcmp(x->name, y->name)) {
            fprintf(stderr, "%s: tensor #%lld is \"%s\", reference has \"%s\"\n", label, (long long)i, x->name, y->name);
            ok = 0;
        } else if (x->type != y->type) {
            fprintf(stderr, "%s: tensor \"%s\": type %s, reference %s\n", label, x->name, qk_get(x->type)->name,
                    qk_get(y->type)->name);
            ok = 0;
        } else if (x->n_dims != y->n_dims || memcmp(x->ne, y->ne, sizeof x->ne)) {
            fprintf(stderr, "%s: tensor \"%s\": shape [%lld,%lld,%lld,%lld]/%u, reference [%lld,%lld,%lld,%lld]/%u\n", label,
                    x->name, (long long)x->ne[0], (long long)x->ne[1], (long long)x->ne[2], (long long)x->ne[3], x->n_dims,
                    (long long)y->ne[0], (long long)y->ne[1], (long long)y->ne[2], (long long)y->ne[3], y->n_dims);
            ok = 0;
        } else if (x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes)) {
            uint64_t k = 0;
            while (k < x->nbytes && k < y->nbytes && x->data[k] == y->data[k]) k++;
            uint64_t row = 0;
            (void)qk_row_bytes(x->type, x->ne[0], &row);
            fprintf(stderr, "%s: tensor \"%s\" (%s): first differing byte %llu (row %llu, byte %llu of the row): 0x%02x vs 0x%02x\n",
                    label, x->name, qk_get(x->type)->name, (unsigned long long)k,
                    (unsigned long long)(row ? k / row : 0), (unsigned long long)(row ? k % row : k),
                    k < x->nbytes ? x->data[k] : 0, k < y->nbytes ? y->data[k] : 0);
            ok = 0;
        }
    }
    if (ok && (a.size != b.size || memcmp(a.bytes, b.bytes, a.size))) {
        uint64_t k = 0;
        while (k < a.size && k < b.size && a.bytes[k] == b.bytes[k]) k++;
        fprintf(stderr, "%s: tensors equal but the files differ at byte %llu (sizes %llu / %llu; data section at %llu)\n",
                label, (unsigned long long)k, (unsigned long long)a.size, (unsigned long long)b.size,
                (unsigned long long)b.data_offset);
        ok = 0;
    }
    gguf_close(&a);
    gguf_close(&b);
    return ok;
}

static int reference_tests(void) {
    static const char *const qwen2_types[] = {"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_1", "q5_0",
                                              "q4_k_m", "q4_1", "q4_0", "q3_k_m", "q2_k", "iq4_nl", "iq4_xs"};
    static const char *const archs[] = {"qwen3", "llama", "gemma3", "gemma4"};
    char in[8192], ref[8192], label[128];
    if (!shared_file("models/test-qwen2-f32.gguf", in, "reference comparison")) return 0;
    int n_ok = 0, n = 0;
    const char *out = tmp_path("ref-out.gguf");
    for (size_t a = 0; a <= sizeof archs / sizeof archs[0]; a++) {
        const char *arch = a == 0 ? "qwen2" : archs[a - 1];
        size_t nt = a == 0 ? sizeof qwen2_types / sizeof qwen2_types[0] : 2;
        for (size_t t = 0; t < nt; t++) {
            const char *type = a == 0 ? qwen2_types[t] : (t == 0 ? "q8_0" : "q4_k_m");
            snprintf(in, sizeof in, "%s", test_data_path("models/"));
            snprintf(in + strlen(in), sizeof in - strlen(in), "test-%s-f32.gguf", arch);
            snprintf(ref, sizeof ref, "%s", test_data_path("models/"));
            snprintf(ref + strlen(ref), sizeof ref - strlen(ref), "test-%s-%s.gguf", arch, type);
            rt_qopts o = {.n_threads = 1 + (int)(n % 3)};
            snprintf(label, sizeof label, "%s %s (%d threads)", arch, type, o.n_threads);
            sb_status s = rt_quantize_file(in, out, type, &o);
            CHECKF(s == SB_OK, "%s: %s: %s", label, sb_status_str(s), sb_last_error());
            int eq = s == SB_OK && compare_files(out, ref, label);
            CHECKF(eq, "%s: output differs from llama-quantize's", label);
            n++;
            n_ok += eq;
            if (eq) printf("identical: %s\n", label);
        }
    }
    printf("reference files reproduced byte for byte: %d of %d\n", n_ok, n);
    CHECK_EQ_INT(n, 22);
    unlink(out);
    return 1;
}

// ---- rules on synthetic names ----

static rt_qstate state_for(const char *const *names, int n) {
    rt_qstate st;
    rt_qstate_init(&st, names, n);
    return st;
}

/* Types of n_layer layers' attn_v and ffn_down under mix `mix` (in file order). */
static void layer_types(const char *mix, int n_layer, int n_expert, bool is_70b, int *v_types, int *down_types) {
    const rt_qmix *m = rt_qmix_find(mix);
    char (*names)[64] = malloc((size_t)n_layer * 2 * 64);
    const char **ptrs = malloc((size_t)n_layer * 2 * sizeof *ptrs);
    for (int l = 0; l < n_layer; l++) {
        snprintf(names[2 * l], 64, "blk.%d.attn_v.weight", l);
        snprintf(names[2 * l + 1], 64, "blk.%d.ffn_down.weight", l);
        ptrs[2 * l] = names[2 * l];
        ptrs[2 * l + 1] = names[2 * l + 1];
    }
    rt_qstate st = state_for(ptrs, 2 * n_layer);
    rt_qmodel md = {.n_layer = n_layer, .n_gqa = 2, .n_expert = n_expert, .is_70b = is_70b};
    const int64_t ne[4] = {4096, 1024, 1, 1};
    for (int l = 0; l < n_layer; l++) {
        CHECK(rt_quant_tensor_type(m, &md, &st, ptrs[2 * l], 2, ne, SB_TYPE_F32, &v_types[l]) == SB_OK);
        CHECK(rt_quant_tensor_type(m, &md, &st, ptrs[2 * l + 1], 2, ne, SB_TYPE_F32, &down_types[l]) == SB_OK);
    }
    free(names);
    free(ptrs);
}

static void rule_tests(void) {
    // use_more_bits layers (formats.md §4.1): n = 28 and n = 32
    int v[80], d[80];
    static const int more28[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
    layer_types("Q4_K_M", 28, 0, false, v, d);
    for (int l = 0, k = 0; l < 28; l++) {
        int more = k < 14 && more28[k] == l;
        if (more) k++;
        CHECKF(v[l] == (more ? SB_TYPE_Q6_K : SB_TYPE_Q4_K), "Q4_K_M n=28 attn_v layer %d: %s", l, qk_get(v[l])->name);
        CHECKF(d[l] == (more ? SB_TYPE_Q6_K : SB_TYPE_Q4_K), "Q4_K_M n=28 ffn_down layer %d: %s", l, qk_get(d[l])->name);
    }
    layer_types("Q5_K_M", 32, 0, false, v, d);
    for (int l = 0; l < 32; l++) {
        int more = l < 4 || l >= 28 || (l - 4) % 3 == 2;
        CHECKF(v[l] == (more ? SB_TYPE_Q6_K : SB_TYPE_Q5_K), "Q5_K_M n=32 attn_v layer %d", l);
    }
    // Q3_K_M: attn_v Q5_K for the first two, then Q4_K; ffn_down Q5_K below n/16, else Q4_K
    layer_types("Q3_K_M", 32, 0, false, v, d);
    CHECK(v[0] == SB_TYPE_Q5_K && v[1] == SB_TYPE_Q5_K && v[2] == SB_TYPE_Q4_K && v[31] == SB_TYPE_Q4_K);
    CHECK(d[0] == SB_TYPE_Q5_K && d[1] == SB_TYPE_Q5_K && d[2] == SB_TYPE_Q4_K);
    // Q4_K_S: attn_v Q5_K for i < 4, ffn_down Q5_K for i < n/8
    layer_types("Q4_K_S", 32, 0, false, v, d);
    CHECK(v[3] == SB_TYPE_Q5_K && v[4] == SB_TYPE_Q4_K && d[3] == SB_TYPE_Q5_K && d[4] == SB_TYPE_Q4_K);
    // Q3_K_L: attn_v and ffn_down Q5_K everywhere; Q2_K: attn_v Q3_K (gqa 2), ffn_down Q3_K
    layer_types("Q3_K_L", 8, 0, false, v, d);
    CHECK(v[7] == SB_TYPE_Q5_K && d[7] == SB_TYPE_Q5_K);
    layer_types("Q2_K", 8, 0, false, v, d);
    CHECK(v[0] == SB_TYPE_Q3_K && d[0] == SB_TYPE_Q3_K);
    // 70B: Q4_K attn_v becomes Q5_K; 8 experts: attn_v Q8_0
    layer_types("Q4_K_M", 80, 0, true, v, d);
    CHECK(v[10] == SB_TYPE_Q5_K && v[0] == SB_TYPE_Q6_K);
    layer_types("Q4_K_M", 32, 8, false, v, d);
    CHECK(v[10] == SB_TYPE_Q8_0);

    // output / tied embeddings / untied embeddings / eligibility / fallback
    const rt_qmix *q4km = rt_qmix_find("q4_k_m"), *q40 = rt_qmix_find("Q4_0"), *q8 = rt_qmix_find("Q8_0");
    CHECK(q4km && q40 && q8 && rt_qmix_find("Q4_K") == q4km && rt_qmix_find("q5_k") == rt_qmix_find("Q5_K_M") &&
          rt_qmix_find("15") == q4km && !rt_qmix_find("15x") && !rt_qmix_find("IQ2_XXS"));
    rt_qmodel md = {.n_layer = 2, .n_gqa = 7};
    int t;
    const char *tied[] = {"token_embd.weight", "blk.0.attn_q.weight"};
    const char *untied[] = {"token_embd.weight", "output.weight"};
    rt_qstate st = state_for(tied, 2);
    CHECK(!st.has_output);
    const int64_t e896[4] = {896, 151936, 1, 1}, e1024[4] = {1024, 151936, 1, 1};
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, e896, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, e1024, 0, &t) == SB_OK && t == SB_TYPE_Q6_K);
    CHECK(rt_quant_tensor_type(q40, &md, &st, "token_embd.weight", 2, e1024, 0, &t) == SB_OK && t == SB_TYPE_Q6_K);
    CHECK(rt_quant_tensor_type(q40, &md, &st, "token_embd.weight", 2, e896, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    CHECK(rt_quant_tensor_type(q8, &md, &st, "token_embd.weight", 2, e1024, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    st = state_for(untied, 2);
    CHECK(st.has_output);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, e1024, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "output.weight", 2, e1024, 0, &t) == SB_OK && t == SB_TYPE_Q6_K);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "output.weight", 2, e896, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    // not eligible: 1-D, norms, biases, per_layer_model_proj, ffn_gate_inp keep their type
    const int64_t sq[4] = {256, 256, 1, 1}, vec[4] = {256, 1, 1, 1};
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_norm.weight", 1, vec, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_q.bias", 1, vec, SB_TYPE_F16, &t) == SB_OK && t == SB_TYPE_F16);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_q_norm.weight", 2, sq, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "per_layer_model_proj.weight", 2, sq, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.ffn_gate_inp.weight", 2, sq, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_q.weight_scale", 2, sq, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    CHECK(!rt_quant_allows("position_embd.weight", 2) && rt_quant_allows("blk.0.attn_q.weight", 2));
    // shape fallback table
    struct { const char *mix; int64_t ne0; int want; } fb[] = {
        {"Q4_K_M", 896, SB_TYPE_Q5_0},  {"Q5_K_S", 896, SB_TYPE_Q5_1}, {"Q6_K", 896, SB_TYPE_Q8_0},
        {"Q3_K_S", 896, SB_TYPE_Q4_0},  {"Q2_K", 896, SB_TYPE_Q4_0},   {"IQ4_XS", 896, SB_TYPE_IQ4_NL},
        {"Q4_K_M", 80, SB_TYPE_F16},    {"Q4_0", 896, SB_TYPE_Q4_0},   {"IQ4_NL", 96, SB_TYPE_IQ4_NL},
        {"F16", 80, SB_TYPE_F16},       {"BF16", 7, SB_TYPE_BF16},
    };
    for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++) {
        const char *nm[] = {"blk.0.attn_q.weight"};
        st = state_for(nm, 1);
        const int64_t ne[4] = {fb[i].ne0, 64, 1, 1};
        sb_status s = rt_quant_tensor_type(rt_qmix_find(fb[i].mix), &md, &st, nm[0], 2, ne, SB_TYPE_F32, &t);
        CHECKF(s == SB_OK && t == fb[i].want, "fallback %s ne0 %lld: got %s", fb[i].mix, (long long)fb[i].ne0,
               s == SB_OK ? qk_get(t)->name : sb_status_str(s));
    }
    {   // a 32-block type with no fallback: llama-quantize throws, we report SB_ERR_UNSUPPORTED
        const char *nm[] = {"blk.0.attn_q.weight"};
        st = state_for(nm, 1);
        const int64_t ne[4] = {48, 64, 1, 1};
        sb_status s = rt_quant_tensor_type(q40, &md, &st, nm[0], 2, ne, SB_TYPE_F32, &t);
        CHECK(s == SB_ERR_UNSUPPORTED && strstr(sb_last_error(), "blk.0.attn_q.weight") && strstr(sb_last_error(), "Q4_0"));
    }
    {   // attn_qkv follows the attn_v rules (its own Q5_K rule is unreachable in llama.cpp)
        const char *nm[] = {"blk.0.attn_qkv.weight", "blk.1.attn_qkv.weight"};
        st = state_for(nm, 2);
        CHECK(st.n_attn_v == 2);
        const int64_t ne[4] = {4096, 1024, 1, 1};
        int t0, t1;
        CHECK(rt_quant_tensor_type(q4km, &md, &st, nm[0], 2, ne, 0, &t0) == SB_OK && t0 == SB_TYPE_Q4_K);
        CHECK(rt_quant_tensor_type(q4km, &md, &st, nm[1], 2, ne, 0, &t1) == SB_OK && t1 == SB_TYPE_Q6_K);
    }
    {   // experts: layer parsed from the name; attn_k / attn_output bumps with 8 experts
        rt_qmodel moe = {.n_layer = 4, .n_gqa = 4, .n_expert = 8};
        const char *nm[] = {"blk.3.ffn_down_exps.weight"};
        st = state_for(nm, 1);
        const int64_t ne[4] = {1024, 256, 8, 1};
        CHECK(rt_quant_tensor_type(q4km, &moe, &st, nm[0], 3, ne, 0, &t) == SB_OK && t == SB_TYPE_Q6_K);
        CHECK(rt_quant_tensor_type(q4km, &moe, &st, "blk.1.attn_k.weight", 2, sq, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
        CHECK(rt_quant_tensor_type(q4km, &moe, &st, "blk.1.attn_output.weight", 2, sq, 0, &t) == SB_OK && t == SB_TYPE_Q5_K);
        CHECK(rt_quant_tensor_type(q4km, &moe, &st, "ffn_down_exps.weight", 3, ne, 0, &t) == SB_ERR_MODEL_HPARAM);
        CHECK(rt_quant_tensor_type(q4km, &moe, &st, "blk.9.ffn_down_exps.weight", 3, ne, 0, &t) == SB_ERR_MODEL_HPARAM);
    }
    // IQ4_NL / IQ4_XS: attn_v Q5_K when gqa >= 4; ffn_down Q5_K for i < n/8
    {
        const char *nm[] = {"blk.0.attn_v.weight", "blk.0.ffn_down.weight"};
        st = state_for(nm, 2);
        rt_qmodel m16 = {.n_layer = 16, .n_gqa = 4};
        const int64_t ne[4] = {1024, 256, 1, 1};
        CHECK(rt_quant_tensor_type(rt_qmix_find("IQ4_XS"), &m16, &st, nm[0], 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q5_K);
        CHECK(rt_quant_tensor_type(rt_qmix_find("IQ4_XS"), &m16, &st, nm[1], 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q5_K);
    }
    // order: layer number first (numeric), then bytes
    CHECK(rt_quant_order("blk.10.attn_q.weight", "blk.2.attn_q.weight") > 0);
    CHECK(rt_quant_order("output.weight", "blk.0.attn_q.weight") < 0);
    CHECK(rt_quant_order("output_norm.weight", "token_embd.weight") < 0);
    CHECK(rt_quant_order("blk.1.attn_k.bias", "blk.1.attn_k.weight") < 0);
}

// ---- files written here ----

static int warnings;
static char last_warning[2048];
static void on_log(sb_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == SB_LOG_WARN) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
}

/* A small model: llama-ish names, one tensor of type `odd_type` with raw bytes when >= 0. */
static void write_model(const char *path, int odd_type, float poison, float norm0) {
    gguf_writer *w;
    CHECK(gguf_writer_create(&w) == SB_OK);
    CHECK(gguf_writer_set_str(w, "general.architecture", "llama", 5) == SB_OK);
    CHECK(gguf_writer_set_u32(w, "llama.block_count", 1) == SB_OK);
    static float a[256 * 64], b[256];
    uint64_t s = 42;
    for (int i = 0; i < 256 * 64; i++) a[i] = test_rand_normal(&s) * 0.02f;
    for (int i = 0; i < 256; i++) b[i] = 1.0f;
    a[100] = poison;
    b[0] = norm0;
    static uint16_t raw[256 * 64]; /* F16: small finite halves; other types: arbitrary bytes */
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) raw[i] = (uint16_t)(0x2000 + (i * 7) % 0x1000);
    const int64_t ne2[4] = {256, 64, 1, 1}, ne1[4] = {256, 1, 1, 1};
    CHECK(gguf_writer_add_tensor(w, "blk.0.attn_q.weight", SB_TYPE_F32, 2, ne2, a) == SB_OK);
    CHECK(gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", SB_TYPE_F32, 1, ne1, b) == SB_OK);
    if (odd_type >= 0) CHECK(gguf_writer_add_tensor(w, "blk.0.attn_k.weight", odd_type, 2, ne2, raw) == SB_OK);
    CHECK(gguf_writer_write(w, path) == SB_OK);
    gguf_writer_free(w);
}

static int cancel_after_two(void *user, uint64_t done, uint64_t total, const char *what) {
    (void)done;
    (void)total;
    (void)what;
    return ++*(int *)user >= 2;
}

static int count_progress(void *user, uint64_t done, uint64_t total, const char *what) {
    int *c = (int *)user;
    c[0]++;
    if (done > total || !what || !*what) c[1]++;
    c[2] = done == total;
    return 0;
}

static void file_tests(void) {
    const char *in = tmp_path("in.gguf"), *out = tmp_path("out.gguf");
    sb_status s;

    // unknown type, missing input: clear statuses, no output
    s = rt_quantize_file(in, out, "Q9_K", NULL);
    CHECK(s == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "Q4_K_M"));
    s = rt_quantize_file(in, out, "IQ2_XXS", NULL); /* a llama-quantize mix this build cannot write */
    CHECK(s == SB_ERR_UNSUPPORTED && strstr(sb_last_error(), "IQ2_XXS"));
    s = rt_quantize_file(tmp_path("absent.gguf"), out, "Q4_K", NULL); /* llama-quantize's alias of Q4_K_M */
    CHECK(s == SB_ERR_IO);
    s = rt_quantize_file(tmp_path("absent.gguf"), out, "Q8_0", NULL);
    CHECK(s == SB_ERR_IO);
    CHECK(!file_exists(out));

    // an IQ2_XXS tensor has no dequantizer: SB_ERR_UNSUPPORTED naming the tensor and the type
    write_model(in, SB_TYPE_IQ2_XXS, 0.5f, 1.0f);
    const rt_qopts requant = {.allow_requantize = true};
    s = rt_quantize_file(in, out, "Q8_0", NULL); /* refused first: llama-quantize's requantize rule */
    CHECKF(s == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "requantizing from type IQ2_XXS is disabled"),
           "%s: %s", sb_status_str(s), sb_last_error());
    s = rt_quantize_file(in, out, "Q8_0", &requant);
    CHECKF(s == SB_ERR_UNSUPPORTED && strstr(sb_last_error(), "blk.0.attn_k.weight") && strstr(sb_last_error(), "IQ2_XXS"),
           "%s: %s", sb_status_str(s), sb_last_error());
    CHECK(!file_exists(out) && !dir_has_leftovers());

    // NaN input: fails like llama.cpp's tensor validation
    write_model(in, -1, NAN, 1.0f);
    s = rt_quantize_file(in, out, "Q4_0", NULL);
    CHECK(s == SB_ERR_MODEL_NAN && strstr(sb_last_error(), "blk.0.attn_q.weight"));
    CHECK(!file_exists(out) && !dir_has_leftovers());
    write_model(in, -1, 0.5f, INFINITY); /* in a tensor that is only copied */
    s = rt_quantize_file(in, out, "Q4_0", NULL);
    CHECK(s == SB_ERR_MODEL_NAN && strstr(sb_last_error(), "blk.0.attn_norm.weight"));
    CHECK(!file_exists(out) && !dir_has_leftovers());

    // finite input too large for the output type: F16 overflows, Q8_0's fp16 scale overflows
    write_model(in, -1, 1e6f, 1.0f);
    s = rt_quantize_file(in, out, "F16", NULL);
    CHECKF(s == SB_ERR_RANGE && strstr(sb_last_error(), "blk.0.attn_q.weight"), "%s: %s", sb_status_str(s), sb_last_error());
    s = rt_quantize_file(in, out, "Q8_0", NULL);
    CHECK(s == SB_OK); /* 1e6 / 127 fits an fp16 scale */
    unlink(out);
    write_model(in, -1, 1e8f, 1.0f);
    s = rt_quantize_file(in, out, "Q8_0", NULL);
    CHECKF(s == SB_ERR_RANGE && strstr(sb_last_error(), "non-finite scale"), "%s: %s", sb_status_str(s), sb_last_error());
    CHECK(!file_exists(out) && !dir_has_leftovers());

    // cancel from the progress callback: no output, nothing left behind
    write_model(in, SB_TYPE_F16, 0.5f, 1.0f);
    int calls = 0;
    rt_qopts o = {.n_threads = 2, .progress = cancel_after_two, .progress_user = &calls};
    s = rt_quantize_file(in, out, "Q8_0", &o);
    CHECK(s == SB_ERR_CANCELLED && calls == 2);
    CHECK(!file_exists(out) && !dir_has_leftovers());

    // progress reports every tensor, monotone, ending at total; F16 source is converted quietly
    int pc[3] = {0};
    o = (rt_qopts){.n_threads = 2, .progress = count_progress, .progress_user = pc};
    warnings = 0;
    sb_log_set(on_log, NULL, SB_LOG_WARN);
    s = rt_quantize_file(in, out, "Q8_0", &o);
    CHECK(s == SB_OK && pc[0] == 3 && pc[1] == 0 && pc[2] == 1 && warnings == 0);
    gguf_file f;
    if (s == SB_OK && gguf_open(out, &f) == SB_OK) {
        const gguf_tensor *k = gguf_find_tensor(&f, "blk.0.attn_k.weight");
        CHECK(k && k->type == SB_TYPE_Q8_0);
        const gguf_tensor *nrm = gguf_find_tensor(&f, "blk.0.attn_norm.weight");
        CHECK(nrm && nrm->type == SB_TYPE_F32);
        uint32_t ft = 0, qv = 0;
        CHECK(gguf_get_u32(&f, "general.file_type", &ft) == SB_OK && ft == 7);
        CHECK(gguf_get_u32(&f, "general.quantization_version", &qv) == SB_OK && qv == 2);
        CHECK(!strcmp(f.kvs[f.n_kv - 1].key, "general.file_type") && !strcmp(f.kvs[f.n_kv - 2].key, "general.quantization_version"));
        gguf_close(&f);
    }

    // re-quantizing a quantized file: dequantize + warning; the types follow the rules
    char q8[8192], q4[8192];
    snprintf(q8, sizeof q8, "%s", test_data_path("models/test-qwen2-q8_0.gguf"));
    snprintf(q4, sizeof q4, "%s", test_data_path("models/test-qwen2-q4_k_m.gguf"));
    if (file_exists(q8) && file_exists(q4)) {
        unlink(out);
        s = rt_quantize_file(q8, out, "Q4_K_M", NULL);
        CHECK(s == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "requantizing from type Q8_0 is disabled"));
        CHECK(!file_exists(out) && !dir_has_leftovers());
        warnings = 0;
        s = rt_quantize_file(q8, out, "Q4_K_M", &requant);
        CHECKF(s == SB_OK, "%s", sb_last_error());
        CHECK(warnings == 1 && strstr(last_warning, "dequantized"));
        gguf_file a, b;
        if (s == SB_OK && gguf_open(out, &a) == SB_OK) {
            if (gguf_open(q4, &b) == SB_OK) {
                CHECK(a.n_tensors == b.n_tensors);
                for (int64_t i = 0; i < a.n_tensors && i < b.n_tensors; i++)
                    CHECKF(!strcmp(a.tensors[i].name, b.tensors[i].name) && a.tensors[i].type == b.tensors[i].type,
                           "requantized tensor %lld: %s %s", (long long)i, a.tensors[i].name, qk_get(a.tensors[i].type)->name);
                gguf_close(&b);
            }
            gguf_close(&a);
        }
        // same type again: every tensor is copied, the file is reproduced exactly
        warnings = 0;
        s = rt_quantize_file(q4, out, "Q4_K_M", NULL);
        CHECK(s == SB_OK && warnings == 0);
        CHECK(s == SB_OK && compare_files(out, q4, "Q4_K_M -> Q4_K_M"));
    }
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    unlink(in);
    unlink(out);
}

// ---- llama-quantize's flags as rules (rt_qrules) ----

static void flag_rule_tests(void) {
    const rt_qmix *q40 = rt_qmix_find("Q4_0"), *q4km = rt_qmix_find("Q4_K_M"), *iq4 = rt_qmix_find("IQ4_XS");
    const rt_qmodel md = {.n_layer = 16, .n_gqa = 1};
    const int64_t ne[4] = {256, 256, 1, 1}, odd[4] = {96, 256, 1, 1};
    const char *names[] = {"blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.1.attn_v.weight", "token_embd.weight"};
    rt_qrules r = rt_qrules_default();
    rt_qstate st;
    int t;
    // an imatrix changes Q4_0's and IQ4_XS's ffn_down rule for the first n_layer/8 layers
    r.has_imatrix = true;
    rt_qstate_init(&st, names, 4);
    st.rules = &r;
    CHECK(rt_quant_tensor_type(q40, &md, &st, "blk.0.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_1);
    rt_qstate_init(&st, names, 4);
    CHECK(rt_quant_tensor_type(q40, &md, &st, "blk.0.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_0);
    CHECK(rt_quant_tensor_type(iq4, &md, &st, "blk.0.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q5_K);
    rt_qstate_init(&st, names, 4);
    st.rules = &r;
    CHECK(rt_quant_tensor_type(iq4, &md, &st, "blk.0.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_IQ4_XS);
    // Q2_K_S: attn_v -> Q4_K with GQA >= 4, ffn_down of the first n_layer/8 layers -> Q4_K
    const rt_qmix *q2ks = rt_qmix_find("q2_k_s");
    const rt_qmodel gqa8 = {.n_layer = 16, .n_gqa = 8};
    r = rt_qrules_default();
    rt_qstate_init(&st, names, 4);
    CHECK(q2ks && q2ks->ftype == 21 && q2ks->default_type == SB_TYPE_Q2_K);
    CHECK(rt_quant_tensor_type(q2ks, &gqa8, &st, "blk.0.attn_v.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q2ks, &md, &st, "blk.1.attn_v.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q2_K);
    CHECK(rt_quant_tensor_type(q2ks, &md, &st, "blk.0.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q2ks, &md, &st, "blk.1.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q2ks, &md, &st, "blk.2.ffn_down.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q2_K);
    // --pure: the default type, the shape fallback still applies; output / tied embeddings too
    r = rt_qrules_default();
    r.pure = true;
    rt_qstate_init(&st, names, 4);
    st.rules = &r;
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_v.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.ffn_down.weight", 2, odd, 0, &t) == SB_OK && t == SB_TYPE_Q5_0);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_norm.weight", 1, ne, SB_TYPE_F32, &t) == SB_OK && t == SB_TYPE_F32);
    // explicit output / token-embedding types win (tied embeddings take the output type through the
    // mix rules); --leave-output-tensor copies output.weight
    r = rt_qrules_default();
    r.output_type = SB_TYPE_Q8_0;
    rt_qstate_init(&st, names, 4);
    st.rules = &r;
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    r.token_embd_type = SB_TYPE_Q5_1;
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "token_embd.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q5_1);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "output.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    r.leave_output = true;
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "output.weight", 2, ne, SB_TYPE_F16, &t) == SB_OK && t == SB_TYPE_F16);
    // --tensor-type: the first match wins, a matched tensor skips the rules and does not advance the
    // attn_v counter (blk.1.attn_v is then the first attn_v the Q4_K_M rule sees: use_more_bits(0, 2))
    const char *pats[] = {"BLK\\.0\\.attn_v", "attn_v"}, *types[] = {"q8_0", "q5_0"};
    rt_qopts o = {.tt_patterns = pats, .tt_types = types, .n_tt = 1};
    rt_qoverride *ov;
    CHECK(rt_qrules_build(&o, &r, &ov) == SB_OK && r.n_overrides == 1);
    rt_qstate_init(&st, names, 4);
    st.rules = &r;
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.0.attn_v.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q8_0);
    CHECK(rt_quant_tensor_type(q4km, &md, &st, "blk.1.attn_v.weight", 2, ne, 0, &t) == SB_OK && t == SB_TYPE_Q4_K);
    CHECK(st.i_attn_v == 1);
    rt_qrules_free(ov, r.n_overrides);
    o.n_tt = 2;
    CHECK(rt_qrules_build(&o, &r, &ov) == SB_OK && r.n_overrides == 2);
    CHECK(rt_qrules_match(&r, "blk.0.attn_v.weight") == SB_TYPE_Q8_0 && rt_qrules_match(&r, "blk.10.attn_v.weight") == SB_TYPE_Q5_0);
    CHECK(rt_qrules_match(&r, "blk.0.attn_q.weight") == -1);
    rt_qrules_free(ov, r.n_overrides);
    // bad flags: named
    types[0] = "iq2_xxs";
    CHECK(rt_qrules_build(&o, &r, &ov) == SB_ERR_UNSUPPORTED && strstr(sb_last_error(), "IQ2_XXS"));
    types[0] = "q8_0";
    pats[1] = "attn_(v";
    CHECK(rt_qrules_build(&o, &r, &ov) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "attn_(v"));
    o = (rt_qopts){.output_type_name = "Q9_0"};
    CHECK(rt_qrules_build(&o, &r, &ov) == SB_ERR_INVALID_ARG && strstr(sb_last_error(), "--output-tensor-type"));
}

int main(void) {
    if (!tmp_dir_create("quantize")) return 1;
    rule_tests();
    flag_rule_tests();
    file_tests();
    int ran = reference_tests();
    tmp_dir_remove();
    return test_summary_or_skip(ran);
}
