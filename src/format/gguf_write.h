/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * format/gguf_write.h — build a GGUF v3 file: metadata in insertion order, tensor infos, aligned
 * data; written to "<path>.tmp.<pid>" then fsync'ed and renamed, so a crash never leaves a
 * half-written model at <path>. The reader reads back whatever this writes (tests/format).
 * Layer 0 (format). Layout matches llama.cpp's gguf_write_out (formats.md §1.3): n_dims of a tensor
 * is 1 + index of its last dim > 1; data of each tensor is zero-padded to the alignment, the last
 * one too.
 * Non-goals: editing in place, streaming tensor data from a callback (data is given as pointers
 * that must stay valid until gguf_writer_write returns).
 */
#ifndef SB_FORMAT_GGUF_WRITE_H
#define SB_FORMAT_GGUF_WRITE_H

#include "sonicboom.h"
#include "format/gguf.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct gguf_writer gguf_writer;

sb_status gguf_writer_create(gguf_writer **out);
void gguf_writer_free(gguf_writer *w);

/* Setting an existing key replaces it and moves it to the end (llama.cpp's gguf_set_val_*
 * semantics). Strings are copied. */
sb_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
sb_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
sb_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
sb_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
sb_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
sb_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len);
/* Any scalar or array: raw packed little-endian elements of elem_type (not STRING). */
sb_status gguf_writer_set_raw(gguf_writer *w, const char *key, uint32_t type, uint32_t elem_type,
                              uint64_t count, const void *data);
sb_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const sb_strview *strs, uint64_t n);
/* Copy key/value `kv` from a parsed file unchanged. */
sb_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);
sb_status gguf_writer_remove(gguf_writer *w, const char *key);

/* Append a tensor. `data` (nbytes = the size the type and shape imply) is borrowed until write. */
sb_status gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, int n_dims,
                                 const int64_t ne[4], const void *data);

/* Write the file by fio_out_open's rule (base/file_io.h): atomically (temp file + fsync + rename)
 * onto a regular file or new path, straight to a character device or FIFO, never over a directory,
 * block device or socket. SB_ERR_IO with errno text. */
sb_status gguf_writer_write(gguf_writer *w, const char *path);

/* Serialize into a malloc'd buffer (tests, fuzz seeds). */
sb_status gguf_writer_to_memory(gguf_writer *w, uint8_t **out, size_t *size);

#endif
