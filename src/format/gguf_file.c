/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * format/gguf_file.c — the file layer over the pure parser: read-only mmap of a path, release, and
 * the typed metadata getters with their conversion rules (gguf.h).
 * Layer 0 (format). The mapping is PROT_READ + MAP_PRIVATE: weights are never written through it.
 * A file truncated after it is opened: the parse (the only touch of the mapping at open) runs under
 * fio_guarded, so it fails with SB_ERR_IO; later faults (weights read while decoding) are the
 * process's to handle (docs/runtime.md, "Model files that change while in use"), and
 * gguf_check_size lets callers refuse a shrunk file before using it.
 */
#include "format/gguf.h"
#include "base/file_io.h"
#include "base/status.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- open / close ----

typedef struct parse_job {
    const uint8_t *data;
    uint64_t size;
    gguf_file *out;
} parse_job;

static sb_status parse_job_run(void *ctx) {
    parse_job *j = (parse_job *)ctx;
    return gguf_parse(j->data, j->size, j->out);
}

/* The whole file in a heap buffer, 2 MiB-aligned from 2 MiB on, else 4 KiB (tensor data keeps its
 * in-file alignment). */
static sb_status read_copy(int fd, const char *path, size_t size, void **out) {
    void *p = NULL;
    /* huge-page aligned, and asked to be backed by huge pages (where the kernel does that on request):
     * a decode step reads every weight once, so 4 KiB pages cost a TLB miss every 4 KiB */
    const size_t huge = (size_t)2 << 20;
    if (posix_memalign(&p, size >= huge ? huge : 4096, size) != 0)
        return sb_fail(SB_ERR_OOM, "%s: %zu bytes to read the file into memory", path, size);
#ifdef MADV_HUGEPAGE
    if (size >= huge) (void)madvise(p, size / huge * huge, MADV_HUGEPAGE); /* advice only: a refusal changes no result */
#endif
    sb_status s = fio_pread_all(fd, path, p, size, 0);
    if (s != SB_OK) {
        free(p);
        return s;
    }
    *out = p;
    return SB_OK;
}

sb_status gguf_open_ex(const char *path, bool read_into_memory, gguf_file *out) {
    memset(out, 0, sizeof *out);
    if (!path) return sb_fail(SB_ERR_INVALID_ARG, "gguf_open: NULL path");
    int fd;
    struct stat st;
    SB_TRY(fio_open_regular(path, &fd, &st));
    void *map = NULL;
    size_t size = (size_t)st.st_size;
    if (size > 0 && read_into_memory) {
        sb_status s = read_copy(fd, path, size, &map);
        if (s != SB_OK) {
            close(fd);
            return s;
        }
    } else if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return sb_fail(e == ENOMEM ? SB_ERR_OOM : SB_ERR_IO, "%s: mmap of %zu bytes: %s", path, size, strerror(e));
        }
    }
    parse_job j = {(const uint8_t *)map, size, out};
    sb_status s = map && !read_into_memory ? fio_guarded(path, map, size, parse_job_run, &j) : parse_job_run(&j);
    if (s != SB_OK) {
        gguf_close(out); /* after a fault the parse was abandoned: free what it had built */
        if (s != SB_ERR_IO) sb_fail_context(s, "%s", path);
        if (map && read_into_memory) free(map);
        else if (map) munmap(map, size);
        close(fd);
        memset(out, 0, sizeof *out);
        return s;
    }
    out->map = map;
    out->map_size = size;
    out->heap = read_into_memory;
    out->fd = fd;
    out->has_fd = true;
    return SB_OK;
}

sb_status gguf_open(const char *path, gguf_file *out) { return gguf_open_ex(path, false, out); }

sb_status gguf_check_size(const gguf_file *f, const char *path) {
    if (!f->has_fd || f->heap) return SB_OK;
    struct stat st;
    if (fstat(f->fd, &st) != 0) return sb_fail(SB_ERR_IO, "%s: %s", path, strerror(errno));
    if ((uint64_t)st.st_size < (uint64_t)f->map_size)
        return sb_fail(SB_ERR_IO, "%s: file changed size since it was loaded (%zu -> %lld bytes)", path, f->map_size,
                       (long long)st.st_size);
    return SB_OK;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kvs)
        for (int64_t i = 0; i < f->n_kv; i++) free(f->kvs[i].strs);
    free(f->kvs);
    free(f->tensors);
    free(f->key_views);
    free(f->tensor_views);
    free(f->names);
    sb_strset_free(&f->key_set);
    sb_strset_free(&f->tensor_set);
    if (f->map && f->heap) free(f->map);
    else if (f->map) munmap(f->map, f->map_size);
    if (f->has_fd) close(f->fd);
    memset(f, 0, sizeof *f);
}

// ---- element access ----

static int is_int_type(uint32_t t) {
    return t <= SB_GGUF_INT32 || t == SB_GGUF_BOOL || t == SB_GGUF_UINT64 || t == SB_GGUF_INT64;
}

static sb_status type_error(const gguf_kv *kv, const char *want) {
    return sb_fail(SB_ERR_FORMAT_KEY_TYPE, "gguf: key \"%s\" has type %s%s%s, expected %s", kv->key,
                   gguf_type_name(kv->type), kv->type == SB_GGUF_ARRAY ? " of " : "",
                   kv->type == SB_GGUF_ARRAY ? gguf_type_name(kv->elem_type) : "", want);
}

static sb_status elem_check(const gguf_kv *kv, uint64_t j) {
    if (j >= kv->count)
        return sb_fail(SB_ERR_RANGE, "gguf: key \"%s\": element %llu out of range (%llu elements)", kv->key,
                       (unsigned long long)j, (unsigned long long)kv->count);
    return SB_OK;
}

/* Element j as a signed or unsigned 64-bit integer; *is_neg tells which half of the range. */
static void load_int(const gguf_kv *kv, uint64_t j, int64_t *s, uint64_t *u, int *is_neg) {
    const uint8_t *p = kv->data + j * gguf_type_size(kv->elem_type);
    int64_t sv = 0;
    uint64_t uv = 0;
    switch (kv->elem_type) {
    case SB_GGUF_UINT8: case SB_GGUF_BOOL: uv = p[0]; break;
    case SB_GGUF_INT8: sv = (int8_t)p[0]; break;
    case SB_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); uv = v; break; }
    case SB_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); sv = v; break; }
    case SB_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); uv = v; break; }
    case SB_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); sv = v; break; }
    case SB_GGUF_UINT64: memcpy(&uv, p, 8); break;
    case SB_GGUF_INT64: memcpy(&sv, p, 8); break;
    }
    int uns = kv->elem_type == SB_GGUF_UINT8 || kv->elem_type == SB_GGUF_BOOL || kv->elem_type == SB_GGUF_UINT16 ||
              kv->elem_type == SB_GGUF_UINT32 || kv->elem_type == SB_GGUF_UINT64;
    if (uns) {
        *is_neg = 0;
        *u = uv;
        *s = (int64_t)uv;
    } else {
        *is_neg = sv < 0;
        *s = sv;
        *u = (uint64_t)sv;
    }
}

sb_status gguf_kv_i64(const gguf_kv *kv, uint64_t j, int64_t *out) {
    SB_TRY(elem_check(kv, j));
    if (!is_int_type(kv->elem_type)) return type_error(kv, "an integer");
    int64_t s;
    uint64_t u;
    int neg;
    load_int(kv, j, &s, &u, &neg);
    if (!neg && u > (uint64_t)INT64_MAX)
        return sb_fail(SB_ERR_RANGE, "gguf: key \"%s\": %llu does not fit in i64", kv->key, (unsigned long long)u);
    *out = s;
    return SB_OK;
}

sb_status gguf_kv_u64(const gguf_kv *kv, uint64_t j, uint64_t *out) {
    SB_TRY(elem_check(kv, j));
    if (!is_int_type(kv->elem_type)) return type_error(kv, "an integer");
    int64_t s;
    uint64_t u;
    int neg;
    load_int(kv, j, &s, &u, &neg);
    if (neg) return sb_fail(SB_ERR_RANGE, "gguf: key \"%s\": %lld is negative", kv->key, (long long)s);
    *out = u;
    return SB_OK;
}

sb_status gguf_kv_f64(const gguf_kv *kv, uint64_t j, double *out) {
    SB_TRY(elem_check(kv, j));
    const uint8_t *p = kv->data + j * gguf_type_size(kv->elem_type);
    if (kv->elem_type == SB_GGUF_FLOAT32) {
        float v;
        memcpy(&v, p, 4);
        *out = v;
        return SB_OK;
    }
    if (kv->elem_type == SB_GGUF_FLOAT64) {
        memcpy(out, p, 8);
        return SB_OK;
    }
    if (!is_int_type(kv->elem_type) || kv->elem_type == SB_GGUF_BOOL) return type_error(kv, "a number");
    int64_t s;
    uint64_t u;
    int neg;
    load_int(kv, j, &s, &u, &neg);
    *out = neg ? (double)s : (double)u;
    return SB_OK;
}

sb_status gguf_kv_str(const gguf_kv *kv, uint64_t j, sb_strview *out) {
    SB_TRY(elem_check(kv, j));
    if (kv->elem_type != SB_GGUF_STRING) return type_error(kv, "str");
    *out = kv->strs[j];
    return SB_OK;
}

// ---- typed getters by key ----

static sb_status find(const gguf_file *f, const char *key, const gguf_kv **kv) {
    *kv = gguf_find(f, key);
    if (!*kv) return sb_fail(SB_ERR_NOT_FOUND, "gguf: key \"%s\" not found", key);
    if ((*kv)->type == SB_GGUF_ARRAY) return type_error(*kv, "a scalar");
    return SB_OK;
}

sb_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv;
    SB_TRY(find(f, key, &kv));
    return gguf_kv_i64(kv, 0, out);
}

sb_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    const gguf_kv *kv;
    uint64_t v = 0;
    SB_TRY(find(f, key, &kv));
    SB_TRY(gguf_kv_u64(kv, 0, &v));
    if (v > UINT32_MAX) return sb_fail(SB_ERR_RANGE, "gguf: key \"%s\" = %llu does not fit in u32", key, (unsigned long long)v);
    *out = (uint32_t)v;
    return SB_OK;
}

sb_status gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv;
    double v = 0;
    SB_TRY(find(f, key, &kv));
    SB_TRY(gguf_kv_f64(kv, 0, &v));
    *out = (float)v;
    return SB_OK;
}

sb_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv;
    SB_TRY(find(f, key, &kv));
    if (kv->type != SB_GGUF_BOOL) return type_error(kv, "bool");
    *out = kv->data[0] != 0;
    return SB_OK;
}

sb_status gguf_get_str(const gguf_file *f, const char *key, sb_strview *out) {
    const gguf_kv *kv;
    SB_TRY(find(f, key, &kv));
    return gguf_kv_str(kv, 0, out);
}

/* The *_or getters: the default when the key is absent, the typed getter's rules otherwise. */
#define GETTER_OR(name, type, getter)                                                    \
    sb_status name(const gguf_file *f, const char *key, type def, type *out) {            \
        if (!gguf_find(f, key)) {                                                         \
            *out = def;                                                                   \
            return SB_OK;                                                                 \
        }                                                                                 \
        return getter(f, key, out);                                                       \
    }
GETTER_OR(gguf_get_u32_or, uint32_t, gguf_get_u32)
GETTER_OR(gguf_get_f32_or, float, gguf_get_f32)
GETTER_OR(gguf_get_bool_or, bool, gguf_get_bool)
#undef GETTER_OR
