/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/hash.h — FNV-1a hashing and a string → index open-addressing set.
 * Layer 0. Used for GGUF key/tensor-name uniqueness and lookup, tokenizer piece lookup.
 * The table stores indices into a caller-owned array of (ptr, len) strings; it never owns text.
 * Non-goals: deletion, resizing after build (callers size it once for n entries).
 */
#ifndef SB_BASE_HASH_H
#define SB_BASE_HASH_H

#include "sonicboom.h"

#include <stddef.h>
#include <stdint.h>

static inline uint64_t sb_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

typedef struct sb_strview { const char *ptr; size_t len; } sb_strview;

typedef struct sb_strset {
    int64_t *slots;   /* -1 = empty, else index into the strings array */
    uint64_t mask;    /* capacity - 1 (capacity is a power of two >= 2n) */
} sb_strset;

/* Prepare a set for up to n entries. SB_ERR_OOM on failure. */
sb_status sb_strset_init(sb_strset *s, uint64_t n);
void sb_strset_free(sb_strset *s);

/* Look up (ptr,len) among strs; returns its index or -1. */
int64_t sb_strset_find(const sb_strset *s, const sb_strview *strs, const char *ptr, size_t len);

/* Insert index i (whose text is strs[i]); returns -1 if inserted, or the index of an equal string
 * already present (then nothing is inserted). */
int64_t sb_strset_insert(sb_strset *s, const sb_strview *strs, int64_t i);

#endif
