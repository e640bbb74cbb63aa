/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * runtime/kv_pool.h — a paged KV cache shared by many sequences of one model: per layer one K and
 * one V buffer of (n_blocks + 1) * bs rows (row = one position's Dkv values), handed out in blocks
 * of bs rows; each sequence owns a block table (logical block i -> physical block). Block
 * n_blocks is the scratch block that padding tokens of a batch write to; it is never handed out.
 * Layer 2 (runtime). Used by runtime/batch.c; graphs read the pool through the slots and
 * block_table inputs (graph/builder_paged.c).
 *
 * Sharing (vLLM's automatic prefix cache):
 *   - A full block is content-addressed by a hash chain: hash(i) = H(hash(i-1), its bs token ids),
 *     hash(-1) a constant, so equal hashes mean equal token prefixes up to that block (the block's
 *     own tokens and its parent hash are compared too; a 64-bit collision of the parent chain is
 *     the one thing taken on trust). When a block fills, it is registered under its hash (unless
 *     an equal block already is); kv_pool_attach_prefix takes registered blocks by reference.
 *   - A prefix that ends inside a block shares the block that holds it (a full registered one, or
 *     another sequence's partial last block, matched on its parent hash and leading tokens).
 *     Blocks are written only by a sole owner and never while registered: the first write into a
 *     block that is shared or registered copies its used rows into a fresh block first
 *     (copy-on-write at divergence), so a partially filled block is never written in place while
 *     shared.
 *   - Reference counts: a block is in use (ref > 0), cached (ref 0, registered: its content stays
 *     findable) or free. kv_pool_alloc takes a free block, else evicts the least recently released
 *     cached block (LRU), else fails.
 * A sliding-window model could release blocks wholly behind its window (pos - window + 1) while a
 * sequence runs: attention never reads them, so their table entries could point at the scratch
 * block and the blocks be released (kept for the prefix cache if registered). Not done yet: every
 * paged architecture here keeps a full-context layer.
 * Invariants: a sequence of length n holds ceil(n / bs) blocks; rows [0, n) of its blocks hold the
 * K/V of its tokens; every block's tokens[0, n_filled) name what its rows [0, n_filled) hold.
 * Thread safety: none; the engine that owns the pool serialises every call.
 */
#ifndef SB_RUNTIME_KV_POOL_H
#define SB_RUNTIME_KV_POOL_H

#include "runtime/model.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kv_pool kv_pool;

typedef struct kv_pool_params {
    int64_t n_blocks;   /* blocks of bs rows (>= 1) */
    int32_t block_size; /* bs, rows a block (1..1024) */
    int32_t n_seq_max;  /* sequences open at once (>= 1) */
    int64_t n_ctx;      /* longest sequence, in positions */
    int kv_type;        /* SB_TYPE_F32 or SB_TYPE_F16 */
} kv_pool_params;

typedef struct kv_pool_stats {
    int64_t n_blocks;       /* handed-out blocks (the scratch block not counted) */
    int64_t n_used;         /* referenced by an open sequence */
    int64_t n_cached;       /* unreferenced, kept for the prefix cache (evictable) */
    int64_t n_free;
    int64_t n_hit_tokens;   /* positions attached from the cache instead of computed */
    int64_t n_evictions;    /* cached blocks given up for a new one */
    int64_t n_cow;          /* blocks copied before a write (copy-on-write) */
} kv_pool_stats;

/* What a reservation changed for one sequence, so a failed step can undo it. */
typedef struct kv_pool_undo {
    int32_t seq;
    int64_t n_blk_before;   /* table length before */
    int64_t n_blk_after;    /* and after */
    int32_t replaced;       /* the block a copy-on-write replaced at index n_blk_before - 1, or -1 */
} kv_pool_undo;

/* Allocate the pool for m's layers that own a cache (the first n_layer_kv; shared-KV layers read
 * those), each at its own width; sliding-window layers keep every position (no ring here).
 * SB_ERR_OOM names the bytes. */
sb_status kv_pool_create(const rt_model *m, const kv_pool_params *p, kv_pool **out);
void kv_pool_free(kv_pool *kp);

/* Where the pool's buffers are mirrored (a device's copy of them), copies within them go through
 * fn: bytes from offset src to dst of buf (a kv_pool_layer pointer), ranges apart. NULL: memcpy. */
typedef sb_status (*kv_pool_copy_fn)(void *ctx, void *buf, uint64_t dst, uint64_t src, uint64_t bytes);
void kv_pool_set_copy(kv_pool *kp, kv_pool_copy_fn fn, void *ctx);

/* Layer l's K (v = 0) or V (v = 1) buffer: [Dkv, kv_pool_rows] of kv_type. */
void *kv_pool_layer(const kv_pool *kp, int64_t l, int v);
int64_t kv_pool_rows(const kv_pool *kp);
int32_t kv_pool_block_size(const kv_pool *kp);
/* Blocks a table may hold: min(ceil(n_ctx / bs), n_blocks). */
int64_t kv_pool_table_len(const kv_pool *kp);
/* The scratch block (padding tokens write there; unused table entries name it). */
int32_t kv_pool_scratch_block(const kv_pool *kp);
int64_t kv_pool_n_ctx(const kv_pool *kp);
int32_t kv_pool_n_seq_max(const kv_pool *kp);

/* Sequences: ids 0..n_seq_max-1. open: SB_ERR_CONTEXT_FULL when all are open. close releases its
 * blocks (full ones stay cached). Bad or closed ids: SB_ERR_INVALID_ARG (kv_pool_seq_valid). */
sb_status kv_pool_seq_open(kv_pool *kp, int32_t *seq);
sb_status kv_pool_seq_valid(const kv_pool *kp, int32_t seq, const char *what);
bool kv_pool_seq_is_open(const kv_pool *kp, int32_t seq);
void kv_pool_seq_close(kv_pool *kp, int32_t seq);
int64_t kv_pool_seq_len(const kv_pool *kp, int32_t seq);
const int32_t *kv_pool_seq_tokens(const kv_pool *kp, int32_t seq);
/* Its block table (kv_pool_seq_len rounded up to blocks entries). */
const int32_t *kv_pool_seq_blocks(const kv_pool *kp, int32_t seq);
/* Keep positions [0, n) (n <= length); later blocks are released. */
void kv_pool_seq_truncate(kv_pool *kp, int32_t seq, int64_t n);

/* An empty sequence takes the longest cached prefix of tokens[0, n_max) (whole blocks by hash,
 * then the longest partial match inside the next block); *n_reused = positions attached. */
void kv_pool_attach_prefix(kv_pool *kp, int32_t seq, const int32_t *tokens, int64_t n_max, int64_t *n_reused);

/* Appending n_new positions to seq: blocks it needs (new ones plus a copy-on-write one). */
int64_t kv_pool_blocks_needed(const kv_pool *kp, int32_t seq, int64_t n_new);
/* Blocks obtainable now: free plus cached (evictable). */
int64_t kv_pool_blocks_available(const kv_pool *kp);
/* Make rows for n_new more positions of seq writable (copy-on-write, new blocks; may evict).
 * SB_ERR_CONTEXT_FULL (numbers named, nothing taken) when the table or the pool has no room; a
 * failing copy hook's status (nothing taken). */
sb_status kv_pool_reserve(kv_pool *kp, int32_t seq, int64_t n_new, kv_pool_undo *u);
/* Undo a reservation (after a failed run): the new blocks are released, a replaced one restored. */
void kv_pool_unreserve(kv_pool *kp, const kv_pool_undo *u);
/* The cache row of position pos of seq (its block reserved). */
int64_t kv_pool_row(const kv_pool *kp, int32_t seq, int64_t pos);
/* After a successful run: positions length..length+n-1 of the reserved sequence now hold
 * tokens[0, n) (blocks that fill are registered; a block replaced by a copy is released). */
void kv_pool_commit(kv_pool *kp, const kv_pool_undo *u, const int32_t *tokens, int64_t n);

kv_pool_stats kv_pool_get_stats(const kv_pool *kp);

#endif
