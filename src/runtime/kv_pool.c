/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/kv_pool.c — the paged KV cache (kv_pool.h): block bookkeeping (reference counts, a free
 * stack, an LRU list of cached blocks, a hash table of registered full blocks), sequences' block
 * tables, prefix attachment and copy-on-write.
 * Layer 2 (runtime).
 */
#include "runtime/kv_pool.h"
#include "base/status.h"
#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

#define HASH_SEED 0x5342b10c4b5ull /* hash(-1): the parent of every sequence's first block */
#define NIL (-1)

typedef struct kv_block {
    int32_t ref;
    int32_t n_filled;   /* rows [0, n_filled) hold the K/V of tokens[0, n_filled) */
    uint64_t parent;    /* chain hash of the blocks before this one in the sequence that filled it */
    uint64_t hash;      /* chain hash through this block (set when full) */
    bool registered;    /* findable by hash; its content is then immutable */
    int32_t hnext;      /* hash bucket chain */
    int32_t prev, next; /* LRU list (ref 0, registered) */
} kv_block;

typedef struct kv_seq {
    bool open;
    int64_t n;          /* positions */
    int32_t *tokens;    /* [n_ctx] */
    int32_t *blocks;    /* [table_len] */
} kv_seq;

struct kv_pool {
    kv_pool_params p;
    int64_t n_layer, rows, table_len;
    uint64_t *row_bytes; /* [n_layer] bytes of one row of layer l */
    void **buf;          /* [2 * n_layer] K, V */
    kv_block *b;         /* [n_blocks] */
    int32_t *tok;        /* [n_blocks * bs] the tokens each block's rows hold */
    int32_t *free_stack, n_free;
    int32_t lru_head, lru_tail, n_cached, n_used;
    int32_t *bucket;     /* [n_bucket] */
    uint64_t bucket_mask;
    kv_seq *seq;         /* [n_seq_max] */
    int64_t hit_tokens, evictions, cow;
    kv_pool_copy_fn copy; /* NULL: memcpy in buf */
    void *copy_ctx;
};

// ---- create / free ----

sb_status kv_pool_create(const rt_model *m, const kv_pool_params *p, kv_pool **out) {
    *out = NULL;
    const rt_hparams *hp = &m->hp;
    if (p->n_blocks < 1 || p->n_blocks >= INT32_MAX / 2 || p->block_size < 1 || p->block_size > 1024 || p->n_seq_max < 1 ||
        p->n_seq_max > 65536 || p->n_ctx < 1 || (p->kv_type != SB_TYPE_F32 && p->kv_type != SB_TYPE_F16) ||
        (p->n_blocks + 1) * p->block_size > INT32_MAX) /* rows are i32 slots */
        return sb_fail(SB_ERR_INVALID_ARG, "kv pool: n_blocks %lld, block_size %d, n_seq_max %d, n_ctx %lld, kv_type %d",
                       (long long)p->n_blocks, p->block_size, p->n_seq_max, (long long)p->n_ctx, p->kv_type);
    kv_pool *kp = (kv_pool *)calloc(1, sizeof *kp);
    if (!kp) return sb_fail(SB_ERR_OOM, "kv pool");
    kp->p = *p;
    kp->n_layer = hp->n_layer_kv; /* the trailing shared-KV layers (gemma4) own no cache: they read earlier ones' */
    kp->rows = (p->n_blocks + 1) * p->block_size;
    kp->table_len = (p->n_ctx + p->block_size - 1) / p->block_size;
    if (kp->table_len > p->n_blocks) kp->table_len = p->n_blocks;
    uint64_t n_bucket = 16;
    while (n_bucket < (uint64_t)p->n_blocks * 2) n_bucket *= 2;
    kp->bucket_mask = n_bucket - 1;
    kp->row_bytes = (uint64_t *)calloc((size_t)kp->n_layer, sizeof *kp->row_bytes);
    kp->buf = (void **)calloc((size_t)(2 * kp->n_layer), sizeof *kp->buf);
    kp->b = (kv_block *)calloc((size_t)p->n_blocks, sizeof *kp->b);
    kp->tok = (int32_t *)calloc((size_t)(p->n_blocks * p->block_size), sizeof *kp->tok);
    kp->free_stack = (int32_t *)malloc((size_t)p->n_blocks * sizeof *kp->free_stack);
    kp->bucket = (int32_t *)malloc((size_t)n_bucket * sizeof *kp->bucket);
    kp->seq = (kv_seq *)calloc((size_t)p->n_seq_max, sizeof *kp->seq);
    sb_status st = SB_OK;
    if (!kp->row_bytes || !kp->buf || !kp->b || !kp->tok || !kp->free_stack || !kp->bucket || !kp->seq)
        st = sb_fail(SB_ERR_OOM, "kv pool: bookkeeping of %lld blocks", (long long)p->n_blocks);
    for (int32_t s = 0; st == SB_OK && s < p->n_seq_max; s++) {
        kp->seq[s].tokens = (int32_t *)malloc((size_t)p->n_ctx * sizeof(int32_t));
        kp->seq[s].blocks = (int32_t *)malloc((size_t)kp->table_len * sizeof(int32_t));
        if (!kp->seq[s].tokens || !kp->seq[s].blocks) st = sb_fail(SB_ERR_OOM, "kv pool: tables of %d sequences", p->n_seq_max);
    }
    uint64_t total = 0;
    for (int64_t l = 0; st == SB_OK && l < kp->n_layer; l++) total += 2 * (uint64_t)rt_hp_kv_dim(hp, l) * qk_get(p->kv_type)->type_size * (uint64_t)kp->rows;
    for (int64_t l = 0; st == SB_OK && l < kp->n_layer; l++) {
        kp->row_bytes[l] = (uint64_t)rt_hp_kv_dim(hp, l) * qk_get(p->kv_type)->type_size;
        for (int v = 0; v < 2 && st == SB_OK; v++)
            if (!(kp->buf[2 * l + v] = calloc(1, (size_t)(kp->row_bytes[l] * (uint64_t)kp->rows))))
                st = sb_fail(SB_ERR_OOM, "kv pool: %llu bytes for %lld blocks of %d positions (%lld layers)", (unsigned long long)total,
                             (long long)p->n_blocks, p->block_size, (long long)kp->n_layer);
    }
    if (st != SB_OK) {
        kv_pool_free(kp);
        return st;
    }
    for (int64_t i = 0; i < p->n_blocks; i++) kp->free_stack[i] = (int32_t)(p->n_blocks - 1 - i); /* block 0 first */
    kp->n_free = (int32_t)p->n_blocks;
    for (uint64_t i = 0; i < n_bucket; i++) kp->bucket[i] = NIL;
    kp->lru_head = kp->lru_tail = NIL;
    *out = kp;
    return SB_OK;
}

void kv_pool_free(kv_pool *kp) {
    if (!kp) return;
    for (int64_t i = 0; kp->buf && i < 2 * kp->n_layer; i++) free(kp->buf[i]);
    for (int32_t s = 0; kp->seq && s < kp->p.n_seq_max; s++) free(kp->seq[s].tokens), free(kp->seq[s].blocks);
    free(kp->buf);
    free(kp->row_bytes);
    free(kp->b);
    free(kp->tok);
    free(kp->free_stack);
    free(kp->bucket);
    free(kp->seq);
    free(kp);
}

void *kv_pool_layer(const kv_pool *kp, int64_t l, int v) { return kp->buf[2 * l + v]; }
int64_t kv_pool_rows(const kv_pool *kp) { return kp->rows; }
int32_t kv_pool_block_size(const kv_pool *kp) { return kp->p.block_size; }
int64_t kv_pool_table_len(const kv_pool *kp) { return kp->table_len; }
int32_t kv_pool_scratch_block(const kv_pool *kp) { return (int32_t)kp->p.n_blocks; }
int64_t kv_pool_n_ctx(const kv_pool *kp) { return kp->p.n_ctx; }
int32_t kv_pool_n_seq_max(const kv_pool *kp) { return kp->p.n_seq_max; }

// ---- hashing and the registry ----

static uint64_t chain_hash(uint64_t parent, const int32_t *tokens, int64_t n) {
    uint64_t h = parent ^ 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        for (int k = 0; k < 4; k++) h = (h ^ ((t >> (8 * k)) & 0xff)) * 1099511628211ull;
    }
    h ^= h >> 33; /* finalizer (murmur3's): spread FNV's weak high bits over the bucket index */
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static int32_t *tokens_of(const kv_pool *kp, int32_t blk) { return kp->tok + (int64_t)blk * kp->p.block_size; }

/* the registered block holding exactly tokens[0, bs) after parent, or NIL */
static int32_t lookup(const kv_pool *kp, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    for (int32_t i = kp->bucket[hash & kp->bucket_mask]; i != NIL; i = kp->b[i].hnext)
        if (kp->b[i].hash == hash && kp->b[i].parent == parent &&
            !memcmp(tokens_of(kp, i), tokens, (size_t)kp->p.block_size * sizeof *tokens))
            return i;
    return NIL;
}

static void unregister(kv_pool *kp, int32_t blk) {
    int32_t *link = &kp->bucket[kp->b[blk].hash & kp->bucket_mask];
    while (*link != blk) link = &kp->b[*link].hnext;
    *link = kp->b[blk].hnext;
    kp->b[blk].registered = false;
}

// ---- reference counts, LRU, allocation ----

static void lru_unlink(kv_pool *kp, int32_t blk) {
    kv_block *x = &kp->b[blk];
    if (x->prev != NIL) kp->b[x->prev].next = x->next;
    else kp->lru_head = x->next;
    if (x->next != NIL) kp->b[x->next].prev = x->prev;
    else kp->lru_tail = x->prev;
    kp->n_cached--;
}

static void acquire(kv_pool *kp, int32_t blk) {
    if (kp->b[blk].ref++ == 0) {
        lru_unlink(kp, blk); /* only registered blocks live unreferenced */
        kp->n_used++;
    }
}

static void release(kv_pool *kp, int32_t blk) {
    kv_block *x = &kp->b[blk];
    if (--x->ref > 0) return;
    kp->n_used--;
    if (x->registered) { /* cached: the newest end of the LRU list */
        x->next = NIL;
        x->prev = kp->lru_tail;
        if (kp->lru_tail != NIL) kp->b[kp->lru_tail].next = blk;
        else kp->lru_head = blk;
        kp->lru_tail = blk;
        kp->n_cached++;
    } else {
        x->n_filled = 0;
        kp->free_stack[kp->n_free++] = blk;
    }
}

/* a fresh private block (ref 1, empty), or NIL when none is free or evictable */
static int32_t alloc_block(kv_pool *kp) {
    int32_t blk;
    if (kp->n_free > 0) {
        blk = kp->free_stack[--kp->n_free];
    } else if (kp->lru_head != NIL) {
        blk = kp->lru_head;
        lru_unlink(kp, blk);
        unregister(kp, blk);
        kp->evictions++;
    } else {
        return NIL;
    }
    kp->b[blk] = (kv_block){.ref = 1, .hnext = NIL, .prev = NIL, .next = NIL};
    kp->n_used++;
    return blk;
}

// ---- sequences ----

bool kv_pool_seq_is_open(const kv_pool *kp, int32_t seq) { return seq >= 0 && seq < kp->p.n_seq_max && kp->seq[seq].open; }

sb_status kv_pool_seq_valid(const kv_pool *kp, int32_t seq, const char *what) {
    if (!kv_pool_seq_is_open(kp, seq))
        return sb_fail(SB_ERR_INVALID_ARG, "%s: sequence %d is not open (ids 0..%d)", what, seq, kp->p.n_seq_max - 1);
    return SB_OK;
}

sb_status kv_pool_seq_open(kv_pool *kp, int32_t *seq) {
    for (int32_t s = 0; s < kp->p.n_seq_max; s++)
        if (!kp->seq[s].open) {
            kp->seq[s].open = true;
            kp->seq[s].n = 0;
            *seq = s;
            return SB_OK;
        }
    return sb_fail(SB_ERR_CONTEXT_FULL, "kv pool: all %d sequences are open (n_seq_max)", kp->p.n_seq_max);
}

static int64_t n_blk(const kv_pool *kp, int64_t n) { return (n + kp->p.block_size - 1) / kp->p.block_size; }

void kv_pool_seq_truncate(kv_pool *kp, int32_t seq, int64_t n) {
    kv_seq *s = &kp->seq[seq];
    if (n < 0 || n >= s->n) return;
    for (int64_t i = n_blk(kp, n); i < n_blk(kp, s->n); i++) release(kp, s->blocks[i]);
    s->n = n;
    const int32_t last = n % kp->p.block_size ? s->blocks[n / kp->p.block_size] : NIL;
    if (last != NIL && kp->b[last].ref == 1 && !kp->b[last].registered) kp->b[last].n_filled = (int32_t)(n % kp->p.block_size);
}

void kv_pool_seq_close(kv_pool *kp, int32_t seq) {
    kv_pool_seq_truncate(kp, seq, 0);
    kp->seq[seq].open = false;
}

int64_t kv_pool_seq_len(const kv_pool *kp, int32_t seq) { return kp->seq[seq].n; }
const int32_t *kv_pool_seq_tokens(const kv_pool *kp, int32_t seq) { return kp->seq[seq].tokens; }
const int32_t *kv_pool_seq_blocks(const kv_pool *kp, int32_t seq) { return kp->seq[seq].blocks; }

// ---- prefix attachment ----

/* the block whose used rows best continue tokens[0, n) after parent (a registered block, or a
 * partial one in use), its match length in *r; NIL when none matches a token */
static int32_t best_partial(const kv_pool *kp, uint64_t parent, const int32_t *tokens, int64_t n, int64_t *r) {
    int32_t best = NIL;
    *r = 0;
    for (int32_t i = 0; i < kp->p.n_blocks; i++) {
        const kv_block *x = &kp->b[i];
        if ((x->ref == 0 && !x->registered) || x->n_filled == 0 || x->parent != parent) continue;
        const int32_t *t = tokens_of(kp, i);
        int64_t k = 0;
        while (k < n && k < x->n_filled && t[k] == tokens[k]) k++;
        if (k > *r) *r = k, best = i;
    }
    return best;
}

void kv_pool_attach_prefix(kv_pool *kp, int32_t seq, const int32_t *tokens, int64_t n_max, int64_t *n_reused) {
    kv_seq *s = &kp->seq[seq];
    const int64_t bs = kp->p.block_size;
    if (n_max > kp->p.n_ctx) n_max = kp->p.n_ctx;
    uint64_t parent = HASH_SEED;
    int64_t len = 0, i = 0;
    while (len + bs <= n_max && i < kp->table_len) { /* whole blocks, by hash */
        const uint64_t h = chain_hash(parent, tokens + len, bs);
        const int32_t blk = lookup(kp, h, parent, tokens + len);
        if (blk == NIL) break;
        acquire(kp, blk);
        s->blocks[i++] = blk;
        parent = h;
        len += bs;
    }
    if (len < n_max && i < kp->table_len) { /* the rest of the prefix inside one more block */
        int64_t r;
        const int32_t blk = best_partial(kp, parent, tokens + len, n_max - len < bs ? n_max - len : bs, &r);
        if (blk != NIL) {
            acquire(kp, blk);
            s->blocks[i++] = blk;
            len += r;
        }
    }
    memcpy(s->tokens, tokens, (size_t)len * sizeof *tokens);
    s->n = len;
    kp->hit_tokens += len;
    *n_reused = len;
}

// ---- appending ----

/* does appending to seq write into its last block, which must be copied first? */
static bool needs_cow(const kv_pool *kp, const kv_seq *s) {
    if (s->n % kp->p.block_size == 0) return false;
    const kv_block *x = &kp->b[s->blocks[s->n / kp->p.block_size]];
    return x->ref > 1 || x->registered;
}

int64_t kv_pool_blocks_needed(const kv_pool *kp, int32_t seq, int64_t n_new) {
    const kv_seq *s = &kp->seq[seq];
    return n_blk(kp, s->n + n_new) - n_blk(kp, s->n) + (n_new > 0 && needs_cow(kp, s));
}

int64_t kv_pool_blocks_available(const kv_pool *kp) { return kp->n_free + kp->n_cached; }

void kv_pool_set_copy(kv_pool *kp, kv_pool_copy_fn fn, void *ctx) {
    kp->copy = fn;
    kp->copy_ctx = ctx;
}

/* copy the first n rows of every layer's K and V from block src to block dst (through the copy
 * hook where the cache lives elsewhere) */
static sb_status copy_rows(kv_pool *kp, int32_t dst, int32_t src, int64_t n) {
    const int64_t bs = kp->p.block_size;
    for (int64_t l = 0; l < kp->n_layer; l++)
        for (int v = 0; v < 2; v++) {
            uint8_t *buf = (uint8_t *)kp->buf[2 * l + v];
            const uint64_t rb = kp->row_bytes[l], to = (uint64_t)dst * bs * rb, from = (uint64_t)src * bs * rb, nb = (uint64_t)n * rb;
            if (kp->copy)
                SB_TRY(kp->copy(kp->copy_ctx, buf, to, from, nb));
            else
                memcpy(buf + to, buf + from, (size_t)nb);
        }
    memcpy(tokens_of(kp, dst), tokens_of(kp, src), (size_t)n * sizeof(int32_t));
    kp->b[dst].n_filled = (int32_t)n;
    kp->b[dst].parent = kp->b[src].parent;
    return SB_OK;
}

sb_status kv_pool_reserve(kv_pool *kp, int32_t seq, int64_t n_new, kv_pool_undo *u) {
    kv_seq *s = &kp->seq[seq];
    const int64_t bs = kp->p.block_size, have = n_blk(kp, s->n), want = n_blk(kp, s->n + n_new);
    *u = (kv_pool_undo){.seq = seq, .n_blk_before = have, .n_blk_after = have, .replaced = NIL};
    if (want > kp->table_len)
        return sb_fail(SB_ERR_CONTEXT_FULL, "kv pool: sequence %d would need %lld blocks; a table holds %lld", seq, (long long)want,
                       (long long)kp->table_len);
    if (kv_pool_blocks_needed(kp, seq, n_new) > kv_pool_blocks_available(kp))
        return sb_fail(SB_ERR_CONTEXT_FULL, "kv pool: sequence %d needs %lld more blocks; %lld of %lld are free or evictable", seq,
                       (long long)kv_pool_blocks_needed(kp, seq, n_new), (long long)kv_pool_blocks_available(kp), (long long)kp->p.n_blocks);
    if (n_new > 0 && needs_cow(kp, s)) {
        const int32_t blk = alloc_block(kp), old = s->blocks[have - 1];
        const sb_status st = copy_rows(kp, blk, old, s->n % bs);
        if (st != SB_OK) {
            release(kp, blk);
            return st;
        }
        s->blocks[have - 1] = blk;
        u->replaced = old; /* still held by seq until the commit (released) or the undo (restored) */
        kp->cow++;
    }
    for (int64_t i = have; i < want; i++) s->blocks[i] = alloc_block(kp); /* enough were counted above */
    u->n_blk_after = want;
    return SB_OK;
}

void kv_pool_unreserve(kv_pool *kp, const kv_pool_undo *u) {
    kv_seq *s = &kp->seq[u->seq];
    for (int64_t i = u->n_blk_before; i < u->n_blk_after; i++) release(kp, s->blocks[i]);
    if (u->replaced != NIL) {
        release(kp, s->blocks[u->n_blk_before - 1]);
        s->blocks[u->n_blk_before - 1] = u->replaced;
        kp->cow--;
    }
}

int64_t kv_pool_row(const kv_pool *kp, int32_t seq, int64_t pos) {
    const int64_t bs = kp->p.block_size;
    return (int64_t)kp->seq[seq].blocks[pos / bs] * bs + pos % bs;
}

void kv_pool_commit(kv_pool *kp, const kv_pool_undo *u, const int32_t *tokens, int64_t n) {
    kv_seq *s = &kp->seq[u->seq];
    if (u->replaced != NIL) release(kp, u->replaced); /* the block copied on write */
    const int64_t bs = kp->p.block_size;
    for (int64_t k = 0; k < n; k++) {
        const int64_t pos = s->n + k, i = pos / bs;
        kv_block *x = &kp->b[s->blocks[i]];
        if (pos % bs == 0) x->parent = i == 0 ? HASH_SEED : kp->b[s->blocks[i - 1]].hash;
        tokens_of(kp, s->blocks[i])[pos % bs] = tokens[k];
        s->tokens[pos] = tokens[k];
        x->n_filled = (int32_t)(pos % bs + 1);
        if (x->n_filled == bs) { /* full: findable by the next sequence with this prefix */
            x->hash = chain_hash(x->parent, tokens_of(kp, s->blocks[i]), bs);
            if (lookup(kp, x->hash, x->parent, tokens_of(kp, s->blocks[i])) == NIL) {
                x->registered = true;
                x->hnext = kp->bucket[x->hash & kp->bucket_mask];
                kp->bucket[x->hash & kp->bucket_mask] = s->blocks[i];
            }
        }
    }
    s->n += n;
}

kv_pool_stats kv_pool_get_stats(const kv_pool *kp) {
    return (kv_pool_stats){.n_blocks = kp->p.n_blocks, .n_used = kp->n_used, .n_cached = kp->n_cached, .n_free = kp->n_free,
                           .n_hit_tokens = kp->hit_tokens, .n_evictions = kp->evictions, .n_cow = kp->cow};
}
