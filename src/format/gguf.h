/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * format/gguf.h — GGUF v2/v3: a pure, fully validating parser over a byte range, the read-only
 * mmap open, metadata/tensor lookup, and typed getters (formats.md §1).
 * Layer 0 (format; depends on base and quant's type table for sizes).
 * Invariants: after gguf_parse returns SB_OK every key, value, string, array and tensor range lies
 * inside [data, data+size), every tensor's data is aligned, inside the file and disjoint from the
 * others; nothing is read from the bytes later without those guarantees. Strings point into the
 * bytes (not NUL-terminated); keys and tensor names are also kept as NUL-terminated copies.
 * Allocation is bounded by the file size (every entry costs >= 8 file bytes) and by the budgets.
 * Non-goals: writing (gguf_write.h), byte-swapped files (rejected), model semantics.
 */
#ifndef SB_FORMAT_GGUF_H
#define SB_FORMAT_GGUF_H

#include "sonicboom.h"
#include "base/hash.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAX_NAME 64                       /* tensor names are < 64 bytes (GGML_MAX_NAME) */
#define GGUF_MAX_ALIGNMENT (1u << 20)          /* general.alignment <= 1 MiB */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_VALUE_BYTES (64ull << 20)     /* one string or array: <= 64 MiB */
#define GGUF_MAX_META_BYTES (1ull << 30)       /* all metadata together: <= 1 GiB */

typedef struct gguf_kv {
    const char *key;        /* NUL-terminated copy */
    sb_strview key_raw;     /* the key bytes in the file */
    uint32_t type;          /* sb_gguf_type */
    uint32_t elem_type;     /* element type for arrays, == type for scalars */
    uint64_t count;         /* array length; 1 for scalars */
    uint64_t file_offset;   /* where the value starts in the file */
    const uint8_t *data;    /* the value bytes (scalars and numeric arrays: packed LE elements) */
    sb_strview *strs;       /* STRING scalars and string arrays: each element's bytes */
} gguf_kv;

typedef struct gguf_tensor {
    const char *name;       /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[4];          /* unused dims are 1 */
    int type;               /* sb_type */
    uint64_t offset;        /* relative to the data section */
    uint64_t nbytes;
    uint64_t info_offset;   /* where this tensor's info record starts in the file (for messages) */
    const uint8_t *data;    /* data + data_offset + offset */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *bytes;   /* the whole file */
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    int64_t n_kv, n_tensors;
    gguf_kv *kvs;
    gguf_tensor *tensors;
    uint64_t data_offset;   /* absolute offset of the data section */
    /* lookup indexes */
    sb_strview *key_views, *tensor_views;
    sb_strset key_set, tensor_set;
    /* owned memory */
    char *names;            /* all NUL-terminated key and tensor-name copies */
    void *map;              /* mmap base (or the heap copy with read_into_memory) from a path, else NULL */
    size_t map_size;
    int fd;                 /* the open file when has_fd (gguf_check_size re-checks its size) */
    bool has_fd;
    bool heap;              /* map is a heap copy (free), not a mapping (munmap) */
} gguf_file;

/* Parse and validate size bytes at data into *out (which the caller zero-initialises or not:
 * it is overwritten). The bytes are borrowed, not copied. On failure *out holds nothing to free
 * and the status is one of the SB_ERR_FORMAT_* codes (or SB_ERR_OOM), with a message naming the
 * field, its file offset and the values. */
sb_status gguf_parse(const uint8_t *data, uint64_t size, gguf_file *out);

/* mmap `path` read-only and parse it. SB_ERR_IO for open/stat/mmap failures, and at once for
 * anything that is not a regular file (a FIFO or device is never waited on). The parse runs under
 * a SIGBUS guard: a file truncated after it was opened gives SB_ERR_IO, not a crash. The file stays
 * open (has_fd) until gguf_close, for gguf_check_size. */
sb_status gguf_open(const char *path, gguf_file *out);

/* gguf_open, but with read_into_memory the file is read (pread) into an aligned heap copy instead
 * of mapped: later changes to the file cannot reach it (no SIGBUS possible after loading). */
sb_status gguf_open_ex(const char *path, bool read_into_memory, gguf_file *out);

/* SB_ERR_IO "PATH: file changed size since it was loaded (A -> B bytes)" when a mapped file has
 * shrunk, so using its mapping could fault. SB_OK for heap copies and in-memory files. */
sb_status gguf_check_size(const gguf_file *f, const char *path);

/* Release what gguf_parse/gguf_open made (unmaps). Safe on a zeroed struct. */
void gguf_close(gguf_file *f);

/* Lookups: NULL when absent. */
const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed scalar getters. SB_ERR_NOT_FOUND when the key is absent (message names the key);
 * SB_ERR_FORMAT_KEY_TYPE when it has an incompatible type; SB_ERR_RANGE when the value does not
 * fit. Integer getters accept every integer type (and BOOL); float getters accept floats and
 * integers. */
sb_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
sb_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
sb_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
sb_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
sb_status gguf_get_str(const gguf_file *f, const char *key, sb_strview *out);

/* The same with a default when the key is absent (type errors still fail). */
sb_status gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t def, uint32_t *out);
sb_status gguf_get_f32_or(const gguf_file *f, const char *key, float def, float *out);
sb_status gguf_get_bool_or(const gguf_file *f, const char *key, bool def, bool *out);

/* Element access on one kv (scalar: j must be 0). Same conversion rules as above;
 * SB_ERR_RANGE for j >= count. */
sb_status gguf_kv_i64(const gguf_kv *kv, uint64_t j, int64_t *out);
sb_status gguf_kv_u64(const gguf_kv *kv, uint64_t j, uint64_t *out);
sb_status gguf_kv_f64(const gguf_kv *kv, uint64_t j, double *out);
sb_status gguf_kv_str(const gguf_kv *kv, uint64_t j, sb_strview *out);

/* Size in bytes of one element of a scalar type (0 for STRING/ARRAY/unknown). */
size_t gguf_type_size(uint32_t type);
const char *gguf_type_name(uint32_t type);

#endif
