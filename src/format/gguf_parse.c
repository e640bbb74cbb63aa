/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * format/gguf_parse.c — the pure GGUF v2/v3 parser: bytes in, validated index out (formats.md §1).
 * Layer 0 (format). Untrusted input: every read checks the bytes left first; every size is computed
 * with checked arithmetic; counts are checked against the bytes that could hold them before any
 * allocation, so memory use is bounded by a small multiple of the file size. Each failed check has
 * its own SB_ERR_FORMAT_* status and a message with the field, its file offset and the values.
 * Deviations from llama.cpp, all stricter or documented: bool bytes must be 0 or 1; keys and tensor
 * names may not hold NUL bytes (they are C strings in our API), tensor names may not be empty; alignment is capped at 1 MiB; one string/array value is capped at
 * 64 MiB; tensors need not be contiguous, but must be aligned, inside the file and disjoint.
 * Non-goals: big-endian files (rejected as such), writing (gguf_write.c).
 */
#include "format/gguf.h"
#include "base/ckd.h"
#include "base/status.h"
#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

// ---- cursor ----

typedef struct cursor {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static sb_status need(const cursor *c, uint64_t n, const char *what) {
    if (n > left(c))
        return sb_fail(SB_ERR_FORMAT_TRUNCATED, "gguf: %s at offset 0x%llx needs %llu bytes, file has %llu left",
                       what, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)left(c));
    return SB_OK;
}

static sb_status rd(cursor *c, void *dst, uint64_t n, const char *what) {
    SB_TRY(need(c, n, what));
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return SB_OK;
}

/* A string: u64 length + bytes, length capped by the bytes left and by `cap`. */
static sb_status rd_str(cursor *c, sb_strview *out, uint64_t cap, const char *what) {
    uint64_t at = c->pos, len;
    SB_TRY(rd(c, &len, 8, what));
    if (len > left(c) || len > cap)
        return sb_fail(SB_ERR_FORMAT_STRING_LEN, "gguf: %s at offset 0x%llx has length %llu, but %s %llu",
                       what, (unsigned long long)at, (unsigned long long)len,
                       len > left(c) ? "the file has only" : "the limit is",
                       (unsigned long long)(len > left(c) ? left(c) : cap));
    out->ptr = (const char *)c->p + c->pos;
    out->len = (size_t)len;
    c->pos += len;
    return SB_OK;
}

// ---- value types ----

size_t gguf_type_size(uint32_t t) {
    static const size_t sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

const char *gguf_type_name(uint32_t t) {
    static const char *nm[13] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return t < 13 ? nm[t] : NULL;
}


// ---- metadata ----

/* Read one value of element type `t` (not ARRAY) `count` times, recording where it lies. */
static sb_status parse_values(cursor *c, gguf_kv *kv, uint32_t t, uint64_t count) {
    kv->data = c->p + c->pos;
    if (t == SB_GGUF_STRING) {
        /* each string costs at least its 8-byte length: bound the count before allocating */
        uint64_t min_bytes;
        if (ckd_mul(&min_bytes, count, (uint64_t)8) || min_bytes > left(c) || min_bytes > GGUF_MAX_VALUE_BYTES)
            return sb_fail(SB_ERR_FORMAT_ARRAY_LEN,
                           "gguf: key \"%s\": string array of %llu elements at offset 0x%llx cannot fit in the %llu bytes left (limit %llu MiB)",
                           kv->key, (unsigned long long)count, (unsigned long long)c->pos,
                           (unsigned long long)left(c), GGUF_MAX_VALUE_BYTES >> 20);
        kv->strs = (sb_strview *)malloc((count ? count : 1) * sizeof *kv->strs);
        if (!kv->strs) return sb_fail(SB_ERR_OOM, "gguf: %llu string views", (unsigned long long)count);
        uint64_t start = c->pos;
        for (uint64_t j = 0; j < count; j++) {
            SB_TRY(rd_str(c, &kv->strs[j], GGUF_MAX_VALUE_BYTES, "string value"));
            if (c->pos - start > GGUF_MAX_VALUE_BYTES)
                return sb_fail(SB_ERR_FORMAT_ARRAY_LEN, "gguf: key \"%s\": string array exceeds %llu MiB at element %llu",
                               kv->key, GGUF_MAX_VALUE_BYTES >> 20, (unsigned long long)j);
        }
        return SB_OK;
    }
    size_t es = gguf_type_size(t);
    uint64_t bytes;
    if (ckd_mul(&bytes, count, (uint64_t)es) || bytes > left(c) || bytes > GGUF_MAX_VALUE_BYTES)
        return sb_fail(count == 1 ? SB_ERR_FORMAT_TRUNCATED : SB_ERR_FORMAT_ARRAY_LEN,
                       "gguf: key \"%s\": %llu × %s at offset 0x%llx exceeds the %llu bytes left (limit %llu MiB)",
                       kv->key, (unsigned long long)count, gguf_type_name(t), (unsigned long long)c->pos,
                       (unsigned long long)left(c), GGUF_MAX_VALUE_BYTES >> 20);
    if (t == SB_GGUF_BOOL)
        for (uint64_t j = 0; j < count; j++)
            if (c->p[c->pos + j] > 1)
                return sb_fail(SB_ERR_FORMAT_BOOL, "gguf: key \"%s\": bool element %llu at offset 0x%llx is 0x%02x (must be 0 or 1)",
                               kv->key, (unsigned long long)j, (unsigned long long)(c->pos + j), c->p[c->pos + j]);
    c->pos += bytes;
    return SB_OK;
}

static sb_status parse_kv(cursor *c, gguf_kv *kv, int64_t i) {
    uint64_t at = c->pos;
    SB_TRY(rd_str(c, &kv->key_raw, GGUF_MAX_VALUE_BYTES, "metadata key"));
    if (kv->key_raw.len == 0)
        return sb_fail(SB_ERR_FORMAT_KEY_EMPTY, "gguf: metadata key %lld at offset 0x%llx is empty", (long long)i,
                       (unsigned long long)at);
    if (memchr(kv->key_raw.ptr, 0, kv->key_raw.len))
        return sb_fail(SB_ERR_FORMAT_KEY_NUL, "gguf: metadata key %lld at offset 0x%llx holds a NUL byte", (long long)i,
                       (unsigned long long)at);
    int32_t type;
    uint64_t tat = c->pos;
    SB_TRY(rd(c, &type, 4, "metadata value type"));
    kv->file_offset = c->pos;
#define KEYFMT "gguf: key \"%.*s\" at offset 0x%llx: "
#define KEYARG (int)(kv->key_raw.len > 200 ? 200 : kv->key_raw.len), kv->key_raw.ptr, (unsigned long long)at
    if (type < 0 || type > SB_GGUF_FLOAT64)
        return sb_fail(SB_ERR_FORMAT_VALUE_TYPE, KEYFMT "unknown value type %d at offset 0x%llx", KEYARG, type,
                       (unsigned long long)tat);
    kv->type = (uint32_t)type;
    kv->elem_type = kv->type;
    kv->count = 1;
    if (type == SB_GGUF_ARRAY) {
        int32_t et;
        uint64_t eat = c->pos;
        SB_TRY(rd(c, &et, 4, "array element type"));
        if (et == SB_GGUF_ARRAY)
            return sb_fail(SB_ERR_FORMAT_NESTED_ARRAY, KEYFMT "array of arrays (element type at 0x%llx)", KEYARG,
                           (unsigned long long)eat);
        if (et < 0 || et > SB_GGUF_FLOAT64)
            return sb_fail(SB_ERR_FORMAT_VALUE_TYPE, KEYFMT "unknown array element type %d at offset 0x%llx", KEYARG, et,
                           (unsigned long long)eat);
        kv->elem_type = (uint32_t)et;
        SB_TRY(rd(c, &kv->count, 8, "array count"));
        kv->file_offset = c->pos;
    }
    /* parse_values names the key through kv->key: point it at a temporary bounded copy */
    char keybuf[128];
    size_t kl = kv->key_raw.len < sizeof keybuf - 1 ? kv->key_raw.len : sizeof keybuf - 1;
    memcpy(keybuf, kv->key_raw.ptr, kl);
    keybuf[kl] = 0;
    kv->key = keybuf;
    sb_status s = parse_values(c, kv, kv->elem_type, kv->count);
    kv->key = NULL;
    return s;
#undef KEYFMT
#undef KEYARG
}

// ---- tensor infos ----

static sb_status parse_tensor_info(cursor *c, gguf_tensor *t, sb_strview *name, int64_t i) {
    t->info_offset = c->pos;
    SB_TRY(rd_str(c, name, GGUF_MAX_VALUE_BYTES, "tensor name"));
    if (name->len == 0 || name->len >= GGUF_MAX_NAME || memchr(name->ptr, 0, name->len))
        return sb_fail(SB_ERR_FORMAT_TENSOR_NAME,
                       "gguf: tensor %lld at offset 0x%llx: name of %zu bytes%s (must be 1..%d bytes without NUL)",
                       (long long)i, (unsigned long long)t->info_offset, name->len,
                       name->len && memchr(name->ptr, 0, name->len) ? " holds a NUL byte" : "", GGUF_MAX_NAME - 1);
    char nm[GGUF_MAX_NAME];
    memcpy(nm, name->ptr, name->len);
    nm[name->len] = 0;
    uint64_t at = c->pos;
    SB_TRY(rd(c, &t->n_dims, 4, "tensor n_dims"));
    if (t->n_dims > 4)
        return sb_fail(SB_ERR_FORMAT_TENSOR_DIMS, "gguf: tensor \"%s\": n_dims %u at offset 0x%llx exceeds 4", nm,
                       t->n_dims, (unsigned long long)at);
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = c->pos;
        SB_TRY(rd(c, &t->ne[d], 8, "tensor dimension"));
        if (t->ne[d] < 0)
            return sb_fail(SB_ERR_FORMAT_TENSOR_SHAPE, "gguf: tensor \"%s\": ne[%u] = %lld at offset 0x%llx is negative",
                           nm, d, (long long)t->ne[d], (unsigned long long)at);
    }
    int32_t type;
    at = c->pos;
    SB_TRY(rd(c, &type, 4, "tensor type"));
    if (type < 0 || type >= SB_TYPE_COUNT)
        return sb_fail(SB_ERR_FORMAT_TENSOR_TYPE, "gguf: tensor \"%s\": type id %d at offset 0x%llx is unknown (valid: 0..%d)",
                       nm, type, (unsigned long long)at, SB_TYPE_COUNT - 1);
    const qk_traits *tr = qk_get(type);
    if (tr->removed)
        return sb_fail(SB_ERR_FORMAT_TENSOR_REMOVED_TYPE,
                       "gguf: tensor \"%s\": type id %d at offset 0x%llx was removed from the format", nm, type,
                       (unsigned long long)at);
    t->type = type;
    if (t->ne[0] % tr->blck)
        return sb_fail(SB_ERR_FORMAT_TENSOR_BLOCK, "gguf: tensor \"%s\": ne[0] = %lld is not a multiple of %s's block size %lld",
                       nm, (long long)t->ne[0], tr->name, (long long)tr->blck);
    uint64_t nel = 1, nbytes;
    for (int d = 0; d < 4; d++)
        if (ckd_mul(&nel, nel, (uint64_t)t->ne[d]) || nel > (uint64_t)INT64_MAX)
            return sb_fail(SB_ERR_FORMAT_TENSOR_OVERFLOW,
                           "gguf: tensor \"%s\": element count of shape [%lld, %lld, %lld, %lld] overflows 63 bits", nm,
                           (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    if (ckd_mul(&nbytes, nel / (uint64_t)tr->blck, (uint64_t)tr->type_size))
        return sb_fail(SB_ERR_FORMAT_TENSOR_OVERFLOW, "gguf: tensor \"%s\": byte size of %llu %s elements overflows 64 bits",
                       nm, (unsigned long long)nel, tr->name);
    t->nbytes = nbytes;
    SB_TRY(rd(c, &t->offset, 8, "tensor offset"));
    return SB_OK;
}

/* Sort tensor indices by data offset (for the overlap check). */
static const gguf_tensor *sort_base;
static int cmp_offset(const void *a, const void *b) {
    uint64_t x = sort_base[*(const int64_t *)a].offset, y = sort_base[*(const int64_t *)b].offset;
    return x < y ? -1 : x > y;
}

static sb_status check_tensor_data(gguf_file *f) {
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t start, end;
        if (t->offset % f->alignment)
            return sb_fail(SB_ERR_FORMAT_TENSOR_ALIGN, "gguf: tensor \"%s\": offset 0x%llx is not a multiple of the alignment %u",
                           t->name, (unsigned long long)t->offset, f->alignment);
        if (ckd_add(&start, f->data_offset, t->offset) || ckd_add(&end, start, t->nbytes))
            return sb_fail(SB_ERR_FORMAT_TENSOR_OVERFLOW, "gguf: tensor \"%s\": offset 0x%llx + %llu bytes overflows 64 bits",
                           t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        if (end > f->size)
            return sb_fail(SB_ERR_FORMAT_TENSOR_BOUNDS, "gguf: tensor \"%s\": data [0x%llX, 0x%llX) exceeds file size 0x%llX",
                           t->name, (unsigned long long)start, (unsigned long long)end, (unsigned long long)f->size);
        t->data = f->bytes + start;
    }
    if (f->n_tensors < 2) return SB_OK;
    int64_t *order = (int64_t *)malloc((size_t)f->n_tensors * sizeof *order);
    if (!order) return sb_fail(SB_ERR_OOM, "gguf: tensor order of %lld entries", (long long)f->n_tensors);
    for (int64_t i = 0; i < f->n_tensors; i++) order[i] = i;
    sort_base = f->tensors; /* qsort has no context argument in C11; parsing is not re-entrant here */
    qsort(order, (size_t)f->n_tensors, sizeof *order, cmp_offset);
    sb_status s = SB_OK;
    for (int64_t k = 1; k < f->n_tensors && s == SB_OK; k++) {
        const gguf_tensor *a = &f->tensors[order[k - 1]], *b = &f->tensors[order[k]];
        if (a->nbytes && b->nbytes && a->offset + a->nbytes > b->offset)
            s = sb_fail(SB_ERR_FORMAT_TENSOR_OVERLAP, "gguf: tensors \"%s\" [0x%llx, 0x%llx) and \"%s\" [0x%llx, 0x%llx) overlap",
                        a->name, (unsigned long long)a->offset, (unsigned long long)(a->offset + a->nbytes), b->name,
                        (unsigned long long)b->offset, (unsigned long long)(b->offset + b->nbytes));
    }
    free(order);
    return s;
}

// ---- well-known keys ----

static sb_status check_alignment(gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = sb_strset_find(&f->key_set, f->key_views, "general.alignment", 17);
    if (i < 0) return SB_OK;
    const gguf_kv *kv = &f->kvs[i];
    if (kv->type != SB_GGUF_UINT32)
        return sb_fail(SB_ERR_FORMAT_KEY_TYPE, "gguf: key \"general.alignment\" at offset 0x%llx has type %s, must be u32",
                       (unsigned long long)kv->file_offset, gguf_type_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
        return sb_fail(SB_ERR_FORMAT_ALIGNMENT, "gguf: general.alignment = %u at offset 0x%llx (must be a power of two, 1..%u)",
                       a, (unsigned long long)kv->file_offset, GGUF_MAX_ALIGNMENT);
    f->alignment = a;
    return SB_OK;
}

// ---- entry points ----

static sb_status parse(gguf_file *f) {
    cursor c = {f->bytes, f->size, 0};
    uint8_t magic[4];
    SB_TRY(rd(&c, magic, 4, "magic"));
    if (memcmp(magic, "GGUF", 4))
        return sb_fail(SB_ERR_FORMAT_MAGIC, "gguf: magic at offset 0x0 is %02x %02x %02x %02x, not \"GGUF\"", magic[0],
                       magic[1], magic[2], magic[3]);
    SB_TRY(rd(&c, &f->version, 4, "version"));
    if (f->version != 0 && (f->version & 0xFFFF) == 0)
        return sb_fail(SB_ERR_FORMAT_ENDIAN, "gguf: version 0x%08x at offset 0x4 looks byte-swapped (a big-endian file?)",
                       f->version);
    if (f->version < 2 || f->version > 3)
        return sb_fail(SB_ERR_FORMAT_VERSION, "gguf: version %u at offset 0x4 is not supported (2 or 3)", f->version);
    SB_TRY(rd(&c, &f->n_tensors, 8, "n_tensors"));
    SB_TRY(rd(&c, &f->n_kv, 8, "n_kv"));
    /* smallest encodings: a kv is 8 (len) + 1 (key) + 4 (type) + 1 (u8) bytes; a tensor info is
     * 8 + 1 + 4 + 4 + 8 bytes. Counts that cannot fit in the bytes left are rejected before any
     * allocation. */
    if (f->n_kv < 0 || (uint64_t)f->n_kv > left(&c) / 14)
        return sb_fail(SB_ERR_FORMAT_COUNT, "gguf: n_kv = %lld at offset 0x10 cannot fit in the %llu bytes left",
                       (long long)f->n_kv, (unsigned long long)left(&c));
    if (f->n_tensors < 0 || (uint64_t)f->n_tensors > left(&c) / 25)
        return sb_fail(SB_ERR_FORMAT_COUNT, "gguf: n_tensors = %lld at offset 0x8 cannot fit in the %llu bytes left",
                       (long long)f->n_tensors, (unsigned long long)left(&c));
    size_t nk = (size_t)f->n_kv, nt = (size_t)f->n_tensors;
    f->kvs = (gguf_kv *)calloc(nk ? nk : 1, sizeof *f->kvs);
    f->key_views = (sb_strview *)calloc(nk ? nk : 1, sizeof *f->key_views);
    f->tensors = (gguf_tensor *)calloc(nt ? nt : 1, sizeof *f->tensors);
    f->tensor_views = (sb_strview *)calloc(nt ? nt : 1, sizeof *f->tensor_views);
    if (!f->kvs || !f->key_views || !f->tensors || !f->tensor_views)
        return sb_fail(SB_ERR_OOM, "gguf: index for %zu keys and %zu tensors", nk, nt);
    SB_TRY(sb_strset_init(&f->key_set, nk));
    SB_TRY(sb_strset_init(&f->tensor_set, nt));

    uint64_t meta_start = c.pos;
    for (int64_t i = 0; i < f->n_kv; i++) {
        uint64_t at = c.pos;
        SB_TRY(parse_kv(&c, &f->kvs[i], i));
        f->key_views[i] = f->kvs[i].key_raw;
        int64_t prev = sb_strset_insert(&f->key_set, f->key_views, i);
        if (prev >= 0)
            return sb_fail(SB_ERR_FORMAT_KEY_DUPLICATE, "gguf: key \"%.*s\" at offset 0x%llx duplicates key %lld",
                           (int)(f->key_views[i].len > 200 ? 200 : f->key_views[i].len), f->key_views[i].ptr,
                           (unsigned long long)at, (long long)prev);
        if (c.pos - meta_start > GGUF_MAX_META_BYTES)
            return sb_fail(SB_ERR_FORMAT_BUDGET, "gguf: metadata exceeds %llu MiB at key %lld", GGUF_MAX_META_BYTES >> 20,
                           (long long)i);
    }
    SB_TRY(check_alignment(f));

    for (int64_t i = 0; i < f->n_tensors; i++) {
        SB_TRY(parse_tensor_info(&c, &f->tensors[i], &f->tensor_views[i], i));
        int64_t prev = sb_strset_insert(&f->tensor_set, f->tensor_views, i);
        if (prev >= 0)
            return sb_fail(SB_ERR_FORMAT_TENSOR_DUPLICATE, "gguf: tensor %lld at offset 0x%llx is named \"%.*s\" like tensor %lld",
                           (long long)i, (unsigned long long)f->tensors[i].info_offset, (int)f->tensor_views[i].len,
                           f->tensor_views[i].ptr, (long long)prev);
    }

    /* NUL-terminated copies of keys and names, in one block */
    uint64_t total = 0;
    for (size_t i = 0; i < nk; i++) total += f->key_views[i].len + 1;
    for (size_t i = 0; i < nt; i++) total += f->tensor_views[i].len + 1;
    f->names = (char *)malloc(total ? total : 1);
    if (!f->names) return sb_fail(SB_ERR_OOM, "gguf: %llu bytes of names", (unsigned long long)total);
    char *w = f->names;
    for (size_t i = 0; i < nk; i++) {
        memcpy(w, f->key_views[i].ptr, f->key_views[i].len);
        w[f->key_views[i].len] = 0;
        f->kvs[i].key = w;
        w += f->key_views[i].len + 1;
    }
    for (size_t i = 0; i < nt; i++) {
        memcpy(w, f->tensor_views[i].ptr, f->tensor_views[i].len);
        w[f->tensor_views[i].len] = 0;
        f->tensors[i].name = w;
        w += f->tensor_views[i].len + 1;
    }

    f->data_offset = c.pos;
    if (nt > 0) {
        if (ckd_pad(&f->data_offset, c.pos, f->alignment) || f->data_offset > f->size)
            return sb_fail(SB_ERR_FORMAT_TRUNCATED, "gguf: data section would start at 0x%llx, beyond the file size 0x%llx",
                           (unsigned long long)f->data_offset, (unsigned long long)f->size);
    }
    return check_tensor_data(f);
}

sb_status gguf_parse(const uint8_t *data, uint64_t size, gguf_file *out) {
    memset(out, 0, sizeof *out);
    if (!data && size) return sb_fail(SB_ERR_INVALID_ARG, "gguf_parse: NULL data");
    out->bytes = data;
    out->size = size;
    sb_status s = parse(out);
    if (s != SB_OK) gguf_close(out);
    return s;
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    if (!f->key_set.slots) return NULL;
    int64_t i = sb_strset_find(&f->key_set, f->key_views, key, strlen(key));
    return i < 0 ? NULL : &f->kvs[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!f->tensor_set.slots) return NULL;
    int64_t i = sb_strset_find(&f->tensor_set, f->tensor_views, name, strlen(name));
    return i < 0 ? NULL : &f->tensors[i];
}
