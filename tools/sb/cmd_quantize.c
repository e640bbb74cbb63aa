/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_quantize.c — `sb quantize IN.gguf OUT.gguf TYPE [--threads N]`: llama-quantize's
 * mixes through sb_quantize_file, plus the --threads parsing `sb synth` shares.
 * Layer 3 (tools): public header only. Progress: a bar on a terminal, one summary line in any case
 * (progress.h); library warnings (e.g. re-quantizing a quantized file) are "warning: ..." lines.
 */
#include "progress.h"
#include "sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- shared with cmd_synth.c ----

int sb_cli_parse_threads(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < 1 || v > 256) return -1;
    *out = (int)v;
    return 0;
}

// ---- sb quantize ----

static void usage(FILE *f) {
    fprintf(f, "usage: sb quantize IN.gguf OUT.gguf TYPE [--threads N] [-v]\n"
               "  TYPE          one of:");
    for (int i = 0; sb_quantize_type_name(i); i++) fprintf(f, " %s", sb_quantize_type_name(i));
    fprintf(f, "\n"
               "                (llama-quantize's per-tensor mixes; the tensor data equals llama-quantize's)\n"
               "  --threads N   worker threads (default: all cores)\n"
               "  -v            also print each tensor's type decision and shape fallbacks\n"
               "A quantized input is dequantized first (with a warning). The output is written to a\n"
               "temporary file and renamed when complete.\n");
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int npos = 0, verbose = 0;
    sb_quantize_params p = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (i + 1 >= argc || sb_cli_parse_threads(argv[++i], &p.n_threads)) {
                fprintf(stderr, "sb quantize: --threads needs a number 1..256\n");
                return 2;
            }
        } else if (!strcmp(a, "-v")) {
            verbose = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sb quantize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "sb quantize: too many arguments\n");
            usage(stderr);
            return 2;
        }
    }
    if (npos != 3) {
        usage(stderr);
        return 2;
    }
    sb_log_set(sb_cli_log, NULL, verbose ? SB_LOG_DEBUG : SB_LOG_WARN);
    cli_progress pr;
    cli_progress_start(&pr, "quantizing");
    p.progress = cli_progress_cb;
    p.progress_user = &pr;
    sb_status s = sb_quantize_file(pos[0], pos[1], pos[2], &p);
    char summary[512];
    snprintf(summary, sizeof summary, "quantize: wrote %s (%s)", pos[1], pos[2]);
    cli_progress_finish(&pr, s == SB_OK, summary);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    if (s != SB_OK) return sb_cli_fail(s);
    return 0;
}
