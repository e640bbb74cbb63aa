/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * api/api_tensor.c — public tensors (sonicboom.h, "tensors, graphs and programs"): host buffers
 * shared by views through a reference count, weights of a loaded model viewed zero-copy in their
 * file type, reading back as f32. A CUDA tensor is a host buffer tagged for the shared CUDA backend
 * (api_device.c), which keeps its device copy coherent with it: a read downloads a newer device
 * copy first, freeing the memory drops the device copy.
 * Layer 3 (api). Reference counts are atomic, so views of one buffer may be freed from different
 * threads (a garbage collector's finalizer thread); each handle is used by one thread at a time.
 */
#include "api/api_tensor.h"
#include "api/api_internal.h"
#include "base/status.h"
#include "ops/ops_ref.h"
#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

SB_API int sb_abi_level(void) { return SB_ABI_LEVEL; }

api_buf *api_buf_ref(api_buf *b) {
    atomic_fetch_add(&b->refs, 1);
    return b;
}

void api_buf_unref(api_buf *b) {
    if (!b || atomic_fetch_sub(&b->refs, 1) > 1) return;
    api_buf_dev_drop(b); /* before the address can be reused */
    if (b->page_locked) api_dev_host_free(b->data);
    else if (b->owned) free(b->data);
    free(b);
}

sb_status api_tensor_wrap(api_buf *buf, int type, int n_dims, const int64_t ne[4], bool is_view, const char *name, sb_tensor **out) {
    sb_tensor *t = (sb_tensor *)calloc(1, sizeof *t);
    if (!t) return sb_fail(SB_ERR_OOM, "sb_tensor handle");
    t->buf = api_buf_ref(buf);
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, ne, sizeof t->ne);
    t->is_view = is_view;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    *out = t;
    return SB_OK;
}

bool api_dims_ok(const int64_t ne[4]) {
    int64_t n = 1;
    for (int i = 0; i < 4; i++)
        if (ne[i] < 1 || __builtin_mul_overflow(n, ne[i], &n) || n > ((int64_t)1 << 48)) return false;
    return true;
}

/* bytes of a tensor of type and shape (0: a bad type/ne[0]) */
static uint64_t bytes_of(int type, const int64_t ne[4]) {
    ir_node n = ir_proto(IR_OP_WEIGHT);
    n.dtype = type;
    memcpy(n.ne, ne, sizeof n.ne);
    return ir_nbytes(&n);
}

/* type usable for a tensor: I32, or readable as f32 (F32, F16, BF16, block types with a dequantizer) */
static bool type_ok(int type) {
    return qk_valid(type) && (type == SB_TYPE_I32 || op_can_dequantize(type));
}

sb_status api_tensor_new(int device, int type, int n_dims, const int64_t ne[4], const void *data, sb_tensor **out) {
    const uint64_t nb = bytes_of(type, ne);
    api_buf *b = (api_buf *)calloc(1, sizeof *b);
    void *mem = b ? aligned_alloc(64, (size_t)((nb + 63) / 64 * 64)) : NULL;
    if (!mem) {
        free(b);
        return sb_fail(SB_ERR_OOM, "tensor of %llu bytes", (unsigned long long)nb);
    }
    if (data) memcpy(mem, data, (size_t)nb);
    else memset(mem, 0, (size_t)nb);
    b->data = mem, b->bytes = nb, b->owned = true; /* refs 0 until wrapped; no device copy yet */
    const sb_status st = api_tensor_wrap(b, type, n_dims, ne, false, NULL, out);
    if (st != SB_OK) api_buf_unref(api_buf_ref(b));
    else (*out)->device = device;
    return st;
}

sb_status api_tensor_new_page_locked(int type, int n_dims, const int64_t ne[4], sb_tensor **out) {
    const uint64_t nb = bytes_of(type, ne);
    void *mem = NULL;
    SB_TRY(api_dev_host_alloc((size_t)nb, &mem));
    if (!mem) return api_tensor_new(SB_DEVICE_CUDA, type, n_dims, ne, NULL, out);
    api_buf *b = (api_buf *)calloc(1, sizeof *b);
    if (!b) {
        api_dev_host_free(mem);
        return sb_fail(SB_ERR_OOM, "tensor handle");
    }
    memset(mem, 0, (size_t)nb);
    b->data = mem, b->bytes = nb, b->owned = true, b->page_locked = true;
    const sb_status st = api_tensor_wrap(b, type, n_dims, ne, false, NULL, out);
    if (st != SB_OK) api_buf_unref(api_buf_ref(b));
    else (*out)->device = SB_DEVICE_CUDA;
    return st;
}

SB_API sb_status sb_tensor_create(int device, int type, int n_dims, const int64_t *ne, const void *data, size_t size, sb_tensor **out) {
    if (!out || !ne) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: NULL %s", out ? "ne" : "out");
    *out = NULL;
    if (device != SB_DEVICE_CPU && device != SB_DEVICE_CUDA && device != SB_DEVICE_AUTO)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: device %d (SB_DEVICE_CPU, SB_DEVICE_CUDA or SB_DEVICE_AUTO)", device);
    if (n_dims < 1 || n_dims > 4) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: n_dims %d (1..4)", n_dims);
    if (!type_ok(type))
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: type %d (%s) cannot be a tensor (F32, F16, BF16, I32 or a block type with a dequantizer)",
                       type, sb_type_name(type) ? sb_type_name(type) : "unknown");
    int64_t d[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: ne[%d] = %lld", i, (long long)ne[i]);
        d[i] = ne[i];
    }
    char sh[96];
    if (!api_dims_ok(d)) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: %s has more than 2^48 elements", api_shape_str(sh, sizeof sh, type, d));
    if (d[0] % qk_get(type)->blck)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: ne[0] = %lld is not a multiple of %s's block of %lld", (long long)d[0],
                       qk_get(type)->name, (long long)qk_get(type)->blck);
    const uint64_t nb = bytes_of(type, d);
    if (!nb) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: %s is too large", api_shape_str(sh, sizeof sh, type, d));
    if (data && size != nb)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_create: %s needs %llu bytes of data, %zu given", api_shape_str(sh, sizeof sh, type, d),
                       (unsigned long long)nb, size);
    int dev;
    SB_TRY(api_dev_resolve("sb_tensor_create", device, &dev));
    const sb_status st = api_tensor_new(dev, type, n_dims, d, data, out);
    return st == SB_OK ? st : sb_fail_context(st, "sb_tensor_create");
}

SB_API sb_status sb_tensor_from_weight(const sb_model *m, const char *name, sb_tensor **out) {
    if (!m || !name || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_from_weight: NULL argument");
    *out = NULL;
    const gguf_tensor *gt = gguf_find_tensor(&m->m->file, name);
    if (!gt) return sb_fail(SB_ERR_NOT_FOUND, "sb_tensor_from_weight: the model has no tensor \"%s\"", name);
    if (strlen(name) >= IR_NAME_MAX) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_from_weight: name \"%s\" longer than %d bytes", name, IR_NAME_MAX - 1);
    if (!type_ok(gt->type))
        return sb_fail(SB_ERR_UNSUPPORTED, "sb_tensor_from_weight: \"%s\" has type %s, which this build cannot read", name, sb_type_name(gt->type));
    api_buf *b = (api_buf *)calloc(1, sizeof *b);
    if (!b) return sb_fail(SB_ERR_OOM, "sb_tensor_from_weight");
    b->data = (void *)gt->data, b->bytes = gt->nbytes, b->owned = false;
    const sb_status st = api_tensor_wrap(b, gt->type, (int)(gt->n_dims ? gt->n_dims : 1), gt->ne, true, name, out);
    if (st != SB_OK) api_buf_unref(api_buf_ref(b));
    return st;
}

SB_API sb_status sb_tensor_get_info(const sb_tensor *t, sb_tensor_info *out) {
    if (!t || !out) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->type = t->type;
    out->device = t->device;
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->nbytes = bytes_of(t->type, t->ne);
    out->is_view = t->is_view;
    return SB_OK;
}

SB_API sb_status sb_tensor_read_f32(const sb_tensor *t, float *buf, size_t cap, size_t *n_out) {
    if (!t || !n_out || (cap && !buf)) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_read_f32: NULL argument");
    const int64_t E = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t n = (size_t)(E * rows);
    *n_out = n;
    SB_TRY(api_buf_host_read(t->buf)); /* a cache a device run wrote: its device copy is the newer */
    const uint64_t rb = op_row_bytes(t->type, E);
    for (int64_t r = 0; r < rows && (size_t)(r * E) < cap; r++) {
        const uint8_t *src = (const uint8_t *)t->buf->data + (uint64_t)r * rb;
        const size_t room = cap - (size_t)(r * E);
        if (t->type == SB_TYPE_I32) {
            for (int64_t i = 0; i < E && (size_t)i < room; i++) buf[r * E + i] = (float)((const int32_t *)src)[i];
        } else if ((size_t)E <= room) {
            op_dequantize_row(buf + r * E, src, t->type, E);
        } else { /* the last partial row of a short buffer: through a temporary */
            float *tmp = (float *)malloc((size_t)E * sizeof *tmp);
            if (!tmp) return sb_fail(SB_ERR_OOM, "sb_tensor_read_f32: a row of %lld floats", (long long)E);
            op_dequantize_row(tmp, src, t->type, E);
            memcpy(buf + r * E, tmp, room * sizeof *tmp);
            free(tmp);
        }
    }
    if (cap < n) return sb_fail(SB_ERR_BUFFER_TOO_SMALL, "sb_tensor_read_f32: %zu floats needed, room for %zu", n, cap);
    return SB_OK;
}

SB_API sb_status sb_tensor_write(sb_tensor *t, const void *data, size_t size) {
    if (!t || (!data && size)) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_write: NULL argument");
    char sh[96];
    if (!t->buf->owned) return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_write: %s is a model's weight (read-only)", api_shape_str(sh, sizeof sh, t->type, t->ne));
    const uint64_t nb = bytes_of(t->type, t->ne);
    if (size != nb)
        return sb_fail(SB_ERR_INVALID_ARG, "sb_tensor_write: %s needs %llu bytes of data, %zu given", api_shape_str(sh, sizeof sh, t->type, t->ne),
                       (unsigned long long)nb, size);
    memcpy(t->buf->data, data, (size_t)nb);
    return api_buf_host_wrote(t->buf); /* a device copy takes the new bytes (and is no longer newer) */
}

SB_API void sb_tensor_free(sb_tensor *t) {
    if (!t) return;
    api_buf_unref(t->buf);
    free(t);
}
