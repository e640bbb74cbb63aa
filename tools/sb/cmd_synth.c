/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_synth.c — `sb synth --preset NAME -o OUT.gguf [--type TYPE] [--vocab VOCAB.gguf]
 * [--seed N] [--threads N] [--fast]`: a random-weight model with a real model's names, shapes and metadata
 * (sb_synth_model). `sb synth --list` prints the presets.
 * Layer 3 (tools): public header only.
 */
#include "args.h"
#include "progress.h"
#include "sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: sb synth --preset NAME -o OUT.gguf [--type TYPE] [--vocab VOCAB.gguf] [--seed N] [--threads N] [--fast] [-v]\n"
               "       sb synth --list\n"
               "  --preset NAME   model shape (see --list)\n"
               "  -o OUT.gguf     output file (written to a temporary file, then renamed)\n"
               "  --type TYPE     quantization mix as for 'sb quantize' (default F32; a preset may name\n"
               "                  its own, e.g. gemma4-e4b: Q3_K_M)\n"
               "  --vocab FILE    copy all tokenizer.* keys of this GGUF (default: a synthetic\n"
               "                  byte-fallback SentencePiece vocabulary of the preset's size)\n"
               "  --seed N        RNG seed (default 0); same seed, same file\n"
               "  --threads N     worker threads (default: all cores)\n"
               "  --fast          draw and quantize 256 rows a tensor, repeat them for the rest: the\n"
               "                  same shapes and type mix in seconds (speed benchmarks only)\n"
               "  -v              print fallback types and other details\n"
               "presets:\n");
    for (int i = 0; sb_synth_preset_name(i); i++) fprintf(f, "  %-14s %s\n", sb_synth_preset_name(i), sb_synth_preset_desc(i));
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *out = NULL;
    int verbose = 0;
    sb_synth_params p = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "--list")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-v")) {
            verbose = 1;
        } else if (!strcmp(a, "--fast")) {
            p.fast = 1;
        } else if (!strcmp(a, "--preset") && more) {
            preset = argv[++i];
        } else if (!strcmp(a, "-o") && more) {
            out = argv[++i];
        } else if (!strcmp(a, "--type") && more) {
            p.type_name = argv[++i];
        } else if (!strcmp(a, "--vocab") && more) {
            p.vocab_path = argv[++i];
        } else if (!strcmp(a, "--seed") && more) {
            const char *v = argv[++i], *why;
            int64_t seed = 0;
            if ((why = parse_int(v, 0, INT64_MAX, &seed)) != NULL) /* decimal: "010" is ten */
                return usage_error("synth", "--seed '%s': %s", v, why);
            p.seed = (uint64_t)seed;
        } else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && more) {
            if (sb_cli_parse_threads(argv[++i], &p.n_threads)) {
                fprintf(stderr, "sb synth: --threads needs a number 1..256\n");
                return 2;
            }
        } else {
            return usage_error("synth", "unknown or incomplete option '%s'", a);
        }
    }
    if (!preset || !out) return usage_error("synth", "missing %s", !preset ? "--preset NAME" : "-o OUT.gguf");
    sb_log_set(sb_cli_log, NULL, verbose ? SB_LOG_DEBUG : SB_LOG_WARN);
    cli_progress pr;
    cli_progress_start(&pr, "writing");
    p.progress = cli_progress_cb;
    p.progress_user = &pr;
    sb_status s = sb_synth_model(preset, out, &p);
    char summary[512];
    const char *type = p.type_name;
    for (int i = 0; !type && sb_synth_preset_name(i); i++)
        if (!strcasecmp(sb_synth_preset_name(i), preset)) type = sb_synth_preset_type(i);
    snprintf(summary, sizeof summary, "synth: wrote %s (%s, %s)", out, preset, type ? type : "F32");
    cli_progress_finish(&pr, s == SB_OK, summary);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    if (s != SB_OK) return sb_cli_fail(s);
    return 0;
}
