/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/args.h — option parsing shared by the subcommands: strict number parsing (the whole
 * argument must be a number in range, else a usage error naming the option), the default model
 * path, and loading a model + session from the common options. Uses only the public header.
 */
#ifndef SB_TOOLS_ARGS_H
#define SB_TOOLS_ARGS_H

#include "sonicboom.h"

#include <stdint.h>

/* The one usage-error path: prints one line "sb CMD: REASON (see 'sb CMD --help')" on stderr and
 * returns 2 (the usage exit status). */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The one integer parser: decimal only ("010" is ten, never octal), an optional '-', digits and
 * nothing else (no spaces, '+', hex or trailing junk), overflow-safe, within [lo, hi]. NULL and
 * *out set, or the reason ("not a decimal integer", "trailing characters after the number",
 * "out of range [lo, hi]", ...). */
const char *parse_int(const char *v, int64_t lo, int64_t hi, int64_t *out);

/* Parse argv[*i + 1] as the value of option argv[*i]; advance *i. 0 on success, else a usage
 * error naming the option, the value and the reason (returns 2). */
int arg_i64(const char *cmd, int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out);
int arg_f32(const char *cmd, int argc, char **argv, int *i, float lo, float hi, float *out);
int arg_str(const char *cmd, int argc, char **argv, int *i, const char **out);

/* --device auto|cpu|cuda and -ngl / --n-gpu-layers N (llama.cpp's: 0 the CPU, N > 0 CUDA; without a
 * usable GPU a one-line warning and the CPU, as llama.cpp does) at argv[*i]:
 * 1 if it is one of them (value parsed, *i advanced; *rc 0, or 2 after a usage error naming it), 0
 * if not. *device: an SB_DEVICE_* value (callers start from SB_DEVICE_AUTO). */
int arg_device(const char *cmd, int argc, char **argv, int *i, int *device, int *rc);
#define ARG_DEVICE_HELP "--device auto|cpu|cuda, -ngl N   where to run: auto (default) takes CUDA GPU 0 when it can run the model,\n" \
                        "                 else the CPU; -ngl 0 means cpu, N > 0 cuda (the CPU, with a warning, without a GPU)\n"

/* The embedded default model: $SB_MODEL, else the path compiled in (models/ of the source tree or
 * the install prefix), else NULL. */
const char *default_model_path(void);

/* Read a whole file into a NUL-terminated buffer, refusing at once what cannot be meant (a
 * directory: "FILE: is a directory"; a device or socket, or a FIFO unless allow_pipe) and
 * anything over max_mib MiB ("FILE: larger than the N MiB limit", found before reading a regular
 * file, after max_mib MiB of a pipe). A named FIFO that no process has open for writing is refused
 * ("FILE: a FIFO that no process writes to"), not waited on. NULL on failure, with errno and the one-line reason in
 * read_file_error() ("FILE: why", for "error: SB_ERR_IO: %s"). */
char *read_file_capped(const char *path, size_t max_mib, int allow_pipe, size_t *len);
const char *read_file_error(void);
/* Text input (prompts, perplexity and tokenize text): regular files and pipes (/dev/stdin, <(cmd))
 * up to SB_TEXT_FILE_MAX_MIB. */
#define SB_TEXT_FILE_MAX_MIB 256
char *read_text_file(const char *path, size_t *len);

/* 1 when paths a and b name the same existing file (device and inode), else 0. */
int same_file(const char *a, const char *b);

/* Seconds on a monotonic clock. */
double now_seconds(void);

#endif
