/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/llama_flags.c — seeds, optional-value flags and the accepted-but-ignored llama-cli
 * flags (llama_flags.h).
 */
#include "llama_flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int arg_seed(const char *cmd, int argc, char **argv, int *i, uint64_t *seed, int *random) {
    const char *opt = argv[*i];
    if (*i + 1 >= argc) {
        fprintf(stderr, "sb %s: option %s needs a value\n", cmd, opt);
        return 2;
    }
    const char *v = argv[++*i];
    if (!strcmp(v, "-1")) {
        *random = 1;
        return 0;
    }
    /* digits only: strtoull alone would take a sign, blanks and wrap "-2" to 2^64 - 2 */
    int digits = v[0] != 0;
    for (const char *c = v; *c; c++) digits &= *c >= '0' && *c <= '9';
    char *end = NULL;
    errno = 0;
    unsigned long long x = digits ? strtoull(v, &end, 10) : 0;
    if (!digits || errno || *end) {
        fprintf(stderr, "sb %s: %s '%s': expected -1 (random) or a decimal integer in [0, 18446744073709551615]\n", cmd, opt, v);
        return 2;
    }
    *seed = (uint64_t)x;
    *random = 0;
    return 0;
}

uint64_t random_seed(void) {
    uint32_t x = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    int got = f && fread(&x, sizeof x, 1, f) == 1;
    if (f) fclose(f);
    if (!got) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint32_t)ts.tv_sec * 2654435761u ^ (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() << 16;
    }
    return x;
}

int arg_on_off_auto(int argc, char **argv, int *i) {
    if (*i + 1 < argc) {
        const char *v = argv[*i + 1];
        int val = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : !strcmp(v, "auto") ? -1 : 2;
        if (val != 2) {
            ++*i;
            return val;
        }
    }
    return 1;
}

/* name, alias ("" if none), whether a value follows, why it is ignored */
static const struct {
    const char *name, *alias;
    int takes_value;
    const char *why;
} ignored[] = {
    {"--mlock", "", 0, "not implemented (the model file stays memory-mapped)"},
    {"--mmap", "", 0, "the model file is memory-mapped by default (--no-mmap reads it into memory)"},
    {"--numa", "", 1, "no NUMA placement here"},
    {"--split-mode", "-sm", 1, "one device a session"},
    {"--main-gpu", "-mg", 1, "one device a session (GPU 0)"},
    {"--tensor-split", "-ts", 1, "one device a session"},
    {"--threads-batch", "-tb", 1, "prefill uses -t threads"},
    {"--no-warmup", "", 0, "no warm-up run here"},
    {"--jinja", "", 0, "chat formats are built in (sb chat)"},
    {"--no-perf", "", 0, "the speed summary is one line; --log-disable drops it"},
    {"--perf", "", 0, "the speed summary is always printed"},
    {"--keep", "", 1, "no context shifting here"},
    {"--simple-io", "", 0, "output is plain text already"},
    {"--verbose-prompt", "", 0, "use -v"},
    {"--cont-batching", "-cb", 0, "one sequence a session"},
    {"--no-cont-batching", "-nocb", 0, "one sequence a session"},
    {"--parallel", "-np", 1, "one sequence a session"},
    {"--fit", "", 1, "the context and device are chosen at session creation"},
    {"--prompt-cache", "", 1, "no prompt cache file"},
    {"--prompt-cache-all", "", 0, "no prompt cache file"},
    {"--in-prefix", "", 1, "interactive mode is sb chat"},
    {"--in-suffix", "", 1, "interactive mode is sb chat"},
    {"--in-prefix-bos", "", 0, "interactive mode is sb chat"},
    {"--typical", "", 1, "sampler not implemented (top-k, top-p, min-p, temperature, penalties are)"},
    {"--mirostat", "", 1, "sampler not implemented"},
    {"--mirostat-lr", "", 1, "sampler not implemented"},
    {"--mirostat-ent", "", 1, "sampler not implemented"},
    {"--dry-multiplier", "", 1, "sampler not implemented"},
    {"--xtc-probability", "", 1, "sampler not implemented"},
    {"--xtc-threshold", "", 1, "sampler not implemented"},
    {"--top-nsigma", "", 1, "sampler not implemented"},
    {"--rope-scaling", "", 1, "RoPE settings come from the model"},
    {"--rope-freq-base", "", 1, "RoPE settings come from the model"},
    {"--rope-freq-scale", "", 1, "RoPE settings come from the model"},
};

int arg_ignored(const char *cmd, int argc, char **argv, int *i, int *rc) {
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof ignored / sizeof ignored[0]; k++) {
        if (strcmp(a, ignored[k].name) && (!ignored[k].alias[0] || strcmp(a, ignored[k].alias))) continue;
        *rc = 0;
        if (ignored[k].takes_value && *i + 1 >= argc) {
            fprintf(stderr, "sb %s: option %s needs a value\n", cmd, a);
            *rc = 2;
            return 1;
        }
        if (ignored[k].takes_value) ++*i;
        fprintf(stderr, "sb %s: warning: %s ignored: %s\n", cmd, a, ignored[k].why);
        return 1;
    }
    return 0;
}
