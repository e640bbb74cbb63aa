/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/runtime/ring_kv.h — a sliding-window ring cache (graph/ir.h ir_input_kv_ring: position p at
 * row p mod C) built from a linear one, for the CUDA attention tests: the ring's C rows start as
 * `stale` (unrelated values, as rows of positions a step has overwritten), then positions
 * max(0, last - C + 1) .. last are copied from the linear cache (position p at row p) to row p mod
 * C, as a session that has stored positions 0..last holds them. A kernel reading a wrong row then
 * reads another position's key or a stale one.
 */
#ifndef SB_TESTS_RING_KV_H
#define SB_TESTS_RING_KV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a fresh ring of C rows of row_bytes each (malloc'd), stale rows from `stale` (C rows) */
static void *ring_from_linear(const void *lin, const void *stale, int64_t row_bytes, int64_t C, int64_t last) {
    unsigned char *r = (unsigned char *)malloc((size_t)(C * row_bytes));
    memcpy(r, stale, (size_t)(C * row_bytes));
    for (int64_t p = last - C + 1 > 0 ? last - C + 1 : 0; p <= last; p++)
        memcpy(r + p % C * row_bytes, (const unsigned char *)lin + p * row_bytes, (size_t)row_bytes);
    return r;
}

#endif
