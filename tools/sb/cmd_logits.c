/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/cmd_logits.c — `sb logits -m MODEL --ref IN.ref -o OUT.ref`: evaluate the tokens of a
 * reference file the way it was made (the first n_prompt tokens as one batch with logits for every
 * position, then each remaining token alone, teacher-forced) and write our logits in the same
 * SBREF1 format (shared/testdata/README.md). Prints the NMSE against the input's logits.
 */
#include "args.h"
#include "cli_io.h"
#include "sb.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: sb logits -m MODEL --ref IN.ref -o OUT.ref [-t THREADS] [--kv-type f32|f16] [--device cpu|cuda|auto | -ngl N] [--no-mmap]\n"
               "  --device        where to run: the CPU (default: the reference path), cuda, or auto\n"
               "  --no-mmap       read the model into memory instead of mapping it\n");
}

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *ref = NULL, *out = NULL, *kv = "f32";
    int64_t threads = 0;
    int rc = 0, no_mmap = 0;
    int device = SB_DEVICE_CPU; /* a reference tool: the CPU unless told */
    for (int i = 1; i < argc && !rc; i++) {
        if (arg_device("logits", argc, argv, &i, &device, &rc)) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) rc = arg_str("logits", argc, argv, &i, &model);
        else if (!strcmp(argv[i], "--ref")) rc = arg_str("logits", argc, argv, &i, &ref);
        else if (!strcmp(argv[i], "-o")) rc = arg_str("logits", argc, argv, &i, &out);
        else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) rc = arg_i64("logits", argc, argv, &i, 1, 256, &threads);
        else if (!strcmp(argv[i], "--kv-type")) rc = arg_str("logits", argc, argv, &i, &kv);
        else if (!strcmp(argv[i], "--no-mmap")) no_mmap = 1;
        else {
            rc = usage_error("logits", "unknown option '%s'", argv[i]);
        }
    }
    if (!rc && (!model || !ref || !out))
        return usage_error("logits", "missing %s", !model ? "-m MODEL" : !ref ? "--ref IN.ref" : "-o OUT.ref");
    if (!rc && strcmp(kv, "f32") && strcmp(kv, "f16")) return usage_error("logits", "--kv-type '%s': expected f32 or f16", kv);
    if (rc) return rc; /* the reason is already printed (usage_error) */
    if (same_file(out, ref) || same_file(out, model)) {
        fprintf(stderr, "error: SB_ERR_INVALID_ARG: -o %s is the same file as %s (the output would replace its own input)\n",
                out, same_file(out, ref) ? "--ref" : "-m");
        return 1;
    }
    size_t size;
    unsigned char *blob = (unsigned char *)read_file_capped(ref, 4096, 0, &size); /* SBREF1: regular files to 4 GiB */
    if (!blob) {
        fprintf(stderr, "error: SB_ERR_IO: %s\n", read_file_error());
        return 1;
    }
    uint32_t hdr[4] = {0};
    if (size >= 24) memcpy(hdr, blob + 8, 16);
    uint64_t n = (uint64_t)hdr[1] + hdr[2], V = hdr[0];
    if (size < 24 || memcmp(blob, "SBREF1\0\0", 8) || V == 0 || n == 0 || n > (1u << 24) || V > (1u << 24) ||
        24 + n * 4 + n * V * 4 != size) {
        fprintf(stderr, "error: SB_ERR_FORMAT_UNKNOWN_FILE: %s: not an SBREF1 file of consistent size\n", ref);
        free(blob);
        return 1;
    }
    int32_t *toks = (int32_t *)(blob + 24);
    const float *ref_logits = (const float *)(blob + 24 + n * 4);
    float *ours = (float *)malloc(n * V * sizeof *ours);
    sb_model *m = NULL;
    sb_session *s = NULL;
    sb_model_params mp;
    sb_model_default_params(&mp);
    mp.no_mmap = no_mmap;
    cli_watch_file(model);
    sb_status st = ours ? sb_model_load(model, &mp, &m) : SB_ERR_OOM;
    sb_model_info mi;
    if (st == SB_OK) st = sb_model_get_info(m, &mi);
    if (st == SB_OK && (uint64_t)mi.n_vocab != V) {
        fprintf(stderr, "error: SB_ERR_INVALID_ARG: %s has n_vocab %llu, the model %lld\n", ref, (unsigned long long)V,
                (long long)mi.n_vocab);
        rc = 1;
    }
    sb_session_params sp;
    sb_session_default_params(&sp);
    sp.n_ctx = (int64_t)n;
    sp.n_threads = (int)threads;
    sp.kv_type = strcmp(kv, "f16") ? SB_TYPE_F32 : SB_TYPE_F16;
    sp.device = device;
    if (!rc && st == SB_OK) st = sb_session_create(m, &sp, &s);
    if (!rc && st == SB_OK && hdr[1]) st = sb_session_eval_all(s, toks, hdr[1], ours);
    for (uint32_t i = 0; !rc && st == SB_OK && i < hdr[2]; i++) {
        const float *l;
        st = sb_session_decode(s, toks[hdr[1] + i]);
        if (st == SB_OK) st = sb_session_get_logits(s, &l, NULL);
        if (st == SB_OK) memcpy(ours + (hdr[1] + i) * V, l, V * sizeof *ours);
    }
    if (!rc && st == SB_OK) {
        sb_output *o = NULL; /* the library's output rule: temp + rename, or straight to a device/FIFO */
        sb_status ws = sb_output_open(out, &o);
        if (ws == SB_OK) ws = sb_output_write(o, blob, 24 + n * 4);
        if (ws == SB_OK) ws = sb_output_write(o, ours, n * V * sizeof *ours);
        if (ws == SB_OK) ws = sb_output_commit(o);
        else sb_output_abort(o);
        if (ws != SB_OK) {
            rc = sb_cli_fail(ws);
        } else {
            double num = 0, den = 0;
            for (uint64_t k = 0; k < n * V; k++) {
                double d = (double)ours[k] - ref_logits[k];
                num += d * d;
                den += (double)ref_logits[k] * ref_logits[k];
            }
            printf("%llu rows (%u prompt, %u decode) × %llu logits written to %s; NMSE vs %s: %.3e\n", (unsigned long long)n,
                   hdr[1], hdr[2], (unsigned long long)V, out, ref, den > 0 ? num / den : 0.0);
        }
    }
    if (st != SB_OK) rc = sb_cli_fail(st);
    sb_session_free(s);
    sb_model_free(m);
    free(ours);
    free(blob);
    return rc;
}
