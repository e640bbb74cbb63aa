/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/api/tensor_lib.h — what the tensor API tests share (test_tensor_api.c,
 * test_tensor_layout_ops.c): a tensor's values read back, the relative distance of two arrays, an
 * eager op that must succeed. Include after test.h and sonicboom.h.
 */
#ifndef SB_TESTS_TENSOR_LIB_H
#define SB_TESTS_TENSOR_LIB_H

#include <math.h>
#include <stdlib.h>

/* t's values as f32 (a fresh array; *n its count when n is given) */
static float *rd(const sb_tensor *t, size_t *n) {
    size_t k = 0;
    sb_tensor_read_f32(t, NULL, 0, &k);
    float *v = (float *)malloc((k ? k : 1) * sizeof *v);
    CHECK(sb_tensor_read_f32(t, v, k, &k) == SB_OK);
    if (n) *n = k;
    return v;
}

/* max |a-b| / (1 + |b|) over n values (inf for a NaN) */
static double maxrel(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* the eager op name over src (a failure is a test failure; NULL then) */
static sb_tensor *op(const char *name, sb_tensor **src, int n, const double *args, int na) {
    sb_tensor *t = NULL;
    sb_status st = sb_tensor_op(name, src, n, args, na, &t);
    CHECKF(st == SB_OK && t, "%s: %s", name, sb_last_error());
    return t;
}

#endif
