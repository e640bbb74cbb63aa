/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/hash.c — the open-addressing string set of hash.h (linear probing, load factor <= 1/2).
 */
#include "base/hash.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

sb_status sb_strset_init(sb_strset *s, uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) {
        if (cap > (UINT64_MAX >> 2)) return sb_fail(SB_ERR_OOM, "hash set for %llu entries", (unsigned long long)n);
        cap <<= 1;
    }
    s->slots = (int64_t *)malloc(cap * sizeof *s->slots);
    if (!s->slots) return sb_fail(SB_ERR_OOM, "hash set: %llu bytes", (unsigned long long)(cap * sizeof *s->slots));
    memset(s->slots, 0xff, cap * sizeof *s->slots);
    s->mask = cap - 1;
    return SB_OK;
}

void sb_strset_free(sb_strset *s) {
    free(s->slots);
    s->slots = NULL;
}

int64_t sb_strset_find(const sb_strset *s, const sb_strview *strs, const char *ptr, size_t len) {
    for (uint64_t h = sb_hash_bytes(ptr, len) & s->mask;; h = (h + 1) & s->mask) {
        int64_t i = s->slots[h];
        if (i < 0) return -1;
        if (strs[i].len == len && memcmp(strs[i].ptr, ptr, len) == 0) return i;
    }
}

int64_t sb_strset_insert(sb_strset *s, const sb_strview *strs, int64_t idx) {
    const char *ptr = strs[idx].ptr;
    size_t len = strs[idx].len;
    for (uint64_t h = sb_hash_bytes(ptr, len) & s->mask;; h = (h + 1) & s->mask) {
        int64_t i = s->slots[h];
        if (i < 0) {
            s->slots[h] = idx;
            return -1;
        }
        if (strs[i].len == len && memcmp(strs[i].ptr, ptr, len) == 0) return i;
    }
}
