/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/tokenizer/tokenize.c — text -> token ids: the special-token partition (§8.2), then per
 * raw fragment SentencePiece score merges (§8.5), byte-level BPE rank merges after the PCRE2
 * pre-tokenizer (§8.3) or Gemma 4's BPE over U+2581 text (§8.6), as llama.cpp does them.
 * Layer 2 (runtime).
 * Complexity: the partition walks a trie of the special texts from every byte (O(n * depth));
 * the merge loops are heap-driven (O(n log n) per fragment / word). No step is quadratic.
 * Invalid UTF-8 (docs/tokenizer.md): SPM and Gemma 4 keep the raw bytes (they reach the <0xXX>
 * byte fallback, so the round trip is exact); byte-level BPE replaces each invalid byte by U+FFFD
 * before pre-tokenizing, as llama.cpp does.
 * Non-goals: LSTRIP/RSTRIP special-token trimming (no supported family sets it).
 */
#include "runtime/tokenizer/tok_internal.h"

#include "base/ckd.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

// ---- growable outputs ----

void tok_ids_free(tok_ids *t) {
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static sb_status ids_push(tok_ids *t, int32_t id) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        int32_t *p = realloc(t->ids, nc * sizeof *p);
        if (!p) return sb_fail(SB_ERR_OOM, "tokenizer: %zu output ids", nc);
        t->ids = p;
        t->cap = nc;
    }
    t->ids[t->n++] = id;
    return SB_OK;
}

static sb_status grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return SB_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    size_t bytes;
    if (ckd_mul(&bytes, nc, elem)) return sb_fail(SB_ERR_OOM, "tokenizer: buffer of %zu x %zu bytes", nc, elem);
    void *q = realloc(*p, bytes);
    if (!q) return sb_fail(SB_ERR_OOM, "tokenizer: buffer of %zu bytes", bytes);
    *p = q;
    *cap = nc;
    return SB_OK;
}

// ---- merge machinery shared by SPM and BPE ----

typedef struct sym {
    int32_t prev, next;
    uint32_t start, n;  /* bytes in the session buffer */
    int32_t id;         /* token of the current text, -1 if none */
} sym;

/* Min-heap entry. key = (priority << 32) | left: SPM priority is the inverted score (high score
 * first), BPE the merge rank; ties go to the smaller left index, as in llama.cpp. */
typedef struct bigram {
    uint64_t key;
    int32_t right;
    uint32_t size;      /* left.n + right.n when queued; differs when stale */
    int32_t id;         /* the merged token */
} bigram;

/* A per-call cache of word -> ids for long texts (words repeat: English reuses a few thousand).
 * Direct-mapped, no eviction policy: a colliding word overwrites. Never shared between calls, so
 * the vocabulary stays immutable and thread-safe. */
#define WC_SLOTS 8192
#define WC_WORD 23
#define WC_IDS 8
typedef struct wc_entry {
    uint64_t h;
    uint8_t len, n_ids;
    char w[WC_WORD];
    int32_t ids[WC_IDS];
} wc_entry;

typedef struct sess {
    wc_entry *wc;       /* NULL for short texts */
    const tok_vocab *v;
    tok_ids *out;
    const char *text;   /* the buffer symbols index into */
    sym *sy;
    size_t cap_sy;
    bigram *hp;
    size_t n_hp, cap_hp;
    char *buf;
    size_t cap_buf;
    char *buf2;
    size_t cap_buf2;
} sess;

// ---- word cache ----

static wc_entry *wc_slot(const sess *s, const char *w, size_t n, uint64_t *h) {
    if (!s->wc || n > WC_WORD) return NULL;
    *h = sb_hash_bytes(w, n) | 1; /* 0 marks an empty slot */
    return &s->wc[*h & (WC_SLOTS - 1)];
}

/* Emit the cached ids of w; false on a miss. */
static bool wc_hit(sess *s, const char *w, size_t n, sb_status *st) {
    uint64_t h;
    wc_entry *e = wc_slot(s, w, n, &h);
    if (!e || e->h != h || e->len != n || memcmp(e->w, w, n)) return false;
    *st = SB_OK;
    for (uint8_t i = 0; i < e->n_ids && *st == SB_OK; i++) *st = ids_push(s->out, e->ids[i]);
    return true;
}

/* Remember that w produced out->ids[from..]. */
static void wc_store(sess *s, const char *w, size_t n, size_t from) {
    uint64_t h;
    wc_entry *e = wc_slot(s, w, n, &h);
    size_t k = s->out->n - from;
    if (!e || k > WC_IDS) return;
    e->h = h;
    e->len = (uint8_t)n;
    e->n_ids = (uint8_t)k;
    memcpy(e->w, w, n);
    memcpy(e->ids, s->out->ids + from, k * sizeof *e->ids);
}

static sb_status heap_push(sess *s, bigram b) {
    SB_TRY(grow((void **)&s->hp, &s->cap_hp, s->n_hp + 1, sizeof *s->hp));
    size_t i = s->n_hp++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (s->hp[p].key <= b.key) break;
        s->hp[i] = s->hp[p];
        i = p;
    }
    s->hp[i] = b;
    return SB_OK;
}

static bigram heap_pop(sess *s) {
    bigram top = s->hp[0], last = s->hp[--s->n_hp];
    size_t i = 0, n = s->n_hp;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s->hp[c + 1].key < s->hp[c].key) c++;
        if (s->hp[c].key >= last.key) break;
        s->hp[i] = s->hp[c];
        i = c;
    }
    if (n) s->hp[i] = last;
    return top;
}

/* Order-preserving map of a float to u32 (ascending). */
static uint32_t float_key(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* Queue the pair (l, r) if it can merge. */
static sb_status try_pair(sess *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return SB_OK;
    const tok_vocab *v = s->v;
    const sym *a = &s->sy[l], *b = &s->sy[r];
    if (v->model == TOK_MODEL_SPM) {
        int32_t id = tok_strmap_get(&v->text_map, s->text + a->start, a->n + b->n);
        if (id < 0) return SB_OK;
        uint64_t pri = ~float_key(v->score[id]);
        return heap_push(s, (bigram){(pri & 0xffffffffu) << 32 | (uint32_t)l, r, a->n + b->n, id});
    }
    if (a->id < 0 || b->id < 0) return SB_OK;
    int32_t rank, res;
    if (!tok_u64map_get(&v->merges, (uint64_t)(uint32_t)a->id << 32 | (uint32_t)b->id, &rank, &res)) return SB_OK;
    return heap_push(s, (bigram){(uint64_t)(uint32_t)rank << 32 | (uint32_t)l, r, a->n + b->n, res});
}

/* Run the merge loop over symbols [a, b) (linked in order, unlinked from the rest). */
static sb_status merge_range(sess *s, int32_t a, int32_t b) {
    s->n_hp = 0;
    s->sy[a].prev = -1;
    s->sy[b - 1].next = -1;
    for (int32_t i = a + 1; i < b; i++) SB_TRY(try_pair(s, i - 1, i));
    while (s->n_hp) {
        bigram g = heap_pop(s);
        int32_t l = (int32_t)(g.key & 0xffffffffu);
        sym *x = &s->sy[l], *c = &s->sy[g.right];
        if (x->n == 0 || c->n == 0 || x->n + c->n != g.size) continue; /* stale */
        x->n += c->n;
        x->id = g.id;
        c->n = 0;
        x->next = c->next;
        if (c->next >= 0) s->sy[c->next].prev = l;
        SB_TRY(try_pair(s, x->prev, l));
        SB_TRY(try_pair(s, l, x->next));
    }
    return SB_OK;
}

static sb_status merge_all(sess *s, int32_t n) { return n > 0 ? merge_range(s, 0, n) : SB_OK; }

static sb_status emit_bytes(sess *s, const sym *y);

static bool is_space_mark(const sess *s, const sym *y) {
    return y->n == 3 && !memcmp(s->text + y->start, "\xE2\x96\x81", 3);
}

/* SPM / Gemma 4: merge and emit symbols [0, k). Runs are cut before a U+2581 whose previous
 * character never precedes U+2581 inside any token or merge result (tok_vocab.ws_prev): no merge
 * can cross such a cut, and the heap order within each run is unchanged, so the result equals one
 * merge loop over everything — with a heap the size of a word instead of the whole text. */
static sb_status merge_emit_runs(sess *s, int32_t k) {
    const tok_vocab *v = s->v;
    int32_t a = 0;
    for (int32_t i = 1; i <= k; i++) {
        if (i < k) {
            if (v->no_runs) continue;
            const sym *y = &s->sy[i], *p = &s->sy[i - 1];
            if (!is_space_mark(s, y) || is_space_mark(s, p)) continue;
            unsigned char c0 = (unsigned char)s->text[p->start];
            if (p->n == 1 && c0 < 128 ? v->ws_prev_ascii[c0]
                                      : tok_strmap_get(&v->ws_prev_map, s->text + p->start, p->n) >= 0)
                continue;
        }
        const char *w = s->text + s->sy[a].start;
        size_t wn = (size_t)s->sy[i - 1].start + s->sy[i - 1].n - s->sy[a].start;
        sb_status hit;
        if (wc_hit(s, w, wn, &hit)) {
            SB_TRY(hit);
            a = i;
            continue;
        }
        size_t from = s->out->n;
        for (int32_t j = a; j < i; j++) { /* ids of the run's characters (ASCII from a table) */
            sym *y = &s->sy[j];
            unsigned char c0 = (unsigned char)s->text[y->start];
            y->id = y->n == 1 && c0 < 128 ? v->char_tok[c0] : tok_strmap_get(&v->text_map, s->text + y->start, y->n);
        }
        SB_TRY(merge_range(s, a, i));
        for (int32_t j = a; j >= 0; j = s->sy[j].next) {
            const sym *y = &s->sy[j];
            if (y->id >= 0) SB_TRY(ids_push(s->out, y->id));
            else SB_TRY(emit_bytes(s, y));
        }
        wc_store(s, w, wn, from);
        a = i;
    }
    return SB_OK;
}

/* Split buf[0..n) into symbols of one UTF-8 character each (llama.cpp's lead-byte length,
 * clipped at the end and at the first non-continuation byte), with ids looked up when lookup is
 * set. */
static sb_status make_chars(sess *s, size_t n, bool lookup, int32_t *count) {
    SB_TRY(grow((void **)&s->sy, &s->cap_sy, n + 1, sizeof *s->sy));
    int32_t k = 0;
    for (size_t o = 0; o < n;) {
        size_t l = tok_unit_len(s->text + o, n - o);
        s->sy[k] = (sym){k - 1, o + l == n ? -1 : k + 1, (uint32_t)o, (uint32_t)l,
                         lookup ? tok_strmap_get(&s->v->text_map, s->text + o, l) : -1};
        k++;
        o += l;
    }
    *count = k;
    return SB_OK;
}

/* Byte fallback for a symbol that is not a token: one <0xXX> token per byte (SPM: else <unk>). */
static sb_status emit_bytes(sess *s, const sym *y) {
    const tok_vocab *v = s->v;
    for (uint32_t j = 0; j < y->n; j++) {
        int32_t t = v->byte_tok[(unsigned char)s->text[y->start + j]];
        if (t < 0 && v->model == TOK_MODEL_SPM) t = v->unk;
        if (t >= 0) SB_TRY(ids_push(s->out, t));
    }
    return SB_OK;
}

// ---- SentencePiece (§8.5) ----

static sb_status spm_fragment(sess *s, const char *p, size_t n, bool prefix) {
    size_t need;
    if (ckd_mul(&need, n, 3) || ckd_add(&need, need, 3)) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: fragment too long");
    SB_TRY(grow((void **)&s->buf, &s->cap_buf, need, 1));
    size_t o = 0;
    if (prefix) { memcpy(s->buf, "\xE2\x96\x81", 3); o = 3; }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') { memcpy(s->buf + o, "\xE2\x96\x81", 3); o += 3; }
        else s->buf[o++] = p[i];
    }
    if (o > UINT32_MAX) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: escaped fragment of %zu bytes", o);
    s->text = s->buf;
    int32_t k;
    SB_TRY(make_chars(s, o, false, &k));
    return merge_emit_runs(s, k);
}

// ---- Gemma 4 (§8.6) ----

static sb_status gemma4_run(sess *s, size_t start, size_t n) {
    const tok_vocab *v = s->v;
    const char *p = s->buf + start;
    if (p[0] == '\n') {
        int32_t id = tok_strmap_get(&v->text_map, p, n);
        if (id >= 0) return ids_push(s->out, id);
    }
    s->text = p;
    int32_t k;
    SB_TRY(make_chars(s, n, false, &k));
    return merge_emit_runs(s, k);
}

static sb_status gemma4_fragment(sess *s, const char *p, size_t n) {
    size_t need;
    if (ckd_mul(&need, n, 3)) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: fragment too long");
    SB_TRY(grow((void **)&s->buf, &s->cap_buf, need + 1, 1));
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') { memcpy(s->buf + o, "\xE2\x96\x81", 3); o += 3; }
        else s->buf[o++] = p[i];
    }
    for (size_t i = 0; i < o;) { /* runs of '\n' and runs of anything else */
        bool nl = s->buf[i] == '\n';
        size_t j = i + 1;
        while (j < o && (s->buf[j] == '\n') == nl) j++;
        if (j - i > UINT32_MAX) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: run of %zu bytes", j - i);
        SB_TRY(gemma4_run(s, i, j - i));
        i = j;
    }
    return SB_OK;
}

// ---- byte-level BPE (§8.3) ----

static sb_status bpe_word_merge(sess *s, const char *w, size_t n);

static sb_status bpe_word(void *user, size_t start, size_t n) {
    sess *s = user;
    const char *w = s->buf + start;
    sb_status hit;
    if (wc_hit(s, w, n, &hit)) return hit;
    size_t from = s->out->n;
    SB_TRY(bpe_word_merge(s, w, n));
    wc_store(s, w, n, from);
    return SB_OK;
}

static sb_status bpe_word_merge(sess *s, const char *w, size_t n) {
    const tok_vocab *v = s->v;
    if (v->ignore_merges) {
        int32_t id = tok_strmap_get(&v->raw_map, w, n);
        if (id >= 0) return ids_push(s->out, id);
    }
    if (n > UINT32_MAX) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: word of %zu bytes", n);
    SB_TRY(grow((void **)&s->sy, &s->cap_sy, n + 1, sizeof *s->sy));
    for (size_t i = 0; i < n; i++)
        s->sy[i] = (sym){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, (uint32_t)i, 1,
                         v->byte_tok[(unsigned char)w[i]]};
    s->text = w;
    SB_TRY(merge_all(s, (int32_t)n));
    for (int32_t i = 0; n > 0 && i >= 0; i = s->sy[i].next) {
        const sym *y = &s->sy[i];
        if (y->id >= 0) {
            SB_TRY(ids_push(s->out, y->id));
            continue;
        }
        /* not a token: llama.cpp looks up each byte of the mapped text as a 1-byte token and
         * drops the misses */
        for (uint32_t j = 0; j < y->n; j++) {
            unsigned char m[4];
            size_t ml = tok_utf8_encode(tok_byte_to_cp((unsigned char)w[y->start + j]), m);
            for (size_t q = 0; q < ml; q++) {
                int32_t t = tok_strmap_get(&v->text_map, (const char *)m + q, 1);
                if (t >= 0) SB_TRY(ids_push(s->out, t));
            }
        }
    }
    return SB_OK;
}

static sb_status bpe_fragment(sess *s, const char *p, size_t n) {
    /* invalid UTF-8 bytes -> U+FFFD (EF BF BD), so the pattern sees valid text */
    size_t need;
    if (ckd_mul(&need, n, 3)) return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: fragment too long");
    SB_TRY(grow((void **)&s->buf, &s->cap_buf, need + 1, 1));
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) { s->buf[o++] = (char)u[i++]; continue; }
        uint32_t cp;
        size_t l = tok_utf8_decode(u + i, n - i, &cp);
        if (l) { memcpy(s->buf + o, u + i, l); o += l; i += l; }
        else { memcpy(s->buf + o, "\xEF\xBF\xBD", 3); o += 3; i++; }
    }
    return tok_pretok_split(s->v->pretok, s->buf, o, bpe_word, s);
}

// ---- special-token partition (§8.2) ----

typedef struct occ_list { uint64_t *p; size_t n, cap; } occ_list;

/* Which special-token occurrences the partition may take. trusted == NULL: by parse_special alone
 * (user-defined tokens always, the others only with parse_special). Otherwise per occurrence: all
 * candidates inside trusted bytes; where it touches an untrusted byte only a user-defined token
 * that is not denied (tok_tokenize_trusted). */
typedef struct match_rule {
    bool parse_special;
    const unsigned char *trusted;
    const int32_t *deny;
    size_t n_deny;
} match_rule;

static bool cand_active(const tok_vocab *v, int32_t order, bool parse_special) {
    return parse_special || (v->attr[v->special[order]] & TOK_ATTR_USER_DEFINED);
}

static bool occ_active(const tok_vocab *v, int32_t c, size_t pos, size_t l, const match_rule *r) {
    if (!r->trusted) return cand_active(v, c, r->parse_special);
    bool inside = true;
    for (size_t j = 0; j < l && inside; j++) inside = r->trusted[pos + j] != 0;
    if (inside) return true;
    int32_t id = v->special[c];
    if (!(v->attr[id] & TOK_ATTR_USER_DEFINED)) return false;
    for (size_t k = 0; k < r->n_deny; k++)
        if (r->deny[k] == id) return false;
    return true;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static sb_status raw_fragment(sess *s, const char *p, size_t n, bool *prev_special) {
    if (n == 0) return SB_OK;
    sb_status st;
    switch (s->v->model) {
    case TOK_MODEL_SPM: st = spm_fragment(s, p, n, s->v->add_space_prefix && *prev_special); break;
    case TOK_MODEL_BPE: st = bpe_fragment(s, p, n); break;
    default: st = gemma4_fragment(s, p, n); break;
    }
    *prev_special = false;
    return st;
}

static sb_status partition_and_run(sess *s, const char *text, size_t len, const match_rule *r, bool *prev_special) {
    const tok_vocab *v = s->v;
    occ_list occ = {0};
    sb_status st = SB_OK;
    bool any = false;
    for (int32_t k = 0; k < v->n_special && !any; k++) any = r->trusted || cand_active(v, k, r->parse_special);
    if (any) {
        for (size_t pos = 0; pos < len && st == SB_OK; pos++) {
            int32_t node = 0;
            for (size_t j = pos; j < len; j++) {
                int32_t child, unused;
                if (!tok_u64map_get(&v->trie, (uint64_t)node << 8 | (unsigned char)text[j], &child, &unused)) break;
                node = child;
                int32_t c = v->trie_cand[node];
                if (c >= 0 && occ_active(v, c, pos, j - pos + 1, r)) {
                    st = grow((void **)&occ.p, &occ.cap, occ.n + 1, sizeof *occ.p);
                    if (st != SB_OK) break;
                    occ.p[occ.n++] = (uint64_t)(uint32_t)c << 32 | (uint32_t)pos;
                }
            }
        }
    }
    if (st != SB_OK || occ.n == 0) {
        free(occ.p);
        return st != SB_OK ? st : raw_fragment(s, text, len, prev_special);
    }
    /* candidates in order, each one's occurrences left to right, kept when they do not overlap
     * an earlier kept match: exactly the repeated left-to-right find of llama.cpp */
    qsort(occ.p, occ.n, sizeof *occ.p, cmp_u64);
    unsigned char *covered = calloc(len, 1);
    if (!covered) {
        free(occ.p);
        return sb_fail(SB_ERR_OOM, "tokenizer: %zu-byte coverage map", len);
    }
    size_t kept = 0;
    for (size_t i = 0; i < occ.n; i++) {
        uint32_t c = (uint32_t)(occ.p[i] >> 32), pos = (uint32_t)occ.p[i];
        size_t l = v->text[v->special[c]].len;
        bool free_span = true;
        for (size_t j = 0; j < l && free_span; j++) free_span = !covered[pos + j];
        if (!free_span) continue;
        memset(covered + pos, 1, l);
        occ.p[kept++] = (uint64_t)pos << 32 | c; /* re-key by position */
    }
    free(covered);
    qsort(occ.p, kept, sizeof *occ.p, cmp_u64);
    size_t at = 0;
    for (size_t i = 0; i < kept && st == SB_OK; i++) {
        uint32_t pos = (uint32_t)(occ.p[i] >> 32), c = (uint32_t)occ.p[i];
        int32_t id = v->special[c];
        st = raw_fragment(s, text + at, pos - at, prev_special);
        if (st == SB_OK) st = ids_push(s->out, id);
        *prev_special = true;
        at = pos + v->text[id].len;
    }
    if (st == SB_OK) st = raw_fragment(s, text + at, len - at, prev_special);
    free(occ.p);
    return st;
}

// ---- entry points ----

static sb_status tokenize_with(const tok_vocab *v, const char *text, size_t len, bool add_bos, bool add_eos,
                               const match_rule *r, tok_ids *out) {
    if (len > INT32_MAX)
        return sb_fail(SB_ERR_TEXT_TOO_LONG, "tokenizer: text of %zu bytes exceeds the limit of %d bytes", len, INT32_MAX);
    sess s = {.v = v, .out = out};
    if (len >= 16384 && !v->no_runs) s.wc = calloc(WC_SLOTS, sizeof *s.wc); /* NULL (no cache) is fine too */
    bool prev_special = true; /* SPM: the start of the text counts as after a special token */
    sb_status st = SB_OK;
    size_t n0 = out->n;
    if (add_bos && v->add_bos) st = ids_push(out, v->bos);
    if (st == SB_OK && len) st = partition_and_run(&s, text, len, r, &prev_special);
    if (st == SB_OK && add_bos && v->add_bos && out->n >= n0 + 2 && out->ids[n0 + 1] == v->bos)
        sb_log(SB_LOG_WARN, "tokenizer: the text starts with BOS and add_special adds another one");
    if (st == SB_OK && add_eos && v->add_eos) st = ids_push(out, v->eos);
    free(s.wc);
    free(s.sy);
    free(s.hp);
    free(s.buf);
    free(s.buf2);
    return st;
}

sb_status tok_tokenize(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                       tok_ids *out) {
    if (!v || !out || (!text && len)) return sb_fail(SB_ERR_INVALID_ARG, "tok_tokenize: NULL argument");
    match_rule r = {.parse_special = parse_special};
    return tokenize_with(v, text, len, add_special, add_special, &r, out);
}

sb_status tok_tokenize_trusted(const tok_vocab *v, const char *text, size_t len, const unsigned char *trusted,
                               const int32_t *deny, size_t n_deny, bool add_bos, tok_ids *out) {
    if (!v || !out || (!text && len) || (!trusted && len) || (!deny && n_deny))
        return sb_fail(SB_ERR_INVALID_ARG, "tok_tokenize_trusted: NULL argument");
    static const unsigned char none = 0;
    match_rule r = {.trusted = trusted ? trusted : &none, .deny = deny, .n_deny = n_deny};
    return tokenize_with(v, text, len, add_bos, false, &r, out);
}
