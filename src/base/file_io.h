/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * base/file_io.h — the one way the library opens input files and writes output files.
 * Layer 0. Inputs: fio_open_regular never blocks (O_NONBLOCK until the type is known), and only a
 * regular file is accepted where a file of bytes is meant. Outputs: fio_out_* decide once, from
 * what is at the destination path, how to write it, so an output can never destroy a device node
 * or a directory (the rule is in fio_out_open's comment; the public sb_output_* wraps it).
 * The SIGBUS guard turns a fault on a file mapping inside one call into SB_ERR_IO, with a handler
 * installed for that call only (the caller's handlers are restored after).
 * Non-goals: Windows; locking against concurrent writers of the same destination.
 */
#ifndef SB_BASE_FILE_IO_H
#define SB_BASE_FILE_IO_H

#include "sonicboom.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Open path read-only, close-on-exec, and check it is a regular file before anything is read:
 * a FIFO, directory, device or socket gives SB_ERR_IO "PATH: is a FIFO, not a regular file" (or
 * "is a directory", ...) at once. On success *fd is a blocking descriptor and *st its fstat. */
sb_status fio_open_regular(const char *path, int *fd, struct stat *st);

/* Read exactly n bytes at offset off (pread loop). A short file is SB_ERR_IO "PATH: file changed
 * size while loading (N of M bytes read)". */
sb_status fio_pread_all(int fd, const char *path, void *dst, size_t n, uint64_t off);

typedef enum fio_out_kind {
    FIO_OUT_REPLACE = 0, /* a regular file or a new path: temp file + fsync + rename */
    FIO_OUT_STREAM = 1,  /* a character device, FIFO or /dev/stdout-like name: written straight to */
} fio_out_kind;

typedef struct fio_out {
    int fd;
    fio_out_kind kind;
    char path[4096];   /* where the bytes end up (a symlink's target for REPLACE) */
    char tmp[4096];    /* REPLACE: the temp file next to path */
} fio_out;

/* Decide how path would be written, without writing anything (lets long jobs fail before they
 * start). Same rule and messages as fio_out_open; *kind and, for REPLACE, the final path (a
 * symlink resolved) are returned. */
sb_status fio_out_check(const char *path, fio_out_kind *kind, char *final_path, size_t final_cap);

/* Open an output. The rule, decided from what path names now (symlinks followed):
 *   - nothing there, or a regular file: write "<final>.tmp.XXXXXX" (O_CREAT|O_EXCL, next to the
 *     final file so rename stays on one file system; an existing file's permission bits are kept),
 *     and on commit fsync it and rename it over the final path. A symlink to a regular file keeps
 *     the link: the file it points at is replaced. A dangling symlink is refused.
 *   - a character device (/dev/null, /dev/full, a tty) or a FIFO, or the names /dev/stdout,
 *     /dev/stderr, /dev/fd/N, /proc/self/fd/N: written straight to, never replaced; every write
 *     error (ENOSPC from /dev/full, EPIPE) is SB_ERR_IO. A FIFO nobody reads is refused at once
 *     (no hang).
 *   - a directory, block device or socket: refused, SB_ERR_IO "PATH: is a directory" etc.
 * The temp file is removed on every failure path (fio_out_write/commit failing, fio_out_abort). */
sb_status fio_out_open(const char *path, fio_out *o);
sb_status fio_out_write(fio_out *o, const void *p, size_t n);
/* Finish: REPLACE: fsync, close, rename (then fsync the folder, best effort); STREAM: close.
 * On failure the temp file is gone and the destination untouched. o is closed either way. */
sb_status fio_out_commit(fio_out *o);
/* Close and remove the temp file; the destination is untouched. Safe after commit. */
void fio_out_abort(fio_out *o);

/* Run fn(ctx) with a SIGBUS guard for faults in [base, base + size): such a fault (the mapped
 * file shrank) makes fio_guarded return SB_ERR_IO "PATH: file changed size while loading"
 * instead of killing the process. The handler is installed only while some thread is inside a
 * guarded call, and the process's previous handler is restored when the last one leaves; any
 * other SIGBUS meanwhile goes to that previous handler (which is reinstated first, so it may
 * longjmp or exit). After a fault fn is abandoned where it was (a longjmp): it must take no locks,
 * and keep what it allocates where the caller can free it after the failure (gguf_parse's output
 * struct). Guarded calls on different threads may overlap. */
sb_status fio_guarded(const char *path, const void *base, size_t size, sb_status (*fn)(void *), void *ctx);

#endif
