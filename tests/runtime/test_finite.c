/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/test_finite.c — rt_nonfinite_at (runtime/finite.h), the scan behind the session's
 * and the batched engine's NaN-logit errors: finite rows of every length around the lane count
 * (and a vocabulary's) give -1, whatever their values (±0, subnormals, ±FLT_MAX); one NaN, +Inf or
 * -Inf anywhere (the first element, inside the lanes, in the tail past the last whole lane group)
 * gives its index; of two, the first.
 */
#include "runtime/finite.h"
#include "test.h"

#include <float.h>
#include <stdlib.h>

static void finite_rows(uint64_t *rng) {
    const int64_t lens[] = {0, 1, 7, 31, 32, 33, 63, 64, 65, 1000, 151936};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        float *x = (float *)malloc((size_t)(n ? n : 1) * sizeof *x);
        for (int64_t i = 0; i < n; i++) {
            const float u = test_rand_uniform(rng);
            x[i] = i % 5 == 0 ? FLT_MAX * (u < 0.5f ? -1.0f : 1.0f) : i % 5 == 1 ? FLT_MIN / 8 : i % 5 == 2 ? -0.0f : (u - 0.5f) * 1e30f;
        }
        CHECKF(rt_nonfinite_at(x, n) == -1, "a finite row of %lld values: %lld", (long long)n, (long long)rt_nonfinite_at(x, n));
        free(x);
    }
}

static void one_bad(uint64_t *rng) {
    const int64_t lens[] = {1, 31, 32, 33, 100, 151936};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        float *x = (float *)malloc((size_t)n * sizeof *x);
        for (int64_t i = 0; i < n; i++) x[i] = (test_rand_uniform(rng) - 0.5f) * 100.0f;
        const int64_t at[] = {0, n / 2, n - 1, n - 1 - (n % 32 ? n % 32 - 1 : 0), n > 40 ? 37 : 0};
        for (size_t ai = 0; ai < sizeof at / sizeof at[0]; ai++)
            for (size_t bi = 0; bi < 3; bi++) {
                const float keep = x[at[ai]];
                x[at[ai]] = bad[bi];
                const int64_t got = rt_nonfinite_at(x, n);
                CHECKF(got == at[ai], "n %lld, %g at %lld: found %lld", (long long)n, (double)bad[bi], (long long)at[ai], (long long)got);
                x[at[ai]] = keep;
            }
        if (n > 2) { /* two: the first is named */
            x[n - 1] = INFINITY, x[1] = NAN;
            CHECKF(rt_nonfinite_at(x, n) == 1, "n %lld, NaN at 1 and Inf at %lld: %lld", (long long)n, (long long)(n - 1),
                   (long long)rt_nonfinite_at(x, n));
        }
        free(x);
    }
}

int main(void) {
    uint64_t rng = 0x243f6a8885a308d3ull;
    finite_rows(&rng);
    one_bad(&rng);
    return test_summary();
}
