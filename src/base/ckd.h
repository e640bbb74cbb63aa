/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/ckd.h — checked integer arithmetic (C23 ckd_* spelled with GCC/Clang builtins).
 * Layer 0. Each returns nonzero on overflow and then leaves *r unspecified. Every size computed
 * from untrusted input goes through these.
 */
#ifndef SB_BASE_CKD_H
#define SB_BASE_CKD_H

#include <stdint.h>

#define ckd_add(r, a, b) __builtin_add_overflow((a), (b), (r))
#define ckd_sub(r, a, b) __builtin_sub_overflow((a), (b), (r))
#define ckd_mul(r, a, b) __builtin_mul_overflow((a), (b), (r))

/* Round n up to a multiple of the power of two a; nonzero on overflow. */
static inline int ckd_pad(uint64_t *r, uint64_t n, uint64_t a) {
    uint64_t t;
    if (ckd_add(&t, n, a - 1)) return 1;
    *r = t & ~(a - 1);
    return 0;
}

#endif
