/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_run.c — `sb run`: generate text from a prompt and stream it to stdout, with
 * llama-cli's flags, habits and sampling defaults (random seed unless -s, -e escapes on, -f -,
 * -r stop strings, -ngl falling back to the CPU); the speed summary goes to stderr. Without -m it
 * runs the embedded default model. Usage errors are one line and exit 2. Uses only the public
 * header.
 */
#include "args.h"
#include "cli_io.h"
#include "llama_flags.h"
#include "progress.h"
#include "sb.h"
#include "text_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STOP 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: sb run [-m MODEL] (-p PROMPT | -f FILE) [options]\n"
            "  -m, --model FILE        GGUF model (default: the embedded model, or $SB_MODEL)\n"
            "  -p, --prompt TEXT       prompt text (escapes such as \\n processed, see -e)\n"
            "  -f, --file FILE         read the prompt from a file, '-' for stdin (as is; at most 64 MiB)\n"
            "  -e, --escape            process \\n \\r \\t \\\\ \\' \\\" \\xHH ... in -p (default on); --no-escape: off\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1 = until the context is full)\n"
            "  -c, --ctx-size N        context length (default min(model, 4096))\n"
            "  -b, --batch-size N      prefill chunk (default 512); -ub, --ubatch-size N: the same (the\n"
            "                          smaller of the two when both are given)\n"
            "  -t, --threads N         CPU threads (default: all cores)\n"
            "  -s, --seed N            RNG seed (default -1: random, printed with -v; same seed, same text)\n"
            "      --temp T            temperature (0.8; 0 = greedy)\n"
            "      --top-k K           (40)      --top-p P (0.95)      --min-p M (0.05)\n"
            "      --repeat-penalty R  (1.0)     --repeat-last-n N (64; -1: the context size)\n"
            "      --presence-penalty P (0)      --frequency-penalty F (0)\n"
            "      --ignore-eos        never stop at an end-of-generation token\n"
            "  -r, --reverse-prompt TEXT, --stop TEXT   stop string, not printed (repeatable, up to %d)\n"
            "      --chat              render the prompt with the model's chat template (conversations: sb chat)\n"
            "      --system TEXT       system message for --chat (also -sys)\n"
            "      --chat-template NAME  with --chat: must name the model's own chat format\n"
            "      --kv-type f32|f16   KV cache type (f32); -ctk / -ctv TYPE: the same, K and V alike\n"
            "  -fa, --flash-attn [on|off|auto]  accepted: attention kernels are chosen per device\n"
            "      " ARG_DEVICE_HELP
            "      --cuda-graphs on|off  CUDA: capture decode steps as CUDA Graphs (on)\n"
            "      --codegen on|off    CUDA: generated kernels where autotuning finds them faster (on)\n"
            "      --act-type q8_k|q8_1  CUDA: K-quant weights' activations (q8_k: llama.cpp's CPU rounding; q8_1: its CUDA)\n"
            "      --parse-special     read special-token text in the prompt as control tokens (trusted input)\n"
            "      --no-display-prompt do not echo the prompt\n"
            "      --color [on|off|auto]  echo the prompt in colour (bare: on)\n"
            "      --log-disable       no speed summary and no -v details on stderr\n"
            "      --check-tensors     scan every weight for NaN/Inf at load (1-D weights always are)\n"
            "      --allow-long-context  allow -c above the model's trained context length (with a warning)\n"
            "      --swa-full          sliding-window layers keep every position (default: a ring of\n"
            "                          window + batch positions, same output, less memory)\n"
            "      --no-mmap           read the model into memory instead of mapping it (survives the\n"
            "                          file being truncated or rewritten; CPU decode reads it from huge pages\n"
            "                          where the kernel gives them: faster; the file's size in RAM)\n"
            "  -v, --verbose           model, seed, device and plan details on stderr\n"
            "  -no-cnv                 accepted (sb run never converses); -cnv: use sb chat\n"
            "llama-cli flags that mean nothing here (--mlock, -sm, -ts, -tb, --jinja, ...) are\n"
            "accepted with a one-line warning.\n",
            MAX_STOP);
}

typedef struct run_opts {
    const char *model, *prompt, *file, *system, *kv, *ctk, *ctv, *chat_template;
    const char *stops[MAX_STOP];
    size_t n_stop;
    int64_t n_predict, n_ctx, n_batch, n_ubatch, threads, last_n, top_k;
    uint64_t seed;
    int seed_random, device, chat, verbose, parse_special, check, escape, show_prompt, color, quiet, ignore_eos, long_ctx, no_mmap, swa_full;
    int cuda_graphs, codegen, act_type; /* the CUDA settings of sb_session_params (0: the defaults) */
    sb_sampler_params sp;
} run_opts;

static int add_stop(run_opts *o, int argc, char **argv, int *i) {
    if (o->n_stop == MAX_STOP) {
        fprintf(stderr, "sb run: at most %d stop strings (--stop / -r)\n", MAX_STOP);
        return 2;
    }
    return arg_str("run", argc, argv, i, &o->stops[o->n_stop++]);
}

/* Flags about what is printed, how the prompt is read and llama-cli's modes. 1 if a[i] is one. */
static int parse_io_flag(run_opts *o, int argc, char **argv, int *i, int *rc) {
    const char *a = argv[*i];
    if (!strcmp(a, "-e") || !strcmp(a, "--escape")) o->escape = 1;
    else if (!strcmp(a, "--no-escape")) o->escape = 0;
    else if (!strcmp(a, "--no-display-prompt")) o->show_prompt = 0;
    else if (!strcmp(a, "--color") || !strcmp(a, "-co")) {
        int c = arg_on_off_auto(argc, argv, i);
        o->color = c < 0 ? isatty(1) : c;
    } else if (!strcmp(a, "--log-disable")) o->quiet = 1;
    else if (!strcmp(a, "-no-cnv") || !strcmp(a, "--no-conversation")) {
        /* sb run never converses: nothing to turn off */
    } else if (!strcmp(a, "-cnv") || !strcmp(a, "--conversation") || !strcmp(a, "-i") || !strcmp(a, "--interactive") ||
               !strcmp(a, "-if") || !strcmp(a, "--interactive-first")) {
        fprintf(stderr, "sb run: %s: for a conversation use sb chat [-m MODEL]\n", a);
        *rc = 2;
    } else if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
        if (arg_on_off_auto(argc, argv, i) == 0)
            fprintf(stderr, "sb run: warning: %s off ignored: the attention kernel is chosen per device\n", a);
    } else if (!strcmp(a, "--grammar") || !strcmp(a, "--grammar-file") || !strcmp(a, "-j") || !strcmp(a, "--json-schema")) {
        fprintf(stderr, "sb run: %s: constrained sampling is not supported\n", a);
        *rc = 2;
    } else return 0;
    return 1;
}

/* Sampling flags. 1 if argv[*i] is one (value parsed into o->sp and friends). */
static int parse_sampling_flag(run_opts *o, int argc, char **argv, int *i, int *rc) {
    const char *a = argv[*i];
    if (!strcmp(a, "--temp")) *rc = arg_f32("run", argc, argv, i, 0, 100, &o->sp.temp);
    else if (!strcmp(a, "--top-k")) *rc = arg_i64("run", argc, argv, i, 0, INT32_MAX, &o->top_k);
    else if (!strcmp(a, "--top-p")) *rc = arg_f32("run", argc, argv, i, 0, 1, &o->sp.top_p);
    else if (!strcmp(a, "--min-p")) *rc = arg_f32("run", argc, argv, i, 0, 1, &o->sp.min_p);
    else if (!strcmp(a, "--repeat-penalty")) *rc = arg_f32("run", argc, argv, i, 1e-3f, 100, &o->sp.repeat_penalty);
    else if (!strcmp(a, "--repeat-last-n")) *rc = arg_i64("run", argc, argv, i, -1, 1 << 20, &o->last_n);
    else if (!strcmp(a, "--presence-penalty")) *rc = arg_f32("run", argc, argv, i, -100, 100, &o->sp.presence_penalty);
    else if (!strcmp(a, "--frequency-penalty")) *rc = arg_f32("run", argc, argv, i, -100, 100, &o->sp.frequency_penalty);
    else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) *rc = arg_seed("run", argc, argv, i, &o->seed, &o->seed_random);
    else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
    else if (!strcmp(a, "-r") || !strcmp(a, "--reverse-prompt") || !strcmp(a, "--stop")) *rc = add_stop(o, argc, argv, i);
    else return 0;
    return 1;
}

/* --cuda-graphs on|off, --codegen on|off, --act-type q8_k|q8_1 into o; 0 or 2 (a usage line printed) */
static int parse_cuda_setting(run_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    if (arg_str("run", argc, argv, i, &v)) return 2;
    const int act = !strcmp(a, "--act-type");
    const int x = act ? (!strcmp(v, "q8_k") ? SB_TYPE_Q8_K : !strcmp(v, "q8_1") ? SB_TYPE_Q8_1 : 0)
                      : (!strcmp(v, "on") ? 1 : !strcmp(v, "off") ? -1 : 0);
    if (!x) {
        fprintf(stderr, "sb run: %s '%s': %s\n", a, v, act ? "q8_k or q8_1" : "on or off");
        return 2;
    }
    if (act) o->act_type = x;
    else if (!strcmp(a, "--codegen")) o->codegen = x;
    else o->cuda_graphs = x;
    return 0;
}

/* Everything else that is ours. 1 if argv[*i] is one. */
static int parse_main_flag(run_opts *o, int argc, char **argv, int *i, int *rc) {
    const char *a = argv[*i];
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) *rc = arg_str("run", argc, argv, i, &o->model);
    else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) *rc = arg_str("run", argc, argv, i, &o->prompt);
    else if (!strcmp(a, "-f") || !strcmp(a, "--file")) *rc = arg_str("run", argc, argv, i, &o->file);
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--predict"))
        *rc = arg_i64("run", argc, argv, i, -1, INT32_MAX, &o->n_predict);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) *rc = arg_i64("run", argc, argv, i, 0, 1 << 24, &o->n_ctx);
    else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) *rc = arg_i64("run", argc, argv, i, 1, 65536, &o->n_batch);
    else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) *rc = arg_i64("run", argc, argv, i, 1, 65536, &o->n_ubatch);
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) *rc = arg_i64("run", argc, argv, i, 1, 256, &o->threads);
    else if (!strcmp(a, "--chat")) o->chat = 1;
    else if (!strcmp(a, "--system") || !strcmp(a, "-sys") || !strcmp(a, "--system-prompt"))
        *rc = arg_str("run", argc, argv, i, &o->system);
    else if (!strcmp(a, "--chat-template")) *rc = arg_str("run", argc, argv, i, &o->chat_template);
    else if (!strcmp(a, "--kv-type")) *rc = arg_str("run", argc, argv, i, &o->kv);
    else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) *rc = arg_str("run", argc, argv, i, &o->ctk);
    else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) *rc = arg_str("run", argc, argv, i, &o->ctv);
    else if (!strcmp(a, "--parse-special")) o->parse_special = 1;
    else if (!strcmp(a, "--check-tensors")) o->check = 1;
    else if (!strcmp(a, "--allow-long-context")) o->long_ctx = 1;
    else if (!strcmp(a, "--swa-full")) o->swa_full = 1;
    else if (!strcmp(a, "--no-mmap")) o->no_mmap = 1;
    else if (!strcmp(a, "--cuda-graphs") || !strcmp(a, "--codegen") || !strcmp(a, "--act-type")) *rc = parse_cuda_setting(o, argc, argv, i);
    else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
    else return 0;
    return 1;
}

/* The KV cache type from --kv-type, -ctk and -ctv: one type for K and V, f32 or f16. 0 or 2. */
static int resolve_kv_type(run_opts *o) {
    const char *names[3] = {o->kv, o->ctk, o->ctv}, *opts[3] = {"--kv-type", "-ctk", "-ctv"};
    const char *chosen = NULL, *chosen_by = NULL;
    for (int k = 0; k < 3; k++) {
        if (!names[k]) continue;
        if (strcmp(names[k], "f32") && strcmp(names[k], "f16")) {
            fprintf(stderr, "sb run: %s '%s': the KV cache here is f32 or f16\n", opts[k], names[k]);
            return 2;
        }
        if (chosen && strcmp(chosen, names[k])) {
            fprintf(stderr, "sb run: %s %s and %s %s: K and V share one cache type here\n", chosen_by, chosen, opts[k], names[k]);
            return 2;
        }
        chosen = names[k];
        chosen_by = opts[k];
    }
    o->kv = chosen ? chosen : "f32";
    return 0;
}

/* Parse argv into o. 0 to run, 2 after a one-line usage error, -1 after --help (exit 0). */
static int parse_run_args(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->last_n = o->top_k = -2;
    o->seed_random = o->escape = o->show_prompt = 1;
    o->device = SB_DEVICE_AUTO;
    sb_sampler_default_params(&o->sp);
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (arg_device("run", argc, argv, &i, &o->device, &rc) || parse_main_flag(o, argc, argv, &i, &rc) ||
            parse_sampling_flag(o, argc, argv, &i, &rc) || parse_io_flag(o, argc, argv, &i, &rc) ||
            arg_ignored("run", argc, argv, &i, &rc))
            continue;
        fprintf(stderr, "sb run: unknown option '%s' (see sb run --help)\n", a);
        rc = 2;
    }
    if (rc) return rc;
    if ((o->prompt != NULL) == (o->file != NULL)) {
        fprintf(stderr, "sb run: give exactly one of -p PROMPT or -f FILE (see sb run --help)\n");
        return 2;
    }
    if (o->system && !o->chat) fprintf(stderr, "sb run: warning: --system is used only with --chat; ignored\n");
    if (o->chat_template && !o->chat) fprintf(stderr, "sb run: warning: --chat-template is used only with --chat; ignored\n");
    if (o->n_ubatch && (!o->n_batch || o->n_ubatch < o->n_batch)) o->n_batch = o->n_ubatch;
    if (o->seed_random) o->seed = random_seed();
    o->sp.seed = o->seed;
    if (o->last_n >= 0) o->sp.penalty_last_n = (int32_t)o->last_n;
    if (o->top_k >= 0) o->sp.top_k = (int32_t)o->top_k;
    if (o->quiet) o->verbose = 0;
    return resolve_kv_type(o);
}

static int emit(void *user, const char *text, size_t len, int32_t token) {
    (void)user;
    (void)token;
    return cli_stdout_write(text, len) ? 1 : 0; /* a stdout write error stops generating */
}

/* The chat prompt as token ids (*ids: malloc'd, *n its count): the format's markers are control
 * tokens, the messages' text never is, so user text cannot forge chat structure. */
static sb_status tokenize_chat(const run_opts *o, const sb_vocab *v, const char *prompt, int32_t **ids, size_t *n) {
    const char *format = sb_vocab_chat_format(v);
    if (o->chat_template && strcmp(o->chat_template, format))
        fprintf(stderr, "sb run: warning: --chat-template %s ignored: this model's chat format is %s\n", o->chat_template, format);
    sb_chat_message msgs[2];
    size_t nm = 0;
    if (o->system) msgs[nm++] = (sb_chat_message){"system", o->system};
    msgs[nm++] = (sb_chat_message){"user", prompt};
    sb_status st = sb_chat_tokenize(v, msgs, nm, 1, NULL, 0, n);
    if (st != SB_ERR_BUFFER_TOO_SMALL && st != SB_OK) return st;
    *ids = (int32_t *)malloc((*n + 1) * sizeof **ids);
    if (!*ids) return SB_ERR_OOM;
    st = sb_chat_tokenize(v, msgs, nm, 1, *ids, *n, n);
    if (st == SB_OK && o->verbose) fprintf(stderr, "chat format: %s\n", format);
    return st;
}

static void print_summary(const run_opts *o, sb_session *s, const sb_generate_result *res) {
    static const char *why[] = {"length", "end of generation", "stop string", "context full"};
    sb_session_stats ss;
    sb_session_get_stats(s, &ss);
    if (o->quiet) return;
    fprintf(stderr, "\nprompt: %lld tokens (%lld reused) in %.1f ms, %.1f tok/s | generated: %lld tokens in %.1f ms, %.2f tok/s, %.2f GB/s of weights | stop: %s\n",
            (long long)res->n_prompt, (long long)res->n_reused, res->prefill_seconds * 1e3,
            res->prefill_seconds > 0 ? (double)(res->n_prompt - res->n_reused) / res->prefill_seconds : 0.0,
            (long long)res->n_generated, res->decode_seconds * 1e3, ss.decode_tok_s, ss.decode_gb_s, why[res->stop]);
    if (o->verbose) fprintf(stderr, "plans built: %lld\n", (long long)ss.n_plans_built);
}

static sb_status load_model(const run_opts *o, const char *path, sb_model **m, sb_model_info *mi) {
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.check_tensors = o->check;
    mp.no_mmap = o->no_mmap;
    cli_watch_file(path); /* a SIGBUS on the mapped model: one line naming it */
    double t0 = now_seconds();
    /* a progress bar on a terminal, else one summary line; nothing with --log-disable */
    sb_status st = o->quiet ? sb_model_load(path, &mp, m) : cli_load_model(path, &mp, m);
    double load_s = now_seconds() - t0;
    if (st == SB_OK) st = sb_model_get_info(*m, mi);
    if (st == SB_OK && o->verbose)
        fprintf(stderr, "model: %s (%s), %lld layers, %lld embd, vocab %lld, %.1f M params, %.1f MB of weights read per token (resident; gathered tables excluded), loaded in %.0f ms\n",
                path, mi->arch, (long long)mi->n_layer, (long long)mi->n_embd, (long long)mi->n_vocab, mi->n_params / 1e6,
                mi->weight_bytes / 1e6, load_s * 1e3);
    return st;
}

static sb_status create_session(const run_opts *o, sb_model *m, sb_session **s) {
    sb_session_params ssp;
    sb_session_default_params(&ssp);
    ssp.n_ctx = o->n_ctx;
    ssp.n_batch = o->n_batch;
    ssp.n_threads = (int)o->threads;
    ssp.kv_type = strcmp(o->kv, "f16") ? SB_TYPE_F32 : SB_TYPE_F16;
    ssp.device = o->device;
    ssp.allow_ctx_extend = o->long_ctx;
    ssp.swa_full = o->swa_full;
    ssp.cuda_graphs = o->cuda_graphs;
    ssp.codegen = o->codegen;
    ssp.act_type = o->act_type;
    sb_status st = sb_session_create(m, &ssp, s);
    if (st == SB_OK && o->verbose) fprintf(stderr, "device: %s\n", sb_session_device(*s) == SB_DEVICE_CUDA ? "cuda (GPU 0)" : "cpu");
    if (st == SB_OK && o->verbose)
        fprintf(stderr, "kv cache: %llu bytes per token (%s), %.1f MiB held\n", (unsigned long long)sb_model_kv_bytes_per_token(m, ssp.kv_type),
                ssp.kv_type == SB_TYPE_F16 ? "f16" : "f32", sb_session_kv_bytes(*s) / 1048576.0);
    return st;
}

/* Load, generate and print. prompt: the prompt text after -e processing (len bytes). */
static int run_model(const run_opts *o, const char *path, const char *prompt, size_t len) {
    sb_model *m = NULL;
    sb_session *s = NULL;
    sb_sampler *smp = NULL;
    int32_t *chat_ids = NULL;
    size_t n_chat = 0;
    sb_model_info mi;
    /* load warnings (a missing pre-tokenizer) always; with -v the info lines too (the codegen line at the end) */
    sb_log_set(sb_cli_log, NULL, o->verbose ? SB_LOG_INFO : SB_LOG_WARN);
    sb_status st = load_model(o, path, &m, &mi);
    if (st == SB_OK) st = create_session(o, m, &s);
    sb_sampler_params sp = o->sp;
    if (o->last_n == -1) sp.penalty_last_n = (int32_t)(o->n_ctx > 0 ? o->n_ctx : mi.n_ctx_train); /* llama.cpp's -1 */
    if (st == SB_OK) st = sb_sampler_create(&sp, mi.n_vocab, &smp);
    if (st == SB_OK && o->verbose) fprintf(stderr, "seed: %llu\n", (unsigned long long)o->seed);
    sb_generate_params gp;
    sb_generate_default_params(&gp);
    gp.n_predict = o->n_predict;
    gp.stop = o->stops;
    gp.n_stop = o->n_stop;
    gp.parse_special = o->parse_special; /* a raw prompt's "<|im_start|>" is text unless asked */
    gp.ignore_eos = o->ignore_eos;
    if (st == SB_OK && o->chat) st = tokenize_chat(o, sb_model_get_vocab(m), prompt, &chat_ids, &n_chat);
    sb_generate_result res;
    if (st == SB_OK) {
        if (o->show_prompt && !o->chat) {
            if (o->color) cli_stdout_write("\033[32m", 5);
            cli_stdout_write(prompt, len);
            if (o->color) cli_stdout_write("\033[0m", 4);
        }
        st = cli_stdout_failed() ? SB_ERR_CANCELLED
             : o->chat           ? sb_generate_tokens(s, smp, chat_ids, n_chat, &gp, emit, NULL, &res)
                                 : sb_generate(s, smp, prompt, len, &gp, emit, NULL, &res);
        if (st == SB_OK) cli_stdout_write("\n", 1);
    }
    if (st == SB_OK) print_summary(o, s, &res);
    int rc = st == SB_OK ? 0 : sb_cli_fail(st);
    free(chat_ids);
    sb_sampler_free(smp);
    sb_session_free(s);
    sb_model_free(m);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse_run_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *path = o.model ? o.model : default_model_path();
    if (!path) {
        fprintf(stderr, "sb run: no -m MODEL given and no embedded model found (set SB_MODEL)\n");
        return 2;
    }
    size_t len = 0;
    char *text = o.file ? text_input_read(o.file, TEXT_INPUT_CAP, &len) : strdup(o.prompt);
    if (!text) {
        if (!o.file) fprintf(stderr, "error: SB_ERR_OOM: the prompt\n");
        return 1;
    }
    if (!o.file) len = o.escape ? text_input_unescape(text, strlen(text)) : strlen(text);
    rc = run_model(&o, path, text, len);
    free(text);
    return rc;
}
