/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_perplexity.c — `sb perplexity -m MODEL -f TEXT [-c CTX]`: llama.cpp's method — the
 * tokenized text is cut into chunks of CTX tokens (the first token of each replaced by BOS when the
 * vocabulary adds one); each chunk is evaluated from an empty cache with logits for every
 * position, and the negative log-likelihood of each token in the second half of the chunk is
 * averaged. Prints llama-perplexity's lines on stdout — the running estimate per chunk as
 * "[1]12.3456,[2]11.2345," and "Final estimate: PPL = X +/- Y" — and the counts on stderr. A
 * non-finite log-likelihood (NaN/Inf logits) is an error, never a "nan" estimate.
 */
#include "args.h"
#include "cli_io.h"
#include "llama_flags.h"
#include "sb.h"
#include "text_input.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: sb perplexity [-m MODEL] -f TEXTFILE [-c CTX (512)] [-t THREADS] [-b N] [--chunks N] [--device auto|cpu|cuda | -ngl N] [--no-mmap]\n"
               "  -f FILE ('-': stdin, at most 64 MiB); -b / -ub N: prefill chunk; -fa [on|off|auto] accepted\n"
               "  " ARG_DEVICE_HELP);
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    int64_t n_ctx = 512, threads = 0, max_chunks = -1, n_batch = 0;
    int rc = 0, device = SB_DEVICE_AUTO, no_mmap = 0;
    for (int i = 1; i < argc && !rc; i++) {
        if (arg_device("perplexity", argc, argv, &i, &device, &rc) || arg_ignored("perplexity", argc, argv, &i, &rc)) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) rc = arg_str("perplexity", argc, argv, &i, &model);
        else if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) rc = arg_str("perplexity", argc, argv, &i, &file);
        else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--ctx-size")) rc = arg_i64("perplexity", argc, argv, &i, 8, 1 << 20, &n_ctx);
        else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) rc = arg_i64("perplexity", argc, argv, &i, 1, 256, &threads);
        else if (!strcmp(argv[i], "--chunks")) rc = arg_i64("perplexity", argc, argv, &i, 1, INT32_MAX, &max_chunks);
        else if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--batch-size") || !strcmp(argv[i], "-ub") || !strcmp(argv[i], "--ubatch-size"))
            rc = arg_i64("perplexity", argc, argv, &i, 1, 65536, &n_batch);
        else if (!strcmp(argv[i], "-fa") || !strcmp(argv[i], "--flash-attn")) {
            if (arg_on_off_auto(argc, argv, &i) == 0)
                fprintf(stderr, "sb perplexity: warning: %s off ignored: the attention kernel is chosen per device\n", argv[i - 1]);
        } else if (!strcmp(argv[i], "--no-mmap")) {
            no_mmap = 1;
        } else {
            rc = usage_error("perplexity", "unknown option '%s'", argv[i]);
        }
    }
    if (rc) return rc;
    if (!model) model = default_model_path();
    if (!file || !model) {
        fprintf(stderr, "sb perplexity: %s (see sb perplexity --help)\n",
                !file ? "-f TEXTFILE is required" : "no -m MODEL given and no embedded model found (set SB_MODEL)");
        return 2;
    }
    size_t len;
    char *text = text_input_read(file, TEXT_INPUT_CAP, &len);
    if (!text) return 1;
    sb_model *m = NULL;
    sb_session *s = NULL;
    int32_t *toks = NULL;
    float *logits = NULL;
    size_t n_tok = 0, need = 0;
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.no_mmap = no_mmap;
    cli_watch_file(model); /* a SIGBUS on the mapped model: one line naming it */
    sb_status st = sb_model_load(model, &mp, &m);
    const sb_vocab *v = m ? sb_model_get_vocab(m) : NULL;
    if (st == SB_OK) {
        st = sb_tokenize(v, text, len, 0, 0, NULL, 0, &need);
        if (st == SB_ERR_BUFFER_TOO_SMALL || st == SB_OK) {
            toks = (int32_t *)malloc((need ? need : 1) * sizeof *toks);
            st = toks ? sb_tokenize(v, text, len, 0, 0, toks, need, &n_tok) : SB_ERR_OOM;
        }
    }
    sb_model_info mi;
    if (st == SB_OK) st = sb_model_get_info(m, &mi);
    int64_t n_chunks = n_tok / (size_t)n_ctx;
    if (st == SB_OK && n_chunks == 0) {
        fprintf(stderr, "error: SB_ERR_INVALID_ARG: %s has %zu tokens, fewer than one chunk of %lld\n", file, n_tok, (long long)n_ctx);
        rc = 1;
    }
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = n_ctx;
    sp.n_threads = (int)threads;
    sp.device = device;
    sp.n_batch = n_batch;
    if (!rc && st == SB_OK) st = sb_session_create(m, &sp, &s);
    if (!rc && st == SB_OK) {
        logits = (float *)malloc((size_t)n_ctx * (size_t)mi.n_vocab * sizeof *logits);
        if (!logits) st = SB_ERR_OOM;
    }
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    int32_t bos = sb_vocab_adds_bos(v) ? sb_vocab_get_special(v, SB_SPECIAL_BOS) : -1;
    double t0 = now_seconds();
    for (int64_t c = 0; !rc && st == SB_OK && c < n_chunks; c++) {
        int32_t *chunk = toks + c * n_ctx;
        int32_t first = chunk[0];
        if (bos >= 0) chunk[0] = bos;
        st = sb_session_truncate(s, 0);
        if (st == SB_OK) st = sb_session_eval_all(s, chunk, (size_t)n_ctx, logits);
        chunk[0] = first;
        for (int64_t j = n_ctx / 2; st == SB_OK && j < n_ctx - 1; j++) {
            const float *l = logits + j * mi.n_vocab;
            float mx = l[0];
            for (int64_t k = 1; k < mi.n_vocab; k++) mx = l[k] > mx ? l[k] : mx;
            double sum = 0;
            for (int64_t k = 0; k < mi.n_vocab; k++) sum += exp((double)l[k] - mx);
            double x = log(sum) + mx - l[chunk[j + 1]];
            if (!isfinite(x)) {
                if (c > 0) printf("\n"); /* end the chunk line */
                fprintf(stderr, "error: SB_ERR_RANGE: perplexity: chunk %lld, position %lld: the log-likelihood is %s "
                                "(the model's logits hold NaN or Inf)\n", (long long)(c + 1), (long long)j, isnan(x) ? "NaN" : "infinite");
                rc = 1;
                break;
            }
            nll += x;
            nll2 += x * x;
            count++;
        }
        if (!rc && st == SB_OK) {
            printf("[%lld]%.4f,", (long long)(c + 1), exp(nll / (double)count)); /* llama-perplexity's form */
            fflush(stdout);
        }
    }
    if (!rc && st == SB_OK) {
        double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
        double err = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0;
        printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", exp(mean), exp(mean) * err);
        fprintf(stderr, "perplexity: %lld chunks of %lld tokens, %lld scored tokens, %.1f s\n", (long long)n_chunks,
                (long long)n_ctx, (long long)count, now_seconds() - t0);
    }
    if (st != SB_OK) rc = sb_cli_fail(st);
    free(logits);
    free(toks);
    free(text);
    sb_session_free(s);
    sb_model_free(m);
    return rc;
}
