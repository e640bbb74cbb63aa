/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_quantize.c — `sb quantize IN.gguf OUT.gguf TYPE [--threads N]`: llama-quantize's
 * mixes through sb_quantize_file, plus the progress bar and log printing `sb synth` shares.
 * Layer 3 (tools): public header only. The bar is drawn on stderr only when stderr is a terminal;
 * library warnings (e.g. re-quantizing a quantized file) are printed as "warning: ..." lines.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- shared with cmd_synth.c ----

static int bar_drawn;

void sb_cli_log(sb_log_level level, const char *msg, void *user) {
    (void)user;
    if (bar_drawn) {
        fputs("\r\033[K", stderr);
        bar_drawn = 0;
    }
    fprintf(stderr, "%s: %s\n",
            level == SB_LOG_ERROR ? "error" : level == SB_LOG_WARN ? "warning" : level == SB_LOG_INFO ? "info" : "debug", msg);
}

int sb_cli_progress(void *user, uint64_t done, uint64_t total, const char *what) {
    (void)user;
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = (double)(now.tv_sec - last.tv_sec) + 1e-9 * (double)(now.tv_nsec - last.tv_nsec);
    if (done < total && dt < 0.1) return 0;
    last = now;
    const int width = 30;
    double f = total ? (double)done / (double)total : 1.0;
    int k = (int)(f * width + 0.5);
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < k ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r\033[K[%s] %5.1f%%  %.40s", bar, 100.0 * f, what ? what : "");
    bar_drawn = 1;
    if (done >= total) {
        fputc('\n', stderr);
        bar_drawn = 0;
    }
    fflush(stderr);
    return 0;
}

int sb_cli_parse_threads(const char *s, int *out) {
    int64_t v;
    if (parse_int(s, 1, 256, &v)) return -1;
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
            return usage_error("quantize", "unknown option '%s'", a);
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            return usage_error("quantize", "too many arguments");
        }
    }
    if (npos != 3) return usage_error("quantize", "expected IN.gguf OUT.gguf TYPE, got %d argument%s", npos, npos == 1 ? "" : "s");
    sb_log_set(sb_cli_log, NULL, verbose ? SB_LOG_DEBUG : SB_LOG_WARN);
    if (isatty(2)) p.progress = sb_cli_progress;
    cli_watch_file(pos[0]);
    sb_status s = sb_quantize_file(pos[0], pos[1], pos[2], &p);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    if (s != SB_OK) return sb_cli_fail(s);
    return 0;
}
