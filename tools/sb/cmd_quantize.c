/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_quantize.c — `sb quantize [options] IN.gguf OUT.gguf TYPE [NTHREADS]`: llama-quantize's
 * mixes and flags (--allow-requantize --pure --tensor-type --output-tensor-type --token-embedding-type
 * --leave-output-tensor --imatrix) through sb_quantize_file_ex, a progress bar on a terminal and, in any
 * case, one summary line on stderr with llama-quantize's sizes (progress.h); plus the --threads
 * parsing `sb synth` shares. Layer 3 (tools): public header only. Library warnings (e.g.
 * re-quantizing a quantized file) are printed as "warning: ..." lines.
 */
#include "args.h"
#include "cli_io.h"
#include "progress.h"
#include "sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- shared with cmd_synth.c ----

int sb_cli_parse_threads(const char *s, int *out) {
    int64_t v;
    if (parse_int(s, 1, 256, &v)) return -1; /* args.c's decimal parser: no sign, blanks or junk */
    *out = (int)v;
    return 0;
}

// ---- sb quantize ----

static void usage(FILE *f) {
    fprintf(f, "usage: sb quantize [options] IN.gguf OUT.gguf TYPE [NTHREADS]\n"
               "  TYPE                       one of:");
    for (int i = 0; sb_quantize_type_name(i); i++) fprintf(f, " %s", sb_quantize_type_name(i));
    fprintf(f, "\n"
               "                             (also Q3_K Q4_K Q5_K = the _M mixes, or llama.cpp's ftype number;\n"
               "                             llama-quantize's per-tensor mixes; without --imatrix the tensor data\n"
               "                             equals its own; Q2_K_S needs --imatrix)\n"
               "  --allow-requantize         allow converting tensors that are already quantized (loses quality)\n"
               "  --pure                     no mixture rules: every quantizable tensor in TYPE's base type\n"
               "  --leave-output-tensor      keep output.weight in its input type\n"
               "  --output-tensor-type T     ggml type for output.weight (and tied token embeddings)\n"
               "  --token-embedding-type T   ggml type for token_embd.weight\n"
               "  --tensor-type PATTERN=T    tensors whose name matches the regular expression PATTERN get type T\n"
               "                             (repeatable; the first matching pattern wins), e.g. attn_v=q8_0\n"
               "  --imatrix FILE             importance matrix (llama-imatrix's GGUF output; not the legacy .dat)\n"
               "  --threads N                worker threads (default: all cores)\n"
               "  -v                         also print each tensor's type decision and shape fallbacks\n"
               "The output is written to a temporary file and renamed when complete. On success one line gives\n"
               "the sizes: model size = X MiB (B BPW) -> quantized size = Y MiB (B BPW).\n");
}

/* One usage-error line; exit status 2. */
enum { MAX_TT = 256 };

int cmd_quantize(int argc, char **argv) {
    const char *pos[4];
    int npos = 0, verbose = 0;
    sb_quantize_params p = {0};
    sb_quantize_options o;
    sb_quantize_default_options(&o);
    sb_quantize_tensor_type tt[MAX_TT];
    char tt_pat[MAX_TT][256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (!v || sb_cli_parse_threads(argv[++i], &p.n_threads)) return usage_error("quantize", "%s needs a number 1..256", a);
        } else if (!strcmp(a, "-v")) {
            verbose = 1;
        } else if (!strcmp(a, "--allow-requantize")) {
            o.allow_requantize = 1;
        } else if (!strcmp(a, "--pure")) {
            o.pure = 1;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            o.leave_output_tensor = 1;
        } else if (!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type") || !strcmp(a, "--imatrix")) {
            if (!v || !*v) return usage_error("quantize", "%s needs a value", a);
            if (!strcmp(a, "--imatrix")) o.imatrix_path = v;
            else if (!strcmp(a, "--output-tensor-type")) o.output_tensor_type = v;
            else o.token_embedding_type = v;
            i++;
        } else if (!strcmp(a, "--tensor-type")) {
            if (!v) return usage_error("quantize", "%s needs PATTERN=TYPE", a);
            const char *eq = strrchr(v, '=');
            if (!eq || eq == v || !eq[1]) return usage_error("quantize", "--tensor-type '%s': expected PATTERN=TYPE, e.g. attn_v=q8_0", v);
            if ((size_t)(eq - v) >= sizeof tt_pat[0]) return usage_error("quantize", "--tensor-type '%.40s...': pattern too long", v);
            if (o.n_tensor_types >= MAX_TT) return usage_error("quantize", "more than %s --tensor-type options", "256");
            memcpy(tt_pat[o.n_tensor_types], v, (size_t)(eq - v));
            tt_pat[o.n_tensor_types][eq - v] = 0;
            tt[o.n_tensor_types] = (sb_quantize_tensor_type){tt_pat[o.n_tensor_types], eq + 1};
            o.n_tensor_types++;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("quantize", "unknown option '%s'", a);
        } else if (npos < 4) {
            pos[npos++] = a;
        } else {
            return usage_error("quantize", "too many arguments at '%s'", a);
        }
    }
    if (npos < 3) return usage_error("quantize", "%s", "needs IN.gguf OUT.gguf TYPE");
    if (npos == 4 && sb_cli_parse_threads(pos[3], &p.n_threads))
        return usage_error("quantize", "NTHREADS '%s' is not a number 1..256", pos[3]);
    o.tensor_types = tt;
    sb_log_set(sb_cli_log, NULL, verbose ? SB_LOG_DEBUG : SB_LOG_WARN);
    cli_progress pr;
    cli_progress_start(&pr, "quantizing");
    p.progress = cli_progress_cb;
    p.progress_user = &pr;
    sb_quantize_stats st = {0};
    cli_watch_file(pos[0]); /* a SIGBUS on the mapped input: one line naming it */
    sb_status s = sb_quantize_file_ex(pos[0], pos[1], pos[2], &p, &o, &st);
    /* llama-quantize logs "model size = ... MiB (... BPW)" and the quantized size on stderr */
    const double mib = 1024.0 * 1024.0, n = s == SB_OK && st.n_elements ? (double)st.n_elements : 1.0;
    char summary[4096 + 256];
    snprintf(summary, sizeof summary, "quantize: wrote %s (%s): model size = %.2f MiB (%.2f BPW) -> quantized size = %.2f MiB (%.2f BPW)",
             pos[1], pos[2], (double)st.bytes_in / mib, (double)st.bytes_in * 8.0 / n, (double)st.bytes_out / mib,
             (double)st.bytes_out * 8.0 / n);
    cli_progress_finish(&pr, s == SB_OK, summary);
    sb_log_set(NULL, NULL, SB_LOG_WARN);
    if (s != SB_OK) return sb_cli_fail(s);
    return 0;
}
