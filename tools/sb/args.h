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

/* Read a whole file (text prompts, perplexity input). NULL with errno on failure. */
char *read_text_file(const char *path, size_t *len);

/* Seconds on a monotonic clock. */
double now_seconds(void);

#endif
