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

/* Parse argv[*i + 1] as the value of option argv[*i]; advance *i. 0 on success, else prints
 * "sb CMD: ..." and returns 2 (the usage exit status). */
int arg_i64(const char *cmd, int argc, char **argv, int *i, int64_t lo, int64_t hi, int64_t *out);
int arg_f32(const char *cmd, int argc, char **argv, int *i, float lo, float hi, float *out);
int arg_str(const char *cmd, int argc, char **argv, int *i, const char **out);

/* The embedded default model: $SB_MODEL, else the path compiled in (models/ of the source tree or
 * the install prefix), else NULL. */
const char *default_model_path(void);

/* Read a whole file (text prompts, perplexity input). NULL with errno on failure. */
char *read_text_file(const char *path, size_t *len);

/* Seconds on a monotonic clock. */
double now_seconds(void);

#endif
