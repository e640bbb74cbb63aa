/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_gguf.c — the public GGUF inspection API (sb_gguf_*) over format/gguf.h.
 * Layer 3 (api): argument checks and status translation only; all validation is the parser's.
 */
#include "sonicboom.h"
#include "base/status.h"
#include "format/gguf.h"

#include <stdlib.h>
#include <string.h>

struct sb_gguf {
    gguf_file f;
};

static sb_status wrap(sb_status s, gguf_file *f, sb_gguf **out) {
    if (s != SB_OK) return s;
    sb_gguf *g = (sb_gguf *)malloc(sizeof *g);
    if (!g) {
        gguf_close(f);
        return sb_fail(SB_ERR_OOM, "sb_gguf handle");
    }
    g->f = *f;
    *out = g;
    return SB_OK;
}

SB_API const char *sb_gguf_type_name(int t) { return t >= 0 ? gguf_type_name((uint32_t)t) : NULL; }

SB_API sb_status sb_gguf_open(const char *path, sb_gguf **out) {
    if (!path || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_open: NULL argument");
    *out = NULL;
    gguf_file f;
    return wrap(gguf_open(path, &f), &f, out);
}

SB_API sb_status sb_gguf_open_memory(const void *data, size_t size, sb_gguf **out) {
    if ((!data && size) || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_open_memory: NULL argument");
    *out = NULL;
    gguf_file f;
    return wrap(gguf_parse((const uint8_t *)data, size, &f), &f, out);
}

SB_API void sb_gguf_free(sb_gguf *g) {
    if (!g) return;
    gguf_close(&g->f);
    free(g);
}

SB_API sb_status sb_gguf_get_info(const sb_gguf *g, sb_gguf_info *out) {
    if (!g || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_get_info: NULL argument");
    out->version = g->f.version;
    out->alignment = g->f.alignment;
    out->n_kv = g->f.n_kv;
    out->n_tensors = g->f.n_tensors;
    out->data_offset = g->f.data_offset;
    out->file_size = g->f.size;
    return SB_OK;
}

SB_API sb_status sb_gguf_find_key(const sb_gguf *g, const char *key, int64_t *index) {
    if (!g || !key || !index) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_find_key: NULL argument");
    const gguf_kv *kv = gguf_find(&g->f, key);
    if (!kv) return sb_fail(SB_ERR_NOT_FOUND, "key \"%s\" not found", key);
    *index = kv - g->f.kvs;
    return SB_OK;
}

static sb_status kv_at(const sb_gguf *g, int64_t i, const gguf_kv **kv) {
    if (!g) return sb_fail(SB_ERR_INVALID_ARG, "NULL sb_gguf");
    if (i < 0 || i >= g->f.n_kv)
        return sb_fail(SB_ERR_RANGE, "key index %lld out of range (%lld keys)", (long long)i, (long long)g->f.n_kv);
    *kv = &g->f.kvs[i];
    return SB_OK;
}

SB_API sb_status sb_gguf_get_kv(const sb_gguf *g, int64_t i, const char **key, sb_gguf_type *type,
                                sb_gguf_type *elem_type, uint64_t *count) {
    const gguf_kv *kv = NULL;
    SB_TRY(kv_at(g, i, &kv));
    if (key) *key = kv->key;
    if (type) *type = (sb_gguf_type)kv->type;
    if (elem_type) *elem_type = (sb_gguf_type)kv->elem_type;
    if (count) *count = kv->count;
    return SB_OK;
}

SB_API sb_status sb_gguf_get_int(const sb_gguf *g, int64_t i, uint64_t j, int64_t *out) {
    const gguf_kv *kv = NULL;
    SB_TRY(kv_at(g, i, &kv));
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "NULL out");
    return gguf_kv_i64(kv, kv->type == SB_GGUF_ARRAY ? j : 0, out);
}

SB_API sb_status sb_gguf_get_uint(const sb_gguf *g, int64_t i, uint64_t j, uint64_t *out) {
    const gguf_kv *kv = NULL;
    SB_TRY(kv_at(g, i, &kv));
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "NULL out");
    return gguf_kv_u64(kv, kv->type == SB_GGUF_ARRAY ? j : 0, out);
}

SB_API sb_status sb_gguf_get_float(const sb_gguf *g, int64_t i, uint64_t j, double *out) {
    const gguf_kv *kv = NULL;
    SB_TRY(kv_at(g, i, &kv));
    if (!out) return sb_fail(SB_ERR_INVALID_ARG, "NULL out");
    return gguf_kv_f64(kv, kv->type == SB_GGUF_ARRAY ? j : 0, out);
}

SB_API sb_status sb_gguf_get_str(const sb_gguf *g, int64_t i, uint64_t j, const char **str, size_t *len) {
    const gguf_kv *kv = NULL;
    SB_TRY(kv_at(g, i, &kv));
    if (!str || !len) return sb_fail(SB_ERR_INVALID_ARG, "NULL out");
    sb_strview v;
    SB_TRY(gguf_kv_str(kv, kv->type == SB_GGUF_ARRAY ? j : 0, &v));
    *str = v.ptr;
    *len = v.len;
    return SB_OK;
}

SB_API sb_status sb_gguf_get_tensor(const sb_gguf *g, int64_t i, sb_gguf_tensor *out) {
    if (!g || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_get_tensor: NULL argument");
    if (i < 0 || i >= g->f.n_tensors)
        return sb_fail(SB_ERR_RANGE, "tensor index %lld out of range (%lld tensors)", (long long)i,
                       (long long)g->f.n_tensors);
    const gguf_tensor *t = &g->f.tensors[i];
    out->name = t->name;
    out->type = t->type;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->file_offset = g->f.data_offset + t->offset;
    out->nbytes = t->nbytes;
    out->data = t->data;
    return SB_OK;
}

SB_API sb_status sb_gguf_find_tensor(const sb_gguf *g, const char *name, int64_t *index) {
    if (!g || !name || !index) return sb_fail(SB_ERR_INVALID_ARG, "sb_gguf_find_tensor: NULL argument");
    const gguf_tensor *t = gguf_find_tensor(&g->f, name);
    if (!t) return sb_fail(SB_ERR_NOT_FOUND, "tensor \"%s\" not found", name);
    *index = t - g->f.tensors;
    return SB_OK;
}
