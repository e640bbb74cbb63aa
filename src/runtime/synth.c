/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/synth.c — presets, metadata, tensor lists and the random fill of `sb synth` (synth.h).
 * Layer 2 (runtime). Metadata follows what convert_hf_to_gguf.py writes for each architecture
 * (general.*, <arch>.* hyperparameters, then tokenizer.*); the quantize pipeline appends
 * general.quantization_version and general.file_type and orders the tensors like llama-quantize.
 * RNG: splitmix64 keyed by (seed, FNV-1a of the tensor name, row); Box-Muller on 24-bit uniforms,
 * two normals per 64-bit draw (~10 ns per weight; 500 M weights in seconds on 2 cores).
 */
#define _GNU_SOURCE /* sincosf */
#include "runtime/synth.h"
#include "base/status.h"
#include "format/gguf.h"
#include "format/gguf_write.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RT_SYNTH_MAX_LAYERS 128

// ---- presets (architectures.md §9; tiny-* have the tensor shapes of testdata/models/test-*) ----

static const rt_synth_preset presets[] = {
    {"qwen2.5-0.5b", "Qwen2.5-0.5B(-Instruct) shape: qwen2, 24 layers, 896 wide, GQA 14/2, QKV bias, tied",
     "qwen2", "Qwen2.5 0.5B Instruct (synthetic)", 24, 896, 14, 2, 0, 4864, 151936, 32768, 1e6f, 0, 1e-6f, 0,
     true, false, true, false, 0},
    {"qwen2.5-1.5b", "Qwen2.5-1.5B(-Instruct) shape: qwen2, 28 layers, 1536 wide, GQA 12/2, QKV bias, tied",
     "qwen2", "Qwen2.5 1.5B Instruct (synthetic)", 28, 1536, 12, 2, 0, 8960, 151936, 32768, 1e6f, 0, 1e-6f, 0,
     true, false, true, false, 0},
    {"qwen3-0.6b", "Qwen3-0.6B shape: qwen3, 28 layers, 1024 wide, 16/8 heads of 128, q/k norm, tied",
     "qwen3", "Qwen3 0.6B (synthetic)", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1e6f, 0, 1e-6f, 0,
     false, true, true, false, 0},
    {"llama-3.2-1b", "Llama-3.2-1B(-Instruct) shape: llama, 16 layers, 2048 wide, 32/8 heads, llama3 rope_freqs, tied",
     "llama", "Llama 3.2 1B Instruct (synthetic)", 16, 2048, 32, 8, 64, 8192, 128256, 131072, 5e5f, 0, 1e-5f, 0,
     false, false, true, true, 0},
    {"llama-3.1-8b", "Llama-3.1-8B(-Instruct) shape: llama, 32 layers, 4096 wide, 32/8 heads of 128, llama3 rope_freqs (x8), untied",
     "llama", "Llama 3.1 8B Instruct (synthetic)", 32, 4096, 32, 8, 128, 14336, 128256, 131072, 5e5f, 0, 1e-5f, 0,
     false, false, false, true, 8.0f},
    {"qwen3-8b", "Qwen3-8B shape: qwen3, 36 layers, 4096 wide, 32/8 heads of 128, q/k norm, untied",
     "qwen3", "Qwen3 8B (synthetic)", 36, 4096, 32, 8, 128, 12288, 151936, 40960, 1e6f, 0, 1e-6f, 0,
     false, true, false, false, 0},
    {"qwen2.5-32b", "Qwen2.5-32B(-Instruct) shape: qwen2, 64 layers, 5120 wide, GQA 40/8, QKV bias, untied",
     "qwen2", "Qwen2.5 32B Instruct (synthetic)", 64, 5120, 40, 8, 0, 27648, 152064, 32768, 1e6f, 0, 1e-5f, 0,
     true, false, false, false, 0},
    {"gemma3-1b", "Gemma-3-1B(-it) shape: gemma3, 26 layers, 1152 wide, 4/1 heads of 256, SWA 512, tied",
     "gemma3", "Gemma 3 1B It (synthetic)", 26, 1152, 4, 1, 256, 6912, 262144, 32768, 1e6f, 1e4f, 1e-6f, 512,
     false, true, true, false, 0},
    {"gemma4-e4b", "Gemma-4-E4B(-it) shape (architectures.md 6.7): gemma4, 42 layers, 2560 wide, 8/2 heads of 256 (sliding) / 512 "
     "(global, partial RoPE), per-layer embeddings 256, last 18 layers share KV, SWA 512, tied; default type Q3_K_M",
     "gemma4", "Gemma 4 E4B It (synthetic)", 42, 2560, 8, 2, 512, 10240, 262144, 131072, 1e6f, 1e4f, 1e-6f, 512,
     false, true, true, false, 0},
    {"gemma4-e2b", "Gemma-4-E2B(-it) shape [external]: gemma4, 35 layers, 1536 wide, 8/1 heads of 256 (sliding) / 512 (global), "
     "4:1 pattern, per-layer embeddings 256, last 20 layers share KV with double-wide FFN (12288), SWA 512, tied",
     "gemma4", "Gemma 4 E2B It (synthetic)", 35, 1536, 8, 1, 512, 6144, 262144, 131072, 1e6f, 1e4f, 1e-6f, 512,
     false, true, true, false, 0},
    {"gemma4-31b", "Gemma-4-31B(-it) shape [external]: gemma4, 60 layers, 5376 wide, 32 heads, 16 KV heads of 256 (sliding) / "
     "4 of 512 (global, V = K), 5:1 pattern, no per-layer embeddings or shared KV, SWA 1024, tied",
     "gemma4", "Gemma 4 31B It (synthetic)", 60, 5376, 32, 16, 512, 21504, 262144, 262144, 1e6f, 1e4f, 1e-6f, 1024,
     false, true, true, false, 0},
    {"tiny-qwen2", "test shape: qwen2, 2 layers, 256 wide, 4/2 heads, QKV bias, tied, 512-token vocab",
     "qwen2", "tiny-qwen2 (synthetic)", 2, 256, 4, 2, 0, 768, 512, 4096, 1e6f, 0, 1e-6f, 0,
     true, false, true, false, 0},
    {"tiny-qwen3", "test shape: qwen3, 2 layers, 256 wide, 4/2 heads of 96, q/k norm, tied, 512-token vocab",
     "qwen3", "tiny-qwen3 (synthetic)", 2, 256, 4, 2, 96, 768, 512, 4096, 1e6f, 0, 1e-6f, 0,
     false, true, true, false, 0},
    {"tiny-llama", "test shape: llama, 2 layers, 256 wide, 8/2 heads of 32, untied output, rope_freqs, 512-token vocab",
     "llama", "tiny-llama (synthetic)", 2, 256, 8, 2, 0, 768, 512, 4096, 5e5f, 0, 1e-5f, 0,
     false, false, false, true, 0},
    {"tiny-gemma3", "test shape: gemma3, 4 layers, 256 wide, 4/1 heads of 64, SWA 8, tied, 512-token vocab",
     "gemma3", "tiny-gemma3 (synthetic)", 4, 256, 4, 1, 64, 768, 512, 4096, 1e6f, 1e4f, 1e-6f, 8,
     false, true, true, false, 0},
    {"tiny-gemma4", "test shape: gemma4, 8 layers, 256 wide, 4/2 heads of 64 (sliding) / 128 (global), per-layer embeddings 32, "
     "last 4 layers share KV, SWA 6, tied, 512-token vocab",
     "gemma4", "tiny-gemma4 (synthetic)", 8, 256, 4, 2, 128, 512, 512, 4096, 1e6f, 1e4f, 1e-6f, 6,
     false, true, true, false, 0},
};

/* What a gemma4 preset adds to rt_synth_preset (whose head_dim is the global layers', n_head_kv the
 * sliding layers' and n_ff the layers with their own KV). E4B: architectures.md 6.7. E2B and 31B are
 * the published configs as third-party summaries give them [external, as 6.7 marks E4B's]:
 * E2B 35 layers x 1536, 8 heads, 1 KV head, FFN 6144 (12288 on the 20 KV-shared layers,
 * use_double_wide_mlp), 4 sliding : 1 global; 31B 60 layers x 5376, 32 heads, 16 KV heads on
 * sliding and 4 on global layers, whose V is K (attention_k_eq_v: no attn_v), window 1024, no PLE. */
typedef struct g4_shape {
    const char *preset;
    int head_dim_swa;
    int period;         /* layer l is global iff l % period == period - 1 (E4B: 5 sliding, 1 global) */
    int per_layer;      /* PLE width P (0: none) */
    int shared_kv;      /* trailing layers that read layer K-2's / K-1's cache */
    int n_head_kv_global; /* 0: the preset's n_head_kv on every layer */
    int n_ff_shared;    /* FFN width of the KV-shared layers (0: the preset's n_ff) */
    bool v_is_k_global; /* global layers have no attn_v (V := K) */
    const char *default_type; /* mix when the caller names none (NULL: F32) */
} g4_shape;

static const g4_shape g4_shapes[] = {
    {"gemma4-e4b", 256, 6, 256, 18, 0, 0, false, "Q3_K_M"}, /* issue 27: E4B is measured as Q3_K_M */
    {"gemma4-e2b", 256, 5, 256, 20, 0, 12288, false, NULL},
    {"gemma4-31b", 256, 6, 0, 0, 4, 0, true, NULL},
    {"tiny-gemma4", 64, 4, 32, 4, 0, 0, false, NULL},
};

static const g4_shape *g4_of(const rt_synth_preset *p) {
    for (size_t i = 0; i < sizeof g4_shapes / sizeof g4_shapes[0]; i++)
        if (!strcmp(g4_shapes[i].preset, p->name)) return &g4_shapes[i];
    return NULL;
}

static bool g4_global(const g4_shape *x, int l) { return l % x->period == x->period - 1; }

static int g4_n_head_kv(const rt_synth_preset *p, const g4_shape *x, int l) {
    return g4_global(x, l) && x->n_head_kv_global ? x->n_head_kv_global : p->n_head_kv;
}

static int g4_n_ff(const rt_synth_preset *p, const g4_shape *x, int l) {
    return l >= p->n_layer - x->shared_kv && x->n_ff_shared ? x->n_ff_shared : p->n_ff;
}

const rt_synth_preset *rt_synth_preset_at(int i) {
    return (i >= 0 && (size_t)i < sizeof presets / sizeof presets[0]) ? &presets[i] : NULL;
}

const rt_synth_preset *rt_synth_preset_find(const char *name) {
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (!strcasecmp(name, presets[i].name)) return &presets[i];
    return NULL;
}

// ---- RNG ----

static inline uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

void rt_synth_normal_row(uint64_t seed, uint64_t key, int64_t row, float mean, float std, float *dst, int64_t n) {
    uint64_t st = seed * 0xD1B54A32D192ED03ull ^ key;
    st = splitmix(&st) ^ (uint64_t)row * 0x9E3779B97F4A7C15ull;
    (void)splitmix(&st);
    const float twopi = 6.28318530717958647692f, s24 = 1.0f / 16777216.0f;
    int64_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t r = splitmix(&st);
        float u1 = (float)((r >> 40) + 1) * s24;            /* (0, 1] */
        float u2 = (float)(r & 0xFFFFFF) * s24;             /* [0, 1) */
        float m = sqrtf(-2.0f * logf(u1)) * std;
        float sn, cs;
        sincosf(twopi * u2, &sn, &cs);
        dst[i] = mean + m * cs;
        dst[i + 1] = mean + m * sn;
    }
    if (i < n) {
        uint64_t r = splitmix(&st);
        float u1 = (float)((r >> 40) + 1) * s24, u2 = (float)(r & 0xFFFFFF) * s24;
        dst[i] = mean + sqrtf(-2.0f * logf(u1)) * std * cosf(twopi * u2);
    }
}

// ---- tensors ----

enum { K_WEIGHT, K_NORM, K_ROPE_FREQS, K_G4_FREQS };

typedef struct stensor {
    char name[GGUF_MAX_NAME];
    int kind;
    uint64_t key;
} stensor;

typedef struct synth_ctx {
    const rt_synth_preset *p;
    uint64_t seed;
    stensor *st;
    rt_qtensor *qt;
    int64_t n, cap;
} synth_ctx;

static sb_status add(synth_ctx *c, const char *name, int kind, int64_t ne0, int64_t ne1) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 256;
        stensor *st = (stensor *)realloc(c->st, (size_t)cap * sizeof *st);
        if (!st) return sb_fail(SB_ERR_OOM, "synth: tensor list");
        c->st = st;
        rt_qtensor *qt = (rt_qtensor *)realloc(c->qt, (size_t)cap * sizeof *qt);
        if (!qt) return sb_fail(SB_ERR_OOM, "synth: tensor list");
        c->qt = qt;
        c->cap = cap;
    }
    stensor *s = &c->st[c->n];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->kind = kind;
    s->key = fnv1a(name);
    c->qt[c->n] = (rt_qtensor){.name = NULL, .n_dims = ne1 > 1 ? 2 : 1, .ne = {ne0, ne1, 1, 1}, .type = SB_TYPE_F32};
    c->n++;
    return SB_OK;
}

/* add() for layer l's tensor "blk.<l>.<suffix>" */
static sb_status add_blk(synth_ctx *c, int l, const char *suffix, int kind, int64_t ne0, int64_t ne1) {
    char nm[GGUF_MAX_NAME];
    snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);
    return add(c, nm, kind, ne0, ne1);
}

/* Gemma 4 (architectures.md 6.2): two head sizes, K/V only on the first n_layer - shared_kv layers,
 * per-layer-embedding tensors, one rope_freqs for the global layers. */
static sb_status build_gemma4(synth_ctx *c, const g4_shape *x, int64_t n_vocab) {
    const rt_synth_preset *p = c->p;
    const int64_t E = p->n_embd, P = x->per_layer, L = p->n_layer;
    SB_TRY(add(c, "token_embd.weight", K_WEIGHT, E, n_vocab));
    SB_TRY(add(c, "rope_freqs.weight", K_G4_FREQS, p->head_dim / 2, 1));
    if (P > 0) {
        SB_TRY(add(c, "per_layer_token_embd.weight", K_WEIGHT, P * L, n_vocab));
        SB_TRY(add(c, "per_layer_model_proj.weight", K_WEIGHT, E, P * L));
        SB_TRY(add(c, "per_layer_proj_norm.weight", K_NORM, P, 1));
    }
    for (int l = 0; l < p->n_layer; l++) {
        const bool global = g4_global(x, l);
        const int64_t hd = global ? p->head_dim : x->head_dim_swa, Dq = p->n_head * hd, Dkv = g4_n_head_kv(p, x, l) * hd;
        const int64_t F = g4_n_ff(p, x, l);
        SB_TRY(add_blk(c, l, "attn_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "attn_q.weight", K_WEIGHT, E, Dq));
        SB_TRY(add_blk(c, l, "attn_q_norm.weight", K_NORM, hd, 1));
        if (l < p->n_layer - x->shared_kv) {
            SB_TRY(add_blk(c, l, "attn_k.weight", K_WEIGHT, E, Dkv));
            if (!(global && x->v_is_k_global)) SB_TRY(add_blk(c, l, "attn_v.weight", K_WEIGHT, E, Dkv));
            SB_TRY(add_blk(c, l, "attn_k_norm.weight", K_NORM, hd, 1));
        }
        SB_TRY(add_blk(c, l, "attn_output.weight", K_WEIGHT, Dq, E));
        SB_TRY(add_blk(c, l, "post_attention_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "ffn_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "ffn_gate.weight", K_WEIGHT, E, F));
        SB_TRY(add_blk(c, l, "ffn_up.weight", K_WEIGHT, E, F));
        SB_TRY(add_blk(c, l, "ffn_down.weight", K_WEIGHT, F, E));
        SB_TRY(add_blk(c, l, "post_ffw_norm.weight", K_NORM, E, 1));
        if (P > 0) {
            SB_TRY(add_blk(c, l, "inp_gate.weight", K_WEIGHT, E, P));
            SB_TRY(add_blk(c, l, "proj.weight", K_WEIGHT, P, E));
            SB_TRY(add_blk(c, l, "post_norm.weight", K_NORM, E, 1));
        }
    }
    SB_TRY(add(c, "output_norm.weight", K_NORM, E, 1));
    for (int64_t i = 0; i < c->n; i++) c->qt[i].name = c->st[i].name;
    return SB_OK;
}

static sb_status build_tensors(synth_ctx *c, int64_t n_vocab) {
    const rt_synth_preset *p = c->p;
    const g4_shape *x = g4_of(p);
    if (x) return build_gemma4(c, x, n_vocab);
    const int64_t E = p->n_embd, hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    const int64_t Dq = p->n_head * hd, Dkv = p->n_head_kv * hd, F = p->n_ff;
    const bool gemma = !strcmp(p->arch, "gemma3");
    SB_TRY(add(c, "token_embd.weight", K_WEIGHT, E, n_vocab));
    if (p->llama3_rope) SB_TRY(add(c, "rope_freqs.weight", K_ROPE_FREQS, hd / 2, 1));
    for (int l = 0; l < p->n_layer; l++) {
        SB_TRY(add_blk(c, l, "attn_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "attn_q.weight", K_WEIGHT, E, Dq));
        SB_TRY(add_blk(c, l, "attn_k.weight", K_WEIGHT, E, Dkv));
        SB_TRY(add_blk(c, l, "attn_v.weight", K_WEIGHT, E, Dkv));
        if (p->qkv_bias) {
            SB_TRY(add_blk(c, l, "attn_q.bias", K_WEIGHT, Dq, 1));
            SB_TRY(add_blk(c, l, "attn_k.bias", K_WEIGHT, Dkv, 1));
            SB_TRY(add_blk(c, l, "attn_v.bias", K_WEIGHT, Dkv, 1));
        }
        if (p->qk_norm) {
            SB_TRY(add_blk(c, l, "attn_q_norm.weight", K_NORM, hd, 1));
            SB_TRY(add_blk(c, l, "attn_k_norm.weight", K_NORM, hd, 1));
        }
        SB_TRY(add_blk(c, l, "attn_output.weight", K_WEIGHT, Dq, E));
        if (gemma) SB_TRY(add_blk(c, l, "post_attention_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "ffn_norm.weight", K_NORM, E, 1));
        SB_TRY(add_blk(c, l, "ffn_gate.weight", K_WEIGHT, E, F));
        SB_TRY(add_blk(c, l, "ffn_up.weight", K_WEIGHT, E, F));
        SB_TRY(add_blk(c, l, "ffn_down.weight", K_WEIGHT, F, E));
        if (gemma) SB_TRY(add_blk(c, l, "post_ffw_norm.weight", K_NORM, E, 1));
    }
    SB_TRY(add(c, "output_norm.weight", K_NORM, E, 1));
    if (!p->tied) SB_TRY(add(c, "output.weight", K_WEIGHT, E, n_vocab));
    for (int64_t i = 0; i < c->n; i++) c->qt[i].name = c->st[i].name;
    return SB_OK;
}

/* convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: llama3 rope scaling factors */
static void llama3_rope_freqs(const rt_synth_preset *p, float *dst, int64_t n) {
    const double base = p->rope_base, factor = p->rope_factor > 0 ? p->rope_factor : 32.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
    const double dim = (double)(2 * n), low_wl = old_ctx / low, high_wl = old_ctx / high;
    for (int64_t i = 0; i < n; i++) {
        double freq = 1.0 / pow(base, (double)(2 * i) / dim);
        double wl = 2.0 * M_PI / freq, f;
        if (wl < high_wl) f = 1.0;
        else if (wl > low_wl) f = factor;
        else {
            double smooth = (old_ctx / wl - low) / (high - low);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        dst[i] = (float)f;
    }
}

static sb_status fill(void *ctx, int64_t ti, int64_t row0, int64_t nrows, float *dst) {
    const synth_ctx *c = (const synth_ctx *)ctx;
    const stensor *s = &c->st[ti];
    const int64_t ne0 = c->qt[ti].ne[0];
    if (s->kind == K_ROPE_FREQS) {
        llama3_rope_freqs(c->p, dst, ne0);
        return SB_OK;
    }
    if (s->kind == K_G4_FREQS) { /* proportional RoPE, partial factor 0.25: the rest of the pairs never turn (6.4) */
        for (int64_t i = 0; i < ne0; i++) dst[i] = i < ne0 / 4 ? 1.0f : 1e30f;
        return SB_OK;
    }
    for (int64_t r = 0; r < nrows; r++)
        rt_synth_normal_row(c->seed, s->key, row0 + r, s->kind == K_NORM ? 1.0f : 0.0f, 0.02f, dst + r * ne0, ne0);
    return SB_OK;
}

// ---- metadata ----

static sb_status meta(gguf_writer *w, const rt_synth_preset *p, int64_t n_vocab) {
    char k[128];
    const char *a = p->arch;
    const bool gemma = !strcmp(a, "gemma3"), llama = !strcmp(a, "llama");
    SB_TRY(gguf_writer_set_str(w, "general.architecture", a, strlen(a)));
    SB_TRY(gguf_writer_set_str(w, "general.type", "model", 5));
    SB_TRY(gguf_writer_set_str(w, "general.name", p->model_name, strlen(p->model_name)));
#define U32(suffix, v) (snprintf(k, sizeof k, "%s.%s", a, suffix), gguf_writer_set_u32(w, k, (uint32_t)(v)))
#define F32(suffix, v) (snprintf(k, sizeof k, "%s.%s", a, suffix), gguf_writer_set_f32(w, k, (v)))
    SB_TRY(U32("block_count", p->n_layer));
    SB_TRY(U32("context_length", p->n_ctx));
    SB_TRY(U32("embedding_length", p->n_embd));
    const g4_shape *g4 = g4_of(p);
    if (!g4 || !g4->n_ff_shared) SB_TRY(U32("feed_forward_length", p->n_ff));
    SB_TRY(U32("attention.head_count", p->n_head));
    if (!g4 || !g4->n_head_kv_global) SB_TRY(U32("attention.head_count_kv", p->n_head_kv));
    SB_TRY(F32("rope.freq_base", p->rope_base));
    SB_TRY(F32("attention.layer_norm_rms_epsilon", p->eps));
    if (p->head_dim) {
        SB_TRY(U32("attention.key_length", p->head_dim));
        SB_TRY(U32("attention.value_length", p->head_dim));
    }
    if (llama) {
        SB_TRY(U32("rope.dimension_count", p->head_dim ? p->head_dim : p->n_embd / p->n_head));
        SB_TRY(U32("vocab_size", n_vocab));
    }
    if (gemma || g4_of(p)) {
        if (p->sliding_window) SB_TRY(U32("attention.sliding_window", p->sliding_window));
        SB_TRY(F32("rope.freq_base_swa", p->rope_base_swa));
    }
    const g4_shape *x = g4_of(p);
    if (x) {
        uint8_t pattern[RT_SYNTH_MAX_LAYERS];
        for (int l = 0; l < p->n_layer && l < RT_SYNTH_MAX_LAYERS; l++) pattern[l] = !g4_global(x, l);
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", a);
        SB_TRY(gguf_writer_set_raw(w, k, SB_GGUF_ARRAY, SB_GGUF_BOOL, (uint64_t)p->n_layer, pattern));
        SB_TRY(U32("attention.key_length_swa", x->head_dim_swa));
        SB_TRY(U32("attention.value_length_swa", x->head_dim_swa));
        SB_TRY(U32("rope.dimension_count", p->head_dim));
        SB_TRY(U32("rope.dimension_count_swa", x->head_dim_swa));
        SB_TRY(U32("embedding_length_per_layer_input", x->per_layer));
        SB_TRY(U32("attention.shared_kv_layers", x->shared_kv));
        SB_TRY(F32("final_logit_softcapping", 30.0f));
        int32_t arr[RT_SYNTH_MAX_LAYERS];
        if (x->n_head_kv_global) { /* per-layer KV head counts, as the converter writes them */
            for (int l = 0; l < p->n_layer && l < RT_SYNTH_MAX_LAYERS; l++) arr[l] = g4_n_head_kv(p, x, l);
            snprintf(k, sizeof k, "%s.attention.head_count_kv", a);
            SB_TRY(gguf_writer_set_raw(w, k, SB_GGUF_ARRAY, SB_GGUF_INT32, (uint64_t)p->n_layer, arr));
        }
        if (x->n_ff_shared) { /* use_double_wide_mlp: per-layer FFN widths */
            for (int l = 0; l < p->n_layer && l < RT_SYNTH_MAX_LAYERS; l++) arr[l] = g4_n_ff(p, x, l);
            snprintf(k, sizeof k, "%s.feed_forward_length", a);
            SB_TRY(gguf_writer_set_raw(w, k, SB_GGUF_ARRAY, SB_GGUF_INT32, (uint64_t)p->n_layer, arr));
        }
    }
#undef U32
#undef F32
    return SB_OK;
}

/* The synthetic vocabulary: <unk> <s> </s>, 256 byte tokens, then "▁x"/"x" pieces of growing length. */
static sb_status synth_vocab(gguf_writer *w, int64_t n) {
    if (n < 259 + 1) return sb_fail(SB_ERR_INVALID_ARG, "synth: a byte-fallback vocabulary needs > 259 tokens, got %lld", (long long)n);
    static const char alpha[] = "etaoinshrdlcumwfgypbvkjxqz";
    sb_strview *tok = (sb_strview *)calloc((size_t)n, sizeof *tok);
    char *text = (char *)malloc((size_t)n * 16);
    float *score = (float *)malloc((size_t)n * sizeof *score);
    int32_t *type = (int32_t *)malloc((size_t)n * sizeof *type);
    sb_status s = SB_OK;
    if (!tok || !text || !score || !type) {
        s = sb_fail(SB_ERR_OOM, "synth: vocabulary of %lld tokens", (long long)n);
        goto done;
    }
    int64_t i = 0;
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    for (; i < 3; i++) {
        strcpy(text + i * 16, special[i]);
        type[i] = i == 0 ? 2 : 3;
        score[i] = 0;
    }
    for (int b = 0; b < 256; b++, i++) {
        snprintf(text + i * 16, 16, "<0x%02X>", b);
        type[i] = 6;
        score[i] = 0;
    }
    for (int len = 1; i < n && len <= 8; len++) {
        int64_t combos = 1;
        for (int d = 0; d < len; d++) combos *= 26;
        for (int sp = 1; sp >= 0 && i < n; sp--)
            for (int64_t cmb = 0; cmb < combos && i < n; cmb++, i++) {
                char *t = text + i * 16;
                int o = 0;
                if (sp) o += sprintf(t, "\xe2\x96\x81");
                int64_t v = cmb;
                char tmp[8];
                for (int d = len - 1; d >= 0; d--) {
                    tmp[d] = alpha[v % 26];
                    v /= 26;
                }
                memcpy(t + o, tmp, (size_t)len);
                t[o + len] = 0;
                type[i] = 1;
                score[i] = -(float)(i - 259);
            }
    }
    for (int64_t j = 0; j < n; j++) tok[j] = (sb_strview){text + j * 16, strlen(text + j * 16)};
    if ((s = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5)) != SB_OK) goto done;
    if ((s = gguf_writer_set_str(w, "tokenizer.ggml.pre", "default", 7)) != SB_OK) goto done;
    if ((s = gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tok, (uint64_t)n)) != SB_OK) goto done;
    if ((s = gguf_writer_set_raw(w, "tokenizer.ggml.scores", SB_GGUF_ARRAY, SB_GGUF_FLOAT32, (uint64_t)n, score)) != SB_OK) goto done;
    if ((s = gguf_writer_set_raw(w, "tokenizer.ggml.token_type", SB_GGUF_ARRAY, SB_GGUF_INT32, (uint64_t)n, type)) != SB_OK) goto done;
    if ((s = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) != SB_OK) goto done;
    if ((s = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2)) != SB_OK) goto done;
    if ((s = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)) != SB_OK) goto done;
    if ((s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true)) != SB_OK) goto done;
    s = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
done:
    free(tok);
    free(text);
    free(score);
    free(type);
    return s;
}

// ---- entry ----

const char *rt_synth_default_type(const rt_synth_preset *p) {
    const g4_shape *x = p ? g4_of(p) : NULL;
    return x && x->default_type ? x->default_type : "F32";
}

sb_status rt_synth_layout(const char *preset, int64_t n_vocab, gguf_writer *w, rt_synth_tensors *out) {
    const rt_synth_preset *p = rt_synth_preset_find(preset);
    memset(out, 0, sizeof *out);
    if (!p) return sb_fail(SB_ERR_INVALID_ARG, "synth: unknown preset \"%s\"", preset ? preset : "(null)");
    synth_ctx c = {.p = p};
    sb_status s = meta(w, p, n_vocab);
    if (s == SB_OK) s = build_tensors(&c, n_vocab);
    if (s != SB_OK) {
        free(c.st);
        free(c.qt);
        return s;
    }
    out->t = c.qt;
    out->n = c.n;
    out->names = c.st;
    return SB_OK;
}

void rt_synth_tensors_free(rt_synth_tensors *t) {
    if (!t) return;
    free(t->t);
    free(t->names);
    memset(t, 0, sizeof *t);
}

sb_status rt_synth_model(const char *preset, const char *out, const rt_synth_opts *o) {
    if (!preset || !out || !o) return sb_fail(SB_ERR_INVALID_ARG, "synth: NULL argument");
    const rt_synth_preset *p = rt_synth_preset_find(preset);
    if (!p) {
        char list[512] = "";
        for (int i = 0; rt_synth_preset_at(i); i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, rt_synth_preset_at(i)->name, sizeof list - strlen(list) - 1);
        }
        return sb_fail(SB_ERR_INVALID_ARG, "synth: unknown preset \"%s\" (one of: %s)", preset, list);
    }
    const char *tn = o->type_name ? o->type_name : rt_synth_default_type(p);
    const rt_qmix *mix = rt_qmix_find(tn);
    if (!mix) return sb_fail(SB_ERR_INVALID_ARG, "synth: unknown type \"%s\" (see sb quantize --help)", tn);

    gguf_file voc;
    memset(&voc, 0, sizeof voc);
    bool have_voc = false;
    gguf_writer *w = NULL;
    synth_ctx c = {.p = p, .seed = o->seed};
    int64_t n_vocab = p->n_vocab;
    sb_status s;
    if (o->vocab_path) {
        if ((s = gguf_open(o->vocab_path, &voc)) != SB_OK) goto done;
        have_voc = true;
        const gguf_kv *tk = gguf_find(&voc, "tokenizer.ggml.tokens");
        if (!tk || tk->type != SB_GGUF_ARRAY || tk->elem_type != SB_GGUF_STRING || tk->count == 0) {
            s = sb_fail(SB_ERR_VOCAB, "synth: %s has no tokenizer.ggml.tokens string array", o->vocab_path);
            goto done;
        }
        n_vocab = (int64_t)tk->count;
        if (n_vocab != p->n_vocab)
            sb_log(SB_LOG_WARN, "synth: %s has %lld tokens; preset %s has %d: token_embd gets %lld rows", o->vocab_path,
                   (long long)n_vocab, p->name, p->n_vocab, (long long)n_vocab);
    }
    if ((s = gguf_writer_create(&w)) != SB_OK) goto done;
    if ((s = meta(w, p, n_vocab)) != SB_OK) goto done;
    if ((s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)mix->ftype)) != SB_OK) goto done;
    if (have_voc) {
        for (int64_t i = 0; i < voc.n_kv && s == SB_OK; i++)
            if (!strncmp(voc.kvs[i].key, "tokenizer.", 10)) s = gguf_writer_copy_kv(w, &voc.kvs[i]);
        if (s != SB_OK) goto done;
    } else if ((s = synth_vocab(w, n_vocab)) != SB_OK) {
        goto done;
    }
    if ((s = build_tensors(&c, n_vocab)) != SB_OK) goto done;
    rt_qmodel model = {.n_layer = p->n_layer, .n_gqa = p->n_head / p->n_head_kv};
    s = rt_quantize_tensors(w, mix, &model, c.qt, c.n, fill, &c, out, &o->q);
    if (s != SB_OK) sb_fail_context(s, "synth %s -> %s", p->name, out);
done:
    gguf_writer_free(w);
    if (have_voc) gguf_close(&voc);
    free(c.st);
    free(c.qt);
    return s;
}
