/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/text_input.h — prompt and text input for `sb run` / `sb perplexity`, as llama.cpp's
 * tools take it: -f FILE (or "-" for stdin) read whole under a size cap, and llama-cli's -e escape
 * processing of -p text. Uses only the C library.
 */
#ifndef SB_TOOLS_TEXT_INPUT_H
#define SB_TOOLS_TEXT_INPUT_H

#include <stddef.h>

/* The most bytes a prompt or text file may hold (64 MiB): more is refused, never truncated. */
#define TEXT_INPUT_CAP ((size_t)64 << 20)

/* Read all of path ("-": standard input) into a NUL-terminated buffer (free() it); *len gets the
 * byte count (NUL bytes inside are kept). More than cap bytes, a directory, or an open/read failure:
 * prints one line "error: <STATUS>: <path>: <reason>" on stderr and returns NULL. Reads at most
 * cap + 1 bytes, so an endless source (/dev/zero) fails after cap bytes. */
char *text_input_read(const char *path, size_t cap, size_t *len);

/* llama-cli's escape processing, in place: \n \r \t \a \b \f \v \\ \' \" \? and \xHH (two hex
 * digits); any other backslash sequence is kept as written. Returns the new length. */
size_t text_input_unescape(char *s, size_t len);

#endif
