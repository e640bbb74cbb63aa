/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_run.c — `sb run`: generate text from a prompt and stream it to stdout, with
 * llama.cpp's flags and sampling defaults; the speed summary goes to stderr. Without -m it runs the
 * embedded default model. Uses only the public header.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STOP 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: sb run [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
            "  -m, --model FILE        GGUF model (default: the embedded model, or $SB_MODEL)\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1 = until the context is full)\n"
            "  -c, --ctx-size N        context length (default min(model, 4096))\n"
            "  -b, --batch-size N      prefill chunk (default 512)\n"
            "  -t, --threads N         CPU threads (default: all cores)\n"
            "      --temp T            temperature (0.8; 0 = greedy)\n"
            "      --top-k K           (40)      --top-p P (0.95)      --min-p M (0.05)\n"
            "      --repeat-penalty R  (1.0)     --repeat-last-n N (64)\n"
            "      --presence-penalty P (0)      --frequency-penalty F (0)\n"
            "      --seed S            RNG seed (same seed, same text)\n"
            "      --chat              render the prompt with the model's chat template\n"
            "  -s, --system TEXT       system message for --chat (also -sys)\n"
            "      --stop TEXT         stop string (repeatable, up to %d)\n"
            "      --kv-type f32|f16   KV cache type (f32)\n"
            "      " ARG_DEVICE_HELP
            "      --parse-special     match special-token text in a plain prompt\n"
            "      --check-tensors     scan weights for NaN/Inf at load\n"
            "      --no-mmap           read the model into memory instead of mapping it (survives the\n"
            "                          file being truncated or rewritten while running)\n"
            "  -v, --verbose           model and plan details on stderr\n",
            MAX_STOP);
}

static int emit(void *user, const char *text, size_t len, int32_t token) {
    (void)user;
    (void)token;
    return cli_stdout_write(text, len) ? 1 : 0; /* a stdout write error stops generating */
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL, *system = NULL, *kv = "f32";
    int device = SB_DEVICE_AUTO;
    const char *stops[MAX_STOP];
    size_t n_stop = 0;
    int64_t n_predict = 128, n_ctx = 0, n_batch = 0, threads = 0, seed = -1, last_n = -2, top_k = -2;
    int chat = 0, verbose = 0, parse_special = 0, check = 0, rc = 0, no_mmap = 0;
    sb_sampler_params sp;
    sb_sampler_default_params(&sp);
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (arg_device("run", argc, argv, &i, &device, &rc)) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) rc = arg_str("run", argc, argv, &i, &model);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) rc = arg_str("run", argc, argv, &i, &prompt);
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) rc = arg_str("run", argc, argv, &i, &file);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) rc = arg_i64("run", argc, argv, &i, -1, INT32_MAX, &n_predict);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) rc = arg_i64("run", argc, argv, &i, 0, 1 << 24, &n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) rc = arg_i64("run", argc, argv, &i, 1, 65536, &n_batch);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = arg_i64("run", argc, argv, &i, 1, 256, &threads);
        else if (!strcmp(a, "--temp")) rc = arg_f32("run", argc, argv, &i, 0, 100, &sp.temp);
        else if (!strcmp(a, "--top-k")) rc = arg_i64("run", argc, argv, &i, 0, INT32_MAX, &top_k);
        else if (!strcmp(a, "--top-p")) rc = arg_f32("run", argc, argv, &i, 0, 1, &sp.top_p);
        else if (!strcmp(a, "--min-p")) rc = arg_f32("run", argc, argv, &i, 0, 1, &sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) rc = arg_f32("run", argc, argv, &i, 1e-3f, 100, &sp.repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) rc = arg_i64("run", argc, argv, &i, 0, 1 << 20, &last_n);
        else if (!strcmp(a, "--presence-penalty")) rc = arg_f32("run", argc, argv, &i, -100, 100, &sp.presence_penalty);
        else if (!strcmp(a, "--frequency-penalty")) rc = arg_f32("run", argc, argv, &i, -100, 100, &sp.frequency_penalty);
        else if (!strcmp(a, "--seed")) rc = arg_i64("run", argc, argv, &i, 0, INT64_MAX, &seed);
        else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "-s") || !strcmp(a, "--system") || !strcmp(a, "-sys")) rc = arg_str("run", argc, argv, &i, &system);
        else if (!strcmp(a, "--stop")) {
            if (n_stop == MAX_STOP) {
                fprintf(stderr, "sb run: at most %d --stop strings\n", MAX_STOP);
                rc = 2;
            } else rc = arg_str("run", argc, argv, &i, &stops[n_stop++]);
        } else if (!strcmp(a, "--kv-type")) rc = arg_str("run", argc, argv, &i, &kv);
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else if (!strcmp(a, "--check-tensors")) check = 1;
        else if (!strcmp(a, "--no-mmap")) no_mmap = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) verbose = 1;
        else {
            rc = usage_error("run", "unknown option '%s'", a);
        }
    }
    if (rc) return rc; /* the reason is already printed (usage_error) */
    if ((prompt != NULL) == (file != NULL)) return usage_error("run", "give exactly one of -p PROMPT or -f FILE");
    if (strcmp(kv, "f32") && strcmp(kv, "f16")) {
        fprintf(stderr, "sb run: --kv-type must be f32 or f16\n");
        return 2;
    }
    if (seed >= 0) sp.seed = (uint64_t)seed;
    if (last_n >= 0) sp.penalty_last_n = (int32_t)last_n;
    if (top_k >= 0) sp.top_k = (int32_t)top_k;
    if (!model) model = default_model_path();
    if (!model) {
        fprintf(stderr, "sb run: no -m MODEL given and no embedded model found (set SB_MODEL)\n");
        return 2;
    }
    char *text = NULL;
    size_t text_len = 0;
    if (file) {
        text = read_text_file(file, &text_len);
        if (!text) {
            fprintf(stderr, "error: SB_ERR_IO: %s\n", read_file_error());
            return 1;
        }
        prompt = text;
    } else {
        text_len = strlen(prompt);
    }

    sb_model *m = NULL;
    sb_session *s = NULL;
    sb_sampler *smp = NULL;
    char *rendered = NULL;
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.check_tensors = check;
    mp.no_mmap = no_mmap;
    cli_watch_file(model);
    double t0 = now_seconds();
    sb_status st = sb_model_load(model, &mp, &m);
    double load_s = now_seconds() - t0;
    sb_model_info mi;
    if (st == SB_OK) st = sb_model_get_info(m, &mi);
    if (st == SB_OK && verbose)
        fprintf(stderr, "model: %s (%s), %lld layers, %lld embd, vocab %lld, %.1f M params, %.1f MB of weights, loaded in %.0f ms\n",
                model, mi.arch, (long long)mi.n_layer, (long long)mi.n_embd, (long long)mi.n_vocab, mi.n_params / 1e6,
                mi.weight_bytes / 1e6, load_s * 1e3);
    sb_session_params ssp;
    sb_session_default_params(&ssp);
    ssp.n_ctx = n_ctx;
    ssp.n_batch = n_batch;
    ssp.n_threads = (int)threads;
    ssp.kv_type = strcmp(kv, "f16") ? SB_TYPE_F32 : SB_TYPE_F16;
    ssp.device = device;
    if (verbose) sb_log_set(sb_cli_log, NULL, SB_LOG_INFO); /* e.g. the codegen line at the end (docs/codegen.md) */
    if (st == SB_OK) st = sb_session_create(m, &ssp, &s);
    if (st == SB_OK && verbose) fprintf(stderr, "device: %s\n", sb_session_device(s) == SB_DEVICE_CUDA ? "cuda (GPU 0)" : "cpu");
    if (st == SB_OK) st = sb_sampler_create(&sp, mi.n_vocab, &smp);
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = n_predict;
    gp.stop = stops;
    gp.n_stop = n_stop;
    gp.parse_special = parse_special;
    if (st == SB_OK && chat) {
        sb_chat_message msgs[2];
        size_t nm = 0;
        if (system) msgs[nm++] = (sb_chat_message){"system", system};
        msgs[nm++] = (sb_chat_message){"user", prompt};
        size_t need = 0;
        st = sb_chat_render(sb_model_get_vocab(m), msgs, nm, 1, NULL, 0, &need);
        if (st == SB_ERR_BUFFER_TOO_SMALL || st == SB_OK) {
            rendered = (char *)malloc(need + 1);
            st = rendered ? sb_chat_render(sb_model_get_vocab(m), msgs, nm, 1, rendered, need + 1, &need) : SB_ERR_OOM;
        }
        if (st == SB_OK) {
            prompt = rendered;
            text_len = need;
            gp.parse_special = 1;
            if (verbose) fprintf(stderr, "chat format: %s\n", sb_vocab_chat_format(sb_model_get_vocab(m)));
        }
    }
    sb_generate_result res;
    if (st == SB_OK) {
        if (!chat) cli_stdout_write(prompt, text_len);
        st = cli_stdout_failed() ? SB_ERR_CANCELLED : sb_generate(s, smp, prompt, text_len, &gp, emit, NULL, &res);
        if (st == SB_OK) cli_stdout_write("\n", 1);
    }
    if (st == SB_OK) {
        sb_session_stats ss;
        sb_session_get_stats(s, &ss);
        static const char *why[] = {"length", "end of generation", "stop string", "context full"};
        fprintf(stderr, "\nprompt: %lld tokens (%lld reused) in %.1f ms, %.1f tok/s | generated: %lld tokens in %.1f ms, %.2f tok/s, %.2f GB/s of weights | stop: %s\n",
                (long long)res.n_prompt, (long long)res.n_reused, res.prefill_seconds * 1e3,
                res.prefill_seconds > 0 ? (double)(res.n_prompt - res.n_reused) / res.prefill_seconds : 0.0,
                (long long)res.n_generated, res.decode_seconds * 1e3, ss.decode_tok_s, ss.decode_gb_s, why[res.stop]);
        if (verbose) fprintf(stderr, "plans built: %lld\n", (long long)ss.n_plans_built);
    }
    if (st != SB_OK) rc = sb_cli_fail(st);
    free(rendered);
    free(text);
    sb_sampler_free(smp);
    sb_session_free(s);
    sb_model_free(m);
    if (verbose) sb_log_set(NULL, NULL, SB_LOG_WARN);
    return rc;
}
