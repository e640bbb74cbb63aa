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
    SB_ERR_NUMERIC = 13,      /* a computation produced NaN/Inf (logits of a forward pass, named in sb_last_error) */

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
    SB_ERR_FORMAT_KEY_NUL = 127,       /* a metadata key holding a NUL byte (ambiguous as a C string) */

    /* Model binding (refines SB_ERR_UNSUPPORTED / SB_ERR_FORMAT for model loading). */
    SB_ERR_MODEL_ARCH = 200,           /* unknown or unsupported general.architecture */
    SB_ERR_MODEL_TENSOR_MISSING = 201, /* a tensor the architecture needs is absent */
    SB_ERR_MODEL_TENSOR_SHAPE = 202,   /* a tensor has the wrong shape */
    SB_ERR_MODEL_TENSOR_TYPE = 203,    /* a tensor type this backend cannot run */
    SB_ERR_MODEL_HPARAM = 204,         /* a missing or out-of-range hyperparameter key */
    SB_ERR_MODEL_NAN = 205,            /* NaN/Inf in a weight: 1-D tensors always, all with check_tensors */
    SB_ERR_MODEL_TENSOR_EXTRA = 206,   /* a tensor the architecture's graph does not use (unknown structure) */

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

/* ---- backends ---- */

typedef struct sb_backend_info {
    int cuda_compiled;        /* 1 if this library was built with the CUDA backend */
    int cuda_devices;         /* usable CUDA devices now (0 without GPU or driver) */
    char cuda_device_name[128]; /* device 0's name, "" if none */
    int cuda_cc;              /* device 0's compute capability × 10 (90 for sm_90), 0 if none */
    char cuda_error[256];     /* why no device is usable, "" otherwise */
    char cpu_isa[32];         /* the CPU kernel set chosen at run time: "avx512", "avx2" or "scalar" */
} sb_backend_info;

/* What this build and this machine offer. Never fails on a machine without GPU or driver: then
 * cuda_devices is 0 and cuda_error says why. SB_ERR_INVALID_ARG for NULL. */
SB_API sb_status sb_backend_get_info(sb_backend_info *out);

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

/* ---- models ---- */

/* A loaded model: weights mapped read-only from its GGUF file, hyperparameters, tokenizer. Immutable
 * after loading; any number of sessions on any threads may share one model. Architectures:
 * qwen2, qwen3, llama, gemma3. */
typedef struct sb_model sb_model;
typedef struct sb_vocab sb_vocab; /* described under "vocabulary / tokenizer" below */

typedef struct sb_model_params {
    int check_tensors;      /* 1: scan every weight for NaN/Inf at load (SB_ERR_MODEL_NAN); 1-D ones always are */
    /* Progress of the load (may be NULL), an sb_progress_fn (see "model file tools" below):
     * `done` of `total` bytes of tensor data read, `what` the tensor just read; a last call has
     * done == total. With it set the load reads every page of the tensor data once (what the first
     * token would otherwise fault in), so it measures the slow part of loading a big file. Return
     * nonzero to cancel: sb_model_load then fails with SB_ERR_CANCELLED. Called on the calling
     * thread. (These two fields took the place of reserved ints; the size is unchanged on 64-bit
     * platforms, and zeroed params mean no callback, as before.) */
    int (*progress)(void *user, uint64_t done, uint64_t total, const char *what);
    void *progress_user;
    int no_mmap;            /* 1: read the file into memory instead of mapping it (llama.cpp's
                               --no-mmap): the model then survives its file being truncated or
                               rewritten; 0 (default): map it (see sb_model_load) */
    int reserved[9];        /* zero; room for later fields without changing the size */
} sb_model_params;

typedef struct sb_model_info {
    char arch[32];          /* "qwen2" */
    char name[128];         /* general.name, "" if absent */
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    uint64_t n_params;      /* parameters of the weights the forward pass reads */
    uint64_t weight_bytes;  /* bytes of those weights: what one decode step must read (tables it only
                               gathers rows of, like gemma4's per-layer embeddings, not counted) */
} sb_model_info;

/* Defaults: no tensor scan. */
SB_API void sb_model_default_params(sb_model_params *p);

/* Load a model (p may be NULL for defaults). Errors: SB_ERR_INVALID_ARG, SB_ERR_IO, SB_ERR_OOM, any
 * SB_ERR_FORMAT_* (bad file), SB_ERR_MODEL_ARCH (unknown general.architecture, named),
 * SB_ERR_MODEL_HPARAM (missing/out-of-range key, or one that disagrees with the tensors, named),
 * SB_ERR_MODEL_TENSOR_MISSING/_SHAPE/_TYPE (the tensor, expected and actual shape or type named;
 * also a vocabulary whose size differs from the token_embd rows), SB_ERR_MODEL_TENSOR_EXTRA (a tensor
 * the architecture does not read), SB_ERR_UNSUPPORTED (MoE, multi-token prediction, non-causal
 * attention: key or tensor named), SB_ERR_MODEL_NAN (NaN/Inf in a 1-D weight always, in any weight
 * with check_tensors), SB_ERR_VOCAB*,
 * SB_ERR_CANCELLED (the progress callback asked to stop; nothing is left loaded). See docs/runtime.md.
 * A mapped file (the default) must not shrink while the model is in use: loading reads it under a
 * SIGBUS guard installed for that call only (a file truncated while loading: SB_ERR_IO "file
 * changed size while loading"), sessions refuse a file that shrank (SB_ERR_IO) when created and
 * before each evaluation, but a truncation in the middle of an evaluation raises SIGBUS in the
 * caller's process: the library installs no lasting signal handler, so a program that must survive
 * that either loads with no_mmap or handles SIGBUS itself (`sb` prints one line and exits 1). */
SB_API sb_status sb_model_load(const char *path, const sb_model_params *p, sb_model **out);

/* Release a model. Every session created on it must be freed first. NULL is a no-op. */
SB_API void sb_model_free(sb_model *m);

SB_API sb_status sb_model_get_info(const sb_model *m, sb_model_info *out);

/* Bytes of KV cache one position costs: K and V rows of every layer that owns a cache (Gemma 4's
 * shared-KV layers own none; its layers differ in width) at kv_type (SB_TYPE_F32 or SB_TYPE_F16).
 * 0 for a NULL model or another type. A session of n_ctx positions allocates n_ctx times this,
 * less what sliding-window rings save (sb_session_params.swa_full; sb_session_kv_bytes). */
SB_API uint64_t sb_model_kv_bytes_per_token(const sb_model *m, int kv_type);

/* The model's vocabulary, borrowed: valid while the model lives; sb_vocab_free on it is a no-op. */
SB_API const sb_vocab *sb_model_get_vocab(const sb_model *m);

/* ---- sessions ---- */

/* One inference stream: KV cache, cached plans, the last logits. Use from one thread at a time. */
typedef struct sb_session sb_session;

typedef struct sb_session_params {
    int64_t n_ctx;          /* KV positions; 0 = min(model context, 4096) */
    int kv_type;            /* SB_TYPE_F32 (default) or SB_TYPE_F16 */
    int n_threads;          /* 0 = all cores (negative: SB_ERR_INVALID_ARG) */
    int64_t n_batch;        /* largest prefill chunk; 0 = 512 */
    int device;             /* SB_DEVICE_CPU (0, default), SB_DEVICE_CUDA (GPU 0; SB_ERR_DEVICE without one) or
                             * SB_DEVICE_AUTO (GPU 0 where it can run the model, else the CPU: sb_session_device) */
    int allow_ctx_extend;   /* 1: n_ctx may exceed the model's trained context length (a SB_LOG_WARN says so);
                             * 0: such an n_ctx is SB_ERR_INVALID_ARG */
    /* CUDA sessions only (ignored on the CPU); 0 is the default for each, other values outside the
     * ones listed are SB_ERR_INVALID_ARG. These took the place of reserved ints: the size is unchanged. */
    int cuda_graphs;        /* 1 on (default), -1 off: decode steps (and repeated prefill shapes) captured as CUDA Graphs */
    int codegen;            /* 1 on (default): generated kernels where autotuning finds them faster; -1 off: hand-written only */
    int act_type;           /* activations of K-quant weights: SB_TYPE_Q8_K (default: rounded as llama.cpp's CPU rounds
                             * them, so the logits match its CPU) or SB_TYPE_Q8_1 (as llama.cpp's CUDA backend) */
    int swa_full;           /* models with sliding-window layers (gemma3, gemma4): 0 (default) = a session (CPU or
                             * CUDA) keeps those layers' KV in rings of window + n_batch positions, so a long context
                             * costs the full-attention layers' KV only (same logits); 1 = keep every position
                             * (llama.cpp's --swa-full). A prefix cut deeper than the rings hold is recomputed. Any
                             * other value: SB_ERR_INVALID_ARG. */
    int reserved[6];
} sb_session_params;

/* Values of sb_session_params.device. SB_DEVICE_AUTO (what `sb run` / `sb bench` use unless told
 * otherwise) takes CUDA GPU 0 when a device is usable, its free memory holds the weights and the KV
 * cache (with 256 MiB to spare), and the CUDA backend runs every op and weight type of the model
 * (checked at session creation by building the decode plan); otherwise the CPU, the reason logged at
 * SB_LOG_INFO. Decided once, at sb_session_create. */
enum { SB_DEVICE_CPU = 0, SB_DEVICE_CUDA = 1, SB_DEVICE_AUTO = 2 };

typedef struct sb_session_stats {
    int64_t n_prefill_tokens, n_decode_tokens, n_reused_tokens;
    double prefill_seconds, decode_seconds;
    double prefill_tok_s, decode_tok_s;
    double decode_gb_s;     /* weight bytes read per second while decoding */
    int64_t n_plans_built;
} sb_session_stats;

SB_API void sb_session_default_params(sb_session_params *p);

/* Where a session runs: SB_DEVICE_CPU or SB_DEVICE_CUDA (SB_DEVICE_AUTO resolved); -1 for NULL. */
SB_API int sb_session_device(const sb_session *s);

/* Errors: SB_ERR_INVALID_ARG (bad params, named; n_ctx above the model's trained context length
 * without allow_ctx_extend), SB_ERR_OOM (bytes named: host memory, or with
 * SB_DEVICE_CUDA a GPU whose free memory cannot hold the weights and the KV cache — checked here, so
 * the first prefill does not fail on it), SB_ERR_DEVICE (SB_DEVICE_CUDA without a usable GPU). */
SB_API sb_status sb_session_create(sb_model *m, const sb_session_params *p, sb_session **out);
SB_API void sb_session_free(sb_session *s);

/* Evaluate a prompt, reusing the longest common prefix of the tokens already in the cache: only
 * the new suffix is computed (at least the last token); on a mismatch the cache is cut back to the
 * common prefix. *n_reused (may be NULL) receives the reused count. Afterwards the logits of the
 * last prompt token are available. Errors: SB_ERR_CONTEXT_FULL (counts named; nothing evaluated),
 * SB_ERR_RANGE (a token outside the vocabulary), SB_ERR_NUMERIC (the pass produced a NaN/Inf logit:
 * position and token named), SB_ERR_INVALID_ARG, SB_ERR_OOM. */
SB_API sb_status sb_session_prefill(sb_session *s, const int32_t *tokens, size_t n, int64_t *n_reused);

/* Append one token at the next position. Same errors as prefill. */
SB_API sb_status sb_session_decode(sb_session *s, int32_t token);

/* Append n tokens at the next positions and write the logits of every one of them to logits
 * (n × n_vocab floats, row i = after token i). For evaluation tools (perplexity, reference logits). */
SB_API sb_status sb_session_eval_all(sb_session *s, const int32_t *tokens, size_t n, float *logits);

/* The logits after the last evaluated token (borrowed, valid until the next evaluation) and the
 * vocabulary size. SB_ERR_INVALID_ARG before any evaluation. */
SB_API sb_status sb_session_get_logits(const sb_session *s, const float **logits, int64_t *n_vocab);

/* Cached positions and the context length. */
SB_API sb_status sb_session_get_state(const sb_session *s, int64_t *n_cached, int64_t *n_ctx);

/* Bytes of KV cache the session holds, on the host or the device (0 for NULL). */
SB_API uint64_t sb_session_kv_bytes(const sb_session *s);

/* Forget cached positions >= n. When sliding-window rings (swa_full) no longer hold the window
 * before n, positions [0, n) are evaluated again from the cached tokens: errors as
 * sb_session_prefill, after which the cache is empty. */
SB_API sb_status sb_session_truncate(sb_session *s, int64_t n);

SB_API sb_status sb_session_get_stats(const sb_session *s, sb_session_stats *out);
SB_API sb_status sb_session_reset_stats(sb_session *s);

/* ---- sampling ---- */

/* llama.cpp's chain and defaults: penalties → top-k → top-p → min-p → temperature → seeded draw;
 * temp <= 0 is greedy. -inf logits are never chosen; a NaN/+Inf logit is an error. temp, top_p and
 * min_p must be finite (sb_sampler_create: SB_ERR_INVALID_ARG). */
typedef struct sb_sampler sb_sampler;

typedef struct sb_sampler_params {
    float temp;             /* 0.8 */
    int32_t top_k;          /* 40 (<= 0 off) */
    float top_p;            /* 0.95 (>= 1 off) */
    float min_p;            /* 0.05 (<= 0 off) */
    float repeat_penalty;   /* 1.0 (off) */
    float presence_penalty; /* 0 */
    float frequency_penalty;/* 0 */
    int32_t penalty_last_n; /* 64 */
    uint64_t seed;          /* same seed, same tokens */
    int reserved[8];
} sb_sampler_params;

SB_API void sb_sampler_default_params(sb_sampler_params *p);
/* Errors: SB_ERR_INVALID_ARG (a NaN or out-of-range parameter, named), SB_ERR_OOM. */
SB_API sb_status sb_sampler_create(const sb_sampler_params *p, int64_t n_vocab, sb_sampler **out);
SB_API void sb_sampler_free(sb_sampler *smp);
/* Pick a token from n_vocab logits. SB_ERR_NUMERIC when a logit is NaN or +Inf (its index named;
 * nothing drawn), SB_ERR_RANGE when every logit is -inf. */
SB_API sb_status sb_sampler_sample(sb_sampler *smp, const float *logits, int32_t *token);
/* Add a token to the penalty history. */
SB_API sb_status sb_sampler_accept(sb_sampler *smp, int32_t token);
/* Clear the history and the logprob log, and re-seed (the logit bias and logprobs setting stay). */
SB_API sb_status sb_sampler_reset(sb_sampler *smp);

/* OpenAI's logit_bias: from the next draw on, bias[i] is added to the logit of tokens[i] before the
 * chain (before penalties); -INFINITY bans the token. Replaces the previous set; n = 0 clears it.
 * Errors (nothing changed): SB_ERR_INVALID_ARG for a token outside [0, n_vocab), a token given
 * twice, a NaN or +Inf bias. A logit that the bias pushes to +Inf makes the draw SB_ERR_NUMERIC. */
SB_API sb_status sb_sampler_set_logit_bias(sb_sampler *smp, const int32_t *tokens, const float *bias, size_t n);

/* OpenAI's logprobs / top_logprobs. Once enabled, every successful sb_sampler_sample (also those
 * inside sb_generate) appends one entry to the sampler's log: the drawn token's log-probability and
 * the top_k most likely tokens with theirs (most likely first, ties by lower id; tokens at -inf
 * are not listed, so fewer may come). The distribution is log-softmax(logits + logit bias),
 * computed in double: the model's own, with the caller's bias, before penalties, top-k/top-p/min-p
 * and temperature (so it does not depend on the sampling settings; ignore_eos counts as a bias).
 * top_k in [0, SB_MAX_TOP_LOGPROBS]; -1 (the default) turns the log off. Clears the log. */
#define SB_MAX_TOP_LOGPROBS 20
typedef struct sb_token_logprob {
    int32_t token;
    float logprob;          /* natural log of the probability, <= 0 */
} sb_token_logprob;
SB_API sb_status sb_sampler_set_logprobs(sb_sampler *smp, int32_t top_k);
/* Entries in the log (0 for NULL or when logging is off). */
SB_API size_t sb_sampler_n_logprobs(const sb_sampler *smp);
/* Entry i (0 = the first draw since the log was cleared): *chosen, then min(cap, available)
 * alternatives into top[] and their count into *n_top (top may be NULL when cap is 0).
 * SB_ERR_RANGE when i >= sb_sampler_n_logprobs (outputs untouched). */
SB_API sb_status sb_sampler_get_logprob(const sb_sampler *smp, size_t i, sb_token_logprob *chosen, sb_token_logprob *top,
                                        size_t cap, size_t *n_top);

/* ---- generation ---- */

/* Called with each new piece of text (whole UTF-8 characters) and the token that completed it
 * (-1 for the final flush). Return nonzero to stop: sb_generate then returns SB_ERR_CANCELLED. */
typedef int (*sb_text_fn)(void *user, const char *text, size_t len, int32_t token);

typedef enum sb_stop_reason { SB_STOP_LENGTH = 0, SB_STOP_EOG = 1, SB_STOP_STRING = 2, SB_STOP_CONTEXT = 3 } sb_stop_reason;

typedef struct sb_generate_params {
    int64_t n_predict;          /* max new tokens; < 0 until the context is full (default 128) */
    const char *const *stop;    /* stop strings, not emitted (may be NULL) */
    size_t n_stop;
    int add_special;            /* tokenize the prompt with BOS/EOS as the vocabulary wants (1) */
    int parse_special;          /* match special-token text in the prompt (0) */
    int ignore_eos;             /* never sample an end-of-generation token: run to n_predict (0) */
    int reserved[7];
} sb_generate_params;

typedef struct sb_generate_result {
    int64_t n_prompt, n_reused, n_generated;
    double prefill_seconds, decode_seconds;
    sb_stop_reason stop;
} sb_generate_result;

SB_API void sb_generate_default_params(sb_generate_params *p);

/* Tokenize the prompt, prefill it (reusing the cached prefix), then sample and stream text until
 * n_predict tokens, an end-of-generation token, a stop string or a full context. res may be NULL.
 * Errors: those of sb_tokenize, sb_session_prefill and sb_sampler_sample; SB_ERR_CANCELLED. */
SB_API sb_status sb_generate(sb_session *s, sb_sampler *smp, const char *prompt, size_t len, const sb_generate_params *p,
                             sb_text_fn fn, void *user, sb_generate_result *res);

/* The same from tokens. */
SB_API sb_status sb_generate_tokens(sb_session *s, sb_sampler *smp, const int32_t *prompt, size_t n,
                                    const sb_generate_params *p, sb_text_fn fn, void *user, sb_generate_result *res);

/* The text side of sb_generate, for callers that run the model themselves (an sb_engine step of
 * many sequences, a loop of their own): feed each sampled token; text reaches fn in whole UTF-8
 * characters, text that may be the start of a stop string is held back until it is decided, and a
 * matched stop string is not emitted, nor anything after it. sb_generate's text for the same tokens
 * is exactly what this gives. Use from one thread at a time. */
typedef struct sb_text_stream sb_text_stream;

/* The stop strings are copied (n_stop <= 64, each non-empty). Errors: SB_ERR_INVALID_ARG, SB_ERR_OOM. */
SB_API sb_status sb_text_stream_create(const sb_vocab *v, const char *const *stop, size_t n_stop, sb_text_stream **out);
SB_API void sb_text_stream_free(sb_text_stream *t);
/* One sampled token. *stop receives SB_STOP_EOG (an end-of-generation token: it adds no text) or
 * SB_STOP_STRING when the text ends with this token, else -1; no token may follow such an end
 * (SB_ERR_INVALID_ARG). SB_ERR_RANGE for a token outside the vocabulary, SB_ERR_CANCELLED when fn
 * returned nonzero. */
SB_API sb_status sb_text_stream_push(sb_text_stream *t, int32_t token, sb_text_fn fn, void *user, int *stop);
/* Generation ended otherwise (length, context, the caller): emit what is held back (token -1). After a
 * stop string, nothing. SB_ERR_CANCELLED when fn returned nonzero. */
SB_API sb_status sb_text_stream_flush(sb_text_stream *t, sb_text_fn fn, void *user);

/* ---- vocabulary / tokenizer ---- */

/* A tokenizer vocabulary: token texts, merges/scores, special tokens and the chat format, read from
 * the tokenizer.* keys of a GGUF file (architectures.md §8). Supported tokenizer.ggml.model values:
 * "llama" (SentencePiece-style), "gpt2" (byte-level BPE; pre-tokenizers default, gpt-2, llama-bpe,
 * qwen2 and their aliases) and "gemma4". An sb_vocab is immutable: every function below that takes
 * a const sb_vocab * may be called from many threads at once on the same handle. */
typedef struct sb_vocab sb_vocab;

/* Token attribute bits (sb_token_get_attr). CONTROL/UNKNOWN tokens render only when special
 * rendering is asked for; EOG marks the end-of-generation set (eos, eot, eom and the end markers
 * recognised by text, e.g. <|im_end|>, <|eot_id|>, <end_of_turn>, <turn|>). */
typedef enum sb_token_attr {
    SB_TOKEN_ATTR_NORMAL = 1,
    SB_TOKEN_ATTR_CONTROL = 2,
    SB_TOKEN_ATTR_USER_DEFINED = 4,
    SB_TOKEN_ATTR_UNKNOWN = 8,
    SB_TOKEN_ATTR_BYTE = 16,
    SB_TOKEN_ATTR_UNUSED = 32,
    SB_TOKEN_ATTR_EOG = 64,
} sb_token_attr;

/* Special-token kinds for sb_vocab_get_special. */
typedef enum sb_special_token {
    SB_SPECIAL_BOS = 0, SB_SPECIAL_EOS = 1, SB_SPECIAL_EOT = 2, SB_SPECIAL_EOM = 3,
    SB_SPECIAL_UNK = 4, SB_SPECIAL_SEP = 5, SB_SPECIAL_PAD = 6, SB_SPECIAL_MASK = 7,
} sb_special_token;

/* Load only the vocabulary of a GGUF file (metadata; no tensor data is read). The file is closed
 * before returning: the handle owns copies of everything it needs. Free with sb_vocab_free.
 * Errors: SB_ERR_INVALID_ARG (NULL args), SB_ERR_IO, SB_ERR_OOM, any SB_ERR_FORMAT_* from the GGUF
 * reader, SB_ERR_VOCAB (a missing, mistyped or inconsistent tokenizer key — special id >= n_vocab,
 * a BYTE token that is not <0xXX>, a merge naming a missing token ...; the key and index are in
 * sb_last_error), SB_ERR_VOCAB_UNSUPPORTED (unknown tokenizer.ggml.model or .pre, named). */
SB_API sb_status sb_vocab_load(const char *gguf_path, sb_vocab **out);

/* Release a vocabulary. NULL is a no-op. */
SB_API void sb_vocab_free(sb_vocab *v);

/* Number of tokens (n_vocab); 0 for NULL. */
SB_API int32_t sb_vocab_n_tokens(const sb_vocab *v);

/* The id of a special token, or -1 when the vocabulary has none (or v is NULL). */
SB_API int32_t sb_vocab_get_special(const sb_vocab *v, sb_special_token which);

/* Whether tokenizing with add_special prepends BOS / appends EOS (1 or 0; 0 for NULL). */
SB_API int sb_vocab_adds_bos(const sb_vocab *v);
SB_API int sb_vocab_adds_eos(const sb_vocab *v);

/* Tokenize len bytes of text (any bytes: NUL is ordinary, invalid UTF-8 has a defined result, see
 * docs/tokenizer.md). add_special: add BOS/EOS as the vocabulary asks. parse_special: recognise
 * control tokens such as <|im_start|> written in the text (user-defined tokens are always
 * recognised; with parse_special = 0 control-token text is tokenized as plain text).
 * Writes up to cap ids to tokens (may be NULL when cap is 0) and the count to *n_out.
 * Errors: SB_ERR_INVALID_ARG, SB_ERR_TEXT_TOO_LONG (len > 2^31-1; nothing is done),
 * SB_ERR_BUFFER_TOO_SMALL (*n_out = the number of ids needed; tokens holds the first cap of
 * them), SB_ERR_OOM. */
SB_API sb_status sb_tokenize(const sb_vocab *v, const char *text, size_t len, int add_special, int parse_special,
                             int32_t *tokens, size_t cap, size_t *n_out);

/* Flags for sb_detokenize. */
enum {
    SB_DETOK_REMOVE_SPECIAL = 1,  /* drop a leading BOS and trailing EOS that the vocabulary adds */
    SB_DETOK_UNPARSE_SPECIAL = 2, /* render control tokens as their text (otherwise they render as "") */
    SB_DETOK_NO_CLEAN_SPACES = 4, /* BPE: skip llama.cpp's " ." / " 's" clean-up (exact round trip) */
};

/* Token ids -> text (SPM: the space the tokenizer prefixed is removed from the first token; byte
 * tokens are joined back into UTF-8). Writes up to cap bytes to buf, NUL-terminated when the text
 * is shorter than cap, and the text length (without NUL) to *n_out.
 * Errors: SB_ERR_INVALID_ARG, SB_ERR_RANGE (an id out of range; named), SB_ERR_BUFFER_TOO_SMALL
 * (*n_out = bytes needed), SB_ERR_OOM. */
SB_API sb_status sb_detokenize(const sb_vocab *v, const int32_t *tokens, size_t n, unsigned flags, char *buf,
                               size_t cap, size_t *n_out);

/* The bytes one token renders to (special != 0: control tokens as their text). Same buffer
 * convention and errors as sb_detokenize. A piece may be an incomplete UTF-8 sequence (a byte
 * token); use the streaming decoder below to print tokens as they come. */
SB_API sb_status sb_token_to_piece(const sb_vocab *v, int32_t token, int special, char *buf, size_t cap,
                                   size_t *n_out);

/* The token's stored text exactly as in the GGUF (e.g. "Ġthe", "▁the", "<0x0A>"); a pointer owned
 * by v, not NUL-terminated, and its length. SB_ERR_INVALID_ARG, SB_ERR_RANGE. */
SB_API sb_status sb_token_get_text(const sb_vocab *v, int32_t token, const char **text, size_t *len);

/* SB_TOKEN_ATTR_* bits of a token. SB_ERR_INVALID_ARG, SB_ERR_RANGE. */
SB_API sb_status sb_token_get_attr(const sb_vocab *v, int32_t token, uint32_t *attr);

/* 1 if token ends generation (SB_TOKEN_ATTR_EOG), 0 otherwise (also for bad ids / NULL). */
SB_API int sb_token_is_eog(const sb_vocab *v, int32_t token);

/* Streaming detokenizer: feed generated tokens one by one and print what comes back; bytes of a
 * UTF-8 character split over several tokens are held until the character is complete. The first
 * token's SPM prefix space is removed. One stream per generation; not thread-safe; it keeps a
 * pointer to v, which must outlive it. */
typedef struct sb_detok_stream sb_detok_stream;
SB_API sb_status sb_detok_stream_create(const sb_vocab *v, int special, sb_detok_stream **out);
SB_API void sb_detok_stream_free(sb_detok_stream *s);
/* Push one token; writes the now-complete bytes (possibly none) like sb_detokenize. On
 * SB_ERR_BUFFER_TOO_SMALL the stream is unchanged (*n_out = bytes needed; retry with a larger
 * buffer). SB_ERR_RANGE for a bad id (stream unchanged). */
SB_API sb_status sb_detok_stream_push(sb_detok_stream *s, int32_t token, char *buf, size_t cap, size_t *n_out);
/* Write whatever is still held (an unfinished UTF-8 sequence, emitted as is) and reset. */
SB_API sb_status sb_detok_stream_flush(sb_detok_stream *s, char *buf, size_t cap, size_t *n_out);

/* One chat message. role: "system", "user" or "assistant"; content: NUL-terminated UTF-8. */
typedef struct sb_chat_message {
    const char *role;
    const char *content;
} sb_chat_message;

/* Render messages as the prompt text for the vocabulary's chat format, recognised from
 * tokenizer.chat_template (ChatML for Qwen2/2.5/3, Llama 3, Gemma 3, Gemma 4; anything else falls
 * back to ChatML). The template itself is never executed. add_generation_prompt appends the
 * assistant header. The text contains no BOS. To feed a model, prefer sb_chat_tokenize: tokenizing
 * this text with parse_special = 1 also turns special-token text inside the messages into control
 * tokens. Buffer convention as sb_detokenize. Errors: SB_ERR_INVALID_ARG (NULL args,
 * an unknown role — the message index is named), SB_ERR_BUFFER_TOO_SMALL, SB_ERR_OOM. */
SB_API sb_status sb_chat_render(const sb_vocab *v, const sb_chat_message *msgs, size_t n,
                                int add_generation_prompt, char *buf, size_t cap, size_t *n_out);

/* Tokenize messages in the vocabulary's chat format: the format's own markers are matched as
 * special tokens, each message's content never is (user text cannot forge chat structure: content
 * is tokenized as with parse_special = 0, and no token the format uses as a marker is matched in
 * it, even one the vocabulary marks user-defined). BOS as the vocabulary asks, never EOS;
 * add_generation_prompt appends the assistant header. For content without special-token text the
 * ids equal those of sb_chat_render's text tokenized with add_special = parse_special = 1 (when
 * the vocabulary adds no EOS). Buffer convention and errors as sb_tokenize, plus those of
 * sb_chat_render. */
SB_API sb_status sb_chat_tokenize(const sb_vocab *v, const sb_chat_message *msgs, size_t n, int add_generation_prompt,
                                  int32_t *tokens, size_t cap, size_t *n_out);

/* Name of the recognised chat format ("chatml", "llama3", "gemma3", "gemma4", "fallback (chatml)",
 * ...); static storage, never NULL. */
SB_API const char *sb_vocab_chat_format(const sb_vocab *v);

/* ---- model file tools: quantize, synth ---- */

/* Progress of a long operation: `done` of `total` units (weights processed), `what` names the item
 * just finished (a tensor name). Return nonzero to cancel: the call then fails with
 * SB_ERR_CANCELLED and leaves no output file. Called on the calling thread. */
typedef int (*sb_progress_fn)(void *user, uint64_t done, uint64_t total, const char *what);

typedef struct sb_quantize_params {
    int n_threads;            /* worker threads incl. the caller; <= 0: number of online cores */
    sb_progress_fn progress;  /* may be NULL */
    void *progress_user;
} sb_quantize_params;

/* Write `out` as llama-quantize would write it from `in` with mix `type_name` (case-insensitive):
 * F32 F16 BF16 Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 Q3_K_L Q3_K_M Q3_K_S Q2_K
 * IQ4_NL IQ4_XS. Per-tensor types follow llama.cpp's rules (1-D tensors and norms keep their type;
 * output / tied embeddings Q6_K; attn_v / ffn_down bumps by layer; shape fallback when a row is not
 * a multiple of the block), and for an F32/F16/BF16 input the tensor data, tensor order and
 * metadata layout are byte-identical to llama-quantize's (no imatrix). Tensors already in a
 * quantized type are dequantized first (a SB_LOG_WARN message says so; this entry point behaves as
 * sb_quantize_file_ex with allow_requantize = 1). The output is written to
 * a temporary file and renamed, so `out` is either complete or untouched; a device or FIFO `out`
 * is written straight to, a directory refused (sb_output_open's rule). p may be NULL (defaults).
 * Errors: SB_ERR_INVALID_ARG (NULL args, unknown type name: the valid ones are listed),
 * SB_ERR_IO, SB_ERR_OOM, SB_ERR_FORMAT_* (bad input), SB_ERR_UNSUPPORTED (a tensor type that
 * cannot be converted, or a shape no type fits: the tensor and type are named), SB_ERR_MODEL_NAN
 * (a non-finite value in an F32/F16/BF16 input tensor), SB_ERR_RANGE (a value too large for the
 * output type: an F16 element or a block's fp16 scale would be infinite), SB_ERR_CANCELLED. */
SB_API sb_status sb_quantize_file(const char *in, const char *out, const char *type_name,
                                  const sb_quantize_params *p);

/* Name of quantization mix i (0..), NULL past the end. */
SB_API const char *sb_quantize_type_name(int i);

/* A --tensor-type override of sb_quantize_file_ex. */
typedef struct sb_quantize_tensor_type {
    const char *pattern;    /* regular expression (PCRE2 syntax, lowercased first as llama-quantize does)
                               searched anywhere in the tensor name, e.g. "attn_v" or "blk\.1[0-9]\.ffn_down" */
    const char *type_name;  /* ggml type name, case-insensitive: "q8_0", "Q4_K", "f16", ... */
} sb_quantize_tensor_type;

/* llama-quantize's flags for sb_quantize_file_ex. Fill with sb_quantize_default_options(), then
 * set fields; new fields are only ever appended, and struct_size tells the library which exist. */
typedef struct sb_quantize_options {
    size_t struct_size;          /* sizeof(sb_quantize_options), set by sb_quantize_default_options */
    int allow_requantize;        /* 0 (default): an input tensor in a quantized type that the mix would
                                    convert fails with SB_ERR_INVALID_ARG naming it; 1: it is
                                    dequantized and re-quantized (with a SB_LOG_WARN message) */
    int pure;                    /* 1: every quantizable tensor gets the mix's default type: no mix rules
                                    (no output/attn_v/ffn_down bumps); overrides and the shape fallback
                                    still apply */
    int leave_output_tensor;     /* 1: output.weight is copied in its input type */
    const char *output_tensor_type;    /* ggml type name for output.weight (and tied embeddings); NULL = mix */
    const char *token_embedding_type;  /* ggml type name for token_embd.weight; NULL = mix */
    const sb_quantize_tensor_type *tensor_types; /* overrides, first match wins; the tensor skips the
                                    mix rules, the shape fallback still applies; only when the mix's
                                    default type is a quantized one (as llama-quantize) */
    size_t n_tensor_types;
    const char *imatrix_path;    /* llama.cpp imatrix GGUF (llama-imatrix output): per-column importance
                                    weights used by the quantizers; NULL = none. Checked strictly
                                    (SB_ERR_FORMAT naming the problem); the legacy .dat format is refused */
} sb_quantize_options;

/* Sizes for llama-quantize's summary line. BPW = bits per weight = bytes * 8 / n_elements. */
typedef struct sb_quantize_stats {
    uint64_t n_elements;         /* elements of all tensors */
    uint64_t bytes_in;           /* tensor data bytes of the input */
    uint64_t bytes_out;          /* tensor data bytes of the output */
} sb_quantize_stats;

/* Defaults: no flags, struct_size set. */
SB_API void sb_quantize_default_options(sb_quantize_options *o);

/* sb_quantize_file with llama-quantize's flags (o may be NULL: defaults, i.e. re-quantizing is
 * refused) and the sizes of what was written (stats may be NULL; filled on success). Mix names also
 * accept llama-quantize's aliases Q3_K/Q4_K/Q5_K, its numeric ftypes and Q2_K_S (which, as in
 * llama-quantize, needs imatrix_path: its Q2_K tensors fail with SB_ERR_INVALID_ARG without
 * importance weights); the mixes this build cannot write (IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M
 * IQ3_XXS IQ3_XS IQ3_S IQ3_M TQ1_0 TQ2_0 MXFP4_MOE ...) and type names without a quantizer give
 * SB_ERR_UNSUPPORTED naming the type. Errors as sb_quantize_file plus SB_ERR_INVALID_ARG
 * (requantizing refused, bad type name or pattern, struct_size too small, Q2_K_S without imatrix)
 * and SB_ERR_FORMAT (bad imatrix file: the problem is named). */
SB_API sb_status sb_quantize_file_ex(const char *in, const char *out, const char *type_name,
                                     const sb_quantize_params *p, const sb_quantize_options *o,
                                     sb_quantize_stats *stats);

typedef struct sb_synth_params {
    const char *type_name;    /* a mix as for sb_quantize_file; NULL = "F32" */
    const char *vocab_path;   /* vocab-only GGUF whose tokenizer.* keys are copied; NULL = a small
                                 synthetic byte-fallback SentencePiece vocabulary */
    uint64_t seed;            /* weights are a deterministic function of (preset, seed, vocab) */
    int n_threads;            /* <= 0: number of online cores */
    sb_progress_fn progress;  /* may be NULL */
    void *progress_user;
    int fast;                 /* 1: each weight tensor's first 256 rows are drawn and quantized, the
                                 other rows repeat them — valid blocks and the exact type mix in a
                                 fraction of the time (speed benchmarks of large models) */
    int reserved[7];          /* zero */
} sb_synth_params;

/* Write a random-weight model with the tensor names, shapes and metadata of a real model (preset:
 * see sb_synth_preset_name), so that llama.cpp and SonicBoom load it; weights ~ N(0, 0.02^2),
 * norm weights ~ 1 + N(0, 0.02^2), llama-3 rope_freqs computed as the converter does. The
 * vocabulary size is the tokenizer's token count. Tensors are generated one at a time and
 * quantized with the mix type_name (memory stays bounded). Atomic write as sb_quantize_file.
 * Errors: SB_ERR_INVALID_ARG (NULL args, unknown preset or type), SB_ERR_IO, SB_ERR_OOM,
 * SB_ERR_FORMAT_* / SB_ERR_VOCAB (bad vocab file: no tokenizer.ggml.tokens), SB_ERR_CANCELLED. */
SB_API sb_status sb_synth_model(const char *preset, const char *out, const sb_synth_params *p);

/* Name of preset i (0..), NULL past the end; sb_synth_preset_desc: a one-line description. */
SB_API const char *sb_synth_preset_name(int i);
SB_API const char *sb_synth_preset_desc(int i);
/* The mix preset i is written in when sb_synth_params.type_name is NULL: "F32", or the preset's
 * own (gemma4-e4b: "Q3_K_M"); NULL past the end. */
SB_API const char *sb_synth_preset_type(int i);

/* ---- output files ---- */

/* An output file written by the library's one rule (what sb_quantize_file and sb_synth_model use),
 * decided from what `path` names when it is opened, symlinks followed:
 *   - nothing, or a regular file: bytes go to a new "PATH.tmp.XXXXXX" beside it (O_EXCL; an
 *     existing file's permissions kept); sb_output_commit fsyncs it and renames it over PATH, so
 *     PATH is either the old file or the complete new one. A symlink keeps pointing at the file it
 *     names, which is replaced; a dangling symlink is refused.
 *   - a character device (/dev/null, /dev/full, a terminal), a FIFO, or /dev/stdout, /dev/stderr,
 *     /dev/fd/N: written straight to, never replaced; a FIFO with no reader is refused at once.
 *   - a directory, block device or socket: refused.
 * Every failure is SB_ERR_IO with the path and the system's reason (e.g. "No space left on device"
 * from /dev/full), SB_ERR_INVALID_ARG for a NULL/empty path; after any failure of write or commit
 * the temporary file is gone and the handle freed. */
typedef struct sb_output sb_output;
SB_API sb_status sb_output_open(const char *path, sb_output **out);
SB_API sb_status sb_output_write(sb_output *o, const void *data, size_t size);
/* Finish and free o (commit as above). */
SB_API sb_status sb_output_commit(sb_output *o);
/* Drop o: the temporary file is removed, the destination untouched. NULL is a no-op. */
SB_API void sb_output_abort(sb_output *o);

/* ---- batched sequences: an engine over a paged, shared KV cache ---- */

/* Many sequences of one model decoded together. An engine owns a pool of KV-cache blocks
 * (block_size positions each) shared by all its sequences; each sequence maps its positions to
 * blocks through its own table. One sb_engine_step evaluates tokens of any open sequences as one
 * forward pass, so B sequences decoding together read the weights once (one T = B matrix product)
 * instead of B times. Logits are the caller's to sample (an sb_sampler per sequence).
 *
 * Prefix cache: every full block is identified by the token ids of all positions up to its end;
 * a sequence that starts with tokens some sequence computed before (open or closed) takes those
 * blocks by reference with sb_seq_attach_prefix instead of computing them. A prefix that ends
 * inside a block shares that block too; the first write into a block that is shared (or kept for
 * the cache) copies it first (copy-on-write), so sequences never see each other's writes. Blocks
 * no sequence holds stay cached and are reused, least recently released first, only when a step
 * needs a block and none is free.
 *
 * Engines run on the CPU or on GPU 0 (SB_DEVICE_CUDA; its KV pool lives in device memory beside a
 * host mirror of the same size). Every architecture runs (Gemma 4's shared-KV layers read their
 * source layer's blocks). An engine is used by one
 * thread at a time; any number of engines and sessions may share a model. */
typedef struct sb_engine sb_engine;

typedef struct sb_engine_params {
    int64_t n_blocks;       /* KV blocks; 0 = room for every sequence at n_ctx: n_seq_max * ceil(n_ctx / block_size) */
    int32_t block_size;     /* positions a block; 0 = 16 (1..1024) */
    int32_t n_seq_max;      /* sequences open at once; 0 = 4 (sequence ids are 0..n_seq_max-1) */
    int64_t n_ctx;          /* longest sequence; 0 = min(model context, 4096); above the model's trained context:
                             * SB_ERR_INVALID_ARG */
    int64_t n_batch;        /* most tokens one step evaluates; 0 = 512 */
    int kv_type;            /* SB_TYPE_F32 (default) or SB_TYPE_F16 */
    int n_threads;          /* 0 = all cores */
    int device;             /* SB_DEVICE_CPU (default), SB_DEVICE_CUDA, SB_DEVICE_AUTO (CUDA where a device is usable
                             * and runs the model's paged graph, else the CPU) */
    int reserved[7];        /* zero */
} sb_engine_params;

/* One token of a step: appended to sequence seq at its next position. Items of one sequence are
 * taken in item order (a prompt chunk is several items of one sequence). */
typedef struct sb_batch_item {
    int32_t seq;
    int32_t token;
    int32_t logits;         /* 1: this token's logits are wanted; 0: not */
    int32_t reserved;       /* zero */
} sb_batch_item;

typedef struct sb_engine_stats {
    int64_t n_blocks;       /* blocks in the pool */
    int64_t n_blocks_used;  /* held by open sequences */
    int64_t n_blocks_cached;/* held by none, kept for the prefix cache (evictable) */
    int64_t n_blocks_free;
    int64_t n_prefix_hit_tokens; /* positions sb_seq_attach_prefix took from the cache */
    int64_t n_evictions;    /* cached blocks given up for new ones */
    int64_t n_cow_copies;   /* blocks copied before a write (copy-on-write) */
    int64_t n_steps, n_tokens;   /* successful steps, tokens they evaluated */
    double step_seconds;    /* time inside successful steps */
    int64_t n_plans_built;  /* plans built since creation (the decode plan at creation, sb_engine_warmup's, steps') */
    int64_t n_plans_warm;   /* step classes sb_engine_warmup readied (ABI level 3) */
    int64_t n_graph_captures; /* CUDA Graphs captured (CUDA; 0 on the CPU) (ABI level 3) */
    int64_t reserved[4];
} sb_engine_stats;

SB_API void sb_engine_default_params(sb_engine_params *p);

/* Create an engine (the KV pool is allocated here, the decode plan built and checked). Errors:
 * SB_ERR_INVALID_ARG (a parameter out of range, named), SB_ERR_OOM (bytes named),
 * SB_ERR_UNSUPPORTED (the architecture or device, named). */
SB_API sb_status sb_engine_create(sb_model *m, const sb_engine_params *p, sb_engine **out);
/* Free an engine and its sequences. NULL is a no-op. */
SB_API void sb_engine_free(sb_engine *e);

/* Open an empty sequence; *seq receives its id. SB_ERR_CONTEXT_FULL when n_seq_max are open. */
SB_API sb_status sb_seq_open(sb_engine *e, int32_t *seq);
/* Close a sequence: its blocks are released (full ones stay cached for later prefixes); the id may
 * be handed out again. SB_ERR_INVALID_ARG for an id that is not open. */
SB_API sb_status sb_seq_close(sb_engine *e, int32_t seq);

/* For an empty sequence about to evaluate the prompt tokens[0, n): take the longest prefix of
 * tokens[0, n-1) whose K/V the cache holds (never the last token: its logits must be computed).
 * *n_reused (may be NULL) receives the positions taken; the caller then evaluates
 * tokens[n_reused, n) with sb_engine_step. Nothing is computed. Errors: SB_ERR_INVALID_ARG (a
 * sequence not open or not empty, n = 0), SB_ERR_RANGE (a token outside the vocabulary). */
SB_API sb_status sb_seq_attach_prefix(sb_engine *e, int32_t seq, const int32_t *tokens, size_t n, int64_t *n_reused);

/* Evaluate items[0, n) in one forward pass (n <= n_batch). logits receives one n_vocab row for each
 * item with logits = 1, in item order (NULL: no copy is made; sb_engine_logits shows the engine's
 * own rows). All or nothing: on any error no sequence changes. Errors: SB_ERR_INVALID_ARG (n, a
 * sequence not open, a logits or reserved field out of range), SB_ERR_RANGE (a token outside the vocabulary),
 * SB_ERR_CONTEXT_FULL (a sequence would pass n_ctx, or the pool lacks free or evictable blocks:
 * the counts named), SB_ERR_NUMERIC (a NaN or infinite logit: the item named), SB_ERR_OOM. */
SB_API sb_status sb_engine_step(sb_engine *e, const sb_batch_item *items, size_t n, float *logits);

/* Ready, before the first step needs them, every step class a step of at most max_tokens items
 * with at most max_rows logit rows uses, so that its first step costs what later ones do (a
 * server calls it before it reports ready). A step runs on a plan per class (T, rows): its item
 * count and its logit rows (1 when none), each rounded up to a power of two (T at most n_batch,
 * rows at most T); a class's plan is otherwise built, and on CUDA its kernels generated and tuned
 * and its CUDA Graph captured, on the first steps of that class. Here every such plan is built
 * (about log2(max_tokens) x log2(max_rows) of them) and kept for the engine's life; on CUDA each is
 * also run on padding only (it writes a scratch block of the pool, no sequence). Afterwards no step
 * within the limits builds a plan or captures a graph (sb_engine_stats n_plans_built,
 * n_graph_captures). max_tokens 0 = n_batch; max_rows 0 = min(n_seq_max, max_tokens) (each decoding
 * sequence wants one row). Sequences and the cache are untouched. Errors: SB_ERR_INVALID_ARG
 * (max_tokens above n_batch, max_rows above max_tokens), SB_ERR_OOM, a device's. ABI level 3. */
SB_API sb_status sb_engine_warmup(sb_engine *e, size_t max_tokens, size_t max_rows);
/* The last successful step's logit rows, as sb_engine_step would have copied them (*n_rows rows of
 * n_vocab, item order), in the engine's memory (page-locked on CUDA, where the device writes them
 * directly): valid until the next step or sb_engine_free. NULL with *n_rows 0 when the last step
 * failed or wanted none, or for a NULL engine. Saves a copy of B x n_vocab floats a step. */
SB_API const float *sb_engine_logits(const sb_engine *e, size_t *n_rows);

/* Positions a sequence holds. SB_ERR_INVALID_ARG for an id that is not open. */
SB_API sb_status sb_seq_length(const sb_engine *e, int32_t seq, int64_t *n);
/* Forget positions >= n of a sequence (n <= its length; the next write into a shared block copies
 * it). SB_ERR_INVALID_ARG for an id that is not open or n outside [0, length]. */
SB_API sb_status sb_seq_truncate(sb_engine *e, int32_t seq, int64_t n);

SB_API sb_status sb_engine_get_stats(const sb_engine *e, sb_engine_stats *out);
/* Where the engine runs: SB_DEVICE_CPU or SB_DEVICE_CUDA (what SB_DEVICE_AUTO chose); -1 for NULL. */
SB_API int sb_engine_device(const sb_engine *e);

/* ---- tensors, graphs and programs (ABI level 2) ---- */

/* The ABI level: 1 = the declarations before this wave; 2 adds this section, sb_engine, sb_text_stream,
 * the sampler's logit bias and logprob log, swa_full and sb_session_kv_bytes; 3 adds sb_engine_warmup
 * and sb_engine_stats' n_plans_warm and n_graph_captures (taken from its reserved fields); 4 adds
 * sb_compile_params.page_locked_outputs (taken from its reserved fields: a library below 4 ignores
 * it, and its outputs are ordinary host memory) and sb_tensor_write. Incremented whenever declarations are
 * added (never reset within a major version), so a binding checks sb_abi_level() >= the level it
 * was written for, besides sb_version_number(). */
#define SB_ABI_LEVEL 4
SB_API int sb_abi_level(void);

/* A tensor: a type, a shape ne[0..3] (ne[0] innermost, contiguous, unused dims 1) and its data.
 * Several tensors may share one buffer (views: sb_tensor_from_weight, reshape, kv_store); the
 * buffer lives until the last tensor using it is freed. A weight view keeps a pointer into its
 * model's mapping: the model must outlive it. Handles are not thread-safe (one thread at a time,
 * views included).
 * Devices. Every tensor has host memory. A tensor on SB_DEVICE_CPU is computed on by the CPU; one on
 * SB_DEVICE_CUDA (GPU 0) keeps that host memory as a mirror and is computed on by the one CUDA
 * backend the library shares among all programs and eager ops (opened on first use; its calls are
 * serialised by a process-wide lock). That backend keeps a device copy of each weight and cache
 * bound into its runs — one copy per buffer, shared by every program binding it — uploaded on first
 * use. The library keeps the copies coherent: a cache a GPU run wrote is newer on the device until
 * the host reads it (sb_tensor_read_f32, a CPU op or program using it), which downloads it first; a
 * host write (a CPU op or program writing a cache, an output written in place) is sent on to the
 * device copy at once; freeing the memory frees the device copy. Results of eager ops on the GPU
 * and programs' outputs are copied back to the host with each run (or written there by the GPU
 * directly: sb_compile_params.page_locked_outputs), so reading them costs nothing more. sb_tensor_from_weight views are on the CPU (zero-copy) and are uploaded once where a GPU
 * program or op uses them. */
typedef struct sb_tensor sb_tensor;

typedef struct sb_tensor_info {
    int type;               /* sb_type; quantized types stay quantized */
    int device;             /* SB_DEVICE_CPU or SB_DEVICE_CUDA (where it was created or computed); a graph value's: the CPU */
    int n_dims;             /* 1..4, as created (trailing dims of 1 are kept) */
    int64_t ne[4];          /* unused dims 1 */
    uint64_t nbytes;        /* bytes of the data */
    int is_view;            /* 1: shares another tensor's or a model's memory */
    int reserved[5];
} sb_tensor_info;

/* A new tensor on device with type and shape; data (NULL: zeros) holds size bytes in the type's
 * layout (row bytes × rows) and is copied. device: SB_DEVICE_CPU, SB_DEVICE_CUDA (opens the shared
 * CUDA backend on first use; the data reaches the GPU when a GPU op or program first uses it) or
 * SB_DEVICE_AUTO (CUDA where a GPU is usable, else the CPU). Types: F32, F16, BF16, I32 and every
 * block type with a dequantizer (ne[0] a multiple of its block). Errors: SB_ERR_INVALID_ARG (n_dims
 * outside 1..4, a dim < 1, a removed or unsupported type, ne[0] not a multiple of the block, size !=
 * the bytes the shape needs, an unknown device: all named), SB_ERR_DEVICE (SB_DEVICE_CUDA without a
 * usable GPU: the reason after "SB_DEVICE_CUDA: "), SB_ERR_UNSUPPORTED (SB_DEVICE_CUDA in a build
 * without CUDA), SB_ERR_OOM. */
SB_API sb_status sb_tensor_create(int device, int type, int n_dims, const int64_t *ne, const void *data, size_t size,
                                  sb_tensor **out);

/* A view of a loaded model's weight named `name` (GGUF name, "blk.0.attn_q.weight"), zero-copy and
 * in the file's type (a Q4_K weight stays Q4_K). The model must outlive the tensor.
 * Errors: SB_ERR_INVALID_ARG (NULL, a name of 64 bytes or more), SB_ERR_NOT_FOUND (the name),
 * SB_ERR_UNSUPPORTED (a type this build cannot read), SB_ERR_OOM. */
SB_API sb_status sb_tensor_from_weight(const sb_model *m, const char *name, sb_tensor **out);

SB_API sb_status sb_tensor_get_info(const sb_tensor *t, sb_tensor_info *out);

/* The values as f32 (dequantized; I32 converted), ne[0] fastest: writes min(cap, n) floats and n
 * (the element count) to *n_out. SB_ERR_BUFFER_TOO_SMALL when cap < n (the first cap are written).
 * A cache a GPU run wrote is downloaded first (SB_ERR_DEVICE if that fails). */
SB_API sb_status sb_tensor_read_f32(const sb_tensor *t, float *buf, size_t cap, size_t *n_out);

/* Replace t's data (ABI level 4) with size bytes in its type's layout, exactly the bytes its shape
 * needs (sb_tensor_info.nbytes): a loop refills its input tensors (a decode step's token and
 * position) instead of making new ones. Views of the same memory see the new data; a device copy
 * follows (as for any host write). Errors: SB_ERR_INVALID_ARG (NULL, a model's weight view, another
 * size: named), SB_ERR_DEVICE (sending it to the device copy). */
SB_API sb_status sb_tensor_write(sb_tensor *t, const void *data, size_t size);

/* Release t (NULL: no-op); its memory goes when no other view uses it. */
SB_API void sb_tensor_free(sb_tensor *t);

/* Ops, by name (the op table of src/ops/ops.def; torch.nn.functional's name where an op has a
 * twin). Sources are tensors (eager) or graph values; args are the op's numbers, in order, trailing
 * ones optional (defaults in brackets). Results are f32 unless said.
 *   name              sources                                 args
 *   embedding         (idx i32 [T], w any [E,V]) -> [E,T]     -          (get_rows(w, idx): the same)
 *   linear            (x [K,T], w any [K,N], b [N]?) -> [N,T] -          y = W x (+ b); w quantized or not
 *   matmul            (w any [K,N], x [K,T]) -> [N,T]         -
 *   add, mul          (a, b) b [ne0] broadcast or a's shape    -
 *   scale             (x)                                     s
 *   softcap           (x)                                     cap > 0    cap * tanh(x / cap)
 *   silu, gelu_tanh   (x)                                     -          gelu_tanh = gelu(x, approximate="tanh")
 *   swiglu, geglu     (gate, up) of one shape                 -          silu(gate) * up, gelu_tanh(gate) * up
 *   rms_norm          (x, w [ne0]?)                           eps        x / sqrt(mean(x^2) + eps) (* w)
 *   softmax           (x)                                     -          over ne[0], max subtracted
 *   reshape, view     (x)                                     ne0 [ne1 ne2 ne3]: the same element count
 *   slice             (x [a,b,...])                           start n    x[:, start:start+n]
 *   rope              (x [D,H,T], pos [T], freq_factors?)     n_rot mode(0 normal, 2 neox) [base 10000] [freq_scale 1]
 *   kv_store          (cache [Dkv,C], x [Dkv,T], pos [T])     -          writes column pos[t] of cache with x[:,t];
 *                                                                        returns the cache after the write
 *   attention         (q [D,Hq,T], k, v [Dkv,C], pos [T])     n_head_kv [scale 1/sqrt(D)] [window 0] [softcap 0]
 *                     causal: query t sees cache positions <= pos[t]; -> [D*Hq,T]. k and v must be caches
 *                     (or kv_store results); alias scaled_dot_product_attention
 *   layer_norm        (x, w [ne0]?, b [ne0]?)                 [eps 1e-5] (x - mean) / sqrt(var + eps) (* w) (+ b), over ne[0]
 *   gelu              (x)                                     -          exact: 0.5x(1 + erf(x/sqrt(2))) (approximate="none")
 *   concat, cat       (x0, x1, ... up to 8) f32, equal but    dim        joined along ne[dim] (a copy)
 *                     along ne[dim]
 *   permute           (x)                                     p0 [p1 p2 p3]: result ne[k] = x ne[pk] (dims not named stay);
 *                                                                        a copy, or a view when the memory order is kept
 *   transpose         (x)                                     d0 d1      permute swapping ne[d0] and ne[d1]
 * i32 sources: idx is a tokens input, pos a pos input (sb_graph_input), or any I32 tensor eagerly;
 * they are range-checked when a program runs (SB_ERR_RANGE, SB_ERR_CONTEXT_FULL past a cache).
 * Shapes and types are checked when the op is applied: SB_ERR_INVALID_ARG with the op, the
 * sources' types and shapes and the reason; SB_ERR_NOT_FOUND for an unknown op name. */

/* Name of op i (0..; NULL past the end): the names above, aliases included. */
SB_API const char *sb_op_name(int i);

/* Eager: apply op to tensors now, through the same planner and kernels as a compiled graph (a
 * one-node graph planned and run at once) on the sources' device: CPU tensors on the CPU (all
 * cores), CUDA tensors on the shared CUDA backend; *out is on that device. A model's weight view
 * (on the CPU) may join sources of either device; other sources on different devices are refused
 * (SB_ERR_INVALID_ARG naming the op and the devices). *out is a new tensor (reshape and kv_store
 * return views of their source; kv_store needs an F32 cache, written where the op runs). Runs on
 * one device are serialised (a lock). Errors as above, plus the executor's (SB_ERR_RANGE,
 * SB_ERR_CONTEXT_FULL, SB_ERR_OOM, SB_ERR_DEVICE, SB_ERR_MODEL_TENSOR_TYPE: an op or type the GPU
 * cannot run). */
SB_API sb_status sb_tensor_op(const char *op, sb_tensor *const *src, int n_src, const double *args, int n_args,
                              sb_tensor **out);

/* A graph: values recorded by applying ops; nothing runs until it is compiled and run. */
typedef struct sb_graph sb_graph;
typedef int32_t sb_value;   /* a value of one graph */

/* Kinds of graph inputs. DATA: any type but I32 (activations, weights given at run time); TOKENS:
 * I32 [T] ids (at most one per graph); POS: I32 [T] positions (at most one); CACHE: an F32 or F16
 * [Dkv, C] KV cache, written by kv_store (only as sb_graph_tensor, which keeps it bound). */
enum { SB_INPUT_DATA = 0, SB_INPUT_TOKENS = 1, SB_INPUT_POS = 2, SB_INPUT_CACHE = 3 };

SB_API sb_status sb_graph_create(sb_graph **out);
/* Free g (NULL: no-op). Programs compiled from it stay valid. */
SB_API void sb_graph_free(sb_graph *g);

/* An input bound when a program runs: sb_program_run's in[i] is the i-th input declared here (only
 * these, in this order). name: unique in the graph, 1..63 bytes. Errors: SB_ERR_INVALID_ARG (kind,
 * type for the kind, shape, name taken: named). */
SB_API sb_status sb_graph_input(sb_graph *g, int kind, const char *name, int type, int n_dims, const int64_t *ne,
                                sb_value *out);

/* A tensor bound into the graph for good (weights, KV caches: kind SB_INPUT_DATA or SB_INPUT_CACHE):
 * the graph and its programs keep its memory alive. Binding the same memory (two views of one
 * weight included) with the same type and shape twice gives the same value. Weight views are named by their GGUF name, others
 * "t.N". Errors: SB_ERR_INVALID_ARG (kind, an I32 tensor, a cache that is not F32/F16 [Dkv, C]). */
SB_API sb_status sb_graph_tensor(sb_graph *g, int kind, sb_tensor *t, sb_value *out);

/* Apply op (see the table above) to values of g. */
SB_API sb_status sb_graph_op(sb_graph *g, const char *op, const sb_value *src, int n_src, const double *args, int n_args,
                             sb_value *out);

/* The type and shape of value v (is_view and nbytes as a tensor of it would have). */
SB_API sb_status sb_graph_value_info(const sb_graph *g, sb_value v, sb_tensor_info *out);

/* Mark v (F32) as an output named name (unique, 1..63 bytes). Only what outputs depend on is
 * computed: the planner drops every other value. */
SB_API sb_status sb_graph_output(sb_graph *g, sb_value v, const char *name);

/* The graph in the text IR (one node a line), buffer convention of sb_detokenize. */
SB_API sb_status sb_graph_print(const sb_graph *g, char *buf, size_t cap, size_t *n_out);

/* A compiled graph: the built-in models' pass pipeline (dead-compute elimination, quantize-once,
 * fusions) and memory plan for its device: on the CPU with its own arena and thread pool; on CUDA
 * on the shared CUDA backend (its plan captured as a CUDA Graph as a session's are; runs of all
 * CUDA programs and eager ops are serialised by one lock). A program takes tensors of any device as
 * inputs and bound tensors: what the GPU needs is copied there (run-time inputs with every run;
 * bound weights and caches once, then kept coherent as described at sb_tensor). Run by one thread
 * at a time. */
typedef struct sb_program sb_program;

typedef struct sb_compile_params {
    int device;             /* SB_DEVICE_CPU (0), SB_DEVICE_CUDA (GPU 0) or SB_DEVICE_AUTO (CUDA where a GPU is
                             * usable and runs every node of the graph, else the CPU) */
    int n_threads;          /* CPU: 0 = all cores */
    int page_locked_outputs; /* CUDA (ABI level 4): 1 = the new output tensors sb_program_run makes have
                             * page-locked host memory, which the GPU writes directly when such a tensor is
                             * passed back as an in-place output (no device-to-host copy of it); for outputs
                             * reused run after run: allocating and freeing page-locked memory costs more
                             * than a copy of a small tensor. 0: ordinary host memory. The CPU ignores it */
    int reserved[5];
} sb_compile_params;

/* Compile g (p may be NULL: defaults). Errors: SB_ERR_INVALID_ARG (no outputs, an unknown device),
 * SB_ERR_DEVICE (SB_DEVICE_CUDA without a usable GPU, the reason named), SB_ERR_UNSUPPORTED
 * (SB_DEVICE_CUDA in a build without CUDA; a shape the GPU cannot run), SB_ERR_MODEL_TENSOR_TYPE (a
 * weight type the device cannot run in that op), SB_ERR_OOM. */
SB_API sb_status sb_graph_compile(const sb_graph *g, const sb_compile_params *p, sb_program **out);
SB_API void sb_program_free(sb_program *prog);

/* The planned graph (after the passes) in the text IR, buffer convention of sb_detokenize. */
SB_API sb_status sb_program_print(const sb_program *prog, char *buf, size_t cap, size_t *n_out);

/* Run with in[0..n_in) bound to the graph's run-time inputs (sb_graph_input order; each of the
 * declared type and shape). out[k] (k < n_out = the number of outputs, in sb_graph_output order):
 * NULL on entry gets a new F32 tensor on the program's device (with page-locked host memory where
 * the program was compiled with page_locked_outputs for CUDA); an F32 tensor of the output's shape
 * that owns its memory is written in place (its host memory; a device copy follows). Bound KV
 * caches are updated (on a CUDA program: in the GPU's copy, read back on demand). Errors:
 * SB_ERR_INVALID_ARG (counts, an input's type or shape: named), SB_ERR_RANGE (a token id outside
 * its embedding, a negative position), SB_ERR_CONTEXT_FULL (a position past a cache), SB_ERR_OOM,
 * SB_ERR_DEVICE; on failure no new tensor is left. */
SB_API sb_status sb_program_run(sb_program *prog, sb_tensor *const *in, size_t n_in, sb_tensor **out, size_t n_out);

#ifdef __cplusplus
}
#endif
#endif /* SONICBOOM_H */
