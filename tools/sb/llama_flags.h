/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/llama_flags.h — llama.cpp's habits in `sb run` / `sb perplexity`: the seed (-s/--seed,
 * -1 or none = random), flags with an optional value (-fa, --color), and llama-cli's flags that
 * mean nothing here, accepted with a one-line warning so a llama.cpp command line still runs.
 * Uses only the public header and the C library.
 */
#ifndef SB_TOOLS_LLAMA_FLAGS_H
#define SB_TOOLS_LLAMA_FLAGS_H

#include <stdint.h>

/* -s / --seed N at argv[*i] (value parsed, *i advanced): decimal (no octal or hex: "010" is 10),
 * -1 or an integer in [0, 2^64 - 1]. *random = 1 for -1. 0 on success; else one usage line, 2. */
int arg_seed(const char *cmd, int argc, char **argv, int *i, uint64_t *seed, int *random);

/* A fresh random seed in [0, 2^32 - 1] (llama.cpp's seed range): /dev/urandom, else time and pid. */
uint64_t random_seed(void);

/* An option whose value is optional (llama.cpp's -fa [on|off|auto], --color [on|off|auto]): when
 * argv[*i + 1] is one of on/off/auto it is consumed; a bare flag means "on". Returns 1 on, 0 off,
 * -1 auto. */
int arg_on_off_auto(int argc, char **argv, int *i);

/* A llama-cli flag that means nothing in this command (mmap, NUMA, multi-GPU splits, extra
 * samplers ...) at argv[*i]: 1 if it is one (its value consumed, a one-line warning printed, *rc 0;
 * or *rc 2 when its value is missing), 0 if not. */
int arg_ignored(const char *cmd, int argc, char **argv, int *i, int *rc);

#endif
