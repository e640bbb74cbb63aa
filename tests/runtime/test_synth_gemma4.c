/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_synth_gemma4.c — the gemma4 synth presets (E2B, E4B, 31B) against
 * architectures.md §6 without writing their gigabytes: each preset's metadata (rt_synth_layout) is
 * parsed back and read by the gemma4 hyperparameter loader, then the preset's tensor list must be
 * exactly the §6.2 set for those hyperparameters — every name once, every shape as the graph
 * builder expects it — and the default mixes are E4B Q3_K_M (issue 27), F32 for the others.
 * Checked per preset: layer count and width, the sliding/global pattern, per-layer KV heads
 * (31B: 16 sliding, 4 global), per-layer FFN widths (E2B: 12288 on the 20 KV-shared layers), the
 * first layer without its own KV, attn_v absent where V := K (31B global layers), PLE present iff
 * P > 0.
 */
#include "runtime/model.h"
#include "runtime/synth.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

/* The shape of tensor `name` in the list, or -1 when it is absent; *count = how often it appears. */
static int find(const rt_synth_tensors *t, const char *name, int64_t ne[2], int *count) {
    int idx = -1;
    *count = 0;
    for (int64_t i = 0; i < t->n; i++)
        if (!strcmp(t->t[i].name, name)) {
            idx = (int)i;
            (*count)++;
            ne[0] = t->t[i].ne[0], ne[1] = t->t[i].ne[1];
        }
    return idx;
}

static int n_expected;

/* tensor `name` must appear once with shape [ne0, ne1] (ne1 1 for vectors) */
static void expect(const rt_synth_tensors *t, const char *preset, const char *name, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {0, 0};
    int count;
    find(t, name, ne, &count);
    n_expected++;
    CHECKF(count == 1, "%s: tensor %s appears %d times", preset, name, count);
    if (count == 1) CHECKF(ne[0] == ne0 && ne[1] == ne1, "%s: %s is [%lld, %lld], want [%lld, %lld]", preset, name,
                           (long long)ne[0], (long long)ne[1], (long long)ne0, (long long)ne1);
}

static void absent(const rt_synth_tensors *t, const char *preset, const char *name) {
    int64_t ne[2];
    int count;
    find(t, name, ne, &count);
    CHECKF(count == 0, "%s: tensor %s should be absent", preset, name);
}

typedef struct want {
    const char *preset;
    int n_layer, n_embd, n_head, kv_swa, kv_global, hd_swa, hd_global, period, P, n_layer_kv, n_ff, n_ff_shared, n_swa;
    bool v_is_k_global;
    const char *default_type;
} want;

static void check_preset(const want *w) {
    const int64_t V = 1000; /* any vocabulary size: only token_embd / per_layer_token_embd rows depend on it */
    gguf_writer *gw;
    CHECK(gguf_writer_create(&gw) == SB_OK);
    rt_synth_tensors t;
    sb_status s = rt_synth_layout(w->preset, V, gw, &t);
    CHECKF(s == SB_OK, "%s: layout: %s", w->preset, sb_last_error());
    uint8_t *mem = NULL;
    size_t size = 0;
    CHECK(gguf_writer_to_memory(gw, &mem, &size) == SB_OK);
    gguf_writer_free(gw);
    gguf_file f;
    memset(&f, 0, sizeof f);
    CHECK(gguf_parse(mem, size, &f) == SB_OK);
    rt_hparams hp;
    memset(&hp, 0, sizeof hp);
    snprintf(hp.arch, sizeof hp.arch, "gemma4");
    hp.n_vocab = V;
    s = rt_arch_find("gemma4", 6)->load_hparams(&f, &hp);
    CHECKF(s == SB_OK, "%s: hparams: %s", w->preset, sb_last_error());
    if (s != SB_OK) goto done;
    CHECK_EQ_INT(hp.n_layer, w->n_layer);
    CHECK_EQ_INT(hp.n_embd, w->n_embd);
    CHECK_EQ_INT(hp.n_layer_kv, w->n_layer_kv);
    CHECK_EQ_INT(hp.n_embd_per_layer, w->P);
    CHECK_EQ_INT(hp.n_swa, w->n_swa);
    CHECK_EQ_INT(hp.head_dim, w->hd_global);
    CHECK_EQ_INT(hp.head_dim_swa, w->hd_swa);
    const int64_t E = w->n_embd, L = w->n_layer, P = w->P;
    n_expected = 0;
    expect(&t, w->preset, "token_embd.weight", E, V);
    expect(&t, w->preset, "output_norm.weight", E, 1);
    expect(&t, w->preset, "rope_freqs.weight", w->hd_global / 2, 1);
    absent(&t, w->preset, "output.weight"); /* tied */
    if (P > 0) {
        expect(&t, w->preset, "per_layer_token_embd.weight", P * L, V);
        expect(&t, w->preset, "per_layer_model_proj.weight", E, P * L);
        expect(&t, w->preset, "per_layer_proj_norm.weight", P, 1);
    } else {
        absent(&t, w->preset, "per_layer_token_embd.weight");
    }
    for (int l = 0; l < L; l++) {
        const bool global = l % w->period == w->period - 1;
        const int hd = global ? w->hd_global : w->hd_swa, nkv = global ? w->kv_global : w->kv_swa;
        const int ff = l >= w->n_layer_kv && w->n_ff_shared ? w->n_ff_shared : w->n_ff;
        CHECKF(hp.is_swa[l] == !global, "%s: layer %d sliding = %d", w->preset, l, (int)hp.is_swa[l]);
        CHECKF(hp.layer_n_head[l] == w->n_head && hp.layer_n_head_kv[l] == nkv && hp.layer_n_ff[l] == ff,
               "%s: layer %d: heads %lld/%lld ff %lld, want %d/%d %d", w->preset, l, (long long)hp.layer_n_head[l],
               (long long)hp.layer_n_head_kv[l], (long long)hp.layer_n_ff[l], w->n_head, nkv, ff);
        CHECKF(rt_hp_head_dim(&hp, l) == hd, "%s: layer %d head dim %lld", w->preset, l, (long long)rt_hp_head_dim(&hp, l));
        char n[96];
#define B(suffix) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), n)
        expect(&t, w->preset, B("attn_norm.weight"), E, 1);
        expect(&t, w->preset, B("attn_q.weight"), E, (int64_t)w->n_head * hd);
        expect(&t, w->preset, B("attn_q_norm.weight"), hd, 1);
        if (l < w->n_layer_kv) {
            expect(&t, w->preset, B("attn_k.weight"), E, (int64_t)nkv * hd);
            expect(&t, w->preset, B("attn_k_norm.weight"), hd, 1);
            if (global && w->v_is_k_global) absent(&t, w->preset, B("attn_v.weight"));
            else expect(&t, w->preset, B("attn_v.weight"), E, (int64_t)nkv * hd);
        } else {
            absent(&t, w->preset, B("attn_k.weight"));
            absent(&t, w->preset, B("attn_v.weight"));
        }
        expect(&t, w->preset, B("attn_output.weight"), (int64_t)w->n_head * hd, E);
        expect(&t, w->preset, B("post_attention_norm.weight"), E, 1);
        expect(&t, w->preset, B("ffn_norm.weight"), E, 1);
        expect(&t, w->preset, B("ffn_gate.weight"), E, ff);
        expect(&t, w->preset, B("ffn_up.weight"), E, ff);
        expect(&t, w->preset, B("ffn_down.weight"), ff, E);
        expect(&t, w->preset, B("post_ffw_norm.weight"), E, 1);
        if (P > 0) {
            expect(&t, w->preset, B("inp_gate.weight"), E, P);
            expect(&t, w->preset, B("proj.weight"), P, E);
            expect(&t, w->preset, B("post_norm.weight"), E, 1);
        }
#undef B
    }
    CHECKF(t.n == n_expected, "%s: %lld tensors, the spec's set has %d", w->preset, (long long)t.n, n_expected);
    CHECKF(!strcmp(rt_synth_default_type(rt_synth_preset_find(w->preset)), w->default_type), "%s: default type %s", w->preset,
           rt_synth_default_type(rt_synth_preset_find(w->preset)));
    printf("%-12s %lld tensors, %d layers (%d with own KV), default %s: ok\n", w->preset, (long long)t.n, w->n_layer, w->n_layer_kv,
           w->default_type);
done:
    gguf_close(&f);
    free(mem);
    rt_synth_tensors_free(&t);
}

int main(void) {
    static const want presets[] = {
        /* preset        L   E     nh kvs kvg hds hdg per P    Lkv ff     ffsh   swa  V=K */
        {"gemma4-e2b", 35, 1536, 8, 1, 1, 256, 512, 5, 256, 15, 6144, 12288, 512, false, "F32"},
        {"gemma4-e4b", 42, 2560, 8, 2, 2, 256, 512, 6, 256, 24, 10240, 0, 512, false, "Q3_K_M"},
        {"gemma4-31b", 60, 5376, 32, 16, 4, 256, 512, 6, 0, 60, 21504, 0, 1024, true, "F32"},
        {"tiny-gemma4", 8, 256, 4, 2, 2, 64, 128, 4, 32, 4, 512, 0, 6, false, "F32"},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) check_preset(&presets[i]);
    CHECK(!strcmp(rt_synth_default_type(rt_synth_preset_find("qwen2.5-0.5b")), "F32"));
    gguf_writer *gw;
    CHECK(gguf_writer_create(&gw) == SB_OK);
    rt_synth_tensors t;
    CHECK(rt_synth_layout("gemma4-e9b", 1000, gw, &t) == SB_ERR_INVALID_ARG && t.n == 0);
    gguf_writer_free(gw);
    return test_summary();
}
