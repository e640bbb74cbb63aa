/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/bench_list.c — llama-bench's list syntax for `sb bench` flags: comma-separated items,
 * each a number or a range "first-last" (step 1), "first-last+step" or "first-last*mult"
 * (bench.h). Negative numbers are allowed only where lo < 0 (-ngl -1); a range's values must grow.
 */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

/* One decimal number at *s (a leading '-' only when allow_neg); advances *s. */
static int read_num(const char **s, int allow_neg, int64_t *out) {
    const char *p = *s;
    if (!(isdigit((unsigned char)*p) || (allow_neg && *p == '-' && isdigit((unsigned char)p[1])))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno) return -1;
    *out = v;
    *s = end;
    return 0;
}

static int push(int64_t v, int64_t lo, int64_t hi, int64_t *out, int *n) {
    if (v < lo || v > hi || *n >= BENCH_MAX_LIST) return -1;
    out[(*n)++] = v;
    return 0;
}

int bench_parse_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int *n) {
    if (!*s) return -1;
    for (;;) {
        int64_t first, last, step = 1;
        char op = '+';
        if (read_num(&s, lo < 0, &first)) return -1;
        last = first;
        if (*s == '-') {
            s++;
            if (read_num(&s, 0, &last) || last < first) return -1;
            if (*s == '+' || *s == '*') {
                op = *s++;
                if (read_num(&s, 0, &step)) return -1;
            }
        }
        if (first < lo || last > hi) return -1;
        for (int64_t v = first;;) {
            if (push(v, lo, hi, out, n)) return -1;
            /* a range must grow: step 0, "*1", or "*" from 0 is an error (as llama-bench) */
            if (op == '+') {
                if (step <= 0) return -1;
                if (step > last - v) break;
                v += step;
            } else {
                if (v <= 0 || step <= 1) return -1;
                if (v > last / step) break;
                v *= step;
            }
        }
        if (*s == 0) return 0;
        if (*s++ != ',' || *s == 0) return -1;
    }
}
