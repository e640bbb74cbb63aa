/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tests/format/gguf_builder.h — builds GGUF byte images field by field, valid or deliberately
 * broken, for the parser tests (the real writer cannot write broken files, by design).
 */
#ifndef SB_TESTS_GGUF_BUILDER_H
#define SB_TESTS_GGUF_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p;
    size_t len, cap;
} gb;

static inline void gb_put(gb *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = (uint8_t *)realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
static inline void gb_u8(gb *b, uint8_t v) { gb_put(b, &v, 1); }
static inline void gb_u32(gb *b, uint32_t v) { gb_put(b, &v, 4); }
static inline void gb_i32(gb *b, int32_t v) { gb_put(b, &v, 4); }
static inline void gb_u64(gb *b, uint64_t v) { gb_put(b, &v, 8); }
static inline void gb_i64(gb *b, int64_t v) { gb_put(b, &v, 8); }
static inline void gb_str(gb *b, const char *s) { gb_u64(b, strlen(s)); gb_put(b, s, strlen(s)); }
static inline void gb_header(gb *b, uint32_t version, int64_t n_tensors, int64_t n_kv) {
    gb_put(b, "GGUF", 4);
    gb_u32(b, version);
    gb_i64(b, n_tensors);
    gb_i64(b, n_kv);
}
static inline void gb_kv_u32(gb *b, const char *k, uint32_t v) { gb_str(b, k); gb_i32(b, 4); gb_u32(b, v); }
static inline void gb_kv_str(gb *b, const char *k, const char *v) { gb_str(b, k); gb_i32(b, 8); gb_str(b, v); }
/* tensor info with n_dims dims */
static inline void gb_tensor(gb *b, const char *name, uint32_t n_dims, const int64_t *ne, int32_t type, uint64_t off) {
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gb_i64(b, ne[d]);
    gb_i32(b, type);
    gb_u64(b, off);
}
static inline void gb_pad(gb *b, size_t a) {
    while (b->len % a) gb_u8(b, 0);
}
static inline void gb_zeros(gb *b, size_t n) {
    while (n--) gb_u8(b, 0);
}

#endif
