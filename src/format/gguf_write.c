/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * format/gguf_write.c — GGUF v3 writer (gguf_write.h): metadata kept as encoded value bytes in
 * insertion order, tensors as borrowed pointers; serialised in llama.cpp's gguf_write_out layout
 * and written through base/file_io's output rule (a regular file or new path: temp file in the same
 * folder, fsync, rename; a device or FIFO: straight to it; anything else refused).
 * Layer 0 (format). Every size is checked; the result always passes gguf_parse.
 */
#include "format/gguf_write.h"
#include "base/ckd.h"
#include "base/file_io.h"
#include "base/status.h"
#include "quant/types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct wkv {
    char *key;
    uint32_t type;       /* value type as written */
    uint8_t *val;        /* encoded value bytes after the type id (array: elem type, count, elems) */
    size_t val_len;
} wkv;

typedef struct wtensor {
    char name[GGUF_MAX_NAME];
    int type;
    uint32_t n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    const void *data;
} wtensor;

struct gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *ts;
    size_t n_t, cap_t;
    uint32_t alignment;
};

// ---- byte buffer ----

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = (uint8_t *)realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}

// ---- create / free ----

sb_status gguf_writer_create(gguf_writer **out) {
    gguf_writer *w = (gguf_writer *)calloc(1, sizeof *w);
    if (!w) return sb_fail(SB_ERR_OOM, "gguf writer");
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    *out = w;
    return SB_OK;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val);
    }
    free(w->kvs);
    free(w->ts);
    free(w);
}

// ---- metadata ----

sb_status gguf_writer_remove(gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            free(w->kvs[i].key);
            free(w->kvs[i].val);
            memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            return SB_OK;
        }
    return SB_ERR_NOT_FOUND;
}

/* Takes ownership of val (freed on failure). */
static sb_status add_kv(gguf_writer *w, const char *key, uint32_t type, buf *val) {
    if (val->oom) {
        free(val->p);
        return sb_fail(SB_ERR_OOM, "gguf writer: value of key \"%s\"", key);
    }
    if (!key || !*key) {
        free(val->p);
        return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: empty key");
    }
    gguf_writer_remove(w, key); /* llama.cpp semantics: re-setting moves the key to the end */
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *k = (wkv *)realloc(w->kvs, cap * sizeof *k);
        if (!k) {
            free(val->p);
            return sb_fail(SB_ERR_OOM, "gguf writer: %zu keys", cap);
        }
        w->kvs = k;
        w->cap_kv = cap;
    }
    char *kc = strdup(key);
    if (!kc) {
        free(val->p);
        return sb_fail(SB_ERR_OOM, "gguf writer: key");
    }
    w->kvs[w->n_kv++] = (wkv){kc, type, val->p, val->len};
    if (!strcmp(key, "general.alignment") && type == SB_GGUF_UINT32) memcpy(&w->alignment, val->p, 4);
    return SB_OK;
}

sb_status gguf_writer_set_raw(gguf_writer *w, const char *key, uint32_t type, uint32_t elem_type, uint64_t count,
                              const void *data) {
    buf b = {0};
    size_t es = gguf_type_size(type == SB_GGUF_ARRAY ? elem_type : type);
    if (es == 0) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: key \"%s\": raw values need a numeric type", key);
    uint64_t bytes;
    if (type == SB_GGUF_ARRAY) {
        if (ckd_mul(&bytes, count, (uint64_t)es) || bytes > GGUF_MAX_VALUE_BYTES)
            return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: key \"%s\": array of %llu too large", key,
                           (unsigned long long)count);
        put_u32(&b, elem_type);
        put_u64(&b, count);
    } else {
        bytes = es;
    }
    if (type == SB_GGUF_BOOL || (type == SB_GGUF_ARRAY && elem_type == SB_GGUF_BOOL))
        for (uint64_t j = 0; j < bytes; j++)
            if (((const uint8_t *)data)[j] > 1) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: key \"%s\": bool must be 0/1", key);
    put(&b, data, (size_t)bytes);
    return add_kv(w, key, type, &b);
}

sb_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return gguf_writer_set_raw(w, key, SB_GGUF_UINT32, 0, 1, &v); }
sb_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return gguf_writer_set_raw(w, key, SB_GGUF_INT32, 0, 1, &v); }
sb_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return gguf_writer_set_raw(w, key, SB_GGUF_UINT64, 0, 1, &v); }
sb_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) { return gguf_writer_set_raw(w, key, SB_GGUF_FLOAT32, 0, 1, &v); }
sb_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return gguf_writer_set_raw(w, key, SB_GGUF_BOOL, 0, 1, &b);
}

sb_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len) {
    if (len > GGUF_MAX_VALUE_BYTES) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: key \"%s\": string too long", key);
    buf b = {0};
    put_str(&b, s, len);
    return add_kv(w, key, SB_GGUF_STRING, &b);
}

sb_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const sb_strview *strs, uint64_t n) {
    buf b = {0};
    put_u32(&b, SB_GGUF_STRING);
    put_u64(&b, n);
    for (uint64_t j = 0; j < n; j++) put_str(&b, strs[j].ptr, strs[j].len);
    if (b.len > GGUF_MAX_VALUE_BYTES + 12) {
        free(b.p);
        return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: key \"%s\": string array too large", key);
    }
    return add_kv(w, key, SB_GGUF_ARRAY, &b);
}

sb_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    if (kv->elem_type == SB_GGUF_STRING) {
        if (kv->type == SB_GGUF_STRING) return gguf_writer_set_str(w, kv->key, kv->strs[0].ptr, kv->strs[0].len);
        return gguf_writer_set_str_array(w, kv->key, kv->strs, kv->count);
    }
    return gguf_writer_set_raw(w, kv->key, kv->type, kv->elem_type, kv->count, kv->data);
}

// ---- tensors ----

sb_status gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, int n_dims, const int64_t ne[4],
                                 const void *data) {
    size_t nl = name ? strlen(name) : 0;
    if (nl == 0 || nl >= GGUF_MAX_NAME)
        return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor name \"%s\" must be 1..%d bytes", name ? name : "",
                       GGUF_MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name)) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: duplicate tensor \"%s\"", name);
    const qk_traits *tr = qk_get(type);
    if (!tr || tr->removed) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor \"%s\": bad type %d", name, type);
    if (n_dims < 1 || n_dims > 4) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor \"%s\": n_dims %d", name, n_dims);
    wtensor t = {.type = type};
    memcpy(t.name, name, nl + 1);
    uint64_t nel = 1;
    for (int d = 0; d < 4; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0 || ckd_mul(&nel, nel, (uint64_t)t.ne[d]))
            return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor \"%s\": bad shape", name);
    }
    if (t.ne[0] % tr->blck || ckd_mul(&t.nbytes, nel / (uint64_t)tr->blck, (uint64_t)tr->type_size))
        return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor \"%s\": ne[0] %lld vs block %lld", name,
                       (long long)t.ne[0], (long long)tr->blck);
    /* llama.cpp writes n_dims = 1 + index of the last dim > 1; a dim of 0 must survive too (llama.cpp
     * would drop it and change the tensor's size), so: 1 + index of the last dim != 1 */
    t.n_dims = 1;
    for (int d = 3; d > 0; d--)
        if (t.ne[d] != 1) {
            t.n_dims = (uint32_t)d + 1;
            break;
        }
    t.data = data;
    if (t.nbytes && !data) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: tensor \"%s\": NULL data", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *p = (wtensor *)realloc(w->ts, cap * sizeof *p);
        if (!p) return sb_fail(SB_ERR_OOM, "gguf writer: %zu tensors", cap);
        w->ts = p;
        w->cap_t = cap;
    }
    w->ts[w->n_t++] = t;
    return SB_OK;
}

// ---- serialisation ----

/* Header, metadata, tensor infos and the padding before the data section. */
static sb_status write_head(const gguf_writer *w, buf *b) {
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, w->n_t);
    put_u64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(b, w->kvs[i].key, strlen(w->kvs[i].key));
        put_u32(b, w->kvs[i].type);
        put(b, w->kvs[i].val, w->kvs[i].val_len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->ts[i];
        put_str(b, t->name, strlen(t->name));
        put_u32(b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, (uint32_t)t->type);
        put_u64(b, off);
        if (ckd_pad(&off, off + t->nbytes, w->alignment)) return sb_fail(SB_ERR_INVALID_ARG, "gguf writer: data too large");
    }
    static const uint8_t zeros[64];
    while (!b->oom && b->len % w->alignment) {
        size_t gap = w->alignment - b->len % w->alignment;
        put(b, zeros, gap < sizeof zeros ? gap : sizeof zeros);
    }
    return b->oom ? sb_fail(SB_ERR_OOM, "gguf writer: header") : SB_OK;
}

typedef sb_status (*sink_fn)(void *ctx, const void *p, size_t n);

static sb_status write_all(const gguf_writer *w, sink_fn sink, void *ctx) {
    buf head = {0};
    sb_status s = write_head(w, &head);
    if (s == SB_OK) s = sink(ctx, head.p, head.len);
    free(head.p);
    static const uint8_t zeros[4096];
    for (size_t i = 0; i < w->n_t && s == SB_OK; i++) {
        const wtensor *t = &w->ts[i];
        if (t->nbytes) s = sink(ctx, t->data, t->nbytes);
        uint64_t pad = (w->alignment - t->nbytes % w->alignment) % w->alignment;
        while (s == SB_OK && pad) {
            size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
            s = sink(ctx, zeros, n);
            pad -= n;
        }
    }
    return s;
}

static sb_status to_buf(void *ctx, const void *p, size_t n) {
    buf *b = (buf *)ctx;
    put(b, p, n);
    return b->oom ? sb_fail(SB_ERR_OOM, "gguf writer: %zu bytes", b->len + n) : SB_OK;
}

sb_status gguf_writer_to_memory(gguf_writer *w, uint8_t **out, size_t *size) {
    buf b = {0};
    sb_status s = write_all(w, to_buf, &b);
    if (s != SB_OK) {
        free(b.p);
        return s;
    }
    *out = b.p;
    *size = b.len;
    return SB_OK;
}

static sb_status to_out(void *ctx, const void *p, size_t n) { return fio_out_write((fio_out *)ctx, p, n); }

sb_status gguf_writer_write(gguf_writer *w, const char *path) {
    fio_out o;
    SB_TRY(fio_out_open(path, &o));
    sb_status s = write_all(w, to_out, &o);
    if (s == SB_OK) return fio_out_commit(&o);
    fio_out_abort(&o);
    return s;
}
