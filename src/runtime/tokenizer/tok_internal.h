/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/tok_internal.h — what the tokenizer's .c files share: the tok_vocab layout,
 * the two hash maps (token text -> id, u64 key -> pair of int32) and the pre-tokenizer.
 * Layer 2 (runtime), private to src/runtime/tokenizer/.
 * Invariants: maps are sized once at build (capacity a power of two >= 2n) and never resized;
 * a text map stores ids into the vocab's text array and never owns text.
 * Non-goals: deletion, generic containers for other layers.
 */
#ifndef SB_RUNTIME_TOK_INTERNAL_H
#define SB_RUNTIME_TOK_INTERNAL_H

#include "runtime/tokenizer/tokenizer.h"

// ---- text -> id map ----

typedef struct tok_strmap {
    int32_t *slot;      /* -1 empty, else an id */
    uint32_t *tag;      /* high 32 bits of the hash, to skip most memcmp */
    uint64_t mask;
    const sb_strview *texts;
} tok_strmap;

sb_status tok_strmap_init(tok_strmap *m, const sb_strview *texts, uint64_t n);
void tok_strmap_free(tok_strmap *m);
/* Insert id (text texts[id]); an equal text already present is replaced (the last id wins, as
 * llama.cpp's token_to_id map does). */
void tok_strmap_put(tok_strmap *m, int32_t id);
int32_t tok_strmap_get(const tok_strmap *m, const char *p, size_t n);

// ---- u64 -> (int32, int32) map ----

typedef struct tok_u64map {
    uint64_t *key;      /* UINT64_MAX empty */
    int32_t *a, *b;
    uint64_t mask;
    uint64_t n;
} tok_u64map;

sb_status tok_u64map_init(tok_u64map *m, uint64_t n);
void tok_u64map_free(tok_u64map *m);
/* Insert if absent; returns false when the key was already present (nothing changed). */
bool tok_u64map_put(tok_u64map *m, uint64_t key, int32_t a, int32_t b);
/* Returns true and the values when present. */
static inline bool tok_u64map_get(const tok_u64map *m, uint64_t key, int32_t *a, int32_t *b) {
    if (!m->mask) return false;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & m->mask;
    for (;;) {
        uint64_t k = m->key[i];
        if (k == key) { *a = m->a[i]; *b = m->b[i]; return true; }
        if (k == UINT64_MAX) return false;
        i = (i + 1) & m->mask;
    }
}

// ---- the vocabulary ----

struct tok_vocab {
    tok_model model;
    tok_pre pre;
    int32_t n_tokens;
    sb_strview *text;     /* [n_tokens] stored texts (in arena) */
    sb_strview *piece;    /* [n_tokens] rendered bytes (normal rendering; in arena) */
    float *score;         /* [n_tokens] */
    uint8_t *type;        /* [n_tokens] TOK_TYPE_* */
    uint8_t *attr;        /* [n_tokens] TOK_ATTR_* */
    char *arena;
    tok_strmap text_map;  /* stored text -> id */
    tok_strmap raw_map;   /* BPE only: raw (unmapped) bytes -> id, for tokens made of mapped chars */
    sb_strview *raw;      /* BPE only: [n_tokens] raw bytes (len 0 when not invertible) */
    tok_u64map merges;    /* BPE/Gemma4: (left id << 32 | right id) -> (rank, merged id or -1) */
    int32_t byte_tok[256];/* BPE: token of the mapped byte; SPM/Gemma4: <0xXX> (or 1-char) token; -1 */
    int32_t bos, eos, eot, eom, unk, sep, pad, mask;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    /* special-token matcher: candidates ordered by (text length desc, id asc) */
    int32_t *special;     /* [n_special] ids */
    int32_t n_special;
    tok_u64map trie;      /* (node << 8 | byte) -> (child node, 0) */
    int32_t *trie_cand;   /* [n_nodes] order index of the candidate ending here, -1 none */
    int32_t n_nodes;
    void *pretok;         /* tok_pretok (pcre2), BPE only */
    /* SPM/Gemma 4: the characters that precede U+2581 inside some token or merge result; text is
     * cut into independent merge runs before any other U+2581 (tokenize.c merge_emit_runs) */
    sb_strview *ws_prev;
    int32_t n_ws_prev;
    tok_strmap ws_prev_map;
    bool ws_prev_ascii[128];   /* the same for 1-byte characters */
    int32_t char_tok[128];     /* SPM/Gemma 4: token of each ASCII character, -1 if none */
    bool no_runs;         /* tests only: no run cutting, no word cache (the plain reference loops) */
    tok_chat_kind chat;
};

/* Tests only: switch the SPM/Gemma 4 run cutting and the word cache off (reference behaviour). */
static inline void tok_vocab_set_no_runs(tok_vocab *v, bool on) { v->no_runs = on; }

// ---- pre-tokenizer (pcre2), pretok.c ----

sb_status tok_pretok_create(tok_pre pre, void **out);
void tok_pretok_free(void *p);

/* Split text[0..n) (valid UTF-8) into words: calls fn(user, start, len) for each, in order,
 * covering the text exactly. */
typedef sb_status (*tok_word_fn)(void *user, size_t start, size_t len);
sb_status tok_pretok_split(const void *p, const char *text, size_t n, tok_word_fn fn, void *user);

// ---- characters as the merge loops see them ----

/* Length of the character starting at p[0] (n > 0 bytes left): llama.cpp's lead-byte length,
 * clipped at the end and at the first byte that is not a continuation byte. Valid UTF-8 splits
 * into its code points; any other byte stands alone. */
static inline size_t tok_unit_len(const char *p, size_t n) {
    size_t l = tok_utf8_len((unsigned char)p[0]);
    if (l > n) l = n;
    for (size_t j = 1; j < l; j++)
        if (((unsigned char)p[j] & 0xC0) != 0x80) return j;
    return l;
}

// ---- byte-level mapping (bytes <-> code points, GPT-2) ----

/* Code point that byte b maps to. */
uint32_t tok_byte_to_cp(unsigned char b);
/* Byte that cp maps back from, or -1. */
int tok_cp_to_byte(uint32_t cp);

#endif
