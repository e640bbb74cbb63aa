/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/args.c — shared option parsing for the `sb` subcommands (args.h).
 */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int need_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "sb %s: option %s needs a value\n", cmd, argv[*i]);
        return 2;
    }
    return 0;
}

int arg_i64(const char *cmd, int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    const char *opt = argv[*i], *v = argv[++*i];
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "sb %s: %s '%s': expected an integer in [%lld, %lld]\n", cmd, opt, v, (long long)lo, (long long)hi);
        return 2;
    }
    *out = x;
    return 0;
}

int arg_f32(const char *cmd, int argc, char **argv, int *i, float lo, float hi, float *out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    const char *opt = argv[*i], *v = argv[++*i];
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    /* the bounds are floats: compare the value as the float it becomes (0.001 is not below 1e-3f) */
    if (errno || end == v || *end || !isfinite(x) || (float)x < lo || (float)x > hi) {
        fprintf(stderr, "sb %s: %s '%s': expected a number in [%g, %g]\n", cmd, opt, v, lo, hi);
        return 2;
    }
    *out = (float)x;
    return 0;
}

int arg_str(const char *cmd, int argc, char **argv, int *i, const char **out) {
    if (need_value(cmd, argc, argv, i)) return 2;
    *out = argv[++*i];
    return 0;
}

/* -ngl N > 0 asks for the GPU the way llama.cpp does: without a usable one (no driver, no device,
 * a build without CUDA) it warns in one line and runs on the CPU. */
static int ngl_device(const char *cmd, const char *opt, int64_t ngl) {
    sb_backend_info bi;
    memset(&bi, 0, sizeof bi);
    if (sb_backend_get_info(&bi) == SB_OK && bi.cuda_devices > 0) return SB_DEVICE_CUDA;
    fprintf(stderr, "sb %s: warning: %s %lld: no usable GPU (%s); running on the CPU\n", cmd, opt, (long long)ngl,
            !bi.cuda_compiled ? "CUDA not compiled in" : bi.cuda_error[0] ? bi.cuda_error : "no CUDA device");
    return SB_DEVICE_CPU;
}

int arg_device(const char *cmd, int argc, char **argv, int *i, int *device, int *rc) {
    const char *a = argv[*i];
    if (!strcmp(a, "--device")) {
        const char *v = NULL;
        *rc = arg_str(cmd, argc, argv, i, &v);
        if (*rc) return 1;
        if (!strcmp(v, "auto")) *device = SB_DEVICE_AUTO;
        else if (!strcmp(v, "cpu")) *device = SB_DEVICE_CPU;
        else if (!strcmp(v, "cuda")) *device = SB_DEVICE_CUDA;
        else {
            fprintf(stderr, "sb %s: --device '%s': expected auto, cpu or cuda\n", cmd, v);
            *rc = 2;
        }
        return 1;
    }
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) {
        int64_t ngl = 0;
        *rc = arg_i64(cmd, argc, argv, i, 0, 1 << 30, &ngl);
        if (!*rc) *device = ngl > 0 ? ngl_device(cmd, a, ngl) : SB_DEVICE_CPU;
        return 1;
    }
    return 0;
}

const char *default_model_path(void) {
    const char *env = getenv("SB_MODEL");
    if (env && *env) return env;
#ifdef SB_INSTALLED_MODEL_REL
    /* an installed sb: the model installed beside it, <bin>/../share/sonicboom/NAME */
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) {
        path[n] = 0;
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash + 1 - path) + sizeof SB_INSTALLED_MODEL_REL <= sizeof path) {
            memcpy(slash + 1, SB_INSTALLED_MODEL_REL, sizeof SB_INSTALLED_MODEL_REL);
            if (access(path, R_OK) == 0) return path;
        }
    }
#endif
#ifdef SB_DEFAULT_MODEL
    if (access(SB_DEFAULT_MODEL, R_OK) == 0) return SB_DEFAULT_MODEL;
#endif
    return NULL;
}

char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = (char *)malloc(cap + 1);
    while (p) {
        size_t k = fread(p + n, 1, cap - n, f);
        n += k;
        if (n < cap) break;
        cap *= 2;
        char *q = (char *)realloc(p, cap + 1);
        if (!q) {
            free(p);
            p = NULL;
        } else {
            p = q;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!p || err) {
        free(p);
        errno = err ? EIO : ENOMEM;
        return NULL;
    }
    p[n] = 0;
    *len = n;
    return p;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
