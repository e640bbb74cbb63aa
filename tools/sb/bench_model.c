/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/bench_model.c — the model and machine facts `sb bench` reports, in llama-bench's terms
 * (bench.h):
 *   model_type  llama_model_desc's "ARCH SIZE FTYPE": SIZE is llama.cpp's size class, chosen per
 *               architecture from the layer count (and width / vocabulary / heads where llama.cpp
 *               looks at them), "?B" where llama.cpp has none; FTYPE is llama_model_ftype_name of
 *               general.file_type, or of the most common tensor type + " (guessed)" without it.
 *   model_size, model_n_params   bytes and elements of every tensor in the file.
 *   build_commit / build_number  the git commit and commit count CMake saw at configure time
 *               (SB_BUILD_COMMIT / SB_BUILD_NUMBER; `make` configures on every build), else
 *               "unknown" / 0.
 *   cpu_info    /proc/cpuinfo's first "model name"; gpu_info: CUDA device 0's name.
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>

#ifndef SB_BUILD_COMMIT
#define SB_BUILD_COMMIT "unknown"
#endif
#ifndef SB_BUILD_NUMBER
#define SB_BUILD_NUMBER 0
#endif

/* llama.cpp's llm_type for the architectures this runtime loads; NULL for LLM_TYPE_UNKNOWN. */
static const char *size_class(const sb_model_info *mi) {
    const int64_t L = mi->n_layer, E = mi->n_embd;
    if (!strcmp(mi->arch, "qwen2")) {
        switch (L) {
        case 24: return E == 1024 ? "0.5B" : "1B";
        case 28: return E == 1536 ? "1.5B" : "7B";
        case 32: return "7B";
        case 36: return "3B";
        case 40: return mi->n_head == 20 ? "4B" : "13B";
        case 48: return "14B";
        case 64: return "32B";
        case 80: return "70B";
        }
    } else if (!strcmp(mi->arch, "qwen3")) {
        switch (L) {
        case 28: return E == 1024 ? "0.6B" : "1.7B";
        case 36: return E == 2560 ? "4B" : "8B";
        case 40: return "14B";
        case 64: return "32B";
        }
    } else if (!strcmp(mi->arch, "llama")) {
        switch (L) {
        case 16: case 22: return "1B";
        case 26: case 28: return "3B";
        case 30: return "256M";
        case 32: return mi->n_vocab == 49152 ? "3B" : mi->n_vocab < 40000 ? "7B" : "8B";
        case 36: return "8B";
        case 40: return "13B";
        case 48: return "34B";
        case 60: return "30B";
        case 80: return mi->n_head == mi->n_head_kv ? "65B" : "70B";
        }
    } else if (!strcmp(mi->arch, "gemma3")) {
        switch (L) {
        case 18: return "270M";
        case 26: return "1B";
        case 32: return "8B";
        case 34: return "4B";
        case 48: return "12B";
        case 62: return "27B";
        }
    } else if (!strcmp(mi->arch, "gemma4")) { /* llama_model_gemma4::load_arch_hparams */
        switch (L) {
        case 30: return "26B.A4B";
        case 35: return "E2B";
        case 42: return "E4B";
        case 60: return "31B";
        }
    }
    return NULL;
}

/* llama_model_ftype_name for the llama_ftype numbers of general.file_type. */
static const char *ftype_name(int64_t ft) {
    static const struct { int id; const char *name; } names[] = {
        {0, "all F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
        {10, "Q2_K - Medium"}, {11, "Q3_K - Small"}, {12, "Q3_K - Medium"}, {13, "Q3_K - Large"},
        {14, "Q4_K - Small"}, {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"},
        {18, "Q6_K"}, {19, "IQ2_XXS - 2.0625 bpw"}, {20, "IQ2_XS - 2.3125 bpw"}, {21, "Q2_K - Small"},
        {22, "IQ3_XS - 3.3 bpw"}, {23, "IQ3_XXS - 3.0625 bpw"}, {24, "IQ1_S - 1.5625 bpw"},
        {25, "IQ4_NL - 4.5 bpw"}, {26, "IQ3_S - 3.4375 bpw"}, {27, "IQ3_S mix - 3.66 bpw"},
        {28, "IQ2_S - 2.5 bpw"}, {29, "IQ2_M - 2.7 bpw"}, {30, "IQ4_XS - 4.25 bpw"}, {31, "IQ1_M - 1.75 bpw"},
        {32, "BF16"}, {36, "TQ1_0 - 1.69 bpw ternary"}, {37, "TQ2_0 - 2.06 bpw ternary"}, {38, "MXFP4 MoE"},
        {39, "NVFP4"}, {40, "Q1_0"}, {41, "Q2_0"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].id == ft) return names[i].name;
    return "unknown, may not work";
}

/* llama.cpp's guess without general.file_type: the ftype of the type most tensors have (the first
 * to reach that count, in file order); all F32 for a type it has no ftype for. */
static int64_t guess_ftype(int type) {
    static const struct { int type, ftype; } map[] = {
        {SB_TYPE_F32, 0}, {SB_TYPE_F16, 1}, {SB_TYPE_BF16, 32}, {SB_TYPE_Q4_0, 2}, {SB_TYPE_Q4_1, 3},
        {SB_TYPE_Q5_0, 8}, {SB_TYPE_Q5_1, 9}, {SB_TYPE_Q8_0, 7}, {SB_TYPE_Q2_K, 10}, {SB_TYPE_Q3_K, 12},
        {SB_TYPE_Q4_K, 15}, {SB_TYPE_Q5_K, 17}, {SB_TYPE_Q6_K, 18}, {SB_TYPE_TQ1_0, 36}, {SB_TYPE_TQ2_0, 37},
        {SB_TYPE_IQ2_XXS, 19}, {SB_TYPE_IQ2_XS, 20}, {SB_TYPE_IQ2_S, 28}, {SB_TYPE_IQ3_XXS, 23},
        {SB_TYPE_IQ1_S, 24}, {SB_TYPE_IQ1_M, 31}, {SB_TYPE_IQ4_NL, 25}, {SB_TYPE_IQ4_XS, 30},
        {SB_TYPE_IQ3_S, 26}, {SB_TYPE_NVFP4, 39}, {SB_TYPE_Q1_0, 40}, {SB_TYPE_Q2_0, 41},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].type == type) return map[i].ftype;
    return 0;
}

sb_status bench_describe_model(const char *path, const sb_model_info *mi, bench_model_desc *d) {
    sb_gguf *g = NULL;
    sb_status st = sb_gguf_open(path, &g);
    sb_gguf_info gi;
    if (st == SB_OK) st = sb_gguf_get_info(g, &gi);
    int64_t count[SB_TYPE_COUNT] = {0}, n_max = 0;
    int type_max = SB_TYPE_F32;
    memset(d, 0, sizeof *d);
    d->filename = path;
    d->weight_bytes = mi->weight_bytes;
    for (int64_t i = 0; st == SB_OK && i < gi.n_tensors; i++) {
        sb_gguf_tensor t;
        st = sb_gguf_get_tensor(g, i, &t);
        if (st != SB_OK) break;
        uint64_t n = 1;
        for (int k = 0; k < 4; k++) n *= (uint64_t)t.ne[k];
        d->n_params += n;
        d->size += t.nbytes;
        if (t.type >= 0 && t.type < SB_TYPE_COUNT && ++count[t.type] > n_max) {
            n_max = count[t.type];
            type_max = t.type;
        }
    }
    int64_t ft = -1, idx;
    int guessed = 0;
    if (st == SB_OK && (sb_gguf_find_key(g, "general.file_type", &idx) != SB_OK || sb_gguf_get_int(g, idx, 0, &ft) != SB_OK)) {
        ft = guess_ftype(type_max);
        guessed = 1;
    }
    sb_gguf_free(g);
    if (st != SB_OK) return st;
    const char *sz = size_class(mi);
    snprintf(d->type, sizeof d->type, "%s %s %s%s", mi->arch, sz ? sz : "?B", guessed ? "(guessed) " : "", ftype_name(ft));
    return SB_OK;
}

static void cpu_model_name(char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strcspn(v, "\n");
        snprintf(buf, cap, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

void bench_machine_info(bench_machine *m) {
    memset(m, 0, sizeof *m);
    m->build_commit = SB_BUILD_COMMIT[0] ? SB_BUILD_COMMIT : "unknown";
    m->build_number = SB_BUILD_NUMBER;
    cpu_model_name(m->cpu_info, sizeof m->cpu_info);
    sb_backend_info bi;
    if (sb_backend_get_info(&bi) == SB_OK && bi.cuda_devices > 0) {
        m->have_gpu = 1;
        snprintf(m->gpu_info, sizeof m->gpu_info, "%s", bi.cuda_device_name);
    }
}
