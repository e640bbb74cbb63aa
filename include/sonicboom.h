/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * sonicboom.h — the only public header of SonicBoom, a native LLM/tensor runtime.
 *
 * Contract (SQLite style): this header is the API. A symbol not declared here is not API.
 *  - Every fallible call returns sb_status; SB_OK is 0. Detail text for the last failure on the
 *    calling thread is in sb_last_error() (valid until the next failing call on that thread).
 *  - Handles are opaque pointers (sb_gguf *); destructors are *_free and accept NULL.
 *  - Out-params come last. Inputs are const. Nothing here prints: logging goes through the
 *    callback set with sb_log_set().
 *  - Enums are append-only; values never change meaning. Incompatible changes get *_v2 names.
 *  - Thread safety: unless a function says otherwise, distinct handles may be used from distinct
 *    threads concurrently; one handle must not be used from two threads at once. Read-only
 *    accessors of sb_gguf are safe to call concurrently on the same handle.
 */
#ifndef SONICBOOM_H
#define SONICBOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SB_BUILDING_LIBRARY)
#  define SB_API __attribute__((visibility("default")))
#else
#  define SB_API
#endif

/* ---- version ---- */

/* MAJOR*1000000 + MINOR*1000 + PATCH. Compare with sb_version_number() to detect a header/library
 * mismatch at run time. */
#define SB_VERSION_MAJOR 0
#define SB_VERSION_MINOR 1
#define SB_VERSION_PATCH 0
#define SB_VERSION_STRING "0.1.0"
#define SB_VERSION_NUMBER (SB_VERSION_MAJOR * 1000000 + SB_VERSION_MINOR * 1000 + SB_VERSION_PATCH)

SB_API int sb_version_number(void);
SB_API const char *sb_version_string(void);

/* ---- status ---- */

/* Status codes. Append-only. The detailed FORMAT codes (100..199) belong to the SB_ERR_FORMAT
 * family: sb_status_family() maps each of them to SB_ERR_FORMAT, so callers that only care about
 * "bad file" test one value. Likewise 200..299 refine SB_ERR_UNSUPPORTED / model binding errors
 * and 300..399 refine SB_ERR_INVALID_ARG for tokenizer/vocabulary data. */
typedef enum sb_status {
    SB_OK = 0,
    SB_ERR_INVALID_ARG = 1,   /* a NULL handle, a bad parameter value, a usage error */
    SB_ERR_IO = 2,            /* open/read/write/mmap/rename failed (errno text in sb_last_error) */
    SB_ERR_FORMAT = 3,        /* malformed input file (generic; see the family below) */
    SB_ERR_UNSUPPORTED = 4,   /* a valid input that this build cannot handle (type, arch, feature) */
    SB_ERR_OOM = 5,           /* host or device allocation failed (bytes in sb_last_error) */
    SB_ERR_DEVICE = 6,        /* CUDA/NVRTC/driver failure (their error text in sb_last_error) */
    SB_ERR_CONTEXT_FULL = 7,  /* the session's context would overflow (numbers in sb_last_error) */
    SB_ERR_CANCELLED = 8,     /* a callback asked to stop */
    SB_ERR_INTERNAL = 9,      /* a bug in SonicBoom: please report it */
    SB_ERR_NOT_FOUND = 10,    /* a key, tensor or name that was looked up does not exist */
    SB_ERR_RANGE = 11,        /* an index out of range, or a value that does not fit the requested type */
    SB_ERR_BUFFER_TOO_SMALL = 12, /* a caller buffer is too small; the needed size was returned */

    /* SB_ERR_FORMAT family: GGUF container checks, one code per check. */
    SB_ERR_FORMAT_TRUNCATED = 100,     /* the file ends inside a field */
    SB_ERR_FORMAT_MAGIC = 101,         /* not "GGUF" */
    SB_ERR_FORMAT_VERSION = 102,       /* version 0, 1 or > 3 */
    SB_ERR_FORMAT_ENDIAN = 103,        /* byte-swapped (big-endian) file */
    SB_ERR_FORMAT_COUNT = 104,         /* n_kv / n_tensors negative or larger than the bytes left allow */
    SB_ERR_FORMAT_STRING_LEN = 105,    /* a string length exceeds the bytes left or the 64 MiB budget */
    SB_ERR_FORMAT_KEY_EMPTY = 106,     /* a metadata key of length 0 */
    SB_ERR_FORMAT_KEY_DUPLICATE = 107, /* a metadata key that appears twice */
    SB_ERR_FORMAT_VALUE_TYPE = 108,    /* an unknown metadata value type id */
    SB_ERR_FORMAT_NESTED_ARRAY = 109,  /* an array of arrays */
    SB_ERR_FORMAT_ARRAY_LEN = 110,     /* an array count that exceeds the bytes left or the budget */
    SB_ERR_FORMAT_BOOL = 111,          /* a bool byte other than 0 or 1 */
    SB_ERR_FORMAT_ALIGNMENT = 112,     /* general.alignment 0, not a power of two, or > 1 MiB */
    SB_ERR_FORMAT_KEY_TYPE = 113,      /* a well-known key with the wrong value type */
    SB_ERR_FORMAT_BUDGET = 114,        /* total metadata exceeds the budget */
    SB_ERR_FORMAT_TENSOR_NAME = 115,   /* tensor name empty or >= 64 bytes */
    SB_ERR_FORMAT_TENSOR_DUPLICATE = 116, /* two tensors with the same name */
    SB_ERR_FORMAT_TENSOR_DIMS = 117,   /* n_dims > 4 */
    SB_ERR_FORMAT_TENSOR_SHAPE = 118,  /* a negative dimension */
    SB_ERR_FORMAT_TENSOR_OVERFLOW = 119, /* element count or byte size overflows 64 bits */
    SB_ERR_FORMAT_TENSOR_TYPE = 120,   /* unknown ggml type id */
    SB_ERR_FORMAT_TENSOR_REMOVED_TYPE = 121, /* a removed/deprecated type id (e.g. Q4_2, Q4_0_4_4) */
    SB_ERR_FORMAT_TENSOR_BLOCK = 122,  /* ne[0] not a multiple of the type's block size */
    SB_ERR_FORMAT_TENSOR_ALIGN = 123,  /* data offset not a multiple of general.alignment */
    SB_ERR_FORMAT_TENSOR_OVERLAP = 124, /* two tensors' data ranges overlap */
    SB_ERR_FORMAT_TENSOR_BOUNDS = 125, /* tensor data lies (partly) outside the file */
    SB_ERR_FORMAT_UNKNOWN_FILE = 126,  /* a reference/vector file with the wrong magic or layout */

    /* Model binding (refines SB_ERR_UNSUPPORTED / SB_ERR_FORMAT for model loading). */
    SB_ERR_MODEL_ARCH = 200,           /* unknown or unsupported general.architecture */
    SB_ERR_MODEL_TENSOR_MISSING = 201, /* a tensor the architecture needs is absent */
    SB_ERR_MODEL_TENSOR_SHAPE = 202,   /* a tensor has the wrong shape */
    SB_ERR_MODEL_TENSOR_TYPE = 203,    /* a tensor type this backend cannot run */
    SB_ERR_MODEL_HPARAM = 204,         /* a missing or out-of-range hyperparameter key */
    SB_ERR_MODEL_NAN = 205,            /* --check-tensors found NaN/Inf in a weight */

    /* Vocabulary / tokenizer data (refines SB_ERR_FORMAT for tokenizer metadata). */
    SB_ERR_VOCAB = 300,                /* inconsistent tokenizer metadata (key named in the text) */
    SB_ERR_VOCAB_UNSUPPORTED = 301,    /* unknown tokenizer.ggml.model or .pre */
    SB_ERR_TEXT_TOO_LONG = 302,        /* an input text too long to tokenize (> 2^31-1 bytes) */
} sb_status;

/* The name of a status ("SB_ERR_FORMAT_MAGIC"); never NULL, "SB_ERR_UNKNOWN" for unknown values. */
SB_API const char *sb_status_str(sb_status s);

/* The family of a status: SB_ERR_FORMAT for 100..199, SB_ERR_UNSUPPORTED for 200..299,
 * SB_ERR_FORMAT for 300..399, the status itself otherwise. */
SB_API sb_status sb_status_family(sb_status s);

/* The detail text of the last failure on the calling thread ("" if none). Thread-local storage
 * owned by the library; valid until the next failing call on this thread. */
SB_API const char *sb_last_error(void);

/* ---- logging ---- */

typedef enum sb_log_level {
    SB_LOG_ERROR = 0,
    SB_LOG_WARN = 1,
    SB_LOG_INFO = 2,
    SB_LOG_DEBUG = 3,
} sb_log_level;

typedef void (*sb_log_fn)(sb_log_level level, const char *msg, void *user);

/* Route library log messages to fn (NULL: discard them, the default). The library never writes to
 * stdout/stderr itself. Messages above max_level are not formatted. Thread-safe; the callback may be
 * called from any thread that calls into the library. */
SB_API void sb_log_set(sb_log_fn fn, void *user, sb_log_level max_level);

/* ---- tensor element types (ggml numbering, so files are interchangeable) ---- */

typedef enum sb_type {
    SB_TYPE_F32 = 0, SB_TYPE_F16 = 1, SB_TYPE_Q4_0 = 2, SB_TYPE_Q4_1 = 3,
    /* 4, 5: Q4_2, Q4_3 (removed) */
    SB_TYPE_Q5_0 = 6, SB_TYPE_Q5_1 = 7, SB_TYPE_Q8_0 = 8, SB_TYPE_Q8_1 = 9,
    SB_TYPE_Q2_K = 10, SB_TYPE_Q3_K = 11, SB_TYPE_Q4_K = 12, SB_TYPE_Q5_K = 13,
    SB_TYPE_Q6_K = 14, SB_TYPE_Q8_K = 15, SB_TYPE_IQ2_XXS = 16, SB_TYPE_IQ2_XS = 17,
    SB_TYPE_IQ3_XXS = 18, SB_TYPE_IQ1_S = 19, SB_TYPE_IQ4_NL = 20, SB_TYPE_IQ3_S = 21,
    SB_TYPE_IQ2_S = 22, SB_TYPE_IQ4_XS = 23, SB_TYPE_I8 = 24, SB_TYPE_I16 = 25,
    SB_TYPE_I32 = 26, SB_TYPE_I64 = 27, SB_TYPE_F64 = 28, SB_TYPE_IQ1_M = 29,
    SB_TYPE_BF16 = 30,
    /* 31..33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 (removed) */
    SB_TYPE_TQ1_0 = 34, SB_TYPE_TQ2_0 = 35,
    /* 36..38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 (removed) */
    SB_TYPE_MXFP4 = 39, SB_TYPE_NVFP4 = 40, SB_TYPE_Q1_0 = 41, SB_TYPE_Q2_0 = 42,
    SB_TYPE_COUNT = 43
} sb_type;

/* Name of a type ("Q4_K"), or NULL for an id that is out of range or removed. */
SB_API const char *sb_type_name(int type);

/* Block size (elements) and bytes per block of a type. SB_ERR_RANGE for unknown/removed ids. */
SB_API sb_status sb_type_size(int type, int64_t *block_elems, int64_t *block_bytes);

/* ---- GGUF inspection ---- */

typedef struct sb_gguf sb_gguf;

/* Metadata value types (GGUF numbering). */
typedef enum sb_gguf_type {
    SB_GGUF_UINT8 = 0, SB_GGUF_INT8 = 1, SB_GGUF_UINT16 = 2, SB_GGUF_INT16 = 3,
    SB_GGUF_UINT32 = 4, SB_GGUF_INT32 = 5, SB_GGUF_FLOAT32 = 6, SB_GGUF_BOOL = 7,
    SB_GGUF_STRING = 8, SB_GGUF_ARRAY = 9, SB_GGUF_UINT64 = 10, SB_GGUF_INT64 = 11,
    SB_GGUF_FLOAT64 = 12
} sb_gguf_type;

/* Name of a metadata value type ("u32", "str", "arr", ...), or NULL for unknown ids. */
SB_API const char *sb_gguf_type_name(int type);

typedef struct sb_gguf_info {
    uint32_t version;       /* 2 or 3 */
    uint32_t alignment;     /* general.alignment, default 32 */
    int64_t n_kv;           /* metadata pairs */
    int64_t n_tensors;      /* tensor infos */
    uint64_t data_offset;   /* file offset of the tensor data section */
    uint64_t file_size;     /* bytes in the file */
} sb_gguf_info;

typedef struct sb_gguf_tensor {
    const char *name;       /* NUL-terminated, owned by the sb_gguf handle */
    int type;               /* sb_type */
    uint32_t n_dims;        /* 1..4 as stored (0 is read as 1) */
    int64_t ne[4];          /* ne[0] = row length (innermost); unused dims are 1 */
    uint64_t offset;        /* offset in the data section */
    uint64_t file_offset;   /* absolute offset in the file */
    uint64_t nbytes;        /* bytes of data */
    const void *data;       /* read-only view of the bytes (mapped); valid while the handle lives */
} sb_gguf_tensor;

/* Map a GGUF file read-only and validate all of it (header, metadata, tensor table, data bounds).
 * On success *out is a handle to free with sb_gguf_free. Errors: SB_ERR_INVALID_ARG (NULL args),
 * SB_ERR_IO (open/stat/mmap; errno text), SB_ERR_OOM, any SB_ERR_FORMAT_* (the check, the field,
 * the file offset and the values are in sb_last_error). */
SB_API sb_status sb_gguf_open(const char *path, sb_gguf **out);

/* Validate a GGUF image already in memory (size bytes at data). The bytes are not copied: they must
 * stay valid and unchanged until sb_gguf_free. Same errors as sb_gguf_open, minus SB_ERR_IO. */
SB_API sb_status sb_gguf_open_memory(const void *data, size_t size, sb_gguf **out);

/* Release a handle (unmaps the file). NULL is a no-op. */
SB_API void sb_gguf_free(sb_gguf *g);

/* Header facts. SB_ERR_INVALID_ARG for NULL args. */
SB_API sb_status sb_gguf_get_info(const sb_gguf *g, sb_gguf_info *out);

/* Index of the metadata key `key` (exact byte match), or SB_ERR_NOT_FOUND. */
SB_API sb_status sb_gguf_find_key(const sb_gguf *g, const char *key, int64_t *index);

/* Key i: its text (NUL-terminated copy owned by g; a key holding a NUL byte shows up to it), its
 * value type, for arrays the element type and count (count 1 and elem_type = type for scalars).
 * Any out-pointer may be NULL. SB_ERR_RANGE if i is out of range. */
SB_API sb_status sb_gguf_get_kv(const sb_gguf *g, int64_t i, const char **key, sb_gguf_type *type,
                                sb_gguf_type *elem_type, uint64_t *count);

/* Value of key i, or element j of array key i (j is ignored for scalars). Integer getters accept any
 * integer or bool type and fail with SB_ERR_RANGE when the value does not fit; the float getter
 * accepts floats and integers; the string getter returns a pointer into the file (not NUL-terminated)
 * and its length. A mismatched type gives SB_ERR_FORMAT_KEY_TYPE; j out of range SB_ERR_RANGE. */
SB_API sb_status sb_gguf_get_int(const sb_gguf *g, int64_t i, uint64_t j, int64_t *out);
SB_API sb_status sb_gguf_get_uint(const sb_gguf *g, int64_t i, uint64_t j, uint64_t *out);
SB_API sb_status sb_gguf_get_float(const sb_gguf *g, int64_t i, uint64_t j, double *out);
SB_API sb_status sb_gguf_get_str(const sb_gguf *g, int64_t i, uint64_t j, const char **str, size_t *len);

/* Tensor i's description (pointers owned by g). SB_ERR_RANGE if i is out of range. */
SB_API sb_status sb_gguf_get_tensor(const sb_gguf *g, int64_t i, sb_gguf_tensor *out);

/* Index of the tensor named `name`, or SB_ERR_NOT_FOUND. */
SB_API sb_status sb_gguf_find_tensor(const sb_gguf *g, const char *name, int64_t *index);

#ifdef __cplusplus
}
#endif
#endif /* SONICBOOM_H */
