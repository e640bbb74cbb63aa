// SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
/*
 * bench/llama_logits.cpp — llama.cpp's logits on a shared/testdata reference's tokens, evaluated the
 * way the testdata README says the references were made (the prompt as one batch with logits for
 * every row, then each decode token alone; CPU, F32 KV cache, no flash attention), compared row by
 * row with the .ref. Used to measure how far llama.cpp itself lands from its own references under
 * its supported options (issue 27: gemma4's quantized files). Not part of the build: it links a
 * llama.cpp CPU build (../shared/anchor/llama.sh build DIR cpu):
 *   g++ -O2 -std=c++17 -I DIR/src/include -I DIR/src/ggml/include bench/llama_logits.cpp -o llama_logits \
 *       DIR/cpu/src/libllama.a DIR/cpu/ggml/src/libggml.a DIR/cpu/ggml/src/libggml-cpu.a \
 *       DIR/cpu/ggml/src/libggml-base.a -fopenmp -lpthread -ldl
 *   llama_logits MODEL.gguf MODEL.ref [threads] [--no-repack] [--fa] [--out OUT.ref] [--dump NAME_SUBSTRING DIR]
 * --out writes llama.cpp's logits as an SBREF1 file (same tokens), so `sb`'s tests or a diff tool
 * can compare against this build instead of the stored reference; --dump writes every F32 graph
 * tensor whose name contains the substring (e.g. "kqv_out", "-0") as DIR/ll_<pass>_<name>.bin
 * (int64 ne[4], then the floats; pass 0 = the prompt, k = decode token k).
 */
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static const char *g_dump, *g_dump_dir;
static int g_pass;

static bool dump_cb(ggml_tensor *t, bool ask, void *) {
    if (!g_dump || !strstr(t->name, g_dump)) return false;
    if (ask) return true;
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return true;
    std::vector<float> buf(ggml_nelements(t));
    ggml_backend_tensor_get(t, buf.data(), 0, ggml_nbytes(t));
    char fn[1024];
    snprintf(fn, sizeof fn, "%s/ll_%d_%s.bin", g_dump_dir, g_pass, t->name);
    FILE *f = fopen(fn, "wb");
    if (!f) return true;
    const long long ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    fwrite(ne, 8, 4, f);
    fwrite(buf.data(), 4, buf.size(), f);
    fclose(f);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: llama_logits MODEL.gguf MODEL.ref [threads] [--no-repack] [--fa] [--out F] [--dump S DIR]\n"); return 2; }
    int threads = 2;
    bool repack = true, fa = false;
    const char *out_path = nullptr;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--no-repack")) repack = false;
        else if (!strcmp(argv[i], "--fa")) fa = true;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--dump") && i + 2 < argc) g_dump = argv[++i], g_dump_dir = argv[++i];
        else threads = atoi(argv[i]);
    }
    FILE *fp = fopen(argv[2], "rb");
    if (!fp) { fprintf(stderr, "cannot open %s\n", argv[2]); return 1; }
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    std::vector<unsigned char> ref(size);
    if (size < 24 || fread(ref.data(), 1, size, fp) != (size_t)size || memcmp(ref.data(), "SBREF1\0\0", 8)) { fprintf(stderr, "bad .ref\n"); return 1; }
    fclose(fp);
    uint32_t V, np, nd;
    memcpy(&V, &ref[8], 4), memcpy(&np, &ref[12], 4), memcpy(&nd, &ref[16], 4);
    const size_t n = (size_t)np + nd;
    if ((size_t)size != 24 + 4 * n + 4 * n * V || np > 512) { fprintf(stderr, "bad .ref size\n"); return 1; }
    const int32_t *tok = (const int32_t *)&ref[24];
    const float *rl = (const float *)&ref[24 + 4 * n];

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = repack;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) return 1;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256 > n ? 256 : (uint32_t)n;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.cb_eval = dump_cb;
    llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) return 1;

    std::vector<float> out(n * V);
    llama_batch bt = llama_batch_init(512, 0, 1);
    bt.n_tokens = (int32_t)np;
    for (uint32_t i = 0; i < np; i++) bt.token[i] = tok[i], bt.pos[i] = i, bt.n_seq_id[i] = 1, bt.seq_id[i][0] = 0, bt.logits[i] = 1;
    if (llama_decode(ctx, bt)) return 1;
    for (uint32_t i = 0; i < np; i++) memcpy(&out[(size_t)i * V], llama_get_logits_ith(ctx, (int32_t)i), 4 * V);
    for (uint32_t k = 0; k < nd; k++) {
        g_pass = (int)k + 1;
        bt.n_tokens = 1, bt.token[0] = tok[np + k], bt.pos[0] = (int32_t)(np + k), bt.logits[0] = 1;
        if (llama_decode(ctx, bt)) return 1;
        memcpy(&out[(size_t)(np + k) * V], llama_get_logits_ith(ctx, 0), 4 * V);
    }
    double tn = 0, td = 0;
    int exact = 0;
    for (size_t r = 0; r < n; r++) {
        double num = 0, den = 0;
        for (uint32_t j = 0; j < V; j++) {
            const double d = (double)out[r * V + j] - rl[r * V + j];
            num += d * d, den += (double)rl[r * V + j] * rl[r * V + j];
        }
        tn += num, td += den, exact += num == 0;
        printf("row %2zu NMSE %.3e\n", r, num / den);
    }
    printf("total NMSE %.3e, %d/%zu rows bit-identical\n", tn / td, exact, n);
    if (out_path) {
        FILE *o = fopen(out_path, "wb");
        if (!o) return 1;
        fwrite(ref.data(), 1, 24 + 4 * n, o);
        fwrite(out.data(), 4, out.size(), o);
        fclose(o);
    }
    llama_batch_free(bt);
    llama_free(ctx);
    llama_model_free(m);
    return 0;
}
