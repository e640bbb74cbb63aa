/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/sb/sb.h — what the `sb` subcommands share: the command table entry type, the exit-status
 * convention and each subcommand's entry point. Uses only the public header.
 */
#ifndef SB_TOOLS_SB_H
#define SB_TOOLS_SB_H

#include "sonicboom.h"

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

/* Log lines on stderr, erasing a drawn progress bar first (progress.c); --threads parsing for
 * cmd_quantize.c and cmd_synth.c (defined in cmd_quantize.c; -1 if bad). */
void sb_cli_log(sb_log_level level, const char *msg, void *user);
int sb_cli_parse_threads(const char *s, int *out);

#endif
