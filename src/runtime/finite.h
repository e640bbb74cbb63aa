/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/finite.h — where a row of logits stops being finite: the one scan the session's and the
 * batched engine's NaN checks share (their messages name what each knows: a position, an item).
 * Layer 2 (runtime). x - x is 0 for a finite x and NaN otherwise, so a sum of it in 8 independent
 * lanes (no order to keep: the compiler may vectorize) clears a finite row in one pass; only a row
 * that fails is searched.
 */
#ifndef SB_RUNTIME_FINITE_H
#define SB_RUNTIME_FINITE_H

#include <math.h>
#include <stdint.h>

/* the index of the first NaN or infinite value of x[0, n), or -1 when all are finite */
static inline int64_t rt_nonfinite_at(const float *x, int64_t n) {
    float z[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) z[k] += x[i + k] - x[i + k];
    for (; i < n; i++) z[0] += x[i] - x[i];
    if (z[0] + z[1] + z[2] + z[3] + z[4] + z[5] + z[6] + z[7] == 0.0f) return -1;
    for (i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

#endif
