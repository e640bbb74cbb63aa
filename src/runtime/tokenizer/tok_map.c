/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/tok_map.c — the tokenizer's hash maps, UTF-8 coding and the GPT-2 byte map.
 * Layer 2 (runtime). Open addressing with linear probing, capacity a power of two >= 2n, sized
 * once. Text hashing is FNV-1a (base/hash.h); u64 keys use a Fibonacci multiply.
 * UTF-8 decoding here is strict (RFC 3629): overlongs, surrogates, > U+10FFFF and truncated
 * sequences are invalid; callers decide what to do with them (docs/tokenizer.md).
 * Non-goals: resizing, deletion.
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/ckd.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

// ---- text -> id ----

static uint64_t cap_for(uint64_t n) {
    uint64_t c = 16;
    while (c < 2 * n) c <<= 1;
    return c;
}

sb_status tok_strmap_init(tok_strmap *m, const sb_strview *texts, uint64_t n) {
    memset(m, 0, sizeof *m);
    uint64_t c = cap_for(n);
    m->slot = malloc(c * sizeof *m->slot);
    m->tag = malloc(c * sizeof *m->tag);
    if (!m->slot || !m->tag) {
        tok_strmap_free(m);
        return sb_fail(SB_ERR_OOM, "tokenizer: text map of %llu slots", (unsigned long long)c);
    }
    memset(m->slot, 0xff, c * sizeof *m->slot);
    m->mask = c - 1;
    m->texts = texts;
    return SB_OK;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slot);
    free(m->tag);
    memset(m, 0, sizeof *m);
}

void tok_strmap_put(tok_strmap *m, int32_t id) {
    const sb_strview *t = &m->texts[id];
    uint64_t h = sb_hash_bytes(t->ptr, t->len);
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t i = h & m->mask;
    for (;;) {
        int32_t s = m->slot[i];
        if (s < 0) break;
        if (m->tag[i] == tag && m->texts[s].len == t->len && !memcmp(m->texts[s].ptr, t->ptr, t->len)) break;
        i = (i + 1) & m->mask;
    }
    m->slot[i] = id;
    m->tag[i] = tag;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *p, size_t n) {
    if (!m->slot) return -1;
    uint64_t h = sb_hash_bytes(p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t i = h & m->mask;
    for (;;) {
        int32_t s = m->slot[i];
        if (s < 0) return -1;
        if (m->tag[i] == tag && m->texts[s].len == n && !memcmp(m->texts[s].ptr, p, n)) return s;
        i = (i + 1) & m->mask;
    }
}

// ---- u64 -> (int32, int32) ----

sb_status tok_u64map_init(tok_u64map *m, uint64_t n) {
    memset(m, 0, sizeof *m);
    uint64_t c = cap_for(n);
    m->key = malloc(c * sizeof *m->key);
    m->a = malloc(c * sizeof *m->a);
    m->b = malloc(c * sizeof *m->b);
    if (!m->key || !m->a || !m->b) {
        tok_u64map_free(m);
        return sb_fail(SB_ERR_OOM, "tokenizer: map of %llu slots", (unsigned long long)c);
    }
    memset(m->key, 0xff, c * sizeof *m->key);
    m->mask = c - 1;
    return SB_OK;
}

void tok_u64map_free(tok_u64map *m) {
    free(m->key);
    free(m->a);
    free(m->b);
    memset(m, 0, sizeof *m);
}

bool tok_u64map_put(tok_u64map *m, uint64_t key, int32_t a, int32_t b) {
    SB_ASSERT(key != UINT64_MAX && m->n < m->mask);
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & m->mask;
    for (;;) {
        uint64_t k = m->key[i];
        if (k == key) return false;
        if (k == UINT64_MAX) break;
        i = (i + 1) & m->mask;
    }
    m->key[i] = key;
    m->a[i] = a;
    m->b[i] = b;
    m->n++;
    return true;
}

// ---- UTF-8 ----

size_t tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned char c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

size_t tok_utf8_encode(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12); o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18); o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

// ---- GPT-2 byte <-> code point map ----

/* Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves; the other 68, in increasing order,
 * to U+0100.. (architectures.md §8.3 step 2). */
static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

/* The 68 unprintable bytes in order: 0x00-0x20 (k 0..32), 0x7F-0xA0 (k 33..66), 0xAD (k 67). */
uint32_t tok_byte_to_cp(unsigned char b) {
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;
    if (k <= 32) return (int)k;
    if (k <= 66) return (int)(0x7F + k - 33);
    return 0xAD;
}
