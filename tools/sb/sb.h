/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/sb.h — what the `sb` subcommands share: the command table entry type, the exit-status
 * convention and each subcommand's entry point. Uses only the public header.
 */
#ifndef SB_TOOLS_SB_H
#define SB_TOOLS_SB_H

#include "sonicboom.h"

#include <stdio.h>

typedef struct sb_command {
    const char *name;
    const char *help;
    int (*fn)(int argc, char **argv); /* argv[0] is the command name */
} sb_command;

/* Print "error: <STATUS>: <sb_last_error()>" to stderr and return exit status 1. */
int sb_cli_fail(sb_status s);

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve_exec.c: runs the program sb-serve (tools/serve/) */

/* Log lines on stderr, erasing a drawn progress bar first (progress.c); --threads parsing for
 * cmd_quantize.c and cmd_synth.c (defined in cmd_quantize.c; -1 if bad). */
void sb_cli_log(sb_log_level level, const char *msg, void *user);
int sb_cli_parse_threads(const char *s, int *out);

/* Untrusted bytes to a terminal (safe_text.c): printable UTF-8 as is; \n \t \r, other C0 and DEL as
 * \xNN, C1 / separators / bidi controls as \uNNNN, bytes that are not UTF-8 as \xNN; quoted != 0
 * also escapes '"' and '\\' (for text shown between quotes). */
void sb_put_safe(FILE *f, const char *s, size_t n, int quoted);
/* A NUL-terminated valid UTF-8 copy of n bytes (malloc; NULL when out of memory) for JSON: bytes
 * that are not UTF-8, and NUL, become U+FFFD and set *lossy. */
char *sb_utf8_clean(const char *s, size_t n, int *lossy);

#endif
